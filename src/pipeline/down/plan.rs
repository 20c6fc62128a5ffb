//! `eas down`'s plan half: what the teardown would remove, what it keeps and why, and what the
//! real `down` would stop on, from the record and one read of the cluster. Pure: the record and
//! the snapshot in, lines out. `eas down --dry-run` prints these lines; the real `down` prints
//! them before it asks.

use crate::installer::command::shell_line;
use crate::state::journal::State;
use crate::state::ledger::{Snapshot, guard_teardown};

/// The preview of a `down` of `state` on a cluster that now holds `current`, for `layer`.
pub fn preview(state: &State, current: &Snapshot, layer: &str) -> Vec<String> {
    let ledger = &state.ledger;
    let mut lines = Vec::new();
    if let Some(reason) = ledger.incomplete_reason() {
        lines.push(format!(
            "stop: the record is incomplete ({reason}): `eas down` removes nothing and exits 1, unless \
             --force-incomplete (the teardown with every guard, no deletion by eas itself)"
        ));
        lines.push(format!("  recorded as created: {}", names(&ledger.created.objects())));
        return lines;
    }
    for f in &ledger.findings {
        lines.push(format!("stop: {f} (found by an earlier eas down): `eas down` exits 1 until --acknowledge"));
    }
    let plan = guard_teardown(ledger, current);
    let mut argv = crate::installer::command::teardown_argv(layer, &state.env).unwrap_or_default();
    let skip = plan.skip_components();
    if !skip.is_empty() {
        argv.extend(["--skip".to_string(), skip.join(",")]);
    }
    lines.push(format!("teardown: {} (in the recorded work tree, in the bastion)", shell_line(&argv)));
    let delete = plan.delete.objects();
    if delete.is_empty() {
        lines.push("remove: nothing the record says eas up created is still there".into());
    }
    for o in &delete {
        lines.push(format!("remove: {o}: created by eas up"));
    }
    for p in plan.protect.iter().filter(|p| current.contains(&p.object)) {
        lines.push(format!("keep: {}: existed before eas up ({}; its component is skipped)", p.object, p.threat.by));
    }
    if plan.kept_before > 0 {
        lines.push(format!("keep: {} objects that existed before eas up", plan.kept_before));
    }
    for o in &plan.unrecorded {
        lines.push(format!("keep: {o}: not created by eas up"));
    }
    for o in &plan.gone {
        lines.push(format!("gone already: {o}: created by eas up, no longer there"));
    }
    lines
}

/// What `down` still waits for to go, for its progress: the count and the first three. Pure.
pub fn still_there(still: &[crate::state::ledger::Object]) -> String {
    let first: Vec<String> = still.iter().take(3).map(|o| o.to_string()).collect();
    let more = if still.len() > 3 { ", ..." } else { "" };
    format!("{} deleted object(s) to go ({}{more})", still.len(), first.join(", "))
}

fn names(objects: &[crate::state::ledger::Object]) -> String {
    if objects.is_empty() {
        return "none".into();
    }
    objects.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::ledger::Ledger;

    #[test]
    fn the_settle_wait_names_what_is_still_there() {
        use crate::state::ledger::Object;
        let still: Vec<Object> = ["kserve", "llm-inference", "cert-manager", "istio-system"]
            .iter()
            .map(|n| Object::Namespace(n.to_string()))
            .collect();
        let line = still_there(&still);
        assert!(line.starts_with("4 deleted object(s) to go ("), "{line}");
        assert!(line.contains("kserve") && line.ends_with(", ...)") && !line.contains("istio-system"), "{line}");
        assert_eq!(still_there(&still[..1]).matches("kserve").count(), 1);
    }

    /// A cluster that holds these namespaces (and nothing else the ledger watches).
    pub(crate) fn snapshot(namespaces: &[&str]) -> Snapshot {
        Snapshot { namespaces: namespaces.iter().map(|n| n.to_string()).collect(), ..Default::default() }
    }

    fn state(before: &[&str], after: &[&str]) -> State {
        let mut s = State::sample("2026-01-01T00:00:00Z");
        s.ledger = Ledger::begin(None, &snapshot(before)).complete(&snapshot(after));
        s
    }

    #[test]
    fn lists_what_goes_and_what_stays() {
        let s = state(&["default", "kube-system"], &["default", "kube-system", "llm-inference", "gone-ns"]);
        let now = snapshot(&["default", "kube-system", "llm-inference", "user-ns"]);
        let lines = preview(&s, &now, "inference");
        let text = lines.join("\n");
        assert!(text.contains("remove: namespace llm-inference: created by eas up"), "{text}");
        assert!(!text.contains("remove: namespace kube-system"), "{text}");
        assert!(text.contains("keep: 2 objects that existed before eas up"), "{text}");
        assert!(text.contains("keep: namespace user-ns: not created by eas up"), "{text}");
        assert!(text.contains("gone already: namespace gone-ns"), "{text}");
        assert!(lines.iter().any(|l| l.starts_with("teardown: ./es_auto_installer.sh teardown inference")), "{text}");
        assert!(!text.contains("stop:"), "{text}");
    }

    #[test]
    fn an_incomplete_record_is_what_the_real_down_stops_on() {
        let mut s = state(&["default"], &["default", "llm-inference"]);
        s.ledger = s.ledger.fail("the API server did not answer");
        let text = preview(&s, &snapshot(&["default", "llm-inference"]), "inference").join("\n");
        assert!(text.starts_with("stop: the record is incomplete (the API server did not answer)"), "{text}");
        assert!(!text.contains("remove:"), "nothing is listed for removal: {text}");
    }
}
