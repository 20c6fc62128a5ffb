//! `pins.json` (`eas-pins/v1`): every upstream revision and every bastion artifact `eas` uses.
//!
//! Flat rows `{profile, name, repo, ref, sha, date, source}`, plus `url` and `sha256` for
//! artifacts. Only a full 40-hex SHA is locked; an abbreviated one is stored as known and
//! reported by `pins check` until `pins lock` resolves it. Which file a command reads is
//! decided in one place, [`source`].

pub mod source;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use source::Source;

pub const SCHEMA: &str = "eas-pins/v1";
pub const EMBEDDED: &str = include_str!("../../pins.json");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pins {
    pub schema: String,
    pub pins: Vec<Pin>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub profile: String,
    pub name: String,
    pub repo: Option<String>,
    #[serde(rename = "ref")]
    pub git_ref: String,
    pub sha: Option<String>,
    pub locked: bool,
    pub date: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Present (even as null) only on artifact rows: null means no sha256 could be obtained.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present_or_null")]
    pub sha256: Option<Option<String>>,
}

fn present_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

impl Pin {
    pub fn is_artifact(&self) -> bool {
        self.sha256.is_some()
    }

    pub fn artifact_sha256(&self) -> Option<&str> {
        self.sha256.as_ref().and_then(|s| s.as_deref())
    }
}

pub fn is_full_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    /// Unreadable, past its limit, not text, or interrupted while read from a pipe.
    #[error("pins: {0}")]
    Read(crate::bounded::ReadError),
    #[error("pins: {0}")]
    Malformed(String),
    #[error("pins: unknown profile {0:?} (profiles: {1})")]
    UnknownProfile(String, String),
    #[error("pins: profile {0:?} has no row for {1} (each profile pins eas, ei and eat)")]
    MissingRows(String, String),
    #[error("pins: cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("pins: there is no user pins file to write: neither XDG_CONFIG_HOME nor HOME is set")]
    NoUserFile,
}

/// The three upstream trees one install uses.
#[derive(Debug, Clone)]
pub struct Trees {
    pub profile: String,
    /// The pins file they were read from, for messages (`Source::describe`); empty until the
    /// caller that resolved the source sets it.
    pub from: String,
    pub eas: Pin,
    pub ei: Pin,
    pub eat: Pin,
}

