//! A reviewed plan, applied exactly (issue 32, item 2): `eas up --dry-run --out DIR` writes
//! `plan.json` with the run's selection; `eas up --plan DIR` runs with that selection, makes every
//! plan half again and holds the new plan to the saved one on what the run would do: the pins'
//! SHAs, the trees' commits, every decision's key and value (the model pick and its fit verdict
//! included), the overlay's decisions, the bastion image's tag and the installer's argv. The facts
//! count only through these. Both plans are read through their eas-plan/v1 JSON, so what is held
//! is what was reviewed. Pure, but for [`load`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::plan::PhaseId;

/// What the run selected (eas-plan/v1 `selection`): what `eas up --plan DIR` runs with again.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Selection {
    /// By the names of [`SELECTION`]: `profile`, `ref`, `model` and `fit` are the flags (`null`:
    /// not given; eas picked the model); `pins` and `fit` are absolute paths, `pins` `null` for
    /// the pins built into eas.
    #[serde(flatten)]
    pub chosen: BTreeMap<String, Option<String>>,
    /// `--repick`: the model was picked again rather than the installed one kept, so applying the
    /// plan picks again as reviewed (without it, a plan saved after an install would keep the
    /// installed model and be refused for the pick it did not review).
    pub repick: bool,
}

/// The names a plan's selection holds, every one of them.
pub const SELECTION: [&str; 7] = ["layer", "env", "profile", "ref", "model", "pins", "fit"];

/// A saved plan with no blocker: where it was read, its selection, and what the run is held to.
#[derive(Debug, Clone)]
pub struct Saved {
    pub file: PathBuf,
    pub selection: Selection,
    held: Held,
}

/// Why a saved plan cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("{0}")]
    Read(crate::bounded::ReadError),
    /// It lists blockers (`blocker (PHASE): CAUSE` each): never a plan the real run would carry out.
    #[error("the saved plan {file} has blockers")]
    Blocked { file: String, causes: Vec<String> },
    /// Not JSON, another schema, or no selection: not a plan `eas up --dry-run --out` wrote.
    #[error("{file} is not a plan eas can apply: {why}")]
    NotAPlan { file: String, why: String },
}

