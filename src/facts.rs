//! The facts document, `eas-facts/v1` (SPEC §3.1): read-only facts about a cluster.
//!
//! The gatherer fills it; the generator decides from it. Keys may be added in later versions,
//! so unknown keys are accepted; the ones here may never be renamed or change meaning.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "eas-facts/v1";

pub type StringMap = BTreeMap<String, String>;

/// The `source` of a fit document eas computed itself (`eas fit`, config's built-in fit).
pub const SOURCE_EAS: &str = "eas";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub schema: String,
    pub gathered_at: String,
    pub cluster: Cluster,
    pub docker: Option<Docker>,
    pub nodes: Vec<Node>,
    pub daemonsets: Vec<DaemonSet>,
    pub helm_releases: Vec<HelmRelease>,
    pub namespaces: Vec<String>,
    pub agent_sandbox: Option<AgentSandbox>,
    pub fit: Option<Fit>,
    /// The cluster's StorageClasses (added after v1's first release: absent means they were not
    /// read, an empty list that the cluster has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_classes: Option<Vec<StorageClass>>,
    /// The answers to the access reviews for what the installer creates (added after v1's first
    /// release: absent means none were asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_reviews: Option<Vec<AccessReview>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageClass {
    pub name: String,
    pub provisioner: String,
    /// Whether `storageclass.kubernetes.io/is-default-class` is `"true"`.
    pub default: bool,
}

/// One `SelfSubjectAccessReview`: may the kubeconfig's user `verb` `resource` (in `namespace`;
/// absent: in every namespace, or cluster-scoped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccessReview {
    pub verb: String,
    /// The API group ("" for the core group).
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub allowed: bool,
    /// The authorizer's reason, when it gave one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// A node condition as the kubelet reports it (`Ready`, `DiskPressure`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When it last changed status (`lastTransitionTime` in the API's form).
    #[serde(default, alias = "lastTransitionTime", skip_serializing_if = "String::is_empty")]
    pub since: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub context: String,
    pub k3d_cluster: Option<String>,
    pub server_version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Docker {
    pub rootless: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub labels: StringMap,
    pub annotations: StringMap,
    pub capacity: StringMap,
    pub allocatable: StringMap,
    pub containerd: Option<Containerd>,
    /// The node's taints (added after v1's first release: absent means none were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// What the pods already on this node request (`memory` as a quantity, `pods` a count).
    /// Gathered for the node a model would land on only (SPEC §3.4); absent on the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_requests: Option<StringMap>,
    /// `status.conditions` (added after v1's first release: absent means none were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<NodeCondition>,
    /// `spec.unschedulable`: the node is cordoned (absent: false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
    /// The node's `InternalIP` addresses from `status.addresses` (absent: none recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub internal_ips: Vec<String>,
}

