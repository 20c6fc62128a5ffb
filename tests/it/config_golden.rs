//! `eas config` on every case under fixtures/config/: one directory a case, so a new case needs
//! no code. A case holds `facts.json`, `args` (one line of extra flags), and either `expected/`
//! (the output files, byte for byte) or `expected-exit` with `expected-stderr` (lines that must
//! appear, such as `REFUSE:` reasons). Optional: `preexisting/` (copied into --out first) and
//! `expected-stdout`. `UPDATE_GOLDEN=1 cargo test --test it config_golden::` rewrites the expectations.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const OUTPUTS: [&str; 4] = ["eas-overrides.yaml", "global_config.edit.yaml", "models.edit.yaml", "choices.txt"];

fn is_output(name: &str) -> bool {
    OUTPUTS.contains(&name) || name == "plan.json" || (name.starts_with("repos.") && name.ends_with(".yaml"))
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config");
    let mut v: Vec<PathBuf> = fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().file_name().into_string().unwrap()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    out: tempfile::TempDir,
}

fn run_case(case: &Path) -> Run {
    let out = tempfile::tempdir().unwrap();
    let pre = case.join("preexisting");
    if pre.is_dir() {
        for name in list(&pre) {
            fs::copy(pre.join(&name), out.path().join(&name)).unwrap();
        }
    }
    let args = fs::read_to_string(case.join("args")).unwrap();
    // Goldens run with an empty Hugging Face cache: data/models.json's figures decide.
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_eas"))
        .env("XDG_CACHE_HOME", cache.path())
        .arg("config")
        .arg("--facts")
        .arg(case.join("facts.json"))
        .arg("--out")
        .arg(out.path())
        .args(args.split_whitespace())
        .env_remove("EAS_PINS")
        .env("XDG_CONFIG_HOME", out.path().join(".no-config"))
        .env("NO_COLOR", "1")
        .env("CI", "1")
        .output()
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
        out,
    }
}

fn update(case: &Path, run: &Run) {
    let expected = case.join("expected");
    let _ = fs::remove_dir_all(&expected);
    let _ = fs::remove_file(case.join("expected-exit"));
    let _ = fs::remove_file(case.join("expected-stderr"));
    if run.code == 0 {
        fs::create_dir_all(&expected).unwrap();
        for name in list(run.out.path()).into_iter().filter(|n| is_output(n)) {
            fs::copy(run.out.path().join(&name), expected.join(&name)).unwrap();
        }
        if case.join("expected-stdout").exists() {
            fs::write(case.join("expected-stdout"), &run.stdout).unwrap();
        }
    } else {
        fs::write(case.join("expected-exit"), format!("{}\n", run.code)).unwrap();
        let stderr = run.stderr.replace(&case.display().to_string(), "<case>");
        let lines: Vec<&str> =
            stderr.lines().filter(|l| l.starts_with("REFUSE: ") || l.starts_with("error: ")).collect();
        fs::write(case.join("expected-stderr"), lines.join("\n") + "\n").unwrap();
    }
}

