//! The text `eas init` writes: a commented eas.yaml (eas-config/v1) for one cluster, every
//! choice stated beside its key. Pure: the choices in, the text out (`commands::init` reads the
//! facts and decides them).

use std::fmt::Write;

/// One key as `eas init` decided it: written (`value`), or left as a comment (`None`: the
/// default, or the model, which is only ever a comment), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The key, dotted when nested (`nodes.probe`); the nested mappings are written in the
    /// order of [`super::file::NESTED`].
    pub key: &'static str,
    pub value: Option<Value>,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string, written as YAML (quoted when it needs to be).
    Scalar(String),
    /// A switch or a number, written as it is (`true`, `600`).
    Raw(String),
    /// A mapping of node names to values (`nodes.containerd_config`), in order.
    Nodes(Vec<(String, String)>),
    /// A value shown only as a comment (`# model: X`).
    Commented(String),
}

/// The file: a header naming the cluster, then each choice with its reason as a comment.
pub fn render(header: &[String], choices: &[Choice]) -> String {
    let mut out = String::new();
    for line in header {
        let _ = writeln!(out, "# {line}");
    }
    let _ = writeln!(out, "schema: {}", super::file::SCHEMA);
    let mut open: Option<&str> = None;
    for c in choices {
        let (parent, leaf) = match c.key.split_once('.') {
            Some((p, l)) => (Some(p), l),
            None => (None, c.key),
        };
        let indent = if parent.is_some() { "  " } else { "" };
        let _ = writeln!(out);
        // A nested key opens its mapping once; a mapping with nothing written stays a comment.
        if parent != open {
            if let Some(p) = parent {
                let opened = choices.iter().any(|o| {
                    o.key.starts_with(&format!("{p}."))
                        && o.value.as_ref().is_some_and(|v| !matches!(v, Value::Commented(_)))
                });
                let _ = writeln!(out, "{}{p}:", if opened { "" } else { "# " });
            }
            open = parent;
        }
        for line in c.why.lines() {
            let _ = writeln!(out, "{indent}# {line}");
        }
        match &c.value {
            Some(Value::Scalar(v)) => {
                let _ = writeln!(out, "{indent}{leaf}: {}", scalar(v));
            }
            Some(Value::Raw(v)) => {
                let _ = writeln!(out, "{indent}{leaf}: {v}");
            }
            Some(Value::Nodes(pairs)) => {
                let _ = writeln!(out, "{indent}{leaf}:");
                for (node, v) in pairs {
                    let _ = writeln!(out, "{indent}  {}: {}", scalar(node), scalar(v));
                }
            }
            Some(Value::Commented(v)) => {
                let _ = writeln!(out, "{indent}# {leaf}: {}", scalar(v));
            }
            // Left to the default: the key, commented, under its reason.
            None => {
                let _ = writeln!(out, "{indent}# {leaf}:");
            }
        }
    }
    out
}

/// `v` as a YAML scalar: plain when it is a safe word or path, else double-quoted (JSON's
/// quoting is YAML's).
fn scalar(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_./@:+".contains(c))
        && !v.starts_with(['-', ':', '@'])
        && !v.contains(": ")
        && !["true", "false", "null", "yes", "no", "on", "off", "~"].contains(&v.to_ascii_lowercase().as_str())
        && v.parse::<f64>().is_err();
    if plain { v.to_string() } else { serde_json::to_string(v).expect("a string serialises") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_states_each_choice_and_reads_back_as_written() {
        let choices = vec![
            Choice { key: "context", value: Some(Value::Scalar("k3d-gpu".into())), why: "the current context".into() },
            Choice { key: "offline", value: Some(Value::Raw("true".into())), why: "--offline".into() },
            Choice { key: "model", value: Some(Value::Commented("qwen2-5-coder-7b".into())), why: "the pick".into() },
            Choice { key: "state_dir", value: None, why: "default: ~/.local/state/eas".into() },
            Choice {
                key: "nodes.containerd_config",
                value: Some(Value::Nodes(vec![("*".into(), "/n/c.toml".into())])),
                why: "given".into(),
            },
            Choice { key: "nodes.probe", value: None, why: "not asked".into() },
            Choice { key: "timeouts.install", value: None, why: "default 5400".into() },
        ];
        let text = render(&["eas.yaml for k3d-gpu".into()], &choices);
        assert!(text.starts_with("# eas.yaml for k3d-gpu\nschema: eas-config/v1\n"), "{text}");
        assert!(text.contains("\n# the pick\n# model: qwen2-5-coder-7b\n"), "{text}");
        assert!(
            text.contains("\n# timeouts:\n  # default 5400\n  # install:\n"),
            "a mapping with nothing set is a comment: {text}"
        );
        assert!(text.contains("\n# default: ~/.local/state/eas\n# state_dir:\n"), "{text}");
        let parsed = crate::settings::file::parse(&text, "eas.yaml".as_ref(), "/".as_ref());
        let f = parsed.map_err(|e| e.cause).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(f.text("context").as_deref(), Some("k3d-gpu"));
        assert_eq!(f.switch("offline"), Some(true));
        assert_eq!(f.text("model"), None, "the model is only a comment");
        assert_eq!(f.nodes("nodes.containerd_config"), [("*".to_string(), "/n/c.toml".to_string())]);
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar("a: b"), "\"a: b\"");
        assert_eq!(scalar("/tmp/x y"), "\"/tmp/x y\"");
        assert_eq!(scalar("ubuntu:24.04@sha256:ab"), "ubuntu:24.04@sha256:ab");
    }
}
