//! `eas up`'s table for the runner ([`Up`]): its journal is the run's state, saved to the state
//! file once an act half names one; what the runner keeps of an `eas up` run besides its state
//! and plan ([`UpOwn`]); and the runner's `eas up` halves (the plan halves, side by side or one by
//! one, the blockers they find, the attempt's record and the run's end).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::Failure;
use crate::plan::{PhaseId, Plan, Resume, Timeouts};
use crate::runtime::Interrupt;
use crate::state::journal::{State, Status};

use super::{Phase, Runner, Table, Up, window};
use crate::pipeline::phase::{Cx, NoPlan, timed_out};
use crate::state::run::now;

/// What the runner keeps of an `eas up` run besides its state and plan.
#[derive(Default)]
pub struct UpOwn {
    /// The state file: written by act halves only (a dry run and a blocked run never write it).
    file: Option<PathBuf>,
    /// Where a real run's attempt is recorded when it ends before an act half wrote the state
    /// file (known once the cluster's identity is read; a dry run records nothing).
    attempt: Option<PathBuf>,
    /// The cluster's prerequisites as the plan checked them (`eas doctor` prints each check).
    prereq: Option<crate::prereq::Report>,
    /// The inputs of each lasting phase, hashed: journaled with its act half, so a later run can
    /// skip it when they match (`state::resume`).
    inputs: BTreeMap<PhaseId, String>,
    /// A dry run: no attempt is recorded.
    dry_run: bool,
    /// An earlier run installed with the same inputs (classify's act decides it): the phases that
    /// resume when unchanged do not run again ([`Phase::should_run`]).
    installed_earlier: bool,
}

impl Table for Up {
    type Id = PhaseId;
    type Cx<'a> = Cx<'a>;
    type Plan = Plan;
    type Journal = State;
    type Own = UpOwn;

    fn says(id: PhaseId) -> String {
        id.spec().says.into()
    }

    fn timed_out(id: PhaseId, limit: Duration) -> Failure {
        timed_out(id, limit)
    }

    /// The resume rule, a column of the table: a phase that resumes when unchanged does not run
    /// again once an earlier run installed with the same inputs ([`Runner::installed_earlier`]);
    /// the others always run.
    fn should_run(id: PhaseId, r: &Runner<Up>) -> bool {
        id.spec().resume == Resume::Always || !r.installed_earlier()
    }

    /// Begun, with the inputs hash the plan computed for it, and saved (its line was printed by
    /// its plan half).
    fn begin(r: &mut Runner<Up>, id: PhaseId, _says: &str, _cx: &Cx<'_>) -> Result<(), Failure> {
        let inputs = r.own.inputs.get(&id).cloned();
        r.state.begin(id, inputs, &now());
        r.save()
    }

    /// A holder that lost the cluster Lease runs no installer: the phase fails, saying why
    /// (record and verify, which only read, still run, so the record is kept).
    fn refuses(r: &Runner<Up>, id: PhaseId, cx: &Cx<'_>) -> Option<Failure> {
        let installs = matches!(id, PhaseId::Prepare | PhaseId::Install);
        let lost = r.fence.as_ref().and_then(crate::cluster::lease::Fence::lost).filter(|_| installs)?;
        let next = format!("once no other run holds the cluster, {} resumes", cx.inv.resume());
        Some(Failure::step_next(id, lost, next))
    }

    fn end<V>(r: &mut Runner<Up>, id: PhaseId, result: Result<V, Failure>, _late: bool) -> Result<V, Failure> {
        r.acted(id, result)
    }

    fn ends(r: &mut Runner<Up>, f: Failure) -> Failure {
        match f {
            Failure::Interrupted => r.interrupted(),
            f => r.ended(f),
        }
    }
}

impl Runner<Up> {
    pub fn new(state: State, plan: Plan, timeouts: Timeouts<PhaseId>, interrupt: Interrupt) -> Runner<Up> {
        Runner::with(state, plan, timeouts, interrupt, UpOwn::default())
    }

    /// Where a real run's record is written from here on (an act half: a dry run and a blocked
    /// run write none): the attempt's record once the lock is held, `state.json` once the run
    /// is an install.
    pub fn record_in(&mut self, file: PathBuf) {
        self.own.file = Some(file);
    }

