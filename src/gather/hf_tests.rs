//! `up::hf` against a local HTTPS stand-in for Hugging Face (`HF_ENDPOINT`), whose throwaway CA
//! is made here: answers in Hugging Face's shape (`/<id>/resolve/<rev>/<file>`, `X-Error-Code`
//! on its refusals, `X-Linked-Size` on a weights file's HEAD), and a refusal without that header
//! as a proxy would answer in its place.

use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;

use super::*;
use crate::net::proxy::ProxyEnv;

const CONFIG: &str = r#"{"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}"#;

/// What the stand-in answers for a request line's path.
fn answer(method: &str, path: &str) -> (u16, Vec<(&'static str, String)>, String) {
    let none = Vec::new();
    match path {
        "/org/open/resolve/main/config.json" | "/org/single/resolve/main/config.json" => (200, none, CONFIG.into()),
        "/org/open/resolve/main/model.safetensors.index.json" => {
            (200, none, r#"{"metadata": {"total_size": 16060522496}, "weight_map": {}}"#.into())
        }
        "/org/single/resolve/main/model.safetensors" if method == "HEAD" => {
            (200, vec![("X-Linked-Size", "1503300328".into())], String::new())
        }
        p if p.starts_with("/org/gated/") => {
            (403, vec![("X-Error-Code", "GatedRepo".into())], "{\"error\":\"gated\"}".into())
        }
        p if p.starts_with("/org/private/") => {
            (401, vec![("X-Error-Code", "RepoNotFound".into())], "{\"error\":\"not found\"}".into())
        }
        p if p.starts_with("/org/proxied/") => (403, none, "<html>blocked by policy</html>".into()),
        _ => (404, vec![("X-Error-Code", "EntryNotFound".into())], "{}".into()),
    }
}

struct Server {
    port: u16,
    ca_der: Vec<u8>,
    /// (method, path, whether an Authorization header came) per request.
    seen: Arc<Mutex<Vec<(String, String, bool)>>>,
}

fn start(rt: &tokio::runtime::Runtime) -> Server {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let served = crate::tls_front::serve_tls(rt, "eas hf test CA", move |mut tls| {
        let log = log.clone();
        async move {
            let Some(head) = crate::tls_front::request_head(&mut tls, &mut Vec::new()).await else { return };
            let mut words = head.split_whitespace();
            let (method, path) = (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
            let auth = head.lines().any(|l| l.to_ascii_lowercase().starts_with("authorization: bearer "));
            log.lock().unwrap().push((method.clone(), path.clone(), auth));
            let (status, headers, body) = answer(&method, &path);
            let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            let body = if method == "HEAD" { String::new() } else { body };
            out.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
            let _ = tls.write_all(out.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    Server { port: served.port, ca_der: served.ca_der, seen }
}

#[test]
fn reads_fill_the_cache_and_only_hugging_faces_refusals_refuse() {
    let rt = crate::tls_front::runtime(2);
    let server = start(&rt);
    let d =
        Downloader::with_timeouts(std::slice::from_ref(&server.ca_der), ProxyEnv::default(), CONNECT, TOTAL).unwrap();
    let ep = endpoint(Some(&format!("https://localhost:{}/", server.port)));
    let cache = tempfile::tempdir().unwrap();
    let entries: Vec<(String, String)> = ["open", "single", "gated", "private", "proxied"]
        .iter()
        .map(|n| (format!("org/{n}"), "main".to_string()))
        .collect();
    let reads = rt.block_on(read_all(&d, &ep, Some("hf_test_token"), &entries, cache.path()));
    let by = |n: &str| reads.iter().find(|r| r.model_id == format!("org/{n}")).unwrap();

    let open = by("open");
    assert_eq!(open.access, Access::Readable);
    let a = open.architecture.clone().unwrap().unwrap();
    assert_eq!((a.weights_bytes(), a.kv_bytes_per_token()), (16_060_522_496, 128 * 1024));
    let dir = cache.path().join("org/open@main");
    assert!(dir.join("config.json").is_file() && dir.join("model.safetensors.index.json").is_file());
    // eas config reads the same cache, read-only, without the network.
    assert_eq!(crate::config::hf::from_cache(&dir).unwrap().unwrap(), a);

    let single = by("single").architecture.clone().unwrap().unwrap();
    assert_eq!(single.weights_bytes(), 1_503_300_328, "no index: the weights file's X-Linked-Size");

    assert!(matches!(&by("gated").access, Access::Refused { cause, fix }
        if cause.contains("403 (GatedRepo)") && fix.contains("/org/gated")));
    assert!(matches!(&by("private").access, Access::Refused { fix, .. } if fix.contains("rejected")));
    assert!(matches!(&by("proxied").access, Access::Unknown(w) if w.contains("without Hugging Face's X-Error-Code")));
    for n in ["gated", "private", "proxied"] {
        assert!(by(n).architecture.is_none() && !cache.path().join(format!("org/{n}@main")).exists(), "{n}");
    }
    let seen = server.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|(_, _, auth)| *auth), "the token goes in a header on every read: {seen:?}");
    assert!(seen.iter().all(|(_, p, _)| !p.contains("hf_test_token")), "never in the URL");
}

#[test]
fn an_endpoint_that_does_not_answer_is_unknown_within_the_bounds() {
    let rt = crate::tls_front::runtime(2);
    // A port nothing listens on: refused at once; the read says the download was not checked.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let d = Downloader::with_timeouts(&[], ProxyEnv::default(), CONNECT, TOTAL).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let reads = rt.block_on(read_all(
        &d,
        &format!("https://localhost:{port}"),
        None,
        &[("org/open".into(), "main".into())],
        cache.path(),
    ));
    assert!(started.elapsed() < TOTAL + Duration::from_secs(1));
    assert!(matches!(&reads[0].access, Access::Unknown(w) if w.contains("not reached")), "{reads:?}");
    assert_eq!(endpoint(None), "https://huggingface.co");
}
