//! The thin command layer: arguments in, an operation called, a [`Failure`] out. The commands
//! whose bodies live here, one file each: `config`, `doctor`, `facts`, `fit`, `overlay`, `pins`, `status`,
//! `support_bundle`, `up`, `down`, `bastion`, `verify`.

use crate::cli::{Command, OutputArg, PinsCommand};
use crate::error::Failure;
use crate::output::Shell;
use crate::pins::PinsError;
use crate::settings::Global;

mod bastion;
mod config;
mod doctor;
mod document;
mod down;
mod edge;
mod facts;
mod fit;
mod init;
mod overlay;
mod pins;
mod status;
pub mod support_bundle;
mod up;
mod verify;

/// Runs `command`; asked for JSON, it prints that command's one document (or an error document)
/// on stdout once it returns, whatever happened.
pub fn run(command: Command, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let document = json_document(&command);
    let result = dispatch(command, global, shell);
    if let Some(schema) = document {
        emit(schema, shell.take_document(), &result, &shell.warnings());
    }
    result
}

/// The document `command` prints on stdout, when it was asked for `--output json`.
fn json_document(command: &Command) -> Option<&'static str> {
    let (name, json) = match command {
        Command::Up(a) => ("up", a.output == OutputArg::Json),
        Command::Facts(a) => ("facts", a.output.is_some()),
        Command::Fit(a) => ("fit", a.output == OutputArg::Json),
        Command::Status(a) => ("status", a.output == OutputArg::Json),
        Command::Verify(a) => ("verify", a.output == OutputArg::Json),
        Command::Doctor(a) => ("doctor", a.output == OutputArg::Json),
        Command::Pins(PinsCommand::Show { output, .. }) => ("pins show", *output == OutputArg::Json),
        _ => return None,
    };
    json.then(|| crate::document::schema_of(name)).flatten()
}

fn dispatch(command: Command, global: &Global, shell: &Shell) -> Result<(), Failure> {
    match command {
        Command::Config(args) => {
            let out = args.out.clone();
            match crate::cli::config(args, &global.env) {
                Ok(settings) => config::run(&settings, shell),
                // Bad input writes nothing, and leaves none of an earlier run's outputs.
                Err(f) => crate::config::clear_stale(&out).map_err(Failure::from).and(Err(f.into())),
            }
        }
        Command::Fit(args) => fit::run(&args.into(), shell),
        Command::Overlay(args) => overlay::run(&args.into(), shell),
        Command::Facts(args) => facts::run(&args.into(), global, shell),
        Command::Up(args) => {
            let (dry_run, out) = (args.dry_run, args.out.clone());
            match crate::cli::up(*args, global) {
                Ok(settings) => up::run(&settings, global, shell),
                Err(f) => Err(up::without_stale_outputs(dry_run, out.as_deref(), f.into(), shell)),
            }
        }
        Command::Down(args) => down::run(&crate::cli::down(args, global), global, shell),
        Command::Verify(args) => verify::run(&args.into(), global, shell),
        Command::Init(args) => init::run(args, global, shell),
        Command::Doctor(args) => doctor::run(&crate::cli::doctor(args, global)?, global, shell),
        Command::Status(args) => status::run(&args.into(), global, shell),
        Command::SupportBundle(args) => support_bundle::command(args.out.as_deref(), global, shell),
        Command::Pins(PinsCommand::Check { pins }) => pins::check(pins.as_deref(), global, shell),
        Command::Pins(PinsCommand::Lock { pins, git_base }) => {
            pins::lock(pins.as_deref(), git_base.as_deref().unwrap_or("https://github.com"), global, shell)
        }
        Command::Pins(PinsCommand::Show { pins, output }) => pins::show(pins.as_deref(), output.into(), global, shell),
        Command::Bastion(cmd) => bastion::run(crate::cli::bastion(cmd, global), global, shell),
        Command::Schema { name } => schema(name.as_deref()),
        Command::Completions { shell: target } => {
            Ok(crate::cli::docs::completions(target, &mut std::io::stdout().lock())?)
        }
        Command::Man { out } => {
            let pages = crate::cli::docs::man_command(&out)?;
            shell.note(format!("wrote {} man pages to {}", pages.len(), out.display()));
            Ok(())
        }
    }
}

/// Prints the document of a command asked for JSON, once: the command layer is where stdout is
/// written (`document` builds it).
pub fn emit(schema: &str, doc: Option<serde_json::Value>, result: &Result<(), Failure>, printed: &[String]) {
    let doc = document::finish(schema, doc, result, printed);
    println!("{}", crate::text::json_safe(serde_json::to_string_pretty(&doc).expect("a JSON value serialises")));
}

impl From<&PinsError> for Failure {
    fn from(e: &PinsError) -> Self {
        let hint = match e {
            PinsError::UnknownProfile(..) => "pass --profile with one of the profiles listed, or --ref with a full SHA",
            PinsError::Write { .. } => "check that the pins file is writable",
            PinsError::NoUserFile => "pass --pins FILE, or set XDG_CONFIG_HOME or HOME",
            _ => "`eas pins check` names the problem; `eas schema eas-pins/v1` prints the format",
        };
        match e {
            PinsError::Write { .. } => Failure::step(crate::plan::Step::Pins, e),
            PinsError::Read(crate::bounded::ReadError::Interrupted { .. }) => Failure::Interrupted,
            _ => Failure::bad_input(e.to_string(), hint),
        }
    }
}

impl From<PinsError> for Failure {
    fn from(e: PinsError) -> Self {
        Failure::from(&e)
    }
}

/// `eas schema [NAME]`: the schema as shipped in this binary, or the names it ships.
fn schema(name: Option<&str>) -> Result<(), Failure> {
    let Some(name) = name else {
        for n in crate::schemas::names() {
            println!("{n}");
        }
        return Ok(());
    };
    match crate::schemas::find(name) {
        Some((_, text)) => {
            print!("{text}");
            Ok(())
        }
        None => Err(Failure::bad_input(
            format!("no schema named {name:?}"),
            format!("one of: {}", crate::schemas::names().join(", ")),
        )),
    }
}
