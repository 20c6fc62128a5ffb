//! What the decision rules (`config::rules`) and the model pick (`config::model`) produce: the
//! decision and its parts. A leaf, so the two can share these types without importing each other.

use crate::settings::Layer;

use super::data::ManifestRow;

/// A YAML value as the overrides file carries it: strings quoted, booleans and lists native.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Bool(bool),
    List(Vec<String>),
}

/// One `choices.txt` line: `<fact> -> <choice> [<source>]`, the source an id in the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub fact: String,
    pub choice: String,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelEdit {
    pub name: String,
    /// Set the entry's `autodeploy: true` (EI's install deploys the pick this way).
    pub autodeploy: bool,
    /// The entry's `memory` (whole Gi), raised to what the pod needs.
    pub memory: Option<String>,
    /// The entry's `cpu`, lowered to what the landing node can schedule.
    pub cpu: Option<String>,
    pub env: Vec<(String, String)>,
    pub args_append: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry {
    pub row: ManifestRow,
    pub url: String,
    pub rev: String,
    pub locked: bool,
}

#[derive(Debug, Clone)]
pub struct Decision {
    /// The layer installed: never [`Layer::Refused`] (a refused layer has no decision).
    pub layer: Layer,
    pub overrides: Vec<(&'static str, Value)>,
    pub require_amx: bool,
    pub model_edits: Vec<ModelEdit>,
    pub manifest: Vec<ManifestEntry>,
    pub choices: Vec<Choice>,
    pub warnings: Vec<String>,
    /// The catalog's `network.no_proxy` (`models.edit.yaml`), with a proxy only (`config::proxy`).
    pub network_no_proxy: Option<String>,
}