impl Node {
    /// The status of condition `type_` (`True`/`False`/`Unknown`), if the node reports it.
    pub fn condition(&self, type_: &str) -> Option<&NodeCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Containerd {
    pub cni_bin_dirs: Vec<String>,
    pub nri_socket: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub labels: StringMap,
    pub annotations: StringMap,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelmRelease {
    pub namespace: String,
    pub name: String,
    pub chart: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSandbox {
    pub namespace: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub candidates: BTreeMap<String, FitVerdict>,
    /// Who sized it: `eas` (built in) or `k3d-gpu fit`; absent in documents that predate the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitVerdict {
    pub fits: bool,
    #[serde(default)]
    pub env: StringMap,
    #[serde(default)]
    pub args: Vec<String>,
}

pub const KV_CACHE_ENV: &str = "VLLM_CPU_KVCACHE_SPACE";
pub const MAX_MODEL_LEN: &str = "--max-model-len";

impl FitVerdict {
    /// The `--max-model-len` value in fit's flags, in either `--flag v` or `--flag=v` form.
    pub fn max_model_len(&self) -> Option<&str> {
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == MAX_MODEL_LEN {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix("--max-model-len=") {
                return Some(v);
            }
        }
        None
    }
}

/// Why a facts document was not accepted. Always bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    #[error("facts: cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("facts: malformed JSON at line {line} column {column}: {msg}")]
    Json { line: usize, column: usize, msg: String },
    #[error("facts: field `{field}`: {msg}")]
    Field { field: String, msg: String },
    #[error("facts: schema is {found:?}, expected {SCHEMA:?}")]
    Schema { found: String },
    #[error("facts: {path} is larger than {} MiB", MAX_FACTS_BYTES >> 20)]
    TooLarge { path: String },
}

/// The largest facts document read: 64 MiB.
pub const MAX_FACTS_BYTES: u64 = crate::bounded::Kind::Facts.limit();

impl FactsError {
    pub fn hint(&self) -> &'static str {
        match self {
            FactsError::Read { .. } | FactsError::TooLarge { .. } => {
                "check the path given to --facts: it takes a document written by `eas facts --out FILE`"
            }
            FactsError::Json { .. } | FactsError::Field { .. } => {
                "regenerate the document with `eas facts --out FILE` (schema: `eas schema eas-facts/v1`)"
            }
            FactsError::Schema { .. } => "this eas reads eas-facts/v1; regenerate with `eas facts`",
        }
    }
}

impl Facts {
    pub fn parse(text: &str) -> Result<Facts, FactsError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| FactsError::Json {
            line: e.line(),
            column: e.column(),
            msg: e.to_string(),
        })?;
        // The schema is checked first, so a document of another version is named as such rather
        // than as whichever field it happens to lack.
        match value.get("schema") {
            Some(serde_json::Value::String(s)) if s == SCHEMA => {}
            Some(serde_json::Value::String(s)) => {
                return Err(FactsError::Schema { found: s.clone() });
            }
            Some(other) => {
                return Err(FactsError::Field {
                    field: "schema".into(),
                    msg: format!("expected a string, found {other}"),
                });
            }
            None => {
                return Err(FactsError::Field { field: "schema".into(), msg: "missing".into() });
            }
        }
        let facts: Facts = serde_path_to_error::deserialize(value).map_err(|e| {
            let field = e.path().to_string();
            let msg = e.inner().to_string();
            FactsError::Field { field, msg }
        })?;
        facts.validate()?;
        Ok(facts)
    }

    /// Reads at most [`MAX_FACTS_BYTES`] (a 5000-node cluster's facts are a few MiB): a larger
    /// file, or an endless one such as `/dev/zero`, is refused before memory grows.
    pub fn read(path: &std::path::Path) -> Result<Facts, FactsError> {
        use crate::bounded::{Kind, ReadError};
        let shown = || path.display().to_string();
        let bytes = crate::bounded::read(path, Kind::Facts).map_err(|e| match e {
            ReadError::TooLarge { .. } => FactsError::TooLarge { path: shown() },
            ReadError::Io { source, .. } => FactsError::Read { path: shown(), source },
            ReadError::Interrupted { .. } => {
                FactsError::Read { path: shown(), source: std::io::ErrorKind::Interrupted.into() }
            }
            ReadError::NotFound { .. } => {
                FactsError::Read { path: shown(), source: std::io::Error::from_raw_os_error(libc::ENOENT) }
            }
            e => FactsError::Read { path: shown(), source: std::io::Error::other(e.to_string()) },
        })?;
        let text = String::from_utf8(bytes).map_err(|_| FactsError::Json {
            line: 0,
            column: 0,
            msg: "not UTF-8 text".into(),
        })?;
        // A field's problem names the file too: `--facts` and `--fit` may both be given.
        Facts::parse(&text).map_err(|e| match e {
            FactsError::Field { field, msg } => FactsError::Field { field, msg: format!("{msg} (in {})", shown()) },
            other => other,
        })
    }

    /// Checks that serde cannot express: a fit KV cache always comes with its context length.
    fn validate(&self) -> Result<(), FactsError> {
        if let Some(fit) = &self.fit {
            fit.validate("fit.")?;
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for (what, map) in [
                ("capacity", Some(&n.capacity)),
                ("allocatable", Some(&n.allocatable)),
                ("pod_requests", n.pod_requests.as_ref()),
            ] {
                if let Some(m) = map.and_then(|m| m.get("memory")) {
                    let field = || format!("nodes[{i}].{what}.memory");
                    match quantity_bytes(m) {
                        None => {
                            return Err(FactsError::Field {
                                field: field(),
                                msg: format!("{m:?} is not a Kubernetes quantity"),
                            });
                        }
                        Some(Err(msg)) => return Err(FactsError::Field { field: field(), msg }),
                        Some(Ok(_)) => {}
                    }
                }
            }
        }
        Ok(())
    }
}

