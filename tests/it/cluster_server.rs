//! The recorded-cluster server itself (tests/it/support/cluster_server.rs): selectors, paging
//! tokens, and writes stored and served back, as the end-to-end tests will rely on.

use crate::support;

use std::io::{Read, Write};

use serde_json::{Value, json};
use support::cluster_server::{
    FieldSelector, LabelSelector, decode_continue, encode_continue, parse_query, percent_decode, resource_by_plural,
};
use support::*;

#[test]
fn selectors() {
    let obj = json!({"metadata": {"name": "a", "labels": {"app": "x", "tier": "db"}}, "type": "helm.sh/release.v1"});
    let yes = ["app=x", "app==x", "app!=y", "app in (x,y)", "tier notin (web)", "app", "!missing", "app=x,tier=db"];
    for s in yes {
        assert!(LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
    }
    let no = ["app=y", "app!=x", "app in (y)", "tier notin (db)", "missing", "!app", "app=x,tier=web"];
    for s in no {
        assert!(!LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
    }
    let secrets = resource_by_plural("v1", "secrets").unwrap();
    assert!(FieldSelector::parse("type=helm.sh/release.v1", secrets).unwrap().matches(&obj));
    assert!(!FieldSelector::parse("type!=helm.sh/release.v1", secrets).unwrap().matches(&obj));
    assert!(FieldSelector::parse("metadata.name=a", secrets).unwrap().matches(&obj));
    assert!(
        FieldSelector::parse("spec.nodeName=x", secrets).is_err(),
        "like the API server, unindexed fields are refused"
    );
}

#[test]
fn queries_and_tokens() {
    let q = parse_query("fieldSelector=type%3Dhelm.sh%2Frelease.v1&limit=500&labelSelector=a+in+%28b%29");
    assert_eq!(q["fieldSelector"], "type=helm.sh/release.v1");
    assert_eq!(q["labelSelector"], "a in (b)");
    assert_eq!(q["limit"], "500");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(decode_continue(&encode_continue(4000)), Some(4000));
    assert_eq!(decode_continue("garbage!"), None);
}

/// One HTTP/1.1 exchange with the server, as any client would make it.
fn http(server: &ClusterServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let addr = server.url().trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let content_type = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer recorded-cluster-token\r\n\
         User-Agent: kubectl/v1.37.2 (linux/amd64)\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    let code: u16 = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    let json = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, serde_json::from_str(json).unwrap_or(Value::Null))
}

#[test]
fn writes_are_stored_served_back_and_logged() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-inference"}});
    assert_eq!(http(&server, "POST", "/api/v1/namespaces", Some(&ns)).0, 201);
    assert_eq!(http(&server, "POST", "/api/v1/namespaces", Some(&ns)).0, 409, "a second create conflicts");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}});
    assert_eq!(http(&server, "POST", "/api/v1/namespaces/llm-inference/configmaps", Some(&cm)).0, 201);
    let (code, patched) = http(
        &server,
        "PATCH",
        "/api/v1/namespaces/llm-inference/configmaps/cfg",
        Some(&json!({"data": {"a": null, "b": "2"}})),
    );
    assert_eq!(code, 200);
    assert_eq!(patched["data"], json!({"b": "2"}));
    let (code, got) = http(&server, "GET", "/api/v1/namespaces/llm-inference/configmaps/cfg", None);
    assert_eq!((code, got["data"].clone()), (200, json!({"b": "2"})));
    let key = ObjectKey::of("v1", "configmaps", "llm-inference", "cfg");
    assert!(server.object(&key).is_some());
    let (_, list) =
        http(&server, "GET", "/api/v1/namespaces?labelSelector=kubernetes.io%2Fmetadata.name%21%3Dllm-inference", None);
    assert_eq!(list["items"].as_array().unwrap().len(), 5, "the recorded namespaces, not the new one");
    assert_eq!(http(&server, "DELETE", "/api/v1/namespaces/llm-inference/configmaps/cfg", None).0, 200);
    assert_eq!(http(&server, "GET", "/api/v1/namespaces/llm-inference/configmaps/cfg", None).0, 404);
    assert!(server.object(&key).is_none());
    let methods: Vec<String> = server.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, ["POST", "POST", "POST", "PATCH", "GET", "GET", "DELETE", "GET"]);
}

