//! Hostile and unlucky input (issues 10 and 23): each case names what must hold, and every one
//! of them failed before the fix it tests. Issue 23's: kubeconfig parse errors without secrets,
//! the swept kubeconfig copy, FIFOs and signals, size limits per file kind, damaged state, bidi and
//! zero-width text, Kubernetes errors in doctor, the CA bundle cut off, an expired plugin token,
//! the proxy hint, and the sentinel test over every output and file.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use support::sentinels::{self, *};
use support::*;

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A credential plugin in `dir` running `script`, and a kubeconfig beside it for `server` whose
/// one user runs it, with `exec` lines beyond its apiVersion and command.
fn plugin_kubeconfig(dir: &Path, server: &str, script: &str, exec: &str) -> (PathBuf, PathBuf) {
    let plugin = dir.join("get-token");
    write_exec(&plugin, script);
    let kubeconfig = dir.join("kubeconfig");
    let user = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n{exec}",
        plugin.display()
    );
    one_user_kubeconfig(&kubeconfig, server, &user);
    (plugin, kubeconfig)
}

#[test]
fn a_failing_credential_plugin_is_one_line_without_its_secrets_and_exits_1() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let (plugin, kubeconfig) = plugin_kubeconfig(
        dir.path(),
        &server.url(),
        "#!/bin/sh\necho starting >&2\necho \"auth failed: token=SECRETTOKEN for $PLUGIN_SECRET\" >&2\nexit 7\n",
        "      args: [\"--secret=ARGSECRET\"]\n      env: [{name: PLUGIN_SECRET, value: ENVSECRET}]\n      \
         interactiveMode: Never\n",
    );
    let out = facts_through(&kubeconfig).output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a run-time failure: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("==>")).collect();
    assert_eq!(
        lines,
        vec![format!(
            "error: kubeconfig: credential plugin {} failed with exit code 7: auth failed: token=*** for ***",
            plugin.display()
        )],
    );
    for secret in ["ARGSECRET", "ENVSECRET", "SECRETTOKEN", "Output {", "KUBERNETES_EXEC_INFO"] {
        assert!(!stderr.contains(secret) && !text(&out.stdout).contains(secret), "{secret} shown: {stderr}");
    }
    assert!(server.requests().is_empty());
}

/// An `--out` directory holding outputs of an earlier run and a file of the user's.
fn stale_out(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    for name in ["plan.json", "choices.txt", "eas-overrides.yaml", "repos.agent-toolkit.yaml"] {
        std::fs::write(out.join(name), "from an earlier run").unwrap();
    }
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    out
}

