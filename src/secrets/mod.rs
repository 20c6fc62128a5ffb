//! The one redactor of the process: every secret eas learns (the kubeconfig's tokens, passwords
//! and client keys, a token an exec plugin minted, the installer's secret environment such as
//! `HF_TOKEN`, a proxy URL's userinfo) is registered here as soon as it is read, and every line
//! that leaves eas (every line for people through `text::for_people`, the installer's run log,
//! verify's pod-log excerpts, every file of the support bundle through [`scrub`]) is masked, and
//! so is every secret recognised by its shape (`redact::patterns`). Registering is cheap and
//! idempotent; masking reads a prebuilt set.

use std::sync::{Mutex, RwLock};

use base64::Engine;
use kube::config::Kubeconfig;

pub mod redact;
pub mod structure;

use redact::Redactor;

/// Shorter values are not registered: masking two-letter words everywhere would garble output,
/// and nothing eas reads calls a value that short a secret.
const MIN_SECRET: usize = 4;

static KNOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());
static REDACTOR: RwLock<Option<Redactor>> = RwLock::new(None);

/// Registers one secret value (and, for a PEM value such as a client key, each base64 line of its
/// body, the form it takes when printed decoded).
pub fn learn(value: &str) {
    let mut add: Vec<String> = Vec::new();
    let v = value.trim();
    if v.len() >= MIN_SECRET {
        add.push(v.to_string());
    }
    if v.contains("-----BEGIN") {
        add.extend(v.lines().map(str::trim).filter(|l| l.len() >= 16 && !l.starts_with("-----")).map(str::to_string));
    }
    if add.is_empty() {
        return;
    }
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let before = known.len();
    for a in add {
        if !known.contains(&a) {
            known.push(a);
        }
    }
    if known.len() != before {
        *REDACTOR.write().unwrap_or_else(|e| e.into_inner()) = Some(Redactor::new(known.iter()));
    }
}

/// Registers the secrets of a kubeconfig: every user's token, password, client key (as given
/// and decoded), and its exec plugin's arguments and environment values.
pub fn learn_kubeconfig(kc: &Kubeconfig) {
    // kube serialises its secret strings in full (the bastion's copy relies on it): reading the
    // JSON form needs no access to kube's secret wrapper.
    let Ok(json) = serde_json::to_value(kc) else { return };
    let b64 = base64::engine::general_purpose::STANDARD;
    let str_at = |v: &serde_json::Value, p: &str| v.pointer(p).and_then(serde_json::Value::as_str).map(str::to_string);
    for user in json.get("users").and_then(serde_json::Value::as_array).into_iter().flatten() {
        for field in ["/user/token", "/user/password", "/user/client-key-data"] {
            if let Some(s) = str_at(user, field) {
                learn(&s);
                if let Ok(decoded) = b64.decode(s.trim()) {
                    learn(&String::from_utf8_lossy(&decoded));
                }
            }
        }
        for a in user.pointer("/user/exec/args").and_then(serde_json::Value::as_array).into_iter().flatten() {
            if let Some(a) = a.as_str() {
                learn(a.split_once('=').map_or(a, |(_, v)| v));
            }
        }
        for e in user.pointer("/user/exec/env").and_then(serde_json::Value::as_array).into_iter().flatten() {
            if let Some(v) = str_at(e, "/value") {
                learn(&v);
            }
        }
    }
}

/// Registers the userinfo of a proxy URL (`http://user:pass@host`): the password, and the whole.
pub fn learn_url_userinfo(url: &str) {
    let Some((_, rest)) = url.split_once("://") else { return };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        learn(userinfo);
        if let Some((_, pass)) = userinfo.split_once(':') {
            learn(pass);
        }
    }
}

/// Registers the environment's secrets: the variables named (the installer's secret ones:
/// `HF_TOKEN`, the admin passwords) and the userinfo of every proxy variable.
pub fn learn_env<'a>(var: &dyn Fn(&str) -> Option<String>, secret_names: impl IntoIterator<Item = &'a str>) {
    for name in secret_names {
        if let Some(value) = var(name) {
            learn(&value);
        }
    }
    for name in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        if let Some(url) = var(name) {
            learn_url_userinfo(&url);
        }
    }
}

