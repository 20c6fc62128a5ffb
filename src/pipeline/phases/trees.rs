//! Trees: the plan half resolves EAS, EI and EAT at their pinned commits (fetched into the cache
//! when missing, or read from the operator's clones) and makes the run's one EAS work tree from
//! them in a scratch directory, where the overlay is decided. The act half puts that tree in
//! place (an upgrade keeps the inited work tree and moves it to the new commit instead).

use std::path::{Path, PathBuf};

use crate::config;
use crate::pins::{Pin, Trees as Pins};
use crate::settings::Global;
use crate::trees::{self, Origin};

use crate::error::Failure;
use crate::plan::PhaseId;
use crate::state::StateDir;

use crate::gather::catalog;
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::runner::{Phase, Runner};
use crate::pipeline::settings::{Repos, UpSettings};
use std::time::Duration;

pub struct Trees<'a> {
    pub sd: &'a StateDir,
    /// At act time, on an upgrade in place: the overlay's commit the kept work tree moves to.
    pub upgrade_to: Option<String>,
    /// The state directory can take the real run's scratch tree (the lock's plan half decided
    /// it): when not, the scratch goes where a dry run's does, and the lock's blocker says why.
    pub writable: bool,
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

    async fn plan(&mut self, cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Scratch, NoPlan> {
        let (tp, repos, cache) = (cx.tree_pins.clone(), cx.args.repos.clone(), crate::trees::cache_dir(&cx.global.env));
        let ca = cx.global.ca_bundle.as_ref().map(|b| b.ders.clone());
        let (scratch, layer, with_ext) =
            (scratch_dir(cx.args, self.sd, self.writable)?, cx.args.select.layer.clone(), !cx.args.dry_run);
        let made = tokio::task::spawn_blocking(move || {
            let r = resolve_trees(&tp, &repos, &cache, ca.as_deref())?;
            make_work_tree(&r, &tp, &scratch.path().join("eas"), &layer, with_ext)?;
            Ok::<_, String>(Scratch { resolved: r, dir: scratch })
        });
        let made = made.await.map_err(|e| Failure::step(PhaseId::Trees, e))?;
        Ok(made.map_err(|e| {
            Failure::step_next(
                PhaseId::Trees,
                e,
                "check network access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo",
            )
        })?)
    }

    /// The commit each tree resolved to.
    fn note(&mut self, scratch: &mut Scratch, r: &mut Runner) -> Result<(), Failure> {
        let t = &scratch.resolved;
        let shas = [("eas", &t.eas), ("ei", &t.ei), ("eat", &t.eat)];
        r.plan_part(PhaseId::Trees).trees(shas.into_iter().map(|(n, x)| (n.to_string(), x.sha.clone())).collect());
        Ok(())
    }

    fn unplanned(&self, r: &mut Runner) {
        r.plan_part(PhaseId::Trees).not_decided("the trees could not be read");
    }

    /// The decided tree put in place of the run's work tree; an upgrade keeps the work tree (its
    /// env is the installer's record) and moves it instead.
    async fn act(&mut self, scratch: Scratch, _cx: &Cx<'_>, _r: &mut Runner) -> Result<(), Failure> {
        let work = self.sd.work_dir().join("eas");
        match &self.upgrade_to {
            Some(commit) => upgrade_tree(&work, commit).await,
            None => put_in_place(&scratch.tree(), &work).map_err(|e| Failure::step(PhaseId::Trees, e)),
        }
    }
}

/// The directory the run's EAS work tree is made in: the system's temporary directory for a dry
/// run (it writes nothing of its own) and for a real run whose state directory cannot take it
/// (the lock's blocker says so, and the run stops before its acts), the state directory's work
/// directory otherwise (the act moves it into place with a rename). The act removes what a
/// killed run left there, once it holds the lock.
fn scratch_dir(args: &UpSettings, sd: &StateDir, writable: bool) -> Result<tempfile::TempDir, Failure> {
    if args.dry_run || !writable {
        return tempfile::Builder::new().prefix("eas-plan-").tempdir().map_err(|e| Failure::step(PhaseId::Trees, e));
    }
    let work = sd.work_dir();
    let made = std::fs::create_dir_all(&work)
        .and_then(|()| tempfile::Builder::new().prefix(crate::pipeline::settings::NEXT).tempdir_in(&work));
    made.map_err(|e| crate::state::run::io_failure(PhaseId::Trees, &work, e).into())
}