/// `eas config --facts <facts> --out <stale out>` in `dir`, which must be refused as bad input
/// (exit 2) with the stale outputs removed and the user's file kept: its stderr.
fn config_refused(dir: &Path, facts: &Path) -> String {
    let out_dir = stale_out(dir);
    let out = eas(dir)
        .args(["config", "--facts", facts.to_str().unwrap(), "--out", out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = exited(&out, 2);
    assert_eq!(listing(&out_dir), vec!["notes.txt"], "stale outputs removed, the user's file kept: {stderr}");
    stderr
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn up_checks_layer_and_model_before_any_network_call_and_clears_stale_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, _) = unreachable_kubeconfig(dir.path());
    let pins = root().join("pins.json");
    let cases: [(&[&str], &str); 3] = [
        (&["--layer", "nosuch"], "error: unknown layer \"nosuch\""),
        (&["--model", "nosuch"], "error: unknown model \"nosuch\""),
        // The inference layer takes --model too (the EI catalog's pick); a name neither the
        // catalog nor the built-in candidates hold is bad input there as well.
        (&["--layer", "inference", "--model", "nosuch-either"], "error: unknown model \"nosuch-either\""),
    ];
    for (args, want) in cases {
        let out_dir = stale_out(dir.path());
        let out = eas(dir.path())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["up", "--dry-run", "--out", out_dir.to_str().unwrap(), "--pins", pins.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: bad input, found before the cluster is read: {stderr}");
        assert!(stderr.starts_with(want), "{args:?}: {stderr}");
        assert_eq!(listing(&out_dir), vec!["notes.txt"], "{args:?}: stale outputs removed, the user's file kept");
        let said = format!("; nothing was written to {} (no plan was made)", out_dir.display());
        assert!(stderr.lines().nth(1).is_some_and(|hint| hint.ends_with(&said)), "{args:?}: {stderr}");
    }
}

#[test]
fn a_refused_dry_run_writes_only_its_plan_and_keeps_the_users_file() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let out_dir = stale_out(dir.path());
    let pins = root().join("pins.json");
    let out = eas(&fixture("xeon-amx"))
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .args([
            "up",
            "--dry-run",
            "--out",
            out_dir.to_str().unwrap(),
            "--pins",
            pins.to_str().unwrap(),
            "--layer",
            "erag",
        ])
        .args(facts_args("xeon-amx"))
        .output()
        .unwrap();
    let stderr = exited(&out, 3);
    assert!(stderr.contains("REFUSE: --layer erag"), "{stderr}");
    // A refused plan (issue 32): plan.json and plan.txt, the earlier run's installer files gone,
    // the user's file kept, and eas says what it wrote.
    assert_eq!(listing(&out_dir), vec!["notes.txt", "plan.json", "plan.txt"]);
    assert!(std::fs::read_to_string(out_dir.join("plan.txt")).unwrap().contains("--layer erag"));
    assert!(stderr.contains(&format!("wrote plan.json, plan.txt to {}", out_dir.display())), "{stderr}");
}

/// The xeon-amx cluster with its node's `k3s.io/node-args` annotation replaced by `text`.
fn with_node_args(text: &str) -> ClusterServer {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let key = ObjectKey::core("nodes", "xeon-sr-01");
    let mut node = server.object(&key).expect("the recorded node");
    node["metadata"]["annotations"]["k3s.io/node-args"] = serde_json::Value::String(text.into());
    server.insert(node);
    server
}

const NOT_A_LIST: &str = "server --disable servicelb --cluster-cidr 10.99.0.0/16";
const FORGED_CIDR: &str = "[\"server\",\"--cluster-cidr\",\"10.99.0.0/16\\nkubernetes_accelerator: gpu\"]";

#[test]
fn facts_refuse_node_args_that_are_not_a_list_or_hold_a_bad_cidr() {
    for (text, want) in [
        (NOT_A_LIST, "error: node \"xeon-sr-01\": annotation k3s.io/node-args is not a JSON list of strings"),
        (
            FORGED_CIDR,
            "error: node \"xeon-sr-01\": annotation k3s.io/node-args gives --cluster-cidr \"10.99.0.0/16\\nkubernetes_accelerator: gpu\", which is not a CIDR list",
        ),
    ] {
        let server = with_node_args(text);
        let dir = tempfile::tempdir().unwrap();
        let out_file = dir.path().join("facts.json");
        let out = facts(&server, "xeon-amx", &["--out", out_file.to_str().unwrap()]);
        let stderr = exited(&out, 2);
        assert!(stderr.lines().any(|l| l.starts_with(want)), "{stderr}");
        assert!(stderr.contains("hint: "), "{stderr}");
        assert!(!out_file.exists() && out.stdout.is_empty());
    }
}

#[test]
fn config_refuses_node_args_that_are_not_a_list_or_hold_a_bad_cidr() {
    let facts_text = std::fs::read_to_string(root().join("fixtures/config/desktop-i9/facts.json")).unwrap();
    for (text, want) in [(NOT_A_LIST, "is not a JSON list of strings"), (FORGED_CIDR, "which is not a CIDR list")] {
        let mut doc: serde_json::Value = serde_json::from_str(&facts_text).unwrap();
        doc["nodes"][0]["annotations"]["k3s.io/node-args"] = serde_json::Value::String(text.into());
        let dir = tempfile::tempdir().unwrap();
        let facts_file = dir.path().join("facts.json");
        std::fs::write(&facts_file, doc.to_string()).unwrap();
        let stderr = config_refused(dir.path(), &facts_file);
        assert!(
            stderr.starts_with("error: node ")
                && stderr.contains("annotation k3s.io/node-args")
                && stderr.contains(want),
            "{stderr}"
        );
        assert!(!stderr.contains("\nkubernetes_accelerator"), "no forged line: {stderr}");
    }
}

/// `eas config` on the facts `doc`, which must succeed: its stdout, stderr and `choices.txt`.
fn config_on(doc: &serde_json::Value) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let facts_file = dir.path().join("facts.json");
    std::fs::write(&facts_file, doc.to_string()).unwrap();
    let out_dir = dir.path().join("out");
    let out = eas(dir.path())
        .args(["config", "--facts", facts_file.to_str().unwrap(), "--out", out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let choices = std::fs::read_to_string(out_dir.join("choices.txt")).unwrap();
    (text(&out.stdout), text(&out.stderr), choices)
}

#[test]
fn control_characters_from_the_cluster_are_escaped_in_every_line_for_people() {
    let facts_text = std::fs::read_to_string(root().join("fixtures/config/desktop-i9/facts.json")).unwrap();
    let run = config_on;
    let clean: serde_json::Value = serde_json::from_str(&facts_text).unwrap();
    let mut evil = clean.clone();
    evil["nodes"][0]["name"] = serde_json::Value::String("evil\u{1b}[31m\nFORGED -> line [x]".into());
    let (clean_out, _, clean_choices) = run(&clean);
    let (out, err, choices) = run(&evil);
    for (name, shown, reference) in [("stdout", &out, &clean_out), ("choices.txt", &choices, &clean_choices)] {
        assert!(!shown.contains('\u{1b}'), "{name} holds a raw escape: {shown}");
        assert_eq!(shown.lines().count(), reference.lines().count(), "{name}: no forged line");
        assert!(shown.contains("evil\\u{1b}[31m\\nFORGED"), "{name} shows the name escaped: {shown}");
    }
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn an_endless_or_huge_facts_file_is_refused_at_64_mib() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    // Sparse: 64 MiB and one byte of NULs.
    std::fs::File::create(&big).unwrap().set_len((64 << 20) + 1).unwrap();
    for facts_file in [Path::new("/dev/zero"), big.as_path()] {
        let stderr = config_refused(dir.path(), facts_file);
        assert!(
            stderr.starts_with(&format!("error: facts: {} is larger than 64 MiB", facts_file.display())),
            "{stderr}"
        );
    }
}

#[test]
fn a_ca_bundle_with_a_private_key_is_refused_before_docker_or_the_network() {
    let dir = tempfile::tempdir().unwrap();
    let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap();
    let first_cert: String = {
        let start = system.find("-----BEGIN CERTIFICATE-----").unwrap();
        let end =
            system[start..].find("-----END CERTIFICATE-----").unwrap() + start + "-----END CERTIFICATE-----\n".len();
        system[start..end].to_string()
    };
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&bundle, format!("{first_cert}-----BEGIN PRIVATE KEY-----\nAQID\n-----END PRIVATE KEY-----\n"))
        .unwrap();
    let (kubeconfig, _) = unreachable_kubeconfig(dir.path());
    let pins = root().join("pins.json");
    let runs: [Vec<&str>; 2] = [
        vec!["bastion", "build", "--pins", pins.to_str().unwrap(), "--ca-bundle", bundle.to_str().unwrap()],
        vec!["up", "--dry-run", "--pins", pins.to_str().unwrap(), "--ca-bundle", bundle.to_str().unwrap()],
    ];
    for args in runs {
        let out = eas(dir.path()).arg("--kubeconfig").arg(&kubeconfig).args(&args).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("holds a private key (PRIVATE KEY)"), "{args:?}: {stderr}");
        assert!(!stderr.contains("AQID"));
    }
}

