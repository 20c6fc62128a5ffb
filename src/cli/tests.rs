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
