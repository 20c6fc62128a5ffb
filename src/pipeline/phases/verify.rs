//! Verify: the devices node by node and the model servers the run deployed, the whole phase in
//! one window of its effective timeout (`--verify-timeout`); past it, a verification failure
//! (exit 5). Its only half is the act: what it expects was decided by the plan (the facts' device
//! nodes, config's models), and is kept beside the state for `eas verify`.

use crate::error::Failure;
use crate::facts::Facts;
use crate::plan::PhaseId;
use crate::state::StateDir;
use crate::{config, verify};

use crate::pipeline::phase::Cx;
use crate::pipeline::runner::{Phase, Runner};
use crate::verify::recorded::{EXPECTED_FILE, Expected};

/// It reads the cluster preflight reached (`cx.services.cluster()`).
pub struct Verify<'a> {
    pub sd: &'a StateDir,
    pub facts: &'a Facts,
    pub decision: &'a config::Decision,
}

impl Phase for Verify<'_> {
    const ID: PhaseId = PhaseId::Verify;
    const STOPS_ITSELF: bool = true;
    type Planned = ();
    type Done = Vec<String>;

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner) -> Result<Vec<String>, Failure> {
        let expected = Expected {
            device_nodes: verify::devices::recorded_nodes(self.facts),
            models: crate::pipeline::report::expected_models(self.decision),
            fit: crate::pipeline::report::model_decision(self.decision),
        };
        crate::state::journal::write_atomic(
            &self.sd.dir().join(EXPECTED_FILE),
            serde_json::to_string_pretty(&expected).expect("json").as_bytes(),
        )
        .map_err(|e| Failure::step(PhaseId::Record, e))?;
        let exp = expected.expect();
        let limit = r.limit(PhaseId::Verify);
        // The whole phase, devices included, within the effective timeout: verify ends itself at
        // that deadline and says what it waited for; the runner's window is the backstop.
        let t = verify::Timeouts {
            devices: limit.min(verify::Timeouts::default().devices),
            models: limit,
            whole: true,
            ..verify::Timeouts::default()
        };
        let interrupt = r.interrupt().clone();
        tokio::select! {
            v = verify::verify(cx.services.cluster()?, &exp, &t, cx.shell) => v.map_err(Failure::from),
            _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
        }
    }
}

/// The verify phase, with its lines: each passing check, or the next command after a failure.
pub async fn verify(phase: Verify<'_>, cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
    match r.act_phase(phase, (), cx).await {
        Ok(lines) => {
            for l in &lines {
                cx.shell.note(format!("  ok {l}"));
            }
            Ok(())
        }
        Err(Failure::Interrupted) => {
            if let Some(next) = crate::state::resume::next_for(r.journaled(), cx.inv) {
                cx.shell.note(format!("next: {next}"));
            }
            Err(Failure::Interrupted)
        }
        Err(f) => {
            cx.shell.note(format!("next: fix what is named above, then `{}`", cx.inv.verify()));
            Err(f)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Cluster;
    use crate::pipeline::runner::tests::{Fixture, desktop_facts, runner, state_dir};
    use crate::plan::PhaseTimeouts;

    /// Verify keeps what it expects beside the state before it waits (so `eas verify` checks the
    /// same later), and a SIGINT or SIGTERM during its wait ends it as an interruption (exit
    /// 130), not as a failed verification.
    #[tokio::test]
    async fn an_interrupted_verify_has_kept_what_it_expects_for_eas_verify() {
        let (mut r, f, (_root, sd)) = (runner(PhaseTimeouts::default()), Fixture::new(), state_dir());
        // Nothing listens on port 1: every read waits until the interruption ends it.
        let cluster =
            Cluster::new(kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap());
        f.services.found(crate::pipeline::phases::preflight::sample_target(cluster));
        let facts = desktop_facts();
        let select = crate::settings::Select { layer: crate::settings::Layer::AgentToolkit, ..Default::default() };
        let decision = config::generate(&facts, &select).unwrap();
        r.interrupt().graceful.cancel();
        let phase = Verify { sd: &sd, facts: &facts, decision: &decision };
        let e = verify(phase, &f.cx(), &mut r).await.unwrap_err();
        assert!(matches!(e, Failure::Interrupted), "{e:?}");
        let kept = std::fs::read_to_string(sd.dir().join(EXPECTED_FILE)).unwrap();
        let kept: serde_json::Value = serde_json::from_str(&kept).unwrap();
        let models = crate::pipeline::report::expected_models(&decision).expect("the decision's models");
        assert_eq!(kept["models"], serde_json::json!(models), "{kept}");
    }
}
