//! `--probe-nodes` (issue 21 item 7): a node's containerd facts read by a short-lived pod on it,
//! for a node eas can read neither through Docker (k3d) nor from this host's disk.
//!
//! The pod runs on the node (`nodeName`, so no scheduler), with an image the node already has
//! (`imagePullPolicy: Never`, chosen from `node.status.images`: k3s's local-path helper is a
//! busybox, k3s-io/k3s@d804db3 manifests/local-storage.yaml `helperPod.yaml`), the containerd
//! config directory and the NRI socket's directory mounted read-only, and prints the config and
//! whether the socket exists. It is labelled `io.eas.managed=true`, `io.eas.probe=true` and the
//! run id, deleted as soon as it has ended (or on timeout, or on a signal), and any probe pod an
//! earlier eas left (killed before it could delete) is deleted first. API calls: one LIST (the
//! sweep), then per probed node a POST, a WATCH of the pod (one more each time a watch ends or
//! breaks, and a GET when it is too old), a GET of the log and a DELETE; a pod that does not
//! start ends its wait at once with why, read with one LIST of its events.
//!
//! The pod's shape and the reading of its output are pure; [`read`] is the effect.

use std::time::Duration;

use crate::cluster::Cluster;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::containerd;

/// Where probe pods run: k3s runs its own helper pods (local-path's) there.
pub const NAMESPACE: &str = "kube-system";
pub const LABEL_PROBE: &str = "io.eas.probe";
pub const LABEL_MANAGED: &str = "io.eas.managed";
pub const LABEL_RUN: &str = "io.eas.run-id";
/// The marker between the config and the socket's answer in the pod's output.
const MARKER: &str = "--- eas-probe nri-socket:";
/// How long one probe may take, from its POST to its log.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The API calls the probes of this process sent (POST, each WATCH, the log's GET or the events'
/// LIST, the DELETE), for `eas facts`' count.
static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn called() {
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The probes' API calls since the last take.
pub fn take_calls() -> u32 {
    CALLS.swap(0, std::sync::atomic::Ordering::Relaxed)
}

/// The probe pods this process created (name, uid, node), for a real run's ledger: each is
/// deleted as soon as it is read, and the ledger keeps that the run made it.
static CREATED: std::sync::Mutex<Vec<(String, String, String)>> = std::sync::Mutex::new(Vec::new());

/// The probe pods created since the last take.
pub fn take_created() -> Vec<(String, String, String)> {
    std::mem::take(&mut *CREATED.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The probe pods created so far, each said as created and deleted (for a plan's summary),
/// left for [`take_created`].
pub fn created() -> Vec<String> {
    CREATED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, _, node)| format!("probe pod {NAMESPACE}/{name} on node {node}, created and deleted"))
        .collect()
}

/// Why `node`'s kubelet would not run a probe pod, when its Ready condition says so (not True):
/// the condition as the node carries it.
pub fn node_down(node: &crate::facts::Node) -> Option<String> {
    let c = node.condition("Ready")?;
    if c.status == "True" {
        return None;
    }
    let mut s = format!("node {}'s Ready condition is {}", node.name, c.status);
    let detail: Vec<&str> = [c.reason.as_str(), c.message.as_str()].into_iter().filter(|p| !p.is_empty()).collect();
    if !detail.is_empty() {
        s.push_str(&format!(" ({})", detail.join(": ")));
    }
    if !c.since.is_empty() {
        s.push_str(&format!(" since {}", c.since));
    }
    s.push_str(": its kubelet is not running pods");
    Some(s)
}

/// An image of `images` (a node's `status.images[].names`) the probe can run: a busybox (it has
/// `sh`, `cat` and `test`), by name, not a digest-only entry. `None`: the node has none.
pub fn choose_image(images: &[String]) -> Option<String> {
    images
        .iter()
        .filter(|n| !n.contains('@'))
        .find(|n| n.rsplit('/').next().is_some_and(|last| last.contains("busybox")))
        .cloned()
}

/// The probe pod for `node`, reading `config_path` (the containerd config its node-args imply)
/// and `nri_socket` (the default NRI socket path), with `image`, for run `run_id`.
pub fn pod(node: &str, image: &str, config_path: &str, nri_socket: &str, run_id: &str) -> Pod {
    let config_dir = config_path.rsplit_once('/').map_or("/", |(d, _)| d);
    let socket_dir = nri_socket.rsplit_once('/').map_or("/", |(d, _)| d);
    let script = format!(
        "cat /eas/containerd/config.toml; echo; if [ -S /eas/nri/{sock} ]; then echo '{MARKER} present'; else echo '{MARKER} absent'; fi",
        sock = nri_socket.rsplit('/').next().unwrap_or("nri.sock"),
    );
    let name = format!("eas-probe-{}", short(node));
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("{name}-"),
            "namespace": NAMESPACE,
            "labels": {LABEL_MANAGED: "true", LABEL_PROBE: "true", LABEL_RUN: run_id},
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": TIMEOUT.as_secs(),
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": false,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "probe",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", script],
                "securityContext": {"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false},
                "volumeMounts": [
                    {"name": "containerd", "mountPath": "/eas/containerd", "readOnly": true},
                    {"name": "nri", "mountPath": "/eas/nri", "readOnly": true},
                ],
            }],
            "volumes": [
                {"name": "containerd", "hostPath": {"path": config_dir, "type": "Directory"}},
                {"name": "nri", "hostPath": {"path": socket_dir, "type": "DirectoryOrCreate"}},
            ],
        },
    }))
    .expect("the probe pod's shape")
}

