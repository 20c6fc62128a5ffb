//! `eas facts` behind a real forward proxy (tinyproxy on loopback, with basic authentication) in
//! front of the recorded cluster: the proxy variables are honoured with curl's rules, `NO_PROXY`
//! sends the client straight to the server, and the proxy password appears in no output.

use crate::support;

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
    exited(&out, 1);
    assert_no_password(&out, wrong);
    assert!(!proxy.relayed().is_empty(), "the proxy was asked and refused");
    assert!(server.requests().is_empty(), "the server was never reached");

    let out = facts_via(&server, &[("HTTP_PROXY", &format!("socks5://eas:{PASSWORD}@127.0.0.1:1"))], &[]);
    let stderr = exited(&out, 2);
    assert_no_password(&out, PASSWORD);
    assert!(stderr.contains("HTTP_PROXY is not a usable proxy URL (socks5://***@127.0.0.1:1)"), "{stderr}");
    assert!(stderr.contains("hint: "), "{stderr}");
}

#[test]
fn the_kubeconfig_proxy_url_is_used_and_masked() {
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with_proxy_url(&server, dir.path(), &proxy.url());
    let out = facts_through(&kubeconfig).env("NO_PROXY", "*").env("EAS_LOG", "trace").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_no_password(&out, PASSWORD);
    assert!(proxy.relayed().iter().any(|l| l.contains(&format!("CONNECT 127.0.0.1:{} ", server_port(&server)))));
}

/// A proxy that does not do its job, on loopback: one that refuses connections (nothing listens),
/// one that accepts and closes them, one that answers every request with 502 Bad Gateway.
#[derive(Debug, Clone, Copy)]
enum Broken {
    Refuses,
    Closes,
    Answers502,
}

/// Starts a broken proxy of `kind` and returns its port; its thread lives as long as the test.
fn broken_proxy(kind: Broken) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    match kind {
        Broken::Refuses => drop(listener),
        Broken::Closes | Broken::Answers502 => {
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    if let Broken::Answers502 = kind {
                        let mut seen = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                        }
                        let _ = conn
                            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    }
                }
            });
        }
    }
    port
}

/// Issue 10: when the proxy does not answer (or answers only with an error), the one-line error
/// names the proxy that was used (scheme://host:port, its credentials masked) and where it came
/// from, and the hint says which settings choose it; the password never appears. In `eas facts`
/// and in `eas up --dry-run`'s preflight.
#[test]
fn a_proxy_that_does_not_answer_is_named_masked_with_a_hint() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let pins = root().join("pins.json");
    for kind in [Broken::Refuses, Broken::Closes, Broken::Answers502] {
        let port = broken_proxy(kind);
        let url = format!("http://eas:{PASSWORD}@127.0.0.1:{port}");
        let shown = format!("http://***@127.0.0.1:{port}");
        let facts = facts_via(&server, &[("HTTP_PROXY", &url)], &["--request-timeout", "5"]);
        let up = eas(&fixture("xeon-amx"))
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .args(["up", "--dry-run", "--pins", pins.to_str().unwrap()])
            .args(facts_args("xeon-amx"))
            .env("HTTP_PROXY", &url)
            .env("EAS_LOG", "trace")
            .output()
            .unwrap();
        for (cmd, out) in [("facts", &facts), ("up --dry-run", &up)] {
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{kind:?} {cmd}: a run-time failure: {stderr}");
            assert_no_password(out, PASSWORD);
            let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_default();
            assert!(error.contains(&format!("through the proxy {shown} (HTTP_PROXY)")), "{kind:?} {cmd}: {stderr}");
            let next = stderr.lines().find(|l| l.starts_with("next: ")).unwrap_or_default();
            for setting in ["HTTP_PROXY", "NO_PROXY", "proxy-url"] {
                assert!(next.contains(setting), "{kind:?} {cmd}: the hint names {setting}: {stderr}");
            }
        }
    }
    assert!(server.requests().is_empty(), "the server was never reached");

    // The kubeconfig's proxy-url: named as such.
    let port = broken_proxy(Broken::Refuses);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_with_proxy_url(&server, dir.path(), &format!("http://eas:{PASSWORD}@127.0.0.1:{port}"));
    let out = facts_through(&kubeconfig).output().unwrap();
    let stderr = exited(&out, 1);
    assert_no_password(&out, PASSWORD);
    assert!(
        stderr.contains(&format!("through the proxy http://***@127.0.0.1:{port} (the kubeconfig's proxy-url)")),
        "{stderr}"
    );
}