fn check(case: &Path, run: &Run) -> Vec<String> {
    let mut problems = Vec::new();
    let name = case.file_name().unwrap().to_string_lossy().to_string();
    let want_code: i32 = fs::read_to_string(case.join("expected-exit")).map(|s| s.trim().parse().unwrap()).unwrap_or(0);
    if run.code != want_code {
        problems.push(format!("{name}: exit {} (want {want_code}); stderr:\n{}", run.code, run.stderr));
        return problems;
    }
    // Files that were in --out before and are not outputs must survive, whatever the outcome.
    let pre = case.join("preexisting");
    for f in list(&pre).into_iter().filter(|n| !is_output(n)) {
        if !run.out.path().join(&f).exists() {
            problems.push(format!("{name}: {f} (not an eas output) was removed"));
        }
    }
    let produced: Vec<String> = list(run.out.path()).into_iter().filter(|n| is_output(n)).collect();
    if want_code == 0 {
        let expected = list(&case.join("expected"));
        if produced != expected {
            problems.push(format!("{name}: produced {produced:?}, expected {expected:?}"));
        }
        for f in &expected {
            let want = fs::read_to_string(case.join("expected").join(f)).unwrap();
            let got = fs::read_to_string(run.out.path().join(f)).unwrap_or_default();
            if want != got {
                problems.push(format!("{name}: {f} differs\n--- expected\n{want}--- got\n{got}"));
            }
        }
        if let Ok(want) = fs::read_to_string(case.join("expected-stdout"))
            && want != run.stdout
        {
            problems.push(format!("{name}: stdout differs\n--- expected\n{want}--- got\n{}", run.stdout));
        }
    } else {
        if !produced.is_empty() {
            problems.push(format!("{name}: exit {want_code} but --out holds {produced:?}"));
        }
        let want = fs::read_to_string(case.join("expected-stderr")).unwrap_or_default();
        // A file's problem names the file: the case's directory is `<case>` in the golden lines.
        let stderr = run.stderr.replace(&case.display().to_string(), "<case>");
        for line in want.lines().filter(|l| !l.is_empty()) {
            if !stderr.lines().any(|l| l == line) {
                problems.push(format!("{name}: stderr lacks {line:?}; got:\n{}", run.stderr));
            }
        }
        let refusals = run.stderr.lines().filter(|l| l.starts_with("REFUSE: ")).count();
        let want_refusals = want.lines().filter(|l| l.starts_with("REFUSE: ")).count();
        if refusals != want_refusals {
            problems.push(format!("{name}: {refusals} REFUSE lines, want {want_refusals}"));
        }
        if want_code == 2 {
            let errors: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
            let hints = run.stderr.lines().filter(|l| l.starts_with("hint: ")).count();
            if errors.len() != 1 || hints != 1 {
                problems.push(format!("{name}: bad input must print one cause and one hint; got:\n{}", run.stderr));
            }
        }
    }
    problems
}

