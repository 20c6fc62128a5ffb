use super::*;
use crate::facts::{Node, Taint};

fn arch(name: &str) -> Architecture {
    data::models()
        .candidates
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.architecture.clone())
        .unwrap_or_else(|| panic!("{name} has an architecture"))
}

const ALL: [&str; 3] = ["qwen2-5-coder-14b", "qwen2-5-coder-7b", "llama-3-1-8b"];

#[test]
fn weights_and_kv_per_token_by_hand() {
    // (name, weights bytes = parameters × 2, KV bytes per token = 2 × layers × KV heads × 128 × 2)
    let cases = [
        ("llama-3-1-8b", 8_030_261_248 * 2, 2 * 32 * 8 * 128 * 2),
        ("qwen2-5-coder-14b", 14_770_033_664 * 2, 2 * 48 * 8 * 128 * 2),
        ("qwen2-5-coder-7b", 7_615_616_512 * 2, 2 * 28 * 4 * 128 * 2),
    ];
    for (name, weights, kv) in cases {
        let a = arch(name);
        assert_eq!(a.weights_bytes(), weights, "{name}");
        assert_eq!(a.kv_bytes_per_token(), kv, "{name}");
    }
    assert_eq!(arch("llama-3-1-8b").kv_bytes_per_token(), 128 * 1024, "PR #251: 128 KiB a token");
    assert_eq!(arch("qwen2-5-coder-14b").kv_bytes_per_token(), 192 * 1024);
    assert_eq!(arch("qwen2-5-coder-7b").kv_bytes_per_token(), 56 * 1024);
}

