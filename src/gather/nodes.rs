//! Each node's containerd facts (CNI `bin_dirs`, NRI socket), read from wherever the node's
//! files can be reached: a file the operator supplied, the k3d node container through the
//! Docker API, or this host when the node is this host. Where none reaches, the fact is null
//! and a warning says why and what would supply it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::StreamExt;

use crate::facts::{Containerd, Docker, Node};

use super::containerd::{self, ContainerdConfig};
use super::docker::{DockerError, Engine, K3dContainer};
use super::objects;

pub use super::host::Host;

/// Node containers read at once.
const CONCURRENT_READS: usize = 8;
/// Node names listed in one warning before "and N more".
const NAMES_SHOWN: usize = 5;
const NODE_ARGS: &str = "k3s.io/node-args";

/// A containerd config the operator supplied for a node (`*`: every node not named otherwise).
#[derive(Debug, Clone)]
pub struct Supplied {
    pub file: PathBuf,
    pub config: ContainerdConfig,
}

/// What the operator told `eas facts` (or `eas up`) about nodes it cannot read itself.
#[derive(Debug, Clone, Default)]
pub struct Operator {
    pub configs: BTreeMap<String, Supplied>,
    pub nri_sockets: BTreeMap<String, bool>,
    /// The command the operator ran (`eas facts`, `eas up`), named in what to run next.
    pub command: &'static str,
    /// Namespaces whose pods the landing node's `pod_requests` leaves out: the ones the ledger
    /// says eas's runs created, so eas's own model pod does not shrink the next run's budget.
    pub discount_namespaces: std::collections::BTreeSet<String>,
    /// `--probe-nodes`: a node found nowhere is read by a probe pod when it has an image for one.
    pub probe: bool,
}

pub const ANY_NODE: &str = "*";

impl Operator {
    /// The command to name in what to run next.
    pub fn command(&self) -> &'static str {
        if self.command.is_empty() { "eas facts" } else { self.command }
    }

    fn config_for(&self, node: &str) -> Option<&Supplied> {
        self.configs.get(node).or_else(|| self.configs.get(ANY_NODE))
    }

    fn socket_for(&self, node: &str) -> Option<bool> {
        self.nri_sockets.get(node).or_else(|| self.nri_sockets.get(ANY_NODE)).copied()
    }

    /// Node names the operator gave that the cluster does not have.
    pub fn unknown_nodes<'a>(&'a self, nodes: &[Node]) -> Vec<&'a str> {
        let mut names: Vec<&str> = self
            .configs
            .keys()
            .chain(self.nri_sockets.keys())
            .map(String::as_str)
            .filter(|n| *n != ANY_NODE && !nodes.iter().any(|node| node.name == *n))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// What the Docker probe found.
pub enum DockerState {
    Unreachable(DockerError),
    Reachable { addr: String, rootless: Result<bool, DockerError>, containers: Result<Vec<K3dContainer>, DockerError> },
}

/// Where one node's containerd facts come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Operator,
    Container {
        id: String,
        name: String,
    },
    Host,
    /// `--probe-nodes`: what the probe pod on node `on` (this node, or one of the same shape)
    /// read, with the node's `image`.
    Probed {
        image: String,
        on: String,
        read: Result<Containerd, String>,
    },
    Nowhere(String),
}

/// The cluster-level facts that come with locating the nodes.
#[derive(Debug, PartialEq)]
pub struct Located {
    pub sources: Vec<Source>,
    pub k3d_cluster: Option<String>,
    pub docker: Option<Docker>,
    pub warnings: Vec<String>,
}

