//! What a phase is: a type with a read-only plan half, whose answer its act half consumes
//! ([`Phase`]), run by the one runner (`crate::pipeline::up::runner`) that owns their windows, the journal,
//! cancellation, resume and the dry-run stop. Also what a phase's timeout says when the runner
//! ends it (exit 1 naming the phase and its window, and the next command; verify: a verification
//! failure, exit 5), and the phase a `--phase-timeout NAME=` stands for.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::Failure;
use crate::output::Shell;
use crate::pins::Trees;
use crate::plan::{PHASES, PhaseId, Resume};
use crate::settings::Global;
use crate::state::resume::Invocation;

use crate::pipeline::runner::Runner;
use crate::pipeline::services::Services;
use crate::pipeline::settings::UpSettings;

/// What every half of a run reads: its settings, the services resolved once for the run, the
/// pinned trees it selected, and where it prints. Shared, so plan halves can run side by side.
pub struct Cx<'a> {
    pub args: &'a UpSettings,
    pub global: &'a Global,
    pub shell: &'a Shell,
    pub inv: &'a Invocation,
    pub services: &'a Services,
    pub tree_pins: &'a Trees,
}

/// Why a plan half has no answer for its act half.
#[derive(Debug)]
pub enum NoPlan {
    /// Its own checks failed: each is a blocker of the phase.
    Blocked(Vec<Failure>),
    /// What it needs was not planned: an earlier phase's blocker already says why.
    Upstream,
}

impl From<Failure> for NoPlan {
    fn from(f: Failure) -> Self {
        NoPlan::Blocked(vec![f])
    }
}

/// One phase of `eas up` (k0sctl's `phase.Phase`): its row in `pipeline::PHASES` names it and
/// declares both windows. The plan half reads and decides and writes nothing (not the cluster,
/// the state file nor the work tree); its answer is the act half's input, so what exists only in
/// a real run is a value the plan produced, never an `Option` unwrapped later. The phase itself
/// neither times, journals nor prints its line: the runner does.
///
/// Besides its two halves a phase may implement the hooks k0sctl's manager calls around `Run`
/// (k0sproject/k0sctl `phase/manager.go` at 6b4e813, `Manager.Run`): [`Phase::should_run`]
/// first, then [`Phase::before`], the act, and [`Phase::after`] only when the act succeeded;
/// when a later act fails, [`Phase::cleanup`] of every phase whose act ran.
pub trait Phase {
    const ID: PhaseId;
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

    /// The plan half's line on the terminal: the phase table's `says`, unless the phase adds
    /// what only the run knows.
    fn says(&self, _cx: &Cx<'_>) -> String {
        Self::ID.spec().says.into()
    }

    /// Reads and decides. A failed check that leaves the answer usable goes in `found` (a
    /// blocker all the same); one without which there is no answer is the `Err`. A phase
    /// without a plan half (its act takes what the list hands it) keeps this default, which the
    /// list never calls.
    fn plan(&mut self, _cx: &Cx<'_>, _found: &mut Vec<Failure>) -> impl Future<Output = Result<Self::Planned, NoPlan>> {
        async { Err(NoPlan::Upstream) }
    }

    /// What the plan half settled, written into the plan and the run's journal (in memory).
    fn note(&mut self, _planned: &mut Self::Planned, _r: &mut Runner) -> Result<(), Failure> {
        Ok(())
    }

    /// What the plan says when the plan half has no answer.
    fn unplanned(&self, _r: &mut Runner) {}

    /// Whether the act half runs (k0sctl's `ShouldRun`). By default the resume rule, a column of
    /// the phase table: a phase that resumes when unchanged does not run again once an earlier
    /// run installed with the same inputs ([`Runner::installed_earlier`]); the others always run.
    fn should_run(&self, _cx: &Cx<'_>, r: &Runner) -> bool {
        Self::ID.spec().resume == Resume::Always || !r.installed_earlier()
    }

    /// Before the act half's window (k0sctl's `Before`); its failure ends the run (recorded).
    fn before(&mut self, _cx: &Cx<'_>, _r: &mut Runner) -> impl Future<Output = Result<(), Failure>> {
        async { Ok(()) }
    }

    /// Acts on the plan: run only when no plan half of the run blocked.
    fn act(
        &mut self,
        planned: Self::Planned,
        cx: &Cx<'_>,
        r: &mut Runner,
    ) -> impl Future<Output = Result<Self::Done, Failure>>;

    /// After an act half that succeeded (k0sctl's `After`); its failure ends the run (recorded).
    fn after(&mut self, _cx: &Cx<'_>, _r: &mut Runner) -> Result<(), Failure> {
        Ok(())
    }

    /// When the run fails after this phase's act half ran (k0sctl's `CleanUp`): undoes what must
    /// not outlive the run (the lock phase releases the cluster's Lease and the lock).
    fn cleanup(_r: &mut Runner) -> Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(async {})
    }
}

/// The phase a name (`preflight`, `install`...) stands for.
pub fn phase_named(name: &str) -> Option<PhaseId> {
    PHASES.iter().find(|p| p.name == name).map(|p| p.id)
}

pub fn timed_out(id: PhaseId, limit: Duration) -> Failure {
    let cause = format!("phase {} did not finish within its timeout of {}", id.name(), shown(limit));
    match id {
        PhaseId::Verify => Failure::Verify(vec![format!("{cause}; see `eas verify`, then `eas status`")]),
        PhaseId::Preflight | PhaseId::Lock => {
            Failure::step_next(id, cause, "check the API server and Docker with `eas doctor`, then re-run `eas up`")
        }
        _ => Failure::step_next(id, cause, "re-run `eas up`: it resumes after the phases that finished"),
    }
}

pub fn shown(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_names_the_phase_and_its_window_and_verifys_is_exit_5() {
        let e = timed_out(PhaseId::Preflight, Duration::from_secs(60));
        assert_eq!(e.exit_code(), 1);
        assert!(
            e.lines().join("\n").contains("phase preflight did not finish within its timeout of 1 min"),
            "{:?}",
            e.lines()
        );
        assert_eq!(timed_out(PhaseId::Verify, Duration::from_secs(5)).exit_code(), 5);
    }

    #[test]
    fn phases_are_found_by_name() {
        assert_eq!(phase_named("install"), Some(PhaseId::Install));
        assert_eq!(phase_named("nope"), None);
    }
}
