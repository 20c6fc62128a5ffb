//! Arguments plus the environment seam, resolved once into plain settings.

use super::args::*;
use super::{ConfigArgs, GlobalArgs, OverlayArgs, ProgressArg, SelectArgs};
use crate::act::bastion::{BaseImage, BastionCommand as Bastion, BuildSettings, ImageSettings, RunSettings};
use crate::config::fit::FitSettings;
use crate::gather::{FactsSettings, GatherOptions};
use crate::output::ProgressMode;
use crate::pipeline::down::DownSettings;
use crate::pipeline::settings::{Repos, UpSettings};
use crate::settings::{CaBundle, ConfigSettings, Env, Global, OverlaySettings, Select};
use crate::verify::recorded::VerifySettings;

/// A flag the settings cannot take: its one-line cause and the flag that fixes it (the command
/// edge makes it bad input, exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{cause}")]
pub struct UsageError {
    pub cause: String,
    pub hint: &'static str,
}

fn usage(hint: &'static str) -> impl Fn(String) -> UsageError {
    move |cause| UsageError { cause, hint }
}

/// The global flags and the environment, as the settings every command shares. A `--ca-bundle`
/// that cannot be read or holds anything but certificates is bad input, before any command runs.
pub fn settings(g: &GlobalArgs, env: Env) -> Result<Global, UsageError> {
    let ca_bundle = match &g.ca_bundle {
        Some(p) => Some(CaBundle::load(p).map_err(usage(
            "pass --ca-bundle a PEM file of CA certificates only (a proxy's or registry's CA); keys never belong in it",
        ))?),
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

/// The selection flags, with the pins resolved the one way every command resolves them, and the
/// layer parsed once: a name that is neither one eas installs nor one it refuses is bad input.
fn select(a: SelectArgs, env: &Env) -> Result<Select, UsageError> {
    let refused = |name: &str| crate::config::data::layers().refused.contains_key(name);
    let layer = crate::settings::Layer::parse(&a.layer, refused)
        .map_err(usage("use --layer agent-toolkit (default) or --layer inference"))?;
    let pins = env.pins_source(a.pins.as_deref());
    Ok(Select { layer, profile: a.profile, git_ref: a.git_ref, model: a.model, pins, fit: a.fit })
}

impl From<FitArgs> for FitSettings {
    fn from(a: FitArgs) -> Self {
        FitSettings { facts: a.facts, fit: a.fit, output: a.output.into() }
    }
}

/// `eas config`'s settings.
pub fn config(a: ConfigArgs, env: &Env) -> Result<ConfigSettings, UsageError> {
    let select = select(a.select, env)?;
    Ok(ConfigSettings { facts: a.facts, out: a.out, select, catalog: a.catalog, explain: a.explain })
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
            probe_nodes: a.probe_nodes,
            request_timeout: std::time::Duration::from_secs(a.request_timeout),
            output: match a.output {
                Some(FactsOutput::Json) => crate::output::OutputFormat::Json,
                None => crate::output::OutputFormat::Text,
            },
        }
    }
}

impl From<GatherArgs> for GatherOptions {
    fn from(a: GatherArgs) -> Self {
        GatherOptions {
            containerd_config: a.containerd_config,
            nri_socket: a.nri_socket,
            probe_nodes: false,
            command: "eas up",
            discount_namespaces: Default::default(),
        }
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
    let proxy = crate::net::proxy::ProxyEnv::from_lookup(global.env.lookup());
    ImageSettings::new(global.env.pins_source(a.pins.as_deref()), a.base.into(), global, proxy)
}

/// `eas up`'s settings. The timeouts resolve once here: two flags for one phase are a usage
/// error (exit 2).
pub fn up(a: UpArgs, env: &Env) -> Result<UpSettings, UsageError> {
    let phase_timeouts = crate::plan::PhaseTimeouts::resolve(a.install_timeout, a.verify_timeout, &a.phase_timeout)
        .map_err(usage("give each phase's timeout once"))?;
    {
        Ok(UpSettings {
            dry_run: a.dry_run,
            fail_on_blockers: a.fail_on_blockers,
            offline: a.offline,
            allow_unread: a.allow_unread,
            select: select(a.select, env)?,
            env: a.env,
            out: a.out,
            plan: a.plan,
            saved: None,
            output: a.output.into(),
            explain: a.explain,
            yes: a.yes,
            break_lock: a.break_lock,
            reinstall: a.reinstall,
            repos: a.inputs.repos.into(),
            image: a.inputs.image.into(),
            gather: GatherOptions { probe_nodes: a.probe_nodes, ..a.inputs.gather.into() },
            ledger_timeout: std::time::Duration::from_secs(a.ledger_timeout),
            phase_timeouts,
        })
    }
}

/// `eas down`'s settings.
pub fn down(a: DownArgs, env: &Env) -> DownSettings {
    {
        DownSettings {
            dry_run: a.dry_run,
            layer: a.layer,
            yes: a.yes,
            purge: a.purge,
            acknowledge: a.acknowledge,
            force_incomplete: a.force_incomplete,
            break_lock: a.break_lock,
            pins: env.pins_source(a.pins.as_deref()),
            image: a.image.into(),
            timeouts: crate::plan::DownTimeouts::set(
                a.phase_timeout
                    .into_iter()
                    .map(|(id, s)| (id, std::time::Duration::from_secs(s)))
                    .chain([(crate::plan::DownId::Teardown, std::time::Duration::from_secs(a.teardown_timeout))]),
            ),
        }
    }
}

impl From<VerifyArgs> for VerifySettings {
    fn from(a: VerifyArgs) -> Self {
        VerifySettings {
            timeout: std::time::Duration::from_secs(a.timeout),
            devices_timeout: std::time::Duration::from_secs(a.devices_timeout),
            output: a.output.into(),
        }
    }
}

impl From<StatusArgs> for crate::verify::status::StatusSettings {
    fn from(a: StatusArgs) -> Self {
        crate::verify::status::StatusSettings { output: a.output.into() }
    }
}

/// `eas bastion`'s settings (the image's cache and proxy come from the environment).
pub fn bastion(c: BastionCommand, global: &Global) -> Bastion {
    match c {
        BastionCommand::Build(b) => Bastion::Build(BuildSettings {
            image: ImageSettings { build_timeout: std::time::Duration::from_secs(b.timeout), ..image(b.image, global) },
            rebuild: b.rebuild,
            lock: b.lock,
            trust_on_first_use: b.trust_on_first_use,
        }),
        BastionCommand::Run(r) => {
            Bastion::Run(RunSettings { image: image(r.image, global), tree: r.tree, command: r.command })
        }
    }
}

/// `eas doctor`'s settings: `eas up`'s, as a dry run.
pub fn doctor(a: DoctorArgs, env: &Env) -> Result<crate::pipeline::doctor::DoctorSettings, UsageError> {
    {
        let up = UpSettings {
            dry_run: true,
            fail_on_blockers: false,
            offline: a.offline,
            allow_unread: a.allow_unread,
            select: select(a.select, env)?,
            env: a.env,
            out: None,
            plan: None,
            saved: None,
            output: crate::output::OutputFormat::Text,
            explain: false,
            yes: false,
            break_lock: false,
            reinstall: false,
            repos: a.inputs.repos.into(),
            image: a.inputs.image.into(),
            gather: a.inputs.gather.into(),
            ledger_timeout: crate::settings::timeouts::LEDGER,
            phase_timeouts: crate::plan::PhaseTimeouts::default(),
        };
        Ok(crate::pipeline::doctor::DoctorSettings { up, output: a.output.into() })
    }
}
