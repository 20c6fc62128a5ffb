//! What the waits of verification share (`devices`, `servers`): their timeouts, and the lines a
//! failed wait reports (an object's recent events, a pod's log). A leaf: it imports neither its
//! siblings nor `verify` itself, so the checks and the module that runs them stay acyclic.

use std::time::Duration;

use crate::cluster::Cluster;
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, LogParams};

use crate::cluster::typed::Within;
use crate::settings::timeouts;

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub devices: Duration,
    pub models: Duration,
    /// `models` counts from the start, devices included (`eas up`'s verify phase: one window).
    pub whole: bool,
    pub poll: Duration,
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        // The vLLM startup probe alone allows 20 minutes, and weights download before it.
        Timeouts {
            devices: timeouts::VERIFY_DEVICES,
            models: timeouts::VERIFY,
            whole: false,
            poll: timeouts::VERIFY_POLL,
            call: timeouts::CALL,
        }
    }
}

/// Recent events, oldest first, at most ten, as indented lines.
pub fn event_lines(mut items: Vec<Event>) -> Vec<String> {
    items.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
    items
        .iter()
        .rev()
        .take(10)
        .rev()
        .map(|e| {
            format!(
                "  event {} {}: {}",
                e.type_.as_deref().unwrap_or("-"),
                e.reason.as_deref().unwrap_or("-"),
                e.message.as_deref().unwrap_or("").trim()
            )
        })
        .collect()
}

/// Recent events for an object and, for a pod, the last lines of its log.
pub(super) async fn diagnostics(cluster: &Cluster, namespace: &str, name: &str, t: &Timeouts) -> Vec<String> {
    let mut lines = Vec::new();
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    match cluster.list::<Event>(Within::Namespace(namespace), &lp, "list events", t.call).await {
        Ok(events) => lines.extend(event_lines(events)),
        Err(e) => lines.push(format!("  (events unavailable: {e})")),
    }
    let lp = LogParams { tail_lines: Some(20), ..LogParams::default() };
    if let Ok(log) = cluster.log(namespace, name, &lp, "pod log", t.call).await {
        lines.extend(log.lines().map(|l| format!("  log {}", crate::secrets::mask(l))));
    }
    lines
}
