//! The phases of `eas up` as data (SPEC §4), and the plan a dry run prints.
//!
//! A dry run is the same pipeline: every phase before the first one marked `DryRun::Stops` runs, the ones that would
//! write run only their read-only half, and the plan collects what they found. Timeouts are the
//! longest a phase may take before `eas` gives up on it; the figures and their reasons are next
//! to each row.

pub mod data;
pub mod doc;
pub mod saved;
pub mod step;

pub use doc::{Met, Picked, Plan, Runs, Selected};
pub use step::Step;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::settings::timeouts;

use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::facts::Facts;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseId {
    Lock,
    Preflight,
    Bastion,
    Facts,
    Trees,
    Config,
    Overlay,
    Classify,
    Prepare,
    Install,
    Record,
    Verify,
    Unlock,
}

/// A phase table's id: its row in `$rows` (`spec`), its name, and the name as it prints. Both
/// tables (`eas up`'s and `eas down`'s) look their rows up the same way.
macro_rules! table_id {
    ($id:ty, $spec:ty, $rows:expr) => {
        impl $id {
            pub fn name(self) -> &'static str {
                self.spec().name
            }

            pub fn spec(self) -> &'static $spec {
                $rows.iter().find(|p| p.id == self).expect("every phase has a row in its table")
            }
        }

        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

table_id!(PhaseId, PhaseSpec, PHASES);

/// What a dry run does with a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DryRun {
    /// It only reads: it runs as in a real run.
    Runs,
    /// It runs its read-only half; what it would write is described in the plan instead.
    ReadsOnly,
    /// It does not run; the plan shows what it would do.
    Stops,
}

/// Whether a later `eas up` after a failure may skip the phase when it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Cheap or reading the cluster as it is now: always run again.
    Always,
    /// Skipped when it finished with the same inputs (and no earlier phase re-runs).
    WhenUnchanged,
}

#[derive(Debug)]
pub struct PhaseSpec {
    pub id: PhaseId,
    pub name: &'static str,
    /// The phase's line on the terminal, as its plan half starts ([`crate::pipeline`]'s `Phase::says`).
    pub says: &'static str,
    /// The act half's timeout (`--phase-timeout NAME=SECS`, `--install-timeout`, `--verify-timeout`
    /// set it).
    pub timeout: Duration,
    /// The plan half's timeout: the read-only checks that run in every run, dry or not.
    pub plan_timeout: Duration,
    pub dry_run: DryRun,
    /// One line: what the dry run does for this phase.
    pub dry_run_says: &'static str,
    pub resume: Resume,
    /// What to run after the phase failed or was interrupted (`next:`).
    pub next: Next,
}

/// What to run after a phase failed or was interrupted, as the `next:` line says it
/// (`crate::state::resume::what_next` fills it in): `{up}` runs the same `eas up` again, `{down}`
/// its `eas down`, `{dry_run}` its dry run, `{verify}` its `eas verify`, `{eas NAME}` another of
/// eas's commands with the run's global flags; `{until}` says that `eas down` removes nothing
/// while the record of what the install created is pending.
#[derive(Debug)]
pub struct Next {
    pub says: &'static str,
    /// Said instead while the record is pending (a phase from prepare on that left it so).
    pub pending: Option<&'static str>,
}

