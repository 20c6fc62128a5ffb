use super::*;
use crate::snapshot::{ClusterNamed, Named, NodeLabel, watch};

fn snap(namespaces: &[&str], releases: &[(&str, &str)], crds: &[&str]) -> Snapshot {
    Snapshot {
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        helm_releases: releases
            .iter()
            .map(|(ns, n)| Release { namespace: ns.to_string(), name: n.to_string() })
            .collect(),
        crds: crds.iter().map(|s| s.to_string()).collect(),
        ..Snapshot::default()
    }
}

fn named(kind: &str, namespace: &str, name: &str) -> Named {
    Named { kind: kind.into(), namespace: namespace.into(), name: name.into() }
}

fn inside(items: &[(&str, &str, &str)]) -> Snapshot {
    Snapshot { objects: items.iter().map(|(k, ns, n)| named(k, ns, n)).collect(), ..Snapshot::default() }
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
    assert_eq!(plan.lost(&after), [ns("node-feature-discovery")]);
    let report = plan.report(&after);
    assert_eq!(
        report[0],
        "left: namespace kserve: created by eas up, still present after deletion (it may still be terminating)"
    );
    assert_eq!(report[1], "lost: namespace node-feature-discovery: existed before eas up and is gone");
    let found = plan.findings(&after, "T");
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].kind, FindingKind::Lost);
    assert!(found[0].note.contains("EI nfd teardown"), "{:?}", found[0]);
    assert_eq!(found[1].kind, FindingKind::Left);
    assert_eq!(found[1].object, "namespace kserve");
    assert!(report.contains(&"kept: CRD gateways.gateway.networking.k8s.io: existed before eas up".to_string()));
    assert_eq!(
        report.last().unwrap(),
        &format!("{} objects that existed before eas up were left alone", k3d_gpu().objects().len() - 1)
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

#[test]
fn the_ledger_fails_closed_and_keeps_its_before() {
    let started = Ledger::begin(None, &k3d_gpu());
    assert_eq!(started.before, k3d_gpu(), "the before is recorded before the installer runs");
    assert!(started.incomplete_reason().is_some(), "until the after is read, the record is incomplete");
    let failed = started.fail("list namespaces: 500");
    assert_eq!(failed.before, k3d_gpu(), "a failed snapshot keeps the before");
    assert_eq!(failed.incomplete_reason().as_deref(), Some("list namespaces: 500"));
    // The next run (install skipped on resume) completes it from the cluster as it is.
    let done = failed.complete(&installed());
    assert_eq!(done.incomplete_reason(), None);
    assert_eq!(done, Ledger::record(None, &k3d_gpu(), &installed()));
}

#[test]
fn a_run_killed_mid_install_is_attributed_to_eas_by_the_next_run() {
    // Run 1 saved its before, created llm-inference and died (SIGKILL): no after.
    let dead = Ledger::begin(None, &k3d_gpu());
    let mid = k3d_gpu().union(&snap(&["llm-inference"], &[], &[]));
    // Run 2 starts from the cluster the dead run left: its pending before is the dead run's.
    let second = Ledger::begin(Some(&dead), &mid);
    assert_eq!(second.pending.as_ref(), Some(&k3d_gpu()));
    assert!(!second.before.namespaces.contains("llm-inference"), "the dead run's namespace is not pre-existing");
    let done = second.complete(&installed());
    assert_eq!(done.created, installed().minus(&k3d_gpu()));
    assert_eq!(done.before, k3d_gpu());
}

#[test]
fn a_second_down_still_skips_what_the_first_one_lost() {
    let ledger = Ledger::record(None, &k3d_gpu(), &installed());
    let first = guard_teardown(&ledger, &installed());
    assert!(first.skip_components().contains(&"nfd".to_string()));
    // The first down lost the NFD namespace; the second starts without it.
    let after_first = k3d_gpu().minus(&snap(&["node-feature-discovery"], &[], &[]));
    let second = guard_teardown(&ledger, &after_first);
    assert_eq!(second.skip_components(), first.skip_components(), "a missing object is still guarded");
    assert!(second.lost(&after_first).is_empty(), "not lost by this down: the record keeps the first finding");
}

#[test]
fn objects_made_inside_a_pre_existing_namespace_are_tracked_and_removed() {
    // The user had llm-inference with their own model server; eas adds one, and a Secret.
    let before = k3d_gpu().union(&snap(&["llm-inference"], &[], &[])).union(&inside(&[(
        "LLMInferenceService",
        "llm-inference",
        "users-model",
    )]));
    let after = before
        .union(&inside(&[("LLMInferenceService", "llm-inference", "qwen"), ("Secret", "llm-inference", "hf-token")]));
    let ledger = Ledger::record(None, &before, &after);
    assert_eq!(
        ledger.created.objects(),
        [
            Object::Namespaced(named("LLMInferenceService", "llm-inference", "qwen")),
            Object::Namespaced(named("Secret", "llm-inference", "hf-token")),
        ]
    );
    let plan = guard_teardown(&ledger, &after);
    assert_eq!(plan.delete, ledger.created);
    assert!(plan.skip_components().contains(&"llm_services".to_string()), "the namespace is pre-existing");
    let users = Object::Namespaced(named("LLMInferenceService", "llm-inference", "users-model"));
    assert!(plan.protect.iter().any(|p| p.object == users), "{:?}", plan.protect);
    assert_eq!(users.to_string(), "LLMInferenceService llm-inference/users-model");
    // Deleted by eas itself, so the objects it made are gone and nothing is lost.
    let done = after.minus(&plan.delete);
    assert!(plan.lost(&done).is_empty() && plan.still_present(&done).is_empty());
    assert!(plan.report(&done).iter().any(|l| l == "kept: namespace llm-inference: existed before eas up"));
}

#[test]
fn force_incomplete_skips_every_guarded_component() {
    let all = all_guarded_components();
    for c in ["nfd", "llm_services", "kserve", "envoy_gateway", "observability", "istio"] {
        assert!(all.contains(&c.to_string()), "{c}: {all:?}");
    }
}

#[test]
fn old_records_without_the_new_fields_still_load() {
    let text = r#"{"before": {"namespaces": ["a"], "helm_releases": [], "crds": []},
                   "created": {"namespaces": ["b"], "helm_releases": [], "crds": []}}"#;
    let l: Ledger = serde_json::from_str(text).unwrap();
    assert_eq!(l.incomplete_reason(), None);
    assert!(l.findings.is_empty() && l.created.objects.is_empty());
}

