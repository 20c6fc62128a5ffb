//! The cluster's prerequisites (issue 21) end to end on the recorded clusters: each case of
//! `fixtures/prereq/cases.json` is served (a recorded cluster, changed as the case says), `eas
//! facts` gathers what the checks read (golden `fixtures/prereq/<case>.facts.json`, which the
//! unit tests of `src/prereq` check), and `eas doctor` names the failing gate, or none.

use crate::support;

use serde_json::{Value, json};
use support::*;

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(root().join("fixtures/prereq/cases.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn serve(case: &Value) -> ClusterServer {
    let deny = case["deny_access"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()).collect();
    let server = ClusterServer::start_with(
        fixture(case["cluster"].as_str().unwrap()),
        Options { deny_access: deny, ..Options::default() },
    );
    for p in case["patches"].as_array().unwrap() {
        let key = ObjectKey::of(
            p["group_version"].as_str().unwrap(),
            p["resource"].as_str().unwrap(),
            "",
            p["name"].as_str().unwrap(),
        );
        server.update(&key, p["merge"].clone());
    }
    server
}

#[test]
fn each_case_gathers_the_facts_its_gate_reads() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let server = serve(&case);
        let out = facts(&server, case["cluster"].as_str().unwrap(), &[]);
        assert!(out.status.success(), "{name}: eas facts failed:\n{}", text(&out.stderr));
        let (facts, _) = stable_facts(&out.stdout);
        let errors = schema_errors("eas-facts.v1", &facts);
        assert!(errors.is_empty(), "{name}: {errors:?}");
        golden(
            &root().join(format!("fixtures/prereq/{name}.facts.json")),
            &format!("{}\n", serde_json::to_string_pretty(&facts).unwrap()),
        );
        assert_eq!(writes(&server), Vec::<String>::new(), "{name}: the access reviews are the only POSTs");
        let reviews = server.requests().iter().filter(|r| r.path == ACCESS_REVIEWS).count();
        assert_eq!(reviews, 8, "{name}");
        assert_eq!(server.count("authorization.k8s.io/v1", "selfsubjectaccessreviews"), 0, "{name}: nothing stored");
        let denied: Vec<String> = facts["access_reviews"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["allowed"] == false)
            .map(|r| {
                let (res, group) = (r["resource"].as_str().unwrap(), r["group"].as_str().unwrap());
                format!("{} {res}.{group}", r["verb"].as_str().unwrap())
            })
            .collect();
        let want: Vec<&str> = case["deny_access"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
        assert_eq!(denied, want, "{name}: the reviews the server denied, in the data file's order");
    }
}

#[test]
fn doctor_names_the_failing_gate_and_the_healthy_cluster_has_none() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let server = serve(&case);
        let dir = tempfile::tempdir().unwrap();
        let out = eas_on(server.kubeconfig(), dir.path())
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .arg("doctor")
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        // Docker is unreachable here, so doctor always exits 1; the lines say which gates failed.
        assert_eq!(out.status.code(), Some(1), "{name}:\n{stdout}\n{}", text(&out.stderr));
        let failed: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("FAIL "))
            .map(|l| l.split(':').next().unwrap())
            .filter(|n| ["storage class", "landing node", "other nodes", "access", "ephemeral storage"].contains(n))
            .collect();
        // Doctor chooses no model, so the weights' room is not compared there (the plan does).
        let want: Vec<&str> = match case["fails"].as_str() {
            Some("ephemeral storage") | None => vec![],
            Some(gate) => vec![gate],
        };
        assert_eq!(failed, want, "{name}:\n{stdout}");
        if let Some(cause) = case["cause"].as_str().filter(|_| !want.is_empty()) {
            assert!(stdout.contains(cause), "{name}: the line names the cause {cause:?}:\n{stdout}");
        }
        for gate in ["storage class", "landing node", "access", "earlier install", "device plugins"] {
            assert!(stdout.lines().any(|l| l.contains(&format!(" {gate}: "))), "{name}: no {gate} line:\n{stdout}");
        }
        // One line per cause: a denied permission is named once, not again under its gate.
        for denied in case["deny_access"].as_array().unwrap().iter().filter_map(|d| d.as_str()) {
            let (verb, resource) = denied.split_once(' ').unwrap();
            let resource = resource.split('.').next().unwrap();
            let said = stdout.matches(&format!("may not {verb} {resource}")).count();
            assert_eq!(said, 1, "{name}: {denied} said {said} times:\n{stdout}");
        }
        // No engine answers here: the preflight gate does not say one did.
        assert!(!stdout.contains("Docker Engine and git answer"), "{name}:\n{stdout}");
        assert!(stdout.lines().any(|l| l.starts_with("FAIL preflight:")), "{name}:\n{stdout}");
    }
}

