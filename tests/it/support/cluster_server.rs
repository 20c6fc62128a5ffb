//! A recorded-cluster Kubernetes API server for tests: the objects of `fixtures/clusters/<name>/`
//! served on 127.0.0.1, reached through a generated kubeconfig: plain HTTP with a token user, or
//! (cluster.json `"transport": "tls"`, [`Transport`]) HTTPS with the cluster's own CA and a client
//! certificate, as k3s and k3d kubeconfigs have it.
//!
//! Where a real API server was seen to answer otherwise (issue 29), it answers as that server did
//! (`real.rs`): access reviews without a reason; 404 for the resources of a CRD not installed;
//! lifecycle taints kept in line with each node's conditions; uid, resourceVersion, generation,
//! creationTimestamp and managedFields set on every object it stores.
//!
//! It answers what clients such as `kube` and `kubectl` ask of a real API server: `/version`,
//! discovery, list (label and field selectors, `limit`/`continue` pagination) and get, in the
//! JSON shapes the API uses (Status objects for errors; list items without kind/apiVersion).
//! Writes (POST, PUT, PATCH as a JSON merge patch, DELETE) change the in-memory store and are
//! served back, so a later end-to-end test can run an installer against it. Every request is
//! logged (method, path, query), and faults are injected on demand: an error status, a slow
//! answer, or a connection closed without an answer.
//!
//! A fixture directory holds `cluster.json` (the kubeconfig context name; optionally `scale`,
//! which clones one node into many), `version.json`, and any number of `*.json` files, each a
//! `kind: List` of objects or a single object, as `kubectl get -o json` writes them, and
//! optionally `pod-logs/<namespace>/<pod>[.previous].log`, served as the pods' logs.
//!
//! Watches (`?watch=true`) stream the changes made from then on, or since `resourceVersion`
//! while the server still holds them, as the API server does; see [`watch`] for the rest of what a
//! real server does to a watch (quiet, 410 Gone, bookmarks). A deleted namespace goes
//! `Terminating` while a simulated namespace controller empties it ([`namespace_controller`]), and
//! finalizers hold objects.
//!
//! The service proxy routes as the API server does: through a port the Service has, to a ready
//! address of its Endpoints; behind a model server's workload Service it answers as vLLM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

#[path = "cluster_server/real.rs"]
mod real;

/// Where an object lives: the API group/version path, the resource, its namespace ("" for
/// cluster-scoped objects) and its name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub group_version: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    /// A cluster-scoped object of the core group (`v1`): a node, a namespace.
    pub fn core(resource: &str, name: &str) -> Self {
        Self::of("v1", resource, "", name)
    }

    /// Any object: its API group and version, resource (plural), namespace (empty when
    /// cluster-scoped) and name.
    pub fn of(group_version: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            group_version: group_version.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// One request as it reached the server.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub query: String,
}

impl Logged {
    /// A query parameter, percent-decoded.
    pub fn param(&self, key: &str) -> Option<String> {
        parse_query(&self.query).remove(key)
    }
}

#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer with this status code and a Status object carrying `message`.
    Status(u16, String),
    /// Wait this long, then answer normally.
    Slow(Duration),
    /// Wait this long, then answer with this status code and message (a refusal that comes
    /// after others sent later: answers to concurrent calls arrive in any order).
    SlowStatus(Duration, u16, String),
    /// Close the connection without answering.
    Reset,
    /// Answer with this status code and this body, as is: a list without `items` (`{}`), an
    /// item without a name, a 401 whose message carries escape codes.
    Body(u16, String),
    /// Answer the list normally, but always with the same `continue` token (ListMeta's
    /// `continue`, apimachinery `pkg/apis/meta/v1/types.go`), which leads back to the first page:
    /// a server whose pages never end.
    RepeatContinue,
    /// Answer 200 with this object, a string of `pad` bytes added as its annotation `pad`,
    /// streamed in 1 MiB chunks: an answer larger than any real one, valid JSON all the same.
    Padded(Value, usize),
}

struct Injection {
    path_contains: Option<String>,
    fault: Fault,
    remaining: Option<u32>,
    /// Only this method (any, if `None`).
    method: Option<String>,
    /// The path must equal `path_contains`, not merely contain it.
    exact: bool,
    /// Matching requests let through before the fault applies.
    skip: u32,
}

/// Which requests a fault applies to, beyond [`ClusterServer::inject`]'s path substring.
#[derive(Debug, Clone, Default)]
pub struct Rule {
    pub method: Option<String>,
    pub path: String,
    /// The path must equal `path` (a namespace, not what is inside it).
    pub exact: bool,
    /// Let this many matching requests through first.
    pub skip: u32,
}

/// A served resource: its kind, where it lives in the API, and whether it is namespaced.
pub struct Resource {
    kind: &'static str,
    group_version: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    /// Field selector labels the API server accepts beyond metadata.name/namespace.
    fields: &'static [&'static str],
}

const RESOURCES: &[Resource] = &[
    Resource {
        kind: "Node",
        group_version: "v1",
        plural: "nodes",
        namespaced: false,
        short: &["no"],
        fields: &["spec.unschedulable"],
    },
    Resource {
        kind: "Namespace",
        group_version: "v1",
        plural: "namespaces",
        namespaced: false,
        short: &["ns"],
        fields: &["status.phase"],
    },
    Resource {
        kind: "Secret",
        group_version: "v1",
        plural: "secrets",
        namespaced: true,
        short: &[],
        fields: &["type"],
    },
    Resource {
        kind: "ConfigMap",
        group_version: "v1",
        plural: "configmaps",
        namespaced: true,
        short: &["cm"],
        fields: &[],
    },
    Resource {
        kind: "Pod",
        group_version: "v1",
        plural: "pods",
        namespaced: true,
        short: &["po"],
        fields: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
        ],
    },
    Resource {
        kind: "Service",
        group_version: "v1",
        plural: "services",
        namespaced: true,
        short: &["svc"],
        fields: &[],
    },
    Resource {
        kind: "Endpoints",
        group_version: "v1",
        plural: "endpoints",
        namespaced: true,
        short: &["ep"],
        fields: &[],
    },
    Resource {
        kind: "ServiceAccount",
        group_version: "v1",
        plural: "serviceaccounts",
        namespaced: true,
        short: &["sa"],
        fields: &[],
    },
    Resource {
        kind: "Event",
        group_version: "v1",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        fields: &["involvedObject.name", "involvedObject.kind"],
    },
    Resource {
        kind: "DaemonSet",
        group_version: "apps/v1",
        plural: "daemonsets",
        namespaced: true,
        short: &["ds"],
        fields: &[],
    },
    Resource {
        kind: "Deployment",
        group_version: "apps/v1",
        plural: "deployments",
        namespaced: true,
        short: &["deploy"],
        fields: &[],
    },
    Resource {
        kind: "StatefulSet",
        group_version: "apps/v1",
        plural: "statefulsets",
        namespaced: true,
        short: &["sts"],
        fields: &[],
    },
    Resource {
        kind: "ReplicaSet",
        group_version: "apps/v1",
        plural: "replicasets",
        namespaced: true,
        short: &["rs"],
        fields: &[],
    },
    Resource { kind: "Job", group_version: "batch/v1", plural: "jobs", namespaced: true, short: &[], fields: &[] },
    Resource {
        kind: "CustomResourceDefinition",
        group_version: "apiextensions.k8s.io/v1",
        plural: "customresourcedefinitions",
        namespaced: false,
        short: &["crd", "crds"],
        fields: &[],
    },
    // EAS envoy_gateway's admission policy and binding, applied outside Helm
    // (intel/enterprise-ai-solutions@cc887cb4 roles/envoy_gateway/templates/
    // route-hostname-admission-policy.yaml.j2): cluster-scoped, admissionregistration.k8s.io/v1.
    Resource {
        kind: "ValidatingAdmissionPolicy",
        group_version: "admissionregistration.k8s.io/v1",
        plural: "validatingadmissionpolicies",
        namespaced: false,
        short: &["vap"],
        fields: &[],
    },
    Resource {
        kind: "ValidatingAdmissionPolicyBinding",
        group_version: "admissionregistration.k8s.io/v1",
        plural: "validatingadmissionpolicybindings",
        namespaced: false,
        short: &["vapb"],
        fields: &[],
    },
    Resource {
        kind: "StorageClass",
        group_version: "storage.k8s.io/v1",
        plural: "storageclasses",
        namespaced: false,
        short: &["sc"],
        fields: &[],
    },
    // eas's run lock (kubernetes@v1.35 coordination/v1 types: holderIdentity, leaseDurationSeconds,
    // acquireTime, renewTime).
    Resource {
        kind: "Lease",
        group_version: "coordination.k8s.io/v1",
        plural: "leases",
        namespaced: true,
        short: &[],
        fields: &[],
    },
    // Answered, never stored, as the API server does (see `access_review`).
    Resource {
        kind: "SelfSubjectAccessReview",
        group_version: "authorization.k8s.io/v1",
        plural: "selfsubjectaccessreviews",
        namespaced: false,
        short: &[],
        fields: &[],
    },
    Resource {
        kind: "LLMInferenceService",
        group_version: "serving.kserve.io/v1alpha2",
        plural: "llminferenceservices",
        namespaced: true,
        short: &["llmisvc"],
        fields: &[],
    },
    Resource {
        kind: "InferenceService",
        group_version: "serving.kserve.io/v1beta1",
        plural: "inferenceservices",
        namespaced: true,
        short: &["isvc"],
        fields: &[],
    },
];

