//! Short-lived pods eas runs itself (`--probe-nodes`' probes): one created, watched to its end,
//! its log read and deleted in every case (a guard deletes it when the caller's future is
//! dropped); one that cannot start is said with why (its phase, conditions, container waits and
//! events) as soon as that is known; and the sweep of those an earlier eas left.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, LogParams, PostParams, WatchEvent, WatchParams};

use super::{ApiError, Cluster, call};

/// Why a pod's run gave no log.
#[derive(Debug, thiserror::Error)]
pub enum PodRunError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// It ended `Failed`: its status's message or reason.
    #[error("failed: {0}")]
    Failed(String),
    /// It did not start: why, in its own status and events; it was created and deleted.
    #[error("{pod} did not start: {why}; it was created and deleted")]
    NotStarted { pod: String, why: String },
    /// It started and had not ended within the limit, in seconds.
    #[error("{pod} started but did not finish within {secs} s: {why}; it was created and deleted")]
    NotDone { pod: String, secs: u64, why: String },
    #[error("the API server named no pod")]
    Unnamed,
}

/// What the caller counts and records as the run goes: each API call, and the pod once created.
pub trait Watch {
    fn called(&self);
    fn created(&self, name: &str, uid: &str);
}

impl Cluster {
    /// Deletes every pod in `namespace` that `selector` matches (grace period 0): one LIST, then a
    /// DELETE each, each bounded by `t`. How many there were.
    pub async fn delete_pods(&self, namespace: &str, selector: &str, t: Duration) -> Result<usize, ApiError> {
        let client = &self.client;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let what = format!("list pods in {namespace} labelled {selector}");
        let list = call(&what, t, pods.list(&ListParams::default().labels(selector))).await?;
        let mut n = 0;
        for name in list.items.into_iter().filter_map(|p| p.metadata.name) {
            let _ = call(
                &format!("delete pod {namespace}/{name}"),
                t,
                pods.delete(&name, &DeleteParams::default().grace_period(0)),
            )
            .await;
            n += 1;
        }
        Ok(n)
    }

    /// Runs `spec` in `namespace` to its end: POST, then a watch of the pod from the POST's
    /// resourceVersion (watched again from the last one when a watch ends or breaks, after a GET
    /// when it is too old) until it has `Succeeded` or `Failed`, or cannot start ([`seen`], with
    /// `node_down`), all within `limit`; then its log. A pod that did not start is said with its
    /// events (one LIST). The pod is deleted in every case.
    pub async fn run_pod(
        &self,
        namespace: &str,
        spec: &Pod,
        limit: Duration,
        node_down: Option<&str>,
        watch: &impl Watch,
    ) -> Result<String, PodRunError> {
        let client = &self.client;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        watch.called();
        let created =
            call(&format!("create a pod in {namespace}"), limit, pods.create(&PostParams::default(), spec)).await?;
        let name = created.metadata.name.clone().ok_or(PodRunError::Unnamed)?;
        watch.created(&name, created.metadata.uid.as_deref().unwrap_or_default());
        let mut cleanup = Cleanup { pods: pods.clone(), name: Some(name.clone()) };
        let full = format!("pod {namespace}/{name}");
        let mut last = created;
        let ended =
            match tokio::time::timeout(limit, follow(&pods, &name, &mut last, limit, node_down, watch)).await.ok() {
                Some(Ok(Seen::Succeeded)) => Ok(()),
                Some(Ok(Seen::Failed(why))) => Err(PodRunError::Failed(why)),
                Some(Ok(Seen::Stuck(why))) => Err(PodRunError::NotStarted { pod: full.clone(), why }),
                Some(Err(e)) => Err(e.into()),
                // The limit (`follow` answers no `Waiting`): what the pod had come to by then.
                Some(Ok(Seen::Waiting)) | None => {
                    let why = format!("after {} s: {}", limit.as_secs(), describe(&last));
                    let started = last.status.as_ref().is_some_and(|s| s.start_time.is_some());
                    Err(if started {
                        PodRunError::NotDone { pod: full.clone(), secs: limit.as_secs(), why }
                    } else {
                        PodRunError::NotStarted { pod: full.clone(), why }
                    })
                }
            };
        let result = match ended {
            Ok(()) => {
                watch.called();
                let what = format!("read {full}'s log");
                call(&what, limit, pods.logs(&name, &LogParams::default())).await.map_err(PodRunError::from)
            }
            Err(PodRunError::NotStarted { pod, why }) => {
                watch.called();
                let events: Api<Event> = Api::namespaced(client.clone(), namespace);
                let lp = ListParams::default().fields(&format!("involvedObject.kind=Pod,involvedObject.name={name}"));
                let said =
                    match call(&format!("list the events of {pod}"), Duration::from_secs(10), events.list(&lp)).await {
                        Ok(l) => said_events(&l.items),
                        Err(e) => format!("its events unread: {e}"),
                    };
                Err(PodRunError::NotStarted { pod, why: format!("{why}; {said}") })
            }
            Err(e) => Err(e),
        };
        // Deleted now, bounded, rather than left to the guard.
        watch.called();
        let dp = DeleteParams::default().grace_period(0);
        if call("delete pod", Duration::from_secs(10), pods.delete(&name, &dp)).await.is_ok() {
            cleanup.name = None;
        }
        result
    }
}

