//! The plan's decisions and overlay rows as data (eas-plan/v1), from `eas config`'s decision and
//! the overlay decider's plan. `choices.txt` keeps its full lines; these feed the plan view and
//! `plan.json`.

use crate::config::rules::Decision;
use crate::overlay::decide::{Outcome, Plan as OverlayPlan, Source};
use crate::pipeline::{PatchOutcome, Plan, PlanDecision, PlanPatch};
use crate::sources;

/// Fills the plan's decisions, warnings, model and fit verdict from the config decision.
pub fn fill_decisions(plan: &mut Plan, decision: &Decision) {
    plan.decisions = decision
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
    plan.warnings = decision.warnings.clone();
    // The model pick and the KV-cache (fit) decision are choice lines of their own.
    plan.model = decision.choices.iter().find_map(|c| c.choice.strip_prefix("model: ").map(str::to_string));
    // A cache fit lowered is a models.yaml edit; a kept one is a "KV cache" choice.
    let lowered = decision.model_edits.iter().find_map(|e| {
        let kv = e.env.iter().find(|(k, _)| k == crate::facts::KV_CACHE_ENV)?;
        Some(format!("KV cache: lowered by fit to {} GiB for {}", kv.1, e.name))
    });
    let kept = || decision.choices.iter().find(|c| c.choice.starts_with("KV cache")).map(|c| c.choice.clone());
    // A raised pod memory is the other half of fit's answer (weights + cache + headroom).
    let memory =
        decision.model_edits.iter().find_map(|e| e.memory.as_ref().map(|m| format!("pod memory {m} for {}", e.name)));
    plan.fit = match (lowered.or_else(kept), memory) {
        (Some(kv), Some(m)) => Some(format!("{kv}; {m}")),
        (kv, m) => kv.or(m),
    };
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

    /// The desktop's fit sizes the pick's cache under the built-in candidate's 40 GiB: the plan's
    /// fit line says it was lowered (it used to be empty exactly then).
    #[test]
    fn a_cache_fit_lowered_is_the_plans_fit_line() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
        let facts = crate::facts::Facts::read(&path).unwrap();
        let select = crate::settings::Select { layer: "agent-toolkit".into(), ..Default::default() };
        let d = crate::config::generate(&facts, &select).unwrap();
        assert!(d.model_edits.iter().any(|e| !e.env.is_empty()), "the fixture lowers the cache: {:?}", d.model_edits);
        let mut plan = Plan::new("agent-toolkit", "k3d-gpu", "main", &Default::default());
        fill_decisions(&mut plan, &d);
        let fit = plan.fit.expect("a fit line");
        assert_eq!(
            fit,
            "KV cache: lowered by fit to 24 GiB for qwen2-5-coder-7b; pod memory 41Gi for qwen2-5-coder-7b"
        );
    }
}
