//! eas.yaml (eas-config/v1, issue 32 item 1) on the recorded clusters with the synthetic trees:
//! a run declared only by the file plans as the same settings given as flags, and its plan names
//! each setting's source; an unknown key is bad input (exit 2) with a "did you mean", before the
//! cluster is read; `eas init` writes a file that plans, and refuses to overwrite one.

use crate::support;

use serde_json::Value;
use std::path::Path;
use support::planning::{command, trees};
use support::{ClusterServer, text};

const CLUSTER: &str = "k3d-gpu-desktop";

/// `a` and `b` decide the same, or the first key where they differ.
fn same_decisions(a: &Value, b: &Value) {
    for ((key, x), (_, y)) in decided(a).into_iter().zip(decided(b)) {
        if let (Some(xs), Some(ys)) = (x.as_array(), y.as_array()) {
            for (i, (p, q)) in xs.iter().zip(ys).enumerate() {
                assert_eq!(p, q, "{key}[{i}] differs");
            }
        }
        assert_eq!(x, y, "{key} differs");
    }
}

/// The keys of a plan that are its decisions, not how it was asked for.
fn decided(plan: &Value) -> Vec<(String, Value)> {
    let keep = ["layer", "env", "profile", "pins_source", "commits", "model", "model_pick", "decisions", "overlay"];
    // Each blocker by its phase and code (its cause names where the pins came from).
    let blockers = plan["blockers"].as_array().unwrap().iter().map(|b| format!("{} {}", b["phase"], b["exit_code"]));
    let blockers = Value::from(blockers.collect::<Vec<_>>());
    keep.iter().map(|k| (k.to_string(), plan[*k].clone())).chain([("blockers".into(), blockers)]).collect()
}

/// A new directory holding `eas.yaml` declaring a whole run on `server` (the flags of
/// [`a_run_declared_by_eas_yaml_plans_as_its_flags_and_names_each_source`], in the file).
fn declared(server: &ClusterServer, state: &std::path::Path, t: &std::path::Path) -> tempfile::TempDir {
    let site = tempfile::tempdir().unwrap();
    let node = support::fixture(CLUSTER).join("node-files/k3d-gpu-server-0/config.toml");
    let repos = t.join("repos");
    let yaml = format!(
        "schema: eas-config/v1\nkubeconfig: {}\nstate_dir: {}\nlayer: inference\nenv: k3d-gpu\noffline: true\n\
         pins: {}\nnodes:\n  containerd_config:\n    k3d-gpu-server-0: {}\n  nri_socket:\n    k3d-gpu-server-0: present\n\
         timeouts:\n  install: 900\nmirrors:\n  eas: {}\n  ei: {}\n  eat: {}\n",
        server.kubeconfig().display(),
        state.display(),
        t.join("pins.json").display(),
        node.display(),
        repos.join("eas").display(),
        repos.join("ei").display(),
        repos.join("eat").display(),
    );
    std::fs::write(site.path().join("eas.yaml"), yaml).unwrap();
    site
}