fn resource_by_kind(api_version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.kind == kind && r.group_version == api_version)
}

pub fn resource_by_plural(group_version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.plural == plural && r.group_version == group_version)
}

/// A container log: namespace, pod, and whether it is the previous container's.
type LogKey = (String, String, bool);

/// One change, as a watch sends it: where, `ADDED`/`MODIFIED`/`DELETED`, and the object.
#[derive(Clone, Debug)]
struct Change {
    key: ObjectKey,
    kind: &'static str,
    object: Value,
    /// The resourceVersion of the change (a deletion has its own, as on a real server).
    rv: u64,
}

struct State {
    objects: BTreeMap<ObjectKey, Value>,
    changes: tokio::sync::broadcast::Sender<Change>,
    logs: BTreeMap<LogKey, String>,
    version: Value,
    log: Vec<Logged>,
    faults: Vec<Injection>,
    resource_version: u64,
    token: Option<String>,
    max_page: Option<usize>,
    namespace_terminating: Option<Duration>,
    /// Namespaces deleted and still terminating, with when the namespace controller removes
    /// their content.
    terminating: BTreeMap<String, std::time::Instant>,
    /// The changes a watch may resume from (`resourceVersion`), oldest first, at most
    /// [`Options::watch_history`]: older ones are compacted, and a watch from before them is
    /// answered 410 Gone.
    history: std::collections::VecDeque<Change>,
    watch_history: usize,
    watch_gone_after: Option<Duration>,
    bookmark_every: Option<Duration>,
    /// Access the token's user is denied: `verb resource[.group]` (cluster.json `access_denied`
    /// plus [`Options::deny_access`]); everything else is allowed, as for cluster-admin.
    denied: Vec<String>,
    /// The bodies of the POSTs answered behind the service proxy (path, body), in order.
    proxy_posts: Vec<(String, Vec<u8>)>,
    /// What is on each recorded node's disk for `eas --probe-nodes`' pod to read: its containerd
    /// config (`node-files/<node>/config.toml`) and whether its NRI socket exists (the fixture's
    /// `facts-args` `--nri-socket NODE=present`).
    node_files: BTreeMap<String, (String, bool)>,
    /// The program name of the latest request's User-Agent: the manager of what it writes.
    agent: String,
}

/// Options for [`ClusterServer::start_with`].
#[derive(Clone, Debug)]
pub struct Options {
    /// The kubeconfig context name [default: `context` in cluster.json, else `recorded-<dir>`].
    pub context: Option<String>,
    /// The bearer token the kubeconfig carries.
    pub token: String,
    /// Whether requests without that token are refused (kubectl sends no token over plain HTTP).
    pub require_token: bool,
    /// 0: any free port.
    pub port: u16,
    /// Pages no longer than this, whatever `limit` asks (an API server may return fewer items
    /// than asked, with a `continue` token).
    pub max_page: Option<usize>,
    /// How long the namespace controller takes to remove a deleted namespace's content. A deleted
    /// namespace always goes `Terminating` first, as on a real server, and a second DELETE
    /// meanwhile answers 409 Conflict; objects with finalizers stay until they are removed
    /// [default: its next pass, within 50 ms].
    pub namespace_terminating: Option<Duration>,
    /// Changes kept for watches resuming from a `resourceVersion` [default: 1000]; a watch from an
    /// older one gets an ERROR event with a 410 Status ("too old resource version").
    pub watch_history: usize,
    /// A watch open this long ends with that 410 ERROR event, as when the API server's watch
    /// cache has moved past it [default: only at `timeoutSeconds`].
    pub watch_gone_after: Option<Duration>,
    /// With `allowWatchBookmarks=true`, a BOOKMARK event this often [default: none, so a watch of
    /// an object that does not change stays quiet, as a real one did for 75 s].
    pub bookmark_every: Option<Duration>,
    /// Access reviews answered `allowed: false`, each `verb resource[.group]`
    /// (`create customresourcedefinitions.apiextensions.k8s.io`), beside the fixture's own.
    pub deny_access: Vec<String>,
    /// HTTP with a token, or HTTPS with the cluster's CA and a client certificate [default: the
    /// fixture's `transport` in cluster.json].
    pub transport: Transport,
    /// The number of nodes a `scale` fixture clones its template to, in place of its own
    /// `scale.count` (the 5,201-node cluster of issue 29 is scale-2000's with 5,198 agents).
    pub scale_count: Option<u64>,
    /// The `gitVersion` `/version` answers, in place of the fixture's (`v1.24.17+k3s1`: a server
    /// below eas's floor).
    pub git_version: Option<String>,
}

/// How the server is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// As cluster.json says: `"transport": "tls"` is HTTPS as k3s serves it (the cluster's CA and
    /// a client certificate and key embedded in the kubeconfig, no token), else plain.
    #[default]
    Fixture,
    /// Plain HTTP, a bearer token in the kubeconfig.
    Plain,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            context: None,
            token: "recorded-cluster-token".into(),
            require_token: true,
            port: 0,
            max_page: None,
            namespace_terminating: None,
            watch_history: 1000,
            watch_gone_after: None,
            bookmark_every: None,
            deny_access: Vec::new(),
            transport: Transport::Fixture,
            scale_count: None,
            git_version: None,
        }
    }
}

pub struct ClusterServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Holds the kubeconfig; removed with the server.
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    #[cfg_attr(not(feature = "docker-tests"), allow(dead_code))] // read by the Docker tier only
    context: String,
    /// The CA of a server reached over TLS (PEM).
    ca_pem: Option<String>,
}

impl ClusterServer {
    pub fn start(fixture: impl AsRef<Path>) -> ClusterServer {
        ClusterServer::start_with(fixture, Options::default())
    }

    pub fn start_with(fixture: impl AsRef<Path>, options: Options) -> ClusterServer {
        let fixture = fixture.as_ref();
        let meta: Value = read_json(&fixture.join("cluster.json")).unwrap_or_else(|| json!({}));
        let context = options.context.clone().unwrap_or_else(|| {
            meta.get("context").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
                format!("recorded-{}", fixture.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default())
            })
        });
        let version = read_json(&fixture.join("version.json")).unwrap_or_else(|| {
            json!({"major": "1", "minor": "37", "gitVersion": "v1.37.1+k3s1", "gitCommit": "", "gitTreeState": "clean",
                   "buildDate": "", "goVersion": "", "compiler": "gc", "platform": "linux/amd64"})
        });
        let mut version = version;
        if let Some(v) = &options.git_version {
            let minor = v.trim_start_matches('v').split('.').nth(1).unwrap_or("").to_string();
            version["gitVersion"] = json!(v);
            version["minor"] = json!(minor);
        }
        let mut objects = load_objects(fixture);
        if let Some(scale) = meta.get("scale") {
            let mut scale = scale.clone();
            if let Some(n) = options.scale_count {
                scale["count"] = json!(n);
            }
            expand(&mut objects, &scale);
        }
        for obj in objects.values_mut() {
            real::recorded_fields(obj);
            if obj["kind"] == "Node" {
                real::lifecycle_taints(obj);
            }
        }
        let state = Arc::new(Mutex::new(State {
            objects,
            logs: load_logs(fixture),
            node_files: load_node_files(fixture),
            changes: tokio::sync::broadcast::channel(1024).0,
            version,
            log: Vec::new(),
            faults: Vec::new(),
            resource_version: 1000,
            token: options.require_token.then(|| options.token.clone()),
            max_page: options.max_page,
            namespace_terminating: options.namespace_terminating,
            terminating: BTreeMap::new(),
            history: std::collections::VecDeque::new(),
            watch_history: options.watch_history.max(1),
            watch_gone_after: options.watch_gone_after,
            bookmark_every: options.bookmark_every,
            denied: meta
                .get("access_denied")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .chain(options.deny_access.iter().cloned())
                .collect(),
            proxy_posts: Vec::new(),
            agent: String::new(),
        }));

        let listener = std::net::TcpListener::bind(("127.0.0.1", options.port)).expect("bind 127.0.0.1");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let served = state.clone();
        let tls = match options.transport {
            Transport::Fixture => meta.get("transport").and_then(Value::as_str) == Some("tls"),
            Transport::Plain => false,
        }
        .then(real::cluster_tls);
        let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
        let thread = std::thread::spawn(move || {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            rt.block_on(serve(listener, served, rx, acceptor));
            rt.shutdown_background();
        });

        let dir = tempfile::tempdir().expect("temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        let text = match &tls {
            Some(t) => real::tls_kubeconfig(&format!("https://{addr}"), &context, t),
            None => kubeconfig_text(&format!("http://{addr}"), &context, &options.token),
        };
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        let ca_pem = tls.map(|t| t.ca_pem);
        ClusterServer { addr, state, shutdown: Some(tx), thread: Some(thread), _dir: dir, kubeconfig, context, ca_pem }
    }

    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The cluster's CA (PEM), when it is reached over TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    #[cfg_attr(not(feature = "docker-tests"), allow(dead_code))] // read by the Docker tier only
    pub fn context(&self) -> &str {
        &self.context
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    pub fn clear_requests(&self) {
        self.state.lock().unwrap().log.clear();
    }

    /// Makes requests whose path contains `path_contains` (all, if `None`) fail with `fault`,
    /// `times` times (always, if `None`). The first matching injection applies.
    pub fn inject(&self, path_contains: Option<&str>, fault: Fault, times: Option<u32>) {
        self.state.lock().unwrap().faults.push(Injection {
            path_contains: path_contains.map(str::to_string),
            method: None,
            exact: false,
            skip: 0,
            fault,
            remaining: times,
        });
    }

    /// Like [`ClusterServer::inject`], for the requests `rule` names.
    pub fn inject_rule(&self, rule: Rule, fault: Fault, times: Option<u32>) {
        self.state.lock().unwrap().faults.push(Injection {
            path_contains: Some(rule.path),
            method: rule.method,
            exact: rule.exact,
            skip: rule.skip,
            fault,
            remaining: times,
        });
    }

    #[cfg_attr(not(feature = "docker-tests"), allow(dead_code))] // read by the Docker tier only
    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    pub fn object(&self, key: &ObjectKey) -> Option<Value> {
        self.state.lock().unwrap().objects.get(key).cloned()
    }

    /// The POST bodies the model servers behind the service proxy were sent, with their paths.
    pub fn proxy_posts(&self) -> Vec<(String, Vec<u8>)> {
        self.state.lock().unwrap().proxy_posts.clone()
    }

    /// Removes an object at once (for a test's own setup; no finalizers, no watch event).
    pub fn remove(&self, key: &ObjectKey) -> Option<Value> {
        self.state.lock().unwrap().objects.remove(key)
    }

    /// Stores an object as a POST to its collection would (for a test's own setup).
    pub fn insert(&self, obj: Value) {
        let (k, _) = key_of(&obj).expect("a test object has apiVersion, kind and metadata.name");
        let mut s = self.state.lock().unwrap();
        let mut obj = obj;
        stamp(&mut s, &mut obj, true);
        s.objects.insert(k, obj);
    }

    /// Sets what `GET .../pods/NAME/log` (`?previous=true` for `previous`) answers.
    pub fn set_log(&self, namespace: &str, pod: &str, previous: bool, text: &str) {
        self.state.lock().unwrap().logs.insert((namespace.into(), pod.into(), previous), text.into());
    }

    /// Applies a JSON merge patch to a stored object, as a controller's update would.
    pub fn update(&self, key: &ObjectKey, patch: Value) {
        let mut s = self.state.lock().unwrap();
        let mut obj = s.objects.get(key).cloned().unwrap_or_else(|| panic!("no object {key:?}"));
        merge(&mut obj, &patch);
        stamp(&mut s, &mut obj, false);
        s.objects.insert(key.clone(), obj);
    }

    /// The names of the stored objects of one resource (namespace/name for namespaced ones).
    pub fn names(&self, group_version: &str, resource: &str) -> Vec<String> {
        let s = self.state.lock().unwrap();
        s.objects
            .keys()
            .filter(|k| k.group_version == group_version && k.resource == resource)
            .map(|k| if k.namespace.is_empty() { k.name.clone() } else { format!("{}/{}", k.namespace, k.name) })
            .collect()
    }

    /// Every served object, without the fields the server sets (resourceVersion, uid,
    /// timestamps, generation, managedFields) and without status: what "the same cluster" means.
    #[cfg_attr(not(feature = "docker-tests"), allow(dead_code))] // read by the Docker tier only
    pub fn served(&self) -> BTreeMap<String, Value> {
        let s = self.state.lock().unwrap();
        s.objects
            .iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                if let Some(o) = v.as_object_mut() {
                    o.remove("status");
                }
                if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    for f in ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"] {
                        m.remove(f);
                    }
                }
                (format!("{} {} {}/{}", k.group_version, k.resource, k.namespace, k.name), v)
            })
            .collect()
    }

    /// The number of stored objects of one resource.
    pub fn count(&self, group_version: &str, resource: &str) -> usize {
        let s = self.state.lock().unwrap();
        s.objects.keys().filter(|k| k.group_version == group_version && k.resource == resource).count()
    }

    /// Writes the generated kubeconfig elsewhere too (for tools run outside the test).
    #[allow(dead_code)] // only examples/cluster-server.rs, which includes this file, calls it
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::copy(&self.kubeconfig, path).map(|_| ())
    }
}

