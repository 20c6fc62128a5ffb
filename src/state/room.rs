//! Whether the state directory can take a run's writes, decided without writing: its file
//! system's read-only flag, `access(W_OK)` and the free space, read on the directory or, for a
//! state directory not made yet, its nearest existing parent. `eas up`'s lock plan half makes a
//! failure a blocker (exit 1: the real run would fail on its first write there) and `eas
//! doctor`'s disk line says the same. The decision ([`decide`]) is pure; [`look`] is the seam
//! that asks the kernel.

use std::fmt;
use std::path::{Path, PathBuf};

/// The least free space a run needs under the state directory (the work tree, the attempt's
/// and the install's records and logs, beside the artifact caches and the bastion's image on
/// the same disk in the common layout).
pub const MIN_FREE: u64 = 10 << 30;

/// The minimum in bytes, when set (tests on a small disk; an operator who knows better).
pub const MIN_FREE_VAR: &str = "EAS_STATE_MIN_FREE";

/// The minimum the environment asks for, or [`MIN_FREE`].
pub fn min_free(env: &crate::settings::Env) -> u64 {
    env.nonempty(MIN_FREE_VAR).and_then(|v| v.parse().ok()).unwrap_or(MIN_FREE)
}

/// What the file system says of the nearest existing directory `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub at: PathBuf,
    /// `ST_RDONLY` in its `statvfs` flags.
    pub read_only: bool,
    /// `access(W_OK)` (as root too: a read-only mount answers `EROFS`).
    pub writable: bool,
    /// `f_bavail * f_frsize`: what this user may still write.
    pub free: u64,
}

/// Why the state directory `dir` cannot take the run's writes.
#[derive(Debug, Clone, PartialEq)]
pub enum RoomError {
    ReadOnly {
        dir: PathBuf,
        at: PathBuf,
    },
    NotWritable {
        dir: PathBuf,
        at: PathBuf,
    },
    Full {
        dir: PathBuf,
        at: PathBuf,
        free: u64,
        min: u64,
    },
    /// The kernel could not say (`statvfs` failed, or no parent exists).
    Unknown {
        dir: PathBuf,
        at: PathBuf,
        msg: String,
    },
}

impl RoomError {
    fn paths(&self) -> (&Path, &Path) {
        match self {
            RoomError::ReadOnly { dir, at }
            | RoomError::NotWritable { dir, at }
            | RoomError::Full { dir, at, .. }
            | RoomError::Unknown { dir, at, .. } => (dir, at),
        }
    }

    /// What to do: another state directory, or room on this one.
    pub fn hint(&self) -> String {
        let (_, at) = self.paths();
        let at = at.display();
        match self {
            RoomError::ReadOnly { .. } => {
                format!("pass --state-dir DIR on a writable file system ({at} is mounted read-only)")
            }
            RoomError::NotWritable { .. } => format!("check the permissions of {at}, or pass --state-dir DIR"),
            RoomError::Full { min, .. } => {
                format!(
                    "free space on the disk holding {at} (at least {} GiB), or pass --state-dir DIR on another disk",
                    min >> 30
                )
            }
            RoomError::Unknown { .. } => format!("check {at}, or pass --state-dir DIR"),
        }
    }
}

impl fmt::Display for RoomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (dir, at) = self.paths();
        let (d, a) = (dir.display(), at.display());
        // A state directory not made yet is judged by the parent it would be made in.
        let which = if dir == at {
            format!("the state directory {d}")
        } else {
            format!("the state directory {d} (to be made in {a})")
        };
        match self {
            RoomError::ReadOnly { .. } => write!(f, "{which} is on a read-only file system"),
            RoomError::NotWritable { .. } => write!(f, "{which} cannot be written: {a} is not writable by this user"),
            RoomError::Full { free, min, .. } => {
                write!(f, "{which} has {} GiB free at {a}, less than the {} GiB a run needs", free >> 30, min >> 30)
            }
            RoomError::Unknown { msg, .. } => write!(f, "{which} cannot be checked: {a}: {msg}"),
        }
    }
}

impl std::error::Error for RoomError {}

/// The decision: read-only first (it says why a write fails whatever the permissions), then
/// permissions, then room.
pub fn decide(dir: &Path, seen: &Seen, min: u64) -> Result<(), RoomError> {
    let (dir, at) = (dir.to_path_buf(), seen.at.clone());
    if seen.read_only {
        return Err(RoomError::ReadOnly { dir, at });
    }
    if !seen.writable {
        return Err(RoomError::NotWritable { dir, at });
    }
    if seen.free < min {
        return Err(RoomError::Full { dir, at, free: seen.free, min });
    }
    Ok(())
}

