//! Config: the plan half decides the installer's configuration from the facts, the pins and the
//! flags, against the model catalog the installer will read (the one `init` copies at the pinned
//! EI commit, or, on an upgrade in place, the copy `init` seeded then), with what Hugging Face
//! says of each entry unless `--offline`, the proxy keys, and the deploy path the pinned EAT tree
//! proves. A refusal is a blocker. The act half has nothing left to do: the files are written by
//! prepare.

use std::time::Duration;

use crate::act::bastion;
use crate::config::{self, render};
use crate::error::Failure;
use crate::facts::Facts;
use crate::installer::command as argv;
use crate::plan::{PhaseId, PlanDecision, Runs};
use crate::state::since::Completed;

use crate::gather::{catalog, knob_audit};
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::phases::preflight::Pre;
use crate::pipeline::phases::trees::Resolved;
use crate::pipeline::runner::{Phase, Runner};

pub struct Config<'a> {
    pub facts: &'a Facts,
    pub pre: &'a Pre,
    pub trees: Option<&'a Resolved>,
    /// The last completed run: an upgrade in place decides against the catalog it seeded.
    pub last: Option<&'a Completed>,
}

/// The configuration decided, its files, the installer's command, and the catalog it was
/// decided against.
pub struct Decided {
    pub decision: config::Decision,
    pub files: Vec<(String, String)>,
    pub install: Vec<String>,
    pub pinned: Option<crate::config::catalog::Pinned>,
    /// What the plan cannot know: whether the weights download, and why not.
    unasked: Option<&'static str>,
    /// `init`'s command (classify decides whether it upgrades), and the installer's as the
    /// journal records it (secrets redacted).
    pub init: Vec<String>,
    redacted: Vec<String>,
}

impl Phase for Config<'_> {
    const ID: PhaseId = PhaseId::Config;
    type Planned = Decided;
    type Done = Decided;

    async fn plan(&mut self, cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Decided, NoPlan> {
        let (args, global, shell, tree_pins) = (cx.args, cx.global, cx.shell, cx.tree_pins);
        let layer = &args.select.layer;
        let seeded = seeded_catalog(self.pre, self.last, self.trees, &args.env, layer)?;
        // The models are decided against the catalog the installer will read: the one `init`
        // will copy, read at the pinned EI commit; or, when the run upgrades an inited env in
        // place, the copy `init` seeded then (an upgrade never re-seeds it).
        let pinned = match (self.trees, seeded) {
            (_, Some(s)) => Some(s),
            (Some(t), None) => catalog::read(&t.ei.objects, &t.ei.sha, &tree_pins.ei, layer).map_err(Failure::from)?,
            (None, None) => None,
        };
        match &pinned {
            Some(c) => shell.note(format!("model catalog: {}", c.describe())),
            None => shell.note("model catalog: not read (no trees); the built-in candidates (data/models.json) decide"),
        }
        let downloads = match (&pinned, args.offline) {
            (Some(c), false) => hf_reads(&c.catalog, cx).await,
            (Some(_), true) => {
                shell.warn(
                    "--offline: Hugging Face was not asked; the figures come from the cache or data/models.json, \
                     and whether the install can download the weights is not checked",
                );
                Vec::new()
            }
            _ => Vec::new(),
        };
        // What the plan cannot know then, said as unknown: whether the weights download.
        let unasked = match (&pinned, args.offline) {
            (_, true) => Some("not asked (--offline)"),
            (None, false) => Some("not asked (the catalog was not read)"),
            _ => None,
        };
        // The installed model is kept unless --model names one or --repick asks for the pick.
        let kept = self.last.and_then(|l| l.model.as_deref()).filter(|_| !args.select.repick);
        let mut decision =
            config::generate_with_downloads(self.facts, &args.select, pinned.as_ref(), (&downloads, kept))
                .map_err(Failure::from)?;
        // With a proxy: the installer's proxy keys and the no_proxy the facts imply (issue 21).
        config::proxy::apply(&mut decision, self.facts, &cx.services.proxy, Some(&self.pre.server));
        if let Some(t) = self.trees {
            // The layer manifest at the full SHAs resolved in the mirror, whatever the pins hold.
            let shas = [("eas", t.eas.sha.as_str()), ("ei", t.ei.sha.as_str()), ("eat", t.eat.sha.as_str())];
            config::rules::manifest_at(&mut decision, &shas);
            // The deploy path the pinned EAT tree proves: its own key when a reader is found.
            let repo = tree_pins.eat.repo.clone().unwrap_or_default();
            let eat = knob_audit::Tree { name: "eat", repo: repo.clone(), objects: &t.eat.objects, sha: &t.eat.sha };
            // A reader counts only on the layer's install path: its manifest must include EAT.
            let on_path = config::data::layers()
                .layers
                .get(layer.as_str())
                .is_some_and(|rows| rows.iter().any(|r| r.pin == "eat"));
            let readers = if on_path {
                knob_audit::eat_model_readers(&eat).map_err(|e| Failure::step(PhaseId::Config, e))?
            } else {
                Vec::new()
            };
            let at = format!("{repo}@{}", &t.eat.sha[..t.eat.sha.len().min(7)]);
            // ... and the layer's components must enable the reader's role.
            let readers = readers_on_path(&t.eat.objects, &t.eat.sha, layer, &decision, readers, &at)?;
            config::model::prove_deploy_path(&mut decision, &readers, &at);
        }
        let files = render::files(&decision);
        let overrides_in_tree = format!("env/{}/eas-overrides.yaml", args.env);
        let install = argv::install_argv(layer, &args.env, &format!("{}/{overrides_in_tree}", bastion::TREE_TARGET))
            .map_err(Failure::from)?;
        let init = argv::init_argv(layer, &args.env).map_err(Failure::from)?;
        let redacted = crate::act::install::redactor(&global.env).redact_argv(&install);
        Ok(Decided { decision, files, install, pinned, unasked, init, redacted })
    }

    fn note(&mut self, d: &mut Decided, r: &mut Runner) -> Result<(), Failure> {
        if let Some(why) = d.unasked {
            let reason = format!("whether Hugging Face lets the model's weights be downloaded: {why}");
            r.plan_part(PhaseId::Config).unknown(reason);
        }
        let choices = d.decision.choices.iter().map(|c| render::choice_line(c, false)).collect();
        r.journal().decided(choices, d.redacted.clone());
        // Prepare's `init` is written by classify, which decides whether it upgrades.
        r.plan_part(PhaseId::Config).command(Runs::Install, d.install.clone());
        Ok(())
    }

    fn unplanned(&self, r: &mut Runner) {
        r.plan_part(PhaseId::Config).not_decided("the configuration was not decided");
    }

    async fn act(&mut self, d: Decided, _cx: &Cx<'_>, _r: &mut Runner) -> Result<Decided, Failure> {
        Ok(d)
    }
}

