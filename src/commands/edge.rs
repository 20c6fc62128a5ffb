//! The domain modules' errors as [`Failure`]s: each module has its own error type and knows no
//! exit code; here each kind of failure gets its exit code (SPEC §2) and the command that fixes
//! it. The mapping lives in the command layer, above every domain module (so `crate::error`, the
//! lowest layer, imports none of them); the run's pipeline uses it through `?` as the commands do.

use crate::error::Failure;
use crate::overlay::{ApplyError, DataError, GitError, OverlayError};

impl From<OverlayError> for Failure {
    fn from(e: OverlayError) -> Self {
        match e {
            OverlayError::Data(e) => e.into(),
            OverlayError::Git(e) => e.into(),
            OverlayError::Apply(a) => {
                let a = *a;
                apply_failure(a.source, &a.repo, &a.commit, a.stops)
            }
        }
    }
}

impl From<DataError> for Failure {
    fn from(e: DataError) -> Self {
        Failure::bad_input(
            e.to_string(),
            "the overlay directory must hold an eas-overlay/v1 overlay.json and its patches; omit --overlay to use the one built into eas",
        )
    }
}

impl From<GitError> for Failure {
    fn from(e: GitError) -> Self {
        match e {
            GitError::NotARepo { .. } => {
                Failure::bad_input(e.to_string(), "pass --repo the directory of an EAS git clone")
            }
            GitError::NoCommit { .. } => {
                Failure::bad_input(e.to_string(), "check out the pinned EAS commit in that clone")
            }
            GitError::Run(crate::git::RunError::Spawn(_)) => {
                Failure::step_next("overlay", e, "install git (eas doctor checks for it)")
            }
            GitError::Run(crate::git::RunError::TimedOut(_) | crate::git::RunError::Closing) => {
                Failure::step_next("overlay", e, "re-run `eas overlay --repo DIR`; the clone was not changed")
            }
            GitError::Failed { .. } | GitError::Scratch(_) => {
                Failure::step_next("overlay", e, "re-run `eas overlay --repo DIR`; the clone was not changed")
            }
        }
    }
}

fn apply_failure(e: ApplyError, repo: &std::path::Path, commit: &str, stops: Vec<String>) -> Failure {
    let dir = repo.display();
    match e {
        ApplyError::Git(g) => g.into(),
        ApplyError::Stopped { .. } => Failure::OverlayStop(stops),
        ApplyError::HeadMoved { .. } => Failure::bad_input(
            e.to_string(),
            format!("check out {commit} in {dir} (`git -C {dir} checkout {commit}`) and decide again"),
        ),
        // `reset --hard` clears staged changes as well as the work tree's (`checkout -- .` would
        // copy staged changes back); `stash` keeps them instead.
        ApplyError::Dirty { .. } => {
            let q = shell_quote(&dir.to_string());
            Failure::bad_input(
                e.to_string(),
                format!(
                    "nothing was written; restore the pinned tree with `git -C {q} reset --hard HEAD` \
                     (discards those changes; `git -C {q} stash` keeps them) and re-run"
                ),
            )
        }
        ApplyError::Conflict { .. } => Failure::OverlayStop(vec![
            e.to_string(),
            "two rows patch the same lines: regenerate the later row against the earlier one".into(),
        ]),
    }
}

/// A path as one shell word, so a hint can be pasted as it is.
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
