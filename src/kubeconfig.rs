//! The one kubeconfig resolver: `--kubeconfig`, else the `KUBECONFIG` list (merged like
//! kubectl), else `~/.kube/config`; and `--context`. Facts, verify, down and the bastion's
//! single-file copy all read the cluster through it, so they cannot disagree.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{Kubeconfig, KubeconfigError};

use crate::settings::Global;

/// Where the kubeconfig comes from, and whether the user named it (a missing named file is an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSource {
    /// One file, or the `KUBECONFIG` list in order.
    pub paths: Vec<PathBuf>,
    pub explicit: bool,
    pub context: Option<String>,
    /// The merged kubeconfig with a token minted through its exec plugin (JSON), for the
    /// bastion's copy: set by [`KubeSource::mint`].
    pub minted: Option<String>,
    /// The global `--ca-bundle`'s certificates (DER): trusted for the API server when the
    /// kubeconfig pins no CA.
    pub extra_roots: Option<Vec<Vec<u8>>>,
    /// The client's read timeout when `EAS_KUBE_READ_TIMEOUT` (seconds) sets it, else the
    /// command's call timeout: a seam for tests, where a watch must stay quiet past it.
    pub read_timeout: Option<std::time::Duration>,
}

/// The variable that shortens the client's read timeout ([`KubeSource::read_timeout`]).
pub const READ_TIMEOUT_VAR: &str = "EAS_KUBE_READ_TIMEOUT";

