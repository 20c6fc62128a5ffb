//! Which proxy, if any, a connection to a URL goes through: curl's rules, as a pure decision.
//!
//! - `https://` URLs use `https_proxy`, then `HTTPS_PROXY`; `http://` URLs use `http_proxy`, then
//!   `HTTP_PROXY`; either falls back to `all_proxy`/`ALL_PROXY`. A value without a scheme is an
//!   `http://` proxy, as in curl.
//! - `no_proxy`/`NO_PROXY` (lowercase first) is a comma- or space-separated list: `*` alone
//!   matches every host; a host name matches itself and its subdomains, with or without a leading
//!   dot (`.corp.example` and `corp.example` both match `api.corp.example`); an IP address
//!   matches itself; a CIDR (`10.0.0.0/8`, `fd00::/8`) matches the addresses inside it. Case is
//!   ignored; ports in entries are ignored, as curl does.
//! - A kubeconfig cluster's `proxy-url` wins over the environment for that cluster, as in kubectl.
//!
//! Proxy URLs are only ever shown with their credentials masked.

use std::net::IpAddr;

use ipnet::IpNet;

/// The proxy variables of one process environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyEnv {
    pub https: Option<String>,
    pub http: Option<String>,
    pub all: Option<String>,
    pub no_proxy: Option<String>,
}

impl ProxyEnv {
    /// Reads the variables through `get` (lowercase first, as curl does); empty values count as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> ProxyEnv {
        let pick = |lower: &str, upper: &str| {
            get(lower).filter(|v| !v.trim().is_empty()).or_else(|| get(upper)).filter(|v| !v.trim().is_empty())
        };
        ProxyEnv {
            https: pick("https_proxy", "HTTPS_PROXY"),
            http: pick("http_proxy", "HTTP_PROXY"),
            all: pick("all_proxy", "ALL_PROXY"),
            no_proxy: pick("no_proxy", "NO_PROXY"),
        }
    }

    /// The `NO_PROXY` value for a process that must reach `hosts` directly: the current list with
    /// the hosts that it does not already cover appended.
    pub fn no_proxy_with(&self, hosts: &[&str]) -> String {
        let mut entries: Vec<String> = self.no_proxy.iter().flat_map(|v| split_list(v)).map(str::to_string).collect();
        for h in hosts {
            let h = strip_brackets(h);
            if !h.is_empty() && !no_proxy_matches(&entries.join(","), h) {
                entries.push(h.to_string());
            }
        }
        entries.join(",")
    }
}

/// The proxy variables a child process (the installer in the bastion) gets: the ones set in
/// `get`, as they are; when any proxy is set, the effective `https`/`http` proxy (curl's pick,
/// lowercase first) under both names, since the installer's extra vars read
/// `lookup('env', 'HTTPS_PROXY')` and `lookup('env', 'HTTP_PROXY')` (`config::proxy`); and when
/// the child talks to `api_server`, both `NO_PROXY` and `no_proxy` extended to cover the API
/// server's host, so the installer reaches it directly, as eas itself does when `NO_PROXY` names it.
pub fn child_env(get: &dyn Fn(&str) -> Option<String>, api_server: Option<&str>) -> Vec<(String, String)> {
    const NAMES: [&str; 8] =
        ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"];
    let mut out: Vec<(String, String)> =
        NAMES.iter().filter_map(|n| get(n).filter(|v| !v.is_empty()).map(|v| (n.to_string(), v))).collect();
    let env = ProxyEnv::from_lookup(|k| get(k));
    for (value, names) in [(&env.https, ["HTTPS_PROXY", "https_proxy"]), (&env.http, ["HTTP_PROXY", "http_proxy"])] {
        if let Some(v) = value {
            out.retain(|(k, _)| !names.contains(&k.as_str()));
            out.extend(names.iter().map(|n| (n.to_string(), v.clone())));
        }
    }
    let proxied = env.https.is_some() || env.http.is_some() || env.all.is_some();
    if let (true, Some(server)) = (proxied, api_server) {
        let (_, host) = scheme_and_host(server);
        let list = env.no_proxy_with(&[host.as_str()]);
        out.retain(|(k, _)| k != "NO_PROXY" && k != "no_proxy");
        out.push(("NO_PROXY".into(), list.clone()));
        out.push(("no_proxy".into(), list));
    }
    out
}

/// A proxy setting that cannot be used: bad input (exit 2). The message never holds credentials.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name} is not a usable proxy URL ({shown}): {why}")]
pub struct ProxyError {
    pub source_name: String,
    pub shown: String,
    pub why: &'static str,
}

impl ProxyError {
    pub fn hint(&self) -> String {
        format!("set {} to http://[user:password@]host:port, or unset it", self.source_name)
    }
}

