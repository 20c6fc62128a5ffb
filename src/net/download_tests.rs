//! The download client against a real local HTTPS server whose throwaway CA is made here (rcgen),
//! directly and through a real forward proxy (tinyproxy, tests/it/support/forward_proxy.rs).

use tokio::io::AsyncWriteExt;

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
    let served = crate::tls_front::serve_tls(rt, "eas test CA", |mut tls| async move {
        if crate::tls_front::request_head(&mut tls, &mut Vec::new()).await.is_none() {
            return;
        }
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", BODY.len());
        let _ = tls.write_all(head.as_bytes()).await;
        let _ = tls.write_all(BODY).await;
        let _ = tls.shutdown().await;
    });
    Server { port: served.port, ca_der: served.ca_der }
}

#[test]
fn with_the_bundle_the_download_succeeds_and_without_it_fails_in_one_line() {
    let rt = crate::tls_front::runtime(2);
    let server = start_server(&rt);
    let url = format!("https://localhost:{}/yq", server.port);
    let (dir, dest) = crate::testing::temp_path("yq");

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
    let rt = crate::tls_front::runtime(2);
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
