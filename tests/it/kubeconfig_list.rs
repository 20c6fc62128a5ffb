//! `KUBECONFIG=a:b` merged like kubectl: the current context named in `a`, defined in `b`.
//! Only a merge of both files finds the cluster.

use crate::support;

use support::*;

#[test]
fn facts_read_the_cluster_a_kubeconfig_list_names_across_files() {
    let server =
        ClusterServer::start_with(fixture("xeon-amx"), Options { context: Some("lab".into()), ..Options::default() });
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::write(&a, "apiVersion: v1\nkind: Config\ncurrent-context: lab\nclusters: []\ncontexts: []\nusers: []\n")
        .unwrap();
    let b = dir.path().join("b");
    let text_b =
        std::fs::read_to_string(server.kubeconfig()).unwrap().replace("current-context: lab", "current-context: none");
    assert_ne!(text_b, std::fs::read_to_string(server.kubeconfig()).unwrap(), "b names another current context");
    std::fs::write(&b, text_b).unwrap();
    let run = |list: String| {
        eas(&fixture("xeon-amx")).env("KUBECONFIG", list).arg("facts").args(facts_args("xeon-amx")).output().unwrap()
    };
    let out = run(format!("{}:{}", a.display(), b.display()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let facts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(facts["cluster"]["context"], "lab");
    // b alone names a context it does not define: bad input, so the merge above is what worked.
    let out = run(b.display().to_string());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
