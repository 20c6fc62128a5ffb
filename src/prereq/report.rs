//! What the prerequisites read (`data/prereq.json`, the inputs beside the facts) and what they
//! answer (one [`Check`] per gate, the [`Report`]): the types the checks and their callers share.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::plan::{Blocker, PhaseId};

/// `data/prereq.json`.
#[derive(Debug, Deserialize)]
pub struct Data {
    pub default_class_annotation: Annotation,
    pub ephemeral_margin: Margin,
    pub access_reviews: Reviews,
    pub stack: Stack,
}

#[derive(Debug, Deserialize)]
pub struct Annotation {
    pub key: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
pub struct Margin {
    pub bytes: u64,
}

#[derive(Debug, Deserialize)]
pub struct Reviews {
    pub reviews: Vec<ReviewSpec>,
}

/// One access the installer needs, asked as a `SelfSubjectAccessReview` for all namespaces.
#[derive(Debug, Deserialize, Clone, PartialEq)]
pub struct ReviewSpec {
    pub verb: String,
    pub group: String,
    pub resource: String,
    #[serde(rename = "for")]
    pub purpose: String,
}

#[derive(Debug, Deserialize)]
pub struct Stack {
    pub namespaces: Vec<String>,
    pub releases: Vec<StackRelease>,
}

#[derive(Debug, Deserialize)]
pub struct StackRelease {
    pub namespace: String,
    pub name: String,
}

pub fn data() -> &'static Data {
    data_table!(Data, "prereq.json")
}

/// What eas's own record says it created on this cluster: those namespaces and releases are
/// eas's, not an earlier install's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    pub namespaces: BTreeSet<String>,
    /// `(namespace, release)`.
    pub releases: BTreeSet<(String, String)>,
}

impl Recorded {
    /// What a cluster's ledger says eas's runs created there (`Ledger::created`).
    #[allow(dead_code)] // the plan's hook builds the checks' inputs with it
    pub fn from_created(created: &crate::state::ledger::Snapshot) -> Recorded {
        Recorded {
            namespaces: created.namespaces.clone(),
            releases: created.helm_releases.iter().map(|r| (r.namespace.clone(), r.name.clone())).collect(),
        }
    }
}

/// What the checks are given beside the facts.
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    /// The chosen model's weights in bytes (the model decider's figure); `None` before a model is
    /// chosen, when the storage room is reported as not checked.
    pub weights_bytes: Option<u64>,
    /// The chosen model's name, to name it in the refusal.
    pub model: Option<&'a str>,
    pub recorded: Recorded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warn,
    Refuse,
    /// What the real run would fail on (exit 1), not a refusal of the selection: a host the
    /// installer's own preflight aborts without.
    Fail,
}

/// One thing a check found wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    pub cause: String,
    pub fix: String,
}

/// One gate: its name, the phase whose plan half it belongs to, and what it found. No findings:
/// it passed, and `ok` says what was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub phase: PhaseId,
    pub ok: String,
    pub findings: Vec<Finding>,
}

impl Check {
    pub(super) fn new(name: &'static str, phase: PhaseId) -> Check {
        Check { name, phase, ok: String::new(), findings: Vec::new() }
    }

    pub(super) fn refuse(&mut self, cause: impl Into<String>, fix: impl Into<String>) {
        self.findings.push(Finding { severity: Severity::Refuse, cause: cause.into(), fix: fix.into() });
    }

    pub(super) fn fail(&mut self, cause: impl Into<String>, fix: impl Into<String>) {
        self.findings.push(Finding { severity: Severity::Fail, cause: cause.into(), fix: fix.into() });
    }

    pub(super) fn warn(&mut self, cause: impl Into<String>, fix: impl Into<String>) {
        self.findings.push(Finding { severity: Severity::Warn, cause: cause.into(), fix: fix.into() });
    }

    /// Whether the check refuses the install (the tests tell refusals from failures by it).
    #[cfg(test)]
    pub fn refused(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Refuse)
    }

    /// Whether the install would not pass it: a refusal, or a failure the real run would meet.
    pub fn stops(&self) -> bool {
        self.findings.iter().any(|f| f.severity != Severity::Warn)
    }

    /// The check as `eas doctor` prints it: passed unless it refuses; the detail names every
    /// finding (a warning is marked as one), else what was seen.
    pub fn line(&self) -> (bool, &'static str, String) {
        if self.findings.is_empty() {
            return (true, self.name, self.ok.clone());
        }
        let detail: Vec<String> = self
            .findings
            .iter()
            .map(|f| match f.severity {
                Severity::Refuse | Severity::Fail => f.cause.clone(),
                Severity::Warn => format!("warning: {}", f.cause),
            })
            .collect();
        (!self.stops(), self.name, detail.join("; "))
    }
}

/// Every check, in the order the real run meets them.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub checks: Vec<Check>,
}

// `blockers` and `warnings` are the plan's hook (the phase runner's plan halves call them).
#[allow(dead_code)]
impl Report {
    /// The refusals (exit 3) and the failures the real run would meet (exit 1), as the plan's
    /// blockers, in check order.
    pub fn blockers(&self) -> Vec<Blocker> {
        use crate::plan::Kind;
        self.checks
            .iter()
            .flat_map(|c| {
                c.findings.iter().filter_map(|f| {
                    let kind = match f.severity {
                        Severity::Refuse => Kind::Refusal,
                        Severity::Fail => Kind::Failed,
                        Severity::Warn => return None,
                    };
                    Some(Blocker::new(c.phase, f.cause.clone(), f.fix.clone(), kind))
                })
            })
            .collect()
    }

    /// The warnings, one line each, with what to do.
    pub fn warnings(&self) -> Vec<String> {
        self.checks
            .iter()
            .flat_map(|c| c.findings.iter().filter(|f| f.severity == Severity::Warn))
            .map(|f| if f.fix.is_empty() { f.cause.clone() } else { format!("{} ({})", f.cause, f.fix) })
            .collect()
    }

    /// One line per check for `eas doctor`: `(passed, name, detail)`.
    pub fn lines(&self) -> Vec<(bool, &'static str, String)> {
        self.checks.iter().map(Check::line).collect()
    }
}
