//! Where each bastion artifact's publisher publishes its checksum, and reading it.
//!
//! `eas bastion build --lock` records an artifact's sha256 only when the download matches the
//! publisher's own checksum:
//! - kubectl: `<url>.sha256`, the bare hex digest (Kubernetes release downloads);
//! - helm: `<url>.sha256sum`, `<hex>  <file>` (sha256sum format);
//! - yq: the release's `checksums` file, one line per file: the file name, then one digest per
//!   algorithm in the order `checksums_hashes_order` lists them (one name a line), so SHA-256 at
//!   line N of the order is field N+1 (mikefarah/yq@ae60fb8e `scripts/extract-checksum.sh`,
//!   whose build script writes both with `rhash`: mikefarah/yq@57cd67f0 `scripts/xcompile.sh`);
//! - a Galaxy collection: the collection API's version metadata
//!   (`…/collections/index/<ns>/<name>/versions/<v>/`, derived from the artifact URL's base),
//!   whose `artifact.sha256` is what `ansible-galaxy` itself takes as the tarball's checksum
//!   (ansible/ansible@fef82fb7 `lib/ansible/galaxy/api.py`, `get_collection_version_metadata`;
//!   `artifact.filename` names the file). The exact v3 path on galaxy.ansible.com could not be
//!   fetched here: it follows the pinned artifact URL's prefix.
//!
//! The base image's registry digest comes from the Docker API (`bastion::image::pull_digest`).
//! A publisher that publishes nothing leaves only trust on first use, behind a flag.

use std::path::Path;

use crate::act::bastion::artifacts::{ArtifactError, Cache, Fetcher};

/// Where the checksum of one artifact is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// `<url>.sha256`: the digest alone.
    Sidecar { url: String },
    /// `<url>.sha256sum`: `<digest>  <file>`.
    SumFile { url: String, file: String },
    /// yq's release `checksums` with its `checksums_hashes_order`.
    RhashTable { checksums: String, order: String, file: String },
    /// Galaxy's collection version metadata.
    GalaxyVersion { url: String, file: String },
}

impl Published {
    /// The URL eas names as the checksum's source.
    pub fn source(&self) -> &str {
        match self {
            Published::Sidecar { url } | Published::SumFile { url, .. } | Published::GalaxyVersion { url, .. } => url,
            Published::RhashTable { checksums, .. } => checksums,
        }
    }
}

fn split_file(url: &str) -> Option<(&str, &str)> {
    let (dir, file) = url.rsplit_once('/')?;
    (!file.is_empty()).then_some((dir, file))
}

/// The publisher's checksum for a pins row, by the row's name and its URL; `None` when this
/// publisher is not known to publish one.
pub fn published(name: &str, url: &str) -> Option<Published> {
    let (dir, file) = split_file(url)?;
    match name {
        "kubectl" => Some(Published::Sidecar { url: format!("{url}.sha256") }),
        "helm" => Some(Published::SumFile { url: format!("{url}.sha256sum"), file: file.to_string() }),
        "yq" => Some(Published::RhashTable {
            checksums: format!("{dir}/checksums"),
            order: format!("{dir}/checksums_hashes_order"),
            file: file.to_string(),
        }),
        _ => galaxy(url),
    }
}

/// `<base>/collections/artifacts/<ns>-<name>-<version>.tar.gz` →
/// `<base>/collections/index/<ns>/<name>/versions/<version>/`.
fn galaxy(url: &str) -> Option<Published> {
    let (base, file) = url.split_once("/collections/artifacts/")?;
    let stem = file.strip_suffix(".tar.gz")?;
    let (ns, rest) = stem.split_once('-')?;
    let (name, version) = rest.rsplit_once('-')?;
    if ns.is_empty() || name.is_empty() || !version.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some(Published::GalaxyVersion {
        url: format!("{base}/collections/index/{ns}/{name}/versions/{version}/"),
        file: file.to_string(),
    })
}

fn hex64(s: &str) -> Option<String> {
    let s = s.trim().to_ascii_lowercase();
    (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())).then_some(s)
}

/// `<digest>` alone, or `<digest>  <file>`.
pub fn parse_sidecar(text: &str) -> Result<String, String> {
    text.split_whitespace().next().and_then(hex64).ok_or_else(|| "holds no sha256".to_string())
}

/// sha256sum lines: the digest of `file` (a lone digest is accepted for a one-file sum).
pub fn parse_sum_file(text: &str, file: &str) -> Result<String, String> {
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(d), name) = (words.next(), words.next()) else { continue };
        if name.is_none_or(|n| n.trim_start_matches('*') == file) {
            return hex64(d).ok_or_else(|| format!("the line for {file} holds no sha256"));
        }
    }
    Err(format!("no line for {file}"))
}

/// yq's `checksums`: SHA-256 is the column `checksums_hashes_order` puts it in.
pub fn parse_rhash_table(checksums: &str, order: &str, file: &str) -> Result<String, String> {
    let n = order
        .lines()
        .position(|l| l.trim() == "SHA-256")
        .ok_or_else(|| "checksums_hashes_order lists no SHA-256".to_string())?;
    let line = checksums
        .lines()
        .find(|l| l.split_whitespace().next() == Some(file))
        .ok_or_else(|| format!("checksums has no line for {file}"))?;
    let field = line.split_whitespace().nth(n + 1).ok_or_else(|| format!("the line for {file} is short"))?;
    hex64(field).ok_or_else(|| format!("column {} for {file} is not a sha256: {field:?}", n + 2))
}

