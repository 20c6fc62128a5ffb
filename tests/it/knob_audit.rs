//! The knob audit in `eas up --dry-run` against the synthetic trees: stock trees pass with a
//! reader line per key; a reader removed, or a key renamed upstream, is refused naming the key,
//! the files searched and the commit; `--allow-unread KEY` proceeds with a warning. No Docker:
//! the dry run names what it cannot know without an engine.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::cluster_server::ClusterServer;
use support::{artifacts, contains_all, exited, text};

const CLUSTER: &str = "k3d-gpu-desktop";

struct Trees {
    dir: tempfile::TempDir,
    pins: PathBuf,
}

/// The synthetic trees as git repositories, after `change(name, dir)` edits each one.
fn stock_trees() -> Trees {
    trees_changing("", |_| {})
}

/// The synthetic trees, committed and pinned, the one named `changed` (eas, ei or eat) edited by
/// `change` first.
fn trees_changing(changed: &str, change: impl Fn(&Path)) -> Trees {
    let dir = tempfile::tempdir().unwrap();
    let mut shas = Vec::new();
    for n in ["eas", "ei", "eat"] {
        let to = dir.path().join("repos").join(n);
        support::trees::copy_dir(&support::root().join("fixtures/synthetic").join(n), &to);
        if n == changed {
            change(&to);
        }
        shas.push((n.to_string(), support::trees::commit_all(&to, n)));
    }
    std::fs::create_dir_all(dir.path().join("served")).unwrap();
    let pins = artifacts::write_pins(dir.path(), "knob-audit", &dir.path().join("pins.json"));
    support::trees::point_main_pins(&pins, &shas);
    Trees { dir, pins }
}

fn dry_run(t: &Trees, extra: &[&str]) -> Output {
    dry_run_on(t, &support::fixture(CLUSTER).join("node-files/k3d-gpu-server-0/config.toml"), extra)
}

/// The dry run with `node_files` as the node's containerd config.
fn dry_run_on(t: &Trees, node_files: &Path, extra: &[&str]) -> Output {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let home = t.dir.path().join(format!("home-{}", extra.len()));
    std::fs::create_dir_all(&home).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_eas"));
    c.current_dir(&home)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("EAS_PINS")
        .env("XDG_CACHE_HOME", t.dir.path().join("cache"))
        .env("DOCKER_HOST", format!("unix://{}", t.dir.path().join("no-docker.sock").display()))
        .env("CI", "1")
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--state-dir")
        .arg(home.join("state"))
        .args(["up", "--dry-run", "--pins"])
        .arg(&t.pins)
        .args(["--containerd-config", &format!("k3d-gpu-server-0={}", node_files.display())])
        .args(["--nri-socket", "k3d-gpu-server-0=present"]);
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(t.dir.path().join("repos").join(n));
    }
    c.args(extra).output().unwrap()
}

fn rewrite(path: &Path, from: &str, to: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    assert!(s.contains(from), "{} lacks {from}", path.display());
    std::fs::write(path, s.replace(from, to)).unwrap();
}

#[test]
fn stock_synthetic_trees_pass_with_a_reader_line_per_key() {
    let t = stock_trees();
    let out = dry_run(&t, &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}\n{stdout}");
    contains_all(
        &stdout,
        &[
            "knob nfd_enabled (required) -> read by intel/enterprise-inference@",
            "knob agent_toolkit_models (defensive) -> note: nothing reads it",
            "knob llm_services_deploy_models (required) -> read by intel/enterprise-inference@",
            "knob memory (required) -> read by intel/enterprise-inference@",
            "knob istio_platform (required) -> read by overlay 0002 (added by the patch)",
            "knob existing_kubernetes (required) -> read by intel/enterprise-ai-solutions@",
            "knob kata_containers_enabled (defensive) -> note: nothing reads it",
        ],
    );
    assert!(stderr.contains("model catalog: model_manager/models.yaml at intel/enterprise-inference@"), "{stderr}");
}

#[test]
fn a_reader_removed_is_refused_naming_the_key_files_and_commit() {
    let t = trees_changing("ei", |dir| {
        // An EI whose nfd component is no longer switchable: nothing reads nfd_enabled.
        let f = dir.join("components.yaml");
        let s = std::fs::read_to_string(&f).unwrap();
        let kept: Vec<&str> = s.lines().filter(|l| !l.contains("nfd_enabled")).collect();
        assert!(kept.len() < s.lines().count(), "the stand-in has a reader to remove");
        std::fs::write(&f, kept.join("\n") + "\n").unwrap();
    });
    let out = dry_run(&t, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}\n{}", text(&out.stdout));
    let line = stderr.lines().find(|l| l.starts_with("REFUSE: nfd_enabled")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("components.yaml roles/nfd in intel/enterprise-inference@"), "{line}");
    assert!(line.contains("--allow-unread nfd_enabled"), "{line}");
}

