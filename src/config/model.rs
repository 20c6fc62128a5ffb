//! The model pick (both layers) and the KV-cache rule: EAT's default when the largest node has
//! the memory EAT documents and fit agrees, else the first 64 GiB fallback that fits, else none;
//! fit may lower the catalog's KV cache, never raise it, and a lowered cache carries fit's
//! `--max-model-len`.

use crate::facts::{self, Facts, FitVerdict, GIB, KV_CACHE_ENV, MAX_MODEL_LEN};

use super::catalog::{Pinned, kv_ceiling_gib, whole_gib};
use super::data::{self, Candidate};
use super::rules::{Choice, Decision, Layer, ModelEdit, Value};

fn largest_node_gib(f: &Facts) -> (f64, String) {
    let mut best = (0.0, String::from("(none)"));
    for n in &f.nodes {
        if let Some(m) = n.capacity.get("memory").and_then(|m| facts::parse_quantity(m)) {
            let gib = m / GIB;
            if gib > best.0 {
                best = (gib, n.name.clone());
            }
        }
    }
    best
}

fn fmt_gib(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 { format!("{:.0}", v.round()) } else { format!("{v:.1}") }
}

/// Which fit decides, and for eas's own, the budget it sized against.
fn fit_fact(f: &Facts, fit: Option<&facts::Fit>) -> String {
    match fit.map(|fit| fit.source.as_deref()) {
        None => "no fit document (memory alone decides)".into(),
        Some(Some(crate::config::fit::SOURCE_EAS)) => match crate::config::fit::budget(f) {
            Some(b) => format!(
                "eas fit on node {}: {} GiB budget ({} GiB allocatable, {} pod requests, {} GiB headroom)",
                b.node,
                fmt_gib(b.budget_bytes as f64 / GIB),
                fmt_gib(b.allocatable_bytes as f64 / GIB),
                b.pod_requests_bytes
                    .map(|r| format!("{} GiB", fmt_gib(r as f64 / GIB)))
                    .unwrap_or_else(|| "unknown".into()),
                fmt_gib(b.headroom_bytes as f64 / GIB)
            ),
            None => "eas fit: no node a model may be scheduled on".into(),
        },
        Some(Some(other)) => format!("{other} document present"),
        Some(None) => "fit document present".into(),
    }
}

/// A model eas may pick or be given: a built-in candidate, or (with a catalog) any LLM entry.
struct Pickable<'a> {
    name: &'a str,
    /// The built-in candidate's data (host memory, role, citations), when it is one.
    cand: Option<&'a Candidate>,
}

/// Whether a model can be picked automatically, and why not.
fn verdict(p: &Pickable, mem: f64, fit: Option<&facts::Fit>) -> Result<(), String> {
    if let Some(c) = p.cand
        && mem + 1e-9 < c.host_memory_gib
    {
        return Err(format!("{} needs {} GiB of host memory", c.name, fmt_gib(c.host_memory_gib)));
    }
    match fit.map(|f| f.candidates.get(p.name)) {
        None => Ok(()),
        Some(None) => Err(format!("{}: no fit verdict", p.name)),
        Some(Some(v)) if !v.fits => Err(format!("{}: fit says it does not fit", p.name)),
        Some(Some(_)) => Ok(()),
    }
}

