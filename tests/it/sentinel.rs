//! The sentinel test of issue 23, after a real run: secrets are planted in each place one can
//! come from (the kubeconfig's static token, password and client key; an exec credential
//! plugin's output and the environment it is given; `HF_TOKEN` and the admin password the
//! bastion passes on as secret; a proxy URL's password), and repeated by the cluster itself (a
//! model pod's log, an event). After `eas up --yes` (real: the bastion, the stand-in installer),
//! `status`, `verify`, `support-bundle` and `down --dry-run`, every output, every file under the
//! run's HOME (the state directory, its logs and work tree, the temporary directory) and every
//! file inside the support bundle is grepped: none may hold a sentinel. Needs a Docker Engine,
//! as tests/it/up_cycle.rs does.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;
use support::sentinels::{self, *};
use support::synthetic_install::{self, CLUSTER, MODEL};
use support::{ClusterServer, Options};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn unpack(bundle: &Path) -> Vec<(String, String)> {
    let bytes = std::fs::read(bundle).unwrap();
    let mut t = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut files = Vec::new();
    for e in t.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut body).unwrap();
        files.push((name, String::from_utf8_lossy(&body).into_owned()));
    }
    files
}

#[test]
fn no_sentinel_secret_in_any_output_log_state_work_tree_or_support_bundle_after_a_run() {
    use base64::Engine;
    let _engine = support::docker::engine();
    let s = synthetic_install::setup("sentinel");
    let server =
        ClusterServer::start_with(support::fixture(CLUSTER), Options { token: S_TOKEN.into(), ..Options::default() });
    server.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "eas-test"}}));
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "installer", "namespace": "eas-test"}, "data": {"mode": "ok"}}));
    let home = tempfile::Builder::new().prefix("home-").tempdir_in(&s.dir).unwrap();
    let home = home.path();
    let (state, tmp) = (home.join("state"), home.join("tmp"));
    std::fs::create_dir_all(&tmp).unwrap();

    // The exec plugin mints the token the server accepts, only when given its secret variable.
    let plugin = home.join("get-token");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\n[ \"$SNTL_ENV\" = {S_PLUGIN_ENV} ] || exit 9\n\
             echo '{{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{{\"token\":\"{S_TOKEN}\"}}}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let key_data = b64.encode(format!("-----BEGIN EC PRIVATE KEY-----\n{S_KEY_LINE}\n-----END EC PRIVATE KEY-----\n"));
    let kubeconfig = home.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: {ctx}\nclusters:\n- name: k\n  cluster: {{server: \"{url}\"}}\n\
             contexts:\n- name: {ctx}\n  context: {{cluster: k, user: u}}\n- name: other\n  context: {{cluster: k, user: o}}\n\
             users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      \
             command: {plugin}\n      env: [{{name: SNTL_ENV, value: {S_PLUGIN_ENV}}}]\n      interactiveMode: Never\n\
             - name: o\n  user:\n    token: {S_STATIC}\n    username: admin\n    password: {S_PASSWORD}\n    \
             client-key-data: {key_data}\n",
            ctx = server.context(),
            url = server.url(),
            plugin = plugin.display(),
        ),
    )
    .unwrap();
    let proxy = format!("http://user:{S_PROXY}@proxy.invalid:3128");
    let eas = || {
        let mut c = s.eas(home, &kubeconfig, &state);
        c.env("TMPDIR", &tmp)
            .env("HF_TOKEN", S_HF)
            .env("KEYCLOAK_ADMIN_PASSWORD", S_ADMIN)
            .env("HTTPS_PROXY", &proxy)
            .env("NO_PROXY", "127.0.0.1,localhost");
        c
    };
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut run = |what: &str, args: Vec<String>| {
        let o = eas().args(&args).output().unwrap();
        let code = o.status.code();
        outputs.push((format!("{what} stdout"), support::text(&o.stdout)));
        outputs.push((format!("{what} stderr (exit {code:?})"), support::text(&o.stderr)));
        code
    };
    let mut up = vec!["up".to_string()];
    up.extend(s.up_args());
    up.push("--yes".into());
    assert_eq!(run("up", up), Some(0), "{outputs:#?}");

    // The cluster repeats every secret: the model pod's log and an event (core/v1 shapes).
    let leak = format!(
        "token {S_TOKEN} static {S_STATIC} pw {S_PASSWORD} key {S_KEY_LINE} env {S_PLUGIN_ENV} HF_TOKEN={S_HF} \
         admin {S_ADMIN} proxy {proxy}"
    );
    server.set_log("llm-inference", &format!("{MODEL}-kserve-0"), false, &format!("{leak}\n"));
    server.insert(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{MODEL}-kserve-0.18a0c1e5f1c2d3e4"), "namespace": "llm-inference",
                     "creationTimestamp": "2026-12-04T10:00:00Z"},
        "involvedObject": {"kind": "Pod", "namespace": "llm-inference", "name": format!("{MODEL}-kserve-0"), "apiVersion": "v1"},
        "reason": "Failed", "message": leak, "type": "Warning", "count": 1,
        "firstTimestamp": "2026-12-04T10:00:00Z", "lastTimestamp": "2026-12-04T10:00:00Z",
        "source": {"component": "kubelet", "host": "k3d-gpu-server-0"}}));
    let bundle = home.join("bundle.tar.gz");
    let runs: Vec<(&str, Vec<String>)> = vec![
        ("status", vec!["status".into()]),
        ("status json", vec!["status".into(), "--output".into(), "json".into()]),
        ("verify", vec!["verify".into()]),
        ("support-bundle", vec!["support-bundle".into(), "--out".into(), bundle.display().to_string()]),
        ("down --dry-run", vec!["down".into(), "--dry-run".into()]),
    ];
    for (what, args) in runs {
        let code = run(what, args);
        assert!(code.is_some(), "{what}: killed");
        if what == "support-bundle" {
            assert_eq!(code, Some(0), "{outputs:#?}");
        }
    }

    let files = unpack(&bundle);
    // The bundle really holds what repeated the secrets, masked.
    let pod_log = files.iter().find(|(n, _)| n == &format!("cluster/pods/llm-inference/{MODEL}-kserve-0/main.log"));
    let names: Vec<&String> = files.iter().map(|(n, _)| n).collect();
    assert!(pod_log.is_some_and(|(_, b)| b.contains("HF_TOKEN=***")), "{names:?}");
    assert!(
        files.iter().any(|(n, b)| n == "cluster/events/llm-inference.json" && b.contains("proxy http://***@")),
        "{names:?}"
    );
    assert!(files.iter().any(|(n, _)| n.starts_with("logs/up-")), "{names:?}");

    let mut sentinels = sentinels::forms();
    sentinels.push(key_data.clone());
    let mut leaks = Vec::new();
    let inputs = [kubeconfig.clone(), plugin.clone()];
    let mut all = Vec::new();
    walk(home, &mut all);
    assert!(all.iter().any(|p| p.starts_with(state.join("")) && p.to_string_lossy().contains("/work/")), "a work tree");
    for p in all.iter().filter(|p| !inputs.contains(p) && p.as_path() != bundle) {
        let body = String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
        leaks.extend(sentinels.iter().filter(|s| body.contains(s.as_str())).map(|s| format!("{}: {s}", p.display())));
    }
    for (what, body) in outputs.iter().chain(files.iter()) {
        leaks.extend(sentinels.iter().filter(|s| body.contains(s.as_str())).map(|s| format!("{what}: {s}")));
    }
    assert_eq!(leaks, Vec::<String>::new());
}
