//! The plan is the run (SPEC §4, blockers): on a recorded cluster with planted blockers, the dry
//! run lists every check the real run stops at, in order, and the real `eas up --yes` on the same
//! inputs exits with the first blocker's code, prints every blocker, and sends nothing but reads
//! to the cluster. Here the harness has no Docker Engine and the built-in pins name a base image
//! without a digest and artifacts without a sha256: three blockers before anything else is
//! planted.

use crate::support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::{ClusterServer, exited, text};

use support::planning::{command, trees};

/// The requests that are not reads (access reviews persist nothing: they are reads here).
fn writes(server: &ClusterServer) -> Vec<String> {
    support::writes(server)
}

/// The dry run's plan (JSON) and the real run's outcome on the same inputs.
fn both(cluster: &str, state: &Path, trees: &Path, facts_args: bool) -> (Value, Output, Vec<String>) {
    both_on(ClusterServer::start(support::fixture(cluster)), cluster, state, trees, facts_args)
}

fn both_on(
    server: ClusterServer,
    cluster: &str,
    state: &Path,
    trees: &Path,
    facts_args: bool,
) -> (Value, Output, Vec<String>) {
    let dry = command(&server, cluster, state, trees, facts_args, &["--dry-run", "--output", "json"]).output().unwrap();
    let plan: Value = serde_json::from_slice(&dry.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&dry.stderr)));
    assert_eq!(support::schema_errors("eas-plan.v1", &plan), Vec::<String>::new());
    assert_eq!(plan["exit_code"].as_i64(), dry.status.code().map(i64::from), "the plan carries its exit code");
    let real = command(&server, cluster, state, trees, facts_args, &["--yes"]).output().unwrap();
    (plan, real, writes(&server))
}

fn phases(plan: &Value) -> Vec<String> {
    plan["blockers"].as_array().unwrap().iter().map(|b| b["phase"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_real_run_stops_where_the_plan_says_with_every_blocker_and_no_write() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let (plan, real, writes) = both("k3d-gpu-desktop", state.path(), &t, true);
    assert_eq!(phases(&plan), ["preflight", "bastion", "bastion"], "{plan:#}");
    let first = plan["blockers"][0]["exit_code"].as_i64().unwrap();
    assert_eq!(real.status.code().map(i64::from), Some(first), "{}", text(&real.stderr));
    let err = text(&real.stderr);
    for b in plan["blockers"].as_array().unwrap() {
        let cause = b["cause"].as_str().unwrap();
        assert!(err.contains(&cause[..cause.len().min(60)]), "the real run prints every blocker: {cause}\n{err}");
    }
    assert!(err.contains("not pinned by digest") && err.contains("have no pinned sha256"), "{err}");
    assert_eq!(writes, Vec::<String>::new(), "no write reached the cluster");
    // The attempt is recorded beside the state, never as an install.
    let keys: Vec<_> = std::fs::read_dir(state.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(!keys[0].join("state.json").exists(), "a blocked run is not an install");
    let attempt: Value =
        serde_json::from_str(&std::fs::read_to_string(keys[0].join("attempt/attempt.json")).unwrap()).unwrap();
    assert_eq!(attempt["phase"], "preflight");
    assert!(keys[0].join("attempt/facts.json").exists() && keys[0].join("attempt/plan.json").exists());
    // And its log: eas's own lines from the first phase, then each blocker; the record names it.
    let journal: Value =
        serde_json::from_str(&std::fs::read_to_string(keys[0].join("attempt/state.json")).unwrap()).unwrap();
    let log = std::path::PathBuf::from(journal["log_path"].as_str().expect("the attempt names its log"));
    assert!(log.starts_with(keys[0].join("attempt/logs")), "{}", log.display());
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("==> preflight:") || said.contains("==> facts:"), "the phase lines: {said}");
    assert!(said.contains("blocker (preflight): ") && said.contains("have no pinned sha256"), "{said}");
}

#[test]
fn a_refusal_and_an_unreadable_lock_join_the_list_in_the_order_the_run_meets_them() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    // A cluster with EAT 1.x's agent sandbox: a refusal in config. The dry run exits 3; the real
    // run still stops at its first blocker.
    let (plan, real, writes) = both("eat1", state.path(), &t, true);
    let p = phases(&plan);
    assert_eq!(&p[..3], ["preflight", "bastion", "bastion"], "{plan:#}");
    assert!(p[3..].iter().all(|x| x == "config"), "{p:?}");
    let refusals: Vec<&Value> = plan["blockers"].as_array().unwrap().iter().filter(|b| b["exit_code"] == 3).collect();
    assert!(!refusals.is_empty(), "{plan:#}");
    assert_eq!(plan["exit_code"], 3, "a refusal among the blockers: the dry run exits 3");
    assert_eq!(plan["overlay_not_decided"], "the configuration was not decided");
    assert_eq!(real.status.code(), Some(1), "the first blocker's code: {}", text(&real.stderr));
    assert!(text(&real.stderr).contains("REFUSE: "), "{}", text(&real.stderr));
    assert_eq!(writes, Vec::<String>::new());

    // An unreadable lock in the cluster's state directory comes first.
    let dir = std::fs::read_dir(state.path()).unwrap().next().unwrap().unwrap().path();
    std::fs::write(dir.join("lock"), b"not a lock").unwrap();
    let (plan, real, writes) = both("eat1", state.path(), &t, true);
    assert_eq!(phases(&plan)[0], "lock", "{plan:#}");
    assert!(plan["blockers"][0]["fix"].as_str().unwrap().contains("--break-lock"), "{plan:#}");
    assert_eq!(real.status.code(), Some(1));
    assert!(text(&real.stderr).contains("error: lock: "), "{}", text(&real.stderr));
    assert_eq!(writes, Vec::<String>::new());
    assert_eq!(std::fs::read(dir.join("lock")).unwrap(), b"not a lock", "the lock is not touched");
}

#[test]
fn fail_on_blockers_exits_with_the_first_blockers_code_and_the_plan_is_still_printed() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
    let out = command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "no refusal, no STOP: exit 0 with blockers listed");
    assert!(text(&out.stdout).contains("  blockers   3: the real run stops at the first (exit 1)"));
    let out = command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--dry-run", "--fail-on-blockers"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("  blockers   3:"), "the plan is printed whatever the exit code");
}

