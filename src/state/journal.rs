//! `state.json`: the record of the latest run on a cluster, rewritten after every phase so a
//! failed or interrupted run can always be inspected, resumed or removed.
//!
//! Written atomically (a temporary file in the same directory, synced, then renamed), so a
//! crash leaves the previous record or the new one, never half of one. A record of another
//! `schema_version` is refused rather than guessed at.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ledger::Ledger;
use crate::plan::{PHASES, PhaseId};

pub const FILE: &str = "state.json";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Running,
    Done,
    Failed,
    Interrupted,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseEntry {
    pub phase: PhaseId,
    pub status: Status,
    pub started: Option<String>,
    pub finished: Option<String>,
    pub inputs_hash: Option<String>,
    pub message: Option<String>,
}

/// The pinned commits the run used.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PinsRecord {
    pub profile: String,
    /// Tree name (`eas`, `ei`, `eat`) → full commit SHA.
    pub shas: BTreeMap<String, String>,
}

/// What identifies a run when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub cluster_key: String,
    pub context: String,
    pub layer: String,
    pub env: String,
    pub pins: PinsRecord,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub schema_version: u32,
    pub eas_version: String,
    pub cluster_key: String,
    pub context: String,
    /// The API server the context pointed at: with `context`, how `status` (and the support
    /// bundle) find this record when the server does not answer to give its key. Absent in
    /// records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub layer: String,
    pub env: String,
    pub started: String,
    pub finished: Option<String>,
    pub pins: PinsRecord,
    /// sha256 of the facts document.
    pub facts_hash: Option<String>,
    /// `choices.txt` lines.
    pub decisions: Vec<String>,
    /// Overlay decision lines.
    pub overlay: Vec<String>,
    pub bastion_image: Option<String>,
    /// The copy of the pins this run read (bastion artifacts and base included), kept beside
    /// the record as the install begins, and where the run read them: `eas down` rebuilds the
    /// run's image from it when the image is gone, whatever the pins say by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins_kept: Option<KeptPins>,
    /// The installer's argv as run, already redacted (secrets travel in the environment).
    pub installer_command: Vec<String>,
    pub phases: Vec<PhaseEntry>,
    pub exit_code: Option<u8>,
    pub log_path: Option<PathBuf>,
    pub ledger: Ledger,
    /// The selection this run resolved (`selection::Selection`): what a later run fills its unset
    /// settings from. Absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<super::selection::Selection>,
    /// An `eas down` of this record that was interrupted: the record is kept as it was, and the
    /// next `eas down` starts over from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<DownEntry>,
}

/// Where a run's pins were kept, and where it read them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptPins {
    pub file: PathBuf,
    /// The source as the run named it: `/path (--pins)`, `built-in`, ...
    pub source: String,
}

/// How an `eas down` that did not finish ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DownEntry {
    pub status: Status,
    pub started: String,
    pub finished: String,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{path} is damaged: {msg}")]
    Malformed { path: PathBuf, msg: String },
    #[error("{path} has schema_version {found}, written by a newer eas (this one reads {SCHEMA_VERSION})")]
    Newer { path: PathBuf, found: u64 },
    #[error("{path} has schema_version {found}, written by an older eas (this one reads {SCHEMA_VERSION})")]
    Older { path: PathBuf, found: u64 },
}

impl JournalError {
    pub fn hint(&self) -> String {
        match self {
            JournalError::Read { source, path } | JournalError::Write { source, path } => io_hint(source, path),
            JournalError::Malformed { path, .. } => format!(
                "move {} aside to start afresh; `eas down` then no longer knows what the earlier run created",
                path.display()
            ),
            JournalError::Newer { .. } => "upgrade eas, or pass another --state-dir".into(),
            JournalError::Older { path, .. } => format!(
                "finish with the eas that wrote it (`eas down`), or move {} aside",
                path.parent().unwrap_or(path).display()
            ),
        }
    }
}

