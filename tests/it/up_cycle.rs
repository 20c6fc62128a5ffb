//! `eas up` → `eas verify` → `eas down` end to end, against a real Docker Engine (the bastion is
//! built from the real Dockerfile) and a stateful recorded cluster (tests/it/support), with
//! synthetic EAS/EI/EAT trees whose `es_auto_installer.sh` is a test script that acts through
//! the API (fixtures/synthetic/README.md). The failure paths: the installer fails mid-way
//! (resume), no bring-your-own-cluster line (stopped), verification times out (exit 5 with
//! diagnostics), Ctrl-C (130, nothing left running), a second concurrent `eas up` (the lock),
//! and `eas down` twice. The dry run: a plan, and nothing written.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::synthetic_install::{self, BASE, CLUSTER, HOST_CA, MODEL, Setup, containers_of};
use support::{ClusterServer, ObjectKey, contains_all, exited, walk, writes};

/// Sentinel secrets: the kubeconfig's bearer token, and the installer's secret variables. None may
/// appear in any output, record, log or work tree (issue 10).
const TOKEN: &str = "sentinel-bearer-7d1c0e";
const SECRETS: [(&str, &str); 3] = [
    ("HF_TOKEN", "hf_sentinel_token_52ab"),
    ("KEYCLOAK_ADMIN_PASSWORD", "sentinel-keycloak-pw-93e1"),
    ("GRAFANA_ADMIN_PASSWORD", "sentinel-grafana-pw-04fd"),
];

/// Every file under `dirs` (and the given outputs) that holds a sentinel, with the sentinel.
fn sentinel_leaks(outputs: &[(&str, &str)], dirs: &[&Path]) -> Vec<String> {
    let sentinels: Vec<&str> = std::iter::once(TOKEN).chain(SECRETS.iter().map(|(_, v)| *v)).collect();
    let mut leaks = Vec::new();
    for (name, text) in outputs {
        leaks.extend(sentinels.iter().filter(|s| text.contains(*s)).map(|s| format!("{name}: {s}")));
    }
    for dir in dirs {
        for f in walk(dir) {
            let Ok(bytes) = std::fs::read(&f) else { continue };
            let body = String::from_utf8_lossy(&bytes);
            leaks.extend(sentinels.iter().filter(|s| body.contains(*s)).map(|s| format!("{}: {s}", f.display())));
        }
    }
    leaks
}

fn setup() -> &'static Setup {
    synthetic_install::setup("up-cycle")
}

/// One test's cluster and directories.
struct Run {
    server: ClusterServer,
    state: PathBuf,
    home: PathBuf,
}

fn run(mode: &str) -> Run {
    run_with(mode, support::Options::default())
}

/// [`run`] with the installer's `ok` mode, once its `eas up --yes` has completed.
fn installed() -> Run {
    let r = run("ok");
    r.up_ok(&["--yes"]);
    r
}

/// [`run`] on a server started with `options` (its token is the test's).
fn run_with(mode: &str, options: support::Options) -> Run {
    let s = setup();
    let options = support::Options { token: TOKEN.into(), ..options };
    let server = ClusterServer::start_with(support::fixture(CLUSTER), options);
    server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "eas-test"}}));
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "installer", "namespace": "eas-test"}, "data": {"mode": mode}}));
    let home = tempfile::Builder::new().prefix("home-").tempdir_in(&s.dir).unwrap().keep();
    Run { server, state: home.join("state"), home }
}

impl Run {
    fn eas(&self) -> Command {
        let mut c = setup().eas(&self.home, self.server.kubeconfig(), &self.state);
        c.envs(SECRETS);
        c
    }

    fn up_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v = vec!["up".to_string()];
        v.extend(setup().up_args());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    /// [`Run::up_args`] with the pins file `pins` in place of the setup's.
    fn up_args_pinned(&self, pins: &Path, extra: &[&str]) -> Vec<String> {
        let mut v = self.up_args(extra);
        let at = v.iter().position(|a| a == "--pins").unwrap();
        v[at + 1] = pins.display().to_string();
        v
    }

    /// A copy of the setup's pins file of this run's own (`pins.json` in its home), to move.
    fn own_pins(&self) -> PathBuf {
        let pins = self.home.join("pins.json");
        std::fs::copy(&setup().pins, &pins).unwrap();
        pins
    }

    fn up(&self, extra: &[&str]) -> Output {
        self.eas().args(self.up_args(extra)).output().unwrap()
    }

    fn spawn_up(&self, extra: &[&str]) -> Child {
        self.eas().args(self.up_args(extra)).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    /// `eas up --yes` with `flags`, once the dry run with the same flags has printed `secs` as
    /// `phase`'s timeout (the plan says what the run enforces).
    fn spawn_up_planned(&self, flags: &[&str], phase: &str, secs: u64) -> Child {
        let plan = self.up(&[&["--dry-run", "--output", "json"], flags].concat());
        let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
        let row = plan["phases"].as_array().unwrap().iter().find(|p| p["name"] == phase).unwrap().clone();
        assert_eq!(row["timeout_secs"], secs, "{row}");
        self.spawn_up(&[&["--yes"], flags].concat())
    }

    /// [`Run::spawn_up_planned`], which must end with exit 1 naming `phase` past its `secs`:
    /// the run's pid and its stderr.
    #[track_caller]
    fn up_stopped_past_its_timeout(&self, flags: &[&str], phase: &str, secs: u64) -> (u32, String) {
        let child = self.spawn_up_planned(flags, phase, secs);
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let err = exited(&out, 1);
        assert!(
            err.contains(&format!("error: {phase}:")) && err.contains(&format!("no result within {secs}s")),
            "{err}"
        );
        (pid, err)
    }

    fn down(&self) -> Output {
        self.eas().args(setup().down_args()).output().unwrap()
    }

    /// `eas up` with `extra`, which must succeed.
    #[track_caller]
    fn up_ok(&self, extra: &[&str]) -> Output {
        support::succeeded("eas up", self.up(extra))
    }

    /// `eas down`, which must succeed.
    #[track_caller]
    fn down_ok(&self) -> Output {
        support::succeeded("eas down", self.down())
    }

    /// `eas down`, which must succeed and leave none of the namespaces the install created; its
    /// stderr.
    #[track_caller]
    fn down_removes_the_install(&self) -> String {
        let err = text(&self.down_ok().stderr);
        for ns in ["cert-manager", "kserve", "llm-inference"] {
            assert!(!self.namespaces().contains(&ns.to_string()), "{ns} was left:\n{err}");
        }
        err
    }

    /// The stand-in installer's mode from now on (the `installer` ConfigMap it reads).
    fn set_mode(&self, mode: &str) {
        let control = ObjectKey::of("v1", "configmaps", "eas-test", "installer");
        self.server.update(&control, json!({"data": {"mode": mode}}));
    }

    fn namespaces(&self) -> Vec<String> {
        self.server.names("v1", "namespaces")
    }

    fn state_file(&self) -> Option<Value> {
        support::state_record(&self.state, "state.json")
    }

    /// The journal of the latest attempt (a run that stopped before its install phase began).
    fn attempt_file(&self) -> Option<Value> {
        support::state_record(&self.state, "attempt/state.json")
    }

    fn install_log(&self) -> String {
        let mut text = String::new();
        for d in std::fs::read_dir(&self.state).into_iter().flatten() {
            for f in std::fs::read_dir(d.unwrap().path().join("logs")).into_iter().flatten() {
                text.push_str(&std::fs::read_to_string(f.unwrap().path()).unwrap_or_default());
            }
        }
        text
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn phase_status(state: &Value, phase: &str) -> String {
    state["phases"].as_array().unwrap().iter().find(|p| p["phase"] == phase).unwrap()["status"]
        .as_str()
        .unwrap()
        .to_string()
}

fn model_key() -> ObjectKey {
    ObjectKey::of("serving.kserve.io/v1alpha2", "llminferenceservices", "llm-inference", MODEL)
}

fn lease_key() -> ObjectKey {
    ObjectKey::of("coordination.k8s.io/v1", "leases", "kube-system", "eas-run-lock")
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn up_verify_down_and_down_again() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let before = r.namespaces();
    assert!(before.contains(&"node-feature-discovery".to_string()), "the desktop's own NFD namespace");

    let child = r.spawn_up(&["--yes"]);
    let pid = child.id();
    let up = child.wait_with_output().unwrap();
    assert!(up.status.success(), "eas up failed:\n{}", text(&up.stderr));
    let err = text(&up.stderr);
    assert!(err.contains("BYO cluster mode") || r.install_log().contains("BYO cluster mode"), "{err}");
    assert!(r.server.object(&model_key()).is_some(), "the model server was created");
    // The summary closing the run says what happened, not what the plan said would.
    let summary = &err[err.rfind("==> done:").expect(&err)..];
    assert!(summary.contains("\n  blockers   none: every check passed before the first write\n"), "{summary}");
    assert!(
        summary.contains("\n  bastion    built eas-bastion:") || summary.contains("\n  bastion    reused "),
        "{summary}"
    );
    let took = summary.lines().find(|l| l.starts_with("  took ")).expect(summary);
    assert!(took.contains("lock 0:") && took.contains(", install ") && took.contains("(total "), "{took}");
    assert!(!summary.contains("the real run passes"), "{summary}");
    let state = r.state_file().expect("state.json");
    for p in ["install", "verify", "record"] {
        assert_eq!(phase_status(&state, p), "done", "{p}: {state}");
    }
    let created: Vec<&str> =
        state["ledger"]["created"]["namespaces"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(created.contains(&ns), "ledger lacks {ns}: {created:?}");
    }
    assert!(!created.contains(&"node-feature-discovery"), "a namespace that existed before is not ours");
    assert!(state["installer_command"].as_array().unwrap().iter().any(|a| a == "--force"));
    assert!(state["server"].as_str().is_some_and(|s| s == r.server.url()), "the record names its API server: {state}");
    // The install keeps what it decided from beside its state, as an attempt does in attempt/.
    let dir = r.state.join(state["cluster_key"].as_str().unwrap());
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan["schema"], "eas-plan/v1");
    let facts: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("facts.json")).unwrap()).unwrap();
    assert_eq!(facts["schema"], "eas-facts/v1");
    assert!(
        std::fs::read_to_string(dir.join("choices.txt")).unwrap().contains("->"),
        "choices.txt has the decision lines"
    );
    // The install's log: eas's own lines from the first phase, then the installer's output.
    let log = std::fs::read_to_string(state["log_path"].as_str().unwrap()).unwrap();
    let (first, installer) = (log.find("==> lock:").or(log.find("==> ")), log.find("BYO cluster mode"));
    assert!(first.is_some() && log.contains("==> bastion:"), "eas's lines are in the log:\n{log}");
    assert!(installer.is_none_or(|i| first.unwrap() < i), "eas's first lines come first:\n{log}");
    assert!(containers_of(pid).is_empty(), "left: {:?}", containers_of(pid));
    let (up_out, up_err) = (text(&up.stdout), text(&up.stderr));
    let leaks = sentinel_leaks(&[("stdout", &up_out), ("stderr", &up_err)], &[&r.state, &r.home]);
    assert_eq!(leaks, Vec::<String>::new(), "secrets in the run's outputs, state, logs or work tree");

    let verify = r.eas().arg("verify").output().unwrap();
    assert!(verify.status.success(), "eas verify failed:\n{}", text(&verify.stderr));
    let out = text(&verify.stdout);
    assert!(out.contains("MainWorkloadReady") && out.contains("chat completion"), "{out}");
    assert!(out.contains("Intel GPU on node k3d-gpu-server-0"), "devices node by node: {out}");

    let status = r.eas().args(["status", "--output", "json"]).output().unwrap();
    assert!(status.status.success(), "eas status failed:\n{}", text(&status.stderr));
    let doc: Value = serde_json::from_str(&text(&status.stdout)).expect("one JSON document");
    assert_eq!(doc["schema"], "eas-status/v1");
    assert_eq!(support::schema_errors("eas-status.v1", &doc), Vec::<String>::new(), "{doc}");
    assert!(doc["installed"]["down"].is_null(), "no down was interrupted: {doc}");
    let installed = &doc["installed"];
    assert_eq!(installed["layer"], "agent-toolkit");
    assert_eq!(installed["models"], json!([MODEL]));
    assert_eq!(installed["outcome"], "succeeded");
    assert_eq!(installed["commits"]["eas"].as_str().unwrap().len(), 40, "{installed}");
    assert!(installed["log_path"].is_string(), "{installed}");
    let server = &doc["live"]["model_servers"][0];
    assert_eq!(server["name"], MODEL);
    assert_eq!((server["pods_ready"].as_i64(), server["pods_desired"].as_i64()), (Some(1), Some(1)), "{server}");
    assert_eq!(server["ready_addresses"], 1);
    assert!(server["conditions"].as_array().unwrap().iter().any(|c| c == "MainWorkloadReady=True (Ready)"), "{server}");
    let dev = &doc["live"]["device_nodes"][0];
    assert_eq!((dev["node"].as_str(), dev["plugin_ready"].as_bool()), (Some("k3d-gpu-server-0"), Some(true)), "{dev}");
    let table = r.eas().arg("status").output().unwrap();
    let table = text(&table.stdout);
    assert!(table.contains("installed agent-toolkit") && table.contains("last run  succeeded"), "{table}");