impl Fit {
    /// k3d-gpu fit's KV cache always comes with its context length (eas's own writes one only
    /// when one request needs it), and both are numbers. `at` prefixes the field named in an
    /// error (`fit.` inside a facts document, empty in a fit document).
    pub fn validate(&self, at: &str) -> Result<(), FactsError> {
        let own = self.source.as_deref() == Some(SOURCE_EAS);
        for (name, v) in &self.candidates {
            if !own && v.env.contains_key(KV_CACHE_ENV) && v.max_model_len().is_none() {
                return Err(FactsError::Field {
                    field: format!("{at}candidates.{name}.args"),
                    msg: format!("sets {KV_CACHE_ENV} without {MAX_MODEL_LEN}: fit's vLLM flags always carry both"),
                });
            }
            if let Some(kv) = v.env.get(KV_CACHE_ENV) {
                let field = || format!("{at}candidates.{name}.env.{KV_CACHE_ENV}");
                let gib = parse_gib(kv).ok_or_else(|| FactsError::Field {
                    field: field(),
                    msg: format!("{kv:?} is not a number of GiB"),
                })?;
                if let Some(why) = past_max(gib.floor() * GIB) {
                    return Err(FactsError::Field { field: field(), msg: format!("{kv:?} GiB: {why}") });
                }
            }
            if let Some(len) = v.max_model_len() {
                len.parse::<u64>().map_err(|_| FactsError::Field {
                    field: format!("{at}candidates.{name}.args"),
                    msg: format!("{MAX_MODEL_LEN} {len:?} is not a whole number"),
                })?;
            }
        }
        Ok(())
    }
}

/// A GiB figure as vLLM reads `VLLM_CPU_KVCACHE_SPACE` (a number, possibly fractional).
pub fn parse_gib(s: &str) -> Option<f64> {
    let v: f64 = s.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// A Kubernetes resource quantity (`131072000Ki`, `128Gi`, `64G`, `1e9`, `500m`) in base units.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let suffixes: [(&str, f64); 13] = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (suffix, mult) in suffixes {
        if let Some(num) = s.strip_suffix(suffix) {
            let v: f64 = num.parse().ok()?;
            return (v.is_finite() && v >= 0.0).then_some(v * mult);
        }
    }
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The most bytes eas sizes with (4 EiB, 2^62): below it, every sum of two sizes and every size
/// rounded up to whole GiB stays within 64 bits. A figure read from outside past it is never
/// used: bad input from a user's file, a fallback from Hugging Face, a node not sized.
pub const MAX_BYTES: u64 = 1 << 62;

/// Why a figure of `bytes` (a float as a quantity parses) cannot be sized with, if it cannot.
pub fn past_max(bytes: f64) -> Option<String> {
    (bytes.is_nan() || bytes >= MAX_BYTES as f64)
        .then(|| format!("{bytes:.0} bytes is past 4 EiB (2^62 bytes), the most eas sizes with"))
}

/// Why a node cannot be sized, if it cannot: a memory figure (capacity, allocatable, the pods'
/// requests) past [`MAX_BYTES`], named with its field. Such a node is reported, never sized.
pub fn unsizable(n: &Node) -> Option<String> {
    // The figures fit reads first (allocatable, the pods' requests), then capacity.
    let maps = [
        ("allocatable", Some(&n.allocatable)),
        ("pod_requests", n.pod_requests.as_ref()),
        ("capacity", Some(&n.capacity)),
    ];
    maps.into_iter().find_map(|(what, map)| match map.and_then(|m| m.get("memory")).and_then(|m| quantity_bytes(m)) {
        Some(Err(e)) => Some(format!("node {}: {what}.memory {e}: the node is not sized", n.name)),
        _ => None,
    })
}

/// A memory quantity in whole bytes: `None` when it is not a quantity, `Err` when it is past
/// [`MAX_BYTES`].
pub fn quantity_bytes(s: &str) -> Option<Result<u64, String>> {
    let v = parse_quantity(s)?;
    Some(match past_max(v) {
        Some(why) => Err(format!("{s:?}: {why}")),
        None => Ok(v as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        let cases = [
            ("131072000Ki", Some(131072000.0 * 1024.0)),
            ("128Gi", Some(128.0 * GIB)),
            ("64G", Some(64e9)),
            ("500m", Some(0.5)),
            ("12", Some(12.0)),
            ("1e3", Some(1000.0)),
            ("lots", None),
            ("-1Gi", None),
            ("", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_quantity(s), want, "{s}");
        }
    }

    #[test]
    fn max_model_len_forms() {
        let v = |args: &[&str]| FitVerdict {
            fits: true,
            env: StringMap::new(),
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(v(&["--max-model-len", "32768"]).max_model_len(), Some("32768"));
        assert_eq!(v(&["--dtype", "bf16", "--max-model-len=16384"]).max_model_len(), Some("16384"));
        assert_eq!(v(&["--max-model-len"]).max_model_len(), None);
        assert_eq!(v(&[]).max_model_len(), None);
    }
}
