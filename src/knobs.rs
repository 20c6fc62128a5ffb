//! The knob audit: every key eas writes must be read by the pinned trees (`data/knobs.json`).
//!
//! Ansible ignores an extra var nothing reads, so a key renamed upstream silently turns a choice
//! into a no-op. Each key lists where a reader is expected (path globs in the EAS, EI or EAT
//! tree) and whether it is `required` (its effect is what the install depends on: unread is a
//! refusal unless `--allow-unread KEY`) or `defensive` (harmless when unread: a note). Pure: the
//! search is the caller's, passed in as a function.

use std::sync::OnceLock;

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Required,
    Defensive,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Required => "required",
            Kind::Defensive => "defensive",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reader {
    /// `eas`, `ei` or `eat`.
    pub tree: String,
    /// Git pathspec globs within that tree (`roles/**`, `:(exclude)...` allowed).
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knob {
    pub key: String,
    /// Which generated file carries it (for people; checked by the tests).
    #[allow(dead_code)]
    pub written_to: String,
    pub kind: Kind,
    pub reason: String,
    pub readers: Vec<Reader>,
    /// What was found reading the public upstream copies (for people, not for the audit).
    #[allow(dead_code)]
    pub upstream: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knobs {
    pub schema: String,
    #[allow(dead_code)]
    pub about: String,
    pub keys: Vec<Knob>,
}

pub fn table() -> &'static Knobs {
    static V: OnceLock<Knobs> = OnceLock::new();
    V.get_or_init(|| {
        let k: Knobs = serde_json::from_str(include_str!("../data/knobs.json")).expect("data/knobs.json is valid");
        assert_eq!(k.schema, "eas-knobs/v1");
        k
    })
}

/// One tree as the audit names it: `intel/enterprise-inference@abc1234`.
pub struct TreeRef<'a> {
    pub name: &'a str,
    pub at: String,
}

/// A patch the overlay will apply: its id and text (its added lines are readers too).
pub struct Planned<'a> {
    pub id: &'a str,
    pub text: &'a str,
}

