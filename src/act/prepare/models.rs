//! Applying `models.edit.yaml` to `env/<env>/models.yaml`, the environment's copy of EI's model
//! catalog, as text edits that keep its comments.
//!
//! `defaults.require_amx` is set (and `network.no_proxy`, with a proxy); each edit entry finds the catalog entry with its `name`;
//! `autodeploy`, `memory` and `cpu` are set in place or added; `env` keys are replaced or added; `args_append` goes after the catalog's `args`. EI's model-manager
//! de-duplicates args by flag name with the last occurrence winning, so an appended
//! `--max-model-len N` overrides an earlier one, which is therefore left in place. Appended
//! items carry a marker comment, so a second application finds them and changes nothing (or
//! replaces them when the edit changed). Every result is read back with a YAML parser and must
//! equal the intended catalog.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::act::prepare::lines::{self, Kind, Line};
use crate::config::render::quote;

/// The comment on each `args` item this edit appended.
pub const APPENDED: &str = "# appended by eas";

/// `models.edit.yaml`, as `config::render::models_edit` writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsEdit {
    pub defaults: EditDefaults,
    /// With a proxy: `network.no_proxy`, which model-manager prefers to the environment's.
    #[serde(default)]
    pub network: Option<EditNetwork>,
    #[serde(default)]
    pub models: Vec<ModelEntryEdit>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditNetwork {
    pub no_proxy: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditDefaults {
    pub require_amx: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntryEdit {
    pub name: String,
    /// Sets the entry's `autodeploy: true`, which EI's install reads to deploy it.
    #[serde(default)]
    pub autodeploy: bool,
    /// Replaces the entry's `memory` (EI renders it as the pod's request and limit).
    #[serde(default)]
    pub memory: Option<String>,
    /// Replaces the entry's `cpu` (request and limit too).
    #[serde(default)]
    pub cpu: Option<serde_json::Number>,
    /// In the edit file's order.
    #[serde(default, deserialize_with = "string_map")]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub args_append: Vec<String>,
}

fn string_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    let map = Option::<Map<String, Value>>::deserialize(d)?.unwrap_or_default();
    map.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            other => Err(serde::de::Error::custom(format!("env {k}: expected a quoted string, found {other}"))),
        })
        .collect()
}

impl ModelsEdit {
    pub fn parse(text: &str) -> Result<ModelsEdit, ModelsError> {
        serde_saphyr::from_str(text).map_err(|e| ModelsError::EditParse(first_line(&e)))
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelsError {
    #[error("models.edit.yaml: {0}")]
    EditParse(String),
    #[error("models.yaml is not YAML: {0}")]
    Parse(String),
    #[error("models.yaml is not a map of top-level keys (found {found})")]
    NotAMap { found: String },
    #[error("models.yaml line {line}: a tab outside a comment")]
    Tab { line: usize },
    #[error("models.yaml has no top-level `models:` list, expected the entry {name:?}")]
    NoModels { name: String },
    #[error("models.yaml has no model named {name:?} (it has: {})", .available.join(", "))]
    UnknownModel { name: String, available: Vec<String> },
    #[error("models.yaml names {name:?} more than once")]
    DuplicateModel { name: String },
    #[error("models.yaml line {line}: {what} is {why}; eas edits only block-style YAML")]
    Unsupported { what: String, line: usize, why: String },
    #[error("the edited models.yaml does not read back as intended: {0}")]
    Verify(String),
}

impl ModelsError {
    /// What the user can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            ModelsError::EditParse(_) => "regenerate it with `eas config` (or `eas up`)",
            ModelsError::UnknownModel { .. } | ModelsError::NoModels { .. } => {
                "the catalog at the pinned EI commit is not the one eas expects: pick a listed model with --model, or check the pins"
            }
            _ => {
                "restore env/<env>/models.yaml from the catalog (delete it and re-run `eas up`, which re-seeds it with init)"
            }
        }
    }
}

