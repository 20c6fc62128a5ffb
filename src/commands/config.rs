//! `eas config`: facts, pins and flags in, the installer's configuration out (SPEC §3.2); the
//! choices printed on stdout, the files written to `--out`.

use crate::config;
use crate::error::Failure;
use crate::facts::Facts;
use crate::output::Shell;
use crate::settings::ConfigSettings;

pub fn run(args: &ConfigSettings, shell: &Shell) -> Result<(), Failure> {
    // The reads and the decisions (seconds for a large facts document) run where SIGINT and
    // SIGTERM end them: exit 130 with nothing written, never a process killed by the signal.
    let a = args.clone();
    let decided = crate::bounded::interruptible(move || -> Result<_, Failure> {
        let pinned = match &a.catalog {
            Some(path) => Some(config::read_catalog(path)?),
            None => None,
        };
        let result = Facts::read(&a.facts)
            .map_err(Failure::from)
            .and_then(|facts| config::generate_with(&facts, &a.select, pinned.as_ref()).map_err(Failure::from));
        Ok((pinned, result))
    });
    let (pinned, result) = decided.ok_or(Failure::Interrupted)??;
    let decision = match result {
        Ok(d) => d,
        Err(f) => {
            config::clear_stale(&args.out)?;
            return Err(f);
        }
    };
    let files = config::render::files(&decision);
    config::write::replace(&args.out, &files).map_err(|e| {
        Failure::step_next(
            crate::plan::Step::Write,
            format!("{}: {e}", args.out.display()),
            "check --out is a writable directory",
        )
    })?;
    for w in &decision.warnings {
        shell.warn(w);
    }
    let out = std::io::stdout();
    let mut out = out.lock();
    use std::io::Write;
    for c in &decision.choices {
        let _ = writeln!(out, "{}", config::render::choice_line(c, args.explain));
    }
    match &pinned {
        Some(p) => shell.note(format!("models decided against the catalog {}", p.describe())),
        None => shell.note(
            "models decided against the built-in candidates (data/models.json), not EI's catalog: pass --catalog FILE \
             to decide as `eas up` does against the pinned EI's model_manager/models.yaml",
        ),
    }
    shell.note(format!("wrote {} files to {}", files.len(), args.out.display()));
    Ok(())
}
