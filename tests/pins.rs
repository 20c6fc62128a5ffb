//! `eas pins check` and `eas pins lock`, the latter against local git repositories.

use std::fs;
use std::path::Path;
use std::process::Command;

mod support;

use support::git;

/// `eas ARGS` through the harness (no EAS_PINS, no user pins file) in a directory of its own.
fn eas(args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    support::eas(dir.path()).args(args).output().unwrap()
}

/// A repository at `base/owner/name` with one commit on `branch`; returns the full SHA.
fn repo(base: &Path, owner_name: &str, branch: &str) -> String {
    let dir = base.join(owner_name);
    fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", branch]);
    fs::write(dir.join("README"), owner_name).unwrap();
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-qm", "init"]);
    git(&dir, &["rev-parse", "HEAD"])
}

fn pins_file(dir: &Path, rows: &[(&str, &str, &str)]) -> std::path::PathBuf {
    let pins: Vec<serde_json::Value> = rows
        .iter()
        .map(|(repo, r, sha)| {
            serde_json::json!({"profile": "main", "name": repo.split('/').nth(1).unwrap(), "repo": repo, "ref": r,
                               "sha": sha, "locked": false, "date": "2026-10-29", "source": "test"})
        })
        .collect();
    let path = dir.join("pins.json");
    fs::write(
        &path,
        serde_json::to_string_pretty(&serde_json::json!({"schema": "eas-pins/v1", "pins": pins})).unwrap(),
    )
    .unwrap();
    path
}

#[test]
fn check_reports_the_embedded_unlocked_rows_and_missing_checksums() {
    let out = eas(&["pins", "check"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for row in ["main/eas", "main/ei", "main/eat", "v1.2.0-rc.1/eas"] {
        assert!(
            text.lines().any(|l| l.starts_with("WARN") && l.contains(row) && l.contains("unlocked")),
            "{row}: {text}"
        );
    }
    for art in ["bastion/kubectl", "bastion/helm", "bastion/yq", "bastion/base-image"] {
        assert!(
            text.lines().any(|l| l.starts_with("WARN") && l.contains(art) && l.contains("no sha256")),
            "{art}: {text}"
        );
    }
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("bastion/python:ansible") && l.contains("sha256")));
}

/// `eas pins lock` with its mirror cache in `cache` (`$XDG_CACHE_HOME/eas/repos`, as `eas up`).
fn lock(pins: &Path, base: &Path, cache: &Path) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    support::eas(dir.path())
        .args(["pins", "lock", "--pins", pins.to_str().unwrap(), "--git-base", base.to_str().unwrap()])
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap()
}

fn commit(dir: &Path, file: &str) -> String {
    fs::write(dir.join(file), file).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", file]);
    git(dir, &["rev-parse", "HEAD"])
}

#[test]
fn lock_resolves_abbreviated_shas_in_the_history_even_after_the_ref_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("remotes");
    let cache = tmp.path().join("cache");
    let a = repo(&base, "intel/alpha", "main");
    // main moves two commits past the pin.
    let alpha = base.join("intel/alpha");
    commit(&alpha, "second");
    let tip = commit(&alpha, "third");
    let b = repo(&base, "intel/beta", "release-1.1");
    let pins = pins_file(tmp.path(), &[("intel/alpha", "main", &a[..7]), ("intel/beta", "release-1.1", &b[..9])]);
    let out = lock(&pins, &base, &cache);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written: serde_json::Value = serde_json::from_str(&fs::read_to_string(&pins).unwrap()).unwrap();
    assert_eq!(written["pins"][0]["sha"], a.as_str(), "the old commit, not the tip {tip}");
    assert_eq!(written["pins"][0]["locked"], true);
    assert_eq!(written["pins"][1]["sha"], b.as_str());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 commits ahead") && err.contains(&tip), "{err}");
    // Resolved in the cache `eas up` fetches into.
    assert!(cache.join("eas/repos/intel/alpha.git/HEAD").exists());
    // A second lock is a no-op.
    let before = fs::read_to_string(&pins).unwrap();
    let out = lock(&pins, &base, &cache);
    assert!(out.status.success());
    assert_eq!(before, fs::read_to_string(&pins).unwrap());
}

/// Two root commits whose SHA-1s share the prefix `530dae7` (found by searching commit messages;
/// fixed author, committer and dates make the objects the same on every machine).
fn ambiguous_commits(dir: &Path) -> [String; 2] {
    let make = |n: u32| {
        let out = Command::new("git")
            .args(["commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", &format!("ambiguous {n}")])
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_AUTHOR_DATE", "1700000000 +0000")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_DATE", "1700000000 +0000")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    [make(5765), make(24017)]
}

