//! Reading the cluster through the `kube` client: which cluster the kubeconfig names, and list
//! calls that stream their pages (each item is parsed and handed on as it arrives, so memory
//! stays flat however large the cluster), follow `continue` tokens, and each carry a timeout.

use std::fmt;
use std::io::BufReader;
use std::marker::PhantomData;
use std::time::Duration;

use crate::kubeconfig::KubeSource;
use crate::net::proxy::Route;
use kube::core::params::ListParams;
use serde::Deserialize;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio_util::compat::FuturesAsyncReadCompatExt;
use tokio_util::io::SyncIoBridge;
use tower::layer::layer_fn;

/// Items asked for per page. Kubernetes supports clusters of up to 5000 nodes, so every list
/// of a supported cluster's nodes is one call; `continue` is still followed past that. Pages are
/// parsed as a stream, so their size does not decide memory.
pub const PAGE_LIMIT: u32 = 5000;

/// Pages followed per list before the answer is judged endless: 5 million items, far past any
/// supported cluster's objects of one kind.
pub const MAX_PAGES: u32 = 1000;

/// Bytes read per page before it is judged malformed: 5000 nodes with their managed fields are
/// well under 256 MiB; an endless body (`{"a": …`) ends here, not at memory or the timeout.
pub const MAX_PAGE_BYTES: u64 = crate::net::body_limit::PAGE;

/// The cluster a kubeconfig context names, ready to be read.
pub struct Target {
    pub context: String,
    pub server: String,
    pub cluster: super::Cluster,
    /// The user's exec credential plugin, to name it when it fails.
    pub plugin: Option<crate::net::exec_auth::Plugin>,
    /// The proxy the client goes through, to name it when the API server cannot be reached.
    pub proxy: Option<Route>,
    /// The credentials the context names, as a 401 reports them: `user "NAME" (a bearer
    /// token) in FILE`.
    pub credentials: String,
}

pub use crate::kubeconfig::TargetError;

/// The credentials `context` names in the kubeconfig at `path`: its user and how that user
/// authenticates (never the secret itself).
fn credentials(kc: &kube::config::Kubeconfig, context: &str, path: &str) -> String {
    let user =
        kc.contexts.iter().find(|c| c.name == context).and_then(|c| c.context.as_ref()).and_then(|c| c.user.clone());
    let Some(user) = user.filter(|u| !u.is_empty()) else {
        return format!("no user (context {context:?} names none in {path})");
    };
    let how = match kc.auth_infos.iter().find(|a| a.name == user).and_then(|a| a.auth_info.as_ref()) {
        None => "not defined in the kubeconfig".to_string(),
        Some(a) if a.exec.is_some() => {
            format!("the exec plugin {}", a.exec.as_ref().and_then(|e| e.command.clone()).unwrap_or_default())
        }
        Some(a) if a.token.is_some() => "a bearer token".into(),
        Some(a) if a.token_file.is_some() => {
            format!("the bearer token in {}", a.token_file.as_deref().unwrap_or_default())
        }
        Some(a) if a.client_certificate_data.is_some() || a.client_certificate.is_some() => {
            "a client certificate and key".into()
        }
        Some(a) if a.username.is_some() => "a username and password".into(),
        Some(a) if a.auth_provider.is_some() => "an auth provider".into(),
        Some(_) => "no credentials".into(),
    };
    format!("user {user:?} ({how}) in {path}")
}

