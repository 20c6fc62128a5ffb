//! The five decisions of SPEC §5, per overlay row, at one commit: skip, merged, fixed, apply or
//! STOP. Everything is read from the commit through a scratch index, so the answer is the same
//! before and after the overlay is applied to the work tree.

use std::path::{Path, PathBuf};

use super::choices::Generated;
use super::data::{Cite, Fixed, Overlay, Row, Skip, Variant};
use super::git::{GitError, Repo, ScratchIndex};
use super::moved::{self, Search};
use super::patch::PatchFile;

/// What the decider chose for one row.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Not needed on this cluster: a fact or a generated choice says so.
    Skip,
    /// Upstream already contains this variant (`git apply -R --check` passes).
    Merged { variant: String },
    /// Upstream fixed it another way: the probe matches and the knob is still read.
    Fixed,
    /// The first variant whose `git apply --check` passes.
    Apply { variant: String },
    /// No variant applies: the patch must be regenerated against the pinned commit.
    Stop,
}

/// Where a decision's fact comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A choice `eas config`'s rules made (its own source is in choices.txt).
    Choice(String),
    /// The facts document's node labels.
    NodeLabel(String),
    /// A file of the pinned tree, with the lines the decision read.
    Upstream(Cite),
}

impl Source {
    pub fn render(&self, explain: bool) -> String {
        match self {
            Source::Choice(k) => format!("eas config: {k}"),
            Source::NodeLabel(l) => format!("facts: nodes[].labels[{l}]"),
            Source::Upstream(c) if explain => c.permalink(),
            Source::Upstream(c) => c.short(),
        }
    }
}

/// Why a variant did not apply: the file and hunk, and the upstream change that moved it.
#[derive(Debug, Clone, PartialEq)]
pub struct Miss {
    pub variant: String,
    /// The upstream layout the variant was written for, and the commit it was written against.
    pub layout: String,
    pub written_against: String,
    pub patch_name: String,
    pub path: String,
    /// 1-based hunk number within the file, when git named a line.
    pub hunk: Option<usize>,
    /// The line the hunk was written against.
    pub line: Option<u32>,
    /// The file is not in the tree at all.
    pub missing: bool,
    /// The last commit at or before the pinned one that changed the file: (sha, subject).
    pub last_change: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub id: String,
    pub title: String,
    pub outcome: Outcome,
    pub fact: String,
    pub choice: String,
    pub source: Source,
    /// The patch to apply, for [`Outcome::Apply`].
    pub patch: Option<PatchFile>,
    /// Why each variant failed, for [`Outcome::Stop`].
    pub misses: Vec<Miss>,
}

impl Decision {
    /// The `fact -> choice [source]` line.
    pub fn line(&self, explain: bool) -> String {
        format!("{} -> {} [{}]", self.fact, self.choice, self.source.render(explain))
    }
}

/// Every row's decision at one commit of one clone.
#[derive(Debug, Clone)]
pub struct Plan {
    pub repo: PathBuf,
    pub commit: String,
    pub upstream: String,
    /// Whether skip conditions were evaluated (a facts document was given).
    pub with_facts: bool,
    pub decisions: Vec<Decision>,
}

impl Plan {
    pub fn stops(&self) -> impl Iterator<Item = &Decision> {
        self.decisions.iter().filter(|d| d.outcome == Outcome::Stop)
    }

    pub fn to_apply(&self) -> impl Iterator<Item = &Decision> {
        self.decisions.iter().filter(|d| matches!(d.outcome, Outcome::Apply { .. }))
    }