#[test]
fn every_config_case_matches_its_golden_files() {
    let updating = std::env::var_os("UPDATE_GOLDEN").is_some();
    let cases = cases();
    assert!(cases.len() >= 24, "only {} cases", cases.len());
    let mut problems = Vec::new();
    for case in &cases {
        let run = run_case(case);
        if updating {
            update(case, &run);
        }
        problems.extend(check(case, &run));
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n\n"));
}

/// The catalog of real entries decides without Hugging Face: data/models.json carries the figures
/// of both its vLLM LLM entries (Qwen3-0.6B from torchtune, the AWQ entry's stated bound), so the
/// largest that fits, llama3-8b-awq, is picked and its decision cites where its figures come from.
/// Figures in the Hugging Face cache (as `eas up` leaves them) win over the data: a config in
/// Qwen3-0.6B's shape (28 layers, 8 KV heads, head_dim 128, 40960 tokens, bf16) with a test size
/// is named as the source of qwen3-0-6b's sizing.
#[test]
fn the_real_catalog_decides_from_the_data_and_the_hf_cache_wins() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let case = root.join("fixtures/config/no-fit-memory-decides");
    let out = tempfile::tempdir().unwrap();
    let run = |xdg: &Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_eas"))
            .env("XDG_CACHE_HOME", xdg)
            .args(["config", "--facts"])
            .arg(case.join("facts.json"))
            .arg("--out")
            .arg(out.path())
            .args(["--catalog"])
            .arg(root.join("fixtures/synthetic/catalogs/real-entries.yaml"))
            .args(extra)
            .current_dir(root)
            .output()
            .unwrap()
    };
    // Without a cache (offline): the data's figures decide, and the pick says so.
    let empty = tempfile::tempdir().unwrap();
    let o = run(empty.path(), &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("-> model: llama3-8b-awq (rule: the largest entry that fits, 5.3 GiB of weights)"),
        "{stdout}"
    );
    assert!(stdout.contains("(casperhansen/llama-3-8b-instruct-awq's figures: data/models.json)"), "{stdout}");
    // With Qwen3-0.6B's figures in the cache, its sizing names them.
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("eas/hf/Qwen/Qwen3-0.6B@main");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("config.json"),
        r#"{"head_dim": 128, "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 28,
            "num_key_value_heads": 8, "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}"#,
    )
    .unwrap();
    fs::write(dir.join("model.safetensors.size"), "1503238554").unwrap();
    let o = run(cache.path(), &["--model", "qwen3-0-6b"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("weights 1.4 GiB (Qwen/Qwen3-0.6B's figures: hf:Qwen/Qwen3-0.6B@main config.json)"),
        "{stdout}"
    );
    // 40960 tokens x 112 KiB = 4.4 GiB fits the category's 8 GiB cache: no --max-model-len.
    let edit = fs::read_to_string(out.path().join("models.edit.yaml")).unwrap();
    assert!(!edit.contains("--max-model-len"), "{edit}");
    // Without the cache the same entry is sized from the data (torchtune's figures).
    let o = run(empty.path(), &["--model", "qwen3-0-6b"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("weights 1.1 GiB (Qwen/Qwen3-0.6B's figures: data/models.json)"), "{stdout}");
}

#[test]
fn a_second_run_replaces_every_output_and_keeps_other_files() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9");
    let out = tempfile::tempdir().unwrap();
    fs::write(out.path().join("keep.txt"), "mine").unwrap();
    let run = |layer: &str| {
        let st = Command::new(env!("CARGO_BIN_EXE_eas"))
            .args(["config", "--facts"])
            .arg(case.join("facts.json"))
            .arg("--out")
            .arg(out.path())
            .args(["--layer", layer])
            .env_remove("EAS_PINS")
            .env("XDG_CONFIG_HOME", out.path().join(".no-config"))
            .output()
            .unwrap();
        assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    };
    run("agent-toolkit");
    assert!(out.path().join("repos.agent-toolkit.yaml").exists());
    run("inference");
    let names = list(out.path());
    assert!(names.contains(&"repos.inference.yaml".to_string()), "{names:?}");
    assert!(!names.contains(&"repos.agent-toolkit.yaml".to_string()), "stale manifest left: {names:?}");
    assert!(names.contains(&"keep.txt".to_string()));
    assert!(!names.iter().any(|n| n.starts_with(".eas-out-")), "scratch dir left: {names:?}");
}

#[test]
fn every_fixture_facts_document_satisfies_the_json_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(root.join("data/eas-facts.v1.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut docs = Vec::new();
    for dir in ["fixtures/config", "fixtures/clusters"] {
        let Ok(rd) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        for case in rd {
            let case = case.unwrap().path();
            for f in [case.join("facts.json"), case.join("expected/facts.json")] {
                if f.exists() {
                    docs.push(f);
                }
            }
        }
    }
    assert!(docs.len() >= 24);
    let mut valid = 0;
    for f in &docs {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&fs::read_to_string(f).unwrap()) else {
            continue;
        };
        let errors: Vec<String> =
            validator.iter_errors(&doc).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        // The schema and the reader agree: a document the reader accepts is valid, and the cases
        // that are bad input on purpose (exit 2) are the ones the schema rejects, except those
        // whose fault is beyond a schema (a floating ref, a fit cache without its context length).
        let bad_on_purpose = f.parent().unwrap().join("expected-exit").exists()
            && fs::read_to_string(f.parent().unwrap().join("expected-exit")).unwrap().trim() == "2";
        if errors.is_empty() {
            valid += 1;
        } else {
            assert!(bad_on_purpose, "{}: {}", f.display(), errors.join("; "));
        }
    }
    assert!(valid >= 24, "only {valid} valid documents");
}
