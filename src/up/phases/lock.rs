//! Lock: one run per cluster. The plan half checks, in one window, the local lock, the cluster's
//! Lease, the install record the act will resume from and the last completed run this one is
//! compared with; each failure is a blocker of its own (held, stale, unreadable, or another
//! host's, each with its fix). The act half takes the local lock and the Lease, then re-reads the
//! record under the lock: from there on the record is this run's (an attempt until the install
//! phase begins).

use crate::error::Failure;
use crate::pipeline::PhaseId;
use crate::state::journal::State;
use crate::state::since::Completed;
use crate::state::{StateDir, lock};

use super::super::phase::{Cx, NoPlan, Phase};
use super::super::runner::Runner;
use super::super::{ATTEMPT, CALL, crash, now};
use crate::cluster::lease;

pub struct Lock<'a> {
    pub sd: &'a StateDir,
    pub client: &'a kube::Client,
}

/// What the lock's plan half read: the install record and the last completed run.
pub struct Records {
    pub latest: Option<State>,
    pub last: Option<Completed>,
}

/// The lock held: the local lock file and the cluster's Lease (released after the acts,
/// whatever their outcome), the dead run whose lock was taken over, and the record as re-read
/// under the lock.
pub struct Held {
    pub local: lock::LockGuard,
    pub lease: lease::Held,
    pub dead: Option<lock::Holder>,
    pub prev: Option<State>,
    /// The last completed run, as the plan read it.
    pub last: Option<Completed>,
}

impl Phase for Lock<'_> {
    const ID: PhaseId = PhaseId::Lock;
    type Planned = Records;
    type Done = Held;

    fn says(&self, _cx: &Cx<'_>) -> String {
        "checking that no other run holds this cluster".into()
    }

    async fn plan(&mut self, cx: &Cx<'_>, found: &mut Vec<Failure>) -> Result<Records, NoPlan> {
        let break_lock = cx.args.break_lock;
        if let Err(f) = lock_blocker(self.sd, break_lock) {
            found.push(f);
        }
        let lease = match lease::read(self.client, CALL).await {
            Ok(found) => lease_blocker(&found, break_lock),
            Err(e) => Err(Failure::step_next("lock", e, "check the API server (`eas doctor`)")),
        };
        if let Err(f) = lease {
            found.push(f);
        }
        let latest = State::load(&self.sd.state_file()).map_err(|e| found.push(Failure::from(e))).ok().flatten();
        let last = Completed::load(self.sd.dir()).map_err(|e| found.push(Failure::from(e))).ok().flatten();
        Ok(Records { latest, last })
    }

    fn note(&mut self, records: &mut Records, r: &mut Runner) -> Result<(), Failure> {
        // What earlier runs created (the prerequisites' "earlier install" check discounts it).
        r.state.ledger = records.latest.as_ref().map(|p| p.ledger.clone()).unwrap_or_default();
        Ok(())
    }

    async fn act(self, records: Records, cx: &Cx<'_>, r: &mut Runner) -> Result<Held, Failure> {
        let sd = self.sd;
        let break_lock = cx.args.break_lock;
        crate::state::journal::create_private_dir(sd.dir()).map_err(|e| crate::up::io_failure("lock", sd.dir(), e))?;
        let dead = crash::dead_holder(&sd.lock_file(), break_lock);
        let local = lock::acquire(&sd.lock_file(), "eas up", &now(), break_lock).map_err(Failure::from)?;
        // Then the cluster's Lease, named for this run: host, pid and run id.
        let me = &local.holder;
        let identity = format!("{}/{}/{}", me.host, me.pid, me.run_id());
        let taken = lease::acquire(self.client, &identity, break_lock, CALL)
            .await
            .map_err(|e| Failure::step_next("lock", e, "check the API server (`eas doctor`)"))?;
        let lease = match taken {
            lease::Taken::Held(held) => held,
            // Taken since the plan read it: the same blocker the plan would have listed.
            lease::Taken::Refused(found) => {
                return Err(lease_blocker(&found, break_lock)
                    .err()
                    .unwrap_or_else(|| Failure::step("lock", "the cluster's Lease could not be taken")));
            }
        };
        // The Lease is eas's own object: recorded in the ledger, so `eas down` can remove one a
        // killed run left, and only that one.
        r.state.ledger = std::mem::take(&mut r.state.ledger).with_own(lease.own());
        let held = Held { local, lease, dead, prev: None, last: records.last };
        // From here on the record is this run's: the previous one is re-read under the lock.
        let prev = match State::load(&sd.state_file()) {
            Ok(p) => p,
            Err(e) => {
                held.lease.release(CALL).await;
                return Err(Failure::from(e));
            }
        };
        if let Some(p) = &prev {
            super::keep_own(r, p.ledger.clone());
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
            .and_then(|()| super::super::attempt::attempt_log(r, &attempt, cx.shell));
        if let Err(e) = opened {
            held.lease.release(CALL).await;
            return Err(crate::up::io_failure("lock", &attempt, e));
        }
        r.file = Some(attempt.join(crate::state::journal::FILE));
        Ok(Held { prev, ..held })
    }
}

/// The Lease's blocker, for the plan half: a live one of another run, or a stale one without
/// `--break-lock`.
pub fn lease_blocker(found: &lease::Found, break_lock: bool) -> Result<(), Failure> {
    let what = format!("the cluster's Lease {}/{}", lease::NAMESPACE, lease::NAME);
    match found {
        lease::Found::Free => Ok(()),
        lease::Found::Live { holder, age_secs } => Err(Failure::step_next(
            "lock",
            format!("another eas run holds {what}: {holder} (renewed {age_secs} s ago)"),
            "wait for that run to finish (`eas status` on its host), then run the command again",
        )),
        lease::Found::Stale { .. } if break_lock => Ok(()),
        lease::Found::Stale { holder, age_secs } => Err(Failure::step_next(
            "lock",
            format!("{what} is stale: {holder} has not renewed it for {age_secs} s (its run is gone)"),
            "re-run with --break-lock to take it over",
        )),
        lease::Found::Raced => Err(Failure::step_next(
            "lock",
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
            return Err(Failure::step_next("lock", e, hint));
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
    Err(Failure::step_next("lock", e, hint))
}

#[cfg(test)]
mod tests {
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
    }

    #[test]
    fn a_lease_another_run_took_between_read_and_write_says_so() {
        let e = lease_blocker(&lease::Found::Raced, true).unwrap_err().to_string();
        assert!(e.contains("another eas run took the cluster's Lease kube-system/eas-run-lock just now"), "{e}");
    }
}
