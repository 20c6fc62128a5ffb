//! What a phase of `eas up` reads and how it fails: the context every half reads ([`Cx`]), why a
//! plan half has no answer ([`NoPlan`]), what a phase's timeout says when the runner ends it
//! (exit 1 naming the phase and its window, and the next command; verify: a verification
//! failure, exit 5), and the phase a `--phase-timeout NAME=` stands for. The trait a phase
//! implements is the runner's ([`crate::pipeline::runner::Phase`]).

use std::time::Duration;

use crate::error::Failure;
use crate::output::Shell;
use crate::pins::Trees;
use crate::plan::{PHASES, PhaseId};
use crate::settings::Global;
use crate::state::resume::Invocation;

use crate::pipeline::services::Services;
use crate::pipeline::settings::UpSettings;

/// What every half of a run reads: its settings, the services resolved once for the run, the
/// pinned trees it selected, and where it prints. Shared, so plan halves can run side by side.
#[derive(Clone)]
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
