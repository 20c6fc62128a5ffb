//! A model server as KServe v0.18.0 makes it for EI (kserve/kserve@3a432a8,
//! `pkg/controller/v1alpha2/llmisvc`; /work/shared/reference/upstream-shapes.md): the
//! `LLMInferenceService`, its main Deployment `<n>-kserve` and workload pod, the router-scheduler
//! Deployment `<n>-kserve-router-scheduler` and pod (same `app.kubernetes.io/name`, no
//! `kserve.io/component`; EI always asks for one), the workload Service
//! `<n>-kserve-workload-svc` (port 8000 named `https`, selecting `kserve.io/component=workload`)
//! and its Endpoints (an address only for Ready pods).
//!
//! And an OpenVINO model server as EI's model-manager deploys it: an `InferenceService`
//! (serving.kserve.io/v1beta1, Mushtaq-BGA/enterprise-inference@1e10d1a
//! `model_manager/templates/inference-service-ovms.yaml`: the `openvino` model format on the
//! `openvino-runtime` ClusterServingRuntime) whose `Ready` is made of `PredictorReady` and
//! `IngressReady` (kserve/kserve@0217bda `pkg/apis/serving/v1beta1/inference_service_status.go`),
//! behind the Service `<n>-predictor` on port 80 (@be7a409 `model_manager/lib/routing.sh`) to
//! OVMS's REST port 8080 (`runtimes/openvino/serving-runtime.yaml`).

use serde_json::{Value, json};

use super::{ClusterServer, ObjectKey};

pub const NS: &str = "llm-inference";

pub fn workload_labels(name: &str) -> Value {
    json!({"app.kubernetes.io/name": name, "app.kubernetes.io/component": "llminferenceservice-workload",
           "app.kubernetes.io/part-of": "llminferenceservice", "kserve.io/component": "workload",
           "llm-d.ai/role": "both"})
}

pub fn scheduler_labels(name: &str) -> Value {
    json!({"app.kubernetes.io/name": name, "app.kubernetes.io/component": "llminferenceservice-router-scheduler",
           "app.kubernetes.io/part-of": "llminferenceservice"})
}

pub fn key(group_version: &str, resource: &str, name: &str) -> ObjectKey {
    ObjectKey::of(group_version, resource, NS, name)
}

pub fn pod_key(name: &str) -> ObjectKey {
    key("v1", "pods", name)
}

/// A pod as the kubelet reports it: Running and Ready, or Running and not Ready, or waiting.
pub fn pod(name: &str, labels: Value, ready: bool, waiting: Option<&str>) -> Value {
    let status = if ready { "True" } else { "False" };
    let state = match waiting {
        Some(r) => json!({"waiting": {"reason": r}}),
        None => json!({"running": {"startedAt": "2026-10-29T12:05:00Z"}}),
    };
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "vllm"}], "nodeName": "k3d-gpu-server-0"},
        "status": {"phase": if waiting.is_some() { "Pending" } else { "Running" },
            "conditions": [{"type": "Ready", "status": status}, {"type": "ContainersReady", "status": status}],
            "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 0, "state": state}]}})
}

/// Everything KServe creates for a ready model server `name`, served as `served` (when given,
/// in `.spec.model.name`), its router-scheduler Ready (its images repinned as
/// Mushtaq-BGA/enterprise-inference@1e10d1a `roles/kserve/defaults/main.yaml` does).
pub fn install(server: &ClusterServer, name: &str, served: Option<&str>) {
    install_with_router(server, name, served, true);
}

