use super::*;

fn snap(namespaces: &[&str], releases: &[(&str, &str)], crds: &[&str]) -> Snapshot {
    Snapshot {
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        helm_releases: releases
            .iter()
            .map(|(ns, n)| Release { namespace: ns.to_string(), name: n.to_string() })
            .collect(),
        crds: crds.iter().map(|s| s.to_string()).collect(),
    }
}

fn ns(n: &str) -> Object {
    Object::Namespace(n.into())
}

fn crd(n: &str) -> Object {
    Object::Crd(n.into())
}

fn rel(ns: &str, n: &str) -> Object {
    Object::HelmRelease(Release { namespace: ns.into(), name: n.into() })
}

/// A k3d-gpu cluster before `eas up`: its own NFD, balloons, Gateway API CRDs from Traefik.
fn k3d_gpu() -> Snapshot {
    snap(
        &["default", "kube-system", "node-feature-discovery", "team-a"],
        &[
            ("node-feature-discovery", "node-feature-discovery"),
            ("kube-system", "nri-resource-policy-balloons"),
            ("kube-system", "traefik"),
        ],
        &[
            "gateways.gateway.networking.k8s.io",
            "httproutes.gateway.networking.k8s.io",
            "nodefeaturerules.nfd.k8s-sigs.io",
            "middlewares.traefik.io",
        ],
    )
}

/// What an install adds on top.
fn installed() -> Snapshot {
    k3d_gpu().union(&snap(
        &["llm-inference", "kserve", "envoy-gateway-system", "monitoring"],
        &[("kserve", "kserve-crd"), ("envoy-gateway-system", "envoy-gateway"), ("monitoring", "kube-prometheus-stack")],
        &[
            "llminferenceservices.serving.kserve.io",
            "envoyproxies.gateway.envoyproxy.io",
            "prometheuses.monitoring.coreos.com",
        ],
    ))
}

#[test]
fn created_is_after_minus_before() {
    let l = Ledger::record(None, &k3d_gpu(), &installed());
    assert_eq!(l.before, k3d_gpu());
    assert_eq!(l.created, installed().minus(&k3d_gpu()));
    assert_eq!(l.created.namespaces.len(), 4);
    assert!(!l.created.crds.contains("gateways.gateway.networking.k8s.io"), "pre-existing CRDs are not ours");
}

#[test]
fn a_resumed_run_extends_the_first_ledger() {
    // Run 1 failed half-way: it created llm-inference only.
    let mid = k3d_gpu().union(&snap(&["llm-inference"], &[], &[]));
    let first = Ledger::record(None, &k3d_gpu(), &mid);
    // Between runs a user created a namespace; run 2 starts from there.
    let before2 = mid.union(&snap(&["team-b"], &[], &[]));
    let after2 = installed().union(&snap(&["team-b"], &[], &[]));
    let second = Ledger::record(Some(&first), &before2, &after2);
    assert_eq!(second.created, installed().minus(&k3d_gpu()), "llm-inference stays ours although run 2 found it");
    assert!(second.before.namespaces.contains("team-b"), "a namespace that appeared between runs is the user's");
    assert!(second.before.namespaces.contains("node-feature-discovery"));
    assert!(second.created.minus(&second.before) == second.created, "before and created never overlap");
    // Recording the same run again changes nothing.
    assert_eq!(Ledger::record(Some(&second), &after2, &after2), second);
}

#[test]
fn down_deletes_only_what_eas_created_and_guards_the_rest() {
    let ledger = Ledger::record(None, &k3d_gpu(), &installed());
    let now = installed().union(&snap(&["late-ns"], &[], &[]));
    let plan = guard_teardown(&ledger, &now);
    assert_eq!(plan.delete, installed().minus(&k3d_gpu()));
    let protected: Vec<&Object> = plan.protect.iter().map(|p| &p.object).collect();
    assert_eq!(
        protected,
        [
            &rel("kube-system", "nri-resource-policy-balloons"),
            &rel("node-feature-discovery", "node-feature-discovery"),
            &ns("node-feature-discovery"),
            &crd("gateways.gateway.networking.k8s.io"),
            &crd("httproutes.gateway.networking.k8s.io"),
        ]
    );
    // Neither Traefik nor a user namespace is under threat; they are merely kept.
    assert!(!protected.contains(&&ns("team-a")) && !protected.contains(&&rel("kube-system", "traefik")));
    assert_eq!(plan.unrecorded, [ns("late-ns")]);
    assert!(plan.gone.is_empty());
    assert_eq!(plan.kept_before, k3d_gpu().objects().len());
    let nfd = &plan.protect[2];
    assert!(nfd.threat.certain && nfd.threat.by.contains("nfd"), "{:?}", nfd.threat);
    assert!(plan.protect[3].threat.by.contains(r".*gateway\.networking\.(k8s|x-k8s)\.io"));
}