    /// A dry run records no attempt.
    pub fn dry_run(&mut self, dry_run: bool) {
        self.own.dry_run = dry_run;
    }

    /// Preflight's plan half: where a real run's attempt is recorded, once the cluster's
    /// identity is known (a dry run records none).
    pub fn attempt_in(&mut self, dir: PathBuf) {
        if !self.own.dry_run {
            self.own.attempt = Some(dir);
        }
    }

    /// Where this real run's attempt is recorded, if it is.
    pub fn attempt(&self) -> Option<&std::path::Path> {
        self.own.attempt.as_deref()
    }

    /// Config's plan half: the cluster's prerequisites as checked (`eas doctor` prints each).
    pub fn checked(&mut self, report: crate::prereq::Report) {
        self.own.prereq = Some(report);
    }

    pub fn prereq(&self) -> Option<&crate::prereq::Report> {
        self.own.prereq.as_ref()
    }

    /// Classify's act: the inputs of each lasting phase, hashed (journaled with its act half).
    pub fn hashed(&mut self, inputs: BTreeMap<PhaseId, String>) {
        self.own.inputs = inputs;
    }

    pub fn inputs(&self) -> &BTreeMap<PhaseId, String> {
        &self.own.inputs
    }

    /// Whether an earlier run installed with the same inputs (classify's act decides it).
    pub fn installed_earlier(&self) -> bool {
        self.own.installed_earlier
    }

    /// Classify's act: whether the phases that resume when unchanged are skipped.
    pub fn resume_installed(&mut self, installed: bool) {
        self.own.installed_earlier = installed;
    }

    /// A run that installed and verified: exit 0, recorded.
    pub fn completed(&mut self) -> Result<(), Failure> {
        self.state.exit_code = Some(crate::plan::EXIT_SUCCESS);
        self.state.finished = Some(now());
        self.save()
    }

    /// A phase's plan half: its line, one window of its plan timeout under the run's
    /// cancellation, its journal entry (in memory), then what it settled noted in the plan, or
    /// each of its failed checks listed as a blocker. `None`: the phase has no answer (a
    /// blocker says why). A phase that [`Phase::ENDS_PLAN`] ends the plan with its failure.
    pub async fn plan<P: Phase<Up>>(&mut self, p: &mut P, cx: &Cx<'_>) -> Result<Option<P::Planned>, Failure> {
        cx.shell.phase(P::ID.name(), p.says(cx));
        self.state.begin(P::ID, None, &now());
        let limit = self.timeouts.plan(P::ID);
        let mut found = Vec::new();
        let planned = async { Ok(p.plan(cx, &mut found).await) };
        let r = window(limit, false, &self.interrupt, planned, || timed_out(P::ID, limit)).await;
        let r = r.unwrap_or_else(|f| Err(NoPlan::from(f)));
        self.journal_plan(P::ID, &r, &found);
        self.decide(p, r, found)
    }