const fn min(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

pub static PHASES: [PhaseSpec; 13] = [
    PhaseSpec {
        id: PhaseId::Lock,
        name: "lock",
        says: "checking that no other run holds this cluster",
        // File operations only: a held lock is refused at once, never waited for.
        timeout: Duration::from_secs(10),
        plan_timeout: Duration::from_secs(10),
        dry_run: DryRun::ReadsOnly,
        dry_run_says: "report a live or stale lock on this cluster; take none",
        resume: Resume::Always,
        next: Next {
            says: "once the other run has ended, {up} (add --break-lock if its lock is stale)",
            pending: None,
        },
    },
    PhaseSpec {
        id: PhaseId::Preflight,
        name: "preflight",
        says: "reading the cluster's identity",
        // A handful of checks (Docker ping, API server version, disk, memory, git), each a
        // request or a process of a few seconds.
        timeout: Duration::from_secs(60),
        plan_timeout: Duration::from_secs(60),
        dry_run: DryRun::Runs,
        dry_run_says: "check Docker, the API server, k3s/k3d, disk, memory and git",
        resume: Resume::Always,
        next: Next { says: "`{eas doctor}` lists every check; fix the failing one, then {up}", pending: None },
    },
    PhaseSpec {
        id: PhaseId::Bastion,
        name: "bastion",
        says: "planning the pinned bastion image (build or reuse)",
        // A cold build downloads the pinned tools and pip-installs the installer's Python
        // requirements with hash checking: minutes on a small machine. A reuse is an inspect.
        timeout: timeouts::BASTION,
        plan_timeout: min(2),
        dry_run: DryRun::ReadsOnly,
        dry_run_says: "hash the build context and say whether the image would be built or reused; build nothing",
        resume: Resume::Always,
        next: Next { says: "`{eas bastion build}` shows the build; then {up}", pending: None },
    },
    PhaseSpec {
        id: PhaseId::Facts,
        name: "facts",
        says: "gathering facts",
        // A few list calls plus one read inside each node container.
        timeout: min(2),
        plan_timeout: min(2),
        dry_run: DryRun::Runs,
        dry_run_says: "gather the facts document from the cluster (read-only)",
        resume: Resume::Always,
        next: Next { says: "`{eas facts}` shows what could not be read; then {up}", pending: None },
    },
    PhaseSpec {
        id: PhaseId::Trees,
        name: "trees",
        says: "fetching EAS, EI and EAT at their pinned commits",
        // Cloning three repositories at pinned commits into the cache on a first run.
        timeout: min(15),
        plan_timeout: min(15),
        dry_run: DryRun::ReadsOnly,
        dry_run_says: "read the EAS, EI and EAT trees at their pinned commits (fetched into the cache if missing); check EAS out in a temporary directory for the overlay (removed on exit)",
        resume: Resume::WhenUnchanged,
        next: Next {
            says: "check access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo DIR with local clones; then {up}",
            pending: None,
        },
    },
    PhaseSpec {
        id: PhaseId::Config,
        name: "config",
        says: "deciding the configuration",
        // Pure: facts, pins and flags in, files out.
        timeout: Duration::from_secs(10),
        plan_timeout: Duration::from_secs(30),
        dry_run: DryRun::Runs,
        dry_run_says: "decide the configuration (written to --out only when it is given)",
        resume: Resume::Always,
        next: Next { says: "`{dry_run}` shows each decision and its source", pending: None },
    },
    PhaseSpec {
        id: PhaseId::Overlay,
        name: "overlay",
        says: "deciding each k3s/k3d patch at the pinned EAS commit",
        // One `git apply --check` per patch variant on a scratch index.
        timeout: min(2),
        plan_timeout: min(2),
        dry_run: DryRun::ReadsOnly,
        dry_run_says: "decide each k3s/k3d patch at the pinned EAS commit; apply none",
        resume: Resume::WhenUnchanged,
        next: Next {
            says: "`{dry_run}` names the patch that no longer applies; regenerate it, then {up}",
            pending: None,
        },
    },
    PhaseSpec {
        id: PhaseId::Classify,
        name: "classify",
        says: "comparing with the last completed run",
        // The plan half counts the commits each moved pin advanced and reads the catalog at the
        // new EI commit (up to four local git commands of 10 s each); the act half hashes the
        // inputs.
        timeout: Duration::from_secs(10),
        plan_timeout: min(1),
        dry_run: DryRun::Runs,
        dry_run_says: "compare with the last completed run: the run's kind, what changed, what a resumed run skips",
        resume: Resume::Always,
        next: Next { says: "`{dry_run}` shows what changed since the last completed run; then {up}", pending: None },
    },
    PhaseSpec {
        id: PhaseId::Prepare,
        name: "prepare",
        says: "init and the decided files",
        // `init <layer>` clones every repository of the layer manifest inside the bastion.
        timeout: min(20),
        plan_timeout: Duration::from_secs(10),
        dry_run: DryRun::Stops,
        dry_run_says: "run `init`, merge global_config.edit.yaml, apply models.edit.yaml, write repos.<layer>.yaml",
        resume: Resume::WhenUnchanged,
        next: Next {
            says: "{up} resumes at prepare",
            pending: Some("{up} resumes at prepare (the installer is idempotent) and completes the record; {until}"),
        },
    },
    PhaseSpec {
        id: PhaseId::Install,
        name: "install",
        says: "the installer",
        // EAT 1.x documents 20-40 minutes for an install on a fresh node plus 10-15 minutes of
        // weight download (enterprise-inference.md §2.1); EAS adds the platform layer. Twice the
        // upper figure, rounded up.
        timeout: timeouts::INSTALL,
        plan_timeout: Duration::from_secs(10),
        dry_run: DryRun::Stops,
        dry_run_says: "run the installer in the bastion with the kubeconfig mounted read-only",
        resume: Resume::WhenUnchanged,
        next: Next {
            says: "{up} resumes at install (the installer is idempotent); {down} removes what was installed",
            pending: Some("{up} resumes at install (the installer is idempotent) and completes the record; {until}"),
        },
    },
    PhaseSpec {
        id: PhaseId::Record,
        name: "record",
        says: "recording what the install created",
        // The ledger's snapshot after the install (three list calls, retried within
        // `--ledger-timeout`) and one file write: right after the install, so what eas created is
        // known before verify's long wait, whatever verify then finds.
        timeout: Duration::from_secs(timeouts::LEDGER.as_secs() + 30),
        plan_timeout: Duration::from_secs(10),
        dry_run: DryRun::Stops,
        dry_run_says: "read what the install created, for `eas down`, and record the run",
        resume: Resume::Always,
        next: Next {
            says: "{up} records the run (nothing is reinstalled)",
            pending: Some("{up} records the run (nothing is reinstalled); {until}"),
        },
    },
    PhaseSpec {
        id: PhaseId::Verify,
        name: "verify",
        says: "the devices and the model servers",
        // Weights download (10-15 minutes, EAT 1.x docs), then the vLLM startup probe allows
        // 120 x 10 s = 20 minutes (enterprise-inference.md §2.1), then the route patch.
        timeout: timeouts::VERIFY,
        plan_timeout: Duration::from_secs(10),
        dry_run: DryRun::Stops,
        dry_run_says: "wait for device resources, the model server's MainWorkloadReady, its pods, /v1/models and one chat token",
        resume: Resume::Always,
        next: Next { says: "`{verify}` checks again without reinstalling; {down} removes the install", pending: None },
    },
    PhaseSpec {
        id: PhaseId::Unlock,
        name: "unlock",
        says: "releasing the cluster's Lease and the lock",
        // The cluster's Lease read and deleted (each bounded by a call's timeout), then the lock
        // file removed. A run that fails releases both as the lock phase's clean-up instead.
        timeout: Duration::from_secs(2 * timeouts::CALL.as_secs() + 10),
        plan_timeout: Duration::from_secs(10),
        dry_run: DryRun::Stops,
        dry_run_says: "release the cluster's Lease and this cluster's lock",
        resume: Resume::Always,
        next: Next {
            says: "the cluster's Lease goes stale within its duration; {up} takes it over once it has (or add --break-lock)",
            pending: None,
        },
    },
];

/// A row of a phase table (`eas up`'s [`PHASES`], `eas down`'s [`DOWN_PHASES`]) as the runner
/// reads it: the windows it declares.
pub trait Row: Copy + Ord + fmt::Display + fmt::Debug + Send + Sync + Into<Step> + 'static {
    /// The act half's declared timeout.
    fn timeout(self) -> Duration;
    /// The plan half's declared timeout (a table without plan halves: the act half's).
    fn plan_timeout(self) -> Duration {
        self.timeout()
    }
}

