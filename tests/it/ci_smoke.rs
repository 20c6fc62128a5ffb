//! `scripts/ci-smoke.sh` (the GitHub smoke's logic) against a recorded cluster, with a stub `k3d`
//! on PATH and synthetic trees: the profile list for the job matrix, the decision table in the
//! step summary, a STOP classified as "needs regenerating" for its profile only, and the pick of
//! the profile whose overlay decides fully. Also `scripts/install-k3d.sh` against a local release.
//! No Docker: the dry run plans without one.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::support;

use serde_json::{Value, json};
use support::{ClusterServer, git, text, writes};

const CLUSTER: &str = "k3d-gpu-desktop";
const ENVOY: &str = "roles/envoy_gateway/tasks/install.yaml";

use support::trees::synthetic_repo as synthetic;

struct Smoke {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    server: ClusterServer,
    pins: PathBuf,
    repos: PathBuf,
    rc: String,
    main: String,
}

/// The EAS tree at the release-1.2 layout is the rc profile; main then moves the EnvoyProxy task
/// out of install.yaml (what PR #251 reports for EAS main), so 0006 STOPs there.
fn smoke() -> Smoke {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let repos = dir.join("repos");
    let rc = synthetic("eas", &repos.join("eas"));
    std::fs::write(repos.join("eas").join(ENVOY), "---\n- ansible.builtin.include_tasks: proxy.yaml\n").unwrap();
    git(&repos.join("eas"), &["commit", "-qam", "move the EnvoyProxy task"]);
    let main = git(&repos.join("eas"), &["rev-parse", "HEAD"]);
    let ei = synthetic("ei", &repos.join("ei"));
    let eat = synthetic("eat", &repos.join("eat"));
    let real = std::fs::read_to_string(support::root().join("pins.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&real).unwrap();
    for row in doc["pins"].as_array_mut().unwrap() {
        let sha = match (row["profile"].as_str().unwrap(), row["name"].as_str().unwrap()) {
            ("main", "eas") => &main,
            ("v1.2.0-rc.1", "eas") => &rc,
            (_, "ei") => &ei,
            (_, "eat") => &eat,
            _ => continue,
        };
        row["sha"] = json!(sha);
        row["locked"] = json!(true);
    }
    let pins = dir.join("pins.json");
    std::fs::write(&pins, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    // A stub k3d: the cluster exists; its kubeconfig is the recorded cluster's. Calls are logged.
    // kubectl (the probe step's check) sends no token over plain HTTP, as against k3d's server.
    let options = support::Options { require_token: false, ..support::Options::default() };
    let server = ClusterServer::start_with(support::fixture(CLUSTER), options);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let stub = format!(
        "#!/bin/sh\necho \"$*\" >>'{log}'\ncase \"$1 $2\" in\n  'cluster get') exit 0 ;;\n  \
         'kubeconfig get') cat '{kc}' ;;\n  'image import') exit 0 ;;\n  *) echo \"stub k3d: unexpected $*\" >&2; exit 1 ;;\nesac\n",
        log = dir.join("k3d.log").display(),
        kc = server.kubeconfig().display()
    );
    std::fs::write(bin.join("k3d"), stub).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(bin.join("k3d")).status().unwrap();
    // A stub docker CLI for `probe`'s pull (eas itself speaks to the Engine's API, never this).
    let docker = format!("#!/bin/sh\necho \"$*\" >>'{}'\n[ \"$1\" = pull ]\n", dir.join("docker.log").display());
    std::fs::write(bin.join("docker"), docker).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(bin.join("docker")).status().unwrap();
    Smoke { _tmp: tmp, dir, server, pins, repos, rc, main }
}

impl Smoke {
    /// With the stock-k3d checks off: the recorded cluster is k3d-gpu's (NFD already there).
    fn run(&self, args: &[&str]) -> (Output, String) {
        self.run_with(args, &[("EAS_SMOKE_STOCK_K3D", "0")])
    }

    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> (Output, String) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let summary = self.dir.join(format!("summary-{n}.md"));
        let node = support::fixture(CLUSTER).join("node-files/k3d-gpu-server-0/config.toml");
        let mut up =
            format!("--containerd-config k3d-gpu-server-0={} --nri-socket k3d-gpu-server-0=present", node.display());
        for n in ["eas", "ei", "eat"] {
            up.push_str(&format!(" --{n}-repo {}", self.repos.join(n).display()));
        }
        let path = format!("{}:{}", self.dir.join("bin").display(), std::env::var("PATH").unwrap());
        let out = Command::new("bash")
            .arg(support::root().join("scripts/ci-smoke.sh"))
            .args(args)
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("EAS", env!("CARGO_BIN_EXE_eas"))
            .env("EAS_PINS", &self.pins)
            .env("EAS_SMOKE_UP_ARGS", up)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("HOME", self.dir.join("home"))
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("DOCKER_HOST", "unix:///nonexistent/eas-test/docker.sock")
            .env("EAS_HOST_ROOT", self.dir.join("no-host-root"))
            // As support::eas: the state directory's free-space minimum is not this machine's disk.
            .env("EAS_STATE_MIN_FREE", "1")
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (out, std::fs::read_to_string(&summary).unwrap_or_default())
    }
}

#[test]
fn the_smoke_lists_profiles_classifies_a_stop_and_picks_the_profile_that_decides_fully() {
    let s = smoke();
    let (out, _) = s.run(&["profiles"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), r#"["main","v1.2.0-rc.1"]"#);

    // main: 0006 STOPs. Its profile fails (exit 4) and says it needs regenerating.
    let (out, summary) = s.run(&["dry-run", "main"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}\n{summary}");
    assert!(err.contains("ci-smoke: profile main: NEEDS REGENERATING"), "{err}");
    assert!(summary.starts_with("### Profile `main`: NEEDS REGENERATING: an overlay row STOPs\n"), "{summary}");
    assert!(summary.contains("| row | decision | fact | source |"), "{summary}");
    assert!(summary.contains(&format!("| 0006 | STOP: regenerate 0006 against {} |", s.main)), "{summary}");
    assert!(summary.contains("| 0002 | apply 0002 variant istio-helm-task |"), "{summary}");
    assert!(summary.contains("    0006 ("), "the STOP lines are listed: {summary}");
    // The STOP names the way forward: the rc profile decides fully, with its command.
    assert!(
        summary.contains("the overlay decides fully at pins profile v1.2.0-rc.1")
            && summary.contains("--profile v1.2.0-rc.1`"),
        "{summary}"
    );
    assert!(!summary.contains("--profile main"), "the command replaces the profile: {summary}");

    // The rc profile decides fully.
    let (out, summary) = s.run(&["dry-run", "v1.2.0-rc.1"]);
    assert!(out.status.success(), "{}\n{summary}", text(&out.stderr));
    assert!(summary.starts_with("### Profile `v1.2.0-rc.1`: the overlay decides fully\n"), "{summary}");
    assert!(summary.contains("| 0006 | apply 0006 variant release-1.2 |"), "{summary}");
    assert!(!summary.contains("STOP"), "{summary}");
    assert!(summary.contains(&s.rc[..7]), "the decisions are at the rc commit: {summary}");

    // The stock-k3d checks read the plan: this recorded cluster already runs NFD, so eas rightly
    // writes nfd_enabled: false, which a stock k3d would not get; the profile fails naming it.
    let (out, summary) = s.run_with(&["dry-run", "v1.2.0-rc.1"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}\n{summary}", text(&out.stderr));
    assert!(
        summary.starts_with(
            "### Profile `v1.2.0-rc.1`: FAILED: ci-smoke: profile v1.2.0-rc.1: eas-overrides.yaml lacks /^nfd_enabled: true$/"
        ),
        "{summary}"
    );

    // pick: the first profile whose overlay decides fully.
    let (out, _) = s.run(&["pick"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "v1.2.0-rc.1");

    // The stub saw only reads: the existing cluster is reused, never created or deleted.
    let log = std::fs::read_to_string(s.dir.join("k3d.log")).unwrap();
    assert!(log.lines().all(|l| l == "cluster get eas-smoke" || l == "kubeconfig get eas-smoke"), "{log}");
    let writes = writes(&s.server);
    assert!(writes.is_empty(), "the dry runs wrote to the cluster: {writes:?}");
}

#[test]
fn install_k3d_installs_only_a_download_matching_the_release_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let rel = tmp.path().join("rel/v5.8.3");
    std::fs::create_dir_all(&rel).unwrap();
    let body = b"#!/bin/sh\necho k3d stand-in\n";
    std::fs::write(rel.join("k3d-linux-amd64"), body).unwrap();
    let sha = support::artifacts::sha256(body);
    // The release's lines name the asset under its build directory.
    let sums = format!("{}  _dist/k3d-linux-arm64\n{sha}  _dist/k3d-linux-amd64\n", "0".repeat(64));
    std::fs::write(rel.join("checksums.txt"), sums).unwrap();
    let dest = tmp.path().join("bin");
    std::fs::create_dir_all(&dest).unwrap();
    let install = |version: &str| {
        Command::new("bash")
            .arg(support::root().join("scripts/install-k3d.sh"))
            .arg(version)
            .arg(&dest)
            .env("K3D_BASE_URL", format!("file://{}", tmp.path().join("rel").display()))
            .output()
            .unwrap()
    };
    let out = install("v5.8.3");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(dest.join("k3d")).unwrap(), body);
    std::fs::remove_file(dest.join("k3d")).unwrap();

    std::fs::write(rel.join("k3d-linux-amd64"), b"tampered").unwrap();
    let out = install("v5.8.3");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("checksum failed") && err.contains(&sha), "{err}");
    assert!(!dest.join("k3d").exists(), "nothing installed on a mismatch");
    assert_eq!(install("latest").status.code(), Some(2), "only a pinned version");
}

/// `ci-smoke.sh probe` (the smoke's `--probe-nodes` step): the busybox is pulled and imported
/// into the cluster (stub docker and k3d; the import's effect, the node holding the image, is
/// the recorded node's status here), `eas facts --probe-nodes` with Docker out of reach reads the
/// k3d node through a probe pod on the recorded cluster, every node has containerd facts, and
/// kubectl finds no probe pod left.
#[test]
fn the_smoke_probe_step_reads_the_node_with_a_probe_pod_and_leaves_none() {
    let s = smoke();
    let image = "docker.io/rancher/mirrored-library-busybox:1.36.1";
    let key = support::ObjectKey::core("nodes", "k3d-gpu-server-0");
    let mut images = s.server.object(&key).unwrap()["status"]["images"].as_array().unwrap().clone();
    images.push(json!({"names": [image]}));
    s.server.update(&key, json!({"status": {"images": images}}));
    let (out, _) = s.run(&["probe"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}\n{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("ci-smoke: probe ok: [{\"name\":\"k3d-gpu-server-0\",\"containerd\":{"),
        "{}",
        text(&out.stdout)
    );
    assert!(err.contains("containerd facts read by a probe pod"), "{err}");
    let k3d = std::fs::read_to_string(s.dir.join("k3d.log")).unwrap();
    assert!(k3d.contains(&format!("image import {image} --cluster eas-smoke")), "{k3d}");
    assert_eq!(std::fs::read_to_string(s.dir.join("docker.log")).unwrap(), format!("pull --quiet {image}\n"));
    let w = writes(&s.server);
    assert!(w.iter().any(|l| l == "POST /api/v1/namespaces/kube-system/pods"), "{w:?}");
    assert!(
        w.iter().any(|l| l.starts_with("DELETE /api/v1/namespaces/kube-system/pods/eas-probe-k3d-gpu-server-0-")),
        "{w:?}"
    );
}
