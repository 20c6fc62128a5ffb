//! The installer's command lines, and the check that the pinned EAS tree speaks the grammar
//! they are written in (eas-installer.md §1.1, §1.2).

use std::path::Path;

/// The installer, relative to the EAS work tree it runs in.
pub const SCRIPT: &str = "./es_auto_installer.sh";

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum CommandError {
    #[error(
        "{what} {value:?} cannot be passed to the installer: expected letters, digits, '.', '_' or '-', not starting with '-'"
    )]
    BadName { what: &'static str, value: String },
    #[error("overrides path {0:?} must be an absolute path inside the bastion")]
    BadOverrides(String),
}

fn name(what: &'static str, value: &str) -> Result<String, CommandError> {
    let ok = !value.is_empty()
        && !value.starts_with('-')
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok { Ok(value.to_string()) } else { Err(CommandError::BadName { what, value: value.to_string() }) }
}

/// `<verb> <layer> --env <env>`, both names checked: how every installer command begins.
fn command(verb: &str, layer: &str, env: &str) -> Result<Vec<String>, CommandError> {
    Ok(vec![SCRIPT.into(), verb.into(), name("layer", layer)?, "--env".into(), name("env", env)?])
}

/// `init <layer> --env <env>`: creates `env/<env>/`, clones the layer's repos, seeds its files.
pub fn init_argv(layer: &str, env: &str) -> Result<Vec<String>, CommandError> {
    command("init", layer, env)
}

/// `install <layer> --env <env> --force -- -e @<overrides>`: the overrides come after `--`, so
/// they are passed to ansible-playbook last and win over every other variable source.
pub fn install_argv(layer: &str, env: &str, overrides: &str) -> Result<Vec<String>, CommandError> {
    if !overrides.starts_with('/') || overrides.contains(['\n', '\0']) {
        return Err(CommandError::BadOverrides(overrides.to_string()));
    }
    let mut argv = command("install", layer, env)?;
    argv.extend(["--force", "--", "-e"].map(String::from));
    argv.push(format!("@{overrides}"));
    Ok(argv)
}

/// `teardown <layer> --env <env> --force`: `--force` because teardown asks for confirmation and
/// refuses without a terminal.
pub fn teardown_argv(layer: &str, env: &str) -> Result<Vec<String>, CommandError> {
    let mut argv = command("teardown", layer, env)?;
    argv.push("--force".into());
    Ok(argv)
}

/// An argv as one line a user can paste into a POSIX shell.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" ")
}

fn shell_word(a: &str) -> String {
    let safe = !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if safe { a.to_string() } else { format!("'{}'", a.replace('\'', r"'\''")) }
}

/// Which command-line grammar a pinned EAS tree's installer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grammar {
    /// `configs/repos/repos.<layer>.yaml`, `init <layer>`, `--force`: the grammar eas drives.
    Layers,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GrammarError {
    #[error("{tree} has no es_auto_installer.sh: it is not an EAS tree")]
    NoInstaller { tree: String },
    #[error(
        "the EAS tree at {tree} has the old installer (config/repos.yaml: `init <env>`, `install --all`, no --force); eas drives the one with configs/repos/ and `init <layer>`"
    )]
    Old { tree: String },
    #[error(
        "the EAS tree at {tree} has neither configs/repos/ nor config/repos.yaml: its installer grammar is unknown"
    )]
    Unknown { tree: String },
}

impl GrammarError {
    pub fn hint(&self) -> &'static str {
        match self {
            GrammarError::NoInstaller { .. } => "point --eas-repo at a clone of intel/enterprise-ai-solutions",
            _ => "pin a newer EAS commit: `--profile main`, or `--ref <full sha>` of a commit with configs/repos/",
        }
    }
}

/// Detects the grammar from which paths exist in the tree (`exists` answers for a path
/// relative to the tree root; a directory is asked for with a trailing `/`).
pub fn detect_grammar(tree: &str, exists: impl Fn(&str) -> bool) -> Result<Grammar, GrammarError> {
    if !exists("es_auto_installer.sh") {
        return Err(GrammarError::NoInstaller { tree: tree.to_string() });
    }
    if exists("configs/repos/") {
        return Ok(Grammar::Layers);
    }
    if exists("config/repos.yaml") {
        return Err(GrammarError::Old { tree: tree.to_string() });
    }
    Err(GrammarError::Unknown { tree: tree.to_string() })
}