/// A context that may not list StorageClasses (or ask reviews) still gets its facts; the key is
/// absent, a warning says so, and the checks then report it as unknown rather than refusing.
#[test]
fn a_forbidden_read_leaves_its_key_absent_with_a_warning() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    server.inject(
        Some("/apis/storage.k8s.io/v1/storageclasses"),
        Fault::Status(
            403,
            "storageclasses.storage.k8s.io is forbidden: User \"reader\" cannot list resource \"storageclasses\""
                .into(),
        ),
        None,
    );
    server.inject(Some(ACCESS_REVIEWS), Fault::Status(403, "selfsubjectaccessreviews is forbidden".into()), None);
    let out = facts(&server, "xeon-amx", &[]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (facts, _) = stable_facts(&out.stdout);
    assert!(facts.get("storage_classes").is_none() && facts.get("access_reviews").is_none(), "{facts}");
    assert!(stderr.contains("list storageclasses was refused (403 Forbidden)"), "{stderr}");
    assert!(stderr.contains("storage_classes is absent"), "{stderr}");
    assert!(stderr.contains("access_reviews is absent"), "{stderr}");
}

/// Doctor is bounded: against an API server that accepts connections and never answers, every
/// check that reads the cluster shares one 30 s deadline (before, each took its own 30 s), the
/// gates say they ran out of time, and the host's own checks (Docker, git, the bastion's pins)
/// are still reported.
#[test]
fn doctor_against_a_silent_api_server_ends_with_the_hosts_checks() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let server = format!("http://{}", silent.local_addr().unwrap());
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    let out = offline_doctor(dir.path(), &kubeconfig);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    // No answer within its 10 s, or the connection itself timed out (a backlog that is full).
    // The host's checks still run (preflight, bastion).
    contains_all(
        &table,
        &[
            "FAIL api server:",
            "FAIL k3s: list nodes:",
            "FAIL gates: the plan's checks did not finish within doctor's 30 s",
            "FAIL preflight: no Docker Engine answers",
            "FAIL bastion: the base image",
        ],
    );
}

/// The JSON plan of `dry_run` (an `eas up --dry-run --output json` without `--containerd-config`):
/// no blocker names containerd, and the CNI layout decided `istio_platform: "k3s"`.
#[track_caller]
fn decided_without_containerd_config(mut dry_run: std::process::Command) -> Value {
    let out = dry_run.output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let blockers = plan["blockers"].to_string();
    assert!(!blockers.contains("containerd"), "no containerd blocker: {blockers}");
    let decided = plan["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["choice"].as_str().unwrap().starts_with("istio_platform: \"k3s\""));
    assert!(decided, "{:#}", plan["decisions"]);
    plan
}

