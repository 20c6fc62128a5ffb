//! Prepare: the edits `eas up` makes to the installer's environment after `init <layer>` and
//! before `install` (SPEC §4 step 5). Text edits that keep comments and formatting; upstream
//! YAML is never re-serialised.
//!
//! - [`crate::act::prepare::global_config::merge_global_edit`]: `global_config.edit.yaml` into
//!   `env/<env>/global_config.yaml`.
//! - [`crate::act::prepare::models::apply_models_edit`]: `models.edit.yaml` into `env/<env>/models.yaml`.

pub mod global_config;
mod lines;
pub mod models;
