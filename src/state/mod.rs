//! The run record of SPEC §6: where it lives, the journal ([`journal`]), the one-run-per-cluster
//! lock ([`lock`]), what a later run may skip ([`resume`]), and the ledger of what a run created
//! with the guard `eas down` applies ([`ledger`]).
//!
//! Layout: `<state-dir>/<cluster-key>/` where the key is the `kube-system` namespace UID (stable
//! for a cluster's life, different for a re-created cluster of the same name), holding
//! `state.json`, `lock`, `logs/` and the run's `work/` tree.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

pub mod journal;
pub mod ledger;
pub mod lock;
pub mod records;
pub mod resume;
pub mod room;
pub mod run;
pub mod selection;
pub mod since;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StateDirError {
    #[error("cluster key {0:?} is not a namespace UID: expected letters, digits and '-'")]
    BadKey(String),
    #[error("no state directory: neither XDG_STATE_HOME nor HOME is set; pass --state-dir DIR")]
    NoHome,
}

/// One cluster's directory under the state directory.
#[derive(Debug, Clone, PartialEq)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    pub fn new(root: &Path, cluster_key: &str) -> Result<Self, StateDirError> {
        let ok = !cluster_key.is_empty()
            && cluster_key.len() <= 64
            && cluster_key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(StateDirError::BadKey(cluster_key.to_string()));
        }
        Ok(StateDir { dir: root.join(cluster_key) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.join(journal::FILE)
    }

    pub fn lock_file(&self) -> PathBuf {
        self.dir.join(lock::FILE)
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// The run's EAS work tree (installer `env/`, applied overlay).
    pub fn work_dir(&self) -> PathBuf {
        self.dir.join("work")
    }
}

/// `$XDG_STATE_HOME/eas`, else `~/.local/state/eas` (SPEC §1). A relative XDG_STATE_HOME is
/// ignored, as the XDG base directory specification says.
pub fn default_root(xdg_state_home: Option<&OsStr>, home: Option<&OsStr>) -> Result<PathBuf, StateDirError> {
    if let Some(x) = xdg_state_home.map(Path::new).filter(|p| p.is_absolute()) {
        return Ok(x.join("eas"));
    }
    match home.map(Path::new).filter(|p| p.is_absolute()) {
        Some(h) => Ok(h.join(".local/state/eas")),
        None => Err(StateDirError::NoHome),
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of a value's JSON (the facts hash of SPEC §6).
pub fn hash_json<T: Serialize>(value: &T) -> String {
    sha256_hex(&serde_json::to_vec(value).expect("state values serialise"))
}

/// The hash of a phase's inputs. Each part is length-prefixed, so `["ab", "c"]` and `["a", "bc"]`
/// differ.
pub fn inputs_hash<S: AsRef<str>>(parts: &[S]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        let p = p.as_ref();
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_dir_io_error_has_a_next_line_for_its_cause() {
        use std::io::ErrorKind;
        let cases = [
            (
                ErrorKind::StorageFull,
                "/s/uid: No space left on device (os error 28)",
                "the disk holding /s/uid is full",
            ),
            (
                ErrorKind::ReadOnlyFilesystem,
                "/s/uid: Read-only file system (os error 30)",
                "/s/uid is on a read-only file system",
            ),
            (ErrorKind::PermissionDenied, "/s/uid: Permission denied (os error 13)", "check the permissions of /s/uid"),
        ];
        for (kind, first, next) in cases {
            let errno = match kind {
                ErrorKind::StorageFull => libc::ENOSPC,
                ErrorKind::ReadOnlyFilesystem => libc::EROFS,
                _ => libc::EACCES,
            };
            // The command edge prints these as `error: lock: ...` and `next: ...` (its tests).
            let e = crate::state::run::io_failure(
                crate::plan::PhaseId::Lock,
                Path::new("/s/uid"),
                std::io::Error::from_raw_os_error(errno),
            );
            assert_eq!((e.step.name(), e.to_string().as_str()), ("lock", first));
            assert!(e.hint().starts_with(next), "{}", e.hint());
        }
        let write = journal::JournalError::Write {
            path: "/s/uid/state.json".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(write.hint().starts_with("the disk holding /s/uid is full"), "{}", write.hint());
        let lock =
            lock::LockError::Io { path: "/s/uid/lock".into(), source: std::io::Error::from_raw_os_error(libc::EROFS) };
        assert!(lock.hint().starts_with("/s/uid is on a read-only file system"), "{}", lock.hint());
    }

    #[test]
    fn layout_under_the_cluster_key() {
        let s = StateDir::new(Path::new("/s"), "5f0c9a1e-3b7d-4c2a-9e8f-0123456789ab").unwrap();
        assert_eq!(s.dir(), Path::new("/s/5f0c9a1e-3b7d-4c2a-9e8f-0123456789ab"));
        assert_eq!(s.state_file(), Path::new("/s/5f0c9a1e-3b7d-4c2a-9e8f-0123456789ab/state.json"));
        assert_eq!(s.lock_file(), s.dir().join("lock"));
        assert_eq!(s.logs_dir(), s.dir().join("logs"));
        assert_eq!(s.work_dir(), s.dir().join("work"));
        for bad in ["", "..", "a/b", "x y", &"a".repeat(65)] {
            assert_eq!(StateDir::new(Path::new("/s"), bad), Err(StateDirError::BadKey(bad.to_string())));
        }
    }

    #[test]
    fn default_root_follows_xdg() {
        let os = |s: &'static str| Some(OsStr::new(s));
        let cases = [
            (os("/x/state"), os("/home/u"), Ok(PathBuf::from("/x/state/eas"))),
            (os("relative"), os("/home/u"), Ok(PathBuf::from("/home/u/.local/state/eas"))),
            (None, os("/home/u"), Ok(PathBuf::from("/home/u/.local/state/eas"))),
            (None, None, Err(StateDirError::NoHome)),
        ];
        for (xdg, home, want) in cases {
            assert_eq!(default_root(xdg, home), want, "{xdg:?} {home:?}");
        }
    }

    #[test]
    fn hashes() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_ne!(inputs_hash(&["ab", "c"]), inputs_hash(&["a", "bc"]));
        assert_eq!(inputs_hash(&["a", "b"]), inputs_hash(&[String::from("a"), String::from("b")]));
        assert_eq!(hash_json(&serde_json::json!({"a": 1})), sha256_hex(br#"{"a":1}"#));
    }
}
