//! The one runner of the real `git` program: every call has a timeout, the caller's git
//! environment (`GIT_DIR`, `GIT_INDEX_FILE`...) cannot redirect it, and it never prompts.
//!
//! [`run_async`] is the runner: the child is killed when its future is dropped (a cancelled
//! phase) or its timeout passes. [`run_blocking`] drives the same future for synchronous code; a
//! child such a call leaves behind when the command ends early is killed by [`kill_running`],
//! which the runtime calls on shutdown; from then on no git starts (a blocking task still going
//! would otherwise start its next step, a fetch say, that outlives the command).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// Variables that would point git at another repository, index or object store.
const CLEARED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CEILING_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// One git invocation.
#[derive(Debug, Clone)]
pub struct Git {
    pub dir: Option<PathBuf>,
    pub args: Vec<String>,
    pub stdin: Option<String>,
    /// An index file in place of the clone's own (`GIT_INDEX_FILE`).
    pub index: Option<PathBuf>,
    /// The CA file HTTPS remotes are checked against (`GIT_SSL_CAINFO`).
    pub ca: Option<PathBuf>,
    pub timeout: Duration,
}

/// What git printed and how it exited.
#[derive(Debug, Clone)]
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
    #[error("no result within {}s", .0.as_secs())]
    TimedOut(Duration),
    #[error("not started: the command is ending")]
    Closing,
}

impl Git {
    pub fn new(dir: Option<&Path>, args: &[&str], timeout: Duration) -> Git {
        Git {
            dir: dir.map(Path::to_path_buf),
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: None,
            index: None,
            ca: None,
            timeout,
        }
    }
}

/// The git children running (their process groups), and whether the command is ending.
#[derive(Debug, Default)]
struct Registry {
    pids: HashSet<u32>,
    closing: bool,
}

impl Registry {
    /// Starts `start` (a spawn) and records its pid, unless the command is ending.
    fn admit<C>(
        &mut self,
        start: impl FnOnce() -> std::io::Result<C>,
        pid: impl Fn(&C) -> Option<u32>,
    ) -> Result<C, RunError> {
        if self.closing {
            return Err(RunError::Closing);
        }
        let child = start().map_err(RunError::Spawn)?;
        self.pids.extend(pid(&child));
        Ok(child)
    }

    /// The pids to kill; no git is admitted after.
    fn close(&mut self) -> Vec<u32> {
        self.closing = true;
        self.pids.drain().collect()
    }
}

static RUNNING: Mutex<Option<Registry>> = Mutex::new(None);

fn running<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut g = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Registry::default))
}

/// Runs `git`; the child is killed if the future is dropped or the timeout passes.
pub async fn run_async(g: Git) -> Result<Output, RunError> {
    // -v: every git command (URLs without their credentials); -vv: its exit and time.
    let shown = crate::text::mask_userinfo(&format!(
        "git {}{}",
        g.dir.as_ref().map_or(String::new(), |d| format!("-C {} ", d.display())),
        g.args.join(" ")
    ));
    tracing::debug!("{shown}");
    let started = std::time::Instant::now();
    let out = run_git(g).await;
    let ms = started.elapsed().as_millis();
    match &out {
        Ok(o) => tracing::trace!("{shown}: {} in {ms} ms", if o.ok { "ok" } else { "failed" }),
        Err(e) => tracing::trace!("{shown}: {e} after {ms} ms"),
    }
    out
}

