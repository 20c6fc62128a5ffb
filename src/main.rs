//! `eas`: installs Intel's Enterprise AI Solutions inference stack, with the Agent Toolkit on
//! top, onto an existing k3s or k3d cluster. See SPEC.md for the contract.

mod bastion;
mod cli;
mod commands;
mod config;
mod docs;
mod error;
mod facts;
mod gather;
mod installer;
mod output;
mod overlay;
mod pins;
mod pipeline;
mod plan_data;
mod plan_view;
mod prepare;
mod sources;
mod state;
mod trees;
mod up;
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
