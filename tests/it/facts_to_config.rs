//! `eas facts` feeds `eas config` unchanged: on each recorded cluster the gathered document goes
//! straight into the generator, whose outputs must equal fixtures/clusters/<name>/expected/config/
//! (and its choice lines, expected/config.stdout); a refusal exits 3 with the REFUSE lines of
//! expected/config.refusal and writes no output file.

use crate::support;

use support::*;

#[test]
fn facts_feed_config_on_every_recorded_cluster() {
    for name in CLUSTERS {
        let server = ClusterServer::start(fixture(name));
        let out = facts(&server, name, &[]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("facts.json"), &out.stdout).unwrap();
        let config = eas(dir.path())
            .args(["config", "--facts", "facts.json", "--out", "out"])
            .args(config_args(name))
            .output()
            .unwrap();
        let expected = fixture(name).join("expected/config");
        let mut produced: Vec<String> = std::fs::read_dir(dir.path().join("out"))
            .map(|d| d.map(|e| e.unwrap().file_name().into_string().unwrap()).collect())
            .unwrap_or_default();
        produced.sort();
        let refused = fixture(name).join("expected/config.refusal").exists() || config.status.code() == Some(3);
        if refused {
            assert_eq!(config.status.code(), Some(3), "{name}: {}", text(&config.stderr));
            assert!(produced.is_empty(), "{name}: a refusal writes nothing, found {produced:?}");
            golden(&fixture(name).join("expected/config.refusal"), &text(&config.stderr));
            continue;
        }
        assert!(config.status.success(), "{name}: {}", text(&config.stderr));
        if std::env::var_os("UPDATE_GOLDEN").is_none() {
            let mut wanted: Vec<String> =
                std::fs::read_dir(&expected).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            wanted.sort();
            assert_eq!(produced, wanted, "{name}: the generator's files");
        }
        for file in &produced {
            let actual = std::fs::read_to_string(dir.path().join("out").join(file)).unwrap();
            golden(&expected.join(file), &actual);
        }
        golden(&fixture(name).join("expected/config.stdout"), &text(&config.stdout));
    }
}
