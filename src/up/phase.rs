//! One phase of `eas up` under its declared timeout and the run's cancellation token: the table
//! the plan prints is what is enforced. A timeout exits 1 naming the phase and the next command
//! (verify: a verification failure, exit 5); SIGINT or SIGTERM exits 130.

use std::future::Future;
use std::time::Duration;

use crate::bastion::run::Interrupt;
use crate::error::Failure;
pub use crate::pipeline::PhaseTimeouts;
use crate::pipeline::{PHASES, PhaseId};

/// The phase a name (`preflight`, `install`...) stands for.
pub fn phase_named(name: &str) -> Option<PhaseId> {
    PHASES.iter().find(|p| p.name == name).map(|p| p.id)
}

/// Runs `f` as phase `id`: its result, a timeout failure, or [`Failure::Interrupted`].
pub async fn run<T>(
    id: PhaseId,
    timeouts: &PhaseTimeouts,
    interrupt: &Interrupt,
    f: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    let limit = timeouts.get(id);
    tokio::select! {
        r = tokio::time::timeout(limit, f) => r.unwrap_or_else(|_| Err(timed_out(id, limit))),
        _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
    }
}

pub fn timed_out(id: PhaseId, limit: Duration) -> Failure {
    let cause = format!("phase {} did not finish within its timeout of {}", id.name(), shown(limit));
    match id {
        PhaseId::Verify => Failure::Verify(vec![format!("{cause}; see `eas verify`, then `eas status`")]),
        PhaseId::Preflight | PhaseId::Lock => Failure::step_next(
            id.name(),
            cause,
            "check the API server and Docker with `eas doctor`, then re-run `eas up`",
        ),
        _ => Failure::step_next(id.name(), cause, "re-run `eas up`: it resumes after the phases that finished"),
    }
}

fn shown(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_phase_past_its_timeout_names_itself_and_verify_is_exit_5() {
        let t =
            PhaseTimeouts::new([(PhaseId::Preflight, Duration::from_millis(10)), (PhaseId::Verify, Duration::ZERO)]);
        let i = Interrupt::default();
        let never = std::future::pending::<Result<(), Failure>>;
        let e = run(PhaseId::Preflight, &t, &i, never()).await.unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.lines().join("\n").contains("phase preflight did not finish"), "{:?}", e.lines());
        assert_eq!(run(PhaseId::Verify, &t, &i, never()).await.unwrap_err().exit_code(), 5);
        assert_eq!(t.get(PhaseId::Install), PhaseId::Install.spec().timeout);
        assert_eq!(run(PhaseId::Install, &t, &i, async { Ok(7) }).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn cancellation_ends_a_phase_with_130() {
        let i = Interrupt::default();
        i.graceful.cancel();
        let e = run(PhaseId::Facts, &PhaseTimeouts::default(), &i, std::future::pending::<Result<(), Failure>>())
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 130);
    }

    #[test]
    fn phases_are_found_by_name() {
        assert_eq!(phase_named("install"), Some(PhaseId::Install));
        assert_eq!(phase_named("nope"), None);
    }
}
