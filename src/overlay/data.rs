//! `patches/overlay.json` (`eas-overlay/v1`) and its patch files: the rows the decider reads.
//!
//! The rows change with upstream, so they are data. The built-in overlay is compiled in (so `eas`
//! works from any directory); `--overlay DIR` reads another one with the same layout.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::patch::{self, PatchFile};
use crate::pins::is_full_sha;

pub const SCHEMA: &str = "eas-overlay/v1";

const EMBEDDED_JSON: &str = include_str!("../../patches/overlay.json");

/// Every patch file the built-in overlay names, compiled in. A test checks this table against
/// overlay.json and the patches/ directory, so a missing or stray entry fails the build's tests.
const EMBEDDED_PATCHES: &[(&str, &str)] = &[
    ("0002-istio-platform.patch", include_str!("../../patches/0002-istio-platform.patch")),
    ("0003-nri-balloons-k3s.patch", include_str!("../../patches/0003-nri-balloons-k3s.patch")),
    (
        "0006-envoy-cp-selector.release-1.2.patch",
        include_str!("../../patches/0006-envoy-cp-selector.release-1.2.patch"),
    ),
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    schema: String,
    #[allow(dead_code)]
    about: String,
    upstream: String,
    rows: Vec<RowFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowFile {
    id: String,
    title: String,
    why: Why,
    files: Vec<String>,
    written_against: String,
    variants: Vec<VariantFile>,
    skip: Option<Skip>,
    fixed: Option<Fixed>,
    /// Globs of the files the row's hunk may have moved to (`roles/envoy_gateway/**`).
    #[serde(default)]
    may_move_to: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantFile {
    name: String,
    layout: String,
    patch: String,
    #[serde(default)]
    written_against: Option<String>,
}

/// The k3s/k3d fact a row answers, and where it was read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Why {
    pub fact: String,
    pub sources: Vec<Cite>,
}

/// A file at a full commit, optionally with the line range that was read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cite {
    pub repo: String,
    pub sha: String,
    pub path: String,
    #[serde(default)]
    pub lines: Option<[u32; 2]>,
}

impl Cite {
    /// A citation of `path` at `lines` in `o/r` at a full-length sha, for tests.
    #[cfg(test)]
    pub fn example(path: &str, lines: [u32; 2]) -> Cite {
        let sha = "0123456789abcdef0123456789abcdef01234567".into();
        Cite { repo: "o/r".into(), sha, path: path.into(), lines: Some(lines) }
    }

    /// `repo@sha7 path[:a-b]`, the short form of a `fact -> choice [source]` line.
    pub fn short(&self) -> String {
        format!("{}@{} {}{}", self.repo, &self.sha[..7.min(self.sha.len())], self.path, self.range(":"))
    }

    pub fn permalink(&self) -> String {
        let frag = match self.lines {
            Some([a, b]) if a == b => format!("#L{a}"),
            Some([a, b]) => format!("#L{a}-L{b}"),
            None => String::new(),
        };
        format!("https://github.com/{}/blob/{}/{}{frag}", self.repo, self.sha, self.path)
    }

    fn range(&self, sep: &str) -> String {
        match self.lines {
            Some([a, b]) if a == b => format!("{sep}{a}"),
            Some([a, b]) => format!("{sep}{a}-{b}"),
            None => String::new(),
        }
    }
}

/// When a row is not needed on this cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "when", deny_unknown_fields)]
pub enum Skip {
    /// Skip when the generator's choice has this value.
    #[serde(rename = "choice_is")]
    ChoiceIs { choice: String, value: String, why: String },
    /// Skip unless the generator's choice has this value.
    #[serde(rename = "choice_is_not")]
    ChoiceIsNot { choice: String, value: String, why: String },
    /// Skip when no node carries this label with this value.
    #[serde(rename = "no_node_label")]
    NoNodeLabel { label: String, value: String, why: String },
}

/// Upstream fixed the problem another way: the probe matches, and the key the generator writes
/// is still read where the knob names it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixed {
    pub probe: Probe,
    pub knob: Knob,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    pub path: String,
    /// Every string must occur in the file at the pinned commit.
    #[serde(default)]
    pub contains: Vec<String>,
    /// Or: this YAML mapping chain (e.g. `values.global.platform`) must exist in the file with a
    /// value templated from `value_mentions` (see `overlay::probe`).
    #[serde(default)]
    pub yaml_path: Vec<String>,
    #[serde(default)]
    pub value_mentions: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knob {
    pub name: String,
    pub path: String,
}

#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub layout: String,
    pub patch_name: String,
    pub written_against: String,
    pub patch: PatchFile,
}

#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub title: String,
    pub why: Why,
    pub variants: Vec<Variant>,
    pub skip: Option<Skip>,
    pub fixed: Option<Fixed>,
    /// Where its hunk may have moved: searched only when its own file no longer holds the
    /// context (`super::moved`).
    pub may_move_to: Vec<String>,
}

