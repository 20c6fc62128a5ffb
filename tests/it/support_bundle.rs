//! `eas support-bundle` against secrets nobody told it about (issue 30 item 3): taken in a shell
//! without `HF_TOKEN` or any password, after a run that a blocker stopped, with a model server's
//! pod, its log and an event each carrying planted secrets in the places a real deployment
//! puts them (env values, args, the last-applied annotation, log lines, event messages).

use crate::support;

use serde_json::{Value, json};
use support::planning::{command, trees};
use support::{ClusterServer, ObjectKey, exited, text};

const CLUSTER: &str = "k3d-gpu-desktop";
const NS: &str = "llm-serving";

/// Every planted secret: none may appear in any file of the bundle.
const PLANTED: [&str; 9] = [
    "hf_PlantedTokenAbcdefghij0123456789",
    "planted-grafana-pw-1",
    "planted-keycloak-pw-2",
    "planted-api-key-3",
    "planted-proxy-pw-4",
    "planted-bearer-5",
    "planted-log-pw-6",
    "planted-event-pw-7",
    "PLANTEDPRIVATEKEYBODY",
];

/// A vLLM pod in the shape KServe's workload takes (env, args, the annotation `kubectl apply`
/// leaves), holding the planted secrets.
fn planted_pod() -> Value {
    let key = "-----BEGIN PRIVATE KEY-----\nPLANTEDPRIVATEKEYBODY\n-----END PRIVATE KEY-----\n";
    let container = json!({"name": "main", "image": "vllm/vllm-openai-cpu:v0.11.0",
        "args": ["--dtype", "bfloat16", "--max-model-len", "8192", "--hf-token", PLANTED[0],
                 "--proxy=http://user:planted-proxy-pw-4@proxy.invalid:3128",
                 "--header=Authorization: Bearer planted-bearer-5"],
        "env": [{"name": "HF_TOKEN", "value": PLANTED[0]},
                {"name": "GRAFANA_ADMIN_PASSWORD", "value": PLANTED[1]},
                {"name": "KEYCLOAK_PASSWD", "value": PLANTED[2]},
                {"name": "OPENAI_API_KEY", "value": PLANTED[3]},
                {"name": "TLS_KEY_PEM", "value": key},
                {"name": "VLLM_CPU_KVCACHE_SPACE", "value": "8"}]});
    let applied = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [container.clone()]}}).to_string();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "qwen-kserve-0", "namespace": NS,
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied}},
        "spec": {"containers": [container]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "main", "restartCount": 0}]}})
}

#[test]
fn a_bundle_without_secrets_in_its_environment_holds_none_of_the_planted_ones_and_the_failed_runs_log() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture(CLUSTER));
    // A real run a blocker stops (no Docker Engine here): its log goes to attempt/logs/.
    let run = command(&server, CLUSTER, state.path(), &t, true, &["--yes"]).output().unwrap();
    assert_ne!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let attempt =
        std::fs::read_dir(state.path()).unwrap().flatten().map(|d| d.path().join("attempt")).find(|p| p.exists());
    let attempt = attempt.unwrap_or_else(|| panic!("no attempt recorded: {}", text(&run.stderr)));
    let logs: Vec<String> = std::fs::read_dir(attempt.join("logs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    // The record names a namespace the bundle reads (as a run that created it would).
    let journal = attempt.join("state.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    doc["ledger"]["created"]["namespaces"] = json!([NS]);
    std::fs::write(&journal, doc.to_string()).unwrap();

    server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    server.insert(planted_pod());
    server.set_log(
        NS,
        "qwen-kserve-0",
        false,
        "INFO loading with token hf_PlantedTokenAbcdefghij0123456789\n\
        INFO db url postgres://admin:planted-log-pw-6@db:5432/models\n",
    );
    server.insert(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "qwen-kserve-0.1", "namespace": NS, "creationTimestamp": "2026-12-06T03:00:00Z"},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": "qwen-kserve-0", "apiVersion": "v1"},
        "reason": "Failed", "type": "Warning", "count": 1,
        "message": "probe failed: GET /health?password=planted-event-pw-7 with Authorization: Bearer planted-bearer-5",
        "source": {"component": "kubelet"}}));
    // A node whose name holds a bidi control.
    let node = ObjectKey::core("nodes", "k3d-gpu-server-0");
    let mut evil = server.object(&node).unwrap();
    evil["metadata"]["name"] = json!("gpu\u{202e}10-edon");
    evil["metadata"]["uid"] = json!("0b1c2d3e-0000-4000-8000-00000000b1d1");
    server.insert(evil);

    let bundle = state.path().join("bundle.tar.gz");
    let out = support::eas(&support::fixture(CLUSTER))
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--state-dir")
        .arg(state.path())
        .args(["support-bundle", "--out"])
        .arg(&bundle)
        .output()
        .unwrap();
    let err = exited(&out, 0);
    let files = support::unpack_bundle(&bundle);
    for (name, body) in &files {
        for s in PLANTED {
            assert!(!body.contains(s), "{s} in {name}:\n{body}");
        }
    }
    assert!(!err.contains("not collected: logs/"), "{err}");
    let attempt_log = files.keys().find(|n| n.starts_with("attempt/logs/up-") && n.ends_with(".log"));
    let attempt_log = attempt_log.unwrap_or_else(|| panic!("the failed run's log: {:?}", files.keys()));
    assert!(files[attempt_log].contains("blocker"), "{}", files[attempt_log]);

    let pod: Value = serde_json::from_str(&files[&format!("cluster/pods/{NS}/qwen-kserve-0/pod.json")]).unwrap();
    let c = &pod["spec"]["containers"][0];
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(&args[..4], ["--dtype", "bfloat16", "--max-model-len", "8192"], "other args are kept");
    assert!(args.contains(&"--proxy=http://***@proxy.invalid:3128"), "{args:?}");
    assert_eq!(c["env"][5]["value"], "8", "a value no rule names is kept");
    assert!(pod["metadata"]["annotations"].get("kubectl.kubernetes.io/last-applied-configuration").is_none(), "{pod}");

    let manifest: Value = serde_json::from_str(&files["manifest.json"]).unwrap();
    let rule = |r: &str| manifest["redacted_by_rule"][r].as_u64().unwrap_or(0);
    // HF_TOKEN, GRAFANA_ADMIN_PASSWORD, KEYCLOAK_PASSWD, OPENAI_API_KEY by name; TLS_KEY_PEM by its value.
    assert_eq!(rule("env-name"), 4, "{manifest:#}");
    for r in ["last-applied-configuration", "hf-token", "url-userinfo", "bearer-token", "password=", "private-key"] {
        assert!(rule(r) >= 1, "{r}: {manifest:#}");
    }
    let pod_file = format!("cluster/pods/{NS}/qwen-kserve-0/pod.json");
    assert_eq!(manifest["redactions"][&pod_file]["last-applied-configuration"], 1, "{manifest:#}");
    assert!(
        manifest["redactions"][format!("cluster/events/{NS}.json")]["password="].as_u64() >= Some(1),
        "{manifest:#}"
    );

    let nodes = &files["cluster/nodes.json"];
    assert!(!nodes.contains('\u{202e}') && nodes.contains("gpu\\u202e10-edon"), "{nodes}");
}
