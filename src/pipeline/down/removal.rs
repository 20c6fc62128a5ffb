//! removal: what the loaded record asks of `eas down`'s removal, decided once the lock phase has
//! loaded it: the layer whose teardown runs, and how far it goes (a complete record's guarded
//! teardown, an incomplete one's refusal or forced teardown, an acknowledged one's drop), with
//! what earlier `down`s found.

use crate::error::Failure;
use crate::plan::Step;
use crate::state::journal::State;
use crate::state::ledger::{Finding, Object};

use crate::pipeline::down::cx::Cx;

/// What the loaded record asks of the removal: which layer's teardown, and how far it goes.
pub struct Removal {
    pub layer: String,
    pub how: How,
    /// What earlier `eas down`s found lost or left (said as the record is loaded).
    pub earlier: Vec<Finding>,
}

pub enum How {
    /// A complete record: the guarded teardown, the deletions, the wait and the report.
    Guarded,
    /// An incomplete record (why): refused, or with `--force-incomplete` the teardown with every
    /// guard's `--skip` and nothing deleted directly.
    Forced(String),
    /// An incomplete record already torn down, once `--acknowledge`d: dropped.
    Drop,
}

impl Removal {
    pub fn of(cx: &Cx<'_>, state: &State) -> Removal {
        let earlier = earlier_findings(cx, state);
        let how = match state.ledger.incomplete_reason() {
            Some(_) if cx.args.acknowledge && !earlier.is_empty() => How::Drop,
            Some(reason) => How::Forced(reason),
            None => How::Guarded,
        };
        let layer = cx.args.layer_of(state);
        Removal { layer, how, earlier }
    }

    /// Why the record is incomplete, when it is.
    pub fn incomplete(&self) -> Option<&str> {
        match &self.how {
            How::Forced(reason) => Some(reason),
            How::Guarded | How::Drop => None,
        }
    }
}

/// The findings of an earlier `down`, repeated (or acknowledged), before anything acts.
pub fn earlier_findings(cx: &Cx<'_>, state: &State) -> Vec<Finding> {
    let earlier = state.ledger.findings.clone();
    for f in &earlier {
        if cx.args.acknowledge {
            cx.shell.note(format!("acknowledged: {f}"));
        } else {
            cx.shell.warn(format!("{f} (found by an earlier eas down)"));
        }
    }
    earlier
}

/// An incomplete record: nothing is removed (exit 1) unless `--force-incomplete`.
pub fn refuse_incomplete(cx: &Cx<'_>, state: &State, reason: &str) -> Result<(), Failure> {
    cx.shell.warn(format!("the record is incomplete: {reason}"));
    cx.shell.note(format!(
        "  known: {} objects existed before eas up; {} were recorded as created: {}",
        state.ledger.before.objects().len(),
        state.ledger.created.objects().len(),
        list(&state.ledger.created.objects())
    ));
    if cx.args.force_incomplete {
        return Ok(());
    }
    cx.shell.note("  everything on the cluster is treated as pre-existing: nothing was removed");
    Err(Failure::step_next(
        Step::DownRun,
        "the record of what eas up created is incomplete; nothing was removed",
        "complete the record by running the same `eas up ... --yes` again (it resumes and records what the install created), or run `eas down --yes --force-incomplete`",
    ))
}

fn list(objects: &[Object]) -> String {
    if objects.is_empty() {
        return "none".into();
    }
    objects.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::down::cx::tests::{plain, settings};
    use crate::runtime::Interrupt;
    use crate::settings::Global;
    use crate::state::ledger::FindingKind;

    /// A complete record is removed guarded; an incomplete one forced (refused without
    /// `--force-incomplete`, by the teardown's `before`), and dropped only once `--acknowledge`d
    /// after an earlier `down` found something; `--layer` names the teardown's layer.
    #[test]
    fn the_loaded_record_decides_how_far_the_removal_goes() {
        let (mut args, global, shell, interrupt) = (settings(), Global::default(), plain(), Interrupt::default());
        let mut state = State::sample("2026-01-01T00:00:00Z");
        let how = |args: &crate::pipeline::down::DownSettings, state: &State| {
            let removal = Removal::of(&Cx::new(args, &global, &shell, &interrupt), state);
            let incomplete = removal.incomplete().map(str::to_string);
            let how = match &removal.how {
                How::Guarded => "guarded".to_string(),
                How::Forced(why) => format!("forced: {why}"),
                How::Drop => "drop".to_string(),
            };
            (removal.layer, how, incomplete)
        };
        assert_eq!(how(&args, &state), ("inference".into(), "guarded".into(), None));
        state.ledger.incomplete = Some("a snapshot could not be read".into());
        let forced = "forced: a snapshot could not be read".to_string();
        assert_eq!(how(&args, &state).1, forced);
        // Acknowledging drops only what an earlier `down` already tore down.
        args.acknowledge = true;
        assert_eq!(how(&args, &state).1, forced);
        state.ledger.findings.push(Finding {
            kind: FindingKind::MayBeLeft,
            object: "namespace kserve".into(),
            note: "created by eas up".into(),
            found: "2026-01-02T00:00:00Z".into(),
        });
        assert_eq!(how(&args, &state), ("inference".into(), "drop".into(), None));
        args.layer = Some("agent-toolkit".into());
        assert_eq!(how(&args, &state).0, "agent-toolkit");
    }
}
