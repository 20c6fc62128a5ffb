//! The selection an install resolved (issue 32, item 3), kept in its `state.json`: what a later
//! run on the same cluster fills its unset settings from once preflight has identified the
//! cluster, so `eas up --yes` with no flags after an install plans the same install. Keyed as
//! `eas.yaml` and the plan's settings name them (`layer`, `env`, `ca_bundle`, `eas_repo`...);
//! never a secret (a token, a proxy password stay in the environment), never the pins (they
//! resolve as SPEC §1 says, so a pins change is still an upgrade); paths are kept as given.

use std::collections::BTreeMap;

/// Each setting of the selection that is not a default: a string, a list (`containerd_config`,
/// `nri_socket`: each as given) or `true` (a switch).
pub type Selection = BTreeMap<String, serde_json::Value>;

/// The recorded value of `key`, as the flag would give it: each item of a list, a string
/// alone, `true` as itself; nothing for a key not recorded.
pub fn values(s: &Selection, key: &str) -> Vec<String> {
    match s.get(key) {
        Some(serde_json::Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(serde_json::Value::String(v)) => vec![v.clone()],
        Some(serde_json::Value::Bool(true)) => vec!["true".to_string()],
        _ => Vec::new(),
    }
}

/// The value of `key` as one line (`a, b` for a list), for the plan and "since the last up".
pub fn shown(s: &Selection, key: &str) -> Option<String> {
    let v = values(s, key);
    (!v.is_empty()).then(|| v.join(", "))
}

/// The flag that gives `key` (as `eas.yaml` spells it): `--eas-repo` for `mirrors.eas`,
/// `--probe-nodes` for `nodes.probe`, else `--KEY` with `-` for `_` (`--ca-bundle`).
pub fn flag_of(key: &str) -> String {
    match key.split_once('.') {
        Some(("mirrors", tree)) => format!("--{tree}-repo"),
        Some(("nodes", "probe")) => "--probe-nodes".into(),
        Some((_, rest)) => format!("--{}", rest.replace('_', "-")),
        None => format!("--{}", key.replace('_', "-")),
    }
}

/// The flags that give `keys` their recorded values, in that order: `--KEY VALUE` for each
/// value, `--KEY` alone for a switch ([`flag_of`]); a key not recorded gives none.
pub fn flags(s: &Selection, keys: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for key in keys {
        let flag = flag_of(key);
        match s.get(*key) {
            Some(serde_json::Value::Bool(true)) => out.push(flag),
            _ => values(s, key).into_iter().for_each(|v| out.extend([flag.clone(), v])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_reads_back_each_kind_of_value() {
        let s: Selection = serde_json::from_str(
            r#"{"layer": "inference", "nodes.containerd_config": ["n1=/a.toml", "*=/b.toml"], "offline": true,
                "nodes.probe": false, "mirrors.ei": "/m/ei"}"#,
        )
        .unwrap();
        assert_eq!(values(&s, "layer"), ["inference"]);
        assert_eq!(shown(&s, "nodes.containerd_config").as_deref(), Some("n1=/a.toml, *=/b.toml"));
        assert_eq!(values(&s, "offline"), ["true"]);
        assert!(values(&s, "nodes.probe").is_empty() && shown(&s, "env").is_none(), "false and absent: not set");
        let keys = ["layer", "env", "nodes.containerd_config", "offline", "nodes.probe", "mirrors.ei"];
        let want = ["--layer", "inference", "--containerd-config", "n1=/a.toml", "--containerd-config", "*=/b.toml"];
        assert_eq!(flags(&s, &keys), [&want[..], &["--offline", "--ei-repo", "/m/ei"]].concat());
        assert_eq!(flag_of("allow_unpinned_base"), "--allow-unpinned-base");
    }
}
