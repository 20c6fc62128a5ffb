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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Failure;

    #[test]
    fn prepare_errors_are_step_failures_with_a_next_step() {
        let f = Failure::from(models::ModelsError::Tab { line: 3 });
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.lines()[0], "error: prepare: models.yaml line 3: a tab outside a comment");
        assert!(f.lines()[1].starts_with("next: restore env/<env>/models.yaml"));
        let f = Failure::from(global_config::GlobalConfigError::NotAMap { found: "a list".into() });
        assert_eq!(f.exit_code(), 1);
        assert!(f.lines()[1].starts_with("next: "), "{:?}", f.lines());
    }
}
