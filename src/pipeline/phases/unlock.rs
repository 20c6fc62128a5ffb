//! Unlock: the run's last phase releases the cluster's Lease, then the lock file, that the lock
//! phase took (k0sctl's unlock is a phase too: `phase/unlock.go`). A run that fails after the
//! lock phase's act releases them as that phase's clean-up instead (`Phase::cleanup`), so the
//! cluster is never left held by a run that ended.

use crate::error::Failure;
use crate::plan::PhaseId;

use crate::pipeline::phase::Cx;
use crate::pipeline::runner::{Phase, Runner};

pub struct Unlock;

impl Phase for Unlock {
    const ID: PhaseId = PhaseId::Unlock;
    type Planned = ();
    type Done = ();

    async fn act(&mut self, (): (), _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        r.release().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::{Fixture, runner};
    use crate::plan::{DryRun, PHASES, PhaseTimeouts};
    use crate::state::journal::Status;

    /// Unlock is the last act of every run (a resumed one too), recorded in the journal, and a
    /// dry run, which takes no lock, does not run it.
    #[tokio::test]
    async fn unlock_runs_last_in_every_run_and_never_in_a_dry_run() {
        assert_eq!(PHASES.last().map(|p| p.id), Some(PhaseId::Unlock));
        assert_eq!(PhaseId::Unlock.spec().dry_run, DryRun::Stops);
        let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
        r.resume_installed(true);
        r.act_phase(Unlock, (), &f.cx()).await.unwrap();
        assert_eq!(r.journaled().entry(PhaseId::Unlock).status, Status::Done);
    }
}