#[test]
fn a_key_renamed_upstream_is_refused_and_allow_unread_proceeds() {
    let t = trees_changing("eat", |dir| {
        let f = dir.join("roles/agent_toolkit/tasks/install.yaml");
        rewrite(&f, "agent_sandbox_enabled", "agent_sandbox_on");
    });
    let out = dry_run(&t, &[]);
    let stderr = exited(&out, 3);
    assert!(stderr.contains("REFUSE: agent_sandbox_enabled is written but nothing reads it"), "{stderr}");
    let out = dry_run(&t, &["--allow-unread", "agent_sandbox_enabled"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("--allow-unread agent_sandbox_enabled proceeds"), "{stderr}");
    assert!(stdout.contains("knob agent_sandbox_enabled (required) -> unread, allowed by --allow-unread"), "{stdout}");
}

/// The plan of the inference layer's dry run on the stock trees, which passes.
fn stock_inference_plan() -> String {
    let out = dry_run(&stock_trees(), &["--layer", "inference"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}\n{stdout}");
    stdout
}

/// The plan's line of the required `knob`, which must be read.
fn read_by<'a>(plan: &'a str, knob: &str) -> &'a str {
    let head = format!("knob {knob} (required) -> read by");
    plan.lines().find(|l| l.contains(&head)).unwrap_or_else(|| panic!("{plan}"))
}

#[test]
fn the_inference_switch_is_read_by_its_gate_and_a_comment_is_not_a_reader() {
    let stdout = stock_inference_plan();
    let line = read_by(&stdout, "llm_services_deploy_models");
    assert!(line.contains("roles/llm_services/tasks/install.yaml"), "{line}");
    // deploy_models.yaml names the switch only in its header comment.
    assert!(!line.contains("deploy_models.yaml"), "{line}");
    assert!(stdout.contains("knob autodeploy (required) -> read by"), "{stdout}");
}

/// The inference layer's dry run on an EI tree whose `file` calls `key` something else.
fn inference_with_ei_key_renamed(file: &str, key: &str) -> Output {
    let t = trees_changing("ei", |dir| {
        rewrite(&dir.join(file), key, &format!("{key}_renamed"));
    });
    dry_run(&t, &["--layer", "inference"])
}

#[test]
fn a_gate_renamed_upstream_is_refused_though_a_comment_still_names_the_key() {
    let out = inference_with_ei_key_renamed("roles/llm_services/tasks/install.yaml", "llm_services_deploy_models");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}\n{}", text(&out.stdout));
    let line = stderr
        .lines()
        .find(|l| l.starts_with("REFUSE: llm_services_deploy_models is written but nothing reads it"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("roles/llm_services in intel/enterprise-inference@"), "{line}");
}

/// `--model` is judged by the catalog at the pinned EI commit before the cluster is read: with
/// the EI tree at hand (here `--ei-repo`) a catalog entry that is not a built-in candidate gets
/// past the check (to preflight, which fails on an unreachable API server: exit 1), and a name
/// the catalog lacks is bad input (exit 2) naming the catalog's LLM entries.
#[test]
fn the_pinned_catalog_judges_model_before_the_cluster_is_read() {
    let t = stock_trees();
    let (kubeconfig, _) = support::unreachable_kubeconfig(t.dir.path());
    let run = |model: &str| {
        let home = t.dir.path().join(format!("home-{model}"));
        std::fs::create_dir_all(&home).unwrap();
        Command::new(env!("CARGO_BIN_EXE_eas"))
            .current_dir(&home)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env_remove("EAS_PINS")
            .env("XDG_CACHE_HOME", t.dir.path().join("cache"))
            .env("CI", "1")
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--state-dir")
            .arg(home.join("state"))
            .args(["up", "--dry-run", "--layer", "inference", "--model", model, "--pins"])
            .arg(&t.pins)
            .arg("--ei-repo")
            .arg(t.dir.path().join("repos").join("ei"))
            .output()
            .unwrap()
    };
    let out = run("nosuch");
    let stderr = exited(&out, 2);
    assert!(stderr.starts_with("error: unknown model \"nosuch\""), "{stderr}");
    assert!(
        stderr.contains("qwen3-0-6b") && !stderr.contains("preflight"),
        "the catalog's entries, no cluster read: {stderr}"
    );
    // qwen3-0-6b is in the synthetic catalog and not among data/models.json's candidates.
    let out = run("qwen3-0-6b");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "past the model check, stopped by the unreachable API server: {stderr}");
    assert!(stderr.contains("preflight"), "{stderr}");
}

