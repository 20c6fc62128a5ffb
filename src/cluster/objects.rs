//! The few cluster reads and deletions `eas up` and `eas down` make beyond gathering facts:
//! the cluster's identity, the ledger snapshot (namespaces, Helm releases, CRDs, the objects
//! inside the namespaces of `data/ledger-watch.json`, its cluster-scoped kinds and the node label
//! keys under its prefixes), and the deletion of objects the ledger says a run created (a node
//! label by a merge patch that removes the key). Everything is listed as metadata only: no
//! Secret data is read.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::{Api, Client};

use super::Cluster;
use super::api::{ApiError, said};
use crate::snapshot::{ClusterNamed, Named, NodeLabel, Release, Snapshot, WatchedKind, watch};

const HELM_SECRET_TYPE: &str = "type=helm.sh/release.v1";

/// One API call, bounded by `t`: its answer, or why not as an [`ApiError`] naming `what`. Every
/// call outside the streamed reader goes through here (the watches aside: they are bounded by
/// their callers).
pub(super) async fn call<T>(
    what: &str,
    t: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ApiError> {
    timed(what, t, fut).await
}

async fn timed<T>(what: &str, t: Duration, fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, ApiError> {
    match tokio::time::timeout(t, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(answered(what, &e)),
        Err(_) => Err(no_answer(what, t)),
    }
}

fn answered(call: &str, e: &kube::Error) -> ApiError {
    let mut cause = said(e);
    // A denial names what was denied; the rule that would allow it is the fix.
    if let kube::Error::Api(s) = e
        && s.code == 403
        && let Some(rule) = super::api::rule_from_denial(&s.message)
    {
        cause.push_str(&format!("; a ClusterRole rule that allows it: {rule}"));
    }
    ApiError::Call { call: call.to_string(), cause }
}

fn no_answer(call: &str, t: Duration) -> ApiError {
    ApiError::NoAnswer { call: call.to_string(), secs: t.as_secs() }
}

impl Cluster {
    /// A GET of `path` (an API path, or one through a service's proxy), its body as text, bounded by `t`.
    pub async fn get_text(&self, path: &str, t: Duration) -> Result<String, ApiError> {
        let client = &self.client;
        let what = format!("GET {path}");
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| ApiError::Call { call: what.clone(), cause: e.to_string() })?;
        timed(&what, t, client.request_text(req)).await
    }

    /// A request (`what` names it) whose answer is read line by line as it arrives, each line with
    /// when it arrived since the request; the whole answer within `t`.
    pub async fn stream_lines(
        &self,
        what: &str,
        req: http::Request<Vec<u8>>,
        t: Duration,
    ) -> Result<Vec<(Duration, String)>, ApiError> {
        let client = &self.client;
        use futures::{AsyncBufReadExt, StreamExt};
        let started = std::time::Instant::now();
        let read = async {
            let body = client.request_stream(req).await.map_err(|e| answered(what, &e))?;
            let mut lines = Box::pin(body).lines();
            let mut out = Vec::new();
            while let Some(line) = lines.next().await {
                let line = line.map_err(|e| ApiError::Call {
                    call: what.to_string(),
                    cause: format!("reading the answer: {e}"),
                })?;
                out.push((started.elapsed(), line));
            }
            Ok(out)
        };
        match tokio::time::timeout(t, read).await {
            Ok(r) => r,
            Err(_) => Err(no_answer(what, t)),
        }
    }

    /// The `kube-system` namespace UID: the key of this cluster's state directory.
    pub async fn cluster_key(&self, t: Duration) -> Result<String, ApiError> {
        self.identity(t).await
    }

    /// [`cluster_key`], with why it failed told apart (answered, no connection, no answer), so that
    /// a proxy on the way can be named when no answer came.
    pub async fn identity(&self, t: Duration) -> Result<String, ApiError> {
        let client = &self.client;
        let api: Api<Namespace> = Api::all(client.clone());
        let call = IDENTITY_CALL.to_string();
        let ns = match tokio::time::timeout(t, api.get("kube-system")).await {
            Ok(Ok(ns)) => ns,
            Ok(Err(e @ (kube::Error::Api(_) | kube::Error::SerdeError(_)))) => return Err(answered(&call, &e)),
            Ok(Err(e)) => return Err(ApiError::NoConnection { call, cause: said(&e) }),
            Err(_) => return Err(no_answer(&call, t)),
        };
        ns.metadata.uid.ok_or(ApiError::NoUid)
    }

    pub async fn snapshot(&self, t: Duration) -> Result<Snapshot, ApiError> {
        let client = &self.client;
        let ns: Api<Namespace> = Api::all(client.clone());
        let secrets: Api<Secret> = Api::all(client.clone());
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let helm = ListParams::default().fields(HELM_SECRET_TYPE);
        let all = ListParams::default();
        let (n, s, c, nodes) = tokio::join!(
            timed("list namespaces", t, ns.list_metadata(&all)),
            timed("list Helm release secrets", t, secrets.list_metadata(&helm)),
            timed("list CRDs", t, crds.list_metadata(&all)),
            self.node_metadata(t),
        );
        let mut snap = Snapshot::default();
        for item in n?.items {
            if let Some(name) = item.metadata.name {
                snap.namespaces.insert(name);
            }
        }
        for item in s?.items {
            let labels = item.metadata.labels.unwrap_or_default();
            if let (Some(name), Some(namespace)) = (labels.get("name"), item.metadata.namespace) {
                snap.helm_releases.insert(Release { namespace, name: name.clone() });
            }
        }
        for item in c?.items {
            if let Some(name) = item.metadata.name {
                snap.crds.insert(name);
            }
        }
        for node in nodes? {
            let name = node.name.unwrap_or_default();
            for key in node.labels.unwrap_or_default().into_keys().filter(|k| watch().watches_label(k)) {
                snap.node_labels.insert(NodeLabel { node: name.clone(), key });
            }
        }
        for ns in &watch().namespaces {
            for kind in &watch().kinds {
                for name in list_inside(client, kind, &ns.name, t).await? {
                    snap.objects.insert(Named { kind: kind.kind.clone(), namespace: ns.name.clone(), name });
                }
            }
        }
        for kind in &watch().cluster_kinds {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(kind));
            for name in list_names(api, &format!("list {}", kind.plural), t).await? {
                snap.cluster_objects.insert(ClusterNamed { kind: kind.kind.clone(), name });
            }
        }
        Ok(snap)
    }

    /// Deletes a cluster-scoped object the ledger recorded; one already gone counts as deleted.
    pub async fn delete_cluster_object(&self, c: &ClusterNamed, t: Duration) -> Result<(), ApiError> {
        let client = &self.client;
        let Some(api) = cluster_api(client, &c.kind) else {
            return Err(ApiError::NotDeletable(format!("{} is not a kind eas tracks", c.kind)));
        };
        deleted(&format!("delete {} {}", c.kind, c.name), t, api.delete(&c.name, &DeleteParams::background())).await
    }

    /// Removes one label key from a node by a JSON merge patch (`null` removes a key, RFC 7386); a
    /// node that is gone has no label left to remove.
    pub async fn remove_node_label(&self, l: &NodeLabel, t: Duration) -> Result<(), ApiError> {
        let client = &self.client;
        use kube::api::{Patch, PatchParams};
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let patch = serde_json::json!({"metadata": {"labels": {l.key.clone(): null}}});
        let what = format!("remove label {} from node {}", l.key, l.node);
        deleted(&what, t, nodes.patch(&l.node, &PatchParams::default(), &Patch::Merge(&patch))).await
    }

    /// [`snapshot`], retried until `deadline`: a ledger is only as good as its snapshots.
    pub async fn snapshot_within(&self, t: Duration, deadline: Duration) -> Result<Snapshot, ApiError> {
        let start = tokio::time::Instant::now();
        let mut wait = Duration::from_millis(500);
        let mut tries = 0;
        loop {
            tries += 1;
            let left = deadline.saturating_sub(start.elapsed());
            match self.snapshot(t.min(left.max(Duration::from_secs(1)))).await {
                Ok(s) => return Ok(s),
                Err(e) if start.elapsed() + wait >= deadline => {
                    return Err(ApiError::Retried { last: Box::new(e), tries, secs: start.elapsed().as_secs() });
                }
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Deletes one object inside a namespace; one already gone counts as deleted.
    pub async fn delete_named(&self, n: &Named, t: Duration) -> Result<(), ApiError> {
        let client = &self.client;
        let Some(kind) = watch().kinds.iter().find(|k| k.kind == n.kind) else {
            return Err(ApiError::NotDeletable(format!("{} is not a kind eas tracks", n.kind)));
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &n.namespace, &api_resource(kind));
        let what = format!("delete {} {}/{}", n.kind, n.namespace, n.name);
        match tokio::time::timeout(t, api.delete(&n.name, &DeleteParams::background())).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) if not_found(&e) => Ok(()),
            Ok(Err(e)) => Err(answered(&what, &e)),
            Err(_) => Err(no_answer(&what, t)),
        }
    }

    /// Deletes a namespace. Already gone (404), or already going (409: a namespace stays
    /// `Terminating` while its content is removed, and a DELETE meanwhile is refused) is done.
    pub async fn delete_namespace(&self, name: &str, t: Duration) -> Result<(), ApiError> {
        let client = &self.client;
        let api: Api<Namespace> = Api::all(client.clone());
        deleted(&format!("delete namespace {name}"), t, api.delete(name, &DeleteParams::background())).await
    }

    /// Deletes a CRD; already gone or going is done, as for a namespace.
    pub async fn delete_crd(&self, name: &str, t: Duration) -> Result<(), ApiError> {
        let client = &self.client;
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        deleted(&format!("delete CRD {name}"), t, api.delete(name, &DeleteParams::background())).await
    }

    /// Deletes one object the ledger recorded (a namespace, a CRD, or an object inside a namespace)
    /// within `t`, and gives up at once when `cancel` fires (SIGINT/SIGTERM): `None`. A Helm release
    /// is the teardown's to remove, not a DELETE: `Some(Err)`.
    pub async fn delete_object(
        &self,
        o: &crate::snapshot::Object,
        t: Duration,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Option<Result<(), ApiError>> {
        use crate::snapshot::Object;
        let delete = async {
            match o {
                Object::Namespace(n) => self.delete_namespace(n, t).await,
                Object::Crd(c) => self.delete_crd(c, t).await,
                Object::Namespaced(n) => self.delete_named(n, t).await,
                Object::Cluster(c) => self.delete_cluster_object(c, t).await,
                Object::NodeLabel(l) => self.remove_node_label(l, t).await,
                Object::HelmRelease(_) => {
                    Err(ApiError::NotDeletable(format!("{o} is removed by helm, not by a DELETE")))
                }
            }
        };
        tokio::select! {
            r = delete => Some(r),
            _ = cancel.cancelled() => None,
        }
    }

    /// The API server's `gitVersion`, within `t`.
    pub async fn server_version(&self, t: Duration) -> Result<String, ApiError> {
        let client = &self.client;
        timed("get version", t, client.apiserver_version()).await.map(|v| v.git_version)
    }

    /// Resolves once `o` is gone from the cluster, or with the error that says this wait cannot learn
    /// it (the API server refuses the list or the watch: 401, 403). Nothing else ends it: the caller
    /// bounds it (`eas down`'s settle window).
    ///
    /// The object is watched by kube-runtime's `watch_object` (a list by name, then a watch from the
    /// list's resourceVersion, bookmarks asked for), which re-establishes a broken watch on its next
    /// poll (kube-rs/kube@003f668d kube-runtime/src/watcher.rs, `step_trampolined`, as in the
    /// kube-runtime 5.0.0 eas builds with, lines 699-757: an error on the stream keeps the watch's
    /// state, the stream's end watches again from the last resourceVersion, a BOOKMARK moves that
    /// resourceVersion on, and an ERROR event with a 410 Status starts over with a list). A watch
    /// that stays quiet past the client's read timeout ends in such an error, which says nothing of
    /// the object. Gone is a DELETED event, or a list by name without the object (a GET's 404).
    pub async fn gone(&self, o: &crate::snapshot::Object) -> Result<(), ApiError> {
        let client = &self.client;
        use crate::snapshot::Object;
        match o {
            Object::Namespace(n) => {
                until_absent(Api::<Namespace>::all(client.clone()), n, &format!("watch namespace {n}")).await
            }
            Object::Crd(n) => {
                until_absent(Api::<CustomResourceDefinition>::all(client.clone()), n, &format!("watch CRD {n}")).await
            }
            Object::Namespaced(n) => {
                let Some(kind) = watch().kinds.iter().find(|k| k.kind == n.kind) else {
                    return Err(ApiError::NotDeletable(format!("{} is not a kind eas tracks", n.kind)));
                };
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &n.namespace, &api_resource(kind));
                until_absent(api, &n.name, &format!("watch {} {}/{}", n.kind, n.namespace, n.name)).await
            }
            Object::Cluster(c) => {
                let Some(api) = cluster_api(client, &c.kind) else {
                    return Err(ApiError::NotDeletable(format!("{} is not a kind eas tracks", c.kind)));
                };
                until_absent(api, &c.name, &format!("watch {} {}", c.kind, c.name)).await
            }
            // A label goes with the patch that removes it.
            Object::NodeLabel(_) => Ok(()),
            Object::HelmRelease(r) => {
                let what = format!("watch Helm release {}/{}'s secrets", r.namespace, r.name);
                release_secrets_gone(Api::<Secret>::namespaced(client.clone(), &r.namespace), &r.name, &what).await
            }
        }
    }

    /// Why namespace `name` is still there, in its own status: `None` when it is gone; else its
    /// phase and each of its deletion conditions that holds (`NamespaceContentRemaining:
    /// SomeResourcesRemain: Some resources are remaining: pods. has 1 resource instances`), as the
    /// namespace controller writes them.
    pub async fn namespace_left(&self, name: &str, t: Duration) -> Result<Option<String>, ApiError> {
        let client = &self.client;
        let api: Api<Namespace> = Api::all(client.clone());
        let Some(ns) = timed(&format!("get namespace {name}"), t, api.get_opt(name)).await? else {
            return Ok(None);
        };
        if ns.metadata.deletion_timestamp.is_none() {
            return Ok(Some("not terminating: its deletion was not accepted".into()));
        }
        let status = ns.status.unwrap_or_default();
        let phase = status.phase.unwrap_or_else(|| "Terminating".into());
        let held: Vec<String> = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.status == "True")
            .map(|c| {
                let mut s = c.type_;
                for part in [c.reason, c.message].into_iter().flatten().filter(|p| !p.is_empty()) {
                    s.push_str(": ");
                    s.push_str(&part);
                }
                s
            })
            .collect();
        Ok(Some(if held.is_empty() {
            format!("still {phase}; no condition of it says why")
        } else {
            format!("still {phase}: {}", crate::text::for_people(&held.join("; ")))
        }))
    }
}