/// The env's `models.yaml` as `init` seeded it, when this run upgrades that env in place: the pins
/// moved since the last completed run and the kept work tree holds the inited env. `init
/// --upgrade` never re-seeds it, so the installer reads this copy, and the model is decided
/// against it (the new catalog's changes to it are listed in `since_last`). A seeded copy that
/// does not parse is bad input naming it.
fn seeded_catalog(
    pre: &Pre,
    last: Option<&Completed>,
    trees: Option<&Resolved>,
    env: &str,
    layer: &str,
) -> Result<Option<crate::config::catalog::Pinned>, Failure> {
    let (Some(last), Some(t)) = (last, trees) else { return Ok(None) };
    let now = [("eas", &t.eas.sha), ("ei", &t.ei.sha), ("eat", &t.eat.sha)];
    let moved = now.iter().any(|(n, sha)| last.state.pins.shas.get(*n).is_some_and(|old| old != *sha));
    let dir = pre.sd.work_dir().join("eas").join("env").join(env);
    if !moved || catalog::catalog_path(layer).is_none() || !dir.join(".solutions.yaml").exists() {
        return Ok(None);
    }
    let path = dir.join("models.yaml");
    let Ok(text) = crate::bounded::read_string(&path, crate::bounded::Kind::Catalog) else { return Ok(None) };
    let parsed = crate::config::catalog::Catalog::parse(&text).map_err(|e| {
        Failure::bad_input(
            format!("{}: {e}", path.display()),
            "the env's models.yaml is what the installer reads; fix it, or `eas down` and install afresh",
        )
    })?;
    let shown = format!("env/{env}/models.yaml (as init seeded it; an upgrade does not re-seed it)");
    Ok(Some(crate::config::catalog::Pinned { catalog: parsed, path: shown, at: String::new() }))
}