#[test]
fn lock_refuses_an_ambiguous_prefix_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("remotes");
    repo(&base, "intel/alpha", "main");
    let alpha = base.join("intel/alpha");
    let [x, y] = ambiguous_commits(&alpha);
    assert_eq!(x[..7], y[..7], "the two commits share a 7-digit prefix");
    assert_ne!(x, y);
    // Both reachable, so a mirror holds both.
    git(&alpha, &["update-ref", "refs/heads/x", &x]);
    git(&alpha, &["update-ref", "refs/heads/y", &y]);
    let pins = pins_file(tmp.path(), &[("intel/alpha", "x", &x[..7])]);
    let before = fs::read_to_string(&pins).unwrap();
    let out = lock(&pins, &base, &tmp.path().join("cache"));
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ambiguous") && err.contains(&x) && err.contains(&y), "{err}");
    assert!(err.lines().any(|l| l.starts_with("hint: ")), "{err}");
    assert_eq!(before, fs::read_to_string(&pins).unwrap(), "nothing written");
    // One more digit tells them apart, and the commit is the tip of x.
    let longer = if x.as_bytes()[7] != y.as_bytes()[7] { 8 } else { 9 };
    let pins = pins_file(tmp.path(), &[("intel/alpha", "x", &x[..longer])]);
    let out = lock(&pins, &base, &tmp.path().join("cache"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn lock_refuses_a_commit_not_on_the_ref_and_names_the_force_push() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("remotes");
    let cache = tmp.path().join("cache");
    let b = repo(&base, "intel/beta", "main");
    let a = repo(&base, "intel/alpha", "main");
    let alpha = base.join("intel/alpha");
    let pinned = commit(&alpha, "pinned");
    // The cache already holds alpha with the pinned commit on main, as after an earlier `eas up`.
    let out = Command::new("git")
        .args(["clone", "--mirror", "--quiet", alpha.to_str().unwrap()])
        .arg(cache.join("eas/repos/intel/alpha.git"))
        .output()
        .unwrap();
    assert!(out.status.success());
    // main is force-pushed back to the first commit plus another: the pinned commit is no
    // longer an ancestor of main, though the mirror still holds it.
    git(&alpha, &["reset", "-q", "--hard", &a]);
    let other = commit(&alpha, "rewritten");
    let pins = pins_file(tmp.path(), &[("intel/beta", "main", &b[..7]), ("intel/alpha", "main", &pinned[..7])]);
    let before = fs::read_to_string(&pins).unwrap();
    let out = lock(&pins, &base, &cache);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| l.contains("main/alpha")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.starts_with("REFUSE: "), "{err}");
    assert!(
        line.contains("not an ancestor of main") && line.contains(&other) && line.contains("force-pushed"),
        "{err}"
    );
    assert_eq!(before, fs::read_to_string(&pins).unwrap(), "nothing written when a row fails");

    // Without the old mirror the commit is gone from the repository entirely.
    fs::remove_dir_all(&cache).unwrap();
    git(&alpha, &["reflog", "expire", "--expire=now", "--all"]);
    git(&alpha, &["gc", "-q", "--prune=now"]);
    let out = lock(&pins, &base, &cache);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no commit starting with") && err.contains("gone"), "{err}");
}

#[test]
fn malformed_pins_are_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("pins.json");
    fs::write(&p, r#"{"schema":"eas-pins/v2","pins":[]}"#).unwrap();
    let out = eas(&["pins", "check", "--pins", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().any(|l| l.starts_with("error: ") && l.contains("schema")), "{err}");
    assert!(err.lines().any(|l| l.starts_with("hint: ")), "{err}");
}

/// SIGINT while `pins lock` fetches from a remote that accepts and never answers: exit 130, and
/// no git is left running (git runs in its own process group, so the terminal's SIGINT does not
/// reach it: eas must end it).
#[test]
fn sigint_during_a_fetch_exits_130_and_leaves_no_git_running() {
    let dir = tempfile::tempdir().unwrap();
    let (port, accepted) = support::silent_server();
    let pins = pins_file(dir.path(), &[("owner/name", "main", "abc1234")]);
    let mut child = support::eas(dir.path())
        .args(["pins", "lock", "--pins", pins.to_str().unwrap(), "--git-base", &format!("http://127.0.0.1:{port}")])
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    accepted.recv_timeout(std::time::Duration::from_secs(20)).expect("git connects to the remote");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let (code, err) = support::exit_within(&mut child, std::time::Duration::from_secs(10));
    assert_eq!(code, Some(130), "{err}");
    let needle = dir.path().display().to_string();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !support::processes_naming(&needle).is_empty() && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(support::processes_naming(&needle), Vec::<String>::new(), "left running");
}
