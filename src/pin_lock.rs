//! `eas pins lock`: resolve each abbreviated pin in its repository's history.
//!
//! A pin names a commit as seen on a ref at some date; the ref has usually moved on since. So the
//! commit is looked up in the repository's history, in the same mirror cache `eas up` fetches into
//! (`trees::cache_dir()`), not at the ref's tip. The prefix must name exactly one commit, and that
//! commit must be the ref's tip or an ancestor of it (a tag: the tagged commit itself). Anything
//! else is refused with the case named: a force-pushed ref, a moved tag, a commit that is gone.

use std::path::Path;
use std::time::Duration;

use crate::pins::{Pins, is_full_sha, repo_url};
use crate::trees::{self, TreeError};

/// What a ref turned out to be in the mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefTip {
    Branch(String),
    /// A tag, peeled to its commit.
    Tag(String),
}

/// The read-only history queries the decision needs; git in the mirror in production.
pub trait History {
    /// Every commit whose full SHA starts with `prefix`.
    fn commits_with_prefix(&self, prefix: &str) -> Result<Vec<String>, String>;
    fn tip(&self, git_ref: &str) -> Result<Option<RefTip>, String>;
    fn is_ancestor(&self, commit: &str, of: &str) -> Result<bool, String>;
    /// Commits on `tip` after `commit`.
    fn ahead(&self, commit: &str, tip: &str) -> Result<u64, String>;
}

/// Why one row could not be locked, by exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowError {
    /// Exit 2: the pin itself is unusable (an ambiguous prefix).
    BadInput(String),
    /// Exit 3: the history contradicts the pin (force-push, moved tag, commit gone, no such ref).
    Refused(String),
    /// Exit 1: git or the network failed.
    Failed(String),
}

/// The full SHA the pin names on `git_ref`, with a note on how far the ref has moved.
pub fn decide(h: &dyn History, prefix: &str, git_ref: &str, place: &str) -> Result<(String, String), RowError> {
    let commits = h.commits_with_prefix(prefix).map_err(RowError::Failed)?;
    let tip = h.tip(git_ref).map_err(RowError::Failed)?;
    let full = match commits.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(RowError::Refused(format!(
                "no commit starting with {prefix} is in {place}{}; if {git_ref} was force-pushed the commit \
                 is gone from the repository: re-pin deliberately (edit the pins file)",
                match &tip {
                    Some(RefTip::Branch(t) | RefTip::Tag(t)) => format!(" ({git_ref} is at {t})"),
                    None => String::new(),
                }
            )));
        }
        many => {
            return Err(RowError::BadInput(format!(
                "the prefix {prefix} is ambiguous in {place}: it names {} commits ({}); pin more hex digits",
                many.len(),
                many.join(", ")
            )));
        }
    };
    match tip {
        None => Err(RowError::Refused(format!(
            "{git_ref} is neither a branch nor a tag in {place}; the ref was deleted or renamed: re-pin deliberately"
        ))),
        Some(RefTip::Tag(t)) if t == full => Ok((full, format!("the commit tag {git_ref} points at"))),
        Some(RefTip::Tag(t)) => Err(RowError::Refused(format!(
            "tag {git_ref} points at {t}, not the pinned {full}: the tag was moved (re-tagged); \
             re-pin deliberately rather than lock a different commit"
        ))),
        Some(RefTip::Branch(t)) => {
            if !h.is_ancestor(&full, &t).map_err(RowError::Failed)? {
                return Err(RowError::Refused(format!(
                    "{full} is not an ancestor of {git_ref} (now at {t}): {git_ref} was force-pushed past it, \
                     or the pin names a commit of another branch; re-pin deliberately"
                )));
            }
            let n = h.ahead(&full, &t).map_err(RowError::Failed)?;
            let note = if n == 0 {
                format!("the tip of {git_ref}")
            } else {
                format!("an ancestor of {git_ref}, which is {n} commit{} ahead at {t}", if n == 1 { "" } else { "s" })
            };
            Ok((full, note))
        }
    }
}

