//! The built-in fit (SPEC §3.4): sizes each vLLM model entry against its pod and the node it
//! would land on (weights + KV cache + working headroom ≤ pod memory ≤ node budget).
//!
//! Pure: facts and the candidate table in, a fit document out. [`landing_node`] is handed to the
//! gatherer by its callers (`eas facts`, `eas up`'s facts phase), so the gatherer reads the pods
//! of the node this rule names without deciding anything itself.

pub mod architecture;
pub mod external;
pub mod report;

pub use architecture::Architecture;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::data;
use crate::facts::{self, Facts, KV_CACHE_ENV, MAX_MODEL_LEN, Node, StringMap};

pub const GIB: u64 = 1 << 30;
pub const SCHEMA: &str = "eas-fit/v1";
pub use crate::facts::SOURCE_EAS;
pub const SOURCE_EXTERNAL: &str = "k3d-gpu fit";

/// `eas fit`, resolved (`src/cli/`).
#[derive(Debug, Clone)]
pub struct FitSettings {
    pub facts: std::path::PathBuf,
    /// An external `k3d-gpu fit` document, which wins.
    pub fit: Option<std::path::PathBuf>,
    pub output: crate::output::OutputFormat,
}

/// The built-in candidates' KV cache when no catalog is read: `data/models.json`'s, in whole GiB
/// rounded down (vLLM reads it with `int()`).
pub fn catalog_cache_gib() -> u64 {
    whole_gib(data::models().catalog_kv_cache_gib)
}

pub fn whole_gib(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 { v.floor() as u64 } else { 0 }
}

fn ceil_gib(bytes: u64) -> u64 {
    bytes.div_ceil(GIB)
}

/// What fit needs to know of one model entry: a catalog's LLM entry, or a built-in candidate
/// standing in for one (then with `data/models.json`'s KV cache and the category's memory).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub model_id: String,
    pub runtime: String,
    /// The catalog's KV cache for it in whole GiB: the ceiling fit may lower, never raise.
    pub kv_ceiling_gib: Option<u64>,
    /// The pod's memory request and limit as the catalog renders it.
    pub pod_memory_bytes: Option<u64>,
    /// The catalog's own `--max-model-len`, when its args carry one.
    pub max_model_len: Option<u64>,
    /// The catalog's `--dtype`, when its args carry one.
    pub dtype: Option<String>,
    /// Its figures (or why they are unknown) and where they were read.
    pub arch: Result<Architecture, String>,
    pub arch_from: String,
    /// Why the Hugging Face figures the cache holds were not used (a warning of the plan).
    pub arch_warning: Option<String>,
}

/// A model's figures: the Hugging Face cache (`hf:<id>@main config.json`, read-only) first, else
/// `data/models.json`; `Err` says why they are unknown. Figures Hugging Face gave that cannot be
/// sized with (a `total_size` of 2^64-1) fall back to `data/models.json` as for an unreachable
/// Hugging Face, and the third value says why.
pub fn resolve_architecture(
    model_id: &str,
    hf_cache: Option<&std::path::Path>,
) -> (Result<Architecture, String>, String, Option<String>) {
    let dir = hf_cache.and_then(|b| crate::config::hf::cache_dir(b, model_id, "main"));
    let warning = match dir.as_deref().and_then(crate::config::hf::from_cache) {
        Some(Ok(a)) => return (Ok(a), format!("hf:{model_id}@main config.json"), None),
        Some(Err(e)) if e.contains("the most eas sizes with") => Some(format!(
            "hf:{model_id}@main: {e}: the figures come from data/models.json, as for an unreachable Hugging Face"
        )),
        _ => None,
    };
    (data::models().architecture(model_id).cloned(), "data/models.json".into(), warning)
}

