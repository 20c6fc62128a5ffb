//! The parts of Kubernetes objects the facts need, deserialised straight from the API's JSON
//! (everything else in an object is skipped while parsing, so a large cluster costs little
//! memory), and their conversion into the facts types. Pure.

use serde::{Deserialize, Deserializer};

use crate::facts::{AgentSandbox, DaemonSet, Node, StringMap};

use super::helm::{self, StoredRevision};

/// Annotations kept on nodes (SPEC §3.1: the `k3s.io/*` ones).
pub const NODE_ANNOTATION_PREFIX: &str = "k3s.io/";
/// Namespaces an agent-sandbox controller is looked for in (SPEC §3.1).
pub const AGENT_SANDBOX_NAMESPACES: [&str; 2] = ["agent-sandbox", "agent-sandbox-system"];

/// An object's metadata. `name` is required: an item without one is a malformed answer (the
/// list call fails naming itself), never a nameless node.
#[derive(Debug, Deserialize, Default)]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub labels: StringMap,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub annotations: StringMap,
}

#[derive(Debug, Deserialize)]
pub struct NodeItem {
    pub metadata: Meta,
    #[serde(default)]
    pub status: NodeStatus,
    #[serde(default)]
    pub spec: NodeSpec,
}

#[derive(Debug, Deserialize, Default)]
pub struct NodeSpec {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub taints: Vec<crate::facts::Taint>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub unschedulable: bool,
}

#[derive(Debug, Deserialize, Default)]
pub struct NodeStatus {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub capacity: StringMap,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub allocatable: StringMap,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub conditions: Vec<crate::facts::NodeCondition>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub addresses: Vec<NodeAddress>,
    /// The images the node holds (`--probe-nodes` runs one of them; not in the facts).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub images: Vec<NodeImage>,
}

#[derive(Debug, Deserialize, Default)]
pub struct NodeImage {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub names: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct NodeAddress {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub address: String,
}

/// Namespaces and DaemonSets: only their metadata matters.
#[derive(Debug, Deserialize)]
pub struct MetaItem {
    pub metadata: Meta,
}

#[derive(Debug, Deserialize)]
pub struct SecretItem {
    pub metadata: Meta,
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub data: Option<SecretData>,
}

/// Only Helm's key is deserialised; any other key of the Secret is skipped unread.
#[derive(Debug, Deserialize)]
pub struct SecretData {
    #[serde(rename = "release", default)]
    pub release: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct DeploymentItem {
    pub metadata: Meta,
    #[serde(default)]
    pub spec: DeploymentSpec,
}

#[derive(Debug, Deserialize, Default)]
pub struct DeploymentSpec {
    #[serde(default)]
    pub template: PodTemplate,
}

#[derive(Debug, Deserialize, Default)]
pub struct PodTemplate {
    #[serde(default)]
    pub spec: PodSpec,
}

#[derive(Debug, Deserialize, Default)]
pub struct PodSpec {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub containers: Vec<ContainerSpec>,
}

#[derive(Debug, Deserialize)]
pub struct ContainerSpec {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
}

fn null_as_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A node as the facts carry it; `containerd` is filled in later, from the node itself.
pub fn node(item: NodeItem) -> Node {
    let annotations =
        item.metadata.annotations.into_iter().filter(|(k, _)| k.starts_with(NODE_ANNOTATION_PREFIX)).collect();
    Node {
        name: item.metadata.name,
        labels: item.metadata.labels,
        annotations,
        capacity: item.status.capacity,
        allocatable: item.status.allocatable,
        containerd: None,
        taints: item.spec.taints,
        pod_requests: None,
        conditions: item.status.conditions,
        unschedulable: item.spec.unschedulable,
        internal_ips: item
            .status
            .addresses
            .into_iter()
            .filter(|a| a.type_ == "InternalIP" && !a.address.is_empty())
            .map(|a| a.address)
            .collect(),
    }
}

pub fn daemonset(item: MetaItem) -> DaemonSet {
    let m = item.metadata;
    DaemonSet { namespace: m.namespace, name: m.name, labels: m.labels, annotations: m.annotations }
}

/// A Helm storage Secret, handed to the release table still encoded. Secrets of any other type
/// are dropped here without their data being looked at (the list asks the server for Helm's
/// type only; this guards against a server that ignores the field selector).
pub fn helm_revision(item: SecretItem) -> Option<StoredRevision> {
    if item.type_ != helm::SECRET_TYPE {
        return None;
    }
    Some(StoredRevision {
        namespace: item.metadata.namespace,
        secret: item.metadata.name,
        labels: item.metadata.labels,
        payload: item.data.and_then(|d| d.release),
    })
}

/// The agent-sandbox controller among the Deployments of the sandbox namespaces: the one running
/// its image (or named for it), its version the image tag. A controller whose version cannot be
/// read is still reported (with its digest, or `unknown`, as the version) and a warning, so it is
/// never mistaken for no controller at all.
pub fn agent_sandbox(deployments: &[DeploymentItem]) -> (Option<AgentSandbox>, Option<String>) {
    let is_controller_image = |image: &str| image_repository(image).ends_with("agent-sandbox-controller");
    let found = deployments.iter().find_map(|d| {
        let containers = &d.spec.template.spec.containers;
        let by_image = containers.iter().find(|c| is_controller_image(&c.image));
        let by_name = || {
            (d.metadata.name.starts_with("agent-sandbox"))
                .then(|| containers.iter().find(|c| c.name.starts_with("agent-sandbox")).or(containers.first()))
                .flatten()
        };
        by_image.or_else(by_name).map(|c| (d, c))
    });
    let Some((d, c)) = found else {
        return (None, None);
    };
    let namespace = d.metadata.namespace.clone();
    if let Some(v) =
        image_tag(&c.image).or_else(|| d.metadata.labels.get("app.kubernetes.io/version").map(String::as_str))
    {
        return (Some(AgentSandbox { namespace, version: v.to_string() }), None);
    }
    let version = c.image.split_once('@').map(|(_, digest)| digest.to_string()).unwrap_or_else(|| "unknown".into());
    let warning = format!(
        "agent-sandbox controller {}/{} runs image {:?}, which names no version tag: reported as version {version:?}",
        d.metadata.namespace, d.metadata.name, c.image
    );
    (Some(AgentSandbox { namespace, version }), Some(warning))
}

/// `registry:5000/a/b:tag@sha256:…` → `registry:5000/a/b`.
fn image_repository(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    }
}

/// `registry:5000/a/b:tag@sha256:…` → `tag`; none when the image is pinned by digest only.
fn image_tag(image: &str) -> Option<&str> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split_once(':').map(|(_, tag)| tag).filter(|t| !t.is_empty())
}

