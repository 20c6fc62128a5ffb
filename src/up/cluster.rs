//! The few cluster reads and deletions `eas up` and `eas down` make beyond gathering facts:
//! the cluster's identity, the ledger snapshot (namespaces, Helm releases, CRDs), and the
//! deletion of objects the ledger says a run created. Helm releases are listed from their
//! storage Secrets' metadata only: no Secret data is read.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};

use crate::state::ledger::{Release, Snapshot};

const HELM_SECRET_TYPE: &str = "type=helm.sh/release.v1";

async fn timed<T>(what: &str, t: Duration, fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, String> {
    match tokio::time::timeout(t, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {}", said(&e))),
        Err(_) => Err(format!("{what}: no answer within {}s", t.as_secs())),
    }
}

/// A kube error for people: an API answer as its code, reason and message (never a `Status { … }`
/// dump), anything else as its chain of causes, credentials masked.
pub fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let reason = match s.code {
                401 => "Unauthorized (the kubeconfig's credentials were rejected)",
                403 => "Forbidden",
                _ => "",
            };
            let text = crate::gather::kube::status_text(s.code, &s.message);
            match (reason, text.as_str()) {
                ("", t) => format!("{} {t}", s.code),
                (r, "") => format!("{} {r}", s.code),
                (r, t) => format!("{} {r}: {t}", s.code),
            }
        }
        other => crate::text::mask_userinfo(&crate::gather::kube::chain(other)),
    }
}

/// The `kube-system` namespace UID: the key of this cluster's state directory.
pub async fn cluster_key(client: &Client, t: Duration) -> Result<String, String> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = timed("get namespace kube-system", t, api.get("kube-system")).await?;
    ns.metadata.uid.ok_or_else(|| "namespace kube-system has no uid".to_string())
}

pub async fn snapshot(client: &Client, t: Duration) -> Result<Snapshot, String> {
    let ns: Api<Namespace> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let helm = ListParams::default().fields(HELM_SECRET_TYPE);
    let all = ListParams::default();
    let (n, s, c) = tokio::join!(
        timed("list namespaces", t, ns.list_metadata(&all)),
        timed("list Helm release secrets", t, secrets.list_metadata(&helm)),
        timed("list CRDs", t, crds.list_metadata(&all)),
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
    Ok(snap)
}

pub async fn delete_namespace(client: &Client, name: &str, t: Duration) -> Result<(), String> {
    let api: Api<Namespace> = Api::all(client.clone());
    timed(&format!("delete namespace {name}"), t, api.delete(name, &DeleteParams::background())).await.map(|_| ())
}

pub async fn delete_crd(client: &Client, name: &str, t: Duration) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    timed(&format!("delete CRD {name}"), t, api.delete(name, &DeleteParams::background())).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

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