    // The run recorded its Lease as eas's own object, and released it.
    let own = &state["ledger"]["own"][0];
    assert_eq!((own["kind"].as_str(), own["name"].as_str()), (Some("Lease"), Some("eas-run-lock")), "{state}");
    assert!(r.server.object(&lease_key()).is_none(), "the run released its Lease");

    // `down` takes the cluster lock as `up` does (issue 30 item 1): under another host's live
    // Lease it refuses before any write (exit 1, the holder named, a next: line), and its dry run
    // lists that as what it would stop on.
    let foreign = |renewed: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "eas-run-lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": "someone-else/1/1-1", "leaseDurationSeconds": 60, "renewTime": renewed}})
    };
    let fresh = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    r.server.insert(foreign(&fresh));
    r.server.clear_requests();
    let refused = r.down();
    let err = exited(&refused, 1);
    assert!(err.contains("error: lock: another eas run holds the cluster's Lease kube-system/eas-run-lock"), "{err}");
    assert!(err.contains("someone-else/1/1-1") && err.contains("next:"), "{err}");
    assert_eq!(writes(&r.server), Vec::<String>::new(), "down under another run's Lease wrote:\n{err}");
    assert!(r.namespaces().contains(&"kserve".to_string()), "{err}");
    let dry = r.eas().args(["down", "--dry-run"]).output().unwrap();
    let listed = text(&dry.stdout) + &text(&dry.stderr);
    assert!(listed.contains("stop: error: lock: another eas run holds the cluster's Lease"), "{listed}");
    // Expired long ago (another host's, past twice its duration): stale, taken only with
    // --break-lock; `down` takes it over (the API server keeps its uid) and releases it at its end.
    r.server.insert(foreign("2026-01-01T00:00:00.000000Z"));
    let stale = r.down();
    assert_eq!(stale.status.code(), Some(1), "{}", text(&stale.stderr));
    assert!(
        text(&stale.stderr).contains("is stale") && text(&stale.stderr).contains("--break-lock"),
        "{}",
        text(&stale.stderr)
    );
    assert!(r.namespaces().contains(&"kserve".to_string()));
    let down = r.eas().args(setup().down_args()).arg("--break-lock").output().unwrap();
    assert!(down.status.success(), "eas down failed:\n{}", text(&down.stderr));
    assert!(text(&down.stderr).contains("took over the cluster's Lease from the run 1-1"), "{}", text(&down.stderr));
    assert!(r.server.object(&lease_key()).is_none(), "down released the Lease it took over");
    let after = r.namespaces();
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(!after.contains(&ns.to_string()), "{ns} was left: {after:?}\n{}", text(&down.stderr));
    }
    assert!(after.contains(&"node-feature-discovery".to_string()), "the desktop's NFD namespace was deleted");
    assert!(after.contains(&"kube-system".to_string()));
    assert!(text(&down.stderr).contains("--skip nfd"), "{}", text(&down.stderr));
    assert!(r.state_file().is_none(), "the record is gone after a complete down");

    let again = r.down_ok();
    assert!(text(&again.stderr).contains("nothing to remove"), "{}", text(&again.stderr));
}

#[test]
fn a_failed_install_says_what_next_and_the_next_up_resumes() {
    let _engine = support::docker::engine();
    let r = run("fail-once");
    let first = r.up(&["--yes"]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let err = text(&first.stderr);
    assert!(err.contains("install") && err.contains("log:"), "{err}");
    // One cause, one `next:`: the installer's failure carries how to resume and what `eas down`
    // would remove.
    let nexts: Vec<_> = err.lines().filter(|l| l.starts_with("next: ")).collect();
    assert_eq!(nexts.len(), 1, "{err}");
    assert!(nexts[0].starts_with("next: fix the cause, then "), "{err}");
    assert!(nexts[0].contains(" up --yes") && nexts[0].contains("removes what was installed"), "{err}");
    // Its `eas up` and `eas down` repeat the same global inputs (one builder): the flags typed and
    // the CA bundle EAS_CA_BUNDLE names, as `--ca-bundle`, in both.
    let between = |from: &str, to: &str| nexts[0].split_once(from).and_then(|(_, r)| r.split_once(to)).map(|x| x.0);
    let (up, down) = (between("`eas ", " up --yes"), between("`eas down ", " --layer "));
    assert_eq!(up, down, "{}", nexts[0]);
    assert!(up.is_some_and(|g| g.contains("--kubeconfig ") && g.contains("--ca-bundle ")), "{}", nexts[0]);
    assert!(err.contains("kserve controller not ready"), "the installer's last lines are shown: {err}");
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "install"), "failed");
    assert_eq!(state["exit_code"], 1);
    // What a run killed while its work tree was being made leaves: the next run removes it.
    let cluster_dir = std::fs::read_dir(&r.state).unwrap().map(|d| d.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let killed = cluster_dir.join("work").join("eas.next-killed");
    std::fs::create_dir_all(killed.join("eas")).unwrap();
    std::fs::write(killed.join("eas").join("half-checked-out"), "x").unwrap();

    let second = r.up_ok(&["--yes"]);
    assert!(text(&second.stderr).contains("did not finish"), "{}", text(&second.stderr));
    assert_eq!(phase_status(&r.state_file().unwrap(), "verify"), "done");
    assert!(!killed.exists(), "a killed run's work tree is left in {}", cluster_dir.display());
}

/// A model whose `model-manager deploy` fails fails the install (issue 28 item 2): eas writes
/// `model_deploy_strict: true`, which EI's deploy loop (and the stand-in's) reads; without it the
/// loop records the failure and the installer exits 0, and verify waits its whole window.
#[test]
fn a_model_that_fails_to_deploy_fails_the_install_with_model_managers_reason() {
    let _engine = support::docker::engine();
    let r = run("deploy-fails");
    let out = r.up(&["--yes"]);
    let err = exited(&out, 1);
    assert!(err.contains("download failed: 401 Unauthorized"), "model-manager's reason is shown: {err}");
    assert!(r.install_log().contains("failed: [localhost] (item="), "{}", r.install_log());
    assert_eq!(phase_status(&r.state_file().unwrap(), "install"), "failed");
}

/// The image a test changed under the bastion's tag; dropping it tags the image eas built back
/// and removes the changed one, so the other tests reuse what eas built.
struct Retag {
    tag: String,
    built: String,
}

impl Drop for Retag {
    fn drop(&mut self) {
        let changed = Command::new("docker").args(["image", "inspect", "-f", "{{.Id}}", &self.tag]).output().unwrap();
        let _ = Command::new("docker").args(["tag", &self.built, &self.tag]).output();
        let changed = text(&changed.stdout).trim().to_string();
        if !changed.is_empty() && changed != self.built {
            let _ = Command::new("docker").args(["image", "rm", &changed]).output();
        }
    }
}

/// A reused image is checked before the install as its build was (issue 28 item 1): the image
/// this context built, with `jq` deleted and committed under the same tag (a change after the
/// build, which the context digest cannot see), stops `eas up` in its bastion phase with exit 1,
/// naming jq and EI's task that needs it, and the installer never runs.
#[test]
fn a_reused_image_without_jq_stops_before_the_install_naming_jq_and_its_task() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let s = setup();
    let image_args =
        ["--pins", &s.pins.display().to_string(), "--base-image", BASE, "--allow-unpinned-base"].map(String::from);
    let built = r.eas().args(["bastion", "build"]).args(&image_args).output().unwrap();
    assert!(built.status.success(), "eas bastion build: {}", text(&built.stderr));
    let tag = text(&built.stdout).lines().last().unwrap().trim().to_string();
    let docker = |args: &[&str]| {
        let o = Command::new("docker").args(args).output().unwrap();
        assert!(o.status.success(), "docker {args:?}: {}", text(&o.stderr));
        text(&o.stdout).trim().to_string()
    };
    let _restore = Retag { built: docker(&["image", "inspect", "-f", "{{.Id}}", &tag]), tag: tag.clone() };
    // The same image, its jq deleted: a container removes it and is committed under the tag (its
    // labels, the context digest among them, are kept; its command is set back).
    let name = format!("eas-test-without-jq-{}", std::process::id());
    docker(&["run", "--name", &name, &tag, "bash", "-c", "rm \"$(command -v jq)\""]);
    docker(&["commit", "--change", "CMD [\"/bin/bash\"]", &name, &tag]);
    docker(&["rm", &name]);

    let out = r.up(&["--yes"]);
    let err = exited(&out, 1);
    assert!(err.contains(&format!("reusing {tag}")), "{err}");
    assert!(
        err.contains("jq is missing; EI's task \"Enumerate autodeploy models from the catalog\""),
        "names the tool and its task: {err}"
    );
    assert!(r.install_log().is_empty(), "the installer never ran: {}", r.install_log());
}

/// As on a real cluster, a deleted namespace stays `Terminating` a while (3 s here) and a second
/// DELETE of it answers 409: `eas down` waits for what it deleted to go, and ends clean (exit 0,
/// no finding, the record gone).
#[test]
fn down_waits_for_terminating_namespaces_and_ends_clean() {
    let _engine = support::docker::engine();
    let options = support::Options { namespace_terminating: Some(Duration::from_secs(3)), ..Default::default() };
    let r = run_with("ok", options);
    r.up_ok(&["--yes"]);
    // Content the namespace controller has to remove: an empty namespace goes at once.
    r.server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "user-notes", "namespace": "kserve"}, "data": {}}));
    let err = r.down_removes_the_install();
    assert!(err.contains("waiting"), "says what it waits for:\n{err}");
    assert!(r.state_file().is_none(), "the record is gone after a complete down:\n{err}");
}

/// `eas up` SIGKILLed while its installer runs leaves the installer's container behind (the
/// fence ends its command, nothing removes it); `eas down --break-lock` removes it before
/// anything else (as `eas up --break-lock`) and takes over the dead run's Lease.
#[test]
fn down_break_lock_removes_the_dead_runs_installer() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let pid = r.killed_with_the_installer_hanging();
    assert_eq!(containers_of(pid).len(), 1, "the dead run's installer's container is left");
    r.set_mode("ok");
    assert!(r.server.object(&lease_key()).is_some(), "the killed run's Lease is left");
    let down = r.eas().args(setup().down_args()).arg("--break-lock").output().unwrap();
    let err = text(&down.stderr);
    assert!(containers_of(pid).is_empty(), "left: {:?}\n{err}", containers_of(pid));
    assert!(err.contains("stopped and removed") && err.contains("left running by the dead run"), "{err}");
    // The dead run's Lease (this host, its pid gone): taken over, then released by down.
    assert!(r.server.object(&lease_key()).is_none(), "{err}");
    assert!(err.contains(&format!("took over the cluster's Lease from the run {pid}-")), "{err}");
}

/// The containers of this `eas`'s run that are running (`docker ps` without `-a`).
fn running_containers_of(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "--filter", "label=io.eas.managed=true", "--filter", &format!("name=eas-bastion-{pid}-")])
        .args(["--format", "{{.Names}}"])
        .output()
        .unwrap();
    text(&out.stdout).lines().map(str::to_string).collect()
}

/// The installer never outlives the eas that started it (issue 30 item 2): `eas up` SIGKILLed
/// while its installer runs closes its attach stream, and the bastion's fence ends the installer:
/// no container of that run is running within the documented 10 s. A second `eas up
/// --break-lock` from another state dir (which has no lock of the first run) finds the dead run's
/// container by the run id its Lease names, removes it before it takes over, and installs alone.
#[test]
fn a_killed_up_leaves_no_installer_running_and_a_second_state_dir_proceeds_alone() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let pid = r.killed_with_the_installer_hanging();
    // The stream closed with the process; the documented bound, polled.
    let closed = Instant::now();
    wait_for("the killed run's installer to end", Duration::from_secs(10), || running_containers_of(pid).is_empty());
    eprintln!("stream closed to no container running: {} ms", closed.elapsed().as_millis());
    assert_eq!(containers_of(pid).len(), 1, "the exited container is left for --break-lock to remove");
    let holder = r.server.object(&lease_key()).expect("the killed run's Lease is left")["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(holder.contains(&format!("/{pid}/{pid}-")), "{holder}");

    r.set_mode("ok");
    let other = r.home.join("other-state");
    let mut second = setup().eas(&r.home, r.server.kubeconfig(), &other);
    second.envs(SECRETS).args(r.up_args(&["--yes"]));
    let refused = second.output().unwrap();
    let err = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "a dead run's Lease needs --break-lock: {err}");
    assert!(err.contains("is stale") && err.contains("its run is gone"), "{err}");
    let mut second = setup().eas(&r.home, r.server.kubeconfig(), &other);
    second.envs(SECRETS).args(r.up_args(&["--yes", "--break-lock"]));
    let out = second.output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let removed = err.find(&format!("stopped and removed eas-bastion-{pid}-")).unwrap_or_else(|| panic!("{err}"));
    let installed = err.find("install agent-toolkit").unwrap_or_else(|| panic!("{err}"));
    assert!(removed < installed, "the dead run's container is removed before the install:\n{err}");
    assert!(containers_of(pid).is_empty(), "{:?}", containers_of(pid));
    assert!(r.server.object(&lease_key()).is_none(), "the second run released its Lease");
}

