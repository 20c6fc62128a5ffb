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
pub mod plan_part;
mod up;

use std::future::Future;
use std::pin::Pin;

use std::time::Duration;

use crate::error::Failure;
use crate::plan::{Row, Timeouts};
use crate::runtime::Interrupt;

use crate::pipeline::phase::NoPlan;

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

    /// The act half of a phase whose input only an earlier phase's act hands on (`eas down`'s
    /// delete after a guarded teardown, settle after delete): without it (`None`) the phase is
    /// skipped, as one whose [`Phase::should_run`] says no, so its act takes a value rather than
    /// an `Option` it would unwrap.
    pub async fn act_given<'c, P: Phase<T>>(
        &mut self,
        p: P,
        planned: Option<P::Planned>,
        cx: &'c T::Cx<'c>,
    ) -> Result<Option<P::Done>, Failure> {
        match planned {
            Some(planned) => self.act(p, planned, cx).await,
            None => Ok(None),
        }
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

#[cfg(test)]
pub(crate) mod tests;
