//! `eas verify [--timeout SECS] [--devices-timeout SECS] [--output text|json]`: the devices and
//! the recorded model servers checked again (SPEC §7); every failure, the cluster not answering
//! included, still makes the one JSON document.

use crate::error::Failure;
use crate::output::Shell;
use crate::settings::Global;
use crate::verify::recorded::VerifySettings;

pub fn run(args: &VerifySettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let result = crate::verify::recorded::verify_recorded(args, global, shell).map_err(Failure::from);
    if args.output.is_json() {
        shell.document(document(&result));
    } else if let Ok(lines) = &result {
        for l in lines {
            shell.out(format!("ok {}", crate::text::for_people(l)));
        }
    }
    result.map(|_| ())
}

/// `eas verify --output json` (eas-verify/v1): what passed, or the failure's lines (also on
/// stderr); the command layer sets `exit_code` to the process's.
fn document(result: &Result<Vec<String>, Failure>) -> serde_json::Value {
    match result {
        Ok(lines) => {
            serde_json::json!({ "schema": "eas-verify/v1", "passed": true, "checks": lines, "exit_code": crate::plan::EXIT_SUCCESS, "failure": null })
        }
        Err(f) => {
            // A failed verification lists every node and server `ok` or `FAIL`: the ones that
            // passed are its checks.
            let checks: Vec<&str> = match f {
                Failure::Verify(lines) => lines.iter().filter_map(|l| l.strip_prefix("ok  ")).map(str::trim).collect(),
                _ => Vec::new(),
            };
            serde_json::json!({
                "schema": "eas-verify/v1", "passed": false, "checks": checks, "exit_code": f.exit_code(),
                "failure": f.lines()
            })
        }
    }
}
