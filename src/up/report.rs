//! What a completed run says at its end: the plan's summary filled in with what happened, and
//! where each model it deployed answers; and what verification expects of the run (its models,
//! or the fit decision that none fits).

use crate::config;
use crate::output::Shell;
use crate::pipeline::Plan;
use crate::settings::Global;
use crate::state::StateDir;
use crate::state::journal::State;
use crate::verify;

pub fn expected_models(d: &config::Decision) -> Option<Vec<String>> {
    d.overrides.iter().find_map(|(k, v)| match (k, v) {
        (&"agent_toolkit_models", config::rules::Value::List(l)) => Some(l.clone()),
        (&"llm_services_deploy_models", config::rules::Value::Bool(on)) => Some(if *on {
            d.model_edits.iter().filter(|e| e.autodeploy).map(|e| e.name.clone()).collect()
        } else {
            vec![]
        }),
        _ => None,
    })
}

/// The generator's model line (`fact -> choice`): names the fit decision when no model fits.
pub fn model_decision(d: &config::Decision) -> Option<String> {
    d.choices.iter().find(|c| c.choice.starts_with("model:")).map(|c| format!("{} -> {}", c.fact, c.choice))
}

/// The plan's summary, filled in with what happened, closes a real run (on stderr, as its log).
pub fn summary(plan: &Plan, state: &State, d: &config::Decision, sd: &StateDir, global: &Global, shell: &Shell) {
    shell.phase("done", format!("{} installed on {} (env {})", state.layer, state.context, state.env));
    let log = state.log_path.as_ref().map(|l| l.display().to_string());
    let state_file = sd.state_file().display().to_string();
    let view = crate::plan_view::View { width: crate::plan_view::terminal_width(&global.env), explain: false };
    let ending = crate::plan_view::Ending::Installed { log: log.as_deref(), state: &state_file };
    for line in crate::plan_view::summary(plan, view, &ending) {
        shell.note(crate::text::escape_controls(&line));
    }
    if let Some(models) = expected_models(d) {
        for m in models {
            let base = verify::kserve::vllm().proxy_base(verify::NAMESPACE, "http", &m);
            shell.note(format!("  model {m} answers at {base}/v1"));
        }
    }
}
