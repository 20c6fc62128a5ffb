//! `eas verify` against recorded clusters, without Docker: the device check node by node
//! (fixtures/clusters/gpu-nodes: a crash-looping GPU plugin on one node, an xe-only node, a node
//! without a GPU), and the model-server checks against the objects KServe v0.18.0 really makes
//! (tests/it/support/kserve.rs): the router-scheduler's unready pod, a terminating pod, a rollout's
//! new pod, the served name, a Service port, and an empty model list.

use crate::support;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};
use support::{ClusterServer, ObjectKey, contains_all, exited, fixture, kserve};

const MODEL: &str = "qwen2-5-coder-7b";

/// The `kube-system` namespace UID of a recorded cluster: the key of its state directory.
fn cluster_key(name: &str) -> String {
    let text = std::fs::read_to_string(fixture(name).join("namespaces.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let ns = doc["items"].as_array().unwrap().iter().find(|n| n["metadata"]["name"] == "kube-system").unwrap();
    ns["metadata"]["uid"].as_str().unwrap().to_string()
}

struct Cluster {
    server: ClusterServer,
    home: tempfile::TempDir,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        Cluster { server: ClusterServer::start(fixture(name)), home: tempfile::tempdir().unwrap() }
    }

    /// The desktop cluster, with `model` recorded as what eas installed on its GPU node.
    fn desktop_serving(model: &str) -> Cluster {
        let c = Cluster::start("k3d-gpu-desktop");
        c.record(
            "k3d-gpu-desktop",
            json!({"device_nodes": {"k3d-gpu-server-0": ["gpu.intel.com/i915"]}, "models": [model], "fit": null}),
        );
        c
    }

    fn state(&self) -> PathBuf {
        self.home.path().join("state")
    }

    /// gpu-nodes after an install that recorded no device node of its own and no model list
    /// (every node with a device is checked, then every model server found).
    fn gpu_nodes_installed() -> Cluster {
        let c = Cluster::start("gpu-nodes");
        c.record("gpu-nodes", json!({"device_nodes": {}, "models": null, "fit": null}));
        c
    }

    /// What a completed `eas up` records: its state (an install, as eas writes one:
    /// fixtures/state/installed.json) and, beside it, what verification expects.
    fn record(&self, cluster: &str, expected: Value) {
        let dir = self.state().join(cluster_key(cluster));
        std::fs::create_dir_all(&dir).unwrap();
        let installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/state/installed.json");
        std::fs::copy(installed, dir.join("state.json")).unwrap();
        std::fs::write(dir.join("expected.json"), serde_json::to_string_pretty(&expected).unwrap()).unwrap();
    }

    /// `eas` on this cluster and state directory: add the command.
    fn eas(&self) -> std::process::Command {
        let mut c = support::eas(self.home.path());
        c.arg("--kubeconfig").arg(self.server.kubeconfig()).arg("--state-dir").arg(self.state());
        c
    }

    fn verify_cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.eas();
        c.arg("verify").args(args);
        c
    }

    /// `eas status --output json`, which must succeed, checked against its schema.
    fn status_json(&self) -> Value {
        let out = self.eas().args(["status", "--output", "json"]).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        assert_status_schema(&doc);
        doc
    }

    fn verify(&self, args: &[&str]) -> Output {
        self.verify_cmd(args).output().unwrap()
    }

    fn spawn_verify(&self, args: &[&str]) -> Child {
        self.verify_cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
}

/// Fails unless `doc` satisfies data/eas-status.v1.schema.json.
fn assert_status_schema(doc: &Value) {
    let errors = support::schema_errors("eas-status.v1", doc);
    assert!(errors.is_empty(), "{errors:?}\n{doc}");
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// k3d-gpu-desktop after an install that deployed `MODEL`.
fn desktop_with_model(served: Option<&str>) -> Cluster {
    let c = Cluster::desktop_serving(MODEL);
    kserve::install(&c.server, MODEL, served);
    c
}

fn assert_ok(out: &Output) -> String {
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "eas verify failed ({:?}):\n{e}\n{o}", out.status.code());
    o
}

#[test]
fn the_router_schedulers_pod_is_not_a_workload_pod_and_is_checked_ready() {
    let c = desktop_with_model(None);
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    assert!(out.contains("Intel GPU on node k3d-gpu-server-0"), "devices are checked first:\n{out}");
    assert!(out.contains("MainWorkloadReady") && out.contains("chat completion"), "{out}");
    assert!(out.contains("router pod llm-inference/") && out.contains("router-scheduler"), "{out}");
    let selectors: Vec<String> = c
        .server
        .requests()
        .iter()
        .filter(|l| l.path == "/api/v1/namespaces/llm-inference/pods")
        .filter_map(|l| l.param("labelSelector"))
        .collect();
    assert!(
        selectors.iter().any(|s| s.contains("kserve.io/component=workload")),
        "pods are selected as the workload Service selects them: {selectors:?}"
    );
    assert!(
        selectors.iter().all(|s| s.contains("kserve.io/component=workload") || s.contains("router-scheduler")),
        "{selectors:?}"
    );
}

/// Issue 28 item 3: a dead router leaves the model ready and the route dead; verify fails
/// naming the router pod (KServe ≤ 0.19's scheduler image no longer pulls).
#[test]
fn a_router_pod_that_is_not_ready_fails_verify_naming_it() {
    let c = Cluster::desktop_serving(MODEL);
    kserve::install_with_router(&c.server, MODEL, None, false);
    let out = c.verify(&["--timeout", "3"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(5), "a model server that fails verification: {all}");
    assert!(all.contains(&format!("router pod llm-inference/{MODEL}-kserve-router-scheduler-")), "{all}");
    assert!(all.contains("route is dead"), "{all}");
    assert!(all.contains(&format!("FAIL model server {MODEL}")), "{all}");
}

/// The key of `llm-inference`, created when the fixture lacks it.
fn model_namespace(c: &Cluster) -> ObjectKey {
    let ns = ObjectKey::core("namespaces", "llm-inference");
    if c.server.object(&ns).is_none() {
        c.server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-inference"}}));
    }
    ns
}

/// Issue 28 item 3: in a namespace in Istio's ambient mesh the service proxy cannot reach the
/// pod (the recorded server answers as the API server does); verify reads the model through a
/// port-forward to the Ready workload pod and names that path.
#[test]
fn a_mesh_namespace_is_verified_through_a_port_forward_naming_the_path() {
    let c = desktop_with_model(None);
    let ns = model_namespace(&c);
    c.server.update(&ns, json!({"metadata": {"labels": {"istio.io/dataplane-mode": "ambient"}}}));
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    let line = out.lines().find(|l| l.contains("16-token chat completion returned")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains(&format!("through a port-forward to pod llm-inference/{MODEL}-kserve-")), "{line}");
    assert!(line.contains(":8000") && line.contains("16 tokens, ttft_ms "), "{line}");
    assert!(out.contains(&format!("GET /v1/models lists {MODEL}, through a port-forward")), "{out}");
    let reqs = c.server.requests();
    assert!(reqs.iter().any(|l| l.path.ends_with("/portforward") && l.param("ports").as_deref() == Some("8000")));
    assert!(!reqs.iter().any(|l| l.path.contains("/proxy")), "no service proxy call in the mesh");
}

/// The recorded mesh namespace's service proxy answers as a real API server does when the
/// mesh resets its connection to the pod: 503 ServiceUnavailable, "error trying to reach service".
#[test]
fn the_service_proxy_of_a_mesh_namespace_answers_503_as_the_api_server_does() {
    let c = desktop_with_model(None);
    let ns = model_namespace(&c);
    let path =
        format!("/api/v1/namespaces/llm-inference/services/http:{MODEL}-kserve-workload-svc:8000/proxy/v1/models");
    let get = |p: &str| {
        let o = std::process::Command::new("curl")
            .args(["-s", "-H", "Authorization: Bearer recorded-cluster-token", "-w", "\n%{http_code}"])
            .arg(format!("{}{p}", c.server.url()))
            .output()
            .unwrap();
        text(&o.stdout)
    };
    assert!(get(&path).ends_with("\n200"), "outside the mesh the proxy reaches the pod");
    c.server.update(&ns, json!({"metadata": {"labels": {"istio.io/dataplane-mode": "ambient"}}}));
    let answer = get(&path);
    assert!(answer.ends_with("\n503"), "{answer}");
    let status: Value = serde_json::from_str(answer.rsplit_once('\n').unwrap().0).unwrap();
    assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("ServiceUnavailable")));
    assert!(status["message"].as_str().unwrap().starts_with("error trying to reach service: "), "{status}");
}