impl Pins {
    pub fn parse(text: &str) -> Result<Pins, PinsError> {
        let pins: Pins =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|e| {
                let inner = e.inner();
                match inner.classify() {
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                        PinsError::Malformed(format!("not JSON at line {} column {}", inner.line(), inner.column()))
                    }
                    _ => PinsError::Malformed(format!("field `{}`: {inner}", e.path())),
                }
            })?;
        if pins.schema != SCHEMA {
            return Err(PinsError::Malformed(format!("schema is {:?}, expected {SCHEMA:?}", pins.schema)));
        }
        for (i, p) in pins.pins.iter().enumerate() {
            let at = format!(
                "pins[{i}] ({}/{})",
                crate::text::for_people(&crate::text::ellipsis(&p.profile, 40)),
                crate::text::for_people(&crate::text::ellipsis(&p.name, 40))
            );
            if let Some(m) = field_problem(p) {
                return Err(PinsError::Malformed(format!("{at}: {m}")));
            }
            if let Some(sha) = &p.sha {
                if !is_hex(sha) || sha.len() < 7 || sha.len() > 40 {
                    return Err(PinsError::Malformed(format!("{at}: sha {sha:?} is not 7 to 40 lowercase hex digits")));
                }
                if p.locked && !is_full_sha(sha) {
                    return Err(PinsError::Malformed(format!("{at}: marked locked but sha {sha:?} is abbreviated")));
                }
            } else if p.locked {
                return Err(PinsError::Malformed(format!("{at}: marked locked but has no sha")));
            }
            if let Some(Some(h)) = &p.sha256
                && (h.len() != 64 || !is_hex(h))
            {
                return Err(PinsError::Malformed(format!("{at}: sha256 {h:?} is not 64 lowercase hex digits")));
            }
            let dup = pins.pins[..i].iter().any(|q| q.profile == p.profile && q.name == p.name);
            if dup {
                return Err(PinsError::Malformed(format!("{at}: duplicate row")));
            }
        }
        Ok(pins)
    }

    pub fn load(path: Option<&Path>) -> Result<Pins, PinsError> {
        match path {
            None => Pins::parse(EMBEDDED),
            Some(p) => {
                let text = crate::bounded::read_string(p, crate::bounded::Kind::Pins).map_err(PinsError::Read)?;
                // A file's problem names the file: which one was read is not always obvious.
                Pins::parse(&text).map_err(|e| match e {
                    PinsError::Malformed(m) => PinsError::Malformed(format!("{}: {m}", p.display())),
                    other => other,
                })
            }
        }
    }

    pub fn row(&self, profile: &str, name: &str) -> Option<&Pin> {
        self.pins.iter().find(|p| p.profile == profile && p.name == name)
    }

    pub fn profiles(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for p in &self.pins {
            if !v.contains(&p.profile.as_str()) {
                v.push(&p.profile);
            }
        }
        v
    }

    /// The EAS, EI and EAT rows of a tree profile (not `bastion`).
    pub fn trees(&self, profile: &str) -> Result<Trees, PinsError> {
        let get = |name: &str| self.row(profile, name).cloned();
        match (get("eas"), get("ei"), get("eat")) {
            (Some(eas), Some(ei), Some(eat)) => {
                Ok(Trees { profile: profile.to_string(), from: String::new(), eas, ei, eat })
            }
            (eas, ei, eat) if eas.is_some() || ei.is_some() || eat.is_some() => {
                let missing: Vec<&str> = [("eas", eas.is_none()), ("ei", ei.is_none()), ("eat", eat.is_none())]
                    .iter()
                    .filter(|(_, m)| *m)
                    .map(|(n, _)| *n)
                    .collect();
                Err(PinsError::MissingRows(profile.to_string(), missing.join(", ")))
            }
            _ => {
                let known: Vec<&str> = self.profiles().into_iter().filter(|p| self.row(p, "eas").is_some()).collect();
                Err(PinsError::UnknownProfile(profile.to_string(), known.join(", ")))
            }
        }
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("pins serialise");
        s.push('\n');
        s
    }
}

/// One line of `pins check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub problem: bool,
    pub text: String,
}

pub fn check(pins: &Pins) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &pins.pins {
        let id = format!("{}/{}", p.profile, p.name);
        if p.repo.is_some() || p.sha.is_some() {
            match &p.sha {
                Some(sha) if p.locked => out.push(Finding { problem: false, text: format!("{id}: locked at {sha}") }),
                Some(sha) => out.push(Finding {
                    problem: true,
                    text: format!("{id}: unlocked: {sha} is abbreviated; run `eas pins lock` to resolve it"),
                }),
                None if !p.is_artifact() => {
                    out.push(Finding { problem: true, text: format!("{id}: unlocked: no commit SHA") })
                }
                None => {}
            }
        }
        if p.is_artifact() {
            match p.artifact_sha256() {
                Some(h) => out.push(Finding { problem: false, text: format!("{id}: sha256 {h}") }),
                None => out.push(Finding {
                    problem: true,
                    text: format!(
                        "{id}: no sha256: the artifact {} could not be checksummed here; `eas bastion build --lock` records it once it matches its publisher's checksum",
                        p.url.as_deref().unwrap_or(&p.git_ref)
                    ),
                }),
            }
        }
    }
    out
}

/// The longest profile or name, and the longest other field, a pins file may hold. Every
/// printer of pins (`pins show`, `pins check`, the plan's lines) shows a row on one line; the
/// built-in pins use at most 17 and 328 characters.
const MAX_ID_CHARS: usize = 64;
const MAX_FIELD_CHARS: usize = 1024;