/// The API server behind TLS signed by a CA only `--ca-bundle` names, with a kubeconfig that pins
/// no CA: facts reach it with the bundle (flag before or after the command, or EAS_CA_BUNDLE) and
/// fail on the certificate without it.
#[test]
fn the_ca_bundle_is_trusted_for_an_api_server_whose_kubeconfig_pins_no_ca() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let backend: std::net::SocketAddr = server.url().trim_start_matches("http://").parse().unwrap();
    let front = support::tls_front::TlsFront::relay(backend);
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, &front.ca_pem).unwrap();
    // The recorded cluster's own kubeconfig (its user and token), pointed at the TLS front.
    let original = std::fs::read_to_string(server.kubeconfig()).unwrap();
    assert!(original.contains(&server.url()) && !original.contains("certificate-authority"));
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, original.replace(&server.url(), &front.url())).unwrap();
    let run = |how: &str| {
        let mut c = eas(&fixture("xeon-amx"));
        c.arg("--kubeconfig").arg(&kubeconfig);
        match how {
            "before" => {
                c.arg("--ca-bundle").arg(&bundle).arg("facts");
            }
            "after" => {
                c.arg("facts").arg("--ca-bundle").arg(&bundle);
            }
            "env" => {
                c.env("EAS_CA_BUNDLE", &bundle).arg("facts");
            }
            _ => {
                c.arg("facts");
            }
        }
        c.args(facts_args("xeon-amx")).output().unwrap()
    };
    for how in ["before", "after", "env"] {
        let out = run(how);
        assert_eq!(out.status.code(), Some(0), "{how}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("\"nodes\""), "{how}: a facts document");
    }
    let out = run("none");
    let stderr = exited(&out, 1);
    assert!(stderr.to_lowercase().contains("certificate"), "names the certificate: {stderr}");
}

