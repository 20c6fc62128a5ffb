//! What the end-to-end `eas up` / `eas down` tests share (tests/it/up_cycle.rs,
//! tests/it/down_safety.rs): the synthetic EAS/EI/EAT trees and the stand-in artifacts with the
//! pins that name them (one nonce, so one bastion image for both), the way `eas` is run against
//! them, and the bastion containers an `eas` process made.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{artifacts, trees};

pub const BASE: &str = "eas-test-base:bookworm";
pub const HOST_CA: &str = "/etc/ssl/certs/ca-certificates.crt";
pub const CLUSTER: &str = "k3d-gpu-desktop";
pub const MODEL: &str = "qwen2-5-coder-7b";

pub struct Setup {
    pub dir: PathBuf,
    pub pins: PathBuf,
    pub repos: PathBuf,
}

/// Once per test binary: checks that a Docker Engine answers and the base image is loaded, then
/// writes the trees and the pins under a new `<prefix>-<time>` directory of the target's tmp.
pub fn setup(prefix: &str) -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        assert!(
            Command::new("docker").arg("info").output().unwrap().status.success(),
            "no Docker Engine answers: start one with `bash scripts/docker-up.sh`"
        );
        let o = Command::new("bash").arg(super::root().join("scripts/base-image.sh")).output().unwrap();
        assert!(o.status.success(), "scripts/base-image.sh: {}", String::from_utf8_lossy(&o.stderr));
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir = tmp.join(format!("{prefix}-{nanos:x}"));
        std::fs::create_dir_all(dir.join("served")).unwrap();
        let repos = dir.join("repos");
        let shas: Vec<(String, String)> =
            ["eas", "ei", "eat"].iter().map(|n| (n.to_string(), trees::synthetic_repo(n, &repos.join(n)))).collect();
        // A fixed nonce: the stand-in artifacts, and so the bastion image, are the same every run.
        let pins = artifacts::write_pins(&dir, "up-cycle", &dir.join("pins.json"));
        trees::point_main_pins(&pins, &shas);
        Setup { dir, pins, repos }
    })
}

impl Setup {
    /// `eas` run in `home` (its HOME), with the host's CA bundle and plain output, no kubeconfig
    /// but `kubeconfig`, its state under `state`.
    pub fn eas(&self, home: &Path, kubeconfig: &Path, state: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_eas"));
        c.current_dir(home)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("HF_ENDPOINT", super::NO_HF)
            .env("EAS_EGRESS_URLS", NO_EGRESS)
            .env_remove("EAS_PINS")
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("EAS_CA_BUNDLE", HOST_CA)
            .env("CI", "1")
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .env_remove("EAS_BASE_IMAGE")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--state-dir")
            .arg(state);
        c
    }

    /// `eas up`'s arguments after `up`: the pins, the base image, the recorded node's files and
    /// the synthetic trees.
    pub fn up_args(&self) -> Vec<String> {
        let node_files = super::fixture(CLUSTER).join("node-files/k3d-gpu-server-0/config.toml");
        let mut v: Vec<String> = vec![
            "--pins".into(),
            self.pins.display().to_string(),
            "--base-image".into(),
            BASE.into(),
            "--allow-unpinned-base".into(),
            "--containerd-config".into(),
            format!("k3d-gpu-server-0={}", node_files.display()),
            "--nri-socket".into(),
            "k3d-gpu-server-0=present".into(),
        ];
        for n in ["eas", "ei", "eat"] {
            v.push(format!("--{n}-repo"));
            v.push(self.repos.join(n).display().to_string());
        }
        v
    }

    /// `eas down --yes` with the same pins and base image.
    pub fn down_args(&self) -> Vec<String> {
        ["down", "--yes", "--pins"]
            .into_iter()
            .map(String::from)
            .chain([self.pins.display().to_string(), "--base-image".into(), BASE.into()])
            .chain(["--allow-unpinned-base".into()])
            .collect()
    }
}

/// The egress check's hosts for the real installs here: one registry on a closed loopback port,
/// a warning (no data row names it, so nothing aborts without it). These runs do not ask the
/// answering stand-in (`support::egress`), whose trust comes through SSL_CERT_FILE.
const NO_EGRESS: &str = "registry=https://127.0.0.1:9/v2/";

/// Containers of the `eas` process `pid` (`eas-bastion-<pid>-...`), running or not.
pub fn containers_of(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--filter", "label=io.eas.managed=true", "--filter", &format!("name=eas-bastion-{pid}-")])
        .args(["--format", "{{.Names}}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}
