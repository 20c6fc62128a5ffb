//! Short-lived pods eas runs itself (`--probe-nodes`' probes): one created, polled to its end, its
//! log read and deleted in every case (a guard deletes it when the caller's future is dropped);
//! and the sweep of those an earlier eas left.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::{Api, Client};

use super::{ApiError, call};

/// Why a pod's run gave no log.
#[derive(Debug, thiserror::Error)]
pub enum PodRunError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// It ended `Failed`: its status's message or reason.
    #[error("failed: {0}")]
    Failed(String),
    /// It had not ended within the limit, in seconds.
    #[error("did not finish within {0} s")]
    NotDone(u64),
    #[error("the API server named no pod")]
    Unnamed,
}

/// What the caller counts and records as the run goes: each API call, and the pod once created.
pub trait Watch {
    fn called(&self);
    fn created(&self, name: &str, uid: &str);
}

/// Deletes every pod in `namespace` that `selector` matches (grace period 0): one LIST, then a
/// DELETE each, each bounded by `t`. How many there were.
pub async fn delete_matching(client: &Client, namespace: &str, selector: &str, t: Duration) -> Result<usize, ApiError> {
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

/// Runs `spec` in `namespace` to its end: POST, a GET every `poll` until it has `Succeeded` or
/// `Failed` (all within `limit`), then its log; the pod is deleted in every case.
pub async fn run_to_end(
    client: &Client,
    namespace: &str,
    spec: &Pod,
    limit: Duration,
    poll: Duration,
    watch: &impl Watch,
) -> Result<String, PodRunError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    watch.called();
    let created =
        call(&format!("create a pod in {namespace}"), limit, pods.create(&PostParams::default(), spec)).await?;
    let name = created.metadata.name.clone().ok_or(PodRunError::Unnamed)?;
    watch.created(&name, created.metadata.uid.as_deref().unwrap_or_default());
    let mut cleanup = Cleanup { pods: pods.clone(), name: Some(name.clone()) };
    let ended = tokio::time::timeout(limit, async {
        loop {
            watch.called();
            let p = call(&format!("get pod {namespace}/{name}"), limit, pods.get(&name)).await?;
            match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Succeeded") => break Ok(()),
                Some("Failed") => {
                    let why = p.status.and_then(|s| s.message.or(s.reason)).unwrap_or_default();
                    break Err(PodRunError::Failed(why));
                }
                _ => tokio::time::sleep(poll).await,
            }
        }
    })
    .await
    .unwrap_or(Err(PodRunError::NotDone(limit.as_secs())));
    let log = match ended {
        Ok(()) => {
            watch.called();
            let what = format!("read pod {namespace}/{name}'s log");
            call(&what, limit, pods.logs(&name, &LogParams::default())).await.map_err(PodRunError::from)
        }
        Err(e) => Err(e),
    };
    // Deleted now, bounded, rather than left to the guard.
    watch.called();
    let dp = DeleteParams::default().grace_period(0);
    if call("delete pod", Duration::from_secs(10), pods.delete(&name, &dp)).await.is_ok() {
        cleanup.name = None;
    }
    log
}
