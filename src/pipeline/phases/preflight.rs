//! Preflight: the plan half reads the cluster's identity (it keys the state; without it nothing
//! can be decided, so its failure ends the plan) and checks Docker and git on this host (each a
//! blocker when it fails), with the egress probe started first so that it overlaps the rest of
//! the plan. The act half, once the lock is held, removes what a killed run left: its
//! containers, its scratch work trees and its probe pods.

use std::time::Duration;

use crate::act::bastion;
use crate::error::Failure;
use crate::gather;
use crate::plan::PhaseId;
use crate::settings::Global;
use crate::state::StateDir;

use crate::act::reap;
use crate::cluster::{self, CALL};
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::runner::{Phase, Runner};
use crate::pipeline::services::Services;
use crate::state::run::state_root;

/// The plan half's phase; at act time it carries what the lock's act found.
#[derive(Default)]
pub struct Preflight<'a> {
    /// The run ids of the runs that held the lock or the Lease and are no longer alive (their
    /// containers are removed).
    pub dead: Vec<String>,
    /// This run's own scratch work tree, which the sweep keeps.
    pub own: Option<&'a std::path::Path>,
}

/// What the preflight settled: the cluster's key, context and server (the cluster itself it
/// hands the run's services: [`Services::found`]), its state directory, the Docker Engine (`None`:
/// a blocker says why) and the egress probe in flight.
pub struct Pre {
    /// The kubeconfig context and the API server, as the record names them.
    pub context: String,
    pub server: String,
    pub sd: StateDir,
    pub key: String,
    /// The run's one connection to the Docker Engine (the facts, the bastion, the installer).
    pub docker: Option<bollard::Docker>,
    /// Where the engine was asked for, and why it did not answer, for the facts.
    docker_addr: String,
    docker_down: Option<crate::gather::docker::DockerError>,
    /// `None` with `--offline` (or once its answers are taken).
    pub egress: Option<Egress>,
}

impl Phase for Preflight<'_> {
    const ID: PhaseId = PhaseId::Preflight;
    const ENDS_PLAN: bool = true;
    type Planned = Pre;
    type Done = Pre;

    async fn plan(&mut self, cx: &Cx<'_>, found: &mut Vec<Failure>) -> Result<Pre, NoPlan> {
        let egress = start_egress(cx);
        let target = gather::target_at(&cx.services.kube, &cx.services.proxy, CALL).await.map_err(Failure::from)?;
        let (context, server) = (target.context.clone(), target.server.clone());
        cx.services.found(target);
        let key = identify(cx.services.target()?).await?;
        let sd = StateDir::new(&state_root(cx.global).map_err(Failure::from)?, &key).map_err(Failure::from)?;
        let (engine, git) = tokio::join!(cx.services.engine(cx.global), git_check());
        let docker_addr = crate::docker_host::resolve(&cx.global.env);
        let (docker, docker_down) = match engine {
            Ok(d) => (Some(d), None),
            Err(e) => {
                found.push(docker_failure(&e));
                (None, Some(e.unreachable))
            }
        };
        if let Err(f) = git {
            found.push(f);
        }
        Ok(Pre { context, server, sd, key, docker, docker_addr, docker_down, egress })
    }

    fn note(&mut self, pre: &mut Pre, r: &mut Runner) -> Result<(), Failure> {
        r.journal().identified(&pre.key, &pre.context, &pre.server);
        r.attempt_in(pre.sd.dir().join(crate::pipeline::settings::ATTEMPT));
        Ok(())
    }

    async fn act(&mut self, pre: Pre, cx: &Cx<'_>, r: &mut Runner) -> Result<Pre, Failure> {
        let docker = pre.docker.as_ref().ok_or_else(|| crate::pipeline::phases::missing("the Docker Engine"))?;
        for id in &self.dead {
            reap::reap(docker, id, cx.shell).await?;
        }
        if let Some(own) = self.own {
            sweep_work_trees(&pre.sd, own, cx.shell);
        }
        let interrupt = r.interrupt().clone();
        crate::pipeline::down::find::sweep_probes(cx.services.cluster()?, cx.shell, &interrupt).await?;
        Ok(pre)
    }
}

