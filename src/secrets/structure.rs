//! Redaction by structure, for the JSON documents the support bundle takes from the cluster
//! (pods, events) and from the record: secrets nobody told eas about, found by where they sit.
//!
//! - An environment variable (`{"name": N, "value": V}`) whose name looks secret has its value
//!   masked. The names are Troubleshoot's default redactors' (replicatedhq/troubleshoot
//!   `pkg/redact/redact.go`@014b49fb, `getRedactors`: names holding `password`, `token`,
//!   `database` or `user`, and the AWS `SECRET_?ACCESS_?KEY`, `ACCESS_?KEY_?ID` and
//!   `OWNER_?ACCOUNT`, any case), and eas's own: `SECRET`, `PASSWD`, and a name ending in `_KEY`.
//! - The `kubectl.kubernetes.io/last-applied-configuration` annotation is dropped whole: it
//!   repeats the object as applied, env values and args included.
//! - Every other string (env values, args, messages) goes through the text redactor (the values
//!   eas knows and the shapes of `redact::patterns`), string by string, so the JSON stays valid
//!   and an arg that holds no secret (`--dtype`, `--max-model-len`) is kept.

use serde_json::Value;

use super::redact::{ByRule, MASK};

pub const ENV_NAME: &str = "env-name";
pub const LAST_APPLIED_RULE: &str = "last-applied-configuration";
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether an environment variable's name says its value is a secret.
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let squeezed: String = n.chars().filter(|c| *c != '_').collect();
    ["password", "token", "database", "user", "secret", "passwd"].iter().any(|w| n.contains(w))
        || ["accesskeyid", "owneraccount"].iter().any(|w| squeezed.contains(w))
        || n.ends_with("_key")
}

/// Masks `v` in place by structure, then each string left with `text` (which masks and counts
/// into `by`); the masks made by structure are counted into `by` too.
pub fn redact(v: &mut Value, by: &mut ByRule, text: &mut dyn FnMut(&str, &mut ByRule) -> String) {
    match v {
        Value::Object(map) => {
            let secret_env = map.get("name").and_then(Value::as_str).is_some_and(secret_name)
                && map.get("value").and_then(Value::as_str).is_some_and(|s| !s.is_empty() && s != MASK);
            if secret_env {
                map.insert("value".into(), Value::String(MASK.into()));
                *by.entry(ENV_NAME).or_default() += 1;
            }
            if let Some(Value::Object(a)) = map.get_mut("annotations")
                && a.remove(LAST_APPLIED).is_some()
            {
                *by.entry(LAST_APPLIED_RULE).or_default() += 1;
            }
            for child in map.values_mut() {
                redact(child, by, text);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| redact(i, by, text)),
        Value::String(s) => {
            let masked = text(s, by);
            if masked != *s {
                *s = masked;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn troubleshoots_names_and_eas_own_are_secret_and_others_are_not() {
        for name in [
            "GRAFANA_ADMIN_PASSWORD",
            "HF_TOKEN",
            "DATABASE_URL",
            "KEYCLOAK_USER",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "OWNER_ACCOUNT",
            "CLIENT_SECRET",
            "KEYCLOAK_PASSWD",
            "OPENAI_API_KEY",
        ] {
            assert!(secret_name(name), "{name}");
        }
        for name in ["MODEL", "VLLM_CPU_KVCACHE_SPACE", "HOME", "KEYBOARD", "HTTP_PORT"] {
            assert!(!secret_name(name), "{name}");
        }
    }

    #[test]
    fn env_values_by_name_and_the_last_applied_annotation_go_and_other_args_stay() {
        let mut pod = json!({"metadata": {"annotations": {LAST_APPLIED: "{\"env\": \"x\"}", "keep": "me"}},
            "spec": {"containers": [{"args": ["--dtype", "bfloat16", "--max-model-len", "8192"],
                "env": [{"name": "ADMIN_PASSWORD", "value": "pw1"}, {"name": "MODEL", "value": "qwen"},
                        {"name": "EMPTY_TOKEN", "value": ""}]}]}});
        let mut by = ByRule::new();
        redact(&mut pod, &mut by, &mut |s, _| s.to_string());
        assert_eq!(pod["metadata"]["annotations"], json!({"keep": "me"}));
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["env"][0]["value"], MASK);
        assert_eq!((c["env"][1]["value"].as_str(), c["env"][2]["value"].as_str()), (Some("qwen"), Some("")));
        assert_eq!(c["args"], json!(["--dtype", "bfloat16", "--max-model-len", "8192"]));
        assert_eq!(by, [(ENV_NAME, 1), (LAST_APPLIED_RULE, 1)].into_iter().collect());
    }
}
