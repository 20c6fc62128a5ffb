//! The model catalog `init` copies into `env/<env>/models.yaml`, read from the EI tree at its
//! pinned commit (the layer manifest's `model_catalog`), without a work tree.

use std::path::Path;
use std::time::Duration;

use crate::config::catalog::{Catalog, Pinned};
use crate::config::data;
use crate::pins::Pin;
use crate::trees;

/// Why the pinned catalog could not be had, or `--model` is not one it (or the built-in
/// candidates) takes. The command edge: the first two are refusals (exit 3), as is `Refused`.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(
        "the layer manifest's model_catalog {path} cannot be read at {at} ({source}); init would have no catalog to copy"
    )]
    Unreadable {
        path: String,
        at: String,
        #[source]
        source: trees::TreeError,
    },
    #[error("the EI catalog {path} at {at} is not a model catalog eas reads: {source}")]
    NotACatalog {
        path: String,
        at: String,
        #[source]
        source: crate::config::catalog::CatalogError,
    },
    /// A `--model` that names nothing the catalog holds: bad input, with what it does hold.
    #[error("{cause}")]
    BadInput { cause: String, hint: String },
    /// The built-in candidates refuse the model.
    #[error("{}", .0.join("; "))]
    Refused(Vec<String>),
}

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
pub fn read(objects: &Path, sha: &str, pin: &Pin, layer: &str) -> Result<Option<Pinned>, CatalogError> {
    let Some(path) = catalog_path(layer) else { return Ok(None) };
    let repo = pin.repo.clone().unwrap_or_else(|| "ei".into());
    let at = format!("{repo}@{}", &sha[..sha.len().min(7)]);
    let spec = format!("{sha}:{path}");
    let text = match trees::git(Some(objects), &["cat-file", "blob", &spec], Duration::from_secs(60)) {
        Ok(t) => t,
        Err(source) => return Err(CatalogError::Unreadable { path, at, source }),
    };
    let catalog = match Catalog::parse(&text) {
        Ok(c) => c,
        Err(source) => return Err(CatalogError::NotACatalog { path, at, source }),
    };
    Ok(Some(Pinned { catalog, path, at }))
}

/// `--model` against the catalog, before the cluster is read. A name the catalog does not hold
/// is bad input, with its LLM entries as the hint; an entry that is not an LLM is left to the
/// decision, which refuses it. Without a catalog (the EI tree could not be had) the built-in
/// candidates decide, as the dry run's config then does.
pub fn check_model(model: &str, layer: &crate::settings::Layer, catalog: Option<&Pinned>) -> Result<(), CatalogError> {
    let Some(c) = catalog else {
        return crate::config::rules::selection(layer, Some(model), false).map(drop).map_err(|r| match r {
            crate::config::rules::Rejection::BadInput { cause, hint } => CatalogError::BadInput { cause, hint },
            crate::config::rules::Rejection::Refused(reasons) => CatalogError::Refused(reasons),
        });
    };
    if c.catalog.entry(model).is_some() {
        return Ok(());
    }
    Err(CatalogError::BadInput {
        cause: format!("unknown model {model:?}"),
        hint: format!(
            "--model takes an LLM entry of the EI catalog {}: {}",
            c.describe(),
            c.catalog.llm_names().join(", ")
        ),
    })
}
