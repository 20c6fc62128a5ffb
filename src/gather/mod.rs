//! `eas facts`: the facts document (SPEC §3.1) read from a live cluster. Read-only: besides
//! reads, it sends only the access reviews of `data/prereq.json`, which the API server answers
//! and never stores.
//!
//! The API side is a fixed set of calls made at once (version, nodes, namespaces, DaemonSets,
//! Helm's storage Secrets, the Deployments of the two agent-sandbox namespaces, StorageClasses,
//! the access reviews), whatever the cluster's size; the node side reads each node's containerd
//! config from the k3d node container (Docker API), this host, or a file the operator supplies.

pub mod catalog;
pub mod containerd;
pub mod docker;
pub mod helm;
pub mod hf;
pub mod host;
pub mod knob_audit;
pub mod nodes;
pub mod objects;
pub mod pods;
pub mod prereq;
pub mod probe;

use std::path::PathBuf;
use std::time::Duration;

use crate::facts::{self, Facts};
use crate::kubeconfig::KubeSource;
use crate::output::Shell;
use crate::settings::{Env, Global, timeouts};

use self::docker::{Bollard, Engine};
use self::nodes::{DockerState, Host, Operator, Supplied};
use self::objects::{DeploymentItem, MetaItem, NodeItem, SecretItem};
use crate::cluster::pods::PodRunError;
use crate::cluster::{ApiError, Call, Reader, Sink, Target, TargetError};
use crate::net::proxy::ProxyEnv;

#[derive(Debug, Clone)]
pub struct FactsSettings {
    /// Write the facts document to FILE instead of stdout
    pub out: Option<PathBuf>,
    /// A node's containerd config (a copy of its /var/lib/rancher/k3s/agent/etc/containerd/config.toml),
    /// for nodes eas cannot read itself; NODE `*` means every other node. Repeatable
    pub containerd_config: Vec<crate::settings::NodeFile>,
    /// Whether a node's NRI socket exists, for a node given with --containerd-config
    /// [default: whether that config enables NRI]. Repeatable
    pub nri_socket: Vec<crate::settings::NodeSocket>,
    /// Read an otherwise unreadable node's containerd facts with a probe pod (`probe`)
    pub probe_nodes: bool,
    /// How long each API call may take (each Docker call: at most 10 s)
    pub request_timeout: Duration,
    /// The facts are JSON either way; `json` also prints them on stdout when --out is given
    pub output: crate::output::OutputFormat,
}

#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{0}")]
    Operator(String),
    /// The probe pods an earlier eas left could not be swept before `--probe-nodes` runs its own
    /// (boxed: an API error is large).
    #[error(transparent)]
    Sweep(Box<ApiError>),
    #[error(transparent)]
    NodeArgs(#[from] crate::config::node_args::NodeArgsError),
    /// A probe pod (`--probe-nodes`) that did not run to its end: each says its pod's reason.
    #[error("{}", .0.join("; "))]
    Refused(Vec<String>),
}

/// `eas facts`' reads: the facts document, the warnings and the API calls it took (the command
/// layer runs it where SIGINT/SIGTERM end it, and prints or writes what it read).
pub async fn read(
    args: &FactsSettings,
    global: &Global,
    shell: &Shell,
    landing: Landing,
) -> Result<Gathered, GatherError> {
    let mut operator = operator(args).map_err(GatherError::Operator)?;
    operator.command = "eas facts";
    let timeout = args.request_timeout.max(Duration::from_secs(1));
    let target = target(global, timeout).await?;
    shell.phase("facts", format!("reading context {} at {}", target.context, target.server));
    let docker = docker::Reach::Connect(crate::docker_host::resolve(&global.env));
    gather(&target, &operator, timeout, (&global.env, docker), landing).await
}

