//! A model's architecture and the figures fit sizes with: a leaf, read by the data file's
//! reader (`config::data`), the Hugging Face reader (`config::hf`) and fit itself.

use serde::Deserialize;

use crate::facts;

/// A model's architecture, as `data/models.json` records it (each figure cited there) or as
/// read from the model's own files on Hugging Face (`config::hf`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Architecture {
    pub parameters: u64,
    pub dtype_bytes: u64,
    pub num_hidden_layers: u64,
    pub num_key_value_heads: u64,
    pub head_dim: u64,
    pub max_position_embeddings: u64,
    /// The weights' size as stored (the safetensors index's `total_size`), which wins over
    /// parameters × dtype bytes: quantized weights are smaller than their dtype says.
    #[serde(default)]
    pub weights_total_bytes: Option<u64>,
    /// The weights' quantization method (`awq`), from `quantization_config.quant_method`: it
    /// decides which dtypes vLLM's CPU backend can run the model in (`config::cpu_dtype`).
    #[serde(default)]
    pub quantization: Option<String>,
}

impl Architecture {
    /// Saturating: a figure past [`facts::MAX_BYTES`] is refused by [`Architecture::check`]
    /// where it is read, and never wraps here.
    pub fn weights_bytes(&self) -> u64 {
        self.weights_total_bytes.unwrap_or(self.parameters.saturating_mul(self.dtype_bytes))
    }

    /// The same model run in a dtype of `bytes` per element: the KV cache follows it (the CPU
    /// backend keeps the cache in the model's dtype), and so do unquantized weights; quantized
    /// weights keep their stored size.
    pub fn in_dtype(&self, bytes: u64) -> Architecture {
        let weights = match (&self.quantization, self.weights_total_bytes) {
            (Some(_), _) => Some(self.weights_bytes()),
            (None, Some(w)) => Some((w / self.dtype_bytes.max(1)).saturating_mul(bytes)),
            (None, None) => None,
        };
        Architecture { dtype_bytes: bytes, weights_total_bytes: weights, ..self.clone() }
    }

    /// K and V, for every layer and KV head: 2 × layers × KV heads × head dim × dtype bytes.
    pub fn kv_bytes_per_token(&self) -> u64 {
        self.kv_checked().unwrap_or(u64::MAX)
    }

    fn kv_checked(&self) -> Option<u64> {
        [self.num_hidden_layers, self.num_key_value_heads, self.head_dim, self.dtype_bytes]
            .into_iter()
            .try_fold(2u64, u64::checked_mul)
    }

    /// The figures fit may size with, checked: the weights (the index's `metadata.total_size`,
    /// else parameters × dtype bytes) and the KV bytes per token, each computed with checked
    /// arithmetic and below [`facts::MAX_BYTES`]. `Err` names the field.
    pub fn check(&self) -> Result<(), String> {
        let past = |v: Option<u64>| v.is_none_or(|v| v >= facts::MAX_BYTES);
        let (weights, field) = match self.weights_total_bytes {
            Some(t) => (Some(t), "metadata.total_size"),
            None => (self.parameters.checked_mul(self.dtype_bytes), "parameters × dtype bytes"),
        };
        if past(weights) {
            let shown = weights.map_or("more than 2^64".to_string(), |w| w.to_string());
            return Err(format!("{field} {shown} is past 4 EiB (2^62 bytes), the most eas sizes with"));
        }
        if past(self.kv_checked()) {
            return Err(format!(
                "num_hidden_layers {} × num_key_value_heads {} × head_dim {} gives a KV cache per token past 4 EiB \
                 (2^62 bytes), the most eas sizes with",
                self.num_hidden_layers, self.num_key_value_heads, self.head_dim
            ));
        }
        Ok(())
    }
}