fn first_line(e: &impl std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// Line edits, applied at once so indices stay those of the original text.
#[derive(Default)]
struct Ops {
    /// Line index → its new text, or None to drop it.
    replace: BTreeMap<usize, Option<String>>,
    /// Line index → groups of lines inserted before it (`len` inserts at the end).
    insert: BTreeMap<usize, Vec<Group>>,
}

/// Lines inserted together. Groups at one place are ordered deepest first, and a group that
/// extends an existing block before one that opens a new key at the same indent, so that an
/// entry's last block is continued before a sibling key follows it.
struct Group {
    indent: usize,
    extends: bool,
    lines: Vec<String>,
}

impl Ops {
    fn insert(&mut self, at: usize, extends: bool, new: impl IntoIterator<Item = String>) {
        let lines: Vec<String> = new.into_iter().collect();
        let indent = lines.first().map_or(0, |l| l.len() - l.trim_start_matches(' ').len());
        let groups = self.insert.entry(at).or_default();
        groups.push(Group { indent, extends, lines });
        groups.sort_by_key(|g| (std::cmp::Reverse(g.indent), !g.extends));
    }

    fn inserted(&self, at: usize) -> impl Iterator<Item = &String> {
        self.insert.get(&at).into_iter().flatten().flat_map(|g| &g.lines)
    }

    fn apply(&self, lines: &[Line]) -> String {
        let mut out = String::new();
        let mut emit = |s: &str| {
            out.push_str(s);
            out.push('\n');
        };
        for (i, l) in lines.iter().enumerate() {
            for s in self.inserted(i) {
                emit(s);
            }
            match self.replace.get(&i) {
                Some(Some(s)) => emit(s),
                Some(None) => {}
                None => emit(&l.text),
            }
        }
        for s in self.inserted(lines.len()) {
            emit(s);
        }
        out
    }
}

/// A `key:` line: where it is, the column its key starts at, and its parts.
struct KeyLine {
    idx: usize,
    col: usize,
    key: String,
    value: String,
    /// The line without its value (`key:` and any comment).
    bare: String,
}

fn key_line(lines: &[Line], idx: usize, col: usize) -> Option<KeyLine> {
    let text = &lines[idx].text;
    let kv = lines::key_value(text.get(col..)?)?;
    let head = &text[..col + kv.after_colon];
    let comment = kv.comment.trim_start();
    let bare = if comment.is_empty() { head.to_string() } else { format!("{head}  {comment}") };
    Some(KeyLine { idx, col, key: kv.key.clone(), value: kv.value.to_string(), bare })
}

fn set_value(lines: &[Line], k: &KeyLine, value: &str) -> String {
    let kv = lines::key_value(&lines[k.idx].text[k.col..]).expect("a key line");
    lines::with_value(&lines[k.idx].text, k.col, &kv, value)
}

/// The end of the value block of the key at `col` on line `idx`. A sequence may sit at the
/// key's own indent (`args:` then `- x` below it at the same column).
fn value_end(lines: &[Line], idx: usize, col: usize) -> usize {
    let first = (idx + 1..lines.len()).find(|&i| matches!(lines[i].kind, Kind::Content | Kind::DocMarker));
    if let Some(f) = first
        && lines[f].kind == Kind::Content
        && lines[f].indent == col
        && lines::dash_item(&lines[f].text[col..]).is_some()
    {
        return (f + 1..lines.len())
            .find(|&i| {
                let l = &lines[i];
                match l.kind {
                    Kind::DocMarker => true,
                    Kind::Content => l.indent < col || (l.indent == col && lines::dash_item(&l.text[col..]).is_none()),
                    _ => false,
                }
            })
            .unwrap_or(lines.len());
    }
    lines::block_end(lines, idx, col)
}

/// The keys of the map whose keys start at `col` within `lines[from..to]`.
fn keys_at(lines: &[Line], from: usize, to: usize, col: usize) -> Vec<KeyLine> {
    (from..to)
        .filter(|&i| lines[i].is_content() && lines[i].indent == col)
        .filter_map(|i| key_line(lines, i, col))
        .collect()
}

/// The indent of the first content line in `lines[from..to]`, or `default`.
fn child_indent(lines: &[Line], from: usize, to: usize, default: usize) -> usize {
    (from..to).find(|&i| lines[i].is_content()).map_or(default, |i| lines[i].indent)
}

fn plain_key(k: &str) -> String {
    let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
    if plain { k.to_string() } else { quote(k) }
}

/// One catalog entry as found in the text.
struct Item {
    /// The dash line.
    start: usize,
    end: usize,
    /// The column its keys start at.
    col: usize,
    keys: Vec<KeyLine>,
}

/// Applies `edit` to the catalog text `models_yaml`.
pub fn apply_models_edit(models_yaml: &str, edit: &ModelsEdit) -> Result<String, ModelsError> {
    let before = match serde_saphyr::from_str::<Value>(models_yaml) {
        Ok(Value::Object(m)) => m,
        Ok(Value::Null) => Map::new(),
        Ok(other) => {
            return Err(ModelsError::NotAMap { found: short(&other) });
        }
        Err(e) => return Err(ModelsError::Parse(first_line(&e))),
    };
    let lines = lines::scan(models_yaml);
    if let Some(line) = lines::first_tab(&lines) {
        return Err(ModelsError::Tab { line });
    }
    let mut ops = Ops::default();
    let mut expected = before.clone();
    let top = keys_at(&lines, 0, lines.len(), 0);

    if !edit.models.is_empty() {
        edit_models(&lines, &top, &before, edit, &mut ops, &mut expected)?;
    }
    // After the models: an appended `defaults:` then follows any lines appended to the last entry.
    let amx = edit.defaults.require_amx;
    edit_section_key(&lines, &top, ("defaults", "require_amx"), &amx.to_string(), &mut ops)?;
    expect_key(&mut expected, "defaults", "require_amx", Value::Bool(amx));
    if let Some(n) = &edit.network {
        edit_section_key(&lines, &top, ("network", "no_proxy"), &quote(&n.no_proxy), &mut ops)?;
        expect_key(&mut expected, "network", "no_proxy", Value::String(n.no_proxy.clone()));
    }

    let text = ops.apply(&lines);
    let after: Value = serde_saphyr::from_str(&text).map_err(|e| ModelsError::Verify(first_line(&e)))?;
    if after != Value::Object(expected.clone()) {
        return Err(ModelsError::Verify(difference(&Value::Object(expected), &after)));
    }
    Ok(text)
}

fn short(v: &Value) -> String {
    match v {
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a map".into(),
        other => format!("the scalar {other}"),
    }
}

fn difference(want: &Value, got: &Value) -> String {
    if let (Value::Object(w), Value::Object(g)) = (want, got) {
        for (k, wv) in w {
            match g.get(k) {
                Some(gv) if gv == wv => {}
                Some(gv) => return format!("`{k}` is {}, expected {}", compact(gv), compact(wv)),
                None => return format!("`{k}` is missing"),
            }
        }
        if let Some(k) = g.keys().find(|k| !w.contains_key(*k)) {
            return format!("unexpected key `{k}`");
        }
    }
    format!("found {}, expected {}", compact(got), compact(want))
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 160 { format!("{}…", &s[..s.floor_char_boundary(160)]) } else { s }
}

/// What the edited catalog must hold at `section.key`.
fn expect_key(expected: &mut Map<String, Value>, section: &str, key: &str, value: Value) {
    let s = expected.entry(section).or_insert(Value::Null);
    if !s.is_object() {
        *s = Value::Object(Map::new());
    }
    s[key] = value;
}

/// Sets `section.key` (a top-level map's scalar) to the YAML text `value`, in place or added,
/// adding the section at the end when the catalog has none.
fn edit_section_key(
    lines: &[Line],
    top: &[KeyLine],
    (section, key): (&str, &str),
    value: &str,
    ops: &mut Ops,
) -> Result<(), ModelsError> {
    let Some(d) = top.iter().find(|k| k.key == section) else {
        ops.insert(lines.len(), false, [format!("{section}:"), format!("  {key}: {value}")]);
        return Ok(());
    };
    let unsupported =
        |why: &str| ModelsError::Unsupported { what: section.to_string(), line: d.idx + 1, why: why.into() };
    if let Some(why) = lines::uneditable(&d.value) {
        return Err(unsupported(why));
    }
    if !d.value.is_empty() {
        return Err(unsupported("a scalar, not a map"));
    }
    let end = lines::block_end(lines, d.idx, 0);
    let col = child_indent(lines, d.idx + 1, end, 2);
    match keys_at(lines, d.idx + 1, end, col).into_iter().find(|k| k.key == key) {
        Some(k) => {
            if let Some(why) = lines::uneditable(&k.value) {
                return Err(ModelsError::Unsupported {
                    what: format!("{section}.{key}"),
                    line: k.idx + 1,
                    why: why.into(),
                });
            }
            ops.replace.insert(k.idx, Some(set_value(lines, &k, value)));
        }
        None => {
            let at = lines::content_end(lines, d.idx + 1, end).max(d.idx + 1);
            ops.insert(at, true, [format!("{}{key}: {value}", " ".repeat(col))]);
        }
    }
    Ok(())
}

fn edit_models(
    lines: &[Line],
    top: &[KeyLine],
    before: &Map<String, Value>,
    edit: &ModelsEdit,
    ops: &mut Ops,
    expected: &mut Map<String, Value>,
) -> Result<(), ModelsError> {
    let first = &edit.models[0].name;
    let Some(m) = top.iter().find(|k| k.key == "models") else {
        return Err(ModelsError::NoModels { name: first.clone() });
    };
    let entries: Vec<Value> = match before.get("models") {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::Null) => Vec::new(),
        _ => {
            return Err(ModelsError::Unsupported { what: "models".into(), line: m.idx + 1, why: "not a list".into() });
        }
    };
    if m.value == "[]" || entries.is_empty() {
        return Err(ModelsError::UnknownModel { name: first.clone(), available: Vec::new() });
    }
    if let Some(why) = lines::uneditable(&m.value) {
        return Err(ModelsError::Unsupported { what: "models".into(), line: m.idx + 1, why: why.into() });
    }
    let items = items(lines, m)?;
    if items.len() != entries.len() {
        return Err(ModelsError::Unsupported {
            what: "models".into(),
            line: m.idx + 1,
            why: format!("a list of {} entries, but {} item lines were found", entries.len(), items.len()),
        });
    }
    let names: Vec<Option<&str>> = entries.iter().map(|e| e.get("name").and_then(Value::as_str)).collect();
    let Value::Array(out_entries) = expected.get_mut("models").expect("checked above") else { unreachable!() };
    for e in &edit.models {
        let found: Vec<usize> = (0..names.len()).filter(|&i| names[i] == Some(e.name.as_str())).collect();
        let i = match found.as_slice() {
            [i] => *i,
            [] => {
                let available = names.iter().flatten().map(|s| s.to_string()).collect();
                return Err(ModelsError::UnknownModel { name: e.name.clone(), available });
            }
            _ => {
                return Err(ModelsError::DuplicateModel { name: e.name.clone() });
            }
        };
        let entry = out_entries[i].as_object_mut().ok_or_else(|| ModelsError::Unsupported {
            what: format!("model {}", e.name),
            line: items[i].start + 1,
            why: "not a map".into(),
        })?;
        if !e.env.is_empty() {
            edit_env(lines, &items[i], e, ops)?;
            let env = entry.entry("env").or_insert(Value::Null);
            if !env.is_object() {
                *env = Value::Object(Map::new());
            }
            for (k, v) in &e.env {
                env[k.as_str()] = Value::String(v.clone());
            }
        }
        if e.autodeploy {
            edit_scalar(lines, &items[i], e, "autodeploy", "true", ops)?;
            entry.insert("autodeploy".into(), Value::Bool(true));
        }
        if let Some(mem) = &e.memory {
            edit_scalar(lines, &items[i], e, "memory", &quote(mem), ops)?;
            entry.insert("memory".into(), Value::String(mem.clone()));
        }
        if let Some(cpu) = &e.cpu {
            edit_scalar(lines, &items[i], e, "cpu", &cpu.to_string(), ops)?;
            entry.insert("cpu".into(), Value::Number(cpu.clone()));
        }
        if !e.args_append.is_empty() {
            let current: Vec<Value> = entry.get("args").and_then(Value::as_array).cloned().unwrap_or_default();
            let args = edit_args(lines, &items[i], e, &current, ops)?;
            entry.insert("args".into(), Value::Array(args));
        }
    }
    Ok(())
}

