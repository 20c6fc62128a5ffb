//! Day two: what changed since the last *completed* run (one whose install phase finished and
//! that exited 0 or 5), as the plan's `since_last`, and the facts as the decisions read them
//! (minus what the ledger says eas's runs created). The run's kind (`run_kind`) is decided from
//! this in [`super::resume::classify`].
//!
//! A completed run is kept in `<state>/completed/`: its journal, the facts it decided from, its
//! plan and every generated file, so a later failed run does not hide it and the files can be
//! diffed. A record from before `completed/` was kept falls back to `state.json` and the inputs
//! kept beside it (`facts.json`, `plan.json`, `choices.txt`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

pub use crate::since_last::{DecisionChange, FileChange, PatchChange, PinMove, SinceLast};

use super::journal::{JournalError, State, Status, create_private_dir, write_atomic};
use super::ledger::{Release, Snapshot};
use crate::facts::Facts;
use crate::plan::{PhaseId, PlanDecision, PlanPatch};

/// The directory beside `state.json` that keeps the last completed run.
pub const COMPLETED: &str = "completed";
/// The key of the decision that removes the last completed run's model when the pick changed.
pub const UNDEPLOY: &str = "undeploy";
/// The generated file that only explains the decisions: compared as decisions, not as a file.
const CHOICES: &str = "choices.txt";

/// Whether `s` is a completed run: its install phase finished and it exited 0 or 5 (installed,
/// verification failed).
pub fn is_completed(s: &State) -> bool {
    s.entry(PhaseId::Install).status == Status::Done
        && matches!(s.exit_code, Some(c) if c == crate::plan::EXIT_SUCCESS || c == crate::plan::Kind::Verify.exit_code())
}

/// The last completed run, as kept.
#[derive(Debug, Clone)]
pub struct Completed {
    pub state: State,
    pub facts: Option<Facts>,
    pub decisions: Vec<PlanDecision>,
    pub overlay: Vec<PlanPatch>,
    /// The bastion image's tag (its content hash).
    pub image: Option<String>,
    /// The model it deployed (its plan's `model_pick`).
    pub model: Option<String>,
    pub files: Vec<(String, String)>,
}

#[derive(serde::Deserialize)]
struct KeptPlan {
    #[serde(default)]
    decisions: Vec<KeptDecision>,
    #[serde(default)]
    overlay: Vec<KeptPatch>,
    #[serde(default)]
    image: Option<KeptImage>,
    #[serde(default)]
    model_pick: Option<KeptPick>,
}

#[derive(serde::Deserialize)]
struct KeptPick {
    #[serde(default)]
    name: Option<String>,
}

#[derive(serde::Deserialize)]
struct KeptDecision {
    fact: String,
    choice: String,
}

#[derive(serde::Deserialize)]
struct KeptPatch {
    id: String,
    outcome: String,
    #[serde(default)]
    choice: String,
}

#[derive(serde::Deserialize)]
struct KeptImage {
    tag: String,
}