/// What Hugging Face says of each LLM entry of the catalog (`HF_ENDPOINT`, `HF_TOKEN`, the proxy
/// and `--ca-bundle` as for every download; bounded, in parallel, cached): whether the weights
/// can be downloaded, by `model_id`. An entry Hugging Face itself refuses is skipped by an
/// automatic pick and refused for `--model`; no answer (offline, a proxy's refusal) is a warning.
async fn hf_reads(catalog: &crate::config::catalog::Catalog, cx: &Cx<'_>) -> Vec<(String, crate::config::hf::Access)> {
    let (env, global, shell) = (&cx.global.env, cx.global, cx.shell);
    let entries: Vec<(String, String)> =
        catalog.llms().filter(|e| !e.model_id.is_empty()).map(|e| (e.model_id.clone(), "main".to_string())).collect();
    let home = env.var("HOME").map(std::path::PathBuf::from);
    let xdg = env.var("XDG_CACHE_HOME").map(std::path::PathBuf::from);
    let Some(cache) = crate::config::hf::cache_base(xdg.as_deref(), home.as_deref()) else { return Vec::new() };
    let roots = global.ca_bundle.as_ref().map(|b| b.ders.clone()).unwrap_or_default();
    let Ok(d) = crate::net::download::Downloader::with_timeouts(
        &roots,
        cx.services.proxy.clone(),
        crate::gather::hf::CONNECT,
        crate::gather::hf::TOTAL,
    ) else {
        return Vec::new();
    };
    let endpoint = crate::gather::hf::endpoint(env.var("HF_ENDPOINT").as_deref());
    let token = env.var("HF_TOKEN");
    let reading = crate::gather::hf::read_all(&d, &endpoint, token.as_deref(), &entries, &cache);
    // One budget for every read, inside the phase's window: half of what is left of it, so the
    // decision after the reads still has the other half. Each read is also bounded on its own.
    let Some(budget) = crate::pipeline::runner::deadline().map(|d| hf_budget(d, tokio::time::Instant::now())) else {
        return reading.await.into_iter().map(|r| (r.model_id, r.access)).collect();
    };
    match tokio::time::timeout(budget, reading).await {
        Ok(reads) => reads.into_iter().map(|r| (r.model_id, r.access)).collect(),
        Err(_) => {
            let why = format!(
                "Hugging Face did not answer within {} s, the config phase's budget for its reads: the download \
                 was not checked, and the figures come from the cache or data/models.json, as for an unreachable \
                 Hugging Face",
                budget.as_secs_f64().round()
            );
            shell.warn(&why);
            entries
                .into_iter()
                .map(|(id, _)| (id.clone(), crate::config::hf::Access::Unknown(format!("{id}: {why}"))))
                .collect()
        }
    }
}

/// The Hugging Face reads' budget: half of what is left of the phase's window at `now`.
fn hf_budget(deadline: tokio::time::Instant, now: tokio::time::Instant) -> Duration {
    deadline.saturating_duration_since(now) / 2
}

/// Each reader of EAT's model key with whether the install runs it: the pinned EAT tree's
/// `components.yaml` (at the layer row's `deployment_subdir`) must enable the reader's role in a
/// layer the install runs. A variable named in a component's `enabled` takes eas's override, else
/// the layer's seeded `config.yaml`. Without a `components.yaml` no role is run.
fn readers_on_path(
    objects: &std::path::Path,
    sha: &str,
    layer: &str,
    decision: &config::Decision,
    readers: Vec<String>,
    at: &str,
) -> Result<Vec<(String, config::components::OnPath)>, Failure> {
    use config::components::{Components, OnPath, on_path};
    if readers.is_empty() {
        return Ok(Vec::new());
    }
    let rows = config::data::layers().layers.get(layer).cloned().unwrap_or_default();
    let subdir = rows.iter().find(|r| r.pin == "eat").map(|r| r.deployment_subdir.clone()).unwrap_or_default();
    let file = |name: &str| {
        let path = if subdir.is_empty() { name.to_string() } else { format!("{subdir}/{name}") };
        crate::trees::git(Some(objects), &["cat-file", "blob", &format!("{sha}:{path}")], Duration::from_secs(60))
            .ok()
            .map(|text| (path, text))
    };
    let Some((path, text)) = file("components.yaml") else {
        let why = format!("{at} has no components.yaml, so the installer runs none of its roles");
        return Ok(readers.into_iter().map(|r| (r, OnPath::No(why.clone()))).collect());
    };
    let components = Components::parse(&text)
        .map_err(|e| Failure::step(PhaseId::Config, format!("{path} at {at} is not a components manifest: {e}")))?;
    let seeded: serde_json::Map<String, serde_json::Value> =
        file("config.yaml").and_then(|(_, t)| serde_saphyr::from_str(&t).ok()).unwrap_or_default();
    let value = |key: &str| {
        let written = decision.overrides.iter().find(|(k, _)| *k == key).map(|(_, v)| match v {
            config::rules::Value::Bool(b) => serde_json::Value::Bool(*b),
            config::rules::Value::Str(s) => serde_json::Value::String(s.clone()),
            config::rules::Value::List(_) => serde_json::Value::Null,
        });
        written.or_else(|| seeded.get(key).cloned())
    };
    // Within the reader's own repository, the role's path is relative to the subdir.
    let relative = |r: &str| r.strip_prefix(&format!("{subdir}/")).unwrap_or(r).to_string();
    Ok(readers
        .into_iter()
        .map(|r| {
            let v = on_path(&components, layer, &relative(&r), &value);
            (r, v)
        })
        .collect())
}