/// Why a row cannot be printed on one line, if it cannot: a profile or name that is empty or
/// longer than [`MAX_ID_CHARS`]; any field longer than [`MAX_FIELD_CHARS`] or
/// holding a control, bidi or zero-width character. `pins check` refuses such a file (exit 2),
/// as does every command reading it.
fn field_problem(p: &Pin) -> Option<String> {
    for (field, value) in [("profile", &p.profile), ("name", &p.name)] {
        let n = value.chars().count();
        if n == 0 || n > MAX_ID_CHARS {
            return Some(format!("{field} is {n} characters; it must be 1 to {MAX_ID_CHARS}"));
        }
    }
    let optional = [("repo", &p.repo), ("url", &p.url)];
    let fields = [("ref", Some(&p.git_ref)), ("date", Some(&p.date)), ("source", Some(&p.source))]
        .into_iter()
        .chain(optional.iter().map(|(f, v)| (*f, v.as_ref())))
        .chain([("profile", Some(&p.profile)), ("name", Some(&p.name))]);
    for (field, value) in fields {
        let Some(value) = value else { continue };
        let n = value.chars().count();
        if n > MAX_FIELD_CHARS {
            return Some(format!("{field} is {n} characters, past the limit of {MAX_FIELD_CHARS}"));
        }
        if value.chars().any(|c| c.is_control() || crate::text::is_invisible(c)) {
            return Some(format!("{field} holds a control, bidi or zero-width character"));
        }
    }
    None
}

pub fn repo_url(git_base: &str, repo: &str) -> String {
    format!("{}/{repo}", git_base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_pins_parse_and_have_both_profiles() {
        let pins = Pins::parse(EMBEDDED).unwrap();
        for profile in ["main", "v1.2.0-rc.1"] {
            let t = pins.trees(profile).unwrap();
            assert_eq!(t.eas.repo.as_deref(), Some("intel/enterprise-ai-solutions"));
        }
        assert!(matches!(pins.trees("bastion"), Err(PinsError::UnknownProfile(..))));
    }

    #[test]
    fn a_profile_missing_a_row_and_pins_that_are_not_json_say_so() {
        let mut pins = Pins::parse(EMBEDDED).unwrap();
        pins.pins.retain(|p| !(p.profile == "main" && p.name == "ei"));
        let e = pins.trees("main").err().unwrap().to_string();
        assert_eq!(e, "pins: profile \"main\" has no row for ei (each profile pins eas, ei and eat)");
        for text in ["{not json", "", "{\"schema\": "] {
            let e = Pins::parse(text).err().unwrap().to_string();
            assert!(e.starts_with("pins: not JSON at line 1 column "), "{text:?}: {e}");
        }
    }

    #[test]
    fn full_sha_rule() {
        assert!(is_full_sha(&"a".repeat(40)));
        assert!(!is_full_sha(&"a".repeat(39)));
        assert!(!is_full_sha(&"A".repeat(40)));
        assert!(!is_full_sha("main"));
        assert!(!is_full_sha(&"g".repeat(40)));
    }

    #[test]
    fn rows_that_cannot_be_printed_on_one_line_are_refused_and_a_non_ascii_ref_is_kept() {
        let row = |profile: &str, name: &str, r: &str| {
            let pins = serde_json::json!({"schema": SCHEMA, "pins": [{"profile": profile, "name": name, "repo": "o/r",
                "ref": r, "sha": null, "locked": false, "date": "d", "source": "s"}]});
            Pins::parse(&pins.to_string())
        };
        assert!(row("main", "eas", "rélease/ü-1").is_ok());
        assert!(row(&"p".repeat(64), "eas", "main").is_ok());
        let long = "n".repeat(65_536);
        for (profile, name, r, says) in [
            ("main", long.as_str(), "main", "name is 65536 characters"),
            (long.as_str(), "eas", "main", "profile is 65536 characters"),
            ("main", "", "main", "name is 0 characters"),
            ("main", "eas", long.as_str(), "ref is 65536 characters, past the limit of 1024"),
            ("main", "eas", "ma\nin", "ref holds a control"),
            ("main", "eas", "ma\u{202e}in", "ref holds a control, bidi"),
        ] {
            let e = row(profile, name, r).err().unwrap().to_string();
            assert!(e.contains(says) && e.len() < 300, "{says}: {e}");
        }
    }

    #[test]
    fn locked_rows_need_full_shas() {
        let text = r#"{"schema":"eas-pins/v1","pins":[{"profile":"p","name":"n","repo":"o/r","ref":"main",
            "sha":"abcdef1","locked":true,"date":"d","source":"s"}]}"#;
        assert!(matches!(Pins::parse(text), Err(PinsError::Malformed(m)) if m.contains("abbreviated")));
    }
}
