//! How the bastion reaches the cluster's API server, decided from the user's kubeconfig.
//!
//! - A server on the host's loopback (`127.0.0.1`, `localhost`, `0.0.0.0`, `::1`), which is how
//!   k3d publishes its API: the container joins the host network and uses the file as is.
//! - Any other server of a k3d cluster (context `k3d-<cluster>`): the container joins the
//!   cluster's Docker network `k3d-<cluster>` and talks to the server container by name, in a
//!   copy of the kubeconfig. k3s puts the node's hostname in its serving certificate.
//! - Anything else: the default network, file as is.
//!
//! The user's file is only read. A copy is also made when `--context` names a context other
//! than the file's current one, since the tools in the bastion follow `current-context`. A copy
//! holds the selected context, its cluster and its user only ([`only_context`]): a merged
//! `KUBECONFIG`'s other clusters and their credentials never reach the container.

use crate::kubeconfig::k3d_server;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("kubeconfig {path}: {detail}")]
    Invalid { path: String, detail: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Host,
    K3dNetwork { network: String, server: String },
    Default,
}

impl Route {
    /// The Docker network mode for the container, if not the default.
    pub fn network_mode(&self) -> Option<&str> {
        match self {
            Route::Host => Some("host"),
            Route::K3dNetwork { network, .. } => Some(network),
            Route::Default => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub context: String,
    pub server: String,
    pub route: Route,
    /// The kubeconfig to mount instead of the user's file (JSON, which kubeconfig readers accept).
    pub copy: Option<Value>,
}

pub fn plan(path: &str, text: &str, context: Option<&str>) -> Result<Plan, KubeconfigError> {
    let bad = |detail: String| KubeconfigError::Invalid { path: path.to_string(), detail };
    let doc: Value = serde_saphyr::from_str(text)
        .map_err(|e| bad(format!("not YAML: {}", crate::kubeconfig::yaml_cause(&e, text))))?;
    let current = doc.get("current-context").and_then(Value::as_str);
    let ctx_name = context.or(current).ok_or_else(|| bad("no current-context and no --context".into()))?;
    let ctx = named(&doc, "contexts", ctx_name).ok_or_else(|| bad(format!("no context named {ctx_name:?}")))?;
    let cluster_name = ctx
        .pointer("/context/cluster")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("context {ctx_name:?} names no cluster")))?;
    let server = named(&doc, "clusters", cluster_name)
        .and_then(|c| c.pointer("/cluster/server"))
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("cluster {cluster_name:?} has no server")))?
        .to_string();
    let host = server_host(&server).ok_or_else(|| bad(format!("server {server:?} is not an http(s) URL")))?;

    let route = if matches!(host.as_str(), "127.0.0.1" | "localhost" | "0.0.0.0" | "::1") {
        Route::Host
    } else if let Some(cluster) = ctx_name.strip_prefix("k3d-").filter(|c| !c.is_empty()) {
        Route::K3dNetwork { network: format!("k3d-{cluster}"), server: k3d_server(cluster) }
    } else {
        Route::Default
    };

    let needs_copy = matches!(route, Route::K3dNetwork { .. }) || current != Some(ctx_name);
    let copy = needs_copy.then(|| {
        let mut copy = only_context(&doc, ctx_name);
        if let Route::K3dNetwork { server, .. } = &route
            && let Some(clusters) = copy.get_mut("clusters").and_then(Value::as_array_mut)
        {
            for c in clusters.iter_mut().filter(|c| c.get("name").and_then(Value::as_str) == Some(cluster_name)) {
                c["cluster"]["server"] = Value::String(server.clone());
            }
        }
        copy
    });
    Ok(Plan { context: ctx_name.to_string(), server, route, copy })
}

/// `doc` reduced to `ctx_name`: that context (made current), the cluster it names and the user
/// it names, with the document's `apiVersion`, `kind` and `preferences`; nothing else.
pub fn only_context(doc: &Value, ctx_name: &str) -> Value {
    let ctx = named(doc, "contexts", ctx_name).cloned();
    let of = |key: &str| ctx.as_ref().and_then(|c| c.pointer(&format!("/context/{key}"))).and_then(Value::as_str);
    let one = |list: &str, name: Option<&str>| {
        Value::Array(name.and_then(|n| named(doc, list, n)).cloned().into_iter().collect())
    };
    let mut copy = serde_json::Map::new();
    for key in ["apiVersion", "kind", "preferences"] {
        if let Some(v) = doc.get(key) {
            copy.insert(key.into(), v.clone());
        }
    }
    copy.insert("current-context".into(), Value::String(ctx_name.to_string()));
    copy.insert("contexts".into(), Value::Array(ctx.clone().into_iter().collect()));
    copy.insert("clusters".into(), one("clusters", of("cluster")));
    copy.insert("users".into(), one("users", of("user")));
    Value::Object(copy)
}

fn named<'a>(doc: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    doc.get(list)?.as_array()?.iter().find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