/// Decides where each node's files are read from. Pure, given what the probes found.
pub fn locate(nodes: &[Node], operator: &Operator, docker: &DockerState, host: &Host) -> Located {
    let mut warnings = Vec::new();
    let containers: &[K3dContainer] = match docker {
        DockerState::Reachable { containers: Ok(c), .. } => c,
        _ => &[],
    };
    let by_name: BTreeMap<&str, &K3dContainer> = containers.iter().map(|c| (c.name.as_str(), c)).collect();
    let by_hostname: BTreeMap<&str, &K3dContainer> =
        containers.iter().filter_map(|c| c.hostname.as_deref().map(|h| (h, c))).collect();
    let named_k3d = objects::k3d_cluster_from_names(nodes.iter().map(|n| n.name.as_str()));
    let host_name = host.hostname.clone().unwrap_or_else(|| "unknown".into());
    let docker_why = match docker {
        DockerState::Unreachable(e) => e.to_string(),
        DockerState::Reachable { containers: Err(e), .. } => e.to_string(),
        DockerState::Reachable { addr, .. } => {
            format!("no running container of that name with label k3d.cluster on the Docker engine at {addr}")
        }
    };

    let mut matched_clusters: Vec<&str> = Vec::new();
    let mut sources = Vec::with_capacity(nodes.len());
    for n in nodes {
        let source = if operator.config_for(&n.name).is_some() {
            Source::Operator
        } else if let Some(c) = by_name.get(n.name.as_str()).or_else(|| by_hostname.get(n.name.as_str())) {
            matched_clusters.push(&c.cluster);
            Source::Container { id: c.id.clone(), name: c.name.clone() }
        } else if host.matches(n).is_some() {
            Source::Host
        } else if named_k3d.is_some() {
            Source::Nowhere(format!(
                "{docker_why}; the k3d node container's containerd config and NRI socket are unknown \
                 (start Docker on the machine running the cluster, or pass --containerd-config NODE=FILE)"
            ))
        } else {
            Source::Nowhere(format!(
                "not a k3d node container on this machine's Docker engine, nor this host ({host_name}: not its \
                 hostname, and no InternalIP of the node is an address of this machine): its containerd config \
                 cannot be read from here (re-run `{}` with --containerd-config NODE=FILE, or *=FILE for every node \
                 alike, FILE a copy of the node's {}, and --nri-socket NODE=present|absent; or with --probe-nodes, \
                 which reads it with a short-lived read-only pod on the node)",
                operator.command(),
                containerd::config_path(&node_args(n))
            ))
        };
        sources.push(source);
    }

    matched_clusters.sort_unstable();
    matched_clusters.dedup();
    let k3d_cluster = match matched_clusters.as_slice() {
        [] => named_k3d.clone(),
        [one] => Some(one.to_string()),
        many => {
            warnings.push(format!("nodes belong to several k3d clusters ({}); reporting the first", many.join(", ")));
            Some(many[0].to_string())
        }
    };
    // A Docker engine backs the nodes only if some node is one of its containers.
    let docker_fact = match docker {
        DockerState::Reachable { rootless, .. } if !matched_clusters.is_empty() => match rootless {
            Ok(r) => Some(Docker { rootless: *r }),
            Err(e) => {
                warnings.push(format!(
                    "{e}: whether Docker is rootless is unknown, so `docker` is null (the CPU policy then assumes it is not)"
                ));
                None
            }
        },
        _ => None,
    };
    if matched_clusters.is_empty()
        && let Some(name) = &named_k3d
    {
        warnings.push(format!(
            "the nodes are named like k3d cluster {name:?}, but {docker_why}: `docker` is null, and whether Docker is rootless is unknown"
        ));
    }
    Located { sources, k3d_cluster, docker: docker_fact, warnings }
}

/// Reads each node's containerd facts from its source; failures become null and a warning,
/// grouped by cause so a large cluster gets a few lines, not one per node.
pub async fn read_all(
    nodes: &mut [Node],
    sources: &[Source],
    operator: &Operator,
    engine: Option<&impl Engine>,
    host: &Host,
) -> Vec<String> {
    let results: Vec<(usize, NodeRead)> = futures::stream::iter(sources.iter().enumerate())
        .map(|(i, source)| {
            let node = &nodes[i];
            async move { (i, read_one(node, source, operator, engine, host).await) }
        })
        .buffer_unordered(CONCURRENT_READS)
        .collect()
        .await;
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut ordered = results;
    ordered.sort_by_key(|(i, _)| *i);
    for (i, result) in ordered {
        match result {
            Ok((c, note)) => {
                nodes[i].containerd = Some(c);
                if let Some(note) = note {
                    notes.entry(note).or_default().push(nodes[i].name.clone());
                }
            }
            Err(why) => problems.entry(why).or_default().push(nodes[i].name.clone()),
        }
    }
    let mut warnings: Vec<String> =
        notes.into_iter().map(|(note, names)| format!("{}: {note}", node_list(&names))).collect();
    warnings.extend(
        problems.into_iter().map(|(why, names)| format!("containerd facts unknown for {}: {why}", node_list(&names))),
    );
    warnings
}

