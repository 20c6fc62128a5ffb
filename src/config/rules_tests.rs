//! The decision rules' tests: refusals, CNI and CPU policy, NFD, and the model pick, its pod
//! sizing and deploy path against catalogs in the real shape.
use super::*;
use crate::config::decision::ModelEdit;
use crate::config::fit::GIB;

/// `d` warns in one line holding every one of `parts`.
#[track_caller]
fn assert_warns(d: &Decision, parts: &[&str]) {
    assert!(d.warnings.iter().any(|w| parts.iter().all(|p| w.contains(p))), "{parts:?}: {:#?}", d.warnings);
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn servicelb_disabled_in_every_form() {
    let on = [
        &["server", "--disable", "servicelb"][..],
        &["server", "--disable=servicelb"],
        &["server", "--disable", "traefik,servicelb"],
        &["server", "--disable=traefik, servicelb"],
        &["server", "--disable", "\"servicelb\""],
        &["server", "--no-deploy", "servicelb"],
        &["server", "--no-deploy=servicelb"],
        &["server", "--disable-servicelb"],
        &["server", "--disable", "traefik", "--disable", "servicelb"],
    ];
    for a in on {
        assert!(disables(&args(a), "servicelb"), "{a:?}");
    }
    let off = [
        &["server", "--disable", "traefik"][..],
        &["server", "--disable=traefik"],
        &["server", "--disable", "servicelb-extra"],
        &["server"],
        &["server", "--disable"],
        &["server", "--kube-apiserver-arg", "servicelb"],
    ];
    for a in off {
        assert!(!disables(&args(a), "servicelb"), "{a:?}");
    }
}

#[test]
fn cidr_flags_in_both_forms_last_wins() {
    assert_eq!(
        flag_value(&args(&["server", "--cluster-cidr", "10.1.0.0/16"]), "--cluster-cidr").as_deref(),
        Some("10.1.0.0/16")
    );
    assert_eq!(
        flag_value(&args(&["server", "--cluster-cidr=10.2.0.0/16"]), "--cluster-cidr").as_deref(),
        Some("10.2.0.0/16")
    );
    assert_eq!(
        flag_value(&args(&["--cluster-cidr=10.2.0.0/16", "--cluster-cidr", "10.3.0.0/16"]), "--cluster-cidr")
            .as_deref(),
        Some("10.3.0.0/16")
    );
    assert_eq!(flag_value(&args(&["--cluster-cidr-extra=x"]), "--cluster-cidr"), None);
}

#[test]
fn node_args_that_are_not_a_json_list_or_hold_a_bad_cidr_are_bad_input() {
    for (text, want) in [
        ("server --disable servicelb --cluster-cidr 10.99.0.0/16", "is not a JSON list of strings"),
        ("[\"server\",\"--cluster-cidr\",\"10.99.0.0/16\\nx: y\"]", "--cluster-cidr \"10.99.0.0/16\\nx: y\""),
    ] {
        let mut f = desktop();
        let node = f.nodes[0].name.clone();
        f.nodes[0].annotations.insert(NODE_ARGS.into(), text.into());
        match decide_on(&f, "agent-toolkit", None) {
            Err(Rejection::BadInput { cause, .. }) => {
                assert!(cause.starts_with(&format!("node {node:?}: annotation k3s.io/node-args")), "{cause}");
                assert!(cause.contains(want), "{cause}");
            }
            other => panic!("{text}: {:?}", other.map(|_| ())),
        }
    }
}
fn desktop() -> Facts {
    Facts::parse(include_str!("../../fixtures/config/desktop-i9/facts.json")).unwrap()
}

/// `name` as `--layer` names it (the edge parses it so; a name it does not know is a test's error).
fn layer_named(name: &str) -> crate::settings::Layer {
    crate::settings::Layer::parse(name, |n| super::data::layers().refused.contains_key(n)).unwrap()
}

fn decide_on(f: &Facts, layer: &str, model: Option<&str>) -> Result<Decision, Rejection> {
    decide_with(f, layer, (model, None), None, &[])
}

/// `decide` on the embedded pins' trees, with the catalog `text` when given and the downloads'
/// answers; the fit as `config::generate_with` takes it: the facts' own, else eas's, sized for
/// the catalog.
fn decide_with(
    f: &Facts,
    layer: &str,
    (model, kept): (Option<&str>, Option<&str>),
    text: Option<&str>,
    downloads: &[(String, crate::config::hf::Access)],
) -> Result<Decision, Rejection> {
    let layer = &layer_named(layer);
    let pins = crate::pins::Pins::parse(crate::pins::EMBEDDED).unwrap();
    let trees = pins.trees("main").unwrap();
    let cat = text.map(|text| super::super::catalog::Pinned {
        catalog: super::super::catalog::Catalog::parse(text).unwrap(),
        path: "model_manager/models.yaml".into(),
        at: "intel/enterprise-inference@abc1234".into(),
    });
    let targets = crate::config::fit::Target::for_catalog(cat.as_ref().map(|c| &c.catalog), None);
    let fit = crate::config::fit::external::resolve(f, None, &targets).0;
    decide(&Inputs {
        facts: f,
        fit: Some(&fit),
        trees: &trees,
        layer,
        model,
        kept,
        catalog: cat.as_ref(),
        hf_cache: None,
        downloads,
    })
}

fn overrides(d: &Decision, key: &str) -> Value {
    d.overrides.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap()
}

#[test]
fn cpu_policy_each_reason_alone() {
    // Start from a cluster where nothing forces best-effort.
    let mut base = desktop();
    base.daemonsets.clear();
    assert_eq!(cpu_policy(&base).0, "nri-balloons");
    let mut rootless = base.clone();
    rootless.docker = Some(facts::Docker { rootless: true });
    assert_eq!(cpu_policy(&rootless).0, "best-effort");
    let mut no_socket = base.clone();
    no_socket.nodes[0].containerd.as_mut().unwrap().nri_socket = false;
    assert_eq!(cpu_policy(&no_socket).0, "best-effort");
    let with_addon = desktop();
    assert_eq!(cpu_policy(&with_addon).0, "best-effort");
    // The chart's Helm labels alone do not make the DaemonSet an addon.
    let mut helm_only = desktop();
    helm_only.daemonsets.retain(|d| d.name.contains("balloons"));
    helm_only.daemonsets[0].annotations.remove("objectset.rio.cattle.io/owner-gvk");
    assert_eq!(cpu_policy(&helm_only).0, "nri-balloons");
}

#[test]
fn nfd_cases() {
    let mut f = desktop();
    f.daemonsets.clear();
    assert!(nfd_enabled(&f).0, "no NFD at all");
    let release = |ns: &str, name: &str| facts::HelmRelease {
        namespace: ns.into(),
        name: name.into(),
        chart: "node-feature-discovery-0.17.1".into(),
        status: "deployed".into(),
    };
    f.helm_releases = vec![release("node-feature-discovery", "node-feature-discovery")];
    assert!(nfd_enabled(&f).0, "EI's own release");
    f.helm_releases = vec![release("kube-system", "node-feature-discovery")];
    assert!(!nfd_enabled(&f).0, "the right name in another namespace is not what EI checks");
    f.helm_releases = vec![release("node-feature-discovery", "nfd")];
    assert!(!nfd_enabled(&f).0, "release nfd");
    f.helm_releases.clear();
    f.daemonsets = desktop().daemonsets;
    assert!(!nfd_enabled(&f).0, "k3s addon");
    f.daemonsets.retain(|d| d.name.starts_with("node-feature"));
    f.daemonsets[0].annotations.clear();
    assert!(!nfd_enabled(&f).0, "plain manifests, no release");
}

#[test]
fn nodes_that_disagree_on_cni_are_refused() {
    let mut f = desktop();
    let mut other = f.nodes[0].clone();
    other.name = "agent-0".into();
    other.containerd.as_mut().unwrap().cni_bin_dirs = vec!["/opt/cni/bin".into()];
    f.nodes.push(other);
    match decide_on(&f, "agent-toolkit", None) {
        Err(Rejection::Refused(r)) => assert!(r.iter().any(|l| l.contains("disagree")), "{r:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn kv_cache_equal_to_the_catalog_is_kept_and_lower_is_applied() {
    let mut f = desktop();
    let fit = f.fit.as_mut().unwrap();
    fit.candidates.get_mut("qwen2-5-coder-7b").unwrap().env.insert(facts::KV_CACHE_ENV.into(), "40".into());
    let d = decide_on(&f, "agent-toolkit", None).unwrap();
    let e = &d.model_edits[0];
    assert!(e.env.is_empty() && e.args_append.is_empty(), "{:?}", d.model_edits);
    // 15.23 GB of weights + 2 GiB headroom → 17, + the built-in 40 GiB cache: 57 GiB > 16.
    assert_eq!(e.memory.as_deref(), Some("57Gi"));
    let mut f = desktop();
    let fit = f.fit.as_mut().unwrap();
    fit.candidates.get_mut("qwen2-5-coder-7b").unwrap().env.insert(facts::KV_CACHE_ENV.into(), "39.5".into());
    let d = decide_on(&f, "agent-toolkit", None).unwrap();
    assert_eq!(d.model_edits[0].env, vec![(facts::KV_CACHE_ENV.to_string(), "39".to_string())]);
    assert!(d.model_edits[0].args_append.is_empty(), "32768 × 56 KiB fits 39 GiB: no --max-model-len");
}

#[test]
fn both_layers_deploy_their_pick_through_eis_path() {
    let d = decide_on(&desktop(), "inference", None).unwrap();
    assert!(d.overrides.iter().all(|(k, _)| *k != "agent_sandbox_enabled" && *k != "agent_toolkit_models"));
    assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
    // A model that fails to deploy fails the install (issue 28 item 2), with its decision line.
    assert_eq!(overrides(&d, "model_deploy_strict"), Value::Bool(true));
    assert!(
        d.choices.iter().any(|c| c.choice.starts_with("model_deploy_strict: true") && c.source == "ei-deploy-strict")
    );
    let auto: Vec<&str> = d.model_edits.iter().filter(|e| e.autodeploy).map(|e| e.name.as_str()).collect();
    assert_eq!(auto.len(), 1, "{:?}", d.model_edits);
    let d = decide_on(&desktop(), "inference", Some("llama-3-1-8b")).unwrap();
    assert!(d.model_edits.iter().any(|e| e.name == "llama-3-1-8b" && e.autodeploy), "{:?}", d.model_edits);
    assert!(matches!(decide_on(&desktop(), "inference", Some("nope")), Err(Rejection::BadInput { .. })));
    // agent-toolkit: no stored EAT file reads agent_toolkit_models, so EI's path deploys the
    // pick and the EAT key is written only as a defensive one.
    let d = decide_on(&desktop(), "agent-toolkit", None).unwrap();
    assert_eq!(overrides(&d, "agent_sandbox_enabled"), Value::Bool(true));
    assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
    let auto: Vec<&str> = d.model_edits.iter().filter(|e| e.autodeploy).map(|e| e.name.as_str()).collect();
    assert_eq!(overrides(&d, "agent_toolkit_models"), Value::List(auto.iter().map(|s| s.to_string()).collect()));
    assert!(d.choices.iter().any(|c| c.fact.contains("not checked")), "{:#?}", d.choices);
}

#[test]
fn a_reader_in_the_eat_tree_proves_eats_path_and_none_keeps_eis() {
    let d0 = decide_on(&desktop(), "agent-toolkit", None).unwrap();
    use crate::config::components::OnPath;
    // The decision once EAT's readers of the deploy switch are known: (file, whether the install runs it).
    let proven = |readers: Vec<(String, OnPath)>| {
        let mut d = d0.clone();
        super::super::model::prove_deploy_path(&mut d, &readers, "intel/agent-toolkit@036b662");
        d
    };
    let d = proven(vec![]);
    assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
    assert!(
        d.choices.iter().any(|c| c.fact.contains("no file of intel/agent-toolkit@036b662 reads")),
        "{:#?}",
        d.choices
    );
    assert!(d.model_edits.iter().any(|e| e.autodeploy));
    // A reader the install does not run (its role no enabled component's) proves nothing.
    let off = OnPath::No("component models is not enabled (enabled: false)".into());
    let d = proven(vec![("roles/models/tasks/main.yaml".into(), off)]);
    assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
    assert!(d.model_edits.iter().any(|e| e.autodeploy));
    assert!(
        d.choices.iter().any(|c| c
            .fact
            .contains("off the install path (roles/models/tasks/main.yaml: component models is not enabled")),
        "{:#?}",
        d.choices
    );
    let on = OnPath::Yes("component models of layer agent-toolkit is enabled".into());
    let d = proven(vec![("roles/models/tasks/main.yaml".into(), on)]);
    assert!(d.overrides.iter().all(|(k, _)| *k != "llm_services_deploy_models"), "{:?}", d.overrides);
    // EI's deploy loop has nothing to deploy then: its failure policy is not written either.
    assert!(d.overrides.iter().all(|(k, _)| *k != "model_deploy_strict"), "{:?}", d.overrides);
    assert!(d.choices.iter().all(|c| !c.choice.starts_with("model_deploy_strict")), "{:#?}", d.choices);
    assert_eq!(overrides(&d, "agent_toolkit_models"), Value::List(vec!["qwen2-5-coder-7b".into()]));
    assert!(d.model_edits.iter().all(|e| !e.autodeploy), "{:?}", d.model_edits);
    assert!(d.model_edits.iter().any(|e| e.memory.is_some()), "the sizing edits stay: {:?}", d.model_edits);
    assert!(
        d.choices
            .iter()
            .any(|c| c.fact.contains("read by roles/models/tasks/main.yaml (component models of layer agent-toolkit is enabled) in intel/agent-toolkit@036b662")
                && c.choice.starts_with("deploy path: EAT's")),
        "{:#?}",
        d.choices
    );
    let mut inf = decide_on(&desktop(), "inference", None).unwrap();
    let before = inf.clone();
    super::super::model::prove_deploy_path(&mut inf, &[("x".into(), OnPath::Yes(String::new()))], "a@b");
    assert_eq!(inf.choices, before.choices, "the inference layer keeps EI's path");
}

/// The real catalog's shape: category KV cache and memory, other names beside eas's candidates.
const CATALOG: &str = "models:\n  - name: qwen3-0-6b\n    model_id: Qwen/Qwen3-0.6B\n    category: llm\n  - name: coder\n    model_id: Qwen/Qwen2.5-Coder-7B-Instruct\n    category: llm\n  - name: llama-3-1-8b\n    model_id: meta-llama/Llama-3.1-8B-Instruct\n    category: llm\n    env: {VLLM_CPU_KVCACHE_SPACE: \"20\"}\n  - name: bge\n    model_id: BAAI/bge\n    category: embed\nruntimes:\n  vllm:\n    categories:\n      llm:\n        env: {VLLM_CPU_KVCACHE_SPACE: \"${KV_CACHE_GB}\"}\n        defaults: {memory: 16Gi, kv_cache_gb: 8}\n";

fn with_catalog(f: &Facts, layer: &str, model: Option<&str>, text: &str) -> Result<Decision, Rejection> {
    with_downloads(f, layer, model, text, &[])
}

fn with_downloads(
    f: &Facts,
    layer: &str,
    model: Option<&str>,
    text: &str,
    downloads: &[(String, crate::config::hf::Access)],
) -> Result<Decision, Rejection> {
    decide_with(f, layer, (model, None), Some(text), downloads)
}

#[test]
fn the_catalog_decides_the_pick_and_its_kv_ceiling() {
    // desktop()'s fit sizes qwen2-5-coder-7b at 24 GiB: above the catalog's 8, so 8 is kept.
    // The entry is named `coder` here: the preference matches it by model_id.
    let mut f = desktop();
    f.nodes[0].capacity.insert("memory".into(), "100Gi".into());
    f.fit.as_mut().unwrap().candidates = std::mem::take(&mut f.fit.as_mut().unwrap().candidates)
        .into_iter()
        .map(|(k, v)| (k.replace("qwen2-5-coder-7b", "coder"), v))
        .collect();
    let d = with_catalog(&f, "agent-toolkit", None, CATALOG).unwrap();
    assert_eq!(overrides(&d, "agent_toolkit_models"), Value::List(vec!["coder".into()]));
    assert!(
        d.choices
            .iter()
            .any(|c| c.choice.contains("model: coder (rule: preference, EAT's fallback qwen2-5-coder-7b by model_id)")),
        "{:#?}",
        d.choices
    );
    assert!(d.model_edits[0].env.is_empty(), "never raised over the category's 8 GiB: {:?}", d.model_edits);
    assert_eq!(d.model_edits[0].memory.as_deref(), Some("25Gi"), "17 GiB of weights and headroom + 8 GiB > 16Gi");
    assert!(d.choices.iter().any(|c| c.choice.contains("catalog's 8 GiB kept")), "{:#?}", d.choices);
    assert!(
        d.choices.iter().any(|c| c.fact.contains("model_manager/models.yaml at intel/enterprise-inference@abc1234"))
    );
    // A lower fit figure is rounded down under the ceiling.
    let fit = f.fit.as_mut().unwrap();
    fit.candidates.get_mut("coder").unwrap().env.insert(facts::KV_CACHE_ENV.into(), "6.5".into());
    let d = with_catalog(&f, "agent-toolkit", None, CATALOG).unwrap();
    assert_eq!(d.model_edits[0].env, vec![(facts::KV_CACHE_ENV.to_string(), "6".to_string())]);
    // The per-model override is the ceiling for that entry; its 131072-token context needs
    // 16 GiB for one request, more than the cache: the largest power of two that fits.
    let d = with_catalog(&f, "agent-toolkit", Some("llama-3-1-8b"), CATALOG).unwrap();
    assert!(d.choices.iter().any(|c| c.fact.contains("< catalog 20")), "{:#?}", d.choices);
    let e = d.model_edits.iter().find(|e| e.name == "llama-3-1-8b").unwrap();
    // 16 GiB holds one 131072-token request exactly, but k3d-gpu fit sized it for 32768: fit wins.
    assert_eq!(e.args_append, vec!["--max-model-len".to_string(), "32768".to_string()], "{e:?}");
    let fit = f.fit.as_mut().unwrap();
    let llama = fit.candidates.get_mut("llama-3-1-8b").unwrap();
    llama.env.insert(facts::KV_CACHE_ENV.into(), "8".into());
    llama.args.clear();
    let d = with_catalog(&f, "agent-toolkit", Some("llama-3-1-8b"), CATALOG).unwrap();
    let e = d.model_edits.iter().find(|e| e.name == "llama-3-1-8b").unwrap();
    assert_eq!(e.args_append, vec!["--max-model-len".to_string(), "65536".to_string()], "16 GiB / 128 KiB");
    // Any LLM entry may be forced; an embed entry or an unknown name is refused.
    let d = with_catalog(&f, "inference", Some("qwen3-0-6b"), CATALOG).unwrap();
    assert!(d.model_edits.iter().any(|e| e.name == "qwen3-0-6b" && e.autodeploy));
    for bad in ["bge", "qwen2-5-coder-14b"] {
        match with_catalog(&f, "inference", Some(bad), CATALOG) {
            Err(Rejection::Refused(r)) => {
                assert!(r[0].contains("its LLM entries: qwen3-0-6b, coder, llama-3-1-8b"), "{r:?}")
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn what_hugging_face_refuses_is_skipped_or_refused_and_the_unknown_is_a_warning() {
    use crate::config::hf::Access;
    let mut f = desktop();
    f.fit = None;
    let text = include_str!("../../fixtures/synthetic/ei/model_manager/models.yaml");
    let gated = |id: &str| {
        (
            id.to_string(),
            Access::Refused {
                cause: format!("Hugging Face answered 403 (GatedRepo) for {id}"),
                fix: "accept it".into(),
            },
        )
    };
    // The preference (qwen2-5-coder-7b) is gated for this token: skipped and named; llama next.
    let d = with_downloads(&f, "agent-toolkit", None, text, &[gated("Qwen/Qwen2.5-Coder-7B-Instruct")]).unwrap();
    let line = d.choices.iter().find(|c| c.choice.starts_with("model: ")).unwrap();
    assert!(line.choice.starts_with("model: llama-3-1-8b"), "{line:?}");
    assert!(line.fact.contains("qwen2-5-coder-7b: Hugging Face answered 403 (GatedRepo)"), "{line:?}");
    // Forced, it is refused (exit 3) with the cause and the fix.
    match with_downloads(
        &f,
        "agent-toolkit",
        Some("qwen2-5-coder-7b"),
        text,
        &[gated("Qwen/Qwen2.5-Coder-7B-Instruct")],
    ) {
        Err(Rejection::Refused(r)) => assert!(r[0].contains("403 (GatedRepo)") && r[0].contains("accept it"), "{r:?}"),
        other => panic!("{other:?}"),
    }
    // Not known (a proxy's answer, or unreachable): a warning, never a refusal.
    let unknown = [("Qwen/Qwen2.5-Coder-7B-Instruct".to_string(), Access::Unknown("a proxy's 403".into()))];
    let d = with_downloads(&f, "agent-toolkit", Some("qwen2-5-coder-7b"), text, &unknown).unwrap();
    assert_warns(&d, &["download not checked", "a proxy's 403"]);
}

#[test]
fn no_fit_is_refused_naming_each_entry_and_why() {
    // Two LLM entries whose repositories data/models.json does not know.
    let other = "models:\n  - name: small-a\n    model_id: org/small-a\n    category: llm\n  - name: small-b\n    model_id: org/small-b\n    category: llm\n";
    let mut f = desktop();
    f.fit = None;
    match with_catalog(&f, "agent-toolkit", None, other) {
        Err(Rejection::Refused(r)) => {
            assert!(r[0].starts_with("no model of the EI catalog"), "{r:?}");
            assert!(
                r[0].contains("qwen2-5-coder-14b (Qwen/Qwen2.5-Coder-14B-Instruct) is not in the catalog"),
                "{r:?}"
            );
            assert!(r[0].contains("small-a: no fit verdict: architecture unknown"), "{r:?}");
            assert!(r[0].contains("small-b: no fit verdict: architecture unknown"), "{r:?}");
        }
        other => panic!("{other:?}"),
    }
    let d = with_catalog(&f, "agent-toolkit", Some("small-a"), other).unwrap();
    assert_warns(&d, &["architecture unknown"]);
}

/// The real catalog's entries (fixtures/synthetic/catalogs/real-entries.yaml) on the desktop's
/// node, whose NFD labels say AVX2 and no AVX-512: the catalog's --dtype bfloat16 is not native
/// there, so the AWQ pick is written as float16 (AWQ runs only with 16-bit activations) and
/// Qwen3-0.6B as float32, sized with 4 bytes; with AVX512-BF16 the catalog's bfloat16 stays; with
/// no NFD labels the plan warns and keeps it; without AVX2 no entry is a candidate.
#[test]
fn the_dtype_written_and_sized_follows_the_nodes_cpu_flags() {
    let text = include_str!("../../fixtures/synthetic/catalogs/real-entries.yaml");
    let with_flags = |flags: &[&str]| {
        let mut f = desktop();
        f.fit = None;
        for fl in flags {
            f.nodes[0].labels.insert(format!("feature.node.kubernetes.io/cpu-cpuid.{fl}"), "true".into());
        }
        f
    };
    let args = |d: &Decision, name: &str| {
        d.model_edits.iter().find(|e| e.name == name).map(|e| e.args_append.clone()).unwrap_or_default()
    };
    let desktop_cpu = with_flags(&["AVX", "AVX2", "AVXVNNI", "FMA3"]);
    let d = with_catalog(&desktop_cpu, "inference", None, text).unwrap();
    assert!(d.choices.iter().any(|c| c.choice.starts_with("model: llama3-8b-awq")), "{:#?}", d.choices);
    assert_eq!(args(&d, "llama3-8b-awq"), ["--dtype", "float16"]);
    assert_warns(&d, &["data/models.json's figures", "not asked"]);
    assert_warns(&d, &["has AVX2 and no AVX512F"]);
    // Forced, Qwen3-0.6B runs as float32: its 596M parameters take 2.2 GiB and a token 224 KiB of
    // cache, so its 40960-token context (8.75 GiB) no longer fits the 8 GiB cache (in bfloat16 it does).
    let d = with_catalog(&desktop_cpu, "inference", Some("qwen3-0-6b"), text).unwrap();
    assert_eq!(args(&d, "qwen3-0-6b"), ["--dtype", "float32", "--max-model-len", "32768"]);
    let mem = d.choices.iter().find(|c| c.fact.starts_with("weights ")).unwrap();
    assert!(mem.fact.starts_with("weights 2.2 GiB"), "{mem:?}");
    // AVX-512 with BF16 (the xeon fixtures): the catalog's bfloat16 is kept, nothing written.
    let xeon = with_flags(&["AVX2", "AVX512F", "AVX512BF16", "AVX512VNNI"]);
    let d = with_catalog(&xeon, "inference", None, text).unwrap();
    assert!(args(&d, "llama3-8b-awq").iter().all(|a| a != "--dtype"), "{:?}", args(&d, "llama3-8b-awq"));
    assert!(d.choices.iter().any(|c| c.choice == "dtype: the catalog's bfloat16 kept"), "{:#?}", d.choices);
    assert!(!d.warnings.iter().any(|w| w.contains("no AVX512F")), "{:?}", d.warnings);
    // No NFD labels: a warning, the catalog's dtype kept.
    let d = with_catalog(&with_flags(&[]), "inference", None, text).unwrap();
    assert!(args(&d, "llama3-8b-awq").iter().all(|a| a != "--dtype"));
    assert_warns(&d, &["CPU flags are unknown", "--dtype bfloat16 kept"]);
    // No AVX2: no vLLM entry is a candidate (the OpenVINO entry is not sized either).
    match with_catalog(&with_flags(&["AVX", "SSE4_2"]), "inference", None, text) {
        Err(Rejection::Refused(r)) => {
            assert!(r[0].contains("llama3-8b-awq: node k3d-gpu-server-0's CPU has no AVX2"), "{r:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// The synthetic EI catalog (the real entries plus PR #251's two): every pick, automatic and
/// forced, on both layers and on nodes of 20 to 256 GiB, satisfies weights + KV + working
/// headroom ≤ pod memory ≤ node budget, holds one request at the served context in its cache,
/// and is deployed through EI's path with autodeploy on the pick only.
#[test]
fn every_pick_fits_its_pod_and_its_node() {
    let text = include_str!("../../fixtures/synthetic/ei/model_manager/models.yaml");
    let cat = super::super::catalog::Catalog::parse(text).unwrap();
    let models = data::models();
    for gib in [20u64, 24, 28, 32, 48, 64, 125, 256] {
        let mut f = desktop();
        f.fit = None;
        f.nodes[0].allocatable.insert("memory".into(), format!("{gib}Gi"));
        f.nodes[0].capacity.insert("memory".into(), format!("{gib}Gi"));
        let budget = crate::config::fit::budget(&f).unwrap().budget_bytes;
        let mut forced: Vec<Option<&str>> = vec![None];
        forced.extend(cat.llms().filter(|e| e.runtime == "vllm").map(|e| Some(e.name.as_str())));
        for layer in ["inference", "agent-toolkit"] {
            for m in &forced {
                let d = match with_catalog(&f, layer, *m, text) {
                    Ok(d) => d,
                    Err(Rejection::Refused(r)) if m.is_none() => {
                        assert!(gib <= 20, "{gib} GiB: refused although an entry fits: {r:?}");
                        continue;
                    }
                    Err(e) => panic!("{gib} GiB {layer} {m:?}: {e:?}"),
                };
                assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
                let auto: Vec<&ModelEdit> = d.model_edits.iter().filter(|e| e.autodeploy).collect();
                assert_eq!(auto.len(), 1, "autodeploy on the pick only: {:?}", d.model_edits);
                let e = auto[0];
                let entry = cat.entry(&e.name).unwrap();
                let Ok(arch) = models.architecture(&entry.model_id) else {
                    assert!(m.is_some(), "{gib} GiB: an unknown architecture was picked automatically");
                    continue;
                };
                let cache: u64 =
                    e.env.first().map(|(_, v)| v.parse().unwrap()).unwrap_or(entry.kv_cache_gib.unwrap() as u64);
                let memory = e
                    .memory
                    .as_deref()
                    .map(|m| facts::parse_quantity(m).unwrap() as u64)
                    .or(entry.memory_bytes)
                    .unwrap();
                let need = arch.weights_bytes() + cache * GIB + models.pod_headroom_gib * GIB;
                let len = e.args_append.get(1).map(|l| l.parse().unwrap()).unwrap_or(arch.max_position_embeddings);
                let what = format!("{gib} GiB {layer} {m:?} → {}: {:?}", e.name, d.model_edits);
                if m.is_none() || need <= budget {
                    assert!(need <= memory, "{what}: weights + KV + headroom over the pod memory");
                    assert!(memory <= budget, "{what}: pod memory over the node budget");
                    assert!(len * arch.kv_bytes_per_token() <= cache * GIB, "{what}: one request does not fit");
                } else {
                    assert!(d.warnings.iter().any(|w| w.contains("more than the node's")), "{what}: {:?}", d.warnings);
                }
            }
        }
    }
}

#[test]
fn refusals_are_all_reported_together() {
    let mut f = desktop();
    f.namespaces.push("genai-gateway".into());
    f.nodes[0].annotations.insert(NODE_ARGS.into(), "[\"server\",\"--disable=servicelb\"]".into());
    match decide_on(&f, "erag", None) {
        Err(Rejection::Refused(r)) => assert_eq!(r.len(), 3, "{r:?}"),
        other => panic!("{other:?}"),
    }
}

/// `eas init`'s refusals: the cluster's and the layer's, as `decide` words them, but not the
/// containerd facts eas could not read (the file's node keys or probing lift those).
#[test]
fn standing_refusals_are_decides_but_the_unread_containerd_facts() {
    let mut f = desktop();
    assert_eq!(standing_refusals(&f, &layer_named("agent-toolkit")), Ok(vec![]));
    f.namespaces.push("genai-gateway".into());
    f.nodes[0].containerd = None;
    let Err(Rejection::Refused(decided)) = decide_on(&f, "inference", None) else { panic!("refused") };
    assert_eq!(decided.len(), 2, "{decided:?}");
    let standing = standing_refusals(&f, &layer_named("inference")).unwrap();
    assert_eq!(standing, [decided[0].clone()], "EAT 1.x, whatever the layer");
    assert!(decided[1].starts_with("containerd facts unreadable on "), "{decided:?}");
    let erag = standing_refusals(&f, &layer_named("erag")).unwrap();
    assert!(erag[0].starts_with("--layer erag: ") && erag.len() == 2, "{erag:?}");
}

#[test]
fn the_device_note_gives_the_allocatable_figure_the_nodes_section_shows() {
    let mut f = desktop();
    let d = decide_on(&f, "agent-toolkit", None).unwrap();
    assert!(d.choices.iter().any(|c| c.fact == "node k3d-gpu-server-0 has gpu.intel.com/i915=1 allocatable"));
    // The plugin stopped serving the GPU: capacity still says 1, allocatable 0.
    f.nodes[0].allocatable.insert("gpu.intel.com/i915".into(), "0".into());
    let d = decide_on(&f, "agent-toolkit", None).unwrap();
    assert!(
        d.choices.iter().any(|c| c.fact == "node k3d-gpu-server-0 has gpu.intel.com/i915=0 allocatable"),
        "{:#?}",
        d.choices
    );
}

#[test]
fn cpu_is_lowered_to_what_the_landing_node_schedules_after_its_pods_requests() {
    let text = include_str!("../../fixtures/synthetic/ei/model_manager/models.yaml");
    let mut f = desktop();
    f.fit = None;
    let cpu_edit = |f: &Facts| {
        let d = with_catalog(f, "inference", Some("qwen2-5-coder-7b"), text).unwrap();
        let e = d.model_edits.iter().find(|e| e.name == "qwen2-5-coder-7b").unwrap();
        let line = d.choices.iter().find(|c| c.choice.contains(" cpu: ")).map(|c| c.fact.clone());
        (e.cpu.clone(), line)
    };
    // The entry asks 16 cores; the node has 20 allocatable.
    f.nodes[0].allocatable.insert("cpu".into(), "20".into());
    f.nodes[0].pod_requests = Some(facts::StringMap::from([("memory".into(), "0".into())]));
    assert_eq!(cpu_edit(&f).0, None, "16 of 20 schedules: never raised, not lowered");
    // Its pods already request 5.5 cores: 14.5 left, so 14 whole cores.
    f.nodes[0].pod_requests.as_mut().unwrap().insert("cpu".into(), "5500m".into());
    let (cpu, line) = cpu_edit(&f);
    assert_eq!(cpu.as_deref(), Some("14"));
    assert!(line.as_deref().is_some_and(|l| l.contains("20 allocatable - 5.5 requested")), "{line:?}");
    // Requests below what it asks leave it alone.
    f.nodes[0].pod_requests.as_mut().unwrap().insert("cpu".into(), "4".into());
    assert_eq!(cpu_edit(&f).0, None);
    // Under the 2 cores vLLM needs (19.5 requested: 0 left), nothing is written and the plan
    // warns that the pod would stay Pending (issue 28 item 9).
    f.nodes[0].pod_requests.as_mut().unwrap().insert("cpu".into(), "19500m".into());
    assert_eq!(cpu_edit(&f).0, None);
    let d = with_catalog(&f, "inference", Some("qwen2-5-coder-7b"), text).unwrap();
    assert_warns(&d, &["schedules 0", "would stay Pending"]);
}

/// An entry without its own `cpu` asks its category's default (EI's llm `cpu: 8`), and that is
/// lowered on a small node as an entry's own is (issue 28 item 9): with the real catalog's shape,
/// and with no catalog read (the built-in candidates stand in with the same default).
#[test]
fn the_category_default_cpu_is_lowered_on_a_small_node_with_and_without_a_catalog() {
    let mut f = desktop();
    f.fit = None;
    f.nodes[0].allocatable.insert("cpu".into(), "6".into());
    f.nodes[0].pod_requests = Some(facts::StringMap::from([("cpu".into(), "1500m".into())]));
    // The real catalog's qwen3-0-6b with its own `cpu: 8` removed: the category's 8 applies.
    let text = include_str!("../../fixtures/synthetic/catalogs/real-entries.yaml");
    let own = "    default_server: vllm\n    cpu: 8\n";
    assert!(text.contains(own));
    let without_own = text.replacen(own, "    default_server: vllm\n", 1);
    let d = with_catalog(&f, "inference", Some("qwen3-0-6b"), &without_own).unwrap();
    let e = d.model_edits.iter().find(|e| e.name == "qwen3-0-6b").unwrap();
    assert_eq!(e.cpu.as_deref(), Some("4"), "6 allocatable - 1.5 requested: 4 whole cores");
    let line = d.choices.iter().find(|c| c.choice == "models.yaml qwen3-0-6b cpu: 4").expect("a decision line");
    assert!(line.fact.contains("asks cpu 8") && line.fact.contains("6 allocatable - 1.5 requested"), "{}", line.fact);
    // No catalog read: the pick is a built-in candidate, and it too is lowered.
    let d = decide_on(&f, "inference", None).unwrap();
    let lowered: Vec<_> = d.model_edits.iter().filter(|e| e.cpu.is_some()).collect();
    assert_eq!(lowered.len(), 1, "{:#?}", d.model_edits);
    assert_eq!(lowered[0].cpu.as_deref(), Some("4"));
}

/// The synthetic EI catalog (the real one's shape), decided on the desktop with `memory` and
/// no fit document, the installed model `kept` and `--model` `model`.
fn decide_at(memory: &str, (model, kept): (Option<&str>, Option<&str>)) -> Decision {
    let text = include_str!("../../fixtures/synthetic/ei/model_manager/models.yaml");
    let mut f = desktop();
    f.fit = None;
    f.nodes[0].capacity.insert("memory".into(), memory.into());
    f.nodes[0].allocatable.insert("memory".into(), memory.into());
    decide_with(&f, "agent-toolkit", (model, kept), Some(text), &[]).unwrap()
}

/// The model line of a decision: (its choice, its fact).
fn model_line(d: &Decision) -> (&str, &str) {
    let c = d.choices.iter().find(|c| c.choice.starts_with("model: ")).expect("a model line");
    (c.choice.as_str(), c.fact.as_str())
}

/// Issue 32 item 4: the installed model is kept while it is a catalog LLM entry that fits, and
/// the line says when the pick would now differ, naming `--repick`; `--model` still wins.
#[test]
fn the_installed_model_is_kept_and_the_line_names_repick_when_the_pick_differs() {
    // The recorded desktop node at 48 GiB, then at its own 125 GiB (issue 22's figures).
    let fresh = decide_at("50331648Ki", (None, None));
    assert!(model_line(&fresh).0.starts_with("model: llama-3-1-8b (rule: the largest entry that fits"), "{fresh:?}");
    let repicked = decide_at("131530088Ki", (None, None));
    assert!(model_line(&repicked).0.starts_with("model: qwen2-5-coder-7b (rule: preference"), "{repicked:?}");
    let kept = decide_at("131530088Ki", (None, Some("llama-3-1-8b")));
    let (choice, fact) = model_line(&kept);
    assert_eq!(
        choice,
        "model: llama-3-1-8b (kept: the installed model; the pick would now be qwen2-5-coder-7b (rule: preference, \
         EAT's fallback): `eas up --repick` takes it)"
    );
    assert!(fact.starts_with("llama-3-1-8b deployed by the last completed eas up; largest node"), "{fact}");
    assert_eq!(overrides(&kept, "agent_toolkit_models"), Value::List(vec!["llama-3-1-8b".into()]));
    assert_eq!(crate::plan::data::model_pick(&kept).and_then(|m| m.name).as_deref(), Some("llama-3-1-8b"));
    // The pick unchanged: kept, with nothing to say about a repick.
    let same = decide_at("131530088Ki", (None, Some("qwen2-5-coder-7b")));
    assert_eq!(model_line(&same).0, "model: qwen2-5-coder-7b (kept: the installed model)");
    // --model names another: it wins over the installed one.
    let forced = decide_at("131530088Ki", (Some("qwen3-0-6b"), Some("llama-3-1-8b")));
    assert!(model_line(&forced).0.starts_with("model: qwen3-0-6b (forced"), "{forced:?}");
}

/// Issue 32 item 4: an installed model that no longer fits the node, or is no longer an LLM
/// entry of the catalog, is picked again, and the pick's fact says why.
#[test]
fn an_installed_model_that_no_longer_fits_or_is_gone_is_picked_again_saying_why() {
    let d = decide_at("16Gi", (None, Some("qwen2-5-coder-7b")));
    let (choice, fact) = model_line(&d);
    assert!(choice.starts_with("model: llama3-8b-awq (rule: the largest entry that fits"), "{choice}");
    assert!(
        fact.starts_with("the installed model qwen2-5-coder-7b is not kept: qwen2-5-coder-7b: does not fit"),
        "{fact}"
    );
    let gone = decide_at("16Gi", (None, Some("retired-model")));
    let fact = model_line(&gone).1;
    assert!(
        fact.starts_with(
            "the installed model retired-model is not kept: it is no longer an LLM entry of the EI catalog \
             model_manager/models.yaml at intel/enterprise-inference@abc1234"
        ),
        "{fact}"
    );
    // An embed entry is no model to keep either.
    let embed = decide_at("16Gi", (None, Some("bge-base-en")));
    assert!(model_line(&embed).1.starts_with("the installed model bge-base-en is not kept"), "{embed:?}");
}
