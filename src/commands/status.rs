//! `eas status [--output text|json]`: what `eas up` installed and how it is now (SPEC §6). The
//! domain (`crate::verify::status`) reads; here its answer is printed, and its failure becomes the error
//! document, the lines on stderr and the exit code (1 when the cluster could not be read).

use crate::error::Failure;
use crate::output::{OutputFormat, Shell};
use crate::settings::Global;
use crate::verify::status::{self, Cluster, SCHEMA, StatusError, StatusSettings};

const NEXT: &str = "check the API server (`eas doctor`)";

/// SIGINT/SIGTERM end every wait (exit 130): status only reads.
pub fn run(args: &StatusSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let root = crate::state::run::state_root(global)?;
    let now = crate::runtime::block_on_interruptible(async {
        status::read(&root, global).await.map_err(|e| failed(args, &root, e, shell))
    })?;
    match args.output {
        OutputFormat::Json => shell.document(serde_json::to_value(&now).expect("json")),
        // Names and reasons come from the cluster: escaped before they reach a terminal.
        OutputFormat::Text => status::render(&now).lines().for_each(|l| shell.out(crate::text::for_people(l))),
    }
    Ok(())
}

fn failed(args: &StatusSettings, root: &std::path::Path, e: StatusError, shell: &Shell) -> Failure {
    match e {
        StatusError::Target(e) => e.into(),
        StatusError::StateDir(e) => e.into(),
        StatusError::Record(e) => e.into(),
        StatusError::Unread(cause) => Failure::step_next(crate::plan::Step::Status, cause, NEXT),
        StatusError::Answered { cause, next } => Failure::step_next(crate::plan::Step::Status, cause, &next),
        StatusError::Unreachable { cause, context, server, found } => {
            let failure = Failure::step_next(crate::plan::Step::Status, cause, NEXT);
            unreachable(args, root, (&context, &server), found.as_deref(), failure, shell)
        }
    }
}

/// The API server did not answer with the cluster's key: what the record found by the context
/// and server says is reported beside the error (JSON: the error document with `cluster`,
/// `installed`, `last_run` and `record_found_by`; text: on stderr).
fn unreachable(
    args: &StatusSettings,
    root: &std::path::Path,
    (context, server): (&str, &str),
    found: Option<&crate::state::records::Found>,
    failure: Failure,
    shell: &Shell,
) -> Failure {
    let mut doc = super::document::error_document(SCHEMA, &failure);
    doc["record_found_by"] = serde_json::json!(found.map(|f| f.by.clone()));
    if let Some(f) = found {
        let expected = status::expected(&f.dir).unwrap_or_else(|e| {
            shell.note(format!("warning: {e}"));
            None
        });
        let cluster = Cluster {
            context: context.to_string(),
            server: server.to_string(),
            key: f.key.clone(),
            state_dir: f.dir.display().to_string(),
        };
        let installed = f.records.install.as_ref().map(|s| status::installed(s, expected.as_ref()));
        doc["cluster"] = serde_json::to_value(&cluster).expect("json");
        doc["installed"] = serde_json::to_value(&installed).expect("json");
        doc["last_run"] = serde_json::to_value(f.records.last_run()).expect("json");
        shell.note(format!("the API server does not answer; the record was found by the {}", f.by));
        match (&installed, f.records.last_run()) {
            (Some(i), _) => shell.note(format!("recorded: installed {} ({}), {}", i.layer, i.profile, i.outcome)),
            (None, Some(l)) => shell.note(format!(
                "recorded: installed nothing; last run stopped at {} (exit {})",
                l.phase,
                l.exit_code.map_or("-".into(), |c| c.to_string())
            )),
            (None, None) => {}
        }
    } else {
        shell.note(format!(
            "the API server does not answer, and no record under {} names context {context} and server {server}",
            root.display(),
        ));
    }
    if args.output.is_json() {
        shell.document(doc);
    }
    failure
}
