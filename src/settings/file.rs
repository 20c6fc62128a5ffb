//! `eas.yaml` (schema eas-config/v1, data/eas-config.v1.schema.json): what a run selects,
//! declared once. Found with the global `--config FILE`, else `EAS_CONFIG`, else `./eas.yaml`
//! when it exists. Settings resolve flags, else environment, else this file, else the last
//! install, else defaults (`crate::settings::source`). Paths in it are relative to the file's
//! directory. It never holds a secret: a key that looks like one is refused, naming the variable
//! to set instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub const SCHEMA: &str = "eas-config/v1";
/// The variable naming the config file when `--config` is not given.
pub const ENV_VAR: &str = "EAS_CONFIG";
/// The file looked for in the working directory.
pub const DEFAULT_NAME: &str = "eas.yaml";

/// The keys of eas-config/v1 (the schema file lists the same; a test keeps them in step).
pub const KEYS: &[&str] = &[
    "schema",
    "kubeconfig",
    "context",
    "state_dir",
    "layer",
    "profile",
    "ref",
    "model",
    "env",
    "pins",
    "ca_bundle",
    "base_image",
    "allow_unpinned_base",
    "nodes",
    "offline",
    "timeouts",
    "mirrors",
];
/// The keys of those that are mappings.
pub const NESTED: &[(&str, &[&str])] = &[
    ("nodes", &["containerd_config", "nri_socket", "probe"]),
    ("timeouts", &["install", "verify"]),
    ("mirrors", &["eas", "ei", "eat"]),
];

/// What a key's value is (`nodes.probe`: a switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Text,
    /// A path, made absolute against the file's directory.
    Path,
    Switch,
    Seconds,
    /// NODE (`*`: every other node) to a copy of its containerd config.toml (a path).
    NodePaths,
    /// NODE to `present` or `absent`.
    NodeSockets,
    /// A mapping of the keys [`NESTED`] lists.
    Mapping,
}

fn type_of(key: &str) -> Type {
    match key {
        "kubeconfig" | "state_dir" | "pins" | "ca_bundle" | "mirrors.eas" | "mirrors.ei" | "mirrors.eat" => Type::Path,
        "allow_unpinned_base" | "offline" | "nodes.probe" => Type::Switch,
        "timeouts.install" | "timeouts.verify" => Type::Seconds,
        "nodes.containerd_config" => Type::NodePaths,
        "nodes.nri_socket" => Type::NodeSockets,
        "nodes" | "timeouts" | "mirrors" => Type::Mapping,
        _ => Type::Text,
    }
}

/// The file, read and checked: every value of its type, every path absolute. Read by key as
/// the schema spells it, nested keys dotted (`timeouts.install`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigFile {
    /// The file as the plan names it (`./eas.yaml`, or the path given).
    pub shown: PathBuf,
    /// The file, absolute (what a child eas is given as `--config`).
    pub path: PathBuf,
    values: BTreeMap<String, Value>,
}

impl ConfigFile {
    /// A text value (`context`, `layer`, `model`, `base_image`...).
    pub fn text(&self, key: &str) -> Option<String> {
        self.values.get(key)?.as_str().map(str::to_string)
    }

    /// A path, absolute.
    pub fn path(&self, key: &str) -> Option<PathBuf> {
        self.text(key).map(PathBuf::from)
    }

    pub fn switch(&self, key: &str) -> Option<bool> {
        self.values.get(key)?.as_bool()
    }

    pub fn seconds(&self, key: &str) -> Option<u64> {
        self.values.get(key)?.as_u64()
    }

    /// `nodes.containerd_config` or `nodes.nri_socket` as (node, value) pairs, in node order.
    pub fn nodes(&self, key: &str) -> Vec<(String, String)> {
        let Some(Value::Object(m)) = self.values.get(key) else { return Vec::new() };
        m.iter().map(|(n, v)| (n.clone(), v.as_str().unwrap_or_default().to_string())).collect()
    }
}

