//! Prepare and install, in the bastion, with the ledger's `before` read ahead of them. Their
//! commands were decided by config's plan half (`init`, the installer's, and an undeploy when the
//! model changes); their own plan halves have nothing left to check, so they run only as acts.
//! Prepare runs `init` and writes the decided files into the env; from the install's start the
//! run is an install, recorded in `state.json` with the inputs and pins it was made from.

use std::path::Path;

use crate::config;
use crate::error::Failure;
use crate::facts::Facts;
use crate::plan::PhaseId;
use crate::state::StateDir;

use crate::act::{install, reap};
use crate::pipeline::phase::{Cx, NoPlan, Phase};
use crate::pipeline::runner::Runner;

/// What prepare and install share: the bastion image, the work tree, the state directory.
pub struct Bench<'a> {
    pub docker: &'a bollard::Docker,
    pub image: &'a str,
    pub work: &'a Path,
    pub sd: &'a StateDir,
}

pub struct Prepare<'a> {
    pub on: &'a Bench<'a>,
    pub files: &'a [(String, String)],
    pub decision: &'a config::Decision,
    /// The run ids of the dead runs whose lock or Lease this run took over: their containers
    /// are swept again first.
    pub dead: &'a [String],
    /// The pins moved since the last completed run: `init --upgrade` on the kept tree.
    pub upgrade: bool,
}

impl Phase for Prepare<'_> {
    const ID: PhaseId = PhaseId::Prepare;
    const STOPS_ITSELF: bool = true;
    type Planned = ();
    type Done = ();

    fn says(&self, _cx: &Cx<'_>) -> String {
        "init and the decided files".into()
    }

    async fn plan(&mut self, _cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<(), NoPlan> {
        Ok(())
    }

    async fn act(self, (): (), cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        let b = self.on;
        // The Docker Engine may finish a create or a start the dead run sent just before it died
        // after preflight's sweep: sweep again before this run's installer starts, so two
        // installers never act at once.
        for id in self.dead {
            reap::reap(b.docker, id, cx.shell).await?;
        }
        let log_path = install::log_file(b.sd)?;
        cx.shell.log_to(&log_path).map_err(|e| crate::state::run::io_failure("log", &log_path, e))?;
        r.state.log_path = Some(log_path.clone());
        let interrupt = r.interrupt.clone();
        let ctx = ctx(b, cx, &interrupt, r.fence.as_ref());
        let limit = r.timeouts.get(PhaseId::Prepare);
        Ok(install::prepare(&ctx, self.files, self.decision, cx.inv, &log_path, limit, self.upgrade).await?)
    }
}

/// Its act begins once [`begin_install`] made the run an install.
pub struct Install<'a> {
    pub on: &'a Bench<'a>,
}

impl Phase for Install<'_> {
    const ID: PhaseId = PhaseId::Install;
    const STOPS_ITSELF: bool = true;
    type Planned = ();
    type Done = ();

    fn says(&self, _cx: &Cx<'_>) -> String {
        "the installer".into()
    }

    async fn plan(&mut self, _cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<(), NoPlan> {
        Ok(())
    }

    async fn act(self, (): (), cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        let b = self.on;
        let log_path = r.state.log_path.clone().ok_or_else(|| crate::pipeline::phases::missing("the install's log"))?;
        let limit = r.timeouts.get(PhaseId::Install);
        let argv = r.state.installer_command.clone();
        let undeploy = crate::pipeline::day_two::planned_undeploy(r);
        let interrupt = r.interrupt.clone();
        let ctx = ctx(b, cx, &interrupt, r.fence.as_ref());
        // The model the last completed run deployed, when this run picks another.
        if let Some(u) = &undeploy {
            install::undeploy(&ctx, u, &log_path, limit).await?;
        }
        Ok(install::install(&ctx, &argv, cx.inv, &log_path, limit).await?)
    }
}

/// The install begins: from here the run is an install, recorded in `state.json` (its journal,
/// the inputs it was decided from, and the pins it built its bastion from, kept for `eas down`,
/// which must not depend on what the pins say on the day it runs).
pub fn begin_install(
    b: &Bench<'_>,
    facts: &Facts,
    files: &[(String, String)],
    cx: &Cx<'_>,
    r: &mut Runner,
) -> Result<(), Failure> {
    crate::state::records::keep_inputs(b.sd.dir(), facts, &r.plan, files)
        .map_err(|e| Failure::step_next("install", e, "check --state-dir"))?;
    let kept = b.sd.dir().join(crate::state::records::PINS);
    // The pins the run read and built from, kept as they were read, not read again.
    crate::state::journal::write_atomic(&kept, cx.services.pins.to_json().as_bytes())
        .map_err(|e| Failure::step_next("install", e, "check --state-dir"))?;
    r.state.pins_kept = Some(crate::state::journal::KeptPins { file: kept, source: cx.args.select.pins.describe() });
    r.file = Some(b.sd.state_file());
    Ok(())
}

fn ctx<'a>(
    b: &'a Bench<'a>,
    cx: &'a Cx<'a>,
    interrupt: &'a crate::runtime::Interrupt,
    fence: Option<&crate::cluster::lease::Fence>,
) -> install::Ctx<'a> {
    install::Ctx {
        docker: b.docker,
        image: b.image,
        tree: b.work,
        global: cx.global,
        kube: &cx.services.kube,
        shell: cx.shell,
        interrupt,
        fence: fence.cloned(),
    }
}