    /// The STOP report: per stopped row, what failed where, and what to regenerate.
    pub fn stop_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in self.stops() {
            out.push(format!("{} ({}): no variant applies to {} at {}", d.id, d.title, self.upstream, self.commit));
            for m in &d.misses {
                let what = if m.missing {
                    format!("{} is not in the tree", m.path)
                } else {
                    match (m.hunk, m.line) {
                        (Some(h), Some(l)) => {
                            format!("{} hunk {h} (written against line {l}) no longer applies", m.path)
                        }
                        _ => format!("{} no longer applies", m.path),
                    }
                };
                let change = match &m.last_change {
                    Some((sha, subject)) => {
                        format!("; last upstream commit that changed it: {sha} {subject:?}")
                    }
                    None => "; no upstream commit ever touched that path".to_string(),
                };
                out.push(format!(
                    "  variant {} ({}, written against {}): {what}{change}",
                    m.variant,
                    m.layout,
                    &m.written_against[..7]
                ));
            }
            let names: Vec<&str> = d.misses.iter().map(|m| m.patch_name.as_str()).collect();
            out.push(format!(
                "  regenerate {} against {} (its patch {}: a new eas release carries it); meanwhile use a pins profile or --ref whose overlay decides fully",
                d.id,
                self.commit,
                names.join(", ")
            ));
        }
        out
    }
}

/// Decides every row of `overlay` at `commit` of the clone at `repo`. Without `generated`, skip
/// conditions are not evaluated and every row is considered needed.
pub fn decide_with(
    overlay: &Overlay,
    repo: &Path,
    commit: &str,
    generated: Option<&Generated>,
) -> Result<Plan, GitError> {
    let git = Repo::open(repo)?;
    let commit = git.commit("commit", commit)?;
    let index = git.scratch_index(&commit)?;
    let short = &commit[..7];
    let cx = Cx { git: &git, index: &index, commit: &commit, upstream: &overlay.upstream };
    // Rows are independent and only read (a scratch index, `apply --cached --check`, `cat-file`):
    // their git calls run side by side, and the decisions keep the rows' order.
    let decided: Vec<Result<Decision, GitError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = overlay
            .rows
            .iter()
            .map(|row| {
                let cx = &cx;
                scope.spawn(move || {
                    let need = match generated {
                        Some(g) => match skip_reason(row, g) {
                            Some(d) => return Ok(d),
                            None => needed_because(row, g),
                        },
                        None => "needed (no facts: skip conditions not evaluated)".to_string(),
                    };
                    decide_row(cx, row, &format!("{} {need}; at {short}", row.id))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("an overlay row's decision panicked")).collect()
    });
    let decisions = decided.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        repo: repo.to_path_buf(),
        commit,
        upstream: overlay.upstream.clone(),
        with_facts: generated.is_some(),
        decisions,
    })
}

struct Cx<'a> {
    git: &'a Repo,
    index: &'a ScratchIndex,
    commit: &'a str,
    upstream: &'a str,
}

impl Cx<'_> {
    fn cite(&self, path: &str, lines: Option<[u32; 2]>) -> Cite {
        Cite { repo: self.upstream.to_string(), sha: self.commit.to_string(), path: path.to_string(), lines }
    }
}

/// The skip decision for a row whose condition holds, else None.
pub fn skip_reason(row: &Row, g: &Generated) -> Option<Decision> {
    let skip = row.skip.as_ref()?;
    let (holds, fact, source) = match skip {
        Skip::ChoiceIs { choice, value, .. } => {
            let got = g.choice(choice);
            (
                // A key the generator leaves unwritten reads as empty (istio_platform on Istio's
                // default CNI layout, issue 28 item 5): 0002's skip holds there too.
                got.unwrap_or_default() == value.as_str(),
                match got {
                    Some(v) => format!("generated {choice} is {v:?}"),
                    None => format!("generated {choice} is not written (read as \"\")"),
                },
                Source::Choice(choice.clone()),
            )
        }
        Skip::ChoiceIsNot { choice, value, .. } => {
            let got = g.choice(choice);
            (
                got != Some(value.as_str()),
                format!("generated {choice} is {:?}, not {value:?}", got.unwrap_or("(unset)")),
                Source::Choice(choice.clone()),
            )
        }
        Skip::NoNodeLabel { label, value, .. } => {
            let holders: Vec<&str> = g
                .node_labels
                .iter()
                .filter(|(_, l)| l.get(label).is_some_and(|v| v == value))
                .map(|(n, _)| n.as_str())
                .collect();
            (holders.is_empty(), format!("no node labelled {label}={value}"), Source::NodeLabel(label.clone()))
        }
    };
    if !holds {
        return None;
    }
    let why = match skip {
        Skip::ChoiceIs { why, .. } | Skip::ChoiceIsNot { why, .. } | Skip::NoNodeLabel { why, .. } => why,
    };
    Some(Decision {
        id: row.id.clone(),
        title: row.title.clone(),
        outcome: Outcome::Skip,
        fact: format!("{} {fact}", row.id),
        choice: format!("skip {} (not needed: {why})", row.id),
        source,
        patch: None,
        misses: Vec::new(),
    })
}

