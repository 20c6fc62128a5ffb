//! The model servers (SPEC §7). The entry's runtime decides what verify looks for
//! (`data/kserve.json`, [`super::kserve`]):
//!
//! - vLLM: KServe v0.18.0's `LLMInferenceService` as EI installs it (kserve/kserve@3a432a8,
//!   `pkg/controller/v1alpha2/llmisvc`; /work/shared/reference/upstream-shapes.md). It reaches
//!   `MainWorkloadReady`; its workload pods, selected as the workload Service selects them
//!   (`app.kubernetes.io/name=<n>,kserve.io/component=workload`), are Running and Ready (the
//!   router-scheduler's pods share the name label but carry no `kserve.io/component`; pods being
//!   deleted are skipped); the model answers through the API server's service proxy on
//!   `<n>-kserve-workload-svc:8000` under its served name (`.spec.model.name`, else the
//!   resource's name): `GET /v1/models`, then a streamed 16-token chat completion whose time to
//!   first token and tokens per second are reported (figures, never a gate).
//! - OpenVINO: an `InferenceService` (v1beta1) behind `<n>-predictor:80`, `Ready` (KServe's
//!   PredictorReady and IngressReady). OVMS's API path was not read in EI's runtime files, so
//!   verify checks readiness only and says the answer was not checked.
//!
//! A server is found by name in any namespace (the catalog entry's own `namespace`, else EI's
//! default). Each stage is waited for within the phase's deadline (the ready condition with
//! a watch, `cluster::typed::until_dynamic`; the rest polled); a failure carries the object's
//! conditions, events and log tail.

use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DynamicObject, ListParams};

use crate::cluster::typed::Within;
use serde_json::Value;

use super::checks;
use super::kserve::{self, Runtime};
use super::reach;
use super::wait::{Timeouts, diagnostics};

/// Tokens asked of the completion that shows the model answers (and how fast).
pub const COMPLETION_TOKENS: u32 = 16;

/// The label selector of the workload Service, which is what serves the model.
pub fn workload_selector(name: &str) -> String {
    format!("app.kubernetes.io/name={name},kserve.io/component=workload")
}

/// The name vLLM serves: `.spec.model.name`, else the resource's name.
pub fn served_name(obj: &Value, name: &str) -> String {
    obj.pointer("/spec/model/name").and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or(name).to_string()
}

/// One model server: its name, where it runs, and what serves it.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    pub namespace: String,
    pub rt: &'static Runtime,
}

impl Server {
    fn what(&self) -> String {
        format!("{} {}/{}", self.rt.kind, self.namespace, self.name)
    }
}

/// The workload pods that are not being deleted must exist and all be Ready. `Err` names the
/// first that is not, for its diagnostics.
pub fn workload_pods(ns: &str, name: &str, pods: &[Pod]) -> Result<Vec<String>, (String, Option<String>)> {
    let none = || format!("no pod matches {} in {ns} (not being deleted)", workload_selector(name));
    checks::live_pods_ready(ns, "pod", pods, none, "")
}

/// Why a model server is not through yet.
enum NotYet {
    /// Worth waiting for; the object to diagnose at the deadline (its namespace and name).
    Wait(Vec<String>, Option<(String, String)>),
    /// Will not change by waiting.
    Fail(Vec<String>),
}

/// Every object of each runtime's kind, in every namespace: (runtime, namespace, name). A kind
/// whose CRD is absent (404) has none.
pub async fn servers_in_cluster(cluster: &Cluster, t: &Timeouts) -> Result<Vec<Server>, crate::cluster::ApiError> {
    let mut out = Vec::new();
    for rt in &kserve::table().runtimes {
        let listed = cluster.list_dynamic(Within::All, &rt.resource(), t.call).await?;
        out.extend(listed.unwrap_or_default().into_iter().filter_map(|o| {
            Some(Server { name: o.metadata.name?, namespace: o.metadata.namespace.unwrap_or_default(), rt })
        }));
    }
    Ok(out)
}

/// Where `name` is served: the first runtime (vLLM first) with an object of that name, in the
/// catalog's default namespace first.
fn pick_server(all: &[Server], name: &str) -> Option<Server> {
    let default = &kserve::table().default_namespace;
    let mut found: Vec<&Server> = all.iter().filter(|s| s.name == name).collect();
    found.sort_by_key(|s| s.namespace != *default);
    found.first().map(|s| (*s).clone())
}

