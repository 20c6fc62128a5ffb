//! `--output json` as a script relies on it (SPEC §1): every command that prints a document
//! prints exactly one on stdout, whatever happened (success, bad input, a command line clap
//! rejects, a refusal, an unreachable API server), carrying the process's `exit_code`, and every
//! one validates against the schema `eas schema` ships. Against the recorded k3d-gpu-desktop
//! cluster with the synthetic trees and no Docker Engine.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;
use support::{ClusterServer, text};

const CLUSTER: &str = "k3d-gpu-desktop";

struct Trees {
    dir: PathBuf,
    pins: PathBuf,
}

/// The synthetic trees as git repositories, and the real pins.json pointed at them.
fn trees() -> &'static Trees {
    static T: OnceLock<Trees> = OnceLock::new();
    T.get_or_init(|| {
        let dir = support::until_exit("json-documents-");
        support::trees::synthetic_trees(&dir);
        Trees { pins: dir.join("pins.json"), dir }
    })
}

/// `eas` against `server` with the state directory `state`, in the fixture's directory.
fn eas(server: &ClusterServer, state: &Path) -> Command {
    let mut c = support::eas(&support::fixture(CLUSTER));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state);
    c
}

/// `up` with the trees and the cluster's node flags.
fn up(server: &ClusterServer, state: &Path, extra: &[&str]) -> Command {
    let t = trees();
    let mut c = eas(server, state);
    c.arg("up").args(extra).arg("--pins").arg(&t.pins).args(support::facts_args(CLUSTER));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(t.dir.join("repos").join(n));
    }
    c
}

/// The one document on stdout: it parses as exactly one JSON value, names `schema`, carries the
/// process's exit code and validates against the shipped schema.
fn document(out: &Output, schema: &str) -> Value {
    let stdout = text(&out.stdout);
    let mut values = serde_json::Deserializer::from_str(&stdout).into_iter::<Value>();
    let doc = match values.next() {
        Some(Ok(v)) => v,
        other => panic!("no JSON document on stdout ({other:?}):\n{stdout}\nstderr:\n{}", text(&out.stderr)),
    };
    assert!(values.next().is_none(), "more than one document on stdout:\n{stdout}");
    assert_eq!(doc["schema"], schema, "{doc}");
    assert_eq!(doc["exit_code"].as_i64(), out.status.code().map(i64::from), "exit_code is the process's: {doc}");
    let errors = support::schema_errors(&schema.replace('/', "."), &doc);
    assert!(errors.is_empty(), "{schema}: {errors:?}\n{doc}");
    doc
}

