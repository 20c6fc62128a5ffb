//! The bastion's build context, decided from the pins: which files it holds, which base image
//! it starts from, and the digest that names the image. Pure: bytes and pins in, choices out.
//!
//! The context digest is the sha256 of `eas-context.manifest`, a file in the context that lists
//! the sha256, mode and path of every other file plus the base image argument. It identifies the
//! context's content exactly, and it can be computed from the pinned sha256s without reading the
//! (large) artifacts, which keeps the reuse path fast.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::pins::{Pin, Pins};

pub const DOCKERFILE: &str = include_str!("../../../bastion/Dockerfile");
pub const REQUIREMENTS_LOCK: &str = include_str!("../../../bastion/requirements.lock");
pub const PROFILE: &str = "bastion";
pub const BASE_ROW: &str = "base-image";
pub const MANIFEST_PATH: &str = "eas-context.manifest";
pub const CA_PATH: &str = "ca/extra-ca.crt";
/// The toolbox check (`toolbox::check_script`), run by the build and on a reused image.
pub const TOOLBOX_CHECK_PATH: &str = "toolbox-check.sh";
const MANIFEST_SCHEMA: &str = "eas-bastion-context/v1";
const IMAGE_REPO: &str = "eas-bastion";

#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error(
        "the base image {reference} is not pinned by digest{}",
        if *.from_pins { " (the pins record no digest for it)" } else { "" }
    )]
    UnpinnedBase { reference: String, from_pins: bool },
    #[error("bastion/requirements.lock line {line}: {detail}")]
    LockMalformed { line: usize, detail: String },
    #[error("bastion/requirements.lock does not match the pins: {0}")]
    LockStale(String),
    #[error("{count} bastion artifact(s) have no pinned sha256: {list}", count = .0.len(), list = .0.join(", "))]
    MissingSha256(Vec<String>),
    #[error("the bastion's Dockerfile does not provide {}", .0.join("; "))]
    ToolsUnprovided(Vec<String>),
}

/// A pinned file the context carries, downloaded and checked on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub name: String,
    pub url: String,
    pub sha256: Option<String>,
    pub context_path: String,
    pub mode: u32,
}

/// The bastion rows that name a download (`url`): kubectl, helm, yq, the collection tarball.
pub fn artifacts(pins: &Pins) -> Vec<Artifact> {
    pins.pins
        .iter()
        .filter(|p| p.profile == PROFILE)
        .filter_map(|p| p.url.as_ref().map(|url| artifact(p, url)))
        .collect()
}

fn artifact(p: &Pin, url: &str) -> Artifact {
    let archive = [".tar.gz", ".tgz"].iter().find(|s| url.ends_with(*s));
    let context_path = format!("artifacts/{}{}", p.name, if archive.is_some() { ".tar.gz" } else { "" });
    Artifact {
        name: p.name.clone(),
        url: url.to_string(),
        sha256: p.artifact_sha256().map(str::to_string),
        context_path,
        mode: if archive.is_some() { 0o644 } else { 0o755 },
    }
}

/// Every artifact without a pinned sha256, refused unless `--lock` records it.
pub fn require_sha256(artifacts: &[Artifact]) -> Result<(), ContextError> {
    let missing: Vec<String> =
        artifacts.iter().filter(|a| a.sha256.is_none()).map(|a| format!("{} ({})", a.name, a.url)).collect();
    if missing.is_empty() { Ok(()) } else { Err(ContextError::MissingSha256(missing)) }
}

/// The image the bastion starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// `REF@sha256:<digest>`: pinned by its registry digest.
    Digest(String),
    /// A local image accepted with `--allow-unpinned-base`; it is pinned by its local image ID.
    Local(String),
}

