//! The only readable real EI catalog, offline (issue 28 items 6 and 7): `eas up --dry-run
//! --offline` with an EI tree whose `model_manager/models.yaml` holds exactly that catalog's
//! entries (fixtures/synthetic/catalogs/real-entries.yaml, in the shape of
//! Mushtaq-BGA/enterprise-inference@1e10d1ac) picks a model on every recorded cluster, sized with
//! data/models.json's cited figures, says that Hugging Face did not confirm them, and writes the
//! dtype the landing node's CPU flags (its NFD labels) let vLLM's CPU backend run.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::ClusterServer;

/// The synthetic trees, the EI tree's catalog replaced by the real entries.
fn trees_with_real_catalog() -> PathBuf {
    let dir = support::until_exit("real-catalog-");
    let mut shas = Vec::new();
    for n in ["eas", "ei", "eat"] {
        let to = dir.join("repos").join(n);
        support::trees::copy_dir(&support::root().join("fixtures/synthetic").join(n), &to);
        if n == "ei" {
            std::fs::copy(
                support::root().join("fixtures/synthetic/catalogs/real-entries.yaml"),
                to.join("model_manager/models.yaml"),
            )
            .unwrap();
        }
        shas.push((n.to_string(), support::trees::commit_all(&to, n)));
    }
    std::fs::copy(support::root().join("pins.json"), dir.join("pins.json")).unwrap();
    support::trees::point_main_pins(&dir.join("pins.json"), &shas);
    dir
}

fn clusters() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(support::root().join("fixtures/clusters"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("nodes.json").exists())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn plan_of(cluster: &str, trees: &Path, layer: &str) -> Value {
    let server = ClusterServer::start(support::fixture(cluster));
    let state = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut c = support::planning::command(&server, cluster, state.path(), trees, true, &[]);
    c.env("XDG_CACHE_HOME", cache.path()).args(["--dry-run", "--output", "json", "--offline", "--layer", layer]);
    let out = c.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{cluster}: {e}: {}", support::text(&out.stderr)))
}

#[test]
fn offline_the_real_catalog_picks_a_model_on_every_recorded_cluster_with_cited_figures() {
    let trees = trees_with_real_catalog();
    let all = clusters();
    assert!(all.len() >= 6, "{all:?}");
    let mut refused = Vec::new();
    for (cluster, layer) in all.iter().flat_map(|c| [(c, "inference"), (c, "agent-toolkit")]) {
        let plan = plan_of(cluster, &trees, layer);
        let decisions = plan["decisions"].as_array().unwrap();
        let choice = |prefix: &str| {
            decisions.iter().find(|d| d["choice"].as_str().is_some_and(|c| c.starts_with(prefix))).cloned()
        };
        let config: Vec<&Value> =
            plan["blockers"].as_array().unwrap().iter().filter(|b| b["phase"] == "config").collect();
        // Only the refusal of a cluster that holds EAT 1.x (the eat1 recording, both layers) may
        // stop the config phase, never the model.
        if !config.is_empty() {
            assert!(
                config.iter().all(|b| b["cause"].as_str().unwrap().starts_with("EAT 1.x is installed")),
                "{cluster} {layer}: the config phase refused: {config:#?}"
            );
            refused.push(format!("{cluster} {layer}"));
            continue;
        }
        let pick = choice("model: ").unwrap_or_else(|| panic!("{cluster} {layer}: no pick: {decisions:#?}"));
        let name = pick["choice"].as_str().unwrap()["model: ".len()..].split(' ').next().unwrap().to_string();
        assert!(["qwen3-0-6b", "llama3-8b-awq"].contains(&name.as_str()), "{cluster}: {pick}");
        let text = plan.to_string();
        assert!(text.contains("'s figures: data/models.json)"), "{cluster}: the sizing names its figures: {plan:#}");
        let warned = plan["warnings"].as_array().unwrap().iter().any(|w| {
            w.as_str().unwrap().contains(&format!("{name}: picked and sized with data/models.json's figures"))
        });
        assert!(warned, "{cluster}: the plan says Hugging Face did not confirm the figures: {plan:#}");
        // The dtype follows the landing node's CPU flags (all recorded nodes carry NFD labels).
        let dtype = decisions
            .iter()
            .find(|d| d["source"].as_str().is_some_and(|s| s.ends_with("vllm/platforms/cpu.py:78-119")))
            .cloned();
        let dtype = dtype.unwrap_or_else(|| panic!("{cluster}: no dtype decision: {decisions:#?}"));
        let fact = dtype["fact"].as_str().unwrap();
        if fact.contains("bfloat16 runs natively") {
            assert_eq!(dtype["choice"], "dtype: the catalog's bfloat16 kept", "{cluster}");
        } else {
            assert!(fact.contains("has AVX2 and neither AVX512BF16 nor AMXBF16"), "{cluster}: {dtype}");
            let to = if name == "llama3-8b-awq" { "float16" } else { "float32" };
            assert!(
                dtype["choice"].as_str().unwrap().contains(&format!("\"--dtype\", \"{to}\"")),
                "{cluster}: {dtype}"
            );
        }
    }
    assert_eq!(refused, ["eat1 inference", "eat1 agent-toolkit"], "only EAT 1.x refuses");
}
