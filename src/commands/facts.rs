//! `eas facts [--out FILE] [--output json]`: the facts document (`eas-facts/v1`) from the cluster,
//! printed or written (SPEC §3.1); the reads are `gather::read`'s.

use crate::error::Failure;
use crate::gather::{self, FactsSettings};
use crate::output::Shell;
use crate::settings::Global;

pub fn run(args: &FactsSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let read = gather::read(args, global, shell, crate::config::fit::landing_node);
    // SIGINT/SIGTERM end the reads (exit 130).
    let gathered = crate::runtime::block_on_interruptible(async { read.await.map_err(Failure::from) })?;
    for w in &gathered.warnings {
        shell.warn(w);
    }
    let f = &gathered.facts;
    let with_containerd = f.nodes.iter().filter(|n| n.containerd.is_some()).count();
    shell.phase(
        "facts",
        format!(
            "{} nodes ({with_containerd} with containerd facts), {} DaemonSets, {} Helm releases, {} namespaces; {} API calls",
            f.nodes.len(),
            f.daemonsets.len(),
            f.helm_releases.len(),
            f.namespaces.len(),
            gathered.api_calls
        ),
    );
    let text = format!("{}\n", crate::text::json_safe(serde_json::to_string_pretty(f).expect("facts serialise")));
    // Asked for JSON, stdout carries the document the command layer prints, with the exit code
    // and the warnings (the file written with --out stays the plain facts document).
    let document = || {
        let mut v = serde_json::to_value(f).expect("facts serialise");
        v["warnings"] = serde_json::json!(gathered.warnings);
        shell.document(v);
    };
    match &args.out {
        None if args.output.is_json() => document(),
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Failure::step(crate::plan::PhaseId::Facts, format!("cannot write to stdout: {e}")))?;
        }
        Some(path) => {
            crate::atomic::write_private(path, text.as_bytes()).map_err(|e| {
                Failure::step_next(
                    crate::plan::PhaseId::Facts,
                    format!("cannot write {}: {e}", path.display()),
                    "check that --out names a writable file",
                )
            })?;
            shell.note(format!("wrote {}", path.display()));
            if args.output.is_json() {
                document();
            }
        }
    }
    Ok(())
}