/// `DIR/plan.json`, read and checked: an eas-plan/v1 document with its selection and no blocker.
pub fn load(dir: &Path) -> Result<Saved, SavedError> {
    let file = dir.join("plan.json");
    let shown = file.display().to_string();
    let text = crate::bounded::read_string(&file, crate::bounded::Kind::Plan).map_err(SavedError::Read)?;
    let not = |why: String| SavedError::NotAPlan { file: shown.clone(), why };
    let doc: Value = serde_json::from_str(&text).map_err(|e| not(format!("not JSON ({e})")))?;
    if doc["schema"] != crate::plan::PLAN_SCHEMA {
        return Err(not(format!("its schema is {}, not {}", doc["schema"], crate::plan::PLAN_SCHEMA)));
    }
    let selection = match doc.get("selection").filter(|s| !s.is_null()) {
        Some(s) => Selection::deserialize(s).map_err(|e| not(format!("its selection: {e}")))?,
        None => return Err(not("it records no selection (it was not made by `eas up --dry-run`)".into())),
    };
    if let Some(name) = SELECTION.iter().find(|n| !selection.chosen.contains_key(**n)) {
        return Err(not(format!("its selection has no {name:?}")));
    }
    let causes: Vec<String> = doc["blockers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| format!("blocker ({}): {}", b["phase"].as_str().unwrap_or("?"), b["cause"].as_str().unwrap_or("?")))
        .collect();
    if !causes.is_empty() {
        return Err(SavedError::Blocked { file: shown, causes });
    }
    Ok(Saved { file, selection, held: Held::of(&doc) })
}

impl Saved {
    /// The selection's value of `name` (one of [`SELECTION`]); `None` when not given.
    pub fn chosen(&self, name: &str) -> Option<&str> {
        self.selection.chosen.get(name).and_then(Option::as_deref)
    }

    /// What differs between this saved plan and `now` (eas-plan/v1 JSON), one line each, with
    /// the phase that decides it, in the order the run meets them.
    pub fn differences(&self, now: &Value) -> Vec<(PhaseId, String)> {
        differences(&self.held, &Held::of(now))
    }
}

/// The parts of a plan a saved plan holds the run to.
#[derive(Debug, Clone, Default, PartialEq)]
struct Held {
    /// The pinned commit per tree (`commits`).
    pins: BTreeMap<String, String>,
    /// The commit each tree resolved to (`trees`).
    trees: BTreeMap<String, String>,
    image: Option<String>,
    /// Each written key's values, in the order decided.
    decisions: BTreeMap<String, Vec<Value>>,
    /// The model picked and fit's verdict on its KV cache.
    pick: Value,
    /// The installer's command lines (`phase: argv`).
    argv: Vec<String>,
    /// Each overlay row's outcome.
    overlay: BTreeMap<String, String>,
}

impl Held {
    fn of(doc: &Value) -> Held {
        let strings = |v: &Value| -> BTreeMap<String, String> {
            v.as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        };
        let rows = |key: &str| doc[key].as_array().cloned().unwrap_or_default();
        let mut decisions: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for d in rows("decisions") {
            if let Some(k) = d["key"].as_str() {
                decisions.entry(k.to_string()).or_default().push(d["value"].clone());
            }
        }
        let pick = match &doc["model_pick"] {
            Value::Null => Value::Null,
            p => serde_json::json!({"name": p["name"], "fit": p["fit"]}),
        };
        let argv = rows("commands")
            .iter()
            .map(|c| {
                let words: Vec<&str> = c["argv"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                format!("{}: {}", c["phase"].as_str().unwrap_or("?"), words.join(" "))
            })
            .collect();
        let overlay = rows("overlay")
            .iter()
            .map(|p| (p["id"].as_str().unwrap_or("?").to_string(), p["outcome"].as_str().unwrap_or("?").to_string()))
            .collect();
        Held {
            pins: strings(&doc["commits"]),
            trees: strings(&doc["trees"]),
            image: doc["image"]["tag"].as_str().map(str::to_string),
            decisions,
            pick,
            argv,
            overlay,
        }
    }
}

/// `saved` and `now` side by side: one line per thing that differs.
fn differences(saved: &Held, now: &Held) -> Vec<(PhaseId, String)> {
    let mut out = Vec::new();
    by_key(&mut out, PhaseId::Trees, "pin", &saved.pins, &now.pins);
    by_key(&mut out, PhaseId::Trees, "tree", &saved.trees, &now.trees);
    if saved.image != now.image {
        let (a, b) = (shown(saved.image.as_ref()), shown(now.image.as_ref()));
        out.push((PhaseId::Bastion, format!("bastion image: {a} in the saved plan, {b} now")));
    }
    if saved.pick != now.pick {
        let (a, b) = (pick(&saved.pick), pick(&now.pick));
        out.push((PhaseId::Config, format!("model pick: {a} in the saved plan, {b} now")));
    }
    let values = |v: Option<&Vec<Value>>| match v {
        None => "no decision".to_string(),
        Some(v) => v.iter().map(Value::to_string).collect::<Vec<_>>().join(", "),
    };
    for key in union(&saved.decisions, &now.decisions) {
        let (a, b) = (saved.decisions.get(key), now.decisions.get(key));
        if a != b {
            out.push((PhaseId::Config, format!("decision {key}: {} in the saved plan, {} now", values(a), values(b))));
        }
    }
    if saved.argv != now.argv {
        let gone = saved.argv.iter().filter(|a| !now.argv.contains(a)).map(|a| format!("`{a}` only in the saved plan"));
        let new = now.argv.iter().filter(|a| !saved.argv.contains(a)).map(|a| format!("`{a}` only now"));
        let lines: Vec<String> = gone.chain(new).collect();
        let said = if lines.is_empty() { "the same lines in another order".to_string() } else { lines.join("; ") };
        out.push((PhaseId::Config, format!("installer command lines: {said}")));
    }
    by_key(&mut out, PhaseId::Overlay, "overlay", &saved.overlay, &now.overlay);
    // Stable: within a phase, in the order found.
    out.sort_by_key(|(phase, _)| *phase);
    out
}

/// The keys of `a`, then those only in `b`.
fn union<'a, V>(a: &'a BTreeMap<String, V>, b: &'a BTreeMap<String, V>) -> impl Iterator<Item = &'a String> {
    a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)))
}

