//! The model catalog `init` copies into `env/<env>/models.yaml`, read from the EI tree at its
//! pinned commit (the layer manifest's `model_catalog`), without a work tree.

use std::path::Path;
use std::time::Duration;

use crate::config::catalog::{Catalog, Pinned};
use crate::config::data;
use crate::error::Failure;
use crate::pins::Pin;
use crate::trees;

/// The catalog path the layer manifest names for the EI row, if the layer has one.
pub fn catalog_path(layer: &str) -> Option<String> {
    data::layers()
        .layers
        .get(layer)?
        .iter()
        .find(|r| r.pin == "ei" && !r.model_catalog.is_empty())
        .map(|r| r.model_catalog.clone())
}

/// Reads and parses the catalog at the pinned EI commit, from the git directory holding it.
pub fn read(objects: &Path, sha: &str, pin: &Pin, layer: &str) -> Result<Option<Pinned>, Failure> {
    let Some(path) = catalog_path(layer) else { return Ok(None) };
    let repo = pin.repo.clone().unwrap_or_else(|| "ei".into());
    let at = format!("{repo}@{}", &sha[..sha.len().min(7)]);
    let spec = format!("{sha}:{path}");
    let text = trees::git(Some(objects), &["cat-file", "blob", &spec], Duration::from_secs(60)).map_err(|e| {
        Failure::Refused(vec![format!(
            "the layer manifest's model_catalog {path} cannot be read at {at} ({e}); init would have no catalog to copy"
        )])
    })?;
    let catalog = Catalog::parse(&text).map_err(|e| {
        Failure::Refused(vec![format!("the EI catalog {path} at {at} is not a model catalog eas reads: {e}")])
    })?;
    Ok(Some(Pinned { catalog, path, at }))
}

/// `--model` against the catalog, before the cluster is read. A name the catalog does not hold
/// is bad input, with its LLM entries as the hint; an entry that is not an LLM is left to the
/// decision, which refuses it. Without a catalog (the EI tree could not be had) the built-in
/// candidates decide, as the dry run's config then does.
pub fn check_model(model: &str, layer: &crate::settings::Layer, catalog: Option<&Pinned>) -> Result<(), Failure> {
    let Some(c) = catalog else {
        return crate::config::rules::selection(layer, Some(model), false).map(drop).map_err(|r| match r {
            crate::config::rules::Rejection::BadInput { cause, hint } => Failure::bad_input(cause, hint),
            crate::config::rules::Rejection::Refused(reasons) => Failure::Refused(reasons),
        });
    };
    if c.catalog.entry(model).is_some() {
        return Ok(());
    }
    Err(Failure::bad_input(
        format!("unknown model {model:?}"),
        format!("--model takes an LLM entry of the EI catalog {}: {}", c.describe(), c.catalog.llm_names().join(", ")),
    ))
}