/// After config's plan half: the cluster's prerequisites, with the egress probe's answers
/// (started by preflight), then the configuration's own decisions and warnings. Config's part
/// of the plan lists its decision lines, then the egress line; the prerequisites' warnings,
/// then the configuration's. Returns config's decision lines, as written.
pub async fn checked(
    facts: &Facts,
    decided: Option<&Decided>,
    egress: Option<crate::pipeline::phases::preflight::Egress>,
    shell: &crate::output::Shell,
    r: &mut Runner,
) -> Vec<PlanDecision> {
    let egress = match egress {
        Some(e) => e.check().await,
        None => crate::prereq::egress::check(None, ""),
    };
    let (decision, pinned) = (decided.map(|d| &d.decision), decided.and_then(|d| d.pinned.as_ref()));
    let (egress_line, mut warnings) = prerequisites(facts, decision, pinned, egress, shell, r);
    let mut decisions = Vec::new();
    if let Some(d) = decision {
        for w in &d.warnings {
            shell.warn(w);
        }
        let (lines, picked) = crate::plan::data::config_part(d);
        r.plan_part(PhaseId::Config).picked(picked);
        decisions = lines;
        warnings.extend(d.warnings.iter().cloned());
    }
    decisions.push(egress_line);
    let mut part = r.plan_part(PhaseId::Config);
    part.decisions(decisions.iter().cloned());
    part.warnings(warnings);
    decisions
}

/// The cluster's prerequisites (`crate::prereq`): their refusals are blockers of the phase that
/// meets them (facts, or config for the room the weights need). Returns the egress line (in
/// the plan whatever it found) and the warnings, for config's part of the plan.
fn prerequisites(
    facts: &Facts,
    decision: Option<&config::Decision>,
    catalog: Option<&crate::config::catalog::Pinned>,
    egress: crate::prereq::Check,
    shell: &crate::output::Shell,
    r: &mut Runner,
) -> (PlanDecision, Vec<String>) {
    let recorded = crate::prereq::Recorded::from_created(&r.journaled().ledger.created);
    let model = decision.and_then(crate::pipeline::report::expected_models).and_then(|m| m.into_iter().next());
    // The pick's weights, from the figures eas sized it with (data/models.json by its
    // repository): the room the landing node needs for them.
    let weights = model.as_deref().and_then(|m| {
        let id = catalog?.catalog.entry(m)?.model_id.clone();
        config::data::models().architecture(&id).ok().map(|a| a.weights_bytes())
    });
    let inputs = crate::prereq::Inputs { weights_bytes: weights, model: model.as_deref(), recorded };
    let mut report = crate::prereq::check(facts, &inputs);
    // The egress line says what was asked, and that the nodes' own egress is not.
    let source = "data/egress.json".to_string();
    let line = PlanDecision {
        fact: "egress the install needs, asked from this host".into(),
        choice: egress.ok.clone(),
        permalink: source.clone(),
        source,
    };
    report.checks.push(egress);
    r.plan_part(PhaseId::Config).blockers(report.blockers());
    let warnings = report.warnings();
    for w in &warnings {
        shell.warn(w);
    }
    r.checked(report);
    (line, warnings)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hugging_face_reads_get_half_of_what_is_left_of_the_window() {
        let now = tokio::time::Instant::now();
        let secs = std::time::Duration::from_secs;
        assert_eq!(super::hf_budget(now + secs(30), now), secs(15));
        assert_eq!(super::hf_budget(now + secs(4), now), secs(2));
        assert_eq!(super::hf_budget(now, now + secs(1)), secs(0), "a window already closed leaves nothing");
    }
}