/// Loads the kubeconfig (`--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`), selects the
/// context, and builds a client whose every read gives up after `timeout`.
pub async fn target(
    source: &KubeSource,
    proxy: &crate::net::proxy::ProxyEnv,
    timeout: Duration,
) -> Result<Target, TargetError> {
    let (mut kc, path) = source.load()?;
    let name = match source.context.as_deref() {
        Some(c) => c.to_string(),
        None => {
            kc.current_context.clone().filter(|c| !c.is_empty()).ok_or(TargetError::NoCurrentContext(path.clone()))?
        }
    };
    let Some(ctx) = kc.contexts.iter().find(|c| c.name == name) else {
        let mut names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        let available = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        return Err(TargetError::NoContext { name, path, available });
    };
    let cluster_name = ctx.context.as_ref().map(|c| c.cluster.clone()).unwrap_or_default();
    crate::kubeconfig::mint_exec(&mut kc, &name, crate::settings::timeouts::CREDENTIAL).await?;
    let server = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .unwrap_or_default();
    let unusable = |cause: String| TargetError::Unusable { context: name.clone(), path: path.clone(), cause };
    let (mut config, route) = match crate::net::kube_config::config_for(&kc, &name, proxy, source.extra_roots.clone()) {
        Ok(c) => c,
        Err(crate::net::kube_config::ConfigError::Proxy(e)) => return Err(TargetError::Proxy(e)),
        Err(crate::net::kube_config::ConfigError::Kubeconfig(cause)) => return Err(unusable(cause)),
    };
    config.connect_timeout = Some(timeout);
    // A watch that is quiet past it errs, and is re-established ([`super::objects::gone`]).
    config.read_timeout = Some(source.read_timeout.unwrap_or(timeout));
    config.write_timeout = Some(timeout);
    let credentials = credentials(&kc, &name, &path);
    let plugin = crate::net::exec_auth::Plugin::of(&config.auth_info);
    let built = kube::client::ClientBuilder::try_from(config).map(|b| {
        // Every answer capped (kube's own get and list calls read theirs whole), then logged.
        b.with_layer(&layer_fn(crate::net::body_limit::limited))
            .with_layer(&layer_fn(crate::net::api_log::logged))
            .build()
    });
    let client = built.map_err(|e| match plugin.as_ref().and_then(|p| p.describe(&e)) {
        Some(line) => TargetError::Plugin(line),
        None => unusable(crate::text::mask_userinfo(&e.to_string())),
    })?;
    Ok(Target { context: name, server, cluster: super::Cluster::new(client), plugin, proxy: route, credentials })
}

/// One read the gatherer makes, named the way the person reading an error thinks of it.
#[derive(Debug, Clone)]
pub struct Call {
    pub verb: &'static str,
    pub resource: &'static str,
    /// `None`: all namespaces (or a cluster-scoped resource).
    pub namespace: Option<&'static str>,
    pub path: String,
    pub field_selector: Option<String>,
}

impl Call {
    pub fn list(resource: &'static str, group_version: &str, namespace: Option<&'static str>) -> Call {
        let base = if group_version == "v1" { "/api/v1".to_string() } else { format!("/apis/{group_version}") };
        let path = match namespace {
            Some(ns) => format!("{base}/namespaces/{ns}/{resource}"),
            None => format!("{base}/{resource}"),
        };
        Call { verb: "list", resource, namespace, path, field_selector: None }
    }

    pub fn with_field_selector(mut self, selector: impl Into<String>) -> Call {
        self.field_selector = Some(selector.into());
        self
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if let Some(s) = &self.field_selector {
            write!(f, " ({s})")?;
        }
        match self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None if matches!(
                self.resource,
                "nodes" | "namespaces" | "version" | "storageclasses" | "selfsubjectaccessreviews"
            ) =>
            {
                Ok(())
            }
            None => write!(f, " in all namespaces"),
        }
    }
}

