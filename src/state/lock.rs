//! One run per cluster: `<state-dir>/<cluster-key>/lock`, created with `O_EXCL` and holding who
//! took it. Released when the guard is dropped.
//!
//! Rule for a lock that is already there:
//! - held by a live process on this host: refused, naming the holder;
//! - held by a process of this host that is gone (or whose pid now belongs to a process started
//!   later): stale; `eas up` names it and takes it over only with `--break-lock`;
//! - held from another host (a shared state directory): eas cannot see that process, so it is
//!   treated like a stale lock: named, and taken over only with `--break-lock`;
//! - unreadable (a crash between creating and writing it): the same.
//!
//! Liveness is read from `/proc` (std only): `/proc/<pid>/stat` exists, is not a zombie, and
//! its start time matches the one recorded, which guards against pid reuse.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FILE: &str = "lock";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    pub started: String,
    pub command: String,
    /// The process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    #[serde(default)]
    pub pid_start: Option<u64>,
}

impl Holder {
    /// This process, now.
    pub fn current(command: &str, now: &str) -> Holder {
        let pid = std::process::id();
        Holder {
            pid,
            host: hostname(),
            started: now.to_string(),
            command: command.to_string(),
            pid_start: start_time(pid),
        }
    }

    /// The run's id, as the label `io.eas.run` on its bastion containers: the pid and its start
    /// time, so a reused pid is another run.
    pub fn run_id(&self) -> String {
        format!("{}-{}", self.pid, self.pid_start.unwrap_or(0))
    }

    fn describe(&self) -> String {
        format!("pid {} on {} since {} (`{}`)", self.pid, self.host, self.started, self.command)
    }
}

/// What is at the lock path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Live(Holder),
    Stale(Holder),
    OtherHost(Holder),
    Unreadable(String),
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::Live(h) => write!(f, "held by {}", h.describe()),
            Found::Stale(h) => write!(f, "stale: {} is no longer running", h.describe()),
            Found::OtherHost(h) => write!(f, "held from another host: {}", h.describe()),
            Found::Unreadable(msg) => write!(f, "unreadable: {msg}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another eas run holds {}: {}", .path.display(), .holder.describe())]
    Held { path: PathBuf, holder: Holder },
    #[error("{} is stale: {} is no longer running", .path.display(), .holder.describe())]
    Stale { path: PathBuf, holder: Holder },
    #[error("{} is held from another host: {} (eas cannot tell whether it still runs)", .path.display(), .holder.describe())]
    OtherHost { path: PathBuf, holder: Holder },
    #[error("{} is unreadable: {msg}", .path.display())]
    Unreadable { path: PathBuf, msg: String },
    #[error("cannot use the lock {}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl LockError {
    pub fn hint(&self) -> String {
        match self {
            LockError::Held { holder, .. } => {
                format!("wait for that run to finish (or stop it: kill {}), then run the command again", holder.pid)
            }
            LockError::Stale { path, .. } | LockError::Unreadable { path, .. } => {
                format!("re-run with --break-lock to take it over, or remove {}", path.display())
            }
            LockError::OtherHost { path, holder } => format!(
                "if no eas run is active on {}, re-run with --break-lock, or remove {}",
                holder.host,
                path.display()
            ),
            LockError::Io { path, source } => super::journal::io_hint(source, path),
        }
    }
}

/// Reads the lock at `path` without taking it (a dry run reports this). None: no lock.
pub fn inspect(path: &Path) -> Result<Option<Found>, LockError> {
    let bytes = match read_lock(path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(source) => return Err(LockError::Io { path: path.to_path_buf(), source }),
    };
    Ok(Some(match holder_of(&bytes) {
        Ok(h) => judge(h, &hostname(), &ProcFs),
        Err(msg) => Found::Unreadable(msg),
    }))
}

