//! The arguments of `facts`, `up`, `down`, `verify` and `bastion`, as clap parses them.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::SelectArgs;
use crate::plan::{DownId, PhaseId};
use crate::settings::{NodeFile, NodeSocket, timeouts};

#[derive(Args, Debug, Clone)]
pub struct FitArgs {
    /// Facts document (eas-facts/v1 JSON)
    #[arg(long, value_name = "FILE")]
    pub facts: PathBuf,
    /// An external `k3d-gpu fit` document; it wins, and every disagreement is a warning
    #[arg(long, value_name = "FILE")]
    pub fit: Option<PathBuf>,
    /// text (a table, for a person; `table` is the same) or json: the fit document (`eas schema eas-fit/v1`)
    #[arg(long, value_enum, default_value = "text")]
    pub output: super::OutputArg,
}

#[derive(Args, Debug, Clone)]
pub struct FactsArgs {
    /// Write the facts document to FILE instead of stdout
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// A node's containerd config (a copy of its /var/lib/rancher/k3s/agent/etc/containerd/config.toml),
    /// for nodes eas cannot read itself; NODE `*` means every other node. Repeatable
    #[arg(long = "containerd-config", value_name = "NODE=FILE", value_parser = node_file)]
    pub containerd_config: Vec<NodeFile>,
    /// Whether a node's NRI socket exists, for a node given with --containerd-config
    /// [default: whether that config enables NRI]. Repeatable
    #[arg(long = "nri-socket", value_name = "NODE=present|absent", value_parser = node_socket)]
    pub nri_socket: Vec<NodeSocket>,
    /// Read the containerd facts of a node eas cannot read otherwise with a short-lived read-only
    /// pod on it (the one form of `eas facts` that writes: the pod, deleted at once)
    #[arg(long)]
    pub probe_nodes: bool,
    /// Seconds each API call may take (each Docker call: at most 10)
    #[arg(long, value_name = "SECS", default_value_t = timeouts::CALL.as_secs())]
    pub request_timeout: u64,
    /// The facts are JSON either way (`json` is the one value): with --out, also print them on stdout
    #[arg(long, value_enum)]
    pub output: Option<FactsOutput>,
}

/// `eas facts --output`: the facts document is JSON whatever is asked, so `text` is refused
/// while parsing rather than silently printing JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FactsOutput {
    Json,
}

/// `--containerd-config NODE=FILE`, checked while parsing: a typo fails before any cluster call
/// (the file's content is checked where it is read, in gather).
fn node_file(s: &str) -> Result<NodeFile, String> {
    let parsed = NodeFile::parse(s)?;
    match parsed.file.is_file() {
        true => Ok(parsed),
        false => Err(format!(
            "{} is not a file (NODE=FILE names a copy of the node's containerd config.toml)",
            parsed.file.display()
        )),
    }
}

/// `--nri-socket NODE=present|absent`, checked while parsing.
fn node_socket(s: &str) -> Result<NodeSocket, String> {
    NodeSocket::parse(s)
}

