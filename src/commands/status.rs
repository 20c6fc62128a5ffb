//! `eas status [--output text|json]`: what `eas up` installed and how it is now (SPEC §6).

use crate::error::Failure;
use crate::output::{OutputFormat, Shell};
use crate::settings::Global;
use crate::status::{self, StatusSettings};

pub fn run(args: &StatusSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let now = status::read(args, global, shell)?;
    match args.output {
        OutputFormat::Json => shell.document(serde_json::to_value(&now).expect("json")),
        // Names and reasons come from the cluster: escaped before they reach a terminal.
        OutputFormat::Text => status::render(&now).lines().for_each(|l| shell.out(crate::text::for_people(l))),
    }
    Ok(())
}
