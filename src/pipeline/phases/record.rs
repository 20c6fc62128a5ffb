//! Record: what the install created, read from the cluster right after it (whatever its
//! outcome), so `eas down` knows what is eas's before verify's long wait begins. Its only half is
//! the act: the ledger's `before` was read ahead of prepare (prepare's `before`).

use std::time::Duration;

use crate::error::Failure;
use crate::plan::PhaseId;
use crate::state::ledger::Snapshot;

use crate::cluster::CALL;
use crate::pipeline::phase::Cx;
use crate::pipeline::runner::{Phase, Runner};
use crate::state::run::now;

/// How the ledger's `after` read ended.
pub enum After {
    Recorded,
    Unreadable(String),
    /// A SIGINT/SIGTERM stopped the read: the record stays pending, marked incomplete.
    Interrupted,
}

/// It reads the cluster preflight reached (`cx.services.cluster()`).
pub struct Record {
    /// How long the snapshot is retried (`--ledger-timeout`).
    pub deadline: Duration,
}

impl Phase for Record {
    const ID: PhaseId = PhaseId::Record;
    type Planned = ();
    type Done = Option<Snapshot>;

    /// The cluster read after the install, retried within the deadline; a resumed run whose
    /// install was done earlier has nothing left to read.
    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner) -> Result<Option<Snapshot>, Failure> {
        if r.journaled().ledger.pending.is_none() {
            return Ok(None);
        }
        cx.shell.phase("record", self.says(cx));
        let after = cx.services.cluster()?.snapshot_within(CALL, self.deadline).await.map_err(|e| {
            cx.shell.warn(format!("cannot read the cluster to record what the install created: {e}"));
            Failure::step(PhaseId::Record, e)
        })?;
        Ok(Some(after))
    }
}

/// The record phase: its act in one window of its effective timeout. Past that window, or when
/// the cluster cannot be read, the record is marked incomplete and the phase failed, naming it. A
/// first SIGINT/SIGTERM (one that ended the install, or one during the read) stops it at once:
/// the record stays pending, marked incomplete, so `eas down` removes nothing until the next
/// `eas up` completes it.
pub async fn record(phase: Record, cx: &Cx<'_>, r: &mut Runner) -> Result<After, Failure> {
    let interrupted = "interrupted (Ctrl-C or SIGTERM) before the cluster was read after the install";
    let end = if r.journaled().ledger.pending.is_some() && r.interrupt().graceful.is_cancelled() {
        r.journal().ledger_with(|l| l.fail(interrupted));
        After::Interrupted
    } else {
        match r.act_phase(phase, (), cx).await {
            Ok(None) => return Ok(After::Recorded),
            Ok(Some(after)) => {
                r.journal().ledger_with(|l| l.complete(&after));
                After::Recorded
            }
            Err(Failure::Interrupted) => {
                r.journal().ledger_with(|l| l.fail(interrupted));
                After::Interrupted
            }
            Err(f) => {
                let why = f.to_string();
                r.journal().ledger_with(|l| l.fail(&why));
                After::Unreadable(why)
            }
        }
    };
    r.save()?;
    Ok(end)
}

