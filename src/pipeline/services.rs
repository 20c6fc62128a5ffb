//! What a run resolves once, before its first phase, and hands every phase in the context
//! ([`crate::pipeline::phase::Cx`]): the pins (read from their source once), the proxy settings
//! (read from the environment once) and the kubeconfig source (`--kubeconfig`, `KUBECONFIG`,
//! `~/.kube/config`). A phase uses the one it is handed and resolves none of them again, so two
//! phases of one run never see two different answers (a pins file edited mid-run, say).
//! The Docker Engine is connected the first time a phase asks ([`Services::engine`]) and only
//! then: preflight's check asks, and `eas doctor`'s host check beside it waits for the same
//! answer rather than connecting again. The cluster (its API client, a [`Cluster`] with methods,
//! and how it was reached) is preflight's plan half's to build, once: it hands it here
//! ([`Services::found`]) and every later phase reads it from the context ([`Services::cluster`]).

use crate::act::bastion::image::EngineDown;
use crate::cluster::{Cluster, Target};
use crate::error::Failure;
use crate::kubeconfig::KubeSource;
use crate::net::proxy::ProxyEnv;
use crate::pins::{Pins, PinsError};
use crate::settings::{Global, Select};

pub struct Services {
    /// The pins `--pins`, `EAS_PINS` or the user's file name (else the built-in ones), read once.
    pub pins: Pins,
    /// The host's proxy variables, for eas's own connections and the bastion's.
    pub proxy: ProxyEnv,
    /// The kubeconfig the global flags and the environment name.
    pub kube: KubeSource,
    /// The Docker Engine, or why none answered, once asked.
    docker: tokio::sync::OnceCell<Result<bollard::Docker, EngineDown>>,
    /// The cluster preflight reached, from its plan half on.
    target: std::sync::OnceLock<Target>,
}

impl Services {
    /// The pins read (the selection's source), the proxy settings and the kubeconfig source.
    pub fn resolve(select: &Select, global: &Global) -> Result<Services, PinsError> {
        Services::resolve_on(select, Services::host(global))
    }

    /// [`Services::resolve`] with the host's settings already read (`eas doctor` reads them
    /// first, for its API server check).
    pub fn resolve_on(select: &Select, (proxy, kube): (ProxyEnv, KubeSource)) -> Result<Services, PinsError> {
        let pins = select.pins.load()?;
        Ok(Services { pins, proxy, kube, docker: Default::default(), target: Default::default() })
    }

    /// The Docker Engine the environment names (`DOCKER_HOST`, else the local socket), connected
    /// and asked its version on the first call, within [`crate::settings::timeouts::DOCKER_CALL`];
    /// every later call (a concurrent one waits) gets that same answer.
    pub async fn engine(&self, global: &Global) -> Result<bollard::Docker, EngineDown> {
        let connect = || crate::act::bastion::image::engine(&global.env, crate::settings::timeouts::DOCKER_CALL);
        self.docker.get_or_init(connect).await.clone()
    }

    /// Preflight's plan half: the cluster it reached (once; a second call changes nothing).
    pub fn found(&self, target: Target) {
        let _ = self.target.set(target);
    }

    /// The cluster preflight reached and how (its context, server, proxy and credentials, to
    /// name them when a call fails).
    pub fn target(&self) -> Result<&Target, Failure> {
        let missing = || Failure::step(crate::plan::Step::Plan, "the cluster was not reached before this phase");
        self.target.get().ok_or_else(missing)
    }

    /// The cluster preflight reached, for a phase to read and write through.
    pub fn cluster(&self) -> Result<&Cluster, Failure> {
        self.target().map(|t| &t.cluster)
    }

    /// What the host's environment says, read once: the proxy settings and the kubeconfig
    /// source. `eas down` resolves only these before its first phase: it reads pins only when
    /// it must build a teardown image from today's pins, so a pins file it does not need never
    /// stops it.
    pub fn host(global: &Global) -> (ProxyEnv, KubeSource) {
        (ProxyEnv::from_lookup(global.env.lookup()), KubeSource::resolve(global))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An engine address that takes connections and closes them unanswered, counting them.
    fn closing_engine() -> (String, std::sync::Arc<AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("tcp://{}", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                count.fetch_add(1, Ordering::SeqCst);
                drop(conn);
            }
        });
        (addr, accepted)
    }

    fn global_on(addr: &str) -> Global {
        Global { env: crate::settings::Env::of(&[("DOCKER_HOST", addr)]), ..Default::default() }
    }

    /// One run asks its Docker Engine once: preflight's check, doctor's host check beside it
    /// and any later ask get the first answer (here: the engine closes the connection), with no
    /// second connection. Another run's services connect again.
    #[tokio::test]
    async fn the_engine_is_asked_once_per_run_whatever_asks_it() {
        let (addr, accepted) = closing_engine();
        let global = global_on(&addr);
        let select = Select::default();
        let once = Services::resolve(&select, &global).unwrap();
        once.engine(&global).await.unwrap_err();
        let one_ask = accepted.load(Ordering::SeqCst);
        assert!(one_ask >= 1, "the engine was asked");
        let run = Services::resolve(&select, &global).unwrap();
        let (a, b) = tokio::join!(run.engine(&global), run.engine(&global));
        let later = run.engine(&global).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2 * one_ask, "three asks of one run connect as one");
        let said = a.unwrap_err().to_string();
        assert!(said.starts_with("no Docker Engine answers"), "{said}");
        for e in [b, later] {
            assert_eq!(e.unwrap_err().to_string(), said, "the run's one answer");
        }
    }
}
