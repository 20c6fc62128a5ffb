//! purge (`--purge`): this cluster's state directory removed (logs, work tree, record), under
//! the lock: everything but the lock file first, then the Lease and the lock released, then the
//! directory. The record is out of the journal first: a purge that is stopped leaves nothing
//! to say how it ended.

use crate::error::Failure;
use crate::plan::DownId;
use crate::state::StateDir;

use crate::pipeline::down::cx::{Cx, Down};
use crate::pipeline::runner::{Phase, Runner};

pub struct Purge<'a> {
    pub sd: &'a StateDir,
}

impl Phase<Down> for Purge<'_> {
    const ID: DownId = DownId::Purge;
    type Planned = ();
    type Done = ();

    fn should_run(&self, cx: &Cx<'_>, _r: &Runner<Down>) -> bool {
        cx.args.purge
    }

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner<Down>) -> Result<(), Failure> {
        if r.record().is_none() {
            cx.shell.note(format!("purging {}", self.sd.dir().display()));
        }
        *r.record_mut() = None;
        empty_but_the_lock(self.sd)?;
        r.release().await;
        let dir = self.sd.dir();
        std::fs::remove_dir(dir).map_err(|e| Failure::step(DownId::Purge, format!("{}: {e}", dir.display())))
    }
}

/// Removes everything in the state directory but its lock file.
fn empty_but_the_lock(sd: &StateDir) -> Result<(), Failure> {
    let lock_file = sd.lock_file();
    for e in std::fs::read_dir(sd.dir()).map_err(|e| Failure::step(DownId::Purge, e))? {
        let p = e.map_err(|e| Failure::step(DownId::Purge, e))?.path();
        if p == lock_file {
            continue;
        }
        let r = if p.is_dir() && !p.is_symlink() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        r.map_err(|e| Failure::step(DownId::Purge, format!("{}: {e}", p.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything goes but the lock file, which the held lock still names (a symlink is removed,
    /// never followed).
    #[test]
    fn the_purge_keeps_only_the_lock_until_it_is_released() {
        let (_root, sd) = crate::pipeline::runner::tests::state_dir();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sd.work_dir().join("eas/env")).unwrap();
        std::fs::write(sd.state_file(), "{}").unwrap();
        std::fs::write(sd.lock_file(), "held").unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), sd.dir().join("link")).unwrap();
        empty_but_the_lock(&sd).unwrap();
        let left: Vec<_> = std::fs::read_dir(sd.dir()).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(left, [sd.lock_file()]);
        assert!(outside.path().join("keep").exists(), "a symlink's target is not removed");
    }
}
