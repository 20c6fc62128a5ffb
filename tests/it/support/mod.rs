//! The harness the integration tests share: the recorded-cluster server, and running the real
//! `eas` binary isolated from this machine's kubeconfig, Docker engine and host files.

pub mod artifacts;
pub mod cluster_server;
#[cfg(feature = "docker-tests")]
pub mod docker;
pub mod forward_proxy;
pub mod hf;
pub mod kserve;
pub mod planning;
pub mod sentinels;
pub mod stalled_docker;
#[cfg(feature = "docker-tests")]
pub mod synthetic_install;
pub mod tls_front;
pub mod trees;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use cluster_server::{ClusterServer, Fault, Logged, ObjectKey, Options, Rule, Transport};

/// The access review a dry run and `eas facts` send: answered, never stored (SPEC §4).
pub const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// The requests that could have changed the cluster: every one but reads and access reviews,
/// as `METHOD path`.
pub fn writes(server: &ClusterServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|l| l.method != "GET" && !(l.method == "POST" && l.path == ACCESS_REVIEWS))
        .map(|l| format!("{} {}", l.method, l.path))
        .collect()
}

/// A new temporary directory (`/tmp/PREFIX*`) that lives until the test process exits, for trees
/// built once and shared from a static, which is never dropped: each left one directory per test
/// process. Removed by a handler registered with `atexit`, which runs when the harness returns or
/// exits (not when the process is killed).
pub fn until_exit(prefix: &str) -> PathBuf {
    use std::sync::{Mutex, Once};
    static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    static REGISTER: Once = Once::new();
    extern "C" fn remove_all() {
        if let Ok(dirs) = DIRS.lock() {
            for d in dirs.iter() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
    // SAFETY: `remove_all` is a plain function that stays valid for the life of the process.
    REGISTER.call_once(|| assert_eq!(unsafe { libc::atexit(remove_all) }, 0, "atexit"));
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap().keep();
    DIRS.lock().unwrap().push(dir.clone());
    dir
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What `doc` breaks of the schema NAME (`eas-plan.v1`, `eas-status.v1`, ...) as the binary ships
/// it (`eas schema NAME`, built from data/NAME.schema.json): one line per error, with where it is.
pub fn schema_errors(name: &str, doc: &serde_json::Value) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let out = eas(dir.path()).args(["schema", name]).output().unwrap();
    assert!(out.status.success(), "eas schema {name}: {}", String::from_utf8_lossy(&out.stderr));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator.iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

/// The exit code and stderr of `child` (its stderr piped), waited for at most `limit`: a guard
/// against a hang, not a speed check. Past it the child is killed and the test fails.
pub fn exit_within(child: &mut std::process::Child, limit: std::time::Duration) -> (Option<i32>, String) {
    let give_up = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > give_up {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the child did not exit within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).unwrap();
    }
    (status.code(), err)
}

/// A server on loopback that accepts connections and never answers (an API server or a git
/// remote that hangs). The receiver hears of each accept.
pub fn silent_server() -> (u16, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
            let _ = tx.send(());
        }
    });
    (port, rx)
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("fixtures").join("clusters").join(name)
}

/// The recorded clusters kept in the repository.
pub const CLUSTERS: [&str; 5] = ["k3d-gpu-desktop", "xeon-amx", "k3s-3node-eas", "eat1", "scale-2000"];

/// `eas`, run in `dir`, seeing no kubeconfig, no Docker engine and no k3s on this host unless a
/// test gives it one.
pub fn eas(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_eas"));
    c.current_dir(dir)
        .env_remove("KUBECONFIG")
        .env_remove("DOCKER_CONTEXT")
        .env_remove("EAS_LOG")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("EAS_CA_BUNDLE")
        // A developer's own pins (EAS_PINS, their user pins file) never reach a test.
        .env_remove("EAS_PINS")
        // Nor their config file (a test that declares one names it, or writes ./eas.yaml).
        .env_remove("EAS_CONFIG")
        .env_remove("XDG_STATE_HOME")
        .env("XDG_CONFIG_HOME", dir.join(".no-config"))
        .env("XDG_CACHE_HOME", dir.join(".no-cache"))
        // Hugging Face is a closed port on loopback: every read is refused at once, the same on
        // every machine (a test that needs answers serves its own stand-in).
        .env("HF_ENDPOINT", NO_HF)
        // The hosts the egress check asks answer from a loopback stand-in, as on a machine that
        // reaches them (a test of a host without an answer names its own).
        .env("EAS_EGRESS_URLS", &egress().urls)
        .env("SSL_CERT_FILE", &egress().cert_file)
        .env_remove("HF_TOKEN")
        .env("HOME", dir.join(".no-home"))
        .env("DOCKER_HOST", "unix:///nonexistent/eas-test/docker.sock")
        .env("EAS_HOST_ROOT", dir.join(".no-host-root"))
        // The state directory's free-space minimum (10 GiB) is a blocker: a test's outcome does
        // not hang on this machine's free disk (a test of the minimum sets its own).
        .env("EAS_STATE_MIN_FREE", "1")
        .env("CI", "1")
        .env("NO_COLOR", "1");
    c
}