/// A bad bundle is bad input for every command, `eas config` included, before anything is read.
#[test]
fn a_ca_bundle_that_is_not_certificates_is_bad_input_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&bundle, "-----BEGIN RSA PRIVATE KEY-----\nAQID\n-----END RSA PRIVATE KEY-----\n").unwrap();
    let out_dir = dir.path().join("out");
    let facts = dir.path().join("facts.json");
    let runs: [Vec<&str>; 3] = [
        vec!["config", "--facts", facts.to_str().unwrap(), "--out", out_dir.to_str().unwrap()],
        vec!["facts"],
        vec!["pins", "lock", "--pins", "/nonexistent/pins.json"],
    ];
    for args in runs {
        let out = eas(dir.path()).arg("--ca-bundle").arg(&bundle).args(&args).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("holds a private key (RSA PRIVATE KEY)"), "{args:?}: {stderr}");
        assert!(!stderr.contains("AQID"), "{stderr}");
        assert!(!out_dir.exists());
    }
}

// Issue 23: secrets in errors, bounded reads, signals in every wait.

#[test]
fn a_malformed_kubeconfig_names_line_column_and_kind_and_never_quotes_its_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let head = "apiVersion: v1\nkind: Config\ncurrent-context: c\nusers:\n- name: u\n  user:\n";
    let key = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUtFWVNFTlRJTkVM";
    let cases = [
        (
            "    token: TOKSENTINEL23: oops\n    password: PWSENTINEL23\n".to_string(),
            "line 7, column 25: mapping values",
        ),
        (format!("    client-key-data: {key}\n    password: [PWSENTINEL23\n"), "line 8, column"),
        ("    token: TOKSENTINEL23\n\tpassword: PWSENTINEL23\n".to_string(), "line 7, column 12"),
    ];
    for (tail, want) in cases {
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, format!("{head}{tail}")).unwrap();
        let out = facts_through(&kubeconfig).output().unwrap();
        let (err, stdout) = (text(&out.stderr), text(&out.stdout));
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("kubeconfig {} is malformed: {want}", kubeconfig.display())), "{err}");
        for secret in ["SENTINEL23", &key[..40], "KEYSENTINEL"] {
            assert!(!err.contains(secret) && !stdout.contains(secret), "{secret} shown:\n{err}");
        }
    }
}

/// `eas pins check` with a TMPDIR holding the scratch directories `dead` (of a killed run: a pid
/// far above pid_max) and `live` (of this test's process), each with `file`, beside `others`
/// (files): the TMPDIR afterwards, and the directory that holds it.
fn swept(dead: &str, live: &str, file: (&str, &str), others: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    for d in [dead, live] {
        std::fs::create_dir_all(tmp.join(d)).unwrap();
        std::fs::write(tmp.join(d).join(file.0), file.1).unwrap();
    }
    for (name, body) in others {
        std::fs::write(tmp.join(name), body).unwrap();
    }
    let out = eas(dir.path()).env("TMPDIR", &tmp).args(["pins", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    (dir, tmp)
}

#[test]
fn a_kubeconfig_copy_a_killed_run_left_is_swept_by_the_next_command() {
    let (dead, live) = ("eas-kube-2147483646-Ab3xYz", format!("eas-kube-{}-Zz9", std::process::id()));
    let copy = ("config", "users: [{user: {token: MINTEDSENTINEL}}]");
    let (_dir, tmp) = swept(dead, &live, copy, &[("eas-kube-notes", "a file, not a copy's directory")]);
    assert!(!tmp.join(dead).exists(), "the dead run's copy is removed");
    assert!(
        tmp.join(&live).exists() && tmp.join("eas-kube-notes").exists(),
        "a live run's copy and what is not a copy stay"
    );
}

/// Issue 30 item 7: a SIGKILL during the overlay left its scratch git index
/// (`eas-overlay-index.*`) in TMPDIR for good. It is named for its process now, and the next
/// command sweeps it as it sweeps a killed run's kubeconfig copy.
#[test]
fn an_overlay_index_a_killed_run_left_is_swept_by_the_next_command() {
    let (dead, live) = ("eas-overlay-index.2147483646-Qw7", format!("eas-overlay-index.{}-Er8", std::process::id()));
    let (_dir, tmp) = swept(dead, &live, ("index", "DIRC"), &[]);
    assert!(!tmp.join(dead).exists(), "the killed run's index is removed");
    assert!(tmp.join(&live).exists(), "a live process's index stays");
}

#[test]
fn a_kubeconfig_fifo_whose_writer_hangs_ends_on_sigint_or_sigterm_with_130() {
    for signal in ["-INT", "-TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("kubeconfig");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // A writer that opens the pipe and never finishes.
        let mut writer = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3>{}; echo 'apiVersion: v1' >&3; sleep 60", fifo.display()))
            .spawn()
            .unwrap();
        let mut child = facts_through(&fifo).stderr(std::process::Stdio::piped()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700));
        let sent = std::time::Instant::now();
        support::signal(child.id(), signal);
        let (code, err) = exit_within(&mut child, std::time::Duration::from_secs(10));
        let took = sent.elapsed();
        writer.kill().unwrap();
        writer.wait().unwrap();
        assert_eq!(code, Some(130), "{signal}: {err}");
        assert!(took < std::time::Duration::from_secs(1), "{signal}: took {took:?}");
    }
}

fn cluster_key(name: &str) -> String {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(name).join("namespaces.json")).unwrap()).unwrap();
    let ns = doc["items"].as_array().unwrap().iter().find(|n| n["metadata"]["name"] == "kube-system").unwrap();
    ns["metadata"]["uid"].as_str().unwrap().to_string()
}

