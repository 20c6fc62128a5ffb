//! A model's own files on Hugging Face, as fit needs them (issue 20 item 2), and what an answer
//! says about downloading the weights. Pure: the text and the answer come in, figures and
//! verdicts come out; the reads are `up::hf`'s.
//!
//! - `config.json`: layers, KV heads (else the attention heads), head dim (else hidden size over
//!   heads), `max_position_embeddings`, the dtype (`torch_dtype`, or `dtype` in newer
//!   transformers); a multimodal model keeps these under `text_config`.
//! - `model.safetensors.index.json`: `metadata.total_size`, the weights' bytes as stored.
//! - The cache: `<base>/<model_id>@<revision>/` holding the two files as read, where `<base>` is
//!   `$XDG_CACHE_HOME/eas/hf` (else `~/.cache/eas/hf`), beside the trees and artifact caches.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fit::architecture::Architecture;

pub const CONFIG: &str = "config.json";
pub const INDEX: &str = "model.safetensors.index.json";

/// The figures of `config.json` (and the index's size) as an architecture fit can size.
pub fn architecture(config: &str, index: Option<&str>) -> Result<Architecture, String> {
    let v: Value = serde_json::from_str(config).map_err(|e| format!("{CONFIG} is not JSON: {e}"))?;
    // A multimodal model's language model is described under text_config.
    let c = v.get("text_config").filter(|t| t.get("num_hidden_layers").is_some()).unwrap_or(&v);
    let num = |k: &str| c.get(k).and_then(Value::as_u64);
    let need = |k: &str| num(k).ok_or_else(|| format!("{CONFIG} has no {k}"));
    let layers = need("num_hidden_layers")?;
    let heads = need("num_attention_heads")?;
    let kv_heads = num("num_key_value_heads").unwrap_or(heads);
    let head_dim = match num("head_dim") {
        Some(d) => d,
        None => need("hidden_size")? / heads.max(1),
    };
    let context = need("max_position_embeddings")?;
    let dtype =
        c.get("torch_dtype").or_else(|| c.get("dtype")).or_else(|| v.get("torch_dtype")).and_then(Value::as_str);
    let dtype_bytes = match dtype {
        Some("bfloat16" | "float16") => 2,
        Some("float32") => 4,
        Some(other) => return Err(format!("{CONFIG}: dtype {other:?} is not one fit knows")),
        None => return Err(format!("{CONFIG} has no torch_dtype")),
    };
    let qc = v.get("quantization_config").or_else(|| c.get("quantization_config"));
    let quantized = qc.is_some();
    let quantization =
        qc.map(|q| q.get("quant_method").and_then(Value::as_str).unwrap_or("unknown").to_ascii_lowercase());
    let total = index.map(total_size).transpose()?;
    if quantized && total.is_none() {
        return Err(format!("{CONFIG} is quantized and no {INDEX} gives the weights' size"));
    }
    let Some(total) = total else {
        return Err(format!("no {INDEX}: the weights' size is unknown"));
    };
    let a = Architecture {
        parameters: 0,
        dtype_bytes,
        num_hidden_layers: layers,
        num_key_value_heads: kv_heads,
        head_dim,
        max_position_embeddings: context,
        weights_total_bytes: Some(total),
        quantization,
    };
    // The answer is unusable when its figures cannot be sized with (checked arithmetic).
    a.check().map_err(|e| format!("{INDEX} or {CONFIG}: {e}"))?;
    Ok(a)
}

/// `metadata.total_size` of a safetensors index.
pub fn total_size(index: &str) -> Result<u64, String> {
    let v: Value = serde_json::from_str(index).map_err(|e| format!("{INDEX} is not JSON: {e}"))?;
    v.pointer("/metadata/total_size")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("{INDEX} has no metadata.total_size"))
}

/// What an answer from Hugging Face says about the install downloading this model.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// The files were read: the weights can be downloaded with this token.
    Readable,
    /// Hugging Face itself refused (its `X-Error-Code` says so): the install would fail there.
    /// A blocker of the plan (exit 3): the cause and the fix.
    Refused { cause: String, fix: String },
    /// Not known: no answer, or one that did not come from Hugging Face (a proxy's). A warning.
    Unknown(String),
}

