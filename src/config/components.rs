//! Whether a file of an ext repository is on a layer's install path: the installer runs the role
//! `roles/<component>/` of each component its repository's `components.yaml` declares in a layer
//! the target resolves to, when that component's `enabled` is true. The shape and the rules are
//! EAS's own: `configs/components.yaml` (intel/enterprise-ai-solutions@02210ca: `components:`
//! rows of `name`, `layer`, `enabled`, `depends_on`; `enabled` a bool or a Jinja string such as
//! `"{{ istio_enabled | default(true) | bool }}"`), rendered by preflight and coerced by
//! `filter_plugins/resolve_components.py` (@074edab: missing or null is enabled; a string is true
//! when it is `true`, `yes`, `on` or `1`), installs walking the layers' `depends_on` downward.
//! An ext repository's own manifest has the same rows at its root (EI's:
//! Mushtaq-BGA/enterprise-inference@1e10d1a `components.yaml`, `llm_services` among them, each
//! `enabled` a `{{ X_enabled | default(true) | bool }}` template or a longer expression, which eas
//! leaves unknown). No EAT `components.yaml` could be read (intel/agent-toolkit has no stored
//! source); EAT's is taken to follow the contract EAS documents for ext repositories.
//! Pure: the files' text and the values eas writes in, the verdicts out.

use serde::Deserialize;
use serde_json::Value;

/// EAS's own layers under every ext layer, each with the one below it
/// (intel/enterprise-ai-solutions@02210ca `configs/components.yaml`).
const CORE: [(&str, &str); 2] = [("inference", "platform"), ("platform", "infrastructure")];

#[derive(Debug, Default, Deserialize)]
pub struct Components {
    #[serde(default)]
    layers: Vec<Layer>,
    #[serde(default)]
    components: Vec<Component>,
}

#[derive(Debug, Deserialize)]
struct Layer {
    name: String,
    #[serde(default)]
    depends_on: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct Component {
    name: String,
    #[serde(default)]
    layer: Option<String>,
    #[serde(default)]
    enabled: Option<Value>,
}

impl Components {
    pub fn parse(text: &str) -> Result<Components, String> {
        let c: Option<Components> =
            serde_saphyr::from_str(text).map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string())?;
        Ok(c.unwrap_or_default())
    }

    /// The layers an install of `target` runs: it and every layer below it.
    fn resolved(&self, target: &str) -> Vec<String> {
        let mut seen = vec![target.to_string()];
        let mut i = 0;
        while i < seen.len() {
            let here = seen[i].clone();
            let declared = self.layers.iter().filter(|l| l.name == here).flat_map(|l| l.depends_on.iter().flatten());
            let core = CORE.iter().filter(|(l, _)| *l == here).map(|(_, below)| below.to_string());
            for below in declared.cloned().chain(core).collect::<Vec<_>>() {
                if !seen.contains(&below) {
                    seen.push(below);
                }
            }
            i += 1;
        }
        seen
    }
}

/// One reader's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum OnPath {
    /// Its role is an enabled component of a layer the install runs; the sentence says so.
    Yes(String),
    /// It is not, and why.
    No(String),
}

/// The role a file belongs to: `roles/<name>/…`.
pub fn role_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("roles/")?;
    rest.split_once('/').map(|(r, _)| r).filter(|r| !r.is_empty())
}

/// Whether `reader` runs when `target` is installed. `value` gives what a variable named in a
/// Jinja `enabled` will be (eas's overrides, else the layer's seeded config), as a YAML scalar.
pub fn on_path(components: &Components, target: &str, reader: &str, value: &dyn Fn(&str) -> Option<Value>) -> OnPath {
    let Some(role) = role_of(reader) else {
        return OnPath::No(format!("{reader} is not in a role (roles/<component>/), so no component runs it"));
    };
    let Some(c) = components.components.iter().find(|c| c.name == role) else {
        return OnPath::No(format!(
            "components.yaml declares no component {role}, so the installer never runs its role"
        ));
    };
    let layers = components.resolved(target);
    let layer = c.layer.clone().unwrap_or_default();
    if !layers.contains(&layer) {
        return OnPath::No(format!(
            "component {role} is in layer {layer:?}, which installing {target} does not run ({})",
            layers.join(", ")
        ));
    }
    match enabled(c.enabled.as_ref(), value) {
        Ok(true) => OnPath::Yes(format!("component {role} of layer {layer} is enabled")),
        Ok(false) => OnPath::No(format!("component {role} is not enabled (enabled: {})", shown(c.enabled.as_ref()))),
        Err(why) => OnPath::No(format!("whether component {role} is enabled is unknown: {why}")),
    }
}

fn shown(v: Option<&Value>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "absent".into())
}

