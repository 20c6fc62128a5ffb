//! settle: the wait for what the delete phase deleted to go. A namespace stays `Terminating`
//! while its content goes, and its watch may be quiet all that time: each object still there is
//! awaited by a watch of it ([`Cluster::gone`]), all at once, within the phase's window (its
//! deadline, as the runner hands it); the last read says what is still there and why.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cluster::Cluster;
use crate::error::Failure;
use crate::plan::DownId;
use crate::state::ledger::{Object, Snapshot};

use crate::cluster::CALL;
use crate::pipeline::down::cx::{Cx, Down, cancellable, left, snapshot};
use crate::pipeline::down::plan;
use crate::pipeline::runner::{Phase, Runner};

/// The settle phase. Its input only the delete phase hands on (nothing else was deleted for it to
/// wait on): the namespaces and CRDs that phase deleted.
pub struct Settle<'a> {
    /// The cluster find reached, as the context holds it (`cx.cluster()`).
    pub cluster: &'a Cluster,
}

/// What the settle phase found: the cluster after the wait, and why each namespace still there
/// is (keyed by the object as the report names it).
pub struct Settled {
    pub after: Snapshot,
    pub why: BTreeMap<String, String>,
}

impl<'a> Phase<Down> for Settle<'a> {
    const ID: DownId = DownId::Settle;
    type Planned = &'a Snapshot;
    type Done = Settled;

    /// The cluster once what was deleted has gone from it, or once the window is all but spent:
    /// its last quarter (at most [`crate::settings::timeouts::LEDGER`]) is kept for the last
    /// read, which reports what is still there as left, a namespace with why (its deletion
    /// conditions, [`Cluster::namespace_left`]). The wait says what it still waits for as each
    /// one goes; a wait the API server refuses is a warning: the last read decides.
    async fn act(&mut self, going: &'a Snapshot, cx: &Cx<'_>, _r: &mut Runner<Down>) -> Result<Settled, Failure> {
        use futures::StreamExt;
        let window = left();
        let start = tokio::time::Instant::now();
        let reserve = (window / 4).min(crate::settings::timeouts::LEDGER);
        let wait_end = window.saturating_sub(reserve);
        let now = snapshot(self.cluster, cx.interrupt, wait_end.max(Duration::from_secs(1))).await?;
        let mut still = going.intersect(&now).objects();
        if still.is_empty() {
            return Ok(Settled { after: now, why: BTreeMap::new() });
        }
        let budget = wait_end.saturating_sub(start.elapsed());
        cx.shell.phase("down", waiting(budget, &still));
        let progress = cx.shell.wait("down", budget);
        progress.update(&plan::still_there(&still));
        let cluster = self.cluster;
        let mut waits: futures::stream::FuturesUnordered<_> = still
            .iter()
            .cloned()
            .map(|o| async move {
                let r = cluster.gone(&o).await;
                (o, r)
            })
            .collect();
        let all_gone = async {
            while let Some((o, r)) = waits.next().await {
                match r {
                    Ok(()) => {
                        still.retain(|s| *s != o);
                        progress.update(&plan::still_there(&still));
                    }
                    Err(e) => cx.shell.warn(format!("cannot wait for {o} to go: {e}")),
                }
            }
        };
        // At the end of the wait what is still there is read and reported as left.
        cancellable(cx.interrupt, async {
            let _ = tokio::time::timeout(budget, all_gone).await;
            Ok(())
        })
        .await?;
        let last = window.saturating_sub(start.elapsed()).saturating_sub(reserve / 4);
        let after = snapshot(self.cluster, cx.interrupt, last.max(Duration::from_secs(1))).await?;
        let mut why = BTreeMap::new();
        for n in &going.intersect(&after).namespaces {
            let t = CALL.min(window.saturating_sub(start.elapsed()).max(Duration::from_secs(1)));
            let read = async { Ok(self.cluster.namespace_left(n, t).await) };
            let said = match cancellable(cx.interrupt, read).await? {
                Ok(Some(w)) => w,
                Ok(None) => continue,
                Err(e) => format!("its status could not be read: {e}"),
            };
            why.insert(Object::Namespace(n.clone()).to_string(), said);
        }
        Ok(Settled { after, why })
    }
}

/// The wait's line: how long, how many, the first three.
fn waiting(budget: Duration, still: &[Object]) -> String {
    let first = still.iter().take(3).map(|o| o.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        "waiting up to {}s for {} deleted object(s) to go ({first}{}): namespaces terminate while their \
         content is removed",
        budget.as_secs(),
        still.len(),
        if still.len() > 3 { ", ..." } else { "" }
    )
}

impl Settled {
    /// A report line (`left: namespace x: created by eas up, still present ...`), with why the
    /// object is still there in place of the guess, when it is known.
    pub fn explain(&self, line: &str) -> String {
        let Some(rest) = line.strip_prefix("left: ") else { return line.to_string() };
        match self.why.iter().find(|(o, _)| rest.starts_with(&format!("{o}: "))) {
            Some((o, w)) => format!("left: {o}: created by eas up, {w}"),
            None => line.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A left namespace is explained by its deletion conditions when the last read found them;
    /// other lines, and objects without a known reason, stay as the report wrote them.
    #[test]
    fn a_namespace_still_there_is_explained_by_why_it_stays() {
        let why = [("namespace kserve".to_string(), "still Terminating: finalizers remain".to_string())];
        let settled = Settled { after: Snapshot::default(), why: why.into_iter().collect() };
        assert_eq!(
            settled.explain("left: namespace kserve: created by eas up, still present"),
            "left: namespace kserve: created by eas up, still Terminating: finalizers remain"
        );
        let other = "left: namespace kserve-extra: created by eas up, still present";
        assert_eq!(settled.explain(other), other, "a prefix of another name is not that name");
        assert_eq!(settled.explain("removed: namespace kserve"), "removed: namespace kserve");
    }

    /// The wait says how long it waits and for what, the first three named.
    #[test]
    fn the_wait_names_its_budget_and_the_first_three_objects() {
        let still: Vec<Object> = ["a", "b", "c", "d"].iter().map(|n| Object::Namespace(n.to_string())).collect();
        let line = waiting(Duration::from_secs(90), &still);
        assert!(
            line.starts_with(
                "waiting up to 90s for 4 deleted object(s) to go (namespace a, namespace b, namespace c, ...)"
            ),
            "{line}"
        );
        assert!(!waiting(Duration::from_secs(1), &still[..1]).contains("..."));
    }
}
