//! The one place where outcomes become process exit codes (SPEC §2).
//!
//! Every module has its own error type; at the command edge (`crate::commands`, whose `edge`
//! module holds the mappings) they turn into a [`Failure`],
//! and `main` turns a `Failure` into an exit code and the lines the user sees.

use std::fmt;

use crate::plan::{Blocker, Kind, PhaseId, Step};
use std::process::ExitCode;

/// What a failed verification (exit 5) ends with: every FAIL line above names its object.
pub const VERIFY_NEXT: &str = "next: fix what the FAIL lines name, then run `eas verify` again (`eas status` shows the devices and model servers as they are now)";

/// Why a command did not succeed, in the terms of the exit-code contract.
#[derive(Debug)]
pub enum Failure {
    /// Exit 2: usage error, malformed file, floating ref, schema mismatch. Nothing was written.
    BadInput { cause: String, hint: Option<String> },
    /// Exit 3: the cluster is one `eas` will not install onto. Nothing was written.
    Refused(Vec<String>),
    /// Exit 1: a step failed at run time.
    Step { step: Step, cause: String, next: Option<String> },
    /// Exit 4: an overlay patch no longer applies to the pinned EAS tree.
    OverlayStop(Vec<String>),
    /// Exit 5: installed, but verification failed.
    Verify(Vec<String>),
    /// Exit 130: Ctrl-C or SIGTERM.
    Interrupted,
    /// A command run on the user's behalf (`eas bastion run`) exited non-zero: its code, passed through.
    Exit { step: Step, code: u8 },
    /// `eas up` stopped before its first write on the checks its plan halves failed (SPEC §4,
    /// blockers): every one is printed; the exit code is the run's (the real run: the first
    /// blocker's).
    Blocked { lines: Vec<String>, kind: Kind },
}

impl Failure {
    pub fn bad_input(cause: impl Into<String>, hint: impl Into<String>) -> Self {
        Failure::BadInput { cause: cause.into(), hint: Some(hint.into()) }
    }

    pub fn step(step: impl Into<Step>, cause: impl fmt::Display) -> Self {
        Failure::Step { step: step.into(), cause: cause.to_string(), next: None }
    }

    pub fn step_next(step: impl Into<Step>, cause: impl fmt::Display, next: impl Into<String>) -> Self {
        Failure::Step { step: step.into(), cause: cause.to_string(), next: Some(next.into()) }
    }

    /// A file that could not be read (`bounded`): interrupted is exit 130, anything else bad input.
    pub fn read(e: &crate::bounded::ReadError, hint: &str) -> Self {
        match e {
            crate::bounded::ReadError::Interrupted { .. } => Failure::Interrupted,
            _ => Failure::bad_input(e.to_string(), hint),
        }
    }

    /// This failure of `phase`'s plan half as blockers: one per refusal or STOP line, one for any
    /// other failure, each with its fix and the kind the real run meets it with.
    pub fn blockers(&self, phase: PhaseId) -> Vec<Blocker> {
        let kind = self.kind();
        match self {
            Failure::BadInput { cause, hint } => {
                vec![Blocker::new(phase, cause, hint.clone().unwrap_or_default(), kind)]
            }
            Failure::Step { step, cause, next } => {
                let cause = if step.name() == phase.name() { cause.clone() } else { format!("{step}: {cause}") };
                vec![Blocker::new(phase, cause, next.clone().unwrap_or_default(), kind)]
            }
            Failure::Refused(reasons) => {
                let fix = "change what the cause names; `eas up --dry-run --explain` cites each rule";
                reasons.iter().map(|r| Blocker::new(phase, r, fix, kind)).collect()
            }
            Failure::OverlayStop(lines) => {
                let fix = "regenerate the patch for the pinned EAS commit, or pin a profile whose overlay decides";
                lines.iter().map(|l| Blocker::new(phase, l, fix, kind)).collect()
            }
            other => vec![Blocker::new(phase, other.lines().join("; "), "", kind)],
        }
    }

    /// The run stopped on `blockers`, exiting as `kind`: every blocker's lines.
    pub fn blocked(blockers: &[Blocker], kind: Kind) -> Failure {
        Failure::Blocked { lines: blockers.iter().flat_map(Blocker::lines).collect(), kind }
    }

    /// Its kind in the one table of exit codes ([`Kind`]); a passed-through exit is `Failed`.
    pub fn kind(&self) -> Kind {
        match self {
            Failure::Step { .. } | Failure::Exit { .. } => Kind::Failed,
            Failure::BadInput { .. } => Kind::BadInput,
            Failure::Refused(_) => Kind::Refusal,
            Failure::OverlayStop(_) => Kind::Stop,
            Failure::Verify(_) => Kind::Verify,
            Failure::Interrupted => Kind::Interrupted,
            Failure::Blocked { kind, .. } => *kind,
        }
    }

    /// The process exit code: its kind's, but a command run on the user's behalf passes its own.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Exit { code, .. } => *code,
            other => other.kind().exit_code(),
        }
    }

    /// The lines printed on stderr for this failure.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Failure::BadInput { cause, hint } => {
                let mut v = vec![format!("error: {cause}")];
                if let Some(h) = hint {
                    v.push(format!("hint: {h}"));
                }
                v
            }
            Failure::Refused(reasons) => reasons.iter().map(|r| format!("REFUSE: {r}")).collect(),
            Failure::Step { step, cause, next } => {
                let mut v = vec![format!("error: {step}: {cause}")];
                if let Some(n) = next {
                    v.push(format!("next: {n}"));
                }
                v
            }
            Failure::OverlayStop(lines) => lines.iter().map(|l| format!("STOP: {l}")).collect(),
            Failure::Verify(lines) => {
                let mut v: Vec<String> = lines.iter().map(|l| format!("verify: {l}")).collect();
                if !v.is_empty() {
                    v.push(VERIFY_NEXT.to_string());
                }
                v
            }
            Failure::Interrupted => vec!["interrupted: nothing eas started is left running".to_string()],
            Failure::Exit { step, code } => vec![format!("{step}: the command exited {code}")],
            Failure::Blocked { lines, .. } => lines.clone(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.lines().join("\n"))
    }
}

impl std::error::Error for Failure {}

/// Converts a command's result into the process exit code, printing the failure (through the
/// shell: on a terminal its lines break between words, never mid-word).
pub fn finish(result: Result<(), Failure>, shell: &crate::output::Shell) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            for line in f.lines() {
                shell.failure_line(&line);
            }
            ExitCode::from(f.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_contract() {
        let cases = [
            (Failure::step(PhaseId::Install, "boom"), 1),
            (Failure::bad_input("x", "y"), 2),
            (Failure::Refused(vec!["r".into()]), 3),
            (Failure::OverlayStop(vec![]), 4),
            (Failure::Verify(vec![]), 5),
            (Failure::Interrupted, 130),
        ];
        for (f, code) in cases {
            assert_eq!(f.exit_code(), code, "{f:?}");
        }
    }

    #[test]
    fn an_interruption_claims_no_containers_it_may_not_have_had() {
        // A dry run has no container to stop: the line must hold whether or not one ran.
        assert_eq!(Failure::Interrupted.lines(), vec!["interrupted: nothing eas started is left running"]);
    }

    #[test]
    fn refusal_lines_are_prefixed() {
        let f = Failure::Refused(vec!["a".into(), "b".into()]);
        assert_eq!(f.lines(), vec!["REFUSE: a", "REFUSE: b"]);
    }
}
