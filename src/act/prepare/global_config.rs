//! Merging `global_config.edit.yaml` into `env/<env>/global_config.yaml`.
//!
//! The installer reads `existing_kubernetes` from that file only (with yq), and the template
//! ships the key commented out with a comment that explains it. So a key is set as a text edit:
//! an existing top-level line is replaced; else the template's commented line is uncommented and
//! replaced, keeping its trailing comment; else the key is appended. Applying an edit twice
//! gives the same text.

use serde_json::{Map, Value};

use crate::act::prepare::lines::{self, Kind, Line};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GlobalConfigError {
    #[error("global_config.edit.yaml is not a map of top-level keys: {0}")]
    EditParse(String),
    #[error("global_config.edit.yaml: {key} is not a single scalar value")]
    EditNotScalar { key: String },
    #[error("global_config.yaml is not YAML: {0}")]
    Parse(String),
    #[error("global_config.yaml is not a map of top-level keys (found {found})")]
    NotAMap { found: String },
    #[error("{key:?} is not a plain top-level key")]
    BadKey { key: String },
    #[error("{value:?} for {key} is not a single-line YAML scalar")]
    BadValue { key: String, value: String },
    #[error("global_config.yaml sets {key} on lines {lines:?}: expected one line")]
    Duplicate { key: String, lines: Vec<usize> },
    #[error("global_config.yaml line {line}: {key} holds {what}, expected a single-line value")]
    NotScalar { key: String, line: usize, what: String },
    #[error("global_config.yaml line {line}: {why}")]
    Unsupported { line: usize, why: String },
    #[error("setting {key} in global_config.yaml gave {found}, expected {expected}")]
    Verify { key: String, expected: String, found: String },
}

impl GlobalConfigError {
    /// What the user can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            GlobalConfigError::EditParse(_) | GlobalConfigError::EditNotScalar { .. } => {
                "regenerate it with `eas config` (or `eas up`)"
            }
            _ => "restore env/<env>/global_config.yaml (delete it and re-run `eas up`, which re-seeds it with init)",
        }
    }
}

/// Merges every key of a `global_config.edit.yaml` (a flat map of scalars) into `original`.
pub fn merge_global_edit(original: &str, edit: &str) -> Result<String, GlobalConfigError> {
    let parsed: Value = serde_saphyr::from_str(edit).map_err(|e| GlobalConfigError::EditParse(first_line(&e)))?;
    let map = match parsed {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        other => {
            return Err(GlobalConfigError::EditParse(format!("found {}", kind_of(&other))));
        }
    };
    let mut text = original.to_string();
    for (key, value) in &map {
        let rendered = match value {
            Value::String(s) => crate::config::render::quote(s),
            Value::Bool(_) | Value::Number(_) => value.to_string(),
            _ => return Err(GlobalConfigError::EditNotScalar { key: key.clone() }),
        };
        text = merge_global_config(&text, key, &rendered)?;
    }
    Ok(text)
}

/// Sets the top-level `edit_key` to `edit_value` (YAML scalar text, e.g. `"/kube/config"`).
pub fn merge_global_config(original: &str, edit_key: &str, edit_value: &str) -> Result<String, GlobalConfigError> {
    check_key(edit_key)?;
    let expected = parse_scalar(edit_key, edit_value)?;
    let before = parse_map(original)?;
    let mut lines = lines::scan(original);
    check_shape(&lines)?;

    let set: Vec<usize> =
        (0..lines.len()).filter(|&i| top_level_key(&lines[i]).is_some_and(|k| k == edit_key)).collect();
    if set.len() > 1 {
        let lines = set.iter().map(|i| i + 1).collect();
        return Err(GlobalConfigError::Duplicate { key: edit_key.to_string(), lines });
    }
    if let Some(&i) = set.first() {
        let kv = lines::key_value(&lines[i].text).expect("a top-level key line");
        let line = i + 1;
        if let Some(what) = lines::uneditable(kv.value) {
            return Err(GlobalConfigError::NotScalar { key: edit_key.to_string(), line, what: what.to_string() });
        }
        if kv.value.is_empty() && lines::content_end(&lines, i + 1, lines::block_end(&lines, i, 0)) > i + 1 {
            return Err(GlobalConfigError::NotScalar {
                key: edit_key.to_string(),
                line,
                what: "a nested block".into(),
            });
        }
        lines[i].text = lines::with_value(&lines[i].text, 0, &kv, edit_value);
    } else if let Some(i) = (0..lines.len()).find(|&i| commented_key(&lines[i]).is_some_and(|k| k == edit_key)) {
        let uncommented = uncomment(&lines[i].text).to_string();
        let kv = lines::key_value(&uncommented).expect("a commented key line");
        lines[i] = Line { text: lines::with_value(&uncommented, 0, &kv, edit_value), indent: 0, kind: Kind::Content };
    } else {
        lines.push(Line { text: format!("{edit_key}: {edit_value}"), indent: 0, kind: Kind::Content });
    }
    let text = join(&lines);
    verify(&before, &text, edit_key, &expected)?;
    Ok(text)
}

