//! `eas overlay --repo DIR [--facts FILE] [--apply] [--explain]`: the k3s/k3d patch decider on an
//! EAS clone (SPEC §5): each row's decision on stdout, then, with `--apply`, the patches written.

use std::io::Write;

use crate::error::Failure;
use crate::facts::Facts;
use crate::output::Shell;
use crate::overlay;
use crate::settings::OverlaySettings;

pub fn run(args: &OverlaySettings, shell: &Shell) -> Result<(), Failure> {
    let overlay = match &args.overlay {
        Some(dir) => overlay::Overlay::load_dir(dir)?,
        None => overlay::Overlay::builtin()?,
    };
    let generated = match &args.facts {
        Some(path) => Some(overlay::Generated::from_facts(&Facts::read(path)?, &overlay)?),
        None => {
            shell.warn("no --facts: skip conditions are not evaluated; every row is considered needed");
            None
        }
    };
    let plan = overlay::decide::decide_with(&overlay, &args.repo, "HEAD", generated.as_ref())?;
    let out = std::io::stdout();
    let mut out = out.lock();
    for d in &plan.decisions {
        let _ = writeln!(out, "{}", d.line(args.explain));
    }
    let _ = out.flush();
    if args.explain {
        for row in &overlay.rows {
            let cites: Vec<String> = row.why.sources.iter().map(|c| c.permalink()).collect();
            shell.note(format!("{} why: {} [{}]", row.id, row.why.fact, cites.join(" ")));
        }
    }
    if plan.stops().next().is_some() {
        let mut lines = plan.stop_lines();
        lines.push(format!("nothing was written to {}", args.repo.display()));
        return Err(Failure::OverlayStop(lines));
    }
    let applying = plan.to_apply().count();
    if !args.apply {
        let basis = if plan.with_facts { "with facts" } else { "without facts" };
        shell.note(format!(
            "{} row(s) decided at {} {basis}; {applying} to apply (run again with --apply to write them)",
            plan.decisions.len(),
            &plan.commit[..7]
        ));
        return Ok(());
    }
    match overlay::apply(&plan)? {
        overlay::Applied::Wrote(files) => shell.note(format!("applied {applying} patch(es) to {}", files.join(", "))),
        overlay::Applied::AlreadyDone => shell.note("the overlay is already applied: nothing to do"),
        overlay::Applied::Nothing => shell.note("no row needs a patch: nothing to do"),
    }
    Ok(())
}