/// `line` with every registered secret, and every secret recognised by its shape, masked.
pub fn mask(line: &str) -> String {
    scrub(line).0
}

/// [`mask`] for a whole text, and how many secrets it masked.
pub fn scrub(text: &str) -> (String, usize) {
    let (out, by) = scrub_by_rule(text);
    (out, by.values().sum())
}

/// [`scrub`], counted by rule (`redact::KNOWN_VALUE` and each shape).
pub fn scrub_by_rule(text: &str) -> (String, redact::ByRule) {
    match &*REDACTOR.read().unwrap_or_else(|e| e.into_inner()) {
        Some(r) => r.redact_by_rule(text),
        None => redact::patterns_by_rule(text),
    }
}

/// A JSON document masked by structure (`structure::redact`), then every string of it as text;
/// the masks counted by rule.
pub fn scrub_json(v: &mut serde_json::Value) -> redact::ByRule {
    let mut by = redact::ByRule::new();
    structure::redact(v, &mut by, &mut |s, by| {
        let (out, found) = scrub_by_rule(s);
        for (rule, n) in found {
            *by.entry(rule).or_default() += n;
        }
        out
    });
    by
}

/// A redactor holding every secret registered so far, plus `extra`.
pub fn redactor_with(extra: impl IntoIterator<Item = String>) -> Redactor {
    let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    Redactor::new(known.iter().cloned().chain(extra))
}

/// Masks every secret `r` holds in the files directly under `dir`, in place, touching only the
/// files that hold one; returns how many were rewritten. For the installer's own logs in the
/// work tree (`env/<env>/logs/`), which `tee` everything it prints, the proxy URL its preflight
/// shows included. A missing directory is nothing to do.
pub fn scrub_dir(dir: &std::path::Path, r: &Redactor) -> std::io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut rewritten = 0;
    for entry in entries {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path())?;
        let text = String::from_utf8_lossy(&bytes);
        let masked = r.redact(&text);
        if masked != text {
            // Rewritten through a sibling and renamed over it: no moment holds half a log.
            crate::atomic::write(&entry.path(), masked.as_bytes())?;
            rewritten += 1;
        }
    }
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfigs_token_password_and_client_key_are_masked_in_every_line() {
        let key_pem =
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKEYBODYLINEONEabcdefghijklmnop\n-----END EC PRIVATE KEY-----\n";
        let key_data = base64::engine::general_purpose::STANDARD.encode(key_pem);
        let kc = Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: TOKSENTINEL1\n    password: PWSENTINEL1\n    client-key-data: {key_data}\n"
        ))
        .unwrap();
        learn_kubeconfig(&kc);
        learn_url_userinfo("http://puser:PROXYSENTINEL1@proxy:3128");
        let line = format!(
            "token TOKSENTINEL1 pw PWSENTINEL1 key {key_data} body MHcCAQEEIKEYBODYLINEONEabcdefghijklmnop proxy PROXYSENTINEL1"
        );
        let masked = mask(&line);
        for s in ["TOKSENTINEL1", "PWSENTINEL1", "KEYBODYLINE", "PROXYSENTINEL1", key_data.as_str()] {
            assert!(!masked.contains(s), "{s} in {masked}");
        }
        assert!(masked.starts_with("token *** pw ***"), "{masked}");
        // Short values are not secrets worth garbling output for.
        learn("ab");
        assert_eq!(mask("ab cd"), "ab cd");
    }

    #[test]
    fn scrub_dir_masks_the_secrets_in_the_files_that_hold_them_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("install.log"), "Proxy in use - https_proxy=http://u:SCRUBSENTINEL9@p:1\n")
            .unwrap();
        std::fs::write(dir.path().join("clean.log"), "ok\n").unwrap();
        let r = Redactor::new(["SCRUBSENTINEL9"]);
        assert_eq!(scrub_dir(dir.path(), &r).unwrap(), 1);
        let text = std::fs::read_to_string(dir.path().join("install.log")).unwrap();
        // The userinfo is masked whole, by its shape, once the password is masked by its value.
        assert!(!text.contains("SCRUBSENTINEL9") && text.contains("https_proxy=http://***@p:1"), "{text}");
        assert_eq!(scrub_dir(&dir.path().join("missing"), &r).unwrap(), 0);
    }
}