#[test]
fn lists_have_the_api_shape_and_faults_come_and_go() {
    let options = Options { transport: Transport::Plain, ..Options::default() };
    let server = ClusterServer::start_with(fixture("k3s-3node-eas"), options);
    let (code, list) = http(&server, "GET", "/api/v1/nodes?limit=2", None);
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "NodeList");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert!(list["items"][0].get("kind").is_none(), "list items carry no kind, as the API sends them");
    assert_eq!(list["metadata"]["remainingItemCount"], 1);
    let token = list["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, rest) = http(&server, "GET", &format!("/api/v1/nodes?limit=2&continue={token}"), None);
    assert_eq!(rest["items"][0]["metadata"]["name"], "lab-w-2");
    assert!(rest["metadata"].get("continue").is_none());

    server.inject(Some("/api/v1/nodes"), Fault::Status(500, "boom".into()), Some(1));
    let (code, status) = http(&server, "GET", "/api/v1/nodes", None);
    assert_eq!((code, status["kind"].as_str(), status["message"].as_str()), (500, Some("Status"), Some("boom")));
    assert_eq!(http(&server, "GET", "/api/v1/nodes", None).0, 200, "the fault was for one request");
}

/// What a real API server (kube-apiserver with its controllers, issue 29) answered where the
/// recorded one used to answer otherwise.
#[test]
fn access_reviews_carry_no_reason_allowed_or_denied() {
    let options =
        Options { deny_access: vec!["create clusterroles.rbac.authorization.k8s.io".into()], ..Options::default() };
    let server = ClusterServer::start_with(fixture("xeon-amx"), options);
    for (group, resource, allowed) in [("", "namespaces", true), ("rbac.authorization.k8s.io", "clusterroles", false)] {
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "create", "group": group, "resource": resource}}});
        let (code, answer) = http(&server, "POST", ACCESS_REVIEWS, Some(&review));
        assert_eq!(code, 201);
        assert_eq!(answer["status"], json!({"allowed": allowed}), "{resource}: no reason, as the real server");
    }
}

#[test]
fn a_crd_not_installed_is_not_served_until_it_is() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let list = "/apis/serving.kserve.io/v1alpha2/namespaces/llm-inference/llminferenceservices";
    let (code, status) = http(&server, "GET", list, None);
    assert_eq!((code, status["kind"].as_str()), (404, Some("Status")), "not an empty list");
    assert_eq!(http(&server, "GET", &format!("{list}/m"), None).0, 404);
    let (_, groups) = http(&server, "GET", "/apis", None);
    assert!(!groups.to_string().contains("serving.kserve.io"), "discovery does not name the group either");
    support::kserve::crd(&server, "llminferenceservices", "v1alpha2");
    let (code, served) = http(&server, "GET", list, None);
    assert_eq!((code, served["items"].as_array().map(Vec::len)), (200, Some(0)));
    assert!(http(&server, "GET", "/apis", None).1.to_string().contains("serving.kserve.io"));
}

