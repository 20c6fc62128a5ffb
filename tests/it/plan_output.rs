//! `eas up --dry-run` as a person and as a machine reads it, against recorded clusters with the
//! synthetic EAS/EI/EAT trees and no Docker Engine: the summary first, lines within COLUMNS, the
//! 2000-node cluster's nodes grouped by shape; `--output json` is exactly one JSON document on
//! stdout that satisfies data/eas-plan.v1.schema.json (snapshot in fixtures/plan/, volatile
//! values redacted).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{ClusterServer, golden, text};

struct Trees {
    dir: PathBuf,
    pins: PathBuf,
    shas: Vec<(String, String)>,
}

/// The synthetic trees as git repositories, and the real pins.json with the `main` tree rows
/// pointed at them (as scripts/demo.sh does).
fn trees() -> &'static Trees {
    static T: OnceLock<Trees> = OnceLock::new();
    T.get_or_init(|| {
        let dir = support::until_exit("plan-output-");
        let shas = support::trees::pinned_trees(&dir);
        Trees { pins: dir.join("pins.json"), dir, shas }
    })
}

/// `eas up --dry-run` on `cluster` with the synthetic trees, its state directory `state` and its
/// temporary directory (`TMPDIR`, where the overlay's scratch tree goes) `tmp`.
fn dry_run_command(server: &ClusterServer, cluster: &str, state: &Path, tmp: &Path) -> Command {
    let t = trees();
    let mut c = support::eas(&support::fixture(cluster));
    c.env("TMPDIR", tmp)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--state-dir")
        .arg(state)
        .args(["up", "--dry-run", "--pins"])
        .arg(&t.pins)
        .args(support::facts_args(cluster));
    for (n, _) in &t.shas {
        c.arg(format!("--{n}-repo")).arg(t.dir.join("repos").join(n));
    }
    c
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
}