/// The read of the cluster's identity.
pub const IDENTITY_CALL: &str = "get namespace kube-system";

fn api_resource(kind: &WatchedKind) -> ApiResource {
    let api_version =
        if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
    ApiResource {
        group: kind.group.clone(),
        version: kind.version.clone(),
        api_version,
        kind: kind.kind.clone(),
        plural: kind.plural.clone(),
    }
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The names of one kind in one namespace; none when the kind is not served (its CRD is not
/// installed) or the namespace does not exist.
async fn list_inside(client: &Client, kind: &WatchedKind, ns: &str, t: Duration) -> Result<Vec<String>, ApiError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource(kind));
    list_names(api, &format!("list {} in {ns}", kind.plural), t).await
}

/// The names `api` lists; none when its kind is not served (404).
async fn list_names(api: Api<DynamicObject>, what: &str, t: Duration) -> Result<Vec<String>, ApiError> {
    match tokio::time::timeout(t, api.list_metadata(&ListParams::default())).await {
        Ok(Ok(list)) => Ok(list.items.into_iter().filter_map(|i| i.metadata.name).collect()),
        Ok(Err(e)) if not_found(&e) => Ok(Vec::new()),
        Ok(Err(e)) => Err(answered(what, &e)),
        Err(_) => Err(no_answer(what, t)),
    }
}

