//! The one runner of `eas up`'s phases and `eas down`'s ([`Runner`] over a [`Table`]), with the
//! trait every phase implements ([`Phase`]; k0sctl's `phase/manager.go` holds its `Phase`
//! interface beside the manager in the same way). The runner alone owns the phases' timeouts
//! (one window per half, the effective value the plan prints, its deadline handed to the half
//! through [`deadline`]), the run's cancellation, the journal and the clean-ups; a table says
//! how its journal begins and ends a phase ([`Table::begin`], [`Table::end`]).
//!
//! `eas up`: every plan half runs before any act half, in the dry run and the real run alike: a
//! check that fails in a plan half is a [`Blocker`], collected, and the halves after it still run
//! where they do not depend on it. Only when no blocker was found does an act half run; the
//! journal records each phase's begin and end (no phase is left `running` once eas exits).
//! `eas down`: its phases have act halves only; the journal is its record, which says how a
//! `down` that was interrupted or outlived a window ended.

pub mod journal;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::Failure;
use crate::plan::{PhaseId, Plan, Resume, Row, Timeouts};
use crate::runtime::Interrupt;
use crate::state::journal::{State, Status};

use crate::pipeline::phase::{Cx, NoPlan, timed_out};
use crate::state::run::now;

/// How long past its effective timeout the runner waits for an act half that stops itself (it
/// removes its container, or prints what it waited for).
pub const GRACE: Duration = Duration::from_secs(30);

/// One window of a phase's half, the one place where a phase's time and the run's cancellation
/// are enforced (`eas up`'s phases and `eas down`'s): `f` within `limit`, ended by SIGINT/SIGTERM
/// with [`Failure::Interrupted`]. A half that stops itself (at its limit and on the run's token,
/// removing its container and saying what it waited for) gets a backstop [`GRACE`] later
/// instead; `late` is what either says when the window closes first.
pub async fn window<T>(
    limit: Duration,
    stops_itself: bool,
    interrupt: &Interrupt,
    f: impl Future<Output = Result<T, Failure>>,
    late: impl FnOnce() -> Failure,
) -> Result<T, Failure> {
    // The half reads its own deadline ([`deadline`]) to fit its inner waits inside the window.
    let f = DEADLINE.scope(tokio::time::Instant::now() + limit, f);
    if stops_itself {
        return tokio::time::timeout(limit.saturating_add(GRACE), f).await.unwrap_or_else(|_| Err(late()));
    }
    tokio::select! {
        r = tokio::time::timeout(limit, f) => r.unwrap_or_else(|_| Err(late())),
        _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
    }
}

tokio::task_local! {
    /// When the window the current half runs in closes.
    static DEADLINE: tokio::time::Instant;
}

/// The deadline of the window the calling half runs in (`None` outside one): how the runner
/// hands a phase its deadline, so a phase with several bounded reads (config's Hugging Face
/// reads) can give them one budget inside its window instead of overrunning it.
pub fn deadline() -> Option<tokio::time::Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// A phase table the runner runs: `eas up`'s ([`Up`]) or `eas down`'s
/// (`crate::pipeline::down::Down`). It names the rows, what every half reads, and what the
/// run journals, and says how its journal begins and ends an act half.
pub trait Table: Sized + 'static {
    /// A row of the table.
    type Id: Row;
    /// What every half of a run reads.
    type Cx<'a>;
    /// What the plan halves write (`eas up`'s plan).
    type Plan;
    /// What the run records as it goes (`eas up`: its state; `eas down`: the record it removes).
    type Journal;
    /// The runner's own book-keeping for this table.
    type Own;

    /// A phase's line on the terminal: its row's `says`.
    fn says(id: Self::Id) -> String;

    /// What a phase whose window closed first fails with.
    fn timed_out(id: Self::Id, limit: Duration) -> Failure;

    /// Whether a phase's act half runs ([`Phase::should_run`]'s default).
    fn should_run(_id: Self::Id, _r: &Runner<Self>) -> bool {
        true
    }

    /// An act half begins (`says` is its line): journaled (and, for a table that prints its
    /// line when it acts, printed). A failure ends the run before the half runs.
    fn begin<'c>(r: &mut Runner<Self>, id: Self::Id, says: &str, cx: &'c Self::Cx<'c>) -> Result<(), Failure>;

    /// Why an act half that began may not run after all (`eas up`: a lost Lease stops the
    /// installer's phases); its failure is the half's.
    fn refuses<'c>(_r: &Runner<Self>, _id: Self::Id, _cx: &'c Self::Cx<'c>) -> Option<Failure> {
        None
    }

    /// An act half's end, journaled: done, failed, interrupted or past its window (`late`).
    fn end<V>(r: &mut Runner<Self>, id: Self::Id, result: Result<V, Failure>, late: bool) -> Result<V, Failure>;

    /// A failed [`Phase::before`] or [`Phase::after`]: the run ends, journaled.
    fn ends(r: &mut Runner<Self>, f: Failure) -> Failure;
}

