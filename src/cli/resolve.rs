//! Arguments plus the environment seam, resolved once into plain settings.

use super::args::*;
use super::{ConfigArgs, GlobalArgs, OverlayArgs, ProgressArg, SelectArgs};
use crate::bastion::{BaseImage, BastionCommand as Bastion, BuildSettings, ImageSettings, RunSettings};
use crate::config::fit::command::FitSettings;
use crate::error::Failure;
use crate::gather::{FactsSettings, GatherOptions};
use crate::output::ProgressMode;
use crate::settings::{CaBundle, ConfigSettings, Env, Global, OverlaySettings, Select};
use crate::up::down::DownSettings;
use crate::up::{Repos, UpSettings, VerifySettings};

/// The global flags and the environment, as the settings every command shares. A `--ca-bundle`
/// that cannot be read or holds anything but certificates is bad input, before any command runs.
pub fn settings(g: &GlobalArgs, env: Env) -> Result<Global, Failure> {
    let ca_bundle = match &g.ca_bundle {
        Some(p) => Some(CaBundle::load(p).map_err(|cause| {
            Failure::bad_input(
                cause,
                "pass --ca-bundle a PEM file of CA certificates only (a proxy's or registry's CA); keys never belong in it",
            )
        })?),
        None => None,
    };
    Ok(Global {
        kubeconfig: g.kubeconfig.clone(),
        context: g.context.clone(),
        state_dir: g.state_dir.clone(),
        env,
        ca_bundle,
    })
}

impl From<ProgressArg> for ProgressMode {
    fn from(p: ProgressArg) -> Self {
        match p {
            ProgressArg::Auto => ProgressMode::Auto,
            ProgressArg::Tty => ProgressMode::Tty,
            ProgressArg::Plain => ProgressMode::Plain,
        }
    }
}

impl From<SelectArgs> for Select {
    fn from(a: SelectArgs) -> Self {
        Select { layer: a.layer, profile: a.profile, git_ref: a.git_ref, model: a.model, pins: a.pins, fit: a.fit }
    }
}

impl From<FitArgs> for FitSettings {
    fn from(a: FitArgs) -> Self {
        FitSettings { facts: a.facts, fit: a.fit, output: a.output.into() }
    }
}

impl From<ConfigArgs> for ConfigSettings {
    fn from(a: ConfigArgs) -> Self {
        ConfigSettings { facts: a.facts, out: a.out, select: a.select.into(), catalog: a.catalog, explain: a.explain }
    }
}

impl From<OverlayArgs> for OverlaySettings {
    fn from(a: OverlayArgs) -> Self {
        OverlaySettings { repo: a.repo, facts: a.facts, apply: a.apply, explain: a.explain, overlay: a.overlay }
    }
}

impl From<FactsArgs> for FactsSettings {
    fn from(a: FactsArgs) -> Self {
        FactsSettings {
            out: a.out,
            containerd_config: a.containerd_config,
            nri_socket: a.nri_socket,
            request_timeout: a.request_timeout,
            output: a.output.into(),
        }
    }
}

impl From<GatherArgs> for GatherOptions {
    fn from(a: GatherArgs) -> Self {
        GatherOptions { containerd_config: a.containerd_config, nri_socket: a.nri_socket, command: "eas up" }
    }
}

impl From<RepoArgs> for Repos {
    fn from(a: RepoArgs) -> Self {
        Repos { eas_repo: a.eas_repo, ei_repo: a.ei_repo, eat_repo: a.eat_repo }
    }
}

impl From<BaseArgs> for BaseImage {
    fn from(a: BaseArgs) -> Self {
        BaseImage { base_image: a.base_image, allow_unpinned_base: a.allow_unpinned_base }
    }
}

fn image(a: ImageArgs, global: &Global) -> ImageSettings {
    ImageSettings::new(a.pins, a.base.into(), global)
}

impl From<UpArgs> for UpSettings {
    fn from(a: UpArgs) -> Self {
        UpSettings {
            dry_run: a.dry_run,
            allow_unread: a.allow_unread,
            select: a.select.into(),
            env: a.env,
            out: a.out,
            output: a.output.into(),
            explain: a.explain,
            yes: a.yes,
            break_lock: a.break_lock,
            repos: a.repos.into(),
            image: a.image.into(),
            gather: a.gather.into(),
            install_timeout: a.install_timeout,
            verify_timeout: a.verify_timeout,
            ledger_timeout: a.ledger_timeout,
            phase_timeouts: crate::up::phase::PhaseTimeouts::new(
                a.phase_timeout.into_iter().map(|(id, secs)| (id, std::time::Duration::from_secs(secs))),
            ),
        }
    }
}

impl From<DownArgs> for DownSettings {
    fn from(a: DownArgs) -> Self {
        DownSettings {
            layer: a.layer,
            yes: a.yes,
            purge: a.purge,
            acknowledge: a.acknowledge,
            force_incomplete: a.force_incomplete,
            break_lock: a.break_lock,
            pins: a.pins,
            image: a.image.into(),
            teardown_timeout: a.teardown_timeout,
        }
    }
}

impl From<VerifyArgs> for VerifySettings {
    fn from(a: VerifyArgs) -> Self {
        VerifySettings { timeout: a.timeout, devices_timeout: a.devices_timeout, output: a.output.into() }
    }
}

impl From<StatusArgs> for crate::status::StatusSettings {
    fn from(a: StatusArgs) -> Self {
        crate::status::StatusSettings { output: a.output.into() }
    }
}

/// `eas bastion`'s settings (the image's cache and proxy come from the environment).
pub fn bastion(c: BastionCommand, global: &Global) -> Bastion {
    match c {
        BastionCommand::Build(b) => Bastion::Build(BuildSettings {
            image: image(b.image, global),
            rebuild: b.rebuild,
            lock: b.lock,
            trust_on_first_use: b.trust_on_first_use,
        }),
        BastionCommand::Run(r) => {
            Bastion::Run(RunSettings { image: image(r.image, global), tree: r.tree, command: r.command })
        }
    }
}
