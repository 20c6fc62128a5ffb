//! `eas bastion` end to end against a real Docker Engine, with the real `bastion/Dockerfile`.
//!
//! No registry is reachable: the base is the local `eas-test-base:bookworm` (scripts/base-image.sh)
//! and the pinned artifacts are stand-ins served from `file://` URLs in a test pins file. Python
//! packages come from the package index through this host's CA bundle (`EAS_CA_BUNDLE`).
//!
//! One image is built per test run (a nonce in the kubectl stand-in makes its context new; Docker's
//! layer cache keeps the Python layer after the first run) and the other tests reuse it.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support;

use support::artifacts::{sha256, write_pins};
use support::{exited, text};

const BASE: &str = "eas-test-base:bookworm";
const HOST_CA: &str = "/etc/ssl/certs/ca-certificates.crt";

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).output().expect("docker CLI")
}

fn docker_out(args: &[&str]) -> String {
    let o = docker(args);
    assert!(o.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The test's artifacts, pins and cache, and the result of building once and building again.
struct Fixture {
    dir: PathBuf,
    nonce: String,
    pins: PathBuf,
    tag: String,
    first: Output,
    second: Output,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(make_fixture)
}

fn make_fixture() -> Fixture {
    if !docker(&["info"]).status.success() {
        panic!("no Docker Engine answers: start one with `bash scripts/docker-up.sh`");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/base-image.sh");
    let o = Command::new("bash").arg(script).output().unwrap();
    assert!(o.status.success(), "scripts/base-image.sh: {}", String::from_utf8_lossy(&o.stderr));

    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let nonce = format!("{:x}{:x}", nanos, std::process::id());
    let dir = tmp.join(format!("bastion-{nonce}"));
    std::fs::create_dir_all(dir.join("served")).unwrap();
    let pins = write_pins(&dir, &nonce, &dir.join("pins.json"));

    let first = eas(&dir).args(["bastion", "build"]).args(image_args(&pins)).output().unwrap();
    assert!(first.status.success(), "first build failed:\n{}", String::from_utf8_lossy(&first.stderr));
    let tag = String::from_utf8(first.stdout.clone()).unwrap().trim().to_string();
    // Only now: removing the previous image first would take the shared Python layer with it.
    forget_previous_run(tmp);
    std::fs::write(tmp.join("bastion-last-run"), format!("{tag}\n{}\n", dir.display())).unwrap();
    let second = eas(&dir).args(["bastion", "build"]).args(image_args(&pins)).output().unwrap();
    Fixture { dir, nonce, pins, tag, first, second }
}

/// Removes the image and files the previous test run made (its tag is not reused: new nonce);
/// the layers the new image shares with it stay.
fn forget_previous_run(tmp: &Path) {
    let Ok(text) = std::fs::read_to_string(tmp.join("bastion-last-run")) else { return };
    let mut lines = text.lines();
    if let Some(tag) = lines.next().filter(|t| t.starts_with("eas-bastion:")) {
        let _ = docker(&["image", "rm", tag]);
    }
    if let Some(dir) = lines.next().filter(|d| d.starts_with(&tmp.display().to_string())) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn image_args(pins: &Path) -> Vec<String> {
    vec![
        "--pins".into(),
        pins.display().to_string(),
        "--base-image".into(),
        BASE.into(),
        "--allow-unpinned-base".into(),
    ]
}

/// The real binary with a private cache and home, plain output, and the host CA bundle (the
/// containers reach the package index through this host's TLS-intercepting proxy).
fn eas(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_eas"));
    c.env("XDG_CACHE_HOME", dir.join("cache"))
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("EAS_PINS")
        .env("CI", "1")
        .env("EAS_CA_BUNDLE", HOST_CA)
        .env_remove("KUBECONFIG")
        .env_remove("EAS_BASE_IMAGE")
        .env_remove("HF_TOKEN");
    c
}

/// `eas [global] bastion run <image args> [--tree DIR] -- sh -c CMD`.
fn run_in_bastion(f: &Fixture, global: &[&str], tree: Option<&Path>, cmd: &str) -> Command {
    let mut c = eas(&f.dir);
    c.args(global).args(["bastion", "run"]).args(image_args(&f.pins));
    if let Some(t) = tree {
        c.arg("--tree").arg(t);
    }
    c.args(["--", "sh", "-c", cmd]);
    c
}

/// Containers of one `eas` process (named `eas-bastion-<pid>-...`), running or not.
fn containers_of(pid: u32) -> String {
    docker_out(&["ps", "-a", "--filter", "label=io.eas.managed=true", "--filter", &format!("name=eas-bastion-{pid}-")])
        .lines()
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tests whose builds run the pip step take turns: the SIGINT test finds its build's pip
/// container among all managed ones.
static PIP_BUILDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn managed_images() -> BTreeSet<String> {
    docker_out(&["images", "--filter", "label=io.eas.managed=true", "--format", "{{.ID}}"])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn build_then_reuse_without_a_build() {
    let _engine = support::docker::engine();
    let f = fixture();
    let err = text(&f.first.stderr);
    assert!(err.contains("Step 1/") && err.contains(&format!("built {}", f.tag)), "{err}");
    assert!(f.tag.starts_with("eas-bastion:") && f.tag.len() == "eas-bastion:".len() + 12, "{}", f.tag);

    let labels = docker_out(&["image", "inspect", "--format", "{{json .Config.Labels}}", &f.tag]);
    let labels: serde_json::Value = serde_json::from_str(&labels).unwrap();
    assert_eq!(labels["io.eas.managed"], "true");
    let digest = labels["io.eas.context-sha256"].as_str().unwrap();
    assert_eq!(&digest[..12], &f.tag["eas-bastion:".len()..]);

    // The context manifest inside the image hashes to the tag's digest.
    let manifest = docker_out(&["run", "--rm", &f.tag, "cat", "/opt/eas/context.manifest"]);
    assert_eq!(sha256(format!("{manifest}\n").as_bytes()), digest);

    assert!(f.second.status.success(), "{}", text(&f.second.stderr));
    assert_eq!(text(&f.second.stdout).trim(), f.tag);
    let again = text(&f.second.stderr);
    assert!(again.contains(&format!("reusing {}", f.tag)) && !again.contains("Step "), "{again}");
}

#[test]
fn the_bastion_holds_the_pinned_toolbox() {
    let _engine = support::docker::engine();
    let f = fixture();
    let probe = "kubectl version --client; helm version; yq --version; jq --version; \
        python3 -c 'import sys; print(\"python\", sys.version_info[:2] >= (3, 11))'; \
        ansible-playbook --version | head -n 1; \
        python3 -c 'import json, sysconfig; p = sysconfig.get_paths()[\"purelib\"]; \
        m = json.load(open(p + \"/ansible_collections/kubernetes/core/MANIFEST.json\")); \
        print(\"collection\", m[\"collection_info\"][\"version\"], m[\"collection_info\"][\"description\"])'; \
        pip list --format=freeze | grep -iE '^(ansible|kubernetes|jsonpatch|jmespath)=='; \
        echo \"cert $PIP_CERT $REQUESTS_CA_BUNDLE $GIT_SSL_CAINFO\"; \
        grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt";
    let o = run_in_bastion(f, &[], None, probe).output().unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    for want in [
        format!("kubectl stand-in v1.37.2 {}", f.nonce),
        "helm stand-in".into(),
        "yq stand-in v4.54.1".into(),
        "jq-1.".into(),
        "python True".into(),
        "ansible-playbook [core 2.19.14]".into(),
        "collection 6.3.0 eas test stand-in".into(),
        "ansible==12.3.0".into(),
        "kubernetes==35.0.0".into(),
        "jsonpatch==1.38".into(),
        "jmespath==1.1.0".into(),
        "cert /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"
            .into(),
    ] {
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn a_tampered_artifact_is_refused_and_nothing_is_built() {
    let _engine = support::docker::engine();
    let f = fixture();
    let dir = f.dir.join("tampered");
    std::fs::create_dir_all(dir.join("served")).unwrap();
    let pins = write_pins(&dir, &format!("{}-tampered", f.nonce), &dir.join("pins.json"));
    let yq = dir.join("served/yq");
    let pinned = sha256(&std::fs::read(&yq).unwrap());
    std::fs::write(&yq, "#!/bin/sh\necho something else\n").unwrap();
    let computed = sha256(&std::fs::read(&yq).unwrap());

    let before = managed_images();
    let o = eas(&dir).args(["bastion", "build"]).args(image_args(&pins)).output().unwrap();
    let err = exited(&o, 1);
    let url = format!("file://{}", yq.display());
    assert!(
        err.contains(&format!("checksum failed for {url}: expected sha256 {pinned}, computed {computed}")),
        "{err}"
    );
    assert!(!err.contains("Step "), "a build started:\n{err}");
    assert_eq!(managed_images(), before, "an image appeared");
    assert!(!dir.join("cache/eas/artifacts").join(&computed).exists(), "the tampered file was cached");
}

#[test]
fn an_artifact_without_sha256_is_refused_unless_locked() {
    let _engine = support::docker::engine();
    let f = fixture();
    let dir = f.dir.join("lock");
    std::fs::create_dir_all(&dir).unwrap();
    let pins = dir.join("pins.json");
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f.pins).unwrap()).unwrap();
    let yq_sha = {
        let row = doc["pins"].as_array_mut().unwrap().iter_mut().find(|r| r["name"] == "yq").unwrap();
        std::mem::replace(&mut row["sha256"], serde_json::Value::Null)
    };
    std::fs::write(&pins, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let unlocked = std::fs::read(&pins).unwrap();

    let o = eas(&dir).args(["bastion", "build"]).args(image_args(&pins)).output().unwrap();
    let err = exited(&o, 2);
    assert!(err.contains("1 bastion artifact(s) have no pinned sha256: yq (file://"), "{err}");
    assert!(err.contains("hint: on a connected machine run `eas bastion build --lock"), "{err}");
    assert_eq!(std::fs::read(&pins).unwrap(), unlocked, "nothing written");

    // --lock needs the publisher's checksum: yq's release `checksums` (SHA-256 in the column
    // `checksums_hashes_order` names). None is served yet: refused, nothing written.
    let lock = || eas(&dir).args(["bastion", "build", "--lock"]).args(image_args(&pins)).output().unwrap();
    let o = lock();
    let err = exited(&o, 3);
    let served = f.dir.join("served");
    assert!(err.contains(&format!("REFUSE: no publisher checksum for file://{}/yq", served.display())), "{err}");
    assert!(err.contains("--trust-on-first-use"), "{err}");
    assert_eq!(std::fs::read(&pins).unwrap(), unlocked, "nothing written");

    // A published checksum of other bytes: exit 1 naming the URL, the expected and the computed.
    let other = sha256(b"another yq");
    std::fs::write(served.join("checksums_hashes_order"), "MD5\nSHA-256\nSHA-512\n").unwrap();
    let publish = |sha: &str| {
        let row = format!("yq  {}  {sha}  {}\n", "0".repeat(32), "1".repeat(128));
        std::fs::write(
            served.join("checksums"),
            format!("yq.tar.gz  {}  {}  {}\n{row}", "a".repeat(32), other, "b".repeat(128)),
        )
        .unwrap();
    };
    publish(&other);
    let o = lock();
    let err = exited(&o, 1);
    assert!(
        err.contains(&format!(
            "checksum failed for file://{}/yq: expected sha256 {other}, computed {}",
            served.display(),
            yq_sha.as_str().unwrap()
        )),
        "{err}"
    );
    assert_eq!(std::fs::read(&pins).unwrap(), unlocked, "nothing written");

    // The matching checksum: recorded, with its source; the context is then the fixture's, so no build.
    publish(yq_sha.as_str().unwrap());
    let o = lock();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("yq: sha256 {} matches the publisher's checksum", yq_sha.as_str().unwrap())),
        "{err}"
    );
    let locked: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&pins).unwrap()).unwrap();
    let row = locked["pins"].as_array().unwrap().iter().find(|r| r["name"] == "yq").unwrap();
    assert_eq!(row["sha256"], yq_sha);
    let source = row["source"].as_str().unwrap();
    assert!(
        source.contains(&format!("matched the publisher's checksum at file://{}/checksums", served.display())),
        "{source}"
    );
    assert_eq!(text(&o.stdout).trim(), f.tag);
    assert!(err.contains("reusing"), "{err}");
    std::fs::remove_file(served.join("checksums")).unwrap();
}

/// The build's toolbox check (issue 28 item 1): a base whose package database says jq is
/// installed while its binary is gone (so the package step installs nothing) builds up to the
/// check, which fails the build naming jq and EI's task that needs it; no image is tagged.
#[test]
fn a_build_without_jq_fails_at_the_toolbox_check_naming_jq_and_its_task() {
    let _engine = support::docker::engine();
    let f = fixture();
    let _turn = PIP_BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let base = format!("eas-test-base:jq-recorded-absent-{}", std::process::id());
    let name = format!("eas-test-jq-recorded-{}", std::process::id());
    let stanza = "printf '\\nPackage: jq\\nStatus: install ok installed\\nPriority: optional\\nSection: utils\\n\
        Maintainer: eas test\\nArchitecture: amd64\\nVersion: 0-test\\nDescription: recorded, not present\\n' \
        >>/var/lib/dpkg/status; rm -f /usr/bin/jq; dpkg-query -W -f='${Status}' jq";
    assert_eq!(docker_out(&["run", "--name", &name, BASE, "bash", "-c", stanza]), "install ok installed");
    docker_out(&["commit", "--change", "CMD [\"/bin/bash\"]", &name, &base]);
    docker_out(&["rm", &name]);
    let o = eas(&f.dir)
        .args(["bastion", "build", "--pins"])
        .arg(&f.pins)
        .args(["--base-image", &base, "--allow-unpinned-base"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    let tag = text(&o.stdout);
    let _ = docker(&["image", "rm", &base]);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bastion toolbox: jq is missing; EI's task \"Enumerate autodeploy models from the catalog\""),
        "{err}"
    );
    assert!(tag.trim().is_empty(), "no image tag printed: {tag}");
}

#[test]
fn an_unpinned_base_is_refused_without_the_flag() {
    let _engine = support::docker::engine();
    let f = fixture();
    let o =
        eas(&f.dir).args(["bastion", "build", "--pins"]).arg(&f.pins).args(["--base-image", BASE]).output().unwrap();
    let err = exited(&o, 2);
    assert!(err.contains("error: the base image eas-test-base:bookworm is not pinned by digest"), "{err}");
    assert!(err.contains("--allow-unpinned-base"), "{err}");
}

#[test]
fn exit_codes_pass_through_and_the_container_is_removed() {
    let _engine = support::docker::engine();
    let f = fixture();
    // A request timeout shorter than the silence: it must not cut the log or wait streams.
    // 3 s, not 1: starting the container is itself a request, and takes over a second on a
    // busy 2-core machine.
    let mut c = run_in_bastion(f, &[], None, "echo to-stdout; sleep 7; echo to-stderr >&2; exit 3");
    let child = c.env("EAS_DOCKER_TIMEOUT", "3").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let err = exited(&o, 3);
    assert_eq!(text(&o.stdout), "to-stdout\n");
    assert!(err.contains("to-stderr\n") && err.contains("bastion run: the command exited 3"), "{err}");
    assert_eq!(containers_of(pid), "", "container left behind");

    let o = run_in_bastion(f, &[], None, "exit 0").output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn sigint_stops_and_removes_the_running_container() {
    let _engine = support::docker::engine();
    let f = fixture();
    let mut child = run_in_bastion(f, &[], None, "echo started; exec sleep 300")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "started\n");
    assert!(containers_of(pid).contains("Up "), "not running: {}", containers_of(pid));

    support::signal(pid, "-INT");
    let (code, err) = support::exit_within(&mut child, Duration::from_secs(120));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted: nothing eas started is left running"), "{err}");
    assert_eq!(containers_of(pid), "", "container left behind");
}

#[test]
fn sigint_during_a_build_leaves_no_build_container_and_no_new_image() {
    let _engine = support::docker::engine();
    let f = fixture();
    let _one = PIP_BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let image_before = docker_out(&["image", "inspect", "--format", "{{.Id}}", &f.tag]);
    // --rebuild skips Docker's layer cache, so the Python install runs long enough to interrupt.
    let mut child = eas(&f.dir)
        .args(["bastion", "build", "--rebuild"])
        .args(image_args(&f.pins))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("| Collecting ") {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the build ended before pip ran:\n{seen}");
        seen.push_str(&line);
    }
    // The pip step's container: it inherits the Dockerfile's io.eas.managed label.
    let pip_step = || {
        let format = "{{.ID}} {{.Image}} {{.Command}}";
        docker_out(&["ps", "-a", "--no-trunc", "--filter", "label=io.eas.managed=true", "--format", format])
            .lines()
            .filter(|l| l.contains("pip install --require-hashes"))
            .map(|l| {
                let mut w = l.split(' ');
                (w.next().unwrap().to_string(), w.next().unwrap().to_string())
            })
            .collect::<Vec<_>>()
    };
    let running = pip_step();
    assert_eq!(running.len(), 1, "expected the pip step's container: {running:?}");
    let (container, uncached_layer) = running[0].clone();

    support::signal(pid, "-INT");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(rest.contains("interrupted: nothing eas started is left running"), "{rest}");
    // The step's container is dead at exit. Docker may still be deleting its writable layer (seconds
    // on a busy disk, issue 10): then it is marked for removal, and goes without eas.
    let state = docker(&["inspect", "--format", "{{.State.Status}}", &container]);
    let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
    assert!(state.is_empty() || state == "removing", "the build container is {state:?} after eas exited");
    // A guard against a container left for good, not a speed check.
    let give_up = Instant::now() + Duration::from_secs(120);
    while pip_step().iter().any(|(c, _)| *c == container) {
        assert!(Instant::now() < give_up, "the build container is still there: {}", docker_out(&["ps", "-a"]));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(docker_out(&["image", "inspect", "--format", "{{.Id}}", &f.tag]), image_before);
    // The layers this build committed before pip went with it (issue 10, finding 12: interrupted
    // builds left their untagged intermediate images behind).
    assert!(
        !docker(&["image", "inspect", &uncached_layer]).status.success(),
        "the interrupted build's intermediate image {uncached_layer} is still there"
    );
}

/// Issue 10, finding 12: two `eas bastion build`s of one new context at once build it once (the
/// second waits on the context's lock, then reuses the image), and `--rebuild` removes the image
/// it replaces instead of leaving it dangling.
#[test]
fn concurrent_builds_of_one_context_build_once_and_rebuild_removes_the_replaced_image() {
    let _engine = support::docker::engine();
    let f = fixture();
    let _one = PIP_BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let nonce = format!("{}-concurrent", f.nonce);
    let dir = f.dir.join("concurrent");
    std::fs::create_dir_all(dir.join("served")).unwrap();
    let pins = write_pins(&dir, &nonce, &dir.join("pins.json"));
    let start = || {
        eas(&dir)
            .args(["bastion", "build"])
            .args(image_args(&pins))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for o in [&a, &b] {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let tag = text(&a.stdout).trim().to_string();
    assert_eq!(text(&b.stdout).trim(), tag);
    let built = [&a, &b].iter().filter(|o| text(&o.stderr).contains(&format!("built {tag}"))).count();
    let reused = [&a, &b].iter().filter(|o| text(&o.stderr).contains(&format!("reusing {tag}"))).count();
    assert_eq!(
        (built, reused),
        (1, 1),
        "one builds, one waits and reuses:\n{}\n---\n{}",
        text(&a.stderr),
        text(&b.stderr)
    );
    let waited = [&a, &b].iter().any(|o| text(&o.stderr).contains(&format!("waiting for another eas building {tag}")));
    assert!(waited, "the second build waited on the lock");
    let digest =
        docker_out(&["image", "inspect", "--format", "{{index .Config.Labels \"io.eas.context-sha256\"}}", &tag]);
    let same_context = docker_out(&["images", "-q", "--filter", &format!("label=io.eas.context-sha256={digest}")]);
    assert_eq!(same_context.lines().count(), 1, "one image of the context: {same_context}");

    let old = docker_out(&["image", "inspect", "--format", "{{.Id}}", &tag]);
    let rebuilt = eas(&dir).args(["bastion", "build", "--rebuild"]).args(image_args(&pins)).output().unwrap();
    assert!(rebuilt.status.success(), "{}", text(&rebuilt.stderr));
    let new = docker_out(&["image", "inspect", "--format", "{{.Id}}", &tag]);
    assert_ne!(new, old);
    assert!(
        text(&rebuilt.stderr).contains(&format!("removed the image {old} this build replaced")),
        "{}",
        text(&rebuilt.stderr)
    );
    assert!(!docker(&["image", "inspect", &old]).status.success(), "the replaced image {old} is still there");
    let _ = docker(&["image", "rm", &tag]);
}

#[test]
fn secrets_reach_the_container_and_nothing_else() {
    let _engine = support::docker::engine();
    let f = fixture();
    let token = format!("hf_{}", f.nonce);
    let o = run_in_bastion(f, &["-vv"], None, "printf %s \"$HF_TOKEN\" | sha256sum")
        .env("HF_TOKEN", &token)
        .env("GRAFANA_ADMIN_PASSWORD", "pw-not-logged")
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(out.starts_with(&sha256(token.as_bytes())), "{out}");
    assert!(err.contains("HF_TOKEN (secret)") && err.contains("GRAFANA_ADMIN_PASSWORD (secret)"), "{err}");
    for shown in [&out, &err] {
        assert!(!shown.contains(&token) && !shown.contains("pw-not-logged"), "a secret was printed:\n{shown}");
    }
}

#[test]
fn the_work_tree_and_kubeconfig_are_mounted_and_the_api_route_chosen() {
    let _engine = support::docker::engine();
    let f = fixture();
    let dir = f.dir.join("mounts");
    let tree = dir.join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let kubeconfig = dir.join("config");
    let yaml = "apiVersion: v1\nkind: Config\ncurrent-context: k3d-gpu\nclusters:\n- name: k3d-gpu\n  cluster:\n    \
                server: https://0.0.0.0:6550\ncontexts:\n- name: k3d-gpu\n  context:\n    cluster: k3d-gpu\n    user: u\n\
                users:\n- name: u\n  user:\n    token: t\n";
    std::fs::write(&kubeconfig, yaml).unwrap();
    let probe = "/eas/.venv/bin/ansible-playbook --version | head -n 1; pwd; echo made > /eas/from-bastion; \
                 grep -c 6550 /kube/config; (echo x >> /kube/config) 2>/dev/null || echo read-only; hostname";
    let o = run_in_bastion(f, &[], Some(&tree), probe).env("KUBECONFIG", &kubeconfig).output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    let host = text(&Command::new("hostname").output().unwrap().stdout);
    let want = format!("ansible-playbook [core 2.19.14]\n/eas\n1\nread-only\n{}", host);
    assert_eq!(out, want, "{err}");
    assert!(err.contains("host network: the API server is on this host"), "{err}");
    assert_eq!(std::fs::read_to_string(tree.join("from-bastion")).unwrap(), "made\n");
    assert_eq!(std::fs::read_to_string(&kubeconfig).unwrap(), yaml, "the user's kubeconfig changed");
}

/// A k3d network that exists: the container joins it and reads a rewritten copy.
#[test]
fn a_k3d_api_off_this_host_is_reached_through_the_k3d_network() {
    let _engine = support::docker::engine();
    let f = fixture();
    let cluster = format!("eastest{}", &f.nonce[f.nonce.len() - 8..]);
    let network = format!("k3d-{cluster}");
    docker_out(&["network", "create", "--label", "io.eas.test=bastion", &network]);
    struct Net(String);
    impl Drop for Net {
        fn drop(&mut self) {
            let _ = docker(&["network", "rm", &self.0]);
        }
    }
    let _net = Net(network.clone());

    let dir = f.dir.join("k3d");
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    let yaml = format!(
        "current-context: {network}\nclusters:\n- name: {network}\n  cluster:\n    server: https://192.0.2.10:6550\n\
         contexts:\n- name: {network}\n  context:\n    cluster: {network}\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
    );
    std::fs::write(&kubeconfig, &yaml).unwrap();
    let probe = "python3 -c 'import json; print(json.load(open(\"/kube/config\"))[\"clusters\"][0][\"cluster\"][\"server\"])'; \
                 grep -c '^nameserver 127.0.0.11' /etc/resolv.conf";
    let kube = kubeconfig.display().to_string();
    let o = run_in_bastion(f, &["--kubeconfig", &kube], None, probe).output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    // The server container's name, and Docker's embedded DNS of a user-defined network.
    assert_eq!(out, format!("https://k3d-{cluster}-server-0:6443\n1\n"), "{err}");
    assert!(err.contains(&format!("network {network}, API server https://k3d-{cluster}-server-0:6443")), "{err}");
    assert_eq!(std::fs::read_to_string(&kubeconfig).unwrap(), yaml);
}

/// A build past its timeout stops itself as an interrupted one does: exit 1 naming the timeout,
/// no build container left, the tag still on the image it was on.
#[test]
fn a_build_past_its_timeout_stops_and_leaves_no_build_container() {
    let _engine = support::docker::engine();
    let f = fixture();
    let _one = PIP_BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let image_before = docker_out(&["image", "inspect", "--format", "{{.Id}}", &f.tag]);
    // The build containers of the Dockerfile's steps (they inherit its io.eas.managed label);
    // the Docker Engine is shared, so only those this build made are looked at.
    let steps = || -> BTreeSet<String> {
        docker_out(&["ps", "-aq", "--no-trunc", "--filter", "label=io.eas.managed=true"])
            .lines()
            .map(str::to_string)
            .collect()
    };
    let before = steps();
    // --rebuild skips Docker's layer cache, so the Python install outlasts the 5 s.
    let out = eas(&f.dir)
        .args(["bastion", "build", "--rebuild", "--timeout", "5"])
        .args(image_args(&f.pins))
        .output()
        .unwrap();
    let err = exited(&out, 1);
    assert!(err.contains("the build did not finish within 0:05"), "{err}");
    assert!(err.contains("timeout 0:05"), "the build's phase line names its timeout: {err}");
    // Docker may still be deleting a removed container's layer (issue 10); it goes without eas.
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let left: Vec<String> = steps().difference(&before).cloned().collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < give_up, "the build left its containers: {left:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(docker_out(&["image", "inspect", "--format", "{{.Id}}", &f.tag]), image_before);
}

/// `bastion build --lock` pulls an unpinned base to record its digest. When the engine answers
/// but cannot pull (here a registry on a closed loopback port; on a machine without registry
/// access the same), the error names the pull and what to do, not "check the Docker Engine",
/// and the pins file is left as it was.
#[test]
fn a_base_the_engine_cannot_pull_is_named_as_a_pull_not_as_a_dead_engine() {
    let _engine = support::docker::engine();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("served")).unwrap();
    let pins = write_pins(dir.path(), "pull", &dir.path().join("pins.json"));
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&pins).unwrap()).unwrap();
    let base = "127.0.0.1:9/eas-test/none:1";
    for row in doc["pins"].as_array_mut().unwrap() {
        if row["name"] == "base-image" {
            row["ref"] = base.into();
        }
    }
    let before = serde_json::to_string_pretty(&doc).unwrap();
    std::fs::write(&pins, &before).unwrap();
    let o = eas(dir.path()).args(["bastion", "build", "--lock", "--pins"]).arg(&pins).output().unwrap();
    let err = exited(&o, 1);
    assert!(err.contains(&format!("error: bastion: cannot pull {base}: ")), "{err}");
    assert!(err.contains(&format!("next: the Docker Engine answered but could not pull {base}")), "{err}");
    assert!(!err.contains("docker info"), "{err}");
    assert_eq!(std::fs::read_to_string(&pins).unwrap(), before, "a failed lock wrote the pins");
}
