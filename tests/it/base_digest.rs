//! `eas bastion build --lock` records the base image at the registry's digest: a local registry
//! (Debian's `docker-registry`, started here on loopback; Docker trusts 127.0.0.0/8 registries
//! without TLS) holds the test base image, pushed through the Docker Engine; eas pulls it through
//! the Docker API, reads `RepoDigests`, and the digest it records must be the one the registry
//! serves for the manifest, in the pins file resolution picked (the user's, no `--pins`). Needs
//! Docker: run serialized (`flock /tmp/eas-docker.lock`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use crate::support;

use support::artifacts::write_pins;

const BASE: &str = "eas-test-base:bookworm";
const HOST_CA: &str = "/etc/ssl/certs/ca-certificates.crt";

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).output().expect("docker CLI")
}

fn docker_ok(args: &[&str]) {
    let o = docker(args);
    assert!(o.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// A registry process of our own, stopped when dropped; its log is kept for failure messages.
struct Registry {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Registry {
    /// The registry's last log lines and the free space where it stores blobs: a push that
    /// fails with a 500 is most often a full disk, and the message should say which.
    fn diagnose(&self, dir: &Path) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        let df = Command::new("df").arg("-h").arg(dir).output().map(|o| String::from_utf8_lossy(&o.stdout).to_string());
        format!("registry log (last lines):\n{}\nspace where it stores: {}", tail.join("\n"), df.unwrap_or_default())
    }
}

/// A local image tag, removed when dropped so that a failed run leaves no image behind.
struct Tag(String);

impl Drop for Tag {
    fn drop(&mut self) {
        let _ = docker(&["image", "rm", &self.0]);
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on loopback; the status and the raw headers.
fn http(addr: &str, method: &str, path: &str, accept: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).to_string();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, text))
}

fn start_registry(dir: &Path) -> Registry {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {:?}\nhttp:\n  addr: {addr}\n",
            dir.join("registry").display().to_string()
        ),
    )
    .unwrap();
    let log = dir.join("registry.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("docker-registry (Debian package docker-registry; scripts/test.sh installs it)");
    let reg = Registry { child, addr, log };
    let deadline = Instant::now() + Duration::from_secs(30);
    while http(&reg.addr, "GET", "/v2/", "*/*").map(|(c, _)| c) != Some(200) {
        assert!(Instant::now() < deadline, "the registry did not answer on {} within 30 s", reg.addr);
        std::thread::sleep(Duration::from_millis(100));
    }
    reg
}

#[test]
fn lock_records_the_base_image_at_the_registrys_digest() {
    let _engine = support::docker::engine();
    assert!(docker(&["info"]).status.success(), "no Docker Engine answers: start one with `bash scripts/docker-up.sh`");
    let script = support::root().join("scripts/base-image.sh");
    let o = Command::new("bash").arg(script).output().unwrap();
    assert!(o.status.success(), "scripts/base-image.sh: {}", String::from_utf8_lossy(&o.stderr));

    let tmp = tempfile::Builder::new().prefix("base-digest-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    std::fs::create_dir_all(dir.join("served")).unwrap();
    let reg = start_registry(&dir);
    let reference = format!("{}/eas-test/base:24.04", reg.addr);

    // The test base, pushed through the Docker Engine, then untagged so eas must pull it.
    docker_ok(&["tag", BASE, &reference]);
    let tag = Tag(reference.clone());
    let push = docker(&["push", "--quiet", &reference]);
    assert!(
        push.status.success(),
        "docker push {reference}: {}\n{}",
        String::from_utf8_lossy(&push.stderr),
        reg.diagnose(&dir)
    );
    drop(tag);
    let accept = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, \
                  application/vnd.docker.distribution.manifest.list.v2+json, \
                  application/vnd.docker.distribution.manifest.v2+json";
    let (code, head) = http(&reg.addr, "HEAD", "/v2/eas-test/base/manifests/24.04", accept).unwrap();
    assert_eq!(code, 200, "{head}");
    let served = head
        .lines()
        .find_map(|l| l.strip_prefix("Docker-Content-Digest: ").or_else(|| l.strip_prefix("docker-content-digest: ")))
        .unwrap_or_else(|| panic!("no digest header: {head}"))
        .trim()
        .to_string();
    assert!(served.starts_with("sha256:"), "{served}");

    // Pins whose base-image row names the registry's image without a digest; the other rows are
    // the stand-in artifacts with their sha256 (nothing else to lock). They are the user's pins
    // file, and no --pins is given: --lock rewrites the file every command reads.
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("eas")).unwrap();
    let pins = write_pins(&dir, "base-digest", &config.join("eas/pins.json"));
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&pins).unwrap()).unwrap();
    for row in doc["pins"].as_array_mut().unwrap() {
        if row["profile"] == "bastion" && row["name"] == "base-image" {
            row["ref"] = reference.clone().into();
            row["sha256"] = serde_json::Value::Null;
        }
    }
    std::fs::write(&pins, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_eas"))
        .args(["--progress", "plain", "bastion", "build", "--lock"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("HOME", &dir)
        .env("XDG_CONFIG_HOME", &config)
        .env_remove("EAS_PINS")
        .env("CI", "1")
        .env("NO_COLOR", "1")
        .env("EAS_CA_BUNDLE", HOST_CA)
        .env_remove("EAS_BASE_IMAGE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let tag = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let _ = docker(&["image", "rm", &reference]);
    if tag.starts_with("eas-bastion:") {
        let _ = docker(&["image", "rm", &tag]);
    }
    assert!(out.status.success(), "{err}");
    let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&pins).unwrap()).unwrap();
    let row = written["pins"].as_array().unwrap().iter().find(|r| r["name"] == "base-image").unwrap().clone();
    assert_eq!(row["sha256"], served.trim_start_matches("sha256:"), "{row}");
    let source = row["source"].as_str().unwrap();
    assert!(source.starts_with(&format!("{reference}@{served}: the registry's digest")), "{source}");
    assert!(err.contains(&format!("recorded at its registry digest {reference}@{served}")), "{err}");
    assert!(err.contains(&format!("recorded the new sha256s in {}", pins.display())), "{err}");
}