/// A validated overlay: rows in order, each variant's patch parsed.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// The upstream repository the patches are for (`owner/name`), used in citations.
    pub upstream: String,
    pub rows: Vec<Row>,
}

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("overlay: cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("overlay: malformed overlay.json: {0}")]
    Malformed(String),
    #[error("overlay: {0}")]
    Invalid(String),
}

impl Overlay {
    /// The node labels the rows' skip conditions read.
    pub fn labels_read(&self) -> std::collections::BTreeSet<&str> {
        self.rows
            .iter()
            .filter_map(|r| match &r.skip {
                Some(Skip::NoNodeLabel { label, .. }) => Some(label.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The overlay compiled into `eas` from `patches/`.
    pub fn builtin() -> Result<Overlay, DataError> {
        let patches: BTreeMap<&str, &str> = EMBEDDED_PATCHES.iter().copied().collect();
        Overlay::parse(EMBEDDED_JSON, |name| {
            patches.get(name).map(|t| t.to_string()).ok_or_else(|| {
                DataError::Invalid(format!("patch {name} is named in overlay.json but not compiled into eas"))
            })
        })
    }

    /// An overlay directory: `overlay.json` and the patch files it names.
    pub fn load_dir(dir: &Path) -> Result<Overlay, DataError> {
        let json_path = dir.join("overlay.json");
        let text = std::fs::read_to_string(&json_path)
            .map_err(|source| DataError::Read { path: json_path.display().to_string(), source })?;
        Overlay::parse(&text, |name| {
            if name.contains('/') || name.contains("..") {
                return Err(DataError::Invalid(format!("patch {name:?} must be a file name in the overlay directory")));
            }
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(|source| DataError::Read { path: p.display().to_string(), source })
        })
    }

    pub fn parse(
        json: &str,
        mut read_patch: impl FnMut(&str) -> Result<String, DataError>,
    ) -> Result<Overlay, DataError> {
        let file: File = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(json))
            .map_err(|e| DataError::Malformed(format!("field `{}`: {}", e.path(), e.inner())))?;
        if file.schema != SCHEMA {
            return Err(DataError::Malformed(format!("schema is {:?}, expected {SCHEMA:?}", file.schema)));
        }
        if file.upstream.split('/').count() != 2 {
            return Err(DataError::Invalid(format!("upstream {:?} is not owner/name", file.upstream)));
        }
        let mut rows = Vec::new();
        let mut ids = std::collections::BTreeSet::new();
        for r in file.rows {
            let ctx = |msg: String| DataError::Invalid(format!("row {}: {msg}", r.id));
            if r.id.len() != 4 || !r.id.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ctx("id must be four digits (NNNN)".into()));
            }
            if !ids.insert(r.id.clone()) {
                return Err(ctx("duplicate id".into()));
            }
            if !is_full_sha(&r.written_against) {
                return Err(ctx(format!("written_against {:?} is not a full commit SHA", r.written_against)));
            }
            for s in &r.why.sources {
                if !is_full_sha(&s.sha) {
                    return Err(ctx(format!("source {} is not at a full commit SHA", s.path)));
                }
                if let Some([a, b]) = s.lines
                    && (a == 0 || a > b)
                {
                    return Err(ctx(format!("source {} has line range {a}-{b}", s.path)));
                }
            }
            if let Some(f) = &r.fixed {
                let p = &f.probe;
                let yaml = !p.yaml_path.is_empty();
                if yaml != p.contains.is_empty() || yaml != p.value_mentions.is_some() {
                    return Err(ctx("fixed.probe takes either `contains` or `yaml_path` with `value_mentions`".into()));
                }
            }
            if r.variants.is_empty() {
                return Err(ctx("no variants".into()));
            }
            if r.files.is_empty() {
                return Err(ctx("no files".into()));
            }
            let mut variants = Vec::new();
            for v in &r.variants {
                let text = read_patch(&v.patch)?;
                let parsed = patch::parse(&text).map_err(|e| ctx(format!("variant {}: {}: {e}", v.name, v.patch)))?;
                for f in &parsed.files {
                    if !r.files.contains(&f.path) {
                        return Err(ctx(format!(
                            "variant {} patches {}, which the row's files do not list",
                            v.name, f.path
                        )));
                    }
                }
                let against = v.written_against.clone().unwrap_or_else(|| r.written_against.clone());
                if !is_full_sha(&against) {
                    return Err(ctx(format!("variant {}: written_against {against:?} is not a full SHA", v.name)));
                }
                if variants.iter().any(|x: &Variant| x.name == v.name) {
                    return Err(ctx(format!("duplicate variant name {}", v.name)));
                }
                variants.push(Variant {
                    name: v.name.clone(),
                    layout: v.layout.clone(),
                    patch_name: v.patch.clone(),
                    written_against: against,
                    patch: parsed,
                });
            }
            if let Some(g) = r.may_move_to.iter().find(|g| g.is_empty() || g.starts_with('/') || g.contains("..")) {
                return Err(ctx(format!("may_move_to {g:?} is not a relative glob inside the tree")));
            }
            rows.push(Row {
                id: r.id,
                title: r.title,
                why: r.why,
                variants,
                skip: r.skip,
                fixed: r.fixed,
                may_move_to: r.may_move_to,
            });
        }
        Ok(Overlay { upstream: file.upstream, rows })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_overlay_loads_and_every_patch_is_compiled_in_exactly_once() {
        let o = Overlay::builtin().expect("the built-in overlay is valid");
        let named: std::collections::BTreeSet<&str> =
            o.rows.iter().flat_map(|r| r.variants.iter().map(|v| v.patch_name.as_str())).collect();
        let embedded: std::collections::BTreeSet<&str> = EMBEDDED_PATCHES.iter().map(|(n, _)| *n).collect();
        assert_eq!(named, embedded, "overlay.json and the compiled-in table disagree");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("patches");
        let on_disk: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".patch"))
            .collect();
        assert_eq!(on_disk.iter().map(String::as_str).collect::<std::collections::BTreeSet<_>>(), embedded);
        // The directory form reads the same overlay.
        let from_dir = Overlay::load_dir(&dir).unwrap();
        assert_eq!(from_dir.rows.len(), o.rows.len());
    }

