//! The command line as a user meets it: misuse caught while parsing (exit 2 before anything
//! runs), commands in the order they are met, global options apart, help wrapped to the width.

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use super::Cli;

fn parse(line: &str) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(line.split_whitespace())
}

fn kind(line: &str) -> Option<ErrorKind> {
    parse(line).err().map(|e| e.kind())
}

#[test]
fn dry_run_flags_without_dry_run_are_usage_errors() {
    let missing = Some(ErrorKind::MissingRequiredArgument);
    for line in ["eas up --out plan", "eas up --explain", "eas up --output json", "eas up --yes --out plan"] {
        assert_eq!(kind(line), missing, "{line}");
        assert!(parse(line).unwrap_err().to_string().contains("--dry-run"), "{line}");
    }
    for line in ["eas up --dry-run --out plan --explain", "eas up --dry-run --output json", "eas up --output text"] {
        assert!(parse(line).is_ok(), "{line}: {:?}", parse(line).err());
    }
    // The exit code of a usage error is the contract's bad input.
    assert_eq!(parse("eas up --out plan").unwrap_err().exit_code(), 2);
}

#[test]
fn malformed_node_answers_are_usage_errors() {
    let invalid = Some(ErrorKind::ValueValidation);
    for line in [
        "eas facts --containerd-config nope",
        "eas facts --containerd-config =x",
        "eas up --dry-run --containerd-config node=",
        "eas up --dry-run --containerd-config node=/nonexistent/eas/config.toml",
        "eas facts --nri-socket node",
        "eas facts --nri-socket node=maybe",
        "eas up --nri-socket =present",
    ] {
        assert_eq!(kind(line), invalid, "{line}");
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    let ok = format!("eas facts --containerd-config n={} --nri-socket n=absent", file.path().display());
    assert!(parse(&ok).is_ok(), "{:?}", parse(&ok).err());
}

#[test]
fn facts_output_takes_json_only() {
    assert_eq!(kind("eas facts --output text"), Some(ErrorKind::InvalidValue));
    assert!(parse("eas facts --output json").is_ok());
    assert!(parse("eas facts").is_ok());
}

#[test]
fn commands_are_listed_in_the_order_a_user_meets_them() {
    let cmd = Cli::command();
    let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
    assert_eq!(
        names,
        [
            "init",
            "up",
            "down",
            "status",
            "verify",
            "doctor",
            "support-bundle",
            "fit",
            "facts",
            "config",
            "overlay",
            "pins",
            "bastion",
            "schema",
            "completions",
            "man"
        ]
    );
}

/// `eas up --help`, rendered at `width` columns.
fn up_help(width: usize) -> String {
    let mut cmd = Cli::command().term_width(width);
    cmd.build();
    let up = cmd.find_subcommand_mut("up").unwrap();
    up.render_help().to_string()
}

#[test]
fn global_options_are_grouped_after_the_commands_own_and_help_wraps_to_the_width() {
    let help = up_help(72);
    let own = help.find("\nOptions:\n").expect("an Options heading");
    let global = help.find("\nGlobal options:\n").expect("a Global options heading");
    assert!(own < global, "{help}");
    let kubeconfig = help.find("--kubeconfig").unwrap();
    assert!(kubeconfig > global, "--kubeconfig is listed under Global options: {help}");
    assert!(help.find("--dry-run").unwrap() < global, "{help}");
    for line in help.lines() {
        assert!(line.chars().count() <= 72, "{} columns: {line:?}", line.chars().count());
    }
}

#[test]
fn the_phase_timeouts_have_their_own_heading_after_the_node_facts() {
    let help = up_help(100);
    let heading = |h: &str| help.find(&format!("\n{h}:\n")).unwrap_or_else(|| panic!("no {h} heading: {help}"));
    let (facts, timeouts) = (heading("Node facts"), heading("Timeouts"));
    for flag in ["--install-timeout", "--verify-timeout"] {
        let at = help.find(flag).unwrap();
        assert!(at > timeouts && timeouts > facts, "{flag} is not under Timeouts: {help}");
    }
    // Node facts keeps only the node flags.
    let between = &help[facts..timeouts];
    assert!(between.contains("--containerd-config") && !between.contains("timeout"), "{between}");
}

/// The two-step resolution (issue 32): each setting from its flag, else its variable, else the
/// config file, else eas's default, each non-default one's source recorded for the plan.
#[test]
fn each_setting_is_its_flag_else_its_variable_else_the_config_file() {
    use crate::settings::source::Source;
    let dir = tempfile::tempdir().unwrap();
    let yaml = "schema: eas-config/v1\nkubeconfig: kc\ncontext: from-file\nstate_dir: st\nlayer: inference\n\
                env: file-env\nmodel: llama-3-1-8b\ntimeouts:\n  install: 600\nmirrors:\n  eas: mirror/eas\n";
    std::fs::write(dir.path().join("eas.yaml"), yaml).unwrap();
    let config = dir.path().join("eas.yaml");
    let line = format!("eas --config {} up --dry-run --env flag-env", config.display());
    let cli = parse(&line).unwrap();
    let g = super::settings(&cli.global, crate::settings::Env::of(&[("KUBECONFIG", "/env/kc")])).unwrap();
    let file = Source::File(config.clone());
    assert_eq!(g.kubeconfig, None, "KUBECONFIG wins over the file; the kubeconfig resolver reads it");
    assert_eq!(g.sources.of("kubeconfig"), Source::Env("KUBECONFIG"));
    assert_eq!((g.context.as_deref(), g.sources.of("context")), (Some("from-file"), file.clone()));
    assert_eq!(g.state_dir, Some(dir.path().join("st")), "relative to the file's directory");
    let super::Command::Up(args) = cli.command else { panic!("up") };
    let up = super::up(*args, &g).unwrap();
    assert_eq!((&*up.select.layer, up.sources.of("layer")), ("inference", file.clone()));
    assert_eq!((up.env.as_str(), up.sources.of("env")), ("flag-env", Source::Flag("--env")), "the flag wins");
    assert_eq!(up.phase_timeouts.get(crate::plan::PhaseId::Install).as_secs(), 600);
    assert_eq!(up.repos.eas_repo, Some(dir.path().join("mirror/eas")));
    assert_eq!(up.select.model.as_deref(), Some("llama-3-1-8b"));
    assert!(!up.sources.is_set("offline") && !up.offline, "unset everywhere: the default, not named");
    // Without the file: the defaults, and nothing named.
    let cli = parse("eas up --dry-run").unwrap();
    let g = super::settings(&cli.global, crate::settings::Env::of(&[])).unwrap();
    let super::Command::Up(args) = cli.command else { panic!("up") };
    let up = super::up(*args, &g).unwrap();
    assert_eq!((&*up.select.layer, up.env.as_str()), ("agent-toolkit", "k3d-gpu"));
    assert_eq!(g.sources.chain(&up.sources), vec![]);
}

/// A `true` in eas.yaml (issue 32 item 1's gap): `--no-offline`, `--no-probe-nodes` and
/// `--no-allow-unpinned-base` turn it off and are named as its source; the later of `--X` and
/// `--no-X` wins; the file alone still turns each on. The `--no-` flags are listed by `--help`,
/// not by `-h`.
#[test]
fn a_true_in_the_config_file_is_turned_off_by_its_no_flag_and_the_flag_is_named() {
    use crate::settings::source::Source;
    let dir = tempfile::tempdir().unwrap();
    let yaml = "schema: eas-config/v1\noffline: true\nallow_unpinned_base: true\nnodes:\n  probe: true\n";
    let config = dir.path().join("eas.yaml");
    std::fs::write(&config, yaml).unwrap();
    let up_of = |flags: &str| {
        let cli = parse(&format!("eas --config {} up --dry-run {flags}", config.display())).unwrap();
        let g = super::settings(&cli.global, crate::settings::Env::of(&[])).unwrap();
        let super::Command::Up(args) = cli.command else { panic!("up") };
        super::up(*args, &g).unwrap()
    };
    let file = Source::File(config.clone());
    let on = up_of("");
    assert_eq!((on.offline, on.gather.probe_nodes, on.image.allow_unpinned_base), (true, true, true));
    for key in ["offline", "nodes.probe", "allow_unpinned_base"] {
        assert_eq!(on.sources.of(key), file, "{key}");
    }
    let off = up_of("--no-offline --no-probe-nodes --no-allow-unpinned-base");
    assert_eq!((off.offline, off.gather.probe_nodes, off.image.allow_unpinned_base), (false, false, false));
    let named: Vec<String> = off.sources.chain(&Default::default()).iter().map(|s| s.line()).collect();
    for line in [
        "offline false (from --no-offline)",
        "nodes.probe false (from --no-probe-nodes)",
        "allow_unpinned_base false (from --no-allow-unpinned-base)",
    ] {
        assert!(named.iter().any(|n| n == line), "{line} not in {named:?}");
    }
    // Nor does the last install turn them on again: a `--no-` flag is a setting, not a default.
    let mut rec = crate::state::selection::Selection::new();
    for key in ["offline", "nodes.probe", "allow_unpinned_base"] {
        rec.insert(key.to_string(), true.into());
    }
    rec.insert("base_image".into(), "eas-test-base:bookworm".into());
    let g = super::settings(&parse("eas up").unwrap().global, crate::settings::Env::of(&[])).unwrap();
    let filled = crate::pipeline::recorded::fill(&off, &g, &rec).unwrap().expect("the base image is filled");
    let f = filled.0;
    assert_eq!((f.offline, f.gather.probe_nodes, f.image.allow_unpinned_base), (false, false, false));
    assert_eq!(f.image.base_image.as_deref(), Some("eas-test-base:bookworm"), "what nothing set is filled");
    // The later of the pair wins, either way round.
    assert!(!up_of("--offline --no-offline").offline);
    let again = up_of("--no-offline --offline");
    assert_eq!((again.offline, again.sources.of("offline")), (true, Source::Flag("--offline")));
    // doctor and init take the same pair (init declares it in the file it writes).
    let cli =
        parse(&format!("eas --config {} doctor --no-offline --no-allow-unpinned-base", config.display())).unwrap();
    let g = super::settings(&cli.global, crate::settings::Env::of(&[])).unwrap();
    let super::Command::Doctor(args) = cli.command else { panic!("doctor") };
    let d = super::doctor(args, &g).unwrap().up;
    assert_eq!((d.offline, d.image.allow_unpinned_base, d.gather.probe_nodes), (false, false, true));
    let cli = parse(&format!("eas --config {} init --no-probe-nodes", config.display())).unwrap();
    let g = super::settings(&cli.global, crate::settings::Env::of(&[])).unwrap();
    let super::Command::Init(args) = cli.command else { panic!("init") };
    let i = super::init(args, &g).unwrap();
    assert_eq!((i.gather.probe_nodes, i.sources.of("nodes.probe")), (false, Source::Flag("--no-probe-nodes")));
    // Listed by --help, not by -h.
    let mut cmd = Cli::command();
    cmd.build();
    let up = cmd.find_subcommand_mut("up").unwrap();
    let (short, long) = (up.render_help().to_string(), up.render_long_help().to_string());
    for flag in ["--no-offline", "--no-probe-nodes", "--no-allow-unpinned-base"] {
        assert!(!short.contains(flag) && long.contains(flag), "{flag}");
    }
}