/// The API handle of a cluster-scoped kind the ledger watches; none for another kind.
fn cluster_api(client: &Client, kind: &str) -> Option<Api<DynamicObject>> {
    let k = watch().cluster_kinds.iter().find(|k| k.kind == kind)?;
    Some(Api::all_with(client.clone(), &api_resource(k)))
}

/// A cluster-wide DELETE within `t`: 404 (gone) and 409 (already going) are done.
async fn deleted<T>(
    what: &str,
    t: Duration,
    fut: impl Future<Output = Result<T, kube::Error>>,
) -> Result<(), ApiError> {
    match tokio::time::timeout(t, fut).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => Ok(()),
        Ok(Err(e)) => Err(answered(what, &e)),
        Err(_) => Err(no_answer(what, t)),
    }
}

/// One object, bounded: absent is `None`; a refusal (403), another error status or no answer is
/// the error, said as the API said it.
pub(super) async fn get<K>(api: Api<K>, kind: &str, ns: &str, name: &str, t: Duration) -> Result<Option<K>, ApiError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    timed(&format!("get {kind} {ns}/{name}"), t, api.get_opt(name)).await
}

async fn until_absent<K>(api: Api<K>, name: &str, what: &str) -> Result<(), ApiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    until_met(api, name, what, |o: Option<&K>| o.is_none()).await
}

