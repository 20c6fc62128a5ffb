//! Lock: one run per cluster. The plan half checks, in one window, the local lock, the cluster's
//! Lease, the install record the act will resume from and the last completed run this one is
//! compared with; each failure is a blocker of its own (held, stale, unreadable, or another
//! host's, each with its fix). The act half takes the local lock and the Lease, then re-reads the
//! record under the lock: from there on the record is this run's (an attempt until the install
//! phase begins).

use crate::error::Failure;
use crate::plan::PhaseId;
use crate::state::journal::State;
use crate::state::since::Completed;
use crate::state::{StateDir, lock};

use crate::act::reap;
use crate::cluster::{CALL, Cluster, lease};
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::runner::{Hold, Phase, Runner};
use crate::pipeline::settings::ATTEMPT;
use crate::state::run::now;

/// The cluster it locks is the one preflight reached (`cx.services.cluster()`).
pub struct Lock<'a> {
    pub sd: &'a StateDir,
    /// This host's engine, where a stale holder's containers are looked for (act half only).
    pub docker: Option<&'a bollard::Docker>,
}

/// What the lock's plan half read: the install record and the last completed run.
pub struct Records {
    pub latest: Option<State>,
    pub last: Option<Completed>,
    /// The state directory can take the run's writes ([`crate::state::room`]): when it cannot,
    /// a blocker says so and the trees' plan half makes its scratch tree elsewhere.
    pub writable: bool,
}

/// The lock held (the local lock file and the cluster's Lease are the runner's until unlock's
/// act, or this phase's clean-up, releases them): the dead run whose lock was taken over, and the
/// record as re-read under the lock.
pub struct Held {
    /// The run ids of the dead runs whose lock or Lease was taken over: their containers are
    /// swept again before this run's first container starts.
    pub dead: Vec<String>,
    pub prev: Option<State>,
    /// The last completed run, as the plan read it.
    pub last: Option<Completed>,
}