/// Every file under `dir` holding `needle`.
fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle)) {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

/// Issue 21 item 5: `eas up --dry-run --out` behind a proxy with a password (tinyproxy on
/// loopback, which relays eas's API calls) writes the installer's proxy keys where the installer
/// reads them: `no_proxy` computed from the facts (the user's NO_PROXY first, loopback, the k3s
/// CIDRs, the node's InternalIP, `.svc`, the cluster domain, the API server as this host and as
/// the bastion reach it) in the extra vars and the catalog edit, the proxy URLs as environment
/// lookups; the password is in no output, file, plan or state.
#[test]
fn a_proxied_plan_computes_no_proxy_and_writes_the_password_nowhere() {
    let cluster = "k3d-gpu-desktop";
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture(cluster));
    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(dir.path());
    let (out_dir, state, home) = (dir.path().join("out"), dir.path().join("state"), dir.path().join("home"));
    let mut c = eas(&fixture(cluster));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(&state);
    c.args(["up", "--dry-run", "--offline", "--out"]).arg(&out_dir).arg("--pins").arg(trees.join("pins.json"));
    c.args(facts_args(cluster));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    let out = c
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("HTTP_PROXY", proxy.url())
        .env("https_proxy", proxy.url())
        .env("NO_PROXY", "corp.example")
        .env("EAS_LOG", "trace")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c != 2 && c != 3), "the plan is written: {stderr}");
    assert!(!proxy.relayed().is_empty(), "eas reached the recorded cluster through the proxy");
    let overrides = std::fs::read_to_string(out_dir.join("eas-overrides.yaml")).expect(&stderr);
    let want =
        "corp.example,localhost,127.0.0.1,10.42.0.0/16,10.43.0.0/16,172.18.0.2,.svc,.cluster.local,k3d-gpu-server-0";
    assert!(overrides.contains(&format!("no_proxy: \"{want}\"")), "{overrides}");
    assert!(overrides.contains(r#"https_proxy: "{{ lookup('env', 'HTTPS_PROXY') }}""#), "{overrides}");
    assert!(overrides.contains(r#"http_proxy: "{{ lookup('env', 'HTTP_PROXY') }}""#), "{overrides}");
    let models = std::fs::read_to_string(out_dir.join("models.edit.yaml")).unwrap();
    assert!(models.contains(&format!("network:\n  no_proxy: \"{want}\"\n")), "{models}");
    let choices = std::fs::read_to_string(out_dir.join("choices.txt")).unwrap();
    assert!(choices.contains("added localhost (this host's loopback)"), "{choices}");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("plan.json")).unwrap()).unwrap();
    assert!(
        plan["decisions"].as_array().unwrap().iter().any(|d| d["choice"].as_str().unwrap().starts_with("no_proxy: "))
    );
    // The knob audit found each proxy key's reader in the pinned EAS tree.
    for key in ["http_proxy", "https_proxy", "no_proxy"] {
        assert!(
            plan["decisions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["fact"].as_str().unwrap().starts_with(&format!("knob {key} "))),
            "{key}: {}",
            plan["decisions"]
        );
    }
    assert_no_password(&out, PASSWORD);
    for d in [&out_dir, &state, &home] {
        assert_eq!(files_holding(d, PASSWORD), Vec::<String>::new(), "the proxy password was written");
    }
}

/// `eas up` with the synthetic trees on `cluster`, given `vars`, the CA bundle `ca` and `extra`.
fn up_with(server: &ClusterServer, trees: &std::path::Path, vars: &[(&str, &str)], extra: &[&str]) -> Output {
    let mut c = eas(&fixture("k3d-gpu-desktop"));
    let state = tempfile::tempdir().unwrap();
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state.path());
    c.arg("up").arg("--pins").arg(trees.join("pins.json")).args(facts_args("k3d-gpu-desktop"));
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    for (k, v) in vars {
        c.env(k, v);
    }
    c.args(extra).output().unwrap()
}

/// Issue 21 item 6: the egress check asks each host of the install through the proxy the bastion
/// gets (tinyproxy relays the CONNECT to a loopback registry stand-in), and a host that does not
/// answer (a closed port) is a warning naming it, the proxy (masked) and the error, never a
/// blocker; `eas doctor` prints the same check; `--offline` asks nothing.
#[test]
fn the_egress_check_goes_through_the_proxy_and_warns_for_a_host_without_an_answer() {
    let proxy = ForwardProxy::start("eas", PASSWORD);
    let server = ClusterServer::start(fixture("k3d-gpu-desktop"));
    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(&dir.path().join("trees"));
    let registry = support::tls_front::TlsFront::files(dir.path().to_path_buf());
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &registry.ca_pem).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let hosts = format!("live={}/v2/,dead=https://127.0.0.1:{closed}/v2/", registry.url());
    let vars = [("HTTPS_PROXY", proxy.url()), ("EAS_EGRESS_URLS", hosts), ("EAS_CA_BUNDLE", ca.display().to_string())];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let shown = format!("http://***@127.0.0.1:{}", proxy.port);

    let out = up_with(&server, &trees, &vars, &["--dry-run", "--output", "json"]);
    let plan: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let warnings: Vec<&str> = plan["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    let dead: Vec<&&str> = warnings.iter().filter(|w| w.contains("does not answer from this host")).collect();
    assert_eq!(dead.len(), 1, "{warnings:#?}");
    assert!(
        dead[0].starts_with(&format!("dead does not answer from this host through the proxy {shown} (HTTPS_PROXY)")),
        "{}",
        dead[0]
    );
    let blockers = plan["blockers"].as_array().unwrap();
    assert!(
        !blockers.iter().any(|b| b["cause"].as_str().unwrap().contains("does not answer")),
        "a warning only: {blockers:?}"
    );
    let line = plan["decisions"].as_array().unwrap().iter().find(|d| d["source"] == "data/egress.json").unwrap();
    let choice = line["choice"].as_str().unwrap();
    assert!(choice.starts_with(&format!("live answered through the proxy {shown} (HTTPS_PROXY)")), "{choice}");
    assert!(choice.contains("the nodes' own egress (they pull the images) is not checked"), "{choice}");
    let connect = format!("CONNECT localhost:{} ", registry.port);
    assert!(proxy.relayed().iter().any(|l| l.contains(&connect)), "relayed: {:?}", proxy.relayed());
    assert_no_password(&out, PASSWORD);

    let doctor = {
        let mut c = eas(&fixture("k3d-gpu-desktop"));
        c.arg("--kubeconfig").arg(server.kubeconfig()).arg("doctor").arg("--pins").arg(trees.join("pins.json"));
        c.args(facts_args("k3d-gpu-desktop"));
        for n in ["eas", "ei", "eat"] {
            c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
        }
        for (k, v) in &vars {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let stdout = text(&doctor.stdout);
    let line = stdout.lines().find(|l| l.contains("egress:")).unwrap_or_else(|| panic!("{stdout}"));
    // Passed with a warning: marked `warn`, never `ok` above what it warns of.
    assert!(line.starts_with("warn egress: ") && line.contains("warning: dead does not answer"), "{line}");
    assert!(!line.contains("live"), "the host that answered is not a finding: {line}");
    assert_no_password(&doctor, PASSWORD);

    let before = proxy.relayed().iter().filter(|l| l.contains(&connect)).count();
    let out = up_with(&server, &trees, &vars, &["--dry-run", "--output", "json", "--offline"]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!plan["warnings"].to_string().contains("does not answer"), "{}", plan["warnings"]);
    assert_eq!(proxy.relayed().iter().filter(|l| l.contains(&connect)).count(), before, "--offline asked nothing");
}
