//! The one question `eas up` and `eas down` ask before their first write: `--yes`, or a `y`
//! typed on a terminal within the prompt's timeout. Anything else (a no, end of input, no answer,
//! no terminal) changes nothing.

use crate::error::Failure;
use crate::pipeline::phase::Cx;
use crate::pipeline::plan_view;
use crate::plan::Plan;
use crate::runtime::Interrupt;

/// Asks `what. Continue? [y/N]` on stderr. Without a terminal: bad input (exit 2, pass --yes).
/// Declined, end of input or no answer within [`crate::settings::timeouts::PROMPT`]: exit 1,
/// nothing changed.
pub async fn ask(what: &str, interrupt: &Interrupt) -> Result<(), Failure> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure::bad_input(format!("{what} and no terminal is attached to confirm"), "pass --yes"));
    }
    eprint!("{what}. Continue? [y/N] ");
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    });
    let limit = crate::settings::timeouts::PROMPT;
    let declined = |why: String| {
        Failure::step_next(crate::plan::Step::Confirm, format!("{why}: nothing was changed"), "answer y, or pass --yes")
    };
    let line = tokio::select! {
        r = tokio::time::timeout(limit, read) => match r {
            Ok(Ok(Ok(line))) => line,
            Ok(_) => String::new(),
            Err(_) => return Err(declined(format!("no answer within {} min", limit.as_secs() / 60))),
        },
        _ = interrupt.graceful.cancelled() => return Err(Failure::Interrupted),
    };
    if affirmative(&line) {
        Ok(())
    } else if line.is_empty() {
        eprintln!();
        Err(declined(format!("{what}: no answer (end of input)")))
    } else {
        Err(declined(format!("{what}: not confirmed")))
    }
}

/// `eas up`'s question, on a terminal without `--yes`: the plan's summary, then what it installs
/// where, each named with its source when it is not a default (`on k3d-gpu (from ./eas.yaml)`),
/// before the first act half (no lock taken, no image built, no work tree written yet).
pub async fn ask_up(cx: &Cx<'_>, plan: &Plan, context: &str, interrupt: &Interrupt) -> Result<(), Failure> {
    let view = plan_view::View { width: plan_view::terminal_width(&cx.global.env), explain: false };
    for line in plan_view::summary(plan, view, &plan_view::Ending::DryRun) {
        cx.shell.note(crate::text::escape_controls(&line));
    }
    let layer = cx.args.sources.named("layer", &cx.args.select.layer);
    ask(&format!("eas up installs {layer} on {}", cx.global.named("context", context)), interrupt).await
}

/// Whether a prompt's answer says yes (`y` or `yes`, any case).
fn affirmative(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_y_or_yes_confirms() {
        for yes in ["y\n", "Y", " yes \n", "YES"] {
            assert!(super::affirmative(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yep", "y es", "ja"] {
            assert!(!super::affirmative(no), "{no:?}");
        }
    }
}