/// The decided tree replaces the run's work tree (a clone moves as a directory: its objects are
/// shared with the cache by absolute path).
fn put_in_place(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::rename(from, to)
}

/// The upstream trees resolved in the cache (or the operator's clones).
#[derive(Debug, Clone)]
pub struct Resolved {
    pub eas: trees::Resolved,
    pub ei: trees::Resolved,
    pub eat: trees::Resolved,
}

fn origin(pin: &Pin, local: &Option<PathBuf>) -> Origin {
    match local {
        Some(d) => Origin::Local(d.clone()),
        None => Origin::Remote(format!("https://github.com/{}", pin.repo.clone().unwrap_or_default())),
    }
}

pub fn resolve_trees(t: &Pins, repos: &Repos, cache: &Path, ca: Option<&[Vec<u8>]>) -> Result<Resolved, String> {
    let ca_file = match ca {
        Some(ders) => {
            Some(crate::net::trust::GitCaFile::write(ders).map_err(|e| format!("writing git's CA file: {e}"))?)
        }
        None => None,
    };
    let ca_path = ca_file.as_ref().map(|f| f.path());
    let one = |pin: &Pin, local: &Option<PathBuf>| {
        trees::resolve(pin, &origin(pin, local), cache, ca_path).map_err(|e| e.to_string())
    };
    Ok(Resolved {
        eas: one(&t.eas, &repos.eas_repo)?,
        ei: one(&t.ei, &repos.ei_repo)?,
        eat: one(&t.eat, &repos.eat_repo)?,
    })
}

/// `--model` is checked against the catalog at the pinned EI commit before the cluster is read.
/// The EI tree comes from `--ei-repo` or the mirror cache, and is fetched when missing (the trees
/// phase needs it anyway). When it cannot be had, the built-in candidates decide for a dry run
/// (as its config then does); a real run fails later in the trees phase, as it would have.
/// Nothing to check without `--model`, or for a layer without a catalog.
pub async fn model_before_cluster(
    model: Option<&str>,
    layer: &crate::settings::Layer,
    tree_pins: &Pins,
    args: &UpSettings,
    global: &Global,
    r: &mut Runner,
) -> Result<(), Failure> {
    let Some(model) = model.filter(|_| crate::gather::catalog::catalog_path(layer).is_some()) else {
        return Ok(());
    };
    let (pin, local, cache) = (tree_pins.ei.clone(), args.repos.ei_repo.clone(), trees::cache_dir(&global.env));
    let ca = global.ca_bundle.as_ref().map(|b| b.ders.clone());
    let ei = tokio::task::spawn_blocking(move || {
        let ca_file = match ca.as_deref() {
            Some(ders) => Some(crate::net::trust::GitCaFile::write(ders).map_err(|e| e.to_string())?),
            None => None,
        };
        trees::resolve(&pin, &origin(&pin, &local), &cache, ca_file.as_ref().map(|f| f.path()))
            .map_err(|e| e.to_string())
    });
    // The trees phase's plan half reads the same tree again, in its own window.
    let ei = r.plan_half(PhaseId::Trees, async { ei.await.map_err(|e| Failure::step(PhaseId::Trees, e)) }).await?;
    let pinned = match ei {
        Ok(r) => catalog::read(&r.objects, &r.sha, &tree_pins.ei, layer)?,
        Err(_) if args.dry_run => None,
        Err(_) => return Ok(()),
    };
    Ok(catalog::check_model(model, layer, pinned.as_ref())?)
}