impl Completed {
    /// `<dir>/completed/`, else `state.json` in `dir` when that run completed; `None` when no run
    /// on this cluster completed.
    pub fn load(dir: &Path) -> Result<Option<Completed>, JournalError> {
        let kept = dir.join(COMPLETED);
        let (state, from) = match State::load(&kept.join(super::journal::FILE))? {
            Some(s) => (s, kept),
            None => match State::load(&dir.join(super::journal::FILE))? {
                Some(s) if is_completed(&s) => (s, dir.to_path_buf()),
                _ => return Ok(None),
            },
        };
        let read = |name: &str| std::fs::read_to_string(from.join(name)).ok();
        let facts = read("facts.json").and_then(|t| serde_json::from_str(&t).ok());
        let plan: Option<KeptPlan> = read("plan.json").and_then(|t| serde_json::from_str(&t).ok());
        let mut files = Vec::new();
        if let Ok(entries) = std::fs::read_dir(from.join("files")) {
            for e in entries.flatten() {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    files.push((e.file_name().to_string_lossy().into_owned(), text));
                }
            }
        } else if let Some(c) = read(CHOICES) {
            files.push((CHOICES.to_string(), c));
        }
        files.sort();
        let model = plan.as_ref().and_then(|p| p.model_pick.as_ref()).and_then(|m| m.name.clone());
        let (decisions, overlay, image) = match plan {
            Some(p) => (
                p.decisions
                    .into_iter()
                    .map(|d| PlanDecision {
                        fact: d.fact,
                        choice: d.choice,
                        source: String::new(),
                        permalink: String::new(),
                    })
                    .collect(),
                p.overlay
                    .into_iter()
                    .map(|p| PlanPatch {
                        id: p.id,
                        outcome: outcome(&p.outcome),
                        fact: String::new(),
                        choice: p.choice,
                        source: String::new(),
                        permalink: String::new(),
                    })
                    .collect(),
                p.image.map(|i| i.tag),
            ),
            None => (Vec::new(), Vec::new(), None),
        };
        Ok(Some(Completed { state, facts, decisions, overlay, image, model, files }))
    }

    /// Keeps a completed run in `<dir>/completed/` (replacing the one kept before).
    pub fn save(
        dir: &Path,
        state: &State,
        facts: &Facts,
        plan_json: &str,
        files: &[(String, String)],
    ) -> std::io::Result<()> {
        let kept = dir.join(COMPLETED);
        create_private_dir(&kept)?;
        create_private_dir(&kept.join("files"))?;
        write_atomic(&kept.join("facts.json"), pretty(facts).as_bytes())?;
        write_atomic(&kept.join("plan.json"), plan_json.as_bytes())?;
        for (name, text) in files {
            // Generated files have flat names; anything else is not one of ours to keep.
            if !name.contains('/') {
                write_atomic(&kept.join("files").join(name), text.as_bytes())?;
            }
        }
        // The journal last: a kept run is whole once its state.json is there.
        write_atomic(&kept.join(super::journal::FILE), pretty(state).as_bytes())
    }

    /// Forgets the kept run (`eas down` removed what it installed).
    pub fn forget(dir: &Path) -> std::io::Result<()> {
        match std::fs::remove_dir_all(dir.join(COMPLETED)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// When its install phase finished.
    pub fn installed_at(&self) -> &str {
        let e = self.state.entry(PhaseId::Install);
        e.finished.as_deref().or(self.state.finished.as_deref()).unwrap_or("?")
    }

    /// Whether its verification failed (it exited 5).
    pub fn verify_failed(&self) -> bool {
        self.state.exit_code == Some(crate::plan::Kind::Verify.exit_code())
            || self.state.entry(PhaseId::Verify).status == Status::Failed
    }
}

fn pretty(v: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a record serialises");
    s.push('\n');
    s
}

fn outcome(s: &str) -> crate::plan::PatchOutcome {
    use crate::plan::PatchOutcome::*;
    match s {
        "apply" => Apply,
        "merged" => Merged,
        "fixed" => Fixed,
        "stop" => Stop,
        _ => Skip,
    }
}

/// The facts as the decisions read them: without the namespaces and Helm releases the ledger
/// says eas's runs created (the gatherer already left their pods out of `pod_requests`), so a
/// second run decides as the first did.
pub fn discount(facts: &Facts, created: &Snapshot) -> Facts {
    let mut f = facts.clone();
    f.namespaces.retain(|n| !created.namespaces.contains(n));
    f.helm_releases
        .retain(|r| !created.helm_releases.contains(&Release { namespace: r.namespace.clone(), name: r.name.clone() }));
    f
}

/// This run, as it compares with the last completed one.
pub struct Now<'a> {
    pub pins: &'a BTreeMap<String, String>,
    pub decisions: &'a [PlanDecision],
    pub overlay: &'a [PlanPatch],
    pub files: &'a [(String, String)],
    /// As the decisions read them ([`discount`]).
    pub facts: &'a Facts,
    pub image: Option<&'a str>,
}

