//! Trees: the plan half resolves EAS, EI and EAT at their pinned commits (fetched into the cache
//! when missing, or read from the operator's clones) and makes the run's one EAS work tree from
//! them in a scratch directory, where the overlay is decided. The act half puts that tree in
//! place (an upgrade keeps the inited work tree and moves it to the new commit instead).

use std::path::{Path, PathBuf};

use crate::error::Failure;
use crate::pipeline::PhaseId;
use crate::state::StateDir;

use super::super::phase::{Cx, NoPlan, Phase};
use super::super::runner::Runner;
use super::super::{Resolved, UpSettings, day_two};

pub struct Trees<'a> {
    pub sd: &'a StateDir,
    /// At act time, on an upgrade in place: the overlay's commit the kept work tree moves to.
    pub upgrade_to: Option<String>,
}

/// The pinned trees resolved, and the scratch directory holding the decided work tree
/// (`<scratch>/eas`), removed when dropped.
pub struct Scratch {
    pub resolved: Resolved,
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn tree(&self) -> PathBuf {
        self.dir.path().join("eas")
    }
}

impl Phase for Trees<'_> {
    const ID: PhaseId = PhaseId::Trees;
    type Planned = Scratch;
    type Done = ();

    fn says(&self, _cx: &Cx<'_>) -> String {
        "fetching EAS, EI and EAT at their pinned commits".into()
    }

    async fn plan(&mut self, cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Scratch, NoPlan> {
        let (tp, repos, cache) = (cx.tree_pins.clone(), cx.args.repos.clone(), crate::trees::cache_dir(&cx.global.env));
        let ca = cx.global.ca_bundle.as_ref().map(|b| b.ders.clone());
        let (scratch, layer, with_ext) =
            (scratch_dir(cx.args, self.sd)?, cx.args.select.layer.clone(), !cx.args.dry_run);
        let made = tokio::task::spawn_blocking(move || {
            let r = super::super::resolve_trees(&tp, &repos, &cache, ca.as_deref())?;
            super::super::make_work_tree(&r, &tp, &scratch.path().join("eas"), &layer, with_ext)?;
            Ok::<_, String>(Scratch { resolved: r, dir: scratch })
        });
        let made = made.await.map_err(|e| Failure::step("trees", e))?;
        Ok(made.map_err(|e| {
            Failure::step_next(
                "trees",
                e,
                "check network access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo",
            )
        })?)
    }

    fn unplanned(&self, r: &mut Runner) {
        r.plan.overlay_not_decided = Some("the trees could not be read".into());
    }

    /// The decided tree put in place of the run's work tree; an upgrade keeps the work tree (its
    /// env is the installer's record) and moves it instead.
    async fn act(self, scratch: Scratch, _cx: &Cx<'_>, _r: &mut Runner) -> Result<(), Failure> {
        let work = self.sd.work_dir().join("eas");
        match &self.upgrade_to {
            Some(commit) => day_two::upgrade_tree(&work, commit).await,
            None => put_in_place(&scratch.tree(), &work).map_err(|e| Failure::step("trees", e)),
        }
    }
}

/// The directory the run's EAS work tree is made in: the system's temporary directory for a dry
/// run (it writes nothing of its own), the state directory's work directory for a real run (the
/// act moves it into place with a rename). The act removes what a killed run left there, once it
/// holds the lock.
fn scratch_dir(args: &UpSettings, sd: &StateDir) -> Result<tempfile::TempDir, Failure> {
    if args.dry_run {
        tempfile::Builder::new().prefix("eas-plan-").tempdir()
    } else {
        let work = sd.work_dir();
        std::fs::create_dir_all(&work)
            .and_then(|()| tempfile::Builder::new().prefix(super::super::NEXT).tempdir_in(&work))
    }
    .map_err(|e| Failure::step("trees", e))
}

/// The decided tree replaces the run's work tree (a clone moves as a directory: its objects are
/// shared with the cache by absolute path).
fn put_in_place(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::rename(from, to)
}
