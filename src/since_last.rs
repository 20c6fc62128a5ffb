//! What `eas up` is against the last completed run on the cluster (`run_kind`) and what changed
//! since (`since_last`): the plan's data, shared by the plan (`pipeline`) and the records that
//! decide it (`state::resume`, `state::since`), so neither depends on the other for it.

use serde::Serialize;

/// What this run is, against the latest install record and the last completed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// No run on this cluster completed.
    Install,
    /// Nothing the install reads changed: the plan halves, then verify only.
    UpToDate,
    /// The pins moved: the installer's own upgrade path (`init --upgrade`).
    Upgrade,
    /// Decisions, patches or generated files changed: prepare and install again.
    Reconfigure,
    /// The latest install was interrupted or failed: the lasting phases done with the same
    /// inputs are skipped ([`plan_resume`]).
    Resume,
}

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = serde_json::to_value(self).expect("a run kind serialises");
        f.write_str(v.as_str().unwrap_or("?"))
    }
}

/// One pinned tree that moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PinMove {
    pub tree: String,
    pub from: String,
    pub to: String,
    /// Commits from `from` to `to`, where the mirror knows them.
    pub commits: Option<u32>,
}

/// A decision whose choice changed, with the fact that decided it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionChange {
    /// What is decided (`model`, a key written).
    pub key: String,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The fact the choice now follows from.
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchChange {
    pub id: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileChange {
    pub name: String,
    /// A unified diff, the last run's file to this run's.
    pub diff: String,
}

/// What differs from the last completed run (empty lists: nothing of that kind changed).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SinceLast {
    /// When the run compared against finished its install.
    pub installed_at: String,
    /// The selection's settings that changed, each naming where this run's value came from.
    pub settings: Vec<String>,
    pub pins: Vec<PinMove>,
    pub decisions: Vec<DecisionChange>,
    pub patches: Vec<PatchChange>,
    pub files: Vec<FileChange>,
    pub facts: Vec<String>,
    /// On an upgrade: the entries of the catalog at the new EI commit that the seeded
    /// `env/<env>/models.yaml` (what the installer reads; init never re-seeds it) lacks or has
    /// otherwise.
    pub catalog: Vec<String>,
    /// The bastion image's tag before and now, when it changed (an eas upgrade alone: shown,
    /// never a reason to reinstall).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bastion_image: Option<(String, String)>,
}

impl SinceLast {
    /// Whether the install would differ: decisions, patches or generated files changed.
    pub fn reconfigures(&self) -> bool {
        !self.decisions.is_empty() || !self.patches.is_empty() || !self.files.is_empty()
    }
}