pub fn since_last(last: &Completed, now: &Now) -> SinceLast {
    let mut s = SinceLast { installed_at: last.installed_at().to_string(), ..SinceLast::default() };
    let trees: BTreeSet<&String> = last.state.pins.shas.keys().chain(now.pins.keys()).collect();
    for t in trees {
        let (from, to) = (last.state.pins.shas.get(t), now.pins.get(t));
        if from != to {
            let short = |v: Option<&String>| v.map_or("-".to_string(), |v| v[..v.len().min(7)].to_string());
            s.pins.push(PinMove { tree: t.clone(), from: short(from), to: short(to), commits: None });
        }
    }
    s.decisions = decision_changes(&last.decisions, now.decisions);
    let was: BTreeMap<&str, &PlanPatch> = last.overlay.iter().map(|p| (p.id.as_str(), p)).collect();
    let is: BTreeMap<&str, &PlanPatch> = now.overlay.iter().map(|p| (p.id.as_str(), p)).collect();
    let label = |p: &PlanPatch| {
        format!("{}: {}", serde_json::to_value(p.outcome).unwrap_or_default().as_str().unwrap_or("?"), p.choice)
    };
    for id in was.keys().chain(is.keys()).collect::<BTreeSet<_>>() {
        let (a, b) = (was.get(id), is.get(id));
        let changed = match (a, b) {
            (Some(a), Some(b)) => a.outcome != b.outcome,
            _ => true,
        };
        // A record without its plan has no overlay to compare with.
        if changed && !last.overlay.is_empty() {
            s.patches.push(PatchChange { id: id.to_string(), from: a.map(|p| label(p)), to: b.map(|p| label(p)) });
        }
    }
    let old: BTreeMap<&str, &str> = last.files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let new: BTreeMap<&str, &str> = now.files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    // A record that kept only choices.txt cannot compare the other files.
    let comparable = old.len() > 1;
    for name in old.keys().chain(new.keys()).collect::<BTreeSet<_>>() {
        if *name == CHOICES || !comparable {
            continue;
        }
        let (a, b) = (old.get(name).copied().unwrap_or(""), new.get(name).copied().unwrap_or(""));
        if a != b {
            s.files.push(FileChange { name: name.to_string(), diff: unified(name, a, b) });
        }
    }
    if let Some(f) = &last.facts {
        s.facts = fact_changes(f, now.facts);
    }
    if let (Some(a), Some(b)) = (&last.image, now.image)
        && a != b
    {
        s.bastion_image = Some((a.clone(), b.to_string()));
    }
    s
}

/// What a decision decides: its choice's key (`model: x` is `model`), else the choice itself.
fn key(d: &PlanDecision) -> String {
    d.choice.split_once(':').map_or(d.choice.as_str(), |(k, _)| k).trim().to_string()
}

fn decision_changes(was: &[PlanDecision], is: &[PlanDecision]) -> Vec<DecisionChange> {
    // Keyed, numbered when a key repeats, so two decisions of one key pair in order.
    let keyed = |ds: &[PlanDecision]| {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        ds.iter()
            .map(|d| {
                let k = key(d);
                let n = seen.entry(k.clone()).or_default();
                *n += 1;
                ((k, *n), d.clone())
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (a, b) = (keyed(was), keyed(is));
    let mut out = Vec::new();
    for k in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
        // A run's removal of the model before it is about that run, not a decision to compare.
        if k.0 == UNDEPLOY {
            continue;
        }
        let (x, y) = (a.get(k), b.get(k));
        if x.map(|d| compared(&k.0, d)) == y.map(|d| compared(&k.0, d)) {
            continue;
        }
        let why = y.or(x).map(|d| d.fact.clone()).unwrap_or_default();
        out.push(DecisionChange {
            key: k.0.clone(),
            from: x.map(|d| d.choice.clone()),
            to: y.map(|d| d.choice.clone()),
            why,
        });
    }
    out
}

/// What of a decision's choice is compared: the model by its name alone (why it was picked, or
/// kept, or what the pick would now be, changes nothing installed), every other by its choice.
fn compared<'d>(key: &str, d: &'d PlanDecision) -> &'d str {
    match d.choice.strip_prefix("model: ") {
        Some(rest) if key == "model" => rest.split_once(" (").map_or(rest, |(name, _)| name),
        _ => &d.choice,
    }
}

