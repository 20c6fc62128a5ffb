//! The seam to the real `git` program. Every decision reads the pinned commit through a scratch
//! index (`GIT_INDEX_FILE` in a temporary directory, filled by `read-tree`), so deciding never
//! touches the clone's work tree, its index, or its object database.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::git::Git;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{0}")]
    Run(crate::git::RunError),
    #[error("{dir} is not a git work tree ({stderr})")]
    NotARepo { dir: String, stderr: String },
    #[error("{what} {rev:?} is not a commit in {dir}")]
    NoCommit { dir: String, what: &'static str, rev: String },
    #[error("git {args} failed in {dir}: {stderr}")]
    Failed { dir: String, args: String, stderr: String },
    #[error("scratch index: {0}")]
    Scratch(std::io::Error),
}

/// What `git` printed and how it exited.
#[derive(Debug, Clone)]
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// A clone, driven through `git -C <dir>` ([`crate::git`] clears the caller's git environment,
/// so a `GIT_DIR` or `GIT_INDEX_FILE` in the user's shell cannot redirect it).
#[derive(Debug, Clone)]
pub struct Repo {
    dir: PathBuf,
}

/// Every overlay git call reads the local clone: a minute is far beyond any of them.
const TIMEOUT: Duration = Duration::from_secs(60);

impl Repo {
    /// Opens the work tree at `dir`; fails unless git sees a work tree there.
    pub fn open(dir: &Path) -> Result<Repo, GitError> {
        let repo = Repo { dir: dir.to_path_buf() };
        let out = repo.run(&["rev-parse", "--is-inside-work-tree"], None, None)?;
        if !out.ok || out.stdout.trim() != "true" {
            return Err(GitError::NotARepo { dir: dir.display().to_string(), stderr: first_line(&out.stderr) });
        }
        // Patch paths are relative to the top level, and `git apply` in a subdirectory silently
        // skips paths outside it: only the top level is accepted.
        let top = repo.run_ok(&["rev-parse", "--show-toplevel"], None, None)?;
        let same = match (std::fs::canonicalize(top.trim()), std::fs::canonicalize(dir)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same {
            return Err(GitError::NotARepo {
                dir: dir.display().to_string(),
                stderr: format!("it is inside the work tree {}, not its top level", top.trim()),
            });
        }
        Ok(repo)
    }

    /// Runs `git` ([`crate::git`]) with optional stdin and an optional index file in place of
    /// the clone's own.
    pub fn run(&self, args: &[&str], stdin: Option<&str>, index: Option<&Path>) -> Result<Output, GitError> {
        // Settings that would change what `apply --check` accepts are pinned here.
        let mut all = vec!["-c", "apply.whitespace=nowarn", "-c", "core.autocrlf=false"];
        all.extend_from_slice(args);
        let g = Git {
            stdin: stdin.map(str::to_string),
            index: index.map(Path::to_path_buf),
            ..Git::new(Some(&self.dir), &all, TIMEOUT)
        };
        let out = crate::git::run_blocking(g).map_err(GitError::Run)?;
        Ok(Output { ok: out.ok, stdout: out.stdout, stderr: out.stderr })
    }

    /// Like [`Repo::run`], but a non-zero exit is an error.
    pub fn run_ok(&self, args: &[&str], stdin: Option<&str>, index: Option<&Path>) -> Result<String, GitError> {
        let out = self.run(args, stdin, index)?;
        if !out.ok {
            return Err(GitError::Failed {
                dir: self.dir.display().to_string(),
                args: args.join(" "),
                stderr: first_line(&out.stderr),
            });
        }
        Ok(out.stdout)
    }

    /// The full SHA of `rev`, which must name a commit.
    pub fn commit(&self, what: &'static str, rev: &str) -> Result<String, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let out = self.run(&["rev-parse", "--verify", "--quiet", &spec], None, None)?;
        if !out.ok {
            return Err(GitError::NoCommit { dir: self.dir.display().to_string(), what, rev: rev.to_string() });
        }
        Ok(out.stdout.trim().to_string())
    }

    /// A file's content at a commit, or None when the commit has no such file.
    pub fn show(&self, commit: &str, path: &str) -> Result<Option<String>, GitError> {
        let spec = format!("{commit}:{path}");
        let out = self.run(&["cat-file", "-e", &spec], None, None)?;
        if !out.ok {
            return Ok(None);
        }
        self.run_ok(&["cat-file", "blob", &spec], None, None).map(Some)
    }

    /// The last commit at or before `commit` that changed `path`, as `(sha, subject)`.
    pub fn last_change(&self, commit: &str, path: &str) -> Result<Option<(String, String)>, GitError> {
        let out = self.run_ok(&["log", "-1", "--format=%H%x09%s", commit, "--", path], None, None)?;
        Ok(out.lines().next().and_then(|l| l.split_once('\t')).map(|(h, s)| (h.to_string(), s.to_string())))
    }

    /// A scratch index holding `commit`'s tree; dropped with its temporary directory.
    pub fn scratch_index(&self, commit: &str) -> Result<ScratchIndex, GitError> {
        // Named for this process: a SIGKILL leaves it, and the next command sweeps it.
        let dir = crate::scratch::private_dir(crate::scratch::OVERLAY_INDEX).map_err(GitError::Scratch)?;
        let path = dir.path().join("index");
        self.run_ok(&["read-tree", commit], None, Some(&path))?;
        Ok(ScratchIndex { _dir: dir, path })
    }
}

/// An index file outside the clone, holding one commit's tree.
#[derive(Debug)]
pub struct ScratchIndex {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn first_line(s: &str) -> String {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
}
