//! The plan a dry run prints and a real run keeps (eas-plan/v1), with one writer per field.
//!
//! Every field is private to this module: code elsewhere reads it through the getter of the
//! same name and writes it only through the one method the table below names (the compiler
//! holds the first half; `each_field_has_one_writer` below, the second). A part several phases
//! write (decisions, warnings, blockers, unknown, commands, overlay_not_decided) is a
//! [`ByKey`]: each writes its part under its key, and the list is in the order of the keys
//! (the phases, in run order) whatever order the parts arrive in.
//!
//! | field | its writer |
//! |---|---|
//! | schema, phases | `new` (the table's rows, the flags' timeouts) |
//! | layer, env, profile, pins_source, selection, commits | `select` |
//! | settings | `set_settings` |
//! | apply_command | `set_apply_command` |
//! | trees | `set_trees` |
//! | model, fit, model_pick | `picked` |
//! | image | `set_image` |
//! | facts | `set_facts` |
//! | decisions | `add_decisions` |
//! | warnings | `add_warnings` |
//! | overlay | `set_overlay` |
//! | commands | `add_command` |
//! | unknown | `add_unknown` |
//! | blockers | `add_blockers` |
//! | overlay_not_decided | `not_decided_by` |
//! | run_kind, since_last | `compared` |
//! | wrote | `set_wrote` |
//! | exit_code | `exited` |
//!
//! `new` gives every field its first value (empty, but for the phases and their timeouts).

use std::collections::BTreeMap;
use std::ops::Deref;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use super::{
    Blocker, EXIT_SUCCESS, FactsSummary, ImagePlan, Missing, ModelPick, PHASES, PLAN_SCHEMA, PhaseId, PhaseTimeouts,
    PlanDecision, PlanPatch, PlannedCommand, PlannedPhase, key_value, saved,
};

/// A list several writers add their parts to, each under its key: the items are in the order of
/// the keys and, under one key, in the order added. It reads as the slice of its items.
#[derive(Debug, Clone, PartialEq)]
pub struct ByKey<K, T> {
    keys: Vec<K>,
    items: Vec<T>,
}

impl<K, T> Default for ByKey<K, T> {
    fn default() -> Self {
        ByKey { keys: Vec::new(), items: Vec::new() }
    }
}

impl<K: Ord + Copy, T> ByKey<K, T> {
    /// `items` after every item of a key up to `key`, before every later key's.
    fn add(&mut self, key: K, items: impl IntoIterator<Item = T>) {
        for item in items {
            let at = self.keys.partition_point(|k| *k <= key);
            self.keys.insert(at, key);
            self.items.insert(at, item);
        }
    }
}

impl<K, T> Deref for ByKey<K, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}

impl<K, T: Serialize> Serialize for ByKey<K, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(s)
    }
}

/// Where a blocker is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Met {
    /// `--plan DIR`'s: the saved plan differs from this one. Ahead of every other blocker, in
    /// the order found.
    SavedPlan,
    /// A check of a phase: by the phase it names (run order), each phase's in the order found.
    InPhase,
}

/// The installer command lines the run executes, in the order it runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Runs {
    /// Prepare's `init` (classify decides whether it upgrades).
    Init,
    /// The last completed run's model removed before the install deploys the new pick.
    Undeploy,
    /// The installer's install (config's argv).
    Install,
}

impl Runs {
    fn phase(self) -> PhaseId {
        match self {
            Runs::Init => PhaseId::Prepare,
            Runs::Undeploy | Runs::Install => PhaseId::Install,
        }
    }
}

/// The run's selection as the plan records it ([`Plan::select`]).
#[derive(Debug, Clone, Default)]
pub struct Selected {
    pub layer: String,
    pub env: String,
    pub profile: String,
    pub pins_source: String,
    pub selection: Option<saved::Selection>,
    pub commits: BTreeMap<String, String>,
}

/// The model config picked and what fit made of it ([`Plan::picked`]).
#[derive(Debug, Clone, Default)]
pub struct Picked {
    pub model: Option<String>,
    pub fit: Option<String>,
    pub pick: Option<ModelPick>,
}

