//! `eas overlay`: decide, per row of `patches/overlay.json`, whether a k3s/k3d patch to the
//! pinned EAS tree is skipped, merged, fixed, applied or a STOP (SPEC §5), and apply it.
//!
//! [`decide`] and [`apply`] are the library entry points `eas up` and the `eas overlay` command
//! (`crate::commands`) call.

pub mod apply;
pub mod choices;
pub mod data;
pub mod decide;
pub mod git;
pub mod patch;
pub mod probe;

use std::path::Path;

pub use apply::{Applied, ApplyError};
pub use choices::Generated;
pub use data::{DataError, Overlay};
pub use decide::Plan;
pub use git::GitError;

use crate::error::Failure;

/// Decides the built-in overlay at `commit` of the clone at `repo`, with the generated choices
/// when a facts document was available (without them every row is considered needed).
pub fn decide(repo: &Path, commit: &str, generated: Option<&Generated>) -> Result<Plan, Failure> {
    let overlay = Overlay::builtin()?;
    Ok(decide::decide_with(&overlay, repo, commit, generated)?)
}

/// Applies a plan's patches to its clone's work tree; see [`apply::apply`].
pub fn apply(plan: &Plan) -> Result<Applied, Failure> {
    apply::apply(plan).map_err(|e| failure_for_apply(e, plan))
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

fn failure_for_apply(e: ApplyError, plan: &Plan) -> Failure {
    let dir = plan.repo.display();
    match e {
        ApplyError::Git(g) => g.into(),
        ApplyError::Stopped { .. } => Failure::OverlayStop(plan.stop_lines()),
        ApplyError::HeadMoved { .. } => Failure::bad_input(
            e.to_string(),
            format!("check out {} in {dir} (`git -C {dir} checkout {}`) and decide again", plan.commit, plan.commit),
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