/// One phase of a run (k0sctl's `phase.Phase`): its row in the table names it and declares both
/// windows. The plan half reads and decides and writes nothing (not the cluster, the state file
/// nor the work tree); its answer is the act half's input, so what exists only in a real run is
/// a value the plan produced, never an `Option` unwrapped later. The phase itself neither times,
/// journals nor prints its line: the runner does.
///
/// Besides its two halves a phase may implement the hooks k0sctl's manager calls around `Run`
/// (k0sproject/k0sctl `phase/manager.go` at 6b4e813, `Manager.Run`): [`Phase::should_run`]
/// first, then [`Phase::before`], the act, and [`Phase::after`] only when the act succeeded;
/// when a later act fails, [`Phase::cleanup`] of every phase whose act ran.
pub trait Phase<T: Table = Up> {
    const ID: T::Id;
    /// A plan half that fails ends the plan, since nothing after it could be decided (the
    /// cluster's identity, its facts), instead of being one blocker among others.
    const ENDS_PLAN: bool = false;
    /// The act half stops itself at its limit and on the run's token (it removes its container
    /// and says what it waited for); the runner's window is a backstop, a grace period later.
    const STOPS_ITSELF: bool = false;
    /// What the plan half settles, consumed by the act half.
    type Planned;
    /// What the act half hands to the phases after it.
    type Done;

    /// The phase's line on the terminal: the phase table's `says` ([`Table::says`]), unless the
    /// phase adds what only the run knows.
    fn says<'c>(&self, _cx: &'c T::Cx<'c>) -> String {
        T::says(Self::ID)
    }

    /// Reads and decides. A failed check that leaves the answer usable goes in `found` (a
    /// blocker all the same); one without which there is no answer is the `Err`. A phase
    /// without a plan half (its act takes what the list hands it) keeps this default, which the
    /// list never calls.
    fn plan<'c>(
        &mut self,
        _cx: &'c T::Cx<'c>,
        _found: &mut Vec<Failure>,
    ) -> impl Future<Output = Result<Self::Planned, NoPlan>> {
        async { Err(NoPlan::Upstream) }
    }

    /// What the plan half settled, written into the plan and the run's journal (in memory).
    fn note(&mut self, _planned: &mut Self::Planned, _r: &mut Runner<T>) -> Result<(), Failure> {
        Ok(())
    }

    /// What the plan says when the plan half has no answer.
    fn unplanned(&self, _r: &mut Runner<T>) {}

    /// Whether the act half runs (k0sctl's `ShouldRun`). By default the table's rule (`eas up`:
    /// the resume rule, a column of its table, [`Up`]).
    fn should_run<'c>(&self, _cx: &'c T::Cx<'c>, r: &Runner<T>) -> bool {
        T::should_run(Self::ID, r)
    }

    /// Before the act half's window (k0sctl's `Before`); its failure ends the run (recorded).
    fn before<'c>(&mut self, _cx: &'c T::Cx<'c>, _r: &mut Runner<T>) -> impl Future<Output = Result<(), Failure>> {
        async { Ok(()) }
    }

    /// Acts on the plan: run only when no plan half of the run blocked.
    fn act<'c>(
        &mut self,
        planned: Self::Planned,
        cx: &'c T::Cx<'c>,
        r: &mut Runner<T>,
    ) -> impl Future<Output = Result<Self::Done, Failure>>;

    /// After an act half that succeeded (k0sctl's `After`); its failure ends the run (recorded).
    fn after<'c>(&mut self, _cx: &'c T::Cx<'c>, _r: &mut Runner<T>) -> Result<(), Failure> {
        Ok(())
    }

    /// When the run fails after this phase's act half ran (k0sctl's `CleanUp`): undoes what must
    /// not outlive the run (the lock phases release the cluster's Lease and the lock).
    fn cleanup(_r: &mut Runner<T>) -> Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(async {})
    }
}

