//! `eas facts` against the recorded clusters (fixtures/clusters/, served by tests/it/support):
//! every field as expected, only reads, a fixed number of calls, no Secret value in the output.

use crate::support;

use std::collections::BTreeSet;

use support::*;

fn gather(name: &str) -> (ClusterServer, std::process::Output) {
    let server = ClusterServer::start(fixture(name));
    let out = facts(&server, name, &[]);
    assert!(out.status.success(), "{name}: eas facts failed:\n{}", text(&out.stderr));
    (server, out)
}

/// Every recorded cluster but the 2000-node one, whose document is checked by its properties.
const SMALL: [&str; 4] = ["k3d-gpu-desktop", "xeon-amx", "k3s-3node-eas", "eat1"];

#[test]
fn each_recorded_cluster_gives_its_expected_facts() {
    for name in SMALL {
        let (server, out) = gather(name);
        let (facts, at) = stable_facts(&out.stdout);
        assert!(
            at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
            "{name}: gathered_at {at:?} is not an RFC 3339 UTC time"
        );
        let pretty = format!("{}\n", serde_json::to_string_pretty(&facts).unwrap());
        golden(&fixture(name).join("expected/facts.json"), &pretty);
        golden(&fixture(name).join("expected/facts.stderr"), &redact(&text(&out.stderr), &server));
    }
}

#[test]
fn only_reads_and_the_same_calls_whatever_the_cluster_size() {
    let mut seen = Vec::new();
    for name in ["xeon-amx", "scale-2000"] {
        let (server, out) = gather(name);
        let (facts, _) = stable_facts(&out.stdout);
        let log = server.requests();
        assert_eq!(writes(&server), Vec::<String>::new(), "{name}: only reads and access reviews may reach the API");
        let reviews = log.iter().filter(|r| r.path == ACCESS_REVIEWS).count();
        assert_eq!(reviews, 8, "{name}: one access review per row of data/prereq.json");
        assert!(!log.iter().any(|r| r.path.contains("/secrets/")), "{name}: no Secret is read one by one");
        let secrets: Vec<&Logged> = log.iter().filter(|r| r.path.ends_with("/secrets")).collect();
        assert_eq!(secrets.len(), 1, "{name}");
        assert_eq!(secrets[0].param("fieldSelector").as_deref(), Some("type=helm.sh/release.v1"), "{name}");
        let paths: BTreeSet<String> = log.iter().map(|r| r.path.clone()).collect();
        seen.push((name, facts["nodes"].as_array().unwrap().len(), log.len(), paths));
    }
    let (small, big) = (&seen[0], &seen[1]);
    assert_eq!((small.1, big.1), (1, 2000));
    assert_eq!(small.2, big.2, "requests must not grow with nodes: {} for 1 node, {} for 2000", small.2, big.2);
    assert_eq!(small.3, big.3);
    assert_eq!(
        small.2, 17,
        "version, nodes, namespaces, daemonsets, secrets, 2 × deployments, the landing node's pods, storageclasses, 8 access reviews: {:?}",
        small.3
    );
}

/// The fit's input: the pods of the node a model would land on, asked for in one list call with
/// a `spec.nodeName` field selector, never every pod of the cluster.
#[test]
fn pod_requests_come_from_one_call_for_the_landing_node_only() {
    // (cluster, landing node: the most allocatable memory, untainted, AMX-labelled when any is;
    //  its pods' memory and CPU requests as the recorded pods set them; how many are counted)
    let cases = [
        // lab-w-1 and lab-w-2 tie on memory (the first name wins); lab-cp-1's coredns is left out.
        ("k3s-3node-eas", "lab-w-1", 2048 + 70, "200m", "2"),
        // the finished helm-install pod holds nothing; the GPU plugin's pod requests nothing.
        ("k3d-gpu-desktop", "k3d-gpu-server-0", 70 + 70, "200m", "4"),
        // the servers carry k3s's CriticalAddonsOnly NoExecute taint; the agents tie.
        ("scale-2000", "scale-agent-0000", 0, "0m", "2"),
    ];
    for (name, node, mib, cpu, pods) in cases {
        let (server, out) = gather(name);
        let (facts, _) = stable_facts(&out.stdout);
        let log = server.requests();
        let calls: Vec<&Logged> = log.iter().filter(|r| r.path.ends_with("/pods")).collect();
        assert_eq!(calls.len(), 1, "{name}: one pods call");
        assert_eq!(calls[0].path, "/api/v1/pods", "{name}");
        assert_eq!(calls[0].param("fieldSelector"), Some(format!("spec.nodeName={node}")), "{name}");
        for n in facts["nodes"].as_array().unwrap() {
            if n["name"] == node {
                let want =
                    serde_json::json!({"cpu": cpu, "memory": (mib as u64 * 1024 * 1024).to_string(), "pods": pods});
                assert_eq!(n["pod_requests"], want, "{name}");
            } else {
                assert!(n.get("pod_requests").is_none(), "{name}: {} is not the landing node", n["name"]);
            }
        }
    }
}