/// Why a row with a skip condition is needed on this cluster, for the decision's fact.
fn needed_because(row: &Row, g: &Generated) -> String {
    match &row.skip {
        None => "needed".to_string(),
        Some(Skip::ChoiceIs { choice, .. } | Skip::ChoiceIsNot { choice, .. }) => {
            format!("needed ({choice} {:?})", g.choice(choice).unwrap_or("(unset)"))
        }
        Some(Skip::NoNodeLabel { label, value, .. }) => {
            let n = g.node_labels.values().filter(|l| l.get(label).is_some_and(|v| v == value)).count();
            format!("needed ({n} node{} labelled {label}={value})", if n == 1 { "" } else { "s" })
        }
    }
}

fn decide_row(cx: &Cx, row: &Row, lead: &str) -> Result<Decision, GitError> {
    let decision = |outcome: Outcome, fact: String, choice: String, source: Source| Decision {
        id: row.id.clone(),
        title: row.title.clone(),
        outcome,
        fact,
        choice,
        source,
        patch: None,
        misses: Vec::new(),
    };

    // merged: upstream already carries one of the variants.
    for v in &row.variants {
        let check = check(cx, &v.patch, true)?;
        if check.ok {
            return Ok(decision(
                Outcome::Merged { variant: v.name.clone() },
                format!("{lead}: variant {} reverse-applies (upstream contains it)", v.name),
                format!("merged {} (nothing to apply)", row.id),
                Source::Upstream(cx.cite(&check.path, Some(check.lines))),
            ));
        }
    }
    // Whether the row's own file still holds a variant's context; when none does, the files
    // its hunk may have moved to are searched (merged, fixed and apply alike).
    let mut forward = Vec::new();
    for v in &row.variants {
        forward.push(check(cx, &v.patch, false)?);
    }
    let follow = !row.may_move_to.is_empty() && forward.iter().all(|c| !c.ok);
    let mut notes: Vec<String> = Vec::new();
    if follow {
        for v in &row.variants {
            match moved::search(cx.git, cx.commit, &row.may_move_to, &v.patch, true)? {
                Search::One { patch, path, lines } if check(cx, &patch, true)?.ok => {
                    return Ok(decision(
                        Outcome::Merged { variant: v.name.clone() },
                        format!(
                            "{lead}: variant {} reverse-applies in the file its hunk moved to (moved: {path}:{}-{})",
                            v.name, lines[0], lines[1]
                        ),
                        format!("merged {} (nothing to apply)", row.id),
                        Source::Upstream(cx.cite(&path, Some(lines))),
                    ));
                }
                s @ Search::Several(_) => notes.push(format!("its patched lines {}", s.note())),
                _ => {}
            }
        }
    }

    // fixed: upstream solved it another way and still reads the key the generator writes.
    let mut fixed_note = String::new();
    if let Some(f) = &row.fixed {
        let globs = if follow { row.may_move_to.as_slice() } else { &[] };
        match probe(cx, f, globs)? {
            Probed::Fixed(path, line) => {
                let at = if path == f.probe.path { String::new() } else { format!(" (moved: {path}:{line})") };
                return Ok(decision(
                    Outcome::Fixed,
                    format!(
                        "{lead}: {}{at} and {} reads {}",
                        super::probe::describe(&f.probe),
                        f.knob.path,
                        f.knob.name
                    ),
                    format!("fixed {} ({})", row.id, f.why),
                    Source::Upstream(cx.cite(&path, Some([line, line]))),
                ));
            }
            Probed::KnobGone => {
                fixed_note = format!(" (probe matches but {} no longer reads {})", f.knob.path, f.knob.name);
            }
            Probed::Several(at) => {
                notes.push(format!("the fixed probe matches in {} places ({})", at.len(), at.join(", ")))
            }
            Probed::No => {}
        }
    }

    // apply: the first variant that applies, in the row's order.
    let mut misses = Vec::new();
    for (v, check) in row.variants.iter().zip(&forward) {
        if check.ok {
            let mut d = decision(
                Outcome::Apply { variant: v.name.clone() },
                format!("{lead}: variant {} applies{fixed_note}", v.name),
                format!("apply {} variant {}", row.id, v.name),
                Source::Upstream(cx.cite(&check.path, Some(check.lines))),
            );
            d.patch = Some(v.patch.clone());
            return Ok(d);
        }
        misses.push(miss(cx, v, &check.stderr)?);
    }
    // ... or in the one place its context moved to, verified there by git before it is chosen.
    if follow {
        for v in &row.variants {
            match moved::search(cx.git, cx.commit, &row.may_move_to, &v.patch, false)? {
                Search::One { patch, path, lines } if check(cx, &patch, false)?.ok => {
                    let mut d = decision(
                        Outcome::Apply { variant: v.name.clone() },
                        format!(
                            "{lead}: variant {} applies in the file its hunk moved to (moved: {path}:{}-{}){fixed_note}",
                            v.name, lines[0], lines[1]
                        ),
                        format!("apply {} variant {} (moved: {path})", row.id, v.name),
                        Source::Upstream(cx.cite(&path, Some(lines))),
                    );
                    d.patch = Some(patch);
                    return Ok(d);
                }
                s => notes.push(format!("variant {}'s context {}", v.name, s.note())),
            }
        }
    }

    // STOP: name the first variant's failing file, the change that moved it, and the fix.
    let first = &misses[0];
    let where_ = match (first.missing, first.hunk) {
        (true, _) => format!("{} is gone", first.path),
        (false, Some(h)) => format!("{} hunk {h} no longer applies", first.path),
        (false, None) => format!("{} no longer applies", first.path),
    };
    let moved =
        first.last_change.as_ref().map(|(sha, _)| format!(", last changed by {}", &sha[..7])).unwrap_or_default();
    let searched = if notes.is_empty() { String::new() } else { format!("; {}", notes.join("; ")) };
    let mut d = decision(
        Outcome::Stop,
        format!("{lead}: no variant applies ({}: {where_}{moved}){fixed_note}{searched}", first.variant),
        format!("STOP: regenerate {} against {}", row.id, cx.commit),
        Source::Upstream(cx.cite(&first.path, None)),
    );
    d.misses = misses;
    Ok(d)
}