/// `eas status` on the recorded cluster with `state.json` as `plant` makes it (a symlink or bytes).
fn status_with_state(plant: impl FnOnce(&Path)) -> (Option<i32>, String, std::time::Duration) {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("state");
    let cluster = sd.join(cluster_key("xeon-amx"));
    std::fs::create_dir_all(&cluster).unwrap();
    plant(&cluster.join("state.json"));
    let started = std::time::Instant::now();
    let out = eas(dir.path())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--state-dir")
        .arg(&sd)
        .arg("status")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr) + &text(&out.stdout), started.elapsed())
}

/// `eas status` on `server`, with a state directory of its own.
fn status_of(server: &ClusterServer) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    eas(dir.path())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--state-dir")
        .arg(state)
        .arg("status")
        .output()
        .unwrap()
}

/// Issue 30 item 6: a newline in a model server's condition reason forged a line of `eas
/// status` (`ok FORGED LINE`): the text was escaped line by line after the lines were made.
#[test]
fn a_newline_in_a_condition_reason_stays_inside_its_status_line() {
    let server = ClusterServer::start(fixture("k3d-gpu-desktop"));
    // A model server needs KServe's CRD, as on a real cluster (without it the resource is a 404).
    support::kserve::crd(&server, "llminferenceservices", "v1alpha2");
    server.insert(serde_json::json!({"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
        "metadata": {"name": "m", "namespace": "default"},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Pending\nok FORGED LINE\r\u{85}x"}]}}));
    let out = status_of(&server);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{shown}", text(&out.stderr));
    assert!(shown.contains("    Ready=False (Pending\\nok FORGED LINE\\r\\u{85}x)"), "{shown}");
    assert!(!shown.lines().any(|l| l.starts_with("ok FORGED")), "{shown}");
}

/// kube's own `Api` get reads an answer whole before parsing it: an answer past the limit of
/// one read whole (256 MiB) fails naming the limit, here the cluster's identity that `status`
/// reads first (a valid Namespace, padded: before the limit, status read all of it and went on).
#[test]
fn an_api_answer_past_its_limit_fails_naming_the_limit_not_read_whole() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let kube_system = ObjectKey::core("namespaces", "kube-system");
    let ns = server.object(&kube_system).expect("kube-system");
    let rule = Rule { method: Some("GET".into()), path: "/api/v1/namespaces/kube-system".into(), exact: true, skip: 0 };
    server.inject_rule(rule, Fault::Padded(ns, 257 << 20), None);
    let out = status_of(&server);
    let err = exited(&out, 1);
    assert!(err.contains("larger than its limit of 256 MiB"), "{err}");
}

#[test]
fn a_state_file_on_dev_zero_is_refused_at_its_limit_not_read_whole() {
    let (code, out, took) = status_with_state(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap());
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("state.json is damaged: larger than its limit of 16 MiB"), "{out}");
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_damaged_state_file_is_reported_as_damaged_by_status_not_as_nothing_installed() {
    let (code, out, _) = status_with_state(|p| std::fs::write(p, "{\"schema_version\": 1, \"truncat").unwrap());
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("state.json is damaged"), "{out}");
    assert!(out.contains("move ") && out.contains("aside"), "the hint says what to do: {out}");
    assert!(!out.contains("installed nothing") && !out.contains("nothing installed"), "{out}");
}

#[test]
fn every_input_file_past_its_limit_is_refused_naming_the_file_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let zero = "/dev/zero";
    let facts = fixture("xeon-amx").join("expected").join("facts.json");
    let out_dir = dir.path().join("out");
    let config = |extra: &[&str]| {
        let mut v = vec!["config", "--facts", facts.to_str().unwrap(), "--out", out_dir.to_str().unwrap()];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let cases: [(Vec<String>, &str); 5] = [
        (
            vec!["pins".into(), "check".into(), "--pins".into(), zero.into()],
            "pins file /dev/zero is larger than its limit of 4 MiB",
        ),
        (config(&["--fit", zero]), "fit document /dev/zero is larger than its limit of 16 MiB"),
        (config(&["--catalog", zero]), "model catalog /dev/zero is larger than its limit of 16 MiB"),
        (config(&["--pins", zero]), "pins file /dev/zero is larger than its limit of 4 MiB"),
        (
            vec!["--ca-bundle".into(), zero.into(), "pins".into(), "check".into()],
            "CA bundle /dev/zero is larger than its limit of 16 MiB",
        ),
    ];
    for (args, want) in cases {
        let out = eas(dir.path()).args(&args).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!out_dir.exists(), "nothing written: {args:?}");
    }
}

