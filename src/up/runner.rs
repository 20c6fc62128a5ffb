//! The one runner of `eas up`'s phases: it alone owns their timeouts (one window per half, the
//! effective value the plan prints), the run's cancellation, the journal (begin, finish, failed,
//! interrupted: no phase is left `running` once eas exits) and the blockers the plan halves find.
//!
//! Every plan half runs before any act half, in the dry run and the real run alike: a check that
//! fails in a plan half is a [`Blocker`], collected, and the halves after it still run where they
//! do not depend on it. Only when no blocker was found does an act half run.

use std::future::Future;
use std::path::PathBuf;

use crate::error::Failure;
use crate::pipeline::{PhaseId, PhaseTimeouts, Plan};
use crate::runtime::Interrupt;
use crate::state::journal::{State, Status};

use super::now;

pub struct Runner {
    pub state: State,
    pub plan: Plan,
    /// The state file: written by act halves only (a dry run and a blocked run never write it).
    pub file: Option<PathBuf>,
    pub timeouts: PhaseTimeouts,
    pub interrupt: Interrupt,
    /// Where a real run's attempt is recorded when it ends before an act half wrote the state
    /// file (known once the cluster's identity is read; a dry run records nothing).
    pub attempt: Option<PathBuf>,
    /// The cluster's prerequisites as the plan checked them (`eas doctor` prints each check).
    pub prereq: Option<crate::prereq::Report>,
}

impl Runner {
    pub fn new(state: State, plan: Plan, timeouts: PhaseTimeouts, interrupt: Interrupt) -> Runner {
        Runner { state, plan, file: None, timeouts, interrupt, attempt: None, prereq: None }
    }

    /// A plan half: one window of the phase's plan timeout, stopped by the run's cancellation,
    /// journaled in memory (a real run that ends here saves it as its attempt). Its failure is
    /// the caller's to turn into a blocker or to end the run with.
    pub async fn plan_half<T>(
        &mut self,
        id: PhaseId,
        f: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        let limit = self.timeouts.plan(id);
        self.state.begin(id, None, &now());
        let r = tokio::select! {
            r = tokio::time::timeout(limit, f) => r.unwrap_or_else(|_| Err(super::phase::timed_out(id, limit))),
            _ = self.interrupt.graceful.cancelled() => Err(Failure::Interrupted),
        };
        self.planned(id, &r);
        r
    }

    /// The journal entry of a plan half that ran outside [`Runner::plan_half`] (side by side).
    pub fn planned<T>(&mut self, id: PhaseId, r: &Result<T, Failure>) {
        let (status, msg) = match r {
            Ok(_) => (Status::Done, None),
            Err(Failure::Interrupted) => (Status::Interrupted, None),
            Err(f) => (Status::Failed, Some(f.to_string())),
        };
        self.state.finish(id, status, msg, &now());
    }

    /// Phases begun side by side, ended with [`Runner::planned`].
    pub fn begin_all(&mut self, ids: &[PhaseId]) {
        for id in ids {
            self.state.begin(*id, None, &now());
        }
    }

    /// A real run that ends before its acts wrote the state file: its journal goes to the
    /// attempt's record (`<state>/attempt/state.json`), never over an earlier install's.
    pub fn end_attempt(&mut self, f: Failure) -> Failure {
        if self.file.is_none()
            && let Some(dir) = self.attempt.clone()
        {
            if let Err(e) = crate::state::journal::create_private_dir(&dir) {
                return Failure::step("record", format!("{}: {e}", dir.display()));
            }
            self.file = Some(dir.join(crate::state::journal::FILE));
        }
        self.ended(f)
    }

    /// Plan halves that run side by side, each under its own window: only the cancellation here.
    pub async fn cancellable<T>(&self, f: impl Future<Output = T>) -> Result<T, Failure> {
        tokio::select! {
            r = f => Ok(r),
            _ = self.interrupt.graceful.cancelled() => Err(Failure::Interrupted),
        }
    }

    /// A check that failed in `phase`'s plan half: a blocker per line of its failure. An
    /// interruption is not a blocker: it ends the run.
    pub fn block(&mut self, phase: PhaseId, f: Failure) -> Result<(), Failure> {
        if matches!(f, Failure::Interrupted) {
            return Err(Failure::Interrupted);
        }
        self.plan.blockers.extend(crate::pipeline::Blocker::from_failure(phase, &f));
        Ok(())
    }