/// The model pick for either layer and its KV cache. With a catalog, only its LLM entries can be
/// picked, and its KV cache is the ceiling. `Err` is a refusal.
pub fn pick(
    f: &Facts,
    fit: Option<&facts::Fit>,
    forced: Option<&str>,
    catalog: Option<&Pinned>,
    layer: Layer,
    d: &mut Decision,
) -> Result<(), String> {
    let models = data::models();
    let (mem, node) = largest_node_gib(f);
    let mem_fact = format!("largest node {node} {} GiB", fmt_gib(mem));
    let fit_fact = fit_fact(f, fit);
    let fit_fact = fit_fact.as_str();
    if let Some(c) = catalog {
        d.choices.push(Choice {
            fact: format!("EI catalog {}: LLM entries {}", c.describe(), c.catalog.llm_names().join(", ")),
            choice: "models are picked from this catalog; its KV cache is the ceiling".into(),
            source: "ei-catalog-shape".into(),
        });
    }

    let picked: Option<Pickable> = if let Some(name) = forced {
        let p = Pickable { name, cand: models.candidates.iter().find(|c| c.name == name) };
        let why = match verdict(&p, mem, fit) {
            Ok(()) => String::new(),
            Err(e) => {
                d.warnings.push(format!("--model {name} overrides the pick although {e}"));
                format!("; warning: {e}")
            }
        };
        let source = match (p.cand, catalog) {
            (_, Some(_)) => "ei-catalog-shape".to_string(),
            (Some(c), None) => c.source.clone(),
            (None, None) => unreachable!("checked in decide"),
        };
        d.choices.push(Choice {
            fact: format!("--model {name}; {mem_fact}; {fit_fact}"),
            choice: format!("model: {name} (forced{why})"),
            source,
        });
        Some(p)
    } else {
        auto_pick(catalog, mem, fit, &format!("{mem_fact}; {fit_fact}"), d)?
    };
    let list = picked.as_ref().map(|p| vec![p.name.to_string()]).unwrap_or_default();
    match layer {
        Layer::AgentToolkit => d.overrides.push(("agent_toolkit_models", Value::List(list))),
        Layer::Inference => deploy_switch(picked.as_ref().map(|p| p.name), d),
    }

    let Some(p) = picked else { return Ok(()) };
    let (ceiling, kv_source) = match catalog {
        Some(cat) => match kv_ceiling_gib(&cat.catalog, p.name) {
            Some(k) => (k, "ei-catalog-kv".to_string()),
            None => {
                d.choices.push(Choice {
                    fact: format!("the catalog sets no {KV_CACHE_ENV} for {}", p.name),
                    choice: "KV cache: none written (the entry's server sizes its own)".into(),
                    source: "ei-catalog-kv".into(),
                });
                autodeploy_edit(p.name, layer, d);
                return Ok(());
            }
        },
        None => (whole_gib(models.catalog_kv_cache_gib), p.cand.expect("checked in decide").kv_source.clone()),
    };
    let Some(v) = fit.and_then(|fit| fit.candidates.get(p.name)) else {
        d.choices.push(Choice {
            fact: format!("no fit sizing for {}", p.name),
            choice: format!("KV cache: catalog's {ceiling} GiB kept"),
            source: kv_source,
        });
        autodeploy_edit(p.name, layer, d);
        return Ok(());
    };
    kv_cache(p.name, &kv_source, v, ceiling, d)?;
    autodeploy_edit(p.name, layer, d);
    Ok(())
}

/// The first candidate (in data/models.json's order) that the catalog holds and that fits.
fn auto_pick<'a>(
    catalog: Option<&Pinned>,
    mem: f64,
    fit: Option<&facts::Fit>,
    facts: &str,
    d: &mut Decision,
) -> Result<Option<Pickable<'a>>, String> {
    let models = data::models();
    let in_catalog = |name: &str| catalog.is_none_or(|c| c.catalog.llm_names().contains(&name));
    let mut reasons = Vec::new();
    let mut found = None;
    for c in &models.candidates {
        if !in_catalog(&c.name) {
            reasons.push(format!("{} is not in the catalog", c.name));
            continue;
        }
        let p = Pickable { name: &c.name, cand: Some(c) };
        match verdict(&p, mem, fit) {
            Ok(()) => {
                found = Some(p);
                break;
            }
            Err(e) => reasons.push(e),
        }
    }
    if let Some(cat) = catalog
        && !models.candidates.iter().any(|c| in_catalog(&c.name))
    {
        let own: Vec<&str> = models.candidates.iter().map(|c| c.name.as_str()).collect();
        return Err(format!(
            "the EI catalog {} holds none of eas's candidates ({}); its LLM entries: {}; choose one with --model",
            cat.describe(),
            own.join(", "),
            cat.catalog.llm_names().join(", ")
        ));
    }
    let rejected = if reasons.is_empty() { String::new() } else { format!("; {}", reasons.join("; ")) };
    match &found {
        Some(p) => {
            let c = p.cand.expect("automatic picks are candidates");
            d.choices.push(Choice {
                fact: format!("{facts}{rejected}"),
                choice: format!("model: {} ({})", c.name, c.role),
                source: c.source.clone(),
            });
        }
        None => {
            d.warnings.push(format!("no model fits this cluster{rejected}"));
            d.choices.push(Choice {
                fact: format!("{facts}{rejected}"),
                choice: "model: none ([]): no candidate fits".into(),
                source: models.candidates[0].source.clone(),
            });
        }
    }
    Ok(found)
}

