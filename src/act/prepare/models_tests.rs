use serde_json::{Value, json};

use super::*;
use crate::config::decision::{Decision, ModelEdit};
use crate::config::render;
use crate::settings::Layer;

/// A synthetic catalog in the shape of EI's: comments, several entries, some with `env`/`args`,
/// some without, one whose last key is a block scalar holding `#` lines, one with its `args`
/// items at the key's own indent.
const CATALOG: &str = r#"# Model catalog for this environment.
# Seeded by `init`; yours to edit.

defaults:
  namespace: llm-inference   # where models are deployed
  runtime: vllm
  replicas: 1
  require_amx: true          # pin to AMX nodes

storage:
  pvc_name: model-store

models:
  # --- general chat ---
  - name: llama-3-1-8b
    model_id: meta-llama/Llama-3.1-8B-Instruct
    category: llm
    cpu: 16
    memory: 64Gi
    env:
      VLLM_CPU_KVCACHE_SPACE: "40"   # GiB
      OMP_NUM_THREADS: "16"
    args:
      - "--dtype"
      - "bfloat16"
      # long context
      - "--max-model-len"
      - "131072"

  # --- coding ---
  - name: qwen2-5-coder-7b
    model_id: Qwen/Qwen2.5-Coder-7B-Instruct
    env:
      VLLM_CPU_KVCACHE_SPACE: "40"

  - name: qwen2-5-coder-14b
    model_id: Qwen/Qwen2.5-Coder-14B-Instruct
    memory: 96Gi
    chat_template: |
      {# a Jinja comment #}
      # not a YAML comment
      {{ messages }}

  - name: bge-base-en
    model_id: BAAI/bge-base-en-v1.5
    category: embed
    args:
    - --pooling
    - cls

# Entries below are examples.
"#;

fn edit(require_amx: bool, models: Vec<ModelEntryEdit>) -> ModelsEdit {
    ModelsEdit { defaults: EditDefaults { require_amx }, network: None, models }
}

fn entry(name: &str, env: &[(&str, &str)], args: &[&str]) -> ModelEntryEdit {
    ModelEntryEdit {
        name: name.into(),
        autodeploy: false,
        memory: None,
        cpu: None,
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        args_append: args.iter().map(|s| s.to_string()).collect(),
    }
}

fn parse(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap()
}

/// What the catalog should read as after an edit, computed here from the parsed input
/// (independently of how the text edit works).
fn intended(original: &str, e: &ModelsEdit) -> Value {
    let mut v = parse(original);
    if !v["defaults"].is_object() {
        v["defaults"] = json!({});
    }
    v["defaults"]["require_amx"] = json!(e.defaults.require_amx);
    for m in &e.models {
        let entry = v["models"].as_array_mut().unwrap().iter_mut().find(|x| x["name"] == m.name.as_str()).unwrap();
        if !m.env.is_empty() {
            if !entry["env"].is_object() {
                entry["env"] = json!({});
            }
            for (k, val) in &m.env {
                entry["env"][k] = json!(val);
            }
        }
        if !m.args_append.is_empty() {
            let mut args = entry["args"].as_array().cloned().unwrap_or_default();
            let tail: Vec<Value> = m.args_append.iter().map(|a| json!(a)).collect();
            if !args.ends_with(&tail) {
                args.extend(tail);
            }
            entry["args"] = Value::Array(args);
        }
    }
    v
}

fn comments(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.trim_start().starts_with('#')).collect()
}

#[test]
fn edits_read_back_as_intended_and_keep_every_comment() {
    let cases = [
        edit(false, vec![]),
        edit(true, vec![entry("qwen2-5-coder-7b", &[("VLLM_CPU_KVCACHE_SPACE", "8")], &["--max-model-len", "32768"])]),
        edit(
            false,
            vec![
                entry(
                    "llama-3-1-8b",
                    &[("VLLM_CPU_KVCACHE_SPACE", "8"), ("NEW_KEY", "x y")],
                    &["--max-model-len", "65536"],
                ),
                entry("qwen2-5-coder-14b", &[("VLLM_CPU_KVCACHE_SPACE", "12")], &["--max-model-len", "16384"]),
                entry("bge-base-en", &[], &["--max-model-len", "512"]),
            ],
        ),
    ];
    for e in cases {
        let out = apply_models_edit(CATALOG, &e).unwrap();
        assert_eq!(parse(&out), intended(CATALOG, &e), "{e:?}\n{out}");
        for c in comments(CATALOG) {
            assert!(out.contains(c), "comment {c:?} lost:\n{out}");
        }
        assert_eq!(apply_models_edit(&out, &e).unwrap(), out, "a second application changed the text: {e:?}");
    }
}

