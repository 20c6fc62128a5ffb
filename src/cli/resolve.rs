//! Arguments plus the environment seam, resolved once into plain settings.

use super::args::*;
use super::{ConfigArgs, GlobalArgs, OutputArg, OverlayArgs, ProgressArg, SelectArgs};
use crate::act::bastion::{BaseImage, BastionCommand as Bastion, BuildSettings, ImageSettings, RunSettings};
use crate::config::fit::FitSettings;
use crate::gather::{FactsSettings, GatherOptions};
use crate::output::ProgressMode;
use crate::pipeline::down::DownSettings;
use crate::pipeline::settings::{Repos, UpSettings};
use crate::settings::file::{self, ConfigFile};
use crate::settings::source::{Source, Sources, pick};
use crate::settings::{CaBundle, ConfigSettings, Env, Global, NodeFile, NodeSocket, OverlaySettings, Select};
use crate::verify::recorded::VerifySettings;
use std::path::PathBuf;

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

/// The global flags and the environment, as the settings every command shares: the first step of
/// the resolution (kubeconfig, context, state dir and CA bundle: the flag, else the environment,
/// else eas's default), each non-default one's source recorded. A `--ca-bundle` that cannot be
/// read or holds anything but certificates is bad input, before any command runs.
pub fn settings(g: &GlobalArgs, env: Env) -> Result<Global, UsageError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let file = crate::settings::file::find(g.config.as_deref(), env.nonempty(file::ENV_VAR).as_deref(), &cwd)
        .map_err(|e| UsageError { cause: e.cause, hint: e.hint })?;
    let mut sources = Sources::default();
    let path = |p: &PathBuf| p.display().to_string();
    let var = |name: &'static str| env.nonempty(name).map(|v| (PathBuf::from(v), Source::Env(name)));
    let flag = |v: &Option<PathBuf>, name: &'static str| v.clone().map(|v| (v, Source::Flag(name)));
    let from_file = |key: &str| file.as_ref().and_then(|f| Some((f.path(key)?, Source::File(f.shown.clone()))));
    let f = file.as_ref();
    // KUBECONFIG is a list the kubeconfig resolver reads itself: named here, not copied.
    let kubeconfig = [flag(&g.kubeconfig, "--kubeconfig"), var("KUBECONFIG"), from_file("kubeconfig")];
    let kubeconfig = pick(&mut sources, "kubeconfig", kubeconfig, path).filter(|_| !is_env(&sources, "kubeconfig"));
    let context = [
        g.context.clone().map(|c| (c, Source::Flag("--context"))),
        None,
        f.and_then(|f| Some((f.text("context")?, Source::File(f.shown.clone())))),
    ];
    let context = pick(&mut sources, "context", context, String::clone);
    // XDG_STATE_HOME names the directory eas's own directory goes under (the state module adds
    // `eas`, and ignores a relative one).
    let xdg = var("XDG_STATE_HOME").filter(|(d, _)| d.is_absolute()).map(|(d, s)| (d.join("eas"), s));
    let state_dir = [flag(&g.state_dir, "--state-dir"), xdg, from_file("state_dir")];
    let state_dir = pick(&mut sources, "state_dir", state_dir, path).filter(|_| !is_env(&sources, "state_dir"));
    let bundle = [flag(&g.ca_bundle, "--ca-bundle"), var("EAS_CA_BUNDLE"), from_file("ca_bundle")];
    let ca_bundle = match pick(&mut sources, "ca_bundle", bundle, path) {
        Some(p) => Some(CaBundle::load(&p).map_err(usage(
            "pass --ca-bundle a PEM file of CA certificates only (a proxy's or registry's CA); keys never belong in it",
        ))?),
        None => None,
    };
    Ok(Global { kubeconfig, context, state_dir, env, ca_bundle, sources, file })
}

/// Whether `key` came from the environment (the resolver of that setting reads it there itself).
fn is_env(sources: &Sources, key: &str) -> bool {
    matches!(sources.of(key), Source::Env(_))
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

/// The second step of the resolution, for one command: each setting from its flag, else its
/// variable, else the config file (`None` for a command that does not read it), else left to
/// the default (or, for `eas up`, the last install), each non-default one's source recorded.
struct Layers<'a> {
    env: &'a Env,
    file: Option<&'a ConfigFile>,
    sources: Sources,
}

