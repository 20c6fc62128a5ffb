//! preview (read only): the record, read without the lock, and one snapshot of the cluster,
//! turned into what the teardown would remove and keep, and what the real `down` would stop on
//! ([`crate::pipeline::down::plan::preview`]). A dry run prints it and ends; the real run prints
//! it before it asks.

use crate::error::Failure;
use crate::plan::DownId;
use crate::state::StateDir;
use crate::state::journal::State;
use crate::state::ledger::Snapshot;

use crate::pipeline::down::cx::{Cx, Down, DownSettings, SNAPSHOT_DEADLINE, snapshot};
use crate::pipeline::down::find::Recorded;
use crate::pipeline::down::plan;
use crate::pipeline::runner::{Phase, Runner};

pub struct Preview<'a> {
    pub found: &'a Recorded,
}

impl Phase<Down> for Preview<'_> {
    const ID: DownId = DownId::Preview;
    type Planned = ();
    /// The lines, for a dry run to print; the real run prints them here, before it asks.
    type Done = Option<Vec<String>>;

    /// The dry run, and a real run that asks (not `--yes`).
    fn should_run(&self, cx: &Cx<'_>, _r: &Runner<Down>) -> bool {
        cx.args.dry_run || !cx.args.yes
    }

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner<Down>) -> Result<Option<Vec<String>>, Failure> {
        let found = self.found;
        let mut lines = match State::load(&found.sd.state_file())? {
            None => vec![format!("nothing recorded in {}: nothing to remove", found.sd.dir().display())],
            Some(state) => {
                let current = snapshot(cx.cluster()?, cx.interrupt, SNAPSHOT_DEADLINE).await?;
                let context = cx.global.named("context", &found.context);
                let said = Said { context: &context, sd: &found.sd, blockers: &found.blockers };
                let mut lines = lines(cx.args, &said, &state, &current);
                // Every setting that is not a default, with its source, as the plan names them.
                let settings = cx.global.sources.chain(&cx.args.sources);
                lines.extend(settings.iter().map(|s| format!("setting: {}", s.line())));
                lines
            }
        };
        lines.push(r.acts(cx.args.purge));
        if cx.args.dry_run {
            return Ok(Some(lines));
        }
        lines.iter().for_each(|l| cx.shell.note(format!("  {}", crate::text::for_people(l))));
        Ok(None)
    }
}

/// The preview of a `down` of `state` on the cluster `found` names, which now holds `current`.
fn lines(args: &DownSettings, found: &Said<'_>, state: &State, current: &Snapshot) -> Vec<String> {
    let layer = args.layer_of(state);
    let mut lines =
        vec![format!("eas down on {}: layer {layer} (recorded by the run of {})", found.context, state.started)];
    for b in found.blockers {
        lines.push(format!("stop: {b} (`eas down` exits 1 before any write)"));
    }
    lines.extend(plan::preview(state, current, &layer));
    if args.purge {
        lines.push(format!("purge: the state directory {} (logs, work tree, record)", found.sd.dir().display()));
    }
    lines
}

/// What the find phase found, as the preview names it.
struct Said<'a> {
    context: &'a str,
    sd: &'a StateDir,
    blockers: &'a [String],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::down::cx::tests::settings;
    use crate::pipeline::down::plan::tests::snapshot;
    use crate::state::ledger::Ledger;

    /// The preview names the cluster and the run, lists the lock phase's blockers as stops, the
    /// layer `--layer` names over the recorded one, and the state directory `--purge` removes.
    #[test]
    fn the_preview_says_what_the_real_down_would_stop_on_remove_and_purge() {
        let (_root, sd) = crate::pipeline::runner::tests::state_dir();
        let mut state = State::sample("2026-01-01T00:00:00Z");
        state.ledger = Ledger::begin(None, &snapshot(&["default"])).complete(&snapshot(&["default", "kserve"]));
        let blockers = ["the cluster's Lease is held by run h/1/1".to_string()];
        let found = Said { context: "k3d-a", sd: &sd, blockers: &blockers };
        let mut args = settings();
        let text = lines(&args, &found, &state, &snapshot(&["default", "kserve"])).join("\n");
        assert!(
            text.starts_with("eas down on k3d-a: layer inference (recorded by the run of 2026-01-01T00:00:00Z)"),
            "{text}"
        );
        assert!(
            text.contains("stop: the cluster's Lease is held by run h/1/1 (`eas down` exits 1 before any write)"),
            "{text}"
        );
        assert!(text.contains("remove: namespace kserve: created by eas up"), "{text}");
        assert!(!text.contains("purge:"), "{text}");
        (args.purge, args.layer) = (true, Some("agent-toolkit".into()));
        let text = lines(&args, &found, &state, &snapshot(&["default"])).join("\n");
        assert!(text.contains("layer agent-toolkit") && text.contains("teardown agent-toolkit"), "{text}");
        assert!(
            text.ends_with(&format!("purge: the state directory {} (logs, work tree, record)", sd.dir().display())),
            "{text}"
        );
    }
}
