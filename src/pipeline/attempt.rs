//! The attempt: a real run that ends before its install phase began (blocked by its plan, or
//! failed in an act before the install) is recorded beside the state, never in place of an
//! earlier install's record: `<state>/attempt/` holds its `attempt.json` (phase, exit code,
//! cause), its facts, plan and choices, its journal `state.json`, and its log.

use crate::error::Failure;
use crate::facts::Facts;
use crate::output::Shell;
use crate::plan::PhaseId;
use crate::state::StateDir;

use crate::pipeline::phase::Cx;
use crate::pipeline::runner::Runner;
use crate::pipeline::settings::ATTEMPT;
use crate::state::run::now;

/// A real run with blockers: every one printed, the attempt recorded beside the state (never in
/// place of an earlier install's record), and the first blocker's exit code. Nothing was
/// written to the cluster.
pub fn blocked_run(
    r: &mut Runner,
    (sd, facts, files): (&StateDir, &Facts, &[(String, String)]),
    shell: &Shell,
) -> Failure {
    let kind = r.plan_doc().blockers()[0].kind;
    r.plan_run().exited(kind.exit_code());
    let lock_held = r.plan_doc().blockers().iter().any(|b| b.phase == PhaseId::Lock);
    shell.note(format!(
        "blockers: {} (the run stops before its first write; `eas up --dry-run` lists the same)",
        r.plan_doc().blockers().len()
    ));
    // A lock blocker: another run's lock (its directory is not this run's to write), or a state
    // directory that cannot take a write (read-only, not writable, full).
    if !lock_held && let Err(e) = record_attempt(r, sd, facts, files, shell) {
        shell.warn(format!("the attempt was not recorded: {e}"));
    }
    crate::error::Failure::blocked(r.plan_doc().blockers(), kind)
}

/// A plan half that failed (not a blocker: an error, or Ctrl-C): a real run keeps the attempt's
/// log (the lines printed, then the failure) and says how to run it again; the attempt ends
/// with the failure it returns.
pub fn plan_failed(f: Failure, r: &mut Runner, cx: &Cx<'_>) -> Failure {
    let real = !cx.args.dry_run;
    if let Some(dir) = r.attempt().map(std::path::Path::to_path_buf).filter(|_| real) {
        match attempt_log(r, &dir, cx.shell) {
            Ok(()) => f.lines().iter().for_each(|l| cx.shell.log_only(l)),
            Err(e) => cx.shell.warn(format!("the attempt's log was not written: {e}")),
        }
    }
    let f = r.end_attempt(f);
    if real {
        resume_line(&f, r, cx);
    }
    f
}

/// A real run interrupted before prepare: the line that runs it again (the run's own command
/// line). From prepare on, the install's end (`record::installed`) and verify say it themselves,
/// with what `eas down` would remove; one cause, one `next:`.
pub fn resume_line(f: &Failure, r: &Runner, cx: &Cx<'_>) {
    let phase = r.journaled().failed_phase().map(|e| e.phase);
    if !matches!(f, Failure::Interrupted) || phase.is_some_and(|p| p >= crate::plan::PhaseId::Prepare) {
        return;
    }
    let next = crate::state::resume::next_for(r.journaled(), cx.inv)
        .unwrap_or_else(|| crate::state::resume::run_again(cx.inv));
    cx.shell.note(format!("next: {next}"));
}

/// The attempt's log, `<attempt>/logs/up-<time>.log`: every line the run printed so far, and
/// each later one; the record names it.
pub fn attempt_log(r: &mut Runner, dir: &std::path::Path, shell: &Shell) -> std::io::Result<()> {
    crate::state::journal::create_private_dir(dir)?;
    let logs = dir.join("logs");
    crate::state::journal::create_private_dir(&logs)?;
    let log = logs.join(format!("up-{}.log", now().replace(':', "")));
    shell.log_to(&log)?;
    r.journal().logged_to(log);
    Ok(())
}

/// The attempt's record: `attempt.json` (phase, exit code, cause, end) with its facts, plan and
/// choices beside it, in `<state>/attempt/`.
fn record_attempt(
    r: &mut Runner,
    sd: &StateDir,
    facts: &Facts,
    files: &[(String, String)],
    shell: &Shell,
) -> std::io::Result<()> {
    let dir = sd.dir().join(ATTEMPT);
    // Its log: the lines the run printed, then its blockers.
    attempt_log(r, &dir, shell)?;
    let first = &r.plan_doc().blockers()[0];
    let attempt = serde_json::json!({
        "phase": first.phase, "exit_code": first.exit_code(), "cause": first.cause, "finished_at": now(),
        "blockers": r.plan_doc().blockers(),
    });
    let write = |name: &str, text: &str| crate::state::journal::write_atomic(&dir.join(name), text.as_bytes());
    for b in r.plan_doc().blockers().iter() {
        shell.log_only(&format!("blocker ({}): {}; fix: {} (exit {})", b.phase.name(), b.cause, b.fix, b.exit_code()));
    }
    write("facts.json", &serde_json::to_string_pretty(facts).expect("json"))?;
    write("plan.json", &r.plan_doc().to_json())?;
    let choices = files.iter().find(|(n, _)| n == "choices.txt").map(|(_, t)| t.as_str()).unwrap_or_default();
    write("choices.txt", choices)?;
    write("attempt.json", &serde_json::to_string_pretty(&attempt).expect("json"))?;
    let mut journal = r.journaled().clone();
    journal.exit_code = Some(first.exit_code());
    journal.finished = Some(now());
    write(crate::state::journal::FILE, &serde_json::to_string_pretty(&journal).expect("json"))
}