/// The Lease fences the installer (issue 30 item 2): with a short Lease (`EAS_LEASE_SECS=6`,
/// renewed every 2 s), a Lease deleted, taken by another run, or that cannot be renewed (the API
/// server refusing) under a running install stops its installer; the install phase fails with
/// `lost the cluster lock: …`, exit 1 and a next: line; a Lease another run holds is not
/// deleted. After the deleted one, the next `eas up` resumes as after any failed install.
#[test]
fn a_deleted_taken_or_unrenewable_lease_stops_the_installer_and_says_why() {
    let _engine = support::docker::engine();
    for case in ["deleted", "taken", "unrenewable"] {
        let r = run("hang");
        let up = r.start_up(&["--yes"], &[("EAS_LEASE_SECS", Path::new("6"))]);
        let pid = up.child.id();
        wait_for("the installer to hang", Duration::from_secs(600), || {
            r.install_log().contains("Wait for the controller")
        });
        match case {
            "deleted" => drop(r.server.remove(&lease_key())),
            "taken" => r.server.update(&lease_key(), json!({"spec": {"holderIdentity": "thief/1/1-1"}})),
            _ => {
                r.server.inject(Some("/leases/eas-run-lock"), support::Fault::Status(500, "etcd is down".into()), None)
            }
        }
        let mut up = up;
        wait_for("eas up to stop", Duration::from_secs(120), || up.child.try_wait().unwrap().is_some());
        let (code, err) = up.exit();
        assert_eq!(code, Some(1), "{case}: {err}");
        let why = match case {
            "deleted" => "lost the cluster lock: gone".to_string(),
            "taken" => "lost the cluster lock: taken by thief/1/1-1".to_string(),
            _ => "lost the cluster lock: not renewable since ".to_string(),
        };
        assert!(err.contains(&why), "{case}: {err}");
        assert!(err.lines().any(|l| l.starts_with("next:") || l.contains("next:")), "{case}: {err}");
        assert!(
            running_containers_of(pid).is_empty() && containers_of(pid).is_empty(),
            "{case}: {:?}",
            containers_of(pid)
        );
        let state = r.state_file().unwrap();
        assert_eq!(phase_status(&state, "install"), "failed", "{case}: {state}");
        let message = state["phases"].as_array().unwrap().iter().find(|p| p["phase"] == "install").unwrap().to_string();
        assert!(message.contains(&why), "{case}: the record says why: {message}");
        r.server.clear_faults();
        if case == "taken" {
            let lease = r.server.object(&lease_key()).expect("another run's Lease is not deleted");
            assert_eq!(lease["spec"]["holderIdentity"], "thief/1/1-1");
        }
        if case == "deleted" {
            r.set_mode("ok");
            let again = r.up_ok(&["--yes"]);
            assert!(text(&again.stderr).contains("resuming"), "{}", text(&again.stderr));
        }
    }
}

/// A takeover of a stale Lease (another host's, expired long ago) with `--break-lock` is an
/// update: the API server keeps the object's uid, and the run records that Lease, uid and holder,
/// as eas's own in its ledger (issue 29 item 7).
#[test]
fn a_lease_taken_over_keeps_its_uid_and_the_ledger_records_it() {
    let _engine = support::docker::engine();
    let r = run("ok");
    r.server.insert(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "eas-run-lock", "namespace": "kube-system"},
        "spec": {"holderIdentity": "elsewhere/7/7-1", "leaseDurationSeconds": 60,
                 "renewTime": "2026-01-01T00:00:00.000000Z"}}));
    let planted = r.server.object(&lease_key()).unwrap();
    let uid = planted["metadata"]["uid"].as_str().unwrap().to_string();
    r.up_ok(&["--yes", "--break-lock"]);
    let state = r.state_file().unwrap();
    let own = state["ledger"]["own"].as_array().cloned().unwrap_or_default();
    let lease = own.iter().find(|o| o["kind"] == "Lease").unwrap_or_else(|| panic!("no Lease in the ledger: {state}"));
    assert_eq!(lease["uid"].as_str(), Some(uid.as_str()), "the taken-over Lease keeps its uid: {lease}");
    assert_ne!(lease["holder"].as_str(), Some("elsewhere/7/7-1"), "the holder is the run that took it: {lease}");
    assert!(r.server.object(&lease_key()).is_none(), "the run released the Lease it took over");
}

/// A run that fails before any act (here a facts read the API server refuses) is an attempt: it
/// records how it ended beside the state, never as an install. `eas status` says nothing is
/// installed and where the last run stopped; `eas down` sends only reads and says so.
#[test]
fn a_run_that_fails_while_gathering_records_its_end() {
    let _engine = support::docker::engine();
    let r = run("ok");
    r.server.inject(Some("daemonsets"), support::Fault::Status(500, "etcd is down".into()), None);
    let up = r.up(&["--yes"]);
    let code = up.status.code().expect("an exit code");
    assert_ne!(code, 0, "{}", text(&up.stderr));
    assert!(text(&up.stderr).contains("etcd is down"), "{}", text(&up.stderr));
    assert!(r.state_file().is_none(), "an attempt is not an install's record");
    let key = std::fs::read_dir(&r.state).unwrap().next().unwrap().unwrap().path();
    let attempt: Value =
        serde_json::from_str(&std::fs::read_to_string(key.join("attempt/state.json")).unwrap()).unwrap();
    assert_eq!(attempt["exit_code"], code, "{attempt}");
    assert!(attempt["finished"].is_string(), "{attempt}");
    // The attempt keeps its log: the run's own lines, then the failure.
    let log = std::fs::read_to_string(attempt["log_path"].as_str().expect("the attempt names its log")).unwrap();
    assert!(log.contains("==> ") && log.contains("etcd is down"), "{log}");
    r.server.clear_faults();
    let status = r.eas().args(["status", "--output", "json"]).output().unwrap();
    let doc: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(support::schema_errors("eas-status.v1", &doc), Vec::<String>::new());
    assert_eq!(doc["installed"], Value::Null, "{doc}");
    assert_eq!(doc["last_run"]["phase"], "facts", "{doc}");
    assert_eq!(doc["last_run"]["exit_code"], code, "{doc}");
    assert!(doc["last_run"]["cause"].as_str().unwrap().contains("etcd is down"), "{doc}");
    let table = text(&r.eas().args(["status"]).output().unwrap().stdout);
    assert!(table.contains(&format!("installed nothing; last run failed at facts (exit {code})")), "{table}");
    let before = r.server.requests().len();
    let down = r.down();
    assert_eq!(down.status.code(), Some(0), "{}", text(&down.stderr));
    let said = text(&down.stderr);
    assert!(said.contains("nothing was installed on k3d-gpu by eas up (last attempt: facts"), "{said}");
    assert!(!said.contains("removed"), "no removal is reported: {said}");
    let sent: Vec<_> =
        r.server.requests()[before..].iter().filter(|q| q.method != "GET").map(|q| q.path.clone()).collect();
    assert_eq!(sent, Vec::<String>::new(), "down sent only reads");
    assert!(!key.join("attempt").exists(), "down cleared the attempt");
}

#[test]
fn an_installer_without_its_byo_line_is_stopped() {
    let _engine = support::docker::engine();
    let r = run("no-byo");
    let start = Instant::now();
    let child = r.spawn_up(&["--yes"]);
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("stopped by eas"), "{err}");
    // The stand-in sleeps 60 s after its Kubespray lines: eas stopped it well before.
    assert!(start.elapsed() < Duration::from_secs(55), "not stopped: {:?}", start.elapsed());
    assert!(containers_of(pid).is_empty(), "left: {:?}", containers_of(pid));
    assert!(r.server.object(&model_key()).is_none());
}

/// On a terminal without `--yes`, `eas up` runs every plan half, shows the plan's summary and
/// asks before its first act: "n" changes nothing (no lock, no record, no image built, no write
/// to the cluster) and exits 1.
#[test]
fn up_on_a_terminal_shows_the_plan_and_asks_and_no_changes_nothing() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let args = r.up_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = support::on_a_terminal(r.eas(), &args, &r.home, "n\n");
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("  blockers   none"), "the plan's summary first: {shown}");
    assert!(shown.contains("eas up installs agent-toolkit on k3d-gpu. Continue? [y/N]"), "{shown}");
    assert!(shown.contains("not confirmed: nothing was changed"), "{shown}");
    assert!(r.state_file().is_none() && r.attempt_file().is_none(), "nothing recorded");
    assert_eq!(support::writes(&r.server), Vec::<String>::new(), "no write reached the cluster");
    let key = std::fs::read_dir(&r.state).into_iter().flatten().flatten().next().map(|e| e.path());
    assert!(key.is_none_or(|k| !k.join("lock").exists()), "no lock taken");
}

/// `--install-timeout` is the install phase's act half, enforced as one window: the hanging
/// installer is stopped at the effective value, the run exits 1 naming the phase, and nothing is
/// left running. The plan prints the same value.
#[test]
fn the_install_past_its_effective_timeout_is_stopped_and_exits_1() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let (pid, _) = r.up_stopped_past_its_timeout(&["--install-timeout", "8"], "install", 8);
    assert!(containers_of(pid).is_empty(), "left: {:?}", containers_of(pid));
    assert_eq!(phase_status(&r.state_file().unwrap(), "install"), "failed");
}

/// `--phase-timeout prepare=8` is the prepare phase's act half: an `init` that never returns is
/// stopped at the effective value, the run exits 1 naming the phase, and nothing is left
/// running. The plan prints the same value.
#[test]
fn prepare_past_its_effective_timeout_is_stopped_and_exits_1() {
    let _engine = support::docker::engine();
    let r = run("hang-init");
    let (pid, _) = r.up_stopped_past_its_timeout(&["--phase-timeout", "prepare=8"], "prepare", 8);
    assert!(r.install_log().contains("cloning the layer's repositories"), "the init ran: {}", r.install_log());
    assert!(containers_of(pid).is_empty(), "left: {:?}", containers_of(pid));
    let attempt = r.attempt_file().expect("a run stopped in prepare is an attempt");
    assert_eq!(phase_status(&attempt, "prepare"), "failed");
    assert!(r.state_file().is_none(), "nothing was installed");
}

/// The record phase reads what the install created, right after it, in one window of its
/// effective timeout: with the cluster's CRD list stalled once the installer is done, `--phase-timeout
/// record=1` ends it at 1 s, exit 1 naming it, and the record is marked incomplete (so `eas down`
/// removes nothing until a later `eas up` completes it). The plan prints the value.
#[test]
fn record_past_its_effective_timeout_marks_the_record_incomplete_and_exits_1() {
    let _engine = support::docker::engine();
    let r = run("linger");
    let child = r.spawn_up_planned(&["--phase-timeout", "record=1"], "record", 1);
    wait_for("the installer to finish", Duration::from_secs(600), || r.install_log().contains("INSTALLATION COMPLETE"));
    let stall =
        support::Rule { method: Some("GET".into()), path: "/customresourcedefinitions".into(), ..Default::default() };
    r.server.inject_rule(stall, support::Fault::Slow(Duration::from_secs(600)), None);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("phase record did not finish within its timeout of 1 s"), "{err}");
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "install"), "done");
    assert_eq!(phase_status(&state, "record"), "failed");
    assert_eq!(phase_status(&state, "verify"), "pending", "verify does not run on an incomplete record");
    let incomplete = state["ledger"]["incomplete"].as_str().unwrap_or_default();
    assert!(incomplete.contains("phase record did not finish"), "{:#}", state["ledger"]);
}

#[test]
fn verification_that_times_out_exits_5_with_diagnostics() {
    let _engine = support::docker::engine();
    let r = run("never-ready");
    let out = r.up(&["--yes", "--verify-timeout", "3"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("MainWorkloadReady=False"), "{err}");
    assert!(err.contains("MinimumReplicasUnavailable"), "the condition's reason: {err}");
    assert_eq!(phase_status(&r.state_file().unwrap(), "verify"), "failed");
    assert_eq!(phase_status(&r.state_file().unwrap(), "install"), "done");
}

/// One run per cluster whatever the state directory: a second `eas up --yes` with another
/// `--state-dir` meets the first run's Lease (kube-system/eas-run-lock) and stops before any
/// write, naming its holder; the Lease is deleted when the first run ends.
#[test]
fn a_second_up_with_another_state_dir_meets_the_clusters_lease() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let (up, pid) = r.up_with_the_installer_hanging();
    let lease = ObjectKey::of("coordination.k8s.io/v1", "leases", "kube-system", "eas-run-lock");
    let held = r.server.object(&lease).expect("the running eas up holds the cluster's Lease");
    let holder = held["spec"]["holderIdentity"].as_str().unwrap().to_string();
    assert!(holder.contains(&format!("/{pid}/")), "host/pid/run id: {holder}");
    let other = r.home.join("other-state");
    let mut second = setup().eas(&r.home, r.server.kubeconfig(), &other);
    second.envs(SECRETS).args(r.up_args(&["--yes"]));
    let out = second.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("another eas run holds the cluster's Lease kube-system/eas-run-lock") && err.contains(&holder),
        "{err}"
    );
    let mut up = up;
    up.signal("-INT");
    let (code, err) = up.exit();
    assert_eq!(code, Some(130), "{err}");
    assert!(r.server.object(&lease).is_none(), "the Lease goes when its run ends");
}

#[test]
fn ctrl_c_leaves_nothing_running_and_a_second_up_meets_the_lock() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let child = r.spawn_up(&["--yes"]);
    let pid = child.id();
    wait_for("the installer to hang", Duration::from_secs(600), || r.install_log().contains("Wait for the controller"));
    assert_eq!(containers_of(pid).len(), 1, "one bastion container runs the installer");

    let second = r.up(&["--yes"]);
    assert_ne!(second.status.code(), Some(0));
    let err = text(&second.stderr);
    assert!(err.contains("lock") && err.contains(&pid.to_string()), "the holder is named: {err}");
    // One run holding the local lock and the Lease is one blocker, the local lock's.
    assert!(!err.contains("the cluster's Lease"), "reported twice: {err}");

    support::signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(containers_of(pid).is_empty(), "left: {:?}", containers_of(pid));
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "install"), "interrupted");
    assert_eq!(state["exit_code"], 130);
}

