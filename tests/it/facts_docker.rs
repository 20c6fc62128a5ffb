//! `eas facts` on a k3d-style cluster whose nodes are real containers on a real Docker Engine:
//! stand-in k3d node containers built from the local base image (scripts/base-image.sh), with
//! k3s's containerd config in place and a real unix socket at the NRI socket path, labelled as
//! k3d labels its nodes. The API side is a recorded cluster naming the same nodes.
//!
//! Needs a Docker Engine (`scripts/docker-up.sh`; .ci/run starts one). Without one these tests
//! fail, saying so: they are never skipped.

use crate::support;

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};
use support::*;

const BASE_IMAGE: &str = "eas-test-base:bookworm";
const CONFIG_PATH: &str = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";
const NRI_SOCKET: &str = "/var/run/nri/nri.sock";

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker").args(args).output().expect("the docker CLI runs")
}

fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {}: {}", args.join(" "), text(&out.stderr));
    text(&out.stdout)
}

/// The engine (the Docker tier's turn at it) and the base image, or a failure that says how to
/// get them.
fn engine_ready() -> support::docker::Turn {
    let engine = support::docker::engine();
    if !docker(&["image", "inspect", BASE_IMAGE]).status.success() {
        let st = Command::new("bash").arg(root().join("scripts/base-image.sh")).status().expect("run base-image.sh");
        assert!(st.success(), "scripts/base-image.sh could not make {BASE_IMAGE}");
    }
    engine
}

/// Whether this engine runs rootless, as `docker info` says.
fn engine_rootless() -> bool {
    docker_ok(&["info", "--format", "{{json .SecurityOptions}}"]).contains("name=rootless")
}

/// A stand-in k3d node container, removed when dropped (also when a test fails).
struct NodeContainer {
    name: String,
}

impl NodeContainer {
    /// Starts `name` in k3d cluster `cluster` with `config` at k3s's containerd config path and,
    /// if `socket`, a listening unix socket at the NRI socket path. `tmpfs_run` mounts a tmpfs
    /// on /run as k3d does, which hides the socket from Docker's archive API.
    fn start(cluster: &str, name: &str, role: &str, config: &str, socket: bool, tmpfs_run: bool) -> NodeContainer {
        NodeContainer::start_as(cluster, name, name, role, config, socket, tmpfs_run)
    }

    /// As [`NodeContainer::start`], with a hostname (the node's name) other than the container's.
    fn start_as(
        cluster: &str,
        name: &str,
        hostname: &str,
        role: &str,
        config: &str,
        socket: bool,
        tmpfs_run: bool,
    ) -> NodeContainer {
        let script = format!(
            "import base64, os, socket, time\n\
             os.makedirs(os.path.dirname('{CONFIG_PATH}'), exist_ok=True)\n\
             open('{CONFIG_PATH}', 'wb').write(base64.b64decode(os.environ['NODE_CONFIG']))\n\
             if {socket}:\n    os.makedirs(os.path.dirname('{NRI_SOCKET}'), exist_ok=True)\n    \
             s = socket.socket(socket.AF_UNIX)\n    s.bind('{NRI_SOCKET}')\n    s.listen(1)\n\
             open('/ready', 'w').close()\n\
             time.sleep(3600)\n",
            socket = if socket { "True" } else { "False" },
        );
        let config_b64 = format!("NODE_CONFIG={}", base64::engine::general_purpose::STANDARD.encode(config));
        let mut args = vec!["run", "-d", "--name", name, "--hostname", hostname];
        let labels = [format!("k3d.cluster={cluster}"), format!("k3d.role={role}"), "io.eas.managed=true".to_string()];
        for l in &labels {
            args.extend(["--label", l.as_str()]);
        }
        if tmpfs_run {
            args.extend(["--tmpfs", "/run"]);
        }
        args.extend(["-e", config_b64.as_str(), BASE_IMAGE, "python3", "-c", script.as_str()]);
        let c = NodeContainer { name: name.to_string() };
        docker_ok(&args);
        for _ in 0..100 {
            if docker(&["exec", name, "test", "-e", "/ready"]).status.success() {
                return c;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("container {name} did not get ready: {}", docker_ok(&["logs", name]));
    }
}

impl Drop for NodeContainer {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.name]);
    }
}

fn unique_cluster() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("eastest{}x{nanos:x}", std::process::id())
}

/// The recorded k3d-gpu desktop with its node renamed (and, if `agent`, a second node).
fn fixture_with_nodes(dir: &Path, server: &str, agent: Option<&str>) {
    let src = fixture("k3d-gpu-desktop");
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let body = std::fs::read_to_string(&p).unwrap().replace("k3d-gpu-server-0", server);
            std::fs::write(dir.join(p.file_name().unwrap()), body).unwrap();
        }
    }
    if let Some(agent) = agent {
        let path = dir.join("nodes.json");
        let mut nodes: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut a: Value =
            serde_json::from_str(&serde_json::to_string(&nodes["items"][0]).unwrap().replace(server, agent)).unwrap();
        a["metadata"]["annotations"]["k3s.io/node-args"] = json!("[\"agent\"]");
        a["metadata"]["labels"].as_object_mut().unwrap().retain(|k, _| !k.starts_with("node-role.kubernetes.io/"));
        nodes["items"].as_array_mut().unwrap().push(a);
        std::fs::write(&path, serde_json::to_string_pretty(&nodes).unwrap()).unwrap();
    }
}