#[test]
fn down_twice_deletes_nothing_the_second_time() {
    let ledger = Ledger::record(None, &k3d_gpu(), &installed());
    let first = guard_teardown(&ledger, &installed());
    let after_first = installed().minus(&first.delete);
    assert_eq!(after_first, k3d_gpu());
    let second = guard_teardown(&ledger, &after_first);
    assert!(second.delete.is_empty());
    assert_eq!(second.gone, ledger.created.objects());
    assert_eq!(second.protect, first.protect);
}

#[test]
fn the_report_says_what_is_left_and_why() {
    let ledger = Ledger::record(None, &k3d_gpu(), &installed());
    let plan = guard_teardown(&ledger, &installed());
    // The installer's NFD teardown took k3d-gpu's namespace; one of ours is still terminating.
    let after = k3d_gpu().minus(&snap(&["node-feature-discovery"], &[], &[])).union(&snap(&["kserve"], &[], &[]));
    assert_eq!(plan.still_present(&after), [ns("kserve")]);
    assert_eq!(plan.lost(&after).iter().map(|p| &p.object).collect::<Vec<_>>(), [&ns("node-feature-discovery")]);
    let report = plan.report(&after);
    assert_eq!(
        report[0],
        "left: namespace kserve: created by eas up, still present after deletion (it may still be terminating)"
    );
    assert!(
        report[1].starts_with(
            "restore: namespace node-feature-discovery existed before eas up and is gone: EI nfd teardown"
        )
    );
    assert!(report.contains(&"kept: CRD gateways.gateway.networking.k8s.io: existed before eas up".to_string()));
    assert_eq!(
        report.last().unwrap(),
        &format!("{} objects that existed before eas up were left alone", k3d_gpu().objects().len())
    );
    let again = guard_teardown(&ledger, &k3d_gpu()).report(&k3d_gpu());
    assert!(
        again.iter().any(|l| { l.starts_with("already removed: Helm release envoy-gateway-system/envoy-gateway") })
    );
}

#[test]
fn broad_crd_patterns_from_the_data() {
    // (CRD name, whether an installer teardown would delete it)
    let cases = [
        ("gateways.gateway.networking.k8s.io", true),
        ("backendtlspolicies.gateway.networking.x-k8s.io", true),
        ("envoyproxies.gateway.envoyproxy.io", true),
        ("servicemonitors.monitoring.coreos.com", true),
        ("grafanas.grafana.integreatly.org", true),
        ("virtualservices.networking.istio.io", true),
        ("llminferenceservices.serving.kserve.io", true),
        ("llminferenceserviceconfigs.serving.kserve.io", true),
        ("inferenceservices.serving.kserve.io", true),
        ("leaderworkersets.leaderworkerset.x-k8s.io", true),
        // Same group suffix only as a whole label.
        ("things.notmonitoring.coreos.com", false),
        ("nodefeatures.nfd.k8s-sigs.io", false),
        ("middlewares.traefik.io", false),
        ("sandboxes.agents.x-k8s.io", false),
    ];
    for (name, threatened) in cases {
        assert_eq!(threat(&crd(name)).is_some(), threatened, "{name}");
    }
    assert!(threat(&rel("any-ns", "kserve-crd")).is_some(), "a release rule without namespace matches any");
    assert!(threat(&rel("other", "node-feature-discovery")).is_none(), "the NFD rule is for its namespace only");
    assert!(!threat(&ns("istio-system")).unwrap().certain);
    assert!(threat(&ns("kube-system")).is_none());
}

#[test]
fn snapshots_serialise_as_plain_lists() {
    let s = snap(&["a"], &[("n", "r")], &["c.x.io"]);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"namespaces": ["a"], "helm_releases": [{"namespace": "n", "name": "r"}], "crds": ["c.x.io"]})
    );
    assert_eq!(
        s.objects().iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["Helm release n/r", "namespace a", "CRD c.x.io"]
    );
}
