//! The model servers (SPEC §7), against KServe v0.18.0 as EI installs it (kserve/kserve@3a432a8,
//! `pkg/controller/v1alpha2/llmisvc`; see /work/shared/reference/upstream-shapes.md):
//!
//! - the `LLMInferenceService` reaches `MainWorkloadReady` (the main Deployment is Available);
//! - its workload pods, selected as the workload Service selects them
//!   (`app.kubernetes.io/name=<n>,kserve.io/component=workload`), are Running and Ready. The
//!   router-scheduler's pods (`<n>-kserve-router-scheduler`) share the name label but carry no
//!   `kserve.io/component` (`SchedulerLabels`), so they are not the model server's; pods being
//!   deleted are skipped;
//! - the model answers through the API server's service proxy on `<n>-kserve-workload-svc:8000`
//!   under its served name: `.spec.model.name`, else the resource's name (EI's model-manager
//!   passes `--served-model-name <name>`).
//!
//! Each stage is waited for within the phase's deadline (`MainWorkloadReady` with
//! kube-runtime's `await_condition`, a watch; the rest polled); a failure carries the object's
//! conditions, events and log tail.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use serde_json::Value;

use super::{NAMESPACE, Timeouts, call, checks, diagnostics, llmisvc_resource};

/// The label selector of the workload Service, which is what serves the model.
pub fn workload_selector(name: &str) -> String {
    format!("app.kubernetes.io/name={name},kserve.io/component=workload")
}

/// The name vLLM serves: `.spec.model.name`, else the resource's name.
pub fn served_name(obj: &Value, name: &str) -> String {
    obj.pointer("/spec/model/name").and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or(name).to_string()
}

/// The workload pods that are not being deleted must exist and all be Ready. `Err` names the
/// first that is not, for its diagnostics.
pub fn workload_pods(name: &str, pods: &[Pod]) -> Result<Vec<String>, (String, Option<String>)> {
    let live: Vec<&Pod> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    if live.is_empty() {
        return Err((format!("no pod matches {} in {NAMESPACE} (not being deleted)", workload_selector(name)), None));
    }
    let mut ok = Vec::new();
    for p in live {
        let pname = p.metadata.name.clone().unwrap_or_default();
        match checks::pod_ready(p) {
            Ok(()) => ok.push(format!("pod {NAMESPACE}/{pname}: Running and Ready")),
            Err(e) => return Err((format!("pod {NAMESPACE}/{pname}: {e}"), Some(pname))),
        }
    }
    Ok(ok)
}

/// Why a model server is not through yet.
enum NotYet {
    /// Worth waiting for; the object to diagnose at the deadline.
    Wait(Vec<String>, Option<String>),
    /// Will not change by waiting.
    Fail(Vec<String>),
}

/// Waits until every named model server passes, or the deadline.
pub async fn wait(
    client: &Client,
    names: &[String],
    deadline: Instant,
    t: &Timeouts,
    progress: &crate::output::Wait,
) -> Result<Vec<String>, Vec<String>> {
    // The long wait (weights download, the vLLM startup probe) is for MainWorkloadReady: watch
    // for it. What follows it (pods, endpoints, the first answer) is polled, and at the
    // deadline the polling reports what is missing. A watch that fails leaves it all to polling.
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &llmisvc_resource());
    for name in names {
        progress.update(&format!("{name}: MainWorkloadReady"));
        let ready = |o: Option<&DynamicObject>| {
            o.and_then(|o| serde_json::to_value(o).ok()).is_some_and(|v| checks::workload_ready(&v).is_ok())
        };
        let watched = await_condition(api.clone(), name, ready);
        if !matches!(tokio::time::timeout_at(deadline.into(), watched).await, Ok(Ok(_))) {
            break;
        }
    }
    loop {
        let mut passed = Vec::new();
        let mut pending = Vec::new();
        for name in names {
            match one(client, name, deadline, t).await {
                Ok(lines) => passed.extend(lines),
                Err(NotYet::Fail(lines)) => return Err(lines),
                Err(NotYet::Wait(lines, obj)) => pending.push((name.as_str(), lines, obj)),
            }
        }
        if pending.is_empty() {
            return Ok(passed);
        }
        let waiting: Vec<String> = pending.iter().filter_map(|(_, why, _)| why.first().cloned()).collect();
        progress.update(&waiting.join("; "));
        if Instant::now() >= deadline {
            // Every server, ok or FAIL, then what failed in detail.
            let failed: Vec<&str> = pending.iter().map(|(n, _, _)| *n).collect();
            let mut lines = server_verdicts(names, &failed);
            for (_, why, obj) in pending {
                lines.extend(why);
                if let Some(obj) = obj {
                    lines.extend(diagnostics(client, &obj, t).await);
                }
            }
            return Err(lines);
        }
        tokio::time::sleep(t.poll).await;
    }
}

/// Every model server, `ok` or `FAIL`, in order. Pure.
pub fn server_verdicts(names: &[String], failed: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| format!("{} model server {NAMESPACE}/{n}", if failed.contains(&n.as_str()) { "FAIL" } else { "ok  " }))
        .collect()
}