/// The inference layer deploys its model through EI's own switch: the layer config's
/// `llm_services_deploy_models` (shipped `false`) gates the whole auto-deploy phase, and only
/// entries marked `autodeploy: true` are deployed.
fn deploy_switch(model: Option<&str>, d: &mut Decision) {
    let on = model.is_some();
    d.choices.push(Choice {
        fact: match model {
            Some(m) => format!("layer inference, model {m}; EI's config.yaml ships llm_services_deploy_models: false"),
            None => "layer inference, no model picked".into(),
        },
        choice: format!("llm_services_deploy_models: {on}"),
        source: "ei-deploy-switch".into(),
    });
    d.overrides.push(("llm_services_deploy_models", Value::Bool(on)));
}

fn autodeploy_edit(name: &str, layer: Layer, d: &mut Decision) {
    if layer != Layer::Inference {
        return;
    }
    d.choices.push(Choice {
        fact: format!("EI's install deploys only catalog entries with autodeploy: true; {name} is the pick"),
        choice: format!("models.yaml {name} autodeploy: true"),
        source: "ei-autodeploy".into(),
    });
    match d.model_edits.iter_mut().find(|e| e.name == name) {
        Some(e) => e.autodeploy = true,
        None => d.model_edits.push(ModelEdit {
            name: name.to_string(),
            autodeploy: true,
            env: Vec::new(),
            args_append: Vec::new(),
        }),
    }
}

fn kv_cache(name: &str, kv_source: &str, v: &FitVerdict, ceiling: u64, d: &mut Decision) -> Result<(), String> {
    let Some(kv_text) = v.env.get(KV_CACHE_ENV) else {
        d.choices.push(Choice {
            fact: format!("fit sets no {KV_CACHE_ENV} for {name}"),
            choice: format!("KV cache: catalog's {ceiling} GiB kept"),
            source: kv_source.to_string(),
        });
        return Ok(());
    };
    let kv = facts::parse_gib(kv_text).expect("validated on read");
    let whole = whole_gib(kv);
    // vLLM reads the variable with int(...): a fraction would stop the pod, so fit's figure is
    // rounded down to whole GiB (never up), and the catalog's is the ceiling.
    let rounded = if (kv - whole as f64).abs() > f64::EPSILON {
        format!(", rounded down to {whole} whole GiB (vLLM reads whole GiB)")
    } else {
        String::new()
    };
    if whole >= ceiling {
        d.choices.push(Choice {
            fact: format!("fit {KV_CACHE_ENV}={kv_text} for {}{rounded} >= catalog {ceiling}", name),
            choice: format!("KV cache: catalog's {ceiling} GiB kept (fit may lower it, never raise it)"),
            source: "memory-is-limit".into(),
        });
        return Ok(());
    }
    if whole == 0 {
        return Err(format!(
            "fit sizes {}'s KV cache at {kv_text} GiB, under one whole GiB: vLLM reads {KV_CACHE_ENV} as whole \
             GiB and 0 leaves the size to vLLM; pick a smaller model (--model) or give the node more memory",
            name
        ));
    }
    let len = v.max_model_len().expect("validated on read").to_string();
    let value = whole.to_string();
    d.choices.push(Choice {
        fact: format!("fit {KV_CACHE_ENV}={kv_text} for {} < catalog {ceiling}{rounded}", name),
        choice: format!("models.yaml {} env {KV_CACHE_ENV}: {value:?}", name),
        source: if rounded.is_empty() { "vllm-kv-space" } else { "vllm-kv-int" }.into(),
    });
    d.choices.push(Choice {
        fact: format!("a lowered KV cache must hold one request at fit's {MAX_MODEL_LEN} {len}"),
        choice: format!("models.yaml {} args_append: [\"{MAX_MODEL_LEN}\", {len:?}]", name),
        source: "vllm-kv-check".into(),
    });
    d.model_edits.push(ModelEdit {
        name: name.to_string(),
        autodeploy: false,
        env: vec![(KV_CACHE_ENV.to_string(), value)],
        args_append: vec![MAX_MODEL_LEN.to_string(), len],
    });
    Ok(())
}