impl KubeSource {
    /// `--kubeconfig`, else `$KUBECONFIG` (a list), else `~/.kube/config`.
    pub fn resolve(g: &Global) -> KubeSource {
        let context = g.context.clone();
        let extra_roots = g.ca_bundle.as_ref().map(|b| b.ders.clone());
        let read_timeout = g
            .env
            .nonempty(READ_TIMEOUT_VAR)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|s| *s > 0)
            .map(std::time::Duration::from_secs);
        let source = |paths, explicit| KubeSource { paths, explicit, context, minted: None, extra_roots, read_timeout };
        if let Some(p) = &g.kubeconfig {
            return source(vec![p.clone()], true);
        }
        if let Some(v) = g.env.nonempty("KUBECONFIG") {
            let paths: Vec<PathBuf> = std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect();
            if !paths.is_empty() {
                return source(paths, true);
            }
        }
        let home = g.env.home().unwrap_or_default();
        source(vec![home.join(".kube").join("config")], false)
    }

    /// One file, as given.
    #[cfg(test)]
    pub fn file(path: PathBuf, explicit: bool, context: Option<String>) -> KubeSource {
        KubeSource { paths: vec![path], explicit, context, minted: None, extra_roots: None, read_timeout: None }
    }

    /// The paths as the user would write them (`a:b`).
    pub fn shown(&self) -> String {
        self.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")
    }

    /// The single file, when there is exactly one.
    pub fn single(&self) -> Option<&Path> {
        match self.paths.as_slice() {
            [p] => Some(p),
            _ => None,
        }
    }

    /// When the context's user has an exec credential plugin: mints the token on the host and
    /// keeps the kubeconfig with the token in place of the plugin, for the bastion (the plugin
    /// does not exist inside it). Returns when the token expires, as the plugin said.
    pub async fn mint(&mut self, timeout: Duration) -> Result<Option<Minted>, TargetError> {
        let (mut kc, _) = match self.load() {
            Ok(loaded) => loaded,
            // No kubeconfig at the default place: nothing to mint, the caller decides.
            Err(TargetError::NoDefault(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(context) = self.context.clone().or_else(|| kc.current_context.clone()) else { return Ok(None) };
        let minted = mint_exec(&mut kc, &context, timeout).await?;
        if minted.is_some() {
            let text = serde_json::to_string(&kc)
                .map_err(|e| TargetError::Malformed { path: self.shown(), cause: e.to_string() })?;
            self.minted = Some(text);
        }
        Ok(minted)
    }

    /// The kubeconfig, the list's files merged in order, and how to name it in messages.
    pub fn load(&self) -> Result<(Kubeconfig, String), TargetError> {
        load_from(&self.paths, self.explicit)
    }
}

/// Why no cluster could be chosen: always bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("kubeconfig {0} not found")]
    Missing(PathBuf),
    #[error("kubeconfig {path} cannot be read: {cause}")]
    Unreadable { path: PathBuf, cause: String },
    #[error("kubeconfig {path} is malformed: {cause}")]
    Malformed { path: String, cause: String },
    #[error("no kubeconfig: --kubeconfig not given, KUBECONFIG not set, and {0} does not exist")]
    NoDefault(PathBuf),
    #[error("context {name:?} not found in kubeconfig {path} (contexts: {available})")]
    NoContext { name: String, path: String, available: String },
    #[error("kubeconfig {0} sets no current-context")]
    NoCurrentContext(String),
    #[error("context {context:?} in kubeconfig {path} is unusable: {cause}")]
    Unusable { context: String, path: String, cause: String },
    /// A proxy variable or `proxy-url` that cannot be used (credentials never shown).
    #[error("{0}")]
    Proxy(crate::net::proxy::ProxyError),
    /// The exec credential plugin failed: a run-time failure (exit 1), not bad input.
    #[error("{0}")]
    Plugin(String),
    /// SIGINT or SIGTERM while the kubeconfig was read from a pipe (exit 130).
    #[error("interrupted while reading the kubeconfig")]
    Interrupted,
}

impl TargetError {
    pub fn hint(&self) -> String {
        match self {
            TargetError::Missing(_) | TargetError::Unreadable { .. } | TargetError::NoDefault(_) => {
                "pass --kubeconfig PATH or set KUBECONFIG (k3d: `k3d kubeconfig write <cluster>`; k3s: /etc/rancher/k3s/k3s.yaml)"
                    .into()
            }
            TargetError::Malformed { .. } | TargetError::Unusable { .. } => {
                "check the file with `kubectl config view --kubeconfig <path>`".into()
            }
            TargetError::NoContext { .. } | TargetError::NoCurrentContext(_) => {
                "pass --context with one of the contexts listed (`kubectl config get-contexts`)".into()
            }
            TargetError::Proxy(e) => e.hint(),
            TargetError::Plugin(_) | TargetError::Interrupted => String::new(),
        }
    }
}

fn load_from(paths: &[PathBuf], explicit: bool) -> Result<(Kubeconfig, String), TargetError> {
    let read = |p: &Path| -> Result<Kubeconfig, TargetError> {
        let text = crate::bounded::read_string(p, crate::bounded::Kind::Kubeconfig).map_err(|e| match e {
            e if e.is_not_found() => TargetError::Missing(p.to_path_buf()),
            crate::bounded::ReadError::Interrupted { .. } => TargetError::Interrupted,
            e => TargetError::Unreadable { path: p.to_path_buf(), cause: e.to_string() },
        })?;
        let kc = parse(&text, p)?;
        crate::secrets::learn_kubeconfig(&kc);
        Ok(kc)
    };
    let shown = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
    if let [p] = paths {
        if !explicit && !p.exists() {
            return Err(TargetError::NoDefault(p.clone()));
        }
        return Ok((read(p)?, shown));
    }
    // Like kubectl: files in the list that do not exist are skipped, the rest merged in order.
    let mut merged: Option<Kubeconfig> = None;
    for p in paths.iter().filter(|p| p.exists()) {
        let next = read(p)?;
        merged = Some(match merged {
            None => next,
            Some(m) => m.merge(next).map_err(|e| malformed(&shown, e))?,
        });
    }
    merged.map(|m| (m, shown.clone())).ok_or_else(|| TargetError::Missing(PathBuf::from(shown)))
}

/// Parses one kubeconfig file as kube's `read_from` does (relative file paths made absolute
/// against the file's directory), with an error that names the line, column and kind of the
/// problem and never quotes the file: the parser's own message shows the lines around the error,
/// which in a kubeconfig are tokens, passwords and keys.
fn parse(text: &str, path: &Path) -> Result<Kubeconfig, TargetError> {
    let mut kc = Kubeconfig::from_yaml(text)
        .map_err(|e| TargetError::Malformed { path: path.display().to_string(), cause: parse_cause(&e, text) })?;
    if let Some(dir) = path.parent() {
        let abs = |p: &mut Option<String>| {
            if let Some(v) = p.as_mut()
                && !v.is_empty()
                && Path::new(v.as_str()).is_relative()
            {
                *v = dir.join(v.as_str()).display().to_string();
            }
        };
        for c in kc.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
            abs(&mut c.certificate_authority);
        }
        for a in kc.auth_infos.iter_mut().filter_map(|a| a.auth_info.as_mut()) {
            abs(&mut a.client_certificate);
            abs(&mut a.client_key);
            abs(&mut a.token_file);
        }
    }
    Ok(kc)
}

