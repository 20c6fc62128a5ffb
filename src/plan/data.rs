//! The plan's decisions and overlay rows as data (eas-plan/v1), from `eas config`'s decision and
//! the overlay decider's plan. `choices.txt` keeps its full lines; these feed the plan view and
//! `plan.json`.

use crate::config::rules::Decision;
use crate::overlay::decide::{Outcome, Plan as OverlayPlan, Source};
use crate::plan::{FitPick, ModelPick, PatchOutcome, Picked, PlanDecision, PlanPatch};
use crate::sources;

/// The model pick from the config decision's choice lines and model edits. Pure.
pub fn model_pick(decision: &Decision) -> Option<ModelPick> {
    let line = decision.choices.iter().find_map(|c| c.choice.strip_prefix("model: "))?;
    if let Some(why) = line.strip_prefix("none ([]): ") {
        return Some(ModelPick { name: None, reason: why.to_string(), fit: None });
    }
    let (name, reason) = match line.split_once(" (") {
        Some((n, r)) => (n.to_string(), r.strip_suffix(')').unwrap_or(r).to_string()),
        None => (line.to_string(), String::new()),
    };
    let lowered = decision.model_edits.iter().filter(|e| e.name == name).find_map(|e| {
        let kv = e.env.iter().find(|(k, _)| k == crate::facts::KV_CACHE_ENV)?;
        kv.1.parse::<u64>().ok()
    });
    let kv_line = decision.choices.iter().find_map(|c| c.choice.strip_prefix("KV cache: "));
    let fit = match (lowered, kv_line) {
        (Some(gib), _) => Some(FitPick { verdict: "lowered", kv_cache_gib: Some(gib) }),
        (None, Some(l)) if l.starts_with("none written") => {
            Some(FitPick { verdict: "not-written", kv_cache_gib: None })
        }
        (None, Some(l)) => {
            let gib = l.strip_prefix("catalog's ").and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok());
            Some(FitPick { verdict: "kept", kv_cache_gib: gib })
        }
        (None, None) => None,
    };
    Some(ModelPick { name: Some(name), reason, fit })
}

/// Config's part of the plan from its decision: its decision lines, and the model with its
/// fit verdict (its warnings are the decision's own). Pure.
pub fn config_part(decision: &Decision) -> (Vec<PlanDecision>, Picked) {
    let decisions = decision
        .choices
        .iter()
        .map(|c| {
            let src = sources::get(&c.source);
            PlanDecision {
                fact: c.fact.clone(),
                choice: c.choice.clone(),
                source: src.short(),
                permalink: src.permalink(),
            }
        })
        .collect();
    // The model pick and the KV-cache (fit) decision are choice lines of their own.
    let model = decision.choices.iter().find_map(|c| c.choice.strip_prefix("model: ").map(str::to_string));
    // A cache fit lowered is a models.yaml edit; a kept one is a "KV cache" choice.
    let lowered = decision.model_edits.iter().find_map(|e| {
        let kv = e.env.iter().find(|(k, _)| k == crate::facts::KV_CACHE_ENV)?;
        Some(format!("KV cache: lowered by fit to {} GiB for {}", kv.1, e.name))
    });
    let kept = || decision.choices.iter().find(|c| c.choice.starts_with("KV cache")).map(|c| c.choice.clone());
    // A raised pod memory is the other half of fit's answer (weights + cache + headroom).
    let memory =
        decision.model_edits.iter().find_map(|e| e.memory.as_ref().map(|m| format!("pod memory {m} for {}", e.name)));
    let fit = match (lowered.or_else(kept), memory) {
        (Some(kv), Some(m)) => Some(format!("{kv}; {m}")),
        (kv, m) => kv.or(m),
    };
    (decisions, Picked { model, fit, pick: model_pick(decision) })
}

