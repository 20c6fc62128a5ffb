//! The publishers' checksum formats, and `lock_artifact` against a local HTTP artifact server.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};

use super::*;
use crate::act::bastion::artifacts::SystemFetcher;
use crate::net::proxy::ProxyEnv;

fn sha(b: &[u8]) -> String {
    format!("{:x}", Sha256::digest(b))
}

/// `rhash --list-hashes`-style order with SHA-256 as the 18th name (as in yq releases), and a
/// `checksums` line with a distinct digest-like value in every column.
fn rhash_files(file: &str, sha256: &str) -> (String, String) {
    let names = [
        "CRC32",
        "CRC32C",
        "MD4",
        "MD5",
        "SHA1",
        "TIGER",
        "TTH",
        "BTIH",
        "ED2K",
        "AICH",
        "WHIRLPOOL",
        "RIPEMD-160",
        "GOST94",
        "GOST94-CRYPTOPRO",
        "HAS-160",
        "GOST12-256",
        "GOST12-512",
        "SHA-256",
        "SHA-224",
        "SHA-384",
    ];
    let order = names.join("\n") + "\n";
    let cols: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| if *n == "SHA-256" { sha256.to_string() } else { format!("{i:02x}").repeat(8) })
        .collect();
    let other = format!("{file}.tar.gz  {}\n", cols.iter().map(|_| "ab").collect::<Vec<_>>().join("  "));
    (format!("{other}{file}  {}\n", cols.join("  ")), order)
}

#[test]
fn each_publishers_format_is_read_in_its_documented_order() {
    let d = sha(b"x");
    assert_eq!(parse_sidecar(&format!("{d}\n")).unwrap(), d);
    assert_eq!(
        parse_sum_file(&format!("{d}  helm-v3.22.1-linux-amd64.tar.gz\n"), "helm-v3.22.1-linux-amd64.tar.gz").unwrap(),
        d
    );
    assert!(parse_sum_file(&format!("{d}  other.tar.gz\n"), "helm.tar.gz").is_err());
    let (c, o) = rhash_files("yq_linux_amd64", &d);
    assert_eq!(parse_rhash_table(&c, &o, "yq_linux_amd64").unwrap(), d);
    // The .tar.gz line is a different file, not a prefix match.
    assert!(parse_rhash_table(&c, &o, "yq_linux_arm64").is_err());
    // Another column is not taken for SHA-256: reordering the names moves the column read.
    let swapped = o.replace("SHA-256\nSHA-224", "SHA-224\nSHA-256");
    assert_ne!(parse_rhash_table(&c, &swapped, "yq_linux_amd64").ok(), Some(d.clone()));
    let meta = serde_json::json!({"download_url": "u", "artifact": {"filename": "kubernetes-core-6.3.0.tar.gz", "sha256": d, "size": 1}});
    assert_eq!(parse_galaxy(&meta.to_string(), "kubernetes-core-6.3.0.tar.gz").unwrap(), d);
    assert!(parse_galaxy(&meta.to_string(), "kubernetes-core-6.2.0.tar.gz").is_err());
}

#[test]
fn the_pinned_urls_map_to_their_publishers_checksums() {
    let pins = crate::pins::Pins::parse(crate::pins::EMBEDDED).unwrap();
    let url = |n: &str| pins.row("bastion", n).unwrap().url.clone().unwrap();
    assert_eq!(published("kubectl", &url("kubectl")).unwrap().source(), format!("{}.sha256", url("kubectl")));
    assert_eq!(published("helm", &url("helm")).unwrap().source(), format!("{}.sha256sum", url("helm")));
    let yq = published("yq", &url("yq")).unwrap();
    assert_eq!(
        yq,
        Published::RhashTable {
            checksums: "https://github.com/mikefarah/yq/releases/download/v4.54.1/checksums".into(),
            order: "https://github.com/mikefarah/yq/releases/download/v4.54.1/checksums_hashes_order".into(),
            file: "yq_linux_amd64".into(),
        }
    );
    assert_eq!(
        published("kubernetes.core", &url("kubernetes.core")).unwrap(),
        Published::GalaxyVersion {
            url: "https://galaxy.ansible.com/api/v3/plugins/ansible/content/published/collections/index/kubernetes/core/versions/6.3.0/".into(),
            file: "kubernetes-core-6.3.0.tar.gz".into(),
        }
    );
    assert_eq!(published("something", "https://example.invalid/tool"), None);
}

/// The production fetcher (the in-process download client, https only) trusting `ca_der`.
fn fetcher(ca_der: &[u8]) -> SystemFetcher {
    SystemFetcher::new(&[ca_der.to_vec()], ProxyEnv::default()).unwrap()
}

/// A loopback HTTPS server for `localhost`, certified by a throwaway CA made here, answering GET
/// with the files given (path → body), 404 otherwise. Returns the base URL and the CA (DER).
fn serve(rt: &tokio::runtime::Runtime, files: HashMap<String, Vec<u8>>) -> (String, Vec<u8>) {
    let files = Arc::new(files);
    let served = crate::tls_front::serve_tls(rt, "eas publisher test CA", move |tls| {
        let files = files.clone();
        let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let body = files.get(req.uri().path()).cloned();
            async move {
                Ok::<_, Infallible>(match body {
                    Some(b) => Response::new(Full::new(Bytes::from(b))),
                    None => {
                        let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
                        *r.status_mut() = StatusCode::NOT_FOUND;
                        r
                    }
                })
            }
        });
        async move {
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
        }
    });
    (format!("https://localhost:{}", served.port), served.ca_der)
}

struct Site {
    rt: tokio::runtime::Runtime,
    base: String,
    fetcher: SystemFetcher,
    cache: Cache,
    _dir: tempfile::TempDir,
}

