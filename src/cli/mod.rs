//! The command line (SPEC §1). The only module (with `main.rs` and the command layer) that knows
//! clap: each command's arguments, resolved once with the environment seam into the plain
//! settings of `crate::settings` and the domain modules (see `resolve`).

mod args;
pub mod docs;
mod resolve;

pub use args::*;
pub mod rejected;
pub use resolve::{UsageError, bastion, config, doctor, down, init, settings, up};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "eas",
    version = env!("EAS_LONG_VERSION"),
    about = "Install Intel Enterprise AI Solutions (EAS) and the Agent Toolkit onto a k3s/k3d cluster",
    after_help = "Exit codes: 0 ok, 1 step failed, 2 bad input, 3 refused, 4 overlay STOP, \
                  5 verification failed, 130 interrupted."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Every command takes these; `--help` lists them apart from the command's own options.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// The config file declaring what runs select (eas-config/v1: `eas schema eas-config/v1`;
    /// `eas init` writes one) [default: $EAS_CONFIG, else ./eas.yaml when it exists]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Kubeconfig to read (never modified) [default: $KUBECONFIG, then ~/.kube/config]
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context [default: the current context]
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Where runs are recorded [default: $XDG_STATE_HOME/eas, else ~/.local/state/eas]
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Progress display: bars on a terminal, plain lines otherwise or when CI is set
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub progress: ProgressArg,
    /// More detail (repeat for more)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// No colour (NO_COLOR is honoured too)
    #[arg(long, global = true)]
    pub no_color: bool,
    /// PEM bundle of extra trusted CAs (e.g. a TLS-intercepting proxy's), certificates only: used for
    /// downloads, git, the API server when the kubeconfig pins no CA, and inside the bastion
    /// [env: EAS_CA_BUNDLE]
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,
}

/// `--progress`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressArg {
    Auto,
    Tty,
    Plain,
}

/// `--output` on up --dry-run, facts, fit, status and verify: text for a person (`table` is
/// accepted for it), or one JSON document on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputArg {
    #[value(alias = "table")]
    Text,
    Json,
}

impl From<OutputArg> for crate::output::OutputFormat {
    fn from(a: OutputArg) -> Self {
        match a {
            OutputArg::Text => crate::output::OutputFormat::Text,
            OutputArg::Json => crate::output::OutputFormat::Json,
        }
    }
}

/// `--pins` on every command that reads pins: they all resolve them the same way.
pub const PINS_HELP: &str = "Pins file [default: $EAS_PINS, else $XDG_CONFIG_HOME/eas/pins.json \
    (~/.config/eas/pins.json) when it exists, else the pins built into eas]";

