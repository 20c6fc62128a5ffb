//! `eas verify [--timeout SECS] [--devices-timeout SECS] [--output text|json]`: the devices and
//! the recorded model servers checked again (SPEC §7); every failure, the cluster not answering
//! included, still makes the one JSON document.

use crate::error::Failure;
use crate::output::Shell;
use crate::settings::Global;
use crate::up::VerifySettings;

pub fn run(args: &VerifySettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let result = crate::up::verify_recorded(args, global, shell);
    if args.output.is_json() {
        shell.document(crate::verify::document(&result));
    } else if let Ok(lines) = &result {
        for l in lines {
            shell.out(format!("ok {}", crate::text::for_people(l)));
        }
    }
    result.map(|_| ())
}