#[test]
fn edited_text_is_where_a_reader_expects_it() {
    let e = edit(
        false,
        vec![
            entry("qwen2-5-coder-7b", &[("VLLM_CPU_KVCACHE_SPACE", "8")], &["--max-model-len", "32768"]),
            entry("qwen2-5-coder-14b", &[("VLLM_CPU_KVCACHE_SPACE", "12")], &["--max-model-len", "16384"]),
        ],
    );
    let out = apply_models_edit(CATALOG, &e).unwrap();
    let want = CATALOG
        .replace("require_amx: true          # pin", "require_amx: false          # pin")
        .replace(
            "    env:\n      VLLM_CPU_KVCACHE_SPACE: \"40\"\n\n",
            "    env:\n      VLLM_CPU_KVCACHE_SPACE: \"8\"\n    args:\n      - \"--max-model-len\"  # appended by eas\n      - \"32768\"  # appended by eas\n\n",
        )
        .replace(
            "      {{ messages }}\n",
            "      {{ messages }}\n    env:\n      VLLM_CPU_KVCACHE_SPACE: \"12\"\n    args:\n      - \"--max-model-len\"  # appended by eas\n      - \"16384\"  # appended by eas\n",
        );
    assert_eq!(out, want);
}

#[test]
fn appended_args_follow_the_catalog_args_and_last_wins() {
    let e = edit(true, vec![entry("llama-3-1-8b", &[], &["--max-model-len", "65536"])]);
    let out = apply_models_edit(CATALOG, &e).unwrap();
    let args = parse(&out)["models"][0]["args"].clone();
    assert_eq!(args, json!(["--dtype", "bfloat16", "--max-model-len", "131072", "--max-model-len", "65536"]));
    // A changed edit replaces what an earlier one appended instead of piling up.
    let e2 = edit(true, vec![entry("llama-3-1-8b", &[], &["--max-model-len", "32768"])]);
    let out2 = apply_models_edit(&out, &e2).unwrap();
    assert_eq!(
        parse(&out2)["models"][0]["args"],
        json!(["--dtype", "bfloat16", "--max-model-len", "131072", "--max-model-len", "32768"])
    );
    assert_eq!(out2, apply_models_edit(CATALOG, &e2).unwrap());
    // The catalog already ends with the tail: nothing to append.
    let same = edit(true, vec![entry("llama-3-1-8b", &[], &["--max-model-len", "131072"])]);
    assert_eq!(apply_models_edit(CATALOG, &same).unwrap(), CATALOG);
}

#[test]
fn other_shapes_that_are_safe_to_edit() {
    // (input, edit, expected output)
    let amx = |b| edit(b, vec![]);
    let one = || edit(true, vec![entry("m", &[("K", "1")], &["--a"])]);
    let cases = [
        ("models: []\n", amx(true), "models: []\ndefaults:\n  require_amx: true\n"),
        (
            "defaults:\n  runtime: vllm\n# end\n",
            amx(false),
            "defaults:\n  runtime: vllm\n  require_amx: false\n# end\n",
        ),
        ("defaults:\nmodels: []\n", amx(true), "defaults:\n  require_amx: true\nmodels: []\n"),
        (
            "models:\n- name: m\n  env: {}\n  args: []  # none yet\n",
            one(),
            "models:\n- name: m\n  env:\n    K: \"1\"\n  args:  # none yet\n    - \"--a\"  # appended by eas\ndefaults:\n  require_amx: true\n",
        ),
        (
            "models:\n  -\n    name: m\n    args:\n    - --b\n",
            one(),
            "models:\n  -\n    name: m\n    args:\n    - --b\n    - \"--a\"  # appended by eas\n    env:\n      K: \"1\"\ndefaults:\n  require_amx: true\n",
        ),
        (
            "models:\n  - name: m\n    env:\n      \"K\": \"0\"  # was\n    args:\n",
            one(),
            "models:\n  - name: m\n    env:\n      \"K\": \"1\"  # was\n    args:\n      - \"--a\"  # appended by eas\ndefaults:\n  require_amx: true\n",
        ),
    ];
    for (input, e, want) in cases {
        let out = apply_models_edit(input, &e).unwrap();
        assert_eq!(out, want, "{input:?}");
        assert_eq!(parse(&out), intended(input, &e), "{input:?}");
        assert_eq!(apply_models_edit(&out, &e).unwrap(), out, "{input:?} twice");
    }
}

