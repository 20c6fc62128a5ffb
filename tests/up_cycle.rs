//! `eas up` → `eas verify` → `eas down` end to end, against a real Docker Engine (the bastion is
//! built from the real Dockerfile) and a stateful recorded cluster (tests/support), with
//! synthetic EAS/EI/EAT trees whose `es_auto_installer.sh` is a test script that acts through
//! the API (fixtures/synthetic/README.md). The failure paths: the installer fails mid-way
//! (resume), no bring-your-own-cluster line (stopped), verification times out (exit 5 with
//! diagnostics), Ctrl-C (130, nothing left running), a second concurrent `eas up` (the lock),
//! and `eas down` twice. The dry run: a plan, and nothing written.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::synthetic_install::{self, CLUSTER, MODEL, Setup, containers_of};
use support::{ClusterServer, ObjectKey};

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

/// The tests share one bastion image; running them one at a time keeps this 2-core machine's
/// Docker Engine from building it twice.
static SERIAL: Mutex<()> = Mutex::new(());

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
    let s = setup();
    let options = support::Options { token: TOKEN.into(), ..support::Options::default() };
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

    fn up(&self, extra: &[&str]) -> Output {
        self.eas().args(self.up_args(extra)).output().unwrap()
    }

    fn spawn_up(&self, extra: &[&str]) -> Child {
        self.eas().args(self.up_args(extra)).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    fn down(&self) -> Output {
        self.eas().args(setup().down_args()).output().unwrap()
    }

    fn namespaces(&self) -> Vec<String> {
        self.server.names("v1", "namespaces")
    }

    fn state_file(&self) -> Option<Value> {
        let dirs = std::fs::read_dir(&self.state).ok()?;
        for d in dirs {
            let p = d.ok()?.path().join("state.json");
            if p.exists() {
                return serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok();
            }
        }
        None
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
    ObjectKey {
        group_version: "serving.kserve.io/v1alpha2".into(),
        resource: "llminferenceservices".into(),
        namespace: "llm-inference".into(),
        name: MODEL.into(),
    }
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn sigint(child: &Child) {
    let st = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
}

#[test]
fn up_verify_down_and_down_again() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

    let down = r.down();
    assert!(down.status.success(), "eas down failed:\n{}", text(&down.stderr));
    let after = r.namespaces();
    for ns in ["cert-manager", "kserve", "llm-inference"] {
        assert!(!after.contains(&ns.to_string()), "{ns} was left: {after:?}\n{}", text(&down.stderr));
    }
    assert!(after.contains(&"node-feature-discovery".to_string()), "the desktop's NFD namespace was deleted");
    assert!(after.contains(&"kube-system".to_string()));
    assert!(text(&down.stderr).contains("--skip nfd"), "{}", text(&down.stderr));
    assert!(r.state_file().is_none(), "the record is gone after a complete down");

    let again = r.down();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("nothing to remove"), "{}", text(&again.stderr));
}

#[test]
fn a_failed_install_says_what_next_and_the_next_up_resumes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run("fail-once");
    let first = r.up(&["--yes"]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let err = text(&first.stderr);
    assert!(err.contains("install") && err.contains("log:"), "{err}");
    assert!(err.contains("next:") && err.contains("eas up"), "{err}");
    assert!(err.contains("kserve controller not ready"), "the installer's last lines are shown: {err}");
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "install"), "failed");
    assert_eq!(state["exit_code"], 1);

    let second = r.up(&["--yes"]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert!(text(&second.stderr).contains("did not finish"), "{}", text(&second.stderr));
    assert_eq!(phase_status(&r.state_file().unwrap(), "verify"), "done");
}

#[test]
fn an_installer_without_its_byo_line_is_stopped() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

#[test]
fn verification_that_times_out_exits_5_with_diagnostics() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run("never-ready");
    let out = r.up(&["--yes", "--verify-timeout", "3"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("MainWorkloadReady=False"), "{err}");
    assert!(err.contains("MinimumReplicasUnavailable"), "the condition's reason: {err}");
    assert_eq!(phase_status(&r.state_file().unwrap(), "verify"), "failed");
    assert_eq!(phase_status(&r.state_file().unwrap(), "install"), "done");
}