struct Check {
    ok: bool,
    stderr: String,
    /// The first file the patch touches, and the lines its first hunk was checked against.
    path: String,
    lines: [u32; 2],
}

/// `git apply --cached --check [-R] -v` of one patch against the scratch index.
fn check(cx: &Cx, patch: &PatchFile, reverse: bool) -> Result<Check, GitError> {
    let mut args = vec!["apply", "--cached", "--check", "-v"];
    if reverse {
        args.push("-R");
    }
    let out = cx.git.run(&args, Some(&patch.text), Some(&cx.index.path))?;
    let file = &patch.files[0];
    let hunk = &file.hunks[0];
    let (start, len) = if reverse { (hunk.new_start, hunk.new_len) } else { (hunk.old_start, hunk.old_len) };
    // With -v git reports where a hunk matched when that is not where it was written.
    let at = applied_at(&out.stderr, &file.path, 1).unwrap_or(start).max(1);
    Ok(Check { ok: out.ok, stderr: out.stderr, path: file.path.clone(), lines: [at, at + len.max(1) - 1] })
}

/// The line where hunk `nth` of `path` matched, from `git apply -v`'s "Hunk #n succeeded at L".
pub fn applied_at(stderr: &str, path: &str, nth: usize) -> Option<u32> {
    let mut in_file = false;
    for line in stderr.lines() {
        if let Some(p) = line.strip_prefix("Checking patch ") {
            in_file = p.trim_end_matches("...") == path;
            continue;
        }
        if in_file && let Some(rest) = line.strip_prefix(&format!("Hunk #{nth} succeeded at ")) {
            return rest.split_whitespace().next()?.trim_end_matches('.').parse().ok();
        }
    }
    None
}

