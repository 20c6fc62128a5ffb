//! `eas pins check` and `eas pins lock`, the latter against local git repositories.

use std::fs;
use std::path::Path;
use std::process::Command;

mod support;

use support::git;

fn eas(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_eas")).args(args).env("NO_COLOR", "1").output().unwrap()
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

#[test]
fn lock_resolves_abbreviated_shas_from_ls_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("remotes");
    let a = repo(&base, "intel/alpha", "main");
    let b = repo(&base, "intel/beta", "release-1.1");
    let pins = pins_file(tmp.path(), &[("intel/alpha", "main", &a[..7]), ("intel/beta", "release-1.1", &b[..9])]);
    let out = eas(&["pins", "lock", "--pins", pins.to_str().unwrap(), "--git-base", base.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written: serde_json::Value = serde_json::from_str(&fs::read_to_string(&pins).unwrap()).unwrap();
    assert_eq!(written["pins"][0]["sha"], a.as_str());
    assert_eq!(written["pins"][0]["locked"], true);
    assert_eq!(written["pins"][1]["sha"], b.as_str());
    // A second lock is a no-op.
    let before = fs::read_to_string(&pins).unwrap();
    let out = eas(&["pins", "lock", "--pins", pins.to_str().unwrap(), "--git-base", base.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(before, fs::read_to_string(&pins).unwrap());
}

#[test]
fn lock_refuses_a_ref_that_moved_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("remotes");
    let a = repo(&base, "intel/alpha", "main");
    let dir = base.join("intel/alpha");
    fs::write(dir.join("more"), "x").unwrap();
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-qm", "moved"]);
    let b = repo(&base, "intel/beta", "main");
    let pins = pins_file(tmp.path(), &[("intel/beta", "main", &b[..7]), ("intel/alpha", "main", &a[..7])]);
    let before = fs::read_to_string(&pins).unwrap();
    let out = eas(&["pins", "lock", "--pins", pins.to_str().unwrap(), "--git-base", base.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("main/alpha") && err.contains("does not start with"), "{err}");
    assert_eq!(before, fs::read_to_string(&pins).unwrap(), "nothing written when a row fails");
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