/// The entries of the `models:` list, from their dash lines.
fn items(lines: &[Line], m: &KeyLine) -> Result<Vec<Item>, ModelsError> {
    let end = value_end(lines, m.idx, 0);
    let Some(first) = (m.idx + 1..end).find(|&i| lines[i].is_content()) else {
        return Ok(Vec::new());
    };
    let dash = lines[first].indent;
    let starts: Vec<usize> = (first..end)
        .filter(|&i| {
            lines[i].is_content() && lines[i].indent == dash && lines::dash_item(&lines[i].text[dash..]).is_some()
        })
        .collect();
    let mut out = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        let item_end = starts.get(n + 1).copied().unwrap_or(end);
        let text = &lines[start].text;
        let rest = lines::dash_item(&text[dash..]).expect("a dash line");
        let what = || format!("models item {}", n + 1);
        if let Some(why) = lines::uneditable(rest) {
            return Err(ModelsError::Unsupported { what: what(), line: start + 1, why: why.into() });
        }
        let (col, keys_from) = if lines::split_comment(rest).0.trim().is_empty() {
            (child_indent(lines, start + 1, item_end, dash + 2), start + 1)
        } else if lines::key_value(rest).is_some() {
            (text.len() - rest.len(), start)
        } else {
            return Err(ModelsError::Unsupported { what: what(), line: start + 1, why: "a scalar, not a map".into() });
        };
        let mut keys = Vec::new();
        if keys_from == start {
            keys.extend(key_line(lines, start, col));
        }
        keys.extend(keys_at(lines, start + 1, item_end, col));
        out.push(Item { start, end: item_end, col, keys });
    }
    Ok(out)
}