impl Drop for ClusterServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn kubeconfig_text(server: &str, context: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {context}\n  cluster:\n    server: {server}\n\
         contexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {context}-reader\n\
         current-context: {context}\nusers:\n- name: {context}-reader\n  user:\n    token: {token}\n"
    )
}

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn load_objects(dir: &Path) -> BTreeMap<ObjectKey, Value> {
    let mut objects = BTreeMap::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| !matches!(p.file_name().and_then(|n| n.to_str()), Some("cluster.json" | "version.json")))
        .collect();
    files.sort();
    for file in files {
        let doc = read_json(&file).expect("readable");
        let items: Vec<Value> = match doc.get("items") {
            Some(Value::Array(items)) => {
                // A typed list (`NodeList`) names its items' kind once; a `List` names each.
                let list_kind = doc.get("kind").and_then(Value::as_str).unwrap_or("List");
                let list_api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("v1");
                items
                    .iter()
                    .map(|item| {
                        let mut item = item.clone();
                        if list_kind != "List" {
                            let obj = item.as_object_mut().expect("list items are objects");
                            obj.entry("kind").or_insert_with(|| json!(list_kind.trim_end_matches("List")));
                            obj.entry("apiVersion").or_insert_with(|| json!(list_api));
                        }
                        item
                    })
                    .collect()
            }
            _ => vec![doc],
        };
        for item in items {
            let (key, _) = key_of(&item).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            objects.insert(key, item);
        }
    }
    objects
}

/// `node-files/<node>/config.toml` and the NRI sockets `facts-args` records as present (`*`:
/// every node's).
fn load_node_files(dir: &Path) -> BTreeMap<String, (String, bool)> {
    let args = std::fs::read_to_string(dir.join("facts-args")).unwrap_or_default();
    let present: Vec<&str> = args.split_whitespace().filter_map(|a| a.strip_suffix("=present")).collect();
    let mut files = BTreeMap::new();
    for n in std::fs::read_dir(dir.join("node-files")).into_iter().flatten() {
        let n = n.expect("directory entry");
        let node = n.file_name().to_string_lossy().to_string();
        if let Ok(text) = std::fs::read_to_string(n.path().join("config.toml")) {
            let nri = present.contains(&node.as_str()) || present.contains(&"*");
            files.insert(node, (text, nri));
        }
    }
    files
}

/// `status.qosClass` as the API server sets it: BestEffort when no container requests or limits
/// anything, else Burstable (Guaranteed needs requests equal to limits, which no pod here sets).
fn qos_class(pod: &Value) -> &'static str {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let set = |c: &Value, part: &str| {
        c.pointer(&format!("/resources/{part}")).and_then(Value::as_object).is_some_and(|m| !m.is_empty())
    };
    if containers.iter().any(|c| set(c, "requests") || set(c, "limits")) { "Burstable" } else { "BestEffort" }
}

