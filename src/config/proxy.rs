//! The installer's proxy settings (issue 21 item 5): with `HTTPS_PROXY`/`HTTP_PROXY` in eas's
//! environment, what the installer must reach directly, computed from the facts, and how the
//! proxy reaches the installer without its credentials being written anywhere.
//!
//! Why each part:
//! - EAS's `playbooks/site.yaml` sets the play's environment from the Ansible variables
//!   `http_proxy`/`https_proxy`/`no_proxy` (each `| default('')`), so the bastion's own
//!   environment is replaced for every task unless those variables are given; and its preflight
//!   fails when a proxy is set with an empty `no_proxy`. So all three are extra vars.
//! - The proxy URLs are written as `{{ lookup('env', 'HTTPS_PROXY') }}`: Ansible fills them from
//!   the bastion's environment at run time, so the overrides file carries no userinfo.
//! - `no_proxy` lists what must never go through the proxy: the user's `NO_PROXY`, `localhost`,
//!   `127.0.0.1`, the pod and service CIDRs, every node's InternalIP, `.svc`, the cluster
//!   domain, and the API server's host (EI issue #65: in-cluster traffic sent to the proxy).
//! - EI's model-manager takes `network.*` from its catalog, else the environment
//!   (`model_manager/lib/config.sh` `load_config`), and the play's environment carries the
//!   proxy, so only `network.no_proxy` is written into the catalog (for a by-hand
//!   `model-manager deploy` too); the proxy URLs never are.
//!
//! Pure: facts and the proxy variables in, the decision's extra keys and lines out.

use super::rules::{Choice, Decision, Value};
use crate::facts::Facts;
use crate::net::proxy::ProxyEnv;

/// The Ansible value that fills a proxy variable from the bastion's environment.
pub fn env_lookup(name: &str) -> String {
    format!("{{{{ lookup('env', '{name}') }}}}")
}

/// What the installer must reach without the proxy, and why each entry was added.
#[derive(Debug, Clone, PartialEq)]
pub struct NoProxy {
    /// The whole list, comma-separated: the user's entries first, then the added ones.
    pub list: String,
    /// `(entry, why)` for each entry eas added (one the user's list already covers is not).
    pub added: Vec<(String, &'static str)>,
}

/// The k3s default cluster domain (`--cluster-domain`), as EAS's `kubernetes_cluster_name`
/// default is too.
const CLUSTER_DOMAIN: &str = "cluster.local";

/// `no_proxy` for an install on the cluster of `facts`, whose pod and service CIDRs are `cidrs`
/// (comma lists, dual-stack included), reached at `api_hosts`. `None` when no proxy is set.
pub fn no_proxy(facts: &Facts, env: &ProxyEnv, cidrs: &[&str], api_hosts: &[String]) -> Option<NoProxy> {
    if env.https.is_none() && env.http.is_none() {
        return None;
    }
    let mut wanted: Vec<(String, &'static str)> =
        vec![("localhost".into(), "this host's loopback"), ("127.0.0.1".into(), "this host's loopback")];
    for c in cidrs.iter().flat_map(|c| c.split(',')).map(str::trim).filter(|c| !c.is_empty()) {
        wanted.push((c.to_string(), "a pod or service CIDR: in-cluster traffic"));
    }
    for n in &facts.nodes {
        for ip in &n.internal_ips {
            wanted.push((ip.clone(), "a node's InternalIP"));
        }
    }
    let domain = cluster_domain(facts);
    wanted.push((".svc".into(), "in-cluster service names"));
    wanted.push((format!(".{domain}"), "the cluster domain"));
    for h in api_hosts.iter().filter(|h| !h.is_empty()) {
        wanted.push((h.trim_start_matches('[').trim_end_matches(']').to_string(), "the API server"));
    }
    let mut list: Vec<String> = env
        .no_proxy
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect();
    let mut added = Vec::new();
    for (entry, why) in wanted {
        let joined = list.join(",");
        let covered = list.iter().any(|e| e.eq_ignore_ascii_case(&entry))
            || (!entry.contains('/') && crate::net::proxy::no_proxy_matches(&joined, entry.trim_start_matches('.')));
        if !covered {
            list.push(entry.clone());
            added.push((entry, why));
        }
    }
    Some(NoProxy { list: list.join(","), added })
}

/// The cluster domain: k3s's `--cluster-domain` on any node, else `cluster.local`.
fn cluster_domain(facts: &Facts) -> String {
    facts
        .nodes
        .iter()
        .filter_map(|n| n.annotations.get(super::rules::NODE_ARGS))
        .filter_map(|a| super::node_args::parse("", a).ok())
        .find_map(|args| {
            args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--cluster-domain") {
                Some(v) if v.starts_with('=') => Some(v[1..].trim_matches('"').to_string()),
                Some("") => args.get(i + 1).map(|v| v.trim_matches('"').to_string()),
                _ => None,
            })
        })
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| CLUSTER_DOMAIN.to_string())
}

