//! `eas pins check` and `eas pins lock`, the latter against local git repositories.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support;

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

/// A scratch directory, with where the test's upstream repositories go (`remotes`, the
/// `--git-base`) and the mirror cache (`cache`, `XDG_CACHE_HOME`) inside it.
fn scratch() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cache) = (tmp.path().join("remotes"), tmp.path().join("cache"));
    (tmp, base, cache)
}

fn commit(dir: &Path, file: &str) -> String {
    fs::write(dir.join(file), file).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", file]);
    git(dir, &["rev-parse", "HEAD"])
}

#[test]
fn lock_resolves_abbreviated_shas_in_the_history_even_after_the_ref_moved() {
    let (tmp, base, cache) = scratch();
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
    let (tmp, base, cache) = scratch();
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
    let out = lock(&pins, &base, &cache);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ambiguous") && err.contains(&x) && err.contains(&y), "{err}");
    assert!(err.lines().any(|l| l.starts_with("hint: ")), "{err}");
    assert_eq!(before, fs::read_to_string(&pins).unwrap(), "nothing written");
    // One more digit tells them apart, and the commit is the tip of x.
    let longer = if x.as_bytes()[7] != y.as_bytes()[7] { 8 } else { 9 };
    let pins = pins_file(tmp.path(), &[("intel/alpha", "x", &x[..longer])]);
    let out = lock(&pins, &base, &cache);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn lock_refuses_a_commit_not_on_the_ref_and_names_the_force_push() {
    let (tmp, base, cache) = scratch();
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
    support::signal(child.id(), "-INT");
    let (code, err) = support::exit_within(&mut child, std::time::Duration::from_secs(10));
    assert_eq!(code, Some(130), "{err}");
    let needle = dir.path().display().to_string();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !support::processes_naming(&needle).is_empty() && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(support::processes_naming(&needle), Vec::<String>::new(), "left running");
}

/// `eas pins show --output json` in `dir` with the user's config directory `config` and `extra`.
fn show_json(dir: &Path, config: &Path, env_pins: Option<&Path>, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut c = support::eas(dir);
    c.env("XDG_CONFIG_HOME", config).args(["pins", "show", "--output", "json"]).args(extra);
    if let Some(p) = env_pins {
        c.env("EAS_PINS", p);
    }
    let out = c.output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("pins show: not one JSON document: {e}\n{}", String::from_utf8_lossy(&out.stdout)));
    let errors = support::schema_errors("eas-pins.v1", &doc);
    assert!(errors.is_empty(), "pins show vs eas-pins/v1: {errors:?}");
    (out.status.code().unwrap(), doc)
}

/// The repository's pins.json with one row's `date` changed to `marker`, so each file is known.
fn marked_pins(path: &Path, marker: &str) {
    let mut doc: serde_json::Value = serde_json::from_str(pins_embedded()).unwrap();
    doc["pins"][0]["date"] = serde_json::json!(marker);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

fn pins_embedded() -> &'static str {
    include_str!("../../pins.json")
}

