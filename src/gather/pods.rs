//! The memory and CPU the pods on one node request: one list call with a `spec.nodeName` field
//! selector (never every pod of the cluster), summed as the scheduler counts them. Only the node a model
//! would land on is asked about; which node that is comes from the fit's pure rule.

use serde::Deserialize;

use crate::facts::StringMap;

use crate::cluster::Sink;

#[derive(Debug, Deserialize, Default)]
pub struct PodItem {
    /// Required, like every list item's name: a pod without one is a malformed answer.
    #[serde(rename = "metadata")]
    pub _metadata: Named,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Debug, Deserialize, Default)]
pub struct Named {
    #[serde(rename = "name")]
    pub _name: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub containers: Option<Vec<Container>>,
    pub init_containers: Option<Vec<Container>>,
    pub overhead: Option<StringMap>,
}

#[derive(Debug, Deserialize, Default)]
pub struct Container {
    pub resources: Option<Resources>,
}

#[derive(Debug, Deserialize, Default)]
pub struct Resources {
    pub requests: Option<StringMap>,
}

#[derive(Debug, Deserialize, Default)]
pub struct PodStatus {
    pub phase: Option<String>,
}

/// The field selector for the pods of `node`.
pub fn selector(node: &str) -> String {
    format!("spec.nodeName={node}")
}

/// The running total while the list streams.
#[derive(Debug, Default)]
pub struct Requests {
    pub memory_bytes: f64,
    /// In cores; summed as millicores, the unit the API server rounds CPU requests to.
    pub cpu_millis: u64,
    pub pods: u32,
    /// Pods in these namespaces are not counted (eas's own, from the ledger).
    pub skip: std::collections::BTreeSet<String>,
}

fn request(c: &Container, resource: &str) -> f64 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource))
        .and_then(|m| crate::facts::parse_quantity(m))
        .unwrap_or(0.0)
}

/// A pod's effective request of `resource`, as the scheduler reckons it: the larger of its
/// containers' sum and its largest init container, plus the runtime class's overhead.
pub fn pod_request(p: &PodItem, resource: &str) -> f64 {
    let sum: f64 = p.spec.containers.iter().flatten().map(|c| request(c, resource)).sum();
    let init = p.spec.init_containers.iter().flatten().map(|c| request(c, resource)).fold(0.0, f64::max);
    let overhead = p
        .spec
        .overhead
        .as_ref()
        .and_then(|o| o.get(resource))
        .and_then(|m| crate::facts::parse_quantity(m))
        .unwrap_or(0.0);
    sum.max(init) + overhead
}

impl Sink<PodItem> for Requests {
    fn push(&mut self, item: PodItem) {
        // Finished pods hold no memory; the scheduler does not count them either.
        if matches!(item.status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            return;
        }
        if item._metadata.namespace.as_ref().is_some_and(|ns| self.skip.contains(ns)) {
            return;
        }
        self.memory_bytes += pod_request(&item, "memory");
        self.cpu_millis += (pod_request(&item, "cpu") * 1000.0).round() as u64;
        self.pods += 1;
    }
}

impl Requests {
    /// A total that leaves out the pods of `namespaces`.
    pub fn skipping(namespaces: &std::collections::BTreeSet<String>) -> Requests {
        Requests { skip: namespaces.clone(), ..Requests::default() }
    }

    pub fn to_facts(&self) -> StringMap {
        StringMap::from([
            ("cpu".to_string(), format!("{}m", self.cpu_millis)),
            ("memory".to_string(), format!("{}", self.memory_bytes.round() as u64)),
            ("pods".to_string(), self.pods.to_string()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod with `json`'s spec and status (and a name, which every listed pod has).
    fn pod(json: &str) -> PodItem {
        let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["metadata"] = serde_json::json!({"name": "p"});
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn effective_request_as_the_scheduler_counts_it() {
        let cases = [
            (
                r#"{"spec":{"containers":[{"resources":{"requests":{"memory":"1Gi"}}},{"resources":{"requests":{"memory":"512Mi"}}}]}}"#,
                1.5,
            ),
            (
                r#"{"spec":{"containers":[{"resources":{"requests":{"memory":"1Gi"}}}],"initContainers":[{"resources":{"requests":{"memory":"2Gi"}}}]}}"#,
                2.0,
            ),
            (
                r#"{"spec":{"containers":[{"resources":{"requests":{"memory":"1Gi"}}}],"overhead":{"memory":"256Mi"}}}"#,
                1.25,
            ),
            (r#"{"spec":{"containers":[{"resources":{}},{"name":"x"}]}}"#, 0.0),
            (r#"{"spec":{"containers":null}}"#, 0.0),
        ];
        for (json, gib) in cases {
            assert_eq!(pod_request(&pod(json), "memory"), gib * (1u64 << 30) as f64, "{json}");
        }
    }

    #[test]
    fn finished_pods_are_not_counted() {
        let mut r = Requests::default();
        let req = r#"{"resources":{"requests":{"memory":"1Gi"}}}"#;
        for phase in ["Running", "Pending", "Succeeded", "Failed"] {
            r.push(pod(&format!(r#"{{"spec":{{"containers":[{req}]}},"status":{{"phase":"{phase}"}}}}"#)));
        }
        assert_eq!((r.pods, r.memory_bytes), (2, 2.0 * (1u64 << 30) as f64));
        assert_eq!(r.to_facts()["memory"], "2147483648");
    }

    #[test]
    fn cpu_requests_are_summed_as_the_scheduler_counts_them() {
        let mut r = Requests::default();
        // 100m + 250m in containers; an init container of 1 core outweighs them; 50m overhead.
        r.push(pod(
            r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"100m"}}},{"resources":{"requests":{"cpu":"250m"}}}]}}"#,
        ));
        r.push(pod(
            r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"0.5"}}}],"initContainers":[{"resources":{"requests":{"cpu":"1"}}}],"overhead":{"cpu":"50m"}}}"#,
        ));
        r.push(pod(
            r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"2"}}}]},"status":{"phase":"Succeeded"}}"#,
        ));
        assert_eq!(r.cpu_millis, 350 + 1050);
        assert_eq!(r.to_facts()["cpu"], "1400m");
    }

    #[test]
    fn pods_of_eas_own_namespaces_are_left_out() {
        let mut r = Requests::skipping(&["llm-inference".to_string()].into());
        let with_ns = |ns: &str| {
            let mut v: serde_json::Value = serde_json::from_str(
                r#"{"spec":{"containers":[{"resources":{"requests":{"memory":"1Gi"}}}]},"status":{"phase":"Running"}}"#,
            )
            .unwrap();
            v["metadata"] = serde_json::json!({"name": "p", "namespace": ns});
            serde_json::from_value::<PodItem>(v).unwrap()
        };
        r.push(with_ns("llm-inference"));
        r.push(with_ns("default"));
        assert_eq!((r.pods, r.memory_bytes), (1, (1u64 << 30) as f64));
    }
}
