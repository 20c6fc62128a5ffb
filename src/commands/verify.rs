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

/// `eas verify --output json` (eas-verify/v1): every check, or the failure's lines (also on
/// stderr); the command layer sets `exit_code` to the process's.
fn document(result: &Result<Vec<String>, Failure>) -> serde_json::Value {
    match result {
        Ok(lines) => {
            let checks: Vec<serde_json::Value> = lines.iter().map(|l| check("ok", l)).collect();
            serde_json::json!({ "schema": "eas-verify/v1", "passed": true, "checks": checks, "exit_code": crate::plan::EXIT_SUCCESS, "failure": null })
        }
        Err(f) => {
            // A failed verification lists every node and server `ok` or `FAIL`, then what failed
            // in detail: the marked lines are its checks, passed or failed.
            let checks: Vec<serde_json::Value> = match f {
                Failure::Verify(lines) => lines
                    .iter()
                    .filter_map(|l| match (l.strip_prefix("ok  "), l.strip_prefix("FAIL ")) {
                        (Some(ok), _) => Some(check("ok", ok.trim())),
                        (_, Some(failed)) => Some(check("fail", failed.trim())),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            serde_json::json!({
                "schema": "eas-verify/v1", "passed": false, "checks": checks, "exit_code": f.exit_code(),
                "failure": f.lines()
            })
        }
    }
}

/// One check as an object, as `eas doctor`'s are: `name` (what was checked: a device on a node,
/// a model server, its pods), `ok`, `status` (`ok` or `fail`) and the `detail`, from the line
/// verify prints (`name: detail`).
fn check(status: &str, line: &str) -> serde_json::Value {
    let (name, detail) = line.split_once(": ").unwrap_or((line, ""));
    serde_json::json!({ "name": name, "ok": status == "ok", "status": status, "detail": detail })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_are_objects_with_a_name_and_a_status_passed_or_failed() {
        let passed = document(&Ok(vec![
            "Intel GPU on node gpu-a: allocatable gpu.intel.com/i915=1; plugin pod p/q Ready".into(),
            "model server m".into(),
        ]));
        assert_eq!(
            passed["checks"],
            serde_json::json!([
                {"name": "Intel GPU on node gpu-a", "ok": true, "status": "ok",
                 "detail": "allocatable gpu.intel.com/i915=1; plugin pod p/q Ready"},
                {"name": "model server m", "ok": true, "status": "ok", "detail": ""},
            ])
        );
        let failed = document(&Err(Failure::Verify(vec![
            "ok   Intel GPU on node gpu-a: allocatable gpu.intel.com/i915=1".into(),
            "FAIL Intel GPU on node gpu-b: allocatable none; plugin pod p/r not Ready".into(),
            "  plugin pod p/r: CrashLoopBackOff".into(),
        ])));
        let checks = failed["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 2, "the detail lines are not checks: {checks:?}");
        assert_eq!((checks[0]["status"].as_str(), checks[0]["ok"].as_bool()), (Some("ok"), Some(true)));
        assert_eq!(checks[1]["name"], "Intel GPU on node gpu-b");
        assert_eq!((checks[1]["status"].as_str(), checks[1]["ok"].as_bool()), (Some("fail"), Some(false)));
        assert_eq!(failed["passed"], false);
    }
}
