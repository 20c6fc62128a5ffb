//! `eas support-bundle [--out FILE]` (issue 22 item 4): one `.tar.gz` a person can attach to a
//! report, with what eas recorded of this cluster's runs and what the cluster says now, every
//! file masked by the one redactor (`crate::secrets::scrub`: the secrets eas knows by value, and
//! those recognised by their shape).
//!
//! Layout: `state.json`, `facts.json`, `plan.json`, `choices.txt` (the install's; an attempt's
//! under `attempt/`), `logs/…` (every run's log, the installer's included), `status.json` and
//! `doctor.json` (those commands' JSON documents, run as child processes), `cluster/…` and
//! `manifest.json` (`collected`, `redacted: {file: count}`, `not_collected: [{item, why}]`, and
//! `cluster`: its context, server and key, and how the record was found).
//!
//! From the cluster, bounded ([`LOG_LINES`] per container, [`CLUSTER_BYTES`] in all,
//! [`DEADLINE`] for everything the bundle waits for): the events of the recorded namespaces, of
//! `kube-system` and of the nodes; the nodes' conditions; the recorded namespaces' pods and the
//! last lines of each container's log (and of the previous container's, after a restart). Only
//! GETs: it never writes to the cluster, and never reads a Secret.
//!
//! The record is found by the cluster's key when the API answers, else by the context and
//! server each `state.json` recorded (`state::records::find_by_target`). Whatever cannot be
//! collected is named in the manifest and on stderr (`warning: not collected: ITEM: WHY`); the
//! command exits 0 whenever the bundle was written, 1 when it could not be.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::cluster::Cluster;
use crate::error::Failure;
use crate::output::Shell;
use crate::settings::Global;
use crate::state::StateDir;
use crate::state::journal::State;
use crate::state::records::{ATTEMPT, Records};

pub const SCHEMA: &str = "eas-support-bundle/v1";
/// Lines kept of each container's log.
pub const LOG_LINES: u32 = 500;
/// Bytes collected from the cluster in all.
pub const CLUSTER_BYTES: usize = 64 * 1024 * 1024;
/// How long the bundle waits for the cluster and for `status` and `doctor`, in all.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// One call's bound inside the deadline.
const CALL: Duration = Duration::from_secs(10);
/// Bytes kept of each run log (its end: the failure is there).
const LOG_TAIL: usize = 16 * 1024 * 1024;

/// A bundle being put together: its files (unmasked until [`Bundle::finish`]) and what is
/// missing, with why.
#[derive(Default)]
struct Bundle {
    files: BTreeMap<String, Vec<u8>>,
    not_collected: Vec<(String, String)>,
    cluster_bytes: usize,
    /// Which cluster, and how its record was found: the manifest's `cluster`.
    about: Value,
}

impl Bundle {
    fn add(&mut self, name: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.files.insert(name.into(), bytes.into());
    }

    fn miss(&mut self, item: impl Into<String>, why: impl Into<String>) {
        self.not_collected.push((item.into(), why.into()));
    }

    /// Adds a file read from the cluster, within the budget; false once the budget is spent.
    fn add_cluster(&mut self, name: String, bytes: Vec<u8>) -> bool {
        if self.cluster_bytes + bytes.len() > CLUSTER_BYTES {
            self.miss(name, format!("the {} MiB the bundle takes from the cluster are spent", CLUSTER_BYTES >> 20));
            return false;
        }
        self.cluster_bytes += bytes.len();
        self.add(name, bytes);
        true
    }
}

/// `eas support-bundle`.
pub fn command(out: Option<&Path>, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let (bundle, context) = crate::runtime::block_on_interruptible(async { Ok::<_, Failure>(collect(global).await) })?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let path = out.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(default_name(&context, &stamp)));
    let (files, manifest) = finish(bundle);
    for item in manifest["not_collected"].as_array().into_iter().flatten() {
        let s = |k: &str| item[k].as_str().unwrap_or_default().to_string();
        shell.warn(format!("not collected: {}: {}", s("item"), s("why")));
    }
    let bytes = archive(&files)
        .map_err(|e| Failure::step(crate::plan::Step::SupportBundle, format!("cannot pack the bundle: {e}")))?;
    crate::atomic::write_private(&path, &bytes).map_err(|e| {
        Failure::step_next(
            crate::plan::Step::SupportBundle,
            format!("cannot write {}: {e}", path.display()),
            "pass --out FILE in a writable directory",
        )
    })?;
    let masked: u64 = manifest["redacted"].as_object().map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
    shell.note(format!("{} files, {masked} secret(s) masked; manifest.json lists what is in it", files.len()));
    shell.out(path.display().to_string());
    Ok(())
}