/// Galaxy's version metadata: `artifact.sha256`, for `artifact.filename` = `file`.
pub fn parse_galaxy(json: &str, file: &str) -> Result<String, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let a = v.get("artifact").ok_or("no `artifact`")?;
    if let Some(f) = a.get("filename").and_then(|f| f.as_str())
        && f != file
    {
        return Err(format!("artifact.filename is {f}, not {file}"));
    }
    a.get("sha256").and_then(|s| s.as_str()).and_then(hex64).ok_or_else(|| "artifact.sha256 is missing".into())
}

/// Why no verified sha256 could be recorded.
#[derive(Debug, thiserror::Error)]
pub enum PublisherError {
    /// The publisher's checksum could not be had (not published, not found, unreadable).
    #[error("no publisher checksum for {url}: {detail}")]
    Missing { url: String, detail: String },
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
}

async fn fetch_text(fetcher: &impl Fetcher, url: &str, scratch: &Path) -> Result<String, String> {
    let dest = scratch.join("checksum");
    fetcher.fetch(url, &dest).await.map_err(|e| format!("{url}: {e}"))?;
    std::fs::read_to_string(&dest).map_err(|e| format!("{url}: {e}"))
}

/// The publisher's sha256 for the artifact at `url` (pins row `name`).
pub async fn expected(fetcher: &impl Fetcher, name: &str, url: &str) -> Result<(String, Published), PublisherError> {
    let missing = |detail: String| PublisherError::Missing { url: url.to_string(), detail };
    let p = published(name, url).ok_or_else(|| missing("its publisher is not known to publish a checksum".into()))?;
    let scratch = tempfile::tempdir().map_err(|e| missing(e.to_string()))?;
    let got = match &p {
        Published::Sidecar { url } => parse_sidecar(&fetch_text(fetcher, url, scratch.path()).await.map_err(missing)?),
        Published::SumFile { url, file } => {
            parse_sum_file(&fetch_text(fetcher, url, scratch.path()).await.map_err(missing)?, file)
        }
        Published::RhashTable { checksums, order, file } => {
            let c = fetch_text(fetcher, checksums, scratch.path()).await.map_err(missing)?;
            let o = fetch_text(fetcher, order, scratch.path()).await.map_err(missing)?;
            parse_rhash_table(&c, &o, file)
        }
        Published::GalaxyVersion { url, file } => {
            parse_galaxy(&fetch_text(fetcher, url, scratch.path()).await.map_err(missing)?, file)
        }
    };
    let sha = got.map_err(|e| missing(format!("{}: {e}", p.source())))?;
    Ok((sha, p))
}

/// How one artifact's sha256 was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locked {
    /// The download matched the publisher's checksum at this URL.
    Verified { sha256: String, against: String },
    /// No publisher checksum; the download's own sha256, allowed by `--trust-on-first-use`.
    TrustedOnFirstUse { sha256: String, why: String },
}

/// Downloads the artifact into the cache and returns its sha256 only when it matches the
/// publisher's; with `trust_on_first_use`, an artifact whose publisher publishes no checksum is
/// recorded as downloaded, and says so. A mismatch is always an error.
pub async fn lock_artifact(
    fetcher: &impl Fetcher,
    cache: &Cache,
    name: &str,
    url: &str,
    trust_on_first_use: bool,
) -> Result<Locked, PublisherError> {
    match expected(fetcher, name, url).await {
        Ok((sha, p)) => {
            cache.ensure(fetcher, url, &sha).await?;
            Ok(Locked::Verified { sha256: sha, against: p.source().to_string() })
        }
        Err(PublisherError::Missing { detail, .. }) if trust_on_first_use => {
            let sha = cache.trust_on_first_use(fetcher, url).await?;
            Ok(Locked::TrustedOnFirstUse { sha256: sha, why: detail })
        }
        Err(e) => Err(e),
    }
}

/// The sha256 to record and the line that reports it.
pub fn describe(name: &str, l: &Locked) -> (String, String) {
    match l {
        Locked::Verified { sha256, against } => {
            (sha256.clone(), format!("{name}: sha256 {sha256} matches the publisher's checksum ({against})"))
        }
        Locked::TrustedOnFirstUse { sha256, why } => (
            sha256.clone(),
            format!("TRUSTED ON FIRST USE: {name} recorded with sha256 {sha256} as downloaded ({why})"),
        ),
    }
}

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

/// The pins row's `source` once locked: where the sha256 came from, and when.
pub fn row_source(url: &str, l: &Locked) -> String {
    match l {
        Locked::Verified { against, .. } => {
            format!(
                "{url}: sha256 matched the publisher's checksum at {against} (eas bastion build --lock, {})",
                today()
            )
        }
        Locked::TrustedOnFirstUse { why, .. } => format!(
            "{url}: sha256 TRUSTED ON FIRST USE, computed from the download (eas bastion build --lock \
             --trust-on-first-use, {}); no publisher checksum: {why}",
            today()
        ),
    }
}

/// The base-image row's `source`: the registry's digest, as pulled.
pub fn base_source(reference: &str, digest: &str) -> String {
    format!(
        "{reference}@{digest}: the registry's digest (Docker API pull, then RepoDigests; eas bastion build --lock, {})",
        today()
    )
}

pub fn set_source(pins: &mut crate::pins::Pins, name: &str, source: &str) {
    if let Some(row) =
        pins.pins.iter_mut().find(|p| p.profile == crate::act::bastion::context::PROFILE && p.name == name)
    {
        row.source = source.to_string();
    }
}

#[cfg(test)]
#[path = "publisher_tests.rs"]
mod tests;