/// The answer's status and `X-Error-Code` (only Hugging Face sends that header; a proxy that
/// refuses the tunnel or answers in its place does not), for `model_id`, with or without a token.
pub fn access(model_id: &str, status: u16, error_code: Option<&str>, with_token: bool) -> Access {
    let hf = |code: &str| format!("Hugging Face answered {status} ({code}) for {model_id}");
    match (status, error_code) {
        (200..=299, _) => Access::Readable,
        (401, Some(code)) => Access::Refused {
            cause: hf(code),
            fix: if with_token {
                "HF_TOKEN was rejected: set a valid token (huggingface.co/settings/tokens)".into()
            } else {
                format!("set HF_TOKEN to a token that can read {model_id}")
            },
        },
        (403, Some(code)) => Access::Refused {
            cause: hf(code),
            fix: format!("accept the model's license at https://huggingface.co/{model_id} with the token's account"),
        },
        (404, Some(code)) => Access::Refused {
            cause: hf(code),
            fix: format!("check the catalog's model_id {model_id:?} (and its revision)"),
        },
        (s, None) => Access::Unknown(format!(
            "an answer {s} without Hugging Face's X-Error-Code for {model_id} (a proxy's?): the download was not checked"
        )),
        (s, Some(code)) => Access::Unknown(format!("Hugging Face answered {s} ({code}) for {model_id}")),
    }
}

/// `$XDG_CACHE_HOME/eas/hf`, else `~/.cache/eas/hf`.
pub fn cache_base(xdg_cache_home: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    xdg_cache_home
        .filter(|p| p.is_absolute())
        .map(Path::to_path_buf)
        .or_else(|| home.map(|h| h.join(".cache")))
        .map(|b| b.join("eas").join("hf"))
}

/// `<base>/<model_id>@<revision>`; the id's `/` stays a directory level, as the repository name
/// has one. An id or revision that could climb out of the cache is refused.
pub fn cache_dir(base: &Path, model_id: &str, revision: &str) -> Option<PathBuf> {
    let ok = |s: &str| !s.is_empty() && s.split('/').all(|p| !p.is_empty() && p != "." && p != "..");
    (ok(model_id) && ok(revision) && !revision.contains('/')).then(|| base.join(format!("{model_id}@{revision}")))
}

