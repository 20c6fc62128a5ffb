//! A state directory that cannot take the run's writes (issue 32, item 5): on a read-only file
//! system, or short of the free-space minimum, it is a blocker of the lock's plan half naming
//! the path, in the dry run and the real run alike (exit 1, before the first write), and a FAIL
//! of doctor's disk line and lock gate. The read-only case is a real read-only tmpfs mount (the
//! tests run as root); the minimum is raised through its environment setting instead of filling
//! a disk.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::planning::{command, trees};
use support::{ClusterServer, exited, text};

const CLUSTER: &str = "k3d-gpu-desktop";

/// A read-only tmpfs mounted at its path, unmounted when dropped.
struct ReadOnlyMount(PathBuf);

impl ReadOnlyMount {
    fn at(dir: &Path) -> ReadOnlyMount {
        let uid = Command::new("id").arg("-u").output().unwrap();
        assert_eq!(text(&uid.stdout).trim(), "0", "mounting a read-only file system needs root");
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"]).arg(dir).output().unwrap();
        assert!(out.status.success(), "mount: {}", text(&out.stderr));
        ReadOnlyMount(dir.to_path_buf())
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `eas doctor --offline` on the recorded cluster with its state under `state`, `min` as the
/// free-space minimum when given.
fn doctor(server: &ClusterServer, state: &Path, min: Option<&str>) -> Output {
    let mut c = support::eas(&support::fixture(CLUSTER));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state);
    c.args(["doctor", "--offline"]).args(support::facts_args(CLUSTER));
    if let Some(m) = min {
        c.env("EAS_STATE_MIN_FREE", m);
    }
    c.output().unwrap()
}

/// The dry run's blockers of the lock phase (the plan as JSON).
fn lock_blockers(out: &Output) -> Vec<Value> {
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let all = plan["blockers"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    all.iter().filter(|b| b["phase"] == "lock").cloned().collect()
}

/// Doctor's line `FAIL <name>: ...`.
fn fail_line(out: &Output, name: &str) -> String {
    let table = text(&out.stdout);
    let line = table.lines().find(|l| l.starts_with(&format!("FAIL {name}: ")));
    line.unwrap_or_else(|| panic!("no FAIL {name} line: {table}\n{}", text(&out.stderr))).to_string()
}

#[test]
fn a_read_only_state_directory_is_a_blocker_naming_it_in_the_plan_the_run_and_doctor() {
    let base = tempfile::tempdir().unwrap();
    let state = base.path().join("ro");
    let _mount = ReadOnlyMount::at(&state);
    let (server, t) = (ClusterServer::start(support::fixture(CLUSTER)), trees());
    let dry = command(&server, CLUSTER, &state, &t, true, &["--dry-run", "--output", "json"]).output().unwrap();
    let lock = lock_blockers(&dry);
    assert_eq!(lock.len(), 1, "one lock blocker: {lock:?}");
    let cause = lock[0]["cause"].as_str().unwrap();
    let at = state.display().to_string();
    assert!(cause.starts_with(&format!("the state directory {at}/")), "names the path: {cause}");
    assert!(cause.ends_with(&format!("(to be made in {at}) is on a read-only file system")), "{cause}");
    assert_eq!(lock[0]["exit_code"], 1, "the real run would fail: {lock:?}");
    let fix = lock[0]["fix"].as_str().unwrap();
    assert!(fix.starts_with("pass --state-dir DIR on a writable file system"), "{fix}");
    let failing = command(&server, CLUSTER, &state, &t, true, &["--dry-run", "--fail-on-blockers"]).output().unwrap();
    assert_eq!(failing.status.code(), Some(1), "{}", text(&failing.stderr));

    // The real run stops on the same blocker, with its path and its next: line, before the
    // first write (none reached the cluster, none the file system).
    let real = command(&server, CLUSTER, &state, &t, true, &["--yes"]).output().unwrap();
    let err = exited(&real, 1);
    assert!(err.contains(&format!("error: lock: {cause}")) && err.contains(&format!("next: {fix}")), "{err}");
    assert!(!err.contains("os error 30"), "no write was tried: {err}");
    assert_eq!(support::writes(&server), Vec::<String>::new());

    // Doctor: its disk line judges the state directory itself, the lock gate says the plan's
    // blocker.
    let out = doctor(&server, &state, None);
    assert_eq!(out.status.code(), Some(1));
    let disk = fail_line(&out, "disk");
    assert!(disk.starts_with(&format!("FAIL disk: the state directory {at} is on a read-only file system")), "{disk}");
    assert!(fail_line(&out, "lock").contains(cause), "the plan's blocker as the lock gate");
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0, "nothing written on the mount");
}

#[test]
fn a_state_directory_short_of_the_minimum_is_the_same_blocker_and_nothing_is_made() {
    let base = tempfile::tempdir().unwrap();
    let state = base.path().join("state");
    let (server, t) = (ClusterServer::start(support::fixture(CLUSTER)), trees());
    // A minimum no disk here has: the free-space gate's blocker.
    let huge = (1u64 << 60).to_string();
    let run = |extra: &[&str]| {
        let mut c = command(&server, CLUSTER, &state, &t, true, extra);
        c.env("EAS_STATE_MIN_FREE", &huge).output().unwrap()
    };
    let lock = lock_blockers(&run(&["--dry-run", "--output", "json"]));
    assert_eq!(lock.len(), 1, "{lock:?}");
    let cause = lock[0]["cause"].as_str().unwrap();
    let at = base.path().display().to_string();
    assert!(cause.contains(&format!("GiB free at {at}, less than the {} GiB a run needs", 1u64 << 30)), "{cause}");
    assert!(lock[0]["fix"].as_str().unwrap().starts_with(&format!("free space on the disk holding {at}")));
    let real = run(&["--yes"]);
    assert_eq!(real.status.code(), Some(1), "{}", text(&real.stderr));
    assert!(text(&real.stderr).contains(&format!("error: lock: {cause}")), "{}", text(&real.stderr));
    assert!(!state.exists(), "the run stopped before its first write: no state directory made");
    let disk = fail_line(&doctor(&server, &state, Some(&huge)), "disk");
    assert!(disk.contains(&format!("the state directory {} (to be made in {at}) has ", state.display())), "{disk}");
    // With the minimum this disk has, the same state directory passes both.
    let out = doctor(&server, &state, None);
    let table = text(&out.stdout);
    assert!(table.lines().any(|l| l.starts_with("ok   disk: ") && l.ends_with(", writable")), "{table}");
    assert!(!table.contains("FAIL lock"), "{table}");
}
