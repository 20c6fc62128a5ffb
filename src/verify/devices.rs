//! Device resources, node by node (SPEC §7). A node has a device when `eas up` saw it advertise
//! one of the device's resources, when it carries the device's node label (NFD's
//! `intel.feature.node.kubernetes.io/gpu=true` for Intel GPUs), when it advertises one now, or
//! when a pod of the device's plugin DaemonSet runs on it. Every such node must have at least one
//! of the device's resources allocatable, and its plugin pod must be Ready. A node that has no
//! device is never looked at; a healthy node is never blamed.
//!
//! The verdict is pure ([`check`]); reading the cluster and the failure's diagnostics (the plugin
//! pod's log tail, the node's events) are in [`run`], which waits for a failing node by watching
//! what would make it pass (`await_condition` on the node and on its plugin pod).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, LogParams};

use crate::cluster::typed::Within;

use crate::config::data::{self, DeviceResource};
use crate::facts::{self, Facts};

/// One pod of a device plugin's DaemonSet, as the check needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginPod {
    /// The device (`Intel GPU`) whose plugin this pod runs.
    pub device: String,
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub ready: bool,
    /// The first waiting container's reason (`CrashLoopBackOff`), else the pod's phase.
    pub state: String,
    pub restarts: i32,
}

/// One device node's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCheck {
    pub node: String,
    pub device: String,
    /// The resources checked, with what each has allocatable.
    pub allocatable: Vec<(String, f64)>,
    pub pod: Option<PluginPod>,
    /// Empty when the node passes.
    pub problems: Vec<String>,
}

impl NodeCheck {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// What a wait for this node still waits for, short (`gpu-b: plugin CrashLoopBackOff`).
    pub fn waiting_for(&self) -> String {
        match &self.pod {
            _ if self.allocatable.is_empty() && self.pod.is_none() => format!("{}: node not found", self.node),
            Some(p) if !p.ready => format!("{}: plugin {}", self.node, p.state),
            None => format!("{}: no plugin pod", self.node),
            Some(_) => format!("{}: {} not allocatable", self.node, self.device),
        }
    }

    pub fn line(&self) -> String {
        let alloc: Vec<String> = self.allocatable.iter().map(|(r, q)| format!("{r}={q}")).collect();
        let pod = match &self.pod {
            Some(p) => format!("plugin pod {}/{} {}", p.namespace, p.name, if p.ready { "Ready" } else { "not Ready" }),
            None => "no plugin pod".into(),
        };
        format!("{} on node {}: allocatable {}; {pod}", self.device, self.node, alloc.join(", "))
    }
}

/// The device nodes in the facts `eas up` gathered: node -> the device resources it advertised.
pub fn recorded_nodes(f: &Facts) -> BTreeMap<String, Vec<String>> {
    let rules = &data::cluster_rules().device_resources;
    let mut out = BTreeMap::new();
    for n in &f.nodes {
        let res: Vec<String> = n
            .capacity
            .iter()
            .filter(|(r, q)| {
                rules.iter().any(|d| r.starts_with(&d.prefix)) && facts::parse_quantity(q).is_some_and(|q| q > 0.0)
            })
            .map(|(r, _)| r.clone())
            .collect();
        if !res.is_empty() {
            out.insert(n.name.clone(), res);
        }
    }
    out
}

fn quantity(
    n: &Node,
    field: fn(
        &k8s_openapi::api::core::v1::NodeStatus,
    ) -> Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    res: &str,
) -> f64 {
    n.status.as_ref().and_then(field).and_then(|m| m.get(res)).and_then(|q| facts::parse_quantity(&q.0)).unwrap_or(0.0)
}

fn advertises(n: &Node, prefix: &str) -> bool {
    let cap = n.status.as_ref().and_then(|s| s.capacity.as_ref());
    cap.is_some_and(|m| {
        m.iter().any(|(r, q)| r.starts_with(prefix) && facts::parse_quantity(&q.0).is_some_and(|q| q > 0.0))
    })
}

/// The verdict for every node that has a device; nodes without one are left out.
pub fn check(
    kinds: &[DeviceResource],
    recorded: &BTreeMap<String, Vec<String>>,
    nodes: &[Node],
    pods: &[PluginPod],
) -> Vec<NodeCheck> {
    let mut out = Vec::new();
    for kind in kinds {
        let mut names: Vec<String> = Vec::new();
        for (node, res) in recorded {
            if res.iter().any(|r| r.starts_with(&kind.prefix)) {
                names.push(node.clone());
            }
        }
        for n in nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            let labelled = kind
                .node_label
                .as_ref()
                .is_some_and(|l| n.metadata.labels.as_ref().and_then(|m| m.get(l)).is_some_and(|v| v == "true"));
            let runs_plugin = pods.iter().any(|p| p.device == kind.device && p.node == name);
            if labelled || runs_plugin || advertises(n, &kind.prefix) {
                names.push(name);
            }
        }
        names.sort();
        names.dedup();
        for name in names {
            out.push(check_node(kind, &name, nodes, pods));
        }
    }
    out
}