/// Issue 21 item 7 (its "Done when"): a single-node stock k3s whose node is registered under
/// another name than this machine's (`xeon-sr-01`), found as this host by its InternalIP, is
/// decided by `eas up --dry-run` without `--containerd-config`: its containerd facts come from the
/// local disk (a temporary root, EAS_HOST_ROOT), no blocker names them, and the CNI layout decides
/// `istio_platform`.
#[test]
fn a_stock_k3s_node_under_another_name_is_decided_without_containerd_config() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let node = ObjectKey::core("nodes", "xeon-sr-01");
    server.update(
        &node,
        serde_json::json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": "xeon-sr-01"}]}}),
    );
    let root = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(fixture("xeon-amx").join("node-files/xeon-sr-01/config.toml")).unwrap();
    let at = root.path().join("var/lib/rancher/k3s/agent/etc/containerd");
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join("config.toml"), config).unwrap();
    std::fs::create_dir_all(root.path().join("var/run/nri")).unwrap();
    let _nri = std::os::unix::net::UnixListener::bind(root.path().join("var/run/nri/nri.sock")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(dir.path());
    let mut c = eas(&fixture("xeon-amx"));
    c.env("EAS_HOST_ROOT", root.path()).arg("--kubeconfig").arg(server.kubeconfig());
    c.arg("--state-dir").arg(dir.path().join("state")).args(["up", "--dry-run", "--output", "json", "--pins"]);
    c.arg(trees.join("pins.json"));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    decided_without_containerd_config(c);
}

/// The recorded xeon-amx cluster with its node `xeon-sr-01` also holding k3s's local-path helper
/// image (a busybox; the recording's node has not pulled it).
fn with_busybox(server: &ClusterServer) {
    with_busybox_on(server, "xeon-sr-01");
}

/// Node `node` also holds that image.
fn with_busybox_on(server: &ClusterServer, node: &str) {
    let key = ObjectKey::core("nodes", node);
    let mut images = server.object(&key).unwrap()["status"]["images"].as_array().unwrap().clone();
    images.push(serde_json::json!({"names": ["docker.io/rancher/mirrored-library-busybox:1.36.1"]}));
    server.update(&key, serde_json::json!({"status": {"images": images}}));
}

/// Node `xeon-sr-01`'s Ready condition becomes `status` with `reason` and `message`.
fn set_ready(server: &ClusterServer, status: &str, reason: &str, message: &str) {
    let key = ObjectKey::core("nodes", "xeon-sr-01");
    let mut conditions = server.object(&key).unwrap()["status"]["conditions"].as_array().unwrap().clone();
    for c in conditions.iter_mut().filter(|c| c["type"] == "Ready") {
        c["status"] = json!(status);
        c["reason"] = json!(reason);
        c["message"] = json!(message);
    }
    server.update(&key, json!({"status": {"conditions": conditions}}));
}

fn pods(server: &ClusterServer) -> Vec<String> {
    server.names("v1", "pods").into_iter().filter(|p| p.starts_with("kube-system/eas-probe-")).collect()
}

/// Issue 21 item 7, `--probe-nodes`: a remote stock k3s node (not this host, no
/// `--containerd-config`) is read by one probe pod on it (POST, GET until it ended, its log,
/// DELETE), with an image the node holds; the facts equal those of the copied config, nothing is
/// left, and a probe pod an earlier eas left is deleted first. A node without a usable image is
/// refused as before, the warning saying why, and no pod is created.
#[test]
fn probe_nodes_reads_a_remote_node_with_a_pod_it_creates_and_deletes() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let out = facts(&server, "xeon-amx", &[]);
    assert!(out.status.success());
    let without = probing_facts(&server, "xeon-amx");
    let stderr = text(&without.stderr);
    assert!(stderr.contains("--probe-nodes: the node holds no busybox image"), "{stderr}");
    assert!(writes(&server).is_empty(), "no image, no pod: {:?}", writes(&server));

    with_busybox(&server);
    server.insert(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "eas-probe-xeon-sr-01-left", "namespace": "kube-system",
                     "labels": {"io.eas.managed": "true", "io.eas.probe": "true", "io.eas.run-id": "1-1"}}}));
    server.clear_requests();
    let out = probing_facts(&server, "xeon-amx");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("xeon-amx").join("expected/facts.json")).unwrap())
            .unwrap();
    assert_eq!(got["nodes"][0]["containerd"], want["nodes"][0]["containerd"], "{stderr}");
    assert!(
        stderr.contains(
            "containerd facts read by a probe pod (docker.io/rancher/mirrored-library-busybox:1.36.1), deleted"
        ),
        "{stderr}"
    );
    let w = writes(&server);
    assert!(
        w.iter().any(|l| l == "DELETE /api/v1/namespaces/kube-system/pods/eas-probe-xeon-sr-01-left"),
        "the sweep: {w:?}"
    );
    assert!(w.iter().any(|l| l == "POST /api/v1/namespaces/kube-system/pods"), "{w:?}");
    assert_eq!(w.iter().filter(|l| l.starts_with("DELETE ")).count(), 2, "the leftover and this run's pod: {w:?}");
    let reqs = server.requests();
    assert!(reqs.iter().any(|l| l.method == "GET" && l.path.ends_with("/log")), "the log was read");
    let watches = reqs.iter().filter(|q| q.param("watch").as_deref() == Some("true")).count();
    assert_eq!(watches, 1, "the pod is watched to its end, not polled: {reqs:?}");
    let polls =
        reqs.iter().filter(|q| q.method == "GET" && q.path.contains("/pods/eas-probe-") && !q.path.ends_with("/log"));
    assert_eq!(polls.count(), 0, "{reqs:?}");
    assert_eq!(pods(&server), Vec::<String>::new(), "no probe pod is left");
    // The count eas prints is every request it sent: the 17 of the facts, the sweep's LIST and
    // DELETE, and the probe's POST, WATCH, log and DELETE.
    let counted: usize = stderr.split(" API calls").next().and_then(|s| s.rsplit(' ').next()).unwrap().parse().unwrap();
    assert_eq!(counted, reqs.len(), "{stderr}");
}