/// `eas-support-<context>-<UTC time>.tar.gz`, the context reduced to characters safe in a name.
pub fn default_name(context: &str, stamp: &str) -> String {
    let safe: String =
        context.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let safe = if safe.is_empty() || safe.starts_with('.') { format!("_{safe}") } else { safe };
    format!("eas-support-{safe}-{stamp}.tar.gz")
}

/// One file masked: a JSON document by structure and string by string (it stays valid JSON,
/// with bidi and zero-width characters written as escapes), any other file as text; and the
/// masks by rule.
fn mask_file(name: &str, bytes: &[u8]) -> (Vec<u8>, crate::secrets::redact::ByRule) {
    let text = String::from_utf8_lossy(bytes);
    if name.ends_with(".json")
        && let Ok(mut v) = serde_json::from_str::<Value>(&text)
    {
        let by = crate::secrets::scrub_json(&mut v);
        return (pretty(&v), by);
    }
    let (text, by) = crate::secrets::scrub_by_rule(&text);
    (text.into_bytes(), by)
}

/// Masks every file and writes the manifest. Pure: the bundle in, the files to pack out.
fn finish(bundle: Bundle) -> (Vec<(String, Vec<u8>)>, Value) {
    let (about, not_collected) = (bundle.about.clone(), bundle.not_collected.clone());
    let mut files = Vec::new();
    // By file (the total), by file and rule, and by rule.
    let mut redacted = serde_json::Map::new();
    let mut redactions = serde_json::Map::new();
    let mut by_rule: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, bytes) in bundle.files {
        let (masked, by) = mask_file(&name, &bytes);
        let n: usize = by.values().sum();
        if n > 0 {
            redacted.insert(name.clone(), json!(n));
            redactions.insert(name.clone(), json!(by));
            for (rule, k) in by {
                *by_rule.entry(rule).or_default() += k;
            }
        }
        files.push((name, masked));
    }
    let not_collected: Vec<Value> =
        not_collected.iter().map(|(item, why)| json!({"item": item, "why": crate::secrets::mask(why)})).collect();
    let mut collected: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    collected.push("manifest.json");
    let manifest = json!({
        "schema": SCHEMA,
        "created": crate::state::run::now(),
        "eas_version": env!("CARGO_PKG_VERSION"),
        "cluster": crate::secrets::mask(&about.to_string()).parse::<Value>().unwrap_or(Value::Null),
        "limits": {"log_lines_per_container": LOG_LINES, "cluster_bytes": CLUSTER_BYTES, "seconds": DEADLINE.as_secs()},
        "collected": collected,
        "redacted": redacted,
        "redacted_by_rule": by_rule,
        "redactions": redactions,
        "not_collected": not_collected,
    });
    let mut text = serde_json::to_string_pretty(&manifest).expect("a manifest serialises");
    text.push('\n');
    files.push(("manifest.json".into(), text.into_bytes()));
    (files, manifest)
}

/// The files as a gzip'd tar, each readable by its owner only.
fn archive(files: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mtime = chrono::Utc::now().timestamp().max(0) as u64;
    for (name, bytes) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o600);
        h.set_mtime(mtime);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, name, bytes.as_slice())?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()
}

