//! `eas doctor`: one line per check (`eas-doctor/v1` with `--output json`), exit 1 naming each
//! failure; the checks are `up::doctor`'s.

use crate::error::Failure;
use crate::output::Shell;
use crate::pipeline::doctor::{self, DoctorSettings};
use crate::settings::Global;

pub fn run(args: &DoctorSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let checks = doctor::checks(args, global, shell)?;
    let failed: Vec<String> = checks.iter().filter(|c| c.status == "fail").map(|c| c.name.clone()).collect();
    let mut names = failed.clone();
    names.dedup();
    let code = if failed.is_empty() { crate::plan::EXIT_SUCCESS } else { crate::plan::Kind::Failed.exit_code() };
    if args.output.is_json() {
        let doc = serde_json::json!({
            "schema": "eas-doctor/v1", "checks": checks, "exit_code": code, "pins_source": args.up.select.pins.label(),
        });
        shell.document(doc);
    } else {
        for c in &checks {
            let mark = match c.status {
                // Passed, with warnings only: not marked ok above a refusal it names.
                "ok" if c.detail.starts_with("warning: ") => "warn",
                "ok" => "ok  ",
                "skipped" => "skip",
                _ => "FAIL",
            };
            shell.out(format!("{mark} {}: {}", c.name, crate::text::for_people(&c.detail)));
        }
    }
    if failed.is_empty() {
        shell.note("doctor: every check passed");
        Ok(())
    } else {
        Err(Failure::step_next(
            crate::plan::Step::Doctor,
            format!("failed: {}", names.join(", ")),
            "fix the checks marked FAIL",
        ))
    }
}