/// `enabled` as the installer reads it: a bool; missing or null is true; a string is rendered
/// (the one template form EAS's rows use, `{{ VAR [| default(D)] [| bool] }}`) and then true
/// when it is `true`, `yes`, `on` or `1`.
fn enabled(v: Option<&Value>, value: &dyn Fn(&str) -> Option<Value>) -> Result<bool, String> {
    use serde_json::Value as Y;
    let text = match v {
        None | Some(Y::Null) => return Ok(true),
        Some(Y::Bool(b)) => return Ok(*b),
        Some(Y::Number(n)) => n.to_string(),
        Some(Y::String(s)) => s.clone(),
        Some(other) => return Err(format!("enabled is {}", shown(Some(other)))),
    };
    let rendered = match text.trim().strip_prefix("{{").and_then(|t| t.strip_suffix("}}")) {
        Some(expr) => render(expr, value)?,
        None => text,
    };
    Ok(matches!(rendered.trim().to_lowercase().as_str(), "true" | "yes" | "on" | "1"))
}

/// `VAR`, `VAR | bool`, `VAR | default(D)`, `VAR | default(D) | bool`: the variable's value,
/// else `D`. Anything else is a template eas does not evaluate.
fn render(expr: &str, value: &dyn Fn(&str) -> Option<Value>) -> Result<String, String> {
    let mut parts = expr.split('|').map(str::trim);
    let var = parts.next().unwrap_or_default();
    if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("the template {{{{{expr}}}}} is not one eas evaluates"));
    }
    let mut default = None;
    for p in parts {
        match p.strip_prefix("default(").and_then(|d| d.strip_suffix(')')) {
            Some(d) => default = Some(d.trim().trim_matches(['"', '\'']).to_string()),
            None if p == "bool" => {}
            None => return Err(format!("the template {{{{{expr}}}}} is not one eas evaluates")),
        }
    }
    let scalar = |v: Value| match v {
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match value(var).and_then(scalar).or(default) {
        Some(v) => Ok(v),
        None => Err(format!("{var} is set neither by eas nor by the layer's config, and has no default")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ext repository's manifest in EAS's shape: its layer above inference, and components
    /// enabled each way EAS's own rows are.
    const EAT: &str = r#"
layers:
  - name: agent-toolkit
    depends_on: [inference]
components:
  - name: models
    layer: agent-toolkit
    enabled: "{{ agent_models_enabled | default(true) | bool }}"
    depends_on: []
  - name: sandbox
    layer: agent-toolkit
    enabled: "{{ agent_sandbox_enabled | bool }}"
  - name: off
    layer: agent-toolkit
    enabled: false
  - name: plain
    layer: agent-toolkit
  - name: elsewhere
    layer: erag
  - name: odd
    layer: agent-toolkit
    enabled: "{{ a and b }}"
"#;

    fn verdict(reader: &str, vars: &[(&str, Value)]) -> OnPath {
        let c = Components::parse(EAT).unwrap();
        let lookup = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        on_path(&c, "agent-toolkit", reader, &lookup)
    }

    fn yes(v: &OnPath) -> bool {
        matches!(v, OnPath::Yes(_))
    }

    #[test]
    fn a_reader_counts_only_in_the_role_of_an_enabled_component_the_install_runs() {
        use serde_json::Value as Y;
        assert!(yes(&verdict("roles/models/tasks/install.yaml", &[])), "default(true)");
        let off = [("agent_models_enabled", Y::Bool(false))];
        assert!(!yes(&verdict("roles/models/tasks/install.yaml", &off)), "eas's value wins over the default");
        assert!(yes(&verdict("roles/sandbox/tasks/main.yaml", &[("agent_sandbox_enabled", Y::Bool(true))])));
        assert!(yes(&verdict("roles/sandbox/tasks/main.yaml", &[("agent_sandbox_enabled", Y::String("yes".into()))])));
        let unknown = verdict("roles/sandbox/tasks/main.yaml", &[]);
        assert!(matches!(&unknown, OnPath::No(w) if w.contains("unknown")), "{unknown:?}");
        assert!(yes(&verdict("roles/plain/defaults/main.yaml", &[])), "missing enabled is enabled");
        let cases = [
            ("roles/off/tasks/main.yaml", "not enabled"),
            ("roles/elsewhere/tasks/main.yaml", "does not run"),
            ("roles/nobody/tasks/main.yaml", "no component nobody"),
            ("playbooks/models.yaml", "not in a role"),
            ("roles/odd/tasks/main.yaml", "not one eas evaluates"),
        ];
        for (reader, why) in cases {
            let v = verdict(reader, &[]);
            assert!(matches!(&v, OnPath::No(w) if w.contains(why)), "{reader}: {v:?}");
        }
    }

    #[test]
    fn installing_a_layer_runs_it_and_every_layer_below_it() {
        let c = Components::parse(EAT).unwrap();
        assert_eq!(c.resolved("agent-toolkit"), ["agent-toolkit", "inference", "platform", "infrastructure"]);
        assert!(Components::parse("").unwrap().components.is_empty(), "an empty manifest declares nothing");
    }
}