/// What to do about a state directory that cannot be read or written, by cause: a full disk and a
/// read-only file system are not permission problems.
pub fn io_hint(e: &std::io::Error, path: &Path) -> String {
    let dir = path.parent().unwrap_or(path).display();
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
            format!("the disk holding {dir} is full: free some space, or pass --state-dir DIR on another disk")
        }
        std::io::ErrorKind::ReadOnlyFilesystem => {
            format!("{dir} is on a read-only file system: pass --state-dir DIR on a writable one")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("check the permissions of {dir} (or pass --state-dir DIR)")
        }
        _ => format!("check {dir} (or pass --state-dir DIR)"),
    }
}

impl State {
    /// A record of an inference-layer run on cluster `k` (context `c`, env `k3d-gpu`, profile
    /// `main`) started at `started`, for tests.
    #[cfg(test)]
    pub fn sample(started: &str) -> State {
        let info = RunInfo {
            cluster_key: "k".into(),
            context: "c".into(),
            layer: "inference".into(),
            env: "k3d-gpu".into(),
            pins: PinsRecord { profile: "main".into(), shas: Default::default() },
        };
        State::new(info, started)
    }

    /// A new record: every phase pending.
    pub fn new(info: RunInfo, now: &str) -> Self {
        State {
            schema_version: SCHEMA_VERSION,
            eas_version: env!("CARGO_PKG_VERSION").to_string(),
            cluster_key: info.cluster_key,
            context: info.context,
            server: None,
            layer: info.layer,
            env: info.env,
            started: now.to_string(),
            finished: None,
            pins: info.pins,
            facts_hash: None,
            decisions: Vec::new(),
            overlay: Vec::new(),
            bastion_image: None,
            pins_kept: None,
            installer_command: Vec::new(),
            phases: PHASES
                .iter()
                .map(|p| PhaseEntry {
                    phase: p.id,
                    status: Status::Pending,
                    started: None,
                    finished: None,
                    inputs_hash: None,
                    message: None,
                })
                .collect(),
            exit_code: None,
            log_path: None,
            ledger: Ledger::default(),
            selection: None,
            down: None,
        }
    }

    pub fn entry(&self, phase: PhaseId) -> &PhaseEntry {
        self.phases.iter().find(|e| e.phase == phase).expect("every phase has an entry")
    }

    fn entry_mut(&mut self, phase: PhaseId) -> &mut PhaseEntry {
        self.phases.iter_mut().find(|e| e.phase == phase).expect("every phase has an entry")
    }

    /// Takes over what a resumed run keeps from the previous record: its ledger (so `eas down`
    /// still knows what the first run created) and the entries of the phases it skips.
    pub fn carry_over(&mut self, prev: &State, kept: &[PhaseId]) {
        self.ledger = prev.ledger.clone();
        // An install skipped as finished keeps the pins it was made with.
        if kept.contains(&PhaseId::Install) {
            self.pins_kept = prev.pins_kept.clone();
        }
        for &p in kept {
            let old = prev.entry(p).clone();
            *self.entry_mut(p) = old;
        }
    }

    pub fn begin(&mut self, phase: PhaseId, inputs_hash: Option<String>, now: &str) {
        let e = self.entry_mut(phase);
        e.status = Status::Running;
        e.started = Some(now.to_string());
        e.finished = None;
        e.inputs_hash = inputs_hash;
        e.message = None;
    }

    pub fn finish(&mut self, phase: PhaseId, status: Status, message: Option<String>, now: &str) {
        let e = self.entry_mut(phase);
        e.status = status;
        e.finished = Some(now.to_string());
        e.message = message;
    }

    /// Ctrl-C: whatever was running is recorded as interrupted, and the run as exit 130.
    pub fn interrupt(&mut self, now: &str) {
        for e in self.phases.iter_mut().filter(|e| e.status == Status::Running) {
            e.status = Status::Interrupted;
            e.finished = Some(now.to_string());
            e.message = Some("interrupted (Ctrl-C or SIGTERM)".into());
        }
        self.exit_code = Some(crate::plan::Kind::Interrupted.exit_code());
        self.finished = Some(now.to_string());
    }

    /// The phase that ended the run unsuccessfully, if one did.
    pub fn failed_phase(&self) -> Option<&PhaseEntry> {
        self.phases.iter().find(|e| matches!(e.status, Status::Failed | Status::Interrupted | Status::Running))
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("state serialises");
        s.push('\n');
        s
    }

