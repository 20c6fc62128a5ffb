//! SIGINT and SIGTERM on the real binary while a phase waits on an API server that accepts and
//! never answers: `eas up` (preflight), `eas facts`, `eas verify`, `eas doctor` and `eas down`
//! exit 130; a phase past its (shortened) timeout exits 1 naming the phase. The 10 s bound only
//! stops a broken build from hanging the suite; nothing asserts how fast the exit is. The phases
//! that need the bastion (its build, the install, verify inside `eas up`, and `eas down`'s
//! cluster reads on a real record) are in tests/it/up_cycle.rs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: silent\nclusters:\n- name: silent\n  cluster:\n    \
             server: http://127.0.0.1:{port}\ncontexts:\n- name: silent\n  context:\n    cluster: silent\n    \
             user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    path
}

fn start(dir: &Path, port: u16, args: &[&str]) -> Child {
    let mut c: Command = eas(dir);
    c.arg("--kubeconfig")
        .arg(kubeconfig(dir, port))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Waits for the child to exit (bounded, so a regression fails instead of hanging).
fn wait(child: &mut Child) -> (Option<i32>, String) {
    exit_within(child, Duration::from_secs(10))
}

fn interrupted_while_waiting(args: &[&str], sig: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (port, accepted) = silent_server();
    let mut child = start(dir.path(), port, args);
    // The signal arrives while the call is outstanding: the server has the connection.
    accepted.recv_timeout(Duration::from_secs(10)).expect("eas connects to the API server");
    signal(child.id(), sig);
    let (code, err) = wait(&mut child);
    assert_eq!(code, Some(130), "{args:?} {sig}: {err}");
}

#[test]
fn up_preflight_against_a_silent_api_server_stops_on_sigint_and_sigterm() {
    for sig in ["-INT", "-TERM"] {
        interrupted_while_waiting(&["up", "--dry-run"], sig);
        interrupted_while_waiting(&["up", "--yes"], sig);
    }
}

#[test]
fn facts_verify_and_doctor_treat_sigterm_like_sigint() {
    for args in [&["facts"][..], &["verify"], &["doctor"]] {
        for sig in ["-INT", "-TERM"] {
            interrupted_while_waiting(args, sig);
        }
    }
}

#[test]
fn down_against_a_silent_api_server_stops_on_sigint_and_sigterm() {
    for sig in ["-INT", "-TERM"] {
        interrupted_while_waiting(&["down", "--yes"], sig);
    }
}

#[test]
fn a_phase_past_its_timeout_exits_1_and_names_the_phase() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _accepted) = silent_server();
    let mut child = start(dir.path(), port, &["up", "--dry-run", "--phase-timeout", "preflight=1"]);
    let (code, err) = wait(&mut child);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("phase preflight did not finish within its timeout of 1 s"), "{err}");
    assert!(err.contains("eas doctor"), "the next command is named: {err}");
}

#[test]
fn an_unknown_phase_timeout_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = eas(dir.path()).args(["up", "--dry-run", "--phase-timeout", "nope=1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no phase named \"nope\""), "{}", text(&out.stderr));
}

/// A kubeconfig whose user runs a credential plugin that records its pid and never returns.
fn sleeping_plugin(dir: &Path) -> (PathBuf, PathBuf) {
    let pid_file = dir.join("plugin.pid");
    let plugin = dir.join("plugin");
    std::fs::write(&plugin, format!("#!/bin/sh\necho $$ > {}\nexec sleep 300\n", pid_file.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("kubeconfig-exec");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: sso\nclusters:\n- name: sso\n  cluster:\n    \
             server: http://127.0.0.1:1\ncontexts:\n- name: sso\n  context:\n    cluster: sso\n    user: u\n\
             users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      \
             command: {}\n",
            plugin.display()
        ),
    )
    .unwrap();
    (path, pid_file)
}

fn gone(pid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            // A zombie has been killed; it waits only for its parent (now init) to reap it.
            Ok(stat) if stat.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')) => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    false
}