#[test]
fn two_timeouts_for_one_phase_are_bad_input_and_the_plan_prints_the_effective_one() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
    let both = ["--dry-run", "--install-timeout", "600", "--phase-timeout", "install=5"];
    let out = command(&server, "k3d-gpu-desktop", state.path(), &t, true, &both).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(server.requests().is_empty(), "bad input is found before the cluster is read");
    let args = ["--dry-run", "--output", "json", "--install-timeout", "600", "--phase-timeout", "prepare=7"];
    let out = command(&server, "k3d-gpu-desktop", state.path(), &t, true, &args).output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secs =
        |n: &str| plan["phases"].as_array().unwrap().iter().find(|p| p["name"] == n).unwrap()["timeout_secs"].clone();
    assert_eq!((secs("install"), secs("prepare")), (Value::from(600), Value::from(7)));
    let text_plan = text(
        &command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--dry-run", "--install-timeout", "600"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(text_plan.contains("  install     10s/10m  not run"), "{text_plan}");
}

/// The cluster's prerequisites (fixtures/prereq/cases.json) join the blockers as refusals: the
/// dry run exits 3 and lists them in their phase; the real run stops at its first blocker with no
/// write; the healthy case has none of them.
#[test]
fn each_prerequisite_that_fails_is_a_refusal_among_the_blockers() {
    let text = std::fs::read_to_string(support::root().join("fixtures/prereq/cases.json")).unwrap();
    let cases: Value = serde_json::from_str(&text).unwrap();
    let t = trees();
    for case in cases["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let cluster = case["cluster"].as_str().unwrap();
        let deny = case["deny_access"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect();
        let server = ClusterServer::start_with(
            support::fixture(cluster),
            support::Options { deny_access: deny, ..support::Options::default() },
        );
        for p in case["patches"].as_array().unwrap() {
            let key = support::ObjectKey::of(
                p["group_version"].as_str().unwrap(),
                p["resource"].as_str().unwrap(),
                "",
                p["name"].as_str().unwrap(),
            );
            server.update(&key, p["merge"].clone());
        }
        let state = tempfile::tempdir().unwrap();
        let (plan, real, writes) = both_on(server, cluster, state.path(), &t, true);
        let refusals: Vec<&Value> = plan["blockers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["exit_code"] == 3 && (b["phase"] == "facts" || b["phase"] == "config"))
            .collect();
        if name == "healthy" {
            assert!(refusals.is_empty(), "{name}: {plan:#}");
            assert_eq!(plan["exit_code"], 0, "{name}");
        } else {
            assert!(!refusals.is_empty(), "{name}: a refusal among the blockers: {plan:#}");
            assert_eq!(plan["exit_code"], 3, "{name}");
        }
        let first = plan["blockers"][0]["exit_code"].as_i64().unwrap();
        assert_eq!(real.status.code().map(i64::from), Some(first), "{name}: {}", support::text(&real.stderr));
        assert_eq!(writes, Vec::<String>::new(), "{name}");
    }
}

/// Whether the install can download the model's weights is known in the plan: a `--model` that
/// Hugging Face itself refuses (403 with `X-Error-Code: GatedRepo`, from a local stand-in; or 401
/// `RepoNotFound` for a token it rejects) is a refusal among the blockers (exit 3) naming the
/// license or the token; the same refusal without Hugging
/// Face's header (a proxy answering in its place) is only a warning.
#[test]
fn a_gated_model_is_a_blocker_and_a_proxys_refusal_only_a_warning() {
    let t = trees();
    let id = "Qwen/Qwen2.5-Coder-7B-Instruct";
    let bad = Some(support::hf::REJECTED_TOKEN);
    let cases = [
        (vec![id], vec![], None, Some("accept the model's license")),
        (vec![], vec![], bad, Some("HF_TOKEN was rejected")),
        (vec![], vec![id], None, None),
    ];
    for (gated, proxied, token, refused) in cases {
        let hf = support::hf::HfStandIn::start(&gated, &proxied);
        let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
        let ca = hf.ca_file(dir.path());
        let mut c = support::eas(&support::fixture("k3d-gpu-desktop"));
        c.env("HF_ENDPOINT", hf.endpoint()).arg("--ca-bundle").arg(&ca);
        match token {
            Some(t) => c.env("HF_TOKEN", t),
            None => c.env_remove("HF_TOKEN"),
        };
        c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state.path()).arg("up");
        c.arg("--pins").arg(t.join("pins.json")).args(support::facts_args("k3d-gpu-desktop"));
        for n in ["eas", "ei", "eat"] {
            c.arg(format!("--{n}-repo")).arg(t.join("repos").join(n));
        }
        let out = c.args(["--dry-run", "--output", "json", "--model", "qwen2-5-coder-7b"]).output().unwrap();
        let plan: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", support::text(&out.stderr)));
        let config: Vec<&Value> =
            plan["blockers"].as_array().unwrap().iter().filter(|b| b["phase"] == "config").collect();
        if let Some(fix) = refused {
            assert_eq!(out.status.code(), Some(3), "{plan:#}");
            assert!(
                config.iter().any(|b| b["exit_code"] == 3
                    && b["cause"].as_str().unwrap().contains(id)
                    && b["cause"].as_str().unwrap().contains(fix)),
                "{fix}: {plan:#}"
            );
            assert!(!support::text(&out.stderr).contains(support::hf::REJECTED_TOKEN), "the token is never printed");
        } else {
            assert!(config.is_empty(), "a proxy's refusal is no blocker: {plan:#}");
            assert_eq!(out.status.code(), Some(0), "{plan:#}");
            let warned =
                plan["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("not checked"));
            assert!(warned, "{plan:#}");
        }
    }
}

/// `eas up --dry-run --output json ARGS` on the recorded desktop with the synthetic trees, asking
/// `hf` (its CA trusted) and caching under `cache`; the output and the plan.
fn dry_run_asking(hf: &support::hf::HfStandIn, cache: &Path, args: &[&str]) -> (Output, Value) {
    let t = trees();
    let state = tempfile::tempdir().unwrap();
    let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
    let ca = hf.ca_file(cache);
    let mut c = support::eas(&support::fixture("k3d-gpu-desktop"));
    c.env("HF_ENDPOINT", hf.endpoint()).env("XDG_CACHE_HOME", cache.join("cache")).arg("--ca-bundle").arg(&ca);
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state.path()).arg("up");
    c.arg("--pins").arg(t.join("pins.json")).args(support::facts_args("k3d-gpu-desktop"));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(t.join("repos").join(n));
    }
    let out = c.args(["--dry-run", "--output", "json"]).args(args).output().unwrap();
    let plan: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", support::text(&out.stderr)));
    (out, plan)
}