#[test]
fn sizing_by_hand() {
    // (name, budget GiB, fits, cache GiB, lowered, max-model-len), each worked out in the comment.
    type Case = (&'static str, u64, bool, u64, bool, Option<u64>);
    let cases: [Case; 7] = [
        // 24 GiB − 16 060 522 496 B = 9.04 GiB → 9; 32768 × 128 KiB = 4 GiB fits in 9.
        ("llama-3-1-8b", 24, true, 9, true, Some(32768)),
        // 16 GiB − weights = 1.04 GiB → 1; 1 GiB / 128 KiB = 8192 tokens.
        ("llama-3-1-8b", 16, true, 1, true, Some(8192)),
        // 15 GiB − weights = 43 MiB: no whole GiB of cache.
        ("llama-3-1-8b", 15, false, 0, false, None),
        // 100 GiB − 29.54 GB = 72.5 GiB → capped at the catalog's 40; 32768 × 192 KiB = 6 GiB.
        ("qwen2-5-coder-14b", 100, true, 40, false, Some(32768)),
        // 30 GiB − 29.54 GB = 2.49 GiB → 2; 2 GiB / 192 KiB = 10922 → 8192.
        ("qwen2-5-coder-14b", 30, true, 2, true, Some(8192)),
        // 20 GiB − 15.23 GB = 5.8 GiB → 5; 32768 × 56 KiB = 1.75 GiB fits.
        ("qwen2-5-coder-7b", 20, true, 5, true, Some(32768)),
        // 14 GiB < 15.23 GB of weights.
        ("qwen2-5-coder-7b", 14, false, 0, false, None),
    ];
    for (name, budget, fits, cache, lowered, len) in cases {
        let s = size(&arch(name), budget * GIB, 40);
        assert_eq!(
            (s.fits, s.cache_gib, s.lowered, s.max_model_len),
            (fits, cache, lowered, len),
            "{name} at {budget} GiB: {}",
            s.why
        );
    }
}

#[test]
fn max_model_len_is_the_largest_power_of_two_that_fits() {
    let kib128 = 128 * 1024;
    assert_eq!(max_model_len(kib128, 8 * GIB, 131072), Some(65536), "PR #251: 8 GiB ÷ 128 KiB");
    assert_eq!(max_model_len(kib128, 8 * GIB, 32768), Some(32768));
    assert_eq!(max_model_len(kib128, GIB, 32768), Some(8192));
    assert_eq!(max_model_len(kib128, GIB - 1, 32768), Some(4096));
    assert_eq!(max_model_len(kib128, 40 * GIB, 40000), Some(32768), "a ceiling that is not a power of two");
    assert_eq!(max_model_len(kib128, 0, 32768), None);
    assert_eq!(max_model_len(kib128, kib128, 32768), Some(1));
}

#[test]
fn catalog_cache_is_whole_gib_rounded_down() {
    assert_eq!(whole_gib(40.0), 40);
    assert_eq!(whole_gib(7.9), 7);
    assert_eq!(whole_gib(-1.0), 0);
    assert_eq!(whole_gib(f64::NAN), 0);
    assert_eq!(catalog_cache_gib(), 40);
}

fn node(name: &str, alloc: &str, amx: bool, taint: Option<&str>) -> Node {
    let mut labels = StringMap::new();
    if amx {
        labels.insert(data::cluster_rules().amx_label.clone(), "true".into());
    }
    Node {
        name: name.into(),
        labels,
        annotations: StringMap::new(),
        capacity: StringMap::from([("memory".into(), alloc.into())]),
        allocatable: StringMap::from([("memory".into(), alloc.into())]),
        containerd: None,
        taints: taint
            .map(|e| vec![Taint { key: "node-role.kubernetes.io/control-plane".into(), value: None, effect: e.into() }])
            .unwrap_or_default(),
        pod_requests: None,
        conditions: vec![],
        unschedulable: false,
        internal_ips: vec![],
    }
}

#[test]
fn landing_node_rules() {
    let name = |nodes: &[Node]| landing_node(nodes).map(|n| n.name.clone());
    let cases: Vec<(Vec<Node>, Option<&str>, &str)> = vec![
        (vec![node("a", "64Gi", false, None), node("b", "128Gi", false, None)], Some("b"), "most memory"),
        (
            vec![node("a", "64Gi", true, None), node("b", "128Gi", false, None)],
            Some("a"),
            "require_amx: only AMX nodes, even smaller",
        ),
        (
            vec![node("a", "64Gi", false, None), node("b", "128Gi", false, Some("NoSchedule"))],
            Some("a"),
            "NoSchedule excludes",
        ),
        (
            vec![node("a", "64Gi", false, None), node("b", "128Gi", false, Some("PreferNoSchedule"))],
            Some("b"),
            "PreferNoSchedule does not",
        ),
        (vec![node("a", "64Gi", false, Some("NoExecute"))], None, "nothing schedulable"),
        (vec![node("b", "64Gi", false, None), node("a", "64Gi", false, None)], Some("a"), "ties: first name"),
        (vec![], None, "no nodes"),
    ];
    for (nodes, want, why) in cases {
        assert_eq!(name(&nodes).as_deref(), want, "{why}");
    }
}

fn facts_with(nodes: Vec<Node>) -> Facts {
    Facts {
        schema: facts::SCHEMA.into(),
        gathered_at: "2026-12-03T00:00:00Z".into(),
        cluster: facts::Cluster { context: "c".into(), k3d_cluster: None, server_version: "v1.33.1+k3s1".into() },
        docker: None,
        nodes,
        daemonsets: vec![],
        helm_releases: vec![],
        namespaces: vec![],
        agent_sandbox: None,
        fit: None,
        storage_classes: None,
        access_reviews: None,
    }
}

#[test]
fn budget_is_allocatable_minus_pod_requests_minus_headroom() {
    let mut n = node("a", "64Gi", false, None);
    n.pod_requests = Some(StringMap::from([("memory".into(), "2Gi".into())]));
    let b = budget(&facts_with(vec![n])).unwrap();
    assert_eq!(headroom_bytes(), 4 * GIB);
    assert_eq!((b.allocatable_bytes, b.pod_requests_bytes, b.budget_bytes), (64 * GIB, Some(2 * GIB), 58 * GIB));
    let b = budget(&facts_with(vec![node("a", "3Gi", false, None)])).unwrap();
    assert_eq!((b.pod_requests_bytes, b.budget_bytes), (None, 0), "unknown requests count as 0; never negative");
}

#[test]
fn the_document_has_the_facts_fit_shape() {
    let doc = compute(&facts_with(vec![node("a", "64Gi", false, None)]));
    assert_eq!(doc.source, "eas");
    let llama = &doc.candidates["llama-3-1-8b"];
    assert!(llama.fits);
    assert_eq!(llama.env[KV_CACHE_ENV], "40");
    assert_eq!(llama.args, ["--max-model-len", "32768"]);
    let fit = doc.as_fit();
    fit.validate("").expect("eas's own document passes the checks an external one gets");
    assert_eq!(fit.source.as_deref(), Some("eas"));
    let none = compute(&facts_with(vec![]));
    assert!(none.candidates.values().all(|e| !e.fits && e.why.contains("no node")));
}

/// Every budget from 0 to 256 GiB in 64 MiB steps, for every candidate.
#[test]
fn properties_over_every_budget() {
    let step = 64 << 20;
    for name in ALL {
        let a = arch(name);
        let mut fitted_at: Option<u64> = None;
        let mut b = 0;
        while b <= 256 * GIB {
            let s = size(&a, b, 40);
            if let Some(at) = fitted_at {
                assert!(s.fits, "{name}: fits at {at} B but not at {b} B: more memory never un-fits");
            }
            if s.fits {
                fitted_at.get_or_insert(b);
                let len = s.max_model_len.expect("a fitting verdict carries --max-model-len");
                assert!(s.cache_gib <= 40, "{name} at {b}: cache above the catalog's");
                assert!(s.cache_gib * GIB >= a.kv_bytes_per_token() * len, "{name} at {b}: one request does not fit");
                assert!(len.is_power_of_two() && len <= CONTEXT_CEILING.min(a.max_position_embeddings));
                assert!(s.weights_bytes + s.cache_gib * GIB <= b, "{name} at {b}: weights + cache over budget");
                if s.lowered {
                    assert!(s.cache_gib < 40);
                }
            }
            b += step;
        }
        assert!(fitted_at.is_some(), "{name} fits somewhere below 256 GiB");
    }
}

/// The same properties through the whole document: the landing node's allocatable memory from
/// 1 to 256 GiB with 2 GiB of pod requests; every verdict is also valid input (`Fit::validate`).
#[test]
fn properties_through_the_document() {
    let mut fitted: BTreeMap<String, u64> = BTreeMap::new();
    for gib in 1..=256u64 {
        let mut n = node("a", &format!("{gib}Gi"), false, None);
        n.pod_requests = Some(StringMap::from([("memory".into(), "2Gi".into())]));
        let doc = compute(&facts_with(vec![n]));
        doc.as_fit().validate("").unwrap();
        for (name, e) in &doc.candidates {
            if let Some(at) = fitted.get(name) {
                assert!(e.fits, "{name} fits at {at} GiB but not at {gib} GiB");
            }
            if e.fits {
                fitted.entry(name.clone()).or_insert(gib);
                let cache: u64 = e.env[KV_CACHE_ENV].parse().unwrap();
                let len: u64 = e.args[1].parse().unwrap();
                let kv = e.numbers.as_ref().unwrap().kv_bytes_per_token;
                assert!(cache <= catalog_cache_gib() && cache * GIB >= kv * len, "{name} at {gib} GiB");
                assert_eq!(e.args[0], MAX_MODEL_LEN, "{name}: a cache always carries --max-model-len");
            } else {
                assert!(e.env.is_empty() && e.args.is_empty(), "{name}: no flags without a fit");
            }
        }
    }
    assert_eq!(fitted.len(), 3, "every candidate fits somewhere: {fitted:?}");
}