/// Why a read failed at run time (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("cannot reach the Kubernetes API at {server}{} ({call}): {cause}", through(.proxy))]
    Unreachable { server: String, call: String, cause: String, proxy: Option<Route> },
    #[error(
        "the API server at {server} rejected the credentials of context {context:?} (401 Unauthorized) on {call}: {credentials}"
    )]
    Unauthorized { server: String, context: String, call: String, credentials: String },
    /// `rule`: the ClusterRole rule that would allow the call ([`rule_for`]).
    #[error("{call} was refused (403 Forbidden): {message}")]
    Forbidden { call: String, message: String, rule: String },
    #[error("{call} got no complete answer from {server}{} within {secs} s", through(.proxy))]
    Timeout { server: String, call: String, secs: u64, proxy: Option<Route> },
    #[error("{call} failed: {code} {message}")]
    Status { call: String, code: u16, message: String },
    #[error("{call}: the answer is not what the Kubernetes API sends: {cause}")]
    Decode { call: String, cause: String },
    /// The pages of a list do not end: a `continue` token came back, or too many pages.
    #[error("{call}: the API server's pages do not end: {cause}")]
    Endless { call: String, cause: String },
    #[error("{0}")]
    Plugin(String),
    /// A call the API server answered with an error, in its words ([`said`]).
    #[error("{call}: {cause}")]
    Call { call: String, cause: String },
    /// A call that got no answer: the connection failed (to the server, or a proxy on the way).
    #[error("{call}: {cause}")]
    NoConnection { call: String, cause: String },
    /// A call that got no answer within its bound.
    #[error("{call}: no answer within {secs} s")]
    NoAnswer { call: String, secs: u64 },
    /// A read retried until its deadline, and the last attempt's failure.
    #[error("{last} ({tries} tries in {secs} s)")]
    Retried { last: Box<ApiError>, tries: u32, secs: u64 },
    /// Not an object a DELETE of eas's may remove (a kind eas does not track, a Helm release).
    #[error("{0}")]
    NotDeletable(String),
    /// The cluster's identity has no uid to key the state by.
    #[error("namespace kube-system has no uid")]
    NoUid,
}

/// ` through the proxy scheme://host:port (SETTING)`, or nothing without a proxy.
fn through(proxy: &Option<Route>) -> String {
    proxy.as_ref().map(|r| format!(" through {r}")).unwrap_or_default()
}

impl ApiError {
    pub fn next(&self) -> String {
        match self {
            ApiError::Unreachable { server, proxy: Some(r), .. } => r.hint(&crate::net::proxy::scheme_and_host(server).1),
            ApiError::Timeout { server, proxy: Some(r), .. } => format!(
                "retry; if the API server is slow, raise --request-timeout; {}",
                r.hint(&crate::net::proxy::scheme_and_host(server).1)
            ),
            ApiError::Unreachable { .. } => {
                "check that the cluster is running (`k3d cluster list`, `systemctl status k3s`) and that --context names it".into()
            }
            ApiError::Unauthorized { context, .. } => format!(
                "refresh the credentials of context {context} (k3d: `k3d kubeconfig merge <cluster>`; k3s: copy /etc/rancher/k3s/k3s.yaml again)"
            ),
            ApiError::Forbidden { rule, .. } if !rule.is_empty() => {
                format!("bind the context's user to a ClusterRole with the rule {rule}, or use a context that has it")
            }
            ApiError::Forbidden { .. } => {
                "use a context allowed to list nodes, namespaces, daemonsets, deployments and secrets (eas facts only reads)".into()
            }
            ApiError::Timeout { .. } => "retry; if the API server is slow, raise --request-timeout".into(),
            ApiError::Status { .. } | ApiError::Decode { .. } | ApiError::Endless { .. } => {
                "retry `eas facts`; if it persists, check the API server's logs (and any proxy in front of it)".into()
            }
            ApiError::Plugin(_) => "run the credential plugin by hand to see why it fails, or refresh the login it relies on".into(),
            ApiError::Retried { last, .. } => last.next(),
            ApiError::Call { .. } | ApiError::NoConnection { .. } | ApiError::NoAnswer { .. } | ApiError::NoUid => {
                "check the API server (`eas doctor`)".into()
            }
            ApiError::NotDeletable(_) => "remove it by hand, or with the tool that made it".into(),
        }
    }
}

/// A reader of one cluster: each call bounded by `timeout`, lists streamed.
#[derive(Clone)]
pub struct Reader {
    pub client: kube::Client,
    pub server: String,
    pub context: String,
    pub timeout: Duration,
    pub plugin: Option<crate::net::exec_auth::Plugin>,
    pub proxy: Option<Route>,
    pub credentials: String,
}