/// `line 13, column 25: mapping values are not allowed in this context`: the position and the
/// kind, with anything the message quotes from the file, and any value of the file it repeats
/// unquoted, replaced by `…`.
fn parse_cause(e: &KubeconfigError, text: &str) -> String {
    match e {
        KubeconfigError::Parse(inner) => yaml_cause(inner, text),
        _ => "not a valid kubeconfig document".into(),
    }
}

/// A YAML error of a file that may hold secrets, as `line L, column C: <kind>`: never the
/// parser's snippet of the file, nor any value of the file the message repeats.
pub fn yaml_cause(yaml: &serde_saphyr::Error, text: &str) -> String {
    let at = yaml.location().map(|l| format!("line {}, column {}: ", l.line(), l.column())).unwrap_or_default();
    let message = yaml.without_snippet().to_string();
    let message = message.split(" --> ").next().unwrap_or("");
    // Drop the parser's own position prefix (`error: line 13 column 25: `), kept above.
    let kind = message.trim_start_matches("error: ");
    let kind = match kind.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((pos, rest)) if pos.contains("column") => rest,
        _ => kind,
    };
    let kind = kind.split(" at line ").next().unwrap_or(kind);
    format!("{at}{}", scrub(kind, text))
}

/// `kind` with quoted runs, and every value the file holds, replaced by `…`.
fn scrub(kind: &str, text: &str) -> String {
    let mut out = String::with_capacity(kind.len());
    let mut quote: Option<char> = None;
    for c in kind.chars() {
        match (quote, c) {
            (None, '"' | '`' | '\'') => {
                quote = Some(c);
                out.push('…');
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, c) => out.push(c),
        }
    }
    // Unquoted echoes of a value: every word after a `key:` in the file, from 6 characters up.
    let mut values: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(_, v)| v))
        .flat_map(|v| v.split(|c: char| c.is_whitespace() || matches!(c, ',' | '{' | '}' | '[' | ']' | '"' | '\'')))
        .filter(|w| w.len() >= 6)
        .collect();
    values.sort_by_key(|w| std::cmp::Reverse(w.len()));
    for v in values {
        if out.contains(v) {
            out = out.replace(v, "…");
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn malformed(path: &str, e: KubeconfigError) -> TargetError {
    let cause = match e {
        KubeconfigError::ReadConfig(io, _) => io.to_string(),
        other => other.to_string(),
    };
    TargetError::Malformed { path: path.to_string(), cause: cause.split_whitespace().collect::<Vec<_>>().join(" ") }
}

/// Whether an ExecCredential's `expirationTimestamp` (RFC 3339) is already past at `now`. One
/// that does not parse is left to the API server to judge.
pub fn expired(at: &str, now: chrono::DateTime<chrono::Utc>) -> bool {
    chrono::DateTime::parse_from_rfc3339(at).is_ok_and(|t| t <= now)
}

/// A plugin's process group, killed whole when dropped: whatever of it is still running when
/// the plugin answers, times out, or the run is cancelled; then every process that still carries
/// the run's [`PLUGIN_MARK`] in its environment (a child that left the group with `setsid`).
/// What cannot be ended is said ([`end_marked`]).
struct ProcessGroup {
    pid: u32,
    mark: String,
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the group the plugin leads; ESRCH (already gone) is fine.
        unsafe {
            libc::kill(-(self.pid as libc::pid_t), libc::SIGKILL);
        }
        for (pid, e) in end_marked(std::path::Path::new("/proc"), &self.mark) {
            tracing::warn!("a process the credential plugin started (pid {pid}) could not be ended: {e}");
        }
    }
}

/// The variable each plugin run carries, `<eas pid>-<n>`: its descendants inherit it, whatever
/// session or group they move to.
const PLUGIN_MARK: &str = "EAS_CREDENTIAL_PLUGIN_RUN";

/// A plugin's output is an ExecCredential (a few KiB): stdout past 1 MiB is refused, and only
/// the last 64 KiB of stderr are kept (its last line is what is shown).
const PLUGIN_STDOUT: usize = 1 << 20;
const PLUGIN_STDERR_TAIL: usize = 64 << 10;

/// SIGKILLs every process under `proc` (a `/proc`) other than this one whose environment holds
/// `PLUGIN_MARK=mark`; returns those that could not be signalled, with why.
fn end_marked(proc: &std::path::Path, mark: &str) -> Vec<(i32, std::io::Error)> {
    let needle = format!("{PLUGIN_MARK}={mark}");
    let me = std::process::id() as i32;
    let mut failed = Vec::new();
    for entry in std::fs::read_dir(proc).into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else { continue };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            // SAFETY: kill(2) on one pid; ESRCH (gone meanwhile) is fine.
            let r = unsafe { libc::kill(pid, libc::SIGKILL) };
            let e = std::io::Error::last_os_error();
            if r != 0 && e.raw_os_error() != Some(libc::ESRCH) {
                failed.push((pid, e));
            }
        }
    }
    failed
}

