//! eas's own HTTPS download client: rustls with the ring provider (as kube uses), trusting the
//! system's CAs plus the `--ca-bundle` certificates, choosing a proxy per URL by `net::proxy`'s
//! rules (curl's), and reporting failures in one line with proxy credentials masked.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::proxy::{self, ProxyEnv};

/// Downloads have a ceiling: kubectl is the largest artifact, well under this on a slow link.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(1800);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_REDIRECTS: usize = 10;

/// An HTTPS client for artifact downloads. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Downloader {
    client: reqwest::Client,
}

impl Downloader {
    /// A client trusting the system's CAs and `extra_roots` (DER certificates, e.g. from
    /// `--ca-bundle`), with the proxy of `env` for each URL. A proxy variable that is not a usable
    /// URL, or a certificate rustls rejects, is an error (one line, no credentials).
    pub fn new(extra_roots: &[Vec<u8>], env: ProxyEnv) -> Result<Downloader, String> {
        Downloader::with_timeouts(extra_roots, env, CONNECT_TIMEOUT, DOWNLOAD_TIMEOUT)
    }

    /// Like [`Downloader::new`], with its own bounds: to connect, and for a whole request.
    pub fn with_timeouts(
        extra_roots: &[Vec<u8>],
        env: ProxyEnv,
        connect: Duration,
        total: Duration,
    ) -> Result<Downloader, String> {
        for (name, sample) in [("HTTPS_PROXY", "https://eas.invalid/"), ("HTTP_PROXY", "http://eas.invalid/")] {
            let without_exceptions = ProxyEnv { no_proxy: None, ..env.clone() };
            proxy::proxy_for(sample, &without_exceptions, None)
                .map_err(|e| format!("{e} (checked for {name}); {}", e.hint()))?;
        }
        let mut roots = rustls::RootCertStore::empty();
        // An unreadable system store leaves only the bundle: the download then fails naming the
        // server's certificate, which points at the bundle.
        let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        for (i, der) in extra_roots.iter().enumerate() {
            roots
                .add(der.clone().into())
                .map_err(|e| format!("certificate {} of the CA bundle is not usable: {e}", i + 1))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let custom = reqwest::Proxy::custom(move |url| {
            // Checked above: only a usable proxy URL reaches here.
            proxy::proxy_for(url.as_str(), &env, None).ok().flatten().map(|u| u.to_string())
        });
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .https_only(true)
            .proxy(custom)
            .connect_timeout(connect)
            .timeout(total)
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .build()
            .map_err(|e| one_line(&e))?;
        Ok(Downloader { client })
    }

    /// Streams the body behind an `https://` URL into `dest` (created or truncated).
    pub async fn to_file(&self, url: &str, dest: &Path) -> Result<(), String> {
        if !url.starts_with("https://") {
            return Err("only https:// and file:// URLs are accepted".into());
        }
        let resp = self.client.get(url).send().await.map_err(|e| one_line(&e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("the server answered {status}"));
        }
        let mut out =
            tokio::fs::File::create(dest).await.map_err(|e| format!("writing {} in the cache: {e}", dest.display()))?;
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| one_line(&e))?;
            out.write_all(&chunk).await.map_err(|e| format!("writing {} in the cache: {e}", dest.display()))?;
        }
        out.flush().await.map_err(|e| format!("writing {} in the cache: {e}", dest.display()))?;
        Ok(())
    }
}

/// A small answer: its status, Hugging Face's `X-Error-Code`, the size a `HEAD` names, the body.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub error_code: Option<String>,
    /// `X-Linked-Size` (a Git LFS file's size, which Hugging Face sends), else `Content-Length`.
    pub size: Option<u64>,
    pub body: Vec<u8>,
}

impl Downloader {
    /// `GET` (or `HEAD`) an `https://` URL whose answer is small, with a bearer token when given
    /// (sent in a header, never in the URL or a message). A body over `limit` bytes is an error.
    /// `Err` is no answer at all: unreachable, a proxy that refused the tunnel, a timeout.
    pub async fn small(&self, url: &str, bearer: Option<&str>, head: bool, limit: usize) -> Result<Reply, String> {
        if !url.starts_with("https://") {
            return Err("only https:// URLs are accepted".into());
        }
        let mut req = if head { self.client.head(url) } else { self.client.get(url) };
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| one_line(&e))?;
        let header = |k: &str| resp.headers().get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
        let error_code = header("x-error-code");
        let size = header("x-linked-size").or_else(|| header("content-length")).and_then(|v| v.parse().ok());
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.map_err(|e| one_line(&e))?);
            if body.len() > limit {
                return Err(format!("the answer is larger than {limit} bytes"));
            }
        }
        Ok(Reply { status, error_code, size, body })
    }
}

/// An error and its causes on one line, without repeats, with any `user:password@` masked and
/// control characters escaped.
fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    crate::text::for_people(&crate::text::mask_userinfo(&parts.join(": ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_variable_that_is_no_url_is_refused_without_its_password() {
        let env = ProxyEnv { https: Some("http://u:s3cret@bad host:3128".into()), ..Default::default() };
        let e = Downloader::new(&[], env).unwrap_err();
        assert!(e.contains("HTTPS_PROXY") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_certificate_rustls_cannot_parse_is_refused() {
        let e = Downloader::new(&[vec![1, 2, 3]], ProxyEnv::default()).unwrap_err();
        assert!(e.starts_with("certificate 1 of the CA bundle is not usable"), "{e}");
    }

    #[test]
    fn plain_http_is_refused_before_any_connection() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let d = Downloader::new(&[], ProxyEnv::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let e = rt.block_on(d.to_file("http://127.0.0.1:9/x", &dir.path().join("x"))).unwrap_err();
        assert_eq!(e, "only https:// and file:// URLs are accepted");
        assert!(!dir.path().join("x").exists());
    }
}

#[cfg(test)]
#[path = "download_tests.rs"]
mod https_tests;
