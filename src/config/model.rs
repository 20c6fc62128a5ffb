//! The agent-toolkit model pick and the KV-cache rule: EAT's default when the largest node has
//! the memory EAT documents and fit agrees, else the first 64 GiB fallback that fits, else none;
//! fit may lower the catalog's KV cache, never raise it, and a lowered cache carries fit's
//! `--max-model-len`.

use crate::facts::{self, Facts, FitVerdict, GIB, KV_CACHE_ENV, MAX_MODEL_LEN};

use super::data::{self, Candidate};
use super::rules::{Choice, Decision, ModelEdit, Value};

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
fn fit_fact(f: &Facts) -> String {
    match f.fit.as_ref().map(|fit| fit.source.as_deref()) {
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

/// Whether a candidate can be picked automatically, and why not.
fn verdict(c: &Candidate, mem: f64, fit: Option<&facts::Fit>) -> Result<(), String> {
    if mem + 1e-9 < c.host_memory_gib {
        return Err(format!("{} needs {} GiB of host memory", c.name, fmt_gib(c.host_memory_gib)));
    }
    match fit.map(|f| f.candidates.get(&c.name)) {
        None => Ok(()),
        Some(None) => Err(format!("{}: no fit verdict", c.name)),
        Some(Some(v)) if !v.fits => Err(format!("{}: fit says it does not fit", c.name)),
        Some(Some(_)) => Ok(()),
    }
}

pub fn pick(f: &Facts, forced: Option<&str>, d: &mut Decision) {
    let models = data::models();
    let (mem, node) = largest_node_gib(f);
    let fit = f.fit.as_ref();
    let mem_fact = format!("largest node {node} {} GiB", fmt_gib(mem));
    let fit_fact = fit_fact(f);
    let fit_fact = fit_fact.as_str();

    let picked: Option<&Candidate> = if let Some(name) = forced {
        let c = models.candidates.iter().find(|c| c.name == name).expect("checked in decide");
        let why = match verdict(c, mem, fit) {
            Ok(()) => String::new(),
            Err(e) => {
                d.warnings.push(format!("--model {name} overrides the pick although {e}"));
                format!("; warning: {e}")
            }
        };
        d.choices.push(Choice {
            fact: format!("--model {name}; {mem_fact}; {fit_fact}"),
            choice: format!("model: {name} (forced{why})"),
            source: c.source.clone(),
        });
        Some(c)
    } else {
        let mut reasons = Vec::new();
        let mut found = None;
        for c in &models.candidates {
            match verdict(c, mem, fit) {
                Ok(()) => {
                    found = Some(c);
                    break;
                }
                Err(e) => reasons.push(e),
            }
        }
        let rejected = if reasons.is_empty() { String::new() } else { format!("; {}", reasons.join("; ")) };
        match found {
            Some(c) => d.choices.push(Choice {
                fact: format!("{mem_fact}; {fit_fact}{rejected}"),
                choice: format!("model: {} ({})", c.name, c.role),
                source: c.source.clone(),
            }),
            None => {
                d.warnings.push(format!("no model fits this cluster{rejected}"));
                d.choices.push(Choice {
                    fact: format!("{mem_fact}; {fit_fact}{rejected}"),
                    choice: "model: none ([]): no candidate fits".into(),
                    source: models.candidates[0].source.clone(),
                });
            }
        }
        found
    };
    let list = picked.map(|c| vec![c.name.clone()]).unwrap_or_default();
    d.overrides.push(("agent_toolkit_models", Value::List(list)));

    let Some(c) = picked else { return };
    let catalog = models.catalog_kv_cache_gib;
    let Some(v) = fit.and_then(|fit| fit.candidates.get(&c.name)) else {
        d.choices.push(Choice {
            fact: format!("no fit sizing for {}", c.name),
            choice: format!("KV cache: catalog's {} GiB kept", fmt_gib(catalog)),
            source: c.kv_source.clone(),
        });
        return;
    };
    kv_cache(c, v, catalog, d);
}

fn kv_cache(c: &Candidate, v: &FitVerdict, catalog: f64, d: &mut Decision) {
    let Some(kv_text) = v.env.get(KV_CACHE_ENV) else {
        d.choices.push(Choice {
            fact: format!("fit sets no {KV_CACHE_ENV} for {}", c.name),
            choice: format!("KV cache: catalog's {} GiB kept", fmt_gib(catalog)),
            source: c.kv_source.clone(),
        });
        return;
    };
    let kv = facts::parse_gib(kv_text).expect("validated on read");
    if kv >= catalog {
        d.choices.push(Choice {
            fact: format!("fit {KV_CACHE_ENV}={kv_text} for {} >= catalog {}", c.name, fmt_gib(catalog)),
            choice: format!("KV cache: catalog's {} GiB kept (fit may lower it, never raise it)", fmt_gib(catalog)),
            source: "memory-is-limit".into(),
        });
        return;
    }
    let len = v.max_model_len().expect("validated on read").to_string();
    d.choices.push(Choice {
        fact: format!("fit {KV_CACHE_ENV}={kv_text} for {} < catalog {}", c.name, fmt_gib(catalog)),
        choice: format!("models.yaml {} env {KV_CACHE_ENV}: {kv_text:?}", c.name),
        source: "vllm-kv-space".into(),
    });
    d.choices.push(Choice {
        fact: format!("a lowered KV cache must hold one request at fit's {MAX_MODEL_LEN} {len}"),
        choice: format!("models.yaml {} args_append: [\"{MAX_MODEL_LEN}\", {len:?}]", c.name),
        source: "vllm-kv-check".into(),
    });
    d.model_edits.push(ModelEdit {
        name: c.name.clone(),
        env: vec![(KV_CACHE_ENV.to_string(), kv_text.clone())],
        args_append: vec![MAX_MODEL_LEN.to_string(), len],
    });
}
