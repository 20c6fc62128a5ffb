//! Puts the commit eas was built from into `eas --version` (`eas 0.1.0 (commit 1a2b3c4d5e6f)`),
//! so a bug report names the code it ran. A build outside a git checkout (a source tarball)
//! says `commit unknown`; `EAS_COMMIT` set at build time wins (a packager's own record).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=EAS_COMMIT");
    let commit = std::env::var("EAS_COMMIT").ok().filter(|c| !c.is_empty()).or_else(head);
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        // A new commit moves HEAD or the branch it names: either rebuilds the version string.
        println!("cargo:rerun-if-changed={dir}/HEAD");
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        if let Some(file) = branch.and_then(|b| git(&["rev-parse", "--git-path", &b])) {
            println!("cargo:rerun-if-changed={file}");
        }
        if let Some(packed) = git(&["rev-parse", "--git-path", "packed-refs"]) {
            println!("cargo:rerun-if-changed={packed}");
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let commit = commit.unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=EAS_LONG_VERSION={version} (commit {commit})");
}

/// The checked-out commit, abbreviated to 12 hex digits. Edits not committed are not marked:
/// this script reruns when HEAD moves, not on every edit, so a mark would go stale.
fn head() -> Option<String> {
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
