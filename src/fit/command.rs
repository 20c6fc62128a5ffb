//! `eas fit --facts FILE [--fit FILE] [--output text|json]`: the built-in fit, printed.

use std::path::PathBuf;

use clap::Args;

use crate::error::Failure;
use crate::facts::Facts;
use crate::output::{OutputFormat, Shell};

#[derive(Args, Debug, Clone)]
pub struct FitArgs {
    /// Facts document (eas-facts/v1 JSON)
    #[arg(long, value_name = "FILE")]
    pub facts: PathBuf,
    /// An external `k3d-gpu fit` document; it wins, and every disagreement is a warning
    #[arg(long, value_name = "FILE")]
    pub fit: Option<PathBuf>,
    /// text: a table; json: the fit document (data/eas-fit.v1.schema.json)
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub fn command(args: &FitArgs, shell: &Shell) -> Result<(), Failure> {
    let facts = Facts::read(&args.facts)?;
    let external = args.fit.as_deref().map(super::external::read).transpose()?;
    let own = super::compute(&facts);
    let (doc, warnings) = match external.as_ref().or(facts.fit.as_ref()) {
        Some(x) => {
            let mut x = x.clone();
            x.source.get_or_insert_with(|| super::SOURCE_EXTERNAL.to_string());
            (super::report::merge(&own, &x), super::external::disagreements(&own, &x))
        }
        None => (own, vec![]),
    };
    for w in &warnings {
        shell.warn(w);
    }
    let text = match args.output {
        OutputFormat::Text => super::report::table(&doc),
        OutputFormat::Json => super::report::json(&doc),
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Failure::step("fit", format!("cannot write to stdout: {e}")))
}
