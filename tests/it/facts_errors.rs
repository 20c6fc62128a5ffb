//! `eas facts` when something is wrong: the API unreachable, refusing, failing or slow; the
//! kubeconfig missing or wrong; Docker unreachable under a k3d cluster. Each says what failed
//! and what to do, exits as SPEC §2 says, and writes nothing.

use crate::support;

use std::process::Output;

use support::*;

/// The xeon-amx cluster whose answers to the requests at `path` carry `fault` (`times` of
/// them; `None`: every one).
fn xeon_with(path: &str, fault: Fault, times: Option<u32>) -> ClusterServer {
    let server = ClusterServer::start(fixture("xeon-amx"));
    server.inject(Some(path), fault, times);
    server
}

/// Runs `eas facts --out` on the xeon cluster; asserts the exit code and that nothing was
/// written, and returns stderr.
fn failing(server: &ClusterServer, extra: &[&str], code: i32) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("facts.json");
    let mut args = vec!["--out", out_file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = facts(server, "xeon-amx", &args);
    let stderr = exited(&out, code);
    assert!(!out_file.exists(), "nothing is written on failure");
    assert!(out.stdout.is_empty());
    stderr
}

#[test]
fn api_unreachable_names_the_address_and_cause() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with(&server, dir.path(), &server.url(), &format!("http://127.0.0.1:{port}"));
    let out = facts_through(&kubeconfig).output().unwrap();
    let stderr = exited(&out, 1);
    assert!(stderr.contains(&format!("cannot reach the Kubernetes API at http://127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.to_lowercase().contains("connection refused"), "the cause is named: {stderr}");
    assert!(stderr.contains("next: check that the cluster is running"), "{stderr}");
}

#[test]
fn a_server_error_names_the_call() {
    let server = xeon_with("/api/v1/nodes", Fault::Status(500, "etcdserver: request timed out".into()), None);
    let stderr = failing(&server, &[], 1);
    assert!(
        stderr.contains("error: facts: list nodes failed: 500 Internal Server Error: etcdserver: request timed out"),
        "{stderr}"
    );
}

#[test]
fn an_overloaded_server_is_retried() {
    let server = xeon_with(
        "/api/v1/nodes",
        Fault::Status(503, "the server is currently unable to handle the request".into()),
        Some(1),
    );
    let out = facts(&server, "xeon-amx", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let node_calls = server.requests().iter().filter(|r| r.path == "/api/v1/nodes").count();
    assert_eq!(node_calls, 2, "one 503, then the answer");
}

#[test]
fn a_slow_answer_times_out_at_the_request_timeout() {
    let server = xeon_with("/apis/apps/v1/daemonsets", Fault::Slow(std::time::Duration::from_secs(8)), None);
    let stderr = failing(&server, &["--request-timeout", "1"], 1);
    assert!(
        stderr.contains(&format!(
            "list daemonsets in all namespaces got no complete answer from {} within 1 s",
            server.url()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("raise --request-timeout"), "{stderr}");
}

#[test]
fn a_reset_connection_is_reported_as_unreachable() {
    let server = xeon_with("/api/v1/namespaces", Fault::Reset, None);
    let stderr = failing(&server, &[], 1);
    assert!(
        stderr.contains(&format!("cannot reach the Kubernetes API at {} (list namespaces)", server.url())),
        "{stderr}"
    );
}

#[test]
fn rejected_credentials_name_the_context() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with(&server, dir.path(), "token: recorded-cluster-token", "token: expired");
    let out = facts_through(&kubeconfig).output().unwrap();
    let stderr = exited(&out, 1);
    // The credentials it names, and what to do.
    contains_all(
        &stderr,
        &[
            "rejected the credentials of context \"default\" (401 Unauthorized)",
            "next: refresh the credentials of context default",
            ": user \"default-reader\" (a bearer token) in ",
        ],
    );
}

/// `eas status` with a stale token: one 401, naming the credentials the kubeconfig names, never
/// "the API server does not answer" first; a 403 names what was denied and the rule allowing it.
#[test]
fn status_names_a_401_and_a_403_once_with_their_cause() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with(&server, dir.path(), "token: recorded-cluster-token", "token: expired");
    let status = |kubeconfig: &std::path::Path| {
        let out = eas_on(kubeconfig, dir.path()).arg("status").output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        text(&out.stderr)
    };
    let stderr = status(&kubeconfig);
    assert!(!stderr.contains("does not answer"), "the server answered: {stderr}");
    assert_eq!(stderr.matches("401").count(), 1, "one message per cause: {stderr}");
    assert!(stderr.contains("authenticates as user \"default-reader\" (a bearer token) in "), "{stderr}");
    assert!(stderr.contains("next: refresh the credentials of context default"), "{stderr}");

    let denied = "namespaces \"kube-system\" is forbidden: User \"reader\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope";
    server.inject(Some("/api/v1/namespaces/kube-system"), Fault::Status(403, denied.into()), None);
    let stderr = status(server.kubeconfig());
    assert!(!stderr.contains("does not answer") && !stderr.contains("check the API server"), "{stderr}");
    assert!(stderr.contains(denied), "{stderr}");
    assert!(
        stderr.contains(r#"a ClusterRole rule that allows it: {apiGroups: [""], resources: ["namespaces"], verbs: ["get"]} bound cluster-wide (ClusterRoleBinding)"#),
        "{stderr}"
    );
}

#[test]
fn a_forbidden_list_names_verb_and_resource() {
    let message =
        "secrets is forbidden: User \"reader\" cannot list resource \"secrets\" in API group \"\" at the cluster scope";
    let server = xeon_with("/secrets", Fault::Status(403, message.into()), None);
    let stderr = failing(&server, &[], 1);
    assert!(
        stderr.contains(&format!(
            "list secrets (type=helm.sh/release.v1) in all namespaces was refused (403 Forbidden): {message}"
        )),
        "{stderr}"
    );
}

fn run_with_kubeconfig(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut c = eas(dir.path());
    if let Some(k) = kubeconfig {
        c.arg("--kubeconfig").arg(k);
    }
    if let Some(ctx) = context {
        c.args(["--context", ctx]);
    }
    c.args(["facts", "--out", "facts.json"]);
    let out = c.output().unwrap();
    assert!(!dir.path().join("facts.json").exists(), "nothing is written on bad input");
    out
}

#[test]
fn kubeconfig_problems_are_bad_input() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let malformed = dir.path().join("malformed");
    std::fs::write(&malformed, "clusters: [ this is: not: yaml").unwrap();
    let cases: [(Option<&std::path::Path>, Option<&str>, &str, &str); 4] = [
        (Some(&missing), None, "kubeconfig", "not found"),
        (Some(&malformed), None, "is malformed", "kubectl config view"),
        (Some(server.kubeconfig()), Some("prod"), "context \"prod\" not found", "(contexts: default)"),
        (None, None, "no kubeconfig: --kubeconfig not given, KUBECONFIG not set", "pass --kubeconfig PATH"),
    ];
    for (kubeconfig, context, cause, hint) in cases {
        let out = run_with_kubeconfig(kubeconfig, context);
        let stderr = exited(&out, 2);
        assert!(stderr.contains(cause) && stderr.contains(hint), "{cause}: {stderr}");
        assert_eq!(stderr.lines().count(), 2, "one-line cause and one-line hint: {stderr}");
    }
    assert!(server.requests().is_empty(), "no call is made on bad input");
}

#[test]
fn kubeconfig_from_the_environment_and_context_selection() {
    let server =
        ClusterServer::start_with(fixture("xeon-amx"), Options { context: Some("lab".into()), ..Options::default() });
    let dir = tempfile::tempdir().unwrap();
    // KUBECONFIG lists a missing file first: skipped, like kubectl does.
    let list = format!("{}:{}", dir.path().join("absent").display(), server.kubeconfig().display());
    let out = eas(&fixture("xeon-amx"))
        .env("KUBECONFIG", list)
        .args(["--context", "lab", "facts"])
        .args(facts_args("xeon-amx"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (facts, _) = stable_facts(&out.stdout);
    assert_eq!(facts["cluster"]["context"], "lab");
}

#[test]
fn operator_input_is_checked() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    // `eas facts --containerd-config VALUE`, which is bad input: its stderr.
    let refused = |value: &str| {
        let out = eas(&fixture("xeon-amx"))
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .args(["facts", "--containerd-config", value])
            .output()
            .unwrap();
        exited(&out, 2)
    };
    let stderr = refused("ghost-node=node-files/xeon-sr-01/config.toml");
    assert!(stderr.contains("the cluster has no node ghost-node (nodes: xeon-sr-01)"), "{stderr}");

    let before = server.requests().len();
    let stderr = refused("xeon-sr-01=nodes.json");
    assert!(stderr.contains("nodes.json is not a containerd config"), "{stderr}");
    assert_eq!(server.requests().len(), before, "a malformed flag is found before any call");
}

#[test]
fn docker_unreachable_under_a_k3d_cluster_says_what_is_unknown() {
    let server = ClusterServer::start(fixture("k3d-gpu-desktop"));
    let out =
        eas(&fixture("k3d-gpu-desktop")).arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "the facts are still gathered: {stderr}");
    let (facts, _) = stable_facts(&out.stdout);
    assert_eq!(facts["cluster"]["k3d_cluster"], "gpu");
    assert_eq!(facts["docker"], serde_json::Value::Null);
    assert_eq!(facts["nodes"][0]["containerd"], serde_json::Value::Null);
    assert!(
        stderr.contains("warning: the nodes are named like k3d cluster \"gpu\", but Docker is unreachable at unix:///nonexistent/eas-test/docker.sock"),
        "{stderr}"
    );
    assert!(stderr.contains("whether Docker is rootless is unknown"), "{stderr}");
    assert!(
        stderr.contains("warning: containerd facts unknown for node k3d-gpu-server-0: Docker is unreachable"),
        "{stderr}"
    );
    assert!(stderr.contains("containerd config and NRI socket are unknown"), "{stderr}");

    // The generator then refuses, naming the way out.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("facts.json"), &out.stdout).unwrap();
    let config = eas(dir.path()).args(["config", "--facts", "facts.json", "--out", "out"]).output().unwrap();
    assert_eq!(config.status.code(), Some(3), "{}", text(&config.stderr));
    assert!(text(&config.stderr).contains("REFUSE: containerd facts unreadable on k3d-gpu-server-0"));
    assert!(text(&config.stderr).contains("--containerd-config NODE=FILE, or *=FILE for every node alike"));
}

#[test]
fn pods_forbidden_leaves_the_requests_absent_with_a_warning() {
    let server = xeon_with(
        "/api/v1/pods",
        Fault::Status(403, "pods is forbidden: User \"reader\" cannot list resource \"pods\"".into()),
        None,
    );
    let out = facts(&server, "xeon-amx", &[]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: list pods (spec.nodeName=xeon-sr-01) in all namespaces was refused (403 Forbidden)"),
        "{stderr}"
    );
    let (facts, _) = stable_facts(&out.stdout);
    assert!(facts["nodes"][0].get("pod_requests").is_none(), "no guessed requests");
}

#[test]
fn a_list_whose_continue_token_repeats_stops_naming_the_list() {
    let server = xeon_with("/api/v1/namespaces", Fault::RepeatContinue, None);
    let started = std::time::Instant::now();
    let stderr = failing(&server, &[], 1);
    assert!(
        stderr.contains(
            "error: facts: list namespaces: the API server's pages do not end: page 2 repeats an earlier continue token"
        ),
        "{stderr}"
    );
    let calls = server.requests().iter().filter(|r| r.path == "/api/v1/namespaces").count();
    assert_eq!(calls, 2, "the first page, then the one that repeats its token");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn a_list_without_items_or_an_item_without_a_name_is_a_malformed_answer_not_an_empty_cluster() {
    // `eas facts` when the node list answers `body`: it fails naming the list and `cause`.
    let malformed = |body: &str, cause: &str| {
        let server = xeon_with("/api/v1/nodes", Fault::Body(200, body.into()), None);
        let stderr = failing(&server, &[], 1);
        let want = format!("error: facts: list nodes: the answer is not what the Kubernetes API sends: {cause}");
        assert!(stderr.contains(&want), "{body}: {stderr}");
    };
    for body in [r#"{}"#, r#"{"a":[1,2,3]}"#, r#"{"kind":"NodeList","apiVersion":"v1","metadata":{}}"#] {
        malformed(body, "the list has no `items`");
    }
    malformed(r#"{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[{}]}"#, "missing field `metadata`");
}

/// Issue 29 item 6: a user RBAC refuses two of the facts' reads, and the refusal of the earlier
/// read comes last (answers to concurrent calls arrive in any order). `eas facts` and
/// `eas up --dry-run` name the same first refusal, the first in the facts' call order (the nodes),
/// with the same message, whichever answer came first.
#[test]
fn facts_and_the_dry_run_name_the_same_first_refusal() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let nodes =
        "nodes is forbidden: User \"reader\" cannot list resource \"nodes\" in API group \"\" at the cluster scope";
    let daemonsets = "daemonsets.apps is forbidden: User \"reader\" cannot list resource \"daemonsets\" in API group \"apps\" at the cluster scope";
    let late = Fault::SlowStatus(std::time::Duration::from_millis(800), 403, nodes.into());
    server.inject(Some("/api/v1/nodes"), late, None);
    server.inject(Some("/apis/apps/v1/daemonsets"), Fault::Status(403, daemonsets.into()), None);
    let first_error = |stderr: &str| stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or("").to_string();

    let facts_err = failing(&server, &[], 1);
    let facts_line = first_error(&facts_err);
    assert!(facts_line.contains(&format!("list nodes was refused (403 Forbidden): {nodes}")), "{facts_err}");
    assert!(!facts_err.contains("daemonsets"), "one message: {facts_err}");

    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(dir.path());
    let mut c = eas(dir.path());
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.path().join("state"));
    c.args(["up", "--dry-run", "--pins"]).arg(trees.join("pins.json"));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    let out = c.output().unwrap();
    let up_err = exited(&out, 1);
    assert_eq!(first_error(&up_err), facts_line, "{up_err}");
    assert!(!up_err.contains("daemonsets"), "one message: {up_err}");
}