/// The operator-supplied node facts `eas up` takes too (the flags of `eas facts`).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Node facts")]
pub struct GatherArgs {
    /// A node's containerd config.toml, for a node eas cannot read (repeatable)
    #[arg(long = "containerd-config", value_name = "NODE=FILE", value_parser = node_file)]
    pub containerd_config: Vec<NodeFile>,
    /// Whether a node has the NRI socket, for a node eas cannot read (repeatable)
    #[arg(long = "nri-socket", value_name = "NODE=present|absent", value_parser = node_socket)]
    pub nri_socket: Vec<NodeSocket>,
}

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Everything that reads, nothing that writes: print the plan
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: exit with the first blocker's exit code (0 when there is none), for CI
    #[arg(long, requires = "dry_run")]
    pub fail_on_blockers: bool,
    /// Read nothing from Hugging Face (the models' figures from the cache, else the built-in data)
    /// and skip the egress check of the registries the install needs
    #[arg(long, overrides_with = "no_offline")]
    pub offline: bool,
    /// Not offline, whatever eas.yaml or the last install says (the later of --offline and
    /// --no-offline wins)
    #[arg(long, overrides_with = "offline", hide_short_help = true)]
    pub no_offline: bool,
    /// Proceed although nothing in the pinned trees reads this written key (repeatable)
    #[arg(long = "allow-unread", value_name = "KEY")]
    pub allow_unread: Vec<String>,
    /// Read the containerd facts of a node eas cannot read otherwise with a short-lived read-only
    /// pod on it (created and deleted by the dry run too)
    #[arg(long, help_heading = "Node facts", overrides_with = "no_probe_nodes")]
    pub probe_nodes: bool,
    /// No probe pod, whatever eas.yaml or the last install says (the later of --probe-nodes and
    /// --no-probe-nodes wins)
    #[arg(long, help_heading = "Node facts", overrides_with = "probe_nodes", hide_short_help = true)]
    pub no_probe_nodes: bool,
    #[command(flatten)]
    pub select: SelectArgs,
    /// The installer's environment name (env/<name>/ in the EAS tree) [default: k3d-gpu]
    #[arg(long)]
    pub env: Option<String>,
    /// With --dry-run: also write plan.json, the plan's text (plan.txt) and the generated files
    /// here; a refused plan (exit 3) writes plan.json and plan.txt only
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub out: Option<PathBuf>,
    /// Apply the plan a dry run saved with --out DIR, and nothing else: its selection is the
    /// run's (selection flags are refused beside it); the run stops before its first write,
    /// naming each difference, when the pins, the trees, a decision, the model pick, the
    /// overlay, the bastion image or the installer's command lines are no longer those planned
    #[arg(
        long = "plan",
        value_name = "DIR",
        conflicts_with_all = ["layer", "profile", "git_ref", "model", "repick", "pins", "fit", "env"]
    )]
    pub plan: Option<PathBuf>,
    /// With --dry-run: `json` prints the plan (eas-plan/v1) as one JSON document on stdout
    #[arg(long, value_enum, default_value = "text", requires_if("json", "dry_run"))]
    pub output: super::OutputArg,
    /// With --dry-run: add each decision's source as a permalink to the plan
    #[arg(long, requires = "dry_run")]
    pub explain: bool,
    /// Do not ask before changing the cluster (required without a terminal)
    #[arg(long)]
    pub yes: bool,
    /// Take over a lock or cluster Lease left by a run that is gone, first removing its containers on this engine
    #[arg(long)]
    pub break_lock: bool,
    /// Run the installer even when nothing changed since the last completed run
    #[arg(long)]
    pub reinstall: bool,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// How long the installer may run, in seconds [default: 5400]
    #[arg(long, value_name = "SECS", help_heading = "Timeouts")]
    pub install_timeout: Option<u64>,
    /// How long verification may take (the devices and the model servers), in seconds [default: 2400]
    #[arg(long, value_name = "SECS", help_heading = "Timeouts")]
    pub verify_timeout: Option<u64>,
    /// How long a ledger snapshot is retried before the record is marked incomplete, in seconds
    #[arg(long, value_name = "SECS", default_value_t = timeouts::LEDGER.as_secs(), hide = true)]
    pub ledger_timeout: u64,
    /// Set a phase's act-half timeout (tests): PHASE=SECS, repeatable
    #[arg(long, value_name = "PHASE=SECS", hide = true, value_parser = phase_timeout)]
    pub phase_timeout: Vec<(PhaseId, u64)>,
}

/// `PHASE=SECS`, the phase found by `named`.
fn named_secs<T>(s: &str, named: impl Fn(&str) -> Result<T, String>) -> Result<(T, u64), String> {
    let (name, secs) = s.split_once('=').ok_or("expected PHASE=SECS")?;
    Ok((named(name)?, secs.parse().map_err(|_| format!("{secs:?} is not a number of seconds"))?))
}

fn phase_timeout(s: &str) -> Result<(PhaseId, u64), String> {
    named_secs(s, |name| crate::pipeline::phase::phase_named(name).ok_or_else(|| format!("no phase named {name:?}")))
}

/// `eas doctor`: `eas up`'s selection and node flags, with the same defaults.
#[derive(Args, Debug, Clone)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Read nothing from Hugging Face and skip the egress check (as `eas up --offline`)
    #[arg(long, overrides_with = "no_offline")]
    pub offline: bool,
    /// Not offline, whatever eas.yaml or the last install says (as `eas up --no-offline`)
    #[arg(long, overrides_with = "offline", hide_short_help = true)]
    pub no_offline: bool,
    /// The installer's environment name (env/<name>/ in the EAS tree) [default: k3d-gpu]
    #[arg(long)]
    pub env: Option<String>,
    /// A written key nothing in the pinned trees reads, accepted as `eas up --allow-unread` would (repeatable)
    #[arg(long = "allow-unread", value_name = "KEY")]
    pub allow_unread: Vec<String>,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// text (one line per check) or json (one eas-doctor/v1 document)
    #[arg(long, value_enum, default_value = "text")]
    pub output: super::OutputArg,
}