impl Row for PhaseId {
    fn timeout(self) -> Duration {
        self.spec().timeout
    }
    fn plan_timeout(self) -> Duration {
        self.spec().plan_timeout
    }
}

impl Row for DownId {
    fn timeout(self) -> Duration {
        self.spec().timeout
    }
}

/// Each phase's act-half timeout: the declared one (its row) unless a flag sets it. Resolved
/// once from the flags ([`PhaseTimeouts::resolve`], [`DownTimeouts::set`]); the runner enforces
/// it and the plan prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts<I: Row>(BTreeMap<I, Duration>);

/// `eas up`'s timeouts.
pub type PhaseTimeouts = Timeouts<PhaseId>;
/// `eas down`'s timeouts.
pub type DownTimeouts = Timeouts<DownId>;

impl<I: Row> Default for Timeouts<I> {
    fn default() -> Self {
        Timeouts(BTreeMap::new())
    }
}

impl<I: Row> Timeouts<I> {
    /// The timeouts flags set, each phase once (a later one for the same phase wins).
    pub fn set(set: impl IntoIterator<Item = (I, Duration)>) -> Timeouts<I> {
        Timeouts(set.into_iter().collect())
    }

    /// The act half's effective timeout.
    pub fn get(&self, id: I) -> Duration {
        self.0.get(&id).copied().unwrap_or(id.timeout())
    }

    /// The plan half's timeout: the declared one, or the act half's when a flag set that
    /// shorter (a shortened phase is shortened whole; a flag never lengthens a plan half).
    pub fn plan(&self, id: I) -> Duration {
        let declared = id.plan_timeout();
        self.0.get(&id).map_or(declared, |set| declared.min(*set))
    }
}

impl PhaseTimeouts {
    /// `--install-timeout`, `--verify-timeout` and `--phase-timeout NAME=SECS` (repeatable) into
    /// one table. Two flags for one phase (`--install-timeout` and `--phase-timeout install=`, or
    /// one name twice) is a usage error: which one would win is not obvious.
    pub fn resolve(
        install: Option<u64>,
        verify: Option<u64>,
        phases: &[(PhaseId, u64)],
    ) -> Result<PhaseTimeouts, String> {
        let mut t = BTreeMap::new();
        let named = [(PhaseId::Install, install, "--install-timeout"), (PhaseId::Verify, verify, "--verify-timeout")];
        let mut from: BTreeMap<PhaseId, String> = BTreeMap::new();
        for (id, secs, flag) in named {
            if let Some(secs) = secs {
                t.insert(id, Duration::from_secs(secs));
                from.insert(id, flag.to_string());
            }
        }
        for (id, secs) in phases {
            let this = format!("--phase-timeout {}={secs}", id.name());
            if let Some(earlier) = from.insert(*id, this.clone()) {
                return Err(format!("{earlier} and {this} both set the {} phase's timeout", id.name()));
            }
            t.insert(*id, Duration::from_secs(*secs));
        }
        Ok(Timeouts(t))
    }
}

