//! Secrets (the Hugging Face token, admin passwords) never reach the terminal or a log: every
//! line of installer output, and every argv recorded, passes through a [`Redactor`] first.
//!
//! Besides the value itself, the forms it takes in Ansible's verbose output are covered: the
//! JSON-escaped text and the base64 of a Kubernetes Secret's `data`. Secrets eas was never told
//! of are caught by their shape ([`patterns`]): a Hugging Face token (`hf_` and 20 or more
//! letters and digits), an HTTP `Bearer` credential, a PEM private-key block, a `password:` or
//! `password=` value, a URL's userinfo. Each mask is counted by its rule (the support bundle's
//! manifest lists them).

use base64::Engine;

pub const MASK: &str = "***";

/// The rules a mask is counted under: a value eas knows, and each shape.
const KNOWN_VALUE: &str = "known-value";
const PRIVATE_KEY: &str = "private-key";
const BEARER: &str = "bearer-token";
const PASSWORD_COLON: &str = "password:";
const PASSWORD_EQUALS: &str = "password=";
const URL_USERINFO: &str = "url-userinfo";
const HF_TOKEN: &str = "hf-token";

/// How many masks each rule made.
pub type ByRule = std::collections::BTreeMap<&'static str, usize>;

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
        self.redact_counted(line).0
    }

    /// [`Redactor::redact`], and how many secrets were masked (the support bundle's manifest
    /// counts them per file).
    pub fn redact_counted(&self, text: &str) -> (String, usize) {
        let (out, by) = self.redact_by_rule(text);
        (out, by.values().sum())
    }

    /// [`Redactor::redact`], and how many masks each rule made.
    pub fn redact_by_rule(&self, text: &str) -> (String, ByRule) {
        let mut out = text.to_string();
        let mut count = 0;
        for n in &self.needles {
            let found = out.matches(n.as_str()).count();
            if found > 0 {
                count += found;
                out = out.replace(n.as_str(), MASK);
            }
        }
        let (out, mut by) = patterns_by_rule(&out);
        if count > 0 {
            by.insert(KNOWN_VALUE, count);
        }
        (out, by)
    }

    pub fn redact_argv(&self, argv: &[String]) -> Vec<String> {
        argv.iter().map(|a| self.redact(a)).collect()
    }
}

/// Masks the secrets recognised by their shape, whoever's they are, and counts them: `hf_` and
/// 20 or more ASCII letters and digits; `Bearer` and the word after it; a PEM private-key block
/// (`-----BEGIN … PRIVATE KEY-----` to its `END` line, or to the end of the text when cut off);
/// `password:` (any case) and the word after it; `password=` (any case, so `--db-password=`,
/// `PASSWORD=` too) and the value after it, up to a blank, a quote, `&`, `,` or `;`; a URL's
/// userinfo (`scheme://user:pass@host`).
#[cfg(test)]
pub fn patterns(text: &str) -> (String, usize) {
    let (s, by) = patterns_by_rule(text);
    (s, by.values().sum())
}

/// [`patterns`], counted by rule.
pub fn patterns_by_rule(text: &str) -> (String, ByRule) {
    let mut by = ByRule::new();
    let mut count = |rule: &'static str, f: &dyn Fn(&str, &mut usize) -> String, s: &str| {
        let mut n = 0;
        let out = f(s, &mut n);
        if n > 0 {
            *by.entry(rule).or_default() += n;
        }
        out
    };
    let s = count(PRIVATE_KEY, &pem_blocks, text);
    let s = count(BEARER, &|s, n| after_word(s, "Bearer ", false, &[], n), &s);
    let s = count(PASSWORD_COLON, &|s, n| after_word(s, "password:", true, &[], n), &s);
    let s = count(PASSWORD_EQUALS, &|s, n| after_word(s, "password=", true, &['"', '\'', '&', ',', ';'], n), &s);
    let s = count(URL_USERINFO, &userinfo, &s);
    let s = count(HF_TOKEN, &hf_tokens, &s);
    (s, by)
}

