//! EI's model catalog (`model_manager/models.yaml`) as data, and the KV-cache rules that
//! depend on it. Pure: the text comes in, decisions come out; reading the tree is the caller's.
//!
//! The shape follows the catalog read at Mushtaq-BGA/enterprise-inference@1e10d1ac
//! (`model_manager/models.yaml`, `model_manager/lib/config.sh`): `models[]` entries with `name`,
//! `model_id`, optional `category` (`llm`, `embed`, `rerank`, `vlm`), `runtime` (or
//! `default_server`), `namespace`, `cpu`, `memory`, `autodeploy`, `args` and an `env` map; the
//! category's `defaults` (`cpu`, `memory`, which EI renders as the pod's request and limit);
//! `runtimes.<rt>.categories.<cat>.defaults.kv_cache_gib`-style defaults under the key
//! `kv_cache_gb`, substituted for `${KV_CACHE_GB}` in the category's
//! `env.VLLM_CPU_KVCACHE_SPACE`, with 8 when the category sets none (`// 8` in
//! model-manager's `build_env_block`). A model's own `env.VLLM_CPU_KVCACHE_SPACE` wins.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::facts::KV_CACHE_ENV;

/// model-manager's fallback when a category sets no `kv_cache_gb` (`// 8`).
pub const DEFAULT_KV_CACHE_GB: f64 = 8.0;

/// The KV cache as vLLM can read it: whole GiB, rounded down, never up. vLLM parses
/// `VLLM_CPU_KVCACHE_SPACE` with `int(...)` (vllm/envs.py), so `"39.5"` stops the model pod
/// at start-up with a ValueError, and rounding up could raise the cache past what fit sized.
pub fn whole_gib(gib: f64) -> u64 {
    if gib.is_finite() && gib > 0.0 { gib.floor() as u64 } else { 0 }
}

/// EI's default namespace when the catalog's `defaults` names none (model-manager's loader).
pub const DEFAULT_NAMESPACE: &str = "llm-inference";

/// One catalog entry, as far as eas decides on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    /// The Hugging Face repository the weights come from.
    pub model_id: String,
    pub category: String,
    /// The model server: `vllm` or `openvino` (the entry's, its `default_server`, the catalog's).
    pub runtime: String,
    pub autodeploy: bool,
    /// Where the server runs: the entry's `namespace`, else the catalog's default.
    pub namespace: String,
    /// The pod's memory request and limit in bytes: the entry's `memory`, else the category's.
    pub memory_bytes: Option<u64>,
    pub memory_from_entry: bool,
    /// The pod's CPU request and limit: the entry's `cpu`, else the category's.
    pub cpu: Option<f64>,
    /// The `--max-model-len` the rendered args carry (category, version, entry; the last wins).
    pub max_model_len: Option<u64>,
    /// The `--dtype` the rendered args carry (the llm category's `bfloat16` in the real catalog).
    pub dtype: Option<String>,
    /// The KV cache vLLM gets for this entry in GiB (category default or the entry's override),
    /// `None` for categories without a KV cache (embed, rerank).
    pub kv_cache_gib: Option<f64>,
    /// Whether the entry itself sets `env.VLLM_CPU_KVCACHE_SPACE`.
    pub kv_from_entry: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub entries: Vec<Entry>,
}

/// A catalog and where it was read: `path` inside the EI tree and `at` (`repo@sha7`), or a
/// file given with `--catalog`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pinned {
    pub catalog: Catalog,
    pub path: String,
    pub at: String,
}