#[test]
fn every_source_is_taken_in_order_flag_then_eas_pins_then_the_user_file_then_the_built_in_pins() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let embedded: serde_json::Value = serde_json::from_str(pins_embedded()).unwrap();

    let (code, doc) = show_json(dir.path(), &config, None, &[]);
    assert_eq!((code, &doc["pins_origin"], &doc["pins_source"]), (0, &"builtin".into(), &"built-in".into()));
    // The rows as built in (a `url: null` is left out when printed: absent and null mean the same).
    let key = |r: &serde_json::Value| (r["profile"].clone(), r["name"].clone(), r["sha"].clone(), r["sha256"].clone());
    let rows = |d: &serde_json::Value| d["pins"].as_array().unwrap().iter().map(key).collect::<Vec<_>>();
    assert_eq!(rows(&doc), rows(&embedded));
    assert_eq!(doc["exit_code"], 0);

    let user = config.join("eas/pins.json");
    marked_pins(&user, "user");
    let (_, doc) = show_json(dir.path(), &config, None, &[]);
    assert_eq!(doc["pins_origin"], "user");
    assert_eq!(doc["pins_source"], user.display().to_string());
    assert_eq!(doc["pins"][0]["date"], "user");

    let env_file = dir.path().join("env-pins.json");
    marked_pins(&env_file, "env");
    let (_, doc) = show_json(dir.path(), &config, Some(&env_file), &[]);
    assert_eq!((&doc["pins_origin"], &doc["pins"][0]["date"]), (&"env".into(), &"env".into()));

    // A relative --pins is named by its absolute path.
    marked_pins(&dir.path().join("flag.json"), "flag");
    let (_, doc) = show_json(dir.path(), &config, Some(&env_file), &["--pins", "flag.json"]);
    assert_eq!((&doc["pins_origin"], &doc["pins"][0]["date"]), (&"flag".into(), &"flag".into()));
    assert_eq!(doc["pins_source"], dir.path().join("flag.json").display().to_string());

    // The document is a pins file: saved, it can be passed back as --pins.
    let saved = dir.path().join("saved.json");
    fs::write(&saved, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = support::eas(dir.path()).args(["pins", "check", "--pins"]).arg(&saved).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The text names the file and why it was chosen.
    let out = support::eas(dir.path()).env("XDG_CONFIG_HOME", &config).args(["pins", "show"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().next().unwrap(), format!("pins: {} (the user's pins file)", user.display()));
    assert!(text.lines().any(|l| l.starts_with("main/ei ") && l.ends_with("UNLOCKED")), "{text}");
}

#[test]
fn pins_show_of_a_malformed_file_is_still_one_document_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    fs::write(&bad, "{not json").unwrap();
    let (code, doc) = show_json(dir.path(), &dir.path().join("config"), None, &["--pins", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["pins"], serde_json::json!([]));
    let error = doc["error"].as_str().unwrap();
    assert!(error.contains(&bad.display().to_string()) && error.contains("not JSON"), "{error}");
}

#[test]
fn locking_the_built_in_pins_writes_no_user_file_when_a_row_cannot_lock() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let empty = dir.path().join("no-repos");
    fs::create_dir_all(&empty).unwrap();
    let out = support::eas(dir.path())
        .env("XDG_CONFIG_HOME", &config)
        .args(["pins", "lock", "--git-base", empty.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the pins built into eas"), "says what it locks: {err}");
    assert!(!config.join("eas/pins.json").exists(), "a failed lock wrote the user's pins file");
    // Each repository is fetched and named once, on a line of its own, with the rows of every
    // profile that pin it; the error line counts them.
    for name in ["enterprise-ai-solutions", "enterprise-inference", "agent-toolkit"] {
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(&format!("/intel/{name}: "))).collect();
        assert_eq!(lines.len(), 1, "{name}: {err}");
        let pinned_by = lines[0].trim_start().split(": fetching").next().unwrap();
        assert_eq!(pinned_by.split(", ").count(), 2, "both profiles' rows: {}", lines[0]);
    }
    assert!(err.contains("error: pins lock: 3 repositories could not be fetched (above)"), "{err}");
}

/// The synthetic EAS, EI and EAT trees as repositories at `base/<owner>/<name>` (where
/// `--git-base base` finds the pins' repositories), on the refs the `main` profile pins; a user
/// pins file of the `main` and bastion rows with each tree pinned by a 7-digit abbreviation.
fn user_pins_abbreviated(base: &Path, user: &Path) -> Vec<(String, String)> {
    let mut doc: serde_json::Value = serde_json::from_str(pins_embedded()).unwrap();
    doc["pins"].as_array_mut().unwrap().retain(|r| r["profile"] == "main" || r["profile"] == "bastion");
    let mut shas = Vec::new();
    for row in doc["pins"].as_array_mut().unwrap().iter_mut().filter(|r| r["profile"] == "main") {
        let (name, repo) = (row["name"].as_str().unwrap().to_string(), row["repo"].as_str().unwrap().to_string());
        let dir = base.join(&repo);
        let sha = support::trees::synthetic_repo(&name, &dir);
        let git_ref = row["ref"].as_str().unwrap();
        if git_ref != "main" {
            git(&dir, &["branch", git_ref]);
        }
        row["sha"] = serde_json::json!(&sha[..7]);
        row["locked"] = serde_json::json!(false);
        shas.push((name, sha));
    }
    fs::create_dir_all(user.parent().unwrap()).unwrap();
    fs::write(user, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    shas
}

/// The README's journey without `--pins`: a dry run warns that the user's pins are abbreviated,
/// naming the file; `eas pins lock` locks that file in place; the next dry run reads it, locked.
#[test]
fn lock_then_a_dry_run_without_pins_reads_the_locked_user_file() {
    let cluster = "k3d-gpu-desktop";
    let server = support::ClusterServer::start(support::fixture(cluster));
    let dir = tempfile::tempdir().unwrap();
    let (base, config) = (dir.path().join("git"), dir.path().join("config"));
    let user = config.join("eas/pins.json");
    let shas = user_pins_abbreviated(&base, &user);
    let repo = |name: &str| {
        base.join(match name {
            "eas" => "intel/enterprise-ai-solutions",
            "ei" => "intel/enterprise-inference",
            _ => "intel/agent-toolkit",
        })
    };
    let dry_run = |out: &Path| {
        let mut c = support::eas(&support::fixture(cluster));
        c.env("XDG_CONFIG_HOME", &config)
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env("TMPDIR", dir.path())
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(["up", "--dry-run", "--out"])
            .arg(out)
            .args(support::facts_args(cluster));
        for (n, _) in &shas {
            c.arg(format!("--{n}-repo")).arg(repo(n));
        }
        c.output().unwrap()
    };
    let named = format!("{} (the user's pins file)", user.display());

    let before = dry_run(&dir.path().join("plan-before"));
    let err = String::from_utf8_lossy(&before.stderr);
    assert!(before.status.success(), "{err}");
    let (eas_sha, ei_sha) = (&shas[0].1, &shas[1].1);
    assert!(err.contains(&format!("pin main/ei is abbreviated ({}) in {named}", &ei_sha[..7])), "{err}");
    let plan = String::from_utf8_lossy(&before.stdout);
    assert!(plan.lines().any(|l| l.trim_start() == format!("pins       {}", user.display())), "{plan}");
    // The manifest carries the full SHA resolved in the mirror, not the abbreviation.
    let manifest = fs::read_to_string(dir.path().join("plan-before/repos.agent-toolkit.yaml")).unwrap();
    assert!(manifest.contains(&format!("rev: \"{ei_sha}\"")), "{manifest}");
    assert!(!manifest.contains(&format!("rev: \"{}\"", &eas_sha[..7])), "{manifest}");
    let plan_json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("plan-before/plan.json")).unwrap()).unwrap();
    assert_eq!(plan_json["pins_source"], user.display().to_string());

    let lock = support::eas(dir.path())
        .env("XDG_CONFIG_HOME", &config)
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .args(["pins", "lock", "--git-base", base.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(lock.status.success(), "{}", String::from_utf8_lossy(&lock.stderr));
    let locked: serde_json::Value = serde_json::from_str(&fs::read_to_string(&user).unwrap()).unwrap();
    for (name, sha) in &shas {
        let row = locked["pins"].as_array().unwrap().iter().find(|r| r["profile"] == "main" && r["name"] == *name);
        assert_eq!(row.unwrap()["sha"], *sha, "{name}");
    }

    let after = dry_run(&dir.path().join("plan-after"));
    let err = String::from_utf8_lossy(&after.stderr);
    assert!(after.status.success(), "{err}");
    assert!(!err.contains("abbreviated"), "{err}");
    let plan = String::from_utf8_lossy(&after.stdout);
    assert!(plan.lines().any(|l| l.trim_start() == format!("pins       {}", user.display())), "{plan}");
}

/// Issue 30 item 7: `pins show` cut a non-ASCII ref by bytes (a panic, exit 101) and padded a
/// 65,536-character name with a format width past its range (another panic). Now the ref is cut
/// by characters and shown, and a name no line can hold is refused by `pins check` and by
/// `pins show` alike (exit 2, naming the field), never a panic.
#[test]
fn pins_show_prints_a_non_ascii_ref_and_check_refuses_a_name_show_cannot_print() {
    let dir = tempfile::tempdir().unwrap();
    // 39 ASCII bytes then a two-byte character: byte 39 is inside it.
    let non_ascii = format!("{}ééééé-release", "r".repeat(38));
    let path = pins_file(dir.path(), &[("o/eas", &non_ascii, "abcdef1")]);
    let out = eas(&["pins", "show", "--pins", path.to_str().unwrap()]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let row = stdout.lines().find(|l| l.starts_with("main/eas")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains(&format!("{}éé…", "r".repeat(38))) && row.contains("UNLOCKED"), "{row}");

    for (field, value) in [("name", "n".repeat(65_536)), ("profile", "p".repeat(65_536))] {
        let mut doc: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        doc["pins"][0][field] = value.into();
        let hostile = dir.path().join(format!("hostile-{field}.json"));
        fs::write(&hostile, doc.to_string()).unwrap();
        for command in ["check", "show"] {
            let out = eas(&["pins", command, "--pins", hostile.to_str().unwrap()]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} {field}: {stderr}");
            assert!(
                stderr.contains(&format!("{field} is 65536 characters")) && !stderr.contains("panicked"),
                "{stderr}"
            );
            assert!(stderr.len() < 1000, "the message quotes the field whole: {} bytes", stderr.len());
        }
    }
}
