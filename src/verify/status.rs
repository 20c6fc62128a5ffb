//! `eas status [--output json]` (SPEC §1): what `eas up` installed on this cluster, from its
//! record (layer, profile, commits, model, when, the last run's outcome and log), and how it is
//! now, read live: device resources per device node, the model servers of either kind EI serves
//! models as (`data/kserve.json`), in every namespace, with their conditions, their workload pods
//! ready out of desired (vLLM's), and their service endpoint. Judging health is
//! `verify`'s job: status exits 0 whenever it could read the cluster, 1 when it could not.
//!
//! The JSON document is `eas-status/v1`, described by data/eas-status.v1.schema.json.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Endpoints;

use serde::Serialize;
use serde_json::Value;

use crate::cluster::{ApiError, CALL};
use crate::output::OutputFormat;
use crate::settings::Global;
use crate::state::StateDir;
use crate::state::journal::State;
use crate::verify::recorded::Expected;
use crate::verify::{self, devices};

pub const SCHEMA: &str = "eas-status/v1";

/// What `eas status` prints.
#[derive(Debug, Clone)]
pub struct StatusSettings {
    pub output: OutputFormat,
}

#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub schema: &'static str,
    pub cluster: Cluster,
    /// The last run that began its install phase (a partial install included); `null` when no
    /// run did (a run that stopped before it is an attempt, in `last_run`).
    pub installed: Option<Installed>,
    /// The latest run, attempt or install: where it stopped and why.
    pub last_run: Option<crate::state::records::LastRun>,
    /// An eas command that holds this cluster's lock now (`eas up` or `eas down` in progress);
    /// `null` when none does. `installed` and `last_run` are then what it has recorded so far.
    pub running: Option<Running>,
    pub live: Live,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Running {
    /// The command as it took the lock (`eas up`, `eas down`).
    pub command: String,
    pub pid: u32,
    pub host: String,
    pub since: String,
    /// The phase its record says is running, when one does.
    pub phase: Option<crate::plan::PhaseId>,
    /// Held from another host (a shared state directory): eas cannot tell whether it still runs.
    pub other_host: bool,
}