#[test]
fn a_dry_run_prints_the_plan_and_writes_nothing() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let out_dir = r.home.join("plan");
    let images_before = Command::new("docker").args(["images", "-q"]).output().unwrap().stdout;
    let out = r.up_ok(&["--dry-run", "--out", out_dir.to_str().unwrap()]);
    let plan = text(&out.stdout);
    contains_all(
        &plan,
        &[
            "istio_platform: \"k3d\"",
            "kubernetes_cpu_policy: \"best-effort\"",
            "install agent-toolkit --env k3d-gpu --force",
        ],
    );
    assert!(plan.contains("0002") && plan.contains("0006"), "overlay decisions:\n{plan}");
    let names: Vec<String> =
        std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    for f in ["plan.json", "choices.txt", "eas-overrides.yaml", "repos.agent-toolkit.yaml"] {
        assert!(names.contains(&f.to_string()), "{names:?}");
    }
    let writes = writes(&r.server);
    assert!(writes.is_empty(), "a dry run wrote to the cluster: {writes:?}");
    assert!(!r.state.exists() || walk(&r.state).is_empty(), "a dry run wrote state: {:?}", walk(&r.state));
    let images_after = Command::new("docker").args(["images", "-q"]).output().unwrap().stdout;
    assert_eq!(images_before, images_after, "a dry run built an image");
    let err = text(&out.stderr);
    let leaks = sentinel_leaks(&[("stdout", &plan), ("stderr", &err)], &[&out_dir, &r.home]);
    assert_eq!(leaks, Vec::<String>::new(), "secrets in the plan, plan.json or the outputs");
}

#[test]
fn the_inference_layer_deploys_the_catalog_entry_it_picked() {
    let _engine = support::docker::engine();
    let r = run("ok");
    // qwen3-0-6b is an entry of the synthetic EI catalog only, not one of eas's candidates.
    r.up_ok(&["--yes", "--layer", "inference", "--model", "qwen3-0-6b"]);
    let key = ObjectKey { name: "qwen3-0-6b".into(), ..model_key() };
    assert!(r.server.object(&key).is_some(), "the autodeploy entry's model server was created");
    assert!(r.server.object(&model_key()).is_none(), "only the picked entry is deployed");
    let state = r.state_file().expect("state.json");
    assert_eq!(phase_status(&state, "verify"), "done", "{state}");
    let decisions = state["decisions"].to_string();
    assert!(decisions.contains("llm_services_deploy_models: true"), "{decisions}");
    assert!(decisions.contains("models.yaml qwen3-0-6b autodeploy: true"), "{decisions}");
    r.down_ok();
}

/// A background `eas` whose stderr is read as it comes (a full pipe would stall it), for the
/// interrupt tests: SIGINT or SIGTERM in each phase of `eas up`, and in `eas down`.
struct Running {
    child: Child,
    err: std::sync::Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
    signalled: Option<Instant>,
}

impl Running {
    fn start(mut c: Command) -> Running {
        let mut child = c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let err = std::sync::Arc::new(Mutex::new(String::new()));
        let (pipe, sink) = (child.stderr.take().unwrap(), err.clone());
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Running { child, err, reader: Some(reader), signalled: None }
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    fn signal(&mut self, sig: &str) {
        self.signalled = Some(Instant::now());
        support::signal(self.child.id(), sig);
    }

    /// The exit code, waited for at most 10 s after the signal: a guard against a hang, not a
    /// speed check (scripts/bench-interrupt.sh measures the latency).
    fn exit(mut self) -> (Option<i32>, String) {
        let give_up = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > give_up {
                self.child.kill().unwrap();
                self.child.wait().unwrap();
                panic!("eas did not exit within 10 s of the signal:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Shown with --nocapture, for the closing note's figures; never asserted.
        if let Some(t) = self.signalled {
            eprintln!("signal to exit: {} ms", t.elapsed().as_millis());
        }
        self.reader.take().unwrap().join().unwrap();
        (status.code(), self.stderr())
    }
}

impl Run {
    fn start_up(&self, extra: &[&str], env: &[(&str, &Path)]) -> Running {
        let mut c = self.eas();
        c.args(self.up_args(extra)).envs(env.iter().map(|(k, v)| (*k, *v)));
        Running::start(c)
    }

    /// `eas up --yes` (on a `hang` run) once its installer hangs, in its one bastion container.
    fn up_with_the_installer_hanging(&self) -> (Running, u32) {
        let up = self.start_up(&["--yes"], &[]);
        let pid = up.child.id();
        let hung = || self.install_log().contains("Wait for the controller");
        wait_for("the installer to hang", Duration::from_secs(600), hung);
        assert_eq!(containers_of(pid).len(), 1, "one bastion container runs the installer");
        (up, pid)
    }

    /// [`Run::up_with_the_installer_hanging`], SIGKILLed: the dead run's pid.
    fn killed_with_the_installer_hanging(&self) -> u32 {
        let (mut up, pid) = self.up_with_the_installer_hanging();
        up.signal("-KILL");
        let _ = up.exit();
        pid
    }

    /// `eas down --yes` signalled with `sig` once `ready(its pid)` holds: it exits 130 saying how
    /// to go on, leaves nothing running, and keeps the record, marked interrupted, with eas's own
    /// removals not begun (kserve, which only eas removes, is still there).
    fn interrupt_down(&self, sig: &str, what: &str, mut ready: impl FnMut(u32) -> bool) {
        let mut c = self.eas();
        c.args(setup().down_args());
        let mut down = Running::start(c);
        let pid = down.child.id();
        wait_for(what, Duration::from_secs(600), || ready(pid));
        down.signal(sig);
        let (code, err) = down.exit();
        assert_eq!(code, Some(130), "{err}");
        assert!(err.contains("next:") && err.contains("eas down"), "{err}");
        self.nothing_left(pid, &format!("{sig} in down, after {what}"));
        let state = self.state_file().expect("the record is kept");
        assert_eq!(state["down"]["status"], "interrupted", "{state}");
        assert!(self.namespaces().contains(&"kserve".to_string()), "eas removed something: {:?}", self.namespaces());
    }

    /// `eas up --yes` signalled with `sig` while its installer hangs: it exits 130 and leaves
    /// nothing running. Its stderr.
    fn interrupt_the_install(&self, sig: &str) -> String {
        let (mut up, pid) = self.up_with_the_installer_hanging();
        up.signal(sig);
        let (code, err) = up.exit();
        assert_eq!(code, Some(130), "{err}");
        self.nothing_left(pid, &format!("{sig} in install"));
        err
    }

    /// Nothing of the run is left: no process started under its HOME (git, the installer's
    /// `docker` clients, plugins), no container of this `eas`.
    fn nothing_left(&self, pid: u32, what: &str) {
        let procs = support::processes_naming(&self.home.display().to_string());
        assert!(procs.is_empty(), "{what}: left running: {procs:?}");
        assert!(containers_of(pid).is_empty(), "{what}: containers left: {:?}", containers_of(pid));
    }
}

/// A later commit of the synthetic EI tree, on a branch of its own (`{branch}-{pid}`: the other
/// tests' pins name the first one), holding a new file and `edit`'s changes: its sha. The tree
/// is back on main after.
fn later_ei_commit(branch: &str, edit: impl FnOnce(&Path)) -> String {
    let ei = setup().repos.join("ei");
    support::git(&ei, &["checkout", "-q", "-b", &format!("{branch}-{}", std::process::id())]);
    std::fs::write(ei.join("LATER.txt"), "a later EI commit\n").unwrap();
    edit(&ei);
    support::git(&ei, &["add", "-A"]);
    support::git(&ei, &["commit", "-qm", "later"]);
    let sha = support::git(&ei, &["rev-parse", "HEAD"]);
    support::git(&ei, &["checkout", "-q", "main"]);
    sha
}

/// A CA bundle no earlier build has seen (the host's CAs and a new one): the bastion's context,
/// and so every layer from its `COPY ca/` on, is new, and the build runs its pip step.
fn new_ca_bundle(dir: &Path) -> PathBuf {
    let pem = support::tls_front::self_signed_ca(&format!("eas interrupt test {}", dir.display())).0.pem();
    let path = dir.join("ca-bundle.pem");
    std::fs::write(&path, format!("{}{pem}", std::fs::read_to_string(HOST_CA).unwrap())).unwrap();
    path
}

/// The classic builder's step containers running this build's pip step: `(container, image)`.
fn pip_steps() -> Vec<(String, String)> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--no-trunc", "--filter", "label=io.eas.managed=true"])
        .args(["--format", "{{.ID}} {{.Image}} {{.Command}}"])
        .output()
        .unwrap();
    text(&out.stdout)
        .lines()
        .filter(|l| l.contains("pip install --require-hashes"))
        .map(|l| {
            let mut w = l.split(' ');
            (w.next().unwrap().to_string(), w.next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn up_interrupted_while_building_the_bastion_leaves_no_build_container() {
    let _engine = support::docker::engine();
    for sig in ["-INT", "-TERM"] {
        let r = run("ok");
        let bundle = new_ca_bundle(&r.home);
        let mut up = r.start_up(&["--yes"], &[("EAS_CA_BUNDLE", &bundle)]);
        let pid = up.child.id();
        wait_for("the bastion build's pip step", Duration::from_secs(600), || up.stderr().contains("| Collecting "));
        let steps = pip_steps();
        assert_eq!(steps.len(), 1, "{sig}: the pip step's container: {steps:?}");
        let tag = up
            .stderr()
            .lines()
            .find_map(|l| l.split("building eas-bastion:").nth(1))
            .map(|t| format!("eas-bastion:{}", t.split(' ').next().unwrap()));
        up.signal(sig);
        let (code, err) = up.exit();
        assert_eq!(code, Some(130), "{sig}: {err}");
        assert!(err.contains("interrupted: nothing eas started is left running"), "{sig}: {err}");
        // Before its install phase the run is an attempt: recorded beside the state.
        assert!(r.state_file().is_none(), "{sig}: an attempt wrote an install's record");
        let state = r.attempt_file().unwrap();
        assert_eq!(phase_status(&state, "bastion"), "interrupted", "{sig}: {state}");
        assert_eq!(phase_status(&state, "install"), "pending", "{sig}: {state}");
        assert_eq!(state["exit_code"], 130);
        r.nothing_left(pid, sig);
        // The step's container is dead at exit. Docker may still be deleting its writable layer
        // (seconds on a busy disk, issue 10): then it is marked for removal, and goes without eas.
        let state = Command::new("docker").args(["inspect", "--format", "{{.State.Status}}", &steps[0].0]).output();
        let state = text(&state.unwrap().stdout).trim().to_string();
        assert!(state.is_empty() || state == "removing", "{sig}: the build container is {state:?} after eas exited");
        wait_for("Docker to remove the build container", Duration::from_secs(120), || {
            pip_steps().iter().all(|(c, _)| *c != steps[0].0)
        });
        assert!(
            !Command::new("docker").args(["image", "inspect", &steps[0].1]).output().unwrap().status.success(),
            "{sig}: the interrupted build's intermediate image {} is still there",
            steps[0].1
        );
        let tag = tag.expect("the build names its tag");
        assert!(
            !Command::new("docker").args(["image", "inspect", &tag]).output().unwrap().status.success(),
            "{sig}: the interrupted build tagged {tag}"
        );
    }
}

/// SIGTERM during the install, with the cluster read that follows it made slow: eas exits 130
/// without waiting for that read (issue 9), the record stays pending and says so, `eas down`
/// removes nothing, and the next `eas up` completes the record.
#[test]
fn sigterm_during_the_install_leaves_the_record_pending_and_the_next_up_completes_it() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let (mut up, pid) = r.up_with_the_installer_hanging();
    // The ledger's `after` read lists CRDs; the installer does not.
    r.server.inject(Some("customresourcedefinitions"), support::Fault::Slow(Duration::from_secs(600)), None);
    up.signal("-TERM");
    let (code, err) = up.exit();
    assert_eq!(code, Some(130), "{err}");
    r.nothing_left(pid, "SIGTERM in install");
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "install"), "interrupted", "{state}");
    assert_eq!(state["exit_code"], 130);
    let ledger = &state["ledger"];
    assert!(ledger["pending"].is_object(), "the record stays pending: {ledger}");
    assert!(ledger["incomplete"].as_str().unwrap_or_default().contains("interrupted"), "{ledger}");
    assert!(
        err.lines().any(|l| l.contains("next:") && l.contains("pending") && l.contains(" up --yes")),
        "the next line says how to complete the record: {err}"
    );

    r.server.clear_faults();
    let down = r.down();
    assert_eq!(down.status.code(), Some(1), "{}", text(&down.stderr));
    assert!(text(&down.stderr).contains("incomplete"), "{}", text(&down.stderr));

    r.set_mode("ok");
    r.up_ok(&["--yes"]);
    let ledger = &r.state_file().unwrap()["ledger"];
    assert!(ledger.get("pending").is_none() && ledger.get("incomplete").is_none(), "{ledger}");
    let created = ledger["created"]["namespaces"].to_string();
    assert!(created.contains("kserve") && created.contains("llm-inference"), "{ledger}");
}

/// Issue 32: after Ctrl-C during the install, the one `next:` line is the run's own command line
/// (every flag it was given, and the CA bundle it took from the environment), naming the secrets
/// to set, never their values, and saying that `eas down` removes nothing meanwhile (two lines
/// used to disagree on that). Run verbatim by a shell, with the secrets set and the CA bundle's
/// variable unset, it completes the install.
#[test]
fn the_resume_line_printed_after_an_interrupt_completes_the_install_when_run_verbatim() {
    let _engine = support::docker::engine();
    let r = run("hang");
    let err = r.interrupt_the_install("-INT");
    let nexts: Vec<&str> = err.lines().filter(|l| l.contains("next:")).collect();
    assert_eq!(nexts.len(), 1, "one cause, one next: line: {err}");
    let next = nexts[0];
    assert!(next.contains("with HF_TOKEN, ") && next.contains("`eas down` removes nothing"), "{next}");
    assert!(sentinel_leaks(&[("next", next)], &[]).is_empty(), "{next}");
    let line = next.split('`').nth(1).expect("the command in backquotes");
    for flag in [
        "--kubeconfig",
        "--state-dir",
        "up --yes",
        "--pins",
        "--base-image",
        "--allow-unpinned-base",
        "--containerd-config",
        "--nri-socket",
        "--eas-repo",
        "--ei-repo",
        "--eat-repo",
        "--ca-bundle",
    ] {
        assert!(line.contains(flag), "{flag} is not carried: {line}");
    }

    r.set_mode("ok");
    let base = r.eas();
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(line).current_dir(base.get_current_dir().unwrap());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => shell.env(k, v),
            None => shell.env_remove(k),
        };
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_eas")).parent().unwrap().display().to_string();
    shell.env("PATH", format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())).env_remove("EAS_CA_BUNDLE");
    let again = shell.output().unwrap();
    assert!(again.status.success(), "{line}\n{}", text(&again.stderr));
    let state = r.state_file().unwrap();
    assert_eq!(state["exit_code"], 0, "{state}");
    let ledger = &state["ledger"];
    assert!(ledger.get("pending").is_none() && ledger.get("incomplete").is_none(), "{ledger}");
}

#[test]
fn up_interrupted_while_verifying_marks_verify_interrupted() {
    let _engine = support::docker::engine();
    for sig in ["-INT", "-TERM"] {
        let r = run("never-ready");
        let mut up = r.start_up(&["--yes", "--verify-timeout", "600"], &[]);
        let pid = up.child.id();
        wait_for("the verify phase", Duration::from_secs(600), || {
            r.state_file().is_some_and(|s| phase_status(&s, "verify") == "running")
        });
        up.signal(sig);
        let (code, err) = up.exit();
        assert_eq!(code, Some(130), "{sig}: {err}");
        let state = r.state_file().unwrap();
        assert_eq!(phase_status(&state, "verify"), "interrupted", "{sig}: {state}");
        assert_eq!(phase_status(&state, "install"), "done", "{sig}: {state}");
        assert_eq!(state["exit_code"], 130);
        assert!(err.contains("next: verify was interrupted"), "{sig}: {err}");
        r.nothing_left(pid, sig);
    }
}

/// SIGTERM while the installer's teardown runs in its bastion container (it hangs after removing
/// the model services): eas exits 130, the container is gone, the record is kept and says the
/// down was interrupted, and the next `eas down` finishes from the record.
#[test]
fn down_interrupted_inside_the_teardown_container_keeps_the_record_and_down_again_works() {
    let _engine = support::docker::engine();
    let r = installed();
    r.set_mode("teardown-hangs");
    // The teardown's first component (llm_services) removed its namespace; the next one hangs.
    r.interrupt_down("-TERM", "the teardown to hang", |pid| {
        !r.namespaces().contains(&"llm-inference".to_string()) && !containers_of(pid).is_empty()
    });

    r.set_mode("ok");
    let again = r.down_ok();
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(!r.namespaces().contains(&ns.to_string()), "{ns} was left:\n{}", text(&again.stderr));
    }
    assert!(r.state_file().is_none(), "the record is gone after a complete down");
}

