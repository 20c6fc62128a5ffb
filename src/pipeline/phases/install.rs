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
use crate::state::journal::State;
use crate::state::ledger::Ledger;

use crate::act::{install, reap};
use crate::cluster::CALL;
use crate::pipeline::phase::Cx;
use crate::pipeline::runner::{Phase, Runner};

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
    /// `init` as classify decided it (with `--upgrade` on the kept tree when the pins moved),
    /// the command the plan printed.
    pub init: &'a [String],
    /// The record the ledger carries on from (its `before` is read from the cluster preflight
    /// reached).
    pub prev: Option<&'a State>,
    /// The facts the install's inputs are kept with.
    pub facts: &'a Facts,
}

impl Phase for Prepare<'_> {
    const ID: PhaseId = PhaseId::Prepare;
    const STOPS_ITSELF: bool = true;
    type Planned = ();
    type Done = ();

    /// The ledger's `before`, read ahead of prepare: what exists before the install, for `eas
    /// down` to keep. The ledger fails closed: the `before` is saved before the installer runs,
    /// and a record left pending (this run's, or a dead run's) is completed from the cluster
    /// afterwards.
    async fn before(&mut self, cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        cx.shell.phase("ledger", "reading what exists before the install, for `eas down` to keep");
        let before = tokio::select! {
            b = cx.services.cluster()?.snapshot_within(CALL, cx.args.ledger_timeout) => b.map_err(|e| {
                Failure::step_next(crate::plan::Step::Ledger, e, "check the API server (`eas doctor`); nothing was installed")
            }),
            _ = r.interrupt().graceful.cancelled() => Err(Failure::Interrupted),
        }?;
        crate::pipeline::phases::keep_own(r, Ledger::begin(self.prev.map(|p| &p.ledger), &before));
        r.save()
    }

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        let b = self.on;
        // The Docker Engine may finish a create or a start the dead run sent just before it died
        // after preflight's sweep: sweep again before this run's installer starts, so two
        // installers never act at once.
        for id in self.dead {
            reap::reap(b.docker, id, cx.shell).await?;
        }
        let log_path = install::log_file(b.sd)?;
        cx.shell.log_to(&log_path).map_err(|e| crate::state::run::io_failure(crate::plan::Step::Log, &log_path, e))?;
        r.journal().logged_to(log_path.clone());
        let interrupt = r.interrupt().clone();
        let ctx = ctx(b, cx, &interrupt, r.fence());
        let limit = r.limit(PhaseId::Prepare);
        Ok(install::prepare(&ctx, self.files, self.decision, cx.inv, &log_path, limit, self.init).await?)
    }

    /// The install begins: from here the run is an install, recorded in `state.json` (its
    /// journal, the inputs it was decided from, and the pins it built its bastion from, kept for
    /// `eas down`, which must not depend on what the pins say on the day it runs).
    fn after(&mut self, cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        let sd = self.on.sd;
        crate::state::records::keep_inputs(sd.dir(), self.facts, r.plan_doc(), self.files)
            .map_err(|e| Failure::step_next(PhaseId::Install, e, "check --state-dir"))?;
        let kept = sd.dir().join(crate::state::records::PINS);
        // The pins the run read and built from, kept as they were read, not read again.
        crate::state::journal::write_atomic(&kept, cx.services.pins.to_json().as_bytes())
            .map_err(|e| Failure::step_next(PhaseId::Install, e, "check --state-dir"))?;
        r.journal().pins_kept(crate::state::journal::KeptPins { file: kept, source: cx.args.select.pins.describe() });
        r.record_in(sd.state_file());
        Ok(())
    }
}

/// Its act begins once prepare's `after` made the run an install.
pub struct Install<'a> {
    pub on: &'a Bench<'a>,
    /// The installer's command, as config decided it.
    pub argv: &'a [String],
    /// The last completed run's model removed first, when classify planned it.
    pub undeploy: Option<&'a [String]>,
}