/// `--offline` reads nothing from Hugging Face: a model the stand-in would refuse as gated is
/// no blocker (its download is not checked, a warning says so), and the pick's figures come from
/// data/models.json, which the decision names.
#[test]
fn offline_the_figures_come_from_data_models_json_and_nothing_is_asked() {
    let id = "Qwen/Qwen2.5-Coder-7B-Instruct";
    let hf = support::hf::HfStandIn::start(&[id], &[]);
    let dir = tempfile::tempdir().unwrap();
    let (_, plan) = dry_run_asking(&hf, dir.path(), &["--offline", "--model", "qwen2-5-coder-7b"]);
    let config: Vec<&Value> = plan["blockers"].as_array().unwrap().iter().filter(|b| b["phase"] == "config").collect();
    assert!(config.is_empty(), "nothing was asked, so nothing was refused: {plan:#}");
    let text = plan.to_string();
    assert!(
        text.contains(&format!("{id}'s figures: data/models.json")),
        "the decision names its figures' source: {plan:#}"
    );
    assert!(!dir.path().join("cache/eas/hf").exists(), "nothing was read into the cache");
    let warned = plan["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().starts_with("--offline: "));
    assert!(warned, "the download is not checked, and the plan says so: {plan:#}");
}

/// A config.json in the shape of Qwen2.5-Coder-7B-Instruct's (the figures data/models.json cites
/// for it: 28 layers, 28 Q and 4 KV heads, hidden size 3584, 32,768 tokens, bfloat16).
const QWEN_7B_CONFIG: &str = r#"{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
    "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
    "max_position_embeddings": 32768, "torch_dtype": "bfloat16", "vocab_size": 152064}"#;