#[test]
fn a_run_declared_by_eas_yaml_plans_as_its_flags_and_names_each_source() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let flags = ["--layer", "inference", "--env", "k3d-gpu", "--offline", "--install-timeout", "900"];
    let json = ["--dry-run", "--output", "json"];
    let by_flags =
        command(&server, CLUSTER, state.path(), &t, true, &[&json[..], &flags[..]].concat()).output().unwrap();
    let by_flags: Value =
        serde_json::from_slice(&by_flags.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&by_flags.stderr)));
    // The same settings, each in the file, and eas run with no flag but --dry-run.
    let site = declared(&server, state.path(), &t);
    let out = support::eas(site.path()).arg("up").args(json).output().unwrap();
    let by_file: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_eq!(support::schema_errors("eas-plan.v1", &by_file), Vec::<String>::new());
    same_decisions(&by_file, &by_flags);
    let install = |p: &Value| {
        p["phases"].as_array().unwrap().iter().find(|x| x["name"] == "install").unwrap()["timeout_secs"].clone()
    };
    assert_eq!((install(&by_file), install(&by_flags)), (Value::from(900), Value::from(900)));
    // Each setting named with its source: every one from the file here, every one a flag there.
    let sources = |p: &Value| -> Vec<(String, String)> {
        let s = p["settings"].as_array().unwrap();
        s.iter().map(|s| (s["key"].as_str().unwrap().into(), s["from"].as_str().unwrap().into())).collect()
    };
    let keys = [
        "kubeconfig",
        "state_dir",
        "layer",
        "pins",
        "env",
        "offline",
        "timeouts.install",
        "mirrors.eas",
        "mirrors.ei",
        "mirrors.eat",
        "nodes.containerd_config",
        "nodes.nri_socket",
    ];
    let mut named = sources(&by_file);
    named.sort();
    let mut want: Vec<(String, String)> = keys.iter().map(|k| (k.to_string(), "./eas.yaml".to_string())).collect();
    want.sort();
    assert_eq!(named, want);
    assert!(sources(&by_flags).iter().all(|(_, from)| from.starts_with("--")), "{:?}", sources(&by_flags));
    // The text plan says so in its summary, and its next command is the bare one (the file is read).
    let out = support::eas(site.path()).arg("up").arg("--dry-run").output().unwrap();
    let plan = text(&out.stdout);
    assert!(plan.contains("\n  settings   kubeconfig "), "{plan}");
    assert!(plan.contains("             layer inference (from ./eas.yaml)\n"), "{plan}");
    // A flag still wins over the file, and is named.
    let out = support::eas(site.path()).arg("up").args(json).args(["--layer", "agent-toolkit"]).output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["layer"], "agent-toolkit");
    assert!(sources(&plan).contains(&("layer".into(), "--layer".into())), "{:?}", sources(&plan));
    // The file's `offline: true` is turned off by --no-offline, named as the source: Hugging
    // Face is asked again, where the file's run left the download unknown.
    let unknown = |p: &Value| p["unknown"].to_string();
    assert!(unknown(&by_file).contains("not asked (--offline)"), "{}", unknown(&by_file));
    let out = support::eas(site.path()).arg("up").args(json).arg("--no-offline").output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let offline = plan["settings"].as_array().unwrap().iter().find(|s| s["key"] == "offline").cloned();
    assert_eq!(
        offline,
        Some(serde_json::json!({"key": "offline", "value": "false", "source": "flag", "from": "--no-offline"}))
    );
    assert_eq!(plan["unknown"], serde_json::json!([]), "asked: nothing unknown");
    let out = support::eas(site.path()).args(["up", "--dry-run", "--no-offline"]).output().unwrap();
    // The text names flags by key, under the command line that gives them.
    let shown = text(&out.stdout);
    assert!(shown.starts_with("eas up --yes --no-offline\n"), "{shown}");
    assert!(shown.contains("             from the command line: offline\n"), "{shown}");
}

/// Issue 32 item 3: a `next:` line carries every input that is not remembered. The config file
/// is one: found through `EAS_CONFIG`, it is named as `--config FILE` in the plan's first and
/// closing lines, and that line, run as printed from another directory in a shell without the
/// variable (as a dry run), plans the same from the same file.
#[test]
fn a_config_file_named_by_eas_config_is_carried_as_config_in_the_next_line() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let site = declared(&server, state.path(), &t);
    let file = site.path().join("eas.yaml");
    let elsewhere = tempfile::tempdir().unwrap();
    let by_var = |more: &[&str]| {
        support::eas(elsewhere.path()).env("EAS_CONFIG", &file).args(["up", "--dry-run"]).args(more).output().unwrap()
    };
    // The text's words, its wrapped command lines joined (` \` continuations dropped).
    let shown = text(&by_var(&[]).stdout);
    let shown: Vec<&str> = shown.split_whitespace().filter(|w| *w != "\\").collect();
    let shown = shown.join(" ");
    let carried = format!("eas --config {} up --yes", file.display());
    assert!(shown.starts_with(&format!("{carried} ")), "the first line: {shown}");
    // The closing `next:` (here after the blockers' fixes: no Docker Engine answers in this tier).
    let closing = &shown[shown.rfind("next: ").expect("a next: line")..];
    assert!(closing.ends_with(&format!(" {carried}")), "the closing line: {closing}");
    let plan: Value = serde_json::from_slice(&by_var(&["--output", "json"]).stdout).unwrap();
    // Run as printed (`--yes` made `--dry-run`): no EAS_CONFIG in its environment (support::eas).
    let printed: Vec<&str> = carried.split_whitespace().collect();
    assert_eq!((printed[0], printed[printed.len() - 1]), ("eas", "--yes"));
    let again = support::eas(site.path().parent().unwrap())
        .args(&printed[1..printed.len() - 1])
        .args(["--dry-run", "--output", "json"])
        .output()
        .unwrap();
    let again: Value = serde_json::from_slice(&again.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&again.stderr)));
    same_decisions(&again, &plan);
    assert_eq!(again["layer"], "inference", "the file's layer");
}