/// Whether the kubelet of the pod's node takes the pod up: the node exists and its Ready
/// condition is True. A pod bound by `spec.nodeName` never meets the scheduler (kube-scheduler
/// queues only pods whose nodeName is empty: kubernetes/kubernetes pkg/scheduler/eventhandlers.go
/// @533140f0 `assignedPod`), so no FailedScheduling event nor PodScheduled condition comes: a
/// node whose kubelet does not post its status (Ready Unknown, "Kubelet stopped posting node
/// status.") leaves the pod as the API server created it, Pending with no condition, no
/// container status and no event.
fn kubelet_runs(s: &State, pod: &Value) -> bool {
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
    let key = ObjectKey::core("nodes", node);
    s.objects
        .get(&key)
        .and_then(|n| n.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The kubelet's part for an eas probe pod (`io.eas.probe=true`): on a node that holds its image
/// (`imagePullPolicy: Never`) and has the containerd directory it mounts, it runs to completion
/// and its log is what its script prints (the config, then whether the NRI socket exists);
/// otherwise it fails, as a `hostPath` of `type: Directory` that is absent makes it.
fn run_probe_pod(s: &mut State, k: &ObjectKey, obj: &mut Value) {
    let node = obj.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
    let image = obj.pointer("/spec/containers/0/image").and_then(Value::as_str).unwrap_or_default().to_string();
    let node_key = ObjectKey::core("nodes", &node);
    let has_image =
        s.objects.get(&node_key).and_then(|n| n.pointer("/status/images")).and_then(Value::as_array).is_some_and(
            |imgs| {
                imgs.iter().any(|i| i["names"].as_array().is_some_and(|names| names.iter().any(|n| n == &json!(image))))
            },
        );
    let status = match (has_image, s.node_files.get(&node)) {
        (false, _) => json!({"phase": "Pending", "containerStatuses": [{"name": "probe", "ready": false,
            "state": {"waiting": {"reason": "ErrImageNeverPull",
                "message": format!("Container image \"{image}\" is not present with pull policy of Never")}}}]}),
        (true, None) => {
            json!({"phase": "Failed", "reason": "HostPathMissing", "message": "hostPath type check failed: not a directory"})
        }
        (true, Some((config, nri))) => {
            let answer = if *nri { "present" } else { "absent" };
            s.logs.insert(
                (k.namespace.clone(), k.name.clone(), false),
                format!("{config}\n--- eas-probe nri-socket: {answer}\n"),
            );
            json!({"phase": "Succeeded", "containerStatuses": [{"name": "probe", "ready": false,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]})
        }
    };
    obj["status"] = status;
}

/// `pod-logs/<namespace>/<pod>[.previous].log`: what `kubectl logs [--previous]` would print.
fn load_logs(dir: &Path) -> BTreeMap<LogKey, String> {
    let mut logs = BTreeMap::new();
    for ns in std::fs::read_dir(dir.join("pod-logs")).into_iter().flatten() {
        let ns = ns.expect("directory entry");
        let namespace = ns.file_name().to_string_lossy().to_string();
        for f in std::fs::read_dir(ns.path()).into_iter().flatten() {
            let path = f.expect("directory entry").path();
            let file = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let Some(stem) = file.strip_suffix(".log") else { continue };
            let (pod, previous) = match stem.strip_suffix(".previous") {
                Some(p) => (p.to_string(), true),
                None => (stem.to_string(), false),
            };
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            logs.insert((namespace.clone(), pod, previous), text);
        }
    }
    logs
}

fn key_of(obj: &Value) -> Result<(ObjectKey, &'static Resource), String> {
    let api = obj.get("apiVersion").and_then(Value::as_str).ok_or("an object without apiVersion")?;
    let kind = obj.get("kind").and_then(Value::as_str).ok_or("an object without kind")?;
    let r = resource_by_kind(api, kind).ok_or_else(|| format!("{api} {kind} is not a resource this server knows"))?;
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).ok_or("an object without metadata.name")?;
    let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    if r.namespaced && namespace.is_empty() {
        return Err(format!("{kind} {name} has no namespace"));
    }
    Ok((ObjectKey::of(api, r.plural, if r.namespaced { namespace } else { "" }, name), r))
}

/// Clones the `template` node `count - 1` times, rewriting its name, internal IP, pod CIDR and
/// UID per copy, so a large cluster needs no large fixture.
fn expand(objects: &mut BTreeMap<ObjectKey, Value>, scale: &Value) {
    let template = scale["template"].as_str().expect("scale.template");
    let count = scale["count"].as_u64().expect("scale.count") as u32;
    let ip_base: std::net::Ipv4Addr =
        scale["ip_base"].as_str().expect("scale.ip_base").parse().expect("an IPv4 address");
    let cidr_first = scale["pod_cidr_first"].as_u64().unwrap_or(0) as u32;
    let key = ObjectKey::core("nodes", template);
    let node =
        objects.get(&key).unwrap_or_else(|| panic!("scale.template {template} is not a node of the fixture")).clone();
    let text = serde_json::to_string(&node).expect("serialise");
    let prefix = template.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = template.len() - prefix.len();
    let uid = node.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
    let cidr = node.pointer("/spec/podCIDR").and_then(Value::as_str).unwrap_or("").to_string();
    let base = u32::from(ip_base);
    for i in 1..count {
        let name = format!("{prefix}{i:0digits$}");
        let ip = std::net::Ipv4Addr::from(base + i).to_string();
        let k = cidr_first + i;
        let new_cidr = format!("10.{}.{}.0/24", k / 256, k % 256);
        let new_uid = format!("{}{:012x}", &uid[..uid.len().saturating_sub(12)], i);
        let copy = text
            .replace(&format!("\"{template}\""), &format!("\"{name}\""))
            .replace(&format!("k3s://{template}"), &format!("k3s://{name}"))
            .replace(&format!("\"{ip_base}\""), &format!("\"{ip}\""))
            .replace(&format!("\"{cidr}\""), &format!("\"{new_cidr}\""))
            .replace(&uid, &new_uid);
        let value: Value = serde_json::from_str(&copy).expect("copy parses");
        objects.insert(ObjectKey { name, ..key.clone() }, value);
    }
}

async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    // The namespace controller works whether or not anyone asks: a watch may be all there is.
    let controlled = state.clone();
    let _controller = AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            namespace_controller(&mut controlled.lock().unwrap());
        }
    }));
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let (state, tls) = (state.clone(), tls.clone());
                tokio::spawn(async move {
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        None => {
                            let service = hyper::service::service_fn(move |req| handle(req, state.clone(), false));
                            let _ = http.serve_connection(TokioIo::new(stream), service).with_upgrades().await;
                        }
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else { return };
                            // A client certificate the CA signed authenticates the connection.
                            let cert = stream.get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty());
                            let service = hyper::service::service_fn(move |req| handle(req, state.clone(), cert));
                            let _ = http.serve_connection(TokioIo::new(stream), service).with_upgrades().await;
                        }
                    }
                });
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The connection is closed without an answer when the handler fails.
#[derive(Debug)]
struct ResetConnection;

impl std::fmt::Display for ResetConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fault injected: connection reset")
    }
}

impl std::error::Error for ResetConnection {}

type Answer = Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>>;

async fn handle(req: Request<Incoming>, state: Arc<Mutex<State>>, cert: bool) -> Result<Answer, ResetConnection> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let agent = req.headers().get(hyper::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    // The manager server-side field management records: the User-Agent's program name.
    let agent = agent.split(['/', ' ']).next().unwrap_or("").to_string();
    let authorized = match state.lock().unwrap().token.as_deref() {
        _ if cert => true,
        None => true,
        Some(token) => {
            req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok())
                == Some(&format!("Bearer {token}"))
        }
    };
    let fault = {
        let mut s = state.lock().unwrap();
        s.log.push(Logged { method: method.to_string(), path: path.clone(), query: query.clone() });
        s.agent = agent;
        take_fault(&mut s.faults, method.as_str(), &path)
    };
    let mut repeat_continue = false;
    match fault {
        Some(Fault::Reset) => return Err(ResetConnection),
        Some(Fault::Status(code, message)) => return Ok(status(code, &message, None)),
        Some(Fault::Body(code, body)) => return Ok(respond(code, body.into_bytes())),
        Some(Fault::Slow(d)) => tokio::time::sleep(d).await,
        Some(Fault::SlowStatus(d, code, message)) => {
            tokio::time::sleep(d).await;
            return Ok(status(code, &message, None));
        }
        Some(Fault::RepeatContinue) => repeat_continue = true,
        Some(Fault::Padded(obj, pad)) => return Ok(padded(&obj, pad)),
        None => {}
    }
    if !authorized {
        return Ok(status(401, "Unauthorized", None));
    }
    if let Some((ns, pod)) = portforward::target(&method, &path) {
        return Ok(portforward::open(req, &state, &ns, &pod, &query));
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(ResetConnection),
    };
    let params = parse_query(&query);
    let answer = route(&method, &path, &params, &body, &state);
    if repeat_continue {
        let code = answer.status().as_u16();
        let bytes = answer.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let mut doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("continue".into(), json!(encode_continue(0)));
        }
        return Ok(respond(code, serde_json::to_vec(&doc).expect("serialise")));
    }
    Ok(answer)
}

fn take_fault(faults: &mut Vec<Injection>, method: &str, path: &str) -> Option<Fault> {
    let i = faults.iter().position(|f| {
        f.method.as_deref().is_none_or(|m| m == method)
            && f.path_contains.as_deref().is_none_or(|p| if f.exact { path == p } else { path.contains(p) })
    })?;
    if faults[i].skip > 0 {
        faults[i].skip -= 1;
        return None;
    }
    let fault = faults[i].fault.clone();
    if let Some(n) = &mut faults[i].remaining {
        *n -= 1;
        if *n == 0 {
            faults.remove(i);
        }
    }
    Some(fault)
}

fn respond(code: u16, body: Vec<u8>) -> Answer {
    Response::builder()
        .status(StatusCode::from_u16(code).expect("status code"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .expect("response")
}

fn padded(obj: &Value, pad: usize) -> Answer {
    let mut obj = obj.clone();
    obj["metadata"]["annotations"]["pad"] = json!("@PAD@");
    let text = serde_json::to_string(&obj).expect("serialise");
    let (head, tail) = text.split_once("@PAD@").expect("the placeholder");
    const CHUNK: usize = 1 << 20;
    let chunk = Bytes::from(vec![b'x'; CHUNK]);
    let mut parts = vec![Bytes::from(head.to_string())];
    parts.extend((0..pad / CHUNK).map(|_| chunk.clone()));
    parts.push(Bytes::from(vec![b'x'; pad % CHUNK]));
    parts.push(Bytes::from(tail.to_string()));
    let frames = futures::stream::iter(parts.into_iter().map(|b| Ok(hyper::body::Frame::data(b))));
    Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::StreamBody::new(frames).boxed())
        .expect("response")
}

fn ok_json(v: &Value) -> Answer {
    respond(200, serde_json::to_vec(v).expect("serialise"))
}

fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "AlreadyExists",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn status(code: u16, message: &str, details: Option<Value>) -> Answer {
    let mut v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason(code), "code": code});
    if let Some(d) = details {
        v["details"] = d;
    }
    respond(code, serde_json::to_vec(&v).expect("serialise"))
}

