//! A kubeconfig user's exec credential plugin, named for people when it fails.
//!
//! kube reports a failed plugin with its whole command line (environment values and arguments,
//! where plugins take their secrets) and a Debug dump of its output. eas shows one line instead:
//! the plugin's command without arguments, its exit code, and the last line of its stderr with
//! the kubeconfig's values for that plugin and anything shaped like `token=…` masked.

use std::error::Error;

use kube::client::AuthError;
use kube::config::AuthInfo;

const MASK: &str = "***";

/// Words that mark the value after `=` or `:` as a secret, in a plugin's stderr.
const SECRET_KEYS: [&str; 7] = ["token", "password", "passwd", "secret", "key", "credential", "bearer"];

/// The exec plugin of a kubeconfig user.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    /// The command as the kubeconfig names it, without arguments.
    pub command: String,
    /// Its arguments and environment values, masked wherever they appear.
    secrets: Vec<String>,
}

impl Plugin {
    pub fn of(user: &AuthInfo) -> Option<Plugin> {
        let exec = user.exec.as_ref()?;
        let command = exec.command.clone().unwrap_or_default();
        let mut secrets: Vec<String> = Vec::new();
        for a in exec.args.iter().flatten() {
            secrets.push(a.clone());
            if let Some((_, v)) = a.split_once('=') {
                secrets.push(v.to_string());
            }
        }
        for e in exec.env.iter().flatten() {
            secrets.extend(e.get("value").cloned());
        }
        secrets.retain(|s| s.len() >= 3);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Some(Plugin { command, secrets })
    }

    /// One line for a plugin failure found anywhere in `err`'s chain, or `None` when the plugin
    /// is not what failed.
    pub fn describe(&self, err: &(dyn Error + 'static)) -> Option<String> {
        let mut cur: Option<&(dyn Error + 'static)> = Some(err);
        while let Some(e) = cur {
            let auth = e.downcast_ref::<AuthError>().or_else(|| match e.downcast_ref::<kube::Error>() {
                Some(kube::Error::Auth(a)) => Some(a),
                _ => None,
            });
            if let Some(a) = auth {
                return self.line(a);
            }
            cur = e.source();
        }
        None
    }

    fn line(&self, e: &AuthError) -> Option<String> {
        let cmd = crate::text::for_people(&self.command);
        Some(match e {
            AuthError::AuthExecRun { out, .. } => {
                let code =
                    out.status.code().map_or_else(|| "on a signal".to_string(), |c| format!("with exit code {c}"));
                match last_line(&out.stderr) {
                    Some(l) => format!("credential plugin {cmd} failed {code}: {}", self.redact(&l)),
                    None => format!("credential plugin {cmd} failed {code} and printed nothing on stderr"),
                }
            }
            AuthError::AuthExecStart(io) => format!("credential plugin {cmd} could not be started: {io}"),
            AuthError::AuthExecParse(_) => format!("credential plugin {cmd} printed no valid ExecCredential"),
            _ => return None,
        })
    }

    /// The kubeconfig's values for this plugin, then `key=value`-shaped secrets, then URL
    /// credentials, masked; control characters escaped.
    pub fn redact(&self, line: &str) -> String {
        let mut s = line.to_string();
        for secret in &self.secrets {
            s = s.replace(secret.as_str(), MASK);
        }
        let words: Vec<String> = s.split(' ').map(mask_keyed).collect();
        crate::text::for_people(&words.join(" "))
    }
}

fn last_line(stderr: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stderr).lines().map(str::trim).rfind(|l| !l.is_empty()).map(str::to_string)
}

/// `token=abc` → `token=***`; `"password":"x"` → `"password":***`.
fn mask_keyed(word: &str) -> String {
    let Some(i) = word.find(['=', ':']) else { return word.to_string() };
    let key = word[..i].to_ascii_lowercase();
    if word.len() > i + 1 && SECRET_KEYS.iter().any(|k| key.contains(k)) {
        format!("{}{MASK}", &word[..=i])
    } else {
        word.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin() -> Plugin {
        let user: AuthInfo = serde_json::from_value(serde_json::json!({
            "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/opt/bin/get-token",
                     "args": ["--secret=ARGSECRET", "plain"], "env": [{"name": "PLUGIN_SECRET", "value": "ENVSECRET"}]}
        }))
        .unwrap();
        Plugin::of(&user).unwrap()
    }

    #[test]
    fn the_last_stderr_line_is_redacted() {
        let p = plugin();
        let cases = [
            ("login failed for ENVSECRET", "login failed for ***"),
            ("called with --secret=ARGSECRET", "called with ***"),
            ("got ARGSECRET back", "got *** back"),
            ("token=abc123 expired", "token=*** expired"),
            ("\"password\":\"hunter2\"", "\"password\":***"),
            ("via http://u:pw@proxy:1", "via http://***@proxy:1"),
            ("\u{1b}[31mred\u{1b}[0m", "\\u{1b}[31mred\\u{1b}[0m"),
            ("key: is empty", "key: is empty"),
        ];
        for (raw, shown) in cases {
            assert_eq!(p.redact(raw), shown, "{raw:?}");
        }
    }

    #[test]
    fn a_failed_run_is_one_line_without_args_or_env() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Output {
            status: std::process::ExitStatus::from_raw(7 << 8),
            stdout: b"ENVSECRET".to_vec(),
            stderr: b"starting\nauth failed: token=SECRETTOKEN for ENVSECRET\n\n".to_vec(),
        };
        let e = kube::Error::Auth(AuthError::AuthExecRun {
            cmd: "PLUGIN_SECRET=\"ENVSECRET\" \"/opt/bin/get-token\" \"--secret=ARGSECRET\"".into(),
            out: Box::new(out),
        });
        let line = plugin().describe(&e).unwrap();
        assert_eq!(
            line,
            "credential plugin /opt/bin/get-token failed with exit code 7: auth failed: token=*** for ***"
        );
        let silent = kube::Error::Auth(AuthError::AuthExecRun {
            cmd: String::new(),
            out: Box::new(std::process::Output {
                status: std::process::ExitStatus::from_raw(9),
                stdout: vec![],
                stderr: vec![],
            }),
        });
        assert_eq!(
            plugin().describe(&silent).unwrap(),
            "credential plugin /opt/bin/get-token failed on a signal and printed nothing on stderr"
        );
        assert_eq!(plugin().describe(&kube::Error::LinesCodecMaxLineLengthExceeded), None);
    }
}