/// The operator's answers for nodes `eas` cannot read; malformed ones are bad input (exit 2),
/// found before any call is made.
fn operator(args: &FactsSettings) -> Result<Operator, String> {
    let mut op = Operator { probe: args.probe_nodes, ..Operator::default() };
    for spec in &args.containerd_config {
        let (node, file) = (&spec.node, spec.file.display());
        let text = crate::bounded::read_string(&spec.file, crate::bounded::Kind::Containerd)
            .map_err(|e| format!("--containerd-config {spec}: {e}"))?;
        let config = containerd::parse(&text)
            .map_err(|e| format!("--containerd-config {spec}: {file} is not a containerd config: {e}"))?;
        if op.configs.insert(node.to_string(), Supplied { file: spec.file.clone(), config }).is_some() {
            return Err(format!("--containerd-config names node {node} twice"));
        }
    }
    for spec in &args.nri_socket {
        let (node, present) = (spec.node.as_str(), spec.present);
        if !op.configs.contains_key(node) && !op.configs.contains_key(nodes::ANY_NODE) {
            return Err(format!(
                "--nri-socket {node} needs --containerd-config {node}=FILE (eas reads the socket itself otherwise)"
            ));
        }
        if op.nri_sockets.insert(node.to_string(), present).is_some() {
            return Err(format!("--nri-socket names node {node} twice"));
        }
    }
    Ok(op)
}

pub struct Gathered {
    pub facts: Facts,
    pub warnings: Vec<String>,
    pub api_calls: u32,
}

/// Helm's storage Secrets, kept as the newest revision of each release while the list streams.
impl Sink<SecretItem> for helm::Releases {
    fn push(&mut self, item: SecretItem) {
        if let Some(rev) = objects::helm_revision(item) {
            self.offer(rev);
        }
    }
}

/// Which node's pods to sum for the fit: the fit's own rule (`config::fit::landing_node`), given
/// by the caller, so the gatherer reads what the fit needs and decides nothing itself.
pub type Landing = fn(&[facts::Node]) -> Option<&facts::Node>;

