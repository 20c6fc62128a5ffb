//! The dtype vLLM's CPU backend can run a model in on the landing node (issue 28 item 7). Pure:
//! the node's labels, the dtype the catalog asks for (`--dtype` in its args) and the weights'
//! quantization come in; a verdict comes out, which the model pick writes and sizes with.
//!
//! The rules and what they rest on are `data/vllm-cpu.json` (vLLM's CPU backend read in its
//! stored copies): AVX2 is the floor; bf16 is native with AVX512-BF16 or AMX-BF16 and otherwise
//! only a storage type the kernels convert to fp32, so an unquantized model is written as
//! float32 there; an AWQ model runs only with 16-bit activations, so it is written as float16
//! there. The CPU flags are the node's NFD labels; a node without them is planned with a
//! warning, its dtype kept as the catalog writes it (never a silent rewrite).

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Rules {
    pub nfd_prefix: String,
    pub floor_flag: String,
    pub native_bf16_flags: Vec<String>,
    pub avx512_flag: String,
    pub without_native_bf16: String,
    pub quantized_act_dtypes: BTreeMap<String, Vec<String>>,
    pub quantized_without_native_bf16: String,
    pub source: String,
}

pub fn rules() -> &'static Rules {
    data_table!(Rules, "vllm-cpu.json")
}

/// What the node's CPU lets vLLM run the entry in.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The catalog's dtype runs (or the catalog sets none: vLLM's own choice stands).
    Keep { dtype: Option<String>, why: String },
    /// eas writes `--dtype to`, and sizes the pod with it.
    Write { from: String, to: String, why: String },
    /// The entry cannot run on this node's CPU: not a candidate.
    Cannot(String),
    /// No NFD CPU labels: the dtype is kept and the plan warns.
    Unknown(String),
}

/// The bytes a weight or KV element takes in `dtype` (`None`: not one eas sizes).
pub fn bytes(dtype: &str) -> Option<u64> {
    match dtype {
        "bfloat16" | "float16" | "half" => Some(2),
        "float32" | "float" => Some(4),
        _ => None,
    }
}

/// The node's CPU flags from its NFD labels (`cpu-cpuid.<FLAG>=true`); `None`: no such label.
pub fn flags(labels: &BTreeMap<String, String>) -> Option<Vec<String>> {
    let prefix = &rules().nfd_prefix;
    let found: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix.as_str()).filter(|_| v == "true").map(str::to_string))
        .collect();
    (!found.is_empty()).then_some(found)
}

/// The verdict for an entry asking `requested` (`--dtype`, `None` when its args carry none) with
/// weights quantized by `quant` (`awq`, …), on node `node` whose labels are `labels`.
pub fn decide(node: &str, labels: &BTreeMap<String, String>, requested: Option<&str>, quant: Option<&str>) -> Verdict {
    let r = rules();
    let asked = requested.map(str::to_string);
    let Some(flags) = flags(labels) else {
        return Verdict::Unknown(format!(
            "node {node} has no NFD {}* labels: its CPU flags are unknown, so whether vLLM's CPU backend runs \
             --dtype {} there was not checked",
            r.nfd_prefix,
            requested.unwrap_or("(the model's own)")
        ));
    };
    let has = |f: &str| flags.iter().any(|x| x == f);
    if !has(&r.floor_flag) {
        return Verdict::Cannot(format!(
            "node {node}'s CPU has no {} (NFD labels): vLLM's x86 CPU backend needs it",
            r.floor_flag
        ));
    }
    let native: Vec<&String> = r.native_bf16_flags.iter().filter(|f| has(f)).collect();
    let quant_dtypes = quant.and_then(|q| r.quantized_act_dtypes.get(q).map(|d| (q, d)));
    let isa = if has(&r.avx512_flag) { r.avx512_flag.as_str() } else { r.floor_flag.as_str() };
    match (requested, quant_dtypes) {
        (Some(d), Some((q, allowed))) if !allowed.iter().any(|a| a == d) && d != "bfloat16" => {
            Verdict::Cannot(format!(
                "--dtype {d} with {q} weights: vLLM's CPU backend runs {q} only with {} activations",
                allowed.join(" or ")
            ))
        }
        (Some("bfloat16"), _) if !native.is_empty() => Verdict::Keep {
            dtype: asked,
            why: format!("node {node} has {} (NFD labels): bfloat16 runs natively", flag_list(&native)),
        },
        (Some("bfloat16"), Some((q, _))) => Verdict::Write {
            from: "bfloat16".into(),
            to: r.quantized_without_native_bf16.clone(),
            why: format!(
                "node {node}'s CPU has {isa} and neither {} (NFD labels): bfloat16 is not native there, and {q} \
                 weights run only with 16-bit activations",
                r.native_bf16_flags.join(" nor ")
            ),
        },
        (Some("bfloat16"), None) => Verdict::Write {
            from: "bfloat16".into(),
            to: r.without_native_bf16.clone(),
            why: format!(
                "node {node}'s CPU has {isa} and neither {} (NFD labels): bfloat16 is not native there (vLLM's \
                 kernels convert it to float32 for every operation)",
                r.native_bf16_flags.join(" nor ")
            ),
        },
        _ => Verdict::Keep {
            dtype: asked,
            why: format!("node {node}'s CPU has {isa} (NFD labels): vLLM's CPU backend runs this dtype"),
        },
    }
}