#[test]
fn an_unknown_key_is_bad_input_with_the_nearest_key_before_the_cluster_is_read() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let site = tempfile::tempdir().unwrap();
    let yaml = format!("schema: eas-config/v1\nkubeconfig: {}\ncontxt: k3d-gpu\n", server.kubeconfig().display());
    std::fs::write(site.path().join("eas.yaml"), yaml).unwrap();
    for args in [&["up", "--dry-run"][..], &["doctor"], &["status"], &["verify"], &["down", "--dry-run"]] {
        let out = support::eas(site.path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains("./eas.yaml: unknown key `contxt` (did you mean `context`?)"), "{args:?}: {err}");
        assert!(err.contains("eas schema eas-config/v1"), "the hint names the schema: {err}");
    }
    assert!(server.requests().is_empty(), "bad input is found before the cluster is read");
    // Named with --config, or EAS_CONFIG, the same file is read from anywhere.
    let elsewhere = tempfile::tempdir().unwrap();
    let file = site.path().join("eas.yaml");
    let out = support::eas(elsewhere.path()).arg("--config").arg(&file).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = support::eas(elsewhere.path()).env("EAS_CONFIG", &file).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // A secret is refused, saying where it goes.
    std::fs::write(&file, "schema: eas-config/v1\nhf_token: x\n").unwrap();
    let out = support::eas(site.path()).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("secrets are never in eas.yaml"), "{}", text(&out.stderr));
}

/// `eas init -o out` with the flags [`command`] gives `eas up` on `cluster`.
fn init(server: &ClusterServer, cluster: &str, state: &Path, t: &Path, out: &Path) -> std::process::Command {
    // `command` ends with `up` and its flags; init takes the same ones.
    let up = command(server, cluster, state, t, true, &[]);
    let args: Vec<String> = up.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let at = args.iter().position(|a| a == "up").unwrap();
    let mut c = support::eas(&support::fixture(cluster));
    c.args(&args[..at]).arg("init").arg("-o").arg(out).args(&args[at + 1..]);
    c
}

