//! Whether something is installed, in one place (`status`, `verify` and `down` all ask here):
//! the install is the record of the last run whose install phase began (`state.json`); the
//! latest run is that or the attempt beside it (`attempt/state.json`: a run that stopped before
//! its install phase began, blocked or failed), whichever started last.

use serde::Serialize;

use super::StateDir;
use super::journal::{JournalError, State, Status};
use crate::pipeline::PhaseId;

/// The directory beside `state.json` that holds the latest attempt.
pub const ATTEMPT: &str = "attempt";

/// How the latest run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastRun {
    /// The phase it stopped in (failed or interrupted), else the last one it finished.
    pub phase: PhaseId,
    pub exit_code: Option<u8>,
    /// The failed phase's message, when one failed.
    pub cause: Option<String>,
    pub finished_at: Option<String>,
    /// Whether this run began its install phase.
    pub install: bool,
}

/// A cluster's records.
#[derive(Debug, Clone)]
pub struct Records {
    /// The install: the last run that began its install phase (a partial install included).
    pub install: Option<State>,
    /// The attempt recorded after it, if any.
    pub attempt: Option<State>,
}

/// Whether `s` began its install phase.
pub fn began_install(s: &State) -> bool {
    s.entry(PhaseId::Install).status != Status::Pending
}

impl Records {
    pub fn read(sd: &StateDir) -> Result<Records, JournalError> {
        let state = State::load(&sd.state_file())?;
        let attempt = State::load(&sd.dir().join(ATTEMPT).join(super::journal::FILE))?;
        let install = state.filter(began_install);
        // An attempt older than the install is history: the install came after it.
        let attempt = attempt.filter(|a| install.as_ref().is_none_or(|i| a.started > i.started));
        Ok(Records { install, attempt })
    }

    /// The latest run: the attempt when there is one after the install, else the install.
    pub fn last_run(&self) -> Option<LastRun> {
        let s = self.attempt.as_ref().or(self.install.as_ref())?;
        Some(last_run(s))
    }
}

pub fn last_run(s: &State) -> LastRun {
    let stopped = s.phases.iter().find(|p| matches!(p.status, Status::Failed | Status::Interrupted));
    let last = s.phases.iter().rev().find(|p| p.status == Status::Done);
    let phase = stopped.or(last).map_or(PhaseId::Lock, |p| p.phase);
    LastRun {
        phase,
        exit_code: s.exit_code,
        cause: stopped.and_then(|p| p.message.clone()),
        finished_at: s.finished.clone(),
        install: began_install(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::journal::{PinsRecord, RunInfo};

    fn state(started: &str) -> State {
        let info = RunInfo {
            cluster_key: "k".into(),
            context: "c".into(),
            layer: "inference".into(),
            env: "k3d-gpu".into(),
            pins: PinsRecord { profile: "main".into(), shas: Default::default() },
        };
        State::new(info, started)
    }

    #[test]
    fn an_attempt_is_not_an_install_and_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::new(dir.path(), "k-1").unwrap();
        let mut attempt = state("2026-01-02T00:00:00Z");
        attempt.finish(PhaseId::Bastion, Status::Failed, Some("the build failed".into()), "t");
        attempt.exit_code = Some(1);
        std::fs::create_dir_all(sd.dir().join(ATTEMPT)).unwrap();
        attempt.save(&sd.dir().join(ATTEMPT).join("state.json")).unwrap();
        let r = Records::read(&sd).unwrap();
        assert!(r.install.is_none(), "an attempt alone installs nothing");
        let last = r.last_run().unwrap();
        assert_eq!((last.phase, last.exit_code, last.install), (PhaseId::Bastion, Some(1), false));
        assert_eq!(last.cause.as_deref(), Some("the build failed"));

        // An earlier install stays the install; the later attempt is the last run.
        let mut install = state("2026-01-01T00:00:00Z");
        install.begin(PhaseId::Install, None, "t");
        install.finish(PhaseId::Install, Status::Done, None, "t");
        install.exit_code = Some(0);
        install.save(&sd.state_file()).unwrap();
        let r = Records::read(&sd).unwrap();
        assert_eq!(r.install.as_ref().map(|s| s.started.as_str()), Some("2026-01-01T00:00:00Z"));
        assert_eq!(r.last_run().unwrap().phase, PhaseId::Bastion);

        // A record whose install never began is not an install either.
        let mut never = state("2026-01-03T00:00:00Z");
        never.finish(PhaseId::Facts, Status::Failed, None, "t");
        never.save(&sd.state_file()).unwrap();
        assert!(Records::read(&sd).unwrap().install.is_none());
    }
}