fn dry_run(server: &ClusterServer, cluster: &str, extra: &[&str], columns: &str) -> Output {
    let (state, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut c = dry_run_command(server, cluster, state.path(), tmp.path());
    let out = c.env("COLUMNS", columns).args(extra).output().expect("run eas");
    assert_eq!(entries(state.path()), Vec::<PathBuf>::new(), "a dry run wrote to the state directory");
    assert_eq!(entries(tmp.path()), Vec::<PathBuf>::new(), "a dry run left its scratch tree");
    out
}

/// The recorded `cluster`'s server, and the text plan, `columns` wide, of a dry run on it that
/// succeeded.
fn planned(cluster: &str, columns: &str) -> (ClusterServer, String) {
    let server = ClusterServer::start(support::fixture(cluster));
    let out = dry_run(&server, cluster, &[], columns);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (server, text(&out.stdout))
}

/// SIGINT while the facts are gathered (a facts read made slow), after the scratch tree the
/// overlay is decided on has been checked out beside it: exit 130, and the tree is removed.
#[test]
fn a_dry_run_interrupted_while_gathering_facts_removes_its_scratch_tree() {
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    server.inject(Some("daemonsets"), support::Fault::Slow(Duration::from_secs(600)), None);
    let (state, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut c = dry_run_command(&server, cluster, state.path(), tmp.path());
    let mut child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let checked_out = |p: &PathBuf| p.join("eas").join("es_auto_installer.sh").exists();
    let until = Instant::now() + Duration::from_secs(60);
    while !(entries(tmp.path()).iter().any(checked_out)
        && server.requests().iter().any(|l| l.path.contains("daemonsets")))
    {
        assert!(Instant::now() < until, "no scratch tree while the facts were read: {:?}", entries(tmp.path()));
        assert!(child.try_wait().unwrap().is_none(), "the dry run ended before the facts were read");
        std::thread::sleep(Duration::from_millis(20));
    }
    support::signal(child.id(), "-INT");
    let (code, err) = support::exit_within(&mut child, Duration::from_secs(10));
    assert_eq!(code, Some(130), "{err}");
    assert_eq!(entries(tmp.path()), Vec::<PathBuf>::new(), "the scratch tree was left: {err}");
    assert_eq!(entries(state.path()), Vec::<PathBuf>::new(), "a dry run wrote to the state directory");
}

/// The values that change from run to run: the synthetic commits, the server's port, the facts
/// hash (it covers `gathered_at`).
fn redact(doc: &mut Value, server: &ClusterServer) -> String {
    doc["facts"]["facts_hash"] = Value::from("<facts-sha256>");
    // The command line names the test's temporary directories (its shape is tested on the text).
    assert!(doc["apply_command"].as_str().is_some_and(|c| c.contains(" up --yes ")), "{}", doc["apply_command"]);
    doc["apply_command"] = Value::from("<apply-command>");
    // The test's temporary kubeconfig and state directory (the trees' directory is replaced below).
    for setting in doc["settings"].as_array_mut().expect("settings") {
        if ["kubeconfig", "state_dir"].contains(&setting["key"].as_str().unwrap_or_default()) {
            setting["value"] = Value::from("<tmp>");
        }
    }
    let mut s = serde_json::to_string_pretty(doc).unwrap();
    for (n, sha) in &trees().shas {
        s = s.replace(sha.as_str(), &format!("<{n}-sha>")).replace(&sha[..7], &format!("<{n}-sha7>"));
    }
    s = s.replace(&server.url(), "http://127.0.0.1:PORT");
    s = s.replace(&trees().pins.display().to_string(), "<pins>");
    s = s.replace(&trees().dir.display().to_string(), "<trees>");
    s.push('\n');
    s
}

#[test]
fn output_json_is_one_schema_valid_document_with_the_plan_as_data() {
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    let out = dry_run(&server, cluster, &["--output", "json"], "80");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // serde_json::from_slice rejects anything after the document but whitespace.
    let mut doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not exactly one JSON document: {e}\n{}", text(&out.stdout)));
    let errors = support::schema_errors("eas-plan.v1", &doc);
    assert!(errors.is_empty(), "plan vs schema: {errors:?}");
    assert!(text(&out.stderr).contains("==> facts:"), "logs stay on stderr: {}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("\"schema\""), "the document is not on stderr");
    // 24 of eas config's decisions (the deploy path and its failure policy, the defensive EAT
    // key, the pick's autodeploy, the dtype its node's CPU runs and its pod memory among them), the egress check's line, and 16
    // of the knob audit (one per key written).
    let decisions = doc["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 41);
    assert_eq!(decisions.iter().filter(|d| d["fact"].as_str().unwrap().starts_with("knob ")).count(), 16);
    assert!(
        doc["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["choice"] == "istio_platform: \"k3d\" (needs overlay 0002)")
    );
    let outcomes: Vec<&str> =
        doc["overlay"].as_array().unwrap().iter().map(|p| p["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["apply", "skip", "apply"]);
    assert_eq!(doc["commands"][1]["argv"][0], "./es_auto_installer.sh");
    assert_eq!(doc["model"], "qwen2-5-coder-7b (rule: preference, EAT's fallback)");
    golden(&support::root().join("fixtures/plan/k3d-gpu-desktop.json"), &redact(&mut doc, &server));
}

#[test]
fn output_json_without_dry_run_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = support::eas(dir.path()).args(["up", "--output", "json", "--yes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--dry-run"), "{}", text(&out.stderr));
    // Rejected while parsing, it still prints the one document a script reads: the error.
    let doc: Value = serde_json::from_slice(&out.stdout).expect("an error document");
    assert_eq!((doc["schema"].as_str(), doc["exit_code"].as_i64()), (Some("eas-plan/v1"), Some(2)));
    assert!(doc["error"].as_str().is_some_and(|e| e.contains("--dry-run")), "{doc}");
    assert_eq!(support::schema_errors("eas-plan.v1", &doc), Vec::<String>::new());
}

#[test]
fn the_plan_opens_with_its_summary_and_fits_the_width() {
    let cluster = "k3d-gpu-desktop";
    let (server, plan) = planned(cluster, "80");
    let lines: Vec<&str> = plan.lines().collect();
    // The header is the command that applies the plan, wrapped as a shell reads it: `eas up
    // --yes` with every flag given (pins, node flags, repositories), the dry run's dropped.
    let head_end = lines.iter().position(|l| !l.ends_with(" \\")).unwrap();
    let head: Vec<&str> = lines[..=head_end].iter().map(|l| l.trim().trim_end_matches(" \\")).collect();
    let head = head.join(" ");
    assert!(head.starts_with("eas --kubeconfig ") && head.contains(" up --yes --pins "), "{plan}");
    for flag in ["--containerd-config", "--nri-socket", "--eas-repo", "--ei-repo", "--eat-repo"] {
        assert!(head.contains(flag), "{flag} in {head}");
    }
    assert!(!head.contains("--dry-run"), "{head}");
    // It closes with the next command: the same one, after the blockers are removed.
    let tail: Vec<&&str> = lines.iter().rev().take_while(|l| !l.is_empty()).collect();
    let tail: Vec<&str> = tail.into_iter().rev().copied().collect();
    assert!(tail[0].starts_with("next: remove the blockers above"), "{plan}");
    assert_eq!(tail[1..].iter().map(|l| l.trim().trim_end_matches(" \\")).collect::<Vec<_>>().join(" "), head);
    let end = lines.iter().position(|l| l.starts_with("Nothing was written")).expect(&plan);
    // The summary is a few lines, and one more (or a few, wrapped) per blocker: here no Docker
    // Engine, an unpinned base image and unpinned artifacts (the harness's built-in pins).
    let blockers = lines.iter().filter(|l| l.starts_with("             ") && !l.starts_with("              ")).count();
    assert!(end < 16 + 10 * blockers, "the summary is a few lines:\n{plan}");
    let labels: Vec<&str> = lines[head_end + 1..end]
        .iter()
        .filter(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        labels,
        [
            "cluster",
            "settings",
            "profile",
            "pins",
            "layer",
            "decisions",
            "bastion",
            "installer",
            "unknown",
            "blockers",
            "warnings"
        ],
        "{plan}"
    );
    // The summary counts the warnings the plan lists in full below (issue 32 item 5).
    let listed = plan.split("\nwarnings:\n").nth(1).expect(&plan).lines().take_while(|l| l.starts_with("  "));
    let listed = listed.filter(|l| !l.starts_with("   ")).count();
    assert!(listed > 0, "{plan}");
    assert!(plan.contains(&format!("\n  warnings   {listed}\n")), "{listed} warnings: {plan}");
    assert!(plan.contains("  blockers   3: the real run stops at the first (exit 1)\n"), "{plan}");
    let pins = lines.iter().find(|l| l.starts_with("  pins ")).unwrap();
    assert_eq!(pins.split_whitespace().nth(1), Some(trees().pins.to_str().unwrap()), "the file, by absolute path");
    let decisions = lines.iter().find(|l| l.starts_with("  decisions ")).unwrap();
    assert!(decisions.contains("decisions  41 made; patches: 2 to apply, 1 to skip, 0 stop"), "{plan}");
    for l in &lines {
        assert!(l.chars().count() <= 80 || !l.trim().contains(' '), "over 80 columns: {l:?}");
    }
    assert!(plan.contains("\n  k3s ServiceLB on -> metallb_enabled: false\n"), "{plan}");
    assert!(!plan.contains("roles/metallb/tasks/install.yaml"), "no sources without --explain");

    let explained = text(&dry_run(&server, cluster, &["--explain"], "80").stdout);
    assert!(
        explained.contains("https://github.com/intel/enterprise-ai-solutions/blob/c889142")
            && explained.contains("roles/metallb/tasks/install.yaml#L23-L44]"),
        "{explained}"
    );
}

#[test]
fn two_thousand_nodes_print_as_a_few_shapes() {
    let (_server, plan) = planned("scale-2000", "150");
    // The node shapes stay a few lines; the rest is the plan's decisions (37 on this layer) and
    // its blockers (no Docker Engine, an unpinned base and artifacts in this harness), and the
    // table of the 13 phases; the summary's settings line names the flags given.
    assert!(plan.lines().count() < 134, "{} lines:\n{plan}", plan.lines().count());
    assert!(plan.contains(", 2000 nodes\n"), "{plan}");
    let nodes: Vec<&str> =
        plan.lines().skip_while(|l| !l.starts_with("nodes (2000")).skip(1).take_while(|l| !l.is_empty()).collect();
    assert!(nodes.iter().any(|l| l.contains(" more")), "the big group is counted, not listed: {nodes:?}");
    let total: usize = nodes.iter().filter_map(|l| l.split(" x ").next()?.trim().parse::<usize>().ok()).sum();
    assert_eq!(total, 2000, "{nodes:?}");
}

#[test]
fn facts_and_verify_print_one_json_document() {
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("facts.json");
    let out = support::facts(&server, cluster, &["--output", "json", "--out", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // stdout adds the exit code and the warnings to the document the file holds.
    let mut plain = printed.clone();
    let extra: Vec<Value> =
        ["exit_code", "warnings"].iter().map(|k| plain.as_object_mut().unwrap().remove(*k).unwrap()).collect();
    assert_eq!(plain, written);
    assert_eq!(extra[0], 0);
    assert_eq!(printed["schema"], "eas-facts/v1");
    assert_eq!(support::schema_errors("eas-facts.v1", &printed), Vec::<String>::new());

    let mut c = support::eas(&support::fixture(cluster));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.path().join("state"));
    let out = c.args(["verify", "--timeout", "1", "--output", "json"]).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify stdout is not one JSON document: {e}\n{}", text(&out.stdout)));
    assert_eq!(doc["schema"], "eas-verify/v1");
    assert_eq!(support::schema_errors("eas-verify.v1", &doc), Vec::<String>::new(), "{doc}");
    // The recorded cluster has its device resources, and nothing was installed by eas up: the
    // devices are checked and there is no model server to verify (exit 1, not 5: "installed, but").
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no model server eas installed"), "{}", text(&out.stderr));
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["exit_code"], 1);
    assert!(!doc["failure"].as_array().unwrap().is_empty(), "{doc}");
}

#[test]
fn output_is_one_flag_with_one_meaning_on_status_verify_facts_and_up() {
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = support::eas(dir.path());
        c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.path().join("state"));
        c.args(args).output().unwrap()
    };
    // status: text is the default, and `table` names the same output.
    let default = run(&["status"]);
    let textual = run(&["status", "--output", "text"]);
    let table = run(&["status", "--output", "table"]);
    for o in [&default, &textual, &table] {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    assert_eq!(text(&textual.stdout), text(&default.stdout));
    assert_eq!(text(&table.stdout), text(&default.stdout));
    assert!(serde_json::from_slice::<Value>(&default.stdout).is_err(), "text is not JSON: {}", text(&default.stdout));
    let json = run(&["status", "--output", "json"]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let doc: Value = serde_json::from_slice(&json.stdout).expect("status: one JSON document on stdout");
    assert_eq!(doc["schema"], "eas-status/v1");
    // The same values everywhere: anything else is bad input (exit 2) with nothing on stdout.
    for cmd in [&["status"][..], &["verify"], &["facts"], &["up", "--dry-run"]] {
        let mut args = cmd.to_vec();
        args.extend(["--output", "yaml"]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
        assert!(text(&o.stderr).contains("yaml"), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn verify_json_is_printed_when_the_cluster_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
             insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\nusers:\n- name: u\n  user:\n    token: not-a-secret\n"
        ),
    )
    .unwrap();
    let mut c = support::eas(dir.path());
    c.arg("--kubeconfig").arg(&kubeconfig).arg("--state-dir").arg(dir.path().join("state"));
    let out = c.args(["verify", "--timeout", "1", "--output", "json"]).output().unwrap();
    let code = out.status.code().expect("an exit code");
    assert_ne!(code, 0, "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify stdout is not one JSON document: {e}\n{}", text(&out.stdout)));
    assert_eq!(doc["schema"], "eas-verify/v1");
    assert_eq!(support::schema_errors("eas-verify.v1", &doc), Vec::<String>::new(), "{doc}");
    assert_eq!(doc["passed"], false);
    assert_eq!(doc["exit_code"], code);
    assert!(!doc["failure"].as_array().unwrap().is_empty(), "{doc}");
}

/// `-v` shows the API calls and the git commands a dry run makes; `-vv` adds each one's time.
#[test]
fn verbose_shows_the_api_calls_and_git_commands_and_vv_their_timings() {
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    let out = dry_run(&server, cluster, &["-v"], "100");
    let err = text(&out.stderr);
    assert!(err.lines().any(|l| l.contains("api GET /api/v1/nodes")), "-v: the API calls:\n{err}");
    assert!(err.lines().any(|l| l.contains("git -C ")), "-v: the git commands:\n{err}");
    assert!(!err.contains(" ms"), "-v: no timings:\n{err}");
    let out = dry_run(&server, cluster, &["-vv"], "100");
    let err = text(&out.stderr);
    let timed = |what: &str| err.lines().any(|l| l.contains(what) && l.ends_with(" ms"));
    assert!(timed("api GET /api/v1/nodes"), "-vv: API calls with their time:\n{err}");
    assert!(timed("git -C "), "-vv: git commands with their time:\n{err}");
    let quiet = text(&dry_run(&server, cluster, &[], "100").stderr);
    assert!(!quiet.contains("api GET"), "without -v, no call log:\n{quiet}");
}

/// A small node (the recorded desktop's with 6 allocatable cores): the model's CPU, which EI
/// renders as the pod's request and limit, is lowered to what the node schedules after its pods'
/// requests, with its decision line, so the pod is not left Pending (issue 28 item 9).
#[test]
fn a_small_node_lowers_the_models_cpu_with_a_decision_line() {
    let cluster = "k3d-gpu-desktop";
    let server = ClusterServer::start(support::fixture(cluster));
    let node = support::ObjectKey::core("nodes", "k3d-gpu-server-0");
    server.update(&node, serde_json::json!({"status": {"allocatable": {"cpu": "6"}}}));
    let out = dry_run(&server, cluster, &[], "200");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find(|l| l.contains(" cpu: ") && l.contains("models.yaml"));
    let line = line.unwrap_or_else(|| panic!("no cpu decision line:\n{stdout}\n{stderr}"));
    assert!(
        line.ends_with("asks cpu 16; node k3d-gpu-server-0 schedules 5 (6 allocatable - 0.2 requested) -> models.yaml qwen2-5-coder-7b cpu: 5"),
        "{line}"
    );
    // 2 cores, 0.2 requested: 1 whole core, under the 2 vLLM needs: not lowered, and a warning.
    server.update(&node, serde_json::json!({"status": {"allocatable": {"cpu": "2"}}}));
    let out = dry_run(&server, cluster, &[], "200");
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("models.yaml qwen2-5-coder-7b cpu:"), "{all}");
    assert!(all.contains("schedules 1 (2 allocatable - 0.2 requested), under the 2 cores vLLM needs"), "{all}");
    assert!(all.contains("would stay Pending"), "{all}");
}

/// The trees this module shares from a static (never dropped) are removed when the test process
/// ends (`support::until_exit`): one test of this binary, run as its own process with a fresh
/// `TMPDIR`, leaves that directory empty. Each process left one `/tmp/plan-output-*` before.
#[test]
fn the_shared_trees_leave_no_directory_behind_when_the_tests_end() {
    let tmp = tempfile::tempdir().unwrap();
    let test = "plan_output::output_json_is_one_schema_valid_document_with_the_plan_as_data";
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads", "1"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success() && text(&out.stdout).contains("1 passed"), "{}", text(&out.stdout));
    let left: Vec<PathBuf> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(left, Vec::<PathBuf>::new());
}