/// A parsed API path.
enum Target<'a> {
    Version,
    Discovery(&'a str),
    Collection { r: &'static Resource, namespace: String },
    Object { r: &'static Resource, namespace: String, name: String, sub: Option<String> },
}

fn parse_path(path: &str) -> Result<Target<'_>, String> {
    let trimmed = path.trim_end_matches('/');
    if trimmed == "/version" {
        return Ok(Target::Version);
    }
    let segs: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
    let (gv, rest): (String, &[&str]) = match segs.as_slice() {
        ["api"] | ["apis"] => return Ok(Target::Discovery(trimmed)),
        ["api", "v1"] | ["apis", _, _] => return Ok(Target::Discovery(trimmed)),
        ["api", "v1", rest @ ..] => ("v1".to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => {
            return Err(format!("the server could not find the requested resource ({path})"));
        }
    };
    let unknown = |p: &str| format!("the server could not find the requested resource ({gv} {p})");
    if let ["namespaces", ns, plural, more @ ..] = rest
        && let Some(r) = resource_by_plural(&gv, plural).filter(|r| r.namespaced)
    {
        return Ok(match more {
            [] => Target::Collection { r, namespace: ns.to_string() },
            [name] => Target::Object { r, namespace: ns.to_string(), name: name.to_string(), sub: None },
            [name, sub] => {
                Target::Object { r, namespace: ns.to_string(), name: name.to_string(), sub: Some(sub.to_string()) }
            }
            _ => return Err(unknown(plural)),
        });
    }
    let [plural, more @ ..] = rest else {
        return Err(unknown(""));
    };
    let r = resource_by_plural(&gv, plural).ok_or_else(|| unknown(plural))?;
    match more {
        [] => Ok(Target::Collection { r, namespace: String::new() }),
        [name] if !r.namespaced => {
            Ok(Target::Object { r, namespace: String::new(), name: name.to_string(), sub: None })
        }
        [name, sub] if !r.namespaced => {
            Ok(Target::Object { r, namespace: String::new(), name: name.to_string(), sub: Some(sub.to_string()) })
        }
        _ => Err(unknown(plural)),
    }
}

fn route(method: &Method, path: &str, params: &BTreeMap<String, String>, body: &[u8], state: &Mutex<State>) -> Answer {
    if let Some(answer) = service_proxy(method, path, body, state) {
        return answer;
    }
    let target = match parse_path(path) {
        Ok(t) => t,
        Err(m) => return status(404, &m, None),
    };
    let mut s = state.lock().unwrap();
    namespace_controller(&mut s);
    if let Target::Collection { r, .. } | Target::Object { r, .. } = &target
        && !served(&s, r.group_version, r.plural)
    {
        return status(404, "the server could not find the requested resource", None);
    }
    match (method, target) {
        (&Method::GET, Target::Version) => ok_json(&s.version),
        (&Method::GET, Target::Discovery(p)) => match discovery(p, &|gv, plural| served(&s, gv, plural)) {
            Some(v) => ok_json(&v),
            None => status(404, "the server could not find the requested resource", None),
        },
        (&Method::GET, Target::Collection { r, namespace }) => {
            if params.get("watch").is_some_and(|w| w == "true" || w == "1") {
                return watch(&s, r, &namespace, params);
            }
            list(&s, r, &namespace, params)
        }
        (&Method::GET, Target::Object { r, namespace, name, sub: Some(sub) }) if r.kind == "Pod" && sub == "log" => {
            let Some(pod) = s.objects.get(&key(r, &namespace, &name)) else {
                return not_found(r, &name);
            };
            // Which container, as the API server decides it (LogLocation in
            // pkg/registry/core/pod/strategy.go, kubernetes/kubernetes@03e06024): the one
            // container when the pod has one; else `container` must name one of its containers
            // or init containers (400 otherwise).
            let names = |field: &str| -> Vec<String> {
                pod["spec"][field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["name"].as_str())
                    .map(str::to_string)
                    .collect()
            };
            let (containers, inits) = (names("containers"), names("initContainers"));
            match params.get("container") {
                Some(c) if !containers.contains(c) && !inits.contains(c) => {
                    return status(400, &format!("container {c} is not valid for pod {name}"), None);
                }
                None if containers.len() > 1 => {
                    let mut m = format!(
                        "a container name must be specified for pod {name}, choose one of: [{}]",
                        containers.join(" ")
                    );
                    if !inits.is_empty() {
                        m.push_str(&format!(" or one of the init containers: [{}]", inits.join(" ")));
                    }
                    return status(400, &m, None);
                }
                _ => {}
            }
            let previous = params.get("previous").is_some_and(|p| p == "true");
            let text = s.logs.get(&(namespace, name, previous)).cloned().unwrap_or_default();
            let text = match params.get("tailLines").and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => {
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("{l}\n")).collect()
                }
                None => text,
            };
            // limitBytes: the log is cut after that many bytes (PodLogOptions.LimitBytes).
            let text = match params.get("limitBytes").and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n < text.len() => String::from_utf8_lossy(&text.as_bytes()[..n]).into_owned(),
                _ => text,
            };
            Response::builder()
                .status(StatusCode::OK)
                .header(hyper::header::CONTENT_TYPE, "text/plain")
                .body(Full::new(Bytes::from(text)).boxed())
                .expect("response")
        }
        (&Method::GET, Target::Object { r, namespace, name, .. }) => match s.objects.get(&key(r, &namespace, &name)) {
            Some(v) => ok_json(v),
            None => not_found(r, &name),
        },
        (&Method::POST, Target::Collection { r, .. }) if r.kind == "SelfSubjectAccessReview" => access_review(&s, body),
        (&Method::POST, Target::Collection { r, namespace }) => create(&mut s, r, &namespace, body),
        (&Method::PUT, Target::Object { r, namespace, name, .. }) => replace(&mut s, r, &namespace, &name, body),
        (&Method::PATCH, Target::Object { r, namespace, name, .. }) => patch(&mut s, r, &namespace, &name, body),
        (&Method::DELETE, Target::Object { r, name, .. }) if r.kind == "Namespace" => {
            terminate_namespace(&mut s, r, &name)
        }
        (&Method::DELETE, Target::Object { r, namespace, name, .. }) => delete(&mut s, r, &namespace, &name),
        (m, _) => status(405, &format!("{m} is not supported on {path}"), None),
    }
}

/// The API server's service proxy (`/api/v1/namespaces/NS/services/[SCHEME:]NAME[:PORT]/proxy/...`),
/// as it really routes: the Service must exist and have that port (by name or number; without
/// one, its only port), and its Endpoints must have a ready address for that port, else 503.
/// Behind a model server's workload Service (`<n>-kserve-workload-svc`) it answers as vLLM
/// would, under the served name (`.spec.model.name` of the LLMInferenceService, else `<n>`): a
/// chat completion asked with `"stream": true` comes as server-sent events, one token a chunk up
/// to `max_tokens`, then a usage chunk and `[DONE]`, as vLLM's OpenAI server sends them.
fn service_proxy(method: &Method, path: &str, body: &[u8], state: &Mutex<State>) -> Option<Answer> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (ns, rest) = rest.split_once("/services/")?;
    let (spec, tail) = rest.split_once("/proxy")?;
    let parts: Vec<&str> = spec.split(':').collect();
    let (svc, port) = match parts.as_slice() {
        [name] => (*name, None),
        [s, name] if *s == "http" || *s == "https" => (*name, None),
        [name, port] => (*name, Some(*port)),
        [_, name, port] => (*name, Some(*port)),
        _ => return Some(status(400, &format!("invalid service request {spec:?}"), None)),
    };
    let mut s = state.lock().unwrap();
    if method == Method::POST {
        s.proxy_posts.push((tail.to_string(), body.to_vec()));
    }
    let get = |plural: &str, name: &str| {
        let r = resource_by_plural("v1", plural).expect("a served resource");
        s.objects.get(&key(r, ns, name))
    };
    let Some(service) = get("services", svc) else {
        return Some(status(404, &format!("services \"{svc}\" not found"), None));
    };
    let ports = service.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    let found = match port {
        None if ports.len() == 1 => ports.first(),
        None => None,
        Some(p) => ports.iter().find(|sp| {
            sp["name"].as_str() == Some(p) || sp["port"].as_u64().map(|n| n.to_string()).as_deref() == Some(p)
        }),
    };
    let Some(found) = found else {
        return Some(status(503, &format!("no endpoints available for service \"{svc}\" (no port {port:?})"), None));
    };
    let port_name = found["name"].as_str().unwrap_or("");
    let ready =
        get("endpoints", svc).and_then(|e| e["subsets"].as_array().cloned()).unwrap_or_default().iter().any(|ss| {
            ss["addresses"].as_array().is_some_and(|a| !a.is_empty())
                && ss["ports"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"].as_str().unwrap_or("") == port_name))
        });
    if !ready {
        return Some(status(503, &format!("no endpoints available for service \"{svc}\""), None));
    }
    if portforward::in_mesh(&s, ns) {
        return Some(portforward::mesh_refusal(&s, ns, svc));
    }
    let Some(model) = svc.strip_suffix("-kserve-workload-svc") else {
        return Some(status(502, &format!("the recorded cluster serves nothing behind {svc}"), None));
    };
    let served = served_name(&s, ns, model);
    let (code, body) = vllm(method, tail, body, &served);
    Some(respond(code, body))
}

/// The name a model server serves: its LLMInferenceService's `.spec.model.name`, else its name.
fn served_name(s: &State, ns: &str, model: &str) -> String {
    let llmisvc = ObjectKey::of("serving.kserve.io/v1alpha2", "llminferenceservices", ns, model);
    s.objects
        .get(&llmisvc)
        .and_then(|o| o.pointer("/spec/model/name")?.as_str().map(str::to_string))
        .unwrap_or_else(|| model.to_string())
}

/// vLLM's OpenAI server under the name `served`, as the service proxy and a port-forward reach
/// it: the status and the body.
fn vllm(method: &Method, tail: &str, body: &[u8], served: &str) -> (u16, Vec<u8>) {
    let json = |v: Value| (200, serde_json::to_vec(&v).expect("serialise"));
    match (method, tail) {
        (&Method::GET, "/v1/models") => json(json!({"object": "list", "data": [{"id": served, "object": "model"}]})),
        (&Method::POST, "/v1/chat/completions") => {
            let asked: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let n = asked["max_tokens"].as_u64().unwrap_or(16);
            if asked["stream"].as_bool() == Some(true) {
                let mut sse = String::new();
                let mut chunk = |v: Value| sse.push_str(&format!("data: {v}\n\n"));
                chunk(json!({"object": "chat.completion.chunk", "model": served,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}));
                for i in 0..n {
                    chunk(json!({"object": "chat.completion.chunk", "model": served,
                        "choices": [{"index": 0, "delta": {"content": format!(" t{i}")}}]}));
                }
                chunk(json!({"object": "chat.completion.chunk", "model": served, "choices": [],
                    "usage": {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}}));
                sse.push_str("data: [DONE]\n\n");
                (200, sse.into_bytes())
            } else {
                json(json!({"object": "chat.completion", "model": served,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}))
            }
        }
        _ => (404, format!("{{\"detail\": \"{tail} is not served by the recorded model server\"}}").into_bytes()),
    }
}