    #[test]
    fn builtin_rows_are_the_ones_the_spec_names_with_their_conditions() {
        let o = Overlay::builtin().unwrap();
        let ids: Vec<&str> = o.rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["0002", "0003", "0006"]);
        let row = |id: &str| o.rows.iter().find(|r| r.id == id).unwrap();
        assert_eq!(
            row("0002").skip,
            Some(Skip::ChoiceIs {
                choice: "istio_platform".into(),
                value: String::new(),
                why: "the nodes use Istio's default CNI paths".into()
            })
        );
        assert!(matches!(
            &row("0003").skip,
            Some(Skip::ChoiceIsNot { choice, value, .. }) if choice == "kubernetes_cpu_policy" && value == "nri-balloons"
        ));
        assert_eq!(row("0006").variants[0].name, "release-1.2");
        assert!(row("0006").variants[0].patch.files[0].path.ends_with("roles/envoy_gateway/tasks/install.yaml"));
    }

    fn one_row(extra: &str) -> String {
        format!(
            r#"{{"schema":"eas-overlay/v1","about":"t","upstream":"o/r","rows":[{{"id":"0001","title":"t",
            "why":{{"fact":"f","sources":[]}},"files":["a.txt"],
            "written_against":"0123456789abcdef0123456789abcdef01234567",
            "variants":[{{"name":"v","layout":"l","patch":"p.patch"}}]{extra}}}]}}"#
        )
    }

    const PATCH: &str = "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-x\n+y\n";

    #[test]
    fn rejects_what_the_decider_cannot_trust() {
        let ok = Overlay::parse(&one_row(""), |_| Ok(PATCH.into()));
        assert!(ok.is_ok(), "{ok:?}");
        let cases = [
            (one_row("").replace("eas-overlay/v1", "eas-overlay/v0"), PATCH, "schema"),
            (one_row("").replace("\"0001\"", "\"1\""), PATCH, "four digits"),
            (one_row("").replace("0123456789abcdef0123456789abcdef01234567", "0123456"), PATCH, "full commit SHA"),
            (one_row(""), "--- a/b.txt\n+++ b/b.txt\n@@ -1,1 +1,1 @@\n-x\n+y\n", "do not list"),
            (one_row(""), "not a patch\n", "no file"),
            (one_row(r#","skip":{"when":"sometimes"}"#), PATCH, "skip"),
            (one_row(r#","extra":1"#), PATCH, "extra"),
        ];
        for (json, patch, expect) in cases {
            let e = Overlay::parse(&json, |_| Ok(patch.into())).expect_err(expect).to_string();
            assert!(e.contains(expect), "{e} should mention {expect}");
        }
    }

    #[test]
    fn citation_forms() {
        let c = Cite::example("a/b.yaml", [3, 9]);
        assert_eq!(c.short(), "o/r@0123456 a/b.yaml:3-9");
        assert_eq!(
            c.permalink(),
            "https://github.com/o/r/blob/0123456789abcdef0123456789abcdef01234567/a/b.yaml#L3-L9"
        );
        let whole = Cite { lines: None, ..c };
        assert_eq!(whole.short(), "o/r@0123456 a/b.yaml");
        assert!(whole.permalink().ends_with("/a/b.yaml"));
    }
}
