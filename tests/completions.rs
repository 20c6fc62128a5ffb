//! `eas completions SHELL` and `eas man --out DIR`, run as the real binary.

mod support;

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