/// The base image rule: a registry reference must carry `@sha256:<64 hex>`; anything else is
/// refused unless `allow_unpinned`, which accepts a local image and pins it by its image ID.
pub fn choose_base(pins: &Pins, requested: Option<&str>, allow_unpinned: bool) -> Result<Base, ContextError> {
    let (reference, from_pins) = match requested {
        Some(r) => (r.to_string(), false),
        None => {
            let row = pins.row(PROFILE, BASE_ROW);
            let reference = match row {
                Some(p) => match p.artifact_sha256() {
                    Some(d) if !has_digest(&p.git_ref) => format!("{}@sha256:{d}", p.git_ref),
                    _ => p.git_ref.clone(),
                },
                None => "ubuntu:24.04".to_string(),
            };
            (reference, true)
        }
    };
    if has_digest(&reference) {
        Ok(Base::Digest(reference))
    } else if allow_unpinned {
        Ok(Base::Local(reference))
    } else {
        Err(ContextError::UnpinnedBase { reference, from_pins })
    }
}

pub fn has_digest(reference: &str) -> bool {
    reference.rsplit_once("@sha256:").is_some_and(|(name, d)| !name.is_empty() && is_sha256(d))
}

pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One requirement of the lock: `name==version` with the hashes pip accepts for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub name: String,
    pub version: String,
    pub hashes: Vec<String>,
}

pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if matches!(c, '_' | '.') { '-' } else { c.to_ascii_lowercase() };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

pub fn parse_lock(text: &str) -> Result<Vec<Requirement>, ContextError> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split_once(" #").map_or(raw, |(l, _)| l).trim_end();
        if line.trim_start().starts_with('#') || (logical.is_empty() && line.trim().is_empty()) {
            continue;
        }
        if logical.is_empty() {
            start = i + 1;
        }
        match line.strip_suffix('\\') {
            Some(body) => logical.push_str(body),
            None => {
                logical.push_str(line);
                out.push(requirement(&logical, start)?);
                logical.clear();
            }
        }
    }
    if !logical.is_empty() {
        return Err(ContextError::LockMalformed { line: start, detail: "ends with a continuation".into() });
    }
    Ok(out)
}

fn requirement(logical: &str, line: usize) -> Result<Requirement, ContextError> {
    let bad = |detail: String| ContextError::LockMalformed { line, detail };
    let mut words = logical.split_whitespace();
    let spec = words.next().unwrap_or_default();
    let (name, version) =
        spec.split_once("==").ok_or_else(|| bad(format!("{spec:?} is not an exact name==version pin")))?;
    let mut hashes = Vec::new();
    for w in words {
        match w.strip_prefix("--hash=sha256:") {
            Some(h) if is_sha256(h) => hashes.push(h.to_string()),
            _ => return Err(bad(format!("{w:?} is not a --hash=sha256:<64 hex> option"))),
        }
    }
    if hashes.is_empty() {
        return Err(bad(format!("{spec} has no --hash")));
    }
    Ok(Requirement { name: normalize(name), version: version.to_string(), hashes })
}