/// The phases of `eas down` (SPEC §6), in the order they run. The first two only read: a dry
/// run prints what they found and stops, the real run prints it before it asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DownId {
    Find,
    Preview,
    Lock,
    Teardown,
    Delete,
    Settle,
    Record,
    Purge,
}

table_id!(DownId, DownSpec, DOWN_PHASES);

#[derive(Debug)]
pub struct DownSpec {
    pub id: DownId,
    pub name: &'static str,
    /// The phase's window (the teardown's: `--teardown-timeout`).
    pub timeout: Duration,
    /// It only reads: a dry run runs it.
    pub reads_only: bool,
    /// The phase's line on the terminal.
    pub says: &'static str,
}

pub static DOWN_PHASES: [DownSpec; 8] = [
    DownSpec {
        id: DownId::Find,
        name: "find",
        // The cluster's identity (one or two calls, an exec credential minted at most once)
        // and the record's files.
        timeout: min(2),
        reads_only: true,
        says: "read the cluster's identity and what eas up recorded for it",
    },
    DownSpec {
        id: DownId::Preview,
        name: "preview",
        // One snapshot of the cluster, retried up to its own deadline.
        timeout: timeouts::LEDGER.saturating_add(timeouts::CALL),
        reads_only: true,
        says: "compare the record with the cluster: what would be removed and what is kept",
    },
    DownSpec {
        id: DownId::Lock,
        name: "lock",
        // The lock file and the cluster's Lease (released when down ends); with --break-lock a
        // dead run's containers stopped first (found by the run id its lock or Lease names).
        timeout: min(2),
        reads_only: false,
        says: "take this cluster's lock and Lease and load the record",
    },
    DownSpec {
        id: DownId::Teardown,
        name: "teardown",
        // The installer's teardown in the bastion, which stops itself at --teardown-timeout;
        // before it, a snapshot and the bastion image (the run's own, or built from its pins).
        timeout: timeouts::TEARDOWN,
        reads_only: false,
        says: "run the installer's teardown, skipping what would delete objects that existed before eas up",
    },
    DownSpec {
        id: DownId::Delete,
        name: "delete",
        // One DELETE per object the teardown left; a Helm release's uninstall waits up to 5 min.
        timeout: min(20),
        reads_only: false,
        says: "delete what the record says eas up created and the teardown left",
    },
    DownSpec {
        id: DownId::Settle,
        name: "settle",
        // A snapshot, the wait for namespaces and CRDs to go, and a last snapshot.
        timeout: timeouts::SETTLE.saturating_add(timeouts::LEDGER).saturating_add(timeouts::LEDGER),
        reads_only: false,
        says: "wait for what was deleted to go",
    },
    DownSpec {
        id: DownId::Record,
        name: "record",
        // A snapshot at most, and the record written or removed.
        timeout: timeouts::LEDGER.saturating_add(timeouts::CALL),
        reads_only: false,
        says: "report what was lost or left, and remove the record or keep it",
    },
    DownSpec {
        id: DownId::Purge,
        name: "purge",
        timeout: min(1),
        reads_only: false,
        says: "remove this cluster's state directory",
    },
];

/// The first phase a dry run does not run: every phase before it only reads, or runs its
/// read-only half.
#[cfg(test)]
pub fn dry_run_stop() -> PhaseId {
    PHASES.iter().find(|p| p.dry_run == DryRun::Stops).expect("a dry run stops somewhere").id
}

/// Build or reuse of the bastion image, by the content hash of its build context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImagePlan {
    pub tag: String,
    pub action: ImageAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageAction {
    Build,
    Reuse,
}

/// Nodes of one shape (cpu, memory, devices, role): the plan scales with the shapes, not with
/// the cluster. Up to [`NAMED`] nodes are named; `count` says how many there are.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeGroup {
    pub count: usize,
    pub names: Vec<String>,
    pub cpu: String,
    pub memory: String,
    /// Device resources from `allocatable` (Intel GPU, NPU, Gaudi).
    pub devices: BTreeMap<String, String>,
    /// `control-plane` (the node-role label is set) or `worker`.
    pub role: String,
}

/// A node's shape: cpu, memory, devices, role.
type Shape = (String, String, Vec<(String, String)>, String);