impl Pinned {
    /// `model_manager/models.yaml at intel/enterprise-inference@abc1234`.
    pub fn describe(&self) -> String {
        if self.at.is_empty() { self.path.clone() } else { format!("{} at {}", self.path, self.at) }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CatalogError {
    #[error("not a model catalog: {0}")]
    Yaml(String),
    #[error("models[{index}]: {msg}")]
    Entry { index: usize, msg: String },
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    defaults: Value,
    #[serde(default)]
    runtimes: BTreeMap<String, Value>,
    #[serde(default)]
    models: Vec<Value>,
}

impl Catalog {
    pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
        // The parser's message continues with a rendered snippet of the input on more lines;
        // bad input is a one-line cause, so only its first line is kept.
        let raw: Raw = serde_saphyr::from_str(text)
            .map_err(|e| CatalogError::Yaml(e.to_string().lines().next().unwrap_or_default().to_string()))?;
        let default_rt = raw.defaults.get("runtime").and_then(Value::as_str).unwrap_or("vllm").to_string();
        let mut entries = Vec::new();
        for (index, m) in raw.models.iter().enumerate() {
            let err = |msg: &str| CatalogError::Entry { index, msg: msg.to_string() };
            let name = m.get("name").and_then(Value::as_str).ok_or_else(|| err("no name"))?.to_string();
            let model_id = m.get("model_id").and_then(Value::as_str).unwrap_or_default().to_string();
            let category = m.get("category").and_then(Value::as_str).unwrap_or("llm").to_string();
            let autodeploy = m.get("autodeploy").and_then(Value::as_bool).unwrap_or(false);
            let runtime = m
                .get("runtime")
                .and_then(Value::as_str)
                .or_else(|| m.get("default_server").and_then(Value::as_str))
                .unwrap_or(&default_rt)
                .to_string();
            let own = match m.get("env").and_then(|e| e.get(KV_CACHE_ENV)) {
                None => None,
                Some(v) => Some(gib_value(v).ok_or_else(|| {
                    err(&format!("env {KV_CACHE_ENV}: not a number of GiB below 4 EiB (2^62 bytes): {v}"))
                })?),
            };
            let rt = raw.runtimes.get(&runtime);
            let cat = rt.and_then(|r| r.get("categories")).and_then(|c| c.get(&category));
            // The selected server version: the entry's, its servers' default, the runtime's.
            let version = m
                .get("server_version")
                .and_then(Value::as_str)
                .or_else(|| {
                    m.get("servers")
                        .and_then(|s| s.get(&runtime))
                        .and_then(|s| s.get("default"))
                        .and_then(Value::as_str)
                })
                .or_else(|| rt.and_then(|r| r.get("default_version")).and_then(Value::as_str));
            let version_kv = version
                .and_then(|v| rt.and_then(|r| r.get("versions")).and_then(|vs| vs.get(v)))
                .and_then(|v| v.get("env"))
                .and_then(|e| e.get(KV_CACHE_ENV))
                .and_then(gib_value);
            let cat_kv = cat.and_then(|c| c.get("env")).and_then(|e| e.get(KV_CACHE_ENV)).and_then(|v| match v {
                Value::String(s) if s.contains("${KV_CACHE_GB}") => Some(
                    cat.and_then(|c| c.get("defaults"))
                        .and_then(|d| d.get("kv_cache_gb"))
                        .and_then(gib_value)
                        .unwrap_or(DEFAULT_KV_CACHE_GB),
                ),
                other => gib_value(other),
            });
            let kv_cache_gib = own.or(version_kv).or(cat_kv);
            let cat_default = |k: &str| cat.and_then(|c| c.get("defaults")).and_then(|d| d.get(k));
            let own_memory = match m.get("memory") {
                None => None,
                Some(v) => Some(quantity(v).ok_or_else(|| {
                    err(&format!("memory: not a quantity below 4 EiB (2^62 bytes), the most eas sizes with: {v}"))
                })?),
            };
            let memory_bytes = own_memory.or_else(|| cat_default("memory").and_then(quantity));
            let cpu = m.get("cpu").and_then(gib_value).or_else(|| cat_default("cpu").and_then(gib_value));
            let namespace = m
                .get("namespace")
                .or_else(|| raw.defaults.get("namespace"))
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_NAMESPACE)
                .to_string();
            let version_args = version
                .and_then(|v| rt.and_then(|r| r.get("versions")).and_then(|vs| vs.get(v)))
                .and_then(|v| v.get("args"));
            let max_model_len = [cat.and_then(|c| c.get("args")), version_args, m.get("args")]
                .into_iter()
                .flatten()
                .filter_map(max_model_len_arg)
                .next_back();
            let dtype = [cat.and_then(|c| c.get("args")), version_args, m.get("args")]
                .into_iter()
                .flatten()
                .filter_map(|a| last_arg(a, "--dtype"))
                .next_back();
            entries.push(Entry {
                name,
                model_id,
                category,
                runtime,
                autodeploy,
                namespace,
                memory_bytes,
                memory_from_entry: own_memory.is_some(),
                cpu,
                max_model_len,
                dtype,
                kv_from_entry: own.is_some(),
                kv_cache_gib,
            });
        }
        Ok(Catalog { entries })
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The LLM entries (category `llm`), in catalog order.
    pub fn llms(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.category == "llm")
    }