/// EAT's own model key proves its deploy path only when the install runs its reader: the reader's
/// role must be a component the EAT tree's `components.yaml` enables. A reader in a role no
/// component names, or in a disabled one, leaves the pick on EI's path; enabled, EAT's key
/// deploys it and EI's switch is not written.
#[test]
fn eats_reader_proves_its_path_only_when_its_component_is_enabled() {
    let reader = "---\n# a synthetic reader of the key eas writes for EAT\n- name: Deploy the models\n  \
                  ansible.builtin.debug:\n    msg: \"{{ agent_toolkit_models }}\"\n";
    let with = |component: Option<&'static str>| {
        trees_changing("eat", move |dir| {
            std::fs::create_dir_all(dir.join("roles/models/tasks")).unwrap();
            std::fs::write(dir.join("roles/models/tasks/install.yaml"), reader).unwrap();
            if let Some(enabled) = component {
                let path = dir.join("components.yaml");
                let mut s = std::fs::read_to_string(&path).unwrap();
                s.push_str(&format!("\n  - name: models\n    layer: agent-toolkit\n    enabled: {enabled}\n"));
                std::fs::write(path, s).unwrap();
            }
        })
    };
    let plan = |t: &Trees| {
        let out = dry_run(t, &[]);
        assert!(out.status.success(), "{}\n{}", text(&out.stderr), text(&out.stdout));
        text(&out.stdout)
    };
    for (component, why) in [
        (None, "components.yaml declares no component models"),
        (Some("\"{{ agent_models_enabled | default(false) | bool }}\""), "component models is not enabled"),
    ] {
        let stdout = plan(&with(component));
        assert!(stdout.contains("off the install path (roles/models/tasks/install.yaml: "), "{stdout}");
        assert!(stdout.contains(why), "{why}:\n{stdout}");
        assert!(stdout.contains("llm_services_deploy_models: true"), "EI's path stays:\n{stdout}");
    }
    let stdout = plan(&with(Some("\"{{ agent_sandbox_enabled | bool }}\"")));
    contains_all(
        &stdout,
        &[
            "agent_toolkit_models is read by roles/models/tasks/install.yaml (component models of layer agent-toolkit is enabled)",
            "deploy path: EAT's agent_toolkit_models",
        ],
    );
    assert!(!stdout.contains("llm_services_deploy_models: true"), "{stdout}");
}

/// `model_deploy_strict` is written on EI's deploy path and audited like every key: read by the
/// deploy loop's `failed_when`; the role's own default (a definition) does not count, so a loop
/// that no longer reads it is refused (issue 28 item 2).
#[test]
fn the_deploy_failure_policy_is_written_and_read_by_the_deploy_loop_not_its_default() {
    let stdout = stock_inference_plan();
    assert!(stdout.contains("model_deploy_strict: true"), "{stdout}");
    let line = read_by(&stdout, "model_deploy_strict");
    assert!(line.contains("roles/llm_services/tasks/deploy_models.yaml"), "{line}");
    assert!(!line.contains("defaults"), "{line}");
    let out = inference_with_ei_key_renamed("roles/llm_services/tasks/deploy_models.yaml", "model_deploy_strict");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}\n{}", text(&out.stdout));
    assert!(stderr.contains("REFUSE: model_deploy_strict is written but nothing reads it"), "{stderr}");
}

/// Istio's default CNI layout (`/opt/cni/bin`, SPEC §3.3): `istio_platform` is not written, a
/// decision line says why, overlay 0002 is skipped, and the plan exits 0 (issue 28 item 5; before,
/// the knob audit refused the empty key as unread: exit 3).
#[test]
fn istio_default_cni_layout_plans_with_exit_0_without_istio_platform() {
    let t = stock_trees();
    let stock = support::fixture(CLUSTER).join("node-files/k3d-gpu-server-0/config.toml");
    let config = t.dir.path().join("opt-cni-config.toml");
    let text_of = std::fs::read_to_string(&stock).unwrap();
    assert!(text_of.contains("bin_dirs = [\"/usr/bin\"]"));
    std::fs::write(&config, text_of.replace("bin_dirs = [\"/usr/bin\"]", "bin_dirs = [\"/opt/cni/bin\"]")).unwrap();
    let out = dry_run_on(&t, &config, &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{stdout}");
    assert!(stdout.contains("(Istio's default CNI paths) -> istio_platform not written:"), "{stdout}");
    assert!(!stdout.contains("knob istio_platform"), "{stdout}");
    assert!(!stdout.contains("istio_platform: \"\""), "{stdout}");
    let skip = stdout.lines().find(|l| l.contains("skip 0002")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(skip.contains("istio_platform is not written"), "{skip}");
}