pub fn patches(op: &OverlayPlan) -> Vec<PlanPatch> {
    op.decisions
        .iter()
        .map(|d| PlanPatch {
            id: d.id.clone(),
            outcome: match d.outcome {
                Outcome::Apply { .. } => PatchOutcome::Apply,
                Outcome::Skip => PatchOutcome::Skip,
                Outcome::Merged { .. } => PatchOutcome::Merged,
                Outcome::Fixed => PatchOutcome::Fixed,
                Outcome::Stop => PatchOutcome::Stop,
            },
            fact: d.fact.clone(),
            choice: d.choice.clone(),
            source: d.source.render(false),
            permalink: match &d.source {
                Source::Upstream(c) => c.permalink(),
                other => other.render(true),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::key_value;
    use serde_json::json;

    #[test]
    fn a_decision_that_writes_a_key_carries_it_and_its_value() {
        let cases = [
            ("metallb_enabled: false", Some(("metallb_enabled", json!(false)))),
            ("istio_platform: \"k3d\" (needs overlay 0002)", Some(("istio_platform", json!("k3d")))),
            (
                "bring-your-own cluster: global_config existing_kubernetes: \"/kube/config\"",
                Some(("global_config existing_kubernetes", json!("/kube/config"))),
            ),
            ("models.yaml defaults.require_amx: false", Some(("models.yaml defaults.require_amx", json!(false)))),
            (
                "models.yaml m args_append: [\"--max-model-len\", \"8192\"]",
                Some(("models.yaml m args_append", json!(["--max-model-len", "8192"]))),
            ),
            (
                "repos.agent-toolkit.yaml enterprise.ai-inference rev: \"abc\"",
                Some(("repos.agent-toolkit.yaml enterprise.ai-inference rev", json!("abc"))),
            ),
            ("model: qwen2-5-coder-7b (fallback)", None),
            ("model: none ([]): no candidate fits", None),
            ("KV cache: catalog's 8 GiB kept (fit may lower it, never raise it)", None),
            ("passed last: -- -e @eas-overrides.yaml", None),
            ("note: the Intel GPU is served outside this stack (k3d-gpu agent up); EI's runtimes are CPU only", None),
            ("read by overlay 0002 (added by the patch)", None),
        ];
        for (line, want) in cases {
            let got = key_value(line);
            assert_eq!(got, want.map(|(k, v)| (k.to_string(), v)), "{line}");
        }
    }

    /// The agent-toolkit decision on the desktop fixture's facts (fixtures/config/desktop-i9).
    fn desktop_decision() -> crate::config::Decision {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
        let facts = crate::facts::Facts::read(&path).unwrap();
        let select = crate::settings::Select { layer: crate::settings::Layer::AgentToolkit, ..Default::default() };
        crate::config::generate(&facts, &select).unwrap()
    }

    #[test]
    fn the_model_pick_names_the_model_its_reason_and_the_fit_verdict() {
        let d = desktop_decision();
        let pick = model_pick(&d).expect("a pick");
        assert_eq!(pick.name.as_deref(), Some("qwen2-5-coder-7b"));
        let fit = pick.fit.expect("a fit verdict");
        assert_eq!(fit.verdict, "lowered");
        let written = &d.model_edits[0].env[0].1;
        assert_eq!(fit.kv_cache_gib.map(|g| g.to_string()).as_deref(), Some(written.as_str()));
    }

    /// The desktop's fit sizes the pick's cache under the built-in candidate's 40 GiB: the plan's
    /// fit line says it was lowered (it used to be empty exactly then).
    #[test]
    fn a_cache_fit_lowered_is_the_plans_fit_line() {
        let d = desktop_decision();
        assert!(d.model_edits.iter().any(|e| !e.env.is_empty()), "the fixture lowers the cache: {:?}", d.model_edits);
        let fit = config_part(&d).1.fit.expect("a fit line");
        assert_eq!(
            fit,
            "KV cache: lowered by fit to 24 GiB for qwen2-5-coder-7b; pod memory 41Gi for qwen2-5-coder-7b"
        );
    }
}