/// The struct with private fields and a getter of each field's name.
macro_rules! read_only {
    ($(#[$sm:meta])* pub struct $name:ident { $( $(#[$m:meta])* $f:ident : $t:ty, )* }) => {
        $(#[$sm])* pub struct $name { $( $(#[$m])* $f: $t, )* }
        // A getter for every field: serialising reads each, code reads the ones it shows.
        #[allow(dead_code)]
        impl $name { $( pub fn $f(&self) -> &$t { &self.$f } )* }
    };
}

read_only! {
/// What `eas up --dry-run` prints, and writes as `plan.json` with `--out` (schema:
/// data/eas-plan.v1.schema.json).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    schema: &'static str,
    /// The exact command that applies this plan (`crate::next_command`); `null` when the plan
    /// was not made from an `eas up` command line.
    apply_command: Option<String>,
    layer: String,
    env: String,
    profile: String,
    /// The pins file the run read, by absolute path, or `built-in` (`pins::Source::label`).
    pins_source: String,
    /// What the run selected (`eas up --plan DIR` runs with it again); `null` when the plan was
    /// not made by `eas up`.
    selection: Option<saved::Selection>,
    /// Every setting of the run that is not a default, with where it came from (a flag, the
    /// environment, the config file, the last install), in the order they resolve.
    settings: Vec<crate::settings::source::Setting>,
    /// The pinned commits: `eas`, `ei`, `eat` (full SHAs, or the floating ref when unlocked).
    commits: BTreeMap<String, String>,
    /// The commit each tree resolved to (empty when the trees could not be read).
    trees: BTreeMap<String, String>,
    /// The model `eas config` picked, with its verdict (`qwen2-5-coder-7b (fallback)`).
    model: Option<String>,
    /// The fit decision on the model's KV cache.
    fit: Option<String>,
    /// `model` and `fit` as data (`ModelPick`).
    model_pick: Option<ModelPick>,
    image: Option<ImagePlan>,
    facts: Option<FactsSummary>,
    /// Each with the key it writes and the value, where it writes one (`crate::plan::data`).
    #[serde(serialize_with = "decisions_with_keys")]
    decisions: ByKey<PhaseId, PlanDecision>,
    warnings: ByKey<PhaseId, String>,
    overlay: Vec<PlanPatch>,
    commands: ByKey<Runs, PlannedCommand>,
    phases: Vec<PlannedPhase>,
    /// What the dry run could not find out, and why.
    unknown: ByKey<PhaseId, Missing>,
    /// Every check the real run would stop at before its first write, in the order it meets
    /// them; the real run exits with the first one's `exit_code`.
    blockers: ByKey<Option<PhaseId>, Blocker>,
    /// Why the overlay was not decided (the trees could not be read, the config refused), when
    /// it was not: `overlay: []` then means "not decided", never "nothing to patch". The first
    /// phase's reason, of those that give one.
    #[serde(serialize_with = "first")]
    overlay_not_decided: ByKey<PhaseId, String>,
    /// What this run is against the last completed one (`install`, `up-to-date`, `upgrade`,
    /// `reconfigure`, `resume`); `null` when the plan stopped before it could tell.
    run_kind: Option<crate::since_last::RunKind>,
    /// What changed since the last completed run; `null` when there is none.
    since_last: Option<crate::since_last::SinceLast>,
    /// What making the plan itself wrote to the cluster and removed again: the probe pods of
    /// `--probe-nodes`, one line each (`probe pod kube-system/NAME on node N, created and
    /// deleted`). Absent: nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    wrote: Vec<String>,
    /// The exit code of the command that printed this plan.
    exit_code: u8,
}
}

/// `decisions` as eas-plan/v1 prints them: each decision's fields, and `key` and `value` (both
/// `null` for a decision that writes no key).
fn decisions_with_keys<S: Serializer>(decisions: &ByKey<PhaseId, PlanDecision>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Keyed<'a> {
        #[serde(flatten)]
        d: &'a PlanDecision,
        key: Option<String>,
        value: Option<serde_json::Value>,
    }
    let mut seq = s.serialize_seq(Some(decisions.len()))?;
    for d in decisions.iter() {
        let (key, value) = key_value(&d.choice).unzip();
        seq.serialize_element(&Keyed { d, key, value })?;
    }
    seq.end()
}

/// A part that keeps only its first item (by key) as one value, `null` without one.
fn first<S: Serializer>(v: &ByKey<PhaseId, String>, s: S) -> Result<S::Ok, S::Error> {
    v.first().serialize(s)
}

