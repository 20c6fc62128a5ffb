use std::path::{Path, PathBuf};

use super::*;
use crate::facts::{self, NodeCondition};
use crate::plan::PhaseId;

const GIB: u64 = 1 << 30;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> Facts {
    Facts::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A recorded cluster's facts, as `eas facts` gathers them (tests/it/facts_recorded.rs keeps them).
fn recorded(name: &str) -> Facts {
    read(&root().join("fixtures/clusters").join(name).join("expected/facts.json"))
}

fn inputs(weights_gib: Option<u64>) -> Inputs<'static> {
    Inputs { weights_bytes: weights_gib.map(|g| g * GIB), model: Some("m"), recorded: Recorded::default() }
}

fn failing(r: &Report) -> Vec<&'static str> {
    r.checks.iter().filter(|c| c.refused()).map(|c| c.name).collect()
}

#[test]
fn each_case_refuses_at_its_gate_only() {
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("fixtures/prereq/cases.json")).unwrap()).unwrap();
    for case in cases["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let f = read(&root().join(format!("fixtures/prereq/{name}.facts.json")));
        let r = check(&f, &inputs(case["weights_gib"].as_u64()));
        let want: Vec<&str> = case["fails"].as_str().into_iter().collect();
        assert_eq!(failing(&r), want, "{name}: {:#?}", r.lines());
        let blockers = r.blockers();
        assert_eq!(blockers.is_empty(), want.is_empty(), "{name}");
        for b in &blockers {
            assert_eq!(b.kind, crate::plan::Kind::Refusal, "{name}: a refusal");
            assert!(!b.fix.is_empty(), "{name}: every blocker says how to remove it");
        }
        if let Some(cause) = case["cause"].as_str() {
            assert!(blockers.iter().any(|b| b.cause.contains(cause)), "{name}: {blockers:#?}");
        }
    }
}

#[test]
fn the_gates_name_the_object_the_need_and_the_fix() {
    let case = |n: &str| read(&root().join(format!("fixtures/prereq/{n}.facts.json")));
    let b = check(&case("small-ephemeral-storage"), &inputs(Some(15))).blockers();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].phase, PhaseId::Config, "the weights come with the model choice");
    assert!(b[0].cause.contains("node xeon-sr-01 has 5.0 GiB"), "{}", b[0].cause);
    assert!(b[0].cause.contains("weights need 15.0 GiB plus a 10.0 GiB margin (25.0 GiB)"), "{}", b[0].cause);

    let b = check(&case("access-denied"), &inputs(Some(15))).blockers();
    assert_eq!(b.len(), 2, "one blocker per denied review: {b:#?}");
    assert!(b[0].cause.contains("may not create customresourcedefinitions.apiextensions.k8s.io in all namespaces"));
    assert!(b[1].cause.contains("may not create clusterrolebindings.rbac.authorization.k8s.io"));
    assert!(b.iter().all(|x| x.fix.contains("cluster-admin") && x.phase == PhaseId::Facts));

    let b = check(&case("no-default-storage-class"), &inputs(None)).blockers();
    assert!(b[0].cause.contains("none of its StorageClasses (local-path) is marked default"), "{}", b[0].cause);
    assert!(b[0].cause.contains("model-store"), "{}", b[0].cause);
    assert!(b[0].fix.contains("storageclass.kubernetes.io/is-default-class"), "{}", b[0].fix);

    let b = check(&case("disk-pressure"), &inputs(None)).blockers();
    assert_eq!(b.len(), 1);
    assert!(
        b[0].cause.contains("node xeon-sr-01 (where the model would land) is under DiskPressure since ")
            && b[0].cause.contains(" (KubeletHasDiskPressure: kubelet has disk pressure)"),
        "{}",
        b[0].cause
    );
}

#[test]
fn the_recorded_clusters_pass_every_gate() {
    for name in ["k3d-gpu-desktop", "xeon-amx", "k3s-3node-eas", "eat1"] {
        let r = check(&recorded(name), &inputs(Some(15)));
        assert_eq!(failing(&r), Vec::<&str>::new(), "{name}: {:#?}", r.lines());
        let lines = r.lines();
        assert_eq!(lines.len(), 7, "{name}: one line per check");
        assert_eq!(
            lines[0],
            (true, "storage class", "default local-path (rancher.io/local-path)".to_string()),
            "{name}"
        );
    }
}