fn node_list(names: &[String]) -> String {
    let noun = if names.len() == 1 { "node" } else { "nodes" };
    if names.len() <= NAMES_SHOWN {
        return format!("{noun} {}", names.join(", "));
    }
    format!("{} {noun} ({}, … and {} more)", names.len(), names[..NAMES_SHOWN].join(", "), names.len() - NAMES_SHOWN)
}

/// A node's containerd facts and a note about how they were taken, or why they could not be.
type NodeRead = Result<(Containerd, Option<String>), String>;

async fn read_one(
    node: &Node,
    source: &Source,
    operator: &Operator,
    engine: Option<&impl Engine>,
    host: &Host,
) -> NodeRead {
    let config_path = containerd::config_path(&node_args(node));
    match source {
        Source::Nowhere(why) => Err(why.clone()),
        Source::Probed { image, on, read } => {
            let note = if *on == node.name {
                format!("containerd facts read by a probe pod ({image}), deleted")
            } else {
                format!("containerd facts read by the probe pod on {on}, a node of the same shape (k3s args and image)")
            };
            read.clone().map(|c| (c, Some(note)))
        }
        Source::Operator => {
            let supplied = operator.config_for(&node.name).expect("located as operator-supplied");
            let cni_bin_dirs = supplied.config.cni_bin_dirs.clone();
            match operator.socket_for(&node.name) {
                Some(nri_socket) => Ok((Containerd { cni_bin_dirs, nri_socket }, None)),
                None => {
                    let enabled = supplied.config.nri.enabled;
                    let note = format!(
                        "nri_socket taken as {enabled} from {} (NRI {} there); pass --nri-socket NODE=present|absent after checking {} on the node",
                        supplied.file.display(),
                        if enabled { "enabled" } else { "disabled" },
                        supplied.config.nri.socket_path
                    );
                    Ok((Containerd { cni_bin_dirs, nri_socket: enabled }, Some(note)))
                }
            }
        }
        Source::Container { id, name } => {
            let engine = engine.ok_or("Docker is unreachable")?;
            let text =
                engine.read_file(id, &config_path).await.map_err(|e| e.to_string())?.ok_or_else(|| {
                    format!("{config_path} does not exist in container {name} (is k3s running in it?)")
                })?;
            let config = parse(&text, &format!("{config_path} in container {name}"))?;
            let nri_socket = engine.is_socket(id, &config.nri.socket_path).await.map_err(|e| e.to_string())?;
            Ok((Containerd { cni_bin_dirs: config.cni_bin_dirs, nri_socket }, None))
        }
        Source::Host => {
            let path = host.path(&config_path);
            let text = crate::bounded::read(&path, crate::bounded::Kind::Containerd).map_err(|e| match e.io_kind() {
                Some(std::io::ErrorKind::PermissionDenied) => format!(
                    "{} on this host is readable by root only: run `{}` as root, or pass --containerd-config NODE=FILE",
                    path.display(),
                    operator.command()
                ),
                _ => format!("{e} (is k3s running on this host?)"),
            })?;
            let config = parse(&text, &path.display().to_string())?;
            let nri_socket = is_socket(&host.path(&config.nri.socket_path));
            Ok((Containerd { cni_bin_dirs: config.cni_bin_dirs, nri_socket }, None))
        }
    }
}

fn parse(bytes: &[u8], what: &str) -> Result<ContainerdConfig, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("{what} is not text"))?;
    containerd::parse(text).map_err(|e| format!("{what}: {e}"))
}