/// Resolves once object `name` meets `cond` (absent is `None`), by kube-runtime's `watch_object`
/// and the reading of its errors [`gone`] gives: a quiet, broken or 410 watch is watched again;
/// only a refusal (401, 403) ends the wait early, as its error. A kind no longer served (the
/// list's 404) is an absent object. The caller bounds the wait.
pub(super) async fn until_met<K>(
    api: Api<K>,
    name: &str,
    what: &str,
    cond: impl kube::runtime::wait::Condition<K>,
) -> Result<(), ApiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt;
    let mut events = std::pin::pin!(kube::runtime::watcher::watch_object(api, name));
    let mut pause = Pause::default();
    while let Some(e) = events.next().await {
        let seen = match e {
            Ok(o) => o,
            Err(e) => match broken(what, &e) {
                Broken::Refused(err) => return Err(err),
                Broken::Unserved => None,
                Broken::Again => {
                    pause.wait().await;
                    continue;
                }
            },
        };
        pause.reset();
        if cond.matches_object(seen.as_ref()) {
            return Ok(());
        }
    }
    Err(ApiError::Call { call: what.to_string(), cause: "the watch ended".into() })
}

/// What a watcher's error means to a wait for an object to go.
enum Broken {
    /// The API server refuses this client the list or the watch: waiting longer cannot help.
    Refused(ApiError),
    /// The list answered 404: the kind is no longer served (its CRD went), so neither is it.
    Unserved,
    /// A broken or quiet watch, a 410, an answer that did not come: the watcher starts again.
    Again,
}