#[test]
fn an_earlier_install_eas_did_not_record_is_a_warning_naming_it() {
    let f = recorded("k3s-3node-eas");
    let r = check(&f, &inputs(None));
    let w = r.warnings();
    let earlier = w.iter().find(|w| w.contains("earlier EAS/EI install")).expect("warned");
    for rel in ["llm-inference/llm-qwen2-5-coder-14b", "kserve/kserve", "litellm/litellm (failed)"] {
        assert!(earlier.contains(rel), "{rel}: {earlier}");
    }
    assert!(earlier.contains("one release not deployed"), "{earlier}");
    assert!(!earlier.contains("node-feature-discovery"), "NFD is not the stack's: {earlier}");
    assert!(
        w.iter().any(|w| w.contains("namespaces of the stack that eas did not create: agent-sandbox-system")),
        "{w:?}"
    );
    assert!(r.blockers().is_empty());

    // What eas recorded as its own (the ledger's `created`) is not an earlier install.
    let created = crate::state::ledger::Snapshot {
        namespaces: f.namespaces.iter().cloned().collect(),
        helm_releases: f
            .helm_releases
            .iter()
            .map(|r| crate::state::ledger::Release { namespace: r.namespace.clone(), name: r.name.clone() })
            .collect(),
        ..Default::default()
    };
    let mine = Recorded::from_created(&created);
    let r = check(&f, &Inputs { recorded: mine, ..inputs(None) });
    assert!(!r.warnings().iter().any(|w| w.contains("earlier") || w.contains("did not create")), "{:?}", r.warnings());

    assert!(check(&recorded("xeon-amx"), &inputs(None)).warnings().is_empty(), "a clean cluster warns of nothing");
}

fn cond(t: &str, status: &str) -> NodeCondition {
    NodeCondition {
        type_: t.into(),
        status: status.into(),
        reason: String::new(),
        message: String::new(),
        since: String::new(),
    }
}

fn with_conditions(n: &mut facts::Node, set: &[(&str, &str)]) {
    for (t, s) in set {
        n.conditions.retain(|c| c.type_ != *t);
        n.conditions.push(cond(t, s));
    }
}

#[test]
fn the_landing_node_must_be_ready_schedulable_and_without_pressure() {
    // (conditions set on the node, cordoned, what the one blocker says; empty: no blocker)
    type Case<'a> = (&'a [(&'a str, &'a str)], bool, &'a str);
    let cases: [Case; 6] = [
        (&[("Ready", "False")], false, "not Ready (Ready=False)"),
        (&[("Ready", "Unknown")], false, "not Ready (Ready=Unknown)"),
        (&[("MemoryPressure", "True")], false, "under MemoryPressure"),
        (&[("PIDPressure", "True")], false, "under PIDPressure"),
        (&[], true, "cordoned (spec.unschedulable)"),
        (&[("DiskPressure", "Unknown")], false, ""),
    ];
    for (set, cordon, want) in cases {
        let mut f = recorded("xeon-amx");
        with_conditions(&mut f.nodes[0], set);
        f.nodes[0].unschedulable = cordon;
        let b = check(&f, &inputs(None)).blockers();
        if want.is_empty() {
            assert!(b.is_empty(), "{set:?}: only True is pressure: {b:#?}");
        } else {
            assert_eq!(b.len(), 1, "{set:?}: {b:#?}");
            assert!(b[0].cause.contains(want), "{set:?}: {}", b[0].cause);
        }
    }
    let mut f = recorded("xeon-amx");
    f.nodes[0].conditions.retain(|c| c.type_ != "Ready");
    assert!(check(&f, &inputs(None)).blockers()[0].cause.contains("no Ready condition reported"));
}