async fn gather(
    target: &Target,
    operator: &Operator,
    timeout: Duration,
    (env, docker): (&Env, docker::Reach),
    landing: Landing,
) -> Result<Gathered, GatherError> {
    let reader = Reader::new(target, timeout);
    let nodes_call = Call::list("nodes", "v1", None);
    let namespaces_call = Call::list("namespaces", "v1", None);
    let daemonsets_call = Call::list("daemonsets", "apps/v1", None);
    let secrets_call = Call::list("secrets", "v1", None).with_field_selector(HELM_SECRETS);
    let [sandbox_a, sandbox_b] = objects::AGENT_SANDBOX_NAMESPACES;
    let sandbox_calls =
        [Call::list("deployments", "apps/v1", Some(sandbox_a)), Call::list("deployments", "apps/v1", Some(sandbox_b))];
    let storage_call = prereq::storage_classes_call();

    // Every call is awaited, then their answers are read in this order: with several refused
    // (a user RBAC denies more than one of them), the first named is the first in this order,
    // whichever answer came first, so `eas facts` and `eas up`'s facts phase name the same one.
    let api = async {
        tokio::join!(
            reader.server_version(),
            reader.list(&nodes_call, Vec::<NodeItem>::new()),
            reader.list(&namespaces_call, Vec::<MetaItem>::new()),
            reader.list(&daemonsets_call, Vec::<MetaItem>::new()),
            reader.list(&secrets_call, helm::Releases::default()),
            reader.list(&sandbox_calls[0], Vec::<DeploymentItem>::new()),
            reader.list(&sandbox_calls[1], Vec::<DeploymentItem>::new()),
        )
    };
    let prereq = async {
        tokio::join!(
            reader.list(&storage_call, Vec::<prereq::StorageClassItem>::new()),
            prereq::access_reviews(&reader, &crate::prereq::data().access_reviews.reviews),
        )
    };
    let (api, (storage, reviews), (engine, docker_state)) =
        tokio::join!(api, prereq, probe_docker(docker, timeout.min(timeouts::DOCKER_CALL)));
    let (server_version, nodes, namespaces, daemonsets, releases, sandbox_a, sandbox_b) = api;
    let (server_version, nodes, namespaces, daemonsets) = (server_version?, nodes?, namespaces?, daemonsets?);
    let (releases, sandbox_a, sandbox_b) = (releases?, sandbox_a?, sandbox_b?);
    let mut api_calls = 1 + nodes.1 + namespaces.1 + daemonsets.1 + releases.1 + sandbox_a.1 + sandbox_b.1;

    let mut warnings = Vec::new();
    // A context that may not read these still gets its facts: the checks then say what is unknown.
    let storage_classes = match storage {
        Ok((items, calls)) => {
            api_calls += calls;
            let mut classes: Vec<facts::StorageClass> = items.into_iter().map(prereq::storage_class).collect();
            classes.sort_by(|a, b| a.name.cmp(&b.name));
            Some(classes)
        }
        Err(e @ ApiError::Forbidden { .. }) => {
            api_calls += 1;
            warnings.push(format!("{e}: storage_classes is absent (whether a default StorageClass exists is unknown)"));
            None
        }
        Err(e) => return Err(e.into()),
    };
    let access_reviews = match reviews {
        Ok((reviews, calls)) => {
            api_calls += calls;
            Some(reviews)
        }
        Err(e @ ApiError::Forbidden { .. }) => {
            api_calls += 1;
            warnings.push(format!(
                "{e}: access_reviews is absent (whether the installer may create what it needs is unknown)"
            ));
            None
        }
        Err(e) => return Err(e.into()),
    };
    // The images each node holds, for a probe pod (`--probe-nodes`); not part of the facts.
    let images: std::collections::HashMap<String, Vec<String>> = nodes
        .0
        .iter()
        .map(|n| (n.metadata.name.clone(), n.status.images.iter().flat_map(|i| i.names.iter().cloned()).collect()))
        .collect();
    let mut nodes: Vec<facts::Node> = nodes.0.into_iter().map(objects::node).collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    for n in &nodes {
        if let Some(a) = n.annotations.get(crate::config::node_args::ANNOTATION) {
            crate::config::node_args::parse(&n.name, a)?;
        }
    }
    // The fit's input: what the pods on the node a model would land on request (SPEC §3.4).
    if let Some(landing) = landing(&nodes).map(|n| n.name.clone()) {
        let call = Call::list("pods", "v1", None).with_field_selector(pods::selector(&landing));
        match reader.list(&call, pods::Requests::skipping(&operator.discount_namespaces)).await {
            Ok((requests, calls)) => {
                api_calls += calls;
                if let Some(n) = nodes.iter_mut().find(|n| n.name == landing) {
                    n.pod_requests = Some(requests.to_facts());
                }
            }
            // A context that may not list pods still gets its facts; the fit then says the
            // requests are unknown rather than guessing them.
            Err(e @ ApiError::Forbidden { .. }) => {
                api_calls += 1;
                warnings.push(format!("{e}: pod_requests of node {landing} is absent (the fit counts it as unknown)"));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let unknown = operator.unknown_nodes(&nodes);
    if !unknown.is_empty() {
        let have: Vec<&str> = nodes.iter().take(10).map(|n| n.name.as_str()).collect();
        return Err(GatherError::Operator(format!(
            "the cluster has no node {} (nodes: {}{})",
            unknown.join(", "),
            have.join(", "),
            if nodes.len() > have.len() { ", …" } else { "" }
        )));
    }
    let host = Host::detect(env);
    let located = nodes::locate(&nodes, operator, &docker_state, &host);
    warnings.extend(located.warnings);
    let mut sources = located.sources;
    if operator.probe {
        api_calls += probe_sources(&nodes, &mut sources, &images, target, timeout).await?;
        api_calls += probe::take_calls();
    }
    warnings.extend(nodes::read_all(&mut nodes, &sources, operator, engine.as_ref(), &host).await);
    // A memory figure past what eas sizes with: the node is reported with the field.
    warnings.extend(nodes.iter().filter_map(facts::unsizable));

    let mut daemonsets: Vec<facts::DaemonSet> = daemonsets.0.into_iter().map(objects::daemonset).collect();
    objects::sort_daemonsets(&mut daemonsets);
    let mut namespaces: Vec<String> = namespaces.0.into_iter().map(|n| n.metadata.name).collect();
    namespaces.sort();
    let (helm_releases, helm_warnings) = releases.0.decode();
    warnings.extend(helm_warnings);
    let deployments: Vec<DeploymentItem> = sandbox_a.0.into_iter().chain(sandbox_b.0).collect();
    let (agent_sandbox, sandbox_warning) = objects::agent_sandbox(&deployments);
    warnings.extend(sandbox_warning);

    let facts = Facts {
        schema: facts::SCHEMA.to_string(),
        gathered_at: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        cluster: facts::Cluster { context: target.context.clone(), k3d_cluster: located.k3d_cluster, server_version },
        docker: located.docker,
        nodes,
        daemonsets,
        helm_releases,
        namespaces,
        agent_sandbox,
        fit: None,
        storage_classes,
        access_reviews,
    };
    Ok(Gathered { facts, warnings, api_calls })
}

/// `--probe-nodes`: the nodes found nowhere that hold an image for a probe pod are grouped by
/// shape (their k3s node-args and that image), and one probe pod per shape reads the containerd
/// facts of all its nodes, at most 8 at once; a node without such an image gets why added to its
/// warning. The probe pods an earlier eas left are deleted first. Returns the sweep's API calls
/// (the probes' own are `probe::take_calls`).
async fn probe_sources(
    nodes: &[facts::Node],
    sources: &mut [nodes::Source],
    images: &std::collections::HashMap<String, Vec<String>>,
    target: &Target,
    timeout: Duration,
) -> Result<u32, GatherError> {
    use futures::StreamExt;
    // (node-args, image) -> the nodes of that shape, by index.
    let mut shapes: std::collections::BTreeMap<(Vec<String>, String), Vec<usize>> = Default::default();
    for (i, (n, s)) in nodes.iter().zip(sources.iter_mut()).enumerate() {
        if let nodes::Source::Nowhere(why) = s {
            match images.get(&n.name).and_then(|i| probe::choose_image(i)) {
                Some(image) => shapes.entry((nodes::node_args(n), image)).or_default().push(i),
                None => why.push_str(
                    "; --probe-nodes: the node holds no busybox image to run a probe pod with (it pulls none)",
                ),
            }
        }
    }
    if shapes.is_empty() {
        return Ok(0);
    }
    let swept = probe::sweep(&target.cluster, timeout).await.map_err(|e| GatherError::Sweep(Box::new(e)))?;
    let run_id = format!("{}-{}", std::process::id(), chrono::Utc::now().timestamp());
    let reads: Vec<_> = futures::stream::iter(shapes.iter())
        .map(|((args, image), members)| {
            let rep = &nodes[members[0]];
            let run_id = run_id.as_str();
            async move {
                let config_path = containerd::config_path(args);
                let spec = probe::pod(&rep.name, image, &config_path, containerd::DEFAULT_NRI_SOCKET, run_id);
                let down = probe::node_down(rep);
                let read = probe::read(&target.cluster, &spec, &rep.name, down.as_deref()).await;
                (image.clone(), members.clone(), rep.name.clone(), read)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    // A probe pod that did not run to its end (it could not start, failed, or outlived its
    // limit) is a refusal with its own reason: the node's facts stay unknown, and passing
    // --probe-nodes again would not change that.
    let mut refused: Vec<String> = reads
        .iter()
        .filter_map(|(_, _, on, read)| match read {
            Err(e @ (PodRunError::NotStarted { .. } | PodRunError::NotDone { .. } | PodRunError::Failed(_))) => {
                Some(format!(
                    "the probe pod of --probe-nodes on node {on}: {e} (make node {on}'s kubelet run pods, or pass \
                     --containerd-config {on}=FILE with a copy of the node's containerd config)"
                ))
            }
            _ => None,
        })
        .collect();
    if !refused.is_empty() {
        refused.sort();
        return Err(GatherError::Refused(refused));
    }
    for (image, members, on, read) in reads {
        let read =
            read.map_err(|e| format!("the probe pod on {on}: {e}")).and_then(|text| probe::parse_output(&text, &on));
        for i in members {
            sources[i] = nodes::Source::Probed { image: image.clone(), on: on.clone(), read: read.clone() };
        }
    }
    Ok(1 + swept as u32)
}

/// The field selector that keeps the Secrets list to Helm's storage Secrets.
const HELM_SECRETS: &str = "type=helm.sh/release.v1";

async fn probe_docker(reach: docker::Reach, timeout: Duration) -> (Option<Bollard>, DockerState) {
    // Docker answers locally or not at all; a hung engine must not hold up the API side.
    match Bollard::reach(reach, timeout).await {
        Err(e) => (None, DockerState::Unreachable(e)),
        Ok(engine) => {
            let (rootless, containers) = tokio::join!(engine.rootless(), engine.k3d_containers());
            let addr = engine.addr().to_string();
            (Some(engine), DockerState::Reachable { addr, rootless, containers })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(configs: &[&str], sockets: &[&str]) -> FactsSettings {
        FactsSettings {
            out: None,
            containerd_config: configs.iter().map(|s| crate::settings::NodeFile::parse(s).unwrap()).collect(),
            nri_socket: sockets.iter().map(|s| crate::settings::NodeSocket::parse(s).unwrap()).collect(),
            probe_nodes: false,
            request_timeout: Duration::from_secs(30),
            output: Default::default(),
        }
    }

    #[test]
    fn operator_flags_are_checked_before_any_call() {
        let (dir, good) = crate::testing::temp_path("config.toml");
        std::fs::write(&good, "version = 3\n").unwrap();
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[plugins\n").unwrap();
        let g = good.display().to_string();
        let b = bad.display().to_string();

        let op = operator(&args(&[&format!("n1={g}")], &["n1=absent"])).unwrap();
        assert_eq!(op.nri_sockets.get("n1"), Some(&false));
        assert!(operator(&args(&[&format!("*={g}")], &["n2=present"])).is_ok(), "`*` covers every node");

        let cases: [(Vec<String>, Vec<&str>, &str); 4] = [
            (vec![format!("n1={}", dir.path().join("missing").display())], vec![], "does not exist"),
            (vec![format!("n1={b}")], vec![], "is not a containerd config"),
            (vec![format!("n1={g}"), format!("n1={g}")], vec![], "twice"),
            (vec![], vec!["n1=present"], "needs --containerd-config n1=FILE"),
        ];
        for (configs, sockets, want) in cases {
            let c: Vec<&str> = configs.iter().map(String::as_str).collect();
            let err = operator(&args(&c, &sockets)).unwrap_err();
            assert!(err.contains(want), "{configs:?} {sockets:?}: {err}");
        }
    }
}

/// The operator-supplied node facts `eas up` takes too (the flags of `eas facts`).
#[derive(Debug, Clone, Default)]
pub struct GatherOptions {
    /// A node's containerd config.toml, for a node eas cannot read (repeatable)
    pub containerd_config: Vec<crate::settings::NodeFile>,
    /// Whether a node has the NRI socket, for a node eas cannot read (repeatable)
    pub nri_socket: Vec<crate::settings::NodeSocket>,
    /// Read an otherwise unreadable node's containerd facts with a probe pod (`probe`)
    pub probe_nodes: bool,
    /// The command these came with (`eas up`), named in what to run next.
    pub command: &'static str,
    /// Namespaces eas's earlier runs created (the ledger): their pods are not counted in the
    /// landing node's `pod_requests`, as fit's budget discounts eas's own objects.
    pub discount_namespaces: std::collections::BTreeSet<String>,
}

/// The cluster the global flags name.
pub async fn target(global: &Global, timeout: Duration) -> Result<Target, GatherError> {
    target_at(&KubeSource::resolve(global), &ProxyEnv::from_lookup(global.env.lookup()), timeout).await
}

/// The cluster a kubeconfig source names, reached with these proxy settings (a run resolves
/// both once: `pipeline::services`).
pub async fn target_at(kube: &KubeSource, proxy: &ProxyEnv, timeout: Duration) -> Result<Target, GatherError> {
    Ok(crate::cluster::target(kube, proxy, timeout).await?)
}

/// Gathers the facts document, printing the gatherer's warnings.
pub async fn collect(
    target: &Target,
    opts: &GatherOptions,
    timeout: Duration,
    (env, docker): (&Env, docker::Reach),
    shell: &Shell,
    landing: Landing,
) -> Result<Facts, GatherError> {
    let args = FactsSettings {
        out: None,
        containerd_config: opts.containerd_config.clone(),
        nri_socket: opts.nri_socket.clone(),
        probe_nodes: opts.probe_nodes,
        request_timeout: timeout,
        output: Default::default(),
    };
    let mut op = operator(&args).map_err(GatherError::Operator)?;
    op.command = opts.command;
    op.discount_namespaces = opts.discount_namespaces.clone();
    let gathered = gather(target, &op, timeout, (env, docker), landing).await?;
    for w in &gathered.warnings {
        shell.warn(w);
    }
    Ok(gathered.facts)
}
