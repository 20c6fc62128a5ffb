//! The KServe objects each runtime is served as (`data/kserve.json`): the kind verify and status
//! list, the Service in front of the server, the condition to wait for, and the API to ask, or
//! none where it was not read. The one place these names live.

use kube::api::ApiResource;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Table {
    pub default_namespace: String,
    pub runtimes: Vec<Runtime>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Runtime {
    pub runtime: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub service_suffix: String,
    pub port: u16,
    pub ready_condition: String,
    pub answer: Option<Answer>,
    #[serde(default)]
    pub answer_why: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Answer {
    pub models_path: String,
    pub chat_path: String,
}

pub fn table() -> &'static Table {
    data_table!(Table, "kserve.json")
}

/// The row for a runtime (`vllm`, `openvino`).
pub fn runtime(name: &str) -> Option<&'static Runtime> {
    table().runtimes.iter().find(|r| r.runtime == name)
}

/// vLLM's row: the kind EI serves LLM entries as by default.
pub fn vllm() -> &'static Runtime {
    runtime("vllm").expect("data/kserve.json has a vllm row")
}

impl Runtime {
    pub fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: format!("{}/{}", self.group, self.version),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// `<name>-kserve-workload-svc` or `<name>-predictor`.
    pub fn service(&self, name: &str) -> String {
        format!("{name}{}", self.service_suffix)
    }

    /// The service proxy's path to the server, without a trailing slash.
    pub fn proxy_base(&self, namespace: &str, scheme: &str, name: &str) -> String {
        format!("/api/v1/namespaces/{namespace}/services/{scheme}:{}:{}/proxy", self.service(name), self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_runtimes_ei_serves_llms_with() {
        let v = vllm();
        assert_eq!((v.kind.as_str(), v.version.as_str(), v.port), ("LLMInferenceService", "v1alpha2", 8000));
        assert_eq!(v.service("m"), "m-kserve-workload-svc");
        assert_eq!(
            v.proxy_base("llm-inference", "http", "m"),
            "/api/v1/namespaces/llm-inference/services/http:m-kserve-workload-svc:8000/proxy"
        );
        let o = runtime("openvino").unwrap();
        assert_eq!((o.kind.as_str(), o.version.as_str(), o.port), ("InferenceService", "v1beta1", 80));
        assert_eq!(o.service("ov"), "ov-predictor");
        assert!(o.answer.is_none() && o.answer_why.is_some(), "OVMS's API path was not read: readiness only");
        assert_eq!(table().default_namespace, "llm-inference");
    }
}