#[path = "cluster_server_portforward.rs"]
mod portforward;

fn key(r: &Resource, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::of(r.group_version, r.plural, if r.namespaced { namespace } else { "" }, name)
}

/// When the recorded server marks an object deleted (a fixed time: nothing reads it as a clock).
const DELETED_AT: &str = "2026-12-03T00:00:00Z";

/// DELETE of a namespace, as the API server answers it: 200 with the namespace marked for
/// deletion (`deletionTimestamp`, the `kubernetes` finalizer, phase `Terminating`); the
/// namespace controller ([`namespace_controller`]) then empties and removes it. A DELETE
/// meanwhile is a 409, in the namespace registry's words.
fn terminate_namespace(s: &mut State, r: &'static Resource, name: &str) -> Answer {
    let k = key(r, "", name);
    let Some(current) = s.objects.get(&k) else {
        return not_found(r, name);
    };
    if current.pointer("/metadata/deletionTimestamp").is_some() {
        let message = format!(
            "Operation cannot be fulfilled on namespaces \"{name}\": The system is ensuring all content is removed \
             from this namespace.  Upon completion, this namespace will automatically be purged by the system."
        );
        let v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                       "reason": "Conflict", "details": {"name": name, "kind": "namespaces"}, "code": 409});
        return respond(409, serde_json::to_vec(&v).expect("serialise"));
    }
    let mut obj = current.clone();
    obj["metadata"]["deletionTimestamp"] = json!(DELETED_AT);
    obj["spec"]["finalizers"] = json!(["kubernetes"]);
    obj["status"]["phase"] = json!("Terminating");
    stamp(s, &mut obj, false);
    s.objects.insert(k, obj.clone());
    let after = s.namespace_terminating.unwrap_or_default();
    s.terminating.insert(name.to_string(), std::time::Instant::now() + after);
    ok_json(&obj)
}

/// DELETE of any other object: one that has finalizers is marked (`deletionTimestamp`) and
/// stays until an update removes the last of them ([`release_if_finalized`]); any other goes.
fn delete(s: &mut State, r: &'static Resource, namespace: &str, name: &str) -> Answer {
    match delete_key(s, &key(r, namespace, name)) {
        Some(v) => ok_json(&v),
        None => not_found(r, name),
    }
}

fn delete_key(s: &mut State, k: &ObjectKey) -> Option<Value> {
    let current = s.objects.get(k)?;
    let held = current.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if held {
        if current.pointer("/metadata/deletionTimestamp").is_some() {
            return Some(current.clone());
        }
        let mut obj = current.clone();
        obj["metadata"]["deletionTimestamp"] = json!(DELETED_AT);
        stamp(s, &mut obj, false);
        s.objects.insert(k.clone(), obj.clone());
        return Some(obj);
    }
    let obj = s.objects.remove(k)?;
    Some(removed(s, k.clone(), obj))
}

/// An object marked for deletion whose last finalizer an update removed goes (not a namespace:
/// its own finalizer is the namespace controller's).
fn release_if_finalized(s: &mut State, k: &ObjectKey) {
    let Some(obj) = s.objects.get(k) else { return };
    let marked = obj.pointer("/metadata/deletionTimestamp").is_some();
    let held = obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if marked && !held && k.resource != "namespaces" {
        let obj = s.objects.remove(k).expect("present");
        removed(s, k.clone(), obj);
    }
}

/// The DELETED event of an object gone from the store, at a resourceVersion of its own.
fn removed(s: &mut State, k: ObjectKey, mut obj: Value) -> Value {
    s.resource_version += 1;
    let rv = s.resource_version;
    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    tell(s, Change { key: k, kind: "DELETED", object: obj.clone(), rv });
    obj
}

/// The namespace controller's pass over the terminating namespaces (the real one:
/// kubernetes/kubernetes pkg/controller/namespace/deletion, namespaced_resources_deleter.go and
/// status_condition_utils.go @0355f448): it sets the namespace's deletion conditions once (a
/// MODIFIED event) and then says nothing while the content goes; once its time is up
/// ([`Options::namespace_terminating`]) the content is deleted, what has finalizers stays
/// (marked), and the conditions name what remains (`NamespaceContentRemaining`,
/// `NamespaceFinalizersRemaining`). An empty namespace goes (DELETED) at the next pass.
fn namespace_controller(s: &mut State) {
    let now = std::time::Instant::now();
    let due: Vec<(String, bool)> = s.terminating.iter().map(|(n, t)| (n.clone(), *t <= now)).collect();
    for (name, content_goes) in due {
        let inside =
            |s: &State| -> Vec<ObjectKey> { s.objects.keys().filter(|k| k.namespace == name).cloned().collect() };
        if content_goes {
            for k in inside(s) {
                delete_key(s, &k);
            }
        }
        let k = ObjectKey::core("namespaces", &name);
        let left = inside(s);
        if left.is_empty() {
            s.terminating.remove(&k.name);
            if let Some(obj) = s.objects.remove(&k) {
                removed(s, k, obj);
            }
            continue;
        }
        let conditions = deletion_conditions(s, &left);
        let Some(ns) = s.objects.get(&k) else {
            s.terminating.remove(&k.name);
            continue;
        };
        if ns.pointer("/status/conditions") != Some(&conditions) {
            let mut ns = ns.clone();
            ns["status"]["conditions"] = conditions;
            stamp(s, &mut ns, false);
            s.objects.insert(k, ns);
        }
    }
}

/// The five conditions the namespace controller keeps on a terminating namespace, for the
/// objects `left` in it: counts per resource (`pods. has 2 resource instances`, group after the
/// dot) and per finalizer, sorted, in the controller's words (status_condition_utils.go
/// @0355f448, ProcessContentTotals, okReasons and okMessages).
fn deletion_conditions(s: &State, left: &[ObjectKey]) -> Value {
    let mut per_resource: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_finalizer: BTreeMap<String, usize> = BTreeMap::new();
    for k in left {
        let group = k.group_version.split_once('/').map(|(g, _)| g).unwrap_or("");
        *per_resource.entry(format!("{}.{group}", k.resource)).or_default() += 1;
        let finalizers = s.objects.get(k).and_then(|o| o.pointer("/metadata/finalizers")).and_then(Value::as_array);
        for f in finalizers.into_iter().flatten().filter_map(Value::as_str) {
            *per_finalizer.entry(f.to_string()).or_default() += 1;
        }
    }
    let ok = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "False", "lastTransitionTime": DELETED_AT, "reason": reason, "message": message});
    // A remaining-condition: `False` with nothing left, else `True` listing what is, counted.
    let remaining = |t: &str, left: &BTreeMap<String, usize>, each: &str, reason: &str, message: &str| {
        if left.is_empty() {
            return ok(t, "ContentRemoved", "All content successfully removed");
        }
        let listed: Vec<String> =
            left.iter().map(|(what, n)| format!("{what} {each} {n} resource instances")).collect();
        json!({"type": t, "status": "True", "lastTransitionTime": DELETED_AT,
               "reason": reason, "message": format!("{message}: {}", listed.join(", "))})
    };
    let content = remaining(
        "NamespaceContentRemaining",
        &per_resource,
        "has",
        "SomeResourcesRemain",
        "Some resources are remaining",
    );
    let finalizers = remaining(
        "NamespaceFinalizersRemaining",
        &per_finalizer,
        "in",
        "SomeFinalizerRemain",
        "Some finalizers are remaining",
    );
    json!([
        ok("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
        ok(
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed"
        ),
        ok(
            "NamespaceDeletionContentFailure",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization"
        ),
        content,
        finalizers,
    ])
}

fn not_found(r: &Resource, name: &str) -> Answer {
    status(
        404,
        &format!("{} \"{name}\" not found", r.plural),
        Some(
            json!({"name": name, "group": r.group_version.split_once('/').map(|(g, _)| g).unwrap_or(""), "kind": r.plural}),
        ),
    )
}

/// Whether the API server serves this resource now: always, unless it comes from a CRD that is
/// not installed ([`real::crd_of`]).
fn served(s: &State, group_version: &str, plural: &str) -> bool {
    real::crd_of(group_version, plural).is_none_or(|crd| {
        s.objects.contains_key(&ObjectKey::of("apiextensions.k8s.io/v1", "customresourcedefinitions", "", &crd))
    })
}

