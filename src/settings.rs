//! Plain settings: what each command resolved from its arguments and the environment, once, at
//! the edge (`src/cli/`). Domain modules take these; they never see clap or read the process
//! environment themselves.

pub mod env;
pub mod timeouts;

use std::path::PathBuf;

pub use env::Env;

/// The settings every cluster-facing command shares.
#[derive(Debug, Clone, Default)]
pub struct Global {
    /// `--kubeconfig`, when given.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`, when given.
    pub context: Option<String>,
    /// `--state-dir`, when given.
    pub state_dir: Option<PathBuf>,
    /// The process environment, read once.
    pub env: Env,
}

/// Which trees and which model (`--layer`, `--profile`, `--ref`, `--model`, `--pins`).
#[derive(Debug, Clone)]
pub struct Select {
    pub layer: String,
    pub profile: Option<String>,
    pub git_ref: Option<String>,
    pub model: Option<String>,
    pub pins: Option<PathBuf>,
}

impl Default for Select {
    fn default() -> Self {
        Select { layer: "agent-toolkit".into(), profile: None, git_ref: None, model: None, pins: None }
    }
}

/// `eas config`.
#[derive(Debug, Clone)]
pub struct ConfigSettings {
    pub facts: PathBuf,
    pub out: PathBuf,
    pub select: Select,
    /// An EI model catalog to decide against (default: the built-in candidates).
    pub catalog: Option<PathBuf>,
    pub explain: bool,
}

/// `eas overlay`.
#[derive(Debug, Clone)]
pub struct OverlaySettings {
    pub repo: PathBuf,
    pub facts: Option<PathBuf>,
    pub apply: bool,
    pub explain: bool,
    pub overlay: Option<PathBuf>,
}