/// The runner of one run of a table's phases.
pub struct Runner<T: Table = Up> {
    /// The run's record (`eas up`'s phases write their part through [`Runner::journal`]).
    state: T::Journal,
    /// The plan a dry run prints and a real run keeps.
    plan: T::Plan,
    timeouts: Timeouts<T::Id>,
    interrupt: Interrupt,
    /// The cluster Lease's fence, once the lock phase holds it: a lost Lease stops the installer
    /// (and `eas down`'s teardown).
    fence: Option<crate::cluster::lease::Fence>,
    /// The lock file and the cluster's Lease, from the lock phase's act until unlock's (or, when
    /// the run fails, the lock phase's clean-up).
    held: Option<Hold>,
    /// The clean-up of every phase whose act half ran, in the order they ran.
    cleanups: Vec<CleanUp<T>>,
    own: T::Own,
}

/// What this run holds on the cluster: the local lock file and the cluster's Lease.
pub struct Hold {
    pub local: crate::state::lock::LockGuard,
    pub lease: crate::cluster::lease::Held,
}

/// A phase's [`Phase::cleanup`], kept by the runner once its act ran.
type CleanUp<T> = for<'r> fn(&'r mut Runner<T>) -> Pin<Box<dyn Future<Output = ()> + 'r>>;

impl<T: Table> Runner<T> {
    /// A runner with the table's journal and plan, its effective timeouts and the run's token.
    pub fn with(
        state: T::Journal,
        plan: T::Plan,
        timeouts: Timeouts<T::Id>,
        interrupt: Interrupt,
        own: T::Own,
    ) -> Self {
        Runner { state, plan, timeouts, interrupt, fence: None, held: None, cleanups: Vec::new(), own }
    }

    /// The act half's effective timeout of `id` (what the preview prints; a phase budgets
    /// against its window's [`deadline`], never this).
    pub fn limit(&self, id: T::Id) -> Duration {
        self.timeouts.get(id)
    }

    /// The run's cancellation (SIGINT/SIGTERM).
    pub fn interrupt(&self) -> &Interrupt {
        &self.interrupt
    }

    /// The cluster Lease's fence, while the lock phase holds it.
    pub fn fence(&self) -> Option<&crate::cluster::lease::Fence> {
        self.fence.as_ref()
    }

    /// The lock phase took the lock file and the cluster's Lease: held until released.
    pub fn hold(&mut self, hold: Hold) {
        self.fence = Some(hold.lease.fence());
        self.held = Some(hold);
    }

    /// Releases the cluster's Lease, then the lock file (unlock's act; the lock phase's
    /// clean-up). One left by a killed run goes stale within its duration.
    pub async fn release(&mut self) {
        if let Some(Hold { local, lease }) = self.held.take() {
            lease.release(crate::cluster::CALL).await;
            drop(local);
        }
    }

    /// The end of the act list: when it failed, each phase whose act ran cleans up, in the order
    /// they ran (k0sctl's manager, `phase/manager.go` at 6b4e813).
    pub async fn finish<V>(&mut self, result: Result<V, Failure>) -> Result<V, Failure> {
        if result.is_err() {
            for cleanup in std::mem::take(&mut self.cleanups) {
                cleanup(self).await;
            }
        }
        result
    }

