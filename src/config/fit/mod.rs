//! The built-in fit (SPEC §3.4): sizes each model candidate against the node it would land on.
//!
//! Pure: facts and the candidate table in, a fit document out. The gatherer uses
//! [`landing_node`] only to know which node's pods to ask about; it decides nothing else.

pub mod command;
pub mod external;
pub mod report;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::data::{self, Candidate};
use crate::facts::{self, Facts, KV_CACHE_ENV, MAX_MODEL_LEN, Node, StringMap};

pub const GIB: u64 = 1 << 30;
/// The longest context fit sizes a cache for (k3d-gpu fit's own ceiling, PR #251).
pub const CONTEXT_CEILING: u64 = 32768;
pub const SCHEMA: &str = "eas-fit/v1";
pub const SOURCE_EAS: &str = "eas";
pub const SOURCE_EXTERNAL: &str = "k3d-gpu fit";

/// A candidate's architecture, as `data/models.json` records it (each figure cited there).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Architecture {
    pub parameters: u64,
    pub dtype_bytes: u64,
    pub num_hidden_layers: u64,
    pub num_key_value_heads: u64,
    pub head_dim: u64,
    pub max_position_embeddings: u64,
}

impl Architecture {
    pub fn weights_bytes(&self) -> u64 {
        self.parameters * self.dtype_bytes
    }

    /// K and V, for every layer and KV head: 2 × layers × KV heads × head dim × dtype bytes.
    pub fn kv_bytes_per_token(&self) -> u64 {
        2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * self.dtype_bytes
    }
}

/// The catalog's `VLLM_CPU_KVCACHE_SPACE` in whole GiB, rounded down (vLLM reads it with `int()`).
/// Until the upstream-contact work lands, the value is `data/models.json`'s; this is the one place
/// to swap for the value read at the pinned EI commit.
pub fn catalog_cache_gib() -> u64 {
    whole_gib(data::models().catalog_kv_cache_gib)
}

pub fn whole_gib(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 { v.floor() as u64 } else { 0 }
}

/// The node a model would land on: the most allocatable memory among the nodes it may be
/// scheduled on. Those carry the AMX label when any node does (then `require_amx` is set, the same
/// rule as the generator's), and no `NoSchedule` or `NoExecute` taint. Ties go to the first name.
pub fn landing_node(nodes: &[Node]) -> Option<&Node> {
    let amx_label = &data::cluster_rules().amx_label;
    let amx = |n: &Node| n.labels.get(amx_label).is_some_and(|v| v == "true");
    let require_amx = nodes.iter().any(amx);
    let mut best: Option<(&Node, u64)> = None;
    for n in nodes {
        if (require_amx && !amx(n)) || n.taints.iter().any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute") {
            continue;
        }
        let mem = allocatable_bytes(n);
        if best.is_none_or(|(b, m)| mem > m || (mem == m && n.name < b.name)) {
            best = Some((n, mem));
        }
    }
    best.map(|(n, _)| n)
}

fn allocatable_bytes(n: &Node) -> u64 {
    n.allocatable.get("memory").and_then(|m| facts::parse_quantity(m)).map(|b| b as u64).unwrap_or(0)
}

/// The memory a model may use on its landing node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    pub node: String,
    pub allocatable_bytes: u64,
    /// `None`: the facts do not say (a document from before the field); counted as 0.
    pub pod_requests_bytes: Option<u64>,
    pub headroom_bytes: u64,
    pub budget_bytes: u64,
}

pub fn headroom_bytes() -> u64 {
    data::models().headroom_gib * GIB
}

pub fn budget(f: &Facts) -> Option<Budget> {
    let n = landing_node(&f.nodes)?;
    let allocatable = allocatable_bytes(n);
    let requested =
        n.pod_requests.as_ref().and_then(|r| r.get("memory")).and_then(|m| facts::parse_quantity(m)).map(|b| b as u64);
    let headroom = headroom_bytes();
    Some(Budget {
        node: n.name.clone(),
        allocatable_bytes: allocatable,
        pod_requests_bytes: requested,
        headroom_bytes: headroom,
        budget_bytes: allocatable.saturating_sub(requested.unwrap_or(0)).saturating_sub(headroom),
    })
}

/// One candidate's verdict and the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sized {
    pub fits: bool,
    pub weights_bytes: u64,
    pub kv_bytes_per_token: u64,
    pub budget_bytes: u64,
    pub catalog_cache_gib: u64,
    /// The KV cache in whole GiB (0 when it does not fit).
    pub cache_gib: u64,
    pub lowered: bool,
    pub max_model_len: Option<u64>,
    /// Printed once, as the entry's `why`.
    #[serde(skip_serializing)]
    pub why: String,
}

