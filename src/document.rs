//! One JSON document per invocation (SPEC §1, `--output json`): whatever a command did, stdout
//! carries exactly one document naming its schema and the process's `exit_code`. Which commands
//! print one, and which document each prints, is named here; the command layer
//! (`crate::commands::document`) finishes it, or makes the error document in its place.

/// The commands that print a document with `--output json`, and the document each prints.
pub const DOCUMENTS: &[(&str, &str)] = &[
    ("up", "eas-plan/v1"),
    ("facts", "eas-facts/v1"),
    ("fit", "eas-fit/v1"),
    ("status", "eas-status/v1"),
    ("verify", "eas-verify/v1"),
    ("doctor", "eas-doctor/v1"),
    ("pins show", "eas-pins/v1"),
];

/// The schema of `command`'s document (`"pins show"` for a subcommand).
pub fn schema_of(command: &str) -> Option<&'static str> {
    DOCUMENTS.iter().find(|(c, _)| *c == command).map(|(_, s)| *s)
}
