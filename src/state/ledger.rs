//! The ledger: which namespaces, Helm releases, CRDs and objects inside the namespaces the
//! installer writes into (`data/ledger-watch.json`) a run created (a before/after comparison,
//! since the installer keeps no record of its own), and the guard `eas down` applies: delete what
//! the ledger says eas created and is still there, never what existed before, and skip the
//! installer components whose teardown would delete a pre-existing object anyway (its NFD
//! teardown deletes the `node-feature-discovery` namespace; its Envoy, observability and Istio
//! teardowns delete CRDs by broad patterns). Nothing is saved or restored: recreating a
//! namespace or a CRD would not bring back what was inside it, so a loss is reported and kept
//! in the record instead (findings, repeated by every `down` until acknowledged).
//!
//! The ledger fails closed: the run's `before` snapshot is recorded (`pending`) before the
//! installer runs, and until the `after` snapshot is read the ledger is incomplete.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::snapshot::{Object, Release, Snapshot};

/// What existed before the first `eas up` on the cluster, and what eas runs have created since.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ledger {
    pub before: Snapshot,
    pub created: Snapshot,
    /// The `before` snapshot of a run whose `after` is not recorded yet: the run is installing,
    /// died, or could not read the cluster afterwards. While set, the ledger is incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Snapshot>,
    /// Why the last run could not complete the record (the snapshot's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Losses and leftovers an `eas down` found: repeated by every later `down` until
    /// `--acknowledge`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// eas's own objects, which eas itself writes and removes (not the installer): its run
    /// Lease, as the run created it. Never among `before` or `created` (the snapshots do not read
    /// kube-system's Leases), so no guard or deletion of the cluster's objects ever counts them;
    /// `eas down` removes one only while it is that very object (same uid, same holder) and its
    /// run is gone. A user's object of the same name is never eas's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own: Vec<Own>,
}

/// One of eas's own objects, as the run that created it recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Own {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The object's uid when the run created it: a re-created object of the same name differs.
    pub uid: String,
    /// Who held it (a Lease's `holderIdentity`: host, pid and run id).
    pub holder: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// Existed before `eas up`, gone after `eas down`.
    Lost,
    /// Created by `eas up`, still there after `eas down`.
    Left,
    /// The record was incomplete: the teardown ran with every guard, and this may be left.
    MayBeLeft,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub object: String,
    pub note: String,
    /// When the `down` that found it ran.
    pub found: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            FindingKind::Lost => "lost",
            FindingKind::Left => "left",
            FindingKind::MayBeLeft => "may be left",
        };
        write!(f, "{kind}: {}: {} (found {})", self.object, self.note, self.found)
    }
}

impl Ledger {
    /// The ledger after a run, from the previous one (a resumed run) and this run's snapshots.
    /// `before` stays the first run's, plus anything that appeared between runs that eas did not
    /// create (a user's namespace is theirs whenever it appeared); `created` gains what this run
    /// added.
    #[cfg(test)]
    pub fn record(prev: Option<&Ledger>, before_run: &Snapshot, after_run: &Snapshot) -> Ledger {
        Ledger::begin(prev, before_run).complete(after_run)
    }

    /// The ledger as a run starts changing the cluster, saved before the installer runs. A
    /// pending `before` from a run that never completed its record is kept: whatever appeared
    /// since may be that run's.
    pub fn begin(prev: Option<&Ledger>, before_run: &Snapshot) -> Ledger {
        let base = prev.cloned().unwrap_or_default();
        let pending = base.pending.clone().unwrap_or_else(|| before_run.clone());
        Ledger {
            before: base.before.union(&pending.minus(&base.created)),
            created: base.created.clone(),
            pending: Some(pending),
            incomplete: base.incomplete.clone(),
            findings: base.findings.clone(),
            own: base.own.clone(),
        }
    }

    /// The record completed from the cluster after the run.
    pub fn complete(&self, after_run: &Snapshot) -> Ledger {
        let Some(pending) = &self.pending else { return self.clone() };
        Ledger {
            before: self.before.clone(),
            created: self.created.union(&after_run.minus(pending)).minus(&self.before),
            pending: None,
            incomplete: None,
            findings: self.findings.clone(),
            own: self.own.clone(),
        }
    }

