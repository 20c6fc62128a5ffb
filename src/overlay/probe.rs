//! `fixed` probes: does upstream's file already do what a patch does? Pure text in, a line out.
//!
//! Two forms. `contains` (every string occurs somewhere) is kept for rows whose strings cannot
//! occur by accident. `yaml_path` reads the file as YAML and matches only the exact values path:
//! a mapping chain such as `values` → `global` → `platform` (or a Helm `set_values` item
//! `global.platform=…`) whose value is templated from `value_mentions`. A comment or an
//! unrelated `when:` that happens to hold the same words never matches.

use serde_json::Value;

use super::data::Probe;

/// The 1-based line the probe matched at, or `None`.
pub fn matches(p: &Probe, text: &str) -> Option<u32> {
    if !p.yaml_path.is_empty() {
        let mention = p.value_mentions.as_deref().unwrap_or_default();
        return yaml_match(text, &p.yaml_path, mention);
    }
    if p.contains.is_empty() || !p.contains.iter().all(|s| text.contains(s.as_str())) {
        return None;
    }
    let first = &p.contains[0];
    Some(text.lines().position(|l| l.contains(first.as_str())).map(|i| i as u32 + 1).unwrap_or(1))
}

/// What the probe looks for, for the decision's fact.
pub fn describe(p: &Probe) -> String {
    if p.yaml_path.is_empty() {
        let q: Vec<String> = p.contains.iter().map(|s| format!("{s:?}")).collect();
        format!("{} contains {}", p.path, q.join(", "))
    } else {
        format!("{} sets {} from {}", p.path, p.yaml_path.join("."), p.value_mentions.as_deref().unwrap_or_default())
    }
}

fn yaml_match(text: &str, path: &[String], mention: &str) -> Option<u32> {
    let doc: Value = serde_saphyr::from_str(text).ok()?;
    let (head, rest) = path.split_first()?;
    let dotted = format!("{}=", rest.join("."));
    let mut hit = false;
    walk(&doc, &mut |map| {
        // `head: {rest...: value}`, e.g. `values: {global: {platform: "{{ istio_platform }}"}}`.
        if let Some(v) = map.get(head.as_str())
            && let Some(leaf) = follow(v, rest)
            && templated_from(leaf, mention)
        {
            hit = true;
        }
        // `head: "{{ {'global': {'platform': istio_platform}} … }}"`: a Jinja dict literal, the
        // form 0002's own patch writes.
        if let Some(Value::String(expr)) = map.get(head.as_str())
            && jinja_dict_path(expr, rest, mention)
        {
            hit = true;
        }
        // Helm's `set_values: [{value: "global.platform={{ istio_platform }}"}]`.
        if let Some(Value::Array(items)) = map.get("set_values") {
            for it in items {
                if let Some(Value::String(s)) = it.get("value")
                    && let Some(v) = s.strip_prefix(dotted.as_str())
                    && templated_from(&Value::String(v.to_string()), mention)
                {
                    hit = true;
                }
            }
        }
    });
    if !hit {
        return None;
    }
    Some(line_of(text, path))
}

fn walk(v: &Value, f: &mut dyn FnMut(&serde_json::Map<String, Value>)) {
    match v {
        Value::Object(m) => {
            f(m);
            for x in m.values() {
                walk(x, f);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        _ => {}
    }
}

fn follow<'a>(mut v: &'a Value, keys: &[String]) -> Option<&'a Value> {
    for k in keys {
        v = v.as_object()?.get(k.as_str())?;
    }
    Some(v)
}

/// A Jinja expression (`{{ … }}`) that names the variable as a whole word.
fn templated_from(v: &Value, var: &str) -> bool {
    let Value::String(s) = v else { return false };
    let mut rest = s.as_str();
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { return false };
        let expr = &after[..close];
        if has_word(expr, var) {
            return true;
        }
        rest = &after[close + 2..];
    }
    false
}

/// `{'global': {'platform': <expr naming var>` inside `{{ … }}`, whitespace and quote style aside.
fn jinja_dict_path(s: &str, keys: &[String], var: &str) -> bool {
    let norm: String = s.chars().filter(|c| !c.is_whitespace()).map(|c| if c == '"' { '\'' } else { c }).collect();
    if !norm.contains("{{") {
        return false;
    }
    let chain: String = keys.iter().map(|k| format!("'{k}':")).collect::<Vec<_>>().join("{");
    norm.match_indices(&chain).any(|(i, _)| {
        let value = &norm[i + chain.len()..];
        let end = value.find(['}', ',']).unwrap_or(value.len());
        has_word(&value[..end], var)
    })
}

fn has_word(hay: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    hay.match_indices(word).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The line of the path's last key, found after its parent key's line (for the citation).
fn line_of(text: &str, path: &[String]) -> u32 {
    let lines: Vec<&str> = text.lines().collect();
    let key = |l: &str, k: &str| l.trim_start().trim_start_matches("- ").starts_with(&format!("{k}:"));
    let mut from = 0;
    let mut found = None;
    for (depth, k) in path.iter().enumerate() {
        match lines[from..].iter().position(|l| key(l, k)) {
            Some(i) => {
                found = Some(from + i);
                from += i + 1;
            }
            None if depth > 0 => break,
            None => {}
        }
    }
    if let Some(i) = found {
        return i as u32 + 1;
    }
    let dotted = path[1..].join(".");
    lines.iter().position(|l| l.contains(&dotted)).map(|i| i as u32 + 1).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe() -> Probe {
        Probe {
            path: "t.yaml".into(),
            contains: vec![],
            yaml_path: vec!["values".into(), "global".into(), "platform".into()],
            value_mentions: Some("istio_platform".into()),
        }
    }

    const TASK: &str = "- name: install\n  kubernetes.core.helm:\n    name: istiod\n";

    #[test]
    fn the_exact_values_path_matches_and_cites_its_line() {
        let t = format!("{TASK}    values:\n      global:\n        platform: \"{{{{ istio_platform }}}}\"\n");
        assert_eq!(matches(&probe(), &t), Some(6));
        let set = format!("{TASK}    set_values:\n      - value: \"global.platform={{{{ istio_platform }}}}\"\n");
        assert!(matches(&probe(), &set).is_some());
        let dict = format!("{TASK}    values: \"{{{{ {{'global': {{'platform': istio_platform}}}} }}}}\"\n");
        assert!(matches(&probe(), &dict).is_some(), "{dict}");
    }

    #[test]
    fn decoys_do_not_match() {
        // A comment naming "global" and a `when:` naming istio_platform (the 0002 decoy).
        let decoy = format!("# mesh-wide (global) settings\n{TASK}  when: istio_platform | length > 0\n");
        assert_eq!(matches(&probe(), &decoy), None);
        // The path set from another variable, or to a constant.
        let other = format!("{TASK}    values:\n      global:\n        platform: \"{{{{ istio_platform_x }}}}\"\n");
        assert_eq!(matches(&probe(), &other), None);
        let constant = format!("{TASK}    values:\n      global:\n        platform: istio_platform\n");
        assert_eq!(matches(&probe(), &constant), None);
        // The right value on another path.
        let elsewhere = format!("{TASK}    values:\n      cni:\n        platform: \"{{{{ istio_platform }}}}\"\n");
        assert_eq!(matches(&probe(), &elsewhere), None);
        assert_eq!(matches(&probe(), "not: [yaml"), None);
        let dict = format!("{TASK}    values: \"{{{{ {{'global': {{'other': istio_platform}}}} }}}}\"\n");
        assert_eq!(matches(&probe(), &dict), None);
    }
}