/// Waits until every named model server passes, or the deadline.
pub async fn wait(
    cluster: &Cluster,
    names: &[String],
    deadline: Instant,
    t: &Timeouts,
    progress: &crate::output::Wait,
) -> Result<Vec<String>, Vec<String>> {
    // The long wait (weights download, the vLLM startup probe) is for the ready condition: watch
    // for it. What follows it (pods, endpoints, the first answer) is polled, and at the
    // deadline the polling reports what is missing. A watch that fails leaves it all to polling.
    let mut located: Vec<Option<Server>> = vec![None; names.len()];
    if let Ok(all) = servers_in_cluster(cluster, t).await {
        for (i, name) in names.iter().enumerate() {
            located[i] = pick_server(&all, name);
        }
    }
    for s in located.iter().flatten() {
        progress.update(&format!("{}: {}", s.name, s.rt.ready_condition));
        let cond = s.rt.ready_condition.clone();
        let ready = move |o: Option<&DynamicObject>| {
            o.and_then(|o| serde_json::to_value(o).ok()).is_some_and(|v| checks::condition_true(&v, &cond).is_ok())
        };
        let resource = s.rt.resource();
        let watched = cluster.until_dynamic(&s.namespace, &resource, &s.name, ready);
        if !matches!(tokio::time::timeout_at(deadline.into(), watched).await, Ok(Ok(()))) {
            break;
        }
    }
    loop {
        let mut passed = Vec::new();
        let mut pending = Vec::new();
        if located.iter().any(Option::is_none)
            && let Ok(all) = servers_in_cluster(cluster, t).await
        {
            for (i, name) in names.iter().enumerate() {
                if located[i].is_none() {
                    located[i] = pick_server(&all, name);
                }
            }
        }
        for (i, name) in names.iter().enumerate() {
            let Some(s) = &located[i] else {
                let kinds: Vec<&str> = kserve::table().runtimes.iter().map(|r| r.kind.as_str()).collect();
                pending.push((
                    name.as_str(),
                    vec![format!("no {} named {name} in any namespace", kinds.join(" or "))],
                    None,
                ));
                continue;
            };
            match one(cluster, s, deadline, t).await {
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
                if let Some((ns, obj)) = obj {
                    lines.extend(diagnostics(cluster, &ns, &obj, t).await);
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
        .map(|n| format!("{} model server {n}", if failed.contains(&n.as_str()) { "FAIL" } else { "ok  " }))
        .collect()
}

/// The names of the model servers in the cluster (either kind, any namespace), waiting until
/// there is one.
pub async fn found(cluster: &Cluster, deadline: Instant, t: &Timeouts) -> Result<Vec<String>, Vec<String>> {
    loop {
        match servers_in_cluster(cluster, t).await {
            Ok(l) if !l.is_empty() => return Ok(l.into_iter().map(|s| s.name).collect()),
            Ok(_) if Instant::now() >= deadline => {
                let kinds: Vec<&str> = kserve::table().runtimes.iter().map(|r| r.kind.as_str()).collect();
                return Err(vec![format!("no model server ({}) in any namespace", kinds.join(" or "))]);
            }
            Err(e) if Instant::now() >= deadline => return Err(vec![e.to_string()]),
            _ => tokio::time::sleep(t.poll).await,
        }
    }
}

async fn one(cluster: &Cluster, s: &Server, deadline: Instant, t: &Timeouts) -> Result<Vec<String>, NotYet> {
    let what = s.what();
    let obj = match cluster.get_dynamic(&s.namespace, &s.rt.resource(), &s.name, &s.rt.kind, t.call).await {
        Ok(Some(o)) => serde_json::to_value(&o).unwrap_or(Value::Null),
        Ok(None) => return Err(NotYet::Wait(vec![format!("{what} does not exist")], None)),
        Err(e) => return Err(NotYet::Wait(vec![e.to_string()], None)),
    };
    if let Err(e) = checks::condition_true(&obj, &s.rt.ready_condition) {
        let mut lines = vec![format!("{what}: {e}")];
        lines.extend(checks::conditions_summary(&obj).into_iter().map(|c| format!("  condition {c}")));
        return Err(NotYet::Wait(lines, Some((s.namespace.clone(), s.name.clone()))));
    }
    let mut passed = vec![format!("{what}: {}", s.rt.ready_condition)];
    let Some(answer) = &s.rt.answer else {
        let why = s.rt.answer_why.as_deref().unwrap_or("its API was not read");
        passed.push(format!("{}: readiness only, the answer was not checked ({why})", s.rt.service(&s.name)));
        return Ok(passed);
    };
    let lp = ListParams::default().labels(&workload_selector(&s.name));
    let pods = cluster
        .list::<Pod>(Within::Namespace(&s.namespace), &lp, "list pods", t.call)
        .await
        .map_err(|e| NotYet::Wait(vec![e.to_string()], None))?;
    let wait = |(why, pod): (String, Option<String>)| NotYet::Wait(vec![why], pod.map(|p| (s.namespace.clone(), p)));
    passed.extend(workload_pods(&s.namespace, &s.name, &pods).map_err(wait)?);
    let lp = ListParams::default().labels(&reach::router_selector(&s.name));
    let routers = cluster
        .list::<Pod>(Within::Namespace(&s.namespace), &lp, "list pods", t.call)
        .await
        .map_err(|e| NotYet::Wait(vec![e.to_string()], None))?;
    let wanted = obj.pointer("/spec/router/scheduler").is_some();
    passed.extend(reach::router_pods(&s.namespace, &s.name, wanted, &routers).map_err(wait)?);
    let ns = cluster
        .get_cluster::<Namespace>(&s.namespace, "Namespace", t.call)
        .await
        .map_err(|e| NotYet::Wait(vec![e.to_string()], None))?;
    let ready: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && checks::pod_ready(p).is_ok())
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let way = reach::way(&ns.and_then(|n| n.metadata.labels).unwrap_or_default(), &ready);
    let served = served_name(&obj, &s.name);
    // The proxy answers 503 until the Service has a ready endpoint, and the client retries a
    // 503: each attempt is bounded by what is left of the phase (at least 5 s).
    let left = deadline
        .saturating_duration_since(Instant::now())
        .clamp(Duration::from_secs(5), t.call.max(Duration::from_secs(5)));
    let answered = match &way {
        reach::Way::Proxy => answers(cluster, s, answer, &served, left).await?,
        reach::Way::Forward { pod, .. } => forwarded(cluster, s, answer, &served, pod, &way, left).await?,
    };
    passed.extend(answered);
    Ok(passed)
}

/// How the server answered a short completion: figures, never a gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Milliseconds from the request to the first token (`None`: the answer was not streamed).
    pub ttft_ms: Option<u64>,
    /// Completion tokens (the server's usage count, else the streamed chunks with content).
    pub tokens: u64,
    /// Completion tokens ÷ seconds from the request to the last token.
    pub tokens_per_s: Option<f64>,
}

impl Figures {
    pub fn line(&self) -> String {
        let ttft = self.ttft_ms.map(|t| t.to_string()).unwrap_or_else(|| "n/a".into());
        let tps = self.tokens_per_s.map(|t| format!("{t:.1}")).unwrap_or_else(|| "n/a".into());
        format!("{} tokens, ttft_ms {ttft}, tokens_per_s {tps}", self.tokens)
    }
}

/// Reads a streamed chat completion (server-sent events, each line with the time it arrived
/// since the request), or a whole JSON completion from a server that did not stream.
pub fn read_completion(lines: &[(Duration, String)]) -> Result<Figures, String> {
    let mut first: Option<Duration> = None;
    let mut last: Option<Duration> = None;
    let mut chunks = 0u64;
    let mut usage: Option<u64> = None;
    let mut events = 0;
    let mut rest = String::new();
    for (at, line) in lines {
        let Some(data) = line.strip_prefix("data:") else {
            rest.push_str(line);
            continue;
        };
        events += 1;
        let data = data.trim();
        if data == "[DONE]" {
            break;
        }
        let v: Value = serde_json::from_str(data).map_err(|e| format!("a streamed chunk is not JSON: {e}"))?;
        if let Some(u) = v.pointer("/usage/completion_tokens").and_then(Value::as_u64) {
            usage = Some(u);
        }
        let content = v.pointer("/choices/0/delta/content").and_then(Value::as_str).unwrap_or("");
        if !content.is_empty() {
            chunks += 1;
            first.get_or_insert(*at);
            last = Some(*at);
        }
    }
    if events == 0 {
        checks::chat_answered(&rest)?;
        let v: Value = serde_json::from_str(&rest).unwrap_or(Value::Null);
        let tokens = v.pointer("/usage/completion_tokens").and_then(Value::as_u64).unwrap_or(0);
        let total = lines.last().map(|(t, _)| *t).unwrap_or_default();
        let tps = (tokens > 0 && !total.is_zero()).then(|| tokens as f64 / total.as_secs_f64());
        return Ok(Figures { ttft_ms: None, tokens, tokens_per_s: tps });
    }
    let Some(first) = first else { return Err("the streamed completion carried no token".into()) };
    let tokens = usage.unwrap_or(chunks);
    let last = last.unwrap_or(first).max(Duration::from_micros(1));
    Ok(Figures {
        ttft_ms: Some(first.as_millis() as u64),
        tokens,
        tokens_per_s: Some(tokens as f64 / last.as_secs_f64()),
    })
}

/// `GET /v1/models` and a streamed 16-token chat completion through the API server's service
/// proxy, plain HTTP first (EI's pods serve HTTP on 8000), then HTTPS.
async fn answers(
    cluster: &Cluster,
    s: &Server,
    a: &kserve::Answer,
    served: &str,
    call_t: Duration,
) -> Result<Vec<String>, NotYet> {
    let svc = s.rt.service(&s.name);
    let mut errors = Vec::new();
    for scheme in ["http", "https"] {
        let base = s.rt.proxy_base(&s.namespace, scheme, &s.name);
        let body = match cluster.get_text(&format!("{base}{}", a.models_path), call_t).await {
            Ok(b) => b,
            Err(e) => {
                errors.push(format!("{scheme}: {e}"));
                continue;
            }
        };
        if let Err(e) = checks::models_lists(&body, served) {
            return Err(NotYet::Fail(vec![format!("{svc}: {e}")]));
        }
        let post = chat_request(&format!("{base}{}", a.chat_path), served);
        let lines = cluster
            .stream_lines("POST /v1/chat/completions", post, call_t)
            .await
            .map_err(|e| NotYet::Wait(vec![format!("{svc}: {e}")], None))?;
        let figures = read_completion(&lines).map_err(|e| NotYet::Fail(vec![format!("{svc}: {e}")]))?;
        let path = format!("{} ({scheme})", reach::Way::Proxy.said(&s.namespace, s.rt.port));
        return Ok(vec![
            format!("{svc}: GET /v1/models lists {served}, {path}"),
            format!("{svc}: a {COMPLETION_TOKENS}-token chat completion returned: {}, {path}", figures.line()),
        ]);
    }
    Err(NotYet::Wait(errors.into_iter().map(|e| format!("{svc} through the service proxy: {e}")).collect(), None))
}

/// The chat request of [`answers`]: a streamed 16-token completion asked of `served`.
fn chat_request(uri: &str, served: &str) -> http::Request<Vec<u8>> {
    let chat = serde_json::json!({"model": served, "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": COMPLETION_TOKENS, "stream": true, "stream_options": {"include_usage": true}});
    http::Request::post(uri)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&chat).expect("json"))
        .expect("request builds")
}

