//! What every command's run needs of the state directory: where its root is, the clock its
//! records use, and what a path under it that cannot be written says.

use crate::error::Failure;
use crate::settings::Global;
use std::path::PathBuf;

pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn state_root(global: &Global) -> Result<PathBuf, Failure> {
    match &global.state_dir {
        Some(d) => Ok(d.clone()),
        None => Ok(crate::state::default_root(
            global.env.var("XDG_STATE_HOME").as_deref().map(std::ffi::OsStr::new),
            global.env.var("HOME").as_deref().map(std::ffi::OsStr::new),
        )?),
    }
}

/// A file or directory under the state directory that cannot be made or written: exit 1, with a
/// `next:` line for the cause (a full disk, a read-only file system, permissions).
pub fn io_failure(step: &str, path: &std::path::Path, e: std::io::Error) -> Failure {
    let next = crate::state::journal::io_hint(&e, &path.join("x"));
    Failure::step_next(step, format!("{}: {e}", path.display()), next)
}