#[test]
fn bidi_and_zero_width_characters_from_the_cluster_are_escaped_in_text_and_json() {
    let name = "gpu\u{202e}10-edon\u{2066}\u{200b}";
    let shown = "gpu\\u{202e}10-edon\\u{2066}\\u{200b}";
    let facts_text = std::fs::read_to_string(root().join("fixtures/config/desktop-i9/facts.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&facts_text).unwrap();
    doc["nodes"][0]["name"] = serde_json::Value::String(name.into());
    let (stdout, stderr, choices) = config_on(&doc);
    for (what, s) in [("stdout", stdout), ("stderr", stderr), ("choices.txt", choices)] {
        assert!(!s.contains('\u{202e}') && !s.contains('\u{2066}') && !s.contains('\u{200b}'), "{what}: {s}");
        if what == "choices.txt" {
            assert!(s.contains(shown), "{what} names the node escaped: {s}");
        }
    }

    // facts.json: the same characters as JSON escapes, so the value reads back unchanged.
    let server = ClusterServer::start(fixture("xeon-amx"));
    let key = ObjectKey::core("nodes", "xeon-sr-01");
    let mut node = server.object(&key).expect("the recorded node");
    node["metadata"]["labels"]["evil"] = serde_json::Value::String(name.into());
    server.insert(node);
    let dir = tempfile::tempdir().unwrap();
    let facts_out = dir.path().join("gathered.json");
    let out = facts(&server, "xeon-amx", &["--out", facts_out.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = std::fs::read_to_string(&facts_out).unwrap();
    assert!(!json.contains('\u{202e}') && json.contains("gpu\\u202e10-edon\\u2066\\u200b"), "{json}");
    let back: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(back["nodes"][0]["labels"]["evil"], name);
}

/// Issue 30 item 4: a node read from the cluster with a memory past what eas sizes with is
/// reported with its field, never sized with a wrapped value.
#[test]
fn a_node_whose_memory_is_past_4_eib_is_reported_with_its_field() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let key = ObjectKey::core("nodes", "xeon-sr-01");
    server.update(&key, serde_json::json!({"status": {"allocatable": {"memory": "18446744073709551615"}}}));
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("facts.json");
    let out = facts(&server, "xeon-amx", &["--out", out_file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("node xeon-sr-01: allocatable.memory \"18446744073709551615\"") && err.contains("not sized"),
        "{err}"
    );
}

#[test]
fn a_bad_proxy_variable_masks_its_password_and_keeps_the_hint_whole() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    one_user_kubeconfig(&kubeconfig, "https://127.0.0.1:1", "    token: t\n");
    // The second (issue 30 item 7) was "Connection refused", exit 1: a port that is not a number.
    for proxy in ["http://u:PROXYPASS23@exa mple:99", "http://u:PROXYPASS23@example:3l28"] {
        let out = facts_through(&kubeconfig).env("HTTPS_PROXY", proxy).output().unwrap();
        let err = exited(&out, 2);
        assert!(!err.contains("PROXYPASS23"), "{err}");
        assert!(err.contains("hint: set HTTPS_PROXY to http://[user:password@]host:port, or unset it"), "{err}");
    }
}

#[test]
fn doctor_shows_a_401_as_code_reason_and_escaped_message_never_raw_escapes_or_a_dump() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let evil = "token expired\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}";
    server.inject(Some("/version"), Fault::Status(401, evil.into()), None);
    server.inject(Some("/api/v1/nodes"), Fault::Status(401, evil.into()), None);
    let dir = tempfile::tempdir().unwrap();
    let out = eas_on(server.kubeconfig(), dir.path()).arg("doctor").output().unwrap();
    let all = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains('\u{1b}') && !all.contains('\u{202e}') && !all.contains("Status {"), "{all}");
    assert!(all.contains("401 Unauthorized"), "{all}");
    assert!(all.contains("token expired\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{202e}"), "{all}");
}

#[test]
fn a_ca_bundle_cut_off_mid_certificate_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap();
    let start = system.find("-----BEGIN CERTIFICATE-----").unwrap();
    let end = system[start..].find("-----END CERTIFICATE-----").unwrap() + start;
    let bundle = dir.path().join("cut.pem");
    std::fs::write(&bundle, &system[start..start + (end - start) / 2]).unwrap();
    let out = eas(dir.path()).arg("--ca-bundle").arg(&bundle).args(["pins", "check"]).output().unwrap();
    let err = exited(&out, 2);
    assert!(err.contains(&format!("CA bundle {}: is cut off: block 1 has no END line", bundle.display())), "{err}");
}