#[test]
fn refuses_what_it_cannot_edit_safely() {
    let one = |name: &str| edit(true, vec![entry(name, &[("K", "1")], &["--a"])]);
    let unsupported =
        |what: &str, line: usize, why: &str| ModelsError::Unsupported { what: what.into(), line, why: why.into() };
    let cases = [
        (
            CATALOG,
            one("llama-3-70b"),
            ModelsError::UnknownModel {
                name: "llama-3-70b".into(),
                available: vec![
                    "llama-3-1-8b".into(),
                    "qwen2-5-coder-7b".into(),
                    "qwen2-5-coder-14b".into(),
                    "bge-base-en".into(),
                ],
            },
        ),
        ("models: []\n", one("m"), ModelsError::UnknownModel { name: "m".into(), available: vec![] }),
        ("defaults: {}\n", one("m"), ModelsError::NoModels { name: "m".into() }),
        ("models:\n  - name: m\n  - name: m\n", one("m"), ModelsError::DuplicateModel { name: "m".into() }),
        ("defaults: {require_amx: true}\n", edit(false, vec![]), unsupported("defaults", 1, "a flow-style collection")),
        ("models:\n  - name: m\n    model_id: \"a\tb\"\n", one("m"), ModelsError::Tab { line: 3 }),
        ("- a\n", one("m"), ModelsError::NotAMap { found: "a list".into() }),
    ];
    // Shapes of model m's entry that eas does not edit: (input, what, line, why).
    let shapes = [
        ("models:\n  - name: m\n    env: {K: \"0\"}\n", "the env of model m", 3, "a flow-style collection"),
        ("models:\n  - name: m\n    args: [\"--b\"]\n", "the args of model m", 3, "a flow-style collection"),
        ("models:\n  - {name: m}\n", "models item 1", 2, "a flow-style collection"),
        ("models: [{name: m}]\n", "models", 1, "a flow-style collection"),
        ("models:\n  - name: m\n    env:\n      K: |\n        0\n", "env K of model m", 4, "a block scalar"),
        (
            "models:\n  - name: m\n    env: &e\n      K: \"0\"\n",
            "the env of model m",
            3,
            "an anchor (other entries may alias it)",
        ),
        (
            "models:\n  - name: m\n    args:\n      - --b\n        --c\n",
            "the args of model m",
            5,
            "an item that spans several lines",
        ),
        (
            "models:\n  - name: m\n    args:\n      - [x]\n",
            "the args of model m",
            4,
            "an item that is not a single-line string",
        ),
    ];
    let shapes = shapes.map(|(input, what, line, why)| (input, one("m"), unsupported(what, line, why)));
    for (input, e, want) in cases.into_iter().chain(shapes) {
        assert_eq!(apply_models_edit(input, &e), Err(want), "{input:?}");
    }
    assert!(matches!(apply_models_edit("a: [\n", &one("m")), Err(ModelsError::Parse(_))));
}

#[test]
fn errors_name_the_model_and_the_line() {
    let e = edit(true, vec![entry("m", &[("K", "1")], &[])]);
    let err = apply_models_edit("models:\n  - name: m\n    env: {K: \"0\"}\n", &e).unwrap_err();
    assert_eq!(
        err.to_string(),
        "models.yaml line 3: the env of model m is a flow-style collection; eas edits only block-style YAML"
    );
    let err = apply_models_edit("models:\n  - name: a\n", &e).unwrap_err();
    assert_eq!(err.to_string(), "models.yaml has no model named \"m\" (it has: a)");
    assert!(err.hint().contains("--model"));
}

/// A decision of `layer` with one model edit and nothing else (no AMX, no proxy), whose edit
/// file `render` writes.
fn decided(layer: Layer, model: ModelEdit) -> Decision {
    Decision {
        layer,
        overrides: vec![],
        require_amx: false,
        model_edits: vec![model],
        manifest: vec![],
        choices: vec![],
        warnings: vec![],
        network_no_proxy: None,
    }
}

#[test]
fn the_generated_edit_file_parses() {
    let d = decided(
        Layer::AgentToolkit,
        ModelEdit {
            name: "qwen2-5-coder-7b".into(),
            env: vec![("VLLM_CPU_KVCACHE_SPACE".into(), "8".into())],
            args_append: vec!["--max-model-len".into(), "32768".into()],
            ..ModelEdit::default()
        },
    );
    let parsed = ModelsEdit::parse(&render::models_edit(&d)).unwrap();
    assert_eq!(
        parsed,
        edit(false, vec![entry("qwen2-5-coder-7b", &[("VLLM_CPU_KVCACHE_SPACE", "8")], &["--max-model-len", "32768"])])
    );
    let none = Decision { model_edits: vec![], require_amx: true, ..d };
    assert_eq!(ModelsEdit::parse(&render::models_edit(&none)).unwrap(), edit(true, vec![]));
    // The edit file is ours: anything else in it is a mistake worth stopping for.
    for bad in [
        "defaults: {require_amx: true}\nextra: 1\n",
        "defaults: {require_amx: true}\nmodels:\n  - name: m\n    env: {K: 8}\n",
        "models: []\n",
    ] {
        assert!(matches!(ModelsEdit::parse(bad), Err(ModelsError::EditParse(_))), "{bad:?}");
    }
}