/// Why the config file cannot be used: bad input (exit 2), its cause one line naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{cause}")]
pub struct FileError {
    pub cause: String,
    pub hint: &'static str,
}

const SCHEMA_HINT: &str = "`eas schema eas-config/v1` lists every key; `eas init` writes a commented eas.yaml";

/// The config file this command reads: `--config` (`flag`), else `EAS_CONFIG` (`env_var`), else
/// `./eas.yaml` in `cwd` when it exists; None when there is none. A named file that is missing
/// is bad input.
pub fn find(flag: Option<&Path>, env_var: Option<&str>, cwd: &Path) -> Result<Option<ConfigFile>, FileError> {
    let named = flag.map(|p| (p.to_path_buf(), "--config")).or_else(|| env_var.map(|v| (PathBuf::from(v), ENV_VAR)));
    let (path, shown) = match named {
        Some((p, by)) if !cwd.join(&p).is_file() => {
            return Err(FileError {
                cause: format!("config file {} ({by}) not found", p.display()),
                hint: "name an existing eas.yaml, or write one with `eas init`",
            });
        }
        Some((p, _)) => (cwd.join(&p), p),
        None if cwd.join(DEFAULT_NAME).is_file() => (cwd.join(DEFAULT_NAME), Path::new(".").join(DEFAULT_NAME)),
        None => return Ok(None),
    };
    let text = crate::bounded::read_string(&path, crate::bounded::Kind::Config).map_err(|e| FileError {
        cause: format!("config file {}: {e}", shown.display()),
        hint: "name a readable eas.yaml",
    })?;
    let file = parse(&text, &shown, path.parent().unwrap_or(cwd))?;
    Ok(Some(ConfigFile { path: std::path::absolute(&path).unwrap_or(path), ..file }))
}

/// `text` as eas-config/v1: `shown` names the file in errors and in the plan, relative paths
/// are made absolute against `dir`. Pure.
pub fn parse(text: &str, shown: &Path, dir: &Path) -> Result<ConfigFile, FileError> {
    let bad = |cause: String| FileError { cause: format!("{}: {cause}", shown.display()), hint: SCHEMA_HINT };
    let map = match serde_saphyr::from_str(text) {
        Ok(Value::Null) => Default::default(),
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(bad("not a mapping of keys to values".into())),
        // The file holds no secret (they are refused), so the parser's message can be shown.
        Err(e) => return Err(bad(format!("not YAML: {}", e.to_string().lines().next().unwrap_or_default()))),
    };
    check_keys(&map, "", KEYS).map_err(bad)?;
    let mut values = BTreeMap::new();
    for (key, value) in map {
        match (NESTED.iter().find(|(k, _)| *k == key), value) {
            (Some((_, inner)), Value::Object(m)) => {
                check_keys(&m, &format!("{key}."), inner).map_err(bad)?;
                values.extend(m.into_iter().map(|(k, v)| (format!("{key}.{k}"), v)));
            }
            (_, value) => {
                values.insert(key, value);
            }
        }
    }
    for (key, value) in values.iter_mut() {
        *value = typed(type_of(key), value.take(), dir).map_err(|want| bad(format!("{key}: expected {want}")))?;
    }
    match values.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) => return Err(bad(format!("schema {other:?} is not {SCHEMA}"))),
        None => return Err(bad(format!("no `schema: {SCHEMA}` line"))),
    }
    if values.contains_key("profile") && values.contains_key("ref") {
        return Err(bad("both `profile` and `ref`: a run selects one".into()));
    }
    Ok(ConfigFile { shown: shown.to_path_buf(), path: dir.join(shown), values })
}