/// As [`install`]; with `router_ready` false the router-scheduler's pod is not Ready: KServe
/// ≤0.19 pins a scheduler image that no longer pulls (the same file says why it repins).
pub fn install_with_router(server: &ClusterServer, name: &str, served: Option<&str>, router_ready: bool) {
    crd(server, "llminferenceservices", "v1alpha2");
    let mut model = json!({"uri": format!("pvc://model-store/{name}")});
    if let Some(s) = served {
        model["name"] = json!(s);
    }
    server.insert(json!({"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
        "metadata": {"name": name, "namespace": NS, "labels": {"app.kubernetes.io/managed-by": "model-manager"}},
        "spec": {"model": model, "router": {"scheduler": {}}},
        "status": {"conditions": [
            {"type": "MainWorkloadReady", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "RouterReady", "status": if router_ready { "True" } else { "False" }, "reason": "SchedulerNotReady"},
            {"type": "Ready", "status": if router_ready { "True" } else { "False" }, "reason": "RouterNotReady"}]}}));
    for (dep, labels, ready) in [
        (format!("{name}-kserve"), workload_labels(name), 1),
        (format!("{name}-kserve-router-scheduler"), scheduler_labels(name), u32::from(router_ready)),
    ] {
        server.insert(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": dep, "namespace": NS, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}},
            "status": {"replicas": 1, "readyReplicas": ready, "availableReplicas": ready}}));
    }
    server.insert(pod(&format!("{name}-kserve-7c9f8d6b5-x2x7q"), workload_labels(name), true, None));
    server.insert(pod(
        &format!("{name}-kserve-router-scheduler-5b8c7d9f4-k8m2p"),
        scheduler_labels(name),
        router_ready,
        (!router_ready).then_some("ImagePullBackOff"),
    ));
    let svc = format!("{name}-kserve-workload-svc");
    server.insert(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": NS},
        "spec": {"type": "ClusterIP", "selector": {"app.kubernetes.io/name": name, "kserve.io/component": "workload",
                 "app.kubernetes.io/part-of": "llminferenceservice"},
                 "ports": [{"name": "https", "port": 8000, "protocol": "TCP", "targetPort": 8000}]}}));
    server.insert(json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": svc, "namespace": NS},
        "subsets": [{"addresses": [{"ip": "10.42.0.31", "targetRef": {"kind": "Pod", "name": format!("{name}-kserve-7c9f8d6b5-x2x7q")}}],
                     "ports": [{"name": "https", "port": 8000, "protocol": "TCP"}]}]}));
}

/// An OpenVINO model server `name` in `ns`, ready or not.
pub fn install_ovms(server: &ClusterServer, ns: &str, name: &str, ready: bool) {
    crd(server, "inferenceservices", "v1beta1");
    let st = if ready { "True" } else { "False" };
    let predictor_reason = if ready { "MinimumReplicasAvailable" } else { "ProgressDeadlineExceeded" };
    server.insert(json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "model-manager"}},
        "spec": {"predictor": {"minReplicas": 1, "maxReplicas": 1,
            "model": {"modelFormat": {"name": "openvino"}, "runtime": "openvino-runtime",
                "resources": {"requests": {"cpu": "8", "memory": "16Gi"}, "limits": {"cpu": "8", "memory": "16Gi"}}}}},
        "status": {"clusterServingRuntimeName": "openvino-runtime",
            "url": format!("http://{name}-predictor.{ns}.svc.cluster.local"),
            "components": {"predictor": {"url": format!("http://{name}-predictor.{ns}.svc.cluster.local")}},
            "conditions": [
                {"type": "IngressReady", "status": "True"},
                {"type": "PredictorReady", "status": st, "reason": predictor_reason},
                {"type": "Ready", "status": st, "reason": predictor_reason}]}}));
    // The predictor Service's selector is KServe's own and was not read here: left out.
    server.insert(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("{name}-predictor"), "namespace": ns},
        "spec": {"type": "ClusterIP",
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}));
}

/// KServe's CRD for `plural` (once): without it the API server does not serve the resource.
pub fn crd(server: &ClusterServer, plural: &str, version: &str) {
    let name = format!("{plural}.serving.kserve.io");
    let key = ObjectKey::of("apiextensions.k8s.io/v1", "customresourcedefinitions", "", &name);
    if server.object(&key).is_none() {
        server.insert(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "serving.kserve.io", "scope": "Namespaced",
                     "names": {"plural": plural}, "versions": [{"name": version, "served": true, "storage": true}]}}));
    }
}
