//! `eas fit --facts FILE [--fit FILE] [--output text|json]`: the built-in fit, printed.

use crate::config::fit;
use crate::config::fit::FitSettings;
use crate::error::Failure;
use crate::facts::Facts;
use crate::output::Shell;

pub fn run(args: &FitSettings, shell: &Shell) -> Result<(), Failure> {
    let facts = Facts::read(&args.facts)?;
    let external = args.fit.as_deref().map(fit::external::read).transpose()?;
    let own = fit::compute(&facts);
    let (doc, warnings) = match external.as_ref().or(facts.fit.as_ref()) {
        Some(x) => {
            let mut x = x.clone();
            x.source.get_or_insert_with(|| fit::SOURCE_EXTERNAL.to_string());
            (fit::report::merge(&own, &x), fit::external::disagreements(&own, &x))
        }
        None => (own, vec![]),
    };
    for w in &warnings {
        shell.warn(w);
    }
    if args.output.is_json() {
        // The warnings ride in the document too, so a script needs no stderr parsing.
        let mut value: serde_json::Value = serde_json::from_str(&fit::report::json(&doc)).expect("fit serialises");
        value["warnings"] = serde_json::json!(warnings);
        shell.document(value);
        return Ok(());
    }
    // What this table is not: the plan's model decision (issue 32's user read 57 GiB here and
    // 25Gi in the plan).
    shell.note(
        "note: this sizes eas's built-in candidates; `eas up` decides against the pinned EI catalog's \
         entries (their memory and KV cache as the catalog sets them): `eas up --dry-run` shows that pick and its fit",
    );
    // Node names come from the cluster: control characters are shown, not sent.
    let text: String = fit::report::table(&doc).lines().map(|l| crate::text::for_people(l) + "\n").collect();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Failure::step(crate::plan::Step::Fit, format!("cannot write to stdout: {e}")))
}