#[test]
fn the_dry_run_plan_carries_the_model_pick_and_keyed_decisions() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let state = tempfile::tempdir().unwrap();
    let out = up(&server, state.path(), &["--dry-run", "--output", "json"]).output().unwrap();
    let doc = document(&out, "eas-plan/v1");
    assert!(doc.get("error").is_none(), "{doc}");
    let pick = &doc["model_pick"];
    assert_eq!(pick["name"], "qwen2-5-coder-7b", "{pick}");
    assert_eq!(pick["reason"], "rule: preference, EAT's fallback", "the decision line's rule: {pick}");
    assert!(pick["fit"]["kv_cache_gib"].is_u64(), "the fit figure is a number: {pick}");
    let keyed: Vec<(&str, &Value)> =
        doc["decisions"].as_array().unwrap().iter().filter_map(|d| Some((d["key"].as_str()?, &d["value"]))).collect();
    assert!(keyed.contains(&("metallb_enabled", &Value::Bool(false))), "{keyed:?}");
    assert!(keyed.iter().any(|(k, v)| *k == "global_config existing_kubernetes" && *v == "/kube/config"), "{keyed:?}");
    let model_line = doc["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["choice"] == "model: qwen2-5-coder-7b (rule: preference, EAT's fallback)");
    assert!(model_line.is_some_and(|d| d["key"].is_null()), "the model line writes no key itself");
}

#[test]
fn bad_input_and_a_rejected_command_line_print_an_error_document_exit_2() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let state = tempfile::tempdir().unwrap();
    // A pins file that does not exist: found after parsing, before any plan exists.
    let mut c = eas(&server, state.path());
    let out = c.args(["up", "--dry-run", "--output", "json", "--pins", "/nonexistent/pins.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let doc = document(&out, "eas-plan/v1");
    assert!(doc["error"].as_str().unwrap().contains("/nonexistent/pins.json"), "{doc}");
    // Clap's own rejection.
    let out = eas(&server, state.path()).args(["status", "--output", "json", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc = document(&out, "eas-status/v1");
    assert!(doc["error"].as_str().unwrap().contains("--no-such-flag"), "{doc}");
    // A fit of a file that is not a facts document.
    let bogus = state.path().join("facts.json");
    std::fs::write(&bogus, "{\"schema\": \"nope\"}").unwrap();
    let out = eas(&server, state.path()).args(["fit", "--output", "json", "--facts"]).arg(&bogus).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    document(&out, "eas-fit/v1");
}

#[test]
fn every_read_command_prints_one_valid_document() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let state = tempfile::tempdir().unwrap();
    let facts = state.path().join("facts.json");
    let mut c = eas(&server, state.path());
    let out =
        c.args(["facts", "--output", "json", "--out"]).arg(&facts).args(support::facts_args(CLUSTER)).output().unwrap();
    let doc = document(&out, "eas-facts/v1");
    assert!(doc["warnings"].is_array(), "{doc}");
    let out = eas(&server, state.path()).args(["fit", "--output", "json", "--facts"]).arg(&facts).output().unwrap();
    assert!(document(&out, "eas-fit/v1")["warnings"].is_array());
    let out = eas(&server, state.path()).args(["status", "--output", "json"]).output().unwrap();
    assert_eq!(document(&out, "eas-status/v1")["exit_code"], 0);
    let out =
        eas(&server, state.path()).args(["verify", "--output", "json", "--devices-timeout", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "nothing installed: {}", text(&out.stderr));
    document(&out, "eas-verify/v1");
    let mut c = eas(&server, state.path());
    let out = c.args(["doctor", "--output", "json", "--offline"]).args(support::facts_args(CLUSTER)).output().unwrap();
    let doc = document(&out, "eas-doctor/v1");
    // The host's disk and memory figures are numbers in bytes beside the sentence's GiB, with
    // the threshold the check passed or failed against.
    for name in ["disk", "memory"] {
        let c = doc["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("{doc}"));
        let (bytes, min) = (c["bytes"].as_u64().expect("bytes"), c["min_bytes"].as_u64().expect("min_bytes"));
        assert!(bytes > 0 && min > 0, "{c}");
        assert_eq!(c["ok"], bytes >= min, "{c}");
        let gib = format!("{} GiB ", bytes >> 30);
        assert!(c["detail"].as_str().unwrap().starts_with(&gib), "the detail says {gib}: {c}");
    }
    let out = eas(&server, state.path()).args(["pins", "show", "--output", "json"]).output().unwrap();
    document(&out, "eas-pins/v1");
}

/// A real run that stops at its blockers (no Docker Engine) records an attempt with its context
/// and server; with the API server failing, `status` finds that record by them and says so.
#[test]
fn with_the_api_down_status_finds_the_record_by_context_and_server() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let state = tempfile::tempdir().unwrap();
    let out = up(&server, state.path(), &["--yes"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "no Docker Engine: the run is blocked\n{}", text(&out.stderr));
    server.inject(None, support::Fault::Status(503, "the API server is shutting down".into()), None);
    let out = eas(&server, state.path()).args(["status", "--output", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc = document(&out, "eas-status/v1");
    assert!(doc["error"].is_string(), "{doc}");
    let by = doc["record_found_by"].as_str().unwrap_or_else(|| panic!("the record was not found: {doc}"));
    assert!(by.contains(&format!("server {}", server.url())), "{by}");
    assert!(doc["installed"].is_null(), "a blocked run is an attempt: {doc}");
    assert_eq!(doc["last_run"]["install"], false, "{doc}");
    assert!(text(&out.stderr).contains("the record was found by the context"), "{}", text(&out.stderr));
}

/// An API server nobody answers at: every command still prints its one document, with `error`
/// (or, for the dry run, the plan with its blockers) and the exit code.
#[test]
fn an_unreachable_api_server_still_gets_one_document_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, _port) = support::unreachable_kubeconfig(dir.path());
    let state = dir.path().join("state");
    let run = |args: &[&str]| {
        let mut c = support::eas(&support::fixture(CLUSTER));
        c.arg("--kubeconfig").arg(&kubeconfig).arg("--state-dir").arg(&state).args(args);
        c.output().unwrap()
    };
    for (args, schema) in [
        (vec!["status", "--output", "json"], "eas-status/v1"),
        (vec!["verify", "--output", "json", "--devices-timeout", "1"], "eas-verify/v1"),
        (vec!["facts", "--output", "json", "--request-timeout", "2"], "eas-facts/v1"),
    ] {
        let out = run(&args);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        let doc = document(&out, schema);
        assert!(doc["error"].is_string() || doc["failure"].is_array(), "{args:?}: {doc}");
    }
    let t = trees();
    let mut c = support::eas(&support::fixture(CLUSTER));
    c.arg("--kubeconfig").arg(&kubeconfig).arg("--state-dir").arg(&state);
    c.args(["up", "--dry-run", "--output", "json", "--pins"]).arg(&t.pins).args(support::facts_args(CLUSTER));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(t.dir.join("repos").join(n));
    }
    let out = c.output().unwrap();
    let doc = document(&out, "eas-plan/v1");
    assert!(doc["error"].is_string() || !doc["blockers"].as_array().unwrap().is_empty(), "{doc}");
}
