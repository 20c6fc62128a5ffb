//! `eas`: installs Intel's Enterprise AI Solutions inference stack, with the Agent Toolkit on
//! top, onto an existing k3s or k3d cluster. See SPEC.md for the contract.

/// A table of `data/` (`$file`) compiled in and parsed once, on first use, as `$ty`. A malformed
/// one is a defect of this build (its tests read every table), so it panics naming the file.
macro_rules! data_table {
    ($ty:ty, $file:literal) => {{
        static V: std::sync::OnceLock<$ty> = std::sync::OnceLock::new();
        V.get_or_init(|| {
            serde_json::from_str(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/", $file)))
                .unwrap_or_else(|e| panic!("data/{} is malformed: {e}", $file))
        })
    }};
}

mod act;
mod atomic;
mod bounded;
mod cli;
mod cluster;
mod commands;
mod config;
mod docker_host;
mod document;
mod error;
mod facts;
mod gather;
mod git;
mod hints;
mod installer;
mod knobs;
mod kubeconfig;
mod net;
mod next_command;
mod output;
mod overlay;
mod pin_lock;
mod pins;
mod pipeline;
mod plan;
mod prereq;
#[cfg(test)]
mod proptests;
mod runtime;
mod schemas;
mod scratch;
mod secrets;
mod settings;
mod since_last;
mod snapshot;
mod sources;
mod state;
#[cfg(test)]
mod testing;
mod text;
// The integration tests' TLS front, of which the unit tests use a part.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../tests/it/support/tls_front.rs"]
mod tls_front;
mod trees;
mod verify;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // A rejected command line that asked for JSON still gets its one document.
            let argv: Vec<String> = std::env::args().collect();
            if e.use_stderr()
                && let Some(schema) = cli::rejected::schema_for_argv(&argv)
            {
                let cause = cli::rejected::clap_cause(&e.render().to_string());
                let f = error::Failure::bad_input(cause, "`eas help` lists the commands and their flags");
                commands::emit(schema, None, &Err(f), &[]);
            }
            e.exit()
        }
    };
    let env = settings::Env::from_process();
    secrets::learn_env(&env.lookup(), crate::act::bastion::secret_env_names());
    // A kubeconfig copy (a token, a client key) or an overlay index a SIGKILLed run left goes
    // before anything else.
    scratch::sweep(&std::env::temp_dir());
    let term = output::Terminal::from_env(&env);
    let g = &cli.global;
    let shell = output::Shell::new(g.progress.into(), &term, g.quiet, g.verbose, g.no_color);
    shell.init_tracing();
    match cli::settings(g, env) {
        Ok(global) => error::finish(commands::run(cli.command, &global, &shell), &shell),
        Err(e) => error::finish(Err(e.into()), &shell),
    }
}
