//! `eas fit` on fixtures/fit: the table and the JSON document for nodes of 16 to 187 GiB, an
//! external fit that wins with its disagreements warned, and a malformed one (exit 2).

use crate::support;

use std::path::Path;

use support::*;

fn run(case: &Path, output: &str) -> std::process::Output {
    let mut args = vec!["fit".to_string(), "--facts".into(), "facts.json".into(), "--output".into(), output.into()];
    if let Ok(extra) = std::fs::read_to_string(case.join("args")) {
        args.extend(extra.split_whitespace().map(str::to_string));
    }
    eas(case).args(&args).output().expect("eas runs")
}

fn cases() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root().join("fixtures/fit"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("facts.json").exists())
        .collect();
    v.sort();
    v
}

#[test]
fn each_case_gives_its_expected_table_document_and_warnings() {
    let all = cases();
    assert!(all.len() >= 7, "{all:?}");
    for case in all {
        let want_exit: i32 =
            std::fs::read_to_string(case.join("expected-exit")).map(|s| s.trim().parse().unwrap()).unwrap_or(0);
        let table = run(&case, "text");
        let json = run(&case, "json");
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        assert_eq!(table.status.code(), Some(want_exit), "{name}: {}", text(&table.stderr));
        assert_eq!(json.status.code(), Some(want_exit), "{name}");
        golden(&case.join("expected/stderr"), &text(&table.stderr));
        if want_exit != 0 {
            assert!(table.stdout.is_empty(), "{name}: no table on bad input");
            // A script still gets one document: the error, with the exit code.
            let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("an error document");
            assert_eq!(
                (doc["exit_code"].as_i64(), doc["error"].is_string()),
                (Some(i64::from(want_exit)), true),
                "{name}"
            );
            let errors = schema_errors("eas-fit.v1", &doc);
            assert!(errors.is_empty(), "{name}: {}", errors.join("; "));
            continue;
        }
        // The table says what it sizes, and where `eas up`'s own decision is shown.
        assert!(text(&table.stderr).contains("`eas up` decides against the pinned EI catalog's entries"), "{name}");
        assert!(!text(&json.stderr).contains("note: this sizes"), "{name}: JSON stays quiet");
        golden(&case.join("expected/fit.txt"), &text(&table.stdout));
        golden(&case.join("expected/fit.json"), &text(&json.stdout));
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let errors = schema_errors("eas-fit.v1", &doc);
        assert!(errors.is_empty(), "{name}: {}", errors.join("; "));
    }
}

/// Which candidates fit, node by node, as worked out by hand in fixtures/fit/README.md terms:
/// budget = N GiB − 140 MiB − 4 GiB; weights 27.4 (14B), 14.2 (7B), 15.0 (8B) GiB.
#[test]
fn verdicts_by_node_size() {
    // (N, [14B, 7B, 8B] as (fits, cache GiB, max-model-len))
    type V = (bool, Option<&'static str>, Option<&'static str>);
    let no: V = (false, None, None);
    let cases: [(u64, [V; 3]); 5] = [
        (16, [no, no, no]),
        // budget = N GiB − 140 MiB − 4 GiB → N − 5 whole GiB; weights + 2 GiB working headroom,
        // rounded up: 30 (14B), 17 (7B), 17 (8B). 32 GiB: 27 − 17 = 10 GiB of cache; 7B's 32768 ×
        // 56 KiB = 1.75 GiB fits; Llama's 131072 × 128 KiB = 16 GiB does not: 10 GiB / 128 KiB =
        // 81920 → 65536.
        (32, [no, (true, Some("10"), None), (true, Some("10"), Some("65536"))]),
        // 64: 59 − 30 = 29 (14B, 6 GiB a full request); the others at the catalog's 40.
        (64, [(true, Some("29"), None), (true, Some("40"), None), (true, Some("40"), None)]),
        (125, [(true, Some("40"), None); 3]),
        (187, [(true, Some("40"), None); 3]),
    ];
    for (gib, want) in cases {
        let case = root().join(format!("fixtures/fit/node-{gib}gib"));
        let out = run(&case, "json");
        assert!(out.status.success(), "{gib}: {}", text(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["source"], "eas");
        let budget = doc["node"]["budget_bytes"].as_u64().unwrap();
        assert_eq!(budget, gib * (1 << 30) - 140 * (1 << 20) - 4 * (1 << 30), "{gib}");
        for (name, (fits, cache, len)) in ["qwen2-5-coder-14b", "qwen2-5-coder-7b", "llama-3-1-8b"].iter().zip(want) {
            let c = &doc["candidates"][name];
            assert_eq!(c["fits"], fits, "{gib} GiB {name}: {}", c["why"]);
            assert_eq!(c["env"]["VLLM_CPU_KVCACHE_SPACE"].as_str(), cache, "{gib} GiB {name}");
            assert_eq!(c["args"].get(1).and_then(|v| v.as_str()), len, "{gib} GiB {name}");
        }
    }
}

#[test]
fn an_external_fit_wins_and_every_disagreement_is_a_warning() {
    let case = root().join("fixtures/fit/external-disagrees");
    let out = run(&case, "json");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["source"], "k3d-gpu fit");
    assert_eq!(doc["candidates"]["qwen2-5-coder-14b"]["fits"], false, "the external verdict wins");
    assert_eq!(doc["candidates"]["llama-3-1-8b"]["env"]["VLLM_CPU_KVCACHE_SPACE"], "8");
    assert_eq!(doc["candidates"]["qwen2-5-coder-7b"]["fits"], false, "no external verdict: not picked");
    let err = text(&out.stderr);
    contains_all(
        &err,
        &[
            "k3d-gpu fit says qwen2-5-coder-14b does not fit, eas says it fits",
            "k3d-gpu fit has no verdict for qwen2-5-coder-7b; eas says it fits",
            "k3d-gpu fit gives llama-3-1-8b VLLM_CPU_KVCACHE_SPACE=8, eas 40",
            "k3d-gpu fit gives llama-3-1-8b --max-model-len 16384, eas (none)",
        ],
    );
    assert_eq!(err.matches("warning:").count(), 4, "{err}");
}