fn gib(b: u64) -> String {
    let v = b as f64 / GIB as f64;
    if (v - v.round()).abs() < 0.05 { format!("{:.0} GiB", v.round()) } else { format!("{v:.1} GiB") }
}

/// The largest power of two ≤ `ceiling` whose KV cache fits in `cache_bytes`.
pub fn max_model_len(kv_per_token: u64, cache_bytes: u64, ceiling: u64) -> Option<u64> {
    let mut len = 1u64 << (63 - ceiling.max(1).leading_zeros());
    while len >= 1 {
        if len.saturating_mul(kv_per_token) <= cache_bytes {
            return Some(len);
        }
        len >>= 1;
    }
    None
}

/// Sizes one candidate: weights first, then the largest whole-GiB cache the rest of the budget
/// holds, never above the catalog's, then the context one request may have in that cache.
pub fn size(arch: &Architecture, budget_bytes: u64, catalog_gib: u64) -> Sized {
    let weights = arch.weights_bytes();
    let kv = arch.kv_bytes_per_token();
    let spare = budget_bytes.saturating_sub(weights);
    let cache_gib = (spare / GIB).min(catalog_gib);
    let ceiling = CONTEXT_CEILING.min(arch.max_position_embeddings);
    let len = if cache_gib >= 1 { max_model_len(kv, cache_gib * GIB, ceiling) } else { None };
    let base = Sized {
        fits: false,
        weights_bytes: weights,
        kv_bytes_per_token: kv,
        budget_bytes,
        catalog_cache_gib: catalog_gib,
        cache_gib: 0,
        lowered: false,
        max_model_len: None,
        why: String::new(),
    };
    match len {
        None if weights > budget_bytes => {
            Sized { why: format!("weights {} exceed the {} budget", gib(weights), gib(budget_bytes)), ..base }
        }
        None => Sized {
            why: format!(
                "weights {} leave {} of the {} budget: less than 1 GiB of KV cache",
                gib(weights),
                gib(spare),
                gib(budget_bytes)
            ),
            ..base
        },
        Some(len) => {
            let lowered = cache_gib < catalog_gib;
            let why = if lowered {
                format!(
                    "weights {} leave {} GiB of cache (catalog {catalog_gib}); one request of {len} tokens needs {}",
                    gib(weights),
                    cache_gib,
                    gib(len * kv)
                )
            } else {
                format!("weights {} + the catalog's {catalog_gib} GiB cache fit in {}", gib(weights), gib(budget_bytes))
            };
            Sized { fits: true, cache_gib, lowered, max_model_len: Some(len), why, ..base }
        }
    }
}

/// The fit document: the `fit` shape of the facts (`candidates → {fits, env, args}`), plus its
/// source, the landing node's budget and each verdict's numbers (`data/eas-fit.v1.schema.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitDoc {
    pub schema: &'static str,
    pub source: &'static str,
    pub node: Option<Budget>,
    pub candidates: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub fits: bool,
    pub env: StringMap,
    pub args: Vec<String>,
    pub numbers: Option<Sized>,
    pub why: String,
}

/// Sizes every candidate of `data/models.json` that records its architecture.
pub fn compute(f: &Facts) -> FitDoc {
    let budget = budget(f);
    let catalog = catalog_cache_gib();
    let mut candidates = BTreeMap::new();
    for c in &data::models().candidates {
        candidates.insert(c.name.clone(), entry(c, budget.as_ref(), catalog));
    }
    FitDoc { schema: SCHEMA, source: SOURCE_EAS, node: budget, candidates }
}

fn entry(c: &Candidate, budget: Option<&Budget>, catalog: u64) -> Entry {
    let (Some(arch), Some(b)) = (&c.architecture, budget) else {
        let why = if c.architecture.is_none() {
            "no architecture recorded in data/models.json: eas cannot size it".to_string()
        } else {
            "no node it may be scheduled on (AMX-labelled when any node is, without a NoSchedule taint)".to_string()
        };
        return Entry { fits: false, env: StringMap::new(), args: vec![], numbers: None, why };
    };
    let s = size(arch, b.budget_bytes, catalog);
    let (env, args) = match s.max_model_len {
        Some(len) if s.fits => (
            StringMap::from([(KV_CACHE_ENV.to_string(), s.cache_gib.to_string())]),
            vec![MAX_MODEL_LEN.to_string(), len.to_string()],
        ),
        _ => (StringMap::new(), vec![]),
    };
    Entry { fits: s.fits, env, args, why: s.why.clone(), numbers: Some(s) }
}

impl FitDoc {
    /// The facts' `fit` shape, for the generator.
    pub fn as_fit(&self) -> facts::Fit {
        facts::Fit {
            candidates: self
                .candidates
                .iter()
                .map(|(k, e)| (k.clone(), facts::FitVerdict { fits: e.fits, env: e.env.clone(), args: e.args.clone() }))
                .collect(),
            source: Some(self.source.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