/// Everything the bundle holds, and the context it is named for.
async fn collect(global: &Global) -> (Bundle, String) {
    let deadline = Instant::now() + DEADLINE;
    let mut b = Bundle::default();
    let target = crate::gather::target(global, CALL).await;
    let root = crate::state::run::state_root(global).map_err(Failure::from);
    let (target, context) = match target {
        Ok(t) => {
            let c = t.context.clone();
            (Some(t), c)
        }
        Err(f) => {
            b.miss("cluster", one_line(&Failure::from(f)));
            (None, global.context.clone().unwrap_or_else(|| "unknown".into()))
        }
    };
    let key = match &target {
        Some(t) => match tokio::time::timeout_at(deadline, t.cluster.cluster_key(CALL)).await {
            Ok(Ok(k)) => Ok(k),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer".to_string()),
        },
        None => Err("no cluster to ask".to_string()),
    };
    // The record: by the key, else by the context and server each run recorded.
    let mut found_by = None;
    let record = match (&root, &key, &target) {
        (Ok(root), Ok(k), _) => StateDir::new(root, k).ok().map(|sd| sd.dir().to_path_buf()),
        (Ok(root), Err(_), Some(t)) => crate::state::records::find_by_target(root, &t.context, &t.server).map(|f| {
            found_by = Some(f.by.clone());
            f.dir
        }),
        _ => None,
    };
    let children = run_children(global, record.as_deref(), deadline);
    match &record {
        Some(dir) if !dir.exists() => {
            b.miss("state.json", format!("no run of eas up is recorded in {}", dir.display()))
        }
        Some(dir) => local(&mut b, dir),
        None => b.miss(
            "state.json",
            match &root {
                Err(f) => one_line(f),
                Ok(root) => format!("no record of this cluster under {}", root.display()),
            },
        ),
    }
    let records = record.as_ref().and_then(|d| {
        let parent = d.parent()?;
        let key = d.file_name()?.to_str()?;
        Records::read(&StateDir::new(parent, key).ok()?).ok()
    });
    match (&target, &key) {
        (Some(t), Ok(_)) => cluster(&mut b, &t.cluster, records.as_ref(), deadline).await,
        (_, Err(e)) if target.is_some() => b.miss("cluster", format!("the API server does not answer: {e}")),
        _ => {}
    }
    for (name, got) in children.await {
        match got {
            Ok(doc) => b.add(name, doc),
            Err(why) => b.miss(name, why),
        }
    }
    let about = json!({
        "context": context,
        "server": target.as_ref().map(|t| t.server.clone()),
        "key": key.as_ref().ok(),
        "record": record.as_ref().map(|d| d.display().to_string()),
        "record_found_by": found_by,
    });
    b.about = about;
    (b, context)
}

/// A failure as one clause: its cause, then its hint in brackets.
fn one_line(f: &Failure) -> String {
    let lines: Vec<String> = f.lines().iter().map(|l| l.trim_start_matches("error: ").to_string()).collect();
    let (cause, rest): (Vec<&String>, Vec<&String>) =
        lines.iter().partition(|l| !l.starts_with("hint: ") && !l.starts_with("next: "));
    let cause = cause.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("; ");
    match rest.first() {
        Some(h) => format!("{cause} ({})", h.trim_start_matches("hint: ").trim_start_matches("next: ")),
        None => cause,
    }
}

/// A JSON file of the bundle: pretty, with bidi and zero-width characters (a node's name may
/// hold them) written as `\uXXXX` escapes, as every other printer of a cluster string does.
fn pretty(v: &Value) -> Vec<u8> {
    let mut s = crate::text::json_safe(serde_json::to_string_pretty(v).expect("json serialises"));
    s.push('\n');
    s.into_bytes()
}