/// `r` read to its end, bounded: past `max` bytes, `Err` at once (`tail` false: stdout, where a
/// credential is), or only the last `max` bytes kept (`tail`: stderr, whose last line is shown).
async fn read_bounded(mut r: impl tokio::io::AsyncRead + Unpin, max: usize, tail: bool) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 64 << 10]);
    loop {
        let n = r.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(buf);
        }
        if !tail && buf.len() + n > max {
            return Err(format!("printed more than {} KiB on stdout, past the bound of a credential", max >> 10));
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > max {
            buf.drain(..buf.len() - max);
        }
    }
}

/// A token minted on the host through the context's exec credential plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    /// The plugin's `expirationTimestamp`, when it gave one.
    pub expires: Option<String>,
}

/// Runs the exec credential plugin of `context`'s user, if it has one, under `timeout` and
/// killed if the future is dropped (a cancelled run), and puts the token it returns in its
/// place: the client then never runs the plugin itself (a blocking, unbounded call), and a copy
/// of this kubeconfig works where the plugin does not exist (the bastion). A plugin that returns
/// a client certificate instead is left to the client.
pub async fn mint_exec(kc: &mut Kubeconfig, context: &str, timeout: Duration) -> Result<Option<Minted>, TargetError> {
    let Some(user) =
        kc.contexts.iter().find(|c| c.name == context).and_then(|c| c.context.as_ref()).map(|c| c.user.clone())
    else {
        return Ok(None);
    };
    let Some(auth) =
        kc.auth_infos.iter_mut().find(|a| Some(&a.name) == user.as_ref()).and_then(|a| a.auth_info.as_mut())
    else {
        return Ok(None);
    };
    let Some(exec) = &auth.exec else { return Ok(None) };
    // Failures read as `net::exec_auth` words them when kube runs a plugin: one line, the
    // command without arguments, the last stderr line with the plugin's secrets masked.
    let plugin = crate::net::exec_auth::Plugin::of(auth).expect("an exec user");
    let cmd = crate::text::for_people(&plugin.command);
    let fail = |what: String| TargetError::Plugin(format!("credential plugin {cmd} {what}"));
    let command = exec.command.clone().unwrap_or_default();
    let api_version = exec.api_version.clone().unwrap_or_else(|| "client.authentication.k8s.io/v1".into());
    let info = serde_json::json!({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": false}});
    let mut cmd_line = tokio::process::Command::new(&command);
    cmd_line
        .args(exec.args.iter().flatten())
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Its own process group: the plugin's children (a browser login helper, a `sleep` in a
        // shell script) are killed with it, on timeout, on a signal (the future is dropped) and
        // when it exits, and the terminal's Ctrl-C is eas's to handle.
        .process_group(0)
        .kill_on_drop(true);
    for e in exec.env.iter().flatten() {
        if let (Some(n), Some(v)) = (e.get("name"), e.get("value")) {
            cmd_line.env(n, v);
        }
    }
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mark = format!("{}-{}", std::process::id(), RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    cmd_line.env(PLUGIN_MARK, &mark);
    let mut child = cmd_line.spawn().map_err(|e| fail(format!("could not be started: {e}")))?;
    let _group = child.id().map(|pid| ProcessGroup { pid, mark });
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let run = async {
        // Both pipes at once (a plugin blocked on a full stderr never closes stdout); stdout past
        // its bound ends the run at once.
        let stderr_tail =
            async { Ok(read_bounded(stderr.expect("piped"), PLUGIN_STDERR_TAIL, true).await.unwrap_or_default()) };
        let (out, err) =
            futures::future::try_join(read_bounded(stdout.expect("piped"), PLUGIN_STDOUT, false), stderr_tail).await?;
        let status = child.wait().await.map_err(|e| format!("could not be run: {e}"))?;
        Ok::<_, String>(std::process::Output { status, stdout: out, stderr: err })
    };
    let out = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| fail(format!("gave no credential within {} s", timeout.as_secs().max(1))))?
        .map_err(fail)?;
    if !out.status.success() {
        let code = out.status.code().map_or_else(|| "on a signal".to_string(), |c| format!("with exit code {c}"));
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        return Err(match stderr.lines().map(str::trim).rfind(|l| !l.is_empty()) {
            Some(l) => fail(format!("failed {code}: {}", plugin.redact(l))),
            None => fail(format!("failed {code} and printed nothing on stderr")),
        });
    }
    let cred: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|_| fail("printed no valid ExecCredential".into()))?;
    let Some(token) = cred.pointer("/status/token").and_then(serde_json::Value::as_str) else {
        return Ok(None);
    };
    let expires = cred.pointer("/status/expirationTimestamp").and_then(serde_json::Value::as_str).map(str::to_string);
    crate::secrets::learn(token);
    if let Some(at) = expires.as_deref()
        && expired(at, chrono::Utc::now())
    {
        return Err(fail(format!("returned a token that expired at {at}; log in again")));
    }
    auth.token = Some(token.to_string().into());
    auth.exec = None;
    Ok(Some(Minted { expires }))
}

/// The k3d server container the API is reached at from inside the cluster's network.
pub fn k3d_server(cluster: &str) -> String {
    format!("https://k3d-{cluster}-server-0:6443")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_plugin(script: &str) -> (tempfile::TempDir, Kubeconfig) {
        let (dir, plugin) = crate::testing::temp_path("plugin");
        std::fs::write(&plugin, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\n\
             contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    exec:\n      \
             apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      args: [x]\n      \
             env:\n      - name: GREETING\n        value: hi\n",
            plugin.display()
        );
        (dir, Kubeconfig::from_yaml(&text).unwrap())
    }

    #[tokio::test]
    async fn the_plugins_token_replaces_the_exec_entry() {
        let (_d, mut kc) = with_plugin(
            "#!/bin/sh\n[ \"$1 $GREETING\" = \"x hi\" ] || exit 9\n\
             echo '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t0k\",\"expirationTimestamp\":\"2030-01-01T00:00:00Z\"}}'\n",
        );
        let m = mint_exec(&mut kc, "c", Duration::from_secs(10)).await.unwrap();
        assert_eq!(m, Some(Minted { expires: Some("2030-01-01T00:00:00Z".into()) }));
        let auth = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(auth.exec.is_none());
        let json = serde_json::to_value(&kc).unwrap();
        assert_eq!(json.pointer("/users/0/user/token").unwrap(), "t0k");
    }

    #[test]
    fn a_malformed_kubeconfig_names_line_column_and_kind_and_never_its_text() {
        let head = "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n";
        let cases = [
            (
                "    token: TOKSENTINEL9: oops\n    password: PWSENTINEL9\n",
                "line 6, column 24: mapping values are not allowed",
            ),
            ("    token: [TOKSENTINEL9, b]\n", "line 6, column 12: "),
            ("    client-key-data: \"KEYSENTINEL9\n", "line 6, column 22: unclosed quote"),
            ("    token: TOKSENTINEL9\n\ttoken: x\n", "line 6, column 12: "),
        ];
        let (_dir, path) = crate::testing::temp_path("config");
        for (tail, want) in cases {
            std::fs::write(&path, format!("{head}{tail}")).unwrap();
            let e = load_from(std::slice::from_ref(&path), true).unwrap_err().to_string();
            assert!(e.contains(want), "{tail:?}: {e}");
            assert!(!e.contains("SENTINEL9") && !e.contains(" | "), "{tail:?}: {e}");
        }
    }

    #[test]
    fn a_kubeconfig_past_its_limit_or_relative_paths() {
        let e = load_from(&[PathBuf::from("/dev/zero")], true).unwrap_err().to_string();
        assert_eq!(e, "kubeconfig /dev/zero cannot be read: kubeconfig /dev/zero is larger than its limit of 16 MiB");
        let (dir, path) = crate::testing::temp_path("config");
        std::fs::write(&path, "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster: {server: 'https://h', certificate-authority: ca.pem}\n").unwrap();
        let (kc, _) = load_from(std::slice::from_ref(&path), true).unwrap();
        let ca = kc.clusters[0].cluster.as_ref().unwrap().certificate_authority.clone().unwrap();
        assert_eq!(ca, dir.path().join("ca.pem").display().to_string());
    }

    #[test]
    fn an_expiry_in_the_past_is_expired() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-04T12:00:00Z").unwrap().to_utc();
        assert!(expired("2020-01-01T00:00:00Z", now));
        assert!(expired("2026-12-04T12:00:00Z", now));
        assert!(!expired("2026-12-04T12:00:01Z", now));
        assert!(!expired("soon", now), "an unreadable expiry is the API server's to judge");
    }

    #[tokio::test]
    async fn an_already_expired_token_is_refused_naming_the_expiry() {
        let (_d, mut kc) = with_plugin(
            "#!/bin/sh\necho '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t0k\",\"expirationTimestamp\":\"2020-01-01T00:00:00Z\"}}'\n",
        );
        let e = mint_exec(&mut kc, "c", Duration::from_secs(10)).await.unwrap_err();
        assert!(matches!(e, TargetError::Plugin(_)), "a run-time failure: {e}");
        assert!(e.to_string().ends_with("returned a token that expired at 2020-01-01T00:00:00Z; log in again"), "{e}");
    }

    /// Whether `pid` is gone within 2 s (a SIGKILL is delivered asynchronously).
    fn gone_soon(pid: i32) -> bool {
        (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !alive(pid)
        })
    }

    fn alive(pid: i32) -> bool {
        // A zombie is gone for this purpose: /proc/<pid>/stat's state `Z`.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    }

    /// Issue 30 item 6: a plugin's `setsid` grandchild left the process group and outlived eas.
    /// It carries the run's mark, and is ended with the rest.
    #[tokio::test]
    async fn a_setsid_grandchild_of_the_plugin_is_ended_too() {
        let (dir, mut kc) = with_plugin(
            "#!/bin/sh
setsid sh -c 'echo $$ > \"$0.grandchild\"; exec sleep 300' \"$0\" >/dev/null 2>&1 &
             while [ ! -s \"$0.grandchild\" ]; do sleep 0.05; done
echo '{\"status\":{\"token\":\"t\"}}'
",
        );
        mint_exec(&mut kc, "c", Duration::from_secs(10)).await.unwrap();
        let pid: i32 = std::fs::read_to_string(dir.path().join("plugin.grandchild")).unwrap().trim().parse().unwrap();
        assert!(gone_soon(pid), "the plugin's setsid grandchild {pid} outlived it");
    }

    /// Issue 30 item 6: a plugin printing 3 GB drove eas to 2.9 GB of memory before "printed no
    /// valid ExecCredential". Its stdout is refused past 1 MiB, and the plugin ended.
    #[tokio::test]
    async fn a_plugin_printing_3_gb_is_refused_at_its_bound() {
        let (_d, mut kc) = with_plugin(
            "#!/bin/sh
exec head -c 3000000000 /dev/zero
",
        );
        let e = mint_exec(&mut kc, "c", Duration::from_secs(60)).await.unwrap_err().to_string();
        assert!(e.contains("printed more than 1024 KiB on stdout"), "{e}");
    }

    #[tokio::test]
    async fn the_plugins_children_die_with_it_on_timeout_and_when_it_answers() {
        for (body, timeout) in [
            ("sleep 300 &\necho $! > \"$0.child\"\nexec sleep 300\n", Duration::from_millis(300)),
            (
                "sleep 300 >/dev/null 2>&1 &\necho $! > \"$0.child\"\necho '{\"status\":{\"token\":\"t\"}}'\n",
                Duration::from_secs(10),
            ),
        ] {
            let (dir, mut kc) = with_plugin(&format!("#!/bin/sh\n{body}"));
            let _ = mint_exec(&mut kc, "c", timeout).await;
            let pid: i32 = std::fs::read_to_string(dir.path().join("plugin.child")).unwrap().trim().parse().unwrap();
            assert!(gone_soon(pid), "the plugin's child {pid} outlived it: {body}");
        }
    }

    #[tokio::test]
    async fn a_plugin_that_hangs_or_fails_is_named() {
        let (_d, mut kc) = with_plugin("#!/bin/sh\nexec sleep 30\n");
        let e = mint_exec(&mut kc, "c", Duration::from_millis(200)).await.unwrap_err().to_string();
        assert!(e.contains("gave no credential within 1 s"), "{e}");
        let (_d, mut kc) = with_plugin("#!/bin/sh\necho 'login required' >&2\nexit 3\n");
        let e = mint_exec(&mut kc, "c", Duration::from_secs(10)).await.unwrap_err().to_string();
        assert!(e.contains("login required"), "{e}");
    }
}