fn discovery(path: &str, served: &dyn Fn(&str, &str) -> bool) -> Option<Value> {
    let resources = |gv: &str| -> Vec<Value> {
        RESOURCES
            .iter()
            .filter(|r| r.group_version == gv && served(r.group_version, r.plural))
            .map(|r| {
                json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced, "kind": r.kind,
                       "verbs": ["create", "delete", "get", "list", "patch", "update"], "shortNames": r.short})
            })
            .collect()
    };
    let mut groups: Vec<&str> = RESOURCES
        .iter()
        .filter(|r| served(r.group_version, r.plural))
        .map(|r| r.group_version)
        .filter(|gv| gv.contains('/'))
        .collect();
    groups.dedup();
    match path {
        "/api" => Some(json!({"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})),
        "/apis" => Some(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups.iter().map(|gv| {
            let (g, v) = gv.split_once('/').expect("group/version");
            json!({"name": g, "versions": [{"groupVersion": gv, "version": v}], "preferredVersion": {"groupVersion": gv, "version": v}})
        }).collect::<Vec<_>>()})),
        "/api/v1" => Some(json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources("v1")})),
        p => {
            let gv = p.strip_prefix("/apis/")?;
            let list = resources(gv);
            (!list.is_empty())
                .then(|| json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}))
        }
    }
}

/// A request's label and field selectors, parsed; what the API server answers 400 with when one
/// does not parse.
fn selectors(
    r: &Resource,
    params: &BTreeMap<String, String>,
) -> Result<(Option<LabelSelector>, Option<FieldSelector>), String> {
    let labels = params.get("labelSelector").map(|v| LabelSelector::parse(v)).transpose()?;
    Ok((labels, params.get("fieldSelector").map(|v| FieldSelector::parse(v, r)).transpose()?))
}

/// Serves a list the way the API server does, writing items straight into the answer (without
/// their kind and apiVersion) so a large list costs one copy.
fn list(s: &State, r: &Resource, namespace: &str, params: &BTreeMap<String, String>) -> Answer {
    let (labels, fields) = match selectors(r, params) {
        Ok(both) => both,
        Err(m) => return status(400, &m, None),
    };
    let limit: usize = match params.get("limit").map(|l| l.parse::<usize>()) {
        None => 0,
        Some(Ok(l)) => l,
        Some(Err(_)) => return status(400, "limit must be a non-negative integer", None),
    };
    let start: usize = match params.get("continue").filter(|c| !c.is_empty()) {
        None => 0,
        Some(token) => match decode_continue(token) {
            Some(n) => n,
            None => return status(400, "continue key is not valid", None),
        },
    };
    let matching: Vec<&Value> = s
        .objects
        .iter()
        .filter(|(k, _)| k.group_version == r.group_version && k.resource == r.plural)
        .filter(|(k, _)| namespace.is_empty() || k.namespace == namespace)
        .map(|(_, v)| v)
        .filter(|v| labels.as_ref().is_none_or(|l| l.matches(v)))
        .filter(|v| fields.as_ref().is_none_or(|f| f.matches(v)))
        .collect();
    let page_size = match (limit, s.max_page) {
        (0, None) => usize::MAX,
        (0, Some(m)) => m,
        (l, None) => l,
        (l, Some(m)) => l.min(m),
    };
    let end = start.saturating_add(page_size).min(matching.len());
    let page = matching.get(start..end).unwrap_or(&[]);
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(s.resource_version.to_string()));
    if end < matching.len() {
        meta.insert("continue".into(), json!(encode_continue(end)));
        meta.insert("remainingItemCount".into(), json!(matching.len() - end));
    }
    let api_version = r.group_version;
    let mut out = Vec::with_capacity(page.len() * 4096 + 256);
    out.extend_from_slice(
        format!("{{\"kind\":\"{}List\",\"apiVersion\":\"{api_version}\",\"metadata\":", r.kind).as_bytes(),
    );
    serde_json::to_writer(&mut out, &meta).expect("serialise");
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in page.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &WithoutTypeMeta(item)).expect("serialise");
    }
    out.extend_from_slice(b"]}");
    respond(200, out)
}

struct WithoutTypeMeta<'a>(&'a Value);

impl serde::Serialize for WithoutTypeMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(map) = self.0 else {
            return self.0.serialize(ser);
        };
        let mut m = ser.serialize_map(None)?;
        for (k, v) in map {
            if k != "kind" && k != "apiVersion" {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

pub fn encode_continue(offset: usize) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("recorded:{offset}"))
}

pub fn decode_continue(token: &str) -> Option<usize> {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
    String::from_utf8(raw).ok()?.strip_prefix("recorded:")?.parse().ok()
}

/// Gives an object its next resourceVersion (and, when created, a UID) right before it is
/// stored, and tells the watches.
fn stamp(s: &mut State, obj: &mut Value, create: bool) {
    s.resource_version += 1;
    let rv = s.resource_version;
    let previous = if create { None } else { key_of(obj).ok().and_then(|(k, _)| s.objects.get(&k).cloned()) };
    let manager = if s.agent.is_empty() { "unknown" } else { s.agent.as_str() };
    real::server_fields(obj, previous.as_ref(), manager);
    if obj["kind"] == "Node" {
        real::lifecycle_taints(obj);
    }
    let meta = obj.as_object_mut().expect("object").entry("metadata").or_insert_with(|| json!({}));
    meta["resourceVersion"] = json!(rv.to_string());
    if create {
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{rv:012x}"));
        meta["creationTimestamp"] = json!(real::now());
    }
    if let Ok((key, _)) = key_of(obj) {
        let kind = if create { "ADDED" } else { "MODIFIED" };
        tell(s, Change { key, kind, object: obj.clone(), rv });
    }
}

/// A change told to the open watches and kept for those that resume from an earlier
/// resourceVersion, the oldest compacted past [`Options::watch_history`].
fn tell(s: &mut State, c: Change) {
    s.history.push_back(c.clone());
    while s.history.len() > s.watch_history {
        s.history.pop_front();
    }
    let _ = s.changes.send(c);
}

/// A watch (`?watch=true`), as the API server serves one: one JSON event per line
/// (`{"type": "MODIFIED", "object": {...}}`) until `timeoutSeconds` (default 300). From
/// `resourceVersion` it first replays the changes since then while they are kept
/// ([`Options::watch_history`]); from a compacted one it sends a single ERROR event with a 410
/// Status ("too old resource version: N (M)") and ends, as the watch cache answers
/// (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher: cacher.go's Watch
/// returns `newErrWatcher(err)` for GetAllEventsSinceThreadUnsafe's `NewResourceExpired`). A watch
/// of an object that does not change sends nothing at all, however long: a client's read timeout
/// fires on it. With `allowWatchBookmarks=true` and [`Options::bookmark_every`], a BOOKMARK
/// (only the kind and a resourceVersion) comes that often; past [`Options::watch_gone_after`]
/// the watch ends with the 410 ERROR event.
fn watch(s: &State, r: &'static Resource, namespace: &str, params: &BTreeMap<String, String>) -> Answer {
    let (labels, fields) = match selectors(r, params) {
        Ok(both) => both,
        Err(m) => return status(400, &m, None),
    };
    let secs = params.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(300);
    let now = tokio::time::Instant::now();
    let deadline = now + Duration::from_secs(secs);
    let namespace = namespace.to_string();
    let here = move |c: &Change| {
        c.key.group_version == r.group_version
            && c.key.resource == r.plural
            && (namespace.is_empty() || c.key.namespace == namespace)
            && labels.as_ref().is_none_or(|l| l.matches(&c.object))
            && fields.as_ref().is_none_or(|f| f.matches(&c.object))
    };
    let event = |c: &Change| json!({"type": c.kind, "object": c.object});
    let mut first = std::collections::VecDeque::new();
    let mut ended = false;
    let from = params.get("resourceVersion").and_then(|v| v.parse::<u64>().ok()).filter(|v| *v != 0);
    if let Some(rv) = from {
        let oldest = s.history.front().map_or(s.resource_version + 1, |c| c.rv);
        if rv + 1 < oldest {
            first.push_back(expired(rv, oldest - 1));
            ended = true;
        } else {
            first.extend(s.history.iter().filter(|c| c.rv > rv && here(c)).map(event));
        }
    }
    let bookmarks =
        params.get("allowWatchBookmarks").is_some_and(|b| b == "true").then_some(s.bookmark_every).flatten();
    let gone_at = s.watch_gone_after.map(|d| now + d);
    let at = s.resource_version;
    let open = Open {
        rx: s.changes.subscribe(),
        first,
        ended,
        last_rv: at,
        next_bookmark: bookmarks.map(|d| now + d),
        bookmarks,
        gone_at,
    };
    let kind = r.kind;
    let api_version = r.group_version;
    let stream = futures::stream::unfold(open, move |mut w| {
        let here = here.clone();
        async move {
            let line = |v: &Value| {
                let mut line = serde_json::to_vec(v).expect("json");
                line.push(b'\n');
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(Bytes::from(line)))
            };
            if let Some(v) = w.first.pop_front() {
                return Some((line(&v), w));
            }
            if w.ended {
                return None;
            }
            loop {
                let far = deadline + Duration::from_secs(3600);
                let change = tokio::select! {
                    c = w.rx.recv() => c,
                    _ = tokio::time::sleep_until(deadline) => return None,
                    _ = tokio::time::sleep_until(w.gone_at.unwrap_or(far)) => {
                        w.ended = true;
                        return Some((line(&expired(w.last_rv, w.last_rv)), w));
                    }
                    _ = tokio::time::sleep_until(w.next_bookmark.unwrap_or(far)) => {
                        w.next_bookmark = w.bookmarks.map(|d| tokio::time::Instant::now() + d);
                        let mark = json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version,
                            "metadata": {"resourceVersion": w.last_rv.to_string()}}});
                        return Some((line(&mark), w));
                    }
                };
                let c = match change {
                    Ok(c) => c,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                };
                w.last_rv = w.last_rv.max(c.rv);
                if here(&c) {
                    return Some((line(&json!({"type": c.kind, "object": c.object})), w));
                }
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::StreamBody::new(stream).boxed())
        .expect("response")
}