#[derive(Debug, Default, PartialEq)]
pub struct Audit {
    /// One decision line per key: its reader(s) and where, or what was searched.
    pub lines: Vec<String>,
    pub refusals: Vec<String>,
    pub warnings: Vec<String>,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `text` holds `key` as a whole word (as `git grep -w`).
pub fn has_word(text: &str, key: &str) -> bool {
    text.match_indices(key).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + key.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// Whether a line is a comment (`#` first: YAML, shell, Python; `{#`: a Jinja comment). A key
/// named only in a comment is not read: a header saying "included when X is on" stays behind
/// when the gate itself is renamed.
pub fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('#') || t.starts_with("{#")
}

/// Whether `line` reads `key`: holds it as a whole word outside a comment.
pub fn reads(line: &str, key: &str) -> bool {
    !is_comment(line) && has_word(line, key)
}

/// `find(tree, key, paths)`: the files of that tree at its pinned commit holding `key` as a word.
pub type Finder<'a> = dyn FnMut(&str, &str, &[String]) -> Vec<String> + 'a;

/// Audits the keys written. `find(tree, key, paths)` returns the files of that tree at its
/// pinned commit that read `key` ([`reads`]: as a word, outside a comment).
pub fn audit(
    written: &[&str],
    trees: &[TreeRef],
    patches: &[Planned],
    allow_unread: &[String],
    find: &mut Finder,
) -> Audit {
    let mut a = Audit::default();
    for key in written {
        let Some(knob) = table().keys.iter().find(|k| k.key == *key) else {
            a.refusals.push(format!("eas writes {key}, which data/knobs.json does not list: a bug in eas"));
            continue;
        };
        let mut found = Vec::new();
        let mut searched = Vec::new();
        for r in &knob.readers {
            let at = trees.iter().find(|t| t.name == r.tree).map_or_else(|| r.tree.clone(), |t| t.at.clone());
            searched.push(format!("{} in {at}", r.paths.join(" ")));
            for path in find(&r.tree, key, &r.paths) {
                found.push(format!("{at} {path}"));
            }
        }
        for p in patches {
            let mut added = p.text.lines().filter_map(|l| l.strip_prefix('+').filter(|_| !l.starts_with("+++")));
            if added.any(|l| reads(l, key)) {
                found.push(format!("overlay {} (added by the patch)", p.id));
            }
        }
        let searched = searched.join("; ");
        if !found.is_empty() {
            a.lines.push(format!("{key} ({}) -> read by {}", knob.kind.name(), found.join(", ")));
            continue;
        }
        match knob.kind {
            Kind::Defensive => a
                .lines
                .push(format!("{key} (defensive) -> note: nothing reads it ({searched}); harmless: {}", knob.reason)),
            Kind::Required if allow_unread.iter().any(|k| k == key) => {
                a.warnings.push(format!(
                    "{key} is read by nothing at the pinned commits ({searched}); --allow-unread {key} proceeds"
                ));
                a.lines.push(format!("{key} (required) -> unread, allowed by --allow-unread ({searched})"));
            }
            Kind::Required => a.refusals.push(format!(
                "{key} is written but nothing reads it at the pinned commits (searched {searched}): {}; \
                 pass --allow-unread {key} to proceed anyway",
                knob.reason
            )),
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources;

    fn trees() -> Vec<TreeRef<'static>> {
        vec![
            TreeRef { name: "eas", at: "intel/enterprise-ai-solutions@aaaaaaa".into() },
            TreeRef { name: "ei", at: "intel/enterprise-inference@bbbbbbb".into() },
        ]
    }

    #[test]
    fn the_table_loads_and_every_key_has_readers_or_is_defensive() {
        let t = table();
        assert!(!t.keys.is_empty());
        for k in &t.keys {
            assert!(k.kind == Kind::Defensive || !k.readers.is_empty(), "{} is required with nowhere to look", k.key);
            for r in &k.readers {
                assert!(["eas", "ei", "eat"].contains(&r.tree.as_str()), "{}: tree {}", k.key, r.tree);
            }
            assert!(!k.reason.is_empty() && !k.upstream.is_empty(), "{}", k.key);
            let files = ["eas-overrides.yaml", "global_config.edit.yaml", "models.edit.yaml"];
            assert!(files.contains(&k.written_to.as_str()), "{}: {}", k.key, k.written_to);
        }
        let _ = sources::table();
    }

    #[test]
    fn a_read_key_becomes_a_line_naming_its_reader() {
        let mut find = |tree: &str, key: &str, _: &[String]| {
            if tree == "ei" && key == "nfd_enabled" { vec!["components.yaml".to_string()] } else { vec![] }
        };
        let a = audit(&["nfd_enabled"], &trees(), &[], &[], &mut find);
        assert_eq!(a.refusals, Vec::<String>::new());
        assert_eq!(
            a.lines,
            vec!["nfd_enabled (required) -> read by intel/enterprise-inference@bbbbbbb components.yaml"]
        );
    }

    #[test]
    fn an_unread_required_key_is_refused_naming_the_key_the_files_and_the_commit() {
        let mut none = |_: &str, _: &str, _: &[String]| Vec::new();
        let a = audit(&["nfd_enabled"], &trees(), &[], &[], &mut none);
        assert_eq!(a.refusals.len(), 1, "{a:?}");
        let r = &a.refusals[0];
        assert!(r.starts_with("nfd_enabled is written but nothing reads it"), "{r}");
        assert!(r.contains("intel/enterprise-inference@bbbbbbb"), "{r}");
        assert!(r.contains("--allow-unread nfd_enabled"), "{r}");
        // --allow-unread proceeds with a warning.
        let a = audit(&["nfd_enabled"], &trees(), &[], &["nfd_enabled".into()], &mut none);
        assert!(a.refusals.is_empty());
        assert_eq!(a.warnings.len(), 1);
        // A defensive key is a note.
        let a = audit(&["kata_containers_enabled"], &trees(), &[], &[], &mut none);
        assert!(a.refusals.is_empty() && a.warnings.is_empty());
        assert!(a.lines[0].contains("note: nothing reads it"), "{:?}", a.lines);
    }

    #[test]
    fn a_planned_patch_that_adds_a_reader_counts() {
        let mut none = |_: &str, _: &str, _: &[String]| Vec::new();
        let patch = "--- a/x\n+++ b/x\n-        values: {}\n+        values: \"{{ {'global': {'platform': istio_platform}} }}\"\n";
        let a = audit(&["istio_platform"], &trees(), &[Planned { id: "0002", text: patch }], &[], &mut none);
        assert!(a.refusals.is_empty(), "{a:?}");
        assert_eq!(a.lines, vec!["istio_platform (required) -> read by overlay 0002 (added by the patch)"]);
        // A removed line is not a reader.
        let removed = "-  x: istio_platform\n";
        let a = audit(&["istio_platform"], &trees(), &[Planned { id: "0002", text: removed }], &[], &mut none);
        assert_eq!(a.refusals.len(), 1);
        // Nor is an added comment that only names the key.
        let comment = "+        # global.platform comes from istio_platform\n";
        let a = audit(&["istio_platform"], &trees(), &[Planned { id: "0002", text: comment }], &[], &mut none);
        assert_eq!(a.refusals.len(), 1, "{a:?}");
    }

    #[test]
    fn a_comment_is_not_a_reader() {
        assert!(reads("  when: llm_services_deploy_models | default(true) | bool", "llm_services_deploy_models"));
        assert!(reads("x: 1  # llm_services_deploy_models", "llm_services_deploy_models"));
        assert!(!reads("# Included when llm_services_deploy_models is true.", "llm_services_deploy_models"));
        assert!(!reads("    #llm_services_deploy_models: false", "llm_services_deploy_models"));
        assert!(!reads("  {# llm_services_deploy_models #}", "llm_services_deploy_models"));
    }

    #[test]
    fn words_not_substrings() {
        assert!(has_word("when: nfd_enabled | bool", "nfd_enabled"));
        assert!(!has_word("when: nfd_enabled_x", "nfd_enabled"));
        assert!(!has_word("my_nfd_enabled", "nfd_enabled"));
        assert!(has_word("nfd_enabled", "nfd_enabled"));
    }
}