/// Issue 30 item 4: a safetensors index whose `metadata.total_size` is 2^64-1 gave "weights
/// 17179869184 GiB … = 10 GiB pod memory" and a pick that fit (the sum wrapped). The answer is
/// unusable now: the figures come from data/models.json as for an unreachable Hugging Face, and
/// a warning names the field.
#[test]
fn a_total_size_of_2_64_minus_1_falls_back_to_data_models_json_with_a_warning_naming_the_field() {
    let id = "Qwen/Qwen2.5-Coder-7B-Instruct";
    let index = r#"{"metadata": {"total_size": 18446744073709551615}, "weight_map": {}}"#;
    let files = [
        (format!("{id}/config.json"), QWEN_7B_CONFIG.to_string()),
        (format!("{id}/model.safetensors.index.json"), index.to_string()),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let hf = support::hf::HfStandIn::serving(&[], &[], &files, std::time::Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let (out, plan) = dry_run_asking(&hf, dir.path(), &["--model", "qwen2-5-coder-7b"]);
    assert_eq!(out.status.code(), Some(0), "{plan:#}");
    let cached = dir.path().join(format!("cache/eas/hf/{id}@main"));
    assert!(cached.join("model.safetensors.index.json").exists(), "the stand-in's index was read: {plan:#}");
    let warning = plan["warnings"].as_array().unwrap().iter().filter_map(Value::as_str).find(|w| w.contains(id));
    let warning = warning.unwrap_or_else(|| panic!("no warning names the model: {plan:#}"));
    assert!(
        warning.contains("metadata.total_size 18446744073709551615") && warning.contains("data/models.json"),
        "{warning}"
    );
    let text = plan.to_string();
    assert!(text.contains(&format!("{id}'s figures: data/models.json")), "{plan:#}");
    assert!(!text.contains("17179869184 GiB"), "a wrapped sum: {plan:#}");
}

/// Issue 30 item 5: a Hugging Face answering each read in 14 s (each under its own 15 s bound)
/// made the config phase overrun its window, and the run stopped. The reads have one budget
/// inside the window now (half of what is left of it, the runner handing the phase its
/// deadline): past it the plan falls back to data/models.json as for an unreachable Hugging
/// Face, and says so. A 4 s window keeps the test short.
#[test]
fn a_hugging_face_answering_in_14_s_falls_back_within_the_config_window() {
    let id = "Qwen/Qwen2.5-Coder-7B-Instruct";
    let files = [(format!("{id}/config.json"), QWEN_7B_CONFIG.to_string())];
    let files: Vec<(&str, &str)> = files.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let hf = support::hf::HfStandIn::serving(&[], &[], &files, std::time::Duration::from_secs(14));
    let dir = tempfile::tempdir().unwrap();
    let args = ["--model", "qwen2-5-coder-7b", "--phase-timeout", "config=4"];
    let (out, plan) = dry_run_asking(&hf, dir.path(), &args);
    let err = support::text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}\n{plan:#}");
    let config = plan["phases"].as_array().unwrap().iter().find(|p| p["name"] == "config").unwrap();
    assert_eq!(config["plan_timeout_secs"], 4, "{config}");
    let late = plan["blockers"].as_array().unwrap().iter().any(|b| b["phase"] == "config");
    assert!(!late, "the config phase stayed within its window: {plan:#}");
    let warned = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .any(|w| w.contains(id) && w.contains("config phase's budget") && w.contains("data/models.json"));
    assert!(warned, "{plan:#}");
    assert!(err.contains("warning: Hugging Face did not answer within 2 s, the config phase's budget"), "{err}");
    assert!(plan.to_string().contains(&format!("{id}'s figures: data/models.json")), "{plan:#}");
}

/// A plan half past its window: `--phase-timeout facts=1` shortens the facts phase whole, and a
/// node list that never answers ends the run there, exit 1 naming the phase; the plan of the same
/// flag prints the value.
#[test]
fn the_facts_phase_past_its_effective_timeout_exits_1_naming_it() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
    let plan = command(
        &server,
        "k3d-gpu-desktop",
        state.path(),
        &t,
        true,
        &["--dry-run", "--output", "json", "--phase-timeout", "facts=1"],
    )
    .output()
    .unwrap();
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let facts = plan["phases"].as_array().unwrap().iter().find(|p| p["name"] == "facts").unwrap().clone();
    assert_eq!((facts["timeout_secs"].clone(), facts["plan_timeout_secs"].clone()), (Value::from(1), Value::from(1)));
    server.inject(Some("/api/v1/nodes"), support::Fault::Slow(std::time::Duration::from_secs(600)), None);
    let out = command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--dry-run", "--phase-timeout", "facts=1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", support::text(&out.stderr));
    assert!(
        support::text(&out.stderr).contains("phase facts did not finish within its timeout of 1 s"),
        "{}",
        support::text(&out.stderr)
    );
}

/// One run per cluster, whatever the state directory or host: a Lease `kube-system/eas-run-lock`
/// renewed just now by a run on another host is a blocker of the lock phase, first in the list;
/// one not renewed for longer than its duration is stale, named, and `--break-lock` is its fix.
#[test]
fn the_clusters_lease_held_by_another_run_is_the_first_blocker() {
    let t = trees();
    let lease = |renewed: &str| {
        serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "eas-run-lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": "other-host/4242/4242-99", "leaseDurationSeconds": 60, "renewTime": renewed}})
    };
    let now = chrono::Utc::now();
    let fresh = now.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let old = (now - chrono::Duration::minutes(10)).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    for (renewed, live) in [(fresh, true), (old, false)] {
        let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
        server.insert(lease(&renewed));
        let state = tempfile::tempdir().unwrap();
        let (plan, real, writes) = both_on(server, "k3d-gpu-desktop", state.path(), &t, true);
        let first = &plan["blockers"][0];
        assert_eq!(first["phase"], "lock", "{plan:#}");
        let cause = first["cause"].as_str().unwrap();
        assert!(cause.contains("kube-system/eas-run-lock") && cause.contains("other-host/4242"), "{cause}");
        if live {
            assert!(cause.contains("another eas run holds"), "{cause}");
        } else {
            assert!(cause.contains("is stale"), "{cause}");
            assert!(first["fix"].as_str().unwrap().contains("--break-lock"), "{plan:#}");
        }
        assert_eq!(real.status.code(), Some(1), "{}", support::text(&real.stderr));
        assert!(support::text(&real.stderr).contains("eas-run-lock"), "{}", support::text(&real.stderr));
        assert_eq!(writes, Vec::<String>::new(), "the Lease is read, never written, before the acts");
    }
}

