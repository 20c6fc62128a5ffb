//! `eas up`: the list of phases runs in the domain (`crate::pipeline`); a dry run's plan comes back
//! here to be printed (text, or the one eas-plan/v1 document), written to `--out`, and turned
//! into the exit code: 3 when a refusal is among the blockers, else 4 on a STOP, else 0
//! (`--fail-on-blockers`: the first blocker's code). On exit 2 or 3, `--out` holds none of the
//! output files; a dry run that failed before its plan was printed leaves none of an earlier
//! run's there either.

use crate::config::write;
use crate::error::Failure;
use crate::output::Shell;
use crate::pipeline::settings::UpSettings;
use crate::pipeline::up::Ran;
use crate::plan::Plan;
use crate::settings::Global;

pub fn run(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    // `--output json` without `--dry-run` never gets here: the command line's parser refuses it.
    let result = match crate::pipeline::up::run(args, global, shell) {
        Ok(Ran::Acted) => Ok(()),
        Ok(Ran::Planned { mut plan, files }) => return dry_run_end(&mut plan, args, global, &files, shell),
        Err(f) => Err(f),
    };
    // The stale plan would describe a run that is not this one.
    result.map_err(|f| without_stale_outputs(args.dry_run, args.out.as_deref(), f))
}

/// A dry run that failed before its plan was printed (bad input, an unreadable cluster) leaves
/// none of an earlier run's outputs in `--out`: the stale plan would describe a run that is not
/// this one. A printed plan already wrote (or, on exit 2 or 3, cleared) them.
pub fn without_stale_outputs(dry_run: bool, out: Option<&std::path::Path>, f: Failure) -> Failure {
    match (dry_run, out) {
        (true, Some(out)) if !matches!(f, Failure::Blocked { .. }) => match write::clear(out) {
            Ok(()) => f,
            Err(e) => Failure::step(
                crate::plan::Step::Write,
                format!("cannot remove stale outputs in {}: {e}", out.display()),
            ),
        },
        _ => f,
    }
}

/// The plan printed (and written with `--out`) whatever its exit code, then that code.
fn dry_run_end(
    plan: &mut Plan,
    args: &UpSettings,
    global: &Global,
    files: &[(String, String)],
    shell: &Shell,
) -> Result<(), Failure> {
    use crate::plan::Kind;
    let kind = crate::plan::dry_run_exit(&plan.blockers, args.fail_on_blockers);
    plan.exit_code = kind.map_or(crate::plan::EXIT_SUCCESS, Kind::exit_code);
    print_plan(plan, args, global, files, !matches!(kind, Some(Kind::BadInput | Kind::Refusal)), shell)?;
    match kind {
        None => Ok(()),
        Some(kind) => Err(crate::error::Failure::blocked(&plan.blockers, kind)),
    }
}

fn print_plan(
    plan: &Plan,
    args: &UpSettings,
    global: &Global,
    files: &[(String, String)],
    write_out: bool,
    shell: &Shell,
) -> Result<(), Failure> {
    if args.output.is_json() {
        // serde_json escapes control characters itself.
        shell.document(serde_json::to_value(plan).expect("the plan serialises"));
    } else {
        let view = crate::pipeline::plan_view::View {
            width: crate::pipeline::plan_view::terminal_width(&global.env),
            explain: args.explain,
        };
        for line in crate::pipeline::plan_view::render(plan, view).lines() {
            shell.out(crate::text::escape_controls(line));
        }
    }
    if let Some(dir) = args.out.as_deref().filter(|_| !write_out) {
        return write::clear(dir).map_err(|e| {
            Failure::step(crate::plan::Step::Write, format!("cannot remove stale outputs in {}: {e}", dir.display()))
        });
    }
    if let Some(dir) = args.out.as_deref() {
        let mut all = files.to_vec();
        all.push(("plan.json".to_string(), plan.to_json()));
        write::replace(dir, &all)
            .map_err(|e| Failure::step(crate::plan::Step::Write, format!("{}: {e}", dir.display())))?;
    }
    Ok(())
}
