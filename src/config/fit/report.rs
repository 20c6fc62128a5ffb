//! `eas fit`'s two outputs: a table for people and the fit document as JSON.

use super::{Entry, FitDoc, GIB, SOURCE_EXTERNAL};
use crate::facts::{Fit, KV_CACHE_ENV};

/// eas's numbers under another fit's verdicts: what `eas fit --fit FILE` prints.
pub fn merge(own: &FitDoc, other: &Fit) -> FitDoc {
    let mut doc = own.clone();
    doc.source = SOURCE_EXTERNAL;
    for (name, e) in doc.candidates.iter_mut() {
        match other.candidates.get(name) {
            Some(v) => {
                let own_why = std::mem::take(&mut e.why);
                e.fits = v.fits;
                e.env = v.env.clone();
                e.args = v.args.clone();
                e.why = format!("{SOURCE_EXTERNAL}'s verdict (eas: {own_why})");
            }
            None => {
                *e = Entry {
                    fits: false,
                    env: Default::default(),
                    args: vec![],
                    numbers: e.numbers.clone(),
                    why: format!("{SOURCE_EXTERNAL} has no verdict for it"),
                };
            }
        }
    }
    doc
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / GIB as f64)
}

/// The table: one row a candidate, then the landing node and its budget.
pub fn table(doc: &FitDoc) -> String {
    let header =
        ["CANDIDATE", "WEIGHTS", "KV/TOKEN", "BUDGET", "VERDICT", "CACHE", "POD-MEMORY", "MAX-MODEL-LEN", "WHY"];
    let mut rows: Vec<[String; 9]> = vec![header.map(String::from)];
    for (name, e) in &doc.candidates {
        let n = e.numbers.as_ref();
        let cache = e.env.get(KV_CACHE_ENV).map(|c| format!("{c} GiB")).unwrap_or_else(|| "-".into());
        let len = crate::facts::FitVerdict { fits: e.fits, env: e.env.clone(), args: e.args.clone() }
            .max_model_len()
            .unwrap_or("-")
            .to_string();
        rows.push([
            name.clone(),
            n.map(|n| gib(n.weights_bytes)).unwrap_or_else(|| "-".into()),
            n.map(|n| format!("{} KiB", n.kv_bytes_per_token / 1024)).unwrap_or_else(|| "-".into()),
            n.map(|n| gib(n.budget_bytes)).unwrap_or_else(|| "-".into()),
            if e.fits { "fits".into() } else { "does not fit".into() },
            cache,
            n.filter(|n| n.fits).map(|n| format!("{} GiB", n.memory_gib)).unwrap_or_else(|| "-".into()),
            len,
            e.why.clone(),
        ]);
    }
    // Names and reasons come from a catalog or facts file: a newline in one would start a row.
    let rows: Vec<[String; 9]> = rows.into_iter().map(|r| r.map(|c| crate::text::escape_controls(&c))).collect();
    let widths: Vec<usize> = (0..8).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &rows {
        for (i, w) in widths.iter().enumerate() {
            out.push_str(&crate::text::pad(&r[i], *w));
            out.push_str("  ");
        }
        out.push_str(&r[8]);
        out.push('\n');
    }
    out.push_str(&format!("source: {}\n", doc.source));
    match &doc.node {
        Some(b) => out.push_str(&format!(
            "landing node {}: allocatable {} - pod requests {} - headroom {} = budget {}\n",
            b.node,
            gib(b.allocatable_bytes),
            b.pod_requests_bytes.map(gib).unwrap_or_else(|| "unknown (counted as 0)".into()),
            gib(b.headroom_bytes),
            gib(b.budget_bytes)
        )),
        None => out.push_str("landing node: none (no node a model may be scheduled on)\n"),
    }
    out
}

pub fn json(doc: &FitDoc) -> String {
    format!("{}\n", crate::text::json_safe(serde_json::to_string_pretty(doc).expect("fit document serialises")))
}