impl Plan {
    /// An empty plan listing every phase as the dry run treats it, with the effective timeouts;
    /// the selection is [`Plan::select`]'s to write.
    pub fn new(timeouts: &PhaseTimeouts) -> Self {
        let phases = PHASES
            .iter()
            .map(|p| PlannedPhase {
                name: p.name,
                phase: p.id,
                timeout_secs: timeouts.get(p.id).as_secs(),
                plan_timeout_secs: timeouts.plan(p.id).as_secs(),
                dry_run: p.dry_run,
                says: p.dry_run_says.to_string(),
            })
            .collect();
        Plan {
            schema: PLAN_SCHEMA,
            apply_command: None,
            layer: String::new(),
            env: String::new(),
            profile: String::new(),
            pins_source: String::new(),
            selection: None,
            settings: Vec::new(),
            commits: BTreeMap::new(),
            trees: BTreeMap::new(),
            model: None,
            fit: None,
            model_pick: None,
            image: None,
            facts: None,
            decisions: ByKey::default(),
            warnings: ByKey::default(),
            overlay: Vec::new(),
            commands: ByKey::default(),
            phases,
            unknown: ByKey::default(),
            blockers: ByKey::default(),
            overlay_not_decided: ByKey::default(),
            run_kind: None,
            since_last: None,
            wrote: Vec::new(),
            exit_code: EXIT_SUCCESS,
        }
    }

    /// The run's selection: before the cluster is read, and again when the last install on it
    /// filled what the run left unset.
    pub fn select(&mut self, s: Selected) {
        (self.layer, self.env, self.profile) = (s.layer, s.env, s.profile);
        (self.pins_source, self.selection, self.commits) = (s.pins_source, s.selection, s.commits);
    }

    pub fn set_settings(&mut self, settings: Vec<crate::settings::source::Setting>) {
        self.settings = settings;
    }

    pub fn set_apply_command(&mut self, command: Option<String>) {
        self.apply_command = command;
    }

    pub fn set_trees(&mut self, trees: BTreeMap<String, String>) {
        self.trees = trees;
    }

    pub fn picked(&mut self, p: Picked) {
        (self.model, self.fit, self.model_pick) = (p.model, p.fit, p.pick);
    }

    pub fn set_image(&mut self, image: ImagePlan) {
        self.image = Some(image);
    }

    pub fn set_facts(&mut self, facts: FactsSummary) {
        self.facts = Some(facts);
    }

    /// A phase's decisions, after those of the phases before it.
    pub fn add_decisions(&mut self, phase: PhaseId, decisions: impl IntoIterator<Item = PlanDecision>) {
        self.decisions.add(phase, decisions);
    }

    /// A phase's warnings, after those of the phases before it.
    pub fn add_warnings(&mut self, phase: PhaseId, warnings: impl IntoIterator<Item = String>) {
        self.warnings.add(phase, warnings);
    }

    pub fn set_overlay(&mut self, overlay: Vec<PlanPatch>) {
        self.overlay = overlay;
    }

    /// An installer command line, in the order the run executes them.
    pub fn add_command(&mut self, runs: Runs, argv: Vec<String>) {
        self.commands.add(runs, [PlannedCommand { phase: runs.phase(), argv }]);
    }

    /// What the dry run could not find out, by the phase that needs it.
    pub fn add_unknown(&mut self, missing: Missing) {
        self.unknown.add(missing.phase, [missing]);
    }

    /// Blockers found, listed as [`Met`] says.
    pub fn add_blockers(&mut self, met: Met, blockers: impl IntoIterator<Item = Blocker>) {
        for b in blockers {
            let key = match met {
                Met::SavedPlan => None,
                Met::InPhase => Some(b.phase),
            };
            self.blockers.add(key, [b]);
        }
    }

    /// Why the overlay was not decided, as `phase` saw it: the earliest phase's reason is kept.
    pub fn not_decided_by(&mut self, phase: PhaseId, why: impl Into<String>) {
        self.overlay_not_decided.add(phase, [why.into()]);
    }

    /// Classify's comparison with the last completed run.
    pub fn compared(&mut self, kind: crate::since_last::RunKind, since: Option<crate::since_last::SinceLast>) {
        (self.run_kind, self.since_last) = (Some(kind), since);
    }

    pub fn set_wrote(&mut self, wrote: Vec<String>) {
        self.wrote = wrote;
    }