/// The record's files: the install's, an attempt's under `attempt/`, and every run log.
fn local(b: &mut Bundle, dir: &Path) {
    let read = |p: &Path| crate::bounded::read(p, crate::bounded::Kind::State);
    for name in ["state.json", "facts.json", "plan.json", "choices.txt"] {
        for (from, to) in
            [(dir.join(name), name.to_string()), (dir.join(ATTEMPT).join(name), format!("{ATTEMPT}/{name}"))]
        {
            match read(&from) {
                Ok(bytes) => b.add(to, bytes),
                Err(e) if e.is_not_found() && to.starts_with(ATTEMPT) => {}
                Err(e) => b.miss(to, e.to_string()),
            }
        }
    }
    match read(&dir.join(ATTEMPT).join("attempt.json")) {
        Ok(bytes) => b.add(format!("{ATTEMPT}/attempt.json"), bytes),
        Err(e) if e.is_not_found() => {}
        Err(e) => b.miss(format!("{ATTEMPT}/attempt.json"), e.to_string()),
    }
    // The install's logs and those of a run that stopped before its install (`attempt/logs/`:
    // a run stopped by a blocker logs there).
    let mut found = 0;
    for (logs, under) in
        [(dir.join("logs"), "logs".to_string()), (dir.join(ATTEMPT).join("logs"), format!("{ATTEMPT}/logs"))]
    {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&logs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        names.sort();
        found += names.len();
        for p in names {
            let name =
                format!("{under}/{}", p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
            match tail_of(&p, LOG_TAIL) {
                Ok(bytes) => b.add(name, bytes),
                Err(e) => b.miss(name, e.to_string()),
            }
        }
    }
    if found == 0 {
        b.miss("logs/", format!("no run log in {} nor in {ATTEMPT}/logs/", dir.join("logs").display()));
    }
}

/// The last `max` bytes of a file (a log's end holds its failure).
fn tail_of(p: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(p)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max as u64)))?;
    let mut bytes = Vec::new();
    f.take(max as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The recorded settings `eas doctor` takes as flags (`--probe-nodes` and `--offline` are
/// `eas up`'s alone, and the bundle's doctor runs offline).
const DOCTOR_KEYS: [&str; 12] = [
    "layer",
    "env",
    "profile",
    "ref",
    "model",
    "nodes.containerd_config",
    "nodes.nri_socket",
    "base_image",
    "allow_unpinned_base",
    "mirrors.eas",
    "mirrors.ei",
    "mirrors.eat",
];

/// `status.json` and `doctor.json`: those commands' JSON documents, from child processes of this
/// binary with the same global flags (no secret is on them; the environment is inherited), each
/// ended at the deadline.
fn run_children(
    global: &Global,
    record: Option<&Path>,
    deadline: Instant,
) -> impl std::future::Future<Output = Vec<(String, Result<Vec<u8>, String>)>> + use<> {
    let state = record.and_then(|d| State::load(&d.join("state.json")).ok().flatten());
    let mut base: Vec<std::ffi::OsString> =
        vec!["--quiet".into(), "--no-color".into(), "--progress".into(), "plain".into()];
    let mut flag = |name: &str, v: Option<&std::ffi::OsStr>| {
        if let Some(v) = v {
            base.push(name.into());
            base.push(v.into());
        }
    };
    // The config file the bundle's own settings came from: its doctor reads the same one.
    flag("--config", global.file.as_ref().map(|f| f.path.as_os_str()));
    flag("--kubeconfig", global.kubeconfig.as_deref().map(Path::as_os_str));
    flag("--context", global.context.as_deref().map(std::ffi::OsStr::new));
    flag("--state-dir", global.state_dir.as_deref().map(Path::as_os_str));
    // Doctor runs with the selection the install recorded (issue 32 item 3), so a healthy
    // install's bundle records no failures; a record from before it was kept gives its layer
    // and env.
    let selection = state.as_ref().and_then(|s| s.selection.clone());
    let recorded_ca = selection.as_ref().and_then(|s| s.get("ca_bundle")).and_then(|v| v.as_str());
    let ca = global.ca_bundle.as_ref().map(|c| c.path.as_os_str()).or(recorded_ca.map(std::ffi::OsStr::new));
    flag("--ca-bundle", ca);
    let mut doctor: Vec<String> = vec!["doctor".into(), "--output".into(), "json".into(), "--offline".into()];
    match (&selection, &state) {
        (Some(sel), _) => doctor.extend(crate::state::selection::flags(sel, &DOCTOR_KEYS)),
        (None, Some(s)) => doctor.extend(["--layer".into(), s.layer.clone(), "--env".into(), s.env.clone()]),
        (None, None) => {}
    }
    let jobs = [("status.json", vec!["status".to_string(), "--output".into(), "json".into()]), ("doctor.json", doctor)];
    let runs: Vec<_> = jobs
        .into_iter()
        .map(|(name, args)| {
            let base = base.clone();
            async move { (name.to_string(), child_document(&base, &args, deadline).await) }
        })
        .collect();
    futures::future::join_all(runs)
}

async fn child_document(base: &[std::ffi::OsString], args: &[String], deadline: Instant) -> Result<Vec<u8>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the eas binary: {e}"))?;
    let child = tokio::process::Command::new(exe)
        .args(base)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run `eas {}`: {e}", args[0]))?;
    let out = tokio::time::timeout_at(deadline, child.wait_with_output())
        .await
        .map_err(|_| format!("`eas {}` did not finish within {} s", args[0], DEADLINE.as_secs()))?
        .map_err(|e| format!("`eas {}`: {e}", args[0]))?;
    // Its document says how it ended (an error document included): kept whatever its exit code.
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(_) => Ok(out.stdout),
        Err(_) => Err(format!("`eas {}` printed no JSON document (exit {:?})", args[0], out.status.code())),
    }
}