/// The names of the model servers in the namespace, waiting until there is one.
pub async fn found(client: &Client, deadline: Instant, t: &Timeouts) -> Result<Vec<String>, Vec<String>> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &llmisvc_resource());
    loop {
        let list = call("list llminferenceservices", t.call, api.list(&ListParams::default())).await;
        match list {
            Ok(l) if !l.items.is_empty() => {
                return Ok(l.items.into_iter().filter_map(|o| o.metadata.name).collect());
            }
            Ok(_) if Instant::now() >= deadline => {
                return Err(vec![format!("no model server (LLMInferenceService) in {NAMESPACE}")]);
            }
            Err(e) if Instant::now() >= deadline => return Err(vec![e]),
            _ => tokio::time::sleep(t.poll).await,
        }
    }
}

async fn one(client: &Client, name: &str, deadline: Instant, t: &Timeouts) -> Result<Vec<String>, NotYet> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &llmisvc_resource());
    let what = format!("LLMInferenceService {NAMESPACE}/{name}");
    let obj = match call("get llminferenceservice", t.call, api.get_opt(name)).await {
        Ok(Some(o)) => serde_json::to_value(&o).unwrap_or(Value::Null),
        Ok(None) => return Err(NotYet::Wait(vec![format!("{what} does not exist")], None)),
        Err(e) => return Err(NotYet::Wait(vec![e], None)),
    };
    if let Err(e) = checks::workload_ready(&obj) {
        let mut lines = vec![format!("{what}: {e}")];
        lines.extend(checks::conditions_summary(&obj).into_iter().map(|c| format!("  condition {c}")));
        return Err(NotYet::Wait(lines, Some(name.to_string())));
    }
    let mut passed = vec![format!("{what}: MainWorkloadReady")];
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let lp = ListParams::default().labels(&workload_selector(name));
    let list = call("list pods", t.call, pods.list(&lp)).await.map_err(|e| NotYet::Wait(vec![e], None))?;
    passed.extend(workload_pods(name, &list.items).map_err(|(why, pod)| NotYet::Wait(vec![why], pod))?);
    let served = served_name(&obj, name);
    // The proxy answers 503 until the Service has a ready endpoint, and the client retries a
    // 503: each attempt is bounded by what is left of the phase (at least 5 s).
    let left = deadline
        .saturating_duration_since(Instant::now())
        .clamp(Duration::from_secs(5), t.call.max(Duration::from_secs(5)));
    passed.extend(answers(client, name, &served, left).await?);
    Ok(passed)
}

/// `GET /v1/models` and a one-token chat completion through the API server's service proxy,
/// plain HTTP first (EI's pods serve HTTP on 8000), then HTTPS.
async fn answers(client: &Client, name: &str, served: &str, call_t: Duration) -> Result<Vec<String>, NotYet> {
    let svc = format!("{name}-kserve-workload-svc");
    let mut errors = Vec::new();
    for scheme in ["http", "https"] {
        let base = format!("/api/v1/namespaces/{NAMESPACE}/services/{scheme}:{svc}:8000/proxy");
        let get = http::Request::get(format!("{base}/v1/models")).body(Vec::new()).expect("request builds");
        let body = match call("GET /v1/models", call_t, client.request_text(get)).await {
            Ok(b) => b,
            Err(e) => {
                errors.push(format!("{scheme}: {e}"));
                continue;
            }
        };
        if let Err(e) = checks::models_lists(&body, served) {
            return Err(NotYet::Fail(vec![format!("{svc}: {e}")]));
        }
        let chat =
            serde_json::json!({"model": served, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 1});
        let post = http::Request::post(format!("{base}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&chat).expect("json"))
            .expect("request builds");
        let body = call("POST /v1/chat/completions", call_t, client.request_text(post))
            .await
            .map_err(|e| NotYet::Wait(vec![format!("{svc}: {e}")], None))?;
        checks::chat_answered(&body).map_err(|e| NotYet::Fail(vec![format!("{svc}: {e}")]))?;
        return Ok(vec![
            format!("{svc}: GET /v1/models lists {served} ({scheme})"),
            format!("{svc}: a one-token chat completion returned"),
        ]);
    }
    Err(NotYet::Wait(errors.into_iter().map(|e| format!("{svc} through the service proxy: {e}")).collect(), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool, deleting: bool) -> Pod {
        let mut v = json!({"metadata": {"name": name}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-12-03T09:00:00Z");
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn terminating_pods_are_skipped_and_a_new_one_is_waited_for() {
        assert!(workload_pods("m", &[pod("old", false, true), pod("new", true, false)]).is_ok());
        let (why, p) = workload_pods("m", &[pod("old", true, false), pod("new", false, false)]).unwrap_err();
        assert!(why.contains("new") && why.contains("not Ready"), "{why}");
        assert_eq!(p.as_deref(), Some("new"));
        assert!(workload_pods("m", &[pod("old", true, true)]).unwrap_err().0.contains("no pod matches"));
    }

    #[test]
    fn the_served_name_is_the_spec_model_name_else_the_resource_name() {
        assert_eq!(served_name(&json!({"spec": {"model": {"name": "qwen"}}}), "m"), "qwen");
        assert_eq!(served_name(&json!({"spec": {"model": {"uri": "pvc://x"}}}), "m"), "m");
        assert_eq!(workload_selector("m"), "app.kubernetes.io/name=m,kserve.io/component=workload");
    }
}