/// The history of a bare mirror, read with git.
pub struct GitHistory<'a> {
    pub dir: &'a Path,
}

const LOCAL: Duration = Duration::from_secs(60);

impl GitHistory<'_> {
    fn git(&self, args: &[&str]) -> Result<String, TreeError> {
        trees::git(Some(self.dir), args, LOCAL)
    }
}

impl History for GitHistory<'_> {
    fn commits_with_prefix(&self, prefix: &str) -> Result<Vec<String>, String> {
        // `--disambiguate` lists every object with the prefix, of any type; keep the commits.
        // No match is an empty list, not an error.
        let listed = self.git(&["rev-parse", &format!("--disambiguate={prefix}")]).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for sha in listed.lines().map(str::trim).filter(|s| is_full_sha(s)) {
            let kind = self.git(&["cat-file", "-t", sha]).map_err(|e| e.to_string())?;
            if kind == "commit" {
                out.push(sha.to_string());
            }
        }
        Ok(out)
    }

    fn tip(&self, git_ref: &str) -> Result<Option<RefTip>, String> {
        let peel = |r: &str| self.git(&["rev-parse", "--verify", "--quiet", &format!("{r}^{{commit}}")]).ok();
        if let Some(t) = peel(&format!("refs/tags/{git_ref}")) {
            return Ok(Some(RefTip::Tag(t)));
        }
        Ok(peel(&format!("refs/heads/{git_ref}")).map(RefTip::Branch))
    }

    fn is_ancestor(&self, commit: &str, of: &str) -> Result<bool, String> {
        match self.git(&["merge-base", "--is-ancestor", commit, of]) {
            Ok(_) => Ok(true),
            // Exit 1 is "no"; any other failure prints a message on stderr.
            Err(TreeError::Git { msg, .. }) if msg.is_empty() => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    fn ahead(&self, commit: &str, tip: &str) -> Result<u64, String> {
        let n = self.git(&["rev-list", "--count", &format!("{commit}..{tip}")]).map_err(|e| e.to_string())?;
        n.parse().map_err(|_| format!("git rev-list --count printed {n:?}"))
    }
}

/// What `lock` did: one line per row locked, and the rows that could not be, by kind.
#[derive(Debug, Default)]
pub struct Outcome {
    pub done: Vec<String>,
    pub errors: Vec<RowError>,
}

/// Resolves every unlocked tree row of `pins` in the mirror cache `cache`, fetching each
/// repository from `git_base` first. Rows are changed only in `pins`; the caller writes the file,
/// and only when no row failed. Git trusts the CA file `ca` (`--ca-bundle`) when given.
pub fn lock(pins: &mut Pins, git_base: &str, cache: &Path, ca: Option<&Path>) -> Outcome {
    let mut out = Outcome::default();
    // A repository that could not be fetched is tried once: the other rows that pin it (the
    // same repository in another profile) join its one error instead of repeating it.
    let mut unreachable: Vec<(String, String, Vec<String>)> = Vec::new();
    for p in pins.pins.iter_mut() {
        let (Some(repo), Some(sha)) = (p.repo.clone(), p.sha.clone()) else {
            continue;
        };
        if p.locked {
            continue;
        }
        let id = format!("{}/{}", p.profile, p.name);
        let url = repo_url(git_base, &repo);
        if let Some((_, _, rows)) = unreachable.iter_mut().find(|(u, _, _)| *u == url) {
            rows.push(id);
            continue;
        }
        let dir = match trees::update_mirror(&repo, &url, cache, ca) {
            Ok(d) => d,
            Err(e) => {
                unreachable.push((url, e.to_string(), vec![id]));
                continue;
            }
        };
        let place = format!("the history of {url} (mirror {})", dir.display());
        match decide(&GitHistory { dir: &dir }, &sha, &p.git_ref, &place) {
            Ok((full, note)) => {
                out.done.push(format!("{id}: {sha} -> {full} ({note})"));
                p.sha = Some(full);
                p.locked = true;
            }
            Err(e) => out.errors.push(match e {
                RowError::BadInput(m) => RowError::BadInput(format!("{id}: {m}")),
                RowError::Refused(m) => RowError::Refused(format!("{id}: {m}")),
                RowError::Failed(m) => RowError::Failed(format!("{id}: {m}")),
            }),
        }
    }
    for (url, e, rows) in unreachable {
        out.errors.push(RowError::Failed(format!("{}: fetching {url}: {e}", rows.join(", "))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A history of `main`: c1 <- c2 <- c3, an orphan `x1` (a force-pushed-away commit), a tag
    /// `v1` at c2.
    struct Fake {
        main: &'static str,
    }

    const C1: &str = "1111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const C2: &str = "2222222aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const C3: &str = "3333333aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const X1: &str = "4444444aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const X2: &str = "4444444bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    impl History for Fake {
        fn commits_with_prefix(&self, prefix: &str) -> Result<Vec<String>, String> {
            Ok([C1, C2, C3, X1, X2].iter().filter(|c| c.starts_with(prefix)).map(|c| c.to_string()).collect())
        }
        fn tip(&self, r: &str) -> Result<Option<RefTip>, String> {
            Ok(match r {
                "main" => Some(RefTip::Branch(self.main.to_string())),
                "v1" => Some(RefTip::Tag(C2.to_string())),
                _ => None,
            })
        }
        fn is_ancestor(&self, c: &str, of: &str) -> Result<bool, String> {
            let chain = [C1, C2, C3];
            Ok(match (chain.iter().position(|x| *x == c), chain.iter().position(|x| *x == of)) {
                (Some(a), Some(b)) => a <= b,
                _ => c == of,
            })
        }
        fn ahead(&self, c: &str, tip: &str) -> Result<u64, String> {
            let chain = [C1, C2, C3];
            let a = chain.iter().position(|x| *x == c).unwrap();
            let b = chain.iter().position(|x| *x == tip).unwrap();
            Ok((b - a) as u64)
        }
    }

    #[test]
    fn an_old_commit_on_a_moved_branch_locks_and_says_how_far_the_ref_moved() {
        let (full, note) = decide(&Fake { main: C3 }, "1111111", "main", "h").unwrap();
        assert_eq!(full, C1);
        assert!(note.contains("2 commits ahead") && note.contains(C3), "{note}");
        let (_, note) = decide(&Fake { main: C3 }, "3333333", "main", "h").unwrap();
        assert_eq!(note, "the tip of main");
    }

    #[test]
    fn the_cases_that_are_refused_name_their_cause() {
        let f = Fake { main: C3 };
        let e = decide(&f, "4444444a", "main", "h").unwrap_err();
        assert!(
            matches!(&e, RowError::Refused(m) if m.contains("not an ancestor") && m.contains("force-pushed")),
            "{e:?}"
        );
        let e = decide(&f, "5555555", "main", "h").unwrap_err();
        assert!(matches!(&e, RowError::Refused(m) if m.contains("gone") && m.contains("force-pushed")), "{e:?}");
        let e = decide(&f, "1111111", "v1", "h").unwrap_err();
        assert!(matches!(&e, RowError::Refused(m) if m.contains("re-tagged")), "{e:?}");
        assert_eq!(decide(&f, "2222222", "v1", "h").unwrap().0, C2);
        let e = decide(&f, "1111111", "gone", "h").unwrap_err();
        assert!(matches!(&e, RowError::Refused(m) if m.contains("neither a branch nor a tag")), "{e:?}");
        let e = decide(&f, "4444444", "main", "h").unwrap_err();
        assert!(
            matches!(&e, RowError::BadInput(m) if m.contains("ambiguous") && m.contains(X1) && m.contains(X2)),
            "{e:?}"
        );
    }
}