/// The nearest existing directory at or above `dir` (a relative one ends at `.`).
pub fn nearest_existing(dir: &Path, exists: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut p = dir;
    loop {
        if exists(p) {
            return Some(p.to_path_buf());
        }
        p = match p.parent() {
            Some(q) if q.as_os_str().is_empty() => Path::new("."),
            Some(q) => q,
            None => return None,
        };
    }
}

/// The seam: `statvfs` and `access(W_OK)` on the nearest existing directory at or above `dir`.
pub fn look(dir: &Path) -> Result<Seen, RoomError> {
    use std::os::unix::ffi::OsStrExt;
    let unknown = |at: &Path, msg: String| RoomError::Unknown { dir: dir.to_path_buf(), at: at.to_path_buf(), msg };
    let at = nearest_existing(dir, Path::is_dir).ok_or_else(|| unknown(dir, "no parent directory exists".into()))?;
    let c = std::ffi::CString::new(at.as_os_str().as_bytes()).map_err(|e| unknown(&at, e.to_string()))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` a buffer of the size statvfs writes.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(unknown(&at, std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // SAFETY: `c` is a NUL-terminated path.
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    // Both are 64-bit on the Linux targets eas builds for (`fsblkcnt_t`, `c_ulong`).
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    Ok(Seen { at, read_only: st.f_flag & libc::ST_RDONLY != 0, writable, free })
}

/// [`look`] then [`decide`]: what the kernel said (when it said) and the decision.
pub fn check(dir: &Path, min: u64) -> (Option<Seen>, Result<(), RoomError>) {
    match look(dir) {
        Ok(seen) => {
            let decided = decide(dir, &seen, min);
            (Some(seen), decided)
        }
        Err(e) => (None, Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(read_only: bool, writable: bool, free: u64) -> Seen {
        Seen { at: PathBuf::from("/mnt/s"), read_only, writable, free }
    }

    #[test]
    fn read_only_then_permissions_then_room() {
        let dir = Path::new("/mnt/s/uid");
        let ro = decide(dir, &seen(true, false, 0), MIN_FREE).unwrap_err();
        assert_eq!(
            ro.to_string(),
            "the state directory /mnt/s/uid (to be made in /mnt/s) is on a read-only file system"
        );
        assert!(ro.hint().starts_with("pass --state-dir DIR on a writable file system (/mnt/s is mounted read-only)"));
        let denied = decide(dir, &seen(false, false, MIN_FREE), MIN_FREE).unwrap_err();
        assert!(matches!(denied, RoomError::NotWritable { .. }), "{denied}");
        assert!(denied.to_string().ends_with("cannot be written: /mnt/s is not writable by this user"), "{denied}");
        let full = decide(dir, &seen(false, true, MIN_FREE - 1), MIN_FREE).unwrap_err();
        assert_eq!(
            full.to_string(),
            "the state directory /mnt/s/uid (to be made in /mnt/s) has 9 GiB free at /mnt/s, less than the 10 GiB a run needs"
        );
        assert!(full.hint().contains("at least 10 GiB"), "{}", full.hint());
        assert_eq!(decide(dir, &seen(false, true, MIN_FREE), MIN_FREE), Ok(()), "exactly the minimum passes");
        let here = decide(Path::new("/mnt/s"), &seen(true, true, MIN_FREE), MIN_FREE).unwrap_err();
        assert_eq!(here.to_string(), "the state directory /mnt/s is on a read-only file system", "an existing one");
    }

    #[test]
    fn the_nearest_existing_parent_is_judged() {
        let exists = |p: &Path| p == Path::new("/mnt") || p == Path::new("/");
        assert_eq!(nearest_existing(Path::new("/mnt/s/uid/work"), exists), Some(PathBuf::from("/mnt")));
        assert_eq!(nearest_existing(Path::new("/mnt"), exists), Some(PathBuf::from("/mnt")));
        let none = |_: &Path| false;
        assert_eq!(nearest_existing(Path::new("/a/b"), none), None);
        let dot = |p: &Path| p == Path::new(".");
        assert_eq!(nearest_existing(Path::new("rel/dir"), dot), Some(PathBuf::from(".")), "a relative one");
    }

    #[test]
    fn the_seam_reads_a_writable_temporary_directory() {
        let d = tempfile::tempdir().unwrap();
        let seen = look(&d.path().join("not-yet/uid")).unwrap();
        assert_eq!(seen.at, d.path(), "the nearest existing parent");
        assert!(seen.writable && !seen.read_only && seen.free > 0, "{seen:?}");
        assert_eq!(decide(&d.path().join("uid"), &seen, 0), Ok(()));
    }
}
