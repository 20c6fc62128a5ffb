//! Writing a plan's `apply` decisions into the clone's work tree: all of them or none, only when
//! nothing STOPs, only onto the pristine pinned commit, and a no-op when already applied.

use super::decide::Plan;
use super::git::{GitError, Repo};

#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The patches were written to these files.
    Wrote(Vec<String>),
    /// The work tree already holds exactly the pinned commit plus these patches.
    AlreadyDone,
    /// No row needs a patch and the work tree is the pinned commit.
    Nothing,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{stops} overlay row(s) STOP; nothing was written")]
    Stopped { stops: usize },
    #[error("the work tree of {dir} is at {head}, but the overlay was decided for {commit}")]
    HeadMoved { dir: String, head: String, commit: String },
    #[error("the work tree of {dir} has changes that are neither the pinned commit nor the overlay: {paths}")]
    Dirty { dir: String, paths: String },
    #[error("the patches that apply one by one do not apply together at {commit}: {detail}")]
    Conflict { commit: String, detail: String },
}

/// Applies `plan` to its clone's work tree. Reads the plan's commit again (HEAD must still be it),
/// refuses a dirty work tree, and writes nothing when any row STOPs.
pub fn apply(plan: &Plan) -> Result<Applied, ApplyError> {
    let stops = plan.stops().count();
    if stops > 0 {
        return Err(ApplyError::Stopped { stops });
    }
    let git = Repo::open(&plan.repo)?;
    let dir = plan.repo.display().to_string();
    let head = git.commit("HEAD", "HEAD")?;
    if head != plan.commit {
        return Err(ApplyError::HeadMoved { dir, head, commit: plan.commit.clone() });
    }
    let patches: Vec<&str> = plan.to_apply().filter_map(|d| d.patch.as_ref().map(|p| p.text.as_str())).collect();
    let combined: String = patches.concat();
    let files: Vec<String> =
        plan.to_apply().filter_map(|d| d.patch.as_ref()).flat_map(|p| p.files.iter().map(|f| f.path.clone())).collect();

    // The tree the work tree must hold once applied: the commit plus every patch, built in a
    // scratch index (this writes blob and tree objects, never the work tree or the real index).
    let expected = if patches.is_empty() {
        plan.commit.clone()
    } else {
        let index = git.scratch_index(&plan.commit)?;
        let out = git.run(&["apply", "--cached"], Some(&combined), Some(&index.path))?;
        if !out.ok {
            return Err(ApplyError::Conflict {
                commit: plan.commit.clone(),
                detail: super::git::first_line(&out.stderr),
            });
        }
        git.run_ok(&["write-tree"], None, Some(&index.path))?.trim().to_string()
    };

    let staged = !git.run(&["diff", "--cached", "--quiet", "HEAD", "--"], None, None)?.ok;
    let pristine = !staged && git.run(&["diff", "--quiet", "HEAD", "--"], None, None)?.ok;
    if pristine {
        if patches.is_empty() {
            return Ok(Applied::Nothing);
        }
        // One invocation: git checks every hunk of every patch before it writes any file.
        git.run_ok(&["apply", "--check"], Some(&combined), None)?;
        git.run_ok(&["apply"], Some(&combined), None)?;
        return Ok(Applied::Wrote(files));
    }
    if !staged && !patches.is_empty() && git.run(&["diff", "--quiet", &expected, "--"], None, None)?.ok {
        return Ok(Applied::AlreadyDone);
    }
    let changed = git.run_ok(&["diff", "--name-only", "HEAD", "--"], None, None)?;
    let staged_paths = git.run_ok(&["diff", "--cached", "--name-only", "HEAD", "--"], None, None)?;
    let mut paths: Vec<&str> = changed.lines().chain(staged_paths.lines()).collect();
    paths.sort();
    paths.dedup();
    Err(ApplyError::Dirty { dir, paths: paths.join(", ") })
}
