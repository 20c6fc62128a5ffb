//! What the recorded server does as a real API server does it (issue 29 item 7, where eas was run
//! against a kube-apiserver with its controllers): the fields the server sets on every object it
//! stores, the lifecycle taints the node lifecycle controller keeps, 404 for the resources of a
//! CRD that is not installed, and TLS with the cluster's own CA and client-certificate
//! authentication, as k3s and k3d kubeconfigs have it.

use std::sync::Arc;

use serde_json::{Map, Value, json};

/// The taint the node lifecycle controller keeps on a node for each condition status
/// (`nodeConditionToTaintKeyStatusMap`, kubernetes/kubernetes
/// `pkg/controller/nodelifecycle/node_lifecycle_controller.go`): Ready False is not-ready,
/// Ready Unknown (no kubelet heartbeat) unreachable, a pressure condition True its pressure
/// taint; all `NoSchedule`, added while the condition holds and removed when it no longer does.
const LIFECYCLE: &[(&str, &str, &str)] = &[
    ("Ready", "False", "node.kubernetes.io/not-ready"),
    ("Ready", "Unknown", "node.kubernetes.io/unreachable"),
    ("MemoryPressure", "True", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
    ("NetworkUnavailable", "True", "node.kubernetes.io/network-unavailable"),
];

/// Brings a node's `NoSchedule` lifecycle taints in line with its conditions; an operator's own
/// taints are left as they are.
pub fn lifecycle_taints(node: &mut Value) {
    let status_of = |t: &str| {
        node.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == t).and_then(|c| c["status"].as_str()).map(str::to_string))
    };
    let wanted: Vec<&str> = LIFECYCLE
        .iter()
        .filter(|(cond, status, _)| status_of(cond).as_deref() == Some(*status))
        .map(|(_, _, key)| *key)
        .collect();
    let mut taints: Vec<Value> = node.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default();
    let is_lifecycle =
        |t: &Value| t["effect"] == "NoSchedule" && LIFECYCLE.iter().any(|(_, _, k)| t["key"].as_str() == Some(*k));
    taints.retain(|t| !is_lifecycle(t) || wanted.iter().any(|k| t["key"].as_str() == Some(*k)));
    for key in wanted {
        if !taints.iter().any(|t| t["key"] == key && t["effect"] == "NoSchedule") {
            taints.push(json!({"key": key, "effect": "NoSchedule"}));
        }
    }
    let spec = node.as_object_mut().expect("node").entry("spec").or_insert_with(|| json!({}));
    if taints.is_empty() {
        if let Some(s) = spec.as_object_mut() {
            s.remove("taints");
        }
    } else {
        spec["taints"] = Value::Array(taints);
    }
}

/// Kinds whose `metadata.generation` the API server keeps (their registry strategies set it to 1
/// on create and raise it when the spec changes): the workloads, CRDs and custom resources, and
/// pods (pod generation, Kubernetes 1.33 on).
fn has_generation(kind: &str) -> bool {
    matches!(
        kind,
        "Deployment"
            | "DaemonSet"
            | "StatefulSet"
            | "ReplicaSet"
            | "Job"
            | "Pod"
            | "CustomResourceDefinition"
            | "LLMInferenceService"
            | "InferenceService"
    )
}

/// The current time as the API server writes it (RFC 3339, seconds, UTC).
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The set of fields an object carries, as server-side field management records it
/// (`fieldsType: FieldsV1`: `f:<name>` for each field set, `{}` at a leaf or list).
fn fields_v1(v: &Value, top: bool) -> Value {
    let Value::Object(m) = v else { return json!({}) };
    let mut out = Map::new();
    for (k, child) in m {
        let server_set = top && matches!(k.as_str(), "apiVersion" | "kind" | "status");
        if server_set {
            continue;
        }
        let child = if top && k == "metadata" {
            let mut meta = child.clone();
            if let Some(o) = meta.as_object_mut() {
                for f in
                    ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "name", "namespace"]
                {
                    o.remove(f);
                }
            }
            meta
        } else {
            child.clone()
        };
        out.insert(format!("f:{k}"), fields_v1(&child, false));
    }
    Value::Object(out)
}