impl Reader {
    pub fn new(t: &Target, timeout: Duration) -> Reader {
        Reader {
            client: t.cluster.client().clone(),
            server: t.server.clone(),
            context: t.context.clone(),
            timeout,
            plugin: t.plugin.clone(),
            proxy: t.proxy.clone(),
            credentials: t.credentials.clone(),
        }
    }

    /// The API server's `gitVersion`.
    pub async fn server_version(&self) -> Result<String, ApiError> {
        let call =
            Call { verb: "get", resource: "version", namespace: None, path: "/version".into(), field_selector: None };
        let v = tokio::time::timeout(self.timeout, self.client.apiserver_version())
            .await
            .map_err(|_| self.timed_out(&call))?
            .map_err(|e| self.classify(&call, e))?;
        Ok(v.git_version)
    }

    /// Lists every item of `call`, page by page, pushing each into `sink` as it is parsed, and
    /// returns the sink and the number of calls made (one below [`PAGE_LIMIT`] items).
    pub async fn list<T, S>(&self, call: &Call, mut sink: S) -> Result<(S, u32), ApiError>
    where
        T: DeserializeOwned + Send + 'static,
        S: Sink<T>,
    {
        let mut token: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        let mut pages = 0;
        loop {
            let mut lp = ListParams::default().limit(PAGE_LIMIT);
            if let Some(s) = &call.field_selector {
                lp = lp.fields(s);
            }
            lp.continue_token = token.take();
            let mut request = kube::core::Request::new(call.path.clone())
                .list(&lp)
                .map_err(|e| ApiError::Decode { call: call.to_string(), cause: e.to_string() })?;
            // Parsed as it streams, and capped below at the page limit, not the whole-answer one.
            request.extensions_mut().insert(crate::net::body_limit::Streamed);
            let page = async move {
                let body = self.client.request_stream(request).await.map_err(|e| self.classify(call, e))?;
                let bridge = Capped { inner: SyncIoBridge::new(Box::pin(body.compat())), left: MAX_PAGE_BYTES };
                tokio::task::spawn_blocking(move || {
                    let meta = parse_list(BufReader::with_capacity(64 * 1024, bridge), &mut |item: T| sink.push(item));
                    (meta, sink)
                })
                .await
                .map_err(|e| ApiError::Decode { call: call.to_string(), cause: e.to_string() })
            };
            let (meta, returned) =
                tokio::time::timeout(self.timeout, page).await.map_err(|_| self.timed_out(call))??;
            sink = returned;
            pages += 1;
            let meta = meta.map_err(|e| {
                let cause = chain(&e);
                if e.is_io() && cause.contains(TOO_LARGE) {
                    ApiError::Decode { call: call.to_string(), cause: TOO_LARGE.into() }
                } else if e.is_io() && cause.contains("timed out") {
                    self.timed_out(call)
                } else if e.is_io() {
                    self.unreachable(call, cause)
                } else {
                    ApiError::Decode { call: call.to_string(), cause: e.to_string() }
                }
            })?;
            let endless = |cause: String| ApiError::Endless { call: call.to_string(), cause };
            match meta.continue_token.filter(|t| !t.is_empty()) {
                None => return Ok((sink, pages)),
                Some(t) if !seen.insert(t.clone()) => {
                    return Err(endless(format!("page {pages} repeats an earlier continue token")));
                }
                Some(_) if pages >= MAX_PAGES => {
                    return Err(endless(format!("still a continue token after {MAX_PAGES} pages")));
                }
                Some(t) => token = Some(t),
            }
        }
    }

    pub(crate) fn timed_out(&self, call: &Call) -> ApiError {
        ApiError::Timeout {
            server: self.server.clone(),
            call: call.to_string(),
            secs: self.timeout.as_secs().max(1),
            proxy: self.proxy.clone(),
        }
    }

    fn unreachable(&self, call: &Call, cause: String) -> ApiError {
        ApiError::Unreachable { server: self.server.clone(), call: call.to_string(), cause, proxy: self.proxy.clone() }
    }