/// The architecture from a cache directory (read-only: `eas config`): `config.json` and the
/// index, else the single weights file's size (`model.safetensors.size`, as `up::hf` keeps it).
pub fn from_cache(dir: &Path) -> Option<Result<Architecture, String>> {
    let config = std::fs::read_to_string(dir.join(CONFIG)).ok()?;
    let index = std::fs::read_to_string(dir.join(INDEX)).ok().or_else(|| {
        let n: u64 = std::fs::read_to_string(dir.join("model.safetensors.size")).ok()?.trim().parse().ok()?;
        Some(format!("{{\"metadata\": {{\"total_size\": {n}}}}}"))
    });
    Some(architecture(&config, index.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures of Llama-3.1-8B's config.json as data/models.json cites them (the base model's
    /// copy in citsjtu2020/LLM-Prof@8434c8d1), written here as a config in its shape.
    const LLAMA: &str = r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16", "vocab_size": 128256}"#;

    #[test]
    fn a_config_and_its_index_give_the_figures_fit_sizes_with() {
        let a = architecture(LLAMA, Some(r#"{"metadata": {"total_size": 16060522496}, "weight_map": {}}"#)).unwrap();
        let m = crate::config::data::models();
        let cited = m.architecture("meta-llama/Llama-3.1-8B-Instruct").unwrap();
        assert_eq!(a.weights_bytes(), cited.weights_bytes(), "the index's size is the parameters × 2 cited");
        assert_eq!(a.kv_bytes_per_token(), cited.kv_bytes_per_token());
        assert_eq!((a.head_dim, a.max_position_embeddings), (128, 131072));
        // head_dim given, KV heads defaulting to the attention heads, dtype under its new name.
        let c = r#"{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 8,
            "dtype": "float32"}"#;
        let a = architecture(c, Some(r#"{"metadata": {"total_size": 10}}"#)).unwrap();
        assert_eq!((a.num_key_value_heads, a.head_dim, a.dtype_bytes, a.weights_bytes()), (4, 64, 4, 10));
        // A multimodal config keeps the language model under text_config.
        let mm = r#"{"text_config": {"num_hidden_layers": 3, "num_attention_heads": 2, "hidden_size": 256,
            "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}}"#;
        assert_eq!(architecture(mm, Some(r#"{"metadata": {"total_size": 1}}"#)).unwrap().head_dim, 128);
    }

    #[test]
    fn what_is_missing_is_named() {
        assert!(architecture(LLAMA, None).unwrap_err().contains("weights' size is unknown"));
        let q = LLAMA.replace("\"vocab_size\"", "\"quantization_config\": {\"quant_method\": \"awq\"}, \"vocab_size\"");
        assert!(architecture(&q, None).unwrap_err().contains("quantized"));
        assert!(architecture("{}", None).unwrap_err().contains("num_hidden_layers"));
        assert!(architecture(&LLAMA.replace("bfloat16", "int3"), None).unwrap_err().contains("int3"));
        assert!(total_size("{}").is_err());
        // Issue 30 item 4: 2^64-1 bytes of weights is an unusable answer, naming the field.
        let e = architecture(LLAMA, Some(r#"{"metadata": {"total_size": 18446744073709551615}}"#)).unwrap_err();
        assert!(e.contains("metadata.total_size 18446744073709551615 is past 4 EiB"), "{e}");
    }

    #[test]
    fn only_hugging_faces_own_refusal_is_a_blocker() {
        let id = "meta-llama/Llama-3.1-8B-Instruct";
        assert_eq!(access(id, 200, None, true), Access::Readable);
        match access(id, 403, Some("GatedRepo"), true) {
            Access::Refused { cause, fix } => {
                assert!(cause.contains("403 (GatedRepo)"), "{cause}");
                assert!(fix.contains("https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct"), "{fix}");
            }
            other => panic!("{other:?}"),
        }
        match access(id, 401, Some("RepoNotFound"), false) {
            Access::Refused { fix, .. } => assert!(fix.contains("set HF_TOKEN"), "{fix}"),
            other => panic!("{other:?}"),
        }
        match access(id, 401, Some("RepoNotFound"), true) {
            Access::Refused { fix, .. } => assert!(fix.contains("rejected"), "{fix}"),
            other => panic!("{other:?}"),
        }
        // A proxy's 403 carries no X-Error-Code: unknown, a warning.
        assert!(matches!(access(id, 403, None, true), Access::Unknown(w) if w.contains("a proxy's")));
        assert!(matches!(access(id, 500, Some("Internal"), true), Access::Unknown(_)));
    }

    #[test]
    fn the_cache_lives_beside_eas_other_caches_and_stays_inside() {
        let home = Path::new("/home/u");
        assert_eq!(cache_base(None, Some(home)).unwrap(), Path::new("/home/u/.cache/eas/hf"));
        assert_eq!(cache_base(Some(Path::new("/x")), Some(home)).unwrap(), Path::new("/x/eas/hf"));
        assert_eq!(cache_base(Some(Path::new("rel")), Some(home)).unwrap(), Path::new("/home/u/.cache/eas/hf"));
        let base = Path::new("/c");
        assert_eq!(cache_dir(base, "Qwen/Qwen3-0.6B", "main").unwrap(), Path::new("/c/Qwen/Qwen3-0.6B@main"));
        for (id, rev) in [("../x", "main"), ("a/..", "main"), ("a/b", "../m"), ("a/b", "x/y"), ("", "main")] {
            assert!(cache_dir(base, id, rev).is_none(), "{id}@{rev}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(from_cache(dir.path()).is_none(), "an empty cache has nothing");
        std::fs::write(dir.path().join(CONFIG), LLAMA).unwrap();
        std::fs::write(dir.path().join(INDEX), r#"{"metadata": {"total_size": 16060522496}}"#).unwrap();
        assert_eq!(from_cache(dir.path()).unwrap().unwrap().weights_bytes(), 16_060_522_496);
    }
}