impl Target {
    /// The built-in candidates, as targets (no catalog read).
    pub fn builtin(hf_cache: Option<&std::path::Path>) -> Vec<Target> {
        let m = data::models();
        m.candidates
            .iter()
            .map(|c| {
                let (arch, arch_from, arch_warning) = resolve_architecture(&c.model_id, hf_cache);
                Target {
                    name: c.name.clone(),
                    model_id: c.model_id.clone(),
                    runtime: "vllm".into(),
                    kv_ceiling_gib: Some(catalog_cache_gib()),
                    pod_memory_bytes: Some(m.category_memory_gib * GIB),
                    max_model_len: None,
                    dtype: None,
                    arch,
                    arch_from,
                    arch_warning,
                }
            })
            .collect()
    }

    /// The entries a decision picks from: the catalog's LLM entries, else the built-in candidates.
    pub fn for_catalog(c: Option<&crate::config::catalog::Catalog>, hf_cache: Option<&std::path::Path>) -> Vec<Target> {
        match c {
            Some(c) => Target::from_catalog(c, hf_cache),
            None => Target::builtin(hf_cache),
        }
    }

    /// A catalog's LLM entries, as targets.
    pub fn from_catalog(c: &crate::config::catalog::Catalog, hf_cache: Option<&std::path::Path>) -> Vec<Target> {
        c.llms()
            .map(|e| {
                let (arch, arch_from, arch_warning) = resolve_architecture(&e.model_id, hf_cache);
                Target {
                    name: e.name.clone(),
                    model_id: e.model_id.clone(),
                    runtime: e.runtime.clone(),
                    kv_ceiling_gib: e.kv_cache_gib.map(whole_gib),
                    pod_memory_bytes: e.memory_bytes,
                    max_model_len: e.max_model_len,
                    dtype: e.dtype.clone(),
                    arch,
                    arch_from,
                    arch_warning,
                }
            })
            .collect()
    }
}

/// The node a model would land on: the most allocatable memory among the nodes it may be
/// scheduled on. Those carry the AMX label when any node does (then `require_amx` is set, the same
/// rule as the generator's), and none of the operator's own `NoSchedule` or `NoExecute` taints.
/// A lifecycle taint (not-ready, unreachable, the pressure taints) does not take a node out: it
/// stays sized (its pods' requests in the fit), and the prerequisites refuse it while its
/// condition lasts. Ties go to the first name.
pub fn landing_node(nodes: &[Node]) -> Option<&Node> {
    let amx_label = &data::cluster_rules().amx_label;
    let amx = |n: &Node| n.labels.get(amx_label).is_some_and(|v| v == "true");
    let require_amx = nodes.iter().any(amx);
    let mut best: Option<(&Node, u64)> = None;
    for n in nodes {
        if (require_amx && !amx(n)) || !operator_taints(n).is_empty() {
            continue;
        }
        // A node whose memory is past what eas sizes with is reported (`unsizable`), never sized.
        let (Ok(mem), Ok(_)) = (allocatable_bytes(n), requested_bytes(n)) else { continue };
        if best.is_none_or(|(b, m)| mem > m || (mem == m && n.name < b.name)) {
            best = Some((n, mem));
        }
    }
    best.map(|(n, _)| n)
}

/// The node's `NoSchedule`/`NoExecute` taints an operator put there (not the control plane's
/// lifecycle taints, `data/cluster-rules.json` `lifecycle_taints`).
pub fn operator_taints(n: &Node) -> Vec<&facts::Taint> {
    let lifecycle = &data::cluster_rules().lifecycle_taints;
    n.taints
        .iter()
        .filter(|t| (t.effect == "NoSchedule" || t.effect == "NoExecute") && !lifecycle.contains(&t.key))
        .collect()
}

/// A node's memory quantity (`allocatable` or `pod_requests`), checked: absent or not a quantity
/// is 0 (unknown), past [`facts::MAX_BYTES`] is `Err` naming the field.
fn memory_of(n: &Node, what: &str, map: Option<&StringMap>) -> Result<u64, String> {
    match map.and_then(|m| m.get("memory")).and_then(|m| facts::quantity_bytes(m)) {
        Some(Err(e)) => Err(format!("node {}: {what}.memory {e}", n.name)),
        Some(Ok(b)) => Ok(b),
        None => Ok(0),
    }
}

