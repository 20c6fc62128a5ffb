//! The citation table (`data/sources.json`): each decision's source is a file read at a full
//! commit SHA, with the line range that says what the decision claims.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

const EMBEDDED: &str = include_str!("../data/sources.json");

#[derive(Debug, Clone, Deserialize)]
pub struct Source {
    pub id: String,
    pub repo: String,
    pub sha: String,
    pub path: String,
    pub lines: [u32; 2],
    pub says: String,
}

#[derive(Debug, Deserialize)]
struct Table {
    schema: String,
    sources: Vec<Source>,
}

impl Source {
    /// `repo@sha7 path:a-b`, the form `choices.txt` carries.
    pub fn short(&self) -> String {
        format!("{}@{} {}:{}", self.repo, &self.sha[..7], self.path, self.range())
    }

    pub fn permalink(&self) -> String {
        let [a, b] = self.lines;
        let frag = if a == b { format!("L{a}") } else { format!("L{a}-L{b}") };
        format!("https://github.com/{}/blob/{}/{}#{frag}", self.repo, self.sha, self.path)
    }

    fn range(&self) -> String {
        let [a, b] = self.lines;
        if a == b { a.to_string() } else { format!("{a}-{b}") }
    }
}

pub fn table() -> &'static BTreeMap<String, Source> {
    static TABLE: OnceLock<BTreeMap<String, Source>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let t: Table = serde_json::from_str(EMBEDDED).expect("data/sources.json is valid (checked by tests)");
        assert_eq!(t.schema, "eas-sources/v1");
        t.sources.into_iter().map(|s| (s.id.clone(), s)).collect()
    })
}

/// The source with this id. Every id the rules use is checked by a test, so a miss is a bug.
pub fn get(id: &str) -> &'static Source {
    table().get(id).unwrap_or_else(|| panic!("source {id:?} is not in data/sources.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pins::is_full_sha;

    #[test]
    fn every_source_is_at_a_full_sha_with_a_sane_range() {
        let t: Table = serde_json::from_str(EMBEDDED).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for s in &t.sources {
            assert!(is_full_sha(&s.sha), "{}: {}", s.id, s.sha);
            assert!(s.lines[0] >= 1 && s.lines[0] <= s.lines[1], "{}: {:?}", s.id, s.lines);
            assert!(s.repo.split('/').count() == 2, "{}", s.id);
            assert!(!s.path.starts_with('/'), "{}", s.id);
            assert!(seen.insert(&s.id), "duplicate id {}", s.id);
        }
    }

    #[test]
    fn permalink_form() {
        let s = Source {
            id: "x".into(),
            repo: "o/r".into(),
            sha: "0123456789abcdef0123456789abcdef01234567".into(),
            path: "a/b.yaml".into(),
            lines: [3, 9],
            says: String::new(),
        };
        assert_eq!(s.short(), "o/r@0123456 a/b.yaml:3-9");
        assert_eq!(
            s.permalink(),
            "https://github.com/o/r/blob/0123456789abcdef0123456789abcdef01234567/a/b.yaml#L3-L9"
        );
    }
}