#[test]
fn init_writes_a_file_that_plans_and_never_overwrites_one_without_force() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let site = tempfile::tempdir().unwrap();
    let out_file = site.path().join("eas.yaml");
    let out = init(&server, CLUSTER, state.path(), &t, &out_file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(support::writes(&server), Vec::<String>::new(), "init only reads the cluster");
    let yaml = std::fs::read_to_string(&out_file).unwrap();
    assert!(yaml.contains("\n# model: qwen2-5-coder-7b\n"), "the model only as a comment: {yaml}");
    assert!(yaml.contains("\ncontext: k3d-gpu\n") && yaml.contains("# the kubeconfig's current context"), "{yaml}");
    // The file alone plans as the flags did.
    let planned = |c: &mut std::process::Command| -> Value {
        let out = c.args(["up", "--dry-run", "--output", "json"]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
    };
    let out = command(&server, CLUSTER, state.path(), &t, true, &["--dry-run", "--output", "json"]).output().unwrap();
    let by_flags: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let mut from_file = support::eas(site.path());
    same_decisions(&planned(&mut from_file), &by_flags);
    // Written once: again without --force is a refusal (exit 3) and the file is kept.
    std::fs::write(&out_file, "schema: eas-config/v1\n").unwrap();
    let mut again = support::eas(site.path());
    let out = again.arg("--kubeconfig").arg(server.kubeconfig()).arg("init").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("REFUSE: eas.yaml exists"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "schema: eas-config/v1\n");
    let out = support::eas(site.path())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .args(["init", "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("# eas.yaml: "), "-o - prints the file: {}", text(&out.stdout));
}

/// The recorded cluster eat1 (EAT 1.x installed: its namespaces genai-gateway and
/// ingress-nginx) is refused by every plan, whatever the layer (SPEC §3.3's refusals): `eas
/// init` writes no file there, and refuses (exit 3) with the plan's own `REFUSE:` lines, the
/// lines the fixture's expected refusal holds, without a write to the cluster.
#[test]
fn init_on_a_cluster_every_plan_refuses_writes_nothing_and_refuses_as_the_plan_does() {
    let (state, t) = (tempfile::tempdir().unwrap(), trees());
    let server = ClusterServer::start(support::fixture("eat1"));
    let site = tempfile::tempdir().unwrap();
    let file = site.path().join("eas.yaml");
    let refusals = |out: &std::process::Output| -> Vec<String> {
        text(&out.stderr).lines().filter(|l| l.starts_with("REFUSE: ")).map(str::to_string).collect()
    };
    let expected = std::fs::read_to_string(support::fixture("eat1").join("expected/config.refusal")).unwrap();
    let expected: Vec<String> = expected.lines().map(str::to_string).collect();
    let planned = command(&server, "eat1", state.path(), &t, true, &["--dry-run"]).output().unwrap();
    assert_eq!(planned.status.code(), Some(3), "{}", text(&planned.stderr));
    assert_eq!(refusals(&planned), expected, "the plan's refusal");
    for layer in [&[][..], &["--layer", "inference"]] {
        let out = init(&server, "eat1", state.path(), &t, &file).args(layer).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{layer:?}: {err}");
        assert_eq!(refusals(&out), expected, "{layer:?}: the plan's own lines: {err}");
        assert!(
            err.contains(&format!(
                "{} was not written: `eas up` refuses this cluster whatever eas.yaml declares",
                file.display()
            )),
            "{err}"
        );
        assert!(!file.exists(), "{layer:?}: nothing written");
    }
    let out = init(&server, "eat1", state.path(), &t, Path::new("-")).output().unwrap();
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(3), String::new()), "-o -: nothing printed");
    assert_eq!(support::writes(&server), Vec::<String>::new(), "init only reads the cluster");
}

/// On each recorded cluster, with a Docker Engine, the local base image and the stand-in
/// artifacts' pins (what a real machine has after `eas bastion build --lock`): the file `eas
/// init` writes is the whole selection, and its dry run has no blocker. On eat1 `eas init`
/// writes no file (`init_on_a_cluster_every_plan_refuses_writes_nothing_and_refuses_as_the_plan_does`).
#[cfg(feature = "docker-tests")]
#[test]
fn a_file_written_by_init_on_each_recorded_cluster_plans_with_no_blocker() {
    use support::synthetic_install::{BASE, setup};
    let s = setup("config-init");
    for cluster in ["k3d-gpu-desktop", "gpu-nodes", "xeon-amx", "k3s-3node-eas", "scale-2000"] {
        let server = ClusterServer::start(support::fixture(cluster));
        let (home, state, site) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // The fixture's node flags, their files by absolute path.
        let node_flags = support::facts_args(cluster).into_iter().map(|a| match a.split_once("=node-files/") {
            Some((node, file)) => {
                format!("{node}={}", support::fixture(cluster).join("node-files").join(file).display())
            }
            None => a,
        });
        let file = site.path().join("eas.yaml");
        let mut init = s.eas(home.path(), server.kubeconfig(), state.path());
        init.arg("init").arg("-o").arg(&file).arg("--pins").arg(&s.pins).args(["--base-image", BASE]);
        init.args(["--allow-unpinned-base", "--offline"]).args(node_flags);
        for n in ["eas", "ei", "eat"] {
            init.arg(format!("--{n}-repo")).arg(s.repos.join(n));
        }
        let out = init.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{cluster}: {}", text(&out.stderr));
        let mut up = s.eas(home.path(), server.kubeconfig(), state.path());
        let out = up.arg("--config").arg(&file).args(["up", "--dry-run", "--fail-on-blockers"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{cluster}:\n{}\n{}", text(&out.stdout), text(&out.stderr));
        assert!(text(&out.stdout).contains("  blockers   none"), "{cluster}: {}", text(&out.stdout));
        assert_eq!(support::writes(&server), Vec::<String>::new(), "{cluster}: init and the dry run only read");
    }
}