/// Adds the proxy keys to `d` when `env` names a proxy: `http_proxy`/`https_proxy` as
/// environment lookups (only for the variables set), `no_proxy` computed, `network.no_proxy`
/// for the catalog, and a decision line for each. `api_server` is the URL this host reaches the
/// cluster at; on a k3d cluster the installer reaches it at its server container too.
pub fn apply(d: &mut Decision, facts: &Facts, env: &ProxyEnv, api_server: Option<&str>) {
    let cidr = |key: &str| {
        d.overrides.iter().find(|(k, _)| *k == key).and_then(|(_, v)| match v {
            Value::Str(s) => Some(s.clone()),
            _ => None,
        })
    };
    let cidrs: Vec<String> =
        ["kubernetes_cluster_cidr", "kubernetes_service_cidr"].iter().filter_map(|k| cidr(k)).collect();
    let cidrs: Vec<&str> = cidrs.iter().map(String::as_str).collect();
    let mut hosts: Vec<String> = api_server.map(|s| crate::net::proxy::scheme_and_host(s).1).into_iter().collect();
    if let Some(k3d) = &facts.cluster.k3d_cluster {
        hosts.push(crate::net::proxy::scheme_and_host(&crate::kubeconfig::k3d_server(k3d)).1);
    }
    let Some(np) = no_proxy(facts, env, &cidrs, &hosts) else { return };
    let set: Vec<&str> = [("HTTP_PROXY", env.http.is_some()), ("HTTPS_PROXY", env.https.is_some())]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
    for name in &set {
        let key = if *name == "HTTPS_PROXY" { "https_proxy" } else { "http_proxy" };
        d.overrides.push((key, Value::Str(env_lookup(name))));
    }
    d.choices.push(Choice {
        fact: format!("{} set in eas's environment", set.join(" and ")),
        choice: format!(
            "{}: filled from the bastion's environment at run time (the proxy URL and its credentials are written nowhere)",
            set.iter().map(|n| format!("{}: {:?}", n.to_ascii_lowercase(), env_lookup(n))).collect::<Vec<_>>().join(", ")
        ),
        source: "eas-site-proxy-env".into(),
    });
    let why: Vec<String> = np.added.iter().map(|(e, w)| format!("{e} ({w})")).collect();
    let added = if why.is_empty() { "nothing: NO_PROXY already covers it all".to_string() } else { why.join(", ") };
    d.choices.push(Choice {
        fact: "a proxy for the install: in-cluster traffic, the nodes and the API server must bypass it".into(),
        choice: format!("no_proxy: {:?}; added {added}", np.list),
        source: "eas-preflight-no-proxy".into(),
    });
    d.overrides.push(("no_proxy", Value::Str(np.list.clone())));
    d.choices.push(Choice {
        fact: "model-manager reads network.* from its catalog, else the environment".into(),
        choice: "models.yaml network.no_proxy: the same list (the proxy URLs come from the play's environment)".into(),
        source: "ei-model-manager-network".into(),
    });
    d.network_no_proxy = Some(np.list);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/clusters/xeon-amx/expected/facts.json");
        let mut f = Facts::read(std::path::Path::new(path)).expect("the recorded facts");
        f.nodes.truncate(1);
        f.nodes[0].internal_ips = vec!["192.168.7.20".into()];
        f
    }

    fn env(https: Option<&str>, no_proxy: Option<&str>) -> ProxyEnv {
        ProxyEnv { https: https.map(String::from), no_proxy: no_proxy.map(String::from), ..Default::default() }
    }

    #[test]
    fn without_a_proxy_nothing_is_computed() {
        assert_eq!(no_proxy(&facts(), &env(None, Some("corp")), &["10.42.0.0/16"], &[]), None);
    }

    #[test]
    fn the_list_holds_the_users_entries_then_what_the_cluster_needs() {
        let np = no_proxy(
            &facts(),
            &env(Some("http://u:p@proxy:3128"), Some("corp.example, 10.0.0.0/8")),
            &["10.42.0.0/16", "10.43.0.0/16,fd00:43::/112"],
            &["api.corp.example".to_string()],
        )
        .unwrap();
        assert_eq!(
            np.list,
            "corp.example,10.0.0.0/8,localhost,127.0.0.1,10.42.0.0/16,10.43.0.0/16,fd00:43::/112,192.168.7.20,.svc,.cluster.local"
        );
        // The API server is under corp.example, which the user's list covers: not added again.
        assert!(!np.added.iter().any(|(e, _)| e == "api.corp.example"), "{:?}", np.added);
        assert!(!np.list.contains("u:p"), "no credentials in no_proxy");
    }

    #[test]
    fn an_ip_the_users_cidr_covers_is_not_repeated_and_the_api_host_is_added() {
        let np = no_proxy(&facts(), &env(Some("proxy:3128"), Some("192.168.0.0/16")), &[], &["127.0.0.2".to_string()])
            .unwrap();
        assert!(!np.added.iter().any(|(e, _)| e == "192.168.7.20"), "{:?}", np.added);
        assert!(np.list.ends_with(",127.0.0.2"), "{}", np.list);
    }

    #[test]
    fn the_cluster_domain_follows_k3s_node_args() {
        let mut f = facts();
        f.nodes[0]
            .annotations
            .insert(super::super::rules::NODE_ARGS.into(), r#"["server","--cluster-domain","corp.k8s"]"#.into());
        let np = no_proxy(&f, &env(Some("p:1"), None), &[], &[]).unwrap();
        assert!(np.list.contains(".corp.k8s") && !np.list.contains(".cluster.local"), "{}", np.list);
    }

    fn decision() -> Decision {
        Decision {
            layer: crate::settings::Layer::Inference,
            overrides: vec![("kubernetes_cluster_cidr", Value::Str("10.42.0.0/16".into()))],
            require_amx: false,
            model_edits: vec![],
            manifest: vec![],
            choices: vec![],
            warnings: vec![],
            network_no_proxy: None,
        }
    }

    #[test]
    fn apply_writes_lookups_for_the_variables_set_and_the_list_twice() {
        let mut d = decision();
        apply(&mut d, &facts(), &env(None, None), Some("https://10.0.0.1:6443"));
        assert_eq!(
            (d.overrides.len(), d.choices.len(), d.network_no_proxy.clone()),
            (1, 0, None),
            "no proxy: no change"
        );
        apply(&mut d, &facts(), &env(Some("http://u:s3cret@proxy:3128"), None), Some("https://10.0.0.1:6443"));
        let keys: Vec<&str> = d.overrides.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["kubernetes_cluster_cidr", "https_proxy", "no_proxy"]);
        assert_eq!(d.overrides[1].1, Value::Str("{{ lookup('env', 'HTTPS_PROXY') }}".into()));
        let list = "localhost,127.0.0.1,10.42.0.0/16,192.168.7.20,.svc,.cluster.local,10.0.0.1";
        assert_eq!(d.overrides[2].1, Value::Str(list.into()));
        assert_eq!(d.network_no_proxy.as_deref(), Some(list));
        let text = format!("{d:?}");
        assert!(!text.contains("s3cret"), "the credentials are nowhere in the decision");
        for c in &d.choices {
            assert!(crate::sources::table().contains_key(&c.source), "{}", c.source);
        }
    }
}