/// The fields the API server sets when it stores `obj` (`previous`: the object it replaces):
/// `generation` (1, then one more each time the spec changes) for the kinds that carry it, and
/// one `managedFields` entry for the writer (`manager`, its User-Agent's program name) at the
/// current time. uid, resourceVersion and creationTimestamp are the caller's (`stamp`).
pub fn server_fields(obj: &mut Value, previous: Option<&Value>, manager: &str) {
    let kind = obj["kind"].as_str().unwrap_or("").to_string();
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1").to_string();
    let fields = fields_v1(obj, true);
    let spec_changed = previous.is_none_or(|p| p.get("spec") != obj.get("spec"));
    let meta = obj.as_object_mut().expect("object").entry("metadata").or_insert_with(|| json!({}));
    if has_generation(&kind) {
        let before = previous.and_then(|p| p.pointer("/metadata/generation")).and_then(Value::as_u64);
        let generation = match before {
            None => 1,
            Some(g) if spec_changed => g + 1,
            Some(g) => g,
        };
        meta["generation"] = json!(generation);
    }
    let mut managed: Vec<Value> = previous
        .and_then(|p| p.pointer("/metadata/managedFields"))
        .or_else(|| meta.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    managed.retain(|e| e["manager"] != manager || e["operation"] != "Update");
    managed.push(json!({"manager": manager, "operation": "Update", "apiVersion": api_version, "time": now(),
                        "fieldsType": "FieldsV1", "fieldsV1": fields}));
    meta["managedFields"] = Value::Array(managed);
}

/// An object read from a fixture as `kubectl get -o json` wrote it, completed with what the API
/// server would have recorded when it was made: its generation and one managedFields entry
/// (the recorded ones are kept).
pub fn recorded_fields(obj: &mut Value) {
    let has_managed = obj.pointer("/metadata/managedFields").is_some();
    let has_generation_field = obj.pointer("/metadata/generation").is_some();
    if !has_managed {
        let kind = obj["kind"].as_str().unwrap_or("");
        // Nodes are written by their kubelet (k3s), the rest by whoever applied them.
        let manager = if kind == "Node" { "k3s" } else { "kubectl-client-side-apply" };
        let keep = obj.pointer("/metadata/generation").cloned();
        server_fields(obj, None, manager);
        if let Some(g) = keep {
            obj["metadata"]["generation"] = g;
        }
    } else if !has_generation_field && has_generation(obj["kind"].as_str().unwrap_or("")) {
        obj["metadata"]["generation"] = json!(1);
    }
}

/// The resources served only while their CustomResourceDefinition is installed, with the CRD's
/// name: without it the API server does not serve the group at all (404 on lists, gets and
/// discovery), as a cluster before KServe is installed answers.
pub fn crd_of(group_version: &str, plural: &str) -> Option<String> {
    let (group, _) = group_version.split_once('/')?;
    (group == "serving.kserve.io").then(|| format!("{plural}.{group}"))
}

/// The cluster's TLS: its own CA, a serving certificate for 127.0.0.1 and localhost signed by
/// it, and a client certificate (CN `system:admin`, O `system:masters`, as k3s writes its admin
/// kubeconfig) signed by the same CA. The acceptor asks for a client certificate and checks it
/// against the CA; a connection without one may still authenticate with the bearer token.
pub struct ClusterTls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

pub fn cluster_tls() -> ClusterTls {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (ca_cert, issuer) = super::super::tls_front::self_signed_ca("k3s-server-ca");
    let (chain, serving_key) = super::super::tls_front::signed_for(&["127.0.0.1", "localhost"], &issuer);

    let client_key = rcgen::KeyPair::generate().unwrap();
    let mut client_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params.distinguished_name.push(rcgen::DnType::CommonName, "system:admin");
    client_params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:masters");
    client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client = client_params.signed_by(&client_key, &issuer).unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_cert.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, serving_key)
        .unwrap();
    ClusterTls {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        ca_pem: ca_cert.pem(),
        client_cert_pem: client.pem(),
        client_key_pem: client_key.serialize_pem(),
    }
}

/// A kubeconfig as k3s writes `/etc/rancher/k3s/k3s.yaml` (and k3d its merged ones): the
/// cluster's CA and the client's certificate and key embedded, base64, no token.
pub fn tls_kubeconfig(server: &str, context: &str, tls: &ClusterTls) -> String {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {context}\n  cluster:\n    server: {server}\n\
         \x20   certificate-authority-data: {}\n\
         contexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {context}-admin\n\
         current-context: {context}\nusers:\n- name: {context}-admin\n  user:\n\
         \x20   client-certificate-data: {}\n\x20   client-key-data: {}\n",
        b64(&tls.ca_pem),
        b64(&tls.client_cert_pem),
        b64(&tls.client_key_pem),
    )
}