fn fact_changes(was: &Facts, is: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    let nodes = |f: &Facts| f.nodes.iter().map(|n| (n.name.clone(), n.clone())).collect::<BTreeMap<_, _>>();
    let (a, b) = (nodes(was), nodes(is));
    for (name, n) in &b {
        match a.get(name) {
            None => out.push(format!("node {name} added")),
            Some(old) => {
                for key in ["memory", "cpu"] {
                    let (x, y) = (old.allocatable.get(key), n.allocatable.get(key));
                    if x != y {
                        let v = |o: Option<&String>| o.cloned().unwrap_or_else(|| "-".into());
                        out.push(format!("node {name} allocatable {key} {} -> {}", v(x), v(y)));
                    }
                }
            }
        }
    }
    out.extend(a.keys().filter(|n| !b.contains_key(*n)).map(|n| format!("node {n} removed")));
    let releases =
        |f: &Facts| f.helm_releases.iter().map(|r| format!("{}/{}", r.namespace, r.name)).collect::<BTreeSet<_>>();
    let (x, y) = (releases(was), releases(is));
    out.extend(y.difference(&x).map(|r| format!("Helm release {r} appeared")));
    out.extend(x.difference(&y).map(|r| format!("Helm release {r} is gone")));
    let ns = |f: &Facts| f.namespaces.iter().cloned().collect::<BTreeSet<_>>();
    let (x, y) = (ns(was), ns(is));
    out.extend(y.difference(&x).map(|n| format!("namespace {n} appeared")));
    out.extend(x.difference(&y).map(|n| format!("namespace {n} is gone")));
    out
}

/// The keys eas itself edits in the seeded `models.yaml` (`prepare::models`): not upstream's.
const EDITED: [&str; 3] = ["autodeploy", "memory", "args_append"];

/// The entries of the catalog at the new commit (`new`, named `at`) that the seeded
/// `env/<env>/models.yaml` (`seeded`) lacks, or holds with other values (the keys eas edits
/// aside). Unreadable YAML on either side compares nothing.
pub fn catalog_changes(seeded: &str, new: &str, at: &str, env: &str) -> Vec<String> {
    let entries = |text: &str| -> Option<BTreeMap<String, serde_json::Value>> {
        let doc: serde_json::Value = serde_saphyr::from_str(text).ok()?;
        let list = doc.get("models")?.as_array()?.clone();
        Some(list.into_iter().filter_map(|e| Some((e.get("name")?.as_str()?.to_string(), e))).collect())
    };
    let (Some(old), Some(new)) = (entries(seeded), entries(new)) else { return Vec::new() };
    let mut out = Vec::new();
    for (name, entry) in &new {
        match old.get(name) {
            None => {
                out.push(format!("entry {name} is in the catalog at {at}, not in the seeded env/{env}/models.yaml"))
            }
            Some(was) => {
                let differs: Vec<&str> = entry
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, v)| !EDITED.contains(&k.as_str()) && was.get(k.as_str()) != Some(v))
                    .map(|(k, _)| k.as_str())
                    .collect();
                if !differs.is_empty() {
                    out.push(format!(
                        "entry {name} differs at {at} from the seeded env/{env}/models.yaml: {}",
                        differs.join(", ")
                    ));
                }
            }
        }
    }
    out
}