/// How many nodes of a group the plan names.
pub const NAMED: usize = 3;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactsSummary {
    pub context: String,
    pub k3d_cluster: Option<String>,
    pub server_version: String,
    pub docker_rootless: Option<bool>,
    pub node_count: usize,
    /// Nodes grouped by shape, the smallest groups (the odd ones out) first.
    pub node_groups: Vec<NodeGroup>,
    pub namespaces: usize,
    pub helm_releases: Vec<String>,
    /// sha256 of the facts document.
    pub facts_hash: String,
}

impl FactsSummary {
    /// `device_prefixes`: the resource-name prefixes of devices (`gpu.intel.com/`, ...), from the
    /// cluster rules the caller reads.
    pub fn new(f: &Facts, facts_hash: &str, device_prefixes: &[&str]) -> Self {
        let mut groups: Vec<NodeGroup> = Vec::new();
        let mut index: BTreeMap<Shape, usize> = BTreeMap::new();
        for n in &f.nodes {
            let cpu = n.allocatable.get("cpu").cloned().unwrap_or_else(|| "?".into());
            let memory = n.allocatable.get("memory").map(|m| gib(m)).unwrap_or_else(|| "?".into());
            let devices: BTreeMap<String, String> = n
                .allocatable
                .iter()
                .filter(|(k, _)| device_prefixes.iter().any(|d| k.starts_with(d)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let control = ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"]
                .iter()
                .any(|l| n.labels.get(*l).is_some_and(|v| v == "true" || v.is_empty()));
            let role = if control { "control-plane" } else { "worker" }.to_string();
            let key = (cpu.clone(), memory.clone(), devices.clone().into_iter().collect(), role.clone());
            let i = *index.entry(key).or_insert_with(|| {
                groups.push(NodeGroup { count: 0, names: Vec::new(), cpu, memory, devices, role });
                groups.len() - 1
            });
            let g = &mut groups[i];
            g.count += 1;
            if g.names.len() < NAMED {
                g.names.push(n.name.clone());
            }
        }
        // Stable: the first-seen order among groups of the same size.
        groups.sort_by_key(|g| g.count);
        FactsSummary {
            context: f.cluster.context.clone(),
            k3d_cluster: f.cluster.k3d_cluster.clone(),
            server_version: f.cluster.server_version.clone(),
            docker_rootless: f.docker.as_ref().map(|d| d.rootless),
            node_count: f.nodes.len(),
            node_groups: groups,
            namespaces: f.namespaces.len(),
            helm_releases: f.helm_releases.iter().map(|r| format!("{}/{}", r.namespace, r.name)).collect(),
            facts_hash: facts_hash.to_string(),
        }
    }
}

fn gib(quantity: &str) -> String {
    match crate::facts::parse_quantity(quantity) {
        Some(b) => format!("{:.1} GiB", b / crate::facts::GIB),
        None => quantity.to_string(),
    }
}

/// One installer command line the run would execute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCommand {
    pub phase: PhaseId,
    pub argv: Vec<String>,
}

/// A phase as the dry run saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedPhase {
    /// The phase's name, as `--phase-timeout NAME=` takes it (`phase` is the same, kept for v1).
    pub name: &'static str,
    pub phase: PhaseId,
    /// The act half's effective timeout (the flags applied).
    pub timeout_secs: u64,
    /// The plan half's timeout.
    pub plan_timeout_secs: u64,
    pub dry_run: DryRun,
    pub says: String,
}

/// Something the dry run could not find out, and the step that needs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub phase: PhaseId,
    pub reason: String,
}

/// What kind of outcome a blocker (or a failure) is: the one table of exit codes (SPEC §2).
/// Everything that turns an outcome into a process exit number goes through [`Kind::exit_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A step failed, or would fail, at run time: exit 1.
    Failed,
    /// Bad input (a flag, a file, a floating ref): exit 2.
    BadInput,
    /// The cluster is one eas will not install onto: exit 3.
    Refusal,
    /// An overlay patch no longer applies to the pinned EAS tree: exit 4.
    Stop,
    /// Installed, but verification failed: exit 5.
    Verify,
    /// Ctrl-C or SIGTERM: exit 130.
    Interrupted,
}

/// The exit code of a command that succeeded (SPEC §2): the one code no [`Kind`] has.
pub const EXIT_SUCCESS: u8 = 0;

/// The one table of exit codes (SPEC §2): every other place names a kind, never a number.
impl Kind {
    pub const fn exit_code(self) -> u8 {
        match self {
            Kind::Failed => 1,
            Kind::BadInput => 2,
            Kind::Refusal => 3,
            Kind::Stop => 4,
            Kind::Verify => 5,
            Kind::Interrupted => 130,
        }
    }
}

/// The plan records a blocker's kind as the exit code the real run meets it with (eas-plan/v1).
impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.exit_code())
    }
}

