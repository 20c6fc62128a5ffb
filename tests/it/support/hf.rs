//! A Hugging Face stand-in on loopback (HTTPS, its certificate signed by a throwaway CA the
//! client is told to trust with `--ca-bundle`), answering `/<id>/resolve/<rev>/<file>` as
//! Hugging Face does: its refusals carry `X-Error-Code` (`GatedRepo` 403, `RepoNotFound` 401).
//! A model id listed as `proxied` is refused with a bare 403, as a proxy answers in its place.
//! A request bearing the token [`REJECTED_TOKEN`] is answered 401 `RepoNotFound`, as Hugging
//! Face answers a token that cannot read the repository.
//! [`HfStandIn::serving`] also answers files of its own (`<id>/<file>` → body; a `HEAD` gets the
//! headers only), and holds every answer for a delay first, as a slow Hugging Face would.

use std::path::Path;

use tokio::io::AsyncWriteExt;

/// The token the stand-in rejects.
pub const REJECTED_TOKEN: &str = "hf_rejected_by_the_stand_in";

pub struct HfStandIn {
    pub port: u16,
    pub ca_pem: String,
    _rt: tokio::runtime::Runtime,
}

impl HfStandIn {
    /// `gated`: ids refused as gated (403 GatedRepo); `proxied`: ids refused with a bare 403.
    pub fn start(gated: &[&str], proxied: &[&str]) -> HfStandIn {
        HfStandIn::serving(gated, proxied, &[], std::time::Duration::ZERO)
    }

    /// [`HfStandIn::start`], answering `files` (`("<id>/<file>", body)`) with 200, and every
    /// request only after `delay`.
    pub fn serving(gated: &[&str], proxied: &[&str], files: &[(&str, &str)], delay: std::time::Duration) -> HfStandIn {
        let files: std::sync::Arc<Vec<(String, String)>> =
            std::sync::Arc::new(files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        let rt = super::tls_front::runtime(1);
        let (gated, proxied): (Vec<String>, Vec<String>) =
            (gated.iter().map(|s| s.to_string()).collect(), proxied.iter().map(|s| s.to_string()).collect());
        let served = super::tls_front::serve_tls(&rt, "eas hf stand-in CA", move |mut tls| {
            let (gated, proxied, files) = (gated.clone(), proxied.clone(), files.clone());
            async move {
                let Some(head) = super::tls_front::request_head(&mut tls, &mut Vec::new()).await else { return };
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                let id = path.trim_start_matches('/').split("/resolve/").next().unwrap_or("").to_string();
                // `/<id>/resolve/<rev>/<file>`: the file after the revision.
                let file = path.split("/resolve/").nth(1).and_then(|r| r.split_once('/')).map(|(_, f)| f);
                let served = file.and_then(|f| files.iter().find(|(k, _)| *k == format!("{id}/{f}")));
                tokio::time::sleep(delay).await;
                let rejected = head
                    .lines()
                    .any(|l| l.to_ascii_lowercase().starts_with("authorization:") && l.contains(REJECTED_TOKEN));
                let (status, code) = if rejected {
                    (401, Some("RepoNotFound"))
                } else if gated.contains(&id) {
                    (403, Some("GatedRepo"))
                } else if proxied.contains(&id) {
                    (403, None)
                } else {
                    (404, Some("EntryNotFound"))
                };
                if let Some((_, body)) = served.filter(|_| !rejected) {
                    let head_only = head.starts_with("HEAD ");
                    let mut out =
                        format!("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", body.len());
                    if !head_only {
                        out.push_str(body);
                    }
                    let _ = tls.write_all(out.as_bytes()).await;
                    let _ = tls.shutdown().await;
                    return;
                }
                let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
                if let Some(c) = code {
                    out.push_str(&format!("X-Error-Code: {c}\r\n"));
                }
                out.push_str("Content-Length: 2\r\n\r\n{}");
                let _ = tls.write_all(out.as_bytes()).await;
                let _ = tls.shutdown().await;
            }
        });
        HfStandIn { port: served.port, ca_pem: served.ca_pem, _rt: rt }
    }

    pub fn endpoint(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    /// The CA written to `dir`, for `--ca-bundle`.
    pub fn ca_file(&self, dir: &Path) -> std::path::PathBuf {
        let p = dir.join("hf-ca.pem");
        std::fs::write(&p, &self.ca_pem).unwrap();
        p
    }
}