/// The proxy for `url` (a `scheme://host[:port]...` URL), or `None` to connect directly.
/// `kubeconfig_proxy` is the cluster's `proxy-url`, which bypasses the environment.
pub fn proxy_for(url: &str, env: &ProxyEnv, kubeconfig_proxy: Option<&str>) -> Result<Option<http::Uri>, ProxyError> {
    route_for(url, env, kubeconfig_proxy).map(|r| r.map(|r| r.uri))
}

/// Where the kubeconfig's `proxy-url` is named in messages.
const KUBECONFIG_PROXY: &str = "the kubeconfig's proxy-url";

/// The proxy a connection goes through and the setting that chose it, for messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub uri: http::Uri,
    /// `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` or the kubeconfig's `proxy-url`.
    pub source: &'static str,
}

impl Route {
    /// `scheme://host:port`, with `***@` in place of the credentials it holds.
    pub fn shown(&self) -> String {
        let scheme = self.uri.scheme_str().unwrap_or("http");
        let authority = self.uri.authority().map_or("", |a| a.as_str());
        match authority.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://***@{host}"),
            None => format!("{scheme}://{authority}"),
        }
    }

    /// What to check when the connection through this proxy to `server_host` fails.
    pub fn hint(&self, server_host: &str) -> String {
        if self.source == KUBECONFIG_PROXY {
            format!(
                "check that the proxy in the kubeconfig's proxy-url answers and can reach {server_host}, or remove proxy-url (then HTTPS_PROXY/HTTP_PROXY and NO_PROXY decide)"
            )
        } else {
            format!(
                "check that {} names a proxy that answers and can reach {server_host}, or add {server_host} to NO_PROXY to connect directly (a kubeconfig's proxy-url would win over both)",
                self.source
            )
        }
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the proxy {} ({})", self.shown(), self.source)
    }
}

/// Like [`proxy_for`], with the setting that chose the proxy.
pub fn route_for(url: &str, env: &ProxyEnv, kubeconfig_proxy: Option<&str>) -> Result<Option<Route>, ProxyError> {
    if let Some(p) = kubeconfig_proxy.filter(|p| !p.trim().is_empty()) {
        return parse_proxy(KUBECONFIG_PROXY, p).map(|uri| Some(Route { uri, source: KUBECONFIG_PROXY }));
    }
    let (scheme, host) = scheme_and_host(url);
    let (name, value) = match scheme.as_str() {
        "https" => match (&env.https, &env.all) {
            (Some(v), _) => ("HTTPS_PROXY", v),
            (None, Some(v)) => ("ALL_PROXY", v),
            (None, None) => return Ok(None),
        },
        _ => match (&env.http, &env.all) {
            (Some(v), _) => ("HTTP_PROXY", v),
            (None, Some(v)) => ("ALL_PROXY", v),
            (None, None) => return Ok(None),
        },
    };
    if let Some(list) = &env.no_proxy
        && no_proxy_matches(list, &host)
    {
        return Ok(None);
    }
    parse_proxy(name, value).map(|uri| Some(Route { uri, source: name }))
}

/// Whether a `NO_PROXY` list covers `host` (a name or an IP address, without port or brackets).
pub fn no_proxy_matches(list: &str, host: &str) -> bool {
    let host = strip_brackets(host).trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() {
        return false;
    }
    let ip: Option<IpAddr> = host.parse().ok();
    split_list(list).any(|entry| {
        if entry == "*" {
            return true;
        }
        if let Ok(net) = entry.parse::<IpNet>() {
            return ip.is_some_and(|ip| net.contains(&ip));
        }
        let entry = strip_port(entry);
        if let Ok(e) = entry.parse::<IpAddr>() {
            return ip == Some(e);
        }
        let name = entry.trim_start_matches('*').trim_start_matches('.').trim_end_matches('.').to_ascii_lowercase();
        !name.is_empty() && ip.is_none() && (host == name || host.ends_with(&format!(".{name}")))
    })
}

fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split([',', ' ', '\t']).map(str::trim).filter(|e| !e.is_empty())
}

fn strip_brackets(h: &str) -> &str {
    h.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(h)
}

/// `host:port` → `host`; `[v6]:port` → `v6`; a bare IPv6 address stays whole.
fn strip_port(entry: &str) -> &str {
    if let Some(rest) = entry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match entry.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => entry,
    }
}

/// The scheme (lowercased, `http` when missing) and host of a URL.
pub fn scheme_and_host(url: &str) -> (String, String) {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => ("http".to_string(), url),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or("").to_string()
    } else {
        hostport.rsplit_once(':').map_or(hostport, |(h, _)| h).to_string()
    };
    (scheme, host)
}