#[test]
fn a_node_whose_ready_condition_is_not_true_carries_the_lifecycle_taint() {
    let server = ClusterServer::start(fixture("gpu-nodes"));
    let node = ObjectKey::core("nodes", "gpu-b");
    let taints = |server: &ClusterServer| server.object(&node).unwrap()["spec"]["taints"].clone();
    assert_eq!(taints(&server), Value::Null, "a Ready node carries none");
    let conditions = |ready: &str| {
        let mut n = server.object(&node).unwrap();
        for c in n["status"]["conditions"].as_array_mut().unwrap() {
            if c["type"] == "Ready" {
                c["status"] = json!(ready);
            }
        }
        json!({"status": {"conditions": n["status"]["conditions"].clone()}})
    };
    server.update(&node, conditions("False"));
    assert_eq!(taints(&server), json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]));
    server.update(
        &node,
        json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                                                     {"key": "gpu", "value": "only", "effect": "NoSchedule"}]}}),
    );
    server.update(&node, conditions("Unknown"));
    assert_eq!(
        taints(&server),
        json!([{"key": "gpu", "value": "only", "effect": "NoSchedule"},
               {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
        "Unknown is unreachable; the operator's own taint stays"
    );
    server.update(&node, conditions("True"));
    assert_eq!(taints(&server), json!([{"key": "gpu", "value": "only", "effect": "NoSchedule"}]), "removed when Ready");
}

#[test]
fn stored_objects_carry_the_fields_the_server_sets() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let labels = json!({"app": "x"});
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}}});
    let (code, made) = http(&server, "POST", "/apis/apps/v1/namespaces/default/deployments", Some(&dep));
    assert_eq!(code, 201);
    let meta = &made["metadata"];
    assert!(meta["uid"].as_str().is_some_and(|u| u.len() == 36), "{meta}");
    assert!(meta["resourceVersion"].as_str().is_some());
    assert_eq!(meta["generation"], 1);
    let created = meta["creationTimestamp"].as_str().unwrap();
    assert!(created.len() == 20 && created.ends_with('Z') && created != "2026-10-29T12:00:00Z", "{created}");
    let managed = &meta["managedFields"][0];
    assert_eq!((managed["manager"].as_str(), managed["operation"].as_str()), (Some("kubectl"), Some("Update")));
    assert_eq!(managed["fieldsType"], "FieldsV1");
    assert!(managed["fieldsV1"]["f:spec"]["f:replicas"].is_object(), "{managed}");

    let path = "/apis/apps/v1/namespaces/default/deployments/d";
    let (_, labelled) = http(&server, "PATCH", path, Some(&json!({"metadata": {"labels": {"a": "b"}}})));
    assert_eq!(labelled["metadata"]["generation"], 1, "metadata alone does not move the generation");
    let (_, scaled) = http(&server, "PATCH", path, Some(&json!({"spec": {"replicas": 2}})));
    assert_eq!(scaled["metadata"]["generation"], 2, "a spec change does");
    assert_eq!(scaled["metadata"]["uid"], meta["uid"]);
    assert_ne!(scaled["metadata"]["resourceVersion"], meta["resourceVersion"]);
    let (_, ns) = http(&server, "GET", "/api/v1/namespaces/kube-system", None);
    assert!(ns["metadata"]["managedFields"].is_array() && ns["metadata"].get("generation").is_none());
}

#[test]
fn a_k3s_cluster_is_served_over_tls_with_a_client_certificate() {
    let server = ClusterServer::start(fixture("k3s-3node-eas"));
    assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());
    let kubeconfig = std::fs::read_to_string(server.kubeconfig()).unwrap();
    for field in ["certificate-authority-data:", "client-certificate-data:", "client-key-data:"] {
        assert!(kubeconfig.contains(field), "{kubeconfig}");
    }
    assert!(!kubeconfig.contains("token:"), "k3s's kubeconfig carries no token");
    assert!(server.ca_pem().is_some_and(|p| p.starts_with("-----BEGIN CERTIFICATE-----")));
    // Plain HTTP on the TLS port gets no HTTP answer.
    let addr = server.url().trim_start_matches("https://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    // The server may drop the connection before the request is written: either way, no answer.
    let _ = write!(conn, "GET /version HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut raw = Vec::new();
    let _ = conn.read_to_end(&mut raw);
    assert!(!String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 200"));
    // eas reads it through that kubeconfig (the CA trusted, the certificate presented).
    let out =
        eas(&fixture("k3s-3node-eas")).arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("at {}", server.url())));
}

/// The raw answer to a GET (a watch's chunked lines), as text.
fn raw_get(server: &ClusterServer, path: &str) -> String {
    let addr = server.url().trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer recorded-cluster-token\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    raw
}

