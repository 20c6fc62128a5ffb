//! How verify reaches a model server, and the router in front of it (issue 28 item 3).
//!
//! EI enrols its model namespace in Istio's ambient mesh when Istio is on
//! (intel/enterprise-inference@eee44104 `roles/llm_services/tasks/install.yaml` lines 14-24,
//! `istio.io/dataplane-mode: ambient`), and a fork of EAS enforces STRICT mTLS there
//! (`roles/istio/defaults`@73173dfd, /work/shared/reference/eas-installer.md §6.2). The API server
//! runs on the host network with no mesh identity, so its service proxy cannot reach such a pod
//! (EAS opens a port of its own webhook for that very reason: intel/enterprise-ai-solutions@cc887cb4
//! `roles/envoy_gateway/tasks/install.yaml`, "Allow apiserver to reach controller webhook
//! (port-level mTLS)"). A port-forward is served by the kubelet inside the pod's own network
//! namespace, where the mesh is not on the way: verify uses one to a Ready workload pod in a mesh
//! namespace, and the service proxy only where the namespace carries no
//! `istio.io/dataplane-mode` (or `none`).
//!
//! The router: KServe's LLMInferenceService with `spec.router.scheduler` runs a router-scheduler
//! (llm-d's endpoint picker) in front of the workload; a dead one leaves the model ready and the
//! route dead. KServe ≤ 0.19 pins scheduler images that no longer pull (the fork repins them:
//! Mushtaq-BGA/enterprise-inference@1e10d1a `roles/kserve/defaults/main.yaml`,
//! `kserve_llmisvc_epp_image`), so verify checks that its pods are Ready.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::checks;

/// The namespace label of Istio's data-plane mode.
pub const MESH_LABEL: &str = "istio.io/dataplane-mode";

/// The label selector of a model server's router-scheduler pods (KServe v0.18.0, kserve/kserve@3a432a8
/// `pkg/controller/v1alpha2/llmisvc`: same name label as the workload, its own component).
pub fn router_selector(name: &str) -> String {
    format!("app.kubernetes.io/name={name},app.kubernetes.io/component=llminferenceservice-router-scheduler")
}

/// How verify reaches the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Way {
    /// The API server's service proxy (a namespace outside the mesh).
    Proxy,
    /// A port-forward to this Ready workload pod (a namespace in the mesh), and why.
    Forward { pod: String, mode: String },
}

/// The way for a namespace with these labels, given its Ready workload pods. Pure.
pub fn way(ns_labels: &BTreeMap<String, String>, ready_pods: &[String]) -> Way {
    match (ns_labels.get(MESH_LABEL).filter(|m| *m != "none"), ready_pods.first()) {
        (Some(mode), Some(pod)) => Way::Forward { pod: pod.clone(), mode: mode.clone() },
        _ => Way::Proxy,
    }
}

impl Way {
    /// The path a check names.
    pub fn said(&self, ns: &str, port: u16) -> String {
        match self {
            Way::Proxy => "through the API server's service proxy".into(),
            Way::Forward { pod, mode } => format!(
                "through a port-forward to pod {ns}/{pod}:{port} (the namespace is in Istio's {mode} mesh, which the \
                 service proxy cannot reach)"
            ),
        }
    }
}

/// When the server asks for a router (`spec.router.scheduler`), its pods that are not being
/// deleted must exist and all be Ready. `Err` names the first that is not. Pure.
pub fn router_pods(ns: &str, name: &str, wanted: bool, pods: &[Pod]) -> Result<Vec<String>, (String, Option<String>)> {
    if !wanted {
        return Ok(Vec::new());
    }
    checks::live_pods_ready(
        ns,
        "router pod",
        pods,
        || format!("no router-scheduler pod matches {} in {ns}", router_selector(name)),
        " (the model may be ready, but its route is dead)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(l: &[(&str, &str)]) -> BTreeMap<String, String> {
        l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_mesh_namespace_is_reached_through_a_port_forward_and_any_other_through_the_proxy() {
        let pods = vec!["m-kserve-0".to_string()];
        let mesh = labels(&[(MESH_LABEL, "ambient")]);
        assert_eq!(way(&mesh, &pods), Way::Forward { pod: "m-kserve-0".into(), mode: "ambient".into() });
        assert_eq!(way(&labels(&[]), &pods), Way::Proxy);
        assert_eq!(way(&labels(&[(MESH_LABEL, "none")]), &pods), Way::Proxy, "`none` opts out of the mesh");
        assert_eq!(way(&mesh, &[]), Way::Proxy, "no Ready pod: nothing to forward to");
        assert!(way(&mesh, &pods).said("ns", 8000).starts_with("through a port-forward to pod ns/m-kserve-0:8000"));
    }

    fn pod(name: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 0, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}))
        .unwrap()
    }

    #[test]
    fn a_router_pod_that_is_not_ready_fails_naming_it() {
        let (why, p) = router_pods("ns", "m", true, &[pod("m-router-a", true), pod("m-router-b", false)]).unwrap_err();
        assert!(why.starts_with("router pod ns/m-router-b:") && why.contains("route is dead"), "{why}");
        assert_eq!(p.as_deref(), Some("m-router-b"));
        assert!(router_pods("ns", "m", true, &[]).is_err(), "a router asked for and absent");
        assert_eq!(router_pods("ns", "m", false, &[]).unwrap(), Vec::<String>::new(), "no router asked for");
        assert_eq!(router_pods("ns", "m", true, &[pod("m-router-a", true)]).unwrap().len(), 1);
    }
}
