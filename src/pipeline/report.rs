//! What a completed run says at its end: the plan's summary filled in with what happened, and
//! where each model it deployed answers; and what verification expects of the run (its models,
//! or the fit decision that none fits).

use crate::config;
use crate::output::Shell;
use crate::pipeline::phase::Cx;
use crate::plan::Plan;
use crate::settings::Global;
use crate::state::StateDir;
use crate::state::journal::State;
use crate::state::since::Completed;
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

/// A real run's last line: up to date (an earlier run installed with the same inputs,
/// `up_to_date` names it; verified now), or the plan's summary.
pub fn done(
    up_to_date: Option<&Completed>,
    plan: &Plan,
    state: &State,
    d: &config::Decision,
    sd: &StateDir,
    cx: &Cx<'_>,
) {
    match up_to_date {
        Some(last) => cx.shell.phase("done", format!("up to date (installed {}, verified now)", last.installed_at())),
        None => summary(plan, state, d, sd, cx.global, cx.shell),
    }
}

/// The plan's summary, filled in with what happened, closes a real run (on stderr, as its log).
fn summary(plan: &Plan, state: &State, d: &config::Decision, sd: &StateDir, global: &Global, shell: &Shell) {
    shell.phase("done", format!("{} installed on {} (env {})", state.layer, state.context, state.env));
    let log = state.log_path.as_ref().map(|l| l.display().to_string());
    let state_file = sd.state_file().display().to_string();
    let view = crate::pipeline::plan_view::View {
        width: crate::pipeline::plan_view::terminal_width(&global.env),
        explain: false,
    };
    let took = took(state);
    let ending = crate::pipeline::plan_view::Ending::Installed { log: log.as_deref(), state: &state_file, took: &took };
    for line in crate::pipeline::plan_view::summary(plan, view, &ending) {
        shell.note(crate::text::escape_controls(&line));
    }
    if let Some(models) = expected_models(d) {
        for m in models {
            for line in endpoint(&state.context, &m) {
                shell.note(line);
            }
        }
    }
}

/// How long each phase of the run took, in the order they ran, and the whole run: `lock 0:00,
/// preflight 0:02, ..., install 24:10 (total 27:05)`. A phase this run did not run (skipped as
/// done by an earlier run) has no times and is left out. Pure.
pub fn took(state: &State) -> String {
    let at = |t: &Option<String>| t.as_deref().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    type At = Option<chrono::DateTime<chrono::FixedOffset>>;
    let span = |from: At, to: At| match (from, to) {
        (Some(a), Some(b)) => (b - a).to_std().ok(),
        _ => None,
    };
    let phases: Vec<String> = state
        .phases
        .iter()
        .filter_map(|p| {
            span(at(&p.started), at(&p.finished)).map(|d| format!("{} {}", p.phase.name(), crate::output::clock(d)))
        })
        .collect();
    if phases.is_empty() {
        return String::new();
    }
    let first = state.phases.iter().filter_map(|p| at(&p.started)).min();
    let last = state.phases.iter().filter_map(|p| at(&p.finished)).max();
    match span(first, last) {
        Some(total) => format!("{} (total {})", phases.join(", "), crate::output::clock(total)),
        None => phases.join(", "),
    }
}

/// Where a deployed model answers, as lines a person can run: a port-forward to its workload
/// Service (the kubelet's path into the pod, which a namespace in Istio's ambient mesh does not
/// block, unlike the API server's service proxy: see `verify::reach`) and a `curl` through it,
/// then the gateway's URL and the auth it needs. The gateway: EAS's protected hostname
/// `inference.<base_domain_name>` (intel/enterprise-ai-solutions@cc887cb4
/// `roles/envoy_gateway/defaults/main.yaml`: `gateway_protected_hostnames`, `base_domain_name:
/// "inference-example.com"`, `keycloak_realm: "inference"`), denied by default without a Keycloak
/// JWT (@76f50717 `roles/envoy_gateway/templates/security-policy.yaml.j2`: issuer
/// `<keycloak frontend>/realms/<realm>`, audience `keycloak_client_id`, default `inference-client`).
/// eas writes no `base_domain_name`, so the defaults are what is printed. Pure.
pub fn endpoint(context: &str, model: &str) -> Vec<String> {
    let rt = verify::kserve::vllm();
    let (ns, svc, port) = (verify::NAMESPACE, rt.service(model), rt.port);
    let ctx = crate::installer::command::shell_line(&[context.to_string()]);
    vec![
        format!("  model {model}: kubectl --context {ctx} -n {ns} port-forward svc/{svc} {port}:{port}"),
        format!("    then, while it runs: curl -s http://localhost:{port}/v1/models"),
        format!(
            "    through the gateway: https://inference.inference-example.com/v1/chat/completions with \
             a Keycloak JWT of realm inference for client inference-client as its bearer token \
             (issuer https://keycloak.inference-example.com/realms/inference; EAS's defaults, unless \
             base_domain_name or auth_provider were changed)"
        ),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn took_lists_the_phases_that_ran_with_their_times_and_the_total() {
        use crate::plan::PhaseId;
        use crate::state::journal::{State, Status};
        let mut s = State::sample("2026-12-06T10:00:00Z");
        s.begin(PhaseId::Lock, None, "2026-12-06T10:00:00Z");
        s.finish(PhaseId::Lock, Status::Done, None, "2026-12-06T10:00:01Z");
        s.begin(PhaseId::Install, None, "2026-12-06T10:00:05Z");
        s.finish(PhaseId::Install, Status::Done, None, "2026-12-06T10:24:15Z");
        assert_eq!(super::took(&s), "lock 0:01, install 24:10 (total 24:15)");
        assert_eq!(super::took(&State::sample("t")), "", "nothing ran, nothing said");
    }

    #[test]
    fn the_endpoint_is_a_port_forward_and_curl_pair_and_the_gateway_with_its_auth() {
        let lines = super::endpoint("k3d-gpu", "qwen3-0-6b");
        assert_eq!(
            lines[0],
            "  model qwen3-0-6b: kubectl --context k3d-gpu -n llm-inference port-forward \
             svc/qwen3-0-6b-kserve-workload-svc 8000:8000"
        );
        assert_eq!(lines[1], "    then, while it runs: curl -s http://localhost:8000/v1/models");
        assert!(lines[2].contains("https://inference.inference-example.com") && lines[2].contains("Keycloak"));
        // Printed through the redactor, which masks the word after `Bearer `: the line must not
        // read like a credential (it printed `Bearer *** a Keycloak token`).
        for l in &lines {
            assert_eq!(&crate::secrets::redact::patterns(l).0, l);
        }
        assert!(super::endpoint("my ctx", "m")[0].contains("--context 'my ctx'"), "quoted for a shell");
    }
}