/// Every `python:<name>` row of the bastion profile is in the lock at its pinned version, with
/// its pinned wheel sha256 among the accepted hashes.
pub fn check_lock(pins: &Pins, lock: &[Requirement]) -> Result<(), ContextError> {
    let mut problems = Vec::new();
    for p in pins.pins.iter().filter(|p| p.profile == PROFILE) {
        let Some(name) = p.name.strip_prefix("python:") else { continue };
        let name = normalize(name);
        match lock.iter().find(|r| r.name == name) {
            None => problems.push(format!("{name} is pinned at {} but not in the lock", p.git_ref)),
            Some(r) if r.version != p.git_ref => {
                problems.push(format!("{name}: pinned {}, locked {}", p.git_ref, r.version))
            }
            Some(r) => {
                if let Some(h) = p.artifact_sha256()
                    && !r.hashes.iter().any(|x| x == h)
                {
                    problems.push(format!("{name}=={}: pinned sha256 {h} is not among the locked hashes", r.version));
                }
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(ContextError::LockStale(problems.join("; "))) }
}

/// Where a context file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Inline(Vec<u8>),
    /// A verified artifact in the cache.
    Cached(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub mode: u32,
    pub sha256: String,
    pub body: Body,
}

impl File {
    pub fn inline(path: &str, bytes: Vec<u8>) -> File {
        File { path: path.to_string(), mode: 0o644, sha256: sha256_hex(&bytes), body: Body::Inline(bytes) }
    }
}

/// The whole context: its files (without the manifest) and the base image build argument.
#[derive(Debug, Clone)]
pub struct Context {
    pub files: Vec<File>,
    pub base_arg: String,
}

impl Context {
    /// Dockerfile, lock, the optional CA bundle, and each artifact (cached at `cache_path`).
    pub fn new(
        base_arg: String,
        ca_bundle: Option<Vec<u8>>,
        artifacts: &[(Artifact, String)],
        cache_path: impl Fn(&str) -> PathBuf,
    ) -> Context {
        let mut files = vec![
            File::inline("Dockerfile", DOCKERFILE.as_bytes().to_vec()),
            File::inline("requirements.lock", REQUIREMENTS_LOCK.as_bytes().to_vec()),
            File::inline(
                TOOLBOX_CHECK_PATH,
                crate::act::bastion::toolbox::check_script(crate::act::bastion::toolbox::table()).into_bytes(),
            ),
        ];
        if let Some(ca) = ca_bundle {
            files.push(File::inline(CA_PATH, ca));
        }
        for (a, sha) in artifacts {
            files.push(File {
                path: a.context_path.clone(),
                mode: a.mode,
                sha256: sha.clone(),
                body: Body::Cached(cache_path(sha)),
            });
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Context { files, base_arg }
    }

    pub fn manifest(&self) -> String {
        let mut s = format!("{MANIFEST_SCHEMA}\nbase {}\n", self.base_arg);
        for f in &self.files {
            s.push_str(&format!("{} {:04o} {}\n", f.sha256, f.mode, f.path));
        }
        s
    }

    /// The sha256 of the manifest: the context's identity.
    pub fn digest(&self) -> String {
        sha256_hex(self.manifest().as_bytes())
    }

    pub fn tag(&self) -> String {
        format!("{IMAGE_REPO}:{}", &self.digest()[..12])
    }

    /// The context as an uncompressed tar, reading cached artifacts from disk. Each cached file
    /// is read once and hashed from the very bytes that go into the tar: a file swapped in the
    /// cache after `Cache::ensure` checked it fails the build instead of reaching the image
    /// under a manifest that claims the pinned sha256.
    pub fn tar(&self) -> std::io::Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        dir.set_mtime(0);
        b.append_data(&mut dir, "ca/", std::io::empty())?;
        let manifest = File::inline(MANIFEST_PATH, self.manifest().into_bytes());
        for f in self.files.iter().chain(std::iter::once(&manifest)) {
            let bytes = match &f.body {
                Body::Inline(v) => std::borrow::Cow::Borrowed(v.as_slice()),
                Body::Cached(p) => {
                    let bytes = std::fs::read(p)?;
                    let found = sha256_hex(&bytes);
                    if found != f.sha256 {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!(
                                "{} changed in the cache after it was checked: sha256 {found}, pinned {}; remove {} and re-run",
                                f.path,
                                f.sha256,
                                p.display()
                            ),
                        ));
                    }
                    std::borrow::Cow::Owned(bytes)
                }
            };
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(f.mode);
            h.set_mtime(0);
            h.set_uid(0);
            h.set_gid(0);
            b.append_data(&mut h, &f.path, bytes.as_ref())?;
        }
        b.into_inner()
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pins::EMBEDDED;

    fn pins() -> Pins {
        Pins::parse(EMBEDDED).unwrap()
    }

    fn with_base(sha256: Option<&str>) -> Pins {
        let mut p = pins();
        let row = p.pins.iter_mut().find(|r| r.profile == PROFILE && r.name == BASE_ROW).unwrap();
        row.sha256 = Some(sha256.map(str::to_string));
        p
    }

    #[test]
    fn committed_lock_agrees_with_committed_pins() {
        let lock = parse_lock(REQUIREMENTS_LOCK).unwrap();
        check_lock(&pins(), &lock).unwrap();
        // The closure, not only the four pinned packages.
        assert!(lock.iter().any(|r| r.name == "ansible-core"), "{lock:?}");
        assert!(lock.len() > 4);
    }

    #[test]
    fn a_stale_lock_is_named() {
        let mut p = pins();
        let row = p.pins.iter_mut().find(|r| r.name == "python:jmespath").unwrap();
        row.git_ref = "1.0.1".into();
        let lock = parse_lock(REQUIREMENTS_LOCK).unwrap();
        let e = check_lock(&p, &lock).unwrap_err().to_string();
        assert!(e.contains("jmespath: pinned 1.0.1, locked 1.1.0"), "{e}");

        let mut p = pins();
        let row = p.pins.iter_mut().find(|r| r.name == "python:ansible").unwrap();
        row.sha256 = Some(Some("0".repeat(64)));
        let e = check_lock(&p, &lock).unwrap_err().to_string();
        assert!(e.contains("ansible==12.3.0: pinned sha256 000"), "{e}");
    }

    #[test]
    fn lock_lines_must_be_exact_and_hashed() {
        let h = "a".repeat(64);
        let ok = format!(
            "# c\nFoo_Bar==1.0 \\\n    --hash=sha256:{h} \\\n    --hash=sha256:{h}\n\nbaz==2 --hash=sha256:{h}\n"
        );
        let r = parse_lock(&ok).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].name.as_str(), r[0].version.as_str(), r[0].hashes.len()), ("foo-bar", "1.0", 2));
        for (bad, why) in [
            (format!("foo>=1.0 --hash=sha256:{h}\n"), "exact"),
            ("foo==1.0\n".to_string(), "no --hash"),
            ("foo==1.0 --hash=md5:abc\n".to_string(), "--hash=sha256"),
            (format!("foo==1.0 \\\n --hash=sha256:{h} \\\n"), "continuation"),
        ] {
            let e = parse_lock(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn base_image_rule() {
        let d = "b".repeat(64);
        // The committed pins have no digest: refused, and the message says so.
        let e = choose_base(&pins(), None, false).unwrap_err().to_string();
        assert!(e.contains("ubuntu:24.04 is not pinned by digest (the pins record no digest"), "{e}");
        assert_eq!(
            choose_base(&with_base(Some(&d)), None, false).unwrap(),
            Base::Digest(format!("ubuntu:24.04@sha256:{d}"))
        );
        let r = format!("mirror.example/ubuntu:24.04@sha256:{d}");
        assert_eq!(choose_base(&pins(), Some(&r), false).unwrap(), Base::Digest(r));
        assert!(matches!(
            choose_base(&pins(), Some("eas-test-base:bookworm"), false),
            Err(ContextError::UnpinnedBase { from_pins: false, .. })
        ));
        assert_eq!(
            choose_base(&pins(), Some("eas-test-base:bookworm"), true).unwrap(),
            Base::Local("eas-test-base:bookworm".into())
        );
        assert!(!has_digest("ubuntu@sha256:abc"));
        assert!(!has_digest(&format!("@sha256:{d}")));
    }

    #[test]
    fn artifacts_come_from_bastion_rows_with_a_url() {
        let a = artifacts(&pins());
        let names: Vec<(&str, &str, u32)> =
            a.iter().map(|a| (a.name.as_str(), a.context_path.as_str(), a.mode)).collect();
        assert_eq!(
            names,
            vec![
                ("kubectl", "artifacts/kubectl", 0o755),
                ("helm", "artifacts/helm.tar.gz", 0o644),
                ("yq", "artifacts/yq", 0o755),
                ("kubernetes.core", "artifacts/kubernetes.core.tar.gz", 0o644),
            ]
        );
        let e = require_sha256(&a).unwrap_err().to_string();
        assert!(e.starts_with("4 bastion artifact(s) have no pinned sha256: kubectl (https://"), "{e}");
    }

    #[test]
    fn the_dockerfile_copies_every_context_path() {
        for a in artifacts(&pins()) {
            assert!(DOCKERFILE.contains(&a.context_path), "Dockerfile does not use {}", a.context_path);
        }
        assert!(DOCKERFILE.contains("COPY ca/ "));
        assert!(DOCKERFILE.contains(MANIFEST_PATH));
        assert!(DOCKERFILE.contains("--require-hashes --no-deps"));
    }

    fn ctx(base: &str, ca: Option<&[u8]>, kubectl_sha: &str) -> Context {
        let a = artifacts(&pins());
        let list = vec![(a[0].clone(), kubectl_sha.to_string())];
        Context::new(base.into(), ca.map(<[u8]>::to_vec), &list, |s| PathBuf::from(format!("/cache/{s}")))
    }

    #[test]
    fn the_digest_follows_every_input() {
        let k1 = "1".repeat(64);
        let k2 = "2".repeat(64);
        let base = ctx("img@sha256:x", None, &k1);
        assert_eq!(base.digest(), ctx("img@sha256:x", None, &k1).digest(), "deterministic");
        assert_eq!(base.tag(), format!("eas-bastion:{}", &base.digest()[..12]));
        let variants = [
            ctx("other@sha256:x", None, &k1),
            ctx("img@sha256:x", Some(b"PEM"), &k1),
            ctx("img@sha256:x", Some(b"PEM2"), &k1),
            ctx("img@sha256:x", None, &k2),
        ];
        let mut seen = vec![base.digest()];
        for v in variants {
            assert!(!seen.contains(&v.digest()), "{}", v.manifest());
            seen.push(v.digest());
        }
        let m = base.manifest();
        assert!(m.starts_with("eas-bastion-context/v1\nbase img@sha256:x\n"), "{m}");
        assert!(m.contains(&format!("{k1} 0755 artifacts/kubectl\n")), "{m}");
    }

    #[test]
    fn a_cached_file_swapped_after_the_check_fails_the_tar() {
        let dir = tempfile::tempdir().unwrap();
        let kubectl = b"#!/bin/sh\necho kubectl\n";
        let sha = sha256_hex(kubectl);
        let a = artifacts(&pins());
        let c = Context::new("b".into(), None, &[(a[0].clone(), sha.clone())], |s| dir.path().join(s));
        std::fs::write(dir.path().join(&sha), kubectl).unwrap();
        c.tar().unwrap();
        // The cache entry is replaced between the check and the read.
        std::fs::write(dir.path().join(&sha), b"#!/bin/sh\necho tampered\n").unwrap();
        let e = c.tar().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().starts_with("artifacts/kubectl changed in the cache after it was checked"), "{e}");
    }

    #[test]
    fn the_tar_holds_the_files_the_manifest_names() {
        let dir = tempfile::tempdir().unwrap();
        let kubectl = b"#!/bin/sh\necho kubectl\n";
        let sha = sha256_hex(kubectl);
        std::fs::write(dir.path().join(&sha), kubectl).unwrap();
        let a = artifacts(&pins());
        let c = Context::new("b".into(), Some(b"PEM".to_vec()), &[(a[0].clone(), sha.clone())], |s| dir.path().join(s));
        let bytes = c.tar().unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let mut seen = Vec::new();
        for e in ar.entries().unwrap() {
            let mut e = e.unwrap();
            let path = e.path().unwrap().display().to_string();
            let mode = e.header().mode().unwrap();
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut body).unwrap();
            if path == "artifacts/kubectl" {
                assert_eq!((body.as_slice(), mode), (kubectl.as_slice(), 0o755));
            }
            if path == MANIFEST_PATH {
                assert_eq!(String::from_utf8(body).unwrap(), c.manifest());
            }
            seen.push(path);
        }
        assert_eq!(
            seen,
            ["ca/", "Dockerfile", "artifacts/kubectl", CA_PATH, "requirements.lock", "toolbox-check.sh", MANIFEST_PATH]
                .map(String::from)
                .to_vec()
        );
    }
}