#[test]
fn ctrl_c_leaves_nothing_running_and_a_second_up_meets_the_lock() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run("hang");
    let child = r.spawn_up(&["--yes"]);
    let pid = child.id();
    wait_for("the installer to hang", Duration::from_secs(600), || r.install_log().contains("Wait for the controller"));
    assert_eq!(containers_of(pid).len(), 1, "one bastion container runs the installer");

    let second = r.up(&["--yes"]);
    assert_ne!(second.status.code(), Some(0));
    let err = text(&second.stderr);
    assert!(err.contains("lock") && err.contains(&pid.to_string()), "the holder is named: {err}");

    sigint(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(containers_of(pid).is_empty(), "left: {:?}", containers_of(pid));
    let state = r.state_file().unwrap();
    assert_eq!(phase_status(&state, "install"), "interrupted");
    assert_eq!(state["exit_code"], 130);
}

#[test]
fn a_dry_run_prints_the_plan_and_writes_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run("ok");
    let out_dir = r.home.join("plan");
    let images_before = Command::new("docker").args(["images", "-q"]).output().unwrap().stdout;
    let out = r.up(&["--dry-run", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    for want in [
        "istio_platform: \"k3d\"",
        "kubernetes_cpu_policy: \"best-effort\"",
        "install agent-toolkit --env k3d-gpu --force",
    ] {
        assert!(plan.contains(want), "plan lacks {want}:\n{plan}");
    }
    assert!(plan.contains("0002") && plan.contains("0006"), "overlay decisions:\n{plan}");
    let names: Vec<String> =
        std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    for f in ["plan.json", "choices.txt", "eas-overrides.yaml", "repos.agent-toolkit.yaml"] {
        assert!(names.contains(&f.to_string()), "{names:?}");
    }
    let writes: Vec<String> =
        r.server.requests().iter().filter(|l| l.method != "GET").map(|l| format!("{} {}", l.method, l.path)).collect();
    assert!(writes.is_empty(), "a dry run wrote to the cluster: {writes:?}");
    assert!(!r.state.exists() || walk(&r.state).is_empty(), "a dry run wrote state: {:?}", walk(&r.state));
    let images_after = Command::new("docker").args(["images", "-q"]).output().unwrap().stdout;
    assert_eq!(images_before, images_after, "a dry run built an image");
    let err = text(&out.stderr);
    let leaks = sentinel_leaks(&[("stdout", &plan), ("stderr", &err)], &[&out_dir, &r.home]);
    assert_eq!(leaks, Vec::<String>::new(), "secrets in the plan, plan.json or the outputs");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

#[test]
fn the_inference_layer_deploys_the_catalog_entry_it_picked() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run("ok");
    // qwen3-0-6b is an entry of the synthetic EI catalog only, not one of eas's candidates.
    let up = r.up(&["--yes", "--layer", "inference", "--model", "qwen3-0-6b"]);
    assert!(up.status.success(), "eas up --layer inference failed:\n{}", text(&up.stderr));
    let key = ObjectKey { name: "qwen3-0-6b".into(), ..model_key() };
    assert!(r.server.object(&key).is_some(), "the autodeploy entry's model server was created");
    assert!(r.server.object(&model_key()).is_none(), "only the picked entry is deployed");
    let state = r.state_file().expect("state.json");
    assert_eq!(phase_status(&state, "verify"), "done", "{state}");
    let decisions = state["decisions"].to_string();
    assert!(decisions.contains("llm_services_deploy_models: true"), "{decisions}");
    assert!(decisions.contains("models.yaml qwen3-0-6b autodeploy: true"), "{decisions}");
    let down = r.down();
    assert!(down.status.success(), "eas down failed:\n{}", text(&down.stderr));
}