/// The namespaces the record names: what its runs created, and where they created it.
pub fn recorded_namespaces(records: Option<&Records>) -> Vec<String> {
    let mut ns = std::collections::BTreeSet::new();
    for s in records.into_iter().flat_map(|r| [r.install.as_ref(), r.attempt.as_ref()]).flatten() {
        let c = &s.ledger.created;
        ns.extend(c.namespaces.iter().cloned());
        ns.extend(c.helm_releases.iter().map(|r| r.namespace.clone()));
        ns.extend(c.objects.iter().map(|o| o.namespace.clone()));
    }
    ns.remove("kube-system");
    ns.into_iter().collect()
}

/// What the cluster says now, bounded by the deadline and the byte budget; GETs only.
async fn cluster(b: &mut Bundle, cluster: &Cluster, records: Option<&Records>, deadline: Instant) {
    let get = |path: String| {
        let cluster = cluster.clone();
        async move {
            let t = deadline.saturating_duration_since(Instant::now()).min(CALL);
            match cluster.get_text(&path, t).await {
                Ok(t) => Ok(t),
                Err(crate::cluster::ApiError::NoAnswer { .. }) if Instant::now() >= deadline => {
                    Err(format!("the {} s the bundle waits for the cluster are over", DEADLINE.as_secs()))
                }
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let namespaces = recorded_namespaces(records);
    // Events: the recorded namespaces', kube-system's, the nodes'.
    let mut event_lists: Vec<(String, String)> = std::iter::once("kube-system".to_string())
        .chain(namespaces.iter().cloned())
        .map(|ns| (format!("cluster/events/{ns}.json"), format!("/api/v1/namespaces/{ns}/events")))
        .collect();
    event_lists
        .push(("cluster/events/nodes.json".into(), "/api/v1/events?fieldSelector=involvedObject.kind%3DNode".into()));
    for (name, path) in event_lists {
        match get(path).await.and_then(|t| list_items(&t)) {
            Ok(items) => {
                if !b.add_cluster(name, pretty(&Value::Array(items.into_iter().map(strip).collect()))) {
                    return;
                }
            }
            Err(why) => b.miss(name, why),
        }
    }
    match get("/api/v1/nodes".into()).await.and_then(|t| list_items(&t)) {
        Ok(nodes) => {
            let conditions: Vec<Value> = nodes
                .iter()
                .map(|n| json!({"name": n["metadata"]["name"], "conditions": n["status"]["conditions"]}))
                .collect();
            if !b.add_cluster("cluster/nodes.json".into(), pretty(&Value::Array(conditions))) {
                return;
            }
        }
        Err(why) => b.miss("cluster/nodes.json", why),
    }
    for ns in &namespaces {
        let pods = match get(format!("/api/v1/namespaces/{ns}/pods")).await.and_then(|t| list_items(&t)) {
            Ok(p) => p,
            Err(why) => {
                b.miss(format!("cluster/pods/{ns}/"), why);
                continue;
            }
        };
        for pod in pods {
            let Some(name) = pod["metadata"]["name"].as_str().map(str::to_string) else { continue };
            let dir = format!("cluster/pods/{ns}/{name}");
            let restarts = restarts_by_container(&pod);
            if !b.add_cluster(format!("{dir}/pod.json"), pretty(&strip(pod))) {
                return;
            }
            for (container, restarted) in restarts {
                for previous in [false, true].into_iter().filter(|p| !p || restarted) {
                    let suffix = if previous { ".previous" } else { "" };
                    let file = format!("{dir}/{container}{suffix}.log");
                    let left = CLUSTER_BYTES.saturating_sub(b.cluster_bytes).max(1);
                    let path = format!(
                        "/api/v1/namespaces/{ns}/pods/{name}/log?container={}&tailLines={LOG_LINES}&limitBytes={left}{}",
                        query_escape(&container),
                        if previous { "&previous=true" } else { "" }
                    );
                    match get(path).await {
                        Ok(text) => {
                            if !b.add_cluster(file, text.into_bytes()) {
                                return;
                            }
                        }
                        Err(why) => b.miss(file, why),
                    }
                }
            }
        }
    }
}

/// A list answer's `items`; a list without them is a malformed answer, not an empty one.
fn list_items(text: &str) -> Result<Vec<Value>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("the answer is not JSON: {e}"))?;
    match v.get("items") {
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(Value::Null) => Ok(Vec::new()),
        _ => Err("the answer is not a list (no `items`)".into()),
    }
}

/// An object without its `managedFields` (bookkeeping, as `kubectl describe` leaves out).
fn strip(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// Each container of a pod (init containers first) and whether it restarted, which is when
/// the previous container's log is asked for too.
pub fn restarts_by_container(pod: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (spec, status) in [("initContainers", "initContainerStatuses"), ("containers", "containerStatuses")] {
        let statuses = pod["status"][status].as_array().cloned().unwrap_or_default();
        for c in pod["spec"][spec].as_array().into_iter().flatten() {
            let Some(name) = c["name"].as_str() else { continue };
            let restarted = statuses
                .iter()
                .find(|s| s["name"] == name)
                .and_then(|s| s["restartCount"].as_u64())
                .is_some_and(|n| n > 0);
            out.push((name.to_string(), restarted));
        }
    }
    out
}

fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_name_carries_a_safe_context_and_the_time() {
        assert_eq!(default_name("k3d-gpu", "20261204T211500Z"), "eas-support-k3d-gpu-20261204T211500Z.tar.gz");
        assert_eq!(default_name("a/b c", "T"), "eas-support-a_b_c-T.tar.gz");
        assert_eq!(default_name("..", "T"), "eas-support-_..-T.tar.gz");
    }

    #[test]
    fn a_restarted_container_gets_its_previous_log_too() {
        let pod = json!({
            "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"containerStatuses": [{"name": "a", "restartCount": 0}, {"name": "b", "restartCount": 3}]}
        });
        let got = restarts_by_container(&pod);
        assert_eq!(got, [("init".to_string(), false), ("a".into(), false), ("b".into(), true)]);
    }

    #[test]
    fn every_file_is_masked_and_the_manifest_counts_and_names_what_is_missing() {
        let mut b = Bundle::default();
        b.add("logs/up.log", "ok\nAuthorization: Bearer abc.def\nhf_abcdefghijABCDEFGHIJ0123\n");
        b.add("plan.json", "{}");
        b.miss("status.json", "`eas status` did not finish within 60 s");
        let (files, manifest) = finish(b);
        let log = String::from_utf8(files.iter().find(|(n, _)| n == "logs/up.log").unwrap().1.clone()).unwrap();
        assert_eq!(log, "ok\nAuthorization: Bearer ***\n***\n");
        assert_eq!(manifest["redacted"], json!({"logs/up.log": 2}));
        assert_eq!(manifest["not_collected"][0]["item"], "status.json");
        assert_eq!(manifest["collected"], json!(["logs/up.log", "plan.json", "manifest.json"]));
        assert_eq!(files.last().unwrap().0, "manifest.json");
    }

    #[test]
    fn the_cluster_budget_stops_at_its_limit() {
        let mut b = Bundle::default();
        assert!(b.add_cluster("a".into(), vec![0; CLUSTER_BYTES - 1]));
        assert!(!b.add_cluster("b".into(), vec![0; 2]));
        assert!(b.files.contains_key("a") && !b.files.contains_key("b"));
        assert!(b.not_collected[0].1.contains("64 MiB"), "{:?}", b.not_collected);
    }

    #[test]
    fn the_archive_holds_each_file_private() {
        let files = vec![("manifest.json".to_string(), b"{}".to_vec()), ("logs/a.log".into(), b"x".to_vec())];
        let bytes = archive(&files).unwrap();
        let mut t = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
        let got: Vec<(String, u32)> = t
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path().unwrap().display().to_string(), e.header().mode().unwrap())
            })
            .collect();
        assert_eq!(got, [("manifest.json".to_string(), 0o600), ("logs/a.log".into(), 0o600)]);
    }
}
