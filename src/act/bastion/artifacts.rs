//! Pinned artifacts on the host: downloaded once, checked against their sha256, and kept in a
//! cache addressed by that sha256 (`$XDG_CACHE_HOME/eas/artifacts/<sha256>`).
//!
//! A cached file is re-checked each time it goes into a build context; one that no longer
//! matches its name is discarded and fetched again, so a damaged cache cannot reach an image.

use std::future::Future;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::act::bastion::context::Artifact;
use crate::net::download::Downloader;
use crate::net::proxy::ProxyEnv;

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("checksum failed for {url}: expected sha256 {expected}, computed {computed}")]
    Mismatch { url: String, expected: String, computed: String },
    #[error("cannot download {url}: {detail}")]
    Fetch { url: String, detail: String },
    #[error("artifact cache {path}: {source}")]
    Cache { path: String, source: std::io::Error },
}

/// Puts the bytes behind a URL into a file. The seam between artifact logic and the network.
pub trait Fetcher {
    fn fetch(&self, url: &str, dest: &Path) -> impl Future<Output = Result<(), String>> + Send;
}

/// `file://` URLs are copied; `https://` URLs are downloaded in-process (`net::download`), with
/// the `--ca-bundle` certificates trusted and the proxy chosen by curl's rules.
#[derive(Clone, Debug)]
pub struct SystemFetcher {
    download: Downloader,
}

impl SystemFetcher {
    /// A fetcher trusting the system's CAs and `extra_roots` (DER), proxied as `env` says.
    pub fn new(extra_roots: &[Vec<u8>], env: ProxyEnv) -> Result<SystemFetcher, String> {
        Ok(SystemFetcher { download: Downloader::new(extra_roots, env)? })
    }
}

impl Fetcher for SystemFetcher {
    async fn fetch(&self, url: &str, dest: &Path) -> Result<(), String> {
        if let Some(path) = url.strip_prefix("file://") {
            // Name both ends: a full or read-only cache is the destination's fault, not the source's.
            return tokio::fs::copy(path, dest)
                .await
                .map(drop)
                .map_err(|e| format!("copying {path} into the cache at {}: {e}", dest.display()));
        }
        self.download.to_file(url, dest).await
    }
}

#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: PathBuf) -> Cache {
        Cache { dir }
    }

    /// `$XDG_CACHE_HOME/eas/artifacts`, else `~/.cache/eas/artifacts`.
    pub fn default_dir(env: &crate::settings::Env) -> PathBuf {
        let base = env.cache_home().unwrap_or_else(|| PathBuf::from(".cache"));
        base.join("eas").join("artifacts")
    }

    pub fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(sha256)
    }

    fn err(&self, path: &Path) -> impl FnOnce(std::io::Error) -> ArtifactError {
        let path = path.display().to_string();
        move |source| ArtifactError::Cache { path, source }
    }

    /// The verified cached file for a pinned artifact, downloading it when absent or damaged.
    /// Returns the path and whether a stale cache entry was replaced.
    pub async fn ensure(
        &self,
        fetcher: &impl Fetcher,
        url: &str,
        expected: &str,
    ) -> Result<(PathBuf, bool), ArtifactError> {
        let path = self.path(expected);
        let mut replaced = false;
        if path.exists() {
            if file_sha256(&path).map_err(self.err(&path))? == expected {
                return Ok((path, false));
            }
            std::fs::remove_file(&path).map_err(self.err(&path))?;
            replaced = true;
        }
        let (tmp, computed) = self.download(fetcher, url).await?;
        if computed != expected {
            let _ = std::fs::remove_file(&tmp);
            return Err(ArtifactError::Mismatch { url: url.into(), expected: expected.into(), computed });
        }
        std::fs::rename(&tmp, &path).map_err(self.err(&path))?;
        Ok((path, replaced))
    }

    /// Downloads an artifact that has no pinned sha256 and keeps it under the sha256 it has now.
    pub async fn trust_on_first_use(&self, fetcher: &impl Fetcher, url: &str) -> Result<String, ArtifactError> {
        let (tmp, computed) = self.download(fetcher, url).await?;
        let path = self.path(&computed);
        std::fs::rename(&tmp, &path).map_err(self.err(&path))?;
        Ok(computed)
    }

    async fn download(&self, fetcher: &impl Fetcher, url: &str) -> Result<(PathBuf, String), ArtifactError> {
        std::fs::create_dir_all(&self.dir).map_err(self.err(&self.dir))?;
        let tmp = tempfile::Builder::new()
            .prefix(".partial-")
            .tempfile_in(&self.dir)
            .map_err(self.err(&self.dir))?
            .into_temp_path();
        if let Err(detail) = fetcher.fetch(url, &tmp).await {
            return Err(ArtifactError::Fetch { url: url.into(), detail });
        }
        let computed = file_sha256(&tmp).map_err(self.err(&tmp))?;
        let kept =
            tmp.keep().map_err(|e| ArtifactError::Cache { path: self.dir.display().to_string(), source: e.error })?;
        Ok((kept, computed))
    }
}

pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.write_all(&buf[..n])?;
    }
    Ok(format!("{:x}", h.finalize()))
}

/// The artifacts with the sha256 each goes into the context under.
pub fn pinned(artifacts: &[Artifact]) -> Vec<(Artifact, String)> {
    artifacts.iter().filter_map(|a| a.sha256.clone().map(|s| (a.clone(), s))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::bastion::context::sha256_hex;

    fn fetcher() -> SystemFetcher {
        SystemFetcher::new(&[], ProxyEnv::default()).unwrap()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    struct Served {
        _dir: tempfile::TempDir,
        url: String,
        file: PathBuf,
        sha: String,
    }

    fn served(body: &[u8]) -> Served {
        let (dir, file) = crate::testing::temp_path("yq");
        std::fs::write(&file, body).unwrap();
        Served { url: format!("file://{}", file.display()), file, sha: sha256_hex(body), _dir: dir }
    }

    #[test]
    fn downloads_once_then_serves_from_the_cache() {
        let s = served(b"yq v4\n");
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(cache_dir.path().join("artifacts"));
        let (p, replaced) = rt().block_on(cache.ensure(&fetcher(), &s.url, &s.sha)).unwrap();
        assert_eq!((p.clone(), replaced), (cache.path(&s.sha), false));
        assert_eq!(std::fs::read(&p).unwrap(), b"yq v4\n");
        // The source is gone: a second call must not need it.
        std::fs::remove_file(&s.file).unwrap();
        assert_eq!(rt().block_on(cache.ensure(&fetcher(), &s.url, &s.sha)).unwrap(), (p, false));
        let left: Vec<_> = std::fs::read_dir(cache.dir.clone()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from(&s.sha)], "no partial files left");
    }

    #[test]
    fn a_tampered_download_names_url_expected_and_computed() {
        let s = served(b"tampered\n");
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(cache_dir.path().to_path_buf());
        let expected = sha256_hex(b"original\n");
        let e = rt().block_on(cache.ensure(&fetcher(), &s.url, &expected)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("checksum failed for {}: expected sha256 {expected}, computed {}", s.url, s.sha)
        );
        assert_eq!(std::fs::read_dir(cache_dir.path()).unwrap().count(), 0, "nothing cached");
    }

    #[test]
    fn a_damaged_cache_entry_is_replaced() {
        let s = served(b"helm\n");
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(cache_dir.path().to_path_buf());
        std::fs::write(cache.path(&s.sha), b"bit rot").unwrap();
        let (p, replaced) = rt().block_on(cache.ensure(&fetcher(), &s.url, &s.sha)).unwrap();
        assert!(replaced);
        assert_eq!(std::fs::read(p).unwrap(), b"helm\n");
    }

    #[test]
    fn trust_on_first_use_keeps_the_file_under_its_sha256() {
        let s = served(b"kubectl\n");
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(cache_dir.path().to_path_buf());
        let sha = rt().block_on(cache.trust_on_first_use(&fetcher(), &s.url)).unwrap();
        assert_eq!(sha, s.sha);
        assert!(cache.path(&sha).exists());
    }

    #[test]
    fn unusable_urls_fail_with_the_url() {
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(cache_dir.path().to_path_buf());
        let sha = "0".repeat(64);
        for (url, why) in [
            ("http://example.invalid/yq", "only https:// and file://"),
            ("file:///nonexistent/eas/yq", "/nonexistent/eas/yq"),
        ] {
            let e = rt().block_on(cache.ensure(&fetcher(), url, &sha)).unwrap_err().to_string();
            assert!(e.starts_with(&format!("cannot download {url}: ")) && e.contains(why), "{e}");
        }
    }
}