/// What git's refusal says: the file, and the line of the hunk that failed (or that the file is
/// not in the tree).
pub fn failure_site(stderr: &str) -> Option<(String, Option<u32>, bool)> {
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("error: patch failed: ")
            && let Some((path, n)) = rest.rsplit_once(':')
        {
            return Some((path.to_string(), n.trim().parse().ok(), false));
        }
        if let Some(rest) = line.strip_prefix("error: ")
            && let Some(path) = rest.strip_suffix(": does not exist in index")
        {
            return Some((path.to_string(), None, true));
        }
    }
    None
}

fn miss(cx: &Cx, v: &Variant, stderr: &str) -> Result<Miss, GitError> {
    let (path, line, missing) = failure_site(stderr).unwrap_or_else(|| (v.patch.files[0].path.clone(), None, false));
    let hunk = line
        .and_then(|l| v.patch.file(&path).and_then(|f| f.hunks.iter().position(|h| h.old_start == l).map(|i| i + 1)));
    let last_change = cx.git.last_change(cx.commit, &path)?;
    Ok(Miss {
        variant: v.name.clone(),
        layout: v.layout.clone(),
        written_against: v.written_against.clone(),
        patch_name: v.patch_name.clone(),
        path,
        hunk,
        line,
        missing,
        last_change,
    })
}

enum Probed {
    /// The probe matched in this file at this line and the knob is read.
    Fixed(String, u32),
    /// The probe matched but the knob is gone.
    KnobGone,
    /// The probe's own file does not match and several moved-to files do: `path:line` of each.
    Several(Vec<String>),
    No,
}