    /// A plan half's result: the value, or `None` with its failure listed as blockers.
    pub fn or_block<T>(&mut self, phase: PhaseId, r: Result<T, Failure>) -> Result<Option<T>, Failure> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(f) => self.block(phase, f).map(|()| None),
        }
    }

    pub fn blocked(&self) -> bool {
        !self.plan.blockers.is_empty()
    }

    /// An act half: begun and saved, run in one window of the phase's effective timeout under the
    /// run's cancellation, then recorded as done, failed or interrupted, and saved again.
    pub async fn act<T>(
        &mut self,
        id: PhaseId,
        inputs: Option<String>,
        f: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        self.state.begin(id, inputs, &now());
        self.save()?;
        let limit = self.timeouts.get(id);
        let r = tokio::select! {
            r = tokio::time::timeout(limit, f) => r.unwrap_or_else(|_| Err(super::phase::timed_out(id, limit))),
            _ = self.interrupt.graceful.cancelled() => Err(Failure::Interrupted),
        };
        self.acted(id, r)
    }

    /// An act half that stops itself on the run's token and under `limit` (the installer, the
    /// bastion build, verify: they remove their containers and say what they waited for before
    /// they return): the runner journals it and holds a backstop window of `limit + grace`.
    pub async fn act_self<T>(
        &mut self,
        id: PhaseId,
        inputs: Option<String>,
        grace: std::time::Duration,
        f: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        self.state.begin(id, inputs, &now());
        self.save()?;
        let limit = self.timeouts.get(id);
        let r =
            tokio::time::timeout(limit + grace, f).await.unwrap_or_else(|_| Err(super::phase::timed_out(id, limit)));
        self.acted(id, r)
    }

    /// An act half's end in the journal: done, interrupted or failed, and saved.
    fn acted<T>(&mut self, id: PhaseId, r: Result<T, Failure>) -> Result<T, Failure> {
        match r {
            Ok(v) => {
                self.state.finish(id, Status::Done, None, &now());
                self.save()?;
                Ok(v)
            }
            Err(Failure::Interrupted) => Err(self.interrupted()),
            Err(f) => Err(self.failed(id, f)),
        }
    }

    pub fn save(&self) -> Result<(), Failure> {
        match &self.file {
            Some(f) => self.state.save(f).map_err(Failure::from),
            None => Ok(()),
        }
    }

    /// A phase that failed: recorded, saved, and returned.
    pub fn failed(&mut self, p: PhaseId, f: Failure) -> Failure {
        self.state.finish(p, Status::Failed, Some(f.to_string()), &now());
        self.ended(f)
    }

    /// The run's end and exit code recorded, so `eas status` says how it ended.
    pub fn ended(&mut self, f: Failure) -> Failure {
        if matches!(f, Failure::Interrupted) {
            self.state.interrupt(&now());
        }
        if self.state.exit_code.is_none() {
            self.state.exit_code = Some(f.exit_code());
            self.state.finished = Some(now());
        }
        match self.save() {
            Ok(()) => f,
            Err(e) => e,
        }
    }

    pub fn interrupted(&mut self) -> Failure {
        self.state.interrupt(&now());
        match self.save() {
            Ok(()) => Failure::Interrupted,
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Blocker;
    use std::time::Duration;

    fn runner(t: PhaseTimeouts) -> Runner {
        let plan = Plan::new("inference", "k3d-gpu", "main", &t);
        Runner::new(State::sample("2026-01-01T00:00:00Z"), plan, t, Interrupt::default())
    }

    #[tokio::test]
    async fn an_act_half_past_its_effective_timeout_is_recorded_failed_naming_the_phase() {
        let t = PhaseTimeouts::resolve(Some(0), None, &[]).unwrap();
        let mut r = runner(t);
        let e = r.act(PhaseId::Install, None, std::future::pending::<Result<(), Failure>>()).await.unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("phase install did not finish within its timeout of 0 s"), "{e}");
        assert_eq!(r.state.entry(PhaseId::Install).status, Status::Failed);
        assert_eq!(r.state.exit_code, Some(1));
        assert_eq!(r.plan.phases.iter().find(|p| p.name == "install").unwrap().timeout_secs, 0);
    }

    #[tokio::test]
    async fn verify_past_its_timeout_is_a_verification_failure() {
        let mut r = runner(PhaseTimeouts::resolve(None, Some(0), &[]).unwrap());
        let e = r.act(PhaseId::Verify, None, std::future::pending::<Result<(), Failure>>()).await.unwrap_err();
        assert_eq!(e.exit_code(), 5);
    }

    #[tokio::test]
    async fn an_interrupted_act_leaves_no_phase_running() {
        let mut r = runner(PhaseTimeouts::default());
        r.interrupt.graceful.cancel();
        let e = r.act(PhaseId::Prepare, None, std::future::pending::<Result<(), Failure>>()).await.unwrap_err();
        assert_eq!(e.exit_code(), 130);
        assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Interrupted);
    }

    #[tokio::test]
    async fn a_failed_plan_half_is_a_blocker_and_the_next_half_still_runs() {
        let mut r = runner(PhaseTimeouts::default());
        let f = r.plan_half(PhaseId::Bastion, async { Err::<(), _>(Failure::bad_input("no digest", "pin it")) }).await;
        assert_eq!(r.or_block(PhaseId::Bastion, f).unwrap(), None);
        let ok = r.plan_half(PhaseId::Facts, async { Ok(7) }).await;
        assert_eq!(r.or_block(PhaseId::Facts, ok).unwrap(), Some(7));
        assert_eq!(r.plan.blockers, [Blocker::new(PhaseId::Bastion, "no digest", "pin it", 2)]);
        assert!(r.block(PhaseId::Facts, Failure::Interrupted).is_err(), "an interruption ends the run");
    }

    #[test]
    fn two_flags_for_one_phase_are_refused_and_the_plan_prints_the_effective_values() {
        let e = PhaseTimeouts::resolve(Some(600), None, &[(PhaseId::Install, 5)]).unwrap_err();
        assert!(e.contains("--install-timeout") && e.contains("--phase-timeout install=5"), "{e}");
        let t = PhaseTimeouts::resolve(Some(600), Some(60), &[(PhaseId::Prepare, 7)]).unwrap();
        let plan = Plan::new("inference", "k3d-gpu", "main", &t);
        let secs = |n: &str| plan.phases.iter().find(|p| p.name == n).unwrap().timeout_secs;
        assert_eq!((secs("install"), secs("verify"), secs("prepare")), (600, 60, 7));
        assert_eq!(secs("facts"), PhaseId::Facts.spec().timeout.as_secs());
        assert_eq!(t.get(PhaseId::Install), Duration::from_secs(600));
    }
}