/// The host of an `http(s)://host[:port][/path]` URL, without IPv6 brackets.
fn server_host(server: &str) -> Option<String> {
    let rest = server.strip_prefix("https://").or_else(|| server.strip_prefix("http://"))?;
    let authority = rest.split('/').next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host =
        if let Some(v6) = authority.strip_prefix('[') { v6.split_once(']')?.0 } else { authority.split(':').next()? };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(current: &str, server: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: {current}\nclusters:\n\
             - name: k3d-gpu\n  cluster:\n    certificate-authority-data: Q0E=\n    server: {server}\n\
             - name: other\n  cluster:\n    server: https://10.0.0.9:6443\n\
             contexts:\n- name: k3d-gpu\n  context:\n    cluster: k3d-gpu\n    user: admin@k3d-gpu\n\
             - name: prod\n  context:\n    cluster: other\n    user: admin@k3d-gpu\n\
             users:\n- name: admin@k3d-gpu\n  user:\n    token: s3cret\n"
        )
    }

    #[test]
    fn loopback_servers_use_the_host_network_and_the_file_as_is() {
        for server in ["https://0.0.0.0:6550", "https://127.0.0.1:6443", "https://localhost:6443", "https://[::1]:6443"]
        {
            let p = plan("k", &kubeconfig("k3d-gpu", server), None).unwrap();
            assert_eq!((p.route.clone(), p.copy.is_none()), (Route::Host, true), "{server}");
            assert_eq!(p.route.network_mode(), Some("host"));
        }
    }

    #[test]
    fn a_k3d_server_elsewhere_goes_through_the_k3d_network_in_a_copy() {
        let text = kubeconfig("k3d-gpu", "https://192.168.1.20:6550");
        let p = plan("k", &text, None).unwrap();
        assert_eq!(
            p.route,
            Route::K3dNetwork { network: "k3d-gpu".into(), server: "https://k3d-gpu-server-0:6443".into() }
        );
        let copy = p.copy.unwrap();
        assert_eq!(copy.pointer("/clusters/0/cluster/server").unwrap(), "https://k3d-gpu-server-0:6443");
        // The selected context's own survive (the CA, the credentials); the other cluster and
        // the other context do not (issue 30 item 6).
        assert_eq!(copy.pointer("/clusters/0/cluster/certificate-authority-data").unwrap(), "Q0E=");
        assert_eq!(copy.pointer("/users/0/user/token").unwrap(), "s3cret");
        assert_eq!(copy["clusters"].as_array().unwrap().len(), 1, "{copy}");
        assert_eq!(copy["contexts"].as_array().unwrap().len(), 1, "{copy}");
    }

    /// A merged KUBECONFIG's copy carried every user of every cluster into the bastion.
    #[test]
    fn a_copy_holds_the_selected_context_its_cluster_and_its_user_only() {
        let text =
            kubeconfig("k3d-gpu", "https://0.0.0.0:6550") + "- name: someone-else\n  user:\n    token: OTHERSENTINEL\n";
        let doc: Value = serde_saphyr::from_str(&text).unwrap();
        let copy = only_context(&doc, "prod");
        let names = |list: &str| -> Vec<&str> {
            copy[list].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect()
        };
        assert_eq!(
            (names("contexts"), names("clusters"), names("users")),
            (vec!["prod"], vec!["other"], vec!["admin@k3d-gpu"])
        );
        assert_eq!((copy["current-context"].as_str(), copy["kind"].as_str()), (Some("prod"), Some("Config")));
        assert!(!copy.to_string().contains("OTHERSENTINEL") && !copy.to_string().contains("Q0E="), "{copy}");
    }

    #[test]
    fn another_context_is_made_current_in_a_copy() {
        let text = kubeconfig("k3d-gpu", "https://0.0.0.0:6550");
        let p = plan("k", &text, Some("prod")).unwrap();
        assert_eq!((p.route.clone(), p.server.as_str()), (Route::Default, "https://10.0.0.9:6443"));
        assert_eq!(p.copy.unwrap()["current-context"], "prod");
        assert!(plan("k", &text, Some("k3d-gpu")).unwrap().copy.is_none());
    }

    #[test]
    fn broken_kubeconfigs_say_what_is_missing() {
        let text = kubeconfig("k3d-gpu", "https://0.0.0.0:6550");
        for (t, ctx, why) in [
            (text.as_str(), Some("nope"), "no context named \"nope\""),
            ("apiVersion: v1\n", None, "no current-context"),
            (": : :\n  - [", None, "not YAML"),
        ] {
            let e = plan("/home/u/.kube/config", t, ctx).unwrap_err().to_string();
            assert!(e.starts_with("kubeconfig /home/u/.kube/config: ") && e.contains(why), "{e}");
        }
        let e = plan("k", &kubeconfig("k3d-gpu", "unix:///x"), None).unwrap_err().to_string();
        assert!(e.contains("is not an http(s) URL"), "{e}");
    }

    #[test]
    fn a_yaml_error_names_its_place_and_never_quotes_the_file() {
        let e = plan("k", "users:\n- user:\n    token: BASTIONSENTINEL: x\n", None).unwrap_err().to_string();
        assert!(e.contains("not YAML: line 3, column"), "{e}");
        assert!(!e.contains("BASTIONSENTINEL"), "{e}");
    }
}