fn broken(what: &str, e: &kube::runtime::watcher::Error) -> Broken {
    use kube::runtime::watcher::Error as W;
    let refused = |cause: String| Broken::Refused(ApiError::Call { call: what.to_string(), cause });
    match e {
        W::InitialListFailed(kube::Error::Api(s)) if s.code == 404 => Broken::Unserved,
        W::InitialListFailed(k) | W::WatchStartFailed(k) | W::WatchFailed(k) if matches!(k, kube::Error::Api(s) if s.code == 401 || s.code == 403) => {
            refused(said(k))
        }
        W::WatchError(s) if s.code == 401 || s.code == 403 => refused(said(&kube::Error::Api(s.clone()))),
        _ => Broken::Again,
    }
}

/// The pause before a watcher is polled again after an error, as kube-runtime leaves to its
/// caller ("You can apply your own backoff by not polling the stream"): 0.5 s, doubling to 5 s,
/// back to 0.5 s once an event arrives.
struct Pause(Duration);

impl Default for Pause {
    fn default() -> Self {
        Pause(Duration::from_millis(500))
    }
}

impl Pause {
    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_secs(5));
    }

    fn reset(&mut self) {
        *self = Pause::default();
    }
}

/// Until no Secret of release `name` is left in the namespace (Helm labels each revision's
/// Secret `owner=helm,name=<release>`), by the same watcher and the same reading of its errors.
async fn release_secrets_gone(api: Api<Secret>, name: &str, what: &str) -> Result<(), ApiError> {
    use futures::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let cfg = watcher::Config::default().labels(&format!("owner=helm,name={name}")).fields(HELM_SECRET_TYPE);
    let mut present = std::collections::BTreeSet::new();
    let mut listed = false;
    let mut pause = Pause::default();
    let mut events = std::pin::pin!(watcher::watcher(api, cfg));
    while let Some(e) = events.next().await {
        match e {
            Ok(Event::Init) => {
                present.clear();
                listed = false;
            }
            Ok(Event::InitApply(s) | Event::Apply(s)) => {
                present.insert(s.metadata.name.unwrap_or_default());
            }
            Ok(Event::Delete(s)) => {
                present.remove(&s.metadata.name.unwrap_or_default());
            }
            Ok(Event::InitDone) => listed = true,
            Err(e) => match broken(what, &e) {
                Broken::Refused(err) => return Err(err),
                Broken::Unserved => return Ok(()),
                Broken::Again => pause.wait().await,
            },
        }
        if listed && present.is_empty() {
            return Ok(());
        }
    }
    Err(ApiError::Call { call: what.to_string(), cause: "the watch ended".into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_delete_the_api_server_never_answers_ends_when_the_run_is_cancelled() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Accepts, and never answers.
        std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().take(4).collect();
            std::thread::sleep(Duration::from_secs(60));
            drop(held);
        });
        let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c.cancel();
        });
        let started = std::time::Instant::now();
        let o = crate::snapshot::Object::Namespace("eas-made".into());
        let r = Cluster::new(client).delete_object(&o, Duration::from_secs(30), &cancel).await;
        assert!(r.is_none(), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    }

    #[test]
    fn api_answers_are_a_code_and_a_reason_not_a_dump() {
        let status = |code: u16, message: &str| {
            let mut s = kube::core::Status::failure(message, "");
            s.code = code;
            kube::Error::Api(Box::new(s))
        };
        let cases = [
            (
                status(401, "Unauthorized"),
                "401 Unauthorized (the kubeconfig's credentials were rejected): Unauthorized",
            ),
            (
                status(403, "namespaces \"kube-system\" is forbidden"),
                "403 Forbidden: namespaces \"kube-system\" is forbidden",
            ),
            (status(500, "etcd down"), "500 Internal Server Error: etcd down"),
            (status(500, ""), "500 Internal Server Error"),
        ];
        for (e, want) in cases {
            let got = said(&e);
            assert_eq!(got, want);
            assert!(!got.contains("Status {"), "{got}");
        }
    }
}