/// `eas init`: `eas up`'s selection and node flags, written into a commented eas.yaml.
#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// Where to write the file [default: ./eas.yaml]; `-` prints it on stdout
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite the file when it exists
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub select: SelectArgs,
    /// The installer's environment name (env/<name>/ in the EAS tree) [default: k3d-gpu]
    #[arg(long)]
    pub env: Option<String>,
    /// Declare the runs offline (as `eas up --offline`)
    #[arg(long, overrides_with = "no_offline")]
    pub offline: bool,
    /// Declare the runs not offline, whatever the eas.yaml replaced with --force says
    #[arg(long, overrides_with = "offline", hide_short_help = true)]
    pub no_offline: bool,
    /// Declare that eas reads the containerd facts of nodes it cannot read otherwise with a probe
    /// pod (`eas init` itself creates none)
    #[arg(long, help_heading = "Node facts", overrides_with = "no_probe_nodes")]
    pub probe_nodes: bool,
    /// Declare no probe pod, whatever the eas.yaml replaced with --force says
    #[arg(long, help_heading = "Node facts", overrides_with = "probe_nodes", hide_short_help = true)]
    pub no_probe_nodes: bool,
    #[command(flatten)]
    pub inputs: InputArgs,
}

/// What `eas up` and `eas doctor` read beside the cluster's facts: the upstream trees, the
/// bastion's base image, and how the facts are gathered.
#[derive(Args, Debug, Clone)]
pub struct InputArgs {
    #[command(flatten)]
    pub repos: RepoArgs,
    #[command(flatten)]
    pub image: BaseArgs,
    #[command(flatten)]
    pub gather: GatherArgs,
}