/// Issue 29 item 2: `--probe-nodes` on a node whose kubelet does not post (its Ready condition
/// Unknown, as the node lifecycle controller writes it): the probe pod stays as the API server
/// created it, Pending with no condition, no container status and no event. eas ends the wait
/// on that reason, not on the probe's 60 s limit, refuses with it (exit 3, `REFUSE:`) naming the
/// pod created and deleted, and the dry run's summary names the pod instead of "Nothing was
/// written"; no blocker tells the user to pass --probe-nodes.
#[test]
fn a_probe_pod_that_stays_pending_is_refused_with_its_reason_and_named_created_and_deleted() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    with_busybox(&server);
    // The node lifecycle controller's words for a kubelet that stopped posting
    // (kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go,
    // tryUpdateNodeHealth).
    set_ready(&server, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.");

    let out = probing_facts(&server, "xeon-amx");
    let stderr = exited(&out, 3);
    let refusal = stderr.lines().find(|l| l.starts_with("REFUSE: ")).unwrap_or_else(|| panic!("{stderr}"));
    contains_all(
        refusal,
        &[
            "the probe pod of --probe-nodes on node xeon-sr-01: pod kube-system/eas-probe-xeon-sr-01-",
            "did not start: Pending; no kubelet has written to it (no condition, no container status)",
            "node xeon-sr-01's Ready condition is Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)",
            "no event; it was created and deleted",
        ],
    );
    assert!(!stderr.contains("did not finish within"), "{stderr}");
    let w = writes(&server);
    assert_eq!(w.len(), 2, "the probe pod's POST and DELETE: {w:?}");
    assert_eq!(w[0], "POST /api/v1/namespaces/kube-system/pods");
    assert!(w[1].starts_with("DELETE /api/v1/namespaces/kube-system/pods/eas-probe-xeon-sr-01-"), "{w:?}");
    let reqs = server.requests();
    let watched = |q: &&support::cluster_server::Logged| {
        q.param("watch").as_deref() == Some("true")
            && q.param("fieldSelector").is_some_and(|f| f.starts_with("metadata.name=eas-probe-xeon-sr-01-"))
    };
    // The node's condition decides at the pod's first sight (the POST's answer): no watch waits.
    assert_eq!(reqs.iter().filter(watched).count(), 0, "{reqs:?}");
    assert!(reqs.iter().any(|q| q.path.starts_with("/api/v1/namespaces/kube-system/events")), "its events read");
    assert!(!reqs.iter().any(|q| q.method == "GET" && q.path.starts_with("/api/v1/namespaces/kube-system/pods/")));
    assert_eq!(pods(&server), Vec::<String>::new(), "no probe pod is left");

    // The dry run ends on the same reason (the facts phase ends the plan), naming the pod.
    server.clear_requests();
    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(dir.path());
    let dry_run = || {
        let mut c = eas(&fixture("xeon-amx"));
        c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.path().join("state"));
        c.env("COLUMNS", "400").args(["up", "--dry-run", "--probe-nodes", "--pins"]).arg(trees.join("pins.json"));
        for n in ["eas", "ei", "eat"] {
            c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
        }
        c.output().unwrap()
    };
    let out = dry_run();
    let (plan, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{plan}{stderr}");
    let refusal = stderr.lines().find(|l| l.starts_with("REFUSE: ")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(refusal.contains("did not start: Pending; no kubelet has written to it"), "{refusal}");
    assert!(refusal.contains("it was created and deleted"), "{refusal}");
    assert!(!format!("{plan}{stderr}").contains("--probe-nodes to read them"), "{plan}{stderr}");
    assert!(!format!("{plan}{stderr}").contains("Nothing was written"), "{plan}{stderr}");
    assert_eq!(pods(&server), Vec::<String>::new(), "no probe pod is left");

    // Once the kubelet posts again, the probe reads the node, and the plan's summary names the
    // probe pod it created and deleted instead of "Nothing was written".
    set_ready(&server, "True", "KubeletReady", "kubelet is posting ready status");
    let out = dry_run();
    let plan = text(&out.stdout);
    assert!(!plan.contains("Nothing was written"), "{plan}");
    let wrote = plan.lines().find(|l| l.starts_with("  wrote ")).unwrap_or_else(|| panic!("{plan}"));
    assert!(wrote.contains("probe pod kube-system/eas-probe-xeon-sr-01-"), "{wrote}");
    assert!(wrote.ends_with("on node xeon-sr-01, created and deleted"), "{wrote}");
    assert!(plan.contains("Nothing else was written to the cluster"), "{plan}");
}

/// Ctrl-C while a probe pod runs (its watch never answers): eas exits 130 within seconds and
/// deletes the pod on its way out.
#[test]
fn a_probe_interrupted_while_its_pod_runs_deletes_the_pod() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    with_busybox(&server);
    // The sweep's LIST goes through; the probe pod's watch never answers.
    let rule = support::cluster_server::Rule {
        method: Some("GET".into()),
        path: "/api/v1/namespaces/kube-system/pods".into(),
        exact: true,
        skip: 1,
    };
    server.inject_rule(rule, support::Fault::Slow(std::time::Duration::from_secs(600)), None);
    let child = eas(&fixture("xeon-amx"))
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .args(["facts", "--probe-nodes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let created = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !writes(&server).iter().any(|l| l == "POST /api/v1/namespaces/kube-system/pods") {
        assert!(std::time::Instant::now() < created, "no probe pod was created");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sent = std::time::Instant::now();
    signal(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(sent.elapsed() < std::time::Duration::from_secs(5), "exited in {:?}", sent.elapsed());
    assert_eq!(pods(&server), Vec::<String>::new(), "the probe pod was deleted: {:?}", writes(&server));
}

/// `eas up --dry-run --probe-nodes` on a remote stock k3s node: the plan decides from what the
/// probe pod read (no containerd blocker), and the probe pod, created and deleted, is the dry
/// run's only write (it writes no state: the pod's labels are its record).
#[test]
fn a_dry_run_with_probe_nodes_decides_and_writes_only_its_probe_pod() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    with_busybox(&server);
    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(dir.path());
    let mut c = eas(&fixture("xeon-amx"));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.path().join("state"));
    c.args(["up", "--dry-run", "--probe-nodes", "--output", "json", "--pins"]).arg(trees.join("pins.json"));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    let plan = decided_without_containerd_config(c);
    let w = writes(&server);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[0], "POST /api/v1/namespaces/kube-system/pods");
    assert!(w[1].starts_with("DELETE /api/v1/namespaces/kube-system/pods/eas-probe-xeon-sr-01-"), "{w:?}");
    assert!(!dir.path().join("state").exists(), "a dry run writes no state");
    let wrote = plan["wrote"].as_array().unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(wrote.len(), 1, "{wrote:?}");
    assert!(wrote[0].as_str().unwrap().starts_with("probe pod kube-system/eas-probe-xeon-sr-01-"), "{wrote:?}");
}

