//! `eas`: installs Intel's Enterprise AI Solutions inference stack, with the Agent Toolkit on
//! top, onto an existing k3s or k3d cluster. See SPEC.md for the contract.

mod bastion;
mod cli;
mod commands;
mod config;
mod error;
mod facts;
#[cfg_attr(not(test), allow(dead_code))] // wired into `eas up` by the lead
mod installer;
mod output;
mod overlay;
mod pins;
#[cfg_attr(not(test), allow(dead_code))] // wired into `eas up` by the lead
mod pipeline;
#[cfg_attr(not(test), allow(dead_code))] // wired into `eas up` by the lead
mod prepare;
mod sources;
#[cfg_attr(not(test), allow(dead_code))] // wired into `eas up` by the lead
mod state;
#[allow(dead_code)] // used by `eas up`
mod trees;
#[allow(dead_code)] // wired into `eas verify` and `eas up` with the kube client
mod verify;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let term = output::Terminal::detect();
    let shell =
        output::Shell::new(cli.global.progress, &term, cli.global.quiet, cli.global.verbose, cli.global.no_color);
    shell.init_tracing();
    error::finish(commands::run(cli, &shell))
}