/// The lock's bytes, at most its limit (`bounded::Kind::Lock`) plus one: a larger file is judged
/// unreadable, not read whole. None: no lock.
fn read_lock(path: &Path) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.take(crate::bounded::Kind::Lock.limit() + 1).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// The holder a lock file names, or why it names none: bad bytes (not UTF-8, not JSON, past the
/// limit) make an unreadable lock, which `--break-lock` takes over.
fn holder_of(bytes: &[u8]) -> Result<Holder, String> {
    let limit = crate::bounded::Kind::Lock.limit();
    if bytes.len() as u64 > limit {
        return Err(format!("larger than its limit of {}", crate::bounded::shown(limit)));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// Whether a pid on this host is alive, and since when.
pub trait Processes {
    /// None: no such (live) process. Some(start): alive, started at `start` (if known).
    fn alive(&self, pid: u32) -> Option<Option<u64>>;
}

/// `/proc`, when mounted.
pub struct ProcFs;

impl Processes for ProcFs {
    fn alive(&self, pid: u32) -> Option<Option<u64>> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (state, start) = parse_stat(&stat)?;
        (state != 'Z' && state != 'X').then_some(start)
    }
}

fn judge(holder: Holder, this_host: &str, procs: &dyn Processes) -> Found {
    if holder.host != this_host {
        return Found::OtherHost(holder);
    }
    match procs.alive(holder.pid) {
        Some(start) if holder.pid_start.is_none() || start.is_none() || start == holder.pid_start => {
            Found::Live(holder)
        }
        _ => Found::Stale(holder),
    }
}

/// Takes the lock for `command`. With `break_lock`, a stale, foreign or unreadable lock is
/// taken over; a live one never is.
pub fn acquire(path: &Path, command: &str, now: &str, break_lock: bool) -> Result<LockGuard, LockError> {
    let io_err = |source| LockError::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        super::journal::create_private_dir(dir).map_err(io_err)?;
    }
    let me = Holder::current(command, now);
    for _ in 0..3 {
        match create(path, &me) {
            Ok(()) => {
                return Ok(LockGuard { path: path.to_path_buf(), holder: me });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(e)),
        }
        let text = match read_lock(path) {
            Ok(Some(t)) => t,
            // Released between our create and our read: try again.
            Ok(None) => continue,
            Err(e) => return Err(io_err(e)),
        };
        let found = match holder_of(&text) {
            Ok(h) => judge(h, &me.host, &ProcFs),
            Err(msg) => Found::Unreadable(msg),
        };
        let refusal = match found {
            Found::Live(holder) => {
                return Err(LockError::Held { path: path.to_path_buf(), holder });
            }
            Found::Stale(holder) => LockError::Stale { path: path.to_path_buf(), holder },
            Found::OtherHost(holder) => LockError::OtherHost { path: path.to_path_buf(), holder },
            Found::Unreadable(msg) => LockError::Unreadable { path: path.to_path_buf(), msg },
        };
        if !break_lock {
            return Err(refusal);
        }
        take_over(path, &text).map_err(io_err)?;
    }
    Err(io_err(io::Error::other("the lock changed hands while taking it over; try again")))
}

/// Moves the judged lock aside, then checks it is still the one judged: if another run took it
/// over meanwhile, its lock is put back (a hard link fails if a newer lock is in place).
fn take_over(path: &Path, judged: &[u8]) -> io::Result<()> {
    let aside = path.with_file_name(format!("{FILE}.broken-{}", std::process::id()));
    match fs::rename(path, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let moved = read_lock(&aside)?.unwrap_or_default();
    if moved != judged {
        let _ = fs::hard_link(&aside, path);
    }
    fs::remove_file(&aside)
}

fn create(path: &Path, me: &Holder) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
    let body = serde_json::to_string(me).expect("holder serialises");
    let written = f.write_all(body.as_bytes()).and_then(|_| f.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(path);
        return Err(e);
    }
    Ok(())
}

/// The held lock; dropping it removes the file, if it is still ours.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
    pub holder: Holder,
}

impl LockGuard {
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(test)]
    pub fn holder(&self) -> &Holder {
        &self.holder
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let ours =
            read_lock(&self.path).ok().flatten().and_then(|t| holder_of(&t).ok()).is_some_and(|h| h == self.holder);
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// This process's run id ([`Holder::run_id`]).
pub fn this_run_id() -> String {
    let pid = std::process::id();
    format!("{pid}-{}", start_time(pid).unwrap_or(0))
}

/// The host name, from the kernel (std only); `localhost` when it cannot be read.
pub fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_string())
}

/// A process's start time (clock ticks since boot), when `/proc` has it.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)?.1
}

