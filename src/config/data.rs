//! The data files the rules read (`data/*.json`), compiled in so `eas` works from any directory.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct ClusterRules {
    pub cni_layouts: Vec<CniLayout>,
    pub eat1_namespaces: Vec<String>,
    pub k3d_gpu_sandbox_namespace: String,
    pub eat_sandbox_version: String,
    pub device_resources: Vec<DeviceResource>,
    pub k3s_defaults: K3sDefaults,
    pub amx_label: String,
    pub nfd: Nfd,
    pub addon_owner_annotation: String,
    pub addon_owner_value: String,
    pub lifecycle_taints: LifecycleTaints,
    pub kubernetes_floor: KubernetesFloor,
    pub kubectl_skew: KubectlSkew,
}

/// The taints the control plane puts on and takes off a node with its conditions.
#[derive(Debug, Deserialize)]
pub struct LifecycleTaints {
    pub keys: Vec<String>,
}

impl LifecycleTaints {
    pub fn contains(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }
}

/// The lowest Kubernetes minor (1.x) the install's objects can be created on, and why.
#[derive(Debug, Deserialize)]
pub struct KubernetesFloor {
    pub minor: u32,
    pub what: String,
    /// A `data/sources.json` id.
    pub source: String,
}

/// kubectl's version skew policy: this many minors either way of the API server.
#[derive(Debug, Deserialize)]
pub struct KubectlSkew {
    pub minors: u32,
    pub what: String,
}

#[derive(Debug, Deserialize)]
pub struct CniLayout {
    #[serde(default)]
    pub dirs: Option<Vec<String>>,
    #[serde(default)]
    pub prefix: Option<String>,
    pub istio_platform: String,
    pub overlay: Option<String>,
    pub what: String,
    pub source: String,
}

impl CniLayout {
    pub fn matches(&self, bin_dirs: &[String]) -> bool {
        if let Some(d) = &self.dirs {
            return d.as_slice() == bin_dirs;
        }
        if let Some(p) = &self.prefix {
            return !bin_dirs.is_empty() && bin_dirs.iter().all(|d| d.starts_with(p.as_str()));
        }
        false
    }
}

#[derive(Debug, Deserialize)]
pub struct DeviceResource {
    pub prefix: String,
    pub device: String,
    /// The resources of which a node of this device must have at least one allocatable.
    #[serde(default)]
    pub allocatable: Vec<String>,
    /// A node label (value `true`) that marks a node with this device (NFD's).
    #[serde(default)]
    pub node_label: Option<String>,
    /// The name (or name prefix) of the device plugin's DaemonSet.
    #[serde(default)]
    pub plugin: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct K3sDefaults {
    pub cluster_cidr: String,
    pub service_cidr: String,
}

#[derive(Debug, Deserialize)]
pub struct Nfd {
    pub release: String,
    pub namespace: String,
    pub chart_prefix: String,
}

#[derive(Debug, Deserialize)]
pub struct Models {
    pub catalog_kv_cache_gib: f64,
    /// The pod memory the built-in candidates stand in with (EI's llm category default).
    pub category_memory_gib: u64,
    /// The CPU the built-in candidates stand in with (EI's llm category default, `category_cpu_from`).
    pub category_cpu: f64,
    /// Fewer cores than this left on the landing node: vLLM has none to compute on (`min_cpu_why`).
    pub min_cpu: f64,
    /// Memory kept free on the landing node beyond the model pod (why: `headroom_why`).
    pub headroom_gib: u64,
    /// vLLM's working memory inside the pod beyond weights and KV cache (why: `pod_headroom_why`).
    pub pod_headroom_gib: u64,
    pub candidates: Vec<Candidate>,
    pub architectures: Vec<ArchitectureRow>,
}

#[derive(Debug, Deserialize)]
pub struct Candidate {
    pub name: String,
    /// The Hugging Face repository, which matches a catalog entry of another name.
    pub model_id: String,
    pub role: String,
    pub host_memory_gib: f64,
    pub source: String,
    pub kv_source: String,
}

/// One Hugging Face repository's figures, or why they are unknown.
#[derive(Debug, Deserialize)]
pub struct ArchitectureRow {
    pub model_id: String,
    #[serde(flatten)]
    pub architecture: Option<crate::config::fit::architecture::Architecture>,
    #[serde(default)]
    pub unknown: Option<String>,
}

impl Models {
    /// The preference row a catalog entry matches, by name or by Hugging Face repository.
    pub fn preference(&self, name: &str, model_id: &str) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.name == name || (!model_id.is_empty() && c.model_id == model_id))
    }

    /// The recorded figures for a repository: `Ok` with them, `Err` with why they are unknown.
    pub fn architecture(&self, model_id: &str) -> Result<&crate::config::fit::architecture::Architecture, String> {
        match self.architectures.iter().find(|a| a.model_id == model_id) {
            Some(ArchitectureRow { architecture: Some(a), .. }) => Ok(a),
            Some(ArchitectureRow { unknown: Some(why), .. }) => Err(why.clone()),
            _ => Err(format!("data/models.json records no architecture for {model_id:?}")),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Layers {
    pub layers: BTreeMap<String, Vec<ManifestRow>>,
    pub refused: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ManifestRow {
    pub layer: String,
    pub pin: String,
    pub dest: String,
    pub deployment_subdir: String,
    pub config_dir: String,
    pub default_flavour: String,
    pub model_catalog: String,
}

pub fn cluster_rules() -> &'static ClusterRules {
    data_table!(ClusterRules, "cluster-rules.json")
}

pub fn models() -> &'static Models {
    data_table!(Models, "models.json")
}

pub fn layers() -> &'static Layers {
    data_table!(Layers, "layers.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_files_load_and_cite_known_sources() {
        let rules = cluster_rules();
        let m = models();
        let _ = layers();
        let sources = crate::sources::table();
        for l in &rules.cni_layouts {
            assert!(sources.contains_key(&l.source), "cni layout cites unknown source {}", l.source);
            assert!(l.dirs.is_some() != l.prefix.is_some(), "a layout has dirs or a prefix: {}", l.what);
        }
        for c in &m.candidates {
            assert!(sources.contains_key(&c.source), "{} cites unknown source {}", c.name, c.source);
            assert!(sources.contains_key(&c.kv_source), "{} cites unknown source {}", c.name, c.kv_source);
        }
        assert_eq!(m.candidates.iter().filter(|c| c.role == "default").count(), 1);
        for c in &m.candidates {
            assert!(m.architecture(&c.model_id).is_ok(), "{} has figures", c.name);
        }
        for a in &m.architectures {
            assert!(a.architecture.is_some() != a.unknown.is_some(), "{}: figures or why unknown", a.model_id);
        }
        assert!(m.pod_headroom_gib >= 1, "issue 20: at least 1 GiB of working headroom per pod");
    }
}