/// `eas down` stopped while it reads the cluster: exit 130, the record kept and saying so, and
/// the next `eas down` removes the install.
#[test]
fn down_interrupted_while_reading_the_cluster_keeps_the_record_and_down_again_works() {
    let _engine = support::docker::engine();
    let r = installed();
    r.server.inject(Some("customresourcedefinitions"), support::Fault::Slow(Duration::from_secs(600)), None);
    r.server.clear_requests();
    r.interrupt_down("-INT", "down's snapshot", |_| {
        r.server.requests().iter().any(|l| l.path.contains("customresourcedefinitions"))
    });

    r.server.clear_faults();
    // `eas status` says the down was interrupted and what to do.
    let status = r.eas().args(["status", "--output", "json"]).output().unwrap();
    assert!(status.status.success(), "{}", text(&status.stderr));
    let doc: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(support::schema_errors("eas-status.v1", &doc), Vec::<String>::new(), "{doc}");
    assert_eq!(doc["installed"]["down"]["status"], "interrupted", "{doc}");
    let table = text(&r.eas().arg("status").output().unwrap().stdout);
    assert!(table.contains("last down interrupted") && table.contains("run eas down again"), "{table}");
    r.down_ok();
    assert!(!r.namespaces().contains(&"kserve".to_string()));
    assert!(r.state_file().is_none(), "the record is gone after a complete down");
}

/// `eas support-bundle` after a failed install: the installer's log tail, the events of
/// kube-system and of the nodes, the nodes' conditions and the manifest, in a 0600 file; no
/// sentinel (the kubeconfig's token, the installer's secret variables, a proxy URL's password)
/// in any file, though an event repeats them all. Then with the API gone: exit 0 with what is
/// local, the record found by its context and server, and each missing item named.
#[test]
fn a_support_bundle_after_a_failed_install_holds_the_log_tail_events_and_manifest_and_no_secret() {
    use std::os::unix::fs::PermissionsExt;
    let _engine = support::docker::engine();
    const PROXY_PW: &str = "sentinel-proxy-pw-6b0c";
    let proxy = format!("http://user:{PROXY_PW}@proxy.invalid:3128");
    let r = run("fail-once");
    let first = r.up(&["--yes"]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    // An event (core/v1 Event, the shape of fixtures/clusters/gpu-nodes/events.json) whose
    // message repeats every secret, as a misbehaving component's might.
    let leak = format!("pull failed: Authorization: Bearer {TOKEN}; HF_TOKEN={}; proxy {proxy}", SECRETS[0].1);
    r.server.insert(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "coredns-7b98449c4-x2kq1.18a0c1e5f1c2d3e4", "namespace": "kube-system",
                     "creationTimestamp": "2026-12-04T10:00:00Z"},
        "involvedObject": {"kind": "Pod", "namespace": "kube-system", "name": "coredns-7b98449c4-x2kq1", "apiVersion": "v1"},
        "reason": "Failed", "message": leak, "type": "Warning", "count": 1,
        "firstTimestamp": "2026-12-04T10:00:00Z", "lastTimestamp": "2026-12-04T10:00:00Z",
        "source": {"component": "kubelet", "host": "k3d-gpu-server-0"}}));
    let bundle = r.home.join("bundle.tar.gz");
    let bundle_cmd = |out: &Path| {
        r.eas()
            .env("HTTPS_PROXY", &proxy)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .args(["support-bundle", "--out"])
            .arg(out)
            .output()
            .unwrap()
    };
    let before = r.server.requests().len();
    let o = bundle_cmd(&bundle);
    let err = exited(&o, 0);
    assert_eq!(std::fs::metadata(&bundle).unwrap().permissions().mode() & 0o777, 0o600);
    // Nothing written: the only POSTs are the doctor child's SelfSubjectAccessReviews, which
    // persist nothing; no Secret is read by name (the facts' list of Helm release Secrets is
    // `eas doctor`'s own, and none of it is in the bundle).
    let sent: Vec<_> = r.server.requests()[before..]
        .iter()
        .filter(|q| q.method != "GET" || q.path.contains("/secrets/"))
        .map(|q| format!("{} {}", q.method, q.path))
        .filter(|s| s != "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .collect();
    assert_eq!(sent, Vec::<String>::new());
    let files = support::unpack_bundle(&bundle);
    let names: Vec<&String> = files.keys().collect();
    for want in [
        "state.json",
        "attempt/state.json",
        "facts.json",
        "plan.json",
        "choices.txt",
        "manifest.json",
        "cluster/events/kube-system.json",
        "cluster/events/nodes.json",
        "cluster/nodes.json",
        "status.json",
    ] {
        if want == "attempt/state.json" {
            continue; // only when an attempt came after the install
        }
        assert!(files.contains_key(want), "{want} missing from {names:?}\n{err}");
    }
    let log = files.iter().filter(|(n, _)| n.starts_with("logs/")).map(|(_, b)| b.as_str()).collect::<String>();
    assert!(log.contains("kserve controller not ready"), "the installer's log tail: {names:?}");
    let events = &files["cluster/events/kube-system.json"];
    assert!(events.contains("coredns-7b98449c4-x2kq1") && events.contains("Bearer ***"), "{events}");
    let manifest: Value = serde_json::from_str(&files["manifest.json"]).unwrap();
    assert!(manifest["collected"].as_array().unwrap().iter().any(|c| c == "cluster/events/kube-system.json"));
    assert!(manifest["redacted"]["cluster/events/kube-system.json"].as_u64().unwrap() >= 3, "{manifest}");
    assert!(manifest["not_collected"].is_array(), "{manifest}");
    assert!(!files.values().any(|b| b.contains("\"kind\": \"Secret\"")), "no Secret object in the bundle");
    let mut outputs = vec![("bundle stderr".to_string(), err.clone())];
    outputs.extend(files.iter().map(|(n, b)| (format!("bundle {n}"), b.clone())));

    // The API gone: every request closes without an answer.
    r.server.inject(None, support::Fault::Reset, None);
    let local = r.home.join("local.tar.gz");
    let o = bundle_cmd(&local);
    let err = exited(&o, 0);
    assert!(err.contains("warning: not collected: cluster: the API server does not answer"), "{err}");
    let files = support::unpack_bundle(&local);
    assert!(files.contains_key("state.json") && files.contains_key("plan.json"), "{:?}", files.keys());
    let log = files.iter().filter(|(n, _)| n.starts_with("logs/")).map(|(_, b)| b.as_str()).collect::<String>();
    assert!(log.contains("kserve controller not ready"));
    assert!(!files.keys().any(|n| n.starts_with("cluster/")), "{:?}", files.keys());
    let manifest: Value = serde_json::from_str(&files["manifest.json"]).unwrap();
    let by = manifest["cluster"]["record_found_by"].as_str().unwrap_or_default();
    assert!(by.contains("context k3d-gpu and server"), "{manifest}");
    assert!(manifest["not_collected"].as_array().unwrap().iter().any(|m| m["item"] == "cluster"), "{manifest}");
    outputs.push(("local bundle stderr".into(), err));
    outputs.extend(files.iter().map(|(n, b)| (format!("local bundle {n}"), b.clone())));

    let mut sentinels: Vec<&str> = vec![TOKEN, PROXY_PW];
    sentinels.extend(SECRETS.iter().map(|(_, v)| *v));
    for (what, body) in &outputs {
        for s in &sentinels {
            assert!(!body.contains(s), "{s} in {what}:\n{body}");
        }
    }
}

/// `eas down` tears down with what the run it removes was built from, not with the pins of the
/// day: after the install the pins change (kubectl moved to a file that does not exist, with
/// another sha256), and `down` still runs in the run's own image and says so. The run keeps its
/// pins beside its record, for when that image is gone.
#[test]
fn down_uses_the_runs_image_and_pins_whatever_the_pins_say_now() {
    let _engine = support::docker::engine();
    let r = installed();
    let state = r.state_file().expect("state.json");
    let dir = r.state.join(state["cluster_key"].as_str().unwrap());
    let kept = state["pins_kept"]["file"].as_str().expect("the record names its kept pins");
    assert_eq!(Path::new(kept), dir.join("pins.json"));
    let read = |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    // The same rows with the same values (a null field may be written absent).
    let rows = |v: Value| -> Vec<Value> {
        let strip = |mut r: Value| {
            r.as_object_mut().unwrap().retain(|_, v| !v.is_null());
            r
        };
        v["pins"].as_array().unwrap().iter().cloned().map(strip).collect()
    };
    assert_eq!(rows(read(Path::new(kept))), rows(read(&setup().pins)), "the kept pins are the ones the run read");
    let source = state["pins_kept"]["source"].as_str().unwrap();
    assert!(source.contains(&setup().pins.display().to_string()) && source.contains("--pins"), "{source}");
    let image = state["bastion_image"].as_str().unwrap().to_string();

    // Today's pins: kubectl is somewhere else now.
    let mut today = read(&setup().pins);
    for row in today["pins"].as_array_mut().unwrap() {
        if row["name"] == "kubectl" && row["profile"] == "bastion" {
            row["url"] = "file:///nonexistent/eas-test/kubectl".into();
            row["sha256"] = "0".repeat(64).into();
        }
    }
    let today_file = r.home.join("pins-today.json");
    std::fs::write(&today_file, serde_json::to_string_pretty(&today).unwrap()).unwrap();
    let mut args = setup().down_args();
    let at = args.iter().position(|a| a == "--pins").unwrap() + 1;
    args[at] = today_file.display().to_string();
    let down = r.eas().args(&args).output().unwrap();
    let err = text(&down.stderr);
    assert!(down.status.success(), "eas down failed:\n{err}");
    assert!(err.contains(&format!("with the image the run built: {image}")), "{err}");
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(!r.namespaces().contains(&ns.to_string()), "{ns} was left:\n{err}");
    }
    assert!(r.state_file().is_none(), "the record is gone after a complete down");

    // Installed again, and the run's image gone by the time of `down`: the image is built again
    // from the pins the run kept (Docker's layer cache makes that quick), not from today's. A
    // second tag keeps the layers while the run's tag is removed.
    r.up_ok(&["--yes"]);
    let tag = image.split(" (").next().unwrap().to_string();
    let keep = format!("{tag}-kept-by-test");
    let docker = |args: &[&str]| {
        let o = Command::new("docker").args(args).output().unwrap();
        assert!(o.status.success(), "docker {args:?}: {}", text(&o.stderr));
    };
    docker(&["tag", &tag, &keep]);
    docker(&["image", "rm", &tag]);
    let down = r.eas().args(&args).output().unwrap();
    let err = text(&down.stderr);
    let _ = Command::new("docker").args(["tag", &keep, &tag]).output();
    let _ = Command::new("docker").args(["image", "rm", &keep]).output();
    assert!(down.status.success(), "eas down failed:\n{err}");
    let kept = dir.join("pins.json").display().to_string();
    assert!(err.contains(&format!("{tag} is gone: with an image from the pins the run recorded ({kept}")), "{err}");
    assert!(err.contains("not today's"), "{err}");
    assert!(r.state_file().is_none(), "the record is gone after a complete down");
}