#[test]
fn the_answer_is_a_streamed_16_token_completion_with_its_figures() {
    let c = desktop_with_model(None);
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    let line = out.lines().find(|l| l.contains("16-token chat completion returned")).unwrap_or_else(|| panic!("{out}"));
    // The stand-in streams one token a chunk and counts 16 in its usage chunk.
    assert!(line.contains("16 tokens, ttft_ms ") && line.contains("tokens_per_s "), "{line}");
    assert!(!line.contains("n/a"), "both figures come from a streamed answer: {line}");
    let asked: Vec<Value> = c
        .server
        .proxy_posts()
        .iter()
        .filter(|(path, _)| path == "/v1/chat/completions")
        .map(|(_, body)| serde_json::from_slice(body).unwrap())
        .collect();
    assert_eq!(asked.len(), 1, "one completion asked");
    assert_eq!((asked[0]["max_tokens"].as_u64(), asked[0]["stream"].as_bool()), (Some(16), Some(true)));
}

/// The desktop cluster with the OpenVINO model server `qwen3-5-2b-ovms` recorded as installed
/// by eas, its InferenceService `ready` or not.
fn ovms_installed(ready: bool) -> Cluster {
    let c = Cluster::desktop_serving("qwen3-5-2b-ovms");
    kserve::install_ovms(&c.server, kserve::NS, "qwen3-5-2b-ovms", ready);
    c
}