    pub(crate) fn classify(&self, call: &Call, e: kube::Error) -> ApiError {
        if let Some(line) = self.plugin.as_ref().and_then(|p| p.describe(&e)) {
            return ApiError::Plugin(line);
        }
        let call_s = call.to_string();
        match e {
            kube::Error::Api(status) => match status.code {
                401 => ApiError::Unauthorized {
                    server: self.server.clone(),
                    context: self.context.clone(),
                    call: call_s,
                    credentials: self.credentials.clone(),
                },
                403 => ApiError::Forbidden { call: call_s, message: status.message.clone(), rule: rule_for(call) },
                code => ApiError::Status { call: call_s, code, message: status_text(code, &status.message) },
            },
            kube::Error::SerdeError(e) => ApiError::Decode { call: call_s, cause: e.to_string() },
            other => {
                let cause = chain(&other);
                if cause.contains("timed out") || cause.contains("deadline has elapsed") {
                    return self.timed_out(call);
                }
                self.unreachable(call, cause)
            }
        }
    }
}

/// The RBAC rule that allows `call`, as a ClusterRole writes it, and where it must be bound: all
/// namespaces (and cluster-scoped resources) need a ClusterRoleBinding, one namespace a
/// RoleBinding there.
pub fn rule_for(call: &Call) -> String {
    let group = call.path.strip_prefix("/apis/").and_then(|p| p.split('/').next()).unwrap_or("");
    let bound = match call.namespace {
        Some(ns) => format!("bound in namespace {ns} (RoleBinding) or cluster-wide (ClusterRoleBinding)"),
        None => "bound cluster-wide (ClusterRoleBinding)".to_string(),
    };
    format!("{{apiGroups: [\"{group}\"], resources: [\"{}\"], verbs: [\"{}\"]}} {bound}", call.resource, call.verb)
}

/// The rule that would allow what an RBAC denial names, read from the authorizer's words
/// (`User "u" cannot VERB resource "RES" in API group "G" in the namespace "NS"` or `at the
/// cluster scope`, kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go); `None` when
/// the message is not one.
pub fn rule_from_denial(message: &str) -> Option<String> {
    let rest = message.split(" cannot ").nth(1)?;
    let (verb, rest) = rest.split_once(" resource \"")?;
    let (resource, rest) = rest.split_once('"')?;
    let group = rest.split_once("in API group \"").and_then(|(_, r)| r.split_once('"')).map(|(g, _)| g).unwrap_or("");
    let bound = match rest.split_once("in the namespace \"").and_then(|(_, r)| r.split_once('"')) {
        Some((ns, _)) => format!("bound in namespace {ns} (RoleBinding) or cluster-wide (ClusterRoleBinding)"),
        None => "bound cluster-wide (ClusterRoleBinding)".to_string(),
    };
    let resource = resource.split('/').next().unwrap_or(resource);
    Some(format!("{{apiGroups: [\"{group}\"], resources: [\"{resource}\"], verbs: [\"{verb}\"]}} {bound}"))
}

/// A kube error for people: an API answer as `<code> <reason>: <message>` (never a `Status { … }`
/// dump), anything else as its chain of causes; credentials masked, and the server's text
/// escaped (a 401's message may carry escape codes).
pub fn said(e: &kube::Error) -> String {
    let text = match e {
        kube::Error::Api(s) => {
            let reason = match s.code {
                401 => "Unauthorized (the kubeconfig's credentials were rejected)",
                403 => "Forbidden",
                _ => "",
            };
            let text = status_text(s.code, &s.message);
            match (reason, text.as_str()) {
                ("", t) => format!("{} {t}", s.code),
                (r, "") => format!("{} {r}", s.code),
                (r, t) => format!("{} {r}: {t}", s.code),
            }
        }
        other => chain(other),
    };
    crate::text::for_people(&text)
}

pub fn status_text(code: u16, message: &str) -> String {
    let reason = http_reason(code);
    match (reason, message.trim()) {
        (r, "") => r.to_string(),
        ("", m) => m.to_string(),
        (r, m) => format!("{r}: {m}"),
    }
}