/// One probe pod per node shape: on the three-node cluster the server and the two agents (the
/// same k3s args and image) take two probe pods, and the second agent's facts are the first's.
#[test]
fn probe_nodes_runs_one_pod_per_node_shape() {
    let server = ClusterServer::start(fixture("k3s-3node-eas"));
    for n in ["lab-cp-1", "lab-w-1", "lab-w-2"] {
        with_busybox_on(&server, n);
    }
    let out = probing_facts(&server, "k3s-3node-eas");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    for n in got["nodes"].as_array().unwrap() {
        assert!(n["containerd"].is_object(), "{}: {stderr}", n["name"]);
    }
    let w = writes(&server);
    assert_eq!(w.iter().filter(|l| *l == "POST /api/v1/namespaces/kube-system/pods").count(), 2, "{w:?}");
    assert_eq!(w.iter().filter(|l| l.starts_with("DELETE ")).count(), 2, "{w:?}");
    assert!(
        stderr.contains("node lab-w-2: containerd facts read by the probe pod on lab-w-1, a node of the same shape"),
        "{stderr}"
    );
    assert_eq!(pods(&server), Vec::<String>::new());
}

/// Doctor fails where `eas up` would: an API server that answers doctor's own checks (its
/// version, the nodes) but refuses `get namespace kube-system`, which up's preflight reads to key
/// its state, is a failure naming preflight, never "every check passed".
#[test]
fn doctor_fails_where_ups_preflight_cannot_read_the_clusters_identity() {
    let server = ClusterServer::start(fixture("k3d-gpu-desktop"));
    let forbidden = support::Fault::Status(403, "namespaces \"kube-system\" is forbidden".into());
    server.inject(Some("/api/v1/namespaces/kube-system"), forbidden, None);
    let dir = tempfile::tempdir().unwrap();
    let out = offline_doctor(dir.path(), server.kubeconfig());
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}{}", text(&out.stderr));
    assert!(table.contains("ok   api server:"), "doctor's own check passes: {table}");
    assert!(table.contains("FAIL preflight: eas up stops here:") && table.contains("403"), "{table}");
    assert!(!text(&out.stderr).contains("every check passed"), "{}", text(&out.stderr));
}

