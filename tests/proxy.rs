//! `eas facts` behind a real forward proxy (tinyproxy on loopback, with basic authentication) in
//! front of the recorded cluster: the proxy variables are honoured with curl's rules, `NO_PROXY`
//! sends the client straight to the server, and the proxy password appears in no output.

mod support;

use std::process::Output;

use support::forward_proxy::ForwardProxy;
use support::*;

const PASSWORD: &str = "Sentinel-Proxy-Pass-7f3a";

fn facts_via(server: &ClusterServer, vars: &[(&str, &str)], extra: &[&str]) -> Output {
    let mut c = eas(&fixture("xeon-amx"));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").args(facts_args("xeon-amx")).args(extra);
    for (k, v) in vars {
        c.env(k, v);
    }
    c.env("EAS_LOG", "trace");
    c.output().expect("run eas")
}

fn assert_no_password(out: &Output, password: &str) {
    for (name, stream) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(!text(stream).contains(password), "the proxy password is in {name}");
    }
}

fn server_port(server: &ClusterServer) -> String {
    server.url().rsplit(':').next().unwrap().to_string()
}

#[test]
fn facts_go_through_the_proxy_named_for_the_servers_scheme() {
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture("xeon-amx"));
    let target = format!("CONNECT 127.0.0.1:{} ", server_port(&server));
    // The recorded server speaks plain HTTP, so HTTP_PROXY applies (curl), in either case.
    for var in ["HTTP_PROXY", "http_proxy"] {
        let before = proxy.relayed().len();
        let out = facts_via(&server, &[(var, &proxy.url())], &[]);
        assert!(out.status.success(), "{var}: {}", text(&out.stderr));
        assert_no_password(&out, PASSWORD);
        let relayed = proxy.relayed()[before..].to_vec();
        assert!(relayed.iter().any(|l| l.contains(&target)), "{var}: the proxy relayed the API calls: {relayed:?}");
    }
    assert!(!server.requests().is_empty());
}

#[test]
fn no_proxy_covering_the_server_bypasses_the_proxy() {
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture("xeon-amx"));
    for no_proxy in ["127.0.0.1", "127.0.0.0/8", "*", "localhost,127.0.0.1,"] {
        for var in ["NO_PROXY", "no_proxy"] {
            let out = facts_via(
                &server,
                &[("HTTP_PROXY", &proxy.url()), ("HTTPS_PROXY", &proxy.url()), (var, no_proxy)],
                &[],
            );
            assert!(out.status.success(), "{var}={no_proxy}: {}", text(&out.stderr));
            assert_no_password(&out, PASSWORD);
        }
    }
    assert_eq!(proxy.relayed(), Vec::<String>::new(), "nothing went through the proxy");
    assert!(!server.requests().is_empty());
}

#[test]
fn a_rejected_or_unusable_proxy_fails_without_showing_the_password() {
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture("xeon-amx"));
    let wrong = "Wrong-Sentinel-Pass-91c2";
    let out = facts_via(&server, &[("HTTP_PROXY", &proxy.url_with(wrong))], &["--request-timeout", "5"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_no_password(&out, wrong);
    assert!(!proxy.relayed().is_empty(), "the proxy was asked and refused");
    assert!(server.requests().is_empty(), "the server was never reached");

    let out = facts_via(&server, &[("HTTP_PROXY", &format!("socks5://eas:{PASSWORD}@127.0.0.1:1"))], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_no_password(&out, PASSWORD);
    assert!(stderr.contains("HTTP_PROXY is not a usable proxy URL (socks5://***@127.0.0.1:1)"), "{stderr}");
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn the_kubeconfig_proxy_url_is_used_and_masked() {
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let kc = std::fs::read_to_string(server.kubeconfig()).unwrap();
    let with_proxy = kc.replace(
        &format!("server: {}", server.url()),
        &format!("server: {}\n    proxy-url: {}", server.url(), proxy.url()),
    );
    assert_ne!(kc, with_proxy, "the kubeconfig names the server as `server: URL`");
    std::fs::write(&kubeconfig, with_proxy).unwrap();
    let out = eas(&fixture("xeon-amx"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("facts")
        .args(facts_args("xeon-amx"))
        .env("NO_PROXY", "*")
        .env("EAS_LOG", "trace")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_no_password(&out, PASSWORD);
    assert!(proxy.relayed().iter().any(|l| l.contains(&format!("CONNECT 127.0.0.1:{} ", server_port(&server)))));
}