/// `value` checked as a `ty`, a path made absolute against `dir`; else what was expected.
fn typed(ty: Type, value: Value, dir: &Path) -> Result<Value, &'static str> {
    let path = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(|p| Value::from(dir.join(p).display().to_string()));
    let each = |v: Value, f: &dyn Fn(&Value) -> Option<Value>| match v {
        Value::Object(m) => m.into_iter().map(|(n, v)| Some((n, f(&v)?))).collect::<Option<serde_json::Map<_, _>>>(),
        _ => None,
    };
    let checked = match ty {
        Type::Text => value.is_string().then_some(value),
        Type::Path => path(&value),
        Type::Switch => value.is_boolean().then_some(value),
        Type::Seconds => value.is_u64().then_some(value),
        Type::NodePaths => each(value, &path).map(Value::Object),
        Type::NodeSockets => {
            each(value, &|v| v.as_str().filter(|s| ["present", "absent"].contains(s)).map(Value::from))
                .map(Value::Object)
        }
        Type::Mapping => None,
    };
    checked.ok_or(match ty {
        Type::Text => "a string",
        Type::Path => "a path",
        Type::Switch => "true or false",
        Type::Seconds => "a whole number of seconds",
        Type::NodePaths => "a mapping of node names (`*`: every other node) to containerd config.toml copies",
        Type::NodeSockets => "a mapping of node names to present or absent",
        Type::Mapping => "a mapping",
    })
}

/// Words that make a key a secret's: eas.yaml names where secrets come from, never holds one.
const SECRET_WORDS: &[&str] = &["token", "password", "secret", "passwd", "credential", "key"];

/// Every key of `map` is one of `known` (`prefix` names the mapping), else one line: the key,
/// and the nearest known key; a secret's key says where the secret goes instead.
fn check_keys(map: &serde_json::Map<String, Value>, prefix: &str, known: &[&str]) -> Result<(), String> {
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        let lower = key.to_ascii_lowercase();
        if SECRET_WORDS.iter().any(|w| lower.contains(w)) {
            return Err(format!(
                "`{prefix}{key}` looks like a secret, and secrets are never in eas.yaml: set it in the \
                 environment (HF_TOKEN for Hugging Face, the proxy's password in HTTPS_PROXY)"
            ));
        }
        let near = nearest(key, known).map(|k| format!(" (did you mean `{prefix}{k}`?)")).unwrap_or_default();
        return Err(format!("unknown key `{prefix}{key}`{near}"));
    }
    Ok(())
}

/// The known word nearest `word` by edit distance, when it is near enough to be a typo (at most
/// a third of its letters, and at least one, differ).
pub fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    known.iter().map(|k| (distance(word, k), *k)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, k)| k)
}

