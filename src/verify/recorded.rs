//! `eas verify` against what the recorded run expects: the [`Expected`] record kept beside the
//! run's state, and its reader.

use crate::cluster::CALL;
use crate::gather::{self};
use crate::output::Shell;
use crate::settings::Global;
use crate::state::StateDir;
use crate::state::journal::JournalError;
use crate::state::run::state_root;
use crate::verify;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct VerifySettings {
    /// How long to wait for the model servers
    pub timeout: Duration,
    /// How long to wait for every device node's resource and plugin pod
    pub devices_timeout: Duration,
    /// `json`: one document (eas-verify/v1) on stdout, passed or not
    pub output: crate::output::OutputFormat,
}

/// What a run expects verification to find, kept beside its state.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Expected {
    /// The device nodes the run's facts showed: node -> the device resources it advertised.
    #[serde(default)]
    pub device_nodes: BTreeMap<String, Vec<String>>,
    /// The model servers the run deployed (an empty list: none fits).
    pub models: Option<Vec<String>>,
    /// The generator's model decision, named when no model fits.
    #[serde(default)]
    pub fit: Option<String>,
}

impl Expected {
    pub fn expect(&self) -> verify::Expect {
        let models = match &self.models {
            Some(m) if m.is_empty() => verify::Models::NoneFits(self.fit.clone().unwrap_or_else(|| "-".into())),
            Some(m) => verify::Models::Named(m.clone()),
            None => verify::Models::Found,
        };
        verify::Expect { device_nodes: self.device_nodes.clone(), models }
    }
}

pub const EXPECTED_FILE: &str = "expected.json";

/// The record of what the install in `dir` expects verification to find: `None` when there is
/// none; a file that cannot be read as one is damaged, named, never read as "nothing".
pub fn read_expected(dir: &std::path::Path) -> Result<Option<Expected>, JournalError> {
    use crate::bounded::ReadError;
    let path = dir.join(EXPECTED_FILE);
    let malformed = |msg: String| JournalError::Malformed { path: path.clone(), msg };
    match crate::bounded::read(&path, crate::bounded::Kind::State) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| malformed(e.to_string())),
        Err(ReadError::NotFound { .. }) => Ok(None),
        Err(ReadError::Io { source, .. }) => Err(JournalError::Read { path, source }),
        Err(e) => Err(malformed(e.to_string())),
    }
}

/// What `eas verify` checks against: decided as `status` and `down` decide "is anything
/// installed?" (an install in the cluster's records, `state::records`), so an `expected.json`
/// that outlived its install (after `eas down`) is not read. An install without one (it
/// stopped before the record phase) is checked for every model server found.
pub fn expect_of(sd: &StateDir) -> Result<verify::Expect, JournalError> {
    let records = crate::state::records::Records::read(sd)?;
    if records.install.is_none() {
        let models = verify::Models::NotInstalled(sd.dir().display().to_string());
        return Ok(verify::Expect { device_nodes: BTreeMap::new(), models });
    }
    Ok(match read_expected(sd.dir())? {
        Some(e) => e.expect(),
        None => verify::Expect { device_nodes: BTreeMap::new(), models: verify::Models::Found },
    })
}

/// Why `eas verify` against the record did not pass, each error as its module made it (the
/// command edge gives each its exit code).
#[derive(Debug, thiserror::Error)]
pub enum RecordedError {
    /// Boxed, as `Key`: both carry an API error, which is large.
    #[error(transparent)]
    Gather(Box<gather::GatherError>),
    /// The cluster's key (its `kube-system` UID) could not be read.
    #[error(transparent)]
    Key(Box<crate::cluster::ApiError>),
    #[error(transparent)]
    StateDir(#[from] crate::state::StateDirError),
    #[error(transparent)]
    Verify(#[from] verify::VerifyError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    /// A damaged record (`state.json`, `expected.json`): named, never read as "nothing installed".
    #[error(transparent)]
    Record(#[from] JournalError),
}

/// `eas verify`: the devices node by node, then what the recorded run deployed. Without a
/// record, the devices alone, then exit 5: there is no model server eas installed.
/// `eas verify`'s checks against what the recorded run expects (devices only, then "nothing
/// installed", when no run is recorded): one line per passing check, or the failure.
pub fn verify_recorded(args: &VerifySettings, global: &Global, shell: &Shell) -> Result<Vec<String>, RecordedError> {
    crate::runtime::block_on_interruptible(async {
        let target = gather::target(global, CALL).await.map_err(|e| RecordedError::Gather(Box::new(e)))?;
        let key = target.cluster.cluster_key(CALL).await.map_err(|e| RecordedError::Key(Box::new(e)))?;
        let sd = StateDir::new(&state_root(global)?, &key)?;
        let exp = expect_of(&sd)?;
        let t = verify::Timeouts { models: args.timeout, devices: args.devices_timeout, ..verify::Timeouts::default() };
        Ok(verify::verify(&target.cluster, &exp, &t, shell).await?)
    })
}