impl Phase for Lock<'_> {
    const ID: PhaseId = PhaseId::Lock;
    type Planned = Records;
    type Done = Held;

    async fn plan(&mut self, cx: &Cx<'_>, found: &mut Vec<Failure>) -> Result<Records, NoPlan> {
        found.extend(blockers(self.sd, cx.services.cluster()?, cx.args.break_lock).await);
        // Before any write: a read-only, unwritable or full state directory fails the real run's
        // first write (the work tree, the attempt's record), so it is a blocker naming the path.
        let (_, room) = crate::state::room::check(self.sd.dir(), crate::state::room::min_free(&cx.global.env));
        let writable = room.is_ok();
        found.extend(room.err().map(|e| Failure::step_next(PhaseId::Lock, &e, e.hint())));
        let latest = State::load(&self.sd.state_file()).map_err(|e| found.push(Failure::from(e))).ok().flatten();
        let last = Completed::load(self.sd.dir()).map_err(|e| found.push(Failure::from(e))).ok().flatten();
        Ok(Records { latest, last, writable })
    }

    fn note(&mut self, records: &mut Records, r: &mut Runner) -> Result<(), Failure> {
        // What earlier runs created (the prerequisites' "earlier install" check discounts it).
        *r.journal().ledger() = records.latest.as_ref().map(|p| p.ledger.clone()).unwrap_or_default();
        Ok(())
    }

    async fn act(&mut self, records: Records, cx: &Cx<'_>, r: &mut Runner) -> Result<Held, Failure> {
        let sd = self.sd;
        let break_lock = cx.args.break_lock;
        crate::state::journal::create_private_dir(sd.dir())
            .map_err(|e| crate::state::run::io_failure(PhaseId::Lock, sd.dir(), e))?;
        let dead = reap::dead_holder(&sd.lock_file(), break_lock);
        let local = lock::acquire(&sd.lock_file(), "eas up", &now(), break_lock).map_err(Failure::from)?;
        let mut dead: Vec<String> = dead.iter().map(lock::Holder::run_id).collect();
        // Then the cluster's Lease, named for this run: host, pid and run id. A stale holder's
        // containers on this engine are stopped and removed first.
        let identity = identity(&local.holder);
        let duration = lease::duration_from(cx.global.env.var(LEASE_SECS));
        let cluster = cx.services.cluster()?;
        let lease_dead = reap_stale_holder(cluster, self.docker, break_lock, cx.shell).await?;
        dead.extend(lease_dead.filter(|id| !dead.contains(id)));
        for id in &dead {
            if let Some(docker) = self.docker {
                reap::reap(docker, id, cx.shell).await?;
            }
        }
        let taken = cluster
            .take_lease(&identity, (break_lock, &holder_here), CALL, duration)
            .await
            .map_err(|e| Failure::step_next(PhaseId::Lock, e, "check the API server (`eas doctor`)"))?;
        let lease = match taken {
            lease::Taken::Held(held) => held,
            // Taken since the plan read it: the same blocker the plan would have listed.
            lease::Taken::Refused(found) => {
                return Err(lease_blocker(&found, break_lock)
                    .err()
                    .unwrap_or_else(|| Failure::step(PhaseId::Lock, "the cluster's Lease could not be taken")));
            }
        };
        // The Lease is eas's own object: recorded in the ledger, so `eas down` can remove one a
        // killed run left, and only that one.
        let mut journal = r.journal();
        *journal.ledger() = std::mem::take(journal.ledger()).with_own(own(&lease));
        // Held by the runner from here: a failure of this act or a later one releases both (this
        // phase's clean-up).
        r.hold(Hold { local, lease });
        let held = Held { dead, prev: None, last: records.last };
        // From here on the record is this run's: the previous one is re-read under the lock.
        let prev = State::load(&sd.state_file()).map_err(Failure::from)?;
        if let Some(p) = &prev {
            crate::pipeline::phases::keep_own(r, p.ledger.clone());
            if let Some(next) = crate::state::resume::next_for(p, cx.inv) {
                cx.shell
                    .note(format!("the previous run did not finish ({next}); resuming: the installer is idempotent"));
            }
        }
        // Until the install phase begins, this run is an attempt: its record goes beside the
        // state, never over the record of an earlier install (`state.json`), which the install
        // phase's start replaces. Its log, until the install's takes over with every line so far.
        let attempt = sd.dir().join(ATTEMPT);
        let opened = crate::state::journal::create_private_dir(&attempt)
            .and_then(|()| crate::pipeline::attempt::attempt_log(r, &attempt, cx.shell));
        opened.map_err(|e| crate::state::run::io_failure(PhaseId::Lock, &attempt, e))?;
        r.record_in(attempt.join(crate::state::journal::FILE));
        Ok(Held { prev, ..held })
    }

    /// A run that fails once this act ran releases the Lease and the lock file it took.
    fn cleanup(r: &mut Runner) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(r.release())
    }
}

/// The setting that shortens the Lease's duration (tests; see [`lease::duration_from`]).
pub const LEASE_SECS: &str = "EAS_LEASE_SECS";

/// The identity a run's Lease carries, written here and read back by [`run_id_of`] and
/// [`holder_here`] only: `host/pid/run-id` (the run id is the pid and its start time).
pub fn identity(h: &lock::Holder) -> String {
    format!("{}/{}/{}", h.host, h.pid, h.run_id())
}

/// The run id a Lease's holder names (its bastion containers carry it as their run label).
pub fn run_id_of(holder: &str) -> Option<&str> {
    holder.splitn(3, '/').nth(2).filter(|r| !r.is_empty())
}

/// Whether a holder ran on this host, and if so its pid and whether that process is alive (a
/// reused pid is another process: the run id carries the start time).
pub fn holder_here(holder: &str) -> Option<(u32, bool)> {
    let mut parts = holder.splitn(3, '/');
    let (host, pid, run) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok()), parts.next());
    if host != Some(lock::hostname().as_str()) {
        return None;
    }
    let pid = pid?;
    let start = lock::start_time(pid);
    let alive = start.is_some() && run.is_none_or(|r| r == format!("{pid}-{}", start.unwrap_or(0)));
    Some((pid, alive))
}

