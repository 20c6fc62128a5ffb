//! Following a hunk that moved to another file (issue 28 item 4). A row may name the files its
//! hunk may live in (`may_move_to`, globs such as `roles/envoy_gateway/**`); when its own file no
//! longer holds the context, those files are searched at the pinned commit for the exact lines of
//! the patch's side (the original side to apply, the patched side to find it merged). Exactly one
//! place decides there, and the decision cites it (`moved: path:a-b`); none or several leave the
//! row to STOP as before. Nothing is ever applied where the lines were not found.

use super::git::{GitError, Repo};
use super::patch::{self, PatchFile};

/// Where a patch's lines were looked for, and what was found.
#[derive(Debug, Clone, PartialEq)]
pub enum Search {
    /// One file holds every hunk exactly once: the patch retargeted there, and the lines of its
    /// first hunk.
    One { patch: PatchFile, path: String, lines: [u32; 2] },
    /// No searched file holds the lines.
    None { searched: usize },
    /// More than one place holds them: `path:line` of each.
    Several(Vec<String>),
}

impl Search {
    /// What the decision's fact says of a search that did not decide.
    pub fn note(&self) -> String {
        match self {
            Search::One { path, lines, .. } => format!("moved: {path}:{}-{}", lines[0], lines[1]),
            Search::None { searched } => format!("not found in the {searched} file(s) it may have moved to"),
            Search::Several(at) => {
                format!("found in {} places it may have moved to ({}): ambiguous", at.len(), at.join(", "))
            }
        }
    }
}

/// Whether `path` matches `glob`: `*` within one path segment, `**` across segments.
pub fn glob_match(glob: &str, path: &str) -> bool {
    fn seg(g: &str, s: &str) -> bool {
        match g.split_once('*') {
            None => g == s,
            Some((pre, rest)) => {
                s.starts_with(pre) && (0..=s.len() - pre.len()).any(|i| seg(rest, &s[pre.len() + i..]))
            }
        }
    }
    fn walk(g: &[&str], p: &[&str]) -> bool {
        match (g.first(), p.first()) {
            (None, None) => true,
            (Some(&"**"), _) => walk(&g[1..], p) || (!p.is_empty() && walk(g, &p[1..])),
            (Some(a), Some(b)) => seg(a, b) && walk(&g[1..], &p[1..]),
            _ => false,
        }
    }
    let g: Vec<&str> = glob.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    walk(&g, &p)
}

/// The lines of each hunk's side: `reverse` false reads the original side (context and removed
/// lines), true the patched side (context and added lines).
pub fn sides(text: &str, reverse: bool) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut in_hunk = false;
    for line in text.lines() {
        if line.starts_with("@@ ") {
            out.push(Vec::new());
            in_hunk = true;
            continue;
        }
        if !in_hunk || line.starts_with("--- ") || line.starts_with("diff ") {
            in_hunk = false;
            continue;
        }
        let Some(cur) = out.last_mut() else { continue };
        match line.as_bytes().first() {
            Some(b' ') => cur.push(line[1..].to_string()),
            None => cur.push(String::new()),
            Some(b'-') if !reverse => cur.push(line[1..].to_string()),
            Some(b'+') if reverse => cur.push(line[1..].to_string()),
            _ => {}
        }
    }
    out
}

/// The 1-based lines where `block` occurs, line for line, in `text`.
pub fn places(text: &str, block: &[String]) -> Vec<u32> {
    let lines: Vec<&str> = text.lines().collect();
    if block.is_empty() || block.len() > lines.len() {
        return Vec::new();
    }
    (0..=lines.len() - block.len())
        .filter(|&i| block.iter().zip(&lines[i..]).all(|(b, l)| b == l))
        .map(|i| i as u32 + 1)
        .collect()
}

/// The patch with every header naming `from` naming `to` instead.
pub fn retarget(p: &PatchFile, from: &str, to: &str) -> Result<PatchFile, String> {
    let mut text = String::new();
    for line in p.text.split_inclusive('\n') {
        let l = line
            .replace(&format!("--- a/{from}"), &format!("--- a/{to}"))
            .replace(&format!("+++ b/{from}"), &format!("+++ b/{to}"))
            .replace(&format!("diff --git a/{from} b/{from}"), &format!("diff --git a/{to} b/{to}"));
        text.push_str(if line.starts_with("--- ") || line.starts_with("+++ ") || line.starts_with("diff ") {
            &l
        } else {
            line
        });
    }
    patch::parse(&text)
}