/// In the order a user meets them: declare, install, remove, look, check, size, gather; then the tools.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a commented eas.yaml for the current cluster from its facts, every choice stated (it
    /// only reads the cluster: it changes nothing there, fetches no upstream tree and does not run
    /// the installer's own `init`; an existing file is kept unless --force)
    Init(InitArgs),
    /// The whole pipeline: bastion, facts, overlay, config, install, verify (--dry-run: the plan)
    Up(Box<UpArgs>),
    /// Remove what `eas up` installed, and nothing else
    Down(DownArgs),
    /// What `eas up` installed on this cluster and how it is now (exit 0 when the cluster could be read)
    Status(StatusArgs),
    /// Check device resources and the model servers against the cluster
    Verify(VerifyArgs),
    /// The read-only gates of `eas up` (the same checks as its plan), one line per check
    Doctor(DoctorArgs),
    /// Collect this cluster's records, logs, status, doctor and recent events into one .tar.gz,
    /// every secret masked (read-only; of Secret objects only the Helm release storage Secrets are
    /// read, by the doctor it runs, for each release's chart and status; none goes into the bundle)
    SupportBundle(SupportBundleArgs),
    /// Size each model candidate against the node it would land on (pure: reads a facts document)
    Fit(FitArgs),
    /// Gather the facts document (eas-facts/v1) from the cluster; read-only
    Facts(FactsArgs),
    /// Generate the installer's configuration from a facts document (pure: no cluster, no network)
    Config(ConfigArgs),
    /// Decide (and with --apply, apply) the k3s/k3d patches to an EAS git clone
    Overlay(OverlayArgs),
    /// Show, validate or lock the pins (upstream commits and bastion artifacts)
    #[command(subcommand)]
    Pins(PinsCommand),
    /// The installer's pinned toolbox image: build (or reuse) it, run a command in it
    #[command(subcommand)]
    Bastion(BastionCommand),
    /// Print the JSON schema of a document eas prints (eas-plan/v1, eas-status/v1, ...); without
    /// NAME, list them
    Schema {
        /// The document: eas-plan/v1, eas-plan.v1 or eas-plan (the newest version)
        name: Option<String>,
    },
    /// Print a shell completion script to stdout (README: shell completions)
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a roff man page per command (eas.1, eas-up.1, eas-pins-check.1, ...) to a directory
    Man {
        /// Directory for the pages (created when missing)
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Selection")]
pub struct SelectArgs {
    /// Layer to install: agent-toolkit or inference (erag is refused) [default: agent-toolkit]
    #[arg(long, value_parser = LayerName, hide_possible_values = true)]
    pub layer: Option<String>,
    /// Pins profile naming the EAS, EI and EAT commits
    #[arg(long, conflicts_with = "git_ref")]
    pub profile: Option<String>,
    /// An EAS commit as a full 40-hex SHA (branches, tags and abbreviations are floating refs)
    #[arg(long = "ref", value_name = "SHA")]
    pub git_ref: Option<String>,
    /// Model to serve, overriding the pick (and the installed model, which `eas up` otherwise keeps)
    #[arg(long, value_name = "MODEL", value_hint = clap::ValueHint::Other)]
    pub model: Option<String>,
    /// Pick the model again instead of keeping the installed one (the plan says when the pick
    /// would now differ)
    #[arg(long, conflicts_with = "model")]
    pub repick: bool,
    #[arg(long, value_name = "FILE", help = PINS_HELP)]
    pub pins: Option<PathBuf>,
    /// An external `k3d-gpu fit` document: it wins over eas's built-in fit, which warns where it disagrees
    #[arg(long, value_name = "FILE")]
    pub fit: Option<PathBuf>,
}

/// `--layer`: any name is taken here (resolution says "unknown layer" or refuses `erag` with its
/// reason); the installable layers are its possible values only so that shell completion offers
/// them instead of file names.
#[derive(Clone)]
struct LayerName;

impl clap::builder::TypedValueParser for LayerName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names = crate::config::data::layers().layers.keys();
        Some(Box::new(names.map(|n| clap::builder::PossibleValue::new(n.as_str()))))
    }
}

#[derive(Args, Debug, Clone)]
pub struct SupportBundleArgs {
    /// Where to write the bundle (mode 0600) [default: ./eas-support-<context>-<UTC time>.tar.gz]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ConfigArgs {
    /// Facts document (eas-facts/v1 JSON)
    #[arg(long, value_name = "FILE")]
    pub facts: PathBuf,
    /// Output directory
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub select: SelectArgs,
    /// EI model catalog (models.yaml) to decide against [default: the built-in candidates,
    /// data/models.json]; `eas up` reads the one at the pinned EI commit
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Print every source as a full permalink
    #[arg(long)]
    pub explain: bool,
}

#[derive(Args, Debug, Clone)]
pub struct OverlayArgs {
    /// The EAS git clone; decisions are made at its HEAD commit
    #[arg(long, value_name = "DIR")]
    pub repo: PathBuf,
    /// Facts document (eas-facts/v1): evaluates skip conditions [default: every row is needed]
    #[arg(long, value_name = "FILE")]
    pub facts: Option<PathBuf>,
    /// Write the patches to the work tree (only when nothing STOPs)
    #[arg(long)]
    pub apply: bool,
    /// Print every source as a full permalink
    #[arg(long)]
    pub explain: bool,
    /// Overlay directory (overlay.json and its patches) [default: the one built into eas]
    #[arg(long, value_name = "DIR")]
    pub overlay: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum PinsCommand {
    /// Print the pins every command would read, and where they come from
    Show {
        #[arg(long, value_name = "FILE", help = PINS_HELP)]
        pins: Option<PathBuf>,
        /// `json`: the pins document (eas-pins/v1) with `pins_source`; it can be saved and passed as --pins
        #[arg(long, value_enum, default_value = "text")]
        output: OutputArg,
    },
    /// Validate the pins and report unlocked rows and artifacts without a sha256
    Check {
        #[arg(long, value_name = "FILE", help = PINS_HELP)]
        pins: Option<PathBuf>,
    },
    /// Resolve abbreviated SHAs to full ones in each repository's history (the mirror cache `eas up`
    /// uses): the prefix must be unambiguous and the commit on the pinned ref
    Lock {
        /// Pins file to rewrite [default: the file every command reads (`eas pins show`); with
        /// the built-in pins, the user's pins file, written from them]
        #[arg(long, value_name = "FILE")]
        pins: Option<PathBuf>,
        /// Base URL or directory for repositories [default: https://github.com]
        #[arg(long, value_name = "URL", env = "EAS_GIT_BASE")]
        git_base: Option<String>,
    },
}

#[cfg(test)]
mod tests;