    /// This ledger with `own` recorded, each replacing an earlier record of the same object
    /// (the previous run's Lease is this run's now).
    pub fn with_own(mut self, own: Vec<Own>) -> Ledger {
        for o in own {
            self.own.retain(|e| (&e.kind, &e.namespace, &e.name) != (&o.kind, &o.namespace, &o.name));
            self.own.push(o);
        }
        self
    }

    /// The `after` snapshot could not be read: what is known stays, marked incomplete.
    pub fn fail(&self, reason: &str) -> Ledger {
        Ledger { incomplete: Some(reason.to_string()), ..self.clone() }
    }

    /// Why `eas down` cannot trust this record, if it cannot.
    pub fn incomplete_reason(&self) -> Option<String> {
        match (&self.incomplete, &self.pending) {
            (Some(r), _) => Some(r.clone()),
            (None, Some(_)) => Some("a run ended before it recorded what it created".to_string()),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Deserialize)]
struct Guards {
    namespaces: Vec<NamespaceRule>,
    helm_releases: Vec<ReleaseRule>,
    crds: Vec<CrdRule>,
    node_labels: Vec<LabelRule>,
}

/// Node label keys under `prefix` that a component's teardown strips from every node.
#[derive(Debug, Deserialize)]
struct LabelRule {
    prefix: String,
    #[serde(flatten)]
    threat: Threat,
}

#[derive(Debug, Deserialize)]
struct NamespaceRule {
    name: String,
    #[serde(flatten)]
    threat: Threat,
}

#[derive(Debug, Deserialize)]
struct ReleaseRule {
    namespace: Option<String>,
    name: String,
    #[serde(flatten)]
    threat: Threat,
}

#[derive(Debug, Deserialize)]
struct CrdRule {
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    name: Option<String>,
    upstream: String,
    by: String,
    source: String,
    component: Option<String>,
}

impl CrdRule {
    fn matches(&self, crd: &str) -> bool {
        self.contains.as_ref().is_some_and(|c| crd.contains(c.as_str()))
            || self.group.as_ref().is_some_and(|g| crd.strip_suffix(g.as_str()).is_some_and(|rest| rest.ends_with('.')))
            || self.name.as_ref().is_some_and(|n| crd == n)
    }
}

fn guards() -> &'static Guards {
    data_table!(Guards, "teardown-guards.json")
}

/// Which installer teardown would delete `object`, if one would.
pub fn threat(object: &Object) -> Option<Threat> {
    let g = guards();
    match object {
        Object::Namespace(n) => g.namespaces.iter().find(|r| &r.name == n).map(|r| r.threat.clone()),
        Object::HelmRelease(rel) => g
            .helm_releases
            .iter()
            .find(|r| r.name == rel.name && r.namespace.as_ref().is_none_or(|ns| *ns == rel.namespace))
            .map(|r| r.threat.clone()),
        // The teardown that deletes a namespace deletes what is inside it.
        Object::Namespaced(n) => threat(&Object::Namespace(n.namespace.clone())),
        // No teardown read deletes the admission policy or its binding (EAS envoy_gateway's
        // teardown.yaml@3db05446 names neither): eas removes the ones a run created.
        Object::Cluster(_) => None,
        Object::NodeLabel(l) => g.node_labels.iter().find(|r| l.key.starts_with(&r.prefix)).map(|r| r.threat.clone()),
        Object::Crd(c) => g.crds.iter().find(|r| r.matches(c)).map(|r| Threat {
            by: format!("{} ({})", r.by, r.upstream),
            certain: true,
            source: r.source.clone(),
            component: r.component.clone(),
        }),
    }
}

/// A guard row's teardown, as `data/teardown-guards.json` names it (a CRD row's is built from
/// its `upstream`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Threat {
    pub by: String,
    /// False when the teardown was not read and the threat is inferred from what install creates.
    pub certain: bool,
    pub source: String,
    /// The installer component whose teardown deletes the object, to `--skip` it.
    pub component: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub object: Object,
    pub threat: Threat,
}