/// On a node with AVX2 and no AVX-512F: whether the published vLLM CPU image runs there was not
/// read (its build makes AVX-512 kernels unless told otherwise), so the plan says so.
pub fn image_isa_warning(node: &str, labels: &BTreeMap<String, String>) -> Option<String> {
    let r = rules();
    let f = flags(labels)?;
    (f.contains(&r.floor_flag) && !f.contains(&r.avx512_flag)).then(|| {
        format!(
            "node {node}'s CPU has {} and no {}: whether the catalog's vLLM CPU image carries kernels for it was not \
             read (vLLM's CPU Dockerfile builds AVX-512 unless VLLM_CPU_DISABLE_AVX512 is set); if the model pod \
             stops with an illegal instruction, use an image built for AVX2",
            r.floor_flag, r.avx512_flag
        )
    })
}

fn flag_list(f: &[&String]) -> String {
    f.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(flags: &[&str]) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> =
            flags.iter().map(|f| (format!("feature.node.kubernetes.io/cpu-cpuid.{f}"), "true".to_string())).collect();
        l.insert("kubernetes.io/hostname".into(), "n".into());
        l
    }

    #[test]
    fn the_dtype_follows_the_cpu_flags() {
        // The desktop fixture's CPU: AVX2, no AVX-512.
        let desktop = node(&["AVX", "AVX2", "AVXVNNI", "FMA3"]);
        match decide("d", &desktop, Some("bfloat16"), None) {
            Verdict::Write { to, why, .. } => {
                assert_eq!(to, "float32");
                assert!(why.contains("has AVX2 and neither AVX512BF16 nor AMXBF16"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // AWQ there: float32 cannot run it, float16 can.
        assert!(
            matches!(decide("d", &desktop, Some("bfloat16"), Some("awq")), Verdict::Write { to, .. } if to == "float16")
        );
        assert!(
            matches!(decide("d", &desktop, Some("float32"), Some("awq")), Verdict::Cannot(w) if w.contains("float16 or bfloat16"))
        );
        // AVX-512 with BF16, or AMX: bfloat16 kept.
        let xeon = node(&["AVX2", "AVX512F", "AVX512BF16"]);
        assert!(
            matches!(decide("x", &xeon, Some("bfloat16"), Some("awq")), Verdict::Keep { why, .. } if why.contains("AVX512BF16"))
        );
        let amx = node(&["AVX2", "AVX512F", "AVX512BF16", "AMXBF16"]);
        assert!(
            matches!(decide("x", &amx, Some("bfloat16"), None), Verdict::Keep { why, .. } if why.contains("AVX512BF16 and AMXBF16"))
        );
        // AVX-512F without BF16: float32, naming AVX512F.
        let skx = node(&["AVX2", "AVX512F"]);
        assert!(
            matches!(decide("s", &skx, Some("bfloat16"), None), Verdict::Write { why, .. } if why.contains("has AVX512F"))
        );
        // No AVX2: nothing runs; float32 asked on AVX2: kept.
        assert!(
            matches!(decide("o", &node(&["AVX", "SSE4"]), Some("bfloat16"), None), Verdict::Cannot(w) if w.contains("no AVX2"))
        );
        assert!(matches!(decide("d", &desktop, Some("float32"), None), Verdict::Keep { .. }));
        // No NFD labels at all: unknown, the catalog's dtype stands.
        let bare: BTreeMap<String, String> = [("kubernetes.io/hostname".to_string(), "n".to_string())].into();
        assert!(
            matches!(decide("b", &bare, Some("bfloat16"), None), Verdict::Unknown(w) if w.contains("CPU flags are unknown"))
        );
        // A label set to false is not a flag.
        let off = node(&["AVX2"])
            .into_iter()
            .chain([("feature.node.kubernetes.io/cpu-cpuid.AVX512BF16".to_string(), "false".to_string())])
            .collect();
        assert!(matches!(decide("f", &off, Some("bfloat16"), None), Verdict::Write { .. }));
    }

    #[test]
    fn the_rules_cite_known_sources() {
        assert!(crate::sources::table().contains_key(&rules().source), "{}", rules().source);
        assert_eq!(bytes("float32"), Some(4));
        assert_eq!(bytes("bfloat16"), Some(2));
        assert_eq!(bytes("auto"), None);
    }
}
