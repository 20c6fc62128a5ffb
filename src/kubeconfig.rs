//! The one kubeconfig resolver: `--kubeconfig`, else the `KUBECONFIG` list (merged like
//! kubectl), else `~/.kube/config`; and `--context`. Facts, verify, down and the bastion's
//! single-file copy all read the cluster through it, so they cannot disagree.

use std::path::{Path, PathBuf};

use kube::config::{Kubeconfig, KubeconfigError};

use crate::settings::Global;

/// Where the kubeconfig comes from, and whether the user named it (a missing named file is an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSource {
    /// One file, or the `KUBECONFIG` list in order.
    pub paths: Vec<PathBuf>,
    pub explicit: bool,
    pub context: Option<String>,
}

impl KubeSource {
    /// `--kubeconfig`, else `$KUBECONFIG` (a list), else `~/.kube/config`.
    pub fn resolve(g: &Global) -> KubeSource {
        let context = g.context.clone();
        if let Some(p) = &g.kubeconfig {
            return KubeSource { paths: vec![p.clone()], explicit: true, context };
        }
        if let Some(v) = g.env.nonempty("KUBECONFIG") {
            let paths: Vec<PathBuf> = std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect();
            if !paths.is_empty() {
                return KubeSource { paths, explicit: true, context };
            }
        }
        let home = g.env.home().unwrap_or_default();
        KubeSource { paths: vec![home.join(".kube").join("config")], explicit: false, context }
    }

    /// One file, as given.
    #[cfg(test)]
    pub fn file(path: PathBuf, explicit: bool, context: Option<String>) -> KubeSource {
        KubeSource { paths: vec![path], explicit, context }
    }

    /// The paths as the user would write them (`a:b`).
    pub fn shown(&self) -> String {
        self.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")
    }

    /// The single file, when there is exactly one.
    pub fn single(&self) -> Option<&Path> {
        match self.paths.as_slice() {
            [p] => Some(p),
            _ => None,
        }
    }

    /// The kubeconfig, the list's files merged in order, and how to name it in messages.
    pub fn load(&self) -> Result<(Kubeconfig, String), TargetError> {
        load_from(&self.paths, self.explicit)
    }
}

/// Why no cluster could be chosen: always bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("kubeconfig {0} not found")]
    Missing(PathBuf),
    #[error("kubeconfig {path} cannot be read: {cause}")]
    Unreadable { path: PathBuf, cause: String },
    #[error("kubeconfig {path} is malformed: {cause}")]
    Malformed { path: String, cause: String },
    #[error("no kubeconfig: --kubeconfig not given, KUBECONFIG not set, and {0} does not exist")]
    NoDefault(PathBuf),
    #[error("context {name:?} not found in kubeconfig {path} (contexts: {available})")]
    NoContext { name: String, path: String, available: String },
    #[error("kubeconfig {0} sets no current-context")]
    NoCurrentContext(String),
    #[error("context {context:?} in kubeconfig {path} is unusable: {cause}")]
    Unusable { context: String, path: String, cause: String },
    /// A proxy variable or `proxy-url` that cannot be used (credentials never shown).
    #[error("{0}")]
    Proxy(crate::net::proxy::ProxyError),
    /// The exec credential plugin failed: a run-time failure (exit 1), not bad input.
    #[error("{0}")]
    Plugin(String),
}

impl TargetError {
    pub fn hint(&self) -> String {
        match self {
            TargetError::Missing(_) | TargetError::Unreadable { .. } | TargetError::NoDefault(_) => {
                "pass --kubeconfig PATH or set KUBECONFIG (k3d: `k3d kubeconfig write <cluster>`; k3s: /etc/rancher/k3s/k3s.yaml)"
                    .into()
            }
            TargetError::Malformed { .. } | TargetError::Unusable { .. } => {
                "check the file with `kubectl config view --kubeconfig <path>`".into()
            }
            TargetError::NoContext { .. } | TargetError::NoCurrentContext(_) => {
                "pass --context with one of the contexts listed (`kubectl config get-contexts`)".into()
            }
            TargetError::Proxy(e) => e.hint(),
            TargetError::Plugin(_) => String::new(),
        }
    }
}

fn load_from(paths: &[PathBuf], explicit: bool) -> Result<(Kubeconfig, String), TargetError> {
    let read = |p: &Path| -> Result<Kubeconfig, TargetError> {
        match std::fs::metadata(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TargetError::Missing(p.to_path_buf()));
            }
            Err(e) => {
                return Err(TargetError::Unreadable { path: p.to_path_buf(), cause: e.to_string() });
            }
            Ok(_) => {}
        }
        Kubeconfig::read_from(p).map_err(|e| malformed(&p.display().to_string(), e))
    };
    let shown = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
    if let [p] = paths {
        if !explicit && !p.exists() {
            return Err(TargetError::NoDefault(p.clone()));
        }
        return Ok((read(p)?, shown));
    }
    // Like kubectl: files in the list that do not exist are skipped, the rest merged in order.
    let mut merged: Option<Kubeconfig> = None;
    for p in paths.iter().filter(|p| p.exists()) {
        let next = read(p)?;
        merged = Some(match merged {
            None => next,
            Some(m) => m.merge(next).map_err(|e| malformed(&shown, e))?,
        });
    }
    merged.map(|m| (m, shown.clone())).ok_or_else(|| TargetError::Missing(PathBuf::from(shown)))
}

fn malformed(path: &str, e: KubeconfigError) -> TargetError {
    let cause = match e {
        KubeconfigError::ReadConfig(io, _) => io.to_string(),
        other => other.to_string(),
    };
    TargetError::Malformed { path: path.to_string(), cause: cause.split_whitespace().collect::<Vec<_>>().join(" ") }
}
