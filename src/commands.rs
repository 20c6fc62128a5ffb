//! The thin command layer: arguments in, an operation called, a [`Failure`] out.

use crate::cli::{Command, PinsCommand};
use crate::error::Failure;
use crate::output::Shell;
use crate::pins::{self, Pins, PinsError};
use crate::settings::Global;

pub fn run(command: Command, global: &Global, shell: &Shell) -> Result<(), Failure> {
    match command {
        Command::Config(args) => crate::config::command(&args.into(), shell),
        Command::Fit(args) => crate::config::fit::command::command(&args.into(), shell),
        Command::Overlay(args) => crate::overlay::command(&args.into(), shell),
        Command::Facts(args) => crate::gather::command(&args.into(), global, shell),
        Command::Up(args) => crate::up::command(&(*args).into(), global, shell),
        Command::Down(args) => crate::up::down::command(&args.into(), global, shell),
        Command::Verify(args) => crate::up::verify_command(&args.into(), global, shell),
        Command::Doctor => crate::up::doctor::command(global, shell),
        Command::Status(args) => crate::status::command(&args.into(), global, shell),
        Command::Pins(PinsCommand::Check { pins }) => pins_check(pins.as_deref()),
        Command::Pins(PinsCommand::Lock { pins, git_base }) => {
            pins_lock(&pins, git_base.as_deref().unwrap_or("https://github.com"), global, shell)
        }
        Command::Bastion(cmd) => crate::bastion::command(crate::cli::bastion(cmd, global), global, shell),
        Command::Completions { shell: target } => crate::cli::docs::completions(target, &mut std::io::stdout().lock()),
        Command::Man { out } => {
            let pages = crate::cli::docs::man_command(&out)?;
            shell.note(format!("wrote {} man pages to {}", pages.len(), out.display()));
            Ok(())
        }
    }
}

impl From<PinsError> for Failure {
    fn from(e: PinsError) -> Self {
        let hint = match &e {
            PinsError::UnknownProfile(..) => "pass --profile with one of the profiles listed, or --ref with a full SHA",
            PinsError::Write { .. } => "check that the pins file is writable",
            _ => "see `eas pins check`; the format is eas-pins/v1 (README: pins.json)",
        };
        match e {
            PinsError::Write { .. } => Failure::step("pins", e),
            PinsError::Read(crate::bounded::ReadError::Interrupted { .. }) => Failure::Interrupted,
            _ => Failure::bad_input(e.to_string(), hint),
        }
    }
}

fn pins_check(path: Option<&std::path::Path>) -> Result<(), Failure> {
    let pins = Pins::load(path)?;
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

fn pins_lock(path: &std::path::Path, git_base: &str, global: &Global, shell: &Shell) -> Result<(), Failure> {
    use crate::pin_lock::RowError;
    let mut pins = Pins::load(Some(path))?;
    let cache = crate::trees::cache_dir(&global.env);
    let ca_file = match &global.ca_bundle {
        Some(b) => Some(
            crate::net::trust::GitCaFile::write(&b.ders)
                .map_err(|e| Failure::step("pins lock", format!("writing git's CA file: {e}")))?,
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
        .map_err(|e| Failure::step("pins lock", e))
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
                "give the pin more hex digits (edit pins.json); nothing was written",
            ));
        }
        if !refused.is_empty() {
            let mut lines = all;
            lines.push(format!("nothing was written to {}", path.display()));
            return Err(Failure::Refused(lines));
        }
        return Err(Failure::step_next(
            "pins lock",
            all.join("; "),
            "check network access to the repositories (or --git-base) and re-run `eas pins lock`; nothing was written",
        ));
    }
    for line in &outcome.done {
        shell.note(format!("locked {line}"));
    }
    if outcome.done.is_empty() {
        shell.note("nothing to lock: every tree row already has a full SHA");
        return Ok(());
    }
    crate::atomic::write(path, pins.to_json().as_bytes())
        .map_err(|source| PinsError::Write { path: path.display().to_string(), source })?;
    Ok(())
}