    /// The exit code of the command that printed (or kept) the plan.
    pub fn exited(&mut self, code: u8) {
        self.exit_code = code;
    }

    pub fn to_json(&self) -> String {
        // Bidi and zero-width characters from the cluster are written as \uXXXX escapes.
        let mut s = crate::text::json_safe(serde_json::to_string_pretty(self).expect("the plan serialises"));
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in this module's doc, as (field, writer) pairs.
    fn table() -> Vec<(String, String)> {
        let src = include_str!("doc.rs");
        let mut v = Vec::new();
        for line in src.lines().filter_map(|l| l.strip_prefix("//! | ")) {
            let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
            let Some(writer) = cells.get(1).and_then(|w| w.split('`').nth(1)) else { continue };
            for field in cells[0].split(", ").filter(|f| !f.starts_with("field") && !f.starts_with("---")) {
                v.push((field.to_string(), writer.to_string()));
            }
        }
        v
    }

    /// The fields of `Plan` and, for each, the functions of `impl Plan` whose body names
    /// `self.<field>`: the compiler keeps every write inside this module, this test keeps each
    /// field to one function of it. A second writer added here fails it.
    #[test]
    fn each_field_has_one_writer() {
        let src = include_str!("doc.rs");
        let body = src.split("pub struct Plan {").nth(1).unwrap().split("\n}\n").next().unwrap();
        let fields: Vec<&str> = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
            .filter_map(|l| l.split_once(':').map(|(f, _)| f))
            .collect();
        assert_eq!(fields.len(), 27, "{fields:?}");
        let imp = src.split("\nimpl Plan {").nth(1).unwrap().split("\n}\n").next().unwrap();
        let fns: Vec<(&str, &str)> =
            imp.split("\n    pub fn ").skip(1).map(|f| (f.split('(').next().unwrap(), f)).collect();
        let table = table();
        for field in fields {
            let pattern = format!("self.{field}");
            let writers: Vec<&str> = fns
                .iter()
                .filter(|(_, body)| {
                    body.match_indices(&pattern).any(|(at, _)| {
                        !body[at + pattern.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                })
                .map(|(name, _)| *name)
                .collect();
            let named: Vec<&str> = table.iter().filter(|(f, _)| f == field).map(|(_, w)| w.as_str()).collect();
            assert_eq!(named.len(), 1, "{field}: the table names one writer: {named:?}");
            if named[0] == "new" {
                assert!(writers.is_empty(), "{field} is written by new only: {writers:?}");
            } else {
                assert_eq!(writers, named, "{field}: its one writer");
            }
        }
    }

    #[test]
    fn parts_are_in_the_order_of_their_keys_whatever_order_they_arrive_in() {
        let mut p = Plan::new(&PhaseTimeouts::default());
        let b = |phase, cause: &str| Blocker::new(phase, cause, "", super::super::Kind::Failed);
        p.add_blockers(Met::InPhase, [b(PhaseId::Config, "c1"), b(PhaseId::Facts, "f1"), b(PhaseId::Config, "c2")]);
        p.add_blockers(Met::InPhase, [b(PhaseId::Lock, "l1")]);
        p.add_blockers(Met::SavedPlan, [b(PhaseId::Overlay, "s1"), b(PhaseId::Config, "s2")]);
        let causes: Vec<&str> = p.blockers().iter().map(|b| b.cause.as_str()).collect();
        assert_eq!(causes, ["s1", "s2", "l1", "f1", "c1", "c2"]);
        p.add_command(Runs::Install, vec!["install".into()]);
        p.add_command(Runs::Undeploy, vec!["undeploy".into()]);
        p.add_command(Runs::Init, vec!["init".into()]);
        let argv: Vec<&str> = p.commands().iter().map(|c| c.argv[0].as_str()).collect();
        assert_eq!(argv, ["init", "undeploy", "install"]);
        assert_eq!(p.commands()[0].phase, PhaseId::Prepare);
        p.not_decided_by(PhaseId::Config, "config");
        p.not_decided_by(PhaseId::Trees, "trees");
        p.not_decided_by(PhaseId::Overlay, "overlay");
        let json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(json["overlay_not_decided"], "trees", "the earliest phase's reason");
        assert_eq!(json["commands"][1]["argv"][0], "undeploy");
        assert_eq!(json["blockers"][2]["cause"], "l1");
    }
}