#[test]
fn other_nodes_under_pressure_are_a_warning() {
    let mut f = recorded("k3s-3node-eas");
    // lab-w-1 is where the model lands (tests/it/facts_recorded.rs); the others only warn.
    let cp = f.nodes.iter_mut().find(|n| n.name == "lab-cp-1").unwrap();
    with_conditions(cp, &[("DiskPressure", "True")]);
    f.nodes.iter_mut().find(|n| n.name == "lab-w-2").unwrap().unschedulable = true;
    let r = check(&f, &inputs(Some(15)));
    assert!(r.blockers().is_empty(), "{:#?}", r.blockers());
    let w = r.warnings();
    assert!(
        w.iter()
            .any(|w| w
                .contains("2 of 2 other nodes cannot take every pod: lab-cp-1 under DiskPressure, lab-w-2 cordoned")),
        "{w:?}"
    );
}

#[test]
fn facts_from_before_the_gates_warn_what_is_unknown_and_refuse_nothing() {
    let mut f = recorded("xeon-amx");
    f.storage_classes = None;
    f.access_reviews = None;
    f.nodes[0].conditions.clear();
    f.nodes[0].allocatable.remove("ephemeral-storage");
    let r = check(&f, &inputs(Some(15)));
    assert!(r.blockers().is_empty(), "{:#?}", r.blockers());
    let w = r.warnings().join("\n");
    for unknown in [
        "StorageClasses were not read",
        "access reviews were not asked",
        "conditions were not recorded",
        "no allocatable ephemeral-storage",
    ] {
        assert!(w.contains(unknown), "{unknown}: {w}");
    }
    // A cluster that has no StorageClass at all is a refusal, not an unknown.
    f.storage_classes = Some(vec![]);
    assert!(check(&f, &inputs(None)).blockers()[0].cause.contains("the cluster has no StorageClass"));
}

#[test]
fn a_gpu_node_whose_plugin_is_not_ready_is_a_warning_with_the_allocatable_figure() {
    let mut f = recorded("k3d-gpu-desktop");
    assert!(check(&f, &inputs(None)).warnings().is_empty(), "its plugin serves the GPU");
    f.nodes[0].allocatable.insert("gpu.intel.com/i915".into(), "0".into());
    let r = check(&f, &inputs(None));
    assert!(r.blockers().is_empty());
    let w = r.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("node k3d-gpu-server-0 has gpu.intel.com/i915=0 allocatable"), "{}", w[0]);
    assert!(w[0].contains("intel-gpu-plugin") && w[0].contains("eas verify will fail"), "{}", w[0]);
    // NFD's label without any resource: the plugin never registered.
    f.nodes[0].capacity.remove("gpu.intel.com/i915");
    f.nodes[0].allocatable.remove("gpu.intel.com/i915");
    let w = check(&f, &inputs(None)).warnings();
    assert!(w[0].contains("advertises no gpu.intel.com/* resource"), "{w:?}");
}

#[test]
fn doctor_lines_fail_only_on_refusals() {
    let f = read(&root().join("fixtures/prereq/access-denied.facts.json"));
    let lines = doctor_lines(&f, &Inputs::default());
    let access = lines.iter().find(|l| l.1 == "access").unwrap();
    assert!(!access.0);
    let k3s = recorded("k3s-3node-eas");
    let lines = doctor_lines(&k3s, &Inputs::default());
    let earlier = lines.iter().find(|l| l.1 == "earlier install").unwrap();
    assert!(earlier.0 && earlier.2.starts_with("warning: "), "a warning passes: {earlier:?}");
}

#[test]
fn an_eat1_install_is_named_by_the_earlier_install_check_as_well_as_refused_by_config() {
    let eat1 = recorded("eat1");
    let lines = doctor_lines(&eat1, &Inputs::default());
    let earlier = lines.iter().find(|l| l.1 == "earlier install").unwrap();
    assert!(earlier.2.starts_with("warning: an earlier EAT 1.x install (namespaces genai-gateway"), "{earlier:?}");
    // A cluster without EAT 1.x keeps the plain line.
    let k3s = recorded("k3d-gpu-desktop");
    let lines = doctor_lines(&k3s, &Inputs::default());
    let earlier = lines.iter().find(|l| l.1 == "earlier install").unwrap();
    assert!(!earlier.2.contains("EAT 1.x"), "{earlier:?}");
}
