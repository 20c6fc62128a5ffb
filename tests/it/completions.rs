//! What eas prints about itself, run as the real binary: `eas completions SHELL`, `eas man --out
//! DIR`, and `eas schema [NAME]`.

use crate::support;

use std::process::Command;

use support::{eas, text};

fn completion(shell: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = eas(dir.path()).args(["completions", shell]).output().expect("run eas");
    assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{shell} wrote to stderr: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn bash_sources_the_script_and_completes_eas() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("eas.bash");
    std::fs::write(&script, completion("bash")).unwrap();
    let out = Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p eas && COMP_WORDS=(eas pins '') COMP_CWORD=2 && _eas eas '' pins && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .expect("bash");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "bash: {}{stdout}", text(&out.stderr));
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("complete ") && first.trim_end().ends_with(" eas"), "complete -p eas: {first}");
    let words: Vec<&str> = stdout.lines().skip(1).collect();
    assert!(words.contains(&"check") && words.contains(&"lock"), "eas pins <TAB>: {words:?}");
}

/// What bash offers after `eas up <words>` with `cur` being completed.
fn bash_offers(words: &[&str], cur: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("eas.bash");
    std::fs::write(&script, completion("bash")).unwrap();
    // A file whose name starts like a layer: offered only if the completion falls back to files.
    std::fs::write(dir.path().join("agent-notes.txt"), "").unwrap();
    let line: Vec<&str> = words.iter().copied().chain([cur]).collect();
    let quoted: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let out = Command::new("bash")
        .current_dir(dir.path())
        .arg("--norc")
        .arg("-c")
        .arg(format!(
            "source '{}' && COMP_WORDS=({}) COMP_CWORD={} && _eas eas '{cur}' '{}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            quoted.join(" "),
            line.len() - 1,
            words.last().unwrap(),
        ))
        .output()
        .expect("bash");
    assert!(out.status.success(), "bash: {}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_string).filter(|w| !w.is_empty()).collect()
}

#[test]
fn layer_completes_the_layers_and_model_completes_no_file_names() {
    let layers = bash_offers(&["eas", "up", "--layer"], "");
    assert!(layers.contains(&"agent-toolkit".to_string()) && layers.contains(&"inference".to_string()), "{layers:?}");
    assert!(!layers.iter().any(|w| w.ends_with(".txt")), "--layer offered file names: {layers:?}");
    assert_eq!(bash_offers(&["eas", "up", "--layer"], "ag"), ["agent-toolkit"]);
    // What was typed stays as typed: no file name (agent-notes.txt) is offered.
    let models = bash_offers(&["eas", "up", "--model"], "ag");
    assert_eq!(models, ["ag"], "--model offered file names: {models:?}");
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let dir = tempfile::tempdir().unwrap();
    let out = eas(dir.path()).arg("--version").output().expect("run eas");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| text(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    assert_eq!(text(&out.stdout), format!("eas {} (commit {head})\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn every_shell_gets_a_script_naming_the_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = completion(shell);
        for word in ["completions", "overlay", "verify", "dry-run"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
}

#[test]
fn an_unknown_shell_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = eas(dir.path()).args(["completions", "tcsh"]).output().expect("run eas");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn man_writes_a_page_per_command_each_starting_with_th() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man");
    let out = eas(dir.path()).args(["man", "--out"]).arg(&pages).output().expect("run eas");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = eas(dir.path()).arg("--help").output().expect("run eas");
    // Every command listed in `eas --help` (the Commands: block) has its page.
    let listed: Vec<String> = text(&help.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A description wrapped to the terminal continues on a deeper indent.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(listed.len() >= 10, "{listed:?}");
    for cmd in &listed {
        assert!(pages.join(format!("eas-{cmd}.1")).is_file(), "no page for eas {cmd}");
    }
    for nested in [
        "eas-pins-show.1",
        "eas-pins-check.1",
        "eas-pins-lock.1",
        "eas-schema.1",
        "eas-bastion-build.1",
        "eas-bastion-run.1",
        "eas.1",
    ] {
        assert!(pages.join(nested).is_file(), "no {nested}");
    }
    for entry in std::fs::read_dir(&pages).unwrap() {
        let path = entry.unwrap().path();
        let roff = std::fs::read_to_string(&path).unwrap();
        assert!(roff.starts_with(".TH "), "{} starts {:?}", path.display(), roff.lines().next());
    }
}

#[test]
fn schema_lists_the_documents_prints_each_as_json_and_refuses_an_unknown_name() {
    let dir = tempfile::tempdir().unwrap();
    let list = eas(dir.path()).arg("schema").output().expect("run eas");
    assert!(list.status.success(), "{}", text(&list.stderr));
    let names: Vec<String> = text(&list.stdout).lines().map(str::to_string).collect();
    for name in
        ["eas-plan/v1", "eas-status/v1", "eas-verify/v1", "eas-doctor/v1", "eas-fit/v1", "eas-facts/v1", "eas-pins/v1"]
    {
        assert!(names.contains(&name.to_string()), "{name} not listed: {names:?}");
    }
    for name in &names {
        let out = eas(dir.path()).args(["schema", name]).output().expect("run eas");
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(doc["properties"]["schema"]["const"], name.as_str());
    }
    let out = eas(dir.path()).args(["schema", "data/eas-plan.v1.schema.json"]).output().expect("run eas");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("hint: one of: eas-plan/v1"), "{}", text(&out.stderr));
}