/// A run that fails at a gate after an install is an attempt: the install's record stays as it
/// was (status still says what is installed, and where the last run stopped), and `down` removes
/// the install as its ledger records it, and clears the attempt.
#[test]
fn a_failed_gate_after_an_install_keeps_the_install_and_down_removes_it() {
    let _engine = support::docker::engine();
    let r = installed();
    let installed = r.state_file().expect("state.json");
    r.server.inject(Some("daemonsets"), support::Fault::Status(500, "etcd is down".into()), None);
    let again = r.up(&["--yes"]);
    assert_ne!(again.status.code(), Some(0), "{}", text(&again.stderr));
    r.server.clear_faults();
    assert_eq!(r.state_file().as_ref(), Some(&installed), "the attempt left the install's record as it was");
    assert!(r.attempt_file().is_some(), "the attempt has its own record");
    let status = r.eas().args(["status", "--output", "json"]).output().unwrap();
    let doc: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(doc["installed"]["layer"], "agent-toolkit", "{doc}");
    assert_eq!(doc["installed"]["outcome"], "succeeded", "{doc}");
    assert_eq!(doc["last_run"]["phase"], "facts", "{doc}");
    let err = r.down_removes_the_install();
    assert!(err.contains("agent-toolkit removed"), "{err}");
    assert!(r.state_file().is_none() && r.attempt_file().is_none(), "down cleared the install and the attempt");
}

/// `eas down` on a terminal without `--yes` lists what it will remove, then asks: "n", or the end
/// of input (^D), changes nothing and exits 1; the install is still recorded and in place. `eas
/// down --dry-run` prints the same list on stdout and writes nothing.
#[test]
fn down_on_a_terminal_lists_then_asks_and_no_or_end_of_input_changes_nothing() {
    let _engine = support::docker::engine();
    let r = installed();
    let installed = r.state_file().expect("state.json");
    let args: Vec<String> = setup().down_args().into_iter().filter(|a| a != "--yes").collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for (answer, said) in [("n\n", "not confirmed: nothing was changed"), ("\x04", "no answer (end of input)")] {
        let before = r.server.requests().len();
        let out = support::on_a_terminal(r.eas(), &args, &r.home, answer);
        let shown = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{answer:?}: {shown}");
        let asked = shown.find("Continue? [y/N]").unwrap_or_else(|| panic!("no question: {shown}"));
        let listed = shown.find("llm-inference").unwrap_or_else(|| panic!("no list: {shown}"));
        assert!(listed < asked, "the list comes before the question: {shown}");
        assert!(shown.contains(said), "{answer:?}: {shown}");
        let sent: Vec<_> =
            r.server.requests()[before..].iter().filter(|q| q.method != "GET").map(|q| q.path.clone()).collect();
        assert_eq!(sent, Vec::<String>::new(), "{answer:?}: no write reached the cluster");
        assert_eq!(r.state_file().as_ref(), Some(&installed), "{answer:?}: the record is as it was");
        assert!(r.namespaces().contains(&"llm-inference".to_string()));
    }
    // `eas down --dry-run`: the same list, on stdout, and the line that nothing was written.
    let before = r.server.requests().len();
    let dry = r.eas().args(&args).arg("--dry-run").output().unwrap();
    let listed = text(&dry.stdout);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(listed.contains("llm-inference"), "{listed}");
    assert!(listed.trim_end().ends_with("Nothing was written to the cluster or the state directory."), "{listed}");
    let sent: Vec<_> =
        r.server.requests()[before..].iter().filter(|q| q.method != "GET").map(|q| q.path.clone()).collect();
    assert_eq!(sent, Vec::<String>::new(), "a dry run sends no write");
    assert_eq!(r.state_file().as_ref(), Some(&installed), "the record is as it was");
    r.down_ok();
}

/// The recorded cluster's one node.
/// A run installed on the recorded node with `memory`, the model it deployed, and the JSON
/// plan once the node has `now`.
fn installed_then(memory: &str, now: &str) -> (Run, String, Value) {
    let r = run("ok");
    r.server.update(&server_node(), node_memory(memory));
    r.up_ok(&["--yes"]);
    let was = plan_of(&r)["model_pick"]["name"].as_str().unwrap().to_string();
    r.server.update(&server_node(), node_memory(now));
    let plan = plan_of(&r);
    (r, was, plan)
}

/// The plan's text with its lines unwrapped: one space between words.
fn words(b: &[u8]) -> String {
    text(b).split_whitespace().collect::<Vec<_>>().join(" ")
}

fn server_node() -> ObjectKey {
    ObjectKey::core("nodes", "k3d-gpu-server-0")
}

/// A patch giving the node `m` of memory, as the kubelet reports it.
fn node_memory(m: &str) -> Value {
    json!({"status": {"capacity": {"memory": m}, "allocatable": {"memory": m}}})
}

/// The up_cycle run's log files (one per run that started its prepare phase).
fn log_files(r: &Run) -> usize {
    std::fs::read_dir(&r.state)
        .into_iter()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path().join("logs")).into_iter().flatten())
        .count()
}

fn plan_of(r: &Run) -> Value {
    let out = r.up(&["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out.stderr)));
    assert_eq!(support::schema_errors("eas-plan.v1", &plan), Vec::<String>::new(), "{plan}");
    plan
}

/// Issue 22: a second `eas up` after a completed one runs its plan halves, then verify only (the
/// installer does not start: no new log, no prepare), says `up to date (installed DATE, verified
/// now)` and exits 0; eas's own namespaces, releases and model pod do not count as a change.
/// `--reinstall` runs the installer anyway.
#[test]
fn a_second_up_after_a_completed_one_is_up_to_date_and_verifies_only() {
    let _engine = support::docker::engine();
    let r = run("ok");
    // A 48 GiB node: eas's own model pod (its 25Gi request on this node) would leave too little
    // for the same pick, were it counted against the next run's budget.
    r.server.update(&server_node(), node_memory("50331648Ki"));
    assert_eq!(plan_of(&r)["run_kind"], "install");
    r.up_ok(&["--yes"]);
    let logs = log_files(&r);
    let plan = plan_of(&r);
    assert_eq!(plan["run_kind"], "up-to-date", "{}", plan["since_last"]);
    assert_eq!(plan["since_last"]["decisions"], json!([]), "{plan}");
    assert_eq!(plan["since_last"]["files"], json!([]), "{plan}");
    let second = r.up(&["--yes"]);
    let err = text(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(err.contains("up to date (installed ") && err.contains(", verified now)"), "{err}");
    assert!(!err.contains("init --env") && !err.contains("install agent-toolkit --env"), "the installer ran: {err}");
    assert_eq!(log_files(&r), logs, "no installer log was started:\n{err}");
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "verify"), "done");
    assert_eq!(state["exit_code"], 0);

    r.up_ok(&["--yes", "--reinstall"]);
    assert_eq!(log_files(&r), logs + 1, "--reinstall runs the installer");
    r.down_ok();
    // After `eas down` nothing is installed: the next `eas up` installs.
    assert_eq!(plan_of(&r)["run_kind"], "install");
    let key = std::fs::read_dir(&r.state).unwrap().flatten().map(|d| d.path()).find(|p| p.is_dir());
    assert!(key.is_none_or(|k| !k.join("completed").exists()), "down forgets the completed run");
}

/// Issue 22, as issue 32 item 4 changed it: the recorded node gains memory between two runs.
/// The installed model is kept (a RAM upgrade changes nothing users get), and the plan says the
/// pick would now differ, naming `--repick`; `--repick` picks again: the plan is `reconfigure`,
/// `since_last` names the model that changed and the fact it now follows from, and the install
/// removes the previous model first.
#[test]
fn more_node_memory_keeps_the_model_and_repick_changes_it() {
    let _engine = support::docker::engine();
    // The desktop with 48 GiB (below the 64 GiB the fallback models need, data/models.json),
    // then the recorded node's own memory, 125 GiB.
    let (r, was, plan) = installed_then("50331648Ki", "131530088Ki");
    let since = &plan["since_last"];
    assert_eq!(plan["model_pick"]["name"], was.as_str(), "the installed model is kept: {}", plan["model_pick"]);
    let reason = plan["model_pick"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("kept: the installed model; the pick would now be ")
            && reason.ends_with("`eas up --repick` takes it"),
        "{reason}"
    );
    let facts = since["facts"].to_string();
    assert!(facts.contains("node k3d-gpu-server-0 allocatable memory 50331648Ki -> 131530088Ki"), "{facts}");
    assert!(!since["decisions"].to_string().contains("\"model\""), "the model did not change: {since}");
    assert!(!plan["commands"].to_string().contains("undeploy"), "nothing is undeployed: {}", plan["commands"]);
    let shown = words(&r.up(&["--dry-run"]).stdout);
    assert!(shown.contains(&format!("model {was} (kept: the installed model; the pick would now be")), "{shown}");

    // --repick: the pick is made again.
    let out = r.up(&["--dry-run", "--output", "json", "--repick"]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out.stderr)));
    let since = &plan["since_last"];
    assert_eq!(plan["run_kind"], "reconfigure", "{since}");
    let decisions = since["decisions"].as_array().unwrap();
    let model = decisions.iter().find(|d| d["key"] == "model").unwrap_or_else(|| panic!("no model change: {since}"));
    assert!(model["from"].as_str().unwrap().starts_with(&format!("model: {was} (")), "{model}");
    assert!(!model["why"].as_str().unwrap().is_empty(), "{model}");
    let picked = plan["model_pick"]["name"].as_str().unwrap().to_string();
    assert_ne!(picked, was);
    assert!(reason.contains(&format!("the pick would now be {picked} (")), "the plan named this pick: {reason}");
    let shown = text(&r.up(&["--dry-run", "--repick"]).stdout);
    assert!(shown.contains("since the last up (run: reconfigure") && shown.contains("decision model:"), "{shown}");
    // The model changed: the install phase removes the previous pick first, and says so.
    let undeploy = json!(["./model-manager", "undeploy", was, "--wait"]);
    assert!(plan["commands"].as_array().unwrap().iter().any(|c| c["argv"] == undeploy), "{}", plan["commands"]);
    assert!(
        plan["decisions"].to_string().contains(&format!("undeploy: {was} before the install")),
        "{}",
        plan["decisions"]
    );
    let was_key = ObjectKey { name: was.clone(), ..model_key() };
    assert!(r.server.object(&was_key).is_some(), "the first run deployed {was}");
    r.up_ok(&["--yes", "--repick"]);
    assert!(r.install_log().contains(&format!("undeployed: {was}")), "{}", r.install_log());
    assert!(r.server.object(&was_key).is_none(), "{was} is still deployed");
    assert!(r.server.object(&ObjectKey { name: picked.clone(), ..model_key() }).is_some(), "{picked} is not deployed");
    // And the new pick is the installed one from now on: the next plan keeps it, up to date.
    let plan = plan_of(&r);
    assert_eq!((plan["run_kind"].as_str(), plan["model_pick"]["name"].as_str()), (Some("up-to-date"), Some(&*picked)));
    r.down_ok();
}

/// Issue 32 item 4: the node shrinks below the installed model: it is not kept, the pick is
/// made again, and "since the last up" says why.
#[test]
fn a_node_that_shrinks_below_the_kept_model_picks_again_and_says_why() {
    let _engine = support::docker::engine();
    // The recorded node's own 125 GiB (the preference), then 16 GiB: below what its pod needs.
    let (r, was, plan) = installed_then("131530088Ki", "16777216Ki");
    let since = &plan["since_last"];
    assert_eq!(plan["run_kind"], "reconfigure", "{since}");
    let picked = plan["model_pick"]["name"].as_str().unwrap_or_else(|| panic!("{}", plan["model_pick"]));
    assert_ne!(picked, was);
    let decisions = since["decisions"].as_array().unwrap();
    let model = decisions.iter().find(|d| d["key"] == "model").unwrap_or_else(|| panic!("no model change: {since}"));
    let why = model["why"].as_str().unwrap();
    assert!(why.starts_with(&format!("the installed model {was} is not kept: {was}: does not fit")), "{why}");
    let shown = words(&r.up(&["--dry-run"]).stdout);
    assert!(shown.contains(&format!("decision model: {was} (")), "{shown}");
    assert!(shown.contains(&format!("because the installed model {was} is not kept")), "{shown}");
    r.down_ok();
}