/// The Lease as the ledger records it: eas's own object, with its uid and holder (none when the
/// server gave no uid).
fn own(held: &lease::Held) -> Vec<crate::state::ledger::Own> {
    let (uid, holder) = held.written();
    uid.map(|uid| crate::state::ledger::Own {
        kind: "Lease".into(),
        namespace: lease::NAMESPACE.into(),
        name: lease::NAME.into(),
        uid: uid.to_string(),
        holder: holder.to_string(),
    })
    .into_iter()
    .collect()
}

/// The lock's blockers, for `eas up`'s plan half and `eas down` alike: the local lock, then the
/// cluster's Lease. One run holding both (the same run id) is one blocker, the local lock's.
pub async fn blockers(sd: &StateDir, cluster: &Cluster, break_lock: bool) -> Vec<Failure> {
    let mut found = Vec::new();
    let local = lock::inspect(&sd.lock_file()).ok().flatten();
    if let Err(f) = lock_blocker(sd, break_lock) {
        found.push(f);
    }
    let lease = match cluster.lease(CALL, &holder_here).await {
        Ok(l) => l,
        Err(e) => {
            found.push(Failure::step_next(PhaseId::Lock, e, "check the API server (`eas doctor`)"));
            return found;
        }
    };
    let local_run = match &local {
        Some(lock::Found::Live(h) | lock::Found::Stale(h) | lock::Found::OtherHost(h)) => Some(h.run_id()),
        _ => None,
    };
    let same_run = local_run.is_some() && lease.holder().and_then(run_id_of) == local_run.as_deref();
    if (!same_run || found.is_empty())
        && let Err(f) = lease_blocker(&lease, break_lock)
    {
        found.push(f);
    }
    found
}

/// With `--break-lock`, a stale Lease's holder: its containers on this host's engine (found by
/// the run id the Lease names) are stopped and removed before the Lease is taken over. Returns
/// that run id, for the later sweeps.
pub async fn reap_stale_holder(
    cluster: &Cluster,
    docker: Option<&bollard::Docker>,
    break_lock: bool,
    shell: &crate::output::Shell,
) -> Result<Option<String>, Failure> {
    if !break_lock {
        return Ok(None);
    }
    let found = cluster
        .lease(CALL, &holder_here)
        .await
        .map_err(|e| Failure::step_next(PhaseId::Lock, e, "check the API server (`eas doctor`)"))?;
    let lease::Found::Stale { holder, .. } = &found else { return Ok(None) };
    let Some(id) = run_id_of(holder) else { return Ok(None) };
    if let Some(docker) = docker {
        reap::reap(docker, id, shell).await?;
    }
    Ok(Some(id.to_string()))
}

/// The Lease's blocker, for the plan half: another run's (live, its renewals failing, or another
/// host's just expired), or a stale one without `--break-lock`.
pub fn lease_blocker(found: &lease::Found, break_lock: bool) -> Result<(), Failure> {
    let what = format!("the cluster's Lease {}/{}", lease::NAMESPACE, lease::NAME);
    let wait = "wait for that run to finish (`eas status` on its host), then run the command again";
    match found {
        lease::Found::Free => Ok(()),
        lease::Found::Live { holder, age_secs } => Err(Failure::step_next(
            PhaseId::Lock,
            format!("another eas run holds {what}: {holder} (renewed {age_secs} s ago)"),
            wait,
        )),
        lease::Found::Failing { holder, age_secs, pid } => Err(Failure::step_next(
            PhaseId::Lock,
            format!(
                "another eas run holds {what}: {holder}, alive on this host (pid {pid}); its renewals are failing \
                 (last renewed {age_secs} s ago)"
            ),
            format!("wait for that run to end, or stop it (`kill -INT {pid}`); its Lease is live while it runs"),
        )),
        lease::Found::Expired { holder, age_secs, wait_secs } => Err(Failure::step_next(
            PhaseId::Lock,
            format!(
                "{what} of {holder}, another host's run, is expired (renewed {age_secs} s ago); it is taken over \
                 only once expired for longer than its duration"
            ),
            format!("make sure that host's run has ended, then re-run with --break-lock in {wait_secs} s"),
        )),
        lease::Found::Stale { .. } if break_lock => Ok(()),
        lease::Found::Stale { holder, age_secs } => Err(Failure::step_next(
            PhaseId::Lock,
            format!("{what} is stale: {holder} has not renewed it for {age_secs} s (its run is gone)"),
            "re-run with --break-lock to take it over",
        )),
        lease::Found::Raced => Err(Failure::step_next(
            PhaseId::Lock,
            format!("another eas run took {what} just now"),
            "wait for that run to finish, then run the command again",
        )),
    }
}