#[test]
fn no_secret_value_reaches_the_output() {
    for name in CLUSTERS {
        let (_server, out) = gather(name);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!all.contains("CANARY"), "{name}: a Secret's value reached the output");
        let secrets: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture(name).join("secrets.json")).unwrap()).unwrap();
        for s in secrets["items"].as_array().unwrap() {
            for (key, value) in s["data"].as_object().unwrap() {
                let v = value.as_str().unwrap();
                assert!(!all.contains(v), "{name}: data {key} of Secret {} is in the output", s["metadata"]["name"]);
            }
        }
    }
}

#[test]
fn the_2000_node_cluster_is_read_whole_in_one_page() {
    let (server, out) = gather("scale-2000");
    let (facts, _) = stable_facts(&out.stdout);
    let nodes = facts["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!((names.len(), unique.len()), (2000, 2000));
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "nodes are listed by name");
    assert!(nodes.iter().all(|n| n["containerd"]["nri_socket"] == true), "the operator's '*' config covers every node");
    assert_eq!(nodes[1999]["name"], "scale-server-2");
    assert_eq!(nodes[1996]["annotations"]["k3s.io/internal-ip"], "10.101.7.204", "each clone has its own address");
    let node_lists: Vec<Logged> = server.requests().into_iter().filter(|r| r.path == "/api/v1/nodes").collect();
    assert_eq!(node_lists.len(), 1);
    assert_eq!(node_lists[0].param("limit").as_deref(), Some("5000"));
    assert_eq!(
        facts["helm_releases"],
        serde_json::json!([
            {"namespace": "logging", "name": "fluent-bit", "chart": "fluent-bit-0.53.0", "status": "deployed"},
            {"namespace": "monitoring", "name": "kube-prometheus-stack", "chart": "kube-prometheus-stack-77.6.1", "status": "deployed"},
            {"namespace": "node-feature-discovery", "name": "node-feature-discovery", "chart": "node-feature-discovery-0.17.1", "status": "deployed"}
        ])
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains("2000 nodes (2000 with containerd facts)"), "{stderr}");
}

/// `status`, `verify` and `doctor` read nodes in pages as `facts` does: at 5,201 nodes (over the
/// 5,000 a page asks for), each of their node lists asks with `limit=` and the second page of
/// each comes with the first's `continue` token.
#[test]
fn status_verify_and_doctor_read_5201_nodes_in_pages() {
    let options = Options { scale_count: Some(5198), ..Options::default() };
    let server = ClusterServer::start_with(fixture("scale-2000"), options);
    assert_eq!(server.count("v1", "nodes"), 5201);
    let dir = tempfile::tempdir().unwrap();
    for command in ["status", "verify", "doctor"] {
        server.clear_requests();
        let out = eas(dir.path()).arg("--kubeconfig").arg(server.kubeconfig()).arg(command).output().unwrap();
        let lists: Vec<Logged> = server.requests().into_iter().filter(|r| r.path == "/api/v1/nodes").collect();
        let why = format!("{command}: {lists:?}\n{}", text(&out.stderr));
        assert!(!lists.is_empty(), "{why}");
        assert!(lists.iter().all(|r| r.param("limit").as_deref() == Some("5000")), "every node list is paged: {why}");
        let firsts = lists.iter().filter(|r| r.param("continue").is_none()).count();
        let seconds = lists.iter().filter(|r| r.param("continue").is_some()).count();
        assert!(firsts >= 1 && firsts == seconds, "each list's second page follows its continue token: {why}");
    }
}