#[test]
fn an_already_expired_token_from_the_credential_plugin_is_refused_naming_its_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let (_, kubeconfig) = plugin_kubeconfig(
        dir.path(),
        "http://127.0.0.1:1",
        "#!/bin/sh\necho '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"EXPIREDTOKEN23\",\"expirationTimestamp\":\"2020-01-01T00:00:00Z\"}}'\n",
        "",
    );
    let out = facts_through(&kubeconfig).output().unwrap();
    let err = exited(&out, 1);
    assert!(err.contains("returned a token that expired at 2020-01-01T00:00:00Z; log in again"), "{err}");
    assert!(!err.contains("EXPIREDTOKEN23"), "{err}");
}

// The sentinel test: a secret planted in each place one can come from (support::sentinels), then
// every output, log, state file, out file and temporary file of the commands that read the
// cluster is grepped.

/// A kubeconfig for `url` whose context's user is `user` (YAML), with a second, unused user that
/// holds a password and a client key.
fn sentinel_kubeconfig(path: &Path, url: &str, user: &str) {
    use base64::Engine;
    let key = format!("-----BEGIN EC PRIVATE KEY-----\n{S_KEY_LINE}\n-----END EC PRIVATE KEY-----\n");
    let key_data = base64::engine::general_purpose::STANDARD.encode(key);
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: {{server: \"{url}\"}}\n\
             contexts:\n- name: c\n  context: {{cluster: k, user: u}}\n- name: other\n  context: {{cluster: k, user: o}}\n\
             users:\n- name: u\n  user:\n{user}- name: o\n  user:\n    username: admin\n    password: {S_PASSWORD}\n\
             \x20   client-key-data: {key_data}\n"
        ),
    )
    .unwrap();
}

fn every_file(dir: &Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            every_file(&p, out);
        } else if t.is_file() {
            out.push((p.clone(), String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_default()).into_owned()));
        }
    }
}

