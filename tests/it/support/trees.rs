//! The synthetic trees (`fixtures/synthetic`) as git repositories, and pins pointed at them.

use std::path::Path;

use serde_json::{Value, json};

use super::{git, root};

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Commits everything under `dir` as a new repository's first commit; its SHA.
pub fn commit_all(dir: &Path, name: &str) -> String {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", &format!("synthetic {name}")]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A git repository of the synthetic tree `name` at `to`; its commit SHA.
pub fn synthetic_repo(name: &str, to: &Path) -> String {
    copy_dir(&root().join("fixtures/synthetic").join(name), to);
    commit_all(to, name)
}

/// Points the `main` profile's tree rows of the pins file at `shas` (name, SHA), locked.
pub fn point_main_pins(pins: &Path, shas: &[(String, String)]) {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(pins).unwrap()).unwrap();
    for row in doc["pins"].as_array_mut().unwrap() {
        if row["profile"] != "main" {
            continue;
        }
        let name = row["name"].as_str().unwrap().to_string();
        if let Some((_, sha)) = shas.iter().find(|(n, _)| *n == name) {
            row["sha"] = json!(sha);
            row["locked"] = json!(true);
        }
    }
    std::fs::write(pins, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

/// The synthetic EAS, EI and EAT trees as git repositories under `dir/repos`, and the real
/// pins.json at `dir/pins.json` with its `main` rows pointed at them (as scripts/demo.sh does).
/// Returns `dir`.
pub fn synthetic_trees(dir: &Path) -> std::path::PathBuf {
    pinned_trees(dir);
    dir.to_path_buf()
}

/// [`synthetic_trees`], returning each tree's name and commit SHA.
pub fn pinned_trees(dir: &Path) -> Vec<(String, String)> {
    let mut shas = Vec::new();
    for n in ["eas", "ei", "eat"] {
        shas.push((n.to_string(), synthetic_repo(n, &dir.join("repos").join(n))));
    }
    let path = dir.join("pins.json");
    std::fs::copy(super::root().join("pins.json"), &path).unwrap();
    point_main_pins(&path, &shas);
    shas
}
