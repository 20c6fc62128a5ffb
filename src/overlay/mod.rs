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
pub mod moved;
pub mod patch;
pub mod probe;
pub mod profiles;

use std::path::Path;

pub use apply::{Applied, ApplyError};
pub use choices::Generated;
pub use data::{DataError, Overlay};
pub use decide::Plan;
pub use git::GitError;

/// Why the overlay could not be decided or applied; the command edge (`crate::commands`) maps
/// it to an exit code and its fix.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Git(#[from] GitError),
    /// Applying a plan failed; the plan's clone, commit and STOP lines name the fix.
    #[error(transparent)]
    Apply(Box<ApplyFailed>),
}

/// A plan that did not apply, with what names its fix.
#[derive(Debug)]
pub struct ApplyFailed {
    pub source: ApplyError,
    pub repo: std::path::PathBuf,
    pub commit: String,
    pub stops: Vec<String>,
}

impl std::error::Error for ApplyFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl std::fmt::Display for ApplyFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

/// Decides the built-in overlay at `commit` of the clone at `repo`, with the generated choices
/// when a facts document was available (without them every row is considered needed).
pub fn decide(repo: &Path, commit: &str, generated: Option<&Generated>) -> Result<Plan, OverlayError> {
    let overlay = Overlay::builtin()?;
    Ok(decide::decide_with(&overlay, repo, commit, generated)?)
}

/// Applies a plan's patches to its clone's work tree; see [`apply::apply`].
pub fn apply(plan: &Plan) -> Result<Applied, OverlayError> {
    apply::apply(plan).map_err(|source| {
        OverlayError::Apply(Box::new(ApplyFailed {
            source,
            repo: plan.repo.clone(),
            commit: plan.commit.clone(),
            stops: plan.stop_lines(),
        }))
    })
}