/// Deletes the pod when dropped, whatever ended the run (an error, a timeout, the command's
/// cancellation by a signal, which drops the run mid-way): the DELETE is sent before the drop
/// returns (bounded at 5 s), since a task spawned now would not outlive the runtime's shutdown
/// that follows a signal.
struct Cleanup {
    pods: Api<Pod>,
    name: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let pods = self.pods.clone();
            let delete = async move {
                let dp = DeleteParams::default().grace_period(0);
                let _ = tokio::time::timeout(Duration::from_secs(5), pods.delete(&name, &dp)).await;
            };
            // The runtime is eas's multi-thread one (`crate::runtime`), where a worker may block.
            match tokio::runtime::Handle::try_current() {
                Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                    tokio::task::block_in_place(|| h.block_on(delete))
                }
                Ok(h) => drop(h.spawn(delete)),
                Err(_) => {}
            }
        }
    }
}

/// Container waiting reasons the kubelet gives for a container it will not start without a change
/// to the pod or the node (an image absent under `imagePullPolicy: Never`, a pull that fails, a
/// config it cannot build): the pod will not run (kubernetes/kubernetes pkg/kubelet/images
/// `ErrImageNeverPull`, `ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`;
/// pkg/kubelet/kuberuntime `CreateContainerConfigError`, `CreateContainerError`).
const NEVER_STARTS: &[&str] = &[
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// What one sight of the pod says.
#[derive(Debug, PartialEq)]
pub enum Seen {
    Succeeded,
    Failed(String),
    /// Not ended, and nothing says it cannot: wait on.
    Waiting,
    /// It cannot start: why.
    Stuck(String),
}

/// Reads one sight of a pod. `node_down`: why its node's kubelet is not running (the node's Ready
/// condition is not True), if it is not; a pod no kubelet has written to (no condition, no
/// container status) on such a node cannot start.
pub fn seen(p: &Pod, node_down: Option<&str>) -> Seen {
    let status = p.status.clone().unwrap_or_default();
    match status.phase.as_deref() {
        Some("Succeeded") => return Seen::Succeeded,
        Some("Failed") => return Seen::Failed(describe(p)),
        _ => {}
    }
    let waits = status.container_statuses.iter().flatten().filter_map(|c| c.state.as_ref()?.waiting.as_ref());
    if waits.clone().any(|w| w.reason.as_deref().is_some_and(|r| NEVER_STARTS.contains(&r))) {
        return Seen::Stuck(describe(p));
    }
    let unschedulable = status.conditions.iter().flatten().any(|c| c.type_ == "PodScheduled" && c.status == "False");
    if unschedulable {
        return Seen::Stuck(describe(p));
    }
    let untouched = status.conditions.as_ref().is_none_or(|c| c.is_empty())
        && status.container_statuses.as_ref().is_none_or(|c| c.is_empty());
    match node_down {
        Some(down) if untouched => Seen::Stuck(format!("{}; {down}", describe(p))),
        _ => Seen::Waiting,
    }
}

/// A pod's state in one line: its phase and reason, each condition that is not True, each
/// container's waiting or ended state; "no kubelet has written to it" when it has neither a
/// condition nor a container status.
pub fn describe(p: &Pod) -> String {
    let status = p.status.clone().unwrap_or_default();
    let mut parts = vec![status.phase.clone().unwrap_or_else(|| "no phase".into())];
    for s in [&status.reason, &status.message].into_iter().flatten().filter(|s| !s.is_empty()) {
        parts[0].push_str(&format!(": {s}"));
    }
    for c in status.conditions.iter().flatten().filter(|c| c.status != "True") {
        let mut s = format!("{} {}", c.type_, c.status);
        for part in [&c.reason, &c.message].into_iter().flatten().filter(|p| !p.is_empty()) {
            s.push_str(&format!(": {part}"));
        }
        parts.push(s);
    }
    for c in status.container_statuses.iter().flatten() {
        let state = c.state.clone().unwrap_or_default();
        let (how, reason, message) = match (state.waiting, state.terminated) {
            (Some(w), _) => ("waiting", w.reason, w.message),
            (None, Some(t)) => ("ended", t.reason, t.message),
            _ => continue,
        };
        let mut s = format!("container {} {how}", c.name);
        for part in [reason, message].into_iter().flatten().filter(|p| !p.is_empty()) {
            s.push_str(&format!(": {part}"));
        }
        parts.push(s);
    }
    if status.conditions.as_ref().is_none_or(|c| c.is_empty())
        && status.container_statuses.as_ref().is_none_or(|c| c.is_empty())
    {
        parts.push("no kubelet has written to it (no condition, no container status)".into());
    }
    crate::text::for_people(&parts.join("; "))
}

/// The pod's events in one line, oldest first (`Warning FailedMount: … (x3)`); "no event" when
/// there is none.
fn said_events(events: &[Event]) -> String {
    if events.is_empty() {
        return "no event".into();
    }
    let lines: Vec<String> = events
        .iter()
        .map(|e| {
            let n = e.count.filter(|n| *n > 1).map(|n| format!(" (x{n})")).unwrap_or_default();
            format!(
                "{} {}: {}{n}",
                e.type_.as_deref().unwrap_or("Normal"),
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("").trim()
            )
        })
        .collect();
    crate::text::for_people(&format!("events: {}", lines.join("; ")))
}

/// Watches pod `name` from `last` (its latest sight, kept up to date) until [`seen`] says it ended
/// or cannot start. A watch that ends, breaks or stays quiet past the client's read timeout is
/// watched again from the last resourceVersion; one too old (410) first reads the pod (a GET).
/// A refusal (401, 403) ends it as its error.
async fn follow(
    pods: &Api<Pod>,
    name: &str,
    last: &mut Pod,
    limit: Duration,
    node_down: Option<&str>,
    watch: &impl Watch,
) -> Result<Seen, ApiError> {
    let what = format!("watch pod {name}");
    let refused = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 401 || s.code == 403);
    let mut rv = last.metadata.resource_version.clone().unwrap_or_default();
    let wp = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(limit.as_secs().max(1) as u32);
    let mut pause = Duration::from_millis(500);
    loop {
        match seen(last, node_down) {
            Seen::Waiting => {}
            answer => return Ok(answer),
        }
        watch.called();
        let events = match pods.watch(&wp, &rv).await {
            Ok(s) => s,
            Err(e) if refused(&e) => return Err(ApiError::Call { call: what, cause: super::api::said(&e) }),
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let mut events = std::pin::pin!(events);
        let mut expired = false;
        while let Some(e) = events.next().await {
            match e {
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => {
                    rv = p.metadata.resource_version.clone().unwrap_or(rv);
                    *last = p;
                    pause = Duration::from_millis(500);
                    if !matches!(seen(last, node_down), Seen::Waiting) {
                        break;
                    }
                }
                Ok(WatchEvent::Deleted(_)) => return Ok(Seen::Failed("deleted by someone else".into())),
                Ok(WatchEvent::Bookmark(b)) => rv = b.metadata.resource_version,
                Ok(WatchEvent::Error(s)) if s.code == 401 || s.code == 403 => {
                    return Err(ApiError::Call { call: what, cause: super::api::said(&kube::Error::Api(s)) });
                }
                Ok(WatchEvent::Error(s)) => {
                    expired = s.code == 410;
                    break;
                }
                Err(_) => break,
            }
        }
        if expired {
            watch.called();
            *last = call(&format!("get pod {name}"), limit, pods.get(name)).await?;
            rv = last.metadata.resource_version.clone().unwrap_or_default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn a_pod_that_cannot_start_is_told_from_one_that_is_starting() {
        let created = pod(serde_json::json!({"phase": "Pending", "qosClass": "BestEffort"}));
        assert_eq!(seen(&created, None), Seen::Waiting, "a kubelet that is up may not have written yet");
        let Seen::Stuck(why) = seen(&created, Some("node n's Ready condition is Unknown")) else { panic!() };
        assert_eq!(
            why,
            "Pending; no kubelet has written to it (no condition, no container status); node n's Ready condition is Unknown"
        );
        let never = pod(serde_json::json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": [{"name": "probe", "ready": false, "restartCount": 0, "image": "b", "imageID": "",
                "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "Container image \"b\" is not present with pull policy of Never"}}}]}));
        let Seen::Stuck(why) = seen(&never, None) else { panic!() };
        assert_eq!(
            why,
            "Pending; Ready False: ContainersNotReady; container probe waiting: ErrImageNeverPull: Container image \"b\" is not present with pull policy of Never"
        );
        let creating =
            pod(serde_json::json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "probe", "ready": false, "restartCount": 0, "image": "b", "imageID": "",
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}));
        assert_eq!(seen(&creating, Some("down")), Seen::Waiting, "a kubelet wrote to it: it is starting");
        let unschedulable = pod(serde_json::json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}]}));
        assert!(
            matches!(seen(&unschedulable, None), Seen::Stuck(w) if w == "Pending; PodScheduled False: Unschedulable: 0/1 nodes are available")
        );
        assert_eq!(seen(&pod(serde_json::json!({"phase": "Succeeded"})), None), Seen::Succeeded);
        assert!(
            matches!(seen(&pod(serde_json::json!({"phase": "Failed", "reason": "DeadlineExceeded"})), None), Seen::Failed(w) if w.starts_with("Failed: DeadlineExceeded"))
        );
    }
}