    /// The entries an LLM server can be deployed from (category `llm`).
    pub fn llm_names(&self) -> Vec<&str> {
        self.entries.iter().filter(|e| e.category == "llm").map(|e| e.name.as_str()).collect()
    }
}

/// A Kubernetes quantity (`16Gi`, or a plain number of bytes) in bytes.
fn quantity(v: &Value) -> Option<u64> {
    let b = match v {
        Value::String(s) => crate::facts::parse_quantity(s)?,
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    (b.is_finite() && b > 0.0 && crate::facts::past_max(b).is_none()).then_some(b as u64)
}

/// The last `--max-model-len` in an args list (`--flag v` or `--flag=v`), as model-manager keeps
/// the last occurrence of a flag.
fn max_model_len_arg(args: &Value) -> Option<u64> {
    let items: Vec<String> = args
        .as_array()?
        .iter()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    let mut found = None;
    for (i, a) in items.iter().enumerate() {
        if a == crate::facts::MAX_MODEL_LEN {
            found = items.get(i + 1).and_then(|v| v.parse().ok()).or(found);
        } else if let Some(v) = a.strip_prefix("--max-model-len=") {
            found = v.parse().ok().or(found);
        }
    }
    found
}

/// The last value of `flag` in an args list (`--flag v` or `--flag=v`).
fn last_arg(args: &Value, flag: &str) -> Option<String> {
    let items: Vec<String> =
        args.as_array()?.iter().map(|a| a.as_str().map(str::to_string).unwrap_or(a.to_string())).collect();
    let eq = format!("{flag}=");
    let mut found = None;
    for (i, a) in items.iter().enumerate() {
        if a == flag {
            found = items.get(i + 1).cloned().or(found);
        } else if let Some(v) = a.strip_prefix(&eq) {
            found = Some(v.to_string());
        }
    }
    found
}

fn gib_value(v: &Value) -> Option<f64> {
    let f = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (f.is_finite() && f >= 0.0 && crate::facts::past_max(f.floor() * crate::facts::GIB).is_none()).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_gib_rounds_down_never_up() {
        assert_eq!(whole_gib(39.5), 39);
        assert_eq!(whole_gib(39.999), 39);
        assert_eq!(whole_gib(40.0), 40);
        assert_eq!(whole_gib(0.9), 0);
        assert_eq!(whole_gib(f64::NAN), 0);
        assert_eq!(whole_gib(-1.0), 0);
    }

    const SHAPE: &str = r#"
defaults:
  runtime: vllm
runtimes:
  vllm:
    default_version: "0.24.0"
    versions:
      "0.24.0":
        image: x
      "0.19.1":
        env: { VLLM_CPU_KVCACHE_SPACE: "12" }
    categories:
      llm:
        env:
          VLLM_CPU_KVCACHE_SPACE: "${KV_CACHE_GB}"
        defaults: {cpu: 8, memory: "16Gi", kv_cache_gb: 8}
      vlm:
        env:
          VLLM_CPU_KVCACHE_SPACE: "${KV_CACHE_GB}"
        defaults: {cpu: 16, memory: "48Gi"}
      embed:
        defaults: {cpu: 6, memory: "12Gi"}
  openvino:
    env: {}
    categories:
      llm:
        defaults: {cpu: 8, memory: "16Gi"}
models:
  - name: small
    model_id: org/small
    category: llm
  - name: big
    model_id: org/big
    category: llm
    autodeploy: true
    env:
      VLLM_CPU_KVCACHE_SPACE: "12.5"
  - name: vis
    model_id: org/vis
    category: vlm
  - name: emb
    model_id: org/emb
    category: embed
  - name: old
    model_id: org/old
    category: llm
    server_version: "0.19.1"
  - name: ov
    model_id: org/ov
    runtime: openvino
    category: llm
"#;

    #[test]
    fn category_kv_with_entry_override_and_fallback() {
        let c = Catalog::parse(SHAPE).unwrap();
        assert_eq!(c.entry("small").unwrap().kv_cache_gib, Some(8.0));
        assert!(!c.entry("small").unwrap().kv_from_entry);
        assert_eq!(c.entry("big").unwrap().kv_cache_gib, Some(12.5));
        assert!(c.entry("big").unwrap().autodeploy);
        assert_eq!(c.entry("vis").unwrap().kv_cache_gib, Some(DEFAULT_KV_CACHE_GB));
        assert_eq!(c.entry("emb").unwrap().kv_cache_gib, None);
        assert_eq!(c.entry("old").unwrap().kv_cache_gib, Some(12.0), "the version delta wins over the category");
        assert_eq!(c.entry("ov").unwrap().kv_cache_gib, None, "the flat openvino runtime sets no KV cache");
        assert_eq!(c.llm_names(), vec!["small", "big", "old", "ov"]);
    }

    #[test]
    fn pod_resources_namespace_runtime_and_context_per_entry() {
        let text = format!(
            "{SHAPE}  - name: own\n    model_id: org/own\n    category: llm\n    namespace: elsewhere\n    memory: 20Gi\n    cpu: 12\n    args: [--max-model-len, \"4096\", --max-model-len=8192]\n"
        );
        let c = Catalog::parse(&text).unwrap();
        let small = c.entry("small").unwrap();
        assert_eq!(small.model_id, "org/small");
        assert_eq!(small.memory_bytes, Some(16 << 30), "the category's memory when the entry sets none");
        assert!(!small.memory_from_entry);
        assert_eq!(small.cpu, Some(8.0));
        assert_eq!(small.namespace, DEFAULT_NAMESPACE);
        assert_eq!(small.runtime, "vllm");
        assert_eq!(small.max_model_len, None);
        let own = c.entry("own").unwrap();
        assert_eq!((own.memory_bytes, own.memory_from_entry, own.cpu), (Some(20 << 30), true, Some(12.0)));
        assert_eq!(own.namespace, "elsewhere");
        assert_eq!(own.max_model_len, Some(8192), "the last occurrence wins, in either form");
        assert_eq!(own.dtype, None);
        assert_eq!(c.entry("ov").unwrap().runtime, "openvino");
        assert_eq!(c.entry("emb").unwrap().memory_bytes, Some(12 << 30));
        assert_eq!(c.llms().count(), 5);
    }

    #[test]
    fn malformed_entries_are_named() {
        let e = Catalog::parse("models:\n  - model_id: x\n").unwrap_err();
        assert_eq!(e, CatalogError::Entry { index: 0, msg: "no name".into() });
        let e = Catalog::parse("models:\n  - name: a\n    env: {VLLM_CPU_KVCACHE_SPACE: lots}\n").unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        let e = Catalog::parse("---\n# x\nmodels: 3\n").unwrap_err();
        assert!(matches!(e, CatalogError::Yaml(_)), "{e:?}");
        assert!(!e.to_string().contains('\n') && e.to_string().contains("line 3"), "one line naming where: {e}");
    }
}