/// Existing clones or mirrors to use instead of fetching (offline use).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Upstream repositories")]
pub struct RepoArgs {
    /// An EAS clone or mirror holding the pinned commit
    #[arg(long, value_name = "DIR")]
    pub eas_repo: Option<PathBuf>,
    /// An EI (enterprise-inference) clone or mirror holding the pinned commit
    #[arg(long, value_name = "DIR")]
    pub ei_repo: Option<PathBuf>,
    /// An EAT (agent toolkit) clone or mirror holding the pinned commit
    #[arg(long, value_name = "DIR")]
    pub eat_repo: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct DownArgs {
    /// List what would be removed, what is kept and why, and what would stop the real run; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Layer to tear down [default: the recorded one]
    #[arg(long)]
    pub layer: Option<String>,
    /// Do not ask before changing the cluster (required without a terminal)
    #[arg(long)]
    pub yes: bool,
    /// Also remove the state directory of this cluster (logs, work tree); takes the lock
    #[arg(long)]
    pub purge: bool,
    /// Drop the losses and leftovers an earlier `eas down` found, once dealt with
    #[arg(long)]
    pub acknowledge: bool,
    /// With an incomplete record: run the installer's teardown with every guard applied
    /// (deletes nothing directly)
    #[arg(long)]
    pub force_incomplete: bool,
    /// Take over a lock or cluster Lease left by a run that is gone, first removing its containers on this engine
    #[arg(long)]
    pub break_lock: bool,
    #[arg(long, value_name = "FILE", help = super::PINS_HELP)]
    pub pins: Option<PathBuf>,
    #[command(flatten)]
    pub image: BaseArgs,
    /// How long the installer's teardown may run, in seconds
    #[arg(long, value_name = "SECS", default_value_t = timeouts::TEARDOWN.as_secs())]
    pub teardown_timeout: u64,
    /// Set a phase's timeout (tests): PHASE=SECS, repeatable; the teardown's is --teardown-timeout
    #[arg(long, value_name = "PHASE=SECS", hide = true, value_parser = down_phase_timeout)]
    pub phase_timeout: Vec<(DownId, u64)>,
}

fn down_phase_timeout(s: &str) -> Result<(DownId, u64), String> {
    named_secs(s, |name| match crate::plan::DOWN_PHASES.iter().find(|p| p.name == name) {
        None => Err(format!("no phase of eas down named {name:?}")),
        Some(p) if p.id == DownId::Teardown => Err("the teardown's timeout is --teardown-timeout".into()),
        Some(p) => Ok(p.id),
    })
}

#[derive(Args, Debug, Clone)]
pub struct VerifyArgs {
    /// How long to wait for the model servers, in seconds
    #[arg(long, value_name = "SECS", default_value_t = timeouts::VERIFY.as_secs())]
    pub timeout: u64,
    /// How long to wait for every device node's resource and plugin pod, in seconds
    #[arg(long, value_name = "SECS", default_value_t = timeouts::VERIFY_DEVICES.as_secs())]
    pub devices_timeout: u64,
    /// `json`: one document (eas-verify/v1) on stdout, passed or not
    #[arg(long, value_enum, default_value = "text")]
    pub output: super::OutputArg,
}

#[derive(Args, Debug, Clone)]
pub struct StatusArgs {
    /// text (a table, for a person; `table` is the same) or json (one eas-status/v1 document)
    #[arg(long, value_enum, default_value = "text")]
    pub output: super::OutputArg,
}

#[derive(Subcommand, Debug)]
pub enum BastionCommand {
    /// Build the pinned bastion image, or reuse it when its build context is unchanged; prints the image tag
    Build(BuildArgs),
    /// Run a command in the bastion with the installer's mounts and environment; exits with its exit code
    Run(RunArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ImageArgs {
    #[arg(long, value_name = "FILE", help = super::PINS_HELP)]
    pub pins: Option<PathBuf>,
    #[command(flatten)]
    pub base: BaseArgs,
}

/// The image flags other commands share (`eas up`, `eas down` take `--pins` with the trees).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Bastion image")]
pub struct BaseArgs {
    /// Base image, pinned by digest: REF@sha256:<digest> [default: the pins' base-image row]
    /// [env: EAS_BASE_IMAGE]
    #[arg(long, value_name = "REF")]
    pub base_image: Option<String>,
    /// Accept a base image without a digest if it exists locally (test images); it is pinned by its local image ID
    #[arg(long, overrides_with = "no_allow_unpinned_base")]
    pub allow_unpinned_base: bool,
    /// The base image pinned by digest, whatever eas.yaml or the last install says (the later of
    /// --allow-unpinned-base and --no-allow-unpinned-base wins)
    #[arg(long, overrides_with = "allow_unpinned_base", hide_short_help = true)]
    pub no_allow_unpinned_base: bool,
}

/// A switch as the command line gave it: `Some(true)` for `--X`, `Some(false)` for `--no-X`
/// (clap keeps only the later of the two), `None` for neither, which leaves it to eas.yaml, the
/// last install, or off.
pub fn switch(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

#[derive(Args, Debug, Clone)]
pub struct BuildArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    /// Build even when an image for this context exists, without Docker's layer cache
    #[arg(long)]
    pub rebuild: bool,
    /// Download artifacts that have no pinned sha256 (and resolve the base image's registry
    /// digest), and record each only when it matches its publisher's checksum
    #[arg(long)]
    pub lock: bool,
    /// With --lock: record an artifact whose publisher publishes no checksum as downloaded (its
    /// pins row's source says so)
    #[arg(long, requires = "lock")]
    pub trust_on_first_use: bool,
    /// Stop the build past this many seconds, removing what it started
    #[arg(long, value_name = "SECS", default_value_t = timeouts::BASTION.as_secs())]
    pub timeout: u64,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub image: ImageArgs,
    /// EAS work tree, mounted read-write at /eas (its .venv is linked to the bastion's)
    #[arg(long, value_name = "DIR")]
    pub tree: Option<PathBuf>,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_timeout_names_a_phase_of_its_command_and_seconds() {
        assert_eq!(phase_timeout("install=5"), Ok((PhaseId::Install, 5)));
        assert_eq!(down_phase_timeout("settle=7"), Ok((DownId::Settle, 7)));
        assert!(phase_timeout("settle=7").unwrap_err().contains("no phase named \"settle\""));
        assert!(down_phase_timeout("install=5").unwrap_err().contains("no phase of eas down"));
        assert!(down_phase_timeout("teardown=5").unwrap_err().contains("--teardown-timeout"));
        assert!(down_phase_timeout("delete=soon").unwrap_err().contains("not a number of seconds"));
        assert_eq!(down_phase_timeout("delete"), Err("expected PHASE=SECS".into()));
    }
}