/// The catalog's real shape: entries written `- name: x` with keys after, one already marked.
const REAL_SHAPE: &str = "models:\n\n  # LLM\n  - name: qwen3-0-6b                 # deploy name\n    model_id: Qwen/Qwen3-0.6B\n    category: llm\n    servers:                         # allow-list\n      vllm: { versions: [\"0.24.0\", \"0.19.1\"], default: \"0.24.0\" }   # engine\n    default_server: vllm\n    cpu: 8                           # cores\n\n  - name: bge\n    model_id: BAAI/bge\n    category: embed\n    autodeploy: false   # off\n";

#[test]
fn autodeploy_is_added_or_switched_on_in_place() {
    let mut add = entry("qwen3-0-6b", &[], &[]);
    add.autodeploy = true;
    let mut flip = entry("bge", &[], &[]);
    flip.autodeploy = true;
    let out = apply_models_edit(REAL_SHAPE, &edit(false, vec![add.clone(), flip])).unwrap();
    let v = parse(&out);
    assert_eq!(v["models"][0]["autodeploy"], Value::Bool(true), "{out}");
    assert_eq!(v["models"][1]["autodeploy"], Value::Bool(true), "{out}");
    assert!(
        out.contains("    cpu: 8                           # cores\n    autodeploy: true\n"),
        "added after the entry's last key: {out}"
    );
    assert_eq!(v["models"][0]["servers"]["vllm"]["default"], Value::String("0.24.0".into()), "{out}");
    assert!(out.contains("    autodeploy: true   # off\n"), "switched in place, comment kept: {out}");
    // A second application changes nothing.
    assert_eq!(apply_models_edit(&out, &edit(false, vec![add])).unwrap().matches("autodeploy: true").count(), 2);
}

#[test]
fn memory_and_cpu_are_replaced_in_place_or_added() {
    // qwen3-0-6b carries cpu (replaced) and no memory (added); the edit file as render writes it.
    let d = decided(
        Layer::Inference,
        ModelEdit {
            name: "qwen3-0-6b".into(),
            autodeploy: true,
            memory: Some("25Gi".into()),
            cpu: Some("6".into()),
            ..ModelEdit::default()
        },
    );
    let e = ModelsEdit::parse(&render::models_edit(&d)).unwrap();
    let out = apply_models_edit(REAL_SHAPE, &e).unwrap();
    let v = parse(&out);
    let m = &v["models"][0];
    assert_eq!(
        (m["memory"].as_str(), m["cpu"].as_u64(), m["autodeploy"].as_bool()),
        (Some("25Gi"), Some(6), Some(true)),
        "{out}"
    );
    assert!(out.contains("    cpu: 6                           # cores"), "replaced in place, comment kept:\n{out}");
    assert_eq!(apply_models_edit(&out, &e).unwrap(), out, "a second application changes nothing");
    assert!(v["models"][1].get("memory").is_none(), "other entries untouched");
}

#[test]
fn network_no_proxy_is_set_in_place_and_added_where_the_catalog_has_none() {
    let catalog = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/synthetic/ei/model_manager/models.yaml"
    ))
    .unwrap();
    let list = "localhost,127.0.0.1,10.42.0.0/16,.svc";
    let e = ModelsEdit {
        network: Some(crate::act::prepare::models::EditNetwork { no_proxy: list.into() }),
        ..edit(true, vec![])
    };
    let out = apply_models_edit(&catalog, &e).unwrap();
    assert!(out.contains(&format!("  no_proxy: \"{list}\"")), "{out}");
    // The proxy URLs stay empty: model-manager then takes them from the environment.
    assert!(out.contains("  https_proxy: \"\""), "{out}");
    assert_eq!(out.lines().count(), catalog.lines().count(), "replaced in place, nothing added");
    let out = apply_models_edit("defaults:\n  require_amx: false\nmodels: []\n", &e).unwrap();
    assert!(out.ends_with(&format!("network:\n  no_proxy: \"{list}\"\n")), "{out}");
    // The rendered edit file round-trips through the parser.
    let text = format!("defaults:\n  require_amx: true\nnetwork:\n  no_proxy: \"{list}\"\n");
    assert_eq!(ModelsEdit::parse(&text).unwrap(), e);
}
