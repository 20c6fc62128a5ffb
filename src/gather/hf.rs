//! Reads of a model's own files from Hugging Face (or `HF_ENDPOINT`) for fit (issue 20 item 2):
//! `config.json`, then the safetensors index (else the single weights file's size), through eas's
//! download client (its proxy rules and `--ca-bundle`), each read bounded (connect 5 s, 15 s in
//! all), the entries in parallel, into the cache `config::hf` reads. What the answers mean is
//! `config::hf::access`'s decision.

use std::path::Path;
use std::time::Duration;

use crate::config::fit::Architecture;
use crate::config::hf::{self, Access};

use crate::net::download::{Downloader, Reply};

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
pub const CONNECT: Duration = Duration::from_secs(5);
pub const TOTAL: Duration = Duration::from_secs(15);
/// config.json and an index are a few hundred KiB at most.
const LIMIT: usize = 4 << 20;
/// Where the single weights file's size is kept when a model has no index.
pub const SIZE_FILE: &str = "model.safetensors.size";

/// One entry's read: whether the weights can be downloaded, and its figures when they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub model_id: String,
    pub revision: String,
    pub access: Access,
    pub architecture: Option<Result<Architecture, String>>,
}

/// `HF_ENDPOINT` when set (tests point it at a local server), else Hugging Face.
pub fn endpoint(hf_endpoint: Option<&str>) -> String {
    hf_endpoint.filter(|e| !e.is_empty()).unwrap_or(DEFAULT_ENDPOINT).trim_end_matches('/').to_string()
}

fn url(endpoint: &str, id: &str, rev: &str, file: &str) -> String {
    format!("{endpoint}/{id}/resolve/{rev}/{file}")
}

/// Reads every `(model_id, revision)` at once; `cache` is the `config::hf::cache_base`.
pub async fn read_all(
    d: &Downloader,
    endpoint: &str,
    token: Option<&str>,
    entries: &[(String, String)],
    cache: &Path,
) -> Vec<Read> {
    let reads = entries.iter().map(|(id, rev)| read_one(d, endpoint, token, id, rev, cache));
    futures::future::join_all(reads).await
}

async fn read_one(d: &Downloader, endpoint: &str, token: Option<&str>, id: &str, rev: &str, cache: &Path) -> Read {
    let done = |access: Access, architecture| Read {
        model_id: id.to_string(),
        revision: rev.to_string(),
        access,
        architecture,
    };
    let Some(dir) = hf::cache_dir(cache, id, rev) else {
        return done(Access::Unknown(format!("{id}@{rev} is not a repository name eas reads")), None);
    };
    let get = |file: &'static str, head: bool| {
        let u = url(endpoint, id, rev, file);
        async move {
            tokio::time::timeout(TOTAL, d.small(&u, token, head, LIMIT))
                .await
                .unwrap_or_else(|_| Err("no answer within 15 s".into()))
        }
    };
    let config = match get(hf::CONFIG, false).await {
        Err(e) => {
            return done(
                Access::Unknown(format!("{id}: Hugging Face not reached ({e}): the download was not checked")),
                None,
            );
        }
        Ok(r) => r,
    };
    let access = hf::access(id, config.status, config.error_code.as_deref(), token.is_some());
    if access != Access::Readable {
        return done(access, None);
    }
    let mut files: Vec<(&str, Vec<u8>)> = vec![(hf::CONFIG, config.body.clone())];
    let index = match get(hf::INDEX, false).await {
        Ok(Reply { status: 200..=299, body, .. }) => Some(body),
        Ok(_) => None,
        Err(e) => return done(Access::Readable, Some(Err(format!("{}: {e}", hf::INDEX)))),
    };
    match &index {
        Some(b) => files.push((hf::INDEX, b.clone())),
        None => {
            // A model with one weights file has no index: its size is that file's.
            if let Ok(Reply { status: 200..=299, size: Some(n), .. }) = get("model.safetensors", true).await {
                files.push((SIZE_FILE, n.to_string().into_bytes()));
            }
        }
    }
    if let Err(e) = write_cache(&dir, &files) {
        return done(Access::Readable, Some(Err(e)));
    }
    done(Access::Readable, hf::from_cache(&dir))
}

/// The files as read, each replaced whole (a write then a rename), so a reader never sees half.
fn write_cache(dir: &Path, files: &[(&str, Vec<u8>)]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("the Hugging Face cache {}: {e}", dir.display()))?;
    for (name, body) in files {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, body)
            .and_then(|_| std::fs::rename(&tmp, dir.join(name)))
            .map_err(|e| format!("the Hugging Face cache {}: {e}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "hf_tests.rs"]
mod tests;