fn parse_proxy(source: &str, value: &str) -> Result<http::Uri, ProxyError> {
    let value = value.trim();
    let full = if value.contains("://") { value.to_string() } else { format!("http://{value}") };
    let err = |why| ProxyError { source_name: source.to_string(), shown: crate::text::mask_userinfo(&full), why };
    let uri: http::Uri = full.parse().map_err(|_| err("not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some("socks5" | "socks5h" | "socks4" | "socks4a") => return Err(err("SOCKS proxies are not supported")),
        _ => return Err(err("the scheme must be http or https")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(err("no host"));
    }
    // `http::Uri` takes any characters after the host's colon; a port that is not a number
    // would only show later as a refused connection.
    if let Some(port) = port_of(uri.authority().map_or("", |a| a.as_str()))
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(err("the port must be a number from 1 to 65535"));
    }
    Ok(uri)
}

/// The port text of an authority (`user@host:port`, `[v6]:port`), when it has one.
fn port_of(authority: &str) -> Option<&str> {
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match hostport.strip_prefix('[') {
        Some(v6) => v6.split_once(']').and_then(|(_, rest)| rest.strip_prefix(':')),
        None => hostport.rsplit_once(':').map(|(_, p)| p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> ProxyEnv {
        let map: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ProxyEnv::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn no_proxy_follows_curl() {
        let cases = [
            ("*", "anything.example", true),
            ("example.com", "example.com", true),
            ("example.com", "api.example.com", true),
            ("example.com", "notexample.com", false),
            (".example.com", "example.com", true),
            (".example.com", "a.b.example.com", true),
            ("*.example.com", "a.example.com", true),
            ("EXAMPLE.com", "Api.Example.COM", true),
            ("example.com.", "api.example.com", true),
            ("example.com:6443", "example.com", true),
            ("10.0.0.1", "10.0.0.1", true),
            ("10.0.0.1", "10.0.0.2", false),
            ("10.0.0.0/8", "10.20.30.40", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("127.0.0.1", "[127.0.0.1]", true),
            ("::1", "[::1]", true),
            ("[::1]:6443", "::1", true),
            ("fd00::/8", "fd12::5", true),
            ("fd00::/8", "fe80::1", false),
            ("10.0.0.0/8", "ten.example", false),
            ("a.example, b.example", "x.b.example", true),
            ("a.example b.example", "b.example", true),
            ("a.example,,", "a.example", true),
            ("", "a.example", false),
            ("*.", "a.example", false),
            ("localhost", "127.0.0.1", false),
        ];
        for (list, host, want) in cases {
            assert_eq!(no_proxy_matches(list, host), want, "NO_PROXY={list:?} host={host:?}");
        }
    }

    #[test]
    fn proxy_choice_by_scheme_case_and_no_proxy() {
        let p = |s: &str| Some(s.parse::<http::Uri>().unwrap());
        type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, Option<&'a str>, Option<http::Uri>);
        let cases: Vec<Case> = vec![
            (vec![], "https://api:6443", None, None),
            (vec![("HTTPS_PROXY", "http://p:3128")], "https://api:6443", None, p("http://p:3128")),
            (
                vec![("https_proxy", "http://low:1"), ("HTTPS_PROXY", "http://up:2")],
                "https://api",
                None,
                p("http://low:1"),
            ),
            (vec![("HTTPS_PROXY", "http://p:3128")], "http://api:8080", None, None),
            (vec![("HTTP_PROXY", "http://p:3128")], "http://api:8080", None, p("http://p:3128")),
            (vec![("http_proxy", "p:3128")], "http://api:8080", None, p("http://p:3128")),
            (vec![("ALL_PROXY", "http://all:1")], "https://api", None, p("http://all:1")),
            (vec![("HTTPS_PROXY", "http://p:1"), ("NO_PROXY", "*")], "https://api", None, None),
            (vec![("HTTPS_PROXY", "http://p:1"), ("no_proxy", ".corp")], "https://k.corp:6443", None, None),
            (vec![("HTTPS_PROXY", "http://p:1"), ("NO_PROXY", "10.0.0.0/8")], "https://10.1.2.3:6443", None, None),
            (
                vec![("HTTPS_PROXY", "http://p:1"), ("NO_PROXY", "10.0.0.0/8")],
                "https://192.168.0.1:6443",
                None,
                p("http://p:1"),
            ),
            (
                vec![("HTTPS_PROXY", "http://p:1"), ("NO_PROXY", "*")],
                "https://api",
                Some("http://kc:9"),
                p("http://kc:9"),
            ),
            (vec![("HTTPS_PROXY", "")], "https://api", None, None),
        ];
        for (vars, url, kc, want) in cases {
            assert_eq!(proxy_for(url, &env(&vars), kc).unwrap(), want, "{vars:?} {url}");
        }
    }

    #[test]
    fn bad_proxy_values_are_refused_without_their_password() {
        let e = env(&[("HTTPS_PROXY", "socks5://u:PASS@p:1080")]);
        let err = proxy_for("https://api", &e, None).unwrap_err();
        assert_eq!(err.source_name, "HTTPS_PROXY");
        assert!(!err.to_string().contains("PASS"), "{err}");
        assert!(err.to_string().contains("***@p:1080"), "{err}");
        let e = env(&[("HTTPS_PROXY", "http://u:PASS@ bad host")]);
        let err = proxy_for("https://api", &e, None).unwrap_err();
        assert!(!err.to_string().contains("PASS"), "{err}");
        assert!(!err.hint().contains("PASS"));
        for (value, ok) in [
            ("http://u:PASS@p:abc", false),
            ("http://p:", false),
            ("http://p:0", false),
            ("http://p:65536", false),
            ("http://[::1]:x1", false),
            ("http://p:3128", true),
            ("http://[::1]:3128", true),
            ("http://p", true),
        ] {
            let got = proxy_for("https://api", &env(&[("HTTPS_PROXY", value)]), None);
            assert_eq!(got.is_ok(), ok, "{value}: {got:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains("port must be a number") && !e.to_string().contains("PASS"), "{e}");
            }
        }
    }

    #[test]
    fn a_route_is_shown_as_scheme_host_port_without_credentials() {
        let e = env(&[("HTTPS_PROXY", "eas:S3cret@proxy.corp:3128"), ("HTTP_PROXY", "http://proxy.corp:8080/")]);
        let r = route_for("https://api:6443", &e, None).unwrap().unwrap();
        assert!(!format!("{r} {}", r.hint("api")).contains("S3cret"));
        assert_eq!(
            (r.shown(), r.to_string()),
            ("http://***@proxy.corp:3128".into(), "the proxy http://***@proxy.corp:3128 (HTTPS_PROXY)".into())
        );
        assert!(
            r.hint("api").contains("HTTPS_PROXY") && r.hint("api").contains("add api to NO_PROXY"),
            "{}",
            r.hint("api")
        );
        let r = route_for("http://api:80", &e, None).unwrap().unwrap();
        assert_eq!(r.to_string(), "the proxy http://proxy.corp:8080 (HTTP_PROXY)");
        let r = route_for("https://api", &e, Some("https://u:p@kc:1")).unwrap().unwrap();
        assert_eq!(r.to_string(), "the proxy https://***@kc:1 (the kubeconfig's proxy-url)");
        assert!(r.hint("api").contains("remove proxy-url"), "{}", r.hint("api"));
    }

    #[test]
    fn no_proxy_for_a_child_adds_only_what_is_missing() {
        let e = env(&[("NO_PROXY", "localhost,.corp")]);
        assert_eq!(e.no_proxy_with(&["api.corp", "10.0.0.5", "[::1]"]), "localhost,.corp,10.0.0.5,::1");
        assert_eq!(ProxyEnv::default().no_proxy_with(&["h"]), "h");
    }

    #[test]
    fn the_child_reaches_the_api_server_directly() {
        let vars = [("HTTPS_PROXY", "http://u:p@proxy:3128"), ("no_proxy", ".corp")];
        let get = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        let got = child_env(&get, Some("https://k3d-gpu-server-0:6443"));
        assert_eq!(
            got,
            vec![
                ("HTTPS_PROXY".to_string(), "http://u:p@proxy:3128".to_string()),
                ("https_proxy".to_string(), "http://u:p@proxy:3128".to_string()),
                ("NO_PROXY".into(), ".corp,k3d-gpu-server-0".into()),
                ("no_proxy".into(), ".corp,k3d-gpu-server-0".into()),
            ]
        );
        // Already covered: the list stays; no proxy at all: nothing is added.
        let got = child_env(&get, Some("https://api.corp:6443"));
        assert_eq!(got[2], ("NO_PROXY".to_string(), ".corp".to_string()));
        // Only the lowercase form set: the installer's lookup of HTTPS_PROXY still finds it.
        let lower = |k: &str| (k == "https_proxy").then(|| "http://p:1".to_string());
        let got = child_env(&lower, None);
        assert!(got.contains(&("HTTPS_PROXY".to_string(), "http://p:1".to_string())), "{got:?}");
        let none = |_: &str| None;
        assert_eq!(child_env(&none, Some("https://h:6443")), vec![]);
    }

    #[test]
    fn hosts_come_out_of_urls() {
        assert_eq!(scheme_and_host("https://u:p@Api.X:6443/p"), ("https".into(), "Api.X".into()));
        assert_eq!(scheme_and_host("http://[::1]:8080"), ("http".into(), "::1".into()));
        assert_eq!(scheme_and_host("HTTPS://h"), ("https".into(), "h".into()));
    }
}
