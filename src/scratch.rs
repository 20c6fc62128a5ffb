//! Private scratch directories in the temporary directory, named for the process that made them
//! (`<prefix><pid>-<random>`, mode 0700), removed when dropped (every return, error, interruption
//! and panic), and swept by the next eas command when a SIGKILL left them: one of ours (same
//! owner) whose process is gone, or older than a day. Two kinds: the bastion's kubeconfig copy
//! (`eas-kube-`, a minted token, a client key) and the overlay's scratch git index
//! (`eas-overlay-index.`, a tree's whole index).

use std::path::Path;
use std::time::{Duration, SystemTime};

/// The bastion's kubeconfig copy.
pub const KUBE_COPY: &str = "eas-kube-";
/// The overlay's scratch index (`git read-tree` of one commit).
pub const OVERLAY_INDEX: &str = "eas-overlay-index.";
const PREFIXES: [&str; 2] = [KUBE_COPY, OVERLAY_INDEX];

/// Longer than any run's phases together: past it a copy is stale even if its pid was reused.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// A fresh private directory of one kind (one of the prefixes above), named for this process.
pub fn private_dir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(&format!("{prefix}{}-", std::process::id())).tempdir()
}

fn prefix_of(name: &str) -> Option<&'static str> {
    PREFIXES.into_iter().find(|p| name.starts_with(p))
}

/// What the sweep knows about one entry of the temporary directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
    pub owner: u32,
    pub age: Duration,
    /// Whether the pid in its name is a live process (`None`: the name holds no pid).
    pub pid_alive: Option<bool>,
}

/// The decision: a directory of ours, named like a scratch directory, whose process is gone or
/// that is too old.
pub fn is_stale(e: &Entry, our_uid: u32) -> bool {
    e.is_dir
        && e.owner == our_uid
        && prefix_of(&e.name).is_some()
        && (e.pid_alive != Some(true) || e.age > MAX_AGE)
        && pid_of(&e.name) != Some(std::process::id())
}

fn pid_of(name: &str) -> Option<u32> {
    name.strip_prefix(prefix_of(name)?)?.split('-').next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; EPERM means it does, as another user's.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes the stale scratch directories in `tmp`; returns how many. Errors are ignored: a sweep never fails
/// the command it runs before.
pub fn sweep(tmp: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(read) = std::fs::read_dir(tmp) else { return 0 };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let now = SystemTime::now();
    let mut removed = 0;
    for d in read.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        if prefix_of(&name).is_none() {
            continue;
        }
        // symlink_metadata: a link planted under the name is never followed.
        let Ok(meta) = std::fs::symlink_metadata(d.path()) else { continue };
        let age = meta.modified().ok().and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
        let entry = Entry { is_dir: meta.is_dir(), owner: meta.uid(), age, pid_alive: pid_of(&name).map(alive), name };
        if is_stale(&entry, uid) && std::fs::remove_dir_all(d.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_copies_of_dead_or_old_runs_are_stale() {
        let e = |name: &str, owner, age_h: u64, pid_alive| Entry {
            name: name.into(),
            is_dir: true,
            owner,
            age: Duration::from_secs(age_h * 3600),
            pid_alive,
        };
        let cases = [
            (e("eas-kube-123-abc", 1000, 0, Some(false)), true),
            (e("eas-kube-123-abc", 1000, 0, Some(true)), false),
            (e("eas-kube-123-abc", 1000, 25, Some(true)), true),
            (e("eas-kube-123-abc", 0, 25, Some(false)), false),
            (e("eas-kube-abc", 1000, 0, None), true),
            (e("eas-work-123", 1000, 25, Some(false)), false),
            (e("eas-overlay-index.123-abc", 1000, 0, Some(false)), true),
            (e("eas-overlay-index.123-abc", 1000, 0, Some(true)), false),
            (e(&format!("eas-kube-{}-x", std::process::id()), 1000, 25, Some(true)), false),
            (Entry { is_dir: false, ..e("eas-kube-1-x", 1000, 25, Some(false)) }, false),
        ];
        for (entry, want) in cases {
            assert_eq!(is_stale(&entry, 1000), want, "{entry:?}");
        }
    }

    #[test]
    fn a_killed_runs_copy_and_index_are_swept_and_a_live_ones_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        // pid 0x7fff_fffe: far above pid_max, never alive.
        let dead = tmp.path().join("eas-kube-2147483646-x");
        let live = tmp.path().join(format!("eas-kube-{}-y", std::process::id()));
        let dead_index = tmp.path().join("eas-overlay-index.2147483646-z");
        let live_index = tmp.path().join(format!("{OVERLAY_INDEX}{}-w", std::process::id()));
        for d in [&dead, &live, &dead_index, &live_index] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("config"), "token").unwrap();
        }
        assert_eq!(sweep(tmp.path()), 2);
        assert!(!dead.exists() && live.exists() && !dead_index.exists());
        assert!(live_index.exists());
    }
}
