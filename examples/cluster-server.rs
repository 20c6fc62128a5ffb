//! Serves a recorded cluster outside the tests, for benchmarks and by hand:
//!
//!     cargo run --example cluster-server -- fixtures/clusters/scale-2000 [--port N] [--kubeconfig-out FILE] [--quiet] [--no-auth] [--egress]
//!
//! `--no-auth` serves requests without the kubeconfig's token too: kubectl sends no bearer token
//! over plain HTTP. `--egress` also serves the tests' loopback stand-in for the hosts eas's egress
//! check asks (`EgressStandIn`: data/egress.json's hosts, answered over TLS by a throwaway CA).
//!
//! Prints `kubeconfig <path>` and `url <url>` on stdout once it answers (with `--egress`, first
//! `egress <EAS_EGRESS_URLS value>` and `certs <SSL_CERT_FILE value>`), then serves until killed
//! or until stdin closes. Every request is logged to stderr.

// The tests' recorded-cluster server, of which this example serves and reads only a part.
#[allow(dead_code)]
#[path = "../tests/it/support/cluster_server.rs"]
mod cluster_server;
// The tests' TLS servers, of which this example serves the egress stand-in.
#[allow(dead_code)]
#[path = "../tests/it/support/tls_front.rs"]
mod tls_front;

use std::io::{BufRead, Write};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut fixture: Option<PathBuf> = None;
    let mut options = cluster_server::Options::default();
    let mut kubeconfig_out: Option<PathBuf> = None;
    let mut quiet = false;
    let mut egress = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => options.port = args.next().and_then(|p| p.parse().ok()).expect("--port N"),
            "--kubeconfig-out" => kubeconfig_out = args.next().map(PathBuf::from),
            "--quiet" => quiet = true,
            "--no-auth" => options.require_token = false,
            "--egress" => egress = true,
            _ if fixture.is_none() => fixture = Some(PathBuf::from(a)),
            other => panic!("unexpected argument {other}"),
        }
    }
    let fixture = fixture.expect(
        "usage: cluster-server FIXTURE_DIR [--port N] [--kubeconfig-out FILE] [--quiet] [--no-auth] [--egress]",
    );
    let server = cluster_server::ClusterServer::start_with(&fixture, options);
    let kubeconfig = match &kubeconfig_out {
        Some(p) => {
            server.write_kubeconfig(p).expect("write the kubeconfig");
            p.clone()
        }
        None => server.kubeconfig().to_path_buf(),
    };
    // Before the `url` line, which callers wait for.
    let egress = egress.then(tls_front::EgressStandIn::start);
    if let Some(e) = &egress {
        println!("egress {}", e.urls);
        println!("certs {}", e.cert_file.display());
    }
    println!("kubeconfig {}", kubeconfig.display());
    println!("url {}", server.url());
    std::io::stdout().flush().expect("stdout");
    // Serve until stdin closes (or the process is killed), logging requests as they come.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in std::io::stdin().lock().lines() {}
        let _ = tx.send(());
    });
    let mut seen = 0;
    loop {
        let done = rx.recv_timeout(std::time::Duration::from_millis(200)).is_ok();
        if !quiet {
            let log = server.requests();
            for r in &log[seen..] {
                eprintln!("{} {}{}{}", r.method, r.path, if r.query.is_empty() { "" } else { "?" }, r.query);
            }
            seen = log.len();
        }
        if done {
            return;
        }
    }
}
