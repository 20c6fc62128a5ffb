//! Verification (SPEC §7): every device node has its resource allocatable and its plugin pod
//! Ready (`devices`), then each model server reaches `MainWorkloadReady`, its workload pods run
//! ready, and the model answers through the API server's service proxy (`servers`). Every wait
//! has a deadline; a failure carries the object's conditions, its recent events and the last
//! lines of its log.

pub mod checks;
pub mod devices;
pub mod kserve;
pub mod reach;
pub mod recorded;
pub mod servers;
pub mod status;
pub mod wait;

use std::collections::BTreeMap;
use std::time::Instant;

use crate::cluster::Cluster;

use crate::output::Shell;

// Callers name the timeouts here; they live in the leaf `wait`, which the checks share.
pub use wait::Timeouts;

/// EI's default namespace for model servers (`data/kserve.json`); an entry may name another.
pub const NAMESPACE: &str = "llm-inference";

#[derive(Debug, Clone)]
pub struct Expect {
    /// The device nodes `eas up` saw: node -> the device resources it advertised.
    pub device_nodes: BTreeMap<String, Vec<String>>,
    pub models: Models,
}

/// The model servers verification looks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Models {
    /// No run of `eas up` is recorded for this cluster (where the record was looked for).
    NotInstalled(String),
    /// The run deployed no model because none fits: the fit decision, as a choice line.
    NoneFits(String),
    /// The names of the LLMInferenceServices the run deployed.
    Named(Vec<String>),
    /// Every LLMInferenceService found (a layer whose model list eas does not write).
    Found,
}

/// Why verification did not pass; `crate::commands::edge` maps it to its exit code.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Installed, but a check failed: every node's and server's line, `ok` or `FAIL` (exit 5).
    #[error("{}", .0.join("; "))]
    Failed(Vec<String>),
    /// No run of `eas up` is recorded: the devices were checked, and there is no model server to
    /// verify. Not a failed verification, whatever the devices showed: `devices` holds every
    /// device node's line when one failed (empty when they passed).
    #[error("{line}; the devices were checked{}", if .devices.is_empty() { "" } else { " and one or more failed (above)" })]
    NotInstalled { line: String, devices: Vec<String> },
}

/// Runs every check, devices first; `Ok` carries one line per passed check.
pub async fn verify(cluster: &Cluster, exp: &Expect, t: &Timeouts, shell: &Shell) -> Result<Vec<String>, VerifyError> {
    shell.phase(
        "verify",
        format!("waiting up to {}s for every device node's resources and plugin pod", t.devices.as_secs()),
    );
    let started = Instant::now();
    let progress = shell.wait("verify devices", t.devices);
    let devices = devices::run(cluster, &exp.device_nodes, t.devices, t.poll, t.call, &progress).await;
    let mut passed = match (devices, &exp.models) {
        (Ok(passed), _) => passed,
        // Nothing installed: said whatever the devices showed (exit 1, not 5).
        (Err(lines), m @ Models::NotInstalled(_)) => {
            return Err(VerifyError::NotInstalled { line: no_model_line(m), devices: lines });
        }
        (Err(lines), _) => return Err(VerifyError::Failed(lines)),
    };
    drop(progress);
    let deadline = if t.whole { started } else { Instant::now() } + t.models;
    let names = match &exp.models {
        Models::Named(n) if !n.is_empty() => n.clone(),
        Models::Found => servers::found(cluster, deadline, t).await.map_err(VerifyError::Failed)?,
        other => {
            for l in &passed {
                shell.note(format!("ok {l}"));
            }
            // Nothing installed is not a failed verification (exit 5 is "installed, but"): the
            // devices were checked, and there is no model server to verify.
            if let Models::NotInstalled(_) = other {
                return Err(VerifyError::NotInstalled { line: no_model_line(other), devices: Vec::new() });
            }
            return Err(VerifyError::Failed(vec![no_model_line(other)]));
        }
    };
    shell.phase(
        "verify",
        format!(
            "waiting up to {}s for {}: ready, workload pods Ready, the model answering (readiness only where its API is not known)",
            t.models.as_secs(),
            names.join(", ")
        ),
    );
    let progress = shell.wait("verify model servers", deadline.saturating_duration_since(Instant::now()));
    passed.extend(servers::wait(cluster, &names, deadline, t, &progress).await.map_err(VerifyError::Failed)?);
    Ok(passed)
}

/// Why there is no model server to check: said at once, without waiting.
pub fn no_model_line(m: &Models) -> String {
    match m {
        Models::NotInstalled(where_) => {
            format!("no model server eas installed on this cluster: no run of `eas up` is recorded in {where_}")
        }
        Models::NoneFits(decision) => {
            format!("no model was deployed because none fits this cluster (fit decision: {decision})")
        }
        Models::Named(_) | Models::Found => "no model was deployed: the run's model list is empty".to_string(),
    }
}