fn check_node(kind: &DeviceResource, name: &str, nodes: &[Node], pods: &[PluginPod]) -> NodeCheck {
    let mut c = NodeCheck {
        node: name.to_string(),
        device: kind.device.clone(),
        allocatable: Vec::new(),
        pod: None,
        problems: Vec::new(),
    };
    let Some(node) = nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name)) else {
        c.problems.push(format!("node {name} had {} when eas up ran and is no longer in the cluster", kind.device));
        return c;
    };
    c.allocatable =
        kind.allocatable.iter().map(|r| (r.clone(), quantity(node, |s| s.allocatable.as_ref(), r))).collect();
    if !c.allocatable.iter().any(|(_, q)| *q > 0.0) {
        c.problems.push(format!(
            "node {name}: none of {} is allocatable (the {} plugin is not serving it)",
            kind.allocatable.join(" or "),
            kind.device
        ));
    }
    // A DaemonSet has one pod per node; during a rollout a second may exist: a Ready one wins.
    let mut mine: Vec<&PluginPod> = pods.iter().filter(|p| p.device == kind.device && p.node == name).collect();
    mine.sort_by_key(|p| !p.ready);
    c.pod = mine.first().map(|p| (*p).clone());
    match &c.pod {
        None => c.problems.push(format!(
            "node {name}: no pod of the {} plugin ({}) runs on it",
            kind.device,
            kind.plugin.as_deref().unwrap_or("?")
        )),
        Some(p) if !p.ready => c.problems.push(format!(
            "node {name}: plugin pod {}/{} is not Ready ({}, {} restarts)",
            p.namespace, p.name, p.state, p.restarts
        )),
        Some(_) => {}
    }
    c
}

/// The pods of the device plugins' DaemonSets, each with its device.
pub fn plugin_pods(kinds: &[DeviceResource], sets: &[DaemonSet], pods_by_set: &[(usize, Vec<Pod>)]) -> Vec<PluginPod> {
    let mut out = Vec::new();
    for (i, pods) in pods_by_set {
        let set_name = sets[*i].metadata.name.clone().unwrap_or_default();
        let Some(kind) = kinds.iter().find(|k| k.plugin.as_ref().is_some_and(|p| set_name.starts_with(p.as_str())))
        else {
            continue;
        };
        for p in pods {
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            out.push(plugin_pod(&kind.device, p));
        }
    }
    out
}

fn plugin_pod(device: &str, p: &Pod) -> PluginPod {
    let status = p.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let containers = status.and_then(|s| s.container_statuses.clone()).unwrap_or_default();
    let waiting = containers.iter().find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
    PluginPod {
        device: device.to_string(),
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
        ready,
        state: waiting.unwrap_or_else(|| status.and_then(|s| s.phase.clone()).unwrap_or_else(|| "Unknown".into())),
        restarts: containers.iter().map(|c| c.restart_count).sum(),
    }
}

/// Reads nodes, the plugin DaemonSets and their pods, and checks every device node, waiting up
/// to `wait` for a failing node to recover. `Ok` carries one line per device node.
/// What the device wait still waits for: every failing node, in order. Pure.
pub fn waiting_line(checks: &[NodeCheck]) -> String {
    let pending: Vec<String> = checks.iter().filter(|c| !c.ok()).map(NodeCheck::waiting_for).collect();
    pending.join("; ")
}

/// Every node's verdict, one line each: `ok <line>` or `FAIL <line>`, so a failure names the
/// healthy nodes too. Pure.
pub fn verdict_lines(checks: &[NodeCheck]) -> Vec<String> {
    checks.iter().map(|c| format!("{} {}", if c.ok() { "ok  " } else { "FAIL" }, c.line())).collect()
}

