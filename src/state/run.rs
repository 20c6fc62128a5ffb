//! What every command's run needs of the state directory: where its root is, the clock its
//! records use, and what a path under it that cannot be written says.

use crate::settings::Global;
use crate::state::StateDirError;
use std::path::PathBuf;

pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn state_root(global: &Global) -> Result<PathBuf, StateDirError> {
    match &global.state_dir {
        Some(d) => Ok(d.clone()),
        None => crate::state::default_root(
            global.env.var("XDG_STATE_HOME").as_deref().map(std::ffi::OsStr::new),
            global.env.var("HOME").as_deref().map(std::ffi::OsStr::new),
        ),
    }
}

/// A file or directory under the state directory that cannot be made or written, in `step`
/// (the command edge makes it exit 1, with [`PathIoError::hint`] as its `next:` line).
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct PathIoError {
    pub step: crate::plan::Step,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl PathIoError {
    /// What to do for the cause: a full disk, a read-only file system, permissions.
    pub fn hint(&self) -> String {
        crate::state::journal::io_hint(&self.source, &self.path.join("x"))
    }
}

/// `e`, met making or writing `path` in `step`.
pub fn io_failure(step: impl Into<crate::plan::Step>, path: &std::path::Path, e: std::io::Error) -> PathIoError {
    PathIoError { step: step.into(), path: path.to_path_buf(), source: e }
}
