//! delete: what the ledger says the run created and the teardown left, read again after the
//! teardown, deleted in order (a Helm release by its uninstall in the bastion). The failures are
//! reported by the record phase; the namespaces and CRDs deleted go only once what they hold has
//! gone, so the settle phase waits for them.

use std::time::Duration;

use crate::act::bastion;
use crate::act::bastion::run::Outcome;
use crate::cluster::Cluster;
use crate::error::Failure;
use crate::plan::DownId;
use crate::state::ledger::{Object, Snapshot, TeardownPlan};

use crate::cluster::CALL;
use crate::pipeline::down::bench::Bench;
use crate::pipeline::down::cx::{Cx, Down, SNAPSHOT_DEADLINE, left, snapshot};
use crate::pipeline::runner::{Phase, Runner};

/// The delete phase. Its input only a guarded teardown hands on (`Torn::guarded`; a forced one
/// deletes nothing directly): the bench the teardown ran on and its plan, whose `delete` is what
/// the ledger says the run created.
pub struct Delete<'a> {
    /// The cluster find reached, as the context holds it (`cx.cluster()`).
    pub cluster: &'a Cluster,
}

/// What the delete phase hands on: what could not be deleted, and the namespaces and CRDs that
/// were (they are still going).
pub struct Deleted {
    pub failures: Vec<String>,
    pub going: Snapshot,
}

impl<'a> Phase<Down> for Delete<'a> {
    const ID: DownId = DownId::Delete;
    type Planned = (&'a Bench, &'a TeardownPlan);
    type Done = Deleted;

    async fn act(
        &mut self,
        (bench, plan): Self::Planned,
        cx: &Cx<'_>,
        _r: &mut Runner<Down>,
    ) -> Result<Deleted, Failure> {
        // What the ledger says this run created and is still there.
        let after_teardown = snapshot(self.cluster, cx.interrupt, SNAPSHOT_DEADLINE).await?;
        let mut deleted = Deleted { failures: Vec::new(), going: Snapshot::default() };
        for o in plan.delete.intersect(&after_teardown).objects() {
            let r = match &o {
                Object::HelmRelease(rel) => helm_uninstall(cx, bench, &rel.namespace, &rel.name).await,
                // A DELETE the API server never answers ends on SIGINT/SIGTERM, not at its timeout.
                other => self
                    .cluster
                    .delete_object(other, CALL, &cx.interrupt.graceful)
                    .await
                    .ok_or(Failure::Interrupted)?
                    .map_err(|e| e.to_string()),
            };
            match r {
                Err(e) => deleted.failures.push(format!("{o}: {e}")),
                Ok(()) => {
                    cx.shell.note(format!("removed {o}"));
                    deleted.went(&o);
                }
            }
            if cx.interrupt.graceful.is_cancelled() {
                return Err(Failure::Interrupted);
            }
        }
        Ok(deleted)
    }
}

impl Deleted {
    /// A deleted namespace or CRD is still going (what it holds goes first).
    fn went(&mut self, o: &Object) {
        match o {
            Object::Namespace(n) => {
                self.going.namespaces.insert(n.clone());
            }
            Object::Crd(c) => {
                self.going.crds.insert(c.clone());
            }
            _ => {}
        }
    }
}

/// How long one release's `helm uninstall --wait --timeout 5m` container may run.
const HELM_UNINSTALL: Duration = Duration::from_secs(600);

/// [`HELM_UNINSTALL`], or what is left of the phase's window when that is less.
fn uninstall_timeout() -> Duration {
    HELM_UNINSTALL.min(left())
}

async fn helm_uninstall(cx: &Cx<'_>, bench: &Bench, namespace: &str, name: &str) -> Result<(), String> {
    let tag = bench.tag(cx).await.map_err(|e| e.to_string())?;
    let env = cx.global.env.lookup();
    let argv = ["helm", "uninstall", "--namespace", namespace, name, "--wait", "--timeout", "5m"];
    let std = bastion::standard(tag, argv.iter().map(|s| s.to_string()).collect(), None, Some(&bench.kube), &env)
        .map_err(|e| e.to_string())?;
    let mut spec = std.spec.clone();
    spec.env.push(("KUBECONFIG".into(), bastion::KUBECONFIG_TARGET.into()));
    // Helm waits up to its own 5 min; the container stops itself by then, and always within what is
    // left of the phase's window, so the runner never has to cut a container off.
    spec.timeout = Some(uninstall_timeout());
    match bench.run(&spec, cx.interrupt).await.map_err(|e| e.to_string())? {
        (Outcome::Exited(0), _) => Ok(()),
        (other, out) => Err(format!("helm uninstall {other:?}: {}", String::from_utf8_lossy(&out).trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release's uninstall stops itself within what is left of the delete phase's window (the
    /// runner hands it), and at 10 min in a window longer than that.
    #[tokio::test]
    async fn a_releases_uninstall_stops_itself_within_the_window_left() {
        let within = |limit| {
            let interrupt = crate::runtime::Interrupt::default();
            async move {
                let read = async { Ok(uninstall_timeout()) };
                crate::pipeline::runner::window(limit, false, &interrupt, read, || Failure::Interrupted).await.unwrap()
            }
        };
        let short = within(Duration::from_secs(30)).await;
        assert!(short <= Duration::from_secs(30) && short > Duration::from_secs(25), "{short:?}");
        assert_eq!(within(Duration::from_secs(3600)).await, HELM_UNINSTALL);
    }
    use crate::state::ledger::Release;

    /// Only the namespaces and CRDs deleted are waited for: they go once what they hold has
    /// gone; a Helm release or a cluster-scoped object is gone when its deletion answers.
    #[test]
    fn the_namespaces_and_crds_deleted_are_the_ones_still_going() {
        let mut d = Deleted { failures: Vec::new(), going: Snapshot::default() };
        d.went(&Object::Namespace("kserve".into()));
        d.went(&Object::Crd("inferenceservices.serving.kserve.io".into()));
        d.went(&Object::HelmRelease(Release { namespace: "kserve".into(), name: "kserve".into() }));
        assert_eq!(d.going.namespaces.iter().collect::<Vec<_>>(), ["kserve"]);
        assert_eq!(d.going.crds.iter().collect::<Vec<_>>(), ["inferenceservices.serving.kserve.io"]);
        assert_eq!(d.going.objects().len(), 2);
    }
}