fn first_line(e: &impl std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

fn check_key(key: &str) -> Result<(), GlobalConfigError> {
    let ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok { Ok(()) } else { Err(GlobalConfigError::BadKey { key: key.to_string() }) }
}

fn parse_scalar(key: &str, value: &str) -> Result<Value, GlobalConfigError> {
    let bad = || GlobalConfigError::BadValue { key: key.to_string(), value: value.to_string() };
    if value.contains('\n') || value.trim().is_empty() || lines::uneditable(value.trim()).is_some() {
        return Err(bad());
    }
    match serde_saphyr::from_str::<Value>(value) {
        Ok(v @ (Value::String(_) | Value::Bool(_) | Value::Number(_))) => Ok(v),
        _ => Err(bad()),
    }
}

fn parse_map(text: &str) -> Result<Map<String, Value>, GlobalConfigError> {
    match serde_saphyr::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(GlobalConfigError::NotAMap { found: kind_of(&other).to_string() }),
        Err(e) => Err(GlobalConfigError::Parse(first_line(&e))),
    }
}

/// Refuses the shapes a line edit cannot handle: tabs, flow-style top level, several documents.
fn check_shape(lines: &[Line]) -> Result<(), GlobalConfigError> {
    if let Some(line) = lines::first_tab(lines) {
        return Err(GlobalConfigError::Unsupported { line, why: "a tab outside a comment".into() });
    }
    let mut seen_content = false;
    for (i, l) in lines.iter().enumerate() {
        match l.kind {
            Kind::Content if l.indent == 0 && l.text.starts_with(['{', '[']) => {
                return Err(GlobalConfigError::Unsupported { line: i + 1, why: "a flow-style top-level map".into() });
            }
            Kind::Content => seen_content = true,
            Kind::DocMarker if seen_content || l.text.starts_with("...") => {
                return Err(GlobalConfigError::Unsupported {
                    line: i + 1,
                    why: "a second document or a document end marker".into(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

fn top_level_key(l: &Line) -> Option<String> {
    (l.kind == Kind::Content && l.indent == 0).then(|| lines::key_value(&l.text).map(|kv| kv.key)).flatten()
}

/// `# key: value` at column 0 (one optional space after `#`): the template's way of offering a key.
fn commented_key(l: &Line) -> Option<String> {
    if l.kind != Kind::Comment || l.indent != 0 {
        return None;
    }
    let rest = uncomment(&l.text);
    if rest.starts_with([' ', '#']) {
        return None;
    }
    lines::key_value(rest).map(|kv| kv.key)
}

fn uncomment(text: &str) -> &str {
    let rest = text.strip_prefix('#').unwrap_or(text);
    rest.strip_prefix(' ').unwrap_or(rest)
}

fn join(lines: &[Line]) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(&l.text);
        s.push('\n');
    }
    s
}

/// The edited text must parse, hold the value, and leave every other key as it was.
fn verify(before: &Map<String, Value>, text: &str, key: &str, expected: &Value) -> Result<(), GlobalConfigError> {
    let err = |found: String| GlobalConfigError::Verify { key: key.to_string(), expected: expected.to_string(), found };
    let after = parse_map(text).map_err(|e| err(e.to_string()))?;
    if after.get(key) != Some(expected) {
        return Err(err(after.get(key).map_or("no value".into(), |v| v.to_string())));
    }
    let others = |m: &Map<String, Value>| {
        m.iter().filter(|(k, _)| *k != key).map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()
    };
    if others(before) != others(&after) {
        return Err(err("other keys changed".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic template in the shape of the installer's defaults: comments explain keys,
    /// the bring-your-own-cluster key is offered commented out.
    const TEMPLATE: &str = "\
# Global settings for this environment.
# Edit values here; `install` reads them on every run.

kubernetes_cluster_name: \"cluster.local\"   # DNS domain of the cluster
kubernetes_kube_proxy_mode: \"nftables\"
# existing_kubernetes: \"\"  # BYO cluster: absolute path of your kubeconfig; skips cluster creation.

# kubernetes_service_cidr: \"10.233.0.0/18\"
storage_backend: local-path
postgresql_databases:
  - name: keycloak
    user: keycloak
istio_enabled: true
";

    fn set(text: &str) -> Result<String, GlobalConfigError> {
        merge_global_config(text, "existing_kubernetes", "\"/kube/config\"")
    }

    #[test]
    fn uncomments_the_template_line_and_keeps_its_comment() {
        let out = set(TEMPLATE).unwrap();
        let want = TEMPLATE.replace(
            "# existing_kubernetes: \"\"  # BYO cluster:",
            "existing_kubernetes: \"/kube/config\"  # BYO cluster:",
        );
        assert_eq!(out, want);
        let v: Value = serde_saphyr::from_str(&out).unwrap();
        assert_eq!(v["existing_kubernetes"], "/kube/config");
        assert_eq!(v["postgresql_databases"][0]["name"], "keycloak");
        assert!(out.contains("# Global settings for this environment."));
        assert!(out.contains("# kubernetes_service_cidr: \"10.233.0.0/18\""));
    }

    #[test]
    fn edits_are_idempotent_and_replace_existing_lines() {
        // (input, expected output)
        let cases = [
            ("a: 1\nexisting_kubernetes: \"\"\n", "a: 1\nexisting_kubernetes: \"/kube/config\"\n"),
            ("existing_kubernetes: ~/x  # mine\n", "existing_kubernetes: \"/kube/config\"  # mine\n"),
            ("existing_kubernetes:\nb: 2\n", "existing_kubernetes: \"/kube/config\"\nb: 2\n"),
            ("a: 1\n", "a: 1\nexisting_kubernetes: \"/kube/config\"\n"),
            ("a: 1", "a: 1\nexisting_kubernetes: \"/kube/config\"\n"),
            ("", "existing_kubernetes: \"/kube/config\"\n"),
            ("---\n# only comments\n", "---\n# only comments\nexisting_kubernetes: \"/kube/config\"\n"),
            // A nested key of the same name is not the top-level key.
            (
                "x:\n  existing_kubernetes: \"a\"\n",
                "x:\n  existing_kubernetes: \"a\"\nexisting_kubernetes: \"/kube/config\"\n",
            ),
            // A commented nested key is not the template line.
            (
                "#   existing_kubernetes: \"\"\n",
                "#   existing_kubernetes: \"\"\nexisting_kubernetes: \"/kube/config\"\n",
            ),
        ];
        for (input, want) in cases {
            let once = set(input).unwrap();
            assert_eq!(once, want, "{input:?}");
            assert_eq!(set(&once).unwrap(), once, "second application of {input:?}");
        }
        let once = set(TEMPLATE).unwrap();
        assert_eq!(set(&once).unwrap(), once);
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        let cases: [(&str, &str, &str, GlobalConfigError); 8] = [
            (
                "existing_kubernetes: a\nexisting_kubernetes: b\n",
                "existing_kubernetes",
                "\"x\"",
                GlobalConfigError::Parse(String::new()),
            ),
            (
                "existing_kubernetes:\n  nested: 1\n",
                "existing_kubernetes",
                "\"x\"",
                GlobalConfigError::NotScalar {
                    key: "existing_kubernetes".into(),
                    line: 1,
                    what: "a nested block".into(),
                },
            ),
            (
                "existing_kubernetes: {a: 1}\n",
                "existing_kubernetes",
                "\"x\"",
                GlobalConfigError::NotScalar {
                    key: "existing_kubernetes".into(),
                    line: 1,
                    what: "a flow-style collection".into(),
                },
            ),
            ("a:\n\t- 1\n", "k", "1", GlobalConfigError::Parse(String::new())),
            (
                "{a: 1}\n",
                "k",
                "1",
                GlobalConfigError::Unsupported { line: 1, why: "a flow-style top-level map".into() },
            ),
            ("- a\n", "k", "1", GlobalConfigError::NotAMap { found: "a list".into() }),
            ("a: 1\n", "bad key", "1", GlobalConfigError::BadKey { key: "bad key".into() }),
            ("a: 1\n", "k", "[1, 2]", GlobalConfigError::BadValue { key: "k".into(), value: "[1, 2]".into() }),
        ];
        for (input, key, value, want) in cases {
            let got = merge_global_config(input, key, value).unwrap_err();
            match (&got, &want) {
                // The parser's wording is its own; the variant is what matters.
                (GlobalConfigError::Parse(_), GlobalConfigError::Parse(_)) => {}
                _ => assert_eq!(got, want, "{input:?}"),
            }
        }
        let two_docs = "a: 1\n---\nb: 2\n";
        assert!(matches!(
            merge_global_config(two_docs, "k", "1"),
            Err(GlobalConfigError::Parse(_) | GlobalConfigError::Unsupported { .. })
        ));
    }

    #[test]
    fn the_generated_edit_file_merges() {
        let edit = crate::config::render::global_edit();
        let out = merge_global_edit(TEMPLATE, &edit).unwrap();
        assert_eq!(out, set(TEMPLATE).unwrap());
        assert_eq!(merge_global_edit(&out, &edit).unwrap(), out);
        let multi = merge_global_edit("a: 1\n", "x: true\ny: 3\nz: \"s\"\n").unwrap();
        assert_eq!(multi, "a: 1\nx: true\ny: 3\nz: \"s\"\n");
        assert_eq!(merge_global_edit("a: 1\n", "x: [1]\n"), Err(GlobalConfigError::EditNotScalar { key: "x".into() }));
        assert!(matches!(merge_global_edit("a: 1\n", "- x\n"), Err(GlobalConfigError::EditParse(_))));
    }
}