#[test]
fn a_sentinel_planted_in_every_secret_source_appears_in_no_output_log_or_file() {
    let server =
        ClusterServer::start_with(fixture("gpu-nodes"), Options { token: S_TOKEN.into(), ..Options::default() });
    // A pod log line that repeats the secrets (verify shows the failing plugin pod's log tail).
    let plugin_pod = server
        .names("v1", "pods")
        .into_iter()
        .filter_map(|n| n.strip_prefix("kube-system/").map(str::to_string))
        .find(|n| {
            let key = ObjectKey::of("v1", "pods", "kube-system", n);
            server.object(&key).is_some_and(|p| p["spec"]["nodeName"] == "gpu-b")
        })
        .expect("the gpu-b plugin pod");
    server.set_log("kube-system", &plugin_pod, false, &format!("HF_TOKEN={S_HF} bearer {S_TOKEN} admin {S_ADMIN}\n"));

    let home = tempfile::tempdir().unwrap();
    let (state, tmp, out) = (home.path().join("state"), home.path().join("tmp"), home.path().join("out"));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let plugin = home.path().join("get-token");
    write_exec(
        &plugin,
        &format!(
            "#!/bin/sh\n[ \"$SNTL_ENV\" = {S_PLUGIN_ENV} ] || exit 9\n\
             echo '{{\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{S_TOKEN}\"}}}}'\n"
        ),
    );
    let token_user = format!("    token: {S_TOKEN}\n");
    let exec_user = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      \
         env: [{{name: SNTL_ENV, value: {S_PLUGIN_ENV}}}]\n      interactiveMode: Never\n",
        plugin.display()
    );
    support::trees::synthetic_trees(home.path());
    let (repos, pins) = (home.path().join("repos"), home.path().join("pins.json"));

    let mut outputs: Vec<(String, String)> = Vec::new();
    for (mode, user) in [("token", &token_user), ("exec", &exec_user)] {
        let kubeconfig = home.path().join(format!("kubeconfig-{mode}"));
        sentinel_kubeconfig(&kubeconfig, &server.url(), user);
        let facts_file = out.join(format!("facts-{mode}.json"));
        let dry_out = out.join(format!("dry-{mode}"));
        let dry: Vec<String> = {
            let mut v: Vec<String> = vec!["up".into(), "--dry-run".into(), "--pins".into()];
            v.push(pins.display().to_string());
            v.extend(support::facts_args("gpu-nodes"));
            for n in ["eas", "ei", "eat"] {
                v.push(format!("--{n}-repo"));
                v.push(repos.join(n).display().to_string());
            }
            v.extend(["--out".into(), dry_out.display().to_string()]);
            v
        };
        let runs: Vec<Vec<String>> = vec![
            [
                &["facts", "--out", facts_file.to_str().unwrap()][..],
                &support::facts_args("gpu-nodes").iter().map(String::as_str).collect::<Vec<_>>(),
            ]
            .concat()
            .into_iter()
            .map(String::from)
            .collect(),
            vec!["status".into()],
            vec!["status".into(), "--output".into(), "json".into()],
            vec!["verify".into(), "--devices-timeout".into(), "0".into(), "--timeout".into(), "900".into()],
            vec!["doctor".into()],
            dry,
            vec![
                "support-bundle".into(),
                "--out".into(),
                out.join(format!("bundle-{mode}.tar.gz")).display().to_string(),
            ],
        ];
        for args in runs {
            let o = eas(&fixture("gpu-nodes"))
                .env("HOME", home.path())
                .env("TMPDIR", &tmp)
                .env("HF_TOKEN", S_HF)
                .env("KEYCLOAK_ADMIN_PASSWORD", S_ADMIN)
                .env("HTTP_PROXY", format!("http://u:{S_PROXY}@proxy.invalid:3128"))
                .env("NO_PROXY", "127.0.0.1")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .arg("--state-dir")
                .arg(&state)
                .args(&args)
                .output()
                .unwrap();
            let what = format!("{mode} {}", args[..args.len().min(2)].join(" "));
            assert_ne!(o.status.code(), None, "{what}");
            outputs.push((format!("{what} stdout"), text(&o.stdout)));
            outputs.push((format!("{what} stderr (exit {:?})", o.status.code()), text(&o.stderr)));
        }
    }
    // The support bundles' files, unpacked: each is grepped like every output.
    for mode in ["token", "exec"] {
        let bytes = std::fs::read(out.join(format!("bundle-{mode}.tar.gz"))).expect("the bundle was written");
        let mut t = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
        for e in t.entries().unwrap() {
            let mut e = e.unwrap();
            let name = format!("{mode} bundle {}", e.path().unwrap().display());
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut body).unwrap();
            outputs.push((name, text(&body)));
        }
    }
    assert!(outputs.iter().any(|(w, _)| w == "token bundle cluster/events/nodes.json"), "{outputs:#?}");
    // The runs really read the cluster and wrote where they write.
    assert!(
        outputs.iter().any(|(w, s)| w.starts_with("token verify") && s.contains("log HF_TOKEN=***")),
        "{outputs:#?}"
    );
    let mut files = Vec::new();
    every_file(home.path(), &mut files);
    for want in ["facts-token.json", "facts-exec.json", "dry-token/plan.json", "dry-exec/choices.txt"] {
        assert!(files.iter().any(|(p, _)| p.ends_with(want)), "{want} was written: {outputs:#?}");
    }
    let sentinels = sentinels::forms();
    // The inputs themselves (the kubeconfigs, the plugin) hold them; nothing eas wrote may.
    let inputs = ["kubeconfig-token", "kubeconfig-exec", "get-token"];
    for (p, body) in files.iter().filter(|(p, _)| !inputs.iter().any(|i| p.ends_with(i)) && !p.starts_with(&repos)) {
        for s in &sentinels {
            assert!(!body.contains(s.as_str()), "{s} in {}", p.display());
        }
    }
    for (what, body) in &outputs {
        for s in &sentinels {
            assert!(!body.contains(s.as_str()), "{s} in {what}:\n{body}");
        }
    }
}
