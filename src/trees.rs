//! The upstream trees (EAS, EI, EAT) at their pinned commits: a bare cache per repository under
//! `$XDG_CACHE_HOME/eas/repos/`, verified to hold the pinned commit, and a per-run work tree
//! cloned from it. An operator can point at an existing clone or mirror (`--eas-repo DIR`) to
//! work offline. Uses the real `git` program.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::pins::Pin;

#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("git {args}: {msg}")]
    Git { args: String, msg: String },
    #[error("{repo}: the pinned commit {sha} is not in {source_desc}")]
    Missing { repo: String, sha: String, source_desc: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs git with a timeout ([`crate::git`]); stdout on success. Call from a blocking thread.
pub fn git(dir: Option<&Path>, args: &[&str], timeout: Duration) -> Result<String, TreeError> {
    git_trusting(dir, args, timeout, None)
}

/// Runs git with a timeout, trusting the CA file `ca` (`--ca-bundle` plus the system's, see
/// `net::trust::GitCaFile`) for HTTPS remotes when given.
fn git_trusting(dir: Option<&Path>, args: &[&str], timeout: Duration, ca: Option<&Path>) -> Result<String, TreeError> {
    let desc = args.join(" ");
    let g = crate::git::Git { ca: ca.map(Path::to_path_buf), ..crate::git::Git::new(dir, args, timeout) };
    match crate::git::run_blocking(g) {
        Ok(o) if o.ok => Ok(o.stdout.trim().to_string()),
        Ok(o) => Err(TreeError::Git { args: desc, msg: o.stderr.trim().to_string() }),
        Err(e) => Err(TreeError::Git { args: desc, msg: e.to_string() }),
    }
}

const LOCAL: Duration = Duration::from_secs(60);
const NETWORK: Duration = Duration::from_secs(600);

/// Where one repository's objects come from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Fetch from this URL into the cache.
    Remote(String),
    /// Use an existing clone or mirror as it is (offline).
    Local(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Resolved {
    /// The git directory holding the commit.
    pub objects: PathBuf,
    pub sha: String,
}

pub fn cache_dir(env: &crate::settings::Env) -> PathBuf {
    let base = env.cache_home().unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("eas").join("repos")
}

fn full_sha(objects: &Path, sha: &str) -> Option<String> {
    git(Some(objects), &["rev-parse", "--verify", "--quiet", &format!("{sha}^{{commit}}")], LOCAL).ok()
}

/// Makes sure the pinned commit is available, fetching into the cache when it is not; `ca` is the
/// CA file git trusts for the fetch (`--ca-bundle`), when given.
pub fn resolve(pin: &Pin, origin: &Origin, cache: &Path, ca: Option<&Path>) -> Result<Resolved, TreeError> {
    let repo = pin.repo.clone().unwrap_or_else(|| pin.name.clone());
    let sha = pin.sha.clone().unwrap_or_default();
    match origin {
        Origin::Local(dir) => {
            let full = full_sha(dir, &sha).ok_or_else(|| TreeError::Missing {
                repo: repo.clone(),
                sha: sha.clone(),
                source_desc: dir.display().to_string(),
            })?;
            Ok(Resolved { objects: dir.clone(), sha: full })
        }
        Origin::Remote(url) => {
            let dir = cache.join(format!("{repo}.git"));
            if !dir.join("HEAD").exists() {
                clone_mirror(&dir, url, ca)?;
            }
            if let Some(full) = full_sha(&dir, &sha) {
                return Ok(Resolved { objects: dir, sha: full });
            }
            git_trusting(Some(&dir), &["fetch", "--quiet", "--prune", "--tags", "origin"], NETWORK, ca)?;
            let full = full_sha(&dir, &sha).ok_or_else(|| TreeError::Missing {
                repo: repo.clone(),
                sha: sha.clone(),
                source_desc: format!("{url} (fetched into {})", dir.display()),
            })?;
            Ok(Resolved { objects: dir, sha: full })
        }
    }
}

/// The cache's mirror of `repo`, brought up to date with every branch and tag at `url`: cloned
/// when absent, else fetched (forced, pruned), so a ref that was force-pushed shows its new tip
/// while commits fetched before stay readable. `eas pins lock` resolves pins here.
/// Git trusts the CA file `ca` (`--ca-bundle`) for HTTPS remotes when given.
pub fn update_mirror(repo: &str, url: &str, cache: &Path, ca: Option<&Path>) -> Result<PathBuf, TreeError> {
    let dir = cache.join(format!("{repo}.git"));
    if !dir.join("HEAD").exists() {
        clone_mirror(&dir, url, ca)?;
        return Ok(dir);
    }
    git_trusting(
        Some(&dir),
        &["fetch", "--quiet", "--prune", url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        NETWORK,
        ca,
    )?;
    Ok(dir)
}

/// Clones `url` as a mirror into `dir`, through `dir.git.partial` renamed at the end, so that an
/// interrupted clone never passes for a cache.
fn clone_mirror(dir: &Path, url: &str, ca: Option<&Path>) -> Result<(), TreeError> {
    std::fs::create_dir_all(dir.parent().expect("has parent"))?;
    let tmp = dir.with_extension("git.partial");
    let _ = std::fs::remove_dir_all(&tmp);
    git_trusting(None, &["clone", "--mirror", "--quiet", url, &tmp.to_string_lossy()], NETWORK, ca)?;
    std::fs::rename(&tmp, dir)?;
    Ok(())
}

/// A fresh work tree at the commit, detached, sharing the cache's objects.
pub fn work_tree(res: &Resolved, dest: &Path, origin_url: Option<&str>) -> Result<(), TreeError> {
    if dest.exists() {
        std::fs::remove_dir_all(dest)?;
    }
    std::fs::create_dir_all(dest.parent().expect("has parent"))?;
    git(
        None,
        &["clone", "--quiet", "--shared", "--no-checkout", &res.objects.to_string_lossy(), &dest.to_string_lossy()],
        LOCAL,
    )?;
    git(Some(dest), &["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", &res.sha], LOCAL)?;
    if let Some(url) = origin_url {
        git(Some(dest), &["remote", "set-url", "origin", url], LOCAL)?;
    }
    Ok(())
}

/// The commit a work tree is at, to verify before acting on it.
pub fn head(dir: &Path) -> Result<String, TreeError> {
    git(Some(dir), &["rev-parse", "HEAD"], LOCAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// git in `dir` through the module's own runner, with a test identity for commits.
    fn sh(dir: &Path, args: &[&str]) -> String {
        let mut with = vec!["-c", "user.name=t", "-c", "user.email=t@example.invalid"];
        with.extend_from_slice(args);
        git(Some(dir), &with, LOCAL).unwrap_or_else(|e| panic!("{e}"))
    }

    fn upstream(dir: &Path) -> (String, String) {
        std::fs::create_dir_all(dir).unwrap();
        sh(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("f"), "one").unwrap();
        sh(dir, &["add", "."]);
        sh(dir, &["commit", "-qm", "one"]);
        let first = sh(dir, &["rev-parse", "HEAD"]);
        std::fs::write(dir.join("f"), "two").unwrap();
        sh(dir, &["commit", "-qam", "two"]);
        (first, sh(dir, &["rev-parse", "HEAD"]))
    }

    fn pin(sha: &str) -> Pin {
        Pin {
            profile: "t".into(),
            name: "eas".into(),
            repo: Some("intel/enterprise-ai-solutions".into()),
            git_ref: "main".into(),
            sha: Some(sha.into()),
            locked: false,
            date: "d".into(),
            source: "s".into(),
            url: None,
            sha256: None,
        }
    }

    #[test]
    fn remote_is_cached_then_work_tree_is_at_the_pin() {
        let (tmp, up) = crate::testing::temp_path("up");
        let (first, _second) = upstream(&up);
        let cache = tmp.path().join("cache");
        let origin = Origin::Remote(up.to_string_lossy().to_string());
        let res = resolve(&pin(&first[..7]), &origin, &cache, None).unwrap();
        assert_eq!(res.sha, first);
        assert!(cache.join("intel/enterprise-ai-solutions.git/HEAD").exists());
        let wt = tmp.path().join("run/eas");
        work_tree(&res, &wt, Some("https://example.invalid/eas")).unwrap();
        assert_eq!(head(&wt).unwrap(), first);
        assert_eq!(std::fs::read_to_string(wt.join("f")).unwrap(), "one");
        // A later run reuses the cache even when the origin is gone.
        std::fs::remove_dir_all(&up).unwrap();
        assert_eq!(resolve(&pin(&first), &origin, &cache, None).unwrap().sha, first);
    }

    #[test]
    fn a_commit_the_origin_lacks_is_named() {
        let (tmp, up) = crate::testing::temp_path("up");
        upstream(&up);
        let err = resolve(&pin("deadbeef"), &Origin::Local(up.clone()), tmp.path(), None).unwrap_err();
        assert!(matches!(err, TreeError::Missing { .. }), "{err}");
        assert!(err.to_string().contains("deadbeef"));
    }

    /// An HTTPS remote whose CA only the bundle names: git fetches it with the bundle's CA file
    /// (system certificates plus the bundle, through GIT_SSL_CAINFO) and fails without it.
    #[test]
    fn an_https_remote_is_fetched_trusting_the_ca_bundle_and_refused_without_it() {
        let (tmp, up) = crate::testing::temp_path("up");
        let (first, _second) = upstream(&up);
        sh(&up, &["update-server-info"]);
        let server = crate::tls_front::TlsFront::files(up.join(".git"));
        let origin = Origin::Remote(format!("{}/", server.url()));

        let err = resolve(&pin(&first), &origin, &tmp.path().join("untrusting"), None).unwrap_err();
        assert!(err.to_string().to_lowercase().contains("certificate"), "{err}");

        let ca = crate::net::trust::GitCaFile::write(std::slice::from_ref(&server.ca_der)).unwrap();
        let cache = tmp.path().join("trusting");
        let res = resolve(&pin(&first), &origin, &cache, Some(ca.path())).unwrap();
        assert_eq!(res.sha, first);
        assert!(cache.join("intel/enterprise-ai-solutions.git/HEAD").exists());
    }
}
