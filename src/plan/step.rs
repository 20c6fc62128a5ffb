//! What a failure names before its cause (`error: STEP: cause`): the phase of `eas up` or
//! `eas down` that failed, by its id, or one of the few steps that are no phase, each a variant
//! of its own. The printed name of each is today's (tests and the README pin some of them:
//! `error: down: …`, `error: lock: …`), so no step is a free string.

use std::fmt;

use super::{DownId, PhaseId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A phase of `eas up`.
    Up(PhaseId),
    /// A phase of `eas down`.
    Down(DownId),
    /// `eas down` as a whole (`down`): finding the record, the snapshots between its phases.
    DownRun,
    /// A run's or an attempt's log (`log`).
    Log,
    /// The run's ledger of what it created (`ledger`).
    Ledger,
    /// The signal handlers every long command installs (`signals`).
    Signals,
    /// The runtime (`runtime`).
    Runtime,
    /// A file a command writes (`write`).
    Write,
    /// The state directory (`state`).
    State,
    /// The plan's documents (`plan`).
    Plan,
    /// The knob audit (`audit`).
    Audit,
    /// The kubeconfig (`kubeconfig`).
    Kubeconfig,
    /// The Docker Engine (`docker`).
    Docker,
    /// The question before a real run (`confirm`).
    Confirm,
    /// `eas status`.
    Status,
    /// `eas doctor`.
    Doctor,
    /// `eas fit`.
    Fit,
    /// `eas pins`.
    Pins,
    /// `eas pins lock`.
    PinsLock,
    /// `eas bastion run`.
    BastionRun,
    /// `eas bastion build`.
    BastionBuild,
    /// `eas bastion build`'s artifacts.
    BastionArtifacts,
    /// `eas support-bundle`.
    SupportBundle,
    /// `eas completions`.
    Completions,
    /// `eas man`.
    Man,
}

impl Step {
    /// The name printed before the cause.
    pub fn name(self) -> &'static str {
        match self {
            Step::Up(id) => id.name(),
            Step::Down(id) => id.name(),
            Step::DownRun => "down",
            Step::Log => "log",
            Step::Ledger => "ledger",
            Step::Signals => "signals",
            Step::Runtime => "runtime",
            Step::Write => "write",
            Step::State => "state",
            Step::Plan => "plan",
            Step::Audit => "audit",
            Step::Kubeconfig => "kubeconfig",
            Step::Docker => "docker",
            Step::Confirm => "confirm",
            Step::Status => "status",
            Step::Doctor => "doctor",
            Step::Fit => "fit",
            Step::Pins => "pins",
            Step::PinsLock => "pins lock",
            Step::BastionRun => "bastion run",
            Step::BastionBuild => "bastion build",
            Step::BastionArtifacts => "bastion artifacts",
            Step::SupportBundle => "support-bundle",
            Step::Completions => "completions",
            Step::Man => "man",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<PhaseId> for Step {
    fn from(id: PhaseId) -> Step {
        Step::Up(id)
    }
}

impl From<DownId> for Step {
    fn from(id: DownId) -> Step {
        Step::Down(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A phase's step prints the phase's name from its table, as the free strings did.
    #[test]
    fn a_phase_step_prints_its_tables_name() {
        for p in &crate::plan::PHASES {
            assert_eq!(Step::from(p.id).to_string(), p.name);
        }
        for p in &crate::plan::DOWN_PHASES {
            assert_eq!(Step::from(p.id).to_string(), p.name);
        }
        assert_eq!(Step::DownRun.to_string(), "down");
        assert_eq!(Step::BastionRun.to_string(), "bastion run");
    }
}
