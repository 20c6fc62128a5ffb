//! The download client against a real local HTTPS server whose throwaway CA is made here (rcgen),
//! directly and through a real forward proxy (tinyproxy, tests/it/support/forward_proxy.rs).

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[path = "../../tests/it/support/forward_proxy.rs"]
mod forward_proxy;

const BODY: &[u8] = b"yq v4.44 pretend binary\n";

struct Server {
    port: u16,
    ca_der: Vec<u8>,
}

/// A TLS server on 127.0.0.1 for the name `localhost`, answering every request with `BODY`.
fn start_server(rt: &tokio::runtime::Runtime) -> Server {
    let crate::tls_front::TestCa { acceptor, der: ca_der, .. } = crate::tls_front::localhost_ca("eas test CA");
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", BODY.len());
                let _ = tls.write_all(head.as_bytes()).await;
                let _ = tls.write_all(BODY).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Server { port, ca_der }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn with_the_bundle_the_download_succeeds_and_without_it_fails_in_one_line() {
    let rt = rt();
    let server = start_server(&rt);
    let url = format!("https://localhost:{}/yq", server.port);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("yq");

    let trusting = Downloader::new(std::slice::from_ref(&server.ca_der), ProxyEnv::default()).unwrap();
    rt.block_on(trusting.to_file(&url, &dest)).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), BODY);

    let plain = Downloader::new(&[], ProxyEnv::default()).unwrap();
    let e = rt.block_on(plain.to_file(&url, &dir.path().join("other"))).unwrap_err();
    assert!(!e.contains('\n'), "one line: {e}");
    assert!(e.to_lowercase().contains("certificate"), "names the certificate problem: {e}");
}

#[test]
fn through_a_forward_proxy_the_proxy_relays_the_download_and_no_proxy_bypasses_it() {
    let password = "Sentinel-Download-Pass-31c9";
    let proxy = forward_proxy::ForwardProxy::start("eas", password);
    let rt = rt();
    let server = start_server(&rt);
    let url = format!("https://localhost:{}/yq", server.port);
    let dir = tempfile::tempdir().unwrap();

    let proxied = ProxyEnv { https: Some(proxy.url()), ..Default::default() };
    let d = Downloader::new(std::slice::from_ref(&server.ca_der), proxied.clone()).unwrap();
    rt.block_on(d.to_file(&url, &dir.path().join("a"))).unwrap();
    assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), BODY);
    let relayed = proxy.relayed();
    assert!(
        relayed.iter().any(|l| l.contains(&format!("CONNECT localhost:{}", server.port))),
        "the proxy relayed the download: {relayed:?}"
    );

    let before = proxy.relayed().len();
    let bypass = ProxyEnv { no_proxy: Some("localhost".into()), ..proxied };
    let d = Downloader::new(std::slice::from_ref(&server.ca_der), bypass).unwrap();
    rt.block_on(d.to_file(&url, &dir.path().join("b"))).unwrap();
    assert_eq!(proxy.relayed().len(), before, "NO_PROXY=localhost goes direct");

    // A wrong password: the proxy refuses, and the message never shows the password.
    let wrong = ProxyEnv { https: Some(proxy.url_with("Wrong-Pass-Sentinel-88")), ..Default::default() };
    let d = Downloader::new(std::slice::from_ref(&server.ca_der), wrong).unwrap();
    let e = rt.block_on(d.to_file(&url, &dir.path().join("c"))).unwrap_err();
    assert!(!e.contains("Wrong-Pass-Sentinel-88") && !e.contains(password), "{e}");
}