fn http_reason(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        404 => "Not Found",
        410 => "Gone (the list changed while it was paged; re-run)",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// An error and its sources on one line, innermost last, without repeats.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = s.source();
    }
    parts.join(": ")
}

const TOO_LARGE: &str = "a page is larger than 1 GiB";

/// A reader that fails past `left` bytes: a page's body is bounded whatever the server sends.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: std::io::Read> std::io::Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other(TOO_LARGE));
        }
        let max = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Where a list's items go as they are parsed.
pub trait Sink<T>: Send + 'static {
    fn push(&mut self, item: T);
}

impl<T: Send + 'static> Sink<T> for Vec<T> {
    fn push(&mut self, item: T) {
        Vec::push(self, item);
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ListMeta {
    #[serde(rename = "continue", default)]
    pub continue_token: Option<String>,
}

/// Parses a Kubernetes list document, calling `each` for every item as soon as it is read.
pub fn parse_list<T, F, R>(reader: R, each: &mut F) -> Result<ListMeta, serde_json::Error>
where
    T: DeserializeOwned,
    F: FnMut(T),
    R: std::io::Read,
{
    let mut de = serde_json::Deserializer::from_reader(reader);
    let meta = ListSeed { each, item: PhantomData }.deserialize(&mut de)?;
    de.end()?;
    Ok(meta)
}

struct ListSeed<'a, T, F> {
    each: &'a mut F,
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> DeserializeSeed<'de> for ListSeed<'_, T, F> {
    type Value = ListMeta;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ListMeta, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> Visitor<'de> for ListSeed<'_, T, F> {
    type Value = ListMeta;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        let mut kind: Option<String> = None;
        let mut items = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => meta = map.next_value()?,
                "items" => {
                    map.next_value_seed(ItemsSeed { each: &mut *self.each, item: PhantomData })?;
                    items = true;
                }
                "kind" => kind = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !items && kind.as_deref().is_some_and(|k| !k.ends_with("List")) {
            return Err(serde::de::Error::custom(format!("expected a list, found a {}", kind.unwrap_or_default())));
        }
        // `{}` or `{"a": …}` is no list of nothing: a cluster is never read as empty from it.
        if !items {
            return Err(serde::de::Error::custom("the list has no `items`"));
        }
        Ok(meta)
    }
}

struct ItemsSeed<'a, T, F> {
    each: &'a mut F,
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> DeserializeSeed<'de> for ItemsSeed<'_, T, F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: DeserializeOwned, F: FnMut(T)> Visitor<'de> for ItemsSeed<'_, T, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of items")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<T>()? {
            (self.each)(item);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_names_the_rule_that_would_allow_it() {
        let cluster =
            r#"nodes is forbidden: User "dev" cannot list resource "nodes" in API group "" at the cluster scope"#;
        assert_eq!(
            rule_from_denial(cluster).unwrap(),
            r#"{apiGroups: [""], resources: ["nodes"], verbs: ["list"]} bound cluster-wide (ClusterRoleBinding)"#
        );
        let ns = r#"deployments.apps is forbidden: User "dev" cannot list resource "deployments" in API group "apps" in the namespace "agent-sandbox-system""#;
        assert_eq!(
            rule_from_denial(ns).unwrap(),
            r#"{apiGroups: ["apps"], resources: ["deployments"], verbs: ["list"]} bound in namespace agent-sandbox-system (RoleBinding) or cluster-wide (ClusterRoleBinding)"#
        );
        assert_eq!(rule_from_denial("forbidden"), None);
        let call = Call::list("deployments", "apps/v1", Some("kserve"));
        assert_eq!(
            rule_for(&call),
            r#"{apiGroups: ["apps"], resources: ["deployments"], verbs: ["list"]} bound in namespace kserve (RoleBinding) or cluster-wide (ClusterRoleBinding)"#
        );
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Named {
        metadata: Meta,
    }
    #[derive(Debug, Deserialize, PartialEq)]
    struct Meta {
        name: String,
    }

    fn names(doc: &str) -> (Vec<String>, Result<ListMeta, serde_json::Error>) {
        let mut out = Vec::new();
        let meta = parse_list(doc.as_bytes(), &mut |n: Named| out.push(n.metadata.name));
        (out, meta)
    }

    #[test]
    fn items_stream_in_order_and_continue_is_read_wherever_it_appears() {
        let (n, meta) = names(
            r#"{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}],
                "metadata":{"resourceVersion":"9","continue":"tok","remainingItemCount":3}}"#,
        );
        assert_eq!(n, ["a", "b"]);
        assert_eq!(meta.unwrap().continue_token.as_deref(), Some("tok"));
    }

    #[test]
    fn empty_and_null_items() {
        let (n, meta) = names(r#"{"kind":"SecretList","metadata":{},"items":null}"#);
        assert!(n.is_empty());
        assert!(meta.unwrap().continue_token.is_none());
        let (n, _) = names(r#"{"kind":"SecretList","metadata":{},"items":[]}"#);
        assert!(n.is_empty());
    }

    #[test]
    fn a_list_without_items_or_an_item_without_a_name_is_malformed() {
        for doc in [r#"{}"#, r#"{"a":[1,2]}"#, r#"{"kind":"NodeList","metadata":{}}"#] {
            let (_, meta) = names(doc);
            assert!(meta.unwrap_err().to_string().contains("the list has no `items`"), "{doc}");
        }
        let (_, meta) = names(r#"{"kind":"NodeList","items":[{}]}"#);
        assert!(meta.unwrap_err().to_string().contains("missing field `metadata`"));
        let mut out = Vec::new();
        let meta = parse_list(
            r#"{"items":[{"metadata":{"labels":{}}}]}"#.as_bytes(),
            &mut |n: crate::gather::objects::NodeItem| out.push(n),
        );
        assert!(meta.unwrap_err().to_string().contains("missing field `name`"));
    }

    #[test]
    fn a_page_past_its_byte_limit_fails_as_too_large() {
        let mut r = Capped { inner: std::io::repeat(b' '), left: 10 };
        let mut buf = Vec::new();
        let e = std::io::Read::read_to_end(&mut r, &mut buf).unwrap_err();
        assert_eq!((buf.len(), e.to_string()), (10, TOO_LARGE.to_string()));
    }

    #[test]
    fn a_status_or_garbage_is_not_a_list() {
        let (_, meta) = names(r#"{"kind":"Status","status":"Failure","code":500}"#);
        assert!(meta.unwrap_err().to_string().contains("expected a list"));
        let (_, meta) = names(r#"{"kind":"NodeList","items":[{"metadata":{"name":"a"}}"#);
        assert!(meta.is_err());
        let (_, meta) = names(r#"{"kind":"NodeList","items":[]} trailing"#);
        assert!(meta.is_err());
    }

    #[test]
    fn kube_errors_are_a_code_a_reason_and_an_escaped_message() {
        let mut s = kube::core::Status::failure("token \u{1b}[31mexpired\u{1b}[0m\u{202e}", "Unauthorized");
        s.code = 401;
        let got = said(&kube::Error::Api(Box::new(s)));
        assert_eq!(
            got,
            "401 Unauthorized (the kubeconfig's credentials were rejected): token \\u{1b}[31mexpired\\u{1b}[0m\\u{202e}"
        );
    }

    #[test]
    fn calls_name_themselves_for_people() {
        assert_eq!(Call::list("nodes", "v1", None).to_string(), "list nodes");
        assert_eq!(Call::list("nodes", "v1", None).path, "/api/v1/nodes");
        let c = Call::list("secrets", "v1", None).with_field_selector("type=helm.sh/release.v1");
        assert_eq!(c.to_string(), "list secrets (type=helm.sh/release.v1) in all namespaces");
        let d = Call::list("deployments", "apps/v1", Some("agent-sandbox"));
        assert_eq!(d.path, "/apis/apps/v1/namespaces/agent-sandbox/deployments");
        assert_eq!(d.to_string(), "list deployments in namespace agent-sandbox");
    }
}