/// The four artifacts at release-like paths, each with its publisher's checksum, except where
/// `tamper` names a file whose published checksum is of other bytes, or `drop` one not published.
fn site(tamper: &str, drop: &str) -> (Site, HashMap<&'static str, String>) {
    let rt = crate::tls_front::runtime(1);
    let bodies: [(&str, &str, &[u8]); 4] = [
        ("kubectl", "/release/v1.37.2/bin/linux/amd64/kubectl", b"kubectl bytes"),
        ("helm", "/helm-v3.22.1-linux-amd64.tar.gz", b"helm bytes"),
        ("yq", "/mikefarah/yq/releases/download/v4.54.1/yq_linux_amd64", b"yq bytes"),
        (
            "kubernetes.core",
            "/api/v3/plugins/ansible/content/published/collections/artifacts/kubernetes-core-6.3.0.tar.gz",
            b"collection bytes",
        ),
    ];
    let mut files = HashMap::new();
    let mut urls = HashMap::new();
    for (name, path, body) in bodies {
        files.insert(path.to_string(), body.to_vec());
        let published_sha = if name == tamper { sha(b"what the publisher built") } else { sha(body) };
        let file = path.rsplit('/').next().unwrap();
        if name != drop {
            match name {
                "kubectl" => {
                    files.insert(format!("{path}.sha256"), published_sha.into_bytes());
                }
                "helm" => {
                    files.insert(format!("{path}.sha256sum"), format!("{published_sha}  {file}\n").into_bytes());
                }
                "yq" => {
                    let (c, o) = rhash_files(file, &published_sha);
                    let dir = path.rsplit_once('/').unwrap().0;
                    files.insert(format!("{dir}/checksums"), c.into_bytes());
                    files.insert(format!("{dir}/checksums_hashes_order"), o.into_bytes());
                }
                _ => {
                    let meta = serde_json::json!({"namespace": {"name": "kubernetes"}, "collection": {"name": "core"},
                        "version": "6.3.0", "download_url": path,
                        "artifact": {"filename": file, "sha256": published_sha, "size": body.len()}});
                    files.insert(
                        "/api/v3/plugins/ansible/content/published/collections/index/kubernetes/core/versions/6.3.0/"
                            .to_string(),
                        meta.to_string().into_bytes(),
                    );
                }
            }
        }
        urls.insert(name, path.to_string());
    }
    let (base, ca) = serve(&rt, files);
    let urls = urls.into_iter().map(|(n, p)| (n, format!("{base}{p}"))).collect();
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path().join("artifacts"));
    (Site { rt, base, fetcher: fetcher(&ca), cache, _dir: dir }, urls)
}

#[test]
fn a_download_matching_its_publishers_checksum_is_recorded() {
    let (s, urls) = site("", "");
    for (name, url) in &urls {
        let l = s.rt.block_on(lock_artifact(&s.fetcher, &s.cache, name, url, false)).unwrap();
        let Locked::Verified { sha256, against } = &l else { panic!("{name}: {l:?}") };
        assert!(s.cache.path(sha256).exists(), "{name} cached under its sha256");
        assert!(against.starts_with(&s.base), "{against}");
        assert!(row_source(url, &l).contains("matched the publisher's checksum"));
    }
}

#[test]
fn a_mismatch_names_the_url_the_expected_and_the_computed_sha256_and_caches_nothing() {
    for name in ["kubectl", "helm", "yq", "kubernetes.core"] {
        let (s, urls) = site(name, "");
        let url = &urls[name];
        let e = s.rt.block_on(lock_artifact(&s.fetcher, &s.cache, name, url, true)).unwrap_err();
        let PublisherError::Artifact(ArtifactError::Mismatch { url: u, expected, computed }) = &e else {
            panic!("{name}: {e:?}")
        };
        assert_eq!((u, expected), (url, &sha(b"what the publisher built")));
        let body: &[u8] = match name {
            "kubectl" => b"kubectl bytes",
            "helm" => b"helm bytes",
            "yq" => b"yq bytes",
            _ => b"collection bytes",
        };
        assert_eq!(computed, &sha(body));
        let msg = e.to_string();
        assert!(
            msg.contains(url.as_str()) && msg.contains(expected.as_str()) && msg.contains(computed.as_str()),
            "{msg}"
        );
        let cached = std::fs::read_dir(s._dir.path().join("artifacts")).map(|d| d.count()).unwrap_or(0);
        assert_eq!(cached, 0, "{name}: nothing cached");
    }
}

#[test]
fn a_missing_checksum_is_refused_unless_trust_on_first_use() {
    let (s, urls) = site("", "kubectl");
    let url = &urls["kubectl"];
    let e = s.rt.block_on(lock_artifact(&s.fetcher, &s.cache, "kubectl", url, false)).unwrap_err();
    assert!(matches!(&e, PublisherError::Missing { detail, .. } if detail.contains("404")), "{e:?}");
    // The command edge refuses it (exit 3; `commands::edge`'s tests): it names the URL.
    assert!(e.to_string().starts_with("no publisher checksum for ") && e.to_string().contains(url.as_str()), "{e}");

    let l = s.rt.block_on(lock_artifact(&s.fetcher, &s.cache, "kubectl", url, true)).unwrap();
    let Locked::TrustedOnFirstUse { sha256, .. } = &l else { panic!("{l:?}") };
    assert_eq!(sha256, &sha(b"kubectl bytes"));
    assert!(row_source(url, &l).contains("TRUSTED ON FIRST USE"), "{}", row_source(url, &l));
    // A publisher known to publish nothing is the same case.
    let e = s.rt.block_on(lock_artifact(&s.fetcher, &s.cache, "unknown-tool", url, false)).unwrap_err();
    assert!(matches!(e, PublisherError::Missing { .. }));
}
