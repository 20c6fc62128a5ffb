//! `eas config`: facts + pins + flags → the installer's configuration (SPEC §3).

pub mod catalog;
pub mod components;
pub mod cpu_dtype;
pub mod data;
pub mod decision;
pub mod fit;
pub mod hf;
mod kept;
pub mod model;
pub mod node_args;
pub mod proxy;
pub mod render;
pub mod rules;
pub mod version;
pub mod write;

use std::path::Path;

use crate::facts::Facts;
use crate::pins::{self, PinsError, Trees};
use crate::settings::Select;

pub use rules::Decision;

/// Why no configuration was decided; `crate::commands::edge` maps each to its exit code (2 for
/// bad input, 3 for a refusal, 1 for a write) and its fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Pins(#[from] PinsError),
    #[error("--ref {0:?} is a floating ref: only a full 40-hex commit SHA is accepted")]
    FloatingRef(String),
    /// The cluster or the selection is one eas will not install onto: each reason.
    #[error("{}", .0.join("; "))]
    Refused(Vec<String>),
    #[error("{cause}")]
    BadInput { cause: String, hint: String },
    #[error("cannot remove stale outputs in {path}: {source}")]
    Stale { path: String, source: std::io::Error },
    #[error(transparent)]
    CatalogRead(crate::bounded::ReadError),
    #[error("--catalog {path}: {msg}")]
    CatalogParse { path: String, msg: String },
    #[error(transparent)]
    FitRead(crate::bounded::ReadError),
    #[error("--fit {path}: {cause}")]
    FitParse { path: String, cause: String },
}

impl From<rules::Rejection> for ConfigError {
    fn from(r: rules::Rejection) -> Self {
        match r {
            rules::Rejection::Refused(reasons) => ConfigError::Refused(reasons),
            rules::Rejection::BadInput { cause, hint } => ConfigError::BadInput { cause, hint },
        }
    }
}

/// The trees selected by `--profile` or `--ref`: `--ref` replaces the EAS commit of the
/// default profile and must be a full SHA (anything else floats).
pub fn select_trees(sel: &Select) -> Result<Trees, ConfigError> {
    trees_in(&sel.pins.load()?, sel)
}

/// [`select_trees`] from pins already read (`sel.pins` names where they came from).
pub fn trees_in(pins: &pins::Pins, sel: &Select) -> Result<Trees, ConfigError> {
    let mut trees = select_in(pins, sel)?;
    trees.from = sel.pins.describe();
    Ok(trees)
}

fn select_in(pins: &pins::Pins, sel: &Select) -> Result<Trees, ConfigError> {
    if let Some(r) = &sel.git_ref {
        if !pins::is_full_sha(r) {
            return Err(ConfigError::FloatingRef(r.clone()));
        }
        let mut trees = pins.trees("main")?;
        trees.profile = format!("ref {}", &r[..7]);
        trees.eas.sha = Some(r.clone());
        trees.eas.locked = true;
        trees.eas.git_ref = r.clone();
        return Ok(trees);
    }
    Ok(pins.trees(sel.profile.as_deref().unwrap_or("main"))?)
}

pub fn generate(facts: &Facts, sel: &Select) -> Result<Decision, ConfigError> {
    generate_with(facts, sel, None)
}

/// Like [`generate`], deciding against a model catalog (EI's at the pinned commit, or a file).
pub fn generate_with(facts: &Facts, sel: &Select, catalog: Option<&catalog::Pinned>) -> Result<Decision, ConfigError> {
    generate_with_downloads(facts, sel, catalog, (&[], None))
}

/// Like [`generate_with`], given what Hugging Face said about each model's download
/// (`up::hf::read_all`'s answers, by `model_id`) and the model the last completed run deployed,
/// kept unless `--model` or `--repick`. Hook for `eas up`'s config phase.
pub fn generate_with_downloads(
    facts: &Facts,
    sel: &Select,
    catalog: Option<&catalog::Pinned>,
    (downloads, kept): (&[(String, hf::Access)], Option<&str>),
) -> Result<Decision, ConfigError> {
    let trees = select_trees(sel)?;
    // Fit is a decision (SPEC §3.4): an external document wins, else eas sizes the candidates.
    let external = sel.fit.as_deref().map(crate::config::fit::external::read).transpose()?;
    // The Hugging Face cache, read-only (a dry run or an earlier `eas up` fills it).
    let hf_cache = hf::cache_base(
        std::env::var_os("XDG_CACHE_HOME").map(std::path::PathBuf::from).as_deref(),
        std::env::var_os("HOME").map(std::path::PathBuf::from).as_deref(),
    );
    let targets = crate::config::fit::Target::for_catalog(catalog.map(|c| &c.catalog), hf_cache.as_deref());
    let (fit, fit_warnings) = crate::config::fit::external::resolve(facts, external.as_ref(), &targets);
    let inputs = rules::Inputs {
        facts,
        fit: Some(&fit),
        trees: &trees,
        layer: &sel.layer,
        model: sel.model.as_deref(),
        kept,
        catalog,
        hf_cache: hf_cache.as_deref(),
        downloads,
    };
    let mut d = rules::decide(&inputs)?;
    // Both layers pick their model with the fit, so both hear where the documents disagree.
    d.warnings.splice(0..0, fit_warnings);
    Ok(d)
}

pub fn clear_stale(out: &Path) -> Result<(), ConfigError> {
    write::clear(out).map_err(|source| ConfigError::Stale { path: out.display().to_string(), source })
}

/// `--catalog FILE`: a bad file is bad input (exit 2), named with its cause.
pub fn read_catalog(path: &Path) -> Result<catalog::Pinned, ConfigError> {
    let text = crate::bounded::read_string(path, crate::bounded::Kind::Catalog).map_err(ConfigError::CatalogRead)?;
    let catalog = catalog::Catalog::parse(&text)
        .map_err(|e| ConfigError::CatalogParse { path: path.display().to_string(), msg: e.to_string() })?;
    Ok(catalog::Pinned { catalog, path: path.display().to_string(), at: String::new() })
}
