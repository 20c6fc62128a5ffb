use super::*;
use crate::facts::{Node, Taint};

fn arch(name: &str) -> Architecture {
    let m = data::models();
    let c = m.candidates.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name} is a candidate"));
    m.architecture(&c.model_id).unwrap_or_else(|e| panic!("{name} has an architecture: {e}")).clone()
}

/// A vLLM entry with the given KV ceiling and pod memory (GiB), as a catalog would hold it.
fn target(name: &str, ceiling: u64, memory_gib: u64) -> Target {
    let c = data::models().candidates.iter().find(|c| c.name == name).unwrap();
    Target {
        name: name.into(),
        model_id: c.model_id.clone(),
        runtime: "vllm".into(),
        kv_ceiling_gib: Some(ceiling),
        pod_memory_bytes: Some(memory_gib * GIB),
        max_model_len: None,
        dtype: None,
        arch: Ok(arch(name)),
        arch_from: "data/models.json".into(),
        arch_warning: None,
    }
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
    // (name, budget GiB, fits, cache GiB, lowered, pod memory GiB, max-model-len), each worked out
    // in the comment: base = ceil((weights + 2 GiB working headroom) / GiB).
    type Case = (&'static str, u64, bool, u64, bool, u64, Option<u64>);
    let cases: [Case; 8] = [
        // llama: 16 060 522 496 B = 14.96 GiB + 2 → 17; 40 GiB budget − 17 = 23 → the catalog's 8;
        // 131072 × 128 KiB = 16 GiB > 8: 8 GiB / 128 KiB = 65536 (PR #251's figure).
        ("llama-3-1-8b", 40, true, 8, false, 25, Some(65536)),
        // 20 − 17 = 3 GiB of cache (lowered); 3 GiB / 128 KiB = 24576 → 16384.
        ("llama-3-1-8b", 20, true, 3, true, 20, Some(16384)),
        // 17 − 17 = 0: no whole GiB of cache.
        ("llama-3-1-8b", 17, false, 0, false, 0, None),
        // 14B: 29 540 067 328 B = 27.51 GiB + 2 → 30; 100 − 30 = 70 → 40; 32768 × 192 KiB = 6 GiB fits.
        ("qwen2-5-coder-14b", 100, true, 40, false, 70, None),
        // 32 − 30 = 2; 2 GiB / 192 KiB = 10922 → 8192.
        ("qwen2-5-coder-14b", 32, true, 2, true, 32, Some(8192)),
        // 7B: 15 231 233 024 B = 14.19 GiB + 2 → 17; 40 − 17 → 8; 32768 × 56 KiB = 1.75 GiB fits.
        ("qwen2-5-coder-7b", 40, true, 8, false, 25, None),
        // 18 − 17 = 1 GiB < 1.75 GiB: 1 GiB / 56 KiB = 18724 → 16384.
        ("qwen2-5-coder-7b", 18, true, 1, true, 18, Some(16384)),
        // 16 GiB < the 17 weights and headroom need.
        ("qwen2-5-coder-7b", 16, false, 0, false, 0, None),
    ];
    for (name, budget, fits, cache, lowered, memory, len) in cases {
        let s = size(&arch(name), budget * GIB, &target(name, if name.contains("14b") { 40 } else { 8 }, 16));
        assert_eq!(
            (s.fits, s.cache_gib, s.lowered, s.memory_gib, s.max_model_len),
            (fits, cache, lowered, memory, len),
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
        (
            vec![
                node("a", "64Gi", false, None),
                lifecycle(node("b", "128Gi", false, None), "node.kubernetes.io/not-ready"),
            ],
            Some("b"),
            "a lifecycle taint does not take the node out: it stays sized (and refused while not Ready)",
        ),
        (
            vec![lifecycle(node("a", "64Gi", false, None), "node.kubernetes.io/unreachable")],
            Some("a"),
            "unreachable alike",
        ),
    ];
    for (nodes, want, why) in cases {
        assert_eq!(name(&nodes).as_deref(), want, "{why}");
    }
}

fn lifecycle(mut n: Node, key: &str) -> Node {
    n.taints.push(Taint { key: key.into(), value: None, effect: "NoSchedule".into() });
    n
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
    // 64 − 4 node headroom = 60; − 17 = 43 → the built-in 40; 16 GiB for one full request fits.
    assert_eq!(llama.env[KV_CACHE_ENV], "40");
    assert!(llama.args.is_empty(), "its own context fits the cache: no --max-model-len");
    let fit = doc.as_fit();
    fit.validate("").expect("eas's own document passes the checks an external one gets");
    assert_eq!(fit.source.as_deref(), Some("eas"));
    let none = compute(&facts_with(vec![]));
    assert!(none.candidates.values().all(|e| !e.fits && e.why.contains("no node")));
}

/// Every budget from 0 to 256 GiB in 64 MiB steps, for every candidate and several catalogs:
/// weights + cache + headroom ≤ pod memory ≤ budget, and one request at the served context fits.
#[test]
fn properties_over_every_budget() {
    let step = 64 << 20;
    for name in ALL {
        for (ceiling, memory) in [(8, 16), (40, 16), (8, 64)] {
            let a = arch(name);
            let t = target(name, ceiling, memory);
            let mut fitted_at: Option<u64> = None;
            let mut b = 0;
            while b <= 256 * GIB {
                let s = size(&a, b, &t);
                if let Some(at) = fitted_at {
                    assert!(s.fits, "{name}: fits at {at} B but not at {b} B: more memory never un-fits");
                }
                if s.fits {
                    fitted_at.get_or_insert(b);
                    let len = s.max_model_len.unwrap_or(s.context);
                    assert!(s.cache_gib >= 1 && s.cache_gib <= ceiling, "{name} at {b}: cache outside 1..=catalog");
                    assert!(
                        s.cache_gib * GIB >= a.kv_bytes_per_token() * len,
                        "{name} at {b}: one request does not fit"
                    );
                    assert!(len <= a.max_position_embeddings);
                    if let Some(l) = s.max_model_len {
                        assert!(
                            l.is_power_of_two()
                                && a.kv_bytes_per_token() * a.max_position_embeddings > s.cache_gib * GIB
                        );
                    }
                    assert!(
                        s.weights_bytes + s.cache_gib * GIB + s.pod_headroom_bytes <= s.memory_gib * GIB,
                        "{name} at {b}: weights + cache + headroom over the pod memory"
                    );
                    assert!(s.memory_gib * GIB <= b, "{name} at {b}: pod memory over the budget");
                    assert_eq!(s.lowered, s.cache_gib < ceiling);
                }
                b += step;
            }
            assert!(fitted_at.is_some(), "{name} fits somewhere below 256 GiB");
        }
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
                let n = e.numbers.as_ref().unwrap();
                let len: u64 = e.args.get(1).map(|l| l.parse().unwrap()).unwrap_or(n.context);
                assert!(
                    cache <= catalog_cache_gib() && cache * GIB >= n.kv_bytes_per_token * len,
                    "{name} at {gib} GiB"
                );
                assert!(n.memory_gib * GIB <= n.budget_bytes, "{name} at {gib} GiB: pod over the budget");
            } else {
                assert!(e.env.is_empty() && e.args.is_empty(), "{name}: no flags without a fit");
            }
        }
    }
    assert_eq!(fitted.len(), 3, "every candidate fits somewhere: {fitted:?}");
}