/// The EAS work tree, with EI and EAT placed under `ext/` at their pins so `init` finds them
/// (`with_ext`: a dry run decides the overlay on the EAS tree alone and runs no `init`).
pub fn make_work_tree(res: &Resolved, t: &Pins, dir: &Path, layer: &str, with_ext: bool) -> Result<(), String> {
    let url = |p: &Pin| format!("https://github.com/{}", p.repo.clone().unwrap_or_default());
    trees::work_tree(&res.eas, dir, Some(&url(&t.eas))).map_err(|e| e.to_string())?;
    let head = trees::head(dir).map_err(|e| e.to_string())?;
    if head != res.eas.sha {
        return Err(format!("the work tree {} is at {head}, not the pinned {}", dir.display(), res.eas.sha));
    }
    if !with_ext {
        return Ok(());
    }
    for row in &config::data::layers().layers[layer] {
        let (r, p) = match row.pin.as_str() {
            "ei" => (&res.ei, &t.ei),
            "eat" => (&res.eat, &t.eat),
            _ => continue,
        };
        trees::work_tree(r, &dir.join("ext").join(&row.dest), Some(&url(p))).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The kept work tree moved to the new EAS commit: the overlay (and eas's manifest edit) reverted
/// with the move, `env/` and `ext/` kept (they are not tracked); the act re-applies the overlay
/// and `init --upgrade` moves `ext/`.
pub async fn upgrade_tree(work: &Path, commit: &str) -> Result<(), Failure> {
    let limit = Duration::from_secs(120);
    let dir = Some(work);
    let step =
        |e: String| Failure::step_next(PhaseId::Trees, e, "move the work tree aside with `eas down`, then `eas up`");
    crate::git::run(dir, &["-c", "advice.detachedHead=false", "checkout", "--quiet", "-f", "--detach", commit], limit)
        .await
        .map_err(step)?;
    let head = crate::git::run(dir, &["rev-parse", "HEAD"], limit).await.map_err(step)?;
    if head.trim() != commit {
        return Err(step(format!("the work tree {} is at {}, not {commit}", work.display(), head.trim())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::Fixture;

    /// A real run makes its tree under the state directory's work directory (the act renames it
    /// into place, so both are on one file system), named so a later run's lock holder can find
    /// what a killed run left; a dry run writes nothing there, nor a real run whose state
    /// directory cannot take it (the lock's blocker stops that run).
    #[test]
    fn a_real_run_makes_its_tree_beside_the_work_tree_and_a_dry_run_elsewhere() {
        let (root, sd) = crate::pipeline::runner::tests::state_dir();
        let mut args = Fixture::new().args;
        let real = scratch_dir(&args, &sd, true).unwrap();
        assert_eq!(real.path().parent(), Some(sd.work_dir().as_path()));
        let name = real.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(crate::pipeline::settings::NEXT), "{name}");
        drop(real);
        std::fs::remove_dir_all(sd.work_dir()).unwrap();
        let unwritable = scratch_dir(&args, &sd, false).unwrap();
        assert!(!unwritable.path().starts_with(root.path()), "{}", unwritable.path().display());
        assert!(!sd.work_dir().exists(), "a real run on a state directory that cannot take it made none");
        args.dry_run = true;
        let dry = scratch_dir(&args, &sd, true).unwrap();
        assert!(!dry.path().starts_with(root.path()), "{}", dry.path().display());
        assert!(!sd.work_dir().exists(), "a dry run made no work directory");
    }

    /// The decided tree replaces the work tree whole: nothing of the old one is left beside it.
    #[test]
    fn the_decided_tree_replaces_the_work_tree_whole() {
        let d = tempfile::tempdir().unwrap();
        let (from, to) = (d.path().join("next/eas"), d.path().join("work/eas"));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::write(from.join("decided"), "new").unwrap();
        std::fs::create_dir_all(to.join("stale-dir")).unwrap();
        std::fs::write(to.join("stale"), "old").unwrap();
        put_in_place(&from, &to).unwrap();
        assert_eq!(std::fs::read_to_string(to.join("decided")).unwrap(), "new");
        assert!(!to.join("stale").exists() && !to.join("stale-dir").exists());
        assert!(!from.exists(), "moved, not copied");
    }
}