#[test]
fn an_openvino_server_is_verified_as_an_inference_service_by_its_readiness() {
    let c = ovms_installed(true);
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    assert!(out.contains("InferenceService llm-inference/qwen3-5-2b-ovms: Ready"), "{out}");
    assert!(out.contains("qwen3-5-2b-ovms-predictor: readiness only, the answer was not checked"), "{out}");
    let listed = c.server.requests().iter().any(|l| l.path == "/apis/serving.kserve.io/v1beta1/inferenceservices");
    assert!(listed, "InferenceServices are looked for in every namespace");
}

#[test]
fn an_openvino_server_not_ready_fails_naming_its_conditions() {
    let c = ovms_installed(false);
    let out = c.verify(&["--timeout", "2"]);
    let err = exited(&out, 5);
    assert!(err.contains("InferenceService llm-inference/qwen3-5-2b-ovms: Ready=False"), "{err}");
    assert!(err.contains("condition PredictorReady=False reason=ProgressDeadlineExceeded"), "{err}");
}

#[test]
fn a_vllm_server_in_the_entrys_own_namespace_is_found_there() {
    let c = Cluster::desktop_serving(MODEL);
    kserve::install(&c.server, MODEL, None);
    // Moved, as a catalog entry with `namespace: team-a` is deployed: every object in team-a.
    for (gv, res, name) in [
        ("serving.kserve.io/v1alpha2", "llminferenceservices", MODEL.to_string()),
        ("v1", "services", format!("{MODEL}-kserve-workload-svc")),
        ("v1", "endpoints", format!("{MODEL}-kserve-workload-svc")),
        ("v1", "pods", format!("{MODEL}-kserve-7c9f8d6b5-x2x7q")),
        ("v1", "pods", format!("{MODEL}-kserve-router-scheduler-5b8c7d9f4-k8m2p")),
    ] {
        let key = kserve::key(gv, res, &name);
        let mut obj = c.server.remove(&key).unwrap();
        obj["metadata"]["namespace"] = json!("team-a");
        c.server.insert(obj);
    }
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    assert!(out.contains(&format!("LLMInferenceService team-a/{MODEL}: MainWorkloadReady")), "{out}");
    assert!(out.contains("pod team-a/"), "{out}");
}