/// Every component a guard names: what `eas down --force-incomplete` skips.
pub fn all_guarded_components() -> Vec<String> {
    let g = guards();
    let mut v: Vec<String> = g
        .namespaces
        .iter()
        .filter_map(|r| r.threat.component.clone())
        .chain(g.helm_releases.iter().filter_map(|r| r.threat.component.clone()))
        .chain(g.crds.iter().filter_map(|r| r.component.clone()))
        .chain(g.node_labels.iter().filter_map(|r| r.threat.component.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// What `eas down` does, decided before it acts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeardownPlan {
    /// Created by eas and still present: delete (in [`Snapshot::objects`] order).
    pub delete: Snapshot,
    /// Existed before `eas up`, and the installer's teardown would delete them: their
    /// components are skipped, present or not (a second `down` must not tear down what a first
    /// one lost).
    pub protect: Vec<Protected>,
    /// Existed before `eas up` and present as `down` starts: any of them gone afterwards is lost.
    pub present_before: Snapshot,
    /// Recorded as created by eas but already gone.
    pub gone: Vec<Object>,
    /// Present now, not created by eas, not there before `eas up` either: left alone.
    pub unrecorded: Vec<Object>,
    /// How many objects that existed before `eas up` are left alone.
    pub kept_before: usize,
}

/// The guard for `eas down`: the ledger, and the cluster as it is now.
pub fn guard_teardown(ledger: &Ledger, current: &Snapshot) -> TeardownPlan {
    let delete = ledger.created.intersect(current).minus(&ledger.before);
    let existed = current.intersect(&ledger.before);
    let protect = ledger
        .before
        .objects()
        .into_iter()
        .filter_map(|object| threat(&object).map(|threat| Protected { object, threat }))
        .collect();
    TeardownPlan {
        delete,
        protect,
        gone: ledger.created.minus(current).objects(),
        unrecorded: current.minus(&ledger.created).minus(&ledger.before).objects(),
        kept_before: existed.objects().len(),
        present_before: existed,
    }
}

impl TeardownPlan {
    /// The components whose teardown would delete an object that existed before `eas up`.
    pub fn skip_components(&self) -> Vec<String> {
        let mut v: Vec<String> = self.protect.iter().filter_map(|p| p.threat.component.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Objects that should be gone after `eas down` but are still in `after`.
    pub fn still_present(&self, after: &Snapshot) -> Vec<Object> {
        self.delete.intersect(after).objects()
    }

    /// Pre-existing objects present when `down` started and gone after it.
    pub fn lost(&self, after: &Snapshot) -> Vec<Object> {
        self.present_before.minus(after).objects()
    }

    /// What this `down` found, to keep in the record until acknowledged.
    pub fn findings(&self, after: &Snapshot, now: &str) -> Vec<Finding> {
        let lost = self.lost(after).into_iter().map(|o| {
            let note = match threat(&o) {
                Some(t) => format!("existed before eas up and is gone: {} [{}]", t.by, t.source),
                None => "existed before eas up and is gone".to_string(),
            };
            Finding { kind: FindingKind::Lost, object: o.to_string(), note, found: now.to_string() }
        });
        let left = self.still_present(after).into_iter().map(|o| Finding {
            kind: FindingKind::Left,
            object: o.to_string(),
            note: "created by eas up, still present after deletion (it may still be terminating)".to_string(),
            found: now.to_string(),
        });
        lost.chain(left).collect()
    }

    /// The report `eas down` prints: what is left and why.
    pub fn report(&self, after: &Snapshot) -> Vec<String> {
        let mut lines = Vec::new();
        for o in self.still_present(after) {
            lines.push(format!(
                "left: {o}: created by eas up, still present after deletion (it may still be terminating)"
            ));
        }
        let lost = self.lost(after);
        for o in &lost {
            lines.push(format!("lost: {o}: existed before eas up and is gone"));
        }
        for p in self.protect.iter().filter(|p| after.contains(&p.object)) {
            lines.push(format!("kept: {}: existed before eas up", p.object));
        }
        for o in &self.unrecorded {
            lines.push(format!("kept: {o}: not created by eas up (it appeared after the run was recorded)"));
        }
        if !self.gone.is_empty() {
            let gone: Vec<String> = self.gone.iter().map(ToString::to_string).collect();
            lines.push(format!("already removed: {}", gone.join(", ")));
        }
        lines.push(format!(
            "{} objects that existed before eas up were left alone",
            self.kept_before.saturating_sub(lost.len())
        ));
        lines
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
