//! What a run resolves once, before its first phase, and hands every phase in the context
//! ([`crate::pipeline::phase::Cx`]): the pins (read from their source once), the proxy settings
//! (read from the environment once) and the kubeconfig source (`--kubeconfig`, `KUBECONFIG`,
//! `~/.kube/config`). A phase uses the one it is handed and resolves none of them again, so two
//! phases of one run never see two different answers (a pins file edited mid-run, say).
//! What needs the cluster or the engine is preflight's: the cluster's target and the Docker
//! Engine, in its planned value.

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
}

impl Services {
    /// The pins read (the selection's source), the proxy settings and the kubeconfig source.
    pub fn resolve(select: &Select, global: &Global) -> Result<Services, PinsError> {
        let pins = select.pins.load()?;
        let (proxy, kube) = Services::host(global);
        Ok(Services { pins, proxy, kube })
    }

    /// What the host's environment says, read once: the proxy settings and the kubeconfig
    /// source. `eas down` resolves only these before its first phase: it reads pins only when
    /// it must build a teardown image from today's pins, so a pins file it does not need never
    /// stops it.
    pub fn host(global: &Global) -> (ProxyEnv, KubeSource) {
        (ProxyEnv::from_lookup(global.env.lookup()), KubeSource::resolve(global))
    }
}