    /// A phase's act half, with its hooks: skipped (`None`) when [`Phase::should_run`] says so;
    /// else [`Phase::before`], then the act begun ([`Table::begin`]), run in one window of its
    /// effective timeout under the run's cancellation (a phase that stops itself: a backstop
    /// window [`GRACE`] later), its end journaled ([`Table::end`]); then, when it succeeded,
    /// [`Phase::after`].
    pub async fn act<'c, P: Phase<T>>(
        &mut self,
        mut p: P,
        planned: P::Planned,
        cx: &'c T::Cx<'c>,
    ) -> Result<Option<P::Done>, Failure> {
        if !p.should_run(cx, self) {
            return Ok(None);
        }
        if let Err(f) = p.before(cx, self).await {
            return Err(T::ends(self, f));
        }
        let says = p.says(cx);
        T::begin(self, P::ID, &says, cx)?;
        self.cleanups.push(P::cleanup);
        if let Some(refused) = T::refuses(self, P::ID, cx) {
            return T::end(self, P::ID, Err(refused), false);
        }
        let limit = self.timeouts.get(P::ID);
        let interrupt = self.interrupt.clone();
        let late = std::cell::Cell::new(false);
        let acting = p.act(planned, cx, self);
        let r = window(limit, P::STOPS_ITSELF, &interrupt, acting, || {
            late.set(true);
            T::timed_out(P::ID, limit)
        })
        .await;
        let done = T::end(self, P::ID, r, late.get())?;
        p.after(cx, self).map_err(|f| T::ends(self, f))?;
        Ok(Some(done))
    }

    /// The act half of a phase that always runs (its [`Phase::should_run`] is the default and
    /// its row resumes `Always`).
    pub async fn act_phase<'c, P: Phase<T>>(
        &mut self,
        p: P,
        planned: P::Planned,
        cx: &'c T::Cx<'c>,
    ) -> Result<P::Done, Failure> {
        let done = self.act(p, planned, cx).await?;
        done.ok_or_else(|| Failure::step(P::ID, "the phase was skipped, yet a later one needs what it hands on"))
    }
}

/// A table whose phases own the run's journal whole (`eas down`'s: the record it removes, which
/// its lock phase loads and its record phase writes), so the runner opens it to them; `eas up`'s
/// phases write theirs only through the narrow handle of [`journal`].
pub trait OpenJournal: Table {}

impl<T: OpenJournal> Runner<T> {
    /// The run's journal, to read.
    pub fn record(&self) -> &T::Journal {
        &self.state
    }

    /// The run's journal, to write.
    pub fn record_mut(&mut self) -> &mut T::Journal {
        &mut self.state
    }
}

