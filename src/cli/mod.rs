//! The command line (SPEC §1). The only module (with `main.rs` and the command layer) that knows
//! clap: each command's arguments, resolved once with the environment seam into the plain
//! settings of `crate::settings` and the domain modules (see `resolve`).

mod args;
pub mod docs;
mod resolve;

pub use args::*;
pub use resolve::{bastion, settings};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "eas",
    version,
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

#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
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
    #[arg(long, global = true, value_name = "FILE", env = "EAS_CA_BUNDLE")]
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

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Generate the installer's configuration from a facts document (pure: no cluster, no network)
    Config(ConfigArgs),
    /// Size each model candidate against the node it would land on (pure: reads a facts document)
    Fit(FitArgs),
    /// Validate or lock pins.json
    #[command(subcommand)]
    Pins(PinsCommand),
    /// The installer's pinned toolbox image: build (or reuse) it, run a command in it
    #[command(subcommand)]
    Bastion(BastionCommand),
    /// Decide (and with --apply, apply) the k3s/k3d patches to an EAS git clone
    Overlay(OverlayArgs),
    /// Gather the facts document (eas-facts/v1) from the cluster; read-only
    Facts(FactsArgs),
    /// The whole pipeline: bastion, facts, overlay, config, install, verify (--dry-run: the plan)
    Up(Box<UpArgs>),
    /// Remove what `eas up` installed, and nothing else
    Down(DownArgs),
    /// Check device resources and the model servers against the cluster
    Verify(VerifyArgs),
    /// The read-only gates of `eas up` (the same checks as its plan), one line per check
    Doctor(DoctorArgs),
    /// What `eas up` installed on this cluster and how it is now (exit 0 when the cluster could be read)
    Status(StatusArgs),
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
pub struct SelectArgs {
    /// Layer to install: agent-toolkit or inference (erag is refused)
    #[arg(long, default_value = "agent-toolkit")]
    pub layer: String,
    /// Pins profile naming the EAS, EI and EAT commits
    #[arg(long, conflicts_with = "git_ref")]
    pub profile: Option<String>,
    /// An EAS commit as a full 40-hex SHA (branches, tags and abbreviations are floating refs)
    #[arg(long = "ref", value_name = "SHA")]
    pub git_ref: Option<String>,
    /// Model to serve, overriding the pick
    #[arg(long)]
    pub model: Option<String>,
    /// Pins file [default: the pins.json built into eas]
    #[arg(long, value_name = "FILE")]
    pub pins: Option<PathBuf>,
    /// An external `k3d-gpu fit` document: it wins over eas's built-in fit, which warns where it disagrees
    #[arg(long, value_name = "FILE")]
    pub fit: Option<PathBuf>,
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
    /// Validate pins.json and report unlocked rows and artifacts without a sha256
    Check {
        /// Pins file [default: the pins.json built into eas]
        #[arg(long, value_name = "FILE")]
        pins: Option<PathBuf>,
    },
    /// Resolve abbreviated SHAs to full ones in each repository's history (the mirror cache `eas up`
    /// uses): the prefix must be unambiguous and the commit on the pinned ref
    Lock {
        /// Pins file to rewrite
        #[arg(long, value_name = "FILE", default_value = "pins.json")]
        pins: PathBuf,
        /// Base URL or directory for repositories [default: https://github.com]
        #[arg(long, value_name = "URL", env = "EAS_GIT_BASE")]
        git_base: Option<String>,
    },
}