/// One open watch: the events due before the live ones (a replay, or the 410), and its clocks.
struct Open {
    rx: tokio::sync::broadcast::Receiver<Change>,
    first: std::collections::VecDeque<Value>,
    /// Nothing follows `first` (the watch was answered 410).
    ended: bool,
    last_rv: u64,
    next_bookmark: Option<tokio::time::Instant>,
    bookmarks: Option<Duration>,
    gone_at: Option<tokio::time::Instant>,
}

/// The ERROR event of a watch whose resourceVersion is compacted (watch_cache.go: "too old
/// resource version: %d (%d)", a 410 with reason Expired).
fn expired(asked: u64, oldest: u64) -> Value {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {asked} ({oldest})"), "reason": "Expired", "code": 410}})
}

fn parse_body(body: &[u8]) -> Result<Value, Box<Answer>> {
    serde_json::from_slice(body).map_err(|e| Box::new(status(400, &format!("the request body is not JSON: {e}"), None)))
}

/// A `SelfSubjectAccessReview` answered as the API server does: the review sent back with a
/// `status`, `allowed` unless the fixture denies that verb and resource, and nothing stored, with
/// no `reason` either way: the real server (issue 29) allowed its `system:masters` user with none
/// (the privileged-group authorizer decides before RBAC) and denied with none when no RBAC rule
/// matched (kubernetes/kubernetes@01aa0f3f plugin/pkg/auth/authorizer/rbac/rbac.go).
fn access_review(s: &State, body: &[u8]) -> Answer {
    let mut obj = match parse_body(body) {
        Ok(v) => v,
        Err(a) => return *a,
    };
    let Some(attrs) = obj.pointer("/spec/resourceAttributes").cloned() else {
        return status(422, "spec.resourceAttributes: Required value", None);
    };
    let field = |k: &str| attrs.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (verb, group, resource) = (field("verb"), field("group"), field("resource"));
    let asked = if group.is_empty() { format!("{verb} {resource}") } else { format!("{verb} {resource}.{group}") };
    let allowed = !s.denied.contains(&asked);
    obj["apiVersion"] = json!("authorization.k8s.io/v1");
    obj["kind"] = json!("SelfSubjectAccessReview");
    obj["metadata"] = json!({"creationTimestamp": null});
    obj["status"] = json!({"allowed": allowed});
    respond(201, serde_json::to_vec(&obj).expect("review serialises"))
}

fn create(s: &mut State, r: &'static Resource, namespace: &str, body: &[u8]) -> Answer {
    let mut obj = match parse_body(body) {
        Ok(v) => v,
        Err(a) => return *a,
    };
    if obj.pointer("/metadata/name").and_then(Value::as_str).is_none_or(str::is_empty)
        && let Some(prefix) = obj.pointer("/metadata/generateName").and_then(Value::as_str).map(str::to_string)
    {
        obj["metadata"]["name"] = json!(format!("{prefix}{:05x}", s.resource_version % 0xfffff));
    }
    if r.namespaced {
        obj["metadata"]["namespace"] = json!(namespace);
    }
    obj["apiVersion"] = json!(r.group_version);
    obj["kind"] = json!(r.kind);
    if r.kind == "Namespace"
        && let Some(name) = obj.pointer("/metadata/name").cloned()
    {
        // The API server labels every namespace with its own name.
        let labels = obj["metadata"].as_object_mut().expect("metadata").entry("labels").or_insert_with(|| json!({}));
        labels["kubernetes.io/metadata.name"] = name;
    }
    let k = match key_of(&obj) {
        Ok((k, _)) => k,
        Err(m) => return status(422, &m, None),
    };
    if s.objects.contains_key(&k) {
        return status(409, &format!("{} \"{}\" already exists", r.plural, k.name), None);
    }
    // The API server's own status on a new pod: Pending and its QoS class, nothing more
    // (kubernetes/kubernetes pkg/registry/core/pod/strategy.go @008b3652 PrepareForCreate). A POST
    // that carries a status is the test installer playing the kubelet in one write
    // (fixtures/synthetic/eas/tools/fake_cluster.py), kept as it is.
    if r.kind == "Pod" && obj.get("status").is_none() {
        obj["status"] = json!({"phase": "Pending", "qosClass": qos_class(&obj)});
    }
    stamp(s, &mut obj, true);
    let reply = obj.clone();
    let probe = r.kind == "Pod" && obj.pointer("/metadata/labels/io.eas.probe").and_then(Value::as_str) == Some("true");
    s.objects.insert(k.clone(), obj.clone());
    if probe && kubelet_runs(s, &obj) {
        // The kubelet's part, a change of its own after the create (a watch from the POST's
        // resourceVersion sees it), as the kubelet's status update is.
        run_probe_pod(s, &k, &mut obj);
        stamp(s, &mut obj, false);
        s.objects.insert(k, obj);
    }
    respond(201, serde_json::to_vec(&reply).expect("serialise"))
}

fn replace(s: &mut State, r: &'static Resource, namespace: &str, name: &str, body: &[u8]) -> Answer {
    let mut obj = match parse_body(body) {
        Ok(v) => v,
        Err(a) => return *a,
    };
    let k = key(r, namespace, name);
    let Some(current) = s.objects.get(&k) else {
        return not_found(r, name);
    };
    // An update at a resourceVersion that is not the object's is a conflict, as the API server
    // answers an optimistic write that lost its race.
    let sent = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|v| !v.is_empty());
    if let Some(v) = sent
        && current.pointer("/metadata/resourceVersion").and_then(Value::as_str) != Some(v)
    {
        let why = format!("Operation cannot be fulfilled on {} \"{name}\": the object has been modified", r.plural);
        return status(409, &why, None);
    }
    // A replace keeps the object's identity, as kube-apiserver's update does: the uid and
    // creationTimestamp are the stored object's (a body naming another uid is a conflict); a
    // takeover of the run Lease is an update, so the taker sees the uid it records.
    let kept_uid = current.pointer("/metadata/uid").cloned();
    let sent_uid = obj.pointer("/metadata/uid").and_then(Value::as_str).filter(|v| !v.is_empty());
    if let Some(u) = sent_uid
        && kept_uid.as_ref().and_then(Value::as_str) != Some(u)
    {
        let why = format!(
            "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {u}, UID in object meta: {}",
            r.plural,
            kept_uid.as_ref().and_then(Value::as_str).unwrap_or("")
        );
        return status(409, &why, None);
    }
    let created = current.pointer("/metadata/creationTimestamp").cloned();
    obj["apiVersion"] = json!(r.group_version);
    obj["kind"] = json!(r.kind);
    if let Some(meta) = obj.as_object_mut().map(|o| o.entry("metadata").or_insert_with(|| json!({}))) {
        for (field, v) in [("uid", kept_uid), ("creationTimestamp", created)] {
            if let Some(v) = v {
                meta[field] = v;
            }
        }
    }
    stamp(s, &mut obj, false);
    s.objects.insert(k.clone(), obj.clone());
    release_if_finalized(s, &k);
    ok_json(&obj)
}

/// Merge, strategic-merge and apply patches are all applied as a JSON merge patch (RFC 7386);
/// an apply patch of a missing object creates it.
fn patch(s: &mut State, r: &'static Resource, namespace: &str, name: &str, body: &[u8]) -> Answer {
    let p = match parse_body(body) {
        Ok(v) => v,
        Err(a) => return *a,
    };
    let k = key(r, namespace, name);
    let mut obj = match s.objects.get(&k) {
        Some(v) => v.clone(),
        None => {
            let mut fresh = json!({"apiVersion": r.group_version, "kind": r.kind, "metadata": {"name": name}});
            if r.namespaced {
                fresh["metadata"]["namespace"] = json!(namespace);
            }
            merge(&mut fresh, &p);
            stamp(s, &mut fresh, true);
            s.objects.insert(k, fresh.clone());
            return respond(201, serde_json::to_vec(&fresh).expect("serialise"));
        }
    };
    merge(&mut obj, &p);
    stamp(s, &mut obj, false);
    s.objects.insert(k.clone(), obj.clone());
    release_if_finalized(s, &k);
    ok_json(&obj)
}

fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

pub fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%' && i + 3 <= b.len())
            .then(|| std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()))
            .flatten();
        match (b[i], hex) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (c, None) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A label selector: comma-separated requirements, all of which must hold.
#[derive(Clone)]
pub struct LabelSelector(Vec<Requirement>);

#[derive(Clone)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut parts = Vec::new();
        let mut depth = 0;
        let mut cur = String::new();
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut cur));
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        parts.push(cur);
        let mut reqs = Vec::new();
        for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let set = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or(format!("invalid selector {p:?}"))?;
                Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
            };
            let req = if let Some(k) = p.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_string())
            } else if let Some((k, rest)) = p.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_string(), set(rest)?)
            } else if let Some((k, rest)) = p.split_once(" in ") {
                Requirement::In(k.trim().to_string(), set(rest)?)
            } else if let Some((k, v)) = p.split_once("!=") {
                Requirement::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                Requirement::Eq(k.trim().to_string(), v.trim().to_string())
            } else {
                Requirement::Exists(p.to_string())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let label = |k: &str| obj.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
        })
    }
}

/// A field selector, restricted (like the API server) to the fields each resource indexes.
#[derive(Clone)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str, r: &Resource) -> Result<FieldSelector, String> {
        let mut reqs = Vec::new();
        for p in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = p.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!("invalid field selector: {p:?}"));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace") && !r.fields.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let found = match obj.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (found == *value) == *equal
        })
    }
}