pub fn node_args(node: &Node) -> Vec<String> {
    node.annotations.get(NODE_ARGS).map(|a| serde_json::from_str(a).unwrap_or_default()).unwrap_or_default()
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::facts::StringMap;

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            labels: StringMap::from([("kubernetes.io/hostname".into(), name.into())]),
            annotations: StringMap::from([(NODE_ARGS.into(), "[\"server\"]".into())]),
            capacity: StringMap::new(),
            allocatable: StringMap::new(),
            containerd: None,
            taints: vec![],
            pod_requests: None,
            conditions: vec![],
            unschedulable: false,
            internal_ips: vec![],
        }
    }

    fn container(name: &str, cluster: &str) -> K3dContainer {
        K3dContainer {
            id: format!("id-{name}"),
            name: name.into(),
            hostname: Some(name.into()),
            cluster: cluster.into(),
            role: "server".into(),
        }
    }

    fn reachable(containers: Vec<K3dContainer>, rootless: bool) -> DockerState {
        DockerState::Reachable {
            addr: "unix:///var/run/docker.sock".into(),
            rootless: Ok(rootless),
            containers: Ok(containers),
        }
    }

    fn nowhere_host() -> Host {
        Host { hostname: Some("workstation".into()), addresses: vec![], root: PathBuf::from("/nonexistent") }
    }

    /// Where node k3d-gpu-server-0 is read from, its container (in k3d cluster `cluster`) running
    /// on a Docker Engine that answers.
    fn locate_k3d_server(cluster: &str, rootless: bool) -> Located {
        let nodes = [node("k3d-gpu-server-0")];
        let docker = reachable(vec![container("k3d-gpu-server-0", cluster)], rootless);
        locate(&nodes, &Operator::default(), &docker, &nowhere_host())
    }

    #[test]
    fn k3d_nodes_are_their_containers_and_docker_backs_them() {
        let l = locate_k3d_server("gpu", true);
        assert_eq!(
            l.sources,
            [Source::Container { id: "id-k3d-gpu-server-0".into(), name: "k3d-gpu-server-0".into() }]
        );
        assert_eq!(l.k3d_cluster.as_deref(), Some("gpu"));
        assert_eq!(l.docker, Some(Docker { rootless: true }));
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    }

    #[test]
    fn the_cluster_name_comes_from_the_label_not_the_node_name() {
        let l = locate_k3d_server("renamed", false);
        assert_eq!(l.k3d_cluster.as_deref(), Some("renamed"));
    }

    #[test]
    fn a_container_named_otherwise_is_found_by_its_hostname() {
        let nodes = [node("lab-node-1")];
        let mut c = container("k3d-lab-server-0", "lab");
        c.hostname = Some("lab-node-1".into());
        let l = locate(&nodes, &Operator::default(), &reachable(vec![c], false), &nowhere_host());
        assert_eq!(
            l.sources,
            [Source::Container { id: "id-k3d-lab-server-0".into(), name: "k3d-lab-server-0".into() }]
        );
        assert_eq!(l.k3d_cluster.as_deref(), Some("lab"));
    }

    #[test]
    fn docker_unreachable_on_a_k3d_cluster_says_what_is_unknown() {
        let nodes = [node("k3d-gpu-server-0")];
        let down = DockerState::Unreachable(DockerError::Unreachable {
            addr: "unix:///var/run/docker.sock".into(),
            cause: "No such file or directory".into(),
        });
        let l = locate(&nodes, &Operator::default(), &down, &nowhere_host());
        assert_eq!(l.k3d_cluster.as_deref(), Some("gpu"), "k3d's naming still names the cluster");
        assert_eq!(l.docker, None);
        let Source::Nowhere(why) = &l.sources[0] else { panic!("{:?}", l.sources) };
        assert!(why.contains("Docker is unreachable at unix:///var/run/docker.sock"), "{why}");
        assert!(why.contains("containerd config and NRI socket are unknown"), "{why}");
        assert!(l.warnings.iter().any(|w| w.contains("rootless is unknown")), "{:?}", l.warnings);
    }

    #[test]
    fn a_remote_k3s_node_is_nowhere_unless_the_operator_supplies_it() {
        let nodes = [node("xeon-1"), node("xeon-2")];
        let up = Operator { command: "eas up", ..Operator::default() };
        let l = locate(&nodes, &up, &reachable(vec![], false), &nowhere_host());
        assert_eq!(l.k3d_cluster, None);
        assert_eq!(l.docker, None, "a reachable engine that runs none of the nodes does not back them");
        let Source::Nowhere(why) = &l.sources[1] else { panic!("{:?}", l.sources) };
        assert!(why.contains("re-run `eas up` with --containerd-config NODE=FILE, or *=FILE for every node"), "{why}");
        // The same words for every node alike, so a large cluster's warnings group into one line.
        assert_eq!(l.sources[0], l.sources[1]);
        let supplied = Supplied { file: "c.toml".into(), config: containerd::parse("version = 3\n").unwrap() };
        let op = Operator {
            configs: BTreeMap::from([("*".into(), supplied)]),
            nri_sockets: BTreeMap::new(),
            command: "eas facts",
            ..Operator::default()
        };
        let l = locate(&nodes, &op, &reachable(vec![], false), &nowhere_host());
        assert_eq!(l.sources, [Source::Operator, Source::Operator]);
    }

    #[test]
    fn this_host_is_recognised_by_name_hostname_or_address() {
        let mut n = node("k3s-box");
        n.labels.insert("kubernetes.io/hostname".into(), "workstation".into());
        let l = locate(&[n], &Operator::default(), &reachable(vec![], false), &nowhere_host());
        assert_eq!(l.sources, [Source::Host]);
        let mut by_ip = node("registered-otherwise");
        by_ip.internal_ips = vec!["192.0.2.7".into()];
        let mut host = nowhere_host();
        let l = locate(std::slice::from_ref(&by_ip), &Operator::default(), &reachable(vec![], false), &host);
        assert!(matches!(l.sources[0], Source::Nowhere(_)));
        host.addresses = vec!["192.0.2.7".parse().unwrap()];
        let l = locate(&[by_ip], &Operator::default(), &reachable(vec![], false), &host);
        assert_eq!(l.sources, [Source::Host]);
    }

    #[test]
    fn operator_unknown_nodes() {
        let supplied = Supplied { file: "c.toml".into(), config: containerd::parse("").unwrap() };
        let op = Operator {
            configs: BTreeMap::from([("ghost".into(), supplied.clone()), ("*".into(), supplied)]),
            nri_sockets: BTreeMap::from([("xeon-1".into(), true), ("ghost".into(), false)]),
            command: "eas facts",
            ..Operator::default()
        };
        assert_eq!(op.unknown_nodes(&[node("xeon-1")]), ["ghost"]);
    }

    /// An engine that serves files from a map and counts reads.
    struct FakeEngine {
        files: BTreeMap<(String, String), Vec<u8>>,
        sockets: Vec<(String, String)>,
        reads: RefCell<u32>,
    }

    impl Engine for FakeEngine {
        fn addr(&self) -> &str {
            "fake"
        }
        async fn rootless(&self) -> Result<bool, DockerError> {
            Ok(false)
        }
        async fn k3d_containers(&self) -> Result<Vec<K3dContainer>, DockerError> {
            Ok(vec![])
        }
        async fn read_file(&self, c: &str, p: &str) -> Result<Option<Vec<u8>>, DockerError> {
            *self.reads.borrow_mut() += 1;
            Ok(self.files.get(&(c.to_string(), p.to_string())).cloned())
        }
        async fn is_socket(&self, c: &str, p: &str) -> Result<bool, DockerError> {
            Ok(self.sockets.contains(&(c.to_string(), p.to_string())))
        }
    }

    const CFG: &str = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";

    #[tokio::test]
    async fn container_reads_follow_the_config_and_group_failures() {
        let mut nodes = vec![node("k3d-lab-server-0"), node("k3d-lab-agent-0"), node("k3d-lab-agent-1")];
        nodes[1].annotations.insert(NODE_ARGS.into(), "[\"agent\",\"--data-dir\",\"/data/k3s\"]".into());
        let engine = FakeEngine {
            files: BTreeMap::from([
                (
                    ("id-s".into(), CFG.into()),
                    b"version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dirs = ['/usr/bin']\n[plugins.'io.containerd.nri.v1.nri']\nsocket_path = '/run/nri/x.sock'\n".to_vec(),
                ),
                (("id-a0".into(), "/data/k3s/agent/etc/containerd/config.toml".into()), b"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"/bin\"\n".to_vec()),
            ]),
            sockets: vec![("id-s".into(), "/run/nri/x.sock".into())],
            reads: RefCell::new(0),
        };
        let sources = vec![
            Source::Container { id: "id-s".into(), name: "k3d-lab-server-0".into() },
            Source::Container { id: "id-a0".into(), name: "k3d-lab-agent-0".into() },
            Source::Container { id: "id-a1".into(), name: "k3d-lab-agent-1".into() },
        ];
        let warnings = read_all(&mut nodes, &sources, &Operator::default(), Some(&engine), &nowhere_host()).await;
        assert_eq!(nodes[0].containerd, Some(Containerd { cni_bin_dirs: vec!["/usr/bin".into()], nri_socket: true }));
        assert_eq!(nodes[1].containerd, Some(Containerd { cni_bin_dirs: vec!["/bin".into()], nri_socket: false }));
        assert_eq!(nodes[2].containerd, None);
        assert_eq!(*engine.reads.borrow(), 3);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("node k3d-lab-agent-1") && warnings[0].contains("does not exist in container"),
            "{warnings:?}"
        );
    }

    #[tokio::test]
    async fn operator_configs_and_socket_answers() {
        let mut nodes = vec![node("a"), node("b")];
        let supplied = Supplied {
            file: "/tmp/a.toml".into(),
            config: containerd::parse("version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dirs = ['/var/lib/rancher/k3s/data/cni']\n").unwrap(),
        };
        let op = Operator {
            configs: BTreeMap::from([("*".into(), supplied)]),
            nri_sockets: BTreeMap::from([("b".into(), false)]),
            command: "eas facts",
            ..Operator::default()
        };
        let warnings =
            read_all(&mut nodes, &[Source::Operator, Source::Operator], &op, None::<&FakeEngine>, &nowhere_host())
                .await;
        assert_eq!(nodes[0].containerd.as_ref().map(|c| c.nri_socket), Some(true), "inferred: v3 enables NRI");
        assert_eq!(nodes[1].containerd.as_ref().map(|c| c.nri_socket), Some(false), "the operator's answer wins");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("node a: nri_socket taken as true from /tmp/a.toml"), "{warnings:?}");
    }

    #[tokio::test]
    async fn this_host_files_under_its_root() {
        let (root, dir) = crate::testing::temp_path("var/lib/rancher/k3s/agent/etc/containerd");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dir = '/var/lib/rancher/k3s/data/cni'\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.path().join("var/run/nri")).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(root.path().join("var/run/nri/nri.sock")).unwrap();
        let host = Host { hostname: Some("k3s-box".into()), addresses: vec![], root: root.path().to_path_buf() };
        let mut nodes = vec![node("k3s-box")];
        let warnings = read_all(&mut nodes, &[Source::Host], &Operator::default(), None::<&FakeEngine>, &host).await;
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            nodes[0].containerd,
            Some(Containerd { cni_bin_dirs: vec!["/var/lib/rancher/k3s/data/cni".into()], nri_socket: true })
        );
        std::fs::remove_file(root.path().join("var/run/nri/nri.sock")).unwrap();
        std::fs::write(root.path().join("var/run/nri/nri.sock"), "a plain file is not a socket").unwrap();
        let mut nodes = vec![node("k3s-box")];
        read_all(&mut nodes, &[Source::Host], &Operator::default(), None::<&FakeEngine>, &host).await;
        assert_eq!(nodes[0].containerd.as_ref().map(|c| c.nri_socket), Some(false));
    }

    #[test]
    fn long_node_lists_are_shortened() {
        let names: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        assert_eq!(node_list(&names), "2000 nodes (w0, w1, w2, w3, w4, … and 1995 more)");
        assert_eq!(node_list(&names[..1]), "node w0");
    }
}
