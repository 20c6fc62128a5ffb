//! Plain settings: what each command resolved from its arguments and the environment, once, at
//! the edge (`src/cli/`). Domain modules take these; they never see the argument parser or read
//! the process environment themselves.

pub mod env;
pub mod file;
pub mod init;
pub mod source;
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
    /// Where each of these that is not a default came from (the plan names it).
    pub sources: source::Sources,
    /// The config file (`--config`, `EAS_CONFIG`, `./eas.yaml`), when there is one: the
    /// commands that take up's selection read the rest of it.
    pub file: Option<file::ConfigFile>,
}

impl Global {
    /// Where the pins come from for a command given `--pins flag` (SPEC §1, with the config
    /// file's `pins:` between `EAS_PINS` and the user's pins file).
    pub fn pins_source(&self, flag: Option<&std::path::Path>) -> crate::pins::Source {
        self.env.pins_source(flag, self.file.as_ref().and_then(|f| f.path("pins")).as_deref())
    }

    /// `value` as the prompts and previews name a global setting (`key`): with its source when
    /// that is not a default (`k3d-gpu (from ./eas.yaml)`).
    pub fn named(&self, key: &str, value: &str) -> String {
        self.sources.named(key, value)
    }
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

/// The layer `--layer` names, parsed once at the edge (`src/cli/resolve.rs`). The layers eas
/// installs are the rows of `data/layers.json`, each with its install path, and the code follows
/// each one's path (its components, its EAT rows), so they are variants; a layer that data lists
/// as refused is kept by name so the decision refuses it (exit 3) with the data's reason. A name
/// neither installs nor refuses is bad input at the edge. The one layer type: config's decision
/// carries it too, never `Refused` there (a refused layer gets no decision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layer {
    Inference,
    AgentToolkit,
    Refused(String),
}

impl Layer {
    /// `name` as a layer: installed, refused (`refused(name)` says so), or an error naming it.
    pub fn parse(name: &str, refused: impl Fn(&str) -> bool) -> Result<Layer, String> {
        match name {
            "inference" => Ok(Layer::Inference),
            "agent-toolkit" => Ok(Layer::AgentToolkit),
            other if refused(other) => Ok(Layer::Refused(other.to_string())),
            other => Err(format!("unknown layer {other:?}")),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Layer::Inference => "inference",
            Layer::AgentToolkit => "agent-toolkit",
            Layer::Refused(name) => name,
        }
    }
}

impl std::ops::Deref for Layer {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Layer {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Layer {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// `--containerd-config NODE=FILE`, parsed at the edge: a node (`*`: every other node) and a
/// copy of its containerd `config.toml` (read, and checked as one, by the gatherer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFile {
    pub node: String,
    pub file: PathBuf,
}

impl NodeFile {
    /// `NODE=FILE`; the error says what the form is.
    pub fn parse(s: &str) -> Result<NodeFile, String> {
        match s.split_once('=') {
            Some((node, file)) if !node.is_empty() && !file.is_empty() => {
                Ok(NodeFile { node: node.to_string(), file: PathBuf::from(file) })
            }
            _ => Err(
                "expected NODE=FILE: a node name (`*`: every other node), `=`, a copy of its containerd config.toml"
                    .to_string(),
            ),
        }
    }
}

impl std::fmt::Display for NodeFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.node, self.file.display())
    }
}

/// `--nri-socket NODE=present|absent`, parsed at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSocket {
    pub node: String,
    pub present: bool,
}

impl NodeSocket {
    /// `NODE=present` or `NODE=absent`; the error says what the form is.
    pub fn parse(s: &str) -> Result<NodeSocket, String> {
        match s.split_once('=') {
            Some((node, value @ ("present" | "absent"))) if !node.is_empty() => {
                Ok(NodeSocket { node: node.to_string(), present: value == "present" })
            }
            _ => Err("expected NODE=present or NODE=absent".to_string()),
        }
    }
}

/// Which trees and which model (`--layer`, `--profile`, `--ref`, `--model`, `--pins`).
#[derive(Debug, Clone)]
pub struct Select {
    pub layer: Layer,
    pub profile: Option<String>,
    pub git_ref: Option<String>,
    pub model: Option<String>,
    /// Where the pins come from (`--pins`, `EAS_PINS`, the user's file, or built in).
    pub pins: crate::pins::Source,
    /// `--fit FILE`: an external `k3d-gpu fit` document, which wins over eas's own fit.
    pub fit: Option<PathBuf>,
    /// `--repick`: pick the model again instead of keeping the installed one (not with `--model`).
    pub repick: bool,
}

impl Default for Select {
    fn default() -> Self {
        Select {
            layer: Layer::AgentToolkit,
            profile: None,
            git_ref: None,
            model: None,
            repick: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_flags_parse_once_into_their_parts_and_say_the_form_when_they_do_not() {
        assert_eq!(NodeFile::parse("*=/tmp/c.toml"), Ok(NodeFile { node: "*".into(), file: "/tmp/c.toml".into() }));
        assert_eq!(NodeFile::parse("n1=/a=b").map(|f| f.file), Ok(PathBuf::from("/a=b")), "the first `=` splits");
        for bad in ["n1", "=f", "n1="] {
            assert!(NodeFile::parse(bad).unwrap_err().starts_with("expected NODE=FILE"), "{bad}");
        }
        assert_eq!(NodeSocket::parse("n1=absent"), Ok(NodeSocket { node: "n1".into(), present: false }));
        assert_eq!(NodeSocket::parse("n1=present").map(|s| s.present), Ok(true));
        for bad in ["n1=maybe", "=present", "n1"] {
            assert_eq!(NodeSocket::parse(bad).unwrap_err(), "expected NODE=present or NODE=absent", "{bad}");
        }
    }

    #[test]
    fn a_layer_is_installed_refused_or_unknown() {
        let refused = |n: &str| n == "erag";
        assert_eq!(Layer::parse("inference", refused), Ok(Layer::Inference));
        assert_eq!(Layer::parse("agent-toolkit", refused).map(|l| l.to_string()), Ok("agent-toolkit".into()));
        assert_eq!(Layer::parse("erag", refused), Ok(Layer::Refused("erag".into())));
        assert_eq!(Layer::parse("platform", refused), Err("unknown layer \"platform\"".into()));
        assert!(Layer::AgentToolkit == "agent-toolkit" && &*Layer::Inference == "inference");
    }
}