#[test]
fn a_terminating_pod_is_skipped() {
    let c = desktop_with_model(None);
    let mut old = kserve::pod(&format!("{MODEL}-kserve-6b7d9c8f4-old01"), kserve::workload_labels(MODEL), false, None);
    old["metadata"]["deletionTimestamp"] = json!("2026-10-29T12:30:00Z");
    c.server.insert(old);
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    assert!(!out.contains("old01"), "{out}");
}

#[test]
fn a_rollouts_new_pod_is_waited_for_until_ready() {
    let c = desktop_with_model(None);
    let new = format!("{MODEL}-kserve-8d9e7f6a5-new01");
    c.server.insert(kserve::pod(&new, kserve::workload_labels(MODEL), false, Some("ContainerCreating")));
    let mut child = c.spawn_verify(&["--timeout", "120"]);
    // The new pod turns Ready once verify has looked at the workload pods and found it not Ready.
    let seen = || {
        c.server.requests().iter().any(|l| {
            l.path == "/api/v1/namespaces/llm-inference/pods"
                && l.param("labelSelector").is_some_and(|s| s.contains("kserve.io/component=workload"))
        })
    };
    // (A verify that ends first, without looking, fails below rather than hanging here.)
    while !seen() && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    c.server.update(
        &kserve::pod_key(&new),
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    let out = child.wait_with_output().unwrap();
    let stdout = assert_ok(&out);
    assert!(stdout.contains(&format!("pod llm-inference/{new}: Running and Ready")), "{stdout}");
}

#[test]
fn the_served_name_is_the_spec_model_name() {
    let c = desktop_with_model(Some("Qwen/Qwen2.5-Coder-7B-Instruct"));
    let out = assert_ok(&c.verify(&["--timeout", "20"]));
    assert!(
        out.contains("lists Qwen/Qwen2.5-Coder-7B-Instruct, through the API server's service proxy (http)"),
        "{out}"
    );
}

#[test]
fn the_proxy_answers_only_through_a_port_the_service_has() {
    let c = desktop_with_model(None);
    let svc = kserve::key("v1", "services", &format!("{MODEL}-kserve-workload-svc"));
    c.server.update(&svc, json!({"spec": {"ports": [{"name": "https", "port": 8443, "targetPort": 8000}]}}));
    let out = c.verify(&["--timeout", "1"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    // The API server answers 503 (no endpoints for that port), which the client retries until
    // the attempt's deadline.
    assert!(err.contains(&format!("{MODEL}-kserve-workload-svc through the service proxy")), "{err}");
    let proxied = c.server.requests().iter().filter(|l| l.path.contains("-kserve-workload-svc:8000/proxy")).count();
    assert!(proxied > 0, "verify asked through port 8000");
}

#[test]
fn an_empty_model_list_exits_5_at_once_naming_the_fit_decision() {
    let c = Cluster::start("k3d-gpu-desktop");
    let decision = "memory 125 GiB on k3d-gpu-server-0; fit: none -> model: none ([]): no candidate fits";
    c.record("k3d-gpu-desktop", json!({"device_nodes": {}, "models": [], "fit": decision}));
    // Today's default wait is 40 minutes; a long one here shows nothing is waited for.
    let out = c.verify(&["--timeout", "900"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("no model was deployed because none fits"), "{err}");
    assert!(err.contains("model: none ([]): no candidate fits"), "the fit decision is named: {err}");
    let waited = c.server.requests().iter().any(|l| l.path.contains("llminferenceservices"));
    assert!(!waited, "no model server is looked for");
}

#[test]
fn without_a_record_verify_checks_the_devices_then_says_nothing_is_installed() {
    let c = Cluster::start("k3d-gpu-desktop");
    let out = c.verify(&["--timeout", "900"]);
    assert_eq!(out.status.code(), Some(1), "nothing installed: exit 1, not 5 (installed, but): {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("ok Intel GPU on node k3d-gpu-server-0"), "the device check ran: {err}");
    assert!(err.contains("no model server eas installed"), "{err}");
    assert!(err.contains(&c.state().display().to_string()), "names where the record was looked for: {err}");
}

fn gpu_b_failure(c: &Cluster) -> String {
    let out = c.verify(&["--devices-timeout", "0", "--timeout", "900"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    text(&out.stderr)
}

#[test]
fn a_crash_looping_gpu_plugin_names_its_node_and_blames_no_healthy_one() {
    let c = Cluster::gpu_nodes_installed();
    let err = gpu_b_failure(&c);
    let failing: Vec<&str> = err.lines().filter(|l| l.starts_with("verify: node ")).collect();
    assert!(failing.iter().all(|l| l.starts_with("verify: node gpu-b:")), "only gpu-b is blamed: {failing:?}");
    contains_all(
        &err,
        &[
            "none of gpu.intel.com/i915 or gpu.intel.com/xe is allocatable",
            "CrashLoopBackOff",
            "14 restarts",
            "Failed to scan: no DRM devices found",
            "FreeDiskSpaceFailed",
        ],
    );
    assert!(!err.contains("cpu-0") && !err.contains("NodeReady"), "the other nodes are not reported:\n{err}");
    assert!(!err.contains("no model server eas installed"), "devices fail first:\n{err}");
}

/// With nothing installed, a failing device node is still "nothing installed" (exit 1, SPEC §7),
/// said after the device lines, and the failure ends with what to do: not exit 5, which means
/// "installed, but verification failed".
#[test]
fn without_a_record_a_failing_device_is_named_and_nothing_installed_is_said() {
    let c = Cluster::start("gpu-nodes");
    let out = c.verify(&["--devices-timeout", "0", "--timeout", "900"]);
    let err = exited(&out, 1);
    assert!(err.contains("verify: FAIL Intel GPU on node gpu-b:") && err.contains("CrashLoopBackOff"), "{err}");
    let said = err.lines().find(|l| l.starts_with("error: verify: no model server eas installed")).expect(&err);
    assert!(said.ends_with("the devices were checked and one or more failed (above)"), "{said}");
    assert!(err.trim_end().lines().last().unwrap().starts_with("next: fix the device nodes marked FAIL"), "{err}");
}

#[test]
fn once_the_plugin_recovers_every_gpu_node_passes_and_the_cpu_node_is_ignored() {
    let c = Cluster::start("gpu-nodes");
    let node = ObjectKey::core("nodes", "gpu-b");
    c.server.update(&node, json!({"status": {"allocatable": {"gpu.intel.com/i915": "1"}}}));
    let key = plugin_pod_on(&c, "gpu-b");
    c.server.update(&key, json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    let out = c.verify(&["--devices-timeout", "0", "--timeout", "900"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "nothing installed is exit 1, not a failed verification: {}",
        text(&out.stderr)
    );
    let err = text(&out.stderr);
    for n in ["gpu-a", "gpu-b", "gpu-xe"] {
        assert!(err.contains(&format!("ok Intel GPU on node {n}:")), "{n}:\n{err}");
    }
    assert!(err.contains("gpu.intel.com/xe=2"), "the xe node passes on its xe resource:\n{err}");
    assert!(!err.contains("cpu-0"), "a node without a GPU is not checked:\n{err}");
}

/// The device wait watches what would make a failing node pass: a node that starts advertising
/// its GPU and a plugin pod that turns Ready while verify waits end the wait, and every GPU node
/// passes.
#[test]
fn a_node_that_recovers_during_the_device_wait_passes() {
    let c = Cluster::start("gpu-nodes");
    let node = ObjectKey::core("nodes", "gpu-b");
    let key = plugin_pod_on(&c, "gpu-b");
    let recovered = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            c.server.update(&node, json!({"status": {"allocatable": {"gpu.intel.com/i915": "1"}}}));
            c.server.update(&key, json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
        });
        c.verify(&["--devices-timeout", "120", "--timeout", "900"])
    });
    let err = text(&recovered.stderr);
    assert_eq!(recovered.status.code(), Some(1), "the devices pass, then nothing is installed: {err}");
    for n in ["gpu-a", "gpu-b", "gpu-xe"] {
        assert!(err.contains(&format!("ok Intel GPU on node {n}:")), "{n}:\n{err}");
    }
}

/// The GPU plugin's pod on a node.
fn plugin_pod_on(c: &Cluster, node: &str) -> ObjectKey {
    c.server
        .names("v1", "pods")
        .into_iter()
        .filter_map(|n| n.strip_prefix("kube-system/").map(str::to_string))
        .map(|name| ObjectKey {
            group_version: "v1".into(),
            resource: "pods".into(),
            namespace: "kube-system".into(),
            name,
        })
        .find(|k| c.server.object(k).is_some_and(|p| p["spec"]["nodeName"] == node))
        .expect("a plugin pod on the node")
}

#[test]
fn status_with_nothing_installed_shows_the_live_devices() {
    let c = Cluster::start("gpu-nodes");
    let mut cmd = c.eas();
    let out = cmd.args(["status", "--output", "json"]).output().unwrap();
    assert!(out.status.success(), "status judges nothing: {}", text(&out.stderr));
    let doc: Value = serde_json::from_str(&text(&out.stdout)).expect("one JSON document");
    assert_eq!(doc["schema"], "eas-status/v1");
    assert_status_schema(&doc);
    assert!(doc["installed"].is_null(), "{doc}");
    let nodes: Vec<(&str, bool)> = doc["live"]["device_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["node"].as_str().unwrap(), d["plugin_ready"].as_bool().unwrap()))
        .collect();
    assert_eq!(nodes, [("gpu-a", true), ("gpu-b", false), ("gpu-xe", true)], "cpu-0 has no device");
    assert_eq!(doc["live"]["model_servers"], json!([]));
    let mut cmd = c.eas();
    let table = text(&cmd.arg("status").output().unwrap().stdout);
    assert!(table.contains("installed nothing"), "{table}");
    assert!(table.contains("gpu-b") && table.contains("not Ready"), "{table}");
}

/// A read status is refused is an error naming it, never a model server shown as "0/0 ready".
#[test]
fn status_says_a_refused_read_and_never_shows_it_as_not_ready() {
    let c = desktop_with_model(Some("Qwen/Qwen2.5-Coder-7B-Instruct"));
    c.server.inject(Some("/deployments/"), support::Fault::Status(403, "deployments is forbidden".into()), None);
    let mut cmd = c.eas();
    let out = cmd.arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let (err, table) = (text(&out.stderr), text(&out.stdout));
    assert!(err.contains("403 Forbidden") && err.contains("deployments is forbidden"), "{err}");
    assert!(!table.contains("0/0") && !err.contains("0/0"), "{table}{err}");
}

#[test]
fn status_shows_a_model_server_kserve_made() {
    let c = desktop_with_model(Some("Qwen/Qwen2.5-Coder-7B-Instruct"));
    let doc = c.status_json();
    let m = &doc["live"]["model_servers"][0];
    assert_eq!(m["name"], MODEL);
    assert_eq!(m["served_name"], "Qwen/Qwen2.5-Coder-7B-Instruct");
    assert_eq!(m["ready_addresses"], 1);
    assert!(m["endpoint"].as_str().unwrap().contains(&format!("http:{MODEL}-kserve-workload-svc:8000")), "{m}");
}

#[test]
fn status_lists_both_kinds_in_every_namespace() {
    let c = desktop_with_model(None);
    kserve::install_ovms(&c.server, "team-ov", "qwen3-5-2b-ovms", true);
    let doc = c.status_json();
    let servers = doc["live"]["model_servers"].as_array().unwrap();
    let ov = servers.iter().find(|m| m["name"] == "qwen3-5-2b-ovms").unwrap_or_else(|| panic!("{doc}"));
    assert_eq!((ov["kind"].as_str(), ov["namespace"].as_str()), (Some("InferenceService"), Some("team-ov")));
    assert!(ov["endpoint"].as_str().unwrap().ends_with("/services/http:qwen3-5-2b-ovms-predictor:80/proxy"), "{ov}");
    assert!(ov["conditions"].as_array().unwrap().iter().any(|c| c == "Ready=True (MinimumReplicasAvailable)"), "{ov}");
    let vllm = servers.iter().find(|m| m["name"] == MODEL).unwrap();
    assert_eq!(
        (vllm["kind"].as_str(), vllm["namespace"].as_str()),
        (Some("LLMInferenceService"), Some("llm-inference"))
    );
}

#[test]
fn status_exits_1_when_the_cluster_cannot_be_read() {
    let c = Cluster::start("gpu-nodes");
    c.server.inject(None, support::Fault::Status(500, "etcd is unavailable".into()), None);
    let mut cmd = c.eas();
    let out = cmd.arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).is_empty(), "nothing printed as a result");
}

#[test]
fn main_workload_ready_is_watched_for() {
    let c = desktop_with_model(None);
    let llmisvc = kserve::key("serving.kserve.io/v1alpha2", "llminferenceservices", MODEL);
    let not_ready = json!({"status": {"conditions": [
        {"type": "MainWorkloadReady", "status": "False", "reason": "MinimumReplicasUnavailable"}]}});
    c.server.update(&llmisvc, not_ready);
    let mut child = c.spawn_verify(&["--timeout", "120"]);
    let watching = || {
        c.server
            .requests()
            .iter()
            .any(|l| l.path.ends_with("/llminferenceservices") && l.param("watch").as_deref() == Some("true"))
    };
    while !watching() && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    c.server.update(
        &llmisvc,
        json!({"status": {"conditions": [
        {"type": "MainWorkloadReady", "status": "True", "reason": "MinimumReplicasAvailable"}]}}),
    );
    let out = child.wait_with_output().unwrap();
    let stdout = assert_ok(&out);
    assert!(stdout.contains("MainWorkloadReady"), "{stdout}");
    assert!(watching(), "verify waited with a watch");
}

#[test]
fn a_secret_in_a_pod_log_is_masked_in_verify_excerpts() {
    let c = Cluster::gpu_nodes_installed();
    let key = plugin_pod_on(&c, "gpu-b");
    let token = "hf_SENTINELvErIfY0123456789abcd";
    c.server.set_log(&key.namespace, &key.name, false, &format!("starting\nlogin with HF_TOKEN={token}\n"));
    let out = c.verify_cmd(&["--devices-timeout", "0", "--timeout", "900"]).env("HF_TOKEN", token).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let (err, stdout) = (text(&out.stderr), text(&out.stdout));
    assert!(err.contains("log login with HF_TOKEN=***"), "the excerpt is shown, masked:\n{err}");
    assert!(!err.contains("SENTINELvErIfY") && !stdout.contains("SENTINELvErIfY"), "{err}");
}

#[test]
fn an_api_error_is_its_code_reason_and_escaped_message_never_a_dump() {
    let c = Cluster::start("gpu-nodes");
    c.server.inject(Some("/api/v1/nodes"), support::Fault::Status(500, "etcd \u{1b}[31mdown\u{202e}".into()), None);
    let out = c.verify(&["--devices-timeout", "0", "--timeout", "900"]);
    let all = text(&out.stderr) + &text(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("500 Internal Server Error: etcd \\u{1b}[31mdown\\u{202e}"), "{all}");
    assert!(!all.contains("Status {") && !all.contains('\u{1b}') && !all.contains('\u{202e}'), "{all}");
    // Issue 32 item 5: an API error ends with what to do next.
    let last = text(&out.stderr).trim_end().lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("next: ") || last.starts_with("hint: "), "the last line: {last:?}\n{all}");
}

/// Waiting says what it waits for against its timeout (plain lines without a terminal), and a
/// failure lists every device node ok or FAIL; the JSON document keeps the passing ones as checks.
#[test]
fn the_device_wait_says_what_it_waits_for_and_the_failure_lists_every_node() {
    let c = Cluster::gpu_nodes_installed();
    let out = c.verify(&["--devices-timeout", "2", "--timeout", "900", "--output", "json"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.lines().any(|l| l.starts_with("verify devices: waiting for gpu-b: plugin CrashLoopBackOff, 0:0")
            && l.ends_with(" of 0:02")),
        "{err}"
    );
    for (mark, node) in [("ok  ", "gpu-a"), ("FAIL", "gpu-b"), ("ok  ", "gpu-xe")] {
        assert!(err.contains(&format!("verify: {mark} Intel GPU on node {node}:")), "{mark} {node}:\n{err}");
    }
    // Issue 32 item 5: a failed verification (exit 5) ends with what to do next.
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("next: fix what the FAIL lines name, then run `eas verify` again"), "{last:?}\n{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one document");
    // Every device node is a check object, passed or failed (they were the passing lines, as
    // strings, before issue 32).
    let checks: Vec<(&str, &str, bool)> = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["status"].as_str().unwrap(), c["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        checks,
        [
            ("Intel GPU on node gpu-a", "ok", true),
            ("Intel GPU on node gpu-b", "fail", false),
            ("Intel GPU on node gpu-xe", "ok", true)
        ],
        "{doc}"
    );
    assert_eq!(support::schema_errors("eas-verify.v1", &doc), Vec::<String>::new());
}

/// `eas status` while another eas holds the cluster's lock (here a live `sleep` standing in for
/// the holder, its start time recorded as eas records it): the table and the document name the
/// run in progress; once that process is gone the lock is stale and status shows no run.
#[test]
fn status_shows_a_run_in_progress_from_the_lock_it_holds() {
    let c = Cluster::start("k3d-gpu-desktop");
    let dir = c.state().join(cluster_key("k3d-gpu-desktop"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", holder.id())).unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().parse().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let lock = json!({"pid": holder.id(), "host": host, "started": "2026-12-06T12:00:00Z",
                      "command": "eas up", "pid_start": start});
    std::fs::write(dir.join("lock"), lock.to_string()).unwrap();
    let doc = c.status_json();
    assert_eq!(doc["running"]["command"], "eas up", "{doc}");
    assert_eq!(doc["running"]["pid"], holder.id(), "{doc}");
    assert_eq!(doc["running"]["other_host"], false, "{doc}");
    let table = text(&c.eas().arg("status").output().unwrap().stdout);
    let line = table.lines().nth(1).unwrap_or_default();
    assert!(
        line.starts_with(&format!("running   `eas up` (pid {}, since 2026-12-06T12:00:00Z)", holder.id())),
        "{table}"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let doc = c.status_json();
    assert!(doc["running"].is_null(), "a stale lock is no run in progress: {doc}");
    assert!(std::fs::read_to_string(dir.join("lock")).is_ok(), "status only reads the lock");
}

/// After `eas down` the install record is gone and `expected.json` may be left beside it: verify
/// decides "installed?" from the record, as status and down do, so it checks the devices and says
/// nothing is installed (exit 1) at once, instead of waiting for the model eas removed (exit 5).
#[test]
fn verify_after_a_down_says_nothing_is_installed_and_does_not_wait_for_the_removed_model() {
    let c = Cluster::desktop_serving(MODEL);
    let dir = c.state().join(cluster_key("k3d-gpu-desktop"));
    std::fs::remove_file(dir.join("state.json")).unwrap();
    let out = c.verify(&["--timeout", "2400"]);
    let err = exited(&out, 1);
    assert!(err.contains("ok Intel GPU on node k3d-gpu-server-0"), "{err}");
    assert!(err.contains("no model server eas installed on this cluster"), "{err}");
    assert!(!err.contains(MODEL), "the removed model is not waited for: {err}");
    let status = text(&c.eas().arg("status").output().unwrap().stdout);
    assert!(status.contains("installed nothing"), "status agrees: {status}");
}

/// A damaged record is named, by verify and by status, never read as "nothing installed" or as a
/// model of "-".
#[test]
fn a_damaged_record_is_named_by_verify_and_status() {
    let c = Cluster::desktop_serving(MODEL);
    let dir = c.state().join(cluster_key("k3d-gpu-desktop"));
    std::fs::write(dir.join("expected.json"), "{\"models\": [").unwrap();
    for args in [&["verify", "--timeout", "2400"][..], &["status"][..]] {
        let out = c.eas().args(args).output().unwrap();
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains("expected.json is damaged"), "{args:?}: {err}");
        assert!(err.lines().any(|l| l.starts_with("hint: ") || l.starts_with("next: ")), "{args:?}: {err}");
    }
    std::fs::write(dir.join("state.json"), "{\"schema_version\": 1, \"trunc").unwrap();
    let out = c.verify(&["--timeout", "2400"]);
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("state.json is damaged") && !err.contains("no run of `eas up` is recorded"), "{err}");
}