#[test]
fn a_sleeping_credential_plugin_is_killed_on_sigint_and_sigterm() {
    for (args, sig) in [
        (&["facts"][..], "-INT"),
        (&["facts"], "-TERM"),
        (&["up", "--dry-run"], "-INT"),
        (&["up", "--yes"], "-TERM"),
        (&["verify"], "-TERM"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (kubeconfig, pid_file) = sleeping_plugin(dir.path());
        let mut child = eas_on(&kubeconfig, dir.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = pid_in(&pid_file, &format!("{args:?}: the plugin never started"));
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        assert_eq!(code, Some(130), "{args:?} {sig}: {err}");
        assert!(gone(&pid), "{args:?} {sig}: the plugin (pid {pid}) is still running");
    }
}

#[cfg(feature = "docker-tests")]
/// `eas up --yes` on the recorded cluster, through the machine's Docker Engine (preflight needs
/// one), with the trees taken from `repos` (an empty directory fails at once, so no network).
fn up_on(dir: &Path, server: &ClusterServer, env: &[(&str, String)], repos: Option<&Path>) -> Child {
    let mut c = eas(dir);
    c.env_remove("DOCKER_HOST").envs(env.iter().map(|(k, v)| (k, v)));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.join("state"));
    c.args(["up", "--yes"]);
    if let Some(r) = repos {
        for flag in ["--eas-repo", "--ei-repo", "--eat-repo"] {
            c.arg(flag).arg(r);
        }
    }
    c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

#[cfg(feature = "docker-tests")]
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(feature = "docker-tests")]
/// The run's journal. A run interrupted before its install phase began is an attempt: its
/// journal is `state/<cluster key>/attempt/state.json`, and no `state.json` (an install's record)
/// is written.
fn state_of(dir: &Path) -> serde_json::Value {
    let key = std::fs::read_dir(dir.join("state")).unwrap().flatten().next().expect("the cluster's directory").path();
    assert!(!key.join("state.json").exists(), "an attempt wrote an install's record");
    let found = key.join("attempt/state.json");
    serde_json::from_str(&std::fs::read_to_string(&found).expect("the attempt's journal")).unwrap()
}

#[cfg(feature = "docker-tests")]
fn status_of(state: &serde_json::Value, phase: &str) -> String {
    let phases = state["phases"].as_array().unwrap();
    phases.iter().find(|p| p["phase"] == phase).unwrap()["status"].as_str().unwrap().to_string()
}

#[cfg(feature = "docker-tests")]
#[test]
fn up_interrupted_while_gathering_facts_exits_130_and_marks_the_state() {
    let _engine = support::docker::engine();
    in_each_signal(|sig, dir| {
        let empty = dir.join("no-repo");
        std::fs::create_dir_all(&empty).unwrap();
        let server = ClusterServer::start(fixture("xeon-amx"));
        // The node list, the facts phase's first read, never comes back.
        server.inject(Some("/api/v1/nodes"), Fault::Slow(Duration::from_secs(600)), None);
        let mut child = up_on(dir, &server, &[], Some(&empty));
        until("the facts phase's node list", || server.requests().iter().any(|r| r.path == "/api/v1/nodes"));
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        assert_eq!(code, Some(130), "{sig}: {err}");
        let state = state_of(dir);
        assert_eq!(status_of(&state, "facts"), "interrupted", "{sig}: {state}");
        assert_eq!(status_of(&state, "preflight"), "done", "{sig}: {state}");
        assert_eq!(state["exit_code"], 130);
    });
}

#[cfg(feature = "docker-tests")]
#[test]
fn up_interrupted_while_fetching_the_trees_leaves_no_git_running() {
    let _engine = support::docker::engine();
    in_each_signal(|sig, dir| {
        let server = ClusterServer::start(fixture("xeon-amx"));
        // git fetches the pinned trees through a proxy that accepts and never answers; the API
        // server is reached directly.
        let (port, accepted) = silent_server();
        let proxy = format!("http://127.0.0.1:{port}");
        let env =
            [("HTTPS_PROXY", proxy.clone()), ("https_proxy", proxy), ("NO_PROXY", "127.0.0.1,localhost".to_string())];
        let mut child = up_on(dir, &server, &env, None);
        accepted.recv_timeout(Duration::from_secs(60)).expect("git connects to the proxy");
        let needle = dir.display().to_string();
        assert!(
            processes_naming(&needle).iter().any(|p| p.contains("git")),
            "git is cloning: {:?}",
            processes_naming(&needle)
        );
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        assert_eq!(code, Some(130), "{sig}: {err}");
        let left = processes_naming(&needle);
        assert!(left.is_empty(), "{sig}: left running: {left:?}");
        let state = state_of(dir);
        assert_eq!(status_of(&state, "trees"), "interrupted", "{sig}: {state}");
    });
}

// Issue 23: every wait is cancellable.

/// `test` once with SIGINT and once with SIGTERM (`-INT`, `-TERM`), each in a temporary directory
/// of its own.
fn in_each_signal(test: impl Fn(&str, &Path)) {
    for sig in ["-INT", "-TERM"] {
        let dir = tempfile::tempdir().unwrap();
        test(sig, dir.path());
    }
}

#[test]
fn status_against_a_silent_api_server_stops_on_sigint_and_sigterm_within_a_second() {
    in_each_signal(|sig, dir| {
        let (port, accepted) = silent_server();
        let mut child = start(dir, port, &["status"]);
        accepted.recv_timeout(Duration::from_secs(10)).expect("eas connects to the API server");
        let sent = Instant::now();
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        assert_eq!(code, Some(130), "{sig}: {err}");
        assert!(sent.elapsed() < Duration::from_secs(1), "{sig}: {:?}", sent.elapsed());
    });
}

/// A plugin that starts a child of its own (its pid in `plugin.child`), then hangs.
fn forking_plugin(dir: &Path) -> (PathBuf, PathBuf) {
    let (kubeconfig, pid_file) = sleeping_plugin(dir);
    let child_file = dir.join("plugin.child");
    let plugin = dir.join("plugin");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! > {}\necho $$ > {}\nexec sleep 300\n",
            child_file.display(),
            pid_file.display()
        ),
    )
    .unwrap();
    (kubeconfig, child_file)
}

