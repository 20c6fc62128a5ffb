//! Secrets (the Hugging Face token, admin passwords) never reach the terminal or a log: every
//! line of installer output, and every argv recorded, passes through a [`Redactor`] first.
//!
//! Besides the value itself, the forms it takes in Ansible's verbose output are covered: the
//! JSON-escaped text and the base64 of a Kubernetes Secret's `data`.

use base64::Engine;

pub const MASK: &str = "***";

/// Shortest base64 run worth masking: shorter ones match ordinary text too often.
const MIN_BASE64: usize = 8;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret containing another is masked whole.
    needles: Vec<String>,
}

impl Redactor {
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut needles = Vec::new();
        for s in secrets {
            let s = s.as_ref();
            if s.is_empty() {
                continue;
            }
            needles.push(s.to_string());
            let json = serde_json::to_string(s).expect("strings serialise");
            needles.push(json[1..json.len() - 1].to_string());
            // The base64 of the whole 3-byte groups: the same at the start of the encoding of
            // the value alone and of the value followed by anything (a newline, say).
            let whole = s.len() / 3 * 3;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&s.as_bytes()[..whole]);
            if b64.len() >= MIN_BASE64 {
                needles.push(b64);
            }
        }
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        Redactor { needles }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    pub fn redact(&self, line: &str) -> String {
        let mut out = line.to_string();
        for n in &self.needles {
            if out.contains(n.as_str()) {
                out = out.replace(n.as_str(), MASK);
            }
        }
        out
    }

    pub fn redact_argv(&self, argv: &[String]) -> Vec<String> {
        argv.iter().map(|a| self.redact(a)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "hf_QwErTy0123456789abcdefGHIJ";

    #[test]
    fn secrets_are_masked_in_every_form() {
        let r = Redactor::new([TOKEN, "pa\"ss\\word", ""]);
        let b64 = base64::engine::general_purpose::STANDARD;
        let cases = [
            (format!("export HF_TOKEN={TOKEN}"), "export HF_TOKEN=***".to_string()),
            (format!("{TOKEN}{TOKEN}"), "******".to_string()),
            (
                r#"ok: [localhost] => {"password": "pa\"ss\\word"}"#.to_string(),
                r#"ok: [localhost] => {"password": "***"}"#.to_string(),
            ),
            ("raw pa\"ss\\word".to_string(), "raw ***".to_string()),
            (format!("data: {{token: {}}}", b64.encode(TOKEN)), "data: {token: ***".to_string()),
            (format!("data: {}", b64.encode(format!("{TOKEN}\n"))), "data: ***".to_string()),
            ("nothing secret here".to_string(), "nothing secret here".to_string()),
        ];
        // A partial base64 group may follow the mask: it encodes at most two bytes of the secret.
        for (line, want) in cases {
            let got = r.redact(&line);
            assert!(got.starts_with(&want), "{line:?} -> {got:?}");
            assert!(!got.contains(TOKEN) && !got.contains("ss\\word"), "{got:?}");
        }
    }

    #[test]
    fn argv_and_empty_sets() {
        let r = Redactor::new(vec!["s3cret-pass".to_string()]);
        let argv = vec!["helm".to_string(), "--set".to_string(), "admin.password=s3cret-pass".to_string()];
        assert_eq!(r.redact_argv(&argv), ["helm", "--set", "admin.password=***"]);
        let none = Redactor::new(Vec::<String>::new());
        assert!(none.is_empty());
        assert_eq!(none.redact("s3cret-pass"), "s3cret-pass");
        // A secret inside a longer one: the longer is masked whole.
        let nested = Redactor::new(["abcd", "xxabcdyy"]);
        assert_eq!(nested.redact("1 xxabcdyy 2 abcd"), "1 *** 2 ***");
    }
}