#[test]
fn the_watch_list_names_the_namespaces_and_kinds() {
    let w = watch();
    let names: Vec<&str> = w.namespaces.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["llm-inference", "kserve"]);
    let kinds: Vec<&str> = w.kinds.iter().map(|k| k.kind.as_str()).collect();
    for k in ["LLMInferenceService", "Deployment", "Service", "ConfigMap", "Secret"] {
        assert!(kinds.contains(&k), "{k}: {kinds:?}");
    }
    // Every watched namespace has a teardown guard: a pre-existing one is never torn down.
    for n in names {
        assert!(threat(&ns(n)).is_some(), "{n}");
    }
}

fn label(node: &str, key: &str) -> NodeLabel {
    NodeLabel { node: node.into(), key: key.into() }
}

/// Issue 28 item 8: what EAS makes outside Helm (the admission policy and its binding, the
/// `nri.intel.com/*` node labels) is in the ledger; `down` deletes what the run added, keeps a
/// label that was there before, and skips the teardown that would strip it.
#[test]
fn the_admission_policy_and_node_labels_the_run_added_go_and_a_label_there_before_stays() {
    let policy = |kind: &str| ClusterNamed { kind: kind.into(), name: "eg-protected-hostname-ownership".into() };
    let before = Snapshot { node_labels: [label("n1", "nri.intel.com/max-tp")].into(), ..k3d_gpu() };
    let after = Snapshot {
        cluster_objects: [policy("ValidatingAdmissionPolicy"), policy("ValidatingAdmissionPolicyBinding")].into(),
        node_labels: [
            label("n1", "nri.intel.com/max-tp"),
            label("n1", "nri.intel.com/balloons-enabled"),
            label("n2", "nri.intel.com/max-tp"),
        ]
        .into(),
        ..installed()
    };
    let ledger = Ledger::record(None, &before, &after);
    let plan = guard_teardown(&ledger, &after);
    let deleted: Vec<String> = plan.delete.objects().iter().map(ToString::to_string).collect();
    for o in [
        "ValidatingAdmissionPolicy eg-protected-hostname-ownership",
        "ValidatingAdmissionPolicyBinding eg-protected-hostname-ownership",
        "node label nri.intel.com/balloons-enabled on n1",
        "node label nri.intel.com/max-tp on n2",
    ] {
        assert!(deleted.contains(&o.to_string()), "{o}: {deleted:?}");
    }
    assert!(!deleted.iter().any(|d| d.contains("max-tp on n1")), "{deleted:?}");
    assert!(plan.skip_components().contains(&"nri_cpu_balloons".to_string()), "{:?}", plan.skip_components());
    // Once gone, nothing is left; had the label there before gone, it would be reported lost.
    let down = after.minus(&plan.delete);
    assert!(plan.findings(&down, "t").is_empty(), "{:?}", plan.findings(&down, "t"));
    let stripped = Snapshot { node_labels: Default::default(), ..down };
    let lost = plan.findings(&stripped, "t");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].object, "node label nri.intel.com/max-tp on n1");
    assert!(lost[0].note.contains("nri_cpu_balloons"), "{}", lost[0].note);
    // A record from before these fields reads as one without them.
    let old: Snapshot = serde_json::from_str(r#"{"namespaces": [], "helm_releases": [], "crds": []}"#).unwrap();
    assert!(old.cluster_objects.is_empty() && old.node_labels.is_empty());
}