pub async fn run(
    cluster: &Cluster,
    recorded: &BTreeMap<String, Vec<String>>,
    wait: Duration,
    poll: Duration,
    t: Duration,
    progress: &crate::output::Wait,
) -> Result<Vec<String>, Vec<String>> {
    let kinds = &data::cluster_rules().device_resources;
    let deadline = Instant::now() + wait;
    loop {
        let (nodes, pods) = read(cluster, kinds, t).await.map_err(|e| vec![e.to_string()])?;
        let checks = check(kinds, recorded, &nodes, &pods);
        if checks.iter().all(NodeCheck::ok) {
            return Ok(checks.iter().map(NodeCheck::line).collect());
        }
        progress.update(&waiting_line(&checks));
        if Instant::now() >= deadline {
            let mut lines = verdict_lines(&checks);
            for c in checks.iter().filter(|c| !c.ok()) {
                lines.extend(c.problems.iter().cloned());
                lines.extend(diagnostics(cluster, c, t).await);
            }
            return Err(lines);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        changed(cluster, &checks, poll.max(WATCH_CEILING).min(left)).await;
    }
}

/// The longest the device wait goes without reading again while it watches: a pod the plugin's
/// DaemonSet has not made yet cannot be watched by name.
const WATCH_CEILING: Duration = Duration::from_secs(30);

/// Until a failing node could pass: one of its device resources becomes allocatable, or its
/// plugin pod becomes Ready or is replaced (a watch of each, `Cluster::until`),
/// or `ceiling` passes.
async fn changed(cluster: &Cluster, checks: &[NodeCheck], ceiling: Duration) {
    use futures::StreamExt;
    use futures::future::BoxFuture;
    let mut waits: futures::stream::FuturesUnordered<BoxFuture<'static, ()>> = Default::default();
    for c in checks.iter().filter(|c| !c.ok()) {
        let missing: Vec<String> = c.allocatable.iter().filter(|(_, n)| *n <= 0.0).map(|(r, _)| r.clone()).collect();
        if !missing.is_empty() {
            let (cluster, node) = (cluster.clone(), c.node.clone());
            waits.push(Box::pin(async move {
                let advertises = move |n: Option<&Node>| {
                    let alloc = n.and_then(|n| n.status.as_ref()?.allocatable.as_ref());
                    alloc.is_some_and(|a| {
                        missing
                            .iter()
                            .any(|r| a.get(r).and_then(|q| facts::parse_quantity(&q.0)).is_some_and(|v| v > 0.0))
                    })
                };
                let _ = cluster.until_cluster::<Node>(&node, advertises).await;
            }));
        }
        if let Some(p) = c.pod.as_ref().filter(|p| !p.ready) {
            let (cluster, ns) = (cluster.clone(), p.namespace.clone());
            let (name, device) = (p.name.clone(), p.device.clone());
            waits.push(Box::pin(async move {
                let ready_or_gone = move |o: Option<&Pod>| o.is_none_or(|o| plugin_pod(&device, o).ready);
                let _ = cluster.until::<Pod>(&ns, &name, ready_or_gone).await;
            }));
        }
    }
    if waits.is_empty() {
        tokio::time::sleep(ceiling).await;
        return;
    }
    let _ = tokio::time::timeout(ceiling, waits.next()).await;
}

pub async fn read(
    cluster: &Cluster,
    kinds: &[DeviceResource],
    t: Duration,
) -> Result<(Vec<Node>, Vec<PluginPod>), crate::cluster::ApiError> {
    let all = ListParams::default();
    let nodes = cluster.nodes(t).await?;
    let sets = cluster.list::<DaemonSet>(Within::All, &all, "list daemonsets", t).await?;
    let mut by_set = Vec::new();
    for (i, ds) in sets.iter().enumerate() {
        let name = ds.metadata.name.clone().unwrap_or_default();
        if !kinds.iter().any(|k| k.plugin.as_ref().is_some_and(|p| name.starts_with(p.as_str()))) {
            continue;
        }
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let labels = ds.spec.selector.match_labels.clone().unwrap_or_default();
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let lp = ListParams::default().labels(&selector.join(","));
        let what = format!("list pods of daemonset {ns}/{name}");
        let pods = cluster.list::<Pod>(Within::Namespace(&ns), &lp, &what, t).await?;
        by_set.push((i, pods));
    }
    Ok((nodes, plugin_pods(kinds, &sets, &by_set)))
}

/// The failing plugin pod's log tail and the node's recent events.
async fn diagnostics(cluster: &Cluster, c: &NodeCheck, t: Duration) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(p) = &c.pod {
        lines.push(format!("  plugin pod {}/{}: {}, restarts {}", p.namespace, p.name, p.state, p.restarts));
        let lp = LogParams { tail_lines: Some(20), ..LogParams::default() };
        match cluster.log(&p.namespace, &p.name, &lp, "pod log", t).await {
            Ok(log) => lines.extend(log.lines().map(|l| format!("  log {}", crate::secrets::mask(l)))),
            Err(e) => lines.push(format!("  (log unavailable: {e})")),
        }
        // The previous container's log says why a crash-looping plugin exited.
        let prev = LogParams { tail_lines: Some(20), previous: true, ..LogParams::default() };
        if p.restarts > 0
            && let Ok(log) = cluster.log(&p.namespace, &p.name, &prev, "previous pod log", t).await
        {
            lines.extend(log.lines().map(|l| format!("  previous log {}", crate::secrets::mask(l))));
        }
    }
    let lp = ListParams::default().fields(&format!("involvedObject.kind=Node,involvedObject.name={}", c.node));
    match cluster.list::<Event>(Within::All, &lp, "list node events", t).await {
        Ok(events) => lines.extend(super::wait::event_lines(events)),
        Err(e) => lines.push(format!("  (node events unavailable: {e})")),
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: &[(&str, &str)], cap: &[(&str, &str)], alloc: &[(&str, &str)]) -> Node {
        let m =
            |v: &[(&str, &str)]| v.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>();
        serde_json::from_value(json!({"metadata": {"name": name, "labels": m(labels)},
            "status": {"capacity": m(cap), "allocatable": m(alloc)}}))
        .unwrap()
    }

    fn pod(node: &str, ready: bool) -> PluginPod {
        PluginPod {
            device: "Intel GPU".into(),
            namespace: "kube-system".into(),
            name: format!("intel-gpu-plugin-{node}"),
            node: node.into(),
            ready,
            state: if ready { "Running".into() } else { "CrashLoopBackOff".into() },
            restarts: if ready { 0 } else { 7 },
        }
    }

    const NFD: &str = "intel.feature.node.kubernetes.io/gpu";

    #[test]
    fn a_crash_looping_node_fails_and_the_healthy_ones_pass() {
        let kinds = &data::cluster_rules().device_resources;
        let nodes = vec![
            node("gpu-a", &[(NFD, "true")], &[("gpu.intel.com/i915", "1")], &[("gpu.intel.com/i915", "1")]),
            node("gpu-b", &[(NFD, "true")], &[("gpu.intel.com/i915", "1")], &[("gpu.intel.com/i915", "0")]),
            node("gpu-xe", &[], &[("gpu.intel.com/xe", "2")], &[("gpu.intel.com/xe", "2")]),
            node("cpu", &[], &[("cpu", "8")], &[("cpu", "8")]),
        ];
        let pods = vec![pod("gpu-a", true), pod("gpu-b", false), pod("gpu-xe", true)];
        let checks = check(kinds, &BTreeMap::new(), &nodes, &pods);
        let names: Vec<&str> = checks.iter().map(|c| c.node.as_str()).collect();
        assert_eq!(names, ["gpu-a", "gpu-b", "gpu-xe"], "the node without a GPU is not checked");
        let failed: Vec<&NodeCheck> = checks.iter().filter(|c| !c.ok()).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].node, "gpu-b");
        assert!(failed[0].problems.iter().any(|p| p.contains("CrashLoopBackOff") && p.contains("7 restarts")));
        assert!(failed[0].problems.iter().any(|p| p.contains("none of gpu.intel.com/i915 or gpu.intel.com/xe")));
    }

    #[test]
    fn each_signal_alone_makes_a_device_node() {
        let kinds = &data::cluster_rules().device_resources;
        // Labelled by NFD only: no allocatable, no plugin pod.
        let labelled = [node("n", &[(NFD, "true")], &[], &[])];
        let c = check(kinds, &BTreeMap::new(), &labelled, &[]);
        assert_eq!(c.len(), 1);
        assert!(c[0].problems.iter().any(|p| p.contains("no pod of the Intel GPU plugin")));
        // Recorded by up, advertising nothing now.
        let bare = [node("n", &[], &[], &[])];
        let rec: BTreeMap<String, Vec<String>> = [("n".to_string(), vec!["gpu.intel.com/i915".to_string()])].into();
        assert_eq!(check(kinds, &rec, &bare, &[]).len(), 1);
        // Runs a plugin pod, nothing else.
        assert_eq!(check(kinds, &BTreeMap::new(), &bare, &[pod("n", true)]).len(), 1);
        // Nothing at all: not a device node.
        assert!(check(kinds, &BTreeMap::new(), &bare, &[]).is_empty());
        // A recorded node that is gone is named.
        let gone = check(kinds, &rec, &[], &[]);
        assert!(gone[0].problems[0].contains("no longer in the cluster"));
    }

    #[test]
    fn npu_nodes_are_checked_with_their_own_resource() {
        let kinds = &data::cluster_rules().device_resources;
        let nodes = [node("n", &[], &[("npu.intel.com/accel", "1")], &[("npu.intel.com/accel", "1")])];
        let npu = PluginPod { device: "Intel NPU".into(), ..pod("n", true) };
        let c = check(kinds, &BTreeMap::new(), &nodes, &[npu]);
        assert_eq!(c.len(), 1);
        assert!(c[0].ok(), "{:?}", c[0].problems);
        assert_eq!(c[0].device, "Intel NPU");
    }
}