/// Issue 32 item 3: runs remember their inputs. The install (of the inference layer, not the
/// default) records its selection; after it, `eas up --yes` with no flags (the pins from the
/// user's pins file, which are never recorded) fills the layer, the node files, the base image
/// and the trees' mirrors from the record once the cluster is identified, names each `(from the
/// last install)`, and is up to date; a setting given otherwise is named in "since the last up"
/// with its flag. The support bundle's doctor runs with the recorded selection: the healthy
/// install's doctor.json has no failure.
#[test]
fn after_an_install_up_with_no_flags_is_up_to_date() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let pins = r.home.join("config/eas/pins.json");
    std::fs::create_dir_all(pins.parent().unwrap()).unwrap();
    std::fs::copy(&setup().pins, &pins).unwrap();
    let mut args = setup().up_args();
    let at = args.iter().position(|a| a == "--pins").unwrap();
    args.drain(at..at + 2);
    let first = r.eas().arg("up").args(&args).args(["--layer", "inference", "--yes"]).output().unwrap();
    assert!(first.status.success(), "{}", text(&first.stderr));
    let selection = &r.state_file().unwrap()["selection"];
    assert_eq!(selection["layer"], "inference", "{selection}");
    assert_eq!(selection["base_image"], "eas-test-base:bookworm", "{selection}");
    assert_eq!(selection["nodes.nri_socket"], json!(["k3d-gpu-server-0=present"]), "{selection}");
    assert!(selection["mirrors.eas"].as_str().unwrap().ends_with("/eas"), "{selection}");
    assert!(selection.get("pins").is_none(), "the pins are never recorded: {selection}");
    let logs = log_files(&r);

    let out = r.eas().args(["up", "--dry-run", "--output", "json"]).output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out.stderr)));
    assert_eq!(plan["run_kind"], "up-to-date", "{}", plan["since_last"]);
    assert_eq!((plan["layer"].as_str(), plan["selection"]["layer"].as_str()), (Some("inference"), Some("inference")));
    let settings = plan["settings"].as_array().unwrap();
    for key in ["layer", "base_image", "allow_unpinned_base", "nodes.containerd_config", "mirrors.eas", "mirrors.eat"] {
        let s = settings.iter().find(|s| s["key"] == key).unwrap_or_else(|| panic!("{key}: {settings:?}"));
        assert_eq!((s["source"].as_str(), s["from"].as_str()), (Some("last-install"), Some("the last install")), "{s}");
    }
    let shown = words(&r.eas().args(["up", "--dry-run"]).output().unwrap().stdout);
    assert!(shown.contains("base_image eas-test-base:bookworm (from the last install)"), "{shown}");
    assert!(shown.contains("layer inference (from the last install)"), "{shown}");
    let second = r.eas().args(["up", "--yes"]).output().unwrap();
    let err = text(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(err.contains("up to date (installed "), "{err}");
    assert_eq!(log_files(&r), logs, "the installer did not run:\n{err}");
    assert_eq!(r.state_file().unwrap()["layer"], "inference", "the record keeps the layer it filled");

    // A mirror given again by another path: named with its flag; nothing else changes.
    let other = r.home.join("eas-mirror");
    std::os::unix::fs::symlink(setup().repos.join("eas"), &other).unwrap();
    let out = r.eas().args(["up", "--dry-run", "--output", "json", "--eas-repo"]).arg(&other).output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out.stderr)));
    let changed = plan["since_last"]["settings"].to_string();
    assert!(changed.contains(&format!("-> {} (from --eas-repo)", other.display())), "{changed}");

    // The support bundle's doctor runs with the recorded selection: no failure.
    let bundle = r.home.join("bundle.tar.gz");
    let o = r.eas().args(["support-bundle", "--out"]).arg(&bundle).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let files = support::unpack_bundle(&bundle);
    let doctor: Value = serde_json::from_str(&files["doctor.json"]).unwrap();
    let failed: Vec<&Value> = doctor["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "fail").collect();
    assert_eq!(failed, Vec::<&Value>::new(), "{doctor}");

    // eas init with no flag declares what was installed, each named, not the defaults.
    let o = r.eas().args(["init", "-o", "-"]).output().unwrap();
    let (file, said) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{said}");
    assert!(file.lines().any(|l| l == "layer: inference"), "{file}");
    assert!(file.lines().any(|l| l == "base_image: eas-test-base:bookworm"), "{file}");
    assert!(said.contains("layer inference: from the last install"), "{said}");
    r.down_ok();
}

/// Issue 22: the pins move (a new EI commit) after a completed run: the plan is `upgrade`, the
/// run keeps its work tree and takes the installer's own path (`init ... --upgrade`, which
/// re-pins `ext/`), then installs and verifies; `eas down` afterwards leaves every object that
/// existed before the first install.
#[test]
fn changed_pins_upgrade_through_init_upgrade_and_down_keeps_what_was_there() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let before = r.namespaces();
    r.up_ok(&["--yes"]);
    // A later EI commit, and pins naming it; the other rows unchanged.
    let sha = later_ei_commit("later", |ei| {
        // Upstream moves an entry eas does not pick to another server version.
        let catalog = ei.join("model_manager/models.yaml");
        let was = std::fs::read_to_string(&catalog).unwrap();
        let moved = was.replacen(
            "model_id: BAAI/bge-base-en-v1.5\n    category: embed\n    runtime: vllm\n    server_version: \"0.24.0\"",
            "model_id: BAAI/bge-base-en-v1.5\n    category: embed\n    runtime: vllm\n    server_version: \"0.19.1\"",
            1,
        );
        assert_ne!(moved, was);
        // And the pick's own memory: the upgrade decides against the copy init seeded (with eas's
        // edits), which is what the installer reads, not the new catalog's 20Gi.
        let moved = moved.replacen(
            "model_id: Qwen/Qwen2.5-Coder-7B-Instruct\n    category: llm\n    runtime: vllm\n    server_version: \"0.24.0\"\n    cpu: 16\n    memory: 16Gi",
            "model_id: Qwen/Qwen2.5-Coder-7B-Instruct\n    category: llm\n    runtime: vllm\n    server_version: \"0.24.0\"\n    cpu: 16\n    memory: 20Gi",
            1,
        );
        assert!(moved.contains("memory: 20Gi"), "the synthetic catalog's qwen2-5-coder-7b entry changed shape");
        std::fs::write(&catalog, moved).unwrap();
    });
    let pins = r.own_pins();
    support::trees::point_main_pins(&pins, &[("ei".to_string(), sha.clone())]);
    let args = |extra: &[&str]| r.up_args_pinned(&pins, extra);
    let plan = r.eas().args(args(&["--dry-run", "--output", "json"])).output().unwrap();
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap_or_else(|_| panic!("{}", text(&plan.stderr)));
    assert_eq!(plan["run_kind"], "upgrade", "{}", plan["since_last"]);
    assert_eq!(plan["since_last"]["pins"][0]["tree"], "ei", "{}", plan["since_last"]);
    assert_eq!(
        plan["since_last"]["pins"][0]["commits"], 1,
        "one commit later, as the mirror counts: {}",
        plan["since_last"]
    );
    assert_eq!(support::schema_errors("eas-plan.v1", &plan), Vec::<String>::new(), "{plan}");
    let listed = plan["since_last"]["catalog"].to_string();
    assert!(
        listed.contains("entry bge-base-en differs at ei@") && listed.contains("models.yaml: server_version"),
        "the new catalog's change to the seeded models.yaml: {listed}"
    );
    let prepare = plan["commands"].as_array().unwrap().iter().find(|c| c["phase"] == "prepare").unwrap();
    assert_eq!(prepare["argv"].as_array().unwrap().last().unwrap(), "--upgrade", "{prepare}");
    let decisions = plan["decisions"].to_string();
    assert!(decisions.contains("EI catalog env/k3d-gpu/models.yaml (as init seeded it"), "{decisions}");
    assert!(!decisions.contains("memory 20 GiB"), "the new catalog's memory does not decide: {decisions}");
    assert!(
        text(&r.eas().args(args(&["--dry-run"])).output().unwrap().stderr)
            .contains("model catalog: env/k3d-gpu/models.yaml (as init seeded it")
    );

    // `init --upgrade` refuses an ext/ checkout with changes to tracked files: the run fails in
    // prepare, before the installer installs anything.
    let key = r.state_file().unwrap()["cluster_key"].as_str().unwrap().to_string();
    let ext = r.state.join(&key).join("work/eas/ext/enterprise.ai-inference");
    let tracked = ext.join("config.yaml");
    let original = std::fs::read_to_string(&tracked).unwrap();
    std::fs::write(&tracked, format!("{original}# a local edit\n")).unwrap();
    let dirty = r.eas().args(args(&["--yes"])).output().unwrap();
    assert_eq!(dirty.status.code(), Some(1), "{}", text(&dirty.stderr));
    assert!(
        text(&dirty.stderr).contains("ext/enterprise.ai-inference has uncommitted changes to tracked files"),
        "{}",
        text(&dirty.stderr)
    );
    // Before its install phase the run is an attempt: the completed install's record stays.
    assert_eq!(phase_status(&r.attempt_file().unwrap(), "prepare"), "failed");
    assert_eq!(phase_status(&r.state_file().unwrap(), "verify"), "done");
    // Reverted, the next run takes the same path.
    std::fs::write(&tracked, original).unwrap();
    let up = r.eas().args(args(&["--yes"])).output().unwrap();
    let err = text(&up.stderr);
    assert!(up.status.success(), "{err}\n{}", r.install_log());
    let log = r.install_log();
    assert!(log.contains("layer=agent-toolkit  (upgrade)"), "the stand-in's init --upgrade: {log}");
    assert!(log.contains(&format!("repinned: ext/enterprise.ai-inference → {sha}")), "{log}");
    let state = r.state_file().unwrap();
    assert_eq!(state["pins"]["shas"]["ei"], sha.as_str());
    assert_eq!(phase_status(&state, "verify"), "done");

    let down = r.eas().args(setup().down_args()).output().unwrap();
    assert!(down.status.success(), "{}", text(&down.stderr));
    let after = r.namespaces();
    for ns in &before {
        assert!(after.contains(ns), "{ns} existed before the first install and is gone: {after:?}");
    }
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(!after.contains(&ns.to_string()), "{ns} was left: {after:?}");
    }
}

/// Issue 21 item 5, a real run behind a proxy with a password (tinyproxy on loopback, which
/// relays eas's calls to the recorded cluster): the computed `no_proxy` is in the work tree's
/// `env/<env>/eas-overrides.yaml` (the extra vars the installer is given) and as
/// `network.no_proxy` in `env/<env>/models.yaml`, the proxy URLs only as environment lookups, and
/// the password is in no output, state, log or work-tree file (the installer's own log there,
/// where it shows the proxy it uses, included).
#[test]
fn a_proxied_install_writes_no_proxy_where_the_installer_reads_it_and_the_password_nowhere() {
    let _engine = support::docker::engine();
    let password = "Sentinel-Proxy-Pass-up-31d9";
    let proxy = support::forward_proxy::ForwardProxy::start("eas", password);
    let r = run("ok");
    let out = r
        .eas()
        .args(r.up_args(&["--yes"]))
        .env("HTTP_PROXY", proxy.url())
        .env("HTTPS_PROXY", proxy.url())
        .env("NO_PROXY", "corp.example")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "eas up failed:\n{stderr}");
    assert!(!proxy.relayed().is_empty(), "eas reached the cluster through the proxy");
    let files = walk(&r.state);
    let find = |suffix: &str| {
        files.iter().find(|p| p.to_string_lossy().ends_with(suffix)).unwrap_or_else(|| panic!("no {suffix}: {files:?}"))
    };
    let overrides = std::fs::read_to_string(find("/env/k3d-gpu/eas-overrides.yaml")).unwrap();
    let want = "corp.example,localhost,127.0.0.1,10.42.0.0/16,10.43.0.0/16,172.18.0.2,.svc,.cluster.local";
    assert!(overrides.contains(&format!("no_proxy: \"{want}")), "{overrides}");
    assert!(overrides.contains(r#"https_proxy: "{{ lookup('env', 'HTTPS_PROXY') }}""#), "{overrides}");
    let models = std::fs::read_to_string(find("/env/k3d-gpu/models.yaml")).unwrap();
    assert!(models.contains(&format!("  no_proxy: \"{want}")), "{models}");
    assert!(models.contains("  https_proxy: \"\""), "the proxy URL is not written into the catalog:\n{models}");
    // The installer shows the proxy it uses and tees it into its own log in the work tree: masked.
    let tree_log = std::fs::read_to_string(find("/env/k3d-gpu/logs/install-agent-toolkit.log")).unwrap();
    assert!(tree_log.contains("Proxy in use — https_proxy=http://***@127.0.0.1:"), "shown, masked: {tree_log}");
    let mut leaks = Vec::new();
    for (name, body) in [("stdout", &stdout), ("stderr", &stderr)] {
        if body.contains(password) {
            leaks.push(name.to_string());
        }
    }
    // The state directory is under the home directory.
    for f in walk(&r.home) {
        if std::fs::read(&f).is_ok_and(|b| String::from_utf8_lossy(&b).contains(password)) {
            leaks.push(f.display().to_string());
        }
    }
    assert_eq!(leaks, Vec::<String>::new(), "the proxy password was written");
    r.down_ok();
}

/// `--probe-nodes` on a real run (#21): with no `--containerd-config` and no k3d container on the
/// Docker Engine, the recorded node is read by a probe pod (the recorded server plays its kubelet,
/// the node holds the busybox image), the install goes on, and the run's ledger records the probe
/// pod as its own, deleted once read; none is left on the cluster.
#[test]
fn a_real_run_with_probe_nodes_records_its_probe_pod_in_the_ledger() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let key = ObjectKey::core("nodes", "k3d-gpu-server-0");
    let mut images = r.server.object(&key).unwrap()["status"]["images"].as_array().cloned().unwrap_or_default();
    images.push(json!({"names": ["docker.io/rancher/mirrored-library-busybox:1.36.1"]}));
    r.server.update(&key, json!({"status": {"images": images}}));
    let mut args = setup().up_args();
    for flag in ["--containerd-config", "--nri-socket"] {
        let at = args.iter().position(|a| a == flag).unwrap();
        args.drain(at..at + 2);
    }
    let out = r.eas().arg("up").args(&args).args(["--yes", "--probe-nodes"]).output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("containerd facts read by a probe pod"), "{err}");
    let state = r.state_file().unwrap();
    let own = state["ledger"]["own"].as_array().cloned().unwrap_or_default();
    let probe = own.iter().find(|o| o["kind"] == "Pod").unwrap_or_else(|| panic!("{:#}", state["ledger"]));
    assert!(probe["name"].as_str().unwrap().starts_with("eas-probe-"), "{probe}");
    assert_eq!(probe["namespace"], "kube-system");
    assert!(probe["holder"].as_str().unwrap().contains("probe of node k3d-gpu-server-0, deleted"), "{probe}");
    let left: Vec<String> = r.server.names("v1", "pods").into_iter().filter(|p| p.contains("eas-probe-")).collect();
    assert_eq!(left, Vec::<String>::new());
    r.down_ok();
}