/// A unified diff of two small texts (the generated files), from a longest common subsequence,
/// with three lines of context.
pub fn unified(name: &str, a: &str, b: &str) -> String {
    let (x, y): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let (n, m) = (x.len(), y.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if x[i] == y[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    // The edit script: (' ' | '-' | '+', old line no, new line no, text).
    let mut ops: Vec<(char, usize, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && x[i] == y[j] {
            ops.push((' ', i, j, x[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Removals before additions, as diff(1) prints them.
            ops.push(('-', i, j, x[i]));
            i += 1;
        } else {
            ops.push(('+', i, j, y[j]));
            j += 1;
        }
    }
    let mut out = format!("--- last/{name}\n+++ now/{name}\n");
    let changed: Vec<usize> = ops.iter().enumerate().filter(|(_, o)| o.0 != ' ').map(|(k, _)| k).collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(3);
        let mut end = (changed[k] + 4).min(ops.len());
        while k + 1 < changed.len() && changed[k + 1] < end + 3 {
            k += 1;
            end = (changed[k] + 4).min(ops.len());
        }
        let hunk = &ops[start..end];
        let old_len = hunk.iter().filter(|o| o.0 != '+').count();
        let new_len = hunk.iter().filter(|o| o.0 != '-').count();
        out.push_str(&format!("@@ -{},{old_len} +{},{new_len} @@\n", hunk[0].1 + 1, hunk[0].2 + 1));
        for (c, _, _, t) in hunk {
            out.push_str(&format!("{c}{t}\n"));
        }
        k += 1;
    }
    out
}

/// The plan's section: one line per change (the diffs only with `explain`).
pub fn lines(s: &SinceLast, explain: bool) -> Vec<String> {
    let mut out = s.settings.clone();
    for p in &s.pins {
        let count = p.commits.map(|n| format!(" ({n} commit{})", if n == 1 { "" } else { "s" })).unwrap_or_default();
        out.push(format!("pin {} {} -> {}{count}", p.tree, p.from, p.to));
    }
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
    for d in &s.decisions {
        // The choice without its key, which the line already names.
        let value = |v: &Option<String>| {
            let v = or_none(v);
            v.strip_prefix(&d.key).and_then(|r| r.strip_prefix(':')).map_or(v.clone(), |r| r.trim().to_string())
        };
        out.push(format!("decision {}: {} -> {} because {}", d.key, value(&d.from), value(&d.to), d.why));
    }
    for p in &s.patches {
        out.push(format!("patch {}: {} -> {}", p.id, or_none(&p.from), or_none(&p.to)));
    }
    for f in &s.files {
        out.push(format!("file {} differs", f.name));
        if explain {
            out.extend(f.diff.lines().map(|l| format!("  {l}")));
        }
    }
    for f in &s.facts {
        out.push(format!("fact {f}"));
    }
    out.extend(s.catalog.iter().map(|c| format!("catalog {c}")));
    if let Some((a, b)) = &s.bastion_image {
        out.push(format!("bastion image {a} -> {b} (eas itself changed; not a reason to reinstall)"));
    }
    if out.is_empty() {
        out.push("nothing".into());
    }
    // Namespaces, node names and files come from the cluster and the trees: a newline in one
    // would start a line of its own in every printer of these lines.
    out.iter().map(|l| crate::text::escape_controls(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(fact: &str, choice: &str) -> PlanDecision {
        PlanDecision { fact: fact.into(), choice: choice.into(), source: String::new(), permalink: String::new() }
    }

    fn facts(memory: &str, extra_node: bool) -> Facts {
        let mut f: Facts = serde_json::from_str(
            &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/config/stock-k3s-cni/facts.json"))
                .unwrap(),
        )
        .unwrap();
        f.nodes[0].allocatable.insert("memory".into(), memory.into());
        if extra_node {
            let mut n = f.nodes[0].clone();
            n.name = "k3d-gpu-agent-1".into();
            f.nodes.push(n);
        }
        f
    }

    fn completed(pins: &[(&str, &str)], decisions: Vec<PlanDecision>, files: &[(&str, &str)], f: Facts) -> Completed {
        let mut state = State::sample("2026-01-01T00:00:00Z");
        state.pins.shas = pins.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        state.begin(PhaseId::Install, None, "t1");
        state.finish(PhaseId::Install, Status::Done, None, "2026-01-01T00:30:00Z");
        state.exit_code = Some(0);
        Completed {
            state,
            facts: Some(f),
            decisions,
            overlay: Vec::new(),
            image: Some("eas-bastion:aaa".into()),
            model: None,
            files: files.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(),
        }
    }

    #[test]
    fn a_node_gaining_memory_changes_the_model_and_says_why() {
        let last = completed(
            &[("eas", "5c27fb3aaaa")],
            vec![decision("node n 16Gi", "model: qwen2-5-coder-7b"), decision("byo", "existing_kubernetes: true")],
            &[("eas-overrides.yaml", "a: 1\nmodel: 7b\nz: 2\n"), ("choices.txt", "x\n")],
            facts("16Gi", false),
        );
        let pins: BTreeMap<String, String> = [("eas".to_string(), "5c27fb3aaaa".to_string())].into();
        let ds =
            vec![decision("node n 64Gi", "model: qwen2-5-coder-14b"), decision("byo", "existing_kubernetes: true")];
        let files = vec![
            ("eas-overrides.yaml".to_string(), "a: 1\nmodel: 14b\nz: 2\n".to_string()),
            ("choices.txt".to_string(), "y\n".to_string()),
        ];
        let f = facts("64Gi", true);
        let now =
            Now { pins: &pins, decisions: &ds, overlay: &[], files: &files, facts: &f, image: Some("eas-bastion:aaa") };
        let s = since_last(&last, &now);
        assert!(s.pins.is_empty() && s.reconfigures(), "{s:?}");
        assert_eq!(
            s.decisions,
            [DecisionChange {
                key: "model".into(),
                from: Some("model: qwen2-5-coder-7b".into()),
                to: Some("model: qwen2-5-coder-14b".into()),
                why: "node n 64Gi".into()
            }]
        );
        assert_eq!(s.files.len(), 1, "choices.txt is compared as decisions: {:?}", s.files);
        assert!(s.files[0].diff.contains("-model: 7b\n+model: 14b\n"), "{}", s.files[0].diff);
        assert!(s.facts.iter().any(|l| l.ends_with("allocatable memory 16Gi -> 64Gi")), "{:?}", s.facts);
        assert!(s.facts.contains(&"node k3d-gpu-agent-1 added".to_string()), "{:?}", s.facts);
        let text = lines(&s, false).join("\n");
        assert!(text.contains("decision model: qwen2-5-coder-7b -> qwen2-5-coder-14b because node n 64Gi"), "{text}");
        assert!(!text.contains("@@"), "the diff only under --explain: {text}");
        assert!(lines(&s, true).join("\n").contains("@@ -1,3 +1,3 @@"));
    }

    /// Issue 32 item 4: the model is compared by its name: the same model kept (with what the
    /// pick would now be) is no change; another one is, with the fact that says why.
    #[test]
    fn the_model_is_compared_by_name_not_by_why_it_was_chosen() {
        let f = facts("16Gi", false);
        let was = decision("largest node n 48 GiB", "model: llama-3-1-8b (rule: the largest entry that fits, 15 GiB)");
        let last = completed(&[("eas", "5c27fb3")], vec![was], &[], f.clone());
        let pins: BTreeMap<String, String> = [("eas".to_string(), "5c27fb3".to_string())].into();
        let kept = [decision(
            "llama-3-1-8b deployed by the last completed eas up; largest node n 125 GiB",
            "model: llama-3-1-8b (kept: the installed model; the pick would now be qwen2-5-coder-7b (rule: preference): `eas up --repick` takes it)",
        )];
        let now = Now { pins: &pins, decisions: &kept, overlay: &[], files: &[], facts: &f, image: None };
        assert_eq!(since_last(&last, &now).decisions, [], "kept is no change");
        let why = "the installed model llama-3-1-8b is not kept: llama-3-1-8b: does not fit: 16 GiB";
        let other = [decision(why, "model: llama3-8b-awq (rule: the largest entry that fits, 5.3 GiB)")];
        let now = Now { decisions: &other, ..now };
        let shown = lines(&since_last(&last, &now), false);
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(
            shown[0].starts_with(
                "decision model: llama-3-1-8b (rule: the largest entry that fits, 15 GiB) -> llama3-8b-awq"
            ),
            "{shown:?}"
        );
        assert!(shown[0].ends_with(&format!("because {why}")), "{shown:?}");
    }

    #[test]
    fn moved_pins_and_an_eas_upgrade_alone() {
        let f = facts("16Gi", false);
        let last = completed(&[("eas", "5c27fb3aaaa"), ("ei", "1111111")], vec![], &[], f.clone());
        let pins: BTreeMap<String, String> =
            [("eas".to_string(), "97f6157bbbb".to_string()), ("ei".to_string(), "1111111".to_string())].into();
        let now =
            Now { pins: &pins, decisions: &[], overlay: &[], files: &[], facts: &f, image: Some("eas-bastion:bbb") };
        let s = since_last(&last, &now);
        assert_eq!(
            s.pins,
            [PinMove { tree: "eas".into(), from: "5c27fb3".into(), to: "97f6157".into(), commits: None }]
        );
        let mut counted = s.clone();
        counted.pins[0].commits = Some(12);
        assert!(lines(&counted, false).contains(&"pin eas 5c27fb3 -> 97f6157 (12 commits)".to_string()));
        assert_eq!(s.bastion_image, Some(("eas-bastion:aaa".into(), "eas-bastion:bbb".into())));
        assert!(!s.reconfigures() && s.facts.is_empty());
    }

    #[test]
    fn the_new_catalogs_entries_the_seeded_copy_lacks_or_holds_otherwise() {
        let seeded =
            "models:\n  - name: a\n    cpu: 8\n    memory: 25Gi\n    autodeploy: true\n  - name: b\n    cpu: 4\n";
        let new =
            "models:\n  - name: a\n    cpu: 8\n    memory: 16Gi\n  - name: b\n    cpu: 6\n  - name: c\n    cpu: 2\n";
        assert_eq!(
            catalog_changes(seeded, new, "ei@1234567", "k3d-gpu"),
            [
                "entry b differs at ei@1234567 from the seeded env/k3d-gpu/models.yaml: cpu",
                "entry c is in the catalog at ei@1234567, not in the seeded env/k3d-gpu/models.yaml",
            ],
            "the keys eas edits (memory, autodeploy) are not upstream's changes"
        );
        assert!(catalog_changes("not: [yaml", new, "x", "e").is_empty());
    }

    /// Issue 30 item 6: a namespace named `x\nok FORGED LINE` started a line of its own in the
    /// plan's "since the last up" section.
    #[test]
    fn a_newline_in_a_namespace_name_stays_inside_its_line() {
        let f = facts("16Gi", false);
        let last = completed(&[("eas", "5c27fb3aaaa")], vec![], &[], f.clone());
        let mut now_facts = f.clone();
        now_facts.namespaces.push("x\nok FORGED LINE".into());
        let pins: BTreeMap<String, String> = [("eas".to_string(), "5c27fb3aaaa".to_string())].into();
        let now = Now { pins: &pins, decisions: &[], overlay: &[], files: &[], facts: &now_facts, image: None };
        let shown = lines(&since_last(&last, &now), false);
        assert_eq!(shown, ["fact namespace x\\nok FORGED LINE appeared"]);
        assert_eq!(shown.join("\n").lines().count(), 1);
    }

    #[test]
    fn the_ledgers_objects_are_not_facts_the_decisions_read() {
        let mut f = facts("16Gi", false);
        f.namespaces = vec!["kube-system".into(), "kserve".into()];
        let mut created = Snapshot::default();
        created.namespaces.insert("kserve".into());
        assert_eq!(discount(&f, &created).namespaces, ["kube-system"]);
    }

    #[test]
    fn a_completed_run_is_kept_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Completed::load(dir.path()).unwrap().is_none());
        let last = completed(&[("eas", "5c27fb3")], vec![], &[("a.yaml", "k: v\n")], facts("16Gi", false));
        let plan =
            r#"{"decisions":[{"fact":"f","choice":"model: m"}],"overlay":[],"image":{"tag":"t","action":"reuse"}}"#;
        Completed::save(dir.path(), &last.state, last.facts.as_ref().unwrap(), plan, &last.files).unwrap();
        let back = Completed::load(dir.path()).unwrap().unwrap();
        assert_eq!(back.files, last.files);
        assert_eq!((back.decisions[0].choice.as_str(), back.image.as_deref()), ("model: m", Some("t")));
        assert_eq!(back.installed_at(), "2026-01-01T00:30:00Z");
        assert!(!back.verify_failed());
    }
}