/// The `fixed` probe in its own file, else (with `globs`) in the one file it may have moved to
/// that matches; several matching files decide nothing.
fn probe(cx: &Cx, f: &Fixed, globs: &[String]) -> Result<Probed, GitError> {
    let mut at = cx
        .git
        .show(cx.commit, &f.probe.path)?
        .and_then(|text| super::probe::matches(&f.probe, &text).map(|line| (f.probe.path.clone(), line, text)));
    if at.is_none() && !globs.is_empty() {
        let mut found = Vec::new();
        for path in moved::candidates(cx.git, cx.commit, globs, &f.probe.path)? {
            if let Some(text) = cx.git.show(cx.commit, &path)?
                && let Some(line) = super::probe::matches(&f.probe, &text)
            {
                found.push((path, line, text));
            }
        }
        if found.len() > 1 {
            return Ok(Probed::Several(found.iter().map(|(p, l, _)| format!("{p}:{l}")).collect()));
        }
        at = found.pop();
    }
    let Some((path, line, text)) = at else {
        return Ok(Probed::No);
    };
    let knob_text = if f.knob.path == path || f.knob.path == f.probe.path {
        Some(text)
    } else {
        cx.git.show(cx.commit, &f.knob.path)?
    };
    if knob_text.is_some_and(|t| t.contains(f.knob.name.as_str())) {
        Ok(Probed::Fixed(path, line))
    } else {
        Ok(Probed::KnobGone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_where_git_applied_a_hunk() {
        let stderr = "Checking patch a.yaml...\nHunk #1 succeeded at 214 (offset 3 lines).\n\
                      Checking patch b.yaml...\nHunk #1 succeeded at 9 (offset -1 lines).\n";
        assert_eq!(applied_at(stderr, "a.yaml", 1), Some(214));
        assert_eq!(applied_at(stderr, "b.yaml", 1), Some(9));
        assert_eq!(applied_at(stderr, "a.yaml", 2), None);
        assert_eq!(applied_at("Checking patch a.yaml...\n", "a.yaml", 1), None);
    }

    #[test]
    fn reads_which_file_and_line_git_refused() {
        let failed = "Checking patch r/x.yaml...\nerror: while searching for:\n  a\n\n\
                      error: patch failed: r/x.yaml:211\nerror: r/x.yaml: patch does not apply\n";
        assert_eq!(failure_site(failed), Some(("r/x.yaml".into(), Some(211), false)));
        let gone = "Checking patch r/y.yaml...\nerror: r/y.yaml: does not exist in index\n";
        assert_eq!(failure_site(gone), Some(("r/y.yaml".into(), None, true)));
        assert_eq!(failure_site("fatal: something else\n"), None);
    }

    fn row_with(skip: Skip) -> Row {
        let mut r = Overlay::builtin().unwrap().rows.remove(0);
        r.skip = Some(skip);
        r
    }

    fn generated(choices: &[(&str, &str)], labels: &[(&str, &str, &str)]) -> Generated {
        let mut g = Generated::default();
        for (k, v) in choices {
            g.choices.insert(k.to_string(), v.to_string());
        }
        for (node, k, v) in labels {
            g.node_labels.entry(node.to_string()).or_default().insert(k.to_string(), v.to_string());
        }
        g
    }

    #[test]
    fn skip_conditions_table() {
        let is_empty = Skip::ChoiceIs { choice: "istio_platform".into(), value: String::new(), why: "w".into() };
        let not_balloons =
            Skip::ChoiceIsNot { choice: "kubernetes_cpu_policy".into(), value: "nri-balloons".into(), why: "w".into() };
        let cp = "node-role.kubernetes.io/control-plane";
        let no_k3s_cp = Skip::NoNodeLabel { label: cp.into(), value: "true".into(), why: "w".into() };
        let cases: Vec<(Skip, Generated, bool)> = vec![
            (is_empty.clone(), generated(&[("istio_platform", "")], &[]), true),
            (is_empty.clone(), generated(&[("istio_platform", "k3d")], &[]), false),
            // Unwritten reads as empty: the generator leaves istio_platform out on Istio's default layout.
            (is_empty, generated(&[], &[]), true),
            (not_balloons.clone(), generated(&[("kubernetes_cpu_policy", "best-effort")], &[]), true),
            (not_balloons.clone(), generated(&[("kubernetes_cpu_policy", "nri-balloons")], &[]), false),
            (not_balloons, generated(&[], &[]), true),
            (no_k3s_cp.clone(), generated(&[], &[("s0", cp, "true")]), false),
            (no_k3s_cp.clone(), generated(&[], &[("s0", cp, "")]), true),
            (no_k3s_cp.clone(), generated(&[], &[("s0", cp, ""), ("s1", cp, "true")]), false),
            (no_k3s_cp, generated(&[], &[]), true),
        ];
        for (skip, g, want) in cases {
            let got = skip_reason(&row_with(skip.clone()), &g);
            assert_eq!(got.is_some(), want, "{skip:?} with {g:?}");
            if let Some(d) = got {
                assert_eq!(d.outcome, Outcome::Skip);
                assert!(d.choice.starts_with("skip 0002"), "{}", d.choice);
            }
        }
    }

    #[test]
    fn a_decision_prints_as_fact_choice_source() {
        let c = Cite::example("p.yaml", [4, 6]);
        let d = Decision {
            id: "0006".into(),
            title: "t".into(),
            outcome: Outcome::Apply { variant: "v".into() },
            fact: "0006 needed; at 0123456: variant v applies".into(),
            choice: "apply 0006 variant v".into(),
            source: Source::Upstream(c),
            patch: None,
            misses: vec![],
        };
        assert_eq!(
            d.line(false),
            "0006 needed; at 0123456: variant v applies -> apply 0006 variant v [o/r@0123456 p.yaml:4-6]"
        );
        assert!(
            d.line(true)
                .ends_with("[https://github.com/o/r/blob/0123456789abcdef0123456789abcdef01234567/p.yaml#L4-L6]")
        );
    }
}