/// The lock as this run would meet it: held, stale, unreadable or another host's is a blocker
/// (with `--break-lock` a stale, unreadable or other host's lock is one the act takes over).
pub fn lock_blocker(sd: &StateDir, break_lock: bool) -> Result<(), Failure> {
    let path = sd.lock_file();
    let found = match lock::inspect(&path) {
        Ok(f) => f,
        Err(e) => {
            let hint = e.hint();
            return Err(Failure::step_next(PhaseId::Lock, e, hint));
        }
    };
    let e = match found {
        None => return Ok(()),
        Some(lock::Found::Live(holder)) => lock::LockError::Held { path, holder },
        Some(_) if break_lock => return Ok(()),
        Some(lock::Found::Stale(h)) => lock::LockError::Stale { path, holder: h },
        Some(lock::Found::OtherHost(h)) => lock::LockError::OtherHost { path, holder: h },
        Some(lock::Found::Unreadable(msg)) => lock::LockError::Unreadable { path, msg },
    };
    let hint = e.hint();
    Err(Failure::step_next(PhaseId::Lock, e, hint))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn live_blocks_always_stale_only_without_break_lock() {
        let live = lease::Found::Live { holder: "other/9/x".into(), age_secs: 3 };
        let stale = lease::Found::Stale { holder: "other/9/x".into(), age_secs: 300 };
        let e = lease_blocker(&live, true).unwrap_err().to_string();
        assert!(e.contains("another eas run holds the cluster's Lease kube-system/eas-run-lock: other/9/x"), "{e}");
        assert!(lease_blocker(&stale, false).unwrap_err().to_string().contains("--break-lock"));
        assert!(lease_blocker(&stale, true).is_ok());
        assert!(lease_blocker(&lease::Found::Free, false).is_ok());
        // A live holder of this host whose renewals fail: live, never "its run is gone".
        let failing = lease::Found::Failing { holder: "here/9/9-1".into(), age_secs: 85, pid: 9 };
        let e = lease_blocker(&failing, true).unwrap_err().to_string();
        assert!(e.contains("alive on this host (pid 9); its renewals are failing") && !e.contains("gone"), "{e}");
        let expired = lease::Found::Expired { holder: "there/9/9-1".into(), age_secs: 90, wait_secs: 31 };
        let e = lease_blocker(&expired, true).unwrap_err();
        assert!(e.to_string().contains("only once expired for longer than its duration"), "{e}");
    }

    /// The identity this phase writes is the one it reads back: this process's is alive on this
    /// host, with its run id; the same pid with another start time is another (gone) process;
    /// another host's is not judged by process. A Lease held under it is live whatever its age.
    #[test]
    fn the_identity_written_is_read_back_and_this_hosts_holders_are_judged_by_process() {
        let me = std::process::id();
        let mine = identity(&lock::Holder::current("eas up", &now()));
        assert_eq!(run_id_of(&mine), Some(lock::this_run_id().as_str()));
        assert_eq!(holder_here(&mine), Some((me, true)));
        let reused = format!("{}/{me}/{me}-1", lock::hostname());
        assert_eq!(holder_here(&reused), Some((me, false)), "the pid runs another process");
        assert_eq!(holder_here(&format!("{}/4194303/x", lock::hostname())), Some((4194303, false)), "no such pid");
        assert_eq!(holder_here("another-host/1/1-1"), None);
        assert_eq!(run_id_of("h/1/"), None);
    }

    /// The Lease as the API server returns it (coordination.k8s.io/v1: holderIdentity,
    /// leaseDurationSeconds, acquireTime, renewTime as RFC 3339 micro-times), renewed `age_secs`
    /// ago by `holder`.
    pub(crate) fn lease_held(holder: &str, age_secs: i64) -> serde_json::Value {
        let at = (chrono::Utc::now() - chrono::Duration::seconds(age_secs)).format("%Y-%m-%dT%H:%M:%S%.6fZ");
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease::NAME, "namespace": lease::NAMESPACE, "uid": "0d6f9a52-5c2e-4f7b-9a53-3c1f2b7e8d41",
                         "resourceVersion": "2497311", "creationTimestamp": "2026-10-20T09:20:00Z",
                         "labels": {"io.eas.managed": "true"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60,
                     "acquireTime": at.to_string(), "renewTime": at.to_string()}
        })
    }

    pub(crate) const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/eas-run-lock";

    /// The lock's plan half against a cluster whose Lease is `answer` (none: absent): what it
    /// found, and what it asked the cluster.
    async fn planned(answer: Option<(u16, serde_json::Value)>, break_lock: bool) -> (Vec<Failure>, Vec<String>) {
        let fake = crate::cluster::fake::Fake::recorded("k3d-gpu-desktop");
        if let Some((code, body)) = answer {
            fake.answer("GET", LEASE_PATH, code, body);
        }
        let (_root, sd) = crate::pipeline::runner::tests::state_dir();
        let mut f = crate::pipeline::runner::tests::Fixture::on(&fake);
        f.args.break_lock = break_lock;
        let cx = f.cx();
        let mut found = Vec::new();
        let mut phase = Lock { sd: &sd, docker: None };
        let records = phase.plan(&cx, &mut found).await.unwrap();
        assert!(records.latest.is_none() && records.last.is_none(), "no record in a new state directory");
        (found, fake.asked())
    }

    /// The plan half reads the Lease, and only reads it (one GET: it writes nothing). Another
    /// host's run that renewed it 5 s ago holds the cluster: a blocker of the lock phase that
    /// names the holder, which `--break-lock` does not lift.
    #[tokio::test]
    async fn the_plan_half_reads_the_lease_and_another_live_run_blocks() {
        for break_lock in [false, true] {
            let (found, asked) = planned(Some((200, lease_held("other-host/4242/4242-17", 5))), break_lock).await;
            assert_eq!(asked, [format!("GET {LEASE_PATH}")]);
            let [f] = found.as_slice() else { panic!("one blocker: {found:?}") };
            let line = f.to_string();
            assert!(line.contains("another eas run holds the cluster's Lease kube-system/eas-run-lock"), "{line}");
            assert!(line.contains("other-host/4242/4242-17"), "{line}");
        }
    }

    /// No Lease (the API server's 404): nothing blocks. Another host's Lease unrenewed for
    /// longer than twice its duration is stale: a blocker without `--break-lock`, none with it.
    #[tokio::test]
    async fn an_absent_lease_is_free_and_a_stale_one_blocks_only_without_break_lock() {
        assert!(planned(None, false).await.0.is_empty());
        let stale = Some((200, lease_held("other-host/4242/4242-17", 600)));
        let (found, _) = planned(stale.clone(), false).await;
        assert!(found.len() == 1 && found[0].to_string().contains("is stale"), "{found:?}");
        assert!(planned(stale, true).await.0.is_empty());
    }

    /// A Lease the API server refuses to show (403) is a blocker saying so, with the way on.
    #[tokio::test]
    async fn a_lease_that_cannot_be_read_blocks_with_the_api_servers_words() {
        let denied =
            crate::cluster::fake::status(403, "Forbidden", "leases.coordination.k8s.io \"eas-run-lock\" is forbidden");
        let (found, _) = planned(Some((403, denied)), false).await;
        let [f] = found.as_slice() else { panic!("one blocker: {found:?}") };
        let lines = f.lines().join("\n");
        assert!(lines.contains("403 Forbidden"), "{lines}");
        assert!(lines.contains("eas doctor"), "{lines}");
    }

    #[test]
    fn a_lease_another_run_took_between_read_and_write_says_so() {
        let e = lease_blocker(&lease::Found::Raced, true).unwrap_err().to_string();
        assert!(e.contains("another eas run took the cluster's Lease kube-system/eas-run-lock just now"), "{e}");
    }
}