/// Issue 30 item 4: figures past what eas sizes with are never summed. A node reporting a memory
/// past 4 EiB is not sized (and named with its field); an architecture whose weights or KV cache
/// per token overflow names the field; the sums saturate rather than wrap.
#[test]
fn figures_past_what_eas_sizes_with_are_reported_never_wrapped() {
    let nodes = vec![node("huge", "18446744073709551615", false, None), node("small", "64Gi", false, None)];
    assert_eq!(landing_node(&nodes).unwrap().name, "small", "the huge node is not sized");
    let said = unsizable(&nodes);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("node huge: allocatable.memory \"18446744073709551615\"") && said[0].contains("not sized")
    );

    let mut a = arch("qwen2-5-coder-7b");
    assert_eq!(a.check(), Ok(()));
    a.weights_total_bytes = Some(u64::MAX);
    assert!(a.check().unwrap_err().starts_with("metadata.total_size 18446744073709551615 is past 4 EiB"));
    assert_eq!(memory_gib(&a, 8), (1 << 34) + 8, "2^34 GiB and the cache, not wrapped to a few GiB");
    let s = size(&a, 64 * GIB, &target("qwen2-5-coder-7b", 8, 32));
    assert!(!s.fits, "{s:?}");
    let mut a = arch("qwen2-5-coder-7b");
    a.parameters = u64::MAX / 2 + 1;
    assert!(a.check().unwrap_err().starts_with("parameters × dtype bytes more than 2^64"));
    let mut a = arch("qwen2-5-coder-7b");
    a.num_hidden_layers = 1 << 60;
    assert!(a.check().unwrap_err().contains("num_hidden_layers 1152921504606846976"));
}