async fn run_git(g: Git) -> Result<Output, RunError> {
    let mut cmd = tokio::process::Command::new("git");
    if let Some(d) = &g.dir {
        cmd.arg("-C").arg(d);
    }
    cmd.args(&g.args);
    for v in CLEARED_ENV {
        cmd.env_remove(v);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
    if let Some(i) = &g.index {
        cmd.env("GIT_INDEX_FILE", i);
    }
    if let Some(ca) = &g.ca {
        cmd.env("GIT_SSL_CAINFO", ca);
    }
    cmd.stdin(if g.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    // Its own process group, so its helpers (`git-remote-https`) are killed with it.
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).process_group(0);
    // Spawned under the registry's lock: `kill_running` either sees the child or stops the spawn.
    let mut child = running(|r| r.admit(|| cmd.spawn(), tokio::process::Child::id))?;
    let pid = child.id();
    let mut group = Group { pid, done: false };
    let (timeout, stdin) = (g.timeout, child.stdin.take());
    // stdin is fed while the output is read, both within the timeout: a git that does not read
    // its stdin (or writes much before it does) cannot hold eas past it.
    let feed = async move {
        if let (Some(text), Some(mut pipe)) = (g.stdin, stdin) {
            // A failed write means git exited early; its status and stderr say why.
            let _ = pipe.write_all(text.as_bytes()).await;
        }
    };
    let both = async { tokio::join!(feed, child.wait_with_output()).1 };
    let out =
        tokio::time::timeout(timeout, both).await.map_err(|_| RunError::TimedOut(timeout))?.map_err(RunError::Spawn)?;
    group.done = true;
    Ok(Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// The child's process group: killed unless git finished (a timeout, a dropped future).
struct Group {
    pid: Option<u32>,
    done: bool,
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(p) = self.pid {
            running(|r| {
                r.pids.remove(&p);
            });
            if !self.done {
                kill_group(p);
            }
        }
    }
}

fn kill_group(pid: u32) {
    // SAFETY: kill(2) on the process group this process made for a git child it still holds.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
}

/// [`run_async`] for synchronous code. It blocks the calling thread, so async code calls it
/// through `spawn_blocking` (or awaits [`run_async`]). Inside a runtime it drives the call on a
/// thread of its own, which works from any thread.
pub fn run_blocking(g: Git) -> Result<Output, RunError> {
    let drive = |g: Git| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(RunError::Spawn)?
            .block_on(run_async(g))
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return drive(g);
    }
    std::thread::scope(|s| s.spawn(|| drive(g)).join()).unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// `git args` in `dir`; trimmed stdout on success, else the trimmed stderr.
pub async fn run(dir: Option<&Path>, args: &[&str], timeout: Duration) -> Result<String, String> {
    let desc = args.join(" ");
    match run_async(Git::new(dir, args, timeout)).await {
        Ok(o) if o.ok => Ok(o.stdout.trim().to_string()),
        Ok(o) => Err(format!("git {desc}: {}", o.stderr.trim())),
        Err(e) => Err(format!("git {desc}: {e}")),
    }
}

/// Kills the git children still running (a blocking call abandoned when its phase was
/// cancelled), and starts no other: the command is ending and nothing may be left behind.
pub fn kill_running() {
    for pid in running(Registry::close) {
        kill_group(pid);
    }
}

/// A command begins: git may run again (after a [`kill_running`] that ended an earlier one).
pub fn reopen() {
    running(|r| r.closing = false);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On its own registry (the process's is shared by the tests that run git at once).
    #[test]
    fn once_closed_no_git_is_started_until_reopened() {
        let mut r = Registry::default();
        let started = std::cell::Cell::new(0);
        let start = || {
            started.set(started.get() + 1);
            Ok(started.get())
        };
        assert_eq!(r.admit(start, |n: &u32| Some(*n + 100)).unwrap(), 1);
        assert_eq!(r.close(), vec![101], "the running child is handed over to be killed");
        assert!(matches!(r.admit(start, |n: &u32| Some(*n)), Err(RunError::Closing)));
        assert_eq!(started.get(), 1, "nothing was spawned once closing");
        r.closing = false;
        assert_eq!(r.admit(start, |n: &u32| Some(*n)).unwrap(), 2);
    }

    /// A megabyte for a git that never reads it (blocked opening a fifo): the write is within the
    /// timeout, so the call ends at it.
    #[test]
    fn stdin_a_git_does_not_read_cannot_outlast_the_timeout() {
        let (_dir, fifo) = crate::testing::temp_path("stdin-never-closes");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let mut g = Git::new(None, &["hash-object", &fifo.display().to_string()], Duration::from_millis(300));
        g.stdin = Some("x".repeat(1 << 20));
        let e = run_blocking(g).unwrap_err();
        assert!(matches!(e, RunError::TimedOut(_)), "{e}");
    }

    #[test]
    fn a_git_call_past_its_timeout_is_killed_and_named() {
        let (_dir, fifo) = crate::testing::temp_path("stdin-never-closes");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // `git hash-object FIFO` blocks opening a fifo that no one writes.
        let blocking = Git::new(None, &["hash-object", &fifo.display().to_string()], Duration::from_millis(300));
        let e = run_blocking(blocking).unwrap_err();
        assert!(matches!(e, RunError::TimedOut(_)), "{e}");
    }

    #[tokio::test]
    async fn a_blocking_call_works_on_an_async_worker_too() {
        let ok = run_blocking(Git::new(None, &["--version"], Duration::from_secs(10))).unwrap();
        assert!(ok.ok, "{ok:?}");
    }

    #[test]
    fn output_and_failure_are_reported() {
        let ok = run_blocking(Git::new(None, &["--version"], Duration::from_secs(10))).unwrap();
        assert!(ok.ok && ok.stdout.starts_with("git version"), "{ok:?}");
        let bad = run_blocking(Git::new(None, &["no-such-subcommand"], Duration::from_secs(10))).unwrap();
        assert!(!bad.ok && bad.stderr.contains("no-such-subcommand"), "{bad:?}");
    }
}