/// A probe pod an earlier eas left (killed before it deleted it) is removed by the next real eas
/// command, not only by the next `--probe-nodes`: here `eas down` with nothing installed deletes
/// it, says so, and deletes nothing else; `eas down --dry-run` leaves it.
#[test]
fn a_leftover_probe_pod_is_removed_by_the_next_down() {
    let server = ClusterServer::start(fixture("k3d-gpu-desktop"));
    server.insert(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "eas-probe-k3d-gpu-server-0-left", "namespace": "kube-system",
                     "labels": {"io.eas.managed": "true", "io.eas.probe": "true", "io.eas.run-id": "1-1"}}}));
    let dir = tempfile::tempdir().unwrap();
    let down = |extra: &[&str]| eas_on(server.kubeconfig(), dir.path()).arg("down").args(extra).output().unwrap();
    let pods = || server.names("v1", "pods").into_iter().filter(|n| n.contains("eas-probe")).collect::<Vec<_>>();
    let dry = down(&["--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert_eq!(pods().len(), 1, "a dry run writes nothing");
    server.clear_requests();
    let real = down(&["--yes"]);
    let err = text(&real.stderr);
    assert!(real.status.success(), "{err}");
    assert_eq!(pods(), Vec::<String>::new(), "{err}");
    assert!(err.contains("deleted 1 probe pod(s) an earlier eas left in kube-system"), "{err}");
    let deletes: Vec<String> = server.requests().iter().filter(|q| q.method != "GET").map(|q| q.path.clone()).collect();
    assert_eq!(deletes, ["/api/v1/namespaces/kube-system/pods/eas-probe-k3d-gpu-server-0-left"], "only the probe pod");
}

/// `eas facts --probe-nodes` on the recorded cluster `name`.
fn probing_facts(server: &ClusterServer, name: &str) -> std::process::Output {
    eas(&fixture(name)).arg("--kubeconfig").arg(server.kubeconfig()).args(["facts", "--probe-nodes"]).output().unwrap()
}

/// `eas doctor --offline` without a Docker Engine, its state under `dir`.
fn offline_doctor(dir: &std::path::Path, kubeconfig: &std::path::Path) -> std::process::Output {
    eas_on(kubeconfig, dir)
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .args(["doctor", "--offline"])
        .output()
        .unwrap()
}

/// A node whose kubelet stopped reporting Ready carries the control plane's not-ready taint (the
/// recorded server keeps it as the node lifecycle controller does): it is still sized (its pods'
/// requests stay in the fit), doctor names its condition (status, reason, since) and the fix is
/// the node's, never removing the taint.
#[test]
fn a_not_ready_node_keeps_its_pod_requests_and_doctor_names_its_condition() {
    let server = ClusterServer::start(fixture("k3d-gpu-desktop"));
    let node = ObjectKey::core("nodes", "k3d-gpu-server-0");
    let mut conditions = server.object(&node).unwrap()["status"]["conditions"].clone();
    for c in conditions.as_array_mut().unwrap() {
        if c["type"] == "Ready" {
            c["status"] = json!("False");
            c["reason"] = json!("KubeletNotReady");
            c["message"] = json!("container runtime status check may not have completed yet");
            c["lastTransitionTime"] = json!("2026-12-05T22:14:03Z");
        }
    }
    server.update(&node, json!({"status": {"conditions": conditions}}));
    let taints = server.object(&node).unwrap()["spec"]["taints"].clone();
    assert_eq!(taints, json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]), "as a real server");

    let out =
        eas(&fixture("k3d-gpu-desktop")).arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let facts: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &facts["nodes"][0];
    assert!(n["pod_requests"].is_object(), "the node is still sized: {}\n{}", n["taints"], text(&out.stderr));
    assert_eq!(n["taints"][0]["key"], "node.kubernetes.io/not-ready");
    let ready = n["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!((ready["status"].as_str(), ready["since"].as_str()), (Some("False"), Some("2026-12-05T22:14:03Z")));

    let dir = tempfile::tempdir().unwrap();
    let doctor = text(&offline_doctor(dir.path(), server.kubeconfig()).stdout);
    let line = doctor.lines().find(|l| l.starts_with("FAIL landing node:")).unwrap_or_else(|| panic!("{doctor}"));
    assert!(
        line.contains("k3d-gpu-server-0 (where the model would land) is not Ready (Ready=False since 2026-12-05T22:14:03Z (KubeletNotReady"),
        "its condition, reason and since: {line}"
    );
    assert!(doctor.contains("make the node Ready (its kubelet)"), "{doctor}");
    assert!(!doctor.contains("kubectl taint"), "never the lifecycle taint's removal: {doctor}");
    assert!(!doctor.contains("every node carries"), "a lifecycle taint does not take the node out: {doctor}");
    assert!(doctor.contains("other nodes: no other nodes"), "one node: {doctor}");
}

/// On a cluster with EAT 1.x, doctor's config check fails on it and the earlier-install check
/// names it as a warning, never `ok earlier install` under that failure.
#[test]
fn doctor_marks_an_eat1_install_in_both_checks_that_see_it() {
    let server = ClusterServer::start(fixture("eat1"));
    let dir = tempfile::tempdir().unwrap();
    let out = offline_doctor(dir.path(), server.kubeconfig());
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}{}", text(&out.stderr));
    assert!(table.contains("FAIL config: ") && table.contains("EAT 1.x is installed"), "{table}");
    let earlier = table.lines().find(|l| l.contains(" earlier install: ")).expect(&table);
    assert!(earlier.starts_with("warn earlier install: warning: an earlier EAT 1.x install"), "{table}");
}