/// A Hugging Face endpoint nothing answers at (the discard port on loopback: refused at once).
pub const NO_HF: &str = "https://127.0.0.1:9";
/// The egress stand-in every `eas` of the tests asks (one per test process).
pub fn egress() -> &'static tls_front::EgressStandIn {
    static E: std::sync::OnceLock<tls_front::EgressStandIn> = std::sync::OnceLock::new();
    E.get_or_init(tls_front::EgressStandIn::start)
}

/// The `eas facts` arguments a recorded cluster is gathered with (its facts-args file).
pub fn facts_args(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(fixture(name).join("facts-args")).expect("facts-args");
    text.split_whitespace().map(str::to_string).collect()
}

pub fn config_args(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(fixture(name).join("config-args")).expect("config-args");
    text.split_whitespace().map(str::to_string).collect()
}

/// Runs `eas facts` against `server`, in the fixture's directory (facts-args name files there).
pub fn facts(server: &ClusterServer, name: &str, extra: &[&str]) -> Output {
    let mut c = eas(&fixture(name));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("facts").args(facts_args(name)).args(extra);
    c.output().expect("run eas")
}

/// A copy of `server`'s kubeconfig in `dir` with `from` replaced by `to` (another server, a
/// wrong token): the same cluster seen through a changed kubeconfig.
pub fn kubeconfig_with(server: &ClusterServer, dir: &Path, from: &str, to: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = std::fs::read_to_string(server.kubeconfig()).expect("the recorded cluster's kubeconfig");
    assert!(text.contains(from), "the recorded kubeconfig holds {from:?}");
    std::fs::write(&path, text.replace(from, to)).unwrap();
    path
}

/// `kubeconfig_with` the server's cluster entry given a `proxy-url`.
pub fn kubeconfig_with_proxy_url(server: &ClusterServer, dir: &Path, proxy_url: &str) -> PathBuf {
    let at = format!("server: {}", server.url());
    kubeconfig_with(server, dir, &at, &format!("{at}\n    proxy-url: {proxy_url}"))
}

/// `eas` in `dir` through `kubeconfig`, its state directory `dir/state`: add the command.
pub fn eas_on(kubeconfig: &Path, dir: &Path) -> Command {
    let mut c = eas(dir);
    c.arg("--kubeconfig").arg(kubeconfig).arg("--state-dir").arg(dir.join("state"));
    c
}

/// `eas facts` on the xeon-amx fixture's inputs through `kubeconfig`, ready to run.
pub fn facts_through(kubeconfig: &Path) -> Command {
    let mut c = eas(&fixture("xeon-amx"));
    c.arg("--kubeconfig").arg(kubeconfig).arg("facts").args(facts_args("xeon-amx"));
    c
}

/// A kubeconfig in `dir` naming a server that nothing listens on, and its port: any network
/// call fails (exit 1).
pub fn unreachable_kubeconfig(dir: &Path) -> (PathBuf, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let path = dir.join("kubeconfig");
    one_user_kubeconfig(&path, &format!("http://127.0.0.1:{port}"), "    token: t\n");
    (path, port)
}

