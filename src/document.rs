//! One JSON document per invocation (SPEC §1, `--output json`): whatever a command did, stdout
//! carries exactly one document naming its schema and the process's `exit_code`. A command
//! hands its document to the shell; the command layer prints it here, or, when the command failed
//! before it had one (bad input, an unreadable cluster, a refusal), an error document in its place:
//! `{"schema", "error", "hint", "messages", "refusals", "exit_code"}`.
//!
//! Deciding what to print is pure (`finish`, `schema_for_argv`); printing is `emit`.

use serde_json::{Value, json};

use crate::error::Failure;

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

/// The document to print for a command that was asked for JSON: the one it handed (`doc`), with
/// the exit code the process will exit with, or an error document when it handed none; either
/// way with every warning printed on stderr in `warnings` (after the document's own, once each).
pub fn finish(schema: &str, doc: Option<Value>, result: &Result<(), Failure>, printed: &[String]) -> Value {
    let code = result.as_ref().err().map_or(0, Failure::exit_code);
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

/// Prints the document of a command asked for JSON, once.
pub fn emit(schema: &str, doc: Option<Value>, result: &Result<(), Failure>, printed: &[String]) {
    let doc = finish(schema, doc, result, printed);
    println!("{}", crate::text::json_safe(serde_json::to_string_pretty(&doc).expect("a JSON value serialises")));
}

/// For a command line clap rejected: the schema of the document it asked for with
/// `--output json` (`--output=json` too), if it names a command that prints one. The command is
/// the first word that names one; `pins` needs `show` after it.
pub fn schema_for_argv(args: &[String]) -> Option<&'static str> {
    let json =
        args.windows(2).any(|w| w[0] == "--output" && w[1] == "json") || args.iter().any(|a| a == "--output=json");
    if !json {
        return None;
    }
    let words: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    let at = words.iter().position(|w| DOCUMENTS.iter().any(|(c, _)| c.split(' ').next() == Some(*w)))?;
    match words[at] {
        "pins" if words.get(at + 1) == Some(&"show") => schema_of("pins show"),
        "pins" => None,
        w => schema_of(w),
    }
}

/// Clap's rendered error as one line: its text up to the usage, without the `error:` prefix
/// (a required flag it names sits on the next line).
pub fn clap_cause(rendered: &str) -> String {
    let lines: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let text = lines.join(" ");
    text.strip_prefix("error: ").unwrap_or(&text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_rejected_command_line_asking_for_json_names_its_document() {
        let cases = [
            ("eas up --dry-run --output json --bogus", Some("eas-plan/v1")),
            ("eas --context x status --output=json --nope", Some("eas-status/v1")),
            ("eas pins show --output json --x", Some("eas-pins/v1")),
            ("eas pins check --output json", None),
            ("eas up --dry-run --bogus", None),
            ("eas down --output json", None),
            ("eas --kubeconfig k verify --output json --timeout x", Some("eas-verify/v1")),
        ];
        for (line, want) in cases {
            assert_eq!(schema_for_argv(&argv(line)), want, "{line}");
        }
    }

    #[test]
    fn clap_s_error_becomes_one_line_naming_the_flag() {
        let rendered = "error: the following required arguments were not provided:\n  --dry-run\n\nUsage: eas up --dry-run\n\nFor more information, try '--help'.\n";
        assert_eq!(clap_cause(rendered), "the following required arguments were not provided: --dry-run");
    }

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
        let r = Err(Failure::step("status", "the API server does not answer"));
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
