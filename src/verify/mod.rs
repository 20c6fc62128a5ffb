//! Verification (SPEC §7): device resources stay allocatable, and each model server reaches
//! `MainWorkloadReady`, its pods run ready, and the model answers through the API server's
//! service proxy. Every wait has a deadline; a failure carries the object's conditions, its
//! recent events and the last lines of its log.

pub mod checks;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ApiResource, DynamicObject, ListParams, LogParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::error::Failure;
use crate::output::Shell;
use crate::settings::timeouts;

pub const NAMESPACE: &str = "llm-inference";

#[derive(Debug, Clone)]
pub struct Expect {
    /// resource name -> device name, from the facts.
    pub devices: BTreeMap<String, String>,
    /// The served names to find; `None` verifies every model server found.
    pub models: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub devices: Duration,
    pub models: Duration,
    pub poll: Duration,
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        // The vLLM startup probe alone allows 20 minutes, and weights download before it.
        Timeouts {
            devices: timeouts::VERIFY_DEVICES,
            models: timeouts::VERIFY,
            poll: timeouts::VERIFY_POLL,
            call: timeouts::CALL,
        }
    }
}

pub fn llmisvc_resource() -> ApiResource {
    ApiResource {
        group: "serving.kserve.io".into(),
        version: "v1alpha2".into(),
        api_version: "serving.kserve.io/v1alpha2".into(),
        kind: "LLMInferenceService".into(),
        plural: "llminferenceservices".into(),
    }
}

async fn call<T>(
    what: &str,
    t: Duration,
    fut: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(t, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer within {}s", t.as_secs())),
    }
}

/// Runs every check; `Ok` carries one line per passed check.
pub async fn verify(client: &Client, exp: &Expect, t: &Timeouts, shell: &Shell) -> Result<Vec<String>, Failure> {
    let mut passed = Vec::new();
    if !exp.devices.is_empty() {
        shell.phase("verify", format!("waiting up to {}s for device resources to be allocatable", t.devices.as_secs()));
        passed.extend(devices(client, exp, t).await.map_err(Failure::Verify)?);
    }
    passed.extend(models(client, exp, t, shell).await.map_err(Failure::Verify)?);
    Ok(passed)
}

async fn devices(client: &Client, exp: &Expect, t: &Timeouts) -> Result<Vec<String>, Vec<String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + t.devices;
    loop {
        let list = call("list nodes", t.call, nodes.list(&ListParams::default())).await.map_err(|e| vec![e])?;
        match checks::devices_allocatable(&exp.devices, &list.items) {
            Ok(ok) => return Ok(ok),
            Err(missing) if Instant::now() >= deadline => return Err(missing),
            Err(_) => tokio::time::sleep(t.poll).await,
        }
    }
}