/// `(state, starttime)` from a `/proc/<pid>/stat` line. The command name in parentheses may
/// hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<(char, Option<u64>)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 is the state; starttime is field 22, 19 further on.
    let start = fields.nth(18).and_then(|s| s.parse().ok());
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn holder(pid: u32, host: &str, pid_start: Option<u64>) -> Holder {
        Holder { pid, host: host.into(), started: "t0".into(), command: "eas up".into(), pid_start }
    }

    struct Fake(Vec<(u32, Option<u64>)>);

    impl Processes for Fake {
        fn alive(&self, pid: u32) -> Option<Option<u64>> {
            self.0.iter().find(|(p, _)| *p == pid).map(|(_, s)| *s)
        }
    }

    #[test]
    fn judging_a_holder() {
        let procs = Fake(vec![(10, Some(500)), (11, None)]);
        let cases = [
            (holder(10, "h", Some(500)), Found::Live(holder(10, "h", Some(500)))),
            (holder(10, "h", None), Found::Live(holder(10, "h", None))),
            (holder(11, "h", Some(7)), Found::Live(holder(11, "h", Some(7)))),
            // Same pid, a later process: the holder is gone.
            (holder(10, "h", Some(499)), Found::Stale(holder(10, "h", Some(499)))),
            (holder(12, "h", Some(1)), Found::Stale(holder(12, "h", Some(1)))),
            (holder(10, "other", Some(500)), Found::OtherHost(holder(10, "other", Some(500)))),
        ];
        for (h, want) in cases {
            assert_eq!(judge(h.clone(), "h", &procs), want, "{h:?}");
        }
    }

    #[test]
    fn stat_lines() {
        let line = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200";
        assert_eq!(parse_stat(line), Some(('S', Some(987654))));
        assert_eq!(parse_stat("1 (z) Z 0"), Some(('Z', None)));
        assert_eq!(parse_stat("garbage"), None);
        assert!(start_time(std::process::id()).is_some(), "this test runs on Linux with /proc");
    }

    #[test]
    fn one_run_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("uid").join(FILE);
        let guard = acquire(&path, "eas up", "t1", false).unwrap();
        assert_eq!(guard.path(), path);
        assert_eq!(guard.holder().pid, std::process::id());
        let written: Holder = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(&written, guard.holder());
        assert_eq!(inspect(&path).unwrap(), Some(Found::Live(written.clone())));
        // Even --break-lock never takes a live lock.
        for break_lock in [false, true] {
            let err = acquire(&path, "eas up", "t2", break_lock).unwrap_err();
            assert!(matches!(&err, LockError::Held { holder, .. } if *holder == written), "{err}");
            assert!(err.to_string().contains(&format!("pid {}", std::process::id())));
            assert!(err.hint().contains("kill"));
        }
        drop(guard);
        assert!(!path.exists());
        assert_eq!(inspect(&path).unwrap(), None);
        let again = acquire(&path, "eas down", "t3", false).unwrap();
        assert_eq!(again.holder().command, "eas down");
    }

    fn plant(path: &Path, h: &Holder) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, serde_json::to_string(h).unwrap()).unwrap();
    }

    #[test]
    fn a_live_child_holds_and_a_dead_one_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let h = Holder {
            pid: child.id(),
            host: hostname(),
            started: "t0".into(),
            command: "eas up".into(),
            pid_start: start_time(child.id()),
        };
        plant(&path, &h);
        assert_eq!(inspect(&path).unwrap(), Some(Found::Live(h.clone())));
        assert!(matches!(acquire(&path, "eas up", "t1", true), Err(LockError::Held { .. })));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(inspect(&path).unwrap(), Some(Found::Stale(h.clone())));
        let err = acquire(&path, "eas up", "t1", false).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("is stale")
                && text.contains(&format!("pid {}", h.pid))
                && text.contains(&path.display().to_string()),
            "{text}"
        );
        assert!(err.hint().contains("--break-lock"));
        assert!(path.exists(), "a refusal leaves the stale lock in place");
        let guard = acquire(&path, "eas up", "t2", true).unwrap();
        assert_eq!(guard.holder().pid, std::process::id());
        let names: Vec<String> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, [FILE], "nothing is left aside");
    }

    #[test]
    fn foreign_and_unreadable_locks_need_break_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let foreign = holder(1, "some-other-host.invalid", None);
        plant(&path, &foreign);
        let err = acquire(&path, "eas up", "t", false).unwrap_err();
        assert!(matches!(&err, LockError::OtherHost { holder, .. } if *holder == foreign));
        assert!(err.hint().contains("some-other-host.invalid"));
        drop(acquire(&path, "eas up", "t", true).unwrap());
        assert!(!path.exists());

        fs::write(&path, "").unwrap();
        assert!(matches!(inspect(&path).unwrap(), Some(Found::Unreadable(_))));
        assert!(matches!(acquire(&path, "eas up", "t", false), Err(LockError::Unreadable { .. })));
        let guard = acquire(&path, "eas up", "t", true).unwrap();
        // A lock taken over by someone else is not removed by the old guard.
        let other = holder(2, "elsewhere", None);
        fs::write(&path, serde_json::to_string(&other).unwrap()).unwrap();
        drop(guard);
        assert!(path.exists());
    }

    #[test]
    fn a_lock_of_bad_bytes_or_past_its_limit_is_unreadable_and_taken_over_by_break_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let big = vec![b' '; crate::bounded::Kind::Lock.limit() as usize + 1];
        for (bytes, why) in
            [(vec![0xff, 0xfe, b'{'], "unreadable: not UTF-8 text"), (big, "larger than its limit of 64 KiB")]
        {
            fs::write(&path, &bytes).unwrap();
            let found = inspect(&path).unwrap().unwrap();
            assert!(found.to_string().contains(why), "{found}");
            assert!(matches!(acquire(&path, "eas up", "t", false), Err(LockError::Unreadable { .. })));
            drop(acquire(&path, "eas up", "t", true).unwrap());
            assert!(!path.exists());
        }
    }

    #[test]
    fn found_locks_read_as_sentences_not_dumps() {
        let h = Holder { pid: 42, host: "box".into(), started: "t0".into(), command: "eas up".into(), pid_start: None };
        assert_eq!(
            Found::Stale(h.clone()).to_string(),
            "stale: pid 42 on box since t0 (`eas up`) is no longer running"
        );
        assert_eq!(Found::Live(h.clone()).to_string(), "held by pid 42 on box since t0 (`eas up`)");
        assert_eq!(Found::OtherHost(h).to_string(), "held from another host: pid 42 on box since t0 (`eas up`)");
        assert_eq!(Found::Unreadable("bad".into()).to_string(), "unreadable: bad");
    }
}