#[test]
fn continue_tokens_are_followed_when_the_server_pages() {
    let options = Options { max_page: Some(300), ..Options::default() };
    let server = ClusterServer::start_with(fixture("scale-2000"), options);
    let out = facts(&server, "scale-2000", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (paged, _) = stable_facts(&out.stdout);
    let node_lists: Vec<Logged> = server.requests().into_iter().filter(|r| r.path == "/api/v1/nodes").collect();
    assert_eq!(node_lists.len(), 7, "2000 nodes in pages of 300");
    assert!(node_lists[0].param("continue").is_none());
    assert!(node_lists[1..].iter().all(|r| r.param("continue").is_some()));

    let whole = ClusterServer::start(fixture("scale-2000"));
    let (unpaged, _) = stable_facts(&facts(&whole, "scale-2000", &[]).stdout);
    assert_eq!(paged, unpaged, "page boundaries do not change the document");
}

#[test]
fn out_writes_the_document_to_a_file_and_nothing_to_stdout() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("facts.json");
    let out = facts(&server, "xeon-amx", &["--out", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let (from_file, _) = stable_facts(&std::fs::read(&path).unwrap());
    let (from_stdout, _) = stable_facts(&facts(&server, "xeon-amx", &[]).stdout);
    assert_eq!(from_file, from_stdout);
    assert!(text(&out.stderr).contains(&format!("wrote {}", path.display())));
}

/// Stock k3s on this machine, its node registered under a name that is not this machine's
/// hostname (`xeon-sr-01`): found by its InternalIP, an address of this machine (the recorded
/// node's address changed to 127.0.0.1), and read from the local disk (under EAS_HOST_ROOT) at
/// the path its `--data-dir` implies, with no --containerd-config.
#[test]
fn a_stock_k3s_node_that_is_this_host_by_address_is_read_from_the_local_disk() {
    let config = std::fs::read_to_string(fixture("xeon-amx").join("node-files/xeon-sr-01/config.toml")).unwrap();
    for data_dir in [None, Some("/srv/k3s")] {
        let server = ClusterServer::start(fixture("xeon-amx"));
        let node = ObjectKey::core("nodes", "xeon-sr-01");
        let mut args = vec!["server", "--write-kubeconfig-mode", "0644"];
        args.extend(data_dir.iter().flat_map(|d| ["--data-dir", d]));
        server.update(
            &node,
            serde_json::json!({
                "metadata": {"annotations": {"k3s.io/node-args": serde_json::to_string(&args).unwrap()}},
                "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": "xeon-sr-01"}]}
            }),
        );
        let root = tempfile::tempdir().unwrap();
        let at = root.path().join(data_dir.unwrap_or("/var/lib/rancher/k3s").trim_start_matches('/'));
        std::fs::create_dir_all(at.join("agent/etc/containerd")).unwrap();
        std::fs::write(at.join("agent/etc/containerd/config.toml"), &config).unwrap();
        std::fs::create_dir_all(root.path().join("var/run/nri")).unwrap();
        let _nri = std::os::unix::net::UnixListener::bind(root.path().join("var/run/nri/nri.sock")).unwrap();

        let out = eas(&fixture("xeon-amx"))
            .env("EAS_HOST_ROOT", root.path())
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .arg("facts")
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{data_dir:?}: {stderr}");
        let (facts, _) = stable_facts(&out.stdout);
        let want: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture("xeon-amx").join("expected/facts.json")).unwrap())
                .unwrap();
        assert_eq!(facts["nodes"][0]["containerd"], want["nodes"][0]["containerd"], "{data_dir:?}: {stderr}");
        assert!(stderr.contains("1 nodes (1 with containerd facts)"), "{data_dir:?}: {stderr}");
    }

    // Not this host (its recorded address is not one of this machine's): the warning names the
    // command that was run, the node, `*=FILE` and the path its node-args imply.
    let server = ClusterServer::start(fixture("xeon-amx"));
    let out = eas(&fixture("xeon-amx")).arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    contains_all(
        &stderr,
        &[
            "containerd facts unknown for node xeon-sr-01",
            "no InternalIP of the node is an address of this machine",
            "re-run `eas facts` with --containerd-config NODE=FILE, or *=FILE for every node alike",
            "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        ],
    );
}