/// Writes a kubeconfig at `path` with one context, `c`, on cluster `k` at `server`, as user `u`,
/// whose credentials are `user`: YAML lines under `user:`, indented four spaces.
pub fn one_user_kubeconfig(path: &Path, server: &str, user: &str) {
    let head = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: {{server: \"{server}\"}}\n\
         contexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  user:\n"
    );
    std::fs::write(path, head + user).unwrap();
}

/// Every file of a support bundle (a gzip'd tar), by name.
pub fn unpack_bundle(bundle: &Path) -> std::collections::BTreeMap<String, String> {
    let bytes = std::fs::read(bundle).unwrap();
    let mut t = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut files = std::collections::BTreeMap::new();
    for e in t.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut e, &mut body).unwrap();
        files.insert(name, body);
    }
    files
}

/// Asserts that `hay` holds every one of `wants`, naming those it lacks.
pub fn contains_all(hay: &str, wants: &[&str]) {
    let missing: Vec<&str> = wants.iter().copied().filter(|w| !hay.contains(w)).collect();
    assert!(missing.is_empty(), "missing {missing:?} in:\n{hay}");
}

/// A record of the first cluster under the state directory `state` that has one at `rel`
/// (`state.json`, `attempt/state.json`), parsed. Only the Docker tier runs `eas up` for real.
#[cfg(feature = "docker-tests")]
pub fn state_record(state: &Path, rel: &str) -> Option<serde_json::Value> {
    for d in std::fs::read_dir(state).ok()? {
        let p = d.ok()?.path().join(rel);
        if p.exists() {
            return serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok();
        }
    }
    None
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Sends `sig` (`-INT`, `-TERM`, `-KILL`) to the process `pid` with kill(1); the test fails if
/// kill does.
#[track_caller]
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {pid}");
}

/// The stderr of a run that exited `code`; else the test fails showing that stderr.
#[track_caller]
pub fn exited(out: &Output, code: i32) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    err
}

/// `out`, once it is a success; else the test fails naming `what`, its exit and its stderr.
#[cfg(feature = "docker-tests")]
#[track_caller]
pub fn succeeded(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{what} failed ({}):\n{}", out.status, text(&out.stderr));
    out
}

/// Replaces the parts of output that change from run to run.
pub fn redact(s: &str, server: &ClusterServer) -> String {
    s.replace(&server.url(), "http://127.0.0.1:PORT")
}

/// Compares `actual` with the golden file, or writes it when UPDATE_GOLDEN is set.
pub fn golden(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("create golden dir");
        std::fs::write(path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()));
    if expected != actual {
        let diff: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(5)
            .map(|(i, (a, b))| format!("line {}:\n  expected: {a}\n  actual:   {b}", i + 1))
            .collect();
        panic!(
            "{} differs from the output ({} vs {} lines):\n{}\n(re-run with UPDATE_GOLDEN=1 after checking the change)",
            path.display(),
            expected.lines().count(),
            actual.lines().count(),
            diff.join("\n")
        );
    }
}

/// The facts document with its timestamp replaced, for comparison.
pub fn stable_facts(stdout: &[u8]) -> (serde_json::Value, String) {
    let mut v: serde_json::Value =
        serde_json::from_slice(stdout).unwrap_or_else(|e| panic!("facts are JSON: {e}\n{}", text(stdout)));
    let at = v["gathered_at"].as_str().expect("gathered_at").to_string();
    v["gathered_at"] = serde_json::json!("<gathered_at>");
    (v, at)
}

/// Runs git in `dir` with a fixed test identity; its trimmed stdout (panics on failure).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Processes whose command line or environment names `needle` (a test's own temporary
/// directory: `eas` runs with HOME inside it, and its children inherit that).
pub fn processes_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let environ = String::from_utf8_lossy(&environ);
        let zombie = std::fs::read_to_string(e.path().join("stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')));
        if (cmd.contains(needle) || environ.contains(needle)) && !zombie {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

/// `base ARGS` on a terminal (a pty from util-linux `script`) in `dir`, with `base`'s
/// environment, `answer` typed at its prompt; stdout holds what the terminal showed.
#[cfg(feature = "docker-tests")]
pub fn on_a_terminal(base: Command, args: &[&str], dir: &Path, answer: &str) -> Output {
    use std::io::Write;
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
    let mut line = quote(base.get_program());
    for a in base.get_args().chain(args.iter().map(std::ffi::OsStr::new)) {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let mut c = Command::new("script");
    c.args(["-qec", &line, "/dev/null"]).current_dir(dir);
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(answer.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Every file under `dir`, its subdirectories' included (none when `dir` is missing).
#[cfg(feature = "docker-tests")]
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}
