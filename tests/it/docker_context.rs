//! The Docker endpoint follows the current docker context: a `DOCKER_CONFIG` directory whose
//! current context points at a logging `socat` proxy in front of the test engine. The default
//! socket reaches the same engine, so only the proxy's log tells the two apart: `eas facts` (the
//! gatherer) and `eas doctor` (the bastion's connection) must both show up in it.
//!
//! Needs a Docker Engine and socat (Debian `socat`); run under /tmp/eas-docker.lock.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

struct Proxy {
    child: Child,
    log: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn engine_socket() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if h.starts_with("unix://") => h.trim_start_matches("unix://").to_string(),
        _ => "/var/run/docker.sock".to_string(),
    }
}

/// socat listening on `sock`, forwarding to the engine, logging each request line (-v).
fn proxy(dir: &Path) -> (Proxy, PathBuf) {
    let sock = dir.join("proxy.sock");
    let log = dir.join("proxy.log");
    let child = Command::new("socat")
        .arg("-v")
        .arg(format!("UNIX-LISTEN:{},fork", sock.display()))
        .arg(format!("UNIX-CONNECT:{}", engine_socket()))
        .stderr(std::fs::File::create(&log).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .expect("socat runs (apt-get install socat)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "socat never listened on {}", sock.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    (Proxy { child, log }, sock)
}

/// A docker CLI config directory whose current context is `eas-proxy` at `sock`.
fn docker_config(dir: &Path, sock: &Path) -> PathBuf {
    let cfg = dir.join("docker-config");
    let hex = support::artifacts::sha256(b"eas-proxy");
    let meta = cfg.join("contexts/meta").join(hex);
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::write(cfg.join("config.json"), r#"{"currentContext":"eas-proxy"}"#).unwrap();
    std::fs::write(
        meta.join("meta.json"),
        format!(
            r#"{{"Name":"eas-proxy","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"unix://{}","SkipTLSVerify":false}}}}}}"#,
            sock.display()
        ),
    )
    .unwrap();
    cfg
}

/// Requests socat logged (each request line ends in ` HTTP/1.1`).
fn requests(log: &Path) -> usize {
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).to_string();
    text.lines().filter(|l| l.trim_end_matches(['\\', 'r']).ends_with(" HTTP/1.1")).count()
}

#[test]
fn facts_and_the_bastion_connection_go_through_the_current_docker_context() {
    let _engine = support::docker::engine();
    let dir = tempfile::tempdir().unwrap();
    let (p, sock) = proxy(dir.path());
    let cfg = docker_config(dir.path(), &sock);
    let server = ClusterServer::start(fixture("xeon-amx"));
    let run = |args: &[&str]| {
        eas(dir.path())
            .env_remove("DOCKER_HOST")
            .env("DOCKER_CONFIG", &cfg)
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["facts"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let after_facts = requests(&p.log);
    assert!(after_facts > 0, "the gatherer's Docker calls go through the proxy: {}", text(&out.stderr));
    let out = run(&["doctor"]);
    let after_doctor = requests(&p.log);
    assert!(after_doctor > after_facts, "the bastion's connection goes through the proxy too: {}", text(&out.stderr));
}