/// A check the real run makes before its first write, failed: the real run stops there with
/// its kind's exit code (SPEC §2), the dry run lists it. In the order the real run meets them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    pub phase: PhaseId,
    /// One line: what is wrong.
    pub cause: String,
    /// The command or flag that removes it.
    pub fix: String,
    #[serde(rename = "exit_code")]
    pub kind: Kind,
}

impl Blocker {
    pub fn new(phase: PhaseId, cause: impl Into<String>, fix: impl Into<String>, kind: Kind) -> Self {
        Blocker { phase, cause: cause.into(), fix: fix.into(), kind }
    }

    pub fn exit_code(&self) -> u8 {
        self.kind.exit_code()
    }

    /// The stderr lines of its kind: `REFUSE:` for a refusal, `STOP:` for an overlay STOP,
    /// `error: <phase>:` otherwise; then its fix.
    pub fn lines(&self) -> Vec<String> {
        let first = match self.kind {
            Kind::Refusal => format!("REFUSE: {}", self.cause),
            Kind::Stop => format!("STOP: {}", self.cause),
            _ => format!("error: {}: {}", self.phase, self.cause),
        };
        let mut v = vec![first];
        if !self.fix.is_empty() {
            v.push(format!("{}: {}", if self.kind == Kind::BadInput { "hint" } else { "next" }, self.fix));
        }
        v
    }
}

/// The model pick as data (eas-plan/v1 `model_pick`), beside the `model` and `fit` sentences.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelPick {
    /// The catalog entry picked; `null` when no candidate fits.
    pub name: Option<String>,
    /// Why: the candidate's role (`default`, `fallback`), `forced` (with any warning), or why none.
    pub reason: String,
    /// The KV-cache decision for the pick; `null` without a pick.
    pub fit: Option<FitPick>,
}

/// What fit did to the pick's KV cache.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitPick {
    /// `lowered` (fit sized it under the catalog's), `kept` (the catalog's), `not-written` (the
    /// catalog sets none; the server sizes its own).
    pub verdict: &'static str,
    /// The KV cache written or kept, in whole GiB (`null`: none written).
    pub kv_cache_gib: Option<u64>,
}

/// The key a decision line writes and its value, when it writes one: the generator writes
/// each as `[label: ][file ]key: <YAML scalar or flow list>[ (note)]`, e.g. `metallb_enabled:
/// false`, `bring-your-own cluster: global_config existing_kubernetes: "/kube/config"`,
/// `models.yaml defaults.require_amx: false`. Lines that write nothing (`model: ...`, `KV cache:
/// ...`, `note: ...`, `read by ...`) have none. Pure.
pub fn key_value(choice: &str) -> Option<(String, serde_json::Value)> {
    let mut start = 0;
    for (at, _) in choice.match_indices(": ") {
        let rest = &choice[at + 2..];
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
        let parsed = match values.next() {
            Some(Ok(v)) if values.byte_offset() == rest.len() || rest[values.byte_offset()..].starts_with(" (") => {
                Some(v)
            }
            _ => None,
        };
        let key = choice[start..at].trim();
        if let Some(v) = parsed.filter(|v| !v.is_object()) {
            let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-. ".contains(c));
            return plain.then(|| (key.to_string(), v));
        }
        start = at + 2;
    }
    None
}

/// One `eas config` decision as data: `fact -> choice`, and where the rule was read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanDecision {
    pub fact: String,
    pub choice: String,
    /// `repo@sha7 path:lines`.
    pub source: String,
    pub permalink: String,
}

/// What the overlay decider chose for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchOutcome {
    Apply,
    Skip,
    Merged,
    Fixed,
    Stop,
}

/// One overlay row's decision as data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanPatch {
    pub id: String,
    pub outcome: PatchOutcome,
    pub fact: String,
    pub choice: String,
    pub source: String,
    /// A permalink when the source is a file of the pinned tree, else the source again.
    pub permalink: String,
}

pub const PLAN_SCHEMA: &str = "eas-plan/v1";

/// How a dry run exits on its blockers (SPEC §4): as a refusal (3) when one is among them, else
/// as a STOP (4) when one is, else with success (`None`); with `--fail-on-blockers`, as the first
/// blocker.
pub fn dry_run_exit(blockers: &[Blocker], fail_on_blockers: bool) -> Option<Kind> {
    if fail_on_blockers {
        return blockers.first().map(|b| b.kind);
    }
    [Kind::Refusal, Kind::Stop].into_iter().find(|k| blockers.iter().any(|b| b.kind == *k))
}

/// Patch counts for the summary: (apply, skip, STOP); merged and fixed rows are skipped too.
pub fn patch_counts(overlay: &[PlanPatch]) -> (usize, usize, usize) {
    let count = |f: &dyn Fn(PatchOutcome) -> bool| overlay.iter().filter(|p| f(p.outcome)).count();
    (
        count(&|o| o == PatchOutcome::Apply),
        count(&|o| matches!(o, PatchOutcome::Skip | PatchOutcome::Merged | PatchOutcome::Fixed)),
        count(&|o| o == PatchOutcome::Stop),
    )
}

