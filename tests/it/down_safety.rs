//! `eas down` never loses data (issue 11), end to end: the real `eas` binary, a real Docker
//! Engine running the bastion, the stateful recorded cluster (tests/it/support) and the synthetic
//! trees, whose test installer's teardown honours `--skip` as the real one does. Run serialized
//! across the machine: `flock /tmp/eas-docker.lock cargo test --test it --features docker-tests down_safety::`.
//!
//! - a snapshot that fails after the install leaves the ledger incomplete, with its `before`;
//!   `up` exits 1 naming the command that completes the record, `down` stops without removing
//!   anything, and the next `up` completes the record (finding 1);
//! - `down --force-incomplete` runs the teardown with every guard's `--skip` and deletes nothing
//!   itself; `--acknowledge` then drops the record;
//! - a leftover keeps the record, and the next `down` repeats it until `--acknowledge`
//!   (finding 4); so does a loss, and the second `down` still skips the lost object's component
//!   (findings 2 and 3: nothing is restored, and nothing says so);
//! - a model server made in a pre-existing `llm-inference` is tracked and removed by eas, while
//!   the user's model server there stays (findings 5 and 6);
//! - the admission policy and binding EAS applies outside Helm, and the `nri.intel.com/*` node
//!   labels its roles add, go with `down`; a node label there before stays (issue 28 item 8);
//! - `down --purge` without a record takes the lock, and needs `--yes` or a `y` at its prompt on a
//!   terminal (finding 7);
//! - crash consistency: `eas up` is SIGKILLed at points taken from its own progress (its phase
//!   lines and the stand-in installer's tasks, or a seeded fraction of a run measured here), each
//!   checked to hit a running `eas up`; then `up --break-lock` and `down` restore the cluster
//!   exactly. CI runs 6 points; all 30 run in scripts/crash-consistency.sh.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::synthetic_install::{self, CLUSTER, MODEL, Setup, containers_of};
use support::{ClusterServer, Fault, ObjectKey, Rule, exited, text};

/// The same synthetic trees and stand-in artifacts as tests/it/up_cycle.rs (one bastion image).
fn setup() -> &'static Setup {
    synthetic_install::setup("down-safety")
}

struct Run {
    server: ClusterServer,
    state: PathBuf,
    home: PathBuf,
}

fn run() -> Run {
    run_with(support::Options::default())
}

fn run_with(options: support::Options) -> Run {
    let server = ClusterServer::start_with(support::fixture(CLUSTER), options);
    server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "eas-test"}}));
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "installer", "namespace": "eas-test"}, "data": {"mode": "ok"}}));
    let home = tempfile::Builder::new().prefix("home-").tempdir_in(&setup().dir).unwrap().keep();
    Run { server, state: home.join("state"), home }
}

impl Run {
    fn eas(&self) -> Command {
        let mut c = setup().eas(&self.home, self.server.kubeconfig(), &self.state);
        c.env_remove("HF_TOKEN");
        c
    }

    /// `eas up` with its phase lines on stderr (`--progress plain`).
    fn up_command(&self, extra: &[&str]) -> Command {
        let mut c = self.eas();
        c.args(["--progress", "plain", "up", "--yes"]).args(setup().up_args()).args(extra);
        c
    }

    fn up(&self, extra: &[&str]) -> Output {
        self.up_command(extra).output().unwrap()
    }

    fn down(&self, extra: &[&str]) -> Output {
        self.eas().args(setup().down_args()).args(extra).output().unwrap()
    }

    fn namespaces(&self) -> Vec<String> {
        self.server.names("v1", "namespaces")
    }

    fn has_ns(&self, n: &str) -> bool {
        self.namespaces().iter().any(|x| x == n)
    }

    fn state_file(&self) -> Option<Value> {
        support::state_record(&self.state, "state.json")
    }

    /// The stand-in installer's mode from now on (the `installer` ConfigMap it reads).
    fn set_mode(&self, mode: &str) {
        self.server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "installer", "namespace": "eas-test"}, "data": {"mode": mode}}));
    }
}

/// [`run`], once its `eas up` has completed.
fn installed() -> Run {
    let r = run();
    support::succeeded("eas up", r.up(&[]));
    r
}

fn model_key(name: &str) -> ObjectKey {
    ObjectKey::of("serving.kserve.io/v1alpha2", "llminferenceservices", "llm-inference", name)
}