/// One line per key whose value differs between `was` and `is`.
fn by_key(
    out: &mut Vec<(PhaseId, String)>,
    phase: PhaseId,
    what: &str,
    was: &BTreeMap<String, String>,
    is: &BTreeMap<String, String>,
) {
    for key in union(was, is) {
        let (a, b) = (was.get(key), is.get(key));
        if a != b {
            out.push((phase, format!("{what} {key}: {} in the saved plan, {} now", shown(a), shown(b))));
        }
    }
}

fn shown(v: Option<&String>) -> String {
    v.map_or_else(|| "none".to_string(), |s| if s.is_empty() { "none".to_string() } else { s.clone() })
}

/// A model pick as one phrase: `llama-3-1-8b (fit: kept, KV cache 8 GiB)`.
fn pick(p: &Value) -> String {
    let name = p["name"].as_str().unwrap_or("no model");
    match &p["fit"] {
        Value::Null => name.to_string(),
        fit => {
            let verdict = fit["verdict"].as_str().unwrap_or("?");
            match fit["kv_cache_gib"].as_u64() {
                Some(gib) => format!("{name} (fit: {verdict}, KV cache {gib} GiB)"),
                None => format!("{name} (fit: {verdict})"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A plan's held parts, in the shapes eas-plan/v1 writes them (the desktop's agent-toolkit
    /// plan, cut down).
    fn plan() -> Value {
        json!({
            "schema": "eas-plan/v1",
            "selection": {"layer": "agent-toolkit", "env": "k3d-gpu", "profile": null, "ref": null,
                "model": null, "pins": "/home/u/.config/eas/pins.json", "fit": null, "repick": false},
            "commits": {"eas": "a".repeat(40), "ei": "b".repeat(40), "eat": "c".repeat(40)},
            "trees": {"eas": "a".repeat(40), "ei": "b".repeat(40), "eat": "c".repeat(40)},
            "image": {"tag": "eas-bastion:0123456789ab", "action": "build"},
            "model_pick": {"name": "llama-3-1-8b", "reason": "default", "fit": {"verdict": "kept", "kv_cache_gib": 8}},
            "decisions": [
                {"choice": "istio_platform: \"k3d\"", "key": "istio_platform", "value": "k3d"},
                {"choice": "model: llama-3-1-8b (default)", "key": null, "value": null},
                {"choice": "models.yaml llama-3-1-8b autodeploy: true", "key": "models.yaml llama-3-1-8b autodeploy", "value": true},
            ],
            "commands": [
                {"phase": "prepare", "argv": ["./es_auto_installer.sh", "init", "agent-toolkit", "--env", "k3d-gpu"]},
                {"phase": "install", "argv": ["./es_auto_installer.sh", "install", "agent-toolkit", "--env", "k3d-gpu", "--force"]},
            ],
            "overlay": [{"id": "0002", "outcome": "apply"}, {"id": "0006", "outcome": "skip"}],
            "blockers": [],
        })
    }

    fn saved(doc: &Value) -> Result<Saved, SavedError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plan.json"), doc.to_string()).unwrap();
        load(dir.path())
    }

    #[test]
    fn an_unchanged_plan_has_no_difference_and_its_selection_is_read_back() {
        let s = saved(&plan()).unwrap();
        assert_eq!(s.differences(&plan()), Vec::<(PhaseId, String)>::new());
        assert_eq!(s.chosen("layer"), Some("agent-toolkit"));
        assert_eq!(s.chosen("pins"), Some("/home/u/.config/eas/pins.json"));
        assert_eq!(s.chosen("model"), None);
        assert!(!s.selection.repick);
        let mut repicked = plan();
        repicked["selection"]["repick"] = json!(true);
        assert!(saved(&repicked).unwrap().selection.repick, "a plan saved with --repick is applied with it");
        // What is not held (the facts, warnings, the pick's reason) may change.
        let mut now = plan();
        now["facts"] = json!({"node_count": 2});
        now["model_pick"]["reason"] = json!("fallback");
        assert_eq!(s.differences(&now), Vec::<(PhaseId, String)>::new());
    }

    #[test]
    fn each_held_part_that_moved_is_named_once_in_the_order_the_run_meets_it() {
        let s = saved(&plan()).unwrap();
        let mut now = plan();
        now["commits"]["ei"] = json!("d".repeat(40));
        now["trees"]["ei"] = json!("d".repeat(40));
        now["image"]["tag"] = json!("eas-bastion:fedcba987654");
        now["model_pick"] = json!({"name": "qwen2-5-coder-7b", "reason": "fallback", "fit": {"verdict": "lowered", "kv_cache_gib": 24}});
        now["decisions"][2] = json!({"key": "models.yaml qwen2-5-coder-7b autodeploy", "value": true});
        now["commands"][1]["argv"][5] = json!("--upgrade");
        now["overlay"][1]["outcome"] = json!("apply");
        let got: Vec<String> = s.differences(&now).into_iter().map(|(p, l)| format!("{p}: {l}")).collect();
        let (b, d) = ("b".repeat(40), "d".repeat(40));
        assert_eq!(
            got,
            [
                "bastion: bastion image: eas-bastion:0123456789ab in the saved plan, eas-bastion:fedcba987654 now".to_string(),
                format!("trees: pin ei: {b} in the saved plan, {d} now"),
                format!("trees: tree ei: {b} in the saved plan, {d} now"),
                "config: model pick: llama-3-1-8b (fit: kept, KV cache 8 GiB) in the saved plan, qwen2-5-coder-7b (fit: lowered, KV cache 24 GiB) now".into(),
                "config: decision models.yaml llama-3-1-8b autodeploy: true in the saved plan, no decision now".into(),
                "config: decision models.yaml qwen2-5-coder-7b autodeploy: no decision in the saved plan, true now".into(),
                "config: installer command lines: `install: ./es_auto_installer.sh install agent-toolkit --env k3d-gpu --force` only in the saved plan; `install: ./es_auto_installer.sh install agent-toolkit --env k3d-gpu --upgrade` only now".into(),
                "overlay: overlay 0006: skip in the saved plan, apply now".into(),
            ]
        );
    }

    #[test]
    fn a_decision_whose_value_changed_names_both_values() {
        let s = saved(&plan()).unwrap();
        let mut now = plan();
        now["decisions"][0]["value"] = json!("k3s");
        let got = s.differences(&now);
        assert_eq!(got, [(PhaseId::Config, "decision istio_platform: \"k3d\" in the saved plan, \"k3s\" now".into())]);
    }

    #[test]
    fn a_saved_plan_with_blockers_without_a_selection_or_of_another_schema_is_not_applied() {
        let mut blocked = plan();
        blocked["blockers"] = json!([{"phase": "config", "cause": "EAT 1.x is installed", "fix": "", "exit_code": 3}]);
        match saved(&blocked) {
            Err(SavedError::Blocked { causes, .. }) => assert_eq!(causes, ["blocker (config): EAT 1.x is installed"]),
            other => panic!("{other:?}"),
        }
        let mut bare = plan();
        bare["selection"] = Value::Null;
        assert!(matches!(saved(&bare), Err(SavedError::NotAPlan { why, .. }) if why.contains("no selection")));
        bare["selection"] = json!({"layer": "agent-toolkit"});
        assert!(
            matches!(saved(&bare), Err(SavedError::NotAPlan { why, .. }) if why.contains("missing field `repick`"))
        );
        bare["selection"] = json!({"layer": "agent-toolkit", "repick": false});
        assert!(matches!(saved(&bare), Err(SavedError::NotAPlan { why, .. }) if why.contains("has no \"env\"")));
        let mut other = plan();
        other["schema"] = json!("eas-status/v1");
        assert!(matches!(saved(&other), Err(SavedError::NotAPlan { why, .. }) if why.contains("eas-status/v1")));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(dir.path()), Err(SavedError::Read(e)) if e.is_not_found()));
    }
}
