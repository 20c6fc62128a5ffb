//! The objects eas accounts for on a cluster, as records: a snapshot of the namespaces, Helm
//! releases, CRDs, objects inside the watched namespaces, cluster-scoped objects and node labels
//! (`data/ledger-watch.json` says which), and one object of them. Pure data, below both the
//! cluster module that reads a snapshot and deletes an object, and the ledger (`state::ledger`)
//! that records them and decides what `eas down` may delete, so neither imports the other.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Release {
    pub namespace: String,
    pub name: String,
}

/// An object inside one of the watched namespaces: its kind and name only (a Secret's data is
/// never read).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Named {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// A cluster-scoped object of a kind the installer creates outside Helm
/// (`data/ledger-watch.json` `cluster_kinds`): its kind and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClusterNamed {
    pub kind: String,
    pub name: String,
}

/// A label key on a node, under a prefix the installer's roles label nodes with
/// (`data/ledger-watch.json` `node_label_prefixes`). The key only: a role that rewrites the
/// value of a label that was there before did not add it, and `eas down` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeLabel {
    pub node: String,
    pub key: String,
}

/// The objects `eas` accounts for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub namespaces: BTreeSet<String>,
    pub helm_releases: BTreeSet<Release>,
    pub crds: BTreeSet<String>,
    /// Objects inside the watched namespaces (`data/ledger-watch.json`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub objects: BTreeSet<Named>,
    /// Cluster-scoped objects of the watched cluster kinds (the admission policy and its binding).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub cluster_objects: BTreeSet<ClusterNamed>,
    /// Per node, the label keys under the watched prefixes (`nri.intel.com/`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub node_labels: BTreeSet<NodeLabel>,
}

/// One set operation applied field by field (each field is a set of its own kind).
macro_rules! fieldwise {
    ($a:expr, $b:expr, $op:ident) => {
        Snapshot {
            namespaces: $a.namespaces.$op(&$b.namespaces).cloned().collect(),
            helm_releases: $a.helm_releases.$op(&$b.helm_releases).cloned().collect(),
            crds: $a.crds.$op(&$b.crds).cloned().collect(),
            objects: $a.objects.$op(&$b.objects).cloned().collect(),
            cluster_objects: $a.cluster_objects.$op(&$b.cluster_objects).cloned().collect(),
            node_labels: $a.node_labels.$op(&$b.node_labels).cloned().collect(),
        }
    };
}

impl Snapshot {
    pub fn minus(&self, other: &Snapshot) -> Snapshot {
        fieldwise!(self, other, difference)
    }

    pub fn union(&self, other: &Snapshot) -> Snapshot {
        fieldwise!(self, other, union)
    }

    pub fn intersect(&self, other: &Snapshot) -> Snapshot {
        fieldwise!(self, other, intersection)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.objects().is_empty()
    }

    /// Every object, releases first, then the objects inside namespaces, the cluster-scoped
    /// objects and the node labels, then namespaces, then CRDs: the order to delete them in (a
    /// release before its namespace; CRDs last, once nothing uses them).
    pub fn objects(&self) -> Vec<Object> {
        let releases = self.helm_releases.iter().cloned().map(Object::HelmRelease);
        let inside = self.objects.iter().cloned().map(Object::Namespaced);
        let cluster = self.cluster_objects.iter().cloned().map(Object::Cluster);
        let labels = self.node_labels.iter().cloned().map(Object::NodeLabel);
        let namespaces = self.namespaces.iter().cloned().map(Object::Namespace);
        let crds = self.crds.iter().cloned().map(Object::Crd);
        releases.chain(inside).chain(cluster).chain(labels).chain(namespaces).chain(crds).collect()
    }

    pub fn contains(&self, o: &Object) -> bool {
        match o {
            Object::HelmRelease(r) => self.helm_releases.contains(r),
            Object::Namespaced(n) => self.objects.contains(n),
            Object::Cluster(c) => self.cluster_objects.contains(c),
            Object::NodeLabel(l) => self.node_labels.contains(l),
            Object::Namespace(n) => self.namespaces.contains(n),
            Object::Crd(c) => self.crds.contains(c),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Object {
    HelmRelease(Release),
    Namespaced(Named),
    Cluster(ClusterNamed),
    NodeLabel(NodeLabel),
    Namespace(String),
    Crd(String),
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::HelmRelease(r) => write!(f, "Helm release {}/{}", r.namespace, r.name),
            Object::Namespaced(n) => write!(f, "{} {}/{}", n.kind, n.namespace, n.name),
            Object::Cluster(c) => write!(f, "{} {}", c.kind, c.name),
            Object::NodeLabel(l) => write!(f, "node label {} on {}", l.key, l.node),
            Object::Namespace(n) => write!(f, "namespace {n}"),
            Object::Crd(c) => write!(f, "CRD {c}"),
        }
    }
}

/// The namespaces the installer writes into, and the kinds listed inside them; the
/// cluster-scoped kinds it creates outside Helm; the node label prefixes its roles set.
#[derive(Debug, Deserialize)]
pub struct Watch {
    pub namespaces: Vec<WatchedNamespace>,
    pub kinds: Vec<WatchedKind>,
    pub cluster_kinds: Vec<WatchedKind>,
    pub node_label_prefixes: Vec<WatchedPrefix>,
}

#[derive(Debug, Deserialize)]
pub struct WatchedPrefix {
    pub prefix: String,
    #[allow(dead_code)] // documentation in the data file
    pub why: String,
    #[allow(dead_code)] // documentation in the data file
    pub source: String,
}

impl Watch {
    /// Whether a node label key is one the ledger records.
    pub fn watches_label(&self, key: &str) -> bool {
        self.node_label_prefixes.iter().any(|p| key.starts_with(&p.prefix))
    }
}

#[derive(Debug, Deserialize)]
pub struct WatchedNamespace {
    pub name: String,
    #[allow(dead_code)] // documentation in the data file
    pub why: String,
    #[allow(dead_code)] // documentation in the data file
    pub source: String,
}

#[derive(Debug, Deserialize)]
pub struct WatchedKind {
    pub kind: String,
    /// Where it was read that the installer creates it (the cluster kinds).
    #[serde(default)]
    #[allow(dead_code)] // documentation in the data file
    pub source: Option<String>,
    pub group: String,
    pub version: String,
    pub plural: String,
}

pub fn watch() -> &'static Watch {
    data_table!(Watch, "ledger-watch.json")
}