/// A Lease whose holder is this host and whose process is alive (this test, its pid and start
/// time) is live whatever its age (issue 30 item 2): not renewed for 10 minutes, its blocker
/// says its renewals are failing, never that its run is gone, and `--break-lock` does not take
/// it: the real run exits 1 with no write and the Lease as it was.
#[test]
fn a_live_holder_of_this_host_with_failing_renewals_is_reported_live() {
    let t = trees();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let me = std::process::id();
    let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
    // Field 22 (starttime), counted after the command name's closing parenthesis.
    let start = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(19).unwrap().to_string();
    let holder = format!("{host}/{me}/{me}-{start}");
    let old = (chrono::Utc::now() - chrono::Duration::minutes(10)).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
    server.insert(serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "eas-run-lock", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "renewTime": old}}));
    let state = tempfile::tempdir().unwrap();
    let dry =
        command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--dry-run", "--output", "json", "--break-lock"])
            .output()
            .unwrap();
    let plan: Value = serde_json::from_slice(&dry.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&dry.stderr)));
    let lock = plan["blockers"].as_array().unwrap().iter().find(|b| b["phase"] == "lock").expect("a lock blocker");
    let cause = lock["cause"].as_str().unwrap();
    assert!(cause.contains(&holder) && cause.contains(&format!("alive on this host (pid {me})")), "{cause}");
    assert!(cause.contains("its renewals are failing") && !cause.contains("gone"), "{cause}");
    let real =
        command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--yes", "--break-lock"]).output().unwrap();
    assert_eq!(real.status.code(), Some(1), "{}", text(&real.stderr));
    assert!(text(&real.stderr).contains("its renewals are failing"), "{}", text(&real.stderr));
    assert_eq!(writes(&server), Vec::<String>::new(), "a live holder's Lease is never taken over");
}