fn allocatable_bytes(n: &Node) -> Result<u64, String> {
    memory_of(n, "allocatable", Some(&n.allocatable))
}

fn requested_bytes(n: &Node) -> Result<u64, String> {
    memory_of(n, "pod_requests", n.pod_requests.as_ref())
}

/// The nodes fit does not size because a memory figure is past what eas sizes with, each with
/// the field: a warning of `eas facts` and of the plan.
pub fn unsizable(nodes: &[Node]) -> Vec<String> {
    nodes.iter().filter_map(facts::unsizable).collect()
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

/// vLLM's working memory inside the pod beyond weights and KV cache.
pub fn pod_headroom_bytes() -> u64 {
    data::models().pod_headroom_gib * GIB
}

pub fn budget(f: &Facts) -> Option<Budget> {
    let n = landing_node(&f.nodes)?;
    let allocatable = allocatable_bytes(n).ok()?;
    let has_requests = n.pod_requests.as_ref().is_some_and(|r| r.get("memory").is_some());
    let requested = requested_bytes(n).ok().filter(|_| has_requests);
    let headroom = headroom_bytes();
    Some(Budget {
        node: n.name.clone(),
        allocatable_bytes: allocatable,
        pod_requests_bytes: requested,
        headroom_bytes: headroom,
        budget_bytes: allocatable.saturating_sub(requested.unwrap_or(0)).saturating_sub(headroom),
    })
}

/// One entry's verdict and the numbers behind it.
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
    /// The pod's memory as the catalog renders it, and what weights + cache + working headroom
    /// need, in whole GiB (0 when it does not fit).
    pub pod_memory_bytes: Option<u64>,
    pub pod_headroom_bytes: u64,
    pub memory_gib: u64,
    /// The context one request is served at: the catalog's `--max-model-len`, else the model's own.
    pub context: u64,
    /// Written only when one request at `context` needs more KV than the cache holds.
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

/// The context vLLM serves: the catalog's `--max-model-len`, else the model's own.
pub fn context(arch: &Architecture, catalog_len: Option<u64>) -> u64 {
    catalog_len.unwrap_or(arch.max_position_embeddings)
}

/// The `--max-model-len` to write for a cache of `cache_gib`: `None` when one request at the
/// served context fits (vLLM's one-request check passes), else the largest power of two that does.
pub fn needed_max_model_len(arch: &Architecture, ctx: u64, cache_gib: u64) -> Option<u64> {
    let kv = arch.kv_bytes_per_token();
    let cache = cache_gib.saturating_mul(GIB);
    if ctx.saturating_mul(kv) <= cache {
        return None;
    }
    max_model_len(kv, cache, ctx)
}

/// The pod memory weights, a cache of `cache_gib` and the working headroom need, in whole GiB.
pub fn memory_gib(arch: &Architecture, cache_gib: u64) -> u64 {
    ceil_gib(arch.weights_bytes().saturating_add(pod_headroom_bytes())).saturating_add(cache_gib)
}

/// Sizes one vLLM entry: weights and the pod's working headroom first (whole GiB, rounded up),
/// then the largest whole-GiB cache the rest of the node budget holds, never above the catalog's;
/// the pod memory is what the three need; then the context one request may have in that cache.
pub fn size(arch: &Architecture, budget_bytes: u64, t: &Target) -> Sized {
    let catalog_gib = t.kv_ceiling_gib.unwrap_or(0);
    let weights = arch.weights_bytes();
    let kv = arch.kv_bytes_per_token();
    let base = ceil_gib(weights.saturating_add(pod_headroom_bytes()));
    let cache_gib = (budget_bytes / GIB).saturating_sub(base).min(catalog_gib);
    let ctx = context(arch, t.max_model_len);
    let blank = Sized {
        fits: false,
        weights_bytes: weights,
        kv_bytes_per_token: kv,
        budget_bytes,
        catalog_cache_gib: catalog_gib,
        cache_gib: 0,
        lowered: false,
        pod_memory_bytes: t.pod_memory_bytes,
        pod_headroom_bytes: pod_headroom_bytes(),
        memory_gib: 0,
        context: ctx,
        max_model_len: None,
        why: String::new(),
    };
    if cache_gib < 1 {
        let why = format!(
            "weights {} + {} working headroom need {base} GiB of pod memory (whole GiB): the {} node budget leaves \
             less than 1 GiB of KV cache beside them",
            gib(weights),
            gib(pod_headroom_bytes()),
            gib(budget_bytes)
        );
        return Sized { why, ..blank };
    }
    let len = needed_max_model_len(arch, ctx, cache_gib);
    let memory = base + cache_gib;
    let lowered = cache_gib < catalog_gib;
    let mut why = format!(
        "weights {} + {cache_gib} GiB cache{} + {} headroom = {memory} GiB pod memory",
        gib(weights),
        if lowered { format!(" (catalog {catalog_gib})") } else { String::new() },
        gib(pod_headroom_bytes())
    );
    match t.pod_memory_bytes {
        Some(m) if m < memory.saturating_mul(GIB) => why.push_str(&format!(" > the catalog's {}: raised", gib(m))),
        Some(m) if m > budget_bytes => why.push_str(&format!("; the catalog's {} exceeds the budget: lowered", gib(m))),
        Some(m) => why.push_str(&format!(" <= the catalog's {}", gib(m))),
        None => why.push_str(" (the catalog sets none)"),
    }
    why.push_str(&format!(" <= {} budget", gib(budget_bytes)));
    match len {
        Some(l) => why.push_str(&format!(
            "; one request of {ctx} tokens needs {}: --max-model-len {l}",
            gib(ctx.saturating_mul(kv))
        )),
        None => why.push_str(&format!("; one request of {ctx} tokens needs {}", gib(ctx.saturating_mul(kv)))),
    }
    Sized { fits: true, cache_gib, lowered, memory_gib: memory, max_model_len: len, why, ..blank }
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

/// Sizes the built-in candidates (no catalog read).
pub fn compute(f: &Facts) -> FitDoc {
    compute_for(f, &Target::builtin(None))
}

/// Sizes each target whose architecture `data/models.json` records.
pub fn compute_for(f: &Facts, targets: &[Target]) -> FitDoc {
    let budget = budget(f);
    let mut candidates = BTreeMap::new();
    for t in targets {
        candidates.insert(t.name.clone(), entry(t, budget.as_ref()));
    }
    FitDoc { schema: SCHEMA, source: SOURCE_EAS, node: budget, candidates }
}

fn entry(t: &Target, budget: Option<&Budget>) -> Entry {
    let unsized_ = |why: String| Entry { fits: false, env: StringMap::new(), args: vec![], numbers: None, why };
    if t.runtime != "vllm" {
        return unsized_(format!("runtime {}: eas sizes vLLM entries only (no fit verdict)", t.runtime));
    }
    let arch = match &t.arch {
        Ok(a) => a,
        Err(why) => return unsized_(format!("architecture unknown ({}): {why}", t.model_id)),
    };
    let Some(b) = budget else {
        return unsized_(
            "no node it may be scheduled on (AMX-labelled when any node is, without a NoSchedule taint)".into(),
        );
    };
    let s = size(arch, b.budget_bytes, t);
    let env =
        if s.fits { StringMap::from([(KV_CACHE_ENV.to_string(), s.cache_gib.to_string())]) } else { StringMap::new() };
    let args = s.max_model_len.map(|l| vec![MAX_MODEL_LEN.to_string(), l.to_string()]).unwrap_or_default();
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