/// The install's end with its record's: an install that failed or was interrupted, or whose
/// record could not be completed, ends the run here (recorded, with what to do next); verify
/// runs only after an install recorded in full.
pub fn installed(result: Result<(), Failure>, after: After, cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
    match (result, after) {
        (Ok(()), After::Recorded) => Ok(()),
        (Ok(()), After::Unreadable(e)) => {
            r.journal().ended(crate::plan::Kind::Failed.exit_code(), false, &now());
            r.save()?;
            Err(Failure::step_next(
                crate::plan::Step::Ledger,
                format!("the install itself succeeded, but the record of what it created is incomplete ({e})"),
                format!("{} completes the record (the install is not repeated)", cx.inv.resume()),
            ))
        }
        (result, _) => {
            let f = result.err().unwrap_or(Failure::Interrupted);
            r.journal().ended(f.exit_code(), matches!(f, Failure::Interrupted), &now());
            r.save()?;
            // One cause, one `next:`, which says whether `eas down` removes anything (not while
            // the record is pending, as after an interruption): a failure that names its own
            // next step (the installer's "fix the cause, then ...") carries the resume commands
            // in it; any other ending says them on a line of their own.
            Err(match (f, crate::state::resume::advice_for(r.journaled(), cx.inv)) {
                (Failure::Step { step, cause, next: Some(_) }, Some(advice)) => {
                    Failure::Step { step, cause, next: Some(format!("fix the cause, then {advice}")) }
                }
                (f, _) => {
                    if let Some(next) = crate::state::resume::next_for(r.journaled(), cx.inv) {
                        cx.shell.note(format!("next: {next}"));
                    }
                    f
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fake::Fake;
    use crate::pipeline::runner::tests::{Fixture, runner};
    use crate::plan::PhaseTimeouts;
    use crate::state::journal::Status;
    use crate::state::ledger::Ledger;

    /// An API server that refuses the snapshot's first list (403, as an RBAC denial reads).
    fn refusing() -> Fake {
        let fake = Fake::recorded("k3d-gpu-desktop");
        fake.refuse("GET", "/api/v1/namespaces", 403, "Forbidden", "namespaces is forbidden");
        fake
    }

    const PHASE: Record = Record { deadline: Duration::from_secs(1) };

    /// A resumed run whose install was recorded earlier has nothing pending: the phase asks the
    /// cluster nothing and the record stands complete.
    #[tokio::test]
    async fn with_nothing_pending_the_cluster_is_not_read() {
        let (mut r, fake) = (runner(PhaseTimeouts::default()), refusing());
        let f = Fixture::on(&fake);
        assert!(r.journaled().ledger.pending.is_none());
        let end = record(PHASE, &f.cx(), &mut r).await.unwrap();
        assert!(matches!(end, After::Recorded));
        assert_eq!(r.journaled().ledger.incomplete_reason(), None);
        assert_eq!(fake.asked(), Vec::<String>::new());
    }

    /// A SIGINT or SIGTERM before the read: no read, and the record stays pending, marked
    /// incomplete, so `eas down` removes nothing until a later `eas up` completes it.
    #[tokio::test]
    async fn an_interrupt_before_the_read_leaves_the_record_pending_and_incomplete() {
        let (mut r, fake) = (runner(PhaseTimeouts::default()), refusing());
        let f = Fixture::on(&fake);
        *r.journal().ledger() = Ledger::begin(None, &Snapshot::default());
        r.interrupt().graceful.cancel();
        let end = record(PHASE, &f.cx(), &mut r).await.unwrap();
        assert_eq!(fake.asked(), Vec::<String>::new());
        assert!(matches!(end, After::Interrupted));
        assert!(r.journaled().ledger.pending.is_some(), "the before is kept");
        let why = r.journaled().ledger.incomplete_reason().unwrap_or_default();
        assert!(why.contains("interrupted (Ctrl-C or SIGTERM) before the cluster was read"), "{why}");
    }

    /// A cluster that cannot be read within the deadline fails the phase, and the record is
    /// marked incomplete with the same reason the run prints.
    #[tokio::test]
    async fn an_unreadable_cluster_fails_the_phase_and_marks_the_record_incomplete() {
        let (mut r, fake) = (runner(PhaseTimeouts::default()), refusing());
        let f = Fixture::on(&fake);
        *r.journal().ledger() = Ledger::begin(None, &Snapshot::default());
        let end = record(PHASE, &f.cx(), &mut r).await.unwrap();
        let After::Unreadable(why) = end else { panic!("the read cannot succeed") };
        assert!(why.contains("list namespaces: 403 Forbidden: namespaces is forbidden"), "{why}");
        assert_eq!(r.journaled().ledger.incomplete.as_deref(), Some(why.as_str()));
        assert!(r.journaled().ledger.pending.is_some(), "the before is kept");
        assert_eq!(r.journaled().entry(PhaseId::Record).status, Status::Failed);
    }
}
