//! The JSON schemas of every document eas prints or reads, built into the binary so a release
//! user (who has no `data/` directory) can get them: `eas schema NAME`. The files under `data/`
//! are the sources; this table is the only list of them, and a test keeps the two in step.

/// (document name, schema text), in the order a user meets the documents.
pub const SCHEMAS: &[(&str, &str)] = &[
    ("eas-plan/v1", include_str!("../data/eas-plan.v1.schema.json")),
    ("eas-status/v1", include_str!("../data/eas-status.v1.schema.json")),
    ("eas-verify/v1", include_str!("../data/eas-verify.v1.schema.json")),
    ("eas-doctor/v1", include_str!("../data/eas-doctor.v1.schema.json")),
    ("eas-fit/v1", include_str!("../data/eas-fit.v1.schema.json")),
    ("eas-facts/v1", include_str!("../data/eas-facts.v1.schema.json")),
    ("eas-pins/v1", include_str!("../data/eas-pins.v1.schema.json")),
    ("eas-config/v1", include_str!("../data/eas-config.v1.schema.json")),
];

/// The schema `name` names: `eas-plan/v1`, its file stem `eas-plan.v1`, or `eas-plan` (the newest
/// version). Pure.
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    let wanted = name.trim().replace('.', "/");
    if let Some(hit) = SCHEMAS.iter().find(|(n, _)| *n == wanted) {
        return Some(*hit);
    }
    // Without a version: the last listed version of that document.
    SCHEMAS.iter().rev().find(|(n, _)| n.split('/').next() == Some(wanted.as_str())).copied()
}

/// The names `eas schema` accepts, for its listing and its error.
pub fn names() -> Vec<&'static str> {
    SCHEMAS.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_file_in_data_is_shipped_and_every_shipped_schema_is_json_naming_itself() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".schema.json").map(|s| s.replace('.', "/")))
            .collect();
        files.sort();
        let mut shipped = names();
        shipped.sort();
        assert_eq!(files, shipped, "data/*.schema.json and SCHEMAS differ");
        for (name, text) in SCHEMAS {
            let doc: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                doc["properties"]["schema"]["const"], *name,
                "{name}: its `schema` field names another document"
            );
            jsonschema::validator_for(&doc).unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"));
        }
    }

    /// Every list of phase names in a schema is the phase table's, in its order: a phase added
    /// to, renamed in or moved in `PHASES` fails here until the schemas follow.
    #[test]
    fn every_phase_enum_in_the_schemas_is_the_phase_tables() {
        fn enums<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a Vec<serde_json::Value>>) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(serde_json::Value::Array(a)) = m.get("enum") {
                        out.push(a);
                    }
                    m.values().for_each(|x| enums(x, out));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| enums(x, out)),
                _ => {}
            }
        }
        let table: Vec<&str> = crate::plan::PHASES.iter().map(|p| p.name).collect();
        let mut seen = 0;
        for (name, text) in SCHEMAS {
            let doc: serde_json::Value = serde_json::from_str(text).unwrap();
            let mut found = Vec::new();
            enums(&doc, &mut found);
            // A phase enum names `preflight`; other enums may share a word with it ("install").
            for e in found.into_iter().filter(|e| e.iter().any(|x| x.as_str() == Some(table[1]))) {
                let listed: Vec<&str> = e.iter().filter_map(|x| x.as_str()).collect();
                assert_eq!(listed, table, "{name}: a phase enum differs from PHASES");
                seen += 1;
            }
        }
        // The plan's phases, timeouts, blockers and unknowns, and the status's phase.
        assert!(seen >= 5, "only {seen} phase enums found");
    }

    #[test]
    fn a_schema_is_found_by_name_by_file_stem_and_without_a_version() {
        for asked in ["eas-verify/v1", "eas-verify.v1", "eas-verify", " eas-verify "] {
            assert_eq!(find(asked).map(|(n, _)| n), Some("eas-verify/v1"), "{asked}");
        }
        assert_eq!(find("eas-verify/v9"), None);
        assert_eq!(find("data/eas-plan.v1.schema.json"), None);
    }
}
