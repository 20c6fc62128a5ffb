//! Plain settings: what each command resolved from its arguments and the environment, once, at
//! the edge (`src/cli/`). Domain modules take these; they never see the argument parser or read
//! the process environment themselves.

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
    /// `--ca-bundle` / `EAS_CA_BUNDLE`, read and checked once: trusted by every TLS connection
    /// eas makes (downloads, git, the API server when the kubeconfig pins no CA, the bastion).
    pub ca_bundle: Option<CaBundle>,
}

/// A PEM bundle of extra trusted CAs, certificates only (`net::trust::certificates_only`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaBundle {
    pub path: PathBuf,
    /// The file's bytes, as read (built into the bastion image).
    pub pem: Vec<u8>,
    /// Its certificates, DER.
    pub ders: Vec<Vec<u8>>,
}

impl CaBundle {
    /// Reads and checks the bundle at `path`; the error is one line naming the file.
    pub fn load(path: &std::path::Path) -> Result<CaBundle, String> {
        let bad = |detail: String| format!("CA bundle {}: {detail}", path.display());
        let pem = crate::bounded::read(path, crate::bounded::Kind::CaBundle).map_err(|e| match e {
            // The error names the file and the limit itself.
            crate::bounded::ReadError::Io { source, .. } => bad(source.to_string()),
            e => e.to_string(),
        })?;
        let ders = crate::net::trust::certificates_only(&pem).map_err(bad)?;
        Ok(CaBundle { path: path.to_path_buf(), pem, ders })
    }
}

/// Which trees and which model (`--layer`, `--profile`, `--ref`, `--model`, `--pins`).
#[derive(Debug, Clone)]
pub struct Select {
    pub layer: String,
    pub profile: Option<String>,
    pub git_ref: Option<String>,
    pub model: Option<String>,
    /// Where the pins come from (`--pins`, `EAS_PINS`, the user's file, or built in).
    pub pins: crate::pins::Source,
    /// `--fit FILE`: an external `k3d-gpu fit` document, which wins over eas's own fit.
    pub fit: Option<PathBuf>,
}

impl Default for Select {
    fn default() -> Self {
        Select {
            layer: "agent-toolkit".into(),
            profile: None,
            git_ref: None,
            model: None,
            pins: Default::default(),
            fit: None,
        }
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
