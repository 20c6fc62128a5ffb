//! The knob audit's search: `git grep` in each tree at its pinned commit (read from the
//! objects, no work tree), and the patches the overlay will apply. The decision is
//! [`crate::knobs::audit`].

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::config::Decision;
use crate::knobs::{self, Audit, Planned, TreeRef};
use crate::overlay::Plan;
use crate::trees;

/// One pinned tree: its name in data/knobs.json (`eas`, `ei`, `eat`), `owner/repo`, where its
/// objects are, and the commit.
pub struct Tree<'a> {
    pub name: &'static str,
    pub repo: String,
    pub objects: &'a Path,
    pub sha: &'a str,
}

/// The keys a decision writes into the generated files.
pub fn written(d: &Decision) -> Vec<&'static str> {
    let mut keys = vec!["existing_kubernetes"];
    keys.extend(d.overrides.iter().map(|(k, _)| *k));
    keys.push("require_amx");
    if d.model_edits.iter().any(|e| e.autodeploy) {
        keys.push("autodeploy");
    }
    if d.model_edits.iter().any(|e| e.memory.is_some()) {
        keys.push("memory");
    }
    if d.model_edits.iter().any(|e| e.cpu.is_some()) {
        keys.push("cpu");
    }
    keys
}

/// The comment lines [`knobs::is_comment`] names, as a `git grep` pattern that spans the line
/// (so `-w` holds at both ends).
const COMMENT: &str = "^[[:space:]]*(#|\\{#).*$";

/// `key` as a literal in an extended regular expression.
fn ere_literal(key: &str) -> String {
    key.chars().fold(String::new(), |mut s, c| {
        if !(c.is_ascii_alphanumeric() || c == '_') {
            s.push('\\');
        }
        s.push(c);
        s
    })
}

/// A grep the audit asks for: the tree's name, the key, the pathspecs.
type Query = (String, String, Vec<String>);

/// Files of `tree` at its commit reading `key` within `paths`: holding it as a word on a line
/// that is not a comment ([`knobs::reads`]).
fn grep(tree: &Tree, key: &str, paths: &[String]) -> Result<Vec<String>, trees::TreeError> {
    let key = ere_literal(key);
    let mut args = vec!["grep", "-l", "-w", "-E", "-e", &key, "--and", "--not", "-e", COMMENT, tree.sha, "--"];
    args.extend(paths.iter().map(String::as_str));
    match trees::git(Some(tree.objects), &args, Duration::from_secs(60)) {
        Ok(out) => {
            Ok(out.lines().map(|l| l.strip_prefix(&format!("{}:", tree.sha)).unwrap_or(l).to_string()).collect())
        }
        // git grep exits 1 with nothing on stderr when nothing matches.
        Err(trees::TreeError::Git { msg, .. }) if msg.is_empty() => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The files of the pinned EAT tree that read `agent_toolkit_models`, searched with
/// data/knobs.json's pathspecs for that key (issue 20): EAT's deploy path is proved by one.
/// `eas up`'s config plan half calls this once the trees are read and hands the answer to
/// [`crate::config::model::prove_deploy_path`].
pub fn eat_model_readers(eat: &Tree) -> Result<Vec<String>, trees::TreeError> {
    let knob = knobs::table()
        .keys
        .iter()
        .find(|k| k.key == crate::config::model::EAT_MODELS_KEY)
        .expect("data/knobs.json lists agent_toolkit_models");
    let mut found = Vec::new();
    for r in knob.readers.iter().filter(|r| r.tree == eat.name) {
        found.extend(grep(eat, &knob.key, &r.paths)?);
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// A search of the pinned trees that did not answer (the command edge: exit 1, the trees in the
/// cache unchanged).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct AuditError(#[from] pub trees::TreeError);

pub fn run(trees: &[Tree], d: &Decision, plan: &Plan, allow_unread: &[String]) -> Result<Audit, AuditError> {
    let refs: Vec<TreeRef> = trees
        .iter()
        .map(|t| TreeRef { name: t.name, at: format!("{}@{}", t.repo, &t.sha[..t.sha.len().min(7)]) })
        .collect();
    let patches: Vec<Planned> =
        plan.to_apply().filter_map(|p| p.patch.as_ref().map(|f| Planned { id: &p.id, text: &f.text })).collect();
    let written = written(d);
    // Every grep the audit asks for, run at once, one git process each: a first pass only
    // collects the questions. A question it did not foresee is asked when it comes.
    let mut wanted: Vec<Query> = Vec::new();
    knobs::audit(&written, &refs, &patches, allow_unread, &mut |name, key, paths| {
        wanted.push((name.to_string(), key.to_string(), paths.to_vec()));
        Vec::new()
    });
    wanted.sort();
    wanted.dedup();
    let ask = |(name, key, paths): &Query| -> Result<Vec<String>, trees::TreeError> {
        match trees.iter().find(|t| t.name == name) {
            Some(t) => grep(t, key, paths),
            None => Ok(Vec::new()),
        }
    };
    let mut answers: HashMap<Query, Result<Vec<String>, trees::TreeError>> = std::thread::scope(|s| {
        let asked: Vec<_> = wanted.into_iter().map(|q| s.spawn(move || (ask(&q), q))).collect();
        asked.into_iter().map(|h| h.join().expect("a grep thread does not panic")).map(|(a, q)| (q, a)).collect()
    });
    let mut failed = None;
    let mut find = |name: &str, key: &str, paths: &[String]| -> Vec<String> {
        let q = (name.to_string(), key.to_string(), paths.to_vec());
        let answer = answers.remove(&q).unwrap_or_else(|| ask(&q));
        answer.unwrap_or_else(|e| {
            failed.get_or_insert(e);
            Vec::new()
        })
    };
    let audit = knobs::audit(&written, &refs, &patches, allow_unread, &mut find);
    if let Some(e) = failed {
        return Err(AuditError(e));
    }
    Ok(audit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// A reader on a task line counts; one in a comment, or outside the pathspecs, does not.
    #[test]
    fn eat_model_readers_searches_knobs_pathspecs_and_skips_comments() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        git(p, &["init", "-q"]);
        std::fs::create_dir_all(p.join("roles/models/tasks")).unwrap();
        std::fs::create_dir_all(p.join("docs")).unwrap();
        std::fs::write(p.join("roles/models/tasks/main.yaml"), "# agent_toolkit_models is read here\n").unwrap();
        std::fs::write(p.join("docs/models.md"), "agent_toolkit_models: [a]\n").unwrap();
        git(p, &["add", "-A"]);
        git(p, &["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "a"]);
        let sha = git(p, &["rev-parse", "HEAD"]);
        let objects = p.join(".git");
        let tree = Tree { name: "eat", repo: "intel/agent-toolkit".into(), objects: &objects, sha: &sha };
        assert_eq!(eat_model_readers(&tree).unwrap(), Vec::<String>::new(), "a comment and docs/ are not readers");
        std::fs::write(
            p.join("roles/models/tasks/main.yaml"),
            "- debug: {msg: \"{{ agent_toolkit_models | join(',') }}\"}\n",
        )
        .unwrap();
        git(p, &["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "b"]);
        let sha = git(p, &["rev-parse", "HEAD"]);
        let tree = Tree { name: "eat", repo: "intel/agent-toolkit".into(), objects: &objects, sha: &sha };
        assert_eq!(eat_model_readers(&tree).unwrap(), vec!["roles/models/tasks/main.yaml".to_string()]);
    }
}