#[test]
fn eas_agrees_with_its_own_document_given_as_an_external_fit() {
    let case = root().join("fixtures/fit/node-64gib");
    let own = run(&case, "json");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(case.join("facts.json"), dir.path().join("facts.json")).unwrap();
    std::fs::write(dir.path().join("own.json"), &own.stdout).unwrap();
    let out = eas(dir.path()).args(["fit", "--facts", "facts.json", "--fit", "own.json"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("warning"), "{}", text(&out.stderr));
}

#[test]
fn config_prints_each_disagreement_with_an_external_fit_as_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let case = root().join("fixtures/config/external-fit-wins");
    // `eas config` on the case's facts with `fit` as the external fit, writing to `out`.
    let config = |layer: &[&str], out: &str, fit: &Path| {
        let facts = case.join("facts.json");
        let mut c = eas(dir.path());
        c.arg("config").args(layer).arg("--facts").arg(facts).args(["--out", out, "--fit"]).arg(fit);
        c.output().unwrap()
    };
    let fit = case.join("fit-doc.json");
    let out = config(&[], "out", &fit);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: k3d-gpu fit gives llama-3-1-8b VLLM_CPU_KVCACHE_SPACE=8, eas 40; k3d-gpu fit wins"),
        "{err}"
    );
    assert!(err.contains("warning: k3d-gpu fit has no verdict for qwen2-5-coder-7b; eas says it fits"), "{err}");
    // The inference layer picks with the fit as well, and hears the same disagreements.
    let out = config(&["--layer", "inference"], "out-inference", &fit);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let inference = text(&out.stderr);
    for line in err.lines().filter(|l| l.starts_with("warning: k3d-gpu fit")) {
        assert!(inference.contains(line), "inference lacks {line:?}:\n{inference}");
    }
    let bad = root().join("fixtures/fit/external-malformed/fit-doc.json");
    let out = config(&[], "out2", &bad);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(!dir.path().join("out2/choices.txt").exists(), "nothing written on bad input");
}

/// A node name from the cluster with an escape sequence reaches the table escaped, never raw.
#[test]
fn the_table_escapes_control_characters_from_the_cluster() {
    let case = cases().into_iter().find(|c| !c.join("expected-exit").exists()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let facts = std::fs::read_to_string(case.join("facts.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&facts).unwrap();
    let node = doc["nodes"][0]["name"].as_str().unwrap().to_string();
    std::fs::write(
        dir.path().join("facts.json"),
        facts.replace(&format!("\"{node}\""), &format!("\"{node}\\u001b[31m\"")),
    )
    .unwrap();
    let out = run(dir.path(), "text");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(!stdout.contains('\u{1b}'), "no raw escape: {stdout:?}");
    assert!(stdout.contains(&format!("{node}\\u{{1b}}[31m")), "the name shown with its escape: {stdout}");
}

/// Issue 30 item 4: a 2^64-1 figure in a file the user gave is bad input naming the file and the
/// field, in `--fit` (the KV cache's GiB) and in `--facts` (a node's memory), never a wrapped
/// sum.
#[test]
fn a_2_64_minus_1_figure_in_a_fit_or_facts_file_is_exit_2_naming_file_and_field() {
    let case = root().join("fixtures/fit/external-disagrees");
    let dir = tempfile::tempdir().unwrap();
    let mut fit: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("fit-doc.json")).unwrap()).unwrap();
    fit["candidates"]["llama-3-1-8b"]["env"]["VLLM_CPU_KVCACHE_SPACE"] = "18446744073709551615".into();
    std::fs::write(dir.path().join("fit.json"), fit.to_string()).unwrap();
    let mut facts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("facts.json")).unwrap()).unwrap();
    std::fs::write(dir.path().join("facts.json"), facts.to_string()).unwrap();
    facts["nodes"][0]["allocatable"]["memory"] = "18446744073709551615".into();
    std::fs::write(dir.path().join("huge-facts.json"), facts.to_string()).unwrap();
    for (args, file, field) in [
        (
            &["--facts", "facts.json", "--fit", "fit.json"],
            "fit.json",
            "candidates.llama-3-1-8b.env.VLLM_CPU_KVCACHE_SPACE",
        ),
        (&["--facts", "huge-facts.json", "--fit", "fit.json"], "huge-facts.json", "nodes[0].allocatable.memory"),
    ] {
        for command in ["fit", "config"] {
            let mut c = eas(dir.path());
            c.arg(command).args(args);
            if command == "config" {
                c.args(["--out", "out"]);
            }
            let out = c.output().unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} {args:?}: {err}");
            let named = err.contains(file) && err.contains(field) && err.contains("past 4 EiB");
            assert!(named, "{command} {args:?}: {err}");
            assert!(!dir.path().join("out").exists(), "nothing written: {err}");
        }
    }
}
