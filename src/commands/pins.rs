//! `eas pins check|lock|show`: the pins a command would read (resolved by `pins::source`, the
//! same way for every command), validated, locked in place, or printed with where they came from.

use std::path::Path;

use serde::Serialize;

use crate::error::Failure;
use crate::output::{OutputFormat, Shell};
use crate::pins::{self, Pins, Source};
use crate::settings::Global;

pub fn check(flag: Option<&Path>, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let source = global.pins_source(flag);
    let pins = source.load()?;
    shell.note(format!("pins: {}", source.describe()));
    let findings = pins::check(&pins);
    let mut problems = 0;
    for f in &findings {
        if f.problem {
            problems += 1;
            println!("WARN {}", f.text);
        } else {
            println!("ok   {}", f.text);
        }
    }
    println!("{} rows, {problems} to resolve", pins.pins.len());
    Ok(())
}

/// `eas pins show --output json`: the pins document itself (so it can be saved and passed back
/// as `--pins`), plus where it came from and the exit code; on a file that cannot be read, the
/// same document with `error` and no rows.
#[derive(Debug, Serialize)]
struct Shown<'a> {
    schema: &'static str,
    pins_source: String,
    pins_origin: &'static str,
    exit_code: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    pins: &'a [pins::Pin],
}

pub fn show(flag: Option<&Path>, output: OutputFormat, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let source = global.pins_source(flag);
    let loaded = source.load();
    if output.is_json() {
        let failure = loaded.as_ref().err().map(Failure::from);
        let doc = Shown {
            schema: pins::SCHEMA,
            pins_source: source.label(),
            pins_origin: source.origin(),
            exit_code: failure.as_ref().map_or(crate::plan::EXIT_SUCCESS, Failure::exit_code),
            error: loaded.as_ref().err().map(ToString::to_string),
            pins: loaded.as_ref().map(|p| p.pins.as_slice()).unwrap_or(&[]),
        };
        shell.document(serde_json::to_value(&doc).expect("pins serialise"));
        return failure.map_or(Ok(()), Err);
    }
    let pins = loaded?;
    println!("pins: {}", source.describe());
    print!("{}", table(&pins));
    Ok(())
}

/// One line a row: profile/name, the ref, the commit or sha256, and whether it is locked. Every
/// column is escaped, cut and padded by characters (a ref may be non-ASCII; a name may be long).
fn table(pins: &Pins) -> String {
    use crate::text::{ellipsis, escape_controls, pad};
    let cell = |s: &str, max: usize| ellipsis(&escape_controls(s), max);
    let rows: Vec<[String; 4]> = pins
        .pins
        .iter()
        .map(|p| {
            let id = cell(&format!("{}/{}", p.profile, p.name), 60);
            let (what, state) = match (&p.sha, p.is_artifact()) {
                (_, true) => match p.artifact_sha256() {
                    Some(h) => (format!("sha256 {}", h.get(..12).unwrap_or(h)), "locked"),
                    None => ("sha256 none".to_string(), "UNLOCKED"),
                },
                (Some(sha), false) => (cell(sha, 40), if p.locked { "locked" } else { "UNLOCKED" }),
                (None, false) => ("-".to_string(), "UNLOCKED"),
            };
            [id, cell(&p.git_ref, 40), what, state.to_string()]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let mut out = String::new();
    for [id, r, what, state] in rows {
        out.push_str(&format!("{}  {}  {}  {state}\n", pad(&id, w0), pad(&r, w1), pad(&what, w2)));
    }
    out
}

/// Locks the pins resolution picked, in place; the built-in pins are locked into the user's
/// pins file, which is written only when every row locks (a failed lock leaves nothing).
pub fn lock(flag: Option<&Path>, git_base: &str, global: &Global, shell: &Shell) -> Result<(), Failure> {
    use crate::pin_lock::RowError;
    let source = global.pins_source(flag);
    let (path, mut pins) = source.lock_target(global.env.user_pins())?;
    let path = path.as_path();
    shell.note(format!("locking {}", source.describe()));
    let cache = crate::trees::cache_dir(&global.env);
    let ca_file = match &global.ca_bundle {
        Some(b) => Some(
            crate::net::trust::GitCaFile::write(&b.ders)
                .map_err(|e| Failure::step(crate::plan::Step::PinsLock, format!("writing git's CA file: {e}")))?,
        ),
        None => None,
    };
    // The fetches run on a blocking thread of the one runtime, so SIGINT/SIGTERM end the command
    // (exit 130) and the runtime kills the git still running: git has its own process group, and
    // the terminal's signal does not reach it.
    let (base, ca) = (git_base.to_string(), ca_file.as_ref().map(|f| f.path().to_path_buf()));
    let (pins, outcome) = crate::runtime::block_on_interruptible(async move {
        tokio::task::spawn_blocking(move || {
            let outcome = crate::pin_lock::lock(&mut pins, &base, &cache, ca.as_deref());
            (pins, outcome)
        })
        .await
        .map_err(|e| Failure::step(crate::plan::Step::PinsLock, e))
    })?;
    if !outcome.errors.is_empty() {
        // Nothing is written unless every row locks. Bad input outranks a refusal, which
        // outranks a failed fetch.
        let of = |want: fn(&RowError) -> Option<&String>| -> Vec<String> {
            outcome.errors.iter().filter_map(want).cloned().collect()
        };
        let bad = of(|e| if let RowError::BadInput(m) = e { Some(m) } else { None });
        let refused = of(|e| if let RowError::Refused(m) = e { Some(m) } else { None });
        let failed = of(|e| if let RowError::Failed(m) = e { Some(m) } else { None });
        let all: Vec<String> = bad.iter().chain(&refused).chain(&failed).cloned().collect();
        if !bad.is_empty() {
            return Err(Failure::bad_input(
                all.join("; "),
                format!("give the pin more hex digits in {}; nothing was written", path.display()),
            ));
        }
        if !refused.is_empty() {
            let mut lines = all;
            lines.push(format!("nothing was written to {}", path.display()));
            return Err(Failure::Refused(lines));
        }
        // One line per repository (the rows that pin it named), then the error: not one line
        // repeating the same network error for every row.
        for f in &failed {
            shell.note(format!("  {f}"));
        }
        let n = failed.len();
        return Err(Failure::step_next(
            crate::plan::Step::PinsLock,
            format!("{n} {} could not be fetched (above)", if n == 1 { "repository" } else { "repositories" }),
            "check network access to the repositories (or --git-base) and re-run `eas pins lock`; nothing was written",
        ));
    }
    for line in &outcome.done {
        shell.note(format!("locked {line}"));
    }
    if outcome.done.is_empty() && source != Source::Builtin {
        shell.note(format!("nothing to lock: every tree row of {} already has a full SHA", path.display()));
        return Ok(());
    }
    pins::source::write(path, &pins)?;
    shell.note(format!("wrote {}; every command now reads it (`eas pins show`)", path.display()));
    Ok(())
}
