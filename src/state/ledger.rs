//! The ledger: which namespaces, Helm releases and CRDs a run created (a before/after
//! comparison, since the installer keeps no record of its own), and the guard `eas down`
//! applies: delete what the ledger says eas created and is still there, never what existed
//! before, and name the pre-existing objects the installer's own teardown would delete anyway
//! (its NFD teardown deletes the `node-feature-discovery` namespace; its Envoy, observability and
//! Istio teardowns delete CRDs by broad patterns), so they can be saved and restored.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Release {
    pub namespace: String,
    pub name: String,
}

/// The cluster-wide objects `eas` accounts for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub namespaces: BTreeSet<String>,
    pub helm_releases: BTreeSet<Release>,
    pub crds: BTreeSet<String>,
}

impl Snapshot {
    pub fn minus(&self, other: &Snapshot) -> Snapshot {
        Snapshot {
            namespaces: self.namespaces.difference(&other.namespaces).cloned().collect(),
            helm_releases: self.helm_releases.difference(&other.helm_releases).cloned().collect(),
            crds: self.crds.difference(&other.crds).cloned().collect(),
        }
    }

    pub fn union(&self, other: &Snapshot) -> Snapshot {
        Snapshot {
            namespaces: self.namespaces.union(&other.namespaces).cloned().collect(),
            helm_releases: self.helm_releases.union(&other.helm_releases).cloned().collect(),
            crds: self.crds.union(&other.crds).cloned().collect(),
        }
    }

    pub fn intersect(&self, other: &Snapshot) -> Snapshot {
        Snapshot {
            namespaces: self.namespaces.intersection(&other.namespaces).cloned().collect(),
            helm_releases: self.helm_releases.intersection(&other.helm_releases).cloned().collect(),
            crds: self.crds.intersection(&other.crds).cloned().collect(),
        }
    }

    #[cfg_attr(not(test), allow(dead_code))] // used by the tests
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.helm_releases.is_empty() && self.crds.is_empty()
    }

    /// Every object, releases first, then namespaces, then CRDs: the order to delete them in
    /// (a release before its namespace; CRDs last, once nothing uses them).
    pub fn objects(&self) -> Vec<Object> {
        let releases = self.helm_releases.iter().cloned().map(Object::HelmRelease);
        let namespaces = self.namespaces.iter().cloned().map(Object::Namespace);
        let crds = self.crds.iter().cloned().map(Object::Crd);
        releases.chain(namespaces).chain(crds).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Object {
    HelmRelease(Release),
    Namespace(String),
    Crd(String),
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::HelmRelease(r) => write!(f, "Helm release {}/{}", r.namespace, r.name),
            Object::Namespace(n) => write!(f, "namespace {n}"),
            Object::Crd(c) => write!(f, "CRD {c}"),
        }
    }
}

/// What existed before the first `eas up` on the cluster, and what eas runs have created since.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ledger {
    pub before: Snapshot,
    pub created: Snapshot,
}

impl Ledger {
    /// The ledger after a run, from the previous one (a resumed run) and this run's snapshots.
    /// `before` stays the first run's, plus anything that appeared between runs that eas did not
    /// create (a user's namespace is theirs whenever it appeared); `created` gains what this run
    /// added.
    pub fn record(prev: Option<&Ledger>, before_run: &Snapshot, after_run: &Snapshot) -> Ledger {
        let this_run = after_run.minus(before_run);
        match prev {
            None => Ledger { before: before_run.clone(), created: this_run },
            Some(p) => Ledger {
                before: p.before.union(&before_run.minus(&p.created)),
                created: p.created.union(&this_run).minus(&p.before),
            },
        }
    }
}

#[derive(Debug, Deserialize)]
struct Guards {
    namespaces: Vec<NamespaceRule>,
    helm_releases: Vec<ReleaseRule>,
    crds: Vec<CrdRule>,
}

#[derive(Debug, Deserialize)]
struct NamespaceRule {
    name: String,
    by: String,
    certain: bool,
    source: String,
    component: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ReleaseRule {
    namespace: Option<String>,
    name: String,
    by: String,
    certain: bool,
    source: String,
    component: Option<String>,
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
    static V: OnceLock<Guards> = OnceLock::new();
    V.get_or_init(|| {
        serde_json::from_str(include_str!("../../data/teardown-guards.json"))
            .unwrap_or_else(|e| panic!("data/teardown-guards.json is malformed: {e}"))
    })
}

/// Which installer teardown would delete `object`, if one would.
pub fn threat(object: &Object) -> Option<Threat> {
    let g = guards();
    match object {
        Object::Namespace(n) => g.namespaces.iter().find(|r| &r.name == n).map(|r| Threat {
            by: r.by.clone(),
            certain: r.certain,
            source: r.source.clone(),
            component: r.component.clone(),
        }),
        Object::HelmRelease(rel) => g
            .helm_releases
            .iter()
            .find(|r| r.name == rel.name && r.namespace.as_ref().is_none_or(|ns| *ns == rel.namespace))
            .map(|r| Threat {
                by: r.by.clone(),
                certain: r.certain,
                source: r.source.clone(),
                component: r.component.clone(),
            }),
        Object::Crd(c) => g.crds.iter().find(|r| r.matches(c)).map(|r| Threat {
            by: format!("{} ({})", r.by, r.upstream),
            certain: true,
            source: r.source.clone(),
            component: r.component.clone(),
        }),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
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

/// What `eas down` does, decided before it acts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeardownPlan {
    /// Created by eas and still present: delete (in [`Snapshot::objects`] order).
    pub delete: Snapshot,
    /// Existed before `eas up`, and the installer's teardown would delete them: save them first
    /// and restore any it removes.
    pub protect: Vec<Protected>,
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
    let protect = existed
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

    /// Pre-existing objects the installer's teardown removed (to restore from their saved copy).
    pub fn lost(&self, after: &Snapshot) -> Vec<&Protected> {
        let present: Vec<Object> = after.objects();
        self.protect.iter().filter(|p| !present.contains(&p.object)).collect()
    }

    /// The report `eas down` prints: what is left and why.
    pub fn report(&self, after: &Snapshot) -> Vec<String> {
        let mut lines = Vec::new();
        for o in self.still_present(after) {
            lines.push(format!(
                "left: {o}: created by eas up, still present after deletion (it may still be terminating)"
            ));
        }
        for p in self.lost(after) {
            lines.push(format!(
                "restore: {} existed before eas up and is gone: {} [{}]",
                p.object, p.threat.by, p.threat.source
            ));
        }
        for p in self.protect.iter().filter(|p| !self.lost(after).contains(p)) {
            lines.push(format!("kept: {}: existed before eas up", p.object));
        }
        for o in &self.unrecorded {
            lines.push(format!("kept: {o}: not created by eas up (it appeared after the run was recorded)"));
        }
        if !self.gone.is_empty() {
            let gone: Vec<String> = self.gone.iter().map(ToString::to_string).collect();
            lines.push(format!("already removed: {}", gone.join(", ")));
        }
        lines.push(format!("{} objects that existed before eas up were left alone", self.kept_before));
        lines
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
