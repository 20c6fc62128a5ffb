//! Typed reads and waits on the objects verification and `eas status` look at: lists (in one
//! namespace, in all, or of a kind known only at run time), single objects, a pod's log, and
//! waits for an object's condition (kube-runtime's `watch_object`, a watch of that one name, watched
//! again when it breaks: [`super::until_met`]).
//! Each read is bounded and fails as an [`ApiError`] naming its call; a wait is bounded by its
//! caller (the runner's window, or its own deadline).

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams, LogParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::{ApiError, Cluster, call};

/// Where a read looks: one namespace, or all of them.
#[derive(Debug, Clone, Copy)]
pub enum Within<'a> {
    All,
    Namespace(&'a str),
}

fn namespaced<K>(client: &Client, within: Within<'_>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match within {
        Within::All => Api::all(client.clone()),
        Within::Namespace(ns) => Api::namespaced(client.clone(), ns),
    }
}

fn dynamic(client: &Client, within: Within<'_>, ar: &ApiResource) -> Api<DynamicObject> {
    match within {
        Within::All => Api::all_with(client.clone(), ar),
        Within::Namespace(ns) => Api::namespaced_with(client.clone(), ns, ar),
    }
}

impl Cluster {
    /// Every object of a namespaced kind `within`, matching `lp`; `what` names the call.
    pub async fn list<K>(
        &self,
        within: Within<'_>,
        lp: &ListParams,
        what: &str,
        t: Duration,
    ) -> Result<Vec<K>, ApiError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let client = &self.client;
        Ok(call(what, t, namespaced::<K>(client, within).list(lp)).await?.items)
    }

    /// Every object of a kind known at run time `within`; `None` when the API server does not serve
    /// the kind (404: its CRD is absent).
    pub async fn list_dynamic(
        &self,
        within: Within<'_>,
        ar: &ApiResource,
        t: Duration,
    ) -> Result<Option<Vec<DynamicObject>>, ApiError> {
        let client = &self.client;
        let what = format!("list {}", ar.plural);
        match tokio::time::timeout(t, dynamic(client, within, ar).list(&ListParams::default())).await {
            Ok(Ok(l)) => Ok(Some(l.items)),
            Ok(Err(kube::Error::Api(e))) if e.code == 404 => Ok(None),
            Ok(Err(e)) => Err(ApiError::Call { call: what, cause: super::said(&e) }),
            Err(_) => Err(ApiError::NoAnswer { call: what, secs: t.as_secs() }),
        }
    }

    /// One namespaced object; absent is `None`.
    pub async fn get<K>(&self, ns: &str, name: &str, kind: &str, t: Duration) -> Result<Option<K>, ApiError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let client = &self.client;
        super::get(Api::<K>::namespaced(client.clone(), ns), kind, ns, name, t).await
    }

    /// One cluster-scoped object (a namespace); absent is `None`.
    pub async fn get_cluster<K>(&self, name: &str, kind: &str, t: Duration) -> Result<Option<K>, ApiError>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let client = &self.client;
        super::get(Api::<K>::all(client.clone()), kind, "", name, t).await
    }

    /// One object of a kind known at run time; absent is `None`.
    pub async fn get_dynamic(
        &self,
        ns: &str,
        ar: &ApiResource,
        name: &str,
        kind: &str,
        t: Duration,
    ) -> Result<Option<DynamicObject>, ApiError> {
        let client = &self.client;
        super::get(dynamic(client, Within::Namespace(ns), ar), kind, ns, name, t).await
    }

    /// A pod's log, as `lp` asks for it (its tail, the previous container's).
    pub async fn log(&self, ns: &str, pod: &str, lp: &LogParams, what: &str, t: Duration) -> Result<String, ApiError> {
        let client = &self.client;
        call(what, t, Api::<Pod>::namespaced(client.clone(), ns).logs(pod, lp)).await
    }

    /// Resolves once the namespaced object `name` meets `cond` (it may be absent: `None`), or with
    /// the refusal that ends its watch ([`super::until_met`]: a quiet or broken watch is watched
    /// again); the caller bounds it.
    pub async fn until<K>(
        &self,
        ns: &str,
        name: &str,
        cond: impl kube::runtime::wait::Condition<K>,
    ) -> Result<(), ApiError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug + Send + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let client = &self.client;
        super::until_met(Api::<K>::namespaced(client.clone(), ns), name, &format!("watch {ns}/{name}"), cond).await
    }

    /// [`until`], for a cluster-scoped object (a node).
    pub async fn until_cluster<K>(
        &self,
        name: &str,
        cond: impl kube::runtime::wait::Condition<K>,
    ) -> Result<(), ApiError>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let client = &self.client;
        super::until_met(Api::<K>::all(client.clone()), name, &format!("watch {name}"), cond).await
    }

    /// [`until`], for an object of a kind known at run time.
    pub async fn until_dynamic(
        &self,
        ns: &str,
        ar: &ApiResource,
        name: &str,
        cond: impl kube::runtime::wait::Condition<DynamicObject>,
    ) -> Result<(), ApiError> {
        let client = &self.client;
        let what = format!("watch {} {ns}/{name}", ar.kind);
        super::until_met(dynamic(client, Within::Namespace(ns), ar), name, &what, cond).await
    }
}