/// `GET /v1/models` and the streamed completion through a port-forward to `pod`'s port (plain
/// HTTP: EI's vLLM pods serve HTTP on 8000), for a namespace in the mesh.
async fn forwarded(
    cluster: &Cluster,
    s: &Server,
    a: &kserve::Answer,
    served: &str,
    pod: &str,
    way: &reach::Way,
    call_t: Duration,
) -> Result<Vec<String>, NotYet> {
    let path = way.said(&s.namespace, s.rt.port);
    let wait = |e: String| NotYet::Wait(vec![format!("{pod}: {e}")], Some((s.namespace.clone(), pod.to_string())));
    let get = http::Request::get(a.models_path.as_str()).body(Vec::new()).expect("request builds");
    let models = cluster
        .forward_http(&s.namespace, pod, s.rt.port, get, "GET /v1/models", call_t)
        .await
        .map_err(|e| wait(e.to_string()))?;
    if models.status != 200 {
        return Err(wait(format!("GET /v1/models answered {} ({path})", models.status)));
    }
    if let Err(e) = checks::models_lists(&models.text(), served) {
        return Err(NotYet::Fail(vec![format!("{pod}: {e}")]));
    }
    let post = chat_request(&a.chat_path, served);
    let chat = cluster
        .forward_http(&s.namespace, pod, s.rt.port, post, "POST /v1/chat/completions", call_t)
        .await
        .map_err(|e| wait(e.to_string()))?;
    let figures = read_completion(&chat.lines).map_err(|e| NotYet::Fail(vec![format!("{pod}: {e}")]))?;
    Ok(vec![
        format!("pod {}/{pod}: GET /v1/models lists {served}, {path}", s.namespace),
        format!(
            "pod {}/{pod}: a {COMPLETION_TOKENS}-token chat completion returned: {}, {path}",
            s.namespace,
            figures.line()
        ),
    ])
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
        assert!(workload_pods("ns", "m", &[pod("old", false, true), pod("new", true, false)]).is_ok());
        let (why, p) = workload_pods("ns", "m", &[pod("old", true, false), pod("new", false, false)]).unwrap_err();
        assert!(why.contains("ns/new") && why.contains("not Ready"), "{why}");
        assert_eq!(p.as_deref(), Some("new"));
        assert!(workload_pods("ns", "m", &[pod("old", true, true)]).unwrap_err().0.contains("no pod matches"));
    }

    #[test]
    fn the_served_name_is_the_spec_model_name_else_the_resource_name() {
        assert_eq!(served_name(&json!({"spec": {"model": {"name": "qwen"}}}), "m"), "qwen");
        assert_eq!(served_name(&json!({"spec": {"model": {"uri": "pvc://x"}}}), "m"), "m");
        assert_eq!(workload_selector("m"), "app.kubernetes.io/name=m,kserve.io/component=workload");
    }

    fn at(ms: u64, line: &str) -> (Duration, String) {
        (Duration::from_millis(ms), line.to_string())
    }

    #[test]
    fn a_streamed_completion_gives_ttft_and_tokens_per_second() {
        let chunk = |c: &str| format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{c}\"}}}}]}}");
        let lines = vec![
            at(5, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}"),
            at(6, ""),
            at(120, &chunk("He")),
            at(170, &chunk("llo")),
            at(250, &chunk("!")),
            at(251, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":4}}"),
            at(252, "data: [DONE]"),
        ];
        let f = read_completion(&lines).unwrap();
        // The first token at 120 ms; the server counts 4 tokens (one chunk may hold two) by 250 ms.
        assert_eq!((f.ttft_ms, f.tokens), (Some(120), 4));
        assert!((f.tokens_per_s.unwrap() - 16.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.line(), "4 tokens, ttft_ms 120, tokens_per_s 16.0");
        // Without usage, the chunks with content are counted.
        let f = read_completion(&lines[..5]).unwrap();
        assert_eq!(f.tokens, 3);
        // A server that ignored "stream" answers one JSON document: no TTFT.
        let whole = vec![at(400, r#"{"choices":[{"message":{"content":"Hi"}}],"usage":{"completion_tokens":2}}"#)];
        let f = read_completion(&whole).unwrap();
        assert_eq!((f.ttft_ms, f.tokens), (None, 2));
        assert!((f.tokens_per_s.unwrap() - 5.0).abs() < 1e-9);
        assert!(read_completion(&[at(1, "data: [DONE]")]).unwrap_err().contains("no token"));
        assert!(read_completion(&[at(1, r#"{"choices":[]}"#)]).is_err());
    }

    #[test]
    fn a_server_is_found_by_name_in_the_default_namespace_first() {
        let v = kserve::vllm();
        let o = kserve::runtime("openvino").unwrap();
        let all = vec![
            Server { name: "a".into(), namespace: "team".into(), rt: v },
            Server { name: "a".into(), namespace: "llm-inference".into(), rt: v },
            Server { name: "ov".into(), namespace: "llm-inference".into(), rt: o },
        ];
        let a = pick_server(&all, "a").unwrap();
        assert_eq!(a.namespace, "llm-inference");
        assert_eq!(pick_server(&all, "ov").unwrap().rt.kind, "InferenceService");
        assert!(pick_server(&all, "none").is_none());
    }
}