/// The files of `commit` that match one of `globs`, other than `own`.
pub fn candidates(git: &Repo, commit: &str, globs: &[String], own: &str) -> Result<Vec<String>, GitError> {
    let listing = git.run_ok(&["ls-tree", "-r", "--name-only", commit], None, None)?;
    Ok(listing.lines().filter(|p| *p != own && globs.iter().any(|g| glob_match(g, p))).map(str::to_string).collect())
}

/// Searches the files a one-file patch may have moved to for its side's exact lines.
pub fn search(git: &Repo, commit: &str, globs: &[String], p: &PatchFile, reverse: bool) -> Result<Search, GitError> {
    let Some(own) = p.files.first().filter(|_| p.files.len() == 1).map(|f| f.path.clone()) else {
        return Ok(Search::None { searched: 0 });
    };
    let blocks = sides(&p.text, reverse);
    let files = candidates(git, commit, globs, &own)?;
    let mut found: Vec<(String, Vec<u32>)> = Vec::new();
    let mut several = Vec::new();
    for path in &files {
        let Some(text) = git.show(commit, path)? else { continue };
        let at: Vec<Vec<u32>> = blocks.iter().map(|b| places(&text, b)).collect();
        for (i, a) in at.iter().enumerate().filter(|(_, a)| !a.is_empty()) {
            several.extend(a.iter().map(|l| format!("{path}:{l} (hunk {})", i + 1)));
        }
        if at.iter().all(|a| a.len() == 1) {
            found.push((path.clone(), at.iter().map(|a| a[0]).collect()));
        }
    }
    // One place for every hunk, in one file, and nowhere else.
    if found.len() == 1 && several.len() == blocks.len() {
        let (path, starts) = found.remove(0);
        let len = blocks[0].len().max(1) as u32;
        let patch = retarget(p, &own, &path).map_err(|e| GitError::Failed {
            dir: String::new(),
            args: "overlay retarget".into(),
            stderr: e,
        })?;
        return Ok(Search::One { patch, path, lines: [starts[0], starts[0] + len - 1] });
    }
    if several.is_empty() {
        return Ok(Search::None { searched: files.len() });
    }
    Ok(Search::Several(several))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_segments() {
        assert!(glob_match("roles/envoy_gateway/**", "roles/envoy_gateway/tasks/proxy.yaml"));
        assert!(glob_match("roles/envoy_gateway/**", "roles/envoy_gateway/x"));
        assert!(!glob_match("roles/envoy_gateway/**", "roles/istio/tasks/install.yaml"));
        assert!(glob_match("roles/*/tasks/*.yaml", "roles/a/tasks/b.yaml"));
        assert!(!glob_match("roles/*/tasks/*.yaml", "roles/a/tasks/sub/b.yaml"));
        assert!(glob_match("**/proxy.yaml", "roles/a/proxy.yaml"));
    }

    const P: &str = "--- a/r/a.yaml\n+++ b/r/a.yaml\n@@ -2,3 +2,3 @@\n x\n-old\n+new\n y\n";

    #[test]
    fn each_side_is_found_line_for_line() {
        assert_eq!(sides(P, false), [vec!["x", "old", "y"]]);
        assert_eq!(sides(P, true), [vec!["x", "new", "y"]]);
        let text = "a\nx\nold\ny\nb\nx\nold\ny\n";
        assert_eq!(places(text, &sides(P, false)[0]), [2, 6]);
        assert_eq!(places("x\nold\n", &sides(P, false)[0]), Vec::<u32>::new());
        let moved = retarget(&patch::parse(P).unwrap(), "r/a.yaml", "r/b.yaml").unwrap();
        assert_eq!(moved.files[0].path, "r/b.yaml");
        assert!(moved.text.contains("\n-old\n+new\n"), "{}", moved.text);
    }
}