fn edit_env(lines: &[Line], item: &Item, e: &ModelEntryEdit, ops: &mut Ops) -> Result<(), ModelsError> {
    let pad = " ".repeat(item.col);
    let render = |col: usize| -> Vec<String> {
        e.env.iter().map(|(k, v)| format!("{}{}: {}", " ".repeat(col), plain_key(k), quote(v))).collect()
    };
    let Some(env) = item.keys.iter().find(|k| k.key == "env") else {
        let at = lines::content_end(lines, item.start, item.end);
        ops.insert(at, false, std::iter::once(format!("{pad}env:")).chain(render(item.col + 2)));
        return Ok(());
    };
    let what = || format!("the env of model {}", e.name);
    if env.value == "{}" {
        ops.replace.insert(env.idx, Some(env.bare.clone()));
        ops.insert(env.idx + 1, true, render(env.col + 2));
        return Ok(());
    }
    if let Some(why) = lines::uneditable(&env.value) {
        return Err(ModelsError::Unsupported { what: what(), line: env.idx + 1, why: why.into() });
    }
    if !env.value.is_empty() {
        return Err(ModelsError::Unsupported { what: what(), line: env.idx + 1, why: "a scalar, not a map".into() });
    }
    let end = lines::block_end(lines, env.idx, env.col);
    let col = child_indent(lines, env.idx + 1, end, env.col + 2);
    let existing = keys_at(lines, env.idx + 1, end, col);
    let mut added = Vec::new();
    for (k, v) in &e.env {
        match existing.iter().find(|x| &x.key == k) {
            Some(x) => {
                let multi = x.value.is_empty()
                    && lines::content_end(lines, x.idx + 1, lines::block_end(lines, x.idx, col)) > x.idx + 1;
                if let Some(why) = lines::uneditable(&x.value).or(multi.then_some("a nested block")) {
                    let what = format!("env {k} of model {}", e.name);
                    return Err(ModelsError::Unsupported { what, line: x.idx + 1, why: why.into() });
                }
                ops.replace.insert(x.idx, Some(set_value(lines, x, &quote(v))));
            }
            None => added.push(format!("{}{}: {}", " ".repeat(col), plain_key(k), quote(v))),
        }
    }
    if !added.is_empty() {
        let at = lines::content_end(lines, env.idx + 1, end).max(env.idx + 1);
        ops.insert(at, true, added);
    }
    Ok(())
}