/// Issue 32: a reviewed plan, applied exactly. `eas up --dry-run --out DIR` saves the plan on the
/// recorded desktop at 48 GiB; `eas up --plan DIR --yes` (no selection flag: the layer, the pins
/// file and the rest come from the saved plan) refuses, before its first write and naming the
/// difference, when the node has since grown to its recorded 125 GiB (the pick moves) and when the
/// pins file has since moved EI's pin; with both as reviewed it installs what the plan says.
#[test]
fn a_saved_plan_is_applied_unchanged_and_refused_naming_a_moved_pick_or_pin() {
    let _engine = support::docker::engine();
    let r = run("ok");
    let node = server_node();
    r.server.update(&node, node_memory("50331648Ki"));
    let pins = r.own_pins();
    let saved = r.home.join("reviewed");
    let with_pins = |extra: &[&str]| r.up_args_pinned(&pins, extra);
    let dry = r.eas().args(with_pins(&["--dry-run", "--out", saved.to_str().unwrap()])).output().unwrap();
    let err = text(&dry.stderr);
    assert!(dry.status.success(), "{err}");
    assert!(err.contains("wrote plan.json, plan.txt, ") && err.contains(&saved.display().to_string()), "{err}");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(saved.join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan["blockers"], json!([]), "{plan:#}");
    let picked = plan["model_pick"]["name"].as_str().unwrap().to_string();
    let ei = plan["commits"]["ei"].as_str().unwrap().to_string();
    assert_eq!(plan["trees"]["ei"], ei, "{plan:#}");
    // The saved plan opens and closes with the command that applies it: no selection flag.
    let cmd = plan["apply_command"].as_str().unwrap();
    assert!(cmd.contains(" up --yes ") && cmd.ends_with(&format!(" --plan {}", saved.display())), "{cmd}");
    assert!(!cmd.contains("--pins") && text(&dry.stdout).contains(&format!("--plan {}", saved.display())), "{cmd}");
    // The saved plan's inputs, without its selection flags (refused beside --plan).
    let args = |extra: &[&str]| {
        let mut v = r.up_args(&[&["--plan", saved.to_str().unwrap()], extra].concat());
        let at = v.iter().position(|a| a == "--pins").unwrap();
        v.drain(at..at + 2);
        v
    };
    let apply = || r.eas().args(args(&["--yes"])).output().unwrap();
    let refused_for = |what: &str| {
        let out = apply();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{what}: {err}");
        assert_eq!(support::writes(&r.server), Vec::<String>::new(), "{what}: no write reached the cluster");
        assert!(r.state_file().is_none(), "{what}: nothing installed");
        let prefix = format!("REFUSE: the saved plan {} differs: ", saved.join("plan.json").display());
        let lines: Vec<String> = err.lines().filter_map(|l| l.strip_prefix(&prefix)).map(str::to_string).collect();
        assert!(!lines.is_empty(), "{what}: {err}");
        lines
    };

    // The node grows to its recorded 125 GiB: the pick is no longer the one reviewed.
    r.server.update(&node, node_memory("131530088Ki"));
    let lines = refused_for("more memory");
    let pick = lines.iter().find(|l| l.starts_with("model pick: ")).unwrap_or_else(|| panic!("{lines:?}"));
    let (was, now) = pick.split_once(" in the saved plan, ").unwrap();
    assert!(was.starts_with(&format!("model pick: {picked} (fit: ")), "{pick}");
    assert!(!now.starts_with(&picked), "another model now: {pick}");
    assert!(!lines.iter().any(|l| l.starts_with("pin ")), "the pins did not move: {lines:?}");
    // The dry run with --plan lists the same differences as refusals, first among its blockers.
    let dry = r.eas().args(args(&["--dry-run", "--output", "json"])).output().unwrap();
    assert_eq!(dry.status.code(), Some(3), "{}", text(&dry.stderr));
    let now: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let causes: Vec<String> = now["blockers"].as_array().unwrap().iter().map(|b| b["cause"].to_string()).collect();
    assert!(causes[0].contains("differs: ") && causes.iter().any(|c| c.contains(pick.as_str())), "{causes:?}");
    r.server.update(&node, node_memory("50331648Ki"));

    // The pins file moves EI's pin to a later commit: named, with both commits.
    let later = later_ei_commit("saved-plan", |_| {});
    support::trees::point_main_pins(&pins, &[("ei".to_string(), later.clone())]);
    let lines = refused_for("a moved pin");
    assert!(lines.contains(&format!("pin ei: {ei} in the saved plan, {later} now")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("model pick: ")), "the pick did not move: {lines:?}");

    // As reviewed: on a terminal without --yes it still asks ("n" changes nothing), then with
    // --yes it is applied, and what it installs is the plan's pick.
    r.own_pins(); // the setup's pins again, at the same path
    let asked = args(&[]);
    let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    let out = support::on_a_terminal(r.eas(), &asked, &r.home, "n\n");
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("eas up installs agent-toolkit on k3d-gpu. Continue? [y/N]"), "{shown}");
    assert!(r.state_file().is_none() && support::writes(&r.server).is_empty(), "not confirmed: {shown}");
    let out = apply();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "verify"), "done");
    assert!(r.server.object(&ObjectKey { name: picked.clone(), ..model_key() }).is_some(), "{picked} is deployed");
    r.down_ok();
}

/// Issue 32 items 2 and 4 together: after an install, the node gains memory; a dry run with
/// `--repick` saved with `--out DIR` records `repick` in its selection, and `eas up --plan DIR`
/// applies it as reviewed: the pick is made again (not the installed model kept, which the saved
/// plan would refuse as a moved pick), the new model is deployed and the old one removed.
#[test]
fn a_plan_saved_with_repick_is_applied_with_it() {
    let _engine = support::docker::engine();
    let (r, was, _) = installed_then("50331648Ki", "131530088Ki");
    let saved = r.home.join("repicked");
    let dry = r.up(&["--dry-run", "--repick", "--out", saved.to_str().unwrap()]);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(saved.join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan["selection"]["repick"], true, "{}", plan["selection"]);
    let picked = plan["model_pick"]["name"].as_str().unwrap().to_string();
    assert_ne!(picked, was, "the pick made again differs: {}", plan["model_pick"]);
    assert!(!plan["apply_command"].as_str().unwrap().contains("--repick"), "{}", plan["apply_command"]);
    // The saved plan's inputs, without its selection flags (refused beside --plan).
    let mut args = r.up_args(&["--plan", saved.to_str().unwrap(), "--yes"]);
    let at = args.iter().position(|a| a == "--pins").unwrap();
    args.drain(at..at + 2);
    let applied = r.eas().args(&args).output().unwrap();
    let err = text(&applied.stderr);
    assert!(applied.status.success() && !err.contains("REFUSE:"), "applied as reviewed: {err}");
    assert!(r.install_log().contains(&format!("undeployed: {was}")), "{}", r.install_log());
    let deployed = |name: &str| r.server.object(&ObjectKey { name: name.to_string(), ..model_key() }).is_some();
    assert_eq!((deployed(&was), deployed(&picked)), (false, true), "{was} removed, {picked} deployed");
    assert!(r.down().status.success(), "eas down after the repick");
}

/// Issue 32 item 1: the prompts and `down`'s preview name the source of each setting that is not
/// a default. The selection declared in ./eas.yaml (context, layer, pins, base image, node
/// files, mirrors), the kubeconfig and state directory as flags, the CA bundle from
/// `EAS_CA_BUNDLE`: `eas up` on a terminal asks naming the layer and context with their file;
/// after the install, `eas down` on a terminal lists its preview naming the context and every
/// setting with its source, then asks naming the context with its file; `eas down --dry-run`
/// prints the same settings.
#[test]
fn the_prompts_and_downs_preview_name_each_settings_source() {
    let _engine = support::docker::engine();
    let (s, r) = (setup(), run("ok"));
    let node = support::fixture(CLUSTER).join("node-files/k3d-gpu-server-0/config.toml");
    let repo = |n: &str| s.repos.join(n).display().to_string();
    let yaml = format!(
        "schema: eas-config/v1\ncontext: k3d-gpu\nlayer: agent-toolkit\npins: {}\nbase_image: {BASE}\n\
         allow_unpinned_base: true\nnodes:\n  containerd_config:\n    k3d-gpu-server-0: {}\n  nri_socket:\n    \
         k3d-gpu-server-0: present\nmirrors:\n  eas: {}\n  ei: {}\n  eat: {}\n",
        s.pins.display(),
        node.display(),
        repo("eas"),
        repo("ei"),
        repo("eat"),
    );
    std::fs::write(r.home.join("eas.yaml"), yaml).unwrap();
    let asked = support::on_a_terminal(r.eas(), &["up"], &r.home, "n\n");
    let shown = words(&asked.stdout);
    assert_eq!(asked.status.code(), Some(1), "{shown}");
    let question = "eas up installs agent-toolkit (from ./eas.yaml) on k3d-gpu (from ./eas.yaml). Continue? [y/N]";
    assert!(shown.contains(question), "{shown}");
    assert!(r.state_file().is_none(), "not confirmed: nothing installed");
    let up = r.eas().args(["up", "--yes"]).output().unwrap();
    assert!(up.status.success(), "{}", text(&up.stderr));

    let settings = [
        format!("setting: kubeconfig {} (from --kubeconfig)", r.server.kubeconfig().display()),
        "setting: context k3d-gpu (from ./eas.yaml)".to_string(),
        format!("setting: state_dir {} (from --state-dir)", r.state.display()),
        format!("setting: ca_bundle {HOST_CA} (from EAS_CA_BUNDLE)"),
        format!("setting: pins {} (from ./eas.yaml)", s.pins.display()),
        format!("setting: base_image {BASE} (from ./eas.yaml)"),
        "setting: allow_unpinned_base true (from ./eas.yaml)".to_string(),
    ];
    let installed = r.state_file().expect("state.json");
    let asked = support::on_a_terminal(r.eas(), &["down"], &r.home, "n\n");
    let shown = words(&asked.stdout);
    assert_eq!(asked.status.code(), Some(1), "{shown}");
    assert!(shown.contains("eas down on k3d-gpu (from ./eas.yaml): layer agent-toolkit (recorded by the run of "));
    for line in &settings {
        assert!(shown.contains(line.as_str()), "{line}: {shown}");
    }
    let question = "eas down changes the cluster k3d-gpu (from ./eas.yaml). Continue? [y/N]";
    let (listed, asked_at) = (shown.find(&settings[0]), shown.find(question));
    assert!(listed.is_some_and(|l| asked_at.is_some_and(|q| l < q)), "listed, then asked: {shown}");
    assert_eq!(r.state_file().as_ref(), Some(&installed), "not confirmed: the record is as it was");
    let dry = r.eas().args(["down", "--dry-run"]).output().unwrap();
    let listed = words(&dry.stdout);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    for line in &settings {
        assert!(listed.contains(line.as_str()), "{line}: {listed}");
    }
    let down = r.eas().args(["down", "--yes"]).output().unwrap();
    assert!(down.status.success(), "{}", text(&down.stderr));
}