/// A node name as a pod-name part: lowercase alphanumerics and dashes, at most 40 characters.
fn short(node: &str) -> String {
    let s: String =
        node.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    s.trim_matches('-').chars().take(40).collect()
}

/// The containerd facts in a probe pod's output.
pub fn parse_output(text: &str, node: &str) -> Result<crate::facts::Containerd, String> {
    let (config, rest) = text
        .rsplit_once(MARKER)
        .ok_or_else(|| format!("the probe pod on {node} printed no answer (its log: {} bytes)", text.len()))?;
    let nri_socket = match rest.trim() {
        "present" => true,
        "absent" => false,
        other => return Err(format!("the probe pod on {node} answered {other:?} for the NRI socket")),
    };
    let config =
        containerd::parse(config).map_err(|e| format!("the containerd config the probe read on {node}: {e}"))?;
    Ok(crate::facts::Containerd { cni_bin_dirs: config.cni_bin_dirs, nri_socket })
}

/// Deletes the probe pods an earlier eas left (it was killed before deleting them). One LIST.
pub async fn sweep(cluster: &Cluster, t: Duration) -> Result<usize, crate::cluster::ApiError> {
    let selector = format!("{LABEL_MANAGED}=true,{LABEL_PROBE}=true");
    cluster.delete_pods(NAMESPACE, &selector, t).await
}

/// Counts the probes' calls and records the pods they create.
struct Counted {
    node: String,
}

impl crate::cluster::pods::Watch for Counted {
    fn called(&self) {
        called();
    }

    fn created(&self, name: &str, uid: &str) {
        CREATED.lock().unwrap_or_else(|e| e.into_inner()).push((name.to_string(), uid.to_string(), self.node.clone()));
    }
}

/// Runs the probe on `node` and returns its output: POST, then a watch until it has ended or
/// cannot start (within [`TIMEOUT`]), then its log; the pod is deleted in every case
/// (`cluster::pods`). `node_down`: why the node's kubelet is not running pods ([`node_down`]).
pub async fn read(
    cluster: &Cluster,
    spec: &Pod,
    node: &str,
    node_down: Option<&str>,
) -> Result<String, crate::cluster::pods::PodRunError> {
    let counted = Counted { node: node.to_string() };
    cluster.run_pod(NAMESPACE, spec, TIMEOUT, node_down, &counted).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_a_busybox_the_node_has_by_name() {
        let images = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            choose_image(&images(&[
                "docker.io/rancher/mirrored-library-busybox@sha256:abc",
                "docker.io/rancher/mirrored-library-busybox:1.36.1"
            ])),
            Some("docker.io/rancher/mirrored-library-busybox:1.36.1".into())
        );
        assert_eq!(
            choose_image(&images(&["docker.io/rancher/mirrored-pause:3.6", "docker.io/vllm/vllm-openai-cpu:v0.24.0"])),
            None
        );
    }

    #[test]
    fn the_pod_reads_read_only_on_its_node_and_carries_the_labels() {
        let p =
            pod("Xeon_SR.01", "busybox:1", "/srv/k3s/agent/etc/containerd/config.toml", "/var/run/nri/nri.sock", "r1");
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["metadata"]["generateName"], "eas-probe-xeon-sr-01-");
        assert_eq!(v["metadata"]["labels"][LABEL_RUN], "r1");
        assert_eq!(v["spec"]["nodeName"], "Xeon_SR.01");
        assert_eq!(v["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(v["spec"]["volumes"][0]["hostPath"]["path"], "/srv/k3s/agent/etc/containerd");
        assert_eq!(v["spec"]["volumes"][1]["hostPath"]["path"], "/var/run/nri");
        for m in v["spec"]["containers"][0]["volumeMounts"].as_array().unwrap() {
            assert_eq!(m["readOnly"], true, "{m}");
        }
    }

    #[test]
    fn the_output_is_the_config_then_the_socket() {
        let text = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dir = \"/var/lib/rancher/k3s/data/cni\"\n\n--- eas-probe nri-socket: present\n";
        let c = parse_output(text, "n").unwrap();
        assert_eq!((c.cni_bin_dirs, c.nri_socket), (vec!["/var/lib/rancher/k3s/data/cni".to_string()], true));
        assert!(parse_output("cat: can't open\n", "n").unwrap_err().contains("printed no answer"));
    }
}