/// Levenshtein distance, case-insensitive (`Context` is a typo of `context`).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            let next = (row[j + 1] + 1).min(row[j] + 1).min(prev + cost);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<ConfigFile, String> {
        parse(text, Path::new("./eas.yaml"), Path::new("/srv/site")).map_err(|e| e.cause)
    }

    #[test]
    fn a_file_types_every_value_and_makes_its_paths_absolute_against_its_directory() {
        let f = parsed(
            "schema: eas-config/v1\ncontext: k3d-gpu\nlayer: inference\npins: pins.json\nca_bundle: /etc/ca.pem\n\
             nodes:\n  containerd_config:\n    '*': nodes/c.toml\n  nri_socket:\n    n1: absent\n\
             timeouts:\n  install: 600\nmirrors:\n  eas: ../eas\n",
        )
        .unwrap();
        assert_eq!(f.text("context").as_deref(), Some("k3d-gpu"));
        assert_eq!(f.path("pins"), Some(PathBuf::from("/srv/site/pins.json")));
        assert_eq!(f.path("ca_bundle"), Some(PathBuf::from("/etc/ca.pem")), "an absolute path is kept");
        assert_eq!(f.nodes("nodes.containerd_config"), [("*".to_string(), "/srv/site/nodes/c.toml".to_string())]);
        assert_eq!(f.nodes("nodes.nri_socket"), [("n1".to_string(), "absent".to_string())]);
        assert_eq!((f.seconds("timeouts.install"), f.seconds("timeouts.verify")), (Some(600), None));
        assert_eq!(f.path("mirrors.eas"), Some(PathBuf::from("/srv/site/../eas")));
        assert_eq!(f.shown, PathBuf::from("./eas.yaml"));
        assert_eq!(parsed("schema: eas-config/v1\n").unwrap().text("layer"), None, "a key left out is unset");
    }

    #[test]
    fn an_unknown_key_names_the_nearest_known_one_and_a_secret_says_where_it_goes() {
        let err = |t: &str| parsed(&format!("schema: eas-config/v1\n{t}")).unwrap_err();
        assert_eq!(err("contxt: a\n"), "./eas.yaml: unknown key `contxt` (did you mean `context`?)");
        assert_eq!(
            err("timeouts:\n  instal: 5\n"),
            "./eas.yaml: unknown key `timeouts.instal` (did you mean `timeouts.install`?)"
        );
        assert_eq!(err("colour: red\n"), "./eas.yaml: unknown key `colour`", "nothing near: no guess");
        assert!(err("hf_token: x\n").contains("`hf_token` looks like a secret"), "{}", err("hf_token: x\n"));
        assert!(
            err("nodes:\n  probe: yes-please\n").starts_with("./eas.yaml: nodes.probe: "),
            "{}",
            err("nodes:\n  probe: yes-please\n")
        );
        assert!(err("profile: main\nref: abc\n").contains("both `profile` and `ref`"));
        assert!(parsed("layer: inference\n").unwrap_err().contains("no `schema: eas-config/v1` line"));
        assert!(parsed("schema: eas-config/v2\n").unwrap_err().contains("\"eas-config/v2\" is not eas-config/v1"));
        assert!(parsed("- a\n").unwrap_err().contains("not a mapping"));
        assert!(parsed("schema: [\n").unwrap_err().starts_with("./eas.yaml: not YAML: "));
    }

    /// The keys this module reads are the schema's (`eas schema eas-config/v1`), nested ones too.
    #[test]
    fn the_keys_are_the_schemas() {
        let schema: Value = serde_json::from_str(crate::schemas::find(SCHEMA).unwrap().1).unwrap();
        let keys = |v: &Value| v["properties"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let mut top = keys(&schema);
        top.sort();
        let mut ours: Vec<String> = KEYS.iter().map(|k| k.to_string()).collect();
        ours.sort();
        assert_eq!(top, ours);
        for (key, inner) in NESTED {
            let mut theirs = keys(&schema["properties"][key]);
            theirs.sort();
            let mut ours: Vec<String> = inner.iter().map(|k| k.to_string()).collect();
            ours.sort();
            assert_eq!(theirs, ours, "{key}");
        }
    }

    #[test]
    fn the_file_is_the_flag_else_the_variable_else_eas_yaml_here() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find(None, None, dir.path()).unwrap(), None, "no file anywhere: none");
        std::fs::write(dir.path().join("eas.yaml"), "schema: eas-config/v1\ncontext: here\n").unwrap();
        std::fs::write(dir.path().join("other.yaml"), "schema: eas-config/v1\ncontext: other\n").unwrap();
        let here = find(None, None, dir.path()).unwrap().unwrap();
        assert_eq!((here.text("context").as_deref(), here.shown.to_str()), (Some("here"), Some("./eas.yaml")));
        assert_eq!(here.path, std::path::absolute(dir.path().join("eas.yaml")).unwrap());
        let by_env = find(None, Some("other.yaml"), dir.path()).unwrap().unwrap();
        assert_eq!(by_env.text("context").as_deref(), Some("other"));
        let by_flag = find(Some(Path::new("eas.yaml")), Some("other.yaml"), dir.path()).unwrap().unwrap();
        assert_eq!(by_flag.text("context").as_deref(), Some("here"), "the flag wins over the variable");
        let missing = find(Some(Path::new("nope.yaml")), None, dir.path()).unwrap_err();
        assert_eq!(missing.cause, "config file nope.yaml (--config) not found");
        assert!(find(None, Some("nope.yaml"), dir.path()).unwrap_err().cause.contains("(EAS_CONFIG)"));
    }
}
