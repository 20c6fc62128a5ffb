//! What "installed and serving" means (SPEC §7), as pure checks over objects read from the
//! cluster. The waiting and reading live in `mod.rs`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// The pods that are not being deleted must exist (else `none`) and all be Ready: a line per pod
/// (`{what} {ns}/{name}: Running and Ready`), or the first that is not, its line (`after` appended)
/// and its name, for its diagnostics. The workload's and the router's pods are checked alike.
pub fn live_pods_ready(
    ns: &str,
    what: &str,
    pods: &[Pod],
    none: impl FnOnce() -> String,
    after: &str,
) -> Result<Vec<String>, (String, Option<String>)> {
    let live: Vec<&Pod> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    if live.is_empty() {
        return Err((none(), None));
    }
    let mut ok = Vec::new();
    for p in live {
        let pname = p.metadata.name.clone().unwrap_or_default();
        match pod_ready(p) {
            Ok(()) => ok.push(format!("{what} {ns}/{pname}: Running and Ready")),
            Err(e) => return Err((format!("{what} {ns}/{pname}: {e}{after}"), Some(pname))),
        }
    }
    Ok(ok)
}

/// The status of a condition of a custom resource, if it has one by that type.
pub fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// The condition `kind` is True; else why not (its status, reason and message). An
/// LLMInferenceService is ready at `MainWorkloadReady`: `Ready` also waits for the InferencePool,
/// which model-manager only marks after the model is ready.
pub fn condition_true(obj: &Value, kind: &str) -> Result<(), String> {
    match condition(obj, kind) {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => Ok(()),
        Some(c) => Err(format!(
            "{kind}={} reason={} message={}",
            c.get("status").and_then(Value::as_str).unwrap_or("?"),
            c.get("reason").and_then(Value::as_str).unwrap_or("-"),
            c.get("message").and_then(Value::as_str).unwrap_or("-")
        )),
        None => Err(format!("no {kind} condition yet")),
    }
}

pub fn conditions_summary(obj: &Value) -> Vec<String> {
    let Some(conds) = obj.pointer("/status/conditions").and_then(Value::as_array) else {
        return vec!["no conditions".into()];
    };
    conds
        .iter()
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
            format!("{}={} reason={} message={}", s("type"), s("status"), s("reason"), s("message"))
        })
        .collect()
}

/// Running, and every container ready.
pub fn pod_ready(p: &Pod) -> Result<(), String> {
    let Some(status) = &p.status else { return Err("no status".into()) };
    let phase = status.phase.as_deref().unwrap_or("Unknown");
    if phase != "Running" {
        return Err(format!("phase {phase}"));
    }
    let ready = status
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if ready { Ok(()) } else { Err("Running but not Ready".into()) }
}

/// `GET /v1/models` lists the served name.
pub fn models_lists(body: &str, name: &str) -> Result<(), String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("/v1/models is not JSON: {e}"))?;
    let ids: Vec<&str> = v
        .get("data")
        .and_then(Value::as_array)
        .map(|d| d.iter().filter_map(|m| m.get("id")?.as_str()).collect())
        .unwrap_or_default();
    if ids.contains(&name) { Ok(()) } else { Err(format!("/v1/models lists {ids:?}, not {name:?}")) }
}

/// A chat completion returned at least one choice.
pub fn chat_answered(body: &str) -> Result<(), String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("chat completion is not JSON: {e}"))?;
    match v.get("choices").and_then(Value::as_array) {
        Some(c) if !c.is_empty() => Ok(()),
        _ => Err(format!("chat completion has no choices: {}", truncate(body, 200))),
    }
}

pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn main_workload_ready_not_ready() {
        let ready = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "MainWorkloadReady", "status": "True"}]}});
        assert!(condition_true(&ready, "MainWorkloadReady").is_ok());
        let only_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(condition_true(&only_ready, "MainWorkloadReady").is_err());
        assert!(condition_true(&only_ready, "Ready").is_ok(), "an InferenceService's Ready");
        let not =
            json!({"status": {"conditions": [{"type": "MainWorkloadReady", "status": "False", "reason": "Pulling"}]}});
        assert!(condition_true(&not, "MainWorkloadReady").unwrap_err().contains("Pulling"));
        assert!(condition_true(&json!({}), "Ready").unwrap_err().contains("no Ready condition"));
    }

    #[test]
    fn pods_must_run_and_be_ready() {
        let pod = |phase: &str, ready: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"phase": phase,
                "conditions": [{"type": "Ready", "status": ready}]}}))
            .unwrap()
        };
        assert!(pod_ready(&pod("Running", "True")).is_ok());
        assert!(pod_ready(&pod("Running", "False")).is_err());
        assert!(pod_ready(&pod("Pending", "False")).is_err());
    }

    #[test]
    fn model_listing_and_chat() {
        assert!(models_lists(r#"{"data":[{"id":"qwen2-5-coder-7b"}]}"#, "qwen2-5-coder-7b").is_ok());
        assert!(models_lists(r#"{"data":[{"id":"Qwen/Qwen2.5-Coder-7B-Instruct"}]}"#, "qwen2-5-coder-7b").is_err());
        assert!(models_lists("nope", "x").is_err());
        assert!(chat_answered(r#"{"choices":[{"message":{"content":"H"}}]}"#).is_ok());
        assert!(chat_answered(r#"{"choices":[]}"#).is_err());
    }
}