/// [`detect_grammar`] on a checked-out tree.
pub fn detect_grammar_in(dir: &Path) -> Result<Grammar, GrammarError> {
    detect_grammar(&dir.display().to_string(), |p| match p.strip_suffix('/') {
        Some(d) => dir.join(d).is_dir(),
        None => dir.join(p).is_file(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            install_argv("agent-toolkit", "k3d-gpu", "/eas/out/eas-overrides.yaml").unwrap(),
            argv(&[
                "./es_auto_installer.sh",
                "install",
                "agent-toolkit",
                "--env",
                "k3d-gpu",
                "--force",
                "--",
                "-e",
                "@/eas/out/eas-overrides.yaml"
            ])
        );
        assert_eq!(
            init_argv("inference", "k3d-gpu").unwrap(),
            argv(&["./es_auto_installer.sh", "init", "inference", "--env", "k3d-gpu"])
        );
        assert_eq!(
            teardown_argv("inference", "prod").unwrap(),
            argv(&["./es_auto_installer.sh", "teardown", "inference", "--env", "prod", "--force"])
        );
    }

    #[test]
    fn names_that_would_change_the_command_are_refused() {
        let cases = [
            ("--all", "k3d-gpu", CommandError::BadName { what: "layer", value: "--all".into() }),
            ("inference", "", CommandError::BadName { what: "env", value: "".into() }),
            ("inference", "a b", CommandError::BadName { what: "env", value: "a b".into() }),
            ("inference", "x;rm", CommandError::BadName { what: "env", value: "x;rm".into() }),
        ];
        for (layer, env, want) in cases {
            assert_eq!(init_argv(layer, env), Err(want.clone()), "{layer} {env}");
            assert_eq!(teardown_argv(layer, env), Err(want.clone()));
            assert_eq!(install_argv(layer, env, "/o.yaml"), Err(want));
        }
        assert_eq!(install_argv("inference", "e", "o.yaml"), Err(CommandError::BadOverrides("o.yaml".into())));
    }

    #[test]
    fn shell_lines_paste_back_to_the_same_argv() {
        let cases = [
            (
                argv(&["./es_auto_installer.sh", "install", "x", "--", "-e", "@/a/b.yaml"]),
                "./es_auto_installer.sh install x -- -e @/a/b.yaml",
            ),
            (argv(&["echo", "a b", "it's", ""]), r"echo 'a b' 'it'\''s' ''"),
        ];
        for (a, want) in cases {
            assert_eq!(shell_line(&a), want);
        }
    }

    #[test]
    fn grammar_from_the_tree() {
        let tree = |paths: &'static [&'static str]| move |p: &str| paths.contains(&p);
        let cases: [(&[&str], Result<Grammar, GrammarError>); 5] = [
            (&["es_auto_installer.sh", "configs/repos/"], Ok(Grammar::Layers)),
            (&["es_auto_installer.sh", "configs/repos/", "config/repos.yaml"], Ok(Grammar::Layers)),
            (&["es_auto_installer.sh", "config/repos.yaml"], Err(GrammarError::Old { tree: "t".into() })),
            (&["es_auto_installer.sh"], Err(GrammarError::Unknown { tree: "t".into() })),
            (&["configs/repos/"], Err(GrammarError::NoInstaller { tree: "t".into() })),
        ];
        for (paths, want) in cases {
            assert_eq!(detect_grammar("t", tree(paths)), want, "{paths:?}");
        }
        let err = detect_grammar("t", tree(&["es_auto_installer.sh", "config/repos.yaml"])).unwrap_err();
        assert!(err.to_string().contains("old installer"));
        assert!(err.hint().contains("--ref"));
        assert!(GrammarError::NoInstaller { tree: "t".into() }.hint().contains("--eas-repo"));
    }

    #[test]
    fn grammar_from_a_checked_out_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("es_auto_installer.sh"), "#!/bin/bash\n").unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/repos.yaml"), "repos: []\n").unwrap();
        assert!(matches!(detect_grammar_in(dir.path()), Err(GrammarError::Old { .. })));
        std::fs::create_dir_all(dir.path().join("configs/repos")).unwrap();
        assert_eq!(detect_grammar_in(dir.path()), Ok(Grammar::Layers));
        // A file named like the directory is not the directory.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("es_auto_installer.sh"), "").unwrap();
        std::fs::create_dir_all(other.path().join("configs")).unwrap();
        std::fs::write(other.path().join("configs/repos"), "").unwrap();
        assert!(matches!(detect_grammar_in(other.path()), Err(GrammarError::Unknown { .. })));
    }
}
