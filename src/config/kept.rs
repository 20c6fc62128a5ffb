//! The sticky model (issue 32, item 4): after an install, `eas up` keeps the model the last
//! completed run deployed unless `--model` names another or `--repick` asks for the pick again,
//! so a node gaining memory, or a cron job's `eas up --yes`, never swaps what users get. The
//! kept model must still be an LLM entry of the catalog the installer reads and still fit (the
//! verdict the automatic pick gives each entry, less the preference's host memory, which only
//! orders the pick); when it does not, the pick is made again and its fact says why, which the
//! plan's "since the last up" section prints beside the model that changed. Pure: `config::model`
//! hands in the entry's verdict and the pick as it would be made now.

use super::decision::Choice;

/// The installed model `name`, kept: its decision line, which says when the pick would now
/// differ and names `--repick`; `Err(why)` when it cannot be kept (the caller picks again).
/// `checked`: its verdict as a candidate, `None` when it is not one of `among`; `now`: the
/// automatic pick's line as it would be made now (`NAME (rule: ...)`); `source`: its citation.
pub fn keep(
    name: &str,
    among: &str,
    checked: Option<Result<(), String>>,
    now: Option<&str>,
    (facts_line, source): (&str, String),
) -> Result<Choice, String> {
    let not_kept = |why: String| format!("the installed model {name} is not kept: {why}");
    match checked {
        None => return Err(not_kept(format!("it is no longer {among}"))),
        Some(Err(e)) => return Err(not_kept(e)),
        Some(Ok(())) => {}
    }
    let note = match now {
        Some(line) if line.split_once(" (").map_or(line, |(n, _)| n) != name => {
            format!("; the pick would now be {line}: `eas up --repick` takes it")
        }
        _ => String::new(),
    };
    Ok(Choice {
        fact: format!("{name} deployed by the last completed eas up; {facts_line}"),
        choice: format!("model: {name} (kept: the installed model{note})"),
        source,
    })
}