#[test]
fn a_credential_plugins_children_are_killed_with_it_on_signal_and_timeout() {
    // The timeout case (60 s here) is the unit test kubeconfig::the_plugins_children_die_with_it….
    for (args, sig) in [(&["facts"][..], "-INT"), (&["status"], "-TERM"), (&["up", "--dry-run"], "-TERM")] {
        let dir = tempfile::tempdir().unwrap();
        let (kubeconfig, child_file) = forking_plugin(dir.path());
        let mut cmd = eas(dir.path());
        cmd.arg("--kubeconfig").arg(&kubeconfig).arg("--state-dir").arg(dir.path().join("state")).args(args);
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let pid = pid_in(&child_file, &format!("{args:?}: the plugin never started"));
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        assert_eq!(code, Some(130), "{args:?} {sig}: {err}");
        assert!(gone(&pid), "{args:?} {sig}: the plugin's child (pid {pid}) is still running");
    }
}

#[test]
fn config_reading_a_fifo_whose_writer_hangs_ends_on_sigint_or_sigterm_within_a_second() {
    for (flag, sig) in [("--facts", "-INT"), ("--pins", "-TERM"), ("--fit", "-INT")] {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("input");
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let mut writer = Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3>{}; echo '{{' >&3; sleep 60", fifo.display()))
            .spawn()
            .unwrap();
        let facts = root().join("fixtures/config/desktop-i9/facts.json");
        let out = dir.path().join("out");
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["config".as_ref(), "--out".as_ref(), out.as_os_str(), flag.as_ref(), fifo.as_os_str()];
        if flag != "--facts" {
            args.extend(["--facts".as_ref(), facts.as_os_str()]);
        }
        let mut child = eas(dir.path()).args(&args).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let sent = Instant::now();
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        let took = sent.elapsed();
        writer.kill().unwrap();
        writer.wait().unwrap();
        assert_eq!(code, Some(130), "{flag} {sig}: {err}");
        assert!(took < Duration::from_secs(1), "{flag} {sig}: {took:?}");
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(), "nothing written");
    }
}

/// The computation itself (parsing a large facts document and deciding from it takes seconds in
/// a debug build) ends on SIGINT and SIGTERM with 130 within a second, and writes nothing; it
/// used to be killed by the signal.
#[test]
fn config_signalled_while_deciding_exits_130_within_a_second_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let one: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("fixtures/config/desktop-i9/facts.json")).unwrap())
            .unwrap();
    let mut big = one.clone();
    big["nodes"] = (0..40_000)
        .map(|i| {
            let mut n = one["nodes"][0].clone();
            n["name"] = format!("n{i}").into();
            n
        })
        .collect();
    let facts = dir.path().join("facts.json");
    std::fs::write(&facts, serde_json::to_vec(&big).unwrap()).unwrap();
    for sig in ["-INT", "-TERM"] {
        let out = dir.path().join(format!("out{sig}"));
        let mut child = eas(dir.path())
            .arg("config")
            .arg("--facts")
            .arg(&facts)
            .arg("--out")
            .arg(&out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Started, and well inside the seconds the parse and the decisions take.
        std::thread::sleep(Duration::from_millis(1500));
        let sent = Instant::now();
        signal(child.id(), sig);
        let (code, err) = wait(&mut child);
        let took = sent.elapsed();
        assert_eq!(code, Some(130), "{sig}: {err}");
        assert!(took < Duration::from_secs(1), "{sig}: {took:?}");
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(), "{sig}: nothing written");
    }
}

/// The pid a plugin wrote to `file` once it started (waiting up to 10 s; `never` says why not).
fn pid_in(file: &Path, never: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(p) = std::fs::read_to_string(file)
            && !p.trim().is_empty()
        {
            return p.trim().to_string();
        }
        assert!(Instant::now() < deadline, "{never}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