/// The run in progress: the lock's live holder (or one on another host), and the phase its
/// record marks running. A stale lock (its process gone) is no run in progress.
pub fn running(lock: Option<crate::state::lock::Found>, records: &crate::state::records::Records) -> Option<Running> {
    use crate::state::lock::Found;
    let (holder, other_host) = match lock? {
        Found::Live(h) => (h, false),
        Found::OtherHost(h) => (h, true),
        Found::Stale(_) | Found::Unreadable(_) => return None,
    };
    let journals = [records.attempt.as_ref(), records.install.as_ref()];
    let phase =
        journals.into_iter().flatten().filter(|s| s.exit_code.is_none()).find_map(|s| {
            s.phases.iter().find(|p| p.status == crate::state::journal::Status::Running).map(|p| p.phase)
        });
    Some(Running {
        command: holder.command,
        pid: holder.pid,
        host: holder.host,
        since: holder.started,
        phase,
        other_host,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    pub context: String,
    pub server: String,
    /// The `kube-system` namespace UID: the key of the state directory.
    pub key: String,
    pub state_dir: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub layer: String,
    pub env: String,
    pub profile: String,
    /// Tree (`eas`, `ei`, `eat`) -> commit.
    pub commits: BTreeMap<String, String>,
    /// The model servers the run deployed (empty: none fits; `null`: the layer writes none).
    pub models: Option<Vec<String>>,
    pub started: String,
    pub finished: Option<String>,
    /// The last run's outcome: `succeeded`, `failed in <phase>`, `interrupted` or `running`.
    pub outcome: String,
    pub exit_code: Option<u8>,
    pub log_path: Option<String>,
    /// An `eas down` of this record that did not finish (the record is kept as it was).
    pub down: Option<crate::state::journal::DownEntry>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Live {
    pub device_nodes: Vec<DeviceNode>,
    pub model_servers: Vec<ModelServer>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceNode {
    pub node: String,
    pub device: String,
    pub allocatable: BTreeMap<String, f64>,
    pub plugin_pod: Option<String>,
    pub plugin_ready: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelServer {
    pub name: String,
    pub served_name: String,
    /// `type=status` (reason) for each condition.
    pub conditions: Vec<String>,
    pub pods_ready: i32,
    pub pods_desired: i32,
    /// The service proxy path the model answers at, and how many ready addresses back it.
    pub endpoint: String,
    pub ready_addresses: usize,
    /// `LLMInferenceService` or `InferenceService` (`data/kserve.json`), and where it runs.
    pub kind: String,
    pub namespace: String,
}

fn outcome(s: &State) -> String {
    use crate::state::journal::Status as S;
    if let Some(p) = s.phases.iter().find(|p| p.status == S::Failed) {
        return format!(
            "failed in {}",
            serde_json::to_value(p.phase).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
        );
    }
    match s.exit_code {
        Some(crate::plan::EXIT_SUCCESS) => "succeeded".into(),
        Some(c) if c == crate::plan::Kind::Interrupted.exit_code() => "interrupted".into(),
        Some(c) => format!("failed (exit {c})"),
        None => "running or stopped without a record of its end".into(),
    }
}

pub fn installed(s: &State, expected: Option<&Expected>) -> Installed {
    Installed {
        layer: s.layer.clone(),
        env: s.env.clone(),
        profile: s.pins.profile.clone(),
        commits: s.pins.shas.clone(),
        models: expected.and_then(|e| e.models.clone()),
        started: s.started.clone(),
        finished: s.finished.clone(),
        outcome: outcome(s),
        exit_code: s.exit_code,
        log_path: s.log_path.as_ref().map(|p| p.display().to_string()),
        down: s.down.clone(),
    }
}

async fn model_servers(cluster: &crate::cluster::Cluster, t: Duration) -> Result<Vec<ModelServer>, ApiError> {
    // Both kinds EI serves models as, in every namespace (an entry may name its own).
    let timeouts = verify::Timeouts { call: t, ..verify::Timeouts::default() };
    let servers = verify::servers::servers_in_cluster(cluster, &timeouts).await?;
    let mut out = Vec::new();
    for s in servers {
        let (name, ns, rt) = (s.name.clone(), s.namespace.clone(), s.rt);
        // Gone since the list: not a server any more. A refusal or no answer is the error it is,
        // never "0/0 ready".
        let got = cluster.get_dynamic(&ns, &rt.resource(), &name, &rt.kind, t).await;
        let Some(o) = got? else { continue };
        let v = serde_json::to_value(&o).unwrap_or(Value::Null);
        let conditions = v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
                        format!("{}={} ({})", s("type"), s("status"), s("reason"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The workload Deployment KServe makes for an LLMInferenceService; an InferenceService's
        // was not read, so its pods are not counted.
        let (ready, desired) = if rt.answer.is_some() {
            let dep = get::<Deployment>(cluster, "Deployment", &ns, &format!("{name}-kserve"), t).await?;
            dep.map(|d| {
                let st = d.status.unwrap_or_default();
                (st.ready_replicas.unwrap_or(0), d.spec.replicas.unwrap_or(1))
            })
            .unwrap_or((0, 0))
        } else {
            (0, 0)
        };
        let ep = get::<Endpoints>(cluster, "Endpoints", &ns, &rt.service(&name), t).await?;
        let ready_addresses = ep
            .and_then(|e| e.subsets)
            .unwrap_or_default()
            .iter()
            .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
            .sum();
        let base = rt.proxy_base(&ns, "http", &name);
        out.push(ModelServer {
            served_name: verify::servers::served_name(&v, &name),
            conditions,
            pods_ready: ready,
            pods_desired: desired,
            endpoint: if rt.answer.is_some() { format!("{base}/v1") } else { base },
            ready_addresses,
            kind: rt.kind.clone(),
            namespace: ns,
            name,
        });
    }
    Ok(out)
}

/// One object, bounded (`cluster::get`).
async fn get<K>(
    cluster: &crate::cluster::Cluster,
    kind: &str,
    ns: &str,
    name: &str,
    t: Duration,
) -> Result<Option<K>, ApiError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    cluster.get(ns, name, kind, t).await
}

async fn live(
    cluster: &crate::cluster::Cluster,
    recorded: &BTreeMap<String, Vec<String>>,
    t: Duration,
) -> Result<Live, ApiError> {
    let kinds = &crate::config::data::cluster_rules().device_resources;
    let (nodes, pods) = devices::read(cluster, kinds, t).await?;
    let device_nodes = devices::check(kinds, recorded, &nodes, &pods)
        .into_iter()
        .map(|c| DeviceNode {
            node: c.node,
            device: c.device,
            allocatable: c.allocatable.into_iter().collect(),
            plugin_ready: c.pod.as_ref().is_some_and(|p| p.ready),
            plugin_pod: c.pod.map(|p| format!("{}/{}", p.namespace, p.name)),
        })
        .collect();
    Ok(Live { device_nodes, model_servers: model_servers(cluster, t).await? })
}

/// What the run whose record is in `dir` expected to find (its device nodes, its models), when
/// it wrote that down and the file reads.
pub fn expected(dir: &std::path::Path) -> Result<Option<Expected>, crate::state::journal::JournalError> {
    crate::verify::recorded::read_expected(dir)
}

/// Why `eas status` could not read the cluster. The command layer (`src/commands/status.rs`)
/// prints what it has to say and makes the exit code.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Target(#[from] crate::gather::GatherError),
    /// The API server did not answer with the cluster's key: what a record found by the
    /// context and server each run recorded says is reported beside it.
    #[error("{cause}")]
    Unreachable { cause: String, context: String, server: String, found: Option<Box<crate::state::records::Found>> },
    /// The cluster's key was read, its live state was not (boxed: an API error is large).
    #[error(transparent)]
    Unread(Box<ApiError>),
    /// The API server answered the key's read with an error (401, 403, ...): it answers, so
    /// this is said once, with its own next step, never as "does not answer".
    #[error("{cause}")]
    Answered { cause: String, next: String },
    #[error(transparent)]
    StateDir(#[from] crate::state::StateDirError),
    /// A damaged record is reported as damaged, never read as "nothing installed".
    #[error(transparent)]
    Record(#[from] crate::state::journal::JournalError),
}

/// A read the API server refused: a 401 names the credentials the kubeconfig names, a 403
/// carries the rule that would allow it (`cluster::objects`).
fn answered(e: crate::cluster::ApiError, target: &crate::cluster::Target) -> StatusError {
    let cause = e.to_string();
    if cause.contains(": 401 ") {
        StatusError::Answered {
            cause: format!("{cause}; context {} authenticates as {}", target.context, target.credentials),
            next: format!(
                "refresh the credentials of context {} (k3d: `k3d kubeconfig merge <cluster>`; k3s: copy /etc/rancher/k3s/k3s.yaml again)",
                target.context
            ),
        }
    } else if cause.contains(": 403 ") {
        StatusError::Answered {
            cause,
            next: "bind the context's user to a ClusterRole with that rule, or use a context that has it".into(),
        }
    } else {
        StatusError::Answered { cause, next: "retry; if it persists, check the API server's logs".into() }
    }
}

/// The record under `root` and the cluster as they are now: what `eas status` shows.
pub async fn read(root: &std::path::Path, global: &Global) -> Result<Status, StatusError> {
    let target = crate::gather::target(global, CALL).await?;
    let key = match target.cluster.cluster_key(CALL).await {
        Ok(k) => k,
        Err(e @ crate::cluster::ApiError::Call { .. }) => return Err(answered(e, &target)),
        Err(e) => {
            let found = crate::state::records::find_by_target(root, &target.context, &target.server).map(Box::new);
            return Err(StatusError::Unreachable {
                cause: e.to_string(),
                context: target.context.clone(),
                server: target.server.clone(),
                found,
            });
        }
    };
    let sd = StateDir::new(root, &key)?;
    let records = crate::state::records::Records::read(&sd)?;
    let state = records.install.clone();
    let last_run = records.last_run();
    // Read, never taken: status waits for no one. An unreadable lock is no run to show.
    let lock = crate::state::lock::inspect(&sd.lock_file()).ok().flatten();
    let running = running(lock, &records);
    let expected = if state.is_some() { expected(sd.dir())? } else { None };
    let recorded = expected.as_ref().map(|e| e.device_nodes.clone()).unwrap_or_default();
    let live = live(&target.cluster, &recorded, CALL).await.map_err(|e| StatusError::Unread(Box::new(e)))?;
    Ok(Status {
        schema: SCHEMA,
        cluster: Cluster {
            context: target.context.clone(),
            server: target.server.clone(),
            key,
            state_dir: sd.dir().display().to_string(),
        },
        installed: state.as_ref().map(|s| installed(s, expected.as_ref())),
        last_run,
        running,
        live,
    })
}

/// The table a person reads.
pub fn render(s: &Status) -> String {
    // Every value is escaped before it is placed in a line: a newline in a name or a reason read
    // from the cluster (or kept in the record) would otherwise start a line of its own.
    let e = |v: &str| crate::text::escape_controls(v);
    let mut o = format!("cluster   {} ({})\n", e(&s.cluster.context), e(&s.cluster.server));
    if let Some(r) = &s.running {
        let phase = r.phase.map(|p| format!(", in phase {}", p.name())).unwrap_or_default();
        let host = if r.other_host {
            format!(" on {} (another host: eas cannot tell if it still runs)", e(&r.host))
        } else {
            String::new()
        };
        o.push_str(&format!("running   `{}` (pid {}{host}, since {}){phase}\n", e(&r.command), r.pid, e(&r.since)));
    }
    match &s.installed {
        None => match &s.last_run {
            Some(l) => o.push_str(&format!(
                "installed nothing; last run failed at {} (exit {}): {}\n  next: `eas up --dry-run` lists what stops it\n",
                l.phase,
                l.exit_code.map_or("-".to_string(), |c| c.to_string()),
                e(l.cause.as_deref().unwrap_or("see its plan in the state directory's attempt/"))
            )),
            None => {
                o.push_str(&format!("installed nothing: no run of `eas up` is recorded in {}\n", e(&s.cluster.state_dir)))
            }
        },
        Some(i) => {
            o.push_str(&format!("installed {} (env {}), profile {}\n", e(&i.layer), e(&i.env), e(&i.profile)));
            for (tree, sha) in &i.commits {
                o.push_str(&format!("  {:<4} {}\n", e(tree), e(sha)));
            }
            let models = match &i.models {
                Some(m) if m.is_empty() => "none (no model fits)".to_string(),
                Some(m) => e(&m.join(", ")),
                None => "-".to_string(),
            };
            o.push_str(&format!("  model {models}\n"));
            o.push_str(&format!(
                "last run  {} ({} .. {})\n",
                e(&i.outcome),
                e(&i.started),
                e(i.finished.as_deref().unwrap_or("-"))
            ));
            if let Some(l) = &i.log_path {
                o.push_str(&format!("  log {}\n", e(l)));
            }
            if let Some(d) = &i.down {
                let status = serde_json::to_value(d.status).ok().and_then(|v| v.as_str().map(str::to_string));
                o.push_str(&format!(
                    "last down {} ({} .. {}): {}\n",
                    status.unwrap_or_default(),
                    e(&d.started),
                    e(&d.finished),
                    e(&d.message)
                ));
            }
        }
    }
    o.push_str("devices\n");
    if s.live.device_nodes.is_empty() {
        o.push_str("  (no device node)\n");
    }
    for d in &s.live.device_nodes {
        let alloc: Vec<String> = d.allocatable.iter().map(|(r, q)| format!("{}={q}", e(r))).collect();
        let pod = e(d.plugin_pod.as_deref().unwrap_or("no plugin pod"));
        let ready = if d.plugin_ready { "Ready" } else { "not Ready" };
        o.push_str(&format!("  {:<20} {:<10} {:<40} {pod} {ready}\n", e(&d.node), e(&d.device), alloc.join(" ")));
    }
    o.push_str("model servers\n");
    if s.live.model_servers.is_empty() {
        o.push_str("  (none in any namespace)\n");
    }
    for m in &s.live.model_servers {
        let pods = if m.kind == verify::kserve::vllm().kind {
            format!("pods {}/{}", m.pods_ready, m.pods_desired)
        } else {
            "pods not counted".to_string()
        };
        o.push_str(&format!(
            "  {} {}/{} (serves {}): {pods}; {} ready address(es) behind {}\n",
            e(&m.kind),
            e(&m.namespace),
            e(&m.name),
            e(&m.served_name),
            m.ready_addresses,
            e(&m.endpoint)
        ));
        for c in &m.conditions {
            o.push_str(&format!("    {}\n", e(c)));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PhaseId;
    use crate::state::lock::{Found, Holder};
    use crate::state::records::Records;

    fn holder() -> Holder {
        Holder { pid: 42, host: "h".into(), started: "t0".into(), command: "eas up".into(), pid_start: Some(7) }
    }

    #[test]
    fn a_live_lock_is_a_run_in_progress_in_the_phase_its_record_marks_running() {
        let mut attempt = State::sample("t0");
        attempt.begin(PhaseId::Bastion, None, "t1");
        let records = Records { install: None, attempt: Some(attempt) };
        let r = running(Some(Found::Live(holder())), &records).unwrap();
        assert_eq!((r.command.as_str(), r.pid, r.phase, r.other_host), ("eas up", 42, Some(PhaseId::Bastion), false));
        // Another host's holder is shown, marked as such.
        assert!(running(Some(Found::OtherHost(holder())), &records).unwrap().other_host);
        // A stale or unreadable lock, or none, is no run in progress.
        assert_eq!(running(Some(Found::Stale(holder())), &records), None);
        assert_eq!(running(Some(Found::Unreadable("x".into())), &records), None);
        assert_eq!(running(None, &records), None);
    }

    #[test]
    fn a_phase_left_running_by_a_run_that_ended_is_not_the_live_runs_phase() {
        // The install's record ended (exit code set) with a phase still marked running; the live
        // holder (an `eas down`, say) has no phase of its own.
        let mut install = State::sample("t0");
        install.begin(PhaseId::Install, None, "t1");
        install.exit_code = Some(1);
        let records = Records { install: Some(install), attempt: None };
        let mut down = holder();
        down.command = "eas down".into();
        assert_eq!(running(Some(Found::Live(down)), &records).unwrap().phase, None);
    }
}