/// Sets a scalar key (`autodeploy`, `memory`, `cpu`) on the entry, in place or as a new key
/// after its last line.
fn edit_scalar(
    lines: &[Line],
    item: &Item,
    e: &ModelEntryEdit,
    key: &str,
    value: &str,
    ops: &mut Ops,
) -> Result<(), ModelsError> {
    match item.keys.iter().find(|k| k.key == key) {
        Some(k) => {
            if let Some(why) = lines::uneditable(&k.value) {
                let what = format!("{key} of model {}", e.name);
                return Err(ModelsError::Unsupported { what, line: k.idx + 1, why: why.into() });
            }
            ops.replace.insert(k.idx, Some(set_value(lines, k, value)));
        }
        None => {
            let at = lines::content_end(lines, item.start, item.end);
            ops.insert(at, false, [format!("{}{key}: {value}", " ".repeat(item.col))]);
        }
    }
    Ok(())
}

/// Appends `args_append` after the catalog's args; returns the args the entry ends up with.
fn edit_args(
    lines: &[Line],
    item: &Item,
    e: &ModelEntryEdit,
    current: &[Value],
    ops: &mut Ops,
) -> Result<Vec<Value>, ModelsError> {
    let appended = || e.args_append.iter().cloned().map(Value::String);
    let render = |col: usize| -> Vec<String> {
        e.args_append.iter().map(|a| format!("{}- {}  {APPENDED}", " ".repeat(col), quote(a))).collect()
    };
    let as_strings = |vals: &[Value]| -> Vec<String> {
        vals.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect()
    };
    let Some(args) = item.keys.iter().find(|k| k.key == "args") else {
        let at = lines::content_end(lines, item.start, item.end);
        ops.insert(at, false, std::iter::once(format!("{}args:", " ".repeat(item.col))).chain(render(item.col + 2)));
        return Ok(appended().collect());
    };
    let what = || format!("the args of model {}", e.name);
    if args.value == "[]" {
        ops.replace.insert(args.idx, Some(args.bare.clone()));
        ops.insert(args.idx + 1, true, render(args.col + 2));
        return Ok(appended().collect());
    }
    if let Some(why) = lines::uneditable(&args.value) {
        return Err(ModelsError::Unsupported { what: what(), line: args.idx + 1, why: why.into() });
    }
    if !args.value.is_empty() {
        return Err(ModelsError::Unsupported { what: what(), line: args.idx + 1, why: "a scalar, not a list".into() });
    }
    let end = value_end(lines, args.idx, args.col);
    let col = child_indent(lines, args.idx + 1, end, args.col + 2);
    let mut item_lines = Vec::new();
    for i in (args.idx + 1..end).filter(|&i| lines[i].is_content() || lines[i].kind == Kind::ScalarBody) {
        let l = &lines[i];
        let rest = l.text.get(col..).and_then(lines::dash_item);
        match rest {
            Some(rest) if l.indent == col && lines::uneditable(rest).is_none() => item_lines.push(i),
            _ => {
                let why = if l.indent == col && rest.is_some() {
                    "an item that is not a single-line string"
                } else {
                    "an item that spans several lines"
                };
                return Err(ModelsError::Unsupported { what: what(), line: i + 1, why: why.into() });
            }
        }
    }
    if item_lines.len() != current.len() {
        return Err(ModelsError::Unsupported {
            what: what(),
            line: args.idx + 1,
            why: format!("a list of {} items, but {} item lines were found", current.len(), item_lines.len()),
        });
    }
    let marked =
        item_lines.iter().rev().take_while(|&&i| lines::split_comment(&lines[i].text).1.trim() == APPENDED).count();
    let base = as_strings(&current[..current.len() - marked]);
    let tail = as_strings(&current[current.len() - marked..]);
    if (marked > 0 && tail == e.args_append) || (marked == 0 && base.ends_with(&e.args_append)) {
        // Appended by an earlier application, or the catalog already ends with these args:
        // appending them (again) would change nothing.
        return Ok(current.to_vec());
    }
    for &i in &item_lines[item_lines.len() - marked..] {
        ops.replace.insert(i, None);
    }
    let at = match item_lines.get(item_lines.len() - marked) {
        Some(&first_marked) => first_marked,
        None => item_lines.last().map_or(args.idx + 1, |&i| i + 1),
    };
    ops.insert(at, true, render(col));
    Ok(current[..current.len() - marked].iter().cloned().chain(appended()).collect())
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
