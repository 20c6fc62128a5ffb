//! A `kube::Config` for one kubeconfig context, with eas's own proxy decision (`net::proxy`) and
//! trust settings rather than kube's.
//!
//! kube's loader reads `HTTPS_PROXY` only (never `HTTP_PROXY`, though the recorded and many dev
//! clusters speak plain HTTP), checks `NO_PROXY` against the proxy's own URL instead of the
//! server's, and refuses lists curl accepts (`a,b,`). So the config is assembled here from the
//! kubeconfig's parts: server, CA, TLS flags, user (exec plugins get the cluster info they ask
//! for), and the proxy chosen by curl's rules.

use base64::Engine;
use kube::config::{ExecAuthCluster, Kubeconfig};

use super::proxy::{self, ProxyEnv, ProxyError};

/// Why no client configuration could be made: bad input (exit 2). Never holds credentials.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Proxy(#[from] ProxyError),
    #[error("{0}")]
    Kubeconfig(String),
}

/// Trusted CAs to add for the API server when the kubeconfig pins none (`--ca-bundle`), as DER.
pub type ExtraRoots = Option<Vec<Vec<u8>>>;

/// Builds the client configuration for `context` of `kc`, with the proxy it goes through and the
/// setting that chose it, to name in errors.
pub fn config_for(
    kc: &Kubeconfig,
    context: &str,
    env: &ProxyEnv,
    extra_roots: ExtraRoots,
) -> Result<(kube::Config, Option<proxy::Route>), ConfigError> {
    let bad = |s: String| ConfigError::Kubeconfig(s);
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| bad(format!("context {context:?} has no cluster")))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| bad(format!("cluster {:?} is not defined", ctx.cluster)))?;
    let server = cluster
        .server
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad(format!("cluster {:?} names no server", ctx.cluster)))?;
    let url: http::Uri =
        server.parse().map_err(|_| bad(format!("server {:?} is not a URL", crate::text::mask_userinfo(&server))))?;
    let mut user = match &ctx.user {
        Some(name) => {
            kc.auth_infos.iter().find(|u| &u.name == name).and_then(|u| u.auth_info.clone()).unwrap_or_default()
        }
        None => Default::default(),
    };
    if let Some(exec) = &mut user.exec
        && exec.provide_cluster_info
    {
        exec.cluster = Some(ExecAuthCluster::try_from(&cluster).map_err(|e| bad(e.to_string()))?);
    }
    let mut config = kube::Config::new(url);
    config.default_namespace = ctx.namespace.clone().unwrap_or_else(|| "default".to_string());
    config.accept_invalid_certs = cluster.insecure_skip_tls_verify.unwrap_or(false);
    config.disable_compression = cluster.disable_compression.unwrap_or(false);
    config.tls_server_name = cluster.tls_server_name.clone();
    config.root_cert = match certificate_authority(&cluster)? {
        Some(ders) => Some(ders),
        None => extra_roots,
    };
    let route = proxy::route_for(&server, env, cluster.proxy_url.as_deref())?;
    config.proxy_url = route.as_ref().map(|r| r.uri.clone());
    config.auth_info = user;
    Ok((config, route))
}

/// The cluster's pinned CA certificates (DER), from `certificate-authority-data` or the
/// `certificate-authority` file.
fn certificate_authority(cluster: &kube::config::Cluster) -> Result<Option<Vec<Vec<u8>>>, ConfigError> {
    let pem_bytes = if let Some(data) = cluster.certificate_authority_data.as_deref().filter(|d| !d.is_empty()) {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| ConfigError::Kubeconfig(format!("certificate-authority-data is not base64: {e}")))?
    } else if let Some(path) = cluster.certificate_authority.as_deref().filter(|p| !p.is_empty()) {
        crate::bounded::read(std::path::Path::new(path), crate::bounded::Kind::CaBundle)
            .map_err(|e| ConfigError::Kubeconfig(format!("certificate-authority: {e}")))?
    } else {
        return Ok(None);
    };
    let certs: Vec<Vec<u8>> = pem::parse_many(&pem_bytes)
        .map_err(|e| ConfigError::Kubeconfig(format!("certificate authority is not PEM: {e}")))?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| p.into_contents())
        .collect();
    if certs.is_empty() {
        return Err(ConfigError::Kubeconfig("certificate authority holds no certificate".into()));
    }
    Ok(Some(certs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(server: &str, extra_cluster: &str) -> Kubeconfig {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u, namespace: ns}}\n\
             clusters:\n- name: k\n  cluster:\n    server: {server}\n{extra_cluster}users:\n- name: u\n  user: {{token: T}}\n"
        );
        Kubeconfig::from_yaml(&yaml).unwrap()
    }

    #[test]
    fn the_proxy_follows_no_proxy_for_the_server_not_for_the_proxy() {
        let kc = kubeconfig("https://api.corp:6443", "");
        let env = |no: &str| ProxyEnv {
            https: Some("http://u:p@proxy.corp:3128".into()),
            no_proxy: Some(no.into()),
            ..Default::default()
        };
        let c = config_for(&kc, "c", &env("other.example,"), None).unwrap().0;
        assert_eq!(c.proxy_url.unwrap().to_string(), "http://u:p@proxy.corp:3128/");
        // kube's own loader would match "proxy.corp" against the proxy URL; the server decides here.
        assert!(config_for(&kc, "c", &env("api.corp"), None).unwrap().0.proxy_url.is_none());
        let c = config_for(&kc, "c", &env("proxy.corp"), None).unwrap().0;
        assert!(c.proxy_url.is_some());
        assert_eq!(c.default_namespace, "ns");
    }

    #[test]
    fn the_kubeconfig_proxy_url_wins_and_plain_http_uses_http_proxy() {
        let kc = kubeconfig("http://127.0.0.1:8080", "    proxy-url: http://kc-proxy:1\n");
        let env = ProxyEnv { http: Some("http://env:2".into()), no_proxy: Some("*".into()), ..Default::default() };
        assert_eq!(config_for(&kc, "c", &env, None).unwrap().0.proxy_url.unwrap().host(), Some("kc-proxy"));
        let kc = kubeconfig("http://127.0.0.1:8080", "");
        assert_eq!(config_for(&kc, "c", &env, None).unwrap().0.proxy_url, None);
        let env = ProxyEnv { http: Some("http://env:2".into()), ..Default::default() };
        assert_eq!(config_for(&kc, "c", &env, None).unwrap().0.proxy_url.unwrap().host(), Some("env"));
    }

    #[test]
    fn a_pinned_ca_wins_over_the_extra_roots() {
        let kc = kubeconfig("https://h:6443", "");
        let c = config_for(&kc, "c", &ProxyEnv::default(), Some(vec![vec![1, 2]])).unwrap().0;
        assert_eq!(c.root_cert, Some(vec![vec![1, 2]]));
        let pem = "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n";
        let data = base64::engine::general_purpose::STANDARD.encode(pem);
        let kc = kubeconfig("https://h:6443", &format!("    certificate-authority-data: {data}\n"));
        let c = config_for(&kc, "c", &ProxyEnv::default(), Some(vec![vec![9]])).unwrap().0;
        assert_eq!(c.root_cert, Some(vec![vec![1, 2, 3]]));
    }
}