/// What the plan could not find out is said as unknown, never as nothing: with `--offline`
/// Hugging Face is not asked whether the weights download, and the summary says so; asked, the
/// plan has nothing unknown.
#[test]
fn an_offline_plan_says_the_download_was_not_checked() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture("k3d-gpu-desktop"));
    let unknown = |extra: &[&str]| {
        let args = [&["--dry-run", "--output", "json"], extra].concat();
        let out = command(&server, "k3d-gpu-desktop", state.path(), &t, true, &args).output().unwrap();
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        plan["unknown"].as_array().unwrap().clone()
    };
    let offline = unknown(&["--offline"]);
    assert_eq!(offline.len(), 1, "{offline:?}");
    assert_eq!(offline[0]["phase"], "config");
    assert!(offline[0]["reason"].as_str().unwrap().contains("not asked (--offline)"), "{offline:?}");
    assert_eq!(unknown(&[]), Vec::<Value>::new());
    let text = text(
        &command(&server, "k3d-gpu-desktop", state.path(), &t, true, &["--dry-run", "--offline"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(text.contains("unknown    config: whether Hugging Face lets the model's weights be downloaded"), "{text}");
}

/// A server below the floor (Kubernetes 1.30: EAS's ValidatingAdmissionPolicy) is a refusal in
/// the plan and in the run, naming the floor and its source; a server within it is not.
#[test]
fn a_server_below_the_kubernetes_floor_is_refused_naming_the_floor_and_its_source() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let options = support::Options { git_version: Some("v1.24.17+k3s1".into()), ..support::Options::default() };
    let server = ClusterServer::start_with(support::fixture("k3d-gpu-desktop"), options);
    let (plan, real, writes) = both_on(server, "k3d-gpu-desktop", state.path(), &t, true);
    assert_eq!(plan["exit_code"], 3, "{plan:#}");
    let floor: Vec<&Value> = plan["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b.to_string().contains("below the floor v1.30"))
        .collect();
    assert_eq!(floor.len(), 1, "{plan:#}");
    assert_eq!(floor[0]["exit_code"], 3);
    let stderr = text(&real.stderr);
    let line = stderr.lines().find(|l| l.contains("below the floor")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.starts_with("REFUSE: Kubernetes v1.24.17+k3s1 is below the floor v1.30"), "{line}");
    assert!(
        line.contains("ValidatingAdmissionPolicy")
            && line.contains("intel/enterprise-ai-solutions@cc887cb roles/envoy_gateway/templates/route-hostname-admission-policy.yaml.j2:13-14"),
        "the floor's source: {line}"
    );
    assert_eq!(writes, Vec::<String>::new());
}

/// Issue 32: a refused dry run (EAT 1.x on the eat1 recording: exit 3) with `--out` writes the
/// plan to attach to a ticket, `plan.json` and the printed text as `plan.txt`, blockers included,
/// and none of the installer's files, and says what it wrote. That saved plan is never applied:
/// `eas up --plan DIR` refuses it (exit 3) without a write; a selection flag beside `--plan`, or
/// a directory without a plan, is bad input (exit 2).
#[test]
fn a_refused_dry_run_with_out_writes_its_plan_and_says_so_and_that_plan_is_never_applied() {
    let (state, t, dir) = (tempfile::tempdir().unwrap(), trees(), tempfile::tempdir().unwrap());
    let server = ClusterServer::start(support::fixture("eat1"));
    let out = dir.path().join("reviewed");
    let dry = command(&server, "eat1", state.path(), &t, true, &["--dry-run", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let err = exited(&dry, 3);
    assert!(
        err.contains(&format!("wrote plan.json, plan.txt to {} (the plan is refused", out.display())),
        "eas says what it wrote: {err}"
    );
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["plan.json", "plan.txt"], "no installer file for a refused plan");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).unwrap()).unwrap();
    assert_eq!(support::schema_errors("eas-plan.v1", &plan), Vec::<String>::new());
    assert_eq!(plan["exit_code"], 3);
    let refusal = plan["blockers"].as_array().unwrap().iter().find(|b| b["exit_code"] == 3).expect("a refusal");
    let printed = std::fs::read_to_string(out.join("plan.txt")).unwrap();
    assert_eq!(printed, text(&dry.stdout), "plan.txt is the plan as printed");
    let cause = refusal["cause"].as_str().unwrap();
    assert!(printed.contains(&cause[..cause.len().min(50)]), "the blockers are in the text: {printed}");
    assert_eq!(plan["selection"]["layer"], "agent-toolkit", "{}", plan["selection"]);
    assert_eq!(plan["selection"]["pins"], t.join("pins.json").display().to_string());

    // `--plan` takes the selection from the saved plan: the node flags and mirrors stay.
    let apply = |extra: &[&str]| {
        let mut c = support::eas(&support::fixture("eat1"));
        c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state.path()).arg("up");
        c.args(support::facts_args("eat1")).arg("--plan").arg(&out).args(extra);
        c.output().unwrap()
    };
    let before = server.requests().len();
    let refused = apply(&["--yes"]);
    let err = exited(&refused, 3);
    let file = out.join("plan.json");
    assert!(
        err.contains(&format!("REFUSE: the saved plan {} lists blockers", file.display())) && err.contains(cause),
        "{err}"
    );
    assert_eq!(server.requests().len(), before, "refused before the cluster is read");
    let flags =
        [&["--layer", "inference"][..], &["--model", "qwen2-5-coder-7b"], &["--repick"], &["--pins", "pins.json"]];
    for flag in flags {
        let bad = apply(&[&["--yes"], flag].concat());
        let err = text(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{flag:?}: {err}");
        assert!(err.contains("'--plan <DIR>' cannot be used with") && err.contains(flag[0]), "{flag:?}: {err}");
    }
    std::fs::remove_file(&file).unwrap();
    let none = apply(&["--yes"]);
    let err = exited(&none, 2);
    assert!(err.contains(&file.display().to_string()) && err.contains("eas up --dry-run --out DIR"), "{err}");
    assert_eq!(server.requests().len(), before, "bad input is found before the cluster is read");
}

/// Issue 32 item 5: the installer's preflight GETs https://google.com on every install and
/// aborts without an answer it accepts (data/egress.json's row, cited there). Asked through the
/// tests' loopback stand-in the egress check passes and warns of nothing; with google.com on a
/// closed port it is a blocker of kind failed (exit 1, as the real run would fail) and a doctor
/// FAIL line, never `ok egress:`; `--offline` asks nothing and the plan says it was not checked.
#[test]
fn a_host_the_installer_aborts_without_is_a_blocker_when_it_does_not_answer() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let closed = format!("google.com=https://127.0.0.1:{closed}/");
    let plan = |egress: Option<&str>, flags: &[&str]| -> Value {
        let mut c =
            command(&server, cluster, state.path(), &t, true, &[&["--dry-run", "--output", "json"], flags].concat());
        if let Some(urls) = egress {
            c.env("EAS_EGRESS_URLS", urls);
        }
        let out = c.output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
    };
    let egress_line = |plan: &Value| {
        let d = plan["decisions"].as_array().unwrap().iter().find(|d| d["source"] == "data/egress.json").cloned();
        d.unwrap()["choice"].as_str().unwrap().to_string()
    };
    let on_google = |plan: &Value| -> Vec<Value> {
        let b = plan["blockers"].as_array().unwrap();
        b.iter().filter(|b| b["cause"].as_str().unwrap().contains("google.com")).cloned().collect()
    };

    let answered = plan(None, &[]);
    assert!(
        egress_line(&answered).starts_with("google.com, ghcr.io, registry.k8s.io, docker.io answered"),
        "{answered:#}"
    );
    assert!(!answered["warnings"].to_string().contains("does not answer"), "{}", answered["warnings"]);
    assert_eq!(on_google(&answered), Vec::<Value>::new());

    let refused = plan(Some(&closed), &[]);
    let blockers = on_google(&refused);
    assert_eq!(blockers.len(), 1, "{refused:#}");
    assert_eq!(blockers[0]["phase"], "preflight");
    assert_eq!(blockers[0]["exit_code"], 1, "the real run would fail, not refuse");
    let cause = blockers[0]["cause"].as_str().unwrap();
    assert!(cause.starts_with("google.com does not answer from this host directly: "), "{cause}");
    assert!(cause.contains("aborts without an answer"), "{cause}");

    let mut doctor = support::eas(&support::fixture(cluster));
    doctor.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state.path()).arg("doctor");
    doctor.arg("--pins").arg(t.join("pins.json")).args(support::facts_args(cluster));
    for n in ["eas", "ei", "eat"] {
        doctor.arg(format!("--{n}-repo")).arg(t.join("repos").join(n));
    }
    let out = doctor.env("EAS_EGRESS_URLS", &closed).output().unwrap();
    let stdout = text(&out.stdout);
    let line = stdout.lines().find(|l| l.contains(" egress: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.starts_with("FAIL egress: google.com does not answer"), "{stdout}");
    assert_ne!(out.status.code(), Some(0), "{stdout}");

    let offline = plan(Some(&closed), &["--offline"]);
    assert!(egress_line(&offline).starts_with("not checked (--offline)"), "{offline:#}");
    assert_eq!(on_google(&offline), Vec::<Value>::new());
}