impl<'a> Layers<'a> {
    fn new(global: &'a Global) -> Self {
        Layers { env: &global.env, file: global.file.as_ref(), sources: Sources::default() }
    }

    /// `key` from `flag` (named `flag_name`), else the file's value (`in_file`).
    fn take<T>(
        &mut self,
        key: &'static str,
        (flag, flag_name): (Option<T>, &'static str),
        in_file: impl Fn(&ConfigFile) -> Option<T>,
        show: impl Fn(&T) -> String,
    ) -> Option<T> {
        let file = self.file.and_then(|f| Some((in_file(f)?, Source::File(f.shown.clone()))));
        pick(&mut self.sources, key, [flag.map(|v| (v, Source::Flag(flag_name))), None, file], show)
    }

    /// A switch: as its flag (`--X` on, `--no-X` off, named as given) says, else as the file
    /// says, else off (which the last install may still turn on).
    fn switch(
        &mut self,
        key: &'static str,
        flag: Option<bool>,
        (on, off): (&'static str, &'static str),
        in_file: fn(&ConfigFile) -> Option<bool>,
    ) -> bool {
        let name = if flag == Some(false) { off } else { on };
        self.take(key, (flag, name), in_file, bool::to_string).unwrap_or(false)
    }

    /// A path setting.
    fn path(
        &mut self,
        key: &'static str,
        flag: (Option<PathBuf>, &'static str),
        in_file: fn(&ConfigFile) -> Option<PathBuf>,
    ) -> Option<PathBuf> {
        self.take(key, flag, in_file, |p| p.display().to_string())
    }

    /// The pins, resolved the one way every command resolves them (`--pins`, `EAS_PINS`, the
    /// file's `pins:`, the user's file, built in); the user's file is a default place, not named.
    fn pins(&mut self, flag: Option<&std::path::Path>) -> crate::pins::Source {
        use crate::pins::Source as Pins;
        let pins = self.env.pins_source(flag, self.file.and_then(|f| f.path("pins")).as_deref());
        let source = match &pins {
            Pins::Flag(_) => Source::Flag("--pins"),
            Pins::Env(_) => Source::Env(crate::pins::source::ENV_VAR),
            Pins::File(_) => self.file.map_or(Source::Default, |f| Source::File(f.shown.clone())),
            Pins::User(_) | Pins::Builtin => Source::Default,
        };
        self.sources.set("pins", pins.label(), source);
        pins
    }

    /// The bastion's base image: `--base-image`, else `EAS_BASE_IMAGE`, else the file's.
    fn base(&mut self, a: BaseArgs) -> BaseImage {
        let file = self.file.and_then(|f| Some((f.text("base_image")?, Source::File(f.shown.clone()))));
        let var = self.env.nonempty("EAS_BASE_IMAGE").map(|v| (v, Source::Env("EAS_BASE_IMAGE")));
        let flag = a.base_image.map(|v| (v, Source::Flag("--base-image")));
        let base_image = pick(&mut self.sources, "base_image", [flag, var, file], String::clone);
        let allow = self.switch(
            "allow_unpinned_base",
            super::args::switch(a.allow_unpinned_base, a.no_allow_unpinned_base),
            ("--allow-unpinned-base", "--no-allow-unpinned-base"),
            |f| f.switch("allow_unpinned_base"),
        );
        BaseImage { base_image, allow_unpinned_base: allow }
    }

    /// The selection flags, with the pins resolved, and the layer parsed once: a name that is
    /// neither one eas installs nor one it refuses is bad input. `--profile` or `--ref` on the
    /// command line replaces the file's choice of trees whole (a run selects one of them).
    fn select(&mut self, a: SelectArgs) -> Result<Select, UsageError> {
        let refused = |name: &str| crate::config::data::layers().refused.contains_key(name);
        let layer = self.take("layer", (a.layer, "--layer"), |f| f.text("layer"), String::clone);
        let layer = crate::settings::Layer::parse(layer.as_deref().unwrap_or(DEFAULT_LAYER), refused)
            .map_err(usage("use --layer agent-toolkit (default) or --layer inference"))?;
        let trees_flagged = a.profile.is_some() || a.git_ref.is_some();
        let from_file = |v: Option<String>| v.filter(|_| !trees_flagged);
        let profile = self.take("profile", (a.profile, "--profile"), |f| from_file(f.text("profile")), String::clone);
        let git_ref = self.take("ref", (a.git_ref, "--ref"), |f| from_file(f.text("ref")), String::clone);
        let model = self.take("model", (a.model, "--model"), |f| f.text("model"), String::clone);
        let pins = self.pins(a.pins.as_deref());
        let fit = self.path("fit", (a.fit, "--fit"), |_| None);
        // --repick is this run's alone: never declared, never remembered.
        Ok(Select { layer, profile, git_ref, model, repick: a.repick, pins, fit })
    }

    /// The trees' mirrors.
    fn repos(&mut self, a: RepoArgs) -> Repos {
        Repos {
            eas_repo: self.path("mirrors.eas", (a.eas_repo, "--eas-repo"), |f| f.path("mirrors.eas")),
            ei_repo: self.path("mirrors.ei", (a.ei_repo, "--ei-repo"), |f| f.path("mirrors.ei")),
            eat_repo: self.path("mirrors.eat", (a.eat_repo, "--eat-repo"), |f| f.path("mirrors.eat")),
        }
    }

    /// The node facts eas cannot read itself: the flags' lists, else the file's (one setting
    /// each: a flag replaces the file's whole list).
    fn gather(&mut self, a: GatherArgs, probe: Option<bool>) -> GatherOptions {
        let shown = |v: &Vec<String>| v.join(" ");
        let files = |f: &ConfigFile| {
            let n = f.nodes("nodes.containerd_config");
            (!n.is_empty()).then(|| n.into_iter().map(|(node, file)| NodeFile { node, file: file.into() }).collect())
        };
        let sockets = |f: &ConfigFile| {
            let n = f.nodes("nodes.nri_socket");
            (!n.is_empty())
                .then(|| n.into_iter().map(|(node, p)| NodeSocket { node, present: p == "present" }).collect())
        };
        let flag = |v: Vec<NodeFile>| (!v.is_empty()).then_some(v);
        let containerd_config = self
            .take("nodes.containerd_config", (flag(a.containerd_config), "--containerd-config"), files, |v| {
                shown(&v.iter().map(ToString::to_string).collect())
            })
            .unwrap_or_default();
        let socket = |s: &NodeSocket| format!("{}={}", s.node, if s.present { "present" } else { "absent" });
        let nri = (!a.nri_socket.is_empty()).then_some(a.nri_socket);
        let nri_socket = self
            .take("nodes.nri_socket", (nri, "--nri-socket"), sockets, |v| shown(&v.iter().map(socket).collect()))
            .unwrap_or_default();
        let names = ("--probe-nodes", "--no-probe-nodes");
        let probe_nodes = self.switch("nodes.probe", probe, names, |f| f.switch("nodes.probe"));
        GatherOptions { containerd_config, nri_socket, probe_nodes, ..GatherArgs::default().into() }
    }
}

/// The layer when nothing names one.
const DEFAULT_LAYER: &str = "agent-toolkit";
/// The installer's environment when nothing names one.
const DEFAULT_ENV: &str = "k3d-gpu";

impl From<FitArgs> for FitSettings {
    fn from(a: FitArgs) -> Self {
        FitSettings { facts: a.facts, fit: a.fit, output: a.output.into() }
    }
}

/// `eas config`'s settings.
pub fn config(a: ConfigArgs, env: &Env) -> Result<ConfigSettings, UsageError> {
    // Pure: a facts document in, files out; the config file declares runs against a cluster.
    let select = Layers { env, file: None, sources: Sources::default() }.select(a.select)?;
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

fn image(a: ImageArgs, global: &Global) -> ImageSettings {
    let proxy = crate::net::proxy::ProxyEnv::from_lookup(global.env.lookup());
    let mut layers = Layers::new(global);
    let pins = layers.pins(a.pins.as_deref());
    ImageSettings::new(pins, layers.base(a.base), global, proxy)
}

/// `eas up`'s settings. The timeouts resolve once here: two flags for one phase are a usage
/// error (exit 2).
pub fn up(a: UpArgs, global: &Global) -> Result<UpSettings, UsageError> {
    let mut l = Layers::new(global);
    let secs = |s: &u64| s.to_string();
    let install =
        l.take("timeouts.install", (a.install_timeout, "--install-timeout"), |f| f.seconds("timeouts.install"), secs);
    let verify =
        l.take("timeouts.verify", (a.verify_timeout, "--verify-timeout"), |f| f.seconds("timeouts.verify"), secs);
    let phase_timeouts = crate::plan::PhaseTimeouts::resolve(install, verify, &a.phase_timeout)
        .map_err(usage("give each phase's timeout once"))?;
    let select = l.select(a.select)?;
    let env = l.take("env", (a.env, "--env"), |f| f.text("env"), String::clone).unwrap_or_else(|| DEFAULT_ENV.into());
    let offline = switch(a.offline, a.no_offline);
    let offline = l.switch("offline", offline, ("--offline", "--no-offline"), |f| f.switch("offline"));
    let (repos, image) = (l.repos(a.inputs.repos), l.base(a.inputs.image));
    let gather = l.gather(a.inputs.gather, switch(a.probe_nodes, a.no_probe_nodes));
    if a.plan.is_some() {
        // `--plan DIR` runs with the saved plan's selection (`commands::up`), not the file's.
        for key in ["layer", "profile", "ref", "model", "pins", "fit", "env"] {
            l.sources.set(key, "", Source::Default);
        }
    }
    Ok(UpSettings {
        dry_run: a.dry_run,
        fail_on_blockers: a.fail_on_blockers,
        offline,
        allow_unread: a.allow_unread,
        select,
        env,
        out: a.out,
        plan: a.plan,
        saved: None,
        output: a.output.into(),
        explain: a.explain,
        yes: a.yes,
        break_lock: a.break_lock,
        reinstall: a.reinstall,
        repos,
        image,
        gather,
        ledger_timeout: std::time::Duration::from_secs(a.ledger_timeout),
        phase_timeouts,
        sources: l.sources,
    })
}

/// `eas down`'s settings.
pub fn down(a: DownArgs, global: &Global) -> DownSettings {
    // The layer is the recorded one unless --layer names another: the file declares what `up`
    // selects, and `down` removes what was installed.
    let mut l = Layers::new(global);
    let pins = l.pins(a.pins.as_deref());
    let image = l.base(a.image);
    {
        DownSettings {
            dry_run: a.dry_run,
            layer: a.layer,
            yes: a.yes,
            purge: a.purge,
            acknowledge: a.acknowledge,
            force_incomplete: a.force_incomplete,
            break_lock: a.break_lock,
            pins,
            image,
            timeouts: crate::plan::DownTimeouts::set(
                a.phase_timeout
                    .into_iter()
                    .map(|(id, s)| (id, std::time::Duration::from_secs(s)))
                    .chain([(crate::plan::DownId::Teardown, std::time::Duration::from_secs(a.teardown_timeout))]),
            ),
            sources: l.sources,
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
pub fn doctor(a: DoctorArgs, global: &Global) -> Result<crate::pipeline::doctor::DoctorSettings, UsageError> {
    let args = as_dry_run(a.select, a.env, switch(a.offline, a.no_offline), a.allow_unread, None, a.inputs);
    Ok(crate::pipeline::doctor::DoctorSettings { up: up(args, global)?, output: a.output.into() })
}

/// `eas init`'s settings: `eas up`'s, as a dry run would resolve them.
pub fn init(a: InitArgs, global: &Global) -> Result<UpSettings, UsageError> {
    let (offline, probe) = (switch(a.offline, a.no_offline), switch(a.probe_nodes, a.no_probe_nodes));
    up(as_dry_run(a.select, a.env, offline, Vec::new(), probe, a.inputs), global)
}

/// `eas up --dry-run` with these selection and input flags, and nothing else.
fn as_dry_run(
    select: SelectArgs,
    env: Option<String>,
    offline: Option<bool>,
    allow_unread: Vec<String>,
    probe_nodes: Option<bool>,
    inputs: InputArgs,
) -> UpArgs {
    UpArgs {
        dry_run: true,
        fail_on_blockers: false,
        offline: offline == Some(true),
        no_offline: offline == Some(false),
        allow_unread,
        probe_nodes: probe_nodes == Some(true),
        no_probe_nodes: probe_nodes == Some(false),
        select,
        env,
        out: None,
        plan: None,
        output: OutputArg::Text,
        explain: false,
        yes: false,
        break_lock: false,
        reinstall: false,
        inputs,
        install_timeout: None,
        verify_timeout: None,
        ledger_timeout: crate::settings::timeouts::LEDGER.as_secs(),
        phase_timeout: Vec::new(),
    }
}
