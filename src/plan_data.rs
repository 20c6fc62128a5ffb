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
    plan.fit = decision.choices.iter().find(|c| c.choice.starts_with("KV cache")).map(|c| c.choice.clone());
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