    pub fn parse(text: &str, path: &Path) -> Result<State, JournalError> {
        let malformed = |msg: String| JournalError::Malformed { path: path.to_path_buf(), msg };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| malformed(format!("not JSON at line {} column {}: {e}", e.line(), e.column())))?;
        match value.get("schema_version").and_then(serde_json::Value::as_u64) {
            None => return Err(malformed("no schema_version".into())),
            Some(v) if v > u64::from(SCHEMA_VERSION) => {
                return Err(JournalError::Newer { path: path.to_path_buf(), found: v });
            }
            Some(v) if v < u64::from(SCHEMA_VERSION) => {
                return Err(JournalError::Older { path: path.to_path_buf(), found: v });
            }
            Some(_) => {}
        }
        serde_path_to_error::deserialize(value).map_err(|e| malformed(format!("field `{}`: {}", e.path(), e.inner())))
    }

    /// The record at `path`, or None when there is none yet.
    pub fn load(path: &Path) -> Result<Option<State>, JournalError> {
        use crate::bounded::{self, Kind, ReadError};
        let malformed = |msg: String| JournalError::Malformed { path: path.to_path_buf(), msg };
        match bounded::read_string(path, Kind::State) {
            Ok(text) => State::parse(&text, path).map(Some),
            Err(ReadError::NotFound { .. }) => Ok(None),
            // Not UTF-8, or past the limit (`/dev/zero`): damaged like bad JSON (exit 2), not a
            // permissions problem.
            Err(ReadError::NotText { .. }) => Err(malformed("not UTF-8 text".into())),
            Err(ReadError::TooLarge { .. }) => {
                Err(malformed(format!("larger than its limit of {}", bounded::shown(Kind::State.limit()))))
            }
            Err(ReadError::Interrupted { .. }) => {
                Err(JournalError::Read { path: path.to_path_buf(), source: std::io::ErrorKind::Interrupted.into() })
            }
            Err(ReadError::Io { source, .. }) => Err(JournalError::Read { path: path.to_path_buf(), source }),
        }
    }

    pub fn save(&self, path: &Path) -> Result<(), JournalError> {
        write_atomic(path, self.to_json().as_bytes())
            .map_err(|source| JournalError::Write { path: path.to_path_buf(), source })
    }
}

/// Writes `bytes` to `path` through a synced temporary file in the same directory and a rename.
/// The directory is created private to the user when missing.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    crate::atomic::write_private(path, bytes)
}

pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ledger::Snapshot;

    /// `fixtures/state/installed.json`, the record of a completed `eas up` that the integration
    /// tests plant beside an `expected.json` (verify and status decide "installed" from it): what
    /// this code writes for such a run. `UPDATE_GOLDEN=1` rewrites it.
    #[test]
    fn the_planted_install_record_is_what_a_completed_run_writes() {
        let mut s = State::new(info(), "2026-12-06T10:00:00Z");
        for p in PHASES.iter() {
            s.begin(p.id, None, "2026-12-06T10:00:01Z");
            s.finish(p.id, Status::Done, None, "2026-12-06T10:30:00Z");
        }
        s.exit_code = Some(crate::plan::EXIT_SUCCESS);
        s.finished = Some("2026-12-06T10:30:00Z".into());
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/state/installed.json");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, s.to_json()).unwrap();
        }
        let planted = State::load(&path).unwrap().expect("the fixture exists");
        assert_eq!(planted.to_json(), s.to_json());
        assert!(crate::state::records::began_install(&planted));
    }

    fn info() -> RunInfo {
        RunInfo {
            cluster_key: "uid-1".into(),
            context: "k3d-gpu".into(),
            layer: "inference".into(),
            env: "k3d-gpu".into(),
            pins: PinsRecord { profile: "main".into(), shas: BTreeMap::from([("eas".into(), "a".repeat(40))]) },
        }
    }

    #[test]
    fn a_run_is_journalled_phase_by_phase() {
        let mut s = State::new(info(), "t0");
        assert!(s.phases.iter().all(|e| e.status == Status::Pending));
        assert_eq!(s.phases.len(), PHASES.len());
        s.begin(PhaseId::Lock, None, "t1");
        s.finish(PhaseId::Lock, Status::Done, None, "t2");
        s.begin(PhaseId::Install, Some("h".into()), "t3");
        assert_eq!(s.entry(PhaseId::Install).status, Status::Running);
        assert_eq!(s.failed_phase().map(|e| e.phase), Some(PhaseId::Install));
        s.interrupt("t4");
        let e = s.entry(PhaseId::Install);
        assert_eq!(
            (e.status, e.finished.as_deref(), e.inputs_hash.as_deref()),
            (Status::Interrupted, Some("t4"), Some("h"))
        );
        assert_eq!(s.exit_code, Some(130));
        assert_eq!(s.entry(PhaseId::Lock).status, Status::Done);
    }

    #[test]
    fn saved_atomically_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("uid-1").join(FILE);
        assert!(State::load(&path).unwrap().is_none());
        let mut s = State::new(info(), "t0");
        s.ledger.before = Snapshot { namespaces: ["default".to_string()].into(), ..Snapshot::default() };
        s.installer_command = vec!["./es_auto_installer.sh".into(), "install".into()];
        s.save(&path).unwrap();
        assert_eq!(State::load(&path).unwrap(), Some(s.clone()));
        s.exit_code = Some(0);
        s.save(&path).unwrap();
        assert_eq!(State::load(&path).unwrap().unwrap().exit_code, Some(0));
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [FILE], "no temporary file is left behind");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["phases"][0]["phase"], "lock");
        assert_eq!(json["phases"][0]["status"], "pending");
    }

    #[test]
    fn other_schema_versions_are_refused() {
        let p = Path::new("/s/uid/state.json");
        let mut v = serde_json::to_value(State::new(info(), "t0")).unwrap();
        v["schema_version"] = 2.into();
        let newer = State::parse(&v.to_string(), p).unwrap_err();
        assert!(matches!(newer, JournalError::Newer { found: 2, .. }), "{newer}");
        assert!(newer.hint().contains("upgrade eas"));
        v["schema_version"] = 0.into();
        let older = State::parse(&v.to_string(), p).unwrap_err();
        assert!(matches!(older, JournalError::Older { found: 0, .. }));
        assert!(older.hint().contains("/s/uid"));
        let cases = [("{", "not JSON"), ("{}", "no schema_version"), (r#"{"schema_version": 1}"#, "field")];
        for (text, want) in cases {
            let e = State::parse(text, p).unwrap_err();
            assert!(matches!(&e, JournalError::Malformed { msg, .. } if msg.contains(want)), "{text}: {e}");
            assert!(e.hint().contains("move /s/uid/state.json aside"));
        }
    }

    #[test]
    fn a_resumed_run_keeps_the_ledger_and_the_kept_phases() {
        let mut prev = State::new(info(), "t0");
        prev.ledger.created.namespaces.insert("llm-inference".into());
        prev.begin(PhaseId::Prepare, Some("hp".into()), "t1");
        prev.finish(PhaseId::Prepare, Status::Done, None, "t2");
        prev.begin(PhaseId::Install, Some("hi".into()), "t3");
        prev.finish(PhaseId::Install, Status::Failed, Some("kserve".into()), "t4");
        let mut next = State::new(info(), "t5");
        next.carry_over(&prev, &[PhaseId::Prepare]);
        assert_eq!(next.ledger, prev.ledger);
        assert_eq!(next.entry(PhaseId::Prepare), prev.entry(PhaseId::Prepare));
        assert_eq!(next.entry(PhaseId::Install).status, Status::Pending);
        assert_eq!(next.started, "t5");
    }

    #[test]
    fn a_state_file_that_is_not_utf8_is_damaged_not_unreadable() {
        let (_dir, path) = crate::testing::temp_path("state.json");
        std::fs::write(&path, b"{\"schema_version\": 1, \xff\xfe}").unwrap();
        let e = State::load(&path).unwrap_err();
        // Malformed, which the command edge makes bad input (exit 2; `commands::edge`'s tests).
        assert!(matches!(e, JournalError::Malformed { .. }), "{e:?}");
    }
}
