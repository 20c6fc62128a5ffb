//! The document a command asked for JSON prints (SPEC §1): the one it handed, with the exit code
//! the process will exit with, or, when the command failed before it had one (bad input, an
//! unreadable cluster, a refusal), an error document in its place:
//! `{"schema", "error", "hint", "messages", "refusals", "exit_code"}`. Here, in the command layer,
//! because it is made from the [`Failure`] the command ends with.
//!
//! Deciding what to print is pure (`finish`); printing is `super::emit`.

use serde_json::{Value, json};

use crate::error::Failure;

/// The document to print for a command that was asked for JSON: the one it handed (`doc`), with
/// the exit code the process will exit with, or an error document when it handed none; either
/// way with every warning printed on stderr in `warnings` (after the document's own, once each).
pub fn finish(schema: &str, doc: Option<Value>, result: &Result<(), Failure>, printed: &[String]) -> Value {
    let code = result.as_ref().err().map_or(crate::plan::EXIT_SUCCESS, Failure::exit_code);
    let mut doc = match (doc, result) {
        (Some(d @ Value::Object(_)), _) => d,
        (_, Err(f)) => error_document(schema, f),
        // A command that succeeded without a document is a bug; say so in the document rather
        // than print nothing a script could read.
        (_, Ok(())) => json!({ "schema": schema, "error": "eas printed no document", "hint": null, "messages": [] }),
    };
    doc["exit_code"] = json!(code);
    let mut warnings: Vec<Value> = doc.get("warnings").and_then(Value::as_array).cloned().unwrap_or_default();
    for w in printed {
        if !warnings.iter().any(|x| x.as_str() == Some(w)) {
            warnings.push(json!(w));
        }
    }
    doc["warnings"] = Value::Array(warnings);
    doc
}

/// `failure` as a document of `schema`: its one-line cause, its hint, and every line it prints on
/// stderr (`REFUSE:` lines included).
pub fn error_document(schema: &str, failure: &Failure) -> Value {
    let (cause, hint) = match failure {
        Failure::BadInput { cause, hint } => (cause.clone(), hint.clone()),
        Failure::Step { step, cause, next } => (format!("{step}: {cause}"), next.clone()),
        other => (other.lines().first().cloned().unwrap_or_default(), None),
    };
    // A refusal's reasons as data (exit 3): a script need not pick `REFUSE:` lines apart.
    let refusals: Vec<String> = match failure {
        Failure::Refused(reasons) => reasons.clone(),
        // A blocked run's lines: its refusals are the `REFUSE:` ones.
        Failure::Blocked { lines, .. } => {
            lines.iter().filter_map(|l| l.strip_prefix("REFUSE: ")).map(str::to_string).collect()
        }
        _ => Vec::new(),
    };
    json!({
        "schema": schema,
        "error": cause,
        "hint": hint,
        "messages": failure.lines(),
        "refusals": refusals,
        "exit_code": failure.exit_code(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_without_a_document_prints_an_error_document_with_its_exit_code() {
        let r = Err(Failure::bad_input("cannot read pins.json", "pass --pins FILE"));
        let d = finish("eas-plan/v1", None, &r, &[]);
        assert_eq!(d["schema"], "eas-plan/v1");
        assert_eq!(d["error"], "cannot read pins.json");
        assert_eq!(d["hint"], "pass --pins FILE");
        assert_eq!(d["exit_code"], 2);
        let r = Err(Failure::Refused(vec!["no GPU".into(), "no disk".into()]));
        let d = finish("eas-fit/v1", None, &r, &[]);
        assert_eq!(d["exit_code"], 3);
        assert_eq!(d["messages"], json!(["REFUSE: no GPU", "REFUSE: no disk"]));
        assert_eq!(d["refusals"], json!(["no GPU", "no disk"]));
        let r = Err(Failure::step(crate::plan::Step::Status, "the API server does not answer"));
        assert_eq!(finish("eas-status/v1", None, &r, &[])["error"], "status: the API server does not answer");
    }

    #[test]
    fn a_handed_document_gets_the_process_exit_code() {
        let r = Err(Failure::Verify(vec!["gpu-b: plugin not Ready".into()]));
        let d = finish("eas-verify/v1", Some(json!({"schema": "eas-verify/v1", "exit_code": 0})), &r, &[]);
        assert_eq!(d["exit_code"], 5);
        assert!(d.get("error").is_none(), "a handed document is printed as it is: {d}");
        assert_eq!(finish("eas-fit/v1", Some(json!({"schema": "eas-fit/v1"})), &Ok(()), &[])["exit_code"], 0);
        // Warnings printed on stderr ride along, once each, after the document's own.
        let doc = json!({"schema": "eas-plan/v1", "warnings": ["a"]});
        let d = finish("eas-plan/v1", Some(doc), &Ok(()), &["a".into(), "b".into()]);
        assert_eq!(d["warnings"], json!(["a", "b"]));
    }
}