/// `eas up`'s table ([`crate::plan::PHASES`]): its journal is the run's state, saved to the
/// state file once an act half names one; a phase that resumes when unchanged does not run again
/// once an earlier run installed with the same inputs.
pub struct Up;

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
        let next = format!("run `{}` again once no other run holds the cluster: it resumes", cx.inv.up());
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
        self.settle(p, r, found)
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

    fn settle<P: Phase<Up>>(
        &mut self,
        p: &mut P,
        r: Result<P::Planned, NoPlan>,
        found: Vec<Failure>,
    ) -> Result<Option<P::Planned>, Failure> {
        self.journal_plan(P::ID, &r, &found);
        self.decide(p, r, found)
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
        self.plan.blockers.extend(f.blockers(phase));
        Ok(())
    }

    pub fn blocked(&self) -> bool {
        !self.plan.blockers.is_empty()
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::output::{ProgressMode, Shell, Terminal};
    use crate::pipeline::settings::UpSettings;
    use crate::plan::{Blocker, PhaseTimeouts};

    pub(crate) fn runner(t: PhaseTimeouts) -> Runner {
        let plan = Plan::new("inference", "k3d-gpu", "main", &t);
        Runner::new(State::sample("2026-01-01T00:00:00Z"), plan, t, Interrupt::default())
    }

    /// A phase whose halves do what the test says: never end, fail, or answer.
    struct Test<const ID: u8> {
        plan: Option<Result<u32, Failure>>,
        act: Option<Result<u32, Failure>>,
    }

    fn id(n: u8) -> PhaseId {
        crate::plan::PHASES[n as usize].id
    }

    impl<const N: u8> Phase for Test<N> {
        const ID: PhaseId = crate::plan::PHASES[N as usize].id;
        type Planned = u32;
        type Done = u32;
        fn says(&self, _cx: &Cx<'_>) -> String {
            "testing".into()
        }
        async fn plan(&mut self, _cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<u32, NoPlan> {
            match self.plan.take() {
                Some(r) => r.map_err(NoPlan::from),
                None => std::future::pending().await,
            }
        }
        async fn act(&mut self, _p: u32, _cx: &Cx<'_>, _r: &mut Runner) -> Result<u32, Failure> {
            match self.act.take() {
                Some(r) => r,
                None => std::future::pending().await,
            }
        }
        /// Says it cleaned up, in the plan's warnings.
        fn cleanup(r: &mut Runner) -> std::pin::Pin<Box<dyn Future<Output = ()> + '_>> {
            Box::pin(async move { r.plan.warnings.push(format!("cleaned up {}", Self::ID)) })
        }
    }

    /// A phase's row in the table, found by its id: a row added or moved does not shift the
    /// test phases onto other ids.
    const fn row(id: PhaseId) -> u8 {
        let mut i = 0;
        while i < crate::plan::PHASES.len() {
            if crate::plan::PHASES[i].id as u8 == id as u8 {
                return i as u8;
            }
            i += 1;
        }
        panic!("every phase has a row")
    }

    const INSTALL: u8 = row(PhaseId::Install);
    const VERIFY: u8 = row(PhaseId::Verify);
    const PREPARE: u8 = row(PhaseId::Prepare);
    const BASTION: u8 = row(PhaseId::Bastion);
    const FACTS: u8 = row(PhaseId::Facts);

    fn stalled<const N: u8>() -> Test<N> {
        Test { plan: None, act: None }
    }

    /// A state directory for cluster `cluster-key` under a new temporary root (kept while the
    /// root lives).
    pub(crate) fn state_dir() -> (tempfile::TempDir, crate::state::StateDir) {
        let root = tempfile::tempdir().unwrap();
        let sd = crate::state::StateDir::new(root.path(), "cluster-key").unwrap();
        (root, sd)
    }

    /// The facts of the desktop fixture (fixtures/config/desktop-i9).
    pub(crate) fn desktop_facts() -> crate::facts::Facts {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
        crate::facts::Facts::read(&path).unwrap()
    }

    /// The settings, shell and pins a phase reads.
    pub(crate) struct Fixture {
        pub(crate) args: UpSettings,
        pub(crate) global: crate::settings::Global,
        shell: Shell,
        pub(crate) services: crate::pipeline::services::Services,
        tree_pins: crate::pins::Trees,
        inv: crate::state::resume::Invocation,
    }

    impl Fixture {
        pub(crate) fn new() -> Fixture {
            let args = UpSettings {
                dry_run: false,
                fail_on_blockers: false,
                offline: true,
                allow_unread: vec![],
                select: crate::settings::Select::default(),
                env: "k3d-gpu".into(),
                out: None,
                output: crate::output::OutputFormat::Text,
                explain: false,
                yes: true,
                break_lock: false,
                reinstall: false,
                repos: Default::default(),
                image: Default::default(),
                gather: Default::default(),
                ledger_timeout: Duration::from_secs(1),
                phase_timeouts: PhaseTimeouts::default(),
            };
            let term = Terminal { stderr_is_tty: false, ci: true, no_color_env: true };
            let shell = Shell::new(ProgressMode::Plain, &term, true, 0, true);
            let global = Default::default();
            let services =
                crate::pipeline::services::Services::resolve(&args.select, &global).expect("the built-in pins");
            let tree_pins = crate::config::trees_in(&services.pins, &args.select).expect("the built-in pins");
            let inv = Default::default();
            Fixture { args, global, shell, services, tree_pins, inv }
        }

        pub(crate) fn cx(&self) -> Cx<'_> {
            Cx {
                args: &self.args,
                global: &self.global,
                shell: &self.shell,
                inv: &self.inv,
                services: &self.services,
                tree_pins: &self.tree_pins,
            }
        }
    }

    /// The runner hands the half its window's deadline; outside a window there is none.
    #[tokio::test]
    async fn a_half_reads_the_deadline_of_its_window() {
        assert_eq!(deadline(), None);
        let before = tokio::time::Instant::now();
        let limit = Duration::from_secs(30);
        let seen = window(limit, false, &Interrupt::default(), async { Ok(deadline()) }, || Failure::Interrupted).await;
        let seen = seen.unwrap().expect("a deadline inside the window");
        assert!(seen >= before + limit && seen <= tokio::time::Instant::now() + limit, "{seen:?}");
        assert_eq!(deadline(), None);
    }

    #[test]
    fn the_test_phases_are_the_phases_they_name() {
        assert_eq!((id(INSTALL), id(VERIFY), id(PREPARE)), (PhaseId::Install, PhaseId::Verify, PhaseId::Prepare));
        assert_eq!((id(BASTION), id(FACTS)), (PhaseId::Bastion, PhaseId::Facts));
    }

    #[tokio::test]
    async fn an_act_half_past_its_effective_timeout_is_recorded_failed_naming_the_phase() {
        let t = PhaseTimeouts::resolve(Some(0), None, &[]).unwrap();
        let (mut r, f) = (runner(t), Fixture::new());
        let e = r.act_phase(stalled::<INSTALL>(), 1, &f.cx()).await.unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("phase install did not finish within its timeout of 0 s"), "{e}");
        assert_eq!(r.state.entry(PhaseId::Install).status, Status::Failed);
        assert_eq!(r.state.exit_code, Some(1));
        assert_eq!(r.plan.phases.iter().find(|p| p.name == "install").unwrap().timeout_secs, 0);
    }

    #[tokio::test]
    async fn verify_past_its_timeout_is_a_verification_failure() {
        let (mut r, f) = (runner(PhaseTimeouts::resolve(None, Some(0), &[]).unwrap()), Fixture::new());
        let e = r.act_phase(stalled::<VERIFY>(), 1, &f.cx()).await.unwrap_err();
        assert_eq!(e.exit_code(), 5);
    }

    #[tokio::test]
    async fn an_interrupted_act_leaves_no_phase_running() {
        let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
        r.interrupt.graceful.cancel();
        let e = r.act_phase(stalled::<PREPARE>(), 1, &f.cx()).await.unwrap_err();
        assert_eq!(e.exit_code(), 130);
        assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Interrupted);
    }

    #[tokio::test]
    async fn an_act_half_that_answers_is_done_with_the_inputs_hash_the_plan_computed() {
        let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
        r.own.inputs.insert(PhaseId::Install, "h1".into());
        let done = r.act_phase(Test::<INSTALL> { plan: None, act: Some(Ok(7)) }, 1, &f.cx()).await.unwrap();
        assert_eq!(done, 7);
        let entry = r.state.entry(PhaseId::Install);
        assert_eq!((entry.status, entry.inputs_hash.as_deref()), (Status::Done, Some("h1")));
    }

    #[tokio::test]
    async fn a_failed_plan_half_is_a_blocker_and_the_next_half_still_runs() {
        let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
        let mut bastion = Test::<BASTION> { plan: Some(Err(Failure::bad_input("no digest", "pin it"))), act: None };
        assert_eq!(r.plan(&mut bastion, &f.cx()).await.unwrap(), None);
        let mut facts = Test::<FACTS> { plan: Some(Ok(7)), act: None };
        assert_eq!(r.plan(&mut facts, &f.cx()).await.unwrap(), Some(7));
        assert_eq!(
            r.plan.blockers,
            [Blocker::new(PhaseId::Bastion, "no digest", "pin it", crate::plan::Kind::BadInput)]
        );
        assert_eq!(r.state.entry(PhaseId::Bastion).status, Status::Failed);
        assert!(r.block(PhaseId::Facts, Failure::Interrupted).is_err(), "an interruption ends the run");
    }

    #[tokio::test]
    async fn a_stalled_plan_half_side_by_side_ends_at_its_own_window_and_the_others_answer() {
        let t = PhaseTimeouts::resolve(None, None, &[(PhaseId::Facts, 0)]).unwrap();
        let (mut r, f) = (runner(t), Fixture::new());
        let mut a = Test::<BASTION> { plan: Some(Ok(1)), act: None };
        let mut b = stalled::<FACTS>();
        let mut c = Test::<INSTALL> { plan: Some(Ok(3)), act: None };
        let (a, b, c) = r.plan3((&mut a, &mut b, &mut c), &f.cx(), "waiting").await.unwrap();
        assert_eq!((a, b, c), (Some(1), None, Some(3)));
        assert_eq!(r.plan.blockers.len(), 1);
        assert!(
            r.plan.blockers[0].cause.contains("phase facts did not finish within its timeout"),
            "{:?}",
            r.plan.blockers
        );
        for id in [PhaseId::Bastion, PhaseId::Facts, PhaseId::Install] {
            assert_ne!(r.state.entry(id).status, Status::Running, "{id} left running");
        }
    }

    /// `should_run`'s default is the resume rule of the table: once an earlier run installed with
    /// the same inputs, a phase that resumes when unchanged is skipped (its entry untouched), and
    /// one that always runs still runs.
    #[tokio::test]
    async fn an_install_done_earlier_with_the_same_inputs_skips_the_phases_that_resume_when_unchanged() {
        let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
        r.resume_installed(true);
        let skipped = r.act(Test::<INSTALL> { plan: None, act: Some(Ok(7)) }, 1, &f.cx()).await.unwrap();
        assert_eq!(skipped, None);
        assert_eq!(r.state.entry(PhaseId::Install).status, Status::Pending);
        let ran = r.act(Test::<VERIFY> { plan: None, act: Some(Ok(5)) }, 1, &f.cx()).await.unwrap();
        assert_eq!(ran, Some(5));
        r.resume_installed(false);
        let ran = r.act(Test::<INSTALL> { plan: None, act: Some(Ok(7)) }, 1, &f.cx()).await.unwrap();
        assert_eq!(ran, Some(7));
    }

    /// A phase whose hooks say, in the plan's warnings, that they ran.
    struct Hooked {
        before: Option<Failure>,
        act: Option<Failure>,
    }

    impl Phase for Hooked {
        const ID: PhaseId = PhaseId::Prepare;
        type Planned = ();
        type Done = ();
        fn says(&self, _cx: &Cx<'_>) -> String {
            "hooked".into()
        }
        async fn before(&mut self, _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
            r.plan.warnings.push("before".into());
            self.before.take().map_or(Ok(()), Err)
        }
        async fn act(&mut self, (): (), _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
            r.plan.warnings.push("act".into());
            self.act.take().map_or(Ok(()), Err)
        }
        fn after(&mut self, _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
            r.plan.warnings.push("after".into());
            Ok(())
        }
    }

    /// k0sctl's order: before, the act, then after only when the act succeeded; a failed
    /// `before` ends the run (its exit code recorded) without beginning the phase.
    #[tokio::test]
    async fn after_runs_only_when_the_act_succeeded_and_a_failed_before_never_begins_the_act() {
        let f = Fixture::new();
        let said = |r: &Runner| r.plan.warnings.clone();
        let mut r = runner(PhaseTimeouts::default());
        r.act(Hooked { before: None, act: None }, (), &f.cx()).await.unwrap();
        assert_eq!(said(&r), ["before", "act", "after"]);
        let mut r = runner(PhaseTimeouts::default());
        let failed = Hooked { before: None, act: Some(Failure::step(PhaseId::Prepare, "no")) };
        assert!(r.act(failed, (), &f.cx()).await.is_err());
        assert_eq!(said(&r), ["before", "act"]);
        assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Failed);
        let mut r = runner(PhaseTimeouts::default());
        let refused = Hooked { before: Some(Failure::step(crate::plan::Step::Ledger, "unreadable")), act: None };
        assert!(r.act(refused, (), &f.cx()).await.is_err());
        assert_eq!(said(&r), ["before"]);
        assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Pending);
        assert_eq!(r.state.exit_code, Some(crate::plan::Kind::Failed.exit_code()));
    }

    /// k0sctl's manager: when the act list fails, each phase whose act ran (even the one that
    /// failed) cleans up, once, in the order they ran; a skipped phase and a run that succeeds
    /// clean nothing up.
    #[tokio::test]
    async fn a_failed_act_list_cleans_up_each_phase_whose_act_ran() {
        let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
        r.act(Test::<BASTION> { plan: None, act: Some(Ok(1)) }, 1, &f.cx()).await.unwrap();
        r.resume_installed(true);
        r.act(Test::<INSTALL> { plan: None, act: Some(Ok(1)) }, 1, &f.cx()).await.unwrap();
        r.resume_installed(false);
        let failed =
            r.act(Test::<FACTS> { plan: None, act: Some(Err(Failure::step(PhaseId::Facts, "no"))) }, 1, &f.cx()).await;
        assert!(r.finish(Ok(())).await.is_ok());
        assert!(r.plan.warnings.is_empty(), "a run that succeeds cleans nothing up: {:?}", r.plan.warnings);
        assert!(r.finish(failed).await.is_err());
        assert_eq!(r.plan.warnings, ["cleaned up bastion", "cleaned up facts"]);
        assert!(r.finish(Err::<(), _>(Failure::Interrupted)).await.is_err());
        assert_eq!(r.plan.warnings.len(), 2, "each clean-up runs once");
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