impl Phase for Install<'_> {
    const ID: PhaseId = PhaseId::Install;
    const STOPS_ITSELF: bool = true;
    type Planned = ();
    type Done = ();

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        let b = self.on;
        let log_path =
            r.journaled().log_path.clone().ok_or_else(|| crate::pipeline::phases::missing("the install's log"))?;
        let limit = r.limit(PhaseId::Install);
        let interrupt = r.interrupt().clone();
        let ctx = ctx(b, cx, &interrupt, r.fence());
        // The model the last completed run deployed, when this run picks another.
        if let Some(u) = self.undeploy {
            install::undeploy(&ctx, u, &log_path, limit).await?;
        }
        Ok(install::install(&ctx, self.argv, cx.inv, &log_path, limit).await?)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::{Fixture, runner, state_dir};
    use crate::plan::PhaseTimeouts;

    /// Prepare's `before` on a cluster: the fake API server holding the recorded desktop cluster,
    /// with no Helm release and no CRD yet (empty lists, as the API server answers them).
    fn before_on(fake: &crate::cluster::fake::Fake) {
        let empty = |kind: &str, api: &str| serde_json::json!({"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": "2497400"}, "items": []});
        fake.answer("GET", "/api/v1/secrets", 200, empty("SecretList", "v1"));
        let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        fake.answer("GET", crds, 200, empty("CustomResourceDefinitionList", "apiextensions.k8s.io/v1"));
    }

    /// The ledger's `before` is what the cluster holds before the install (the recorded
    /// cluster's namespaces), begun as the run's pending record; an API server that refuses the
    /// read stops the run before anything is installed, the ledger untouched.
    #[tokio::test]
    async fn the_ledgers_before_is_read_from_the_cluster_and_a_refusal_stops_before_the_install() {
        let fake = crate::cluster::fake::Fake::recorded("k3d-gpu-desktop");
        let (f, (root, sd)) = (Fixture::on(&fake), state_dir());
        let facts = crate::pipeline::runner::tests::desktop_facts();
        let decision = crate::config::generate(&facts, &crate::settings::Select::default()).unwrap();
        let docker = bollard::Docker::connect_with_host("tcp://127.0.0.1:1").unwrap();
        let work = root.path().join("work");
        let bench = Bench { docker: &docker, image: "eas-bastion:test", work: &work, sd: &sd };
        before_on(&fake);
        let (files, init) = (Vec::new(), Vec::new());
        let mut prepare = Prepare {
            on: &bench,
            files: &files,
            decision: &decision,
            dead: &[],
            init: &init,
            prev: None,
            facts: &facts,
        };
        let mut r = runner(PhaseTimeouts::default());
        prepare.before(&f.cx(), &mut r).await.unwrap();
        let pending = r.journaled().ledger.pending.clone().expect("the before is pending until the after is read");
        let names: Vec<&str> = pending.namespaces.iter().map(String::as_str).collect();
        assert_eq!(
            names,
            ["default", "habana-system", "kube-node-lease", "kube-public", "kube-system", "node-feature-discovery"]
        );
        assert!(pending.helm_releases.is_empty() && pending.crds.is_empty());
        assert!(fake.asked().iter().all(|a| a.starts_with("GET ")), "the before only reads: {:?}", fake.asked());

        fake.refuse("GET", "/api/v1/namespaces", 403, "Forbidden", "namespaces is forbidden");
        let mut r = runner(PhaseTimeouts::default());
        let e = prepare.before(&f.cx(), &mut r).await.unwrap_err();
        let said = e.lines().join("\n");
        assert!(said.starts_with("error: ledger: ") && said.contains("403 Forbidden"), "{said}");
        assert!(said.contains("nothing was installed"), "{said}");
        assert!(r.journaled().ledger.pending.is_none(), "nothing begun");
    }

    /// The installer never starts without the log prepare opened (the run's record of what it
    /// did): its act fails before it asks the Docker Engine anything (the one here answers
    /// nothing), naming what was missing.
    #[tokio::test]
    async fn the_installer_does_not_start_without_the_log_prepare_opened() {
        let (mut r, f, (root, sd)) = (runner(PhaseTimeouts::default()), Fixture::new(), state_dir());
        let docker = bollard::Docker::connect_with_host("tcp://127.0.0.1:1").unwrap();
        let work = root.path().join("work");
        let bench = Bench { docker: &docker, image: "eas-bastion:test", work: &work, sd: &sd };
        let argv = vec!["install".to_string()];
        let mut install = Install { on: &bench, argv: &argv, undeploy: None };
        assert!(r.journaled().log_path.is_none());
        let e = install.act((), &f.cx(), &mut r).await.unwrap_err();
        let said = e.lines().join("\n");
        assert!(said.contains("the install's log was not planned"), "{said}");
    }
}