fn eas_facts(server: &ClusterServer, dir: &Path) -> std::process::Output {
    let mut c = eas(dir);
    match std::env::var("DOCKER_HOST") {
        Ok(h) => c.env("DOCKER_HOST", h),
        Err(_) => c.env_remove("DOCKER_HOST"),
    };
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").output().expect("run eas")
}

#[test]
fn a_k3d_node_container_is_read_through_the_docker_api() {
    let _engine = engine_ready();
    let cluster = unique_cluster();
    let node = format!("k3d-{cluster}-server-0");
    let config =
        std::fs::read_to_string(fixture("k3d-gpu-desktop").join("node-files/k3d-gpu-server-0/config.toml")).unwrap();
    let _container = NodeContainer::start(&cluster, &node, "server", &config, true, false);
    let dir = tempfile::tempdir().unwrap();
    fixture_with_nodes(dir.path(), &node, None);
    let server =
        ClusterServer::start_with(dir.path(), Options { context: Some("k3d-gpu".into()), ..Options::default() });

    let out = eas_facts(&server, dir.path());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "nothing is unknown: {stderr}");
    let (facts, _) = stable_facts(&out.stdout);

    // Everything but the Docker side equals what the recorded desktop gives with its files
    // supplied by hand; the Docker side is now known.
    let golden = std::fs::read_to_string(fixture("k3d-gpu-desktop").join("expected/facts.json")).unwrap();
    let mut expected: Value = serde_json::from_str(&golden.replace("k3d-gpu-server-0", &node)).unwrap();
    expected["cluster"]["k3d_cluster"] = json!(cluster);
    expected["docker"] = json!({"rootless": engine_rootless()});
    assert_eq!(facts, expected);
    assert_eq!(writes(&server), Vec::<String>::new(), "eas facts only reads (and asks access reviews)");
}

#[test]
fn k3d_nodes_with_run_on_tmpfs_and_without_a_socket() {
    let _engine = engine_ready();
    let cluster = unique_cluster();
    let server_node = format!("k3d-{cluster}-server-0");
    let agent_node = format!("k3d-{cluster}-agent-0");
    // The server as k3d runs it (tmpfs on /run, where the socket lives); the agent's containerd
    // 1.x config names a custom socket that does not exist.
    let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = ['/usr/bin']\n";
    let v2 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/bin\"\n\
              [plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n  socket_path = \"/var/run/nri/other.sock\"\n";
    let _s = NodeContainer::start(&cluster, &server_node, "server", v3, true, true);
    // The agent's container is named otherwise: it is found by its hostname.
    let agent_container = format!("{cluster}-worker");
    let _a = NodeContainer::start_as(&cluster, &agent_container, &agent_node, "agent", v2, true, false);
    let dir = tempfile::tempdir().unwrap();
    fixture_with_nodes(dir.path(), &server_node, Some(&agent_node));
    let server = ClusterServer::start(dir.path());

    let out = eas_facts(&server, dir.path());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (facts, _) = stable_facts(&out.stdout);
    assert_eq!(facts["cluster"]["k3d_cluster"], json!(cluster));
    let by_name =
        |n: &str| facts["nodes"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap()["containerd"].clone();
    assert_eq!(
        by_name(&server_node),
        json!({"cni_bin_dirs": ["/usr/bin"], "nri_socket": true}),
        "found from inside, past the tmpfs"
    );
    assert_eq!(
        by_name(&agent_node),
        json!({"cni_bin_dirs": ["/bin"], "nri_socket": false}),
        "the socket the config names is absent"
    );
}

#[test]
fn a_k3d_node_whose_container_is_gone() {
    let _engine = engine_ready();
    let cluster = unique_cluster();
    let node = format!("k3d-{cluster}-server-0");
    let dir = tempfile::tempdir().unwrap();
    fixture_with_nodes(dir.path(), &node, None);
    let server = ClusterServer::start(dir.path());
    let out = eas_facts(&server, dir.path());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (facts, _) = stable_facts(&out.stdout);
    assert_eq!(facts["cluster"]["k3d_cluster"], json!(cluster), "named by k3d's naming");
    assert_eq!(facts["docker"], Value::Null);
    assert_eq!(facts["nodes"][0]["containerd"], Value::Null);
    assert!(
        stderr.contains("no running container of that name with label k3d.cluster on the Docker engine"),
        "{stderr}"
    );
}