/// As on a real API server: a deleted namespace answers 200 `Terminating`, a second DELETE 409;
/// the namespace controller deletes its content, an object with a finalizer stays (marked) and
/// the namespace's conditions name it (`NamespaceContentRemaining`,
/// `NamespaceFinalizersRemaining`) until an update removes the finalizer; then both go. A watch
/// resuming from a resourceVersion the server no longer holds gets one ERROR event, a 410.
#[test]
fn namespaces_terminate_finalizers_hold_and_old_watches_are_gone() {
    let options = Options { watch_history: 2, ..Default::default() };
    let server = ClusterServer::start_with(fixture("xeon-amx"), options);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "held"}});
    assert_eq!(http(&server, "POST", "/api/v1/namespaces", Some(&ns)).0, 201);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kept", "finalizers": ["example.com/hold"]}, "data": {}});
    let (_, created) = http(&server, "POST", "/api/v1/namespaces/held/configmaps", Some(&cm));
    let before = created["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap() - 1;
    let (code, going) = http(&server, "DELETE", "/api/v1/namespaces/held", None);
    assert_eq!((code, going["status"]["phase"].as_str()), (200, Some("Terminating")), "{going}");
    assert!(going["metadata"]["deletionTimestamp"].is_string(), "{going}");
    assert_eq!(http(&server, "DELETE", "/api/v1/namespaces/held", None).0, 409);
    let (_, ns) = http(&server, "GET", "/api/v1/namespaces/held", None);
    let conditions = ns["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let held = |t: &str| conditions.iter().find(|c| c["type"] == t).cloned().unwrap_or(Value::Null);
    assert_eq!(
        held("NamespaceContentRemaining")["message"],
        "Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert_eq!(
        held("NamespaceFinalizersRemaining")["message"],
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    );
    let (_, cm) = http(&server, "GET", "/api/v1/namespaces/held/configmaps/kept", None);
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "marked, held by its finalizer: {cm}");
    // More changes than the server keeps: a watch from before them is answered 410.
    let old = raw_get(&server, &format!("/api/v1/namespaces?watch=true&resourceVersion={before}&timeoutSeconds=1"));
    assert!(old.contains("\"type\":\"ERROR\"") && old.contains("too old resource version"), "{old}");
    assert!(old.contains("\"code\":410"), "{old}");
    let release = json!({"metadata": {"finalizers": null}});
    assert_eq!(http(&server, "PATCH", "/api/v1/namespaces/held/configmaps/kept", Some(&release)).0, 200);
    let (mut code, mut tries) = (200, 0);
    while code != 404 && tries < 100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        code = http(&server, "GET", "/api/v1/namespaces/held", None).0;
        tries += 1;
    }
    assert_eq!(code, 404, "the namespace goes once nothing holds it");
    assert_eq!(http(&server, "GET", "/api/v1/namespaces/held/configmaps/kept", None).0, 404);
}

/// The egress stand-in's trust file (`SSL_CERT_FILE` for every `eas` of the tests) has no name
/// on disk: the tests keep the stand-in in a static, never dropped, so a named file would be
/// left behind by every test process. It is read through this process's descriptor, and holds
/// the stand-in's CA after the system's.
#[test]
fn the_egress_stand_ins_trust_file_has_no_name_on_disk() {
    let e = support::tls_front::EgressStandIn::start();
    let path = e.cert_file.display().to_string();
    assert!(path.starts_with(&format!("/proc/{}/fd/", std::process::id())), "{path}");
    let target = std::fs::read_link(&e.cert_file).unwrap();
    assert!(target.to_string_lossy().ends_with("(deleted)"), "the file has a name: {}", target.display());
    let pem = std::fs::read_to_string(&e.cert_file).unwrap();
    assert!(pem.trim_end().ends_with("-----END CERTIFICATE-----") && pem.contains("BEGIN CERTIFICATE"), "{pem}");
    // Read twice: each reader opens it afresh, from its start.
    assert_eq!(std::fs::read_to_string(&e.cert_file).unwrap(), pem);
}
