//! `eas up`: the list of phases runs in the domain (`crate::pipeline`); a dry run's plan comes back
//! here to be printed (text, or the one eas-plan/v1 document), written to `--out`, and turned
//! into the exit code: 3 when a refusal is among the blockers, else 4 on a STOP, else 0
//! (`--fail-on-blockers`: the first blocker's code). `--out` gets plan.json, the plan's text
//! (plan.txt) and the generated files; a refused plan (exit 3) only plan.json and plan.txt, the
//! plan to attach to a ticket; exit 2 (no plan) nothing, and a dry run that failed before its
//! plan was printed leaves none of an earlier run's there either. eas says which. `--plan DIR`
//! reads the saved plan here and runs with its selection (`crate::plan::saved`).

use std::path::Path;

use crate::config::write;
use crate::error::Failure;
use crate::output::Shell;
use crate::pipeline::settings::UpSettings;
use crate::pipeline::up::Ran;
use crate::plan::Plan;
use crate::settings::Global;

pub fn run(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let applying;
    let args = match args.plan.as_deref() {
        Some(dir) => match saved_plan(args, dir) {
            Ok(a) => {
                applying = a;
                &applying
            }
            Err(f) => return Err(without_stale_outputs(args.dry_run, args.out.as_deref(), f, shell)),
        },
        None => args,
    };
    // `--output json` without `--dry-run` never gets here: the command line's parser refuses it.
    let result = match crate::pipeline::up::run(args, global, shell) {
        Ok(Ran::Acted) => Ok(()),
        Ok(Ran::Planned { plan, files, kind }) => return dry_run_end(&plan, kind, args, global, &files, shell),
        Err(f) => Err(f),
    };
    // The stale plan would describe a run that is not this one.
    result.map_err(|f| without_stale_outputs(args.dry_run, args.out.as_deref(), f, shell))
}

/// `--plan DIR`: the saved plan read (bad input when it cannot be, a refusal when it has
/// blockers), and the run's selection its own: layer, environment, profile or ref, model, pins
/// file and fit document. The other inputs (node files, mirrors, base image, timeouts) are the
/// command line's; they count only through what the plan holds.
fn saved_plan(args: &UpSettings, dir: &Path) -> Result<UpSettings, Failure> {
    let saved = crate::plan::saved::load(dir)?;
    let refused = |name: &str| crate::config::data::layers().refused.contains_key(name);
    let layer = crate::settings::Layer::parse(saved.chosen("layer").unwrap_or_default(), refused).map_err(|e| {
        Failure::bad_input(
            format!("{}: {e}", saved.file.display()),
            "save the plan again with `eas up --dry-run --out DIR`",
        )
    })?;
    let owned = |name: &str| saved.chosen(name).map(str::to_string);
    let select = crate::settings::Select {
        layer,
        profile: owned("profile"),
        git_ref: owned("ref"),
        model: owned("model"),
        // Picked again as reviewed: a plan saved with --repick applies with it.
        repick: saved.selection.repick,
        pins: owned("pins").map_or(crate::pins::Source::Builtin, |p| crate::pins::Source::Flag(p.into())),
        fit: owned("fit").map(Into::into),
    };
    let env = owned("env").unwrap_or_default();
    Ok(UpSettings { select, env, saved: Some(std::sync::Arc::new(saved)), ..args.clone() })
}

/// A dry run that failed before its plan was printed (bad input, an unreadable cluster) leaves
/// none of an earlier run's outputs in `--out`, and says so: the stale plan would describe a run
/// that is not this one. A printed plan already wrote (or, on exit 2, cleared) them.
pub fn without_stale_outputs(dry_run: bool, out: Option<&Path>, f: Failure, shell: &Shell) -> Failure {
    match (dry_run, out) {
        (true, Some(out)) if !matches!(f, Failure::Blocked { .. }) => match write::clear(out) {
            Ok(()) => {
                // Said after the cause: in bad input's hint (the cause stays the first line).
                let said = format!("nothing was written to {} (no plan was made)", out.display());
                match f {
                    Failure::BadInput { cause, hint } => {
                        let hint = Some(hint.map_or_else(|| said.clone(), |h| format!("{h}; {said}")));
                        Failure::BadInput { cause, hint }
                    }
                    f => {
                        shell.note(said);
                        f
                    }
                }
            }
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
    plan: &Plan,
    kind: Option<crate::plan::Kind>,
    args: &UpSettings,
    global: &Global,
    files: &[(String, String)],
    shell: &Shell,
) -> Result<(), Failure> {
    let text = plan_text(plan, args, global);
    if args.output.is_json() {
        // serde_json escapes control characters itself.
        shell.document(serde_json::to_value(plan).expect("the plan serialises"));
    } else {
        text.lines().for_each(|line| shell.out(line));
    }
    if let Some(dir) = args.out.as_deref() {
        write_out(dir, plan, &text, files, kind, shell)?;
    }
    match kind {
        None => Ok(()),
        Some(kind) => Err(crate::error::Failure::blocked(plan.blockers(), kind)),
    }
}

/// The plan as text, as printed (control characters escaped).
fn plan_text(plan: &Plan, args: &UpSettings, global: &Global) -> String {
    let view = crate::pipeline::plan_view::View {
        width: crate::pipeline::plan_view::terminal_width(&global.env),
        explain: args.explain,
    };
    let lines = crate::pipeline::plan_view::render(plan, view);
    lines.lines().map(|l| crate::text::escape_controls(l) + "\n").collect()
}

/// `--out`: plan.json and plan.txt, and the generated files unless the plan was refused (a
/// refused plan is one to attach to a ticket, never to install); nothing on exit 2, where the
/// outputs of an earlier run are removed. Says what it wrote.
fn write_out(
    dir: &Path,
    plan: &Plan,
    text: &str,
    files: &[(String, String)],
    kind: Option<crate::plan::Kind>,
    shell: &Shell,
) -> Result<(), Failure> {
    use crate::plan::Kind;
    let failed = |e: std::io::Error| Failure::step(crate::plan::Step::Write, format!("{}: {e}", dir.display()));
    if kind == Some(Kind::BadInput) {
        write::clear(dir).map_err(|e| {
            Failure::step(crate::plan::Step::Write, format!("cannot remove stale outputs in {}: {e}", dir.display()))
        })?;
        shell.note(format!("nothing written to {}: the plan's first blocker is bad input", dir.display()));
        return Ok(());
    }
    let mut all = vec![("plan.json".to_string(), plan.to_json()), ("plan.txt".to_string(), text.to_string())];
    let refused = kind == Some(Kind::Refusal);
    if !refused {
        all.extend(files.iter().cloned());
    }
    write::replace(dir, &all).map_err(failed)?;
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    let why = if refused { " (the plan is refused: none of the installer's files)" } else { "" };
    shell.note(format!("wrote {} to {}{why}", names.join(", "), dir.display()));
    Ok(())
}
