//! Hostile and unlucky input (issue 10): each case names what must hold, and every one of them
//! failed before the fix it tests.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::*;

fn write_exec(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_failing_credential_plugin_is_one_line_without_its_secrets_and_exits_1() {
    let server = ClusterServer::start(fixture("xeon-amx"));
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("get-token");
    write_exec(
        &plugin,
        "#!/bin/sh\necho starting >&2\necho \"auth failed: token=SECRETTOKEN for $PLUGIN_SECRET\" >&2\nexit 7\n",
    );
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: {{server: \"{}\"}}\n\
             contexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  user:\n    exec:\n\
             \x20     apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      args: [\"--secret=ARGSECRET\"]\n\
             \x20     env: [{{name: PLUGIN_SECRET, value: ENVSECRET}}]\n      interactiveMode: Never\n",
            server.url(),
            plugin.display()
        ),
    )
    .unwrap();
    let out = eas(&fixture("xeon-amx"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("facts")
        .args(facts_args("xeon-amx"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a run-time failure: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("==>")).collect();
    assert_eq!(
        lines,
        vec![format!(
            "error: kubeconfig: credential plugin {} failed with exit code 7: auth failed: token=*** for ***",
            plugin.display()
        )],
    );
    for secret in ["ARGSECRET", "ENVSECRET", "SECRETTOKEN", "Output {", "KUBERNETES_EXEC_INFO"] {
        assert!(!stderr.contains(secret) && !text(&out.stdout).contains(secret), "{secret} shown: {stderr}");
    }
    assert!(server.requests().is_empty());
}