/// The k3d cluster a set of node names belongs to, from k3d's naming alone
/// (`k3d-<cluster>-server-<n>`, `k3d-<cluster>-agent-<n>`): every node must fit, with one name.
pub fn k3d_cluster_from_names<'a>(nodes: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut cluster: Option<&str> = None;
    let mut any = false;
    for n in nodes {
        any = true;
        let rest = n.strip_prefix("k3d-")?;
        let (name, index) = rest.rsplit_once('-')?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let name = name.strip_suffix("-server").or_else(|| name.strip_suffix("-agent"))?;
        if name.is_empty() || cluster.is_some_and(|c| c != name) {
            return None;
        }
        cluster = Some(name);
    }
    if any { cluster.map(str::to_string) } else { None }
}

/// Sorted, as the API lists them, so the document does not depend on page boundaries.
pub fn sort_daemonsets(v: &mut [DaemonSet]) {
    v.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_keeps_all_labels_and_only_k3s_annotations() {
        let item: NodeItem = serde_json::from_str(
            r#"{"metadata":{"name":"n1","labels":{"a":"1","kubernetes.io/hostname":"n1"},
                "annotations":{"k3s.io/node-args":"[\"server\"]","k3s.io/hostname":"n1",
                               "flannel.alpha.coreos.com/public-ip":"10.0.0.1","node.alpha.kubernetes.io/ttl":"0"},
                "managedFields":[{"manager":"k3s"}]},
               "spec":{"podCIDR":"10.42.0.0/24"},
               "status":{"capacity":{"cpu":"8","memory":"32Gi"},"allocatable":{"cpu":"8","memory":"31Gi"},
                         "images":[{"names":["x"],"sizeBytes":1}]}}"#,
        )
        .unwrap();
        let n = node(item);
        assert_eq!(n.name, "n1");
        assert_eq!(n.labels.len(), 2);
        assert_eq!(n.annotations.keys().collect::<Vec<_>>(), ["k3s.io/hostname", "k3s.io/node-args"]);
        assert_eq!(n.capacity["memory"], "32Gi");
        assert_eq!(n.allocatable["memory"], "31Gi");
        assert!(n.containerd.is_none());
    }

    #[test]
    fn null_and_missing_maps_are_empty() {
        let item: NodeItem =
            serde_json::from_str(r#"{"metadata":{"name":"n","labels":null},"status":{"capacity":null}}"#).unwrap();
        let n = node(item);
        assert!(n.labels.is_empty() && n.capacity.is_empty() && n.allocatable.is_empty());
    }

    #[test]
    fn only_helm_secrets_become_revisions() {
        let opaque: SecretItem = serde_json::from_str(
            r#"{"metadata":{"name":"db","namespace":"x"},"type":"Opaque","data":{"release":"c2VjcmV0"}}"#,
        )
        .unwrap();
        assert!(helm_revision(opaque).is_none());
        let helm: SecretItem = serde_json::from_str(
            r#"{"metadata":{"name":"sh.helm.release.v1.a.v1","namespace":"x","labels":{"owner":"helm"}},
                "type":"helm.sh/release.v1","data":{"release":"abc","other":"ignored"}}"#,
        )
        .unwrap();
        let r = helm_revision(helm).unwrap();
        assert_eq!((r.namespace.as_str(), r.payload.as_deref()), ("x", Some("abc")));
    }

    fn deployment(ns: &str, name: &str, containers: &[(&str, &str)]) -> DeploymentItem {
        let cs: Vec<String> = containers.iter().map(|(n, i)| format!(r#"{{"name":"{n}","image":"{i}"}}"#)).collect();
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}"}},"spec":{{"template":{{"spec":{{"containers":[{}]}}}}}}}}"#,
            cs.join(",")
        ))
        .unwrap()
    }

    #[test]
    fn agent_sandbox_version_is_the_controller_image_tag() {
        let (found, warning) = agent_sandbox(&[
            deployment(
                "agent-sandbox-system",
                "sandbox-router",
                &[("router", "example.org/sandbox-router:latest-main")],
            ),
            deployment(
                "agent-sandbox-system",
                "agent-sandbox-controller",
                &[("manager", "registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.0@sha256:0123")],
            ),
        ]);
        assert_eq!(found, Some(AgentSandbox { namespace: "agent-sandbox-system".into(), version: "v0.5.0".into() }));
        assert!(warning.is_none());
        let (by_name, _) = agent_sandbox(&[deployment(
            "agent-sandbox",
            "agent-sandbox",
            &[("agent-sandbox", "localhost:5000/k3d-gpu/sandbox:v1.0.8")],
        )]);
        assert_eq!(by_name, Some(AgentSandbox { namespace: "agent-sandbox".into(), version: "v1.0.8".into() }));
        assert_eq!(agent_sandbox(&[deployment("agent-sandbox", "other", &[("x", "busybox:1")])]), (None, None));
        assert_eq!(agent_sandbox(&[]), (None, None));
        let (digest, warning) = agent_sandbox(&[deployment(
            "agent-sandbox-system",
            "agent-sandbox-controller",
            &[("m", "reg:5000/agent-sandbox-controller@sha256:ab")],
        )]);
        assert_eq!(digest.map(|s| s.version), Some("sha256:ab".into()));
        assert!(warning.unwrap().contains("names no version tag"));
    }

    #[test]
    fn image_parts() {
        assert_eq!(image_tag("reg:5000/a/b:v1@sha256:x"), Some("v1"));
        assert_eq!(image_tag("reg:5000/a/b"), None);
        assert_eq!(image_tag("b:latest"), Some("latest"));
        assert_eq!(image_repository("reg:5000/a/b:v1"), "reg:5000/a/b");
        assert_eq!(image_repository("reg:5000/a/b"), "reg:5000/a/b");
    }

    #[test]
    fn k3d_names() {
        assert_eq!(k3d_cluster_from_names(["k3d-gpu-server-0"]), Some("gpu".into()));
        assert_eq!(k3d_cluster_from_names(["k3d-my-lab-server-0", "k3d-my-lab-agent-12"]), Some("my-lab".into()));
        assert_eq!(k3d_cluster_from_names(["k3d-a-server-0", "k3d-b-agent-0"]), None);
        assert_eq!(k3d_cluster_from_names(["k3d-gpu-server-0", "xeon-1"]), None);
        assert_eq!(k3d_cluster_from_names(["k3d-gpu-server-x"]), None);
        assert_eq!(k3d_cluster_from_names(["k3d--server-0"]), None);
        assert_eq!(k3d_cluster_from_names(Vec::<&str>::new()), None);
    }
}
