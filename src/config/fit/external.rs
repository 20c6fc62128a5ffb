//! An external `k3d-gpu fit` document (`--fit FILE`), which wins over eas's own answer, and the
//! disagreements between the two, each printed as a warning.

use std::path::Path;

use crate::facts::{self, Facts, FactsError, Fit, FitVerdict, KV_CACHE_ENV};

use super::{FitDoc, SOURCE_EXTERNAL};

/// Reads a fit document: an object whose `candidates` map has the facts' `fit` shape. Malformed
/// input is exit 2, with the same checks as a `fit` inside a facts document.
pub fn read(path: &Path) -> Result<Fit, super::super::ConfigError> {
    use super::super::ConfigError;
    let text = crate::bounded::read_string(path, crate::bounded::Kind::Fit).map_err(ConfigError::FitRead)?;
    parse(&text).map_err(|e| ConfigError::FitParse {
        path: path.display().to_string(),
        cause: e.to_string().trim_start_matches("facts: ").to_string(),
    })
}

pub fn parse(text: &str) -> Result<Fit, FactsError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| FactsError::Json {
        line: e.line(),
        column: e.column(),
        msg: e.to_string(),
    })?;
    let mut fit: Fit = serde_path_to_error::deserialize(value)
        .map_err(|e| FactsError::Field { field: e.path().to_string(), msg: e.inner().to_string() })?;
    fit.validate("")?;
    fit.source = Some(SOURCE_EXTERNAL.to_string());
    Ok(fit)
}

/// The fit the generator uses, and the warnings to print: `external` wins, then a `fit` the facts
/// carry, then eas's own. Every candidate where the winner and eas disagree is a warning.
pub fn resolve(f: &Facts, external: Option<&Fit>, targets: &[super::Target]) -> (Fit, Vec<String>) {
    let own = super::compute_for(f, targets);
    let winner = match (external, &f.fit) {
        (Some(x), _) => x.clone(),
        (None, Some(x)) => {
            let mut x = x.clone();
            x.source.get_or_insert_with(|| SOURCE_EXTERNAL.to_string());
            x
        }
        (None, None) => return (own.as_fit(), vec![]),
    };
    let warnings = disagreements(&own, &winner);
    (winner, warnings)
}

pub fn disagreements(own: &FitDoc, other: &Fit) -> Vec<String> {
    let who = other.source.as_deref().unwrap_or(SOURCE_EXTERNAL);
    let mut out = Vec::new();
    for (name, mine) in &own.candidates {
        let Some(theirs) = other.candidates.get(name) else {
            if mine.numbers.is_some() {
                out.push(format!("{who} has no verdict for {name}; eas says it {}", fits_word(mine.fits)));
            }
            continue;
        };
        if theirs.fits != mine.fits {
            out.push(format!(
                "{who} says {name} {}, eas says it {} ({}); {who} wins",
                fits_word(theirs.fits),
                fits_word(mine.fits),
                mine.why
            ));
            continue;
        }
        let mine_v = FitVerdict { fits: mine.fits, env: mine.env.clone(), args: mine.args.clone() };
        let (kv_a, kv_b) = (cache(theirs), cache(&mine_v));
        if kv_a != kv_b {
            out.push(format!(
                "{who} gives {name} {KV_CACHE_ENV}={}, eas {}; {who} wins",
                kv_a.as_deref().unwrap_or("(none)"),
                kv_b.as_deref().unwrap_or("(none)")
            ));
        }
        if theirs.max_model_len() != mine_v.max_model_len() {
            out.push(format!(
                "{who} gives {name} --max-model-len {}, eas {}; {who} wins",
                theirs.max_model_len().unwrap_or("(none)"),
                mine_v.max_model_len().unwrap_or("(none)")
            ));
        }
    }
    out
}

fn fits_word(fits: bool) -> &'static str {
    if fits { "fits" } else { "does not fit" }
}

/// The cache in whole GiB as vLLM reads it (`int()`), so "8" and "8.0" agree.
fn cache(v: &FitVerdict) -> Option<String> {
    v.env.get(KV_CACHE_ENV).map(|s| facts::parse_gib(s).map(|g| super::whole_gib(g).to_string()).unwrap_or(s.clone()))
}