    /// Three plan halves side by side (the bastion image's plan, the facts, the trees), each in
    /// its own window, all under the run's cancellation; settled in the order given.
    pub async fn plan3<A: Phase<Up>, B: Phase<Up>, C: Phase<Up>>(
        &mut self,
        (a, b, c): (&mut A, &mut B, &mut C),
        cx: &Cx<'_>,
        waiting: &str,
    ) -> Result<(Option<A::Planned>, Option<B::Planned>, Option<C::Planned>), Failure> {
        for (id, says) in [(A::ID, a.says(cx)), (B::ID, b.says(cx)), (C::ID, c.says(cx))] {
            cx.shell.phase(id.name(), says);
            self.state.begin(id, None, &now());
        }
        let limit = |id: PhaseId| self.timeouts.plan(id);
        let (la, lb, lc) = (limit(A::ID), limit(B::ID), limit(C::ID));
        let (mut fa, mut fb, mut fc) = (Vec::new(), Vec::new(), Vec::new());
        let spinner = cx.shell.spinner(waiting);
        let joined = tokio::select! {
            j = async {
                tokio::join!(
                    tokio::time::timeout(la, a.plan(cx, &mut fa)),
                    tokio::time::timeout(lb, b.plan(cx, &mut fb)),
                    tokio::time::timeout(lc, c.plan(cx, &mut fc)),
                )
            } => Some(j),
            _ = self.interrupt.graceful.cancelled() => None,
        };
        spinner.finish_and_clear();
        let Some((ra, rb, rc)) = joined else {
            for id in [A::ID, B::ID, C::ID] {
                self.planned::<()>(id, &Err(Failure::Interrupted));
            }
            return Err(Failure::Interrupted);
        };
        let ra = ra.unwrap_or_else(|_| Err(NoPlan::from(timed_out(A::ID, la))));
        let rb = rb.unwrap_or_else(|_| Err(NoPlan::from(timed_out(B::ID, lb))));
        let rc = rc.unwrap_or_else(|_| Err(NoPlan::from(timed_out(C::ID, lc))));
        // Every one journaled before any ends the plan: none is left running.
        self.journal_plan(A::ID, &ra, &fa);
        self.journal_plan(B::ID, &rb, &fb);
        self.journal_plan(C::ID, &rc, &fc);
        let a = self.decide(a, ra, fa)?;
        let b = self.decide(b, rb, fb)?;
        let c = self.decide(c, rc, fc)?;
        Ok((a, b, c))
    }

    /// The plan half's journal entry: done, failed (a check failed, with the first one's cause)
    /// or interrupted.
    fn journal_plan<T>(&mut self, id: PhaseId, r: &Result<T, NoPlan>, found: &[Failure]) {
        let failed = match r {
            Ok(_) | Err(NoPlan::Upstream) => found.first(),
            Err(NoPlan::Blocked(fs)) => fs.first().or(found.first()),
        };
        let (status, msg) = match failed {
            None => (Status::Done, None),
            Some(Failure::Interrupted) => (Status::Interrupted, None),
            Some(f) => (Status::Failed, Some(f.to_string())),
        };
        self.state.finish(id, status, msg, &now());
    }

    fn decide<P: Phase<Up>>(
        &mut self,
        p: &mut P,
        r: Result<P::Planned, NoPlan>,
        found: Vec<Failure>,
    ) -> Result<Option<P::Planned>, Failure> {
        for f in found {
            self.block(P::ID, f)?;
        }
        match r {
            Ok(mut v) => {
                p.note(&mut v, self)?;
                Ok(Some(v))
            }
            Err(NoPlan::Blocked(fs)) => {
                if P::ENDS_PLAN || fs.iter().any(|f| matches!(f, Failure::Interrupted)) {
                    return Err(fs.into_iter().next().unwrap_or(Failure::Interrupted));
                }
                for f in fs {
                    self.block(P::ID, f)?;
                }
                p.unplanned(self);
                Ok(None)
            }
            Err(NoPlan::Upstream) => {
                p.unplanned(self);
                Ok(None)
            }
        }
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
        let r = window(limit, false, &self.interrupt, f, || timed_out(id, limit)).await;
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

    /// A real run that ends before its acts wrote the state file: its journal goes to the
    /// attempt's record (`<state>/attempt/state.json`), never over an earlier install's.
    pub fn end_attempt(&mut self, f: Failure) -> Failure {
        if self.own.file.is_none()
            && let Some(dir) = self.own.attempt.clone()
        {
            if let Err(e) = crate::state::journal::create_private_dir(&dir) {
                return Failure::step(PhaseId::Record, format!("{}: {e}", dir.display()));
            }
            self.own.file = Some(dir.join(crate::state::journal::FILE));
        }
        self.ended(f)
    }

    /// A check that failed in `phase`'s plan half: a blocker per line of its failure. An
    /// interruption is not a blocker: it ends the run.
    pub fn block(&mut self, phase: PhaseId, f: Failure) -> Result<(), Failure> {
        if matches!(f, Failure::Interrupted) {
            return Err(Failure::Interrupted);
        }
        self.plan.add_blockers(crate::plan::Met::InPhase, f.blockers(phase));
        Ok(())
    }

    pub fn blocked(&self) -> bool {
        !self.plan.blockers().is_empty()
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
        match &self.own.file {
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