/// Replaces the user information of every URL in `s` (`http://user:pass@proxy:3128` becomes
/// `http://***@proxy:3128`) and counts them. `[` and `]` are not allowed in userinfo (RFC 3986
/// §3.2.1): text such as a hint's `http://[user:password@]host:port` is a template, not
/// credentials.
pub fn userinfo(s: &str, count: &mut usize) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>') || c.is_whitespace());
        let authority = &tail[..end.unwrap_or(tail.len())];
        match authority.rfind('@').filter(|&at| !authority[..at].contains(['[', ']']) && &authority[..at] != MASK) {
            Some(at) => {
                out.push_str(MASK);
                *count += 1;
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

fn pem_blocks(text: &str, count: &mut usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("-----BEGIN ") {
        let header_end = rest[at + 11..].find("-----").map(|e| at + 11 + e);
        let Some(he) = header_end.filter(|&he| rest[at + 11..he].ends_with("PRIVATE KEY")) else {
            out.push_str(&rest[..at + 11]);
            rest = &rest[at + 11..];
            continue;
        };
        out.push_str(&rest[..at]);
        out.push_str(MASK);
        *count += 1;
        let body = &rest[he + 5..];
        rest = match body.find("-----END ") {
            Some(e) => {
                let tail = &body[e + 9..];
                tail.find("-----").map_or("", |x| &tail[x + 5..])
            }
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// Masks the run of non-space characters (nor any of `stops`) after each `key` (after any blanks;
/// right after a key ending in `=`), when there is one.
fn after_word(text: &str, key: &str, any_case: bool, stops: &[char], count: &mut usize) -> String {
    let hay = if any_case { text.to_ascii_lowercase() } else { text.to_string() };
    let needle = if any_case { key.to_ascii_lowercase() } else { key.to_string() };
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(i) = hay[from..].find(&needle) {
        let start = from + i + needle.len();
        let blanks = text[start..].len() - text[start..].trim_start_matches([' ', '\t']).len();
        let word = start + blanks;
        let end = text[word..].find(|c: char| c.is_whitespace() || stops.contains(&c)).map_or(text.len(), |e| word + e);
        if (blanks > 0 || key.ends_with(' ') || key.ends_with('=')) && end > word && &text[word..end] != MASK {
            out.push_str(&text[from..word]);
            out.push_str(MASK);
            *count += 1;
        } else {
            out.push_str(&text[from..end.max(start)]);
        }
        from = end.max(start);
    }
    out.push_str(&text[from..]);
    out
}

fn hf_tokens(text: &str, count: &mut usize) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    let mut i = 0;
    while let Some(j) = text[i..].find("hf_") {
        let at = i + j;
        let run = b[at + 3..].iter().take_while(|c| c.is_ascii_alphanumeric()).count();
        // A token starts a word: `xhf_…` is some other name.
        let starts_word = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
        if run >= 20 && starts_word {
            out.push_str(&text[from..at]);
            out.push_str(MASK);
            *count += 1;
            from = at + 3 + run;
        }
        i = at + 3 + run;
    }
    out.push_str(&text[from..]);
    out
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
    fn secrets_eas_was_never_told_of_are_masked_by_their_shape() {
        let pem = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nb";
        let cases = [
            ("HF_TOKEN=hf_abcdefghijABCDEFGHIJ0123 next", "HF_TOKEN=*** next", 1),
            ("hf_short123 and xhf_abcdefghijABCDEFGHIJ0123", "hf_short123 and xhf_abcdefghijABCDEFGHIJ0123", 0),
            ("Authorization: Bearer eyJhbGciOi.x.y done", "Authorization: Bearer *** done", 1),
            ("  password: hunter2-long\n  Password:\tx", "  password: ***\n  Password:\t***", 2),
            ("password: *** and password:none", "password: *** and password:none", 0),
            ("--db-password=s3cr3t --dtype=bf16", "--db-password=*** --dtype=bf16", 1),
            ("{\"a\": \"PASSWORD=x1;y\"}", "{\"a\": \"PASSWORD=***;y\"}", 1),
            (
                "postgres://admin:pw@db:5432/x and http://[user:password@]host",
                "postgres://***@db:5432/x and http://[user:password@]host",
                1,
            ),
            (pem, "a\n***\nb", 1),
            ("-----BEGIN EC PRIVATE KEY-----\nMHcC cut", "***", 1),
            (
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
                0,
            ),
        ];
        for (text, want, n) in cases {
            assert_eq!(patterns(text), (want.to_string(), n), "{text:?}");
        }
        let r = Redactor::new(["s3cret-pass"]);
        assert_eq!(r.redact_counted("s3cret-pass s3cret-pass Bearer tok"), ("*** *** Bearer ***".to_string(), 3));
        let (_, by) = r.redact_by_rule("s3cret-pass Bearer tok hf_abcdefghijABCDEFGHIJ0123 http://u:p@h --password=x");
        let want: ByRule = [(KNOWN_VALUE, 1), (BEARER, 1), (HF_TOKEN, 1), (URL_USERINFO, 1), (PASSWORD_EQUALS, 1)]
            .into_iter()
            .collect();
        assert_eq!(by, want);
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