fn names(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// `eas up` (its ledger's window 3 s) on a run whose after-install snapshot cannot be read: the
/// first list of kserve's ConfigMaps (the `before` snapshot's) is answered, every later one
/// fails. Only the ledger lists there. The fault stays until the test clears it.
fn up_with_a_failed_snapshot() -> (Run, Output) {
    let r = run();
    let rule =
        Rule { method: Some("GET".into()), path: "/api/v1/namespaces/kserve/configmaps".into(), exact: true, skip: 1 };
    r.server.inject_rule(rule, Fault::Status(500, "etcd is unhappy".into()), None);
    let up = r.up(&["--ledger-timeout", "3"]);
    (r, up)
}

#[test]
fn a_failed_snapshot_marks_the_ledger_incomplete_and_down_removes_nothing_until_up_completes_it() {
    let _engine = support::docker::engine();
    let (r, up) = up_with_a_failed_snapshot();
    let err = exited(&up, 1);
    assert!(err.contains("the install itself succeeded"), "{err}");
    let next = err.lines().find(|l| l.starts_with("next: ")).unwrap_or_else(|| panic!("a next: line: {err}"));
    assert!(next.contains(" up --yes") && next.contains("completes the record"), "names the command: {err}");
    assert!(r.server.object(&model_key(MODEL)).is_some(), "the install ran");
    let state = r.state_file().expect("state.json");
    let ledger = &state["ledger"];
    assert!(ledger["incomplete"].as_str().unwrap().contains("500"), "{ledger}");
    assert!(
        names(&ledger["before"]["namespaces"]).contains(&"node-feature-discovery".to_string()),
        "the before is kept: {ledger}"
    );

    // down on the incomplete record: nothing removed, exit 1, the record kept.
    r.server.clear_faults();
    let down = r.down(&[]);
    let err = exited(&down, 1);
    assert!(err.contains("incomplete") && err.contains("nothing was removed"), "{err}");
    for ns in ["node-feature-discovery", "kserve", "llm-inference", "cert-manager"] {
        assert!(r.has_ns(ns), "{ns} was removed: {err}");
    }
    assert!(r.state_file().is_some(), "the record is kept");

    // The command up named completes the record; then down removes what the run created.
    let again = r.up(&[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let ledger = &r.state_file().unwrap()["ledger"];
    assert!(ledger.get("incomplete").is_none() && ledger.get("pending").is_none(), "{ledger}");
    let created = names(&ledger["created"]["namespaces"]);
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(created.contains(&ns.to_string()), "{ns}: {ledger}");
    }
    let down = r.down(&[]);
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(r.has_ns("node-feature-discovery"), "{}", text(&down.stderr));
    for ns in ["kserve", "llm-inference", "cert-manager"] {
        assert!(!r.has_ns(ns), "{ns} left: {}", text(&down.stderr));
    }
}

#[test]
fn force_incomplete_runs_the_teardown_with_every_guard_and_deletes_nothing_itself() {
    let _engine = support::docker::engine();
    let (r, up) = up_with_a_failed_snapshot();
    assert_eq!(up.status.code(), Some(1), "{}", text(&up.stderr));
    r.server.clear_faults();
    let down = r.down(&["--force-incomplete"]);
    let err = exited(&down, 1);
    assert!(err.contains("--skip") && err.contains("nfd") && err.contains("llm_services"), "{err}");
    assert!(err.contains("may be left"), "{err}");
    // Every component skipped: the teardown removed nothing, and eas deleted nothing itself.
    for ns in ["node-feature-discovery", "kserve", "llm-inference", "cert-manager"] {
        assert!(r.has_ns(ns), "{ns} was removed: {err}");
    }
    assert!(r.server.object(&model_key(MODEL)).is_some());
    // eas up's own run Lease (released when the run ends) is eas's, not the cluster's.
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/eas-run-lock";
    let deletes: Vec<String> = r
        .server
        .requests()
        .iter()
        .filter(|l| l.method == "DELETE" && l.path != lease)
        .map(|l| l.path.clone())
        .collect();
    assert!(deletes.is_empty(), "{deletes:?}");
    assert!(r.state_file().is_some(), "the record is kept");
    let ack = r.down(&["--acknowledge"]);
    assert!(ack.status.success(), "{}", text(&ack.stderr));
    assert!(r.state_file().is_none());
}

#[test]
fn a_leftover_keeps_the_record_and_every_later_down_repeats_it_until_acknowledged() {
    let _engine = support::docker::engine();
    let r = installed();
    // eas's own deletion of the namespace kserve (the stand-in's teardown leaves it) fails.
    let rule = Rule { method: Some("DELETE".into()), path: "/api/v1/namespaces/kserve".into(), exact: true, skip: 0 };
    r.server.inject_rule(rule, Fault::Status(500, "stuck finalizer".into()), None);
    let first = r.down(&[]);
    let err = exited(&first, 1);
    assert!(err.contains("left: namespace kserve"), "{err}");
    assert!(r.has_ns("kserve"));
    assert_eq!(r.state_file().unwrap()["ledger"]["findings"][0]["kind"], "left", "the record keeps it");

    // The fault is gone: the second down removes kserve, yet repeats the first finding.
    r.server.clear_faults();
    let second = r.down(&[]);
    let err = exited(&second, 1);
    assert!(err.contains("namespace kserve") && err.contains("earlier eas down"), "{err}");
    assert!(err.contains("--skip nfd"), "still guarded: {err}");
    assert!(!r.has_ns("kserve") && r.has_ns("node-feature-discovery"));
    assert!(r.state_file().is_some());

    let ack = r.down(&["--acknowledge"]);
    let err = text(&ack.stderr);
    assert!(ack.status.success(), "{err}");
    assert!(err.contains("acknowledged: left: namespace kserve"), "{err}");
    assert!(r.state_file().is_none());
    let again = r.down(&[]);
    assert!(again.status.success() && text(&again.stderr).contains("nothing to remove"));
}

/// `eas down`'s phases run in windows like `eas up`'s: a DELETE the API server never answers
/// holds the delete phase, which ends at its effective timeout (exit 1 naming it), the record
/// kept and saying how that `down` ended; the preview printed that timeout, and the next `down`
/// starts over from the record and completes.
#[test]
fn a_down_phase_past_its_window_ends_naming_it_and_the_next_down_completes() {
    let _engine = support::docker::engine();
    let r = installed();
    let preview = r.down(&["--dry-run", "--phase-timeout", "delete=1"]);
    let said = text(&preview.stdout);
    assert!(preview.status.success(), "{}", text(&preview.stderr));
    assert!(said.contains("delete (1 s)") && said.contains("teardown ("), "{said}");
    // eas's own deletion of the namespace kserve (the stand-in's teardown leaves it) never ends.
    let rule = Rule { method: Some("DELETE".into()), path: "/api/v1/namespaces/kserve".into(), exact: true, skip: 0 };
    r.server.inject_rule(rule, Fault::Slow(Duration::from_secs(600)), None);
    let stalled = r.down(&["--phase-timeout", "delete=1"]);
    let err = exited(&stalled, 1);
    assert!(err.contains("phase delete of eas down did not finish within its timeout of 1 s"), "{err}");
    let kept = r.state_file().expect("the record is kept");
    assert_eq!(kept["down"]["status"], "failed", "{kept:#}");

    r.server.clear_faults();
    let again = r.down(&[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(!r.has_ns("kserve") && r.state_file().is_none());
}

#[test]
fn a_loss_keeps_the_record_and_a_second_down_still_skips_and_repeats_it() {
    let _engine = support::docker::engine();
    let r = installed();
    assert!(r.has_ns("node-feature-discovery"), "k3d-gpu-desktop runs NFD before eas up");
    // The installer's teardown deletes what it is told to skip: the pre-existing NFD namespace goes.
    r.set_mode("teardown-ignores-skip");
    let first = r.down(&[]);
    let err = exited(&first, 1);
    assert!(err.contains("--skip nfd"), "eas guarded it: {err}");
    assert!(err.contains("lost: namespace node-feature-discovery"), "{err}");
    assert!(!err.contains("restore"), "nothing is restored, so nothing claims to be: {err}");
    assert!(!r.has_ns("node-feature-discovery"));
    let findings = &r.state_file().expect("the record is kept")["ledger"]["findings"];
    let lost: Vec<&str> = findings
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "lost")
        .filter_map(|f| f["object"].as_str())
        .collect();
    assert!(lost.contains(&"namespace node-feature-discovery"), "{findings}");

    // The teardown behaves again. The second down still skips NFD (its namespace is gone, but it
    // existed before eas up), and exits 1 repeating the loss.
    r.set_mode("ok");
    let second = r.down(&[]);
    let err = exited(&second, 1);
    assert!(err.contains("--skip nfd"), "{err}");
    assert!(err.contains("lost: namespace node-feature-discovery") && err.contains("earlier eas down"), "{err}");
    assert!(r.state_file().is_some(), "the record is kept");

    let ack = r.down(&["--acknowledge"]);
    let err = text(&ack.stderr);
    assert!(ack.status.success(), "{err}");
    assert!(err.contains("acknowledged: lost: namespace node-feature-discovery"), "{err}");
    assert!(r.state_file().is_none());
}

#[test]
fn a_model_server_made_in_a_pre_existing_namespace_is_tracked_and_only_it_is_removed() {
    let _engine = support::docker::engine();
    let r = run();
    r.server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm-inference"}}));
    // A user's model server needs KServe's CRD, as on a real cluster (without it the resource is a 404).
    support::kserve::crd(&r.server, "llminferenceservices", "v1alpha2");
    r.server.insert(json!({"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
        "metadata": {"name": "users-model", "namespace": "llm-inference"},
        "spec": {"model": {"uri": "hf://user/model"}},
        "status": {"conditions": [{"type": "MainWorkloadReady", "status": "True"}]}}));
    let up = r.up(&[]);
    assert!(up.status.success(), "{}", text(&up.stderr));
    let ledger = &r.state_file().unwrap()["ledger"];
    let created: Vec<String> = ledger["created"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap(),
                o["namespace"].as_str().unwrap(),
                o["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(created.contains(&format!("LLMInferenceService llm-inference/{MODEL}")), "{ledger}");
    assert!(!created.iter().any(|c| c.contains("users-model")), "{ledger}");
    assert!(!names(&ledger["created"]["namespaces"]).contains(&"llm-inference".to_string()));

    let down = r.down(&[]);
    let err = text(&down.stderr);
    assert!(down.status.success(), "{err}");
    assert!(err.contains("llm_services"), "the llm_services teardown is skipped: {err}");
    assert!(err.contains(&format!("removed LLMInferenceService llm-inference/{MODEL}")), "{err}");
    assert!(r.server.object(&model_key(MODEL)).is_none(), "eas removed the model server it made");
    assert!(r.server.object(&model_key("users-model")).is_some(), "the user's model server stays");
    assert!(r.has_ns("llm-inference"), "the user's namespace stays");
}

fn node_key(name: &str) -> ObjectKey {
    ObjectKey::core("nodes", name)
}

fn admission_key(resource: &str) -> ObjectKey {
    ObjectKey::of("admissionregistration.k8s.io/v1", resource, "", "eg-protected-hostname-ownership")
}

/// What EAS makes with Ansible outside Helm (issue 28 item 8): the stand-in installer creates
/// envoy_gateway's ValidatingAdmissionPolicy and its binding and labels the node
/// `nri.intel.com/*` as the real roles do. Without k3d-gpu's balloons addon the plan chooses
/// `nri-balloons`, so the labelling role runs. A label that was on the node before the install
/// (k3d-gpu's own balloons') stays, and so the balloons teardown is skipped; the policy, the
/// binding and the three labels the run added are gone after `down`.
#[test]
fn down_removes_the_admission_policy_its_binding_and_the_node_labels_the_run_added_and_keeps_one_there_before() {
    let _engine = support::docker::engine();
    let r = run();
    let addon = ObjectKey::of("apps/v1", "daemonsets", "kube-system", "nri-resource-policy-balloons");
    assert!(r.server.remove(&addon).is_some(), "the desktop fixture carries k3d-gpu's balloons addon");
    let node = node_key("k3d-gpu-server-0");
    r.server.update(&node, json!({"metadata": {"labels": {"nri.intel.com/max-tp": "2"}}}));
    let up = r.up(&[]);
    let err = text(&up.stderr);
    assert!(up.status.success(), "{err}");
    assert!(r.server.object(&admission_key("validatingadmissionpolicies")).is_some(), "{err}");
    assert!(r.server.object(&admission_key("validatingadmissionpolicybindings")).is_some(), "{err}");
    let labels = r.server.object(&node).unwrap()["metadata"]["labels"].clone();
    assert_eq!(labels["nri.intel.com/balloons-enabled"], "true", "the role labelled the node: {labels}");
    assert_eq!(labels["nri.intel.com/max-tp"], "1", "the role overwrote the value: {labels}");
    let ledger = &r.state_file().unwrap()["ledger"];
    let kinds: Vec<&str> =
        ledger["created"]["cluster_objects"].as_array().unwrap().iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds, ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"], "{ledger}");
    let added: Vec<&str> =
        ledger["created"]["node_labels"].as_array().unwrap().iter().filter_map(|o| o["key"].as_str()).collect();
    assert_eq!(
        added,
        ["nri.intel.com/balloons-enabled", "nri.intel.com/numa-nodes", "nri.intel.com/physical-cpus"],
        "{ledger}"
    );

    let down = r.down(&[]);
    let err = text(&down.stderr);
    assert!(down.status.success(), "{err}");
    assert!(err.contains("nri_cpu_balloons"), "the balloons teardown is skipped: {err}");
    assert!(err.contains("removed ValidatingAdmissionPolicyBinding eg-protected-hostname-ownership"), "{err}");
    assert!(r.server.object(&admission_key("validatingadmissionpolicies")).is_none(), "{err}");
    assert!(r.server.object(&admission_key("validatingadmissionpolicybindings")).is_none(), "{err}");
    let labels = r.server.object(&node).unwrap()["metadata"]["labels"].clone();
    let nri: Vec<&String> = labels.as_object().unwrap().keys().filter(|k| k.starts_with("nri.intel.com/")).collect();
    assert_eq!(nri, ["nri.intel.com/max-tp"], "the label there before stays, the added ones go: {labels}\n{err}");
    assert!(err.contains("removed node label nri.intel.com/balloons-enabled on k3d-gpu-server-0"), "{err}");
    assert!(r.state_file().is_none(), "{err}");
}

/// The state directory of the recorded cluster (keyed by kube-system's UID).
fn cluster_dir(r: &Run) -> PathBuf {
    let key = ObjectKey::core("namespaces", "kube-system");
    let uid = r.server.object(&key).unwrap()["metadata"]["uid"].as_str().unwrap().to_string();
    r.state.join(uid)
}

#[test]
fn purge_without_a_record_takes_the_lock_and_needs_yes_or_a_y_on_a_terminal() {
    let _engine = support::docker::engine();
    // No Docker: nothing here reaches the bastion.
    let r = run();
    let dir = cluster_dir(&r);
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("logs/up-1.log"), "a log\n").unwrap();
    // A live run holds the lock: this test process.
    let me = std::process::id();
    let start = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
    let fields: Vec<&str> = start.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let holder = json!({"pid": me, "host": hostname(), "started": "now", "command": "eas up",
        "pid_start": fields[19].parse::<u64>().unwrap()});
    std::fs::write(dir.join("lock"), holder.to_string()).unwrap();

    let no_yes = r.eas().args(["down", "--purge"]).output().unwrap();
    assert_eq!(no_yes.status.code(), Some(2), "{}", text(&no_yes.stderr));
    assert!(text(&no_yes.stderr).contains("--yes"));
    assert!(dir.join("lock").exists() && dir.join("logs/up-1.log").exists());
    let held = r.eas().args(["down", "--purge", "--yes"]).output().unwrap();
    assert_eq!(held.status.code(), Some(1), "{}", text(&held.stderr));
    assert!(text(&held.stderr).contains(&me.to_string()), "the holder is named: {}", text(&held.stderr));
    assert!(dir.join("lock").exists() && dir.join("logs/up-1.log").exists(), "a live run's directory stays");
    // On a terminal too, a live lock refuses before the question, as `eas up` does (issue 30).
    let locked = on_a_terminal(&r, &["down", "--purge"], "y\n");
    let out = text(&locked.stdout);
    assert_eq!(locked.status.code(), Some(1), "{out}");
    assert!(out.contains("another eas run holds") && !out.contains("[y/N]"), "{out}");
    assert!(dir.join("lock").exists() && dir.join("logs/up-1.log").exists(), "a live run's directory stays");

    std::fs::remove_file(dir.join("lock")).unwrap();
    // On a terminal it asks; anything but y changes nothing.
    let declined = on_a_terminal(&r, &["down", "--purge"], "n\n");
    let out = text(&declined.stdout);
    assert_eq!(declined.status.code(), Some(1), "a declined prompt is exit 1: {out}");
    assert!(out.contains("removes the state directory") && out.contains("[y/N]"), "{out}");
    assert!(out.contains("not confirmed"), "{out}");
    assert!(dir.join("logs/up-1.log").exists());

    let ok = on_a_terminal(&r, &["down", "--purge"], "y\n");
    assert!(ok.status.success(), "{}", text(&ok.stdout));
    assert!(!dir.exists(), "purged once confirmed");
}

/// `eas down ARGS` on a terminal, `answer` typed at its prompt.
fn on_a_terminal(r: &Run, args: &[&str], answer: &str) -> Output {
    support::on_a_terminal(r.eas(), args, &r.home, answer)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

// Crash consistency: SIGKILL `eas up` at points taken from its own progress, then check that
// `eas up --break-lock` and `eas down` put the cluster back as it was before the first `up`.

/// The task markers (`TASK [role : name]`) the stand-in installer has written to the install
/// logs under the state directory `state` so far, in order.
fn install_tasks(state: &Path) -> Vec<String> {
    let mut tasks = Vec::new();
    for d in std::fs::read_dir(state).into_iter().flatten().flatten() {
        let mut logs: Vec<PathBuf> =
            std::fs::read_dir(d.path().join("logs")).into_iter().flatten().flatten().map(|f| f.path()).collect();
        logs.sort();
        for f in logs {
            let body = std::fs::read_to_string(f).unwrap_or_default();
            // A line still being written has no closing bracket yet: it is read on the next look.
            tasks.extend(
                body.lines().filter_map(|l| l.strip_prefix("TASK [")?.split_once(']')).map(|(t, _)| t.to_string()),
            );
        }
    }
    tasks
}

/// One thing a running `eas up` showed, when this test first saw it: a phase line on its stderr
/// (`==> bastion: reusing eas-bastion:...` is `bastion: reusing`) or a task of the stand-in
/// installer in its install log (`task: kserve : Install KServe`); `n` counts the same label.
#[derive(Clone, Debug)]
struct Seen {
    at: Duration,
    label: String,
    n: usize,
}

impl Seen {
    fn name(&self) -> String {
        if self.n > 1 { format!("{} #{}", self.label, self.n) } else { self.label.clone() }
    }
}

fn note(seen: &Mutex<Vec<Seen>>, at: Duration, label: String) {
    let mut v = seen.lock().unwrap_or_else(|e| e.into_inner());
    let n = v.iter().filter(|s| s.label == label).count() + 1;
    v.push(Seen { at, label, n });
}

/// `bastion: reusing eas-bastion:...` → `bastion: reusing`: the phase and the message's first
/// word, which the same run prints the same way on any machine.
fn phase_label(line: &str) -> String {
    let (phase, message) = line.split_once(": ").unwrap_or((line, ""));
    format!("{phase}: {}", message.split_whitespace().next().unwrap_or(""))
}

/// A running `eas up` (`--progress plain`), its phase lines and installer tasks watched.
struct Watched {
    child: Child,
    pid: u32,
    start: Instant,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    fn spawn(r: &Run) -> Watched {
        let start = Instant::now();
        let mut child = r.up_command(&[]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let err = child.stderr.take().unwrap();
        let s = seen.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("==> ") {
                    note(&s, start.elapsed(), phase_label(rest));
                }
            }
        });
        let (s, halt, state) = (seen.clone(), stop.clone(), r.state.clone());
        std::thread::spawn(move || {
            let mut known = 0;
            while !halt.load(Ordering::Relaxed) {
                let tasks = install_tasks(&state);
                for t in tasks.iter().skip(known) {
                    note(&s, start.elapsed(), format!("task: {t}"));
                }
                known = known.max(tasks.len());
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Watched { child, pid, start, seen, stop, reader: Some(reader) }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Where the run is: the last thing it showed.
    fn phase(&self) -> String {
        self.seen().iter().max_by_key(|s| s.at).map_or_else(|| "its start (no phase line yet)".into(), Seen::name)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // A test that fails while watching leaves nothing running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One uncrashed `eas up`, watched, in this test process after a warm-up run: what it showed and
/// when. The crash points' offsets are fractions of `window`, the time to the last thing it
/// showed before its `done` line (after that it only prints its summary and exits).
struct Timeline {
    seen: Vec<Seen>,
    window: Duration,
    total: Duration,
}

fn timeline() -> &'static Timeline {
    static T: OnceLock<Timeline> = OnceLock::new();
    T.get_or_init(|| {
        // The first run in a process is slower (cold caches) than those after it: a warm-up.
        for i in 0..3 {
            let r = run();
            let mut w = Watched::spawn(&r);
            let deadline = Instant::now() + Duration::from_secs(900);
            let status = loop {
                if let Some(s) = w.child.try_wait().unwrap() {
                    break s;
                }
                assert!(Instant::now() < deadline, "the uncrashed eas up did not end within 15 min ({})", w.phase());
                std::thread::sleep(Duration::from_millis(2));
            };
            let total = w.start.elapsed();
            // Its stderr ends with it: every phase line is read.
            w.reader.take().unwrap().join().unwrap();
            assert!(status.success(), "the uncrashed eas up failed ({status}) in {}", w.phase());
            let seen = w.seen();
            // A run that built the bastion image is no measure: the crashed runs reuse it.
            if i == 0 || seen.iter().any(|s| s.label == "bastion: built") {
                continue;
            }
            let done = seen.iter().find(|s| s.label.starts_with("done:")).expect("a done line").at;
            let window = seen.iter().map(|s| s.at).filter(|&a| a < done).max().expect("phase lines before done");
            return Timeline { seen, window, total };
        }
        panic!("the uncrashed runs after the first built the bastion image")
    })
}

/// One crash point: SIGKILL `eas up` `delay` after it shows the `n`th thing labelled `anchor`
/// (none: after its start), or as soon as it shows anything after that, if that comes first. So
/// a point lands in the measured phase on a machine as slow or as fast as this one, and never
/// past the run's end. `mode` is the stand-in installer's.
#[derive(Clone, Debug)]
struct Point {
    name: String,
    mode: &'static str,
    anchor: Option<(String, usize)>,
    delay: Duration,
}

/// The point "as soon as `eas up` shows the `n`th `label`".
fn marker(mode: &'static str, label: &str, n: usize) -> Point {
    let shown = if n > 1 { format!("{label} #{n}") } else { label.to_string() };
    Point { name: format!("at {shown}"), mode, anchor: Some((label.into(), n)), delay: Duration::ZERO }
}

/// The points at `eas up`'s own progress, in its order: preflight (before the lock), the
/// bastion image reused, the `before` snapshot, the init in the bastion, the install's start,
/// three installer tasks (one while the installer hangs in its container), the `after` snapshot
/// and verify.
fn marker_points() -> Vec<Point> {
    vec![
        marker("ok", "preflight: reading", 1),
        marker("ok", "bastion: reusing", 1),
        marker("ok", "ledger: reading", 1),
        marker("ok", "prepare: ./es_auto_installer.sh", 1),
        marker("ok", "install: ./es_auto_installer.sh", 1),
        marker("ok", "task: cert_manager : Install cert-manager", 1),
        marker("ok", "task: kserve : Install KServe", 1),
        marker("hang", "task: kserve : Wait for the controller", 1),
        marker("ok", "task: llm_services : Deploy models", 1),
        marker("ok", "record: recording", 1),
        marker("ok", "verify: waiting", 1),
    ]
}

/// `count` time offsets as fractions of the measured run, one drawn with a fixed seed (11) in
/// each of `count` equal slices of it (so they cannot bunch), in order; each is kept as the last
/// thing the measured run showed before it, and the time after that.
fn seeded_points(t: &Timeline, count: usize) -> Vec<Point> {
    let mut seed: u64 = 11;
    let fractions: Vec<f64> = (0..count)
        .map(|i| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let within = ((seed >> 33) % 10_000) as f64 / 10_000.0;
            (i as f64 + within) / count as f64
        })
        .collect();
    fractions
        .into_iter()
        .map(|f| {
            let at = t.window.mul_f64(f);
            let anchor = t.seen.iter().filter(|s| s.at <= at).max_by_key(|s| s.at);
            let delay = at - anchor.map_or(Duration::ZERO, |s| s.at);
            let after = anchor.map_or_else(|| "the start".to_string(), Seen::name);
            Point {
                name: format!(
                    "{:.1}% of the run ({} ms measured: {} ms after {after})",
                    f * 100.0,
                    at.as_millis(),
                    delay.as_millis()
                ),
                mode: "ok",
                anchor: anchor.map(|s| (s.label.clone(), s.n)),
                delay,
            }
        })
        .collect()
}

/// A SIGKILL that hit a running `eas up`: when, and the last thing it had shown.
#[derive(Clone, Debug)]
struct Kill {
    at: Duration,
    phase: String,
}

/// Waits for `p`'s moment, checks that `eas up` still runs, and SIGKILLs it. A run that ended
/// before its point fails the point: it was no crash.
fn kill_at(w: &mut Watched, p: &Point) -> Kill {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if let Some(status) = w.child.try_wait().unwrap() {
            panic!("eas up ended ({status}) before the crash point {}, in {}: no kill", p.name, w.phase());
        }
        assert!(Instant::now() < deadline, "no crash point {} within 15 min ({})", p.name, w.phase());
        let seen = w.seen();
        let anchor = match &p.anchor {
            None => Some(Duration::ZERO),
            Some((label, n)) => seen.iter().find(|s| &s.label == label && s.n == *n).map(|s| s.at),
        };
        if let Some(a) = anchor {
            let moved_on = seen.iter().any(|s| s.at > a);
            if w.start.elapsed() >= a + p.delay || moved_on {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let kill = Kill { at: w.start.elapsed(), phase: w.phase() };
    let status = w.child.try_wait().unwrap();
    assert!(status.is_none(), "eas up ended ({status:?}) right before the SIGKILL at {}", p.name);
    w.child.kill().unwrap();
    w.child.wait().unwrap();
    w.stop.store(true, Ordering::Relaxed);
    kill
}

/// What one crash point did after its kill: the dead run's bastion containers that outlived it,
/// and how many of them `eas up --break-lock` said it removed.
struct Crashed {
    kill: Kill,
    left: usize,
    removed: usize,
}

/// Crash point `p`: SIGKILL `eas up` there (`killed` says so even if a later check fails); check
/// the dead run with `after_kill`; then `eas up --break-lock` removes the dead run's containers
/// and completes, `eas down` leaves the served objects as they were before the first `up`, and a
/// second `down` has nothing to do.
fn crash(p: &Point, killed: &mut Option<Kill>, after_kill: &dyn Fn(&Run)) -> Crashed {
    let r = run();
    let before = r.server.served();
    r.set_mode(p.mode);
    let mut w = Watched::spawn(&r);
    let kill = kill_at(&mut w, p);
    *killed = Some(kill.clone());
    let pid = w.pid;
    drop(w);
    // Killed while the installer ran, its container is left (running, or exited and not removed).
    let left = containers_of(pid);
    assert!(left.len() <= 1, "{left:?}");
    after_kill(&r);
    // The installer is told to go on normally from now on.
    r.set_mode("ok");

    let up = r.up(&["--break-lock"]);
    let err = text(&up.stderr);
    assert!(up.status.success(), "{err}");
    for name in &left {
        assert!(err.contains(&format!("stopped and removed {name}")), "{name}: {err}");
    }
    let removed = err.matches(&format!("stopped and removed eas-bastion-{pid}-")).count();
    assert!(containers_of(pid).is_empty(), "{:?}", containers_of(pid));
    let down = r.down(&[]);
    assert!(down.status.success(), "{}", text(&down.stderr));
    let after = r.server.served();
    let differ: Vec<&String> = before.keys().chain(after.keys()).filter(|k| before.get(*k) != after.get(*k)).collect();
    assert!(differ.is_empty(), "the cluster differs from before the first up: {differ:?}\n{}", text(&down.stderr));
    let again = r.down(&[]);
    assert!(again.status.success() && text(&again.stderr).contains("nothing to remove"));
    Crashed { kill, left: left.len(), removed }
}

fn crash_point(p: &Point) -> Crashed {
    crash(p, &mut None, &|_| {})
}

#[test]
fn crash_while_the_installer_waits() {
    let _engine = support::docker::engine();
    let c = crash_point(&marker("hang", "task: kserve : Wait for the controller", 1));
    assert_eq!(c.kill.phase, "task: kserve : Wait for the controller");
    assert!(c.left == 1 && c.removed == 1, "killed while its installer container ran: {} left", c.left);
}

#[test]
fn crash_as_the_bastion_starts_the_installers_init() {
    let _engine = support::docker::engine();
    let c = crash_point(&marker("ok", "prepare: ./es_auto_installer.sh", 1));
    assert_eq!(c.kill.phase, "prepare: ./es_auto_installer.sh");
}

#[test]
fn crash_during_the_after_install_snapshot() {
    let _engine = support::docker::engine();
    let c = crash(&marker("ok", "record: recording", 1), &mut None, &|r| {
        // Killed before the record was completed: the next run completes it.
        let state = r.state_file().expect("state.json");
        assert!(state["ledger"]["pending"].is_object(), "{}", state["ledger"]);
    });
    assert_eq!(c.kill.phase, "record: recording");
}

/// A point the run never reaches alive (here: long after its `done` line) fails, and is counted
/// as no kill.
#[test]
fn a_point_past_the_end_of_the_run_fails_as_no_kill() {
    let _engine = support::docker::engine();
    let p = Point {
        name: "10 min after done".into(),
        mode: "ok",
        anchor: Some(("done: agent-toolkit".into(), 1)),
        delay: Duration::from_secs(600),
    };
    let mut killed = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crash(&p, &mut killed, &|_| {})));
    let message = result.err().and_then(|e| e.downcast_ref::<String>().cloned()).expect("the point fails");
    assert!(
        message.contains("ended (exit status: 0) before the crash point") && message.contains("no kill"),
        "{message}"
    );
    assert!(killed.is_none());
}

/// The CI subset of the 30-point run's offsets: the first, middle and last of its 19.
#[test]
fn crash_at_three_seeded_offsets() {
    let _engine = support::docker::engine();
    let points = seeded_points(timeline(), 30 - marker_points().len());
    for i in [0, 9, 18] {
        let c = crash_point(&points[i]);
        eprintln!("crash point {}: killed at {} ms, in {}", points[i].name, c.kill.at.as_millis(), c.kill.phase);
    }
}

/// All 30 points (scripts/crash-consistency.sh): the 11 at `eas up`'s own progress, and 19 time
/// offsets drawn with a fixed seed over a run measured here. Each must kill a running `eas up`.
#[test]
#[ignore = "about 30 up/down cycles: run by scripts/crash-consistency.sh"]
fn crash_consistency_at_30_points() {
    let _engine = support::docker::engine();
    let started = Instant::now();
    let t = timeline();
    let shown: Vec<String> = t.seen.iter().map(|s| format!("{} ms {}", s.at.as_millis(), s.name())).collect();
    eprintln!(
        "measured run: {} ms to its exit; offsets over its first {} ms:\n  {}",
        t.total.as_millis(),
        t.window.as_millis(),
        shown.join("\n  ")
    );
    let markers = marker_points();
    let points: Vec<Point> = markers.iter().cloned().chain(seeded_points(t, 30 - markers.len())).collect();
    let (mut passed, mut failed, mut phases) = (0, Vec::new(), std::collections::BTreeMap::<String, usize>::new());
    let (mut kills, mut left, mut removed) = (0, 0, 0);
    for p in &points {
        let mut killed = None;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| crash(p, &mut killed, &|_| {})));
        let at = match &killed {
            Some(k) => {
                kills += 1;
                *phases.entry(k.phase.clone()).or_default() += 1;
                format!("killed at {} ms, in {}", k.at.as_millis(), k.phase)
            }
            None => "no kill".into(),
        };
        match result {
            Ok(c) => {
                passed += 1;
                left += c.left;
                removed += c.removed;
                eprintln!(
                    "crash point {}: ok ({at}; {} container(s) outlived it, --break-lock removed {})",
                    p.name, c.left, c.removed
                );
            }
            Err(_) => {
                failed.push(p.name.clone());
                eprintln!("crash point {}: FAILED ({at})", p.name);
            }
        }
    }
    let hit: Vec<String> = phases.iter().map(|(p, n)| format!("{p} ({n})")).collect();
    eprintln!("crash consistency: {passed} of {} points", points.len());
    eprintln!("crash consistency: {kills} of {} points killed a running eas up", points.len());
    eprintln!("crash consistency: {} phases hit: {}", phases.len(), hit.join(", "));
    eprintln!("crash consistency: {left} bastion container(s) outlived eas up; eas up --break-lock removed {removed}");
    eprintln!("crash consistency: {:.0} s for the 30 points and the measured run", started.elapsed().as_secs_f64());
    assert!(failed.is_empty(), "failed at: {failed:?}");
    assert_eq!(kills, points.len(), "every point must kill a running eas up");
}

// Issue 29 item 1: `eas down`'s settle wait against namespaces that terminate as on a real API
// server, whose namespace controller empties a deleted namespace over time while the namespace's
// watch stays quiet:
// - a namespace that stays `Terminating` longer than the client's read timeout (shortened to 1 s
//   through `EAS_KUBE_READ_TIMEOUT`), behind a watch that sends nothing meanwhile, is waited for
//   and reported gone; so is one behind watches that the server ends with 410 Gone;
// - one that outlives the settle phase's window (`--phase-timeout settle=N`) is reported left,
//   naming its condition (`NamespaceContentRemaining`) and what remains in it.

impl Run {
    fn down_with(&self, env: &[(&str, &str)], extra: &[&str]) -> Output {
        self.eas()
            .args(["--progress", "plain"])
            .args(setup().down_args())
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// Something of the user's in kserve after the install: the namespace controller has it to
    /// remove when eas deletes the namespace (eas itself deletes only what it recorded).
    fn plant_content(&self) {
        self.server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "user-notes", "namespace": "kserve"}, "data": {"a": "b"}}));
    }

    /// The watches of namespace kserve eas opened, as `(resourceVersion, allowWatchBookmarks)`.
    fn kserve_watches(&self) -> Vec<(Option<String>, Option<String>)> {
        self.server
            .requests()
            .into_iter()
            .filter(|q| q.path == "/api/v1/namespaces" && q.param("watch").as_deref() == Some("true"))
            .filter(|q| q.param("fieldSelector").as_deref() == Some("metadata.name=kserve"))
            .map(|q| (q.param("resourceVersion"), q.param("allowWatchBookmarks")))
            .collect()
    }
}

/// Up, then down under `env`, with kserve's content planted: the down's output.
fn up_then_down(r: &Run, env: &[(&str, &str)], extra: &[&str]) -> Output {
    let up = r.up(&[]);
    assert!(up.status.success(), "{}", text(&up.stderr));
    r.plant_content();
    r.down_with(env, extra)
}

/// kserve stays Terminating 6 s while its content goes; the client's read timeout is 1 s and
/// nothing is sent on the namespace's watch meanwhile. Before the fix the first read timeout
/// ended the wait as if kserve were gone, and `down` reported it left (exit 1).
#[test]
fn a_namespace_terminating_past_the_read_timeout_behind_a_quiet_watch_is_waited_for_and_gone() {
    let _engine = support::docker::engine();
    let r = run_with(support::Options { namespace_terminating: Some(Duration::from_secs(6)), ..Default::default() });
    let down = up_then_down(&r, &[("EAS_KUBE_READ_TIMEOUT", "1")], &[]);
    let err = text(&down.stderr);
    assert!(down.status.success(), "eas down failed:\n{err}");
    assert!(err.contains("waiting up to") && err.contains("namespace kserve"), "{err}");
    assert!(!err.contains("left:"), "{err}");
    assert!(!r.has_ns("kserve"), "{err}");
    assert!(r.state_file().is_none(), "the record is gone after a complete down:\n{err}");
    // The quiet watch broke at the read timeout and was opened again from where it was.
    let watches = r.kserve_watches();
    let resumed: Vec<_> = watches.iter().filter(|(rv, _)| rv.as_deref().is_some_and(|v| v != "0")).collect();
    assert!(watches.len() >= 2 && !resumed.is_empty(), "{watches:?}\n{err}");
    assert!(watches.iter().all(|(_, b)| b.as_deref() == Some("true")), "bookmarks are asked for: {watches:?}");
}

/// The same namespace behind watches the server ends with an ERROR event of a 410 Status after
/// 1 s (its watch cache moved on), with bookmarks every 300 ms in between: each 410 starts over
/// with a list, and kserve is still waited for and reported gone.
#[test]
fn a_namespace_behind_watches_that_end_410_gone_is_waited_for_and_gone() {
    let _engine = support::docker::engine();
    let r = run_with(support::Options {
        namespace_terminating: Some(Duration::from_secs(5)),
        watch_gone_after: Some(Duration::from_secs(1)),
        bookmark_every: Some(Duration::from_millis(300)),
        ..Default::default()
    });
    let down = up_then_down(&r, &[], &[]);
    let err = text(&down.stderr);
    assert!(down.status.success(), "eas down failed:\n{err}");
    assert!(!r.has_ns("kserve") && r.state_file().is_none(), "{err}");
    assert!(r.kserve_watches().len() >= 2, "{:?}\n{err}", r.kserve_watches());
}

/// kserve's content takes 600 s to go; the settle window is 8 s. `down` ends on its window (not
/// on the phase's timeout), reports kserve left with its condition and what remains in it, keeps
/// the record with that finding, and exits 1.
#[test]
fn a_namespace_that_outlives_the_settle_window_is_reported_left_with_its_condition() {
    let _engine = support::docker::engine();
    let r = run_with(support::Options { namespace_terminating: Some(Duration::from_secs(600)), ..Default::default() });
    let down = up_then_down(&r, &[("EAS_KUBE_READ_TIMEOUT", "2")], &["--phase-timeout", "settle=8"]);
    let err = exited(&down, 1);
    assert!(!err.contains("did not finish within its timeout"), "the wait ends inside the window:\n{err}");
    let line = err.lines().find(|l| l.contains("left: namespace kserve")).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("still Terminating"), "{line}");
    assert!(line.contains("NamespaceContentRemaining: SomeResourcesRemain"), "{line}");
    assert!(line.contains("configmaps. has 1 resource instances"), "what remains: {line}");
    assert!(r.has_ns("kserve"));
    // The namespaces with nothing left in them went at once: only kserve is reported.
    assert_eq!(err.matches("left: ").count(), 1, "{err}");
    let state = r.state_file().expect("the record is kept");
    let findings = state["ledger"]["findings"].as_array().cloned().unwrap_or_default();
    let finding = findings.iter().find(|f| f["object"] == "namespace kserve").unwrap_or_else(|| panic!("{state:#}"));
    assert_eq!(finding["kind"], "left", "{state:#}");
    assert!(finding["note"].as_str().unwrap().contains("NamespaceContentRemaining"), "{finding}");
}