pub fn duration(secs: u64) -> String {
    if secs >= 60 && secs.is_multiple_of(60) { format!("{}m", secs / 60) } else { format!("{secs}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_exits_as_a_refusal_before_a_stop_and_with_fail_on_blockers_as_the_first() {
        let b = |kind| Blocker::new(PhaseId::Config, "c", "f", kind);
        let (failed, stop, refusal) = (b(Kind::Failed), b(Kind::Stop), b(Kind::Refusal));
        assert_eq!(dry_run_exit(&[], false), None);
        assert_eq!(dry_run_exit(std::slice::from_ref(&failed), false), None);
        assert_eq!(dry_run_exit(&[failed.clone(), stop.clone()], false), Some(Kind::Stop));
        assert_eq!(dry_run_exit(&[stop.clone(), refusal.clone()], false), Some(Kind::Refusal));
        assert_eq!(dry_run_exit(&[failed.clone(), refusal.clone()], true), Some(Kind::Failed));
        // The plan records the kind as its exit code, and the lines follow the kind.
        assert_eq!(serde_json::to_value(&refusal).unwrap()["exit_code"], 3);
        assert_eq!(refusal.lines()[0], "REFUSE: c");
        assert_eq!(stop.lines()[0], "STOP: c");
        assert_eq!(b(Kind::BadInput).lines(), ["error: config: c", "hint: f"]);
        assert_eq!(failed.lines(), ["error: config: c", "next: f"]);
    }

    #[test]
    fn phases_are_in_pipeline_order_with_unique_names() {
        let names: Vec<&str> = PHASES.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "lock",
                "preflight",
                "bastion",
                "facts",
                "trees",
                "config",
                "overlay",
                "classify",
                "prepare",
                "install",
                "record",
                "verify",
                "unlock"
            ]
        );
        for (i, p) in PHASES.iter().enumerate() {
            assert_eq!(p.id.spec().name, p.name);
            assert_eq!(p.id.to_string(), p.name);
            assert_eq!(serde_json::to_value(p.id).unwrap(), serde_json::json!(p.name));
            assert!(i == 0 || PHASES[i - 1].id < p.id, "PhaseId order follows the table");
            assert!(p.timeout > Duration::ZERO && !p.dry_run_says.is_empty());
        }
    }

    /// What each phase writes in a real run (None: it only reads).
    fn writes(id: PhaseId) -> Option<&'static str> {
        match id {
            PhaseId::Lock => Some("the lock file in the state directory"),
            PhaseId::Preflight => None,
            PhaseId::Bastion => Some("the bastion image (labelled io.eas.managed=true)"),
            PhaseId::Facts => None,
            PhaseId::Trees => Some("the repository cache and this run's work tree under the state directory"),
            PhaseId::Config => None,
            PhaseId::Overlay => Some("the k3s/k3d patches, applied to the work tree"),
            PhaseId::Prepare => {
                Some("env/<env>/ in the work tree: init, global_config.yaml, models.yaml, repos.<layer>.yaml")
            }
            PhaseId::Install => Some("the cluster: namespaces, Helm releases, CRDs, the model server"),
            PhaseId::Verify => None,
            PhaseId::Record => Some("state.json: the journal and the ledger of what this run created"),
            PhaseId::Classify => None,
            PhaseId::Unlock => Some("the cluster's Lease and the lock file, released"),
        }
    }

    #[test]
    fn a_dry_run_writes_nothing() {
        let stop = dry_run_stop();
        assert_eq!(stop, PhaseId::Prepare);
        for p in &PHASES {
            if p.id >= stop {
                assert_eq!(p.dry_run, DryRun::Stops, "{}: every phase from the stop on is not run", p.name);
            } else if writes(p.id).is_some() {
                assert_eq!(
                    p.dry_run,
                    DryRun::ReadsOnly,
                    "{}: a writing phase before the stop runs only its read-only half",
                    p.name
                );
            } else {
                assert_eq!(p.dry_run, DryRun::Runs, "{}", p.name);
            }
        }
        // What reaches the cluster is after the stop.
        assert!(writes(PhaseId::Install).unwrap().contains("cluster"));
        assert!(PhaseId::Install > stop && PhaseId::Record > stop);
    }

    #[test]
    fn timeouts_cover_what_they_wait_for() {
        // The vLLM startup probe alone allows 20 minutes; verify must outlast it.
        assert!(PhaseId::Verify.spec().timeout > Duration::from_secs(20 * 60));
        assert_eq!(PhaseId::Install.spec().timeout, Duration::from_secs(90 * 60));
        assert_eq!(PhaseId::Verify.spec().timeout, Duration::from_secs(40 * 60));
        assert_eq!(PhaseId::Lock.spec().resume, Resume::Always);
        assert_eq!(PhaseId::Install.spec().resume, Resume::WhenUnchanged);
    }

    fn facts() -> Facts {
        let text = r#"{
          "schema": "eas-facts/v1", "gathered_at": "2026-01-01T00:00:00Z",
          "cluster": { "context": "k3d-gpu", "k3d_cluster": "gpu", "server_version": "v1.37.1+k3s1" },
          "docker": { "rootless": false },
          "nodes": [ { "name": "k3d-gpu-server-0", "labels": {}, "annotations": {},
                       "capacity": { "cpu": "32", "memory": "131072000Ki" },
                       "allocatable": { "cpu": "32", "memory": "131072000Ki", "gpu.intel.com/i915": "1", "pods": "110" },
                       "containerd": null } ],
          "daemonsets": [],
          "helm_releases": [ { "namespace": "node-feature-discovery", "name": "node-feature-discovery", "chart": "c", "status": "deployed" } ],
          "namespaces": ["default", "kube-system"], "agent_sandbox": null, "fit": null }"#;
        Facts::parse(text).unwrap()
    }

    #[test]
    fn facts_summary_keeps_devices_only() {
        let f = FactsSummary::new(&facts(), "h", &["gpu.intel.com/"]);
        let g = &f.node_groups[0];
        assert_eq!(g.devices, BTreeMap::from([("gpu.intel.com/i915".to_string(), "1".to_string())]));
        assert_eq!(g.memory, "125.0 GiB");
        assert_eq!(f.helm_releases, ["node-feature-discovery/node-feature-discovery"]);
        assert_eq!(f.docker_rootless, Some(false));
    }

    #[test]
    fn the_plan_serialises_as_data() {
        let mut p = Plan::new(&PhaseTimeouts::default());
        p.set_facts(FactsSummary::new(&facts(), "0123456789abcdef0123", &["gpu.intel.com/"]));
        p.set_image(ImagePlan { tag: "eas-bastion:3f2a1b".into(), action: ImageAction::Reuse });
        let decision = PlanDecision { fact: "a".into(), choice: "b".into(), source: "s".into(), permalink: "u".into() };
        p.add_decisions(PhaseId::Config, [decision]);
        p.set_overlay(vec![PlanPatch {
            id: "0002".into(),
            outcome: PatchOutcome::Apply,
            fact: "f".into(),
            choice: "apply 0002".into(),
            source: "s".into(),
            permalink: "u".into(),
        }]);
        let argv =
            crate::installer::command::install_argv("agent-toolkit", "k3d-gpu", "/eas/out/eas-overrides.yaml").unwrap();
        p.add_command(Runs::Install, argv);
        p.add_unknown(Missing { phase: PhaseId::Trees, reason: "EI could not be fetched".into() });
        let json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(json["schema"], PLAN_SCHEMA);
        assert_eq!(json["image"]["action"], "reuse");
        assert_eq!(json["decisions"][0]["fact"], "a");
        assert_eq!(json["decisions"][0]["choice"], "b");
        assert_eq!(json["overlay"][0]["outcome"], "apply");
        assert_eq!(json["commands"][0]["phase"], "install");
        assert_eq!(json["commands"][0]["argv"][1], "install");
        assert_eq!(json["phases"][7]["dry_run"], "runs");
        assert_eq!(json["phases"][8]["dry_run"], "stops");
        assert_eq!(json["phases"][0]["dry_run"], "reads-only");
        assert_eq!(json["unknown"][0]["phase"], "trees");
        assert_eq!(json["facts"]["node_groups"][0]["devices"]["gpu.intel.com/i915"], "1");
        assert_eq!(json["facts"]["node_groups"][0]["role"], "worker");
        assert_eq!(duration(90), "90s");
    }

    #[test]
    fn nodes_group_by_shape_and_name_at_most_three() {
        let mut f = facts();
        let template = f.nodes[0].clone();
        for i in 0..6 {
            let mut n = template.clone();
            n.name = format!("agent-{i}");
            n.allocatable.remove("gpu.intel.com/i915");
            f.nodes.push(n);
        }
        f.nodes[0].labels.insert("node-role.kubernetes.io/control-plane".into(), "true".into());
        let s = FactsSummary::new(&f, "h", &["gpu.intel.com/"]);
        assert_eq!(s.node_count, 7);
        assert_eq!(s.node_groups.len(), 2);
        assert_eq!(s.node_groups[0].count, 1, "the odd one out comes first");
        assert_eq!(s.node_groups[0].role, "control-plane");
        assert_eq!(s.node_groups[1].count, 6);
        assert_eq!(s.node_groups[1].names, ["agent-0", "agent-1", "agent-2"]);
        assert!(s.node_groups[1].devices.is_empty());
    }
}