async fn models(client: &Client, exp: &Expect, t: &Timeouts, shell: &Shell) -> Result<Vec<String>, Vec<String>> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &llmisvc_resource());
    let deadline = Instant::now() + t.models;
    let mut passed = Vec::new();
    // Wait for the expected servers to exist and reach MainWorkloadReady.
    shell.phase(
        "verify",
        format!(
            "waiting up to {}s for the model servers in {NAMESPACE} to reach MainWorkloadReady",
            t.models.as_secs()
        ),
    );
    let ready: Vec<(String, Value)> = loop {
        let list =
            call("list llminferenceservices", t.call, api.list(&ListParams::default())).await.map_err(|e| vec![e])?;
        let objs: Vec<(String, Value)> = list
            .items
            .into_iter()
            .map(|o| (o.metadata.name.clone().unwrap_or_default(), serde_json::to_value(&o).unwrap_or(Value::Null)))
            .collect();
        let wanted: Vec<String> = match &exp.models {
            Some(m) => m.clone(),
            None => objs.iter().map(|(n, _)| n.clone()).collect(),
        };
        let mut pending = Vec::new();
        for name in &wanted {
            match objs.iter().find(|(n, _)| n == name) {
                None => {
                    pending.push((name.clone(), format!("LLMInferenceService {NAMESPACE}/{name} does not exist"), None))
                }
                Some((_, obj)) => {
                    if let Err(e) = checks::workload_ready(obj) {
                        pending.push((
                            name.clone(),
                            format!("LLMInferenceService {NAMESPACE}/{name}: {e}"),
                            Some(obj.clone()),
                        ));
                    }
                }
            }
        }
        if wanted.is_empty() && Instant::now() >= deadline {
            return Err(vec![format!("no model server (LLMInferenceService) in {NAMESPACE}")]);
        }
        if pending.is_empty() && !wanted.is_empty() {
            break objs.into_iter().filter(|(n, _)| wanted.contains(n)).collect();
        }
        if Instant::now() >= deadline {
            let mut lines = Vec::new();
            for (name, why, obj) in pending {
                lines.push(why);
                if let Some(obj) = obj {
                    lines.extend(checks::conditions_summary(&obj).into_iter().map(|c| format!("  condition {c}")));
                }
                lines.extend(diagnostics(client, &name, t).await);
            }
            return Err(lines);
        }
        tokio::time::sleep(t.poll).await;
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for (name, _) in &ready {
        passed.push(format!("LLMInferenceService {NAMESPACE}/{name}: MainWorkloadReady"));
        let lp = ListParams::default().labels(&format!("app.kubernetes.io/name={name}"));
        let list = call("list pods", t.call, pods.list(&lp)).await.map_err(|e| vec![e])?;
        let workload: Vec<&Pod> = list
            .items
            .iter()
            .filter(|p| {
                let l = p.metadata.labels.as_ref();
                l.and_then(|l| l.get("kserve.io/component")).is_none_or(|c| c == "workload")
            })
            .collect();
        if workload.is_empty() {
            let mut lines = vec![format!("no pods labelled app.kubernetes.io/name={name} in {NAMESPACE}")];
            lines.extend(diagnostics(client, name, t).await);
            return Err(lines);
        }
        for p in workload {
            let pname = p.metadata.name.clone().unwrap_or_default();
            if let Err(e) = checks::pod_ready(p) {
                let mut lines = vec![format!("pod {NAMESPACE}/{pname}: {e}")];
                lines.extend(diagnostics(client, &pname, t).await);
                return Err(lines);
            }
            passed.push(format!("pod {NAMESPACE}/{pname}: Running and Ready"));
        }
        passed.extend(answers(client, name, t).await?);
    }
    Ok(passed)
}

/// `GET /v1/models` and a one-token chat completion through the API server's service proxy,
/// plain HTTP first (EI's pods serve HTTP on 8000), then HTTPS.
async fn answers(client: &Client, name: &str, t: &Timeouts) -> Result<Vec<String>, Vec<String>> {
    let svc = format!("{name}-kserve-workload-svc");
    let mut errors = Vec::new();
    for scheme in ["http", "https"] {
        let base = format!("/api/v1/namespaces/{NAMESPACE}/services/{scheme}:{svc}:8000/proxy");
        let get = http::Request::get(format!("{base}/v1/models")).body(Vec::new()).expect("request builds");
        let body = match call("GET /v1/models", t.call, client.request_text(get)).await {
            Ok(b) => b,
            Err(e) => {
                errors.push(format!("{scheme}: {e}"));
                continue;
            }
        };
        if let Err(e) = checks::models_lists(&body, name) {
            return Err(vec![format!("{svc}: {e}")]);
        }
        let chat =
            serde_json::json!({"model": name, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 1});
        let post = http::Request::post(format!("{base}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&chat).expect("json"))
            .expect("request builds");
        let body = call("POST /v1/chat/completions", t.call, client.request_text(post)).await.map_err(|e| vec![e])?;
        checks::chat_answered(&body).map_err(|e| vec![format!("{svc}: {e}")])?;
        return Ok(vec![
            format!("{svc}: GET /v1/models lists {name} ({scheme})"),
            format!("{svc}: a one-token chat completion returned"),
        ]);
    }
    Err(errors.into_iter().map(|e| format!("{svc} through the service proxy: {e}")).collect())
}

/// Recent events for an object and, for a pod, the last lines of its log.
async fn diagnostics(client: &Client, name: &str, t: &Timeouts) -> Vec<String> {
    let mut lines = Vec::new();
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    match call("list events", t.call, events.list(&lp)).await {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            for e in items.iter().rev().take(10).rev() {
                lines.push(format!(
                    "  event {} {}: {}",
                    e.type_.as_deref().unwrap_or("-"),
                    e.reason.as_deref().unwrap_or("-"),
                    e.message.as_deref().unwrap_or("").trim()
                ));
            }
        }
        Err(e) => lines.push(format!("  (events unavailable: {e})")),
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let lp = LogParams { tail_lines: Some(20), ..LogParams::default() };
    if let Ok(log) = call("pod log", t.call, pods.logs(name, &lp)).await {
        lines.extend(log.lines().map(|l| format!("  log {l}")));
    }
    lines
}
