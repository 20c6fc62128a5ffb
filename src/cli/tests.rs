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