/// The egress probe in flight (`prereq::egress`), and how it reaches the hosts, for its line.
/// Dropped unfinished (an interrupted plan), it is aborted.
pub struct Egress {
    task: Option<tokio::task::JoinHandle<Vec<(crate::prereq::egress::Host, crate::prereq::egress::Answer)>>>,
    through: String,
}

impl Drop for Egress {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// Starts the egress probe with the proxy settings the bastion gets, unless `--offline` (again
/// when the last install filled the profile or offline: `recorded::after_preflight`).
pub fn start_egress(cx: &Cx<'_>) -> Option<Egress> {
    use crate::prereq::egress;
    let (args, global) = (cx.args, cx.global);
    if args.offline {
        return None;
    }
    let env = &global.env;
    let proxy = cx.services.proxy.clone();
    let hosts = egress::hosts(args.select.profile.as_deref().unwrap_or("main"), env.var(egress::OVERRIDE).as_deref());
    let through = match hosts.first().map(|h| crate::net::proxy::route_for(&h.url, &proxy, None)) {
        Some(Ok(Some(route))) => format!("through {route}"),
        _ => "directly".to_string(),
    };
    let roots = global.ca_bundle.as_ref().map(|b| b.ders.clone()).unwrap_or_default();
    let d = crate::net::download::Downloader::with_timeouts(&roots, proxy, egress::CONNECT, egress::TOTAL).ok()?;
    let task = tokio::spawn(async move { egress::probe(&d, &hosts).await });
    Some(Egress { task: Some(task), through })
}

impl Egress {
    /// The probe's line; a probe that failed to run is a warning with its cause.
    pub async fn check(mut self) -> crate::prereq::Check {
        let Some(task) = self.task.take() else { return crate::prereq::egress::check(Some(&[]), &self.through) };
        match task.await {
            Ok(answers) => crate::prereq::egress::check(Some(&answers), &self.through),
            Err(e) => crate::prereq::egress::check(Some(&[]), &format!("(the probe failed: {e})")),
        }
    }
}

/// The cluster's identity (the `kube-system` namespace's uid), which keys its state directory.
async fn identify(target: &crate::cluster::Target) -> Result<String, Failure> {
    target.cluster.identity(CALL).await.map_err(|e| identity_failure(target, e))
}

/// The preflight's failure to read the cluster's identity. When no answer came through a proxy,
/// the proxy is named (credentials masked) with what to check, as `eas facts` does.
fn identity_failure(target: &crate::cluster::Target, e: cluster::ApiError) -> Failure {
    use crate::cluster::ApiError;
    let (server, proxy) = (target.server.clone(), target.proxy.clone());
    let e = match (e, proxy.is_some()) {
        (ApiError::NoConnection { call, cause }, true) => ApiError::Unreachable { server, call, cause, proxy },
        (ApiError::NoAnswer { call, secs }, true) => ApiError::Timeout { server, call, secs, proxy },
        (e, _) => return Failure::step_next(PhaseId::Preflight, e, "check the API server (`eas doctor`)"),
    };
    let next = e.next();
    Failure::step_next(PhaseId::Preflight, e, next)
}

impl Pre {
    /// The engine as preflight met it, for the gatherer: the same connection, or the same cause.
    pub fn reach(&self) -> crate::gather::docker::Reach {
        let docker = match (&self.docker, &self.docker_down) {
            (Some(d), _) => Ok(d.clone()),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err(crate::gather::docker::DockerError::Unreachable {
                addr: self.docker_addr.clone(),
                cause: "not reached".into(),
            }),
        };
        crate::gather::docker::Reach::Met { addr: self.docker_addr.clone(), docker }
    }
}

/// Docker (the run's one connection: [`Services::engine`]) and git, the host's part of
/// preflight: each a blocker when it fails.
pub async fn host_checks(
    services: &Services,
    global: &Global,
) -> (Result<bollard::Docker, Failure>, Result<(), Failure>) {
    let (docker, git) = tokio::join!(services.engine(global), git_check());
    (docker.map_err(|e| docker_failure(&e)), git)
}

fn docker_failure(e: &bastion::image::EngineDown) -> Failure {
    Failure::step_next(PhaseId::Preflight, e, crate::hints::DOCKER)
}

async fn git_check() -> Result<(), Failure> {
    crate::git::run(None, &["--version"], Duration::from_secs(10))
        .await
        .map(drop)
        .map_err(|e| Failure::step_next(PhaseId::Preflight, e, "install git"))
}

/// A real run removes the work trees a killed run left (`eas.next-*`) before it goes on: it holds
/// the lock, so none is another live run's. Its own scratch tree stays. What cannot be removed
/// is named and left.
fn sweep_work_trees(sd: &StateDir, own: &std::path::Path, shell: &crate::output::Shell) {
    let work = sd.work_dir();
    let entries = match std::fs::read_dir(&work) {
        Ok(e) => e,
        Err(_) => return,
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir
            && name.to_string_lossy().starts_with(crate::pipeline::settings::NEXT)
            && path != own
            && let Err(e) = std::fs::remove_dir_all(&path)
        {
            shell.warn(format!("an earlier run's work tree {} was not removed: {e}", path.display()));
        }
    }
}

/// The cluster the phases' tests reach: the context `k3d-gpu` at a local server, whose API
/// client is `cluster` (an in-memory API server: [`crate::cluster::fake`]).
#[cfg(test)]
pub(crate) fn sample_target(cluster: cluster::Cluster) -> crate::cluster::Target {
    crate::cluster::Target {
        context: "k3d-gpu".into(),
        server: "https://127.0.0.1:6443".into(),
        cluster,
        plugin: None,
        proxy: None,
        credentials: String::new(),
    }
}

/// A preflight's answer for the phases' tests: the cluster `k3d-gpu` ([`sample_target`], which a
/// test hands its fixture's services), its state directory under `root`, no Docker Engine.
#[cfg(test)]
pub(crate) fn sample(root: &std::path::Path) -> Pre {
    Pre {
        context: "k3d-gpu".into(),
        server: "https://127.0.0.1:6443".into(),
        sd: StateDir::new(root, "cluster-key").unwrap(),
        key: "cluster-key".into(),
        docker: None,
        docker_addr: "unix:///nonexistent/docker.sock".into(),
        docker_down: None,
        egress: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::Fixture;

    /// The identity is the recorded cluster's `kube-system` uid, read with one GET; an API
    /// server that refuses it fails preflight in its own words, with `eas doctor` as the way on.
    #[tokio::test]
    async fn the_identity_is_kube_systems_uid_and_a_refusal_fails_preflight() {
        let fake = crate::cluster::fake::Fake::recorded("k3d-gpu-desktop");
        let target = sample_target(fake.cluster());
        assert_eq!(identify(&target).await.unwrap(), "7ebf0d55-f320-52e6-9698-f09f0770f7fe");
        assert_eq!(fake.asked(), ["GET /api/v1/namespaces/kube-system"]);
        let denied = "namespaces \"kube-system\" is forbidden: User \"eas\" cannot get resource \"namespaces\"";
        fake.refuse("GET", "/api/v1/namespaces/kube-system", 403, "Forbidden", denied);
        let f = identify(&target).await.unwrap_err();
        let lines = f.lines().join("\n");
        assert!(lines.contains("get namespace kube-system: 403 Forbidden"), "{lines}");
        assert!(lines.contains("`eas doctor`"), "{lines}");
    }

    /// Under the lock, the work trees a killed run left (`eas.next-*`) go; this run's own, the
    /// kept work tree and anything not named so stay.
    #[test]
    fn the_sweep_removes_only_the_scratch_trees_other_runs_left() {
        let (_root, sd) = crate::pipeline::runner::tests::state_dir();
        let work = sd.work_dir();
        let next = |s: &str| work.join(format!("{}{s}", crate::pipeline::settings::NEXT));
        for d in [next("killed"), next("own"), work.join("eas")] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
        }
        std::fs::write(next("a-file"), "not a tree").unwrap();
        let f = Fixture::new();
        sweep_work_trees(&sd, &next("own"), f.cx().shell);
        assert!(!next("killed").exists(), "a killed run's scratch tree is removed");
        assert!(next("own").exists() && work.join("eas").exists() && next("a-file").exists());
    }
}
