//! `eas up` (SPEC §4) as a list of phases run by one [`runner`]: every plan half ([`plan`]: lock
//! and preflight; the bastion image's plan, facts and the upstream trees at once; config; the
//! overlay and the knob audit) runs before any act half ([`act`]: the lock taken, the bastion
//! image built or reused, the decided tree put in place and patched, prepare and install, verify
//! and record), in the dry run and the real run alike. A failed check is a blocker: the dry run
//! lists it, the real run stops on it before its first write.

mod act;
pub mod catalog;
pub mod cluster;
pub mod crash;
mod day_two;
pub mod doctor;
pub mod down;
mod down_image;
mod down_plan;
pub mod hf;
pub mod install;
pub mod knob_audit;
pub mod lease;
pub mod phase;
pub mod plan;
pub mod profiles;
mod prompt;
pub mod runner;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bastion::{self, ImageSettings};
use crate::config::{self, write};
use crate::error::Failure;
use crate::facts::Facts;
use crate::gather::{self, GatherOptions};
use crate::installer::command as argv;
use crate::output::Shell;
use crate::pins::{Pin, Trees};
use crate::pipeline::{PhaseId, Plan};
use crate::runtime::Interrupt;
use crate::settings::{Global, Select};
use crate::state::StateDir;
use crate::state::journal::{PinsRecord, RunInfo, State};
use crate::state::resume::Invocation;
use crate::trees::{self, Origin};
use crate::verify;
use runner::Runner;

/// Every cluster API call's deadline (a list, a get, a delete).
pub const CALL: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct UpSettings {
    /// Everything that reads, nothing that writes: print the plan
    pub dry_run: bool,
    /// With --dry-run: exit with the first blocker's code (for CI)
    pub fail_on_blockers: bool,
    /// Read nothing from Hugging Face: the models' figures come from the cache, else
    /// data/models.json, and whether the weights can be downloaded is not known
    pub offline: bool,
    /// Written keys that may go unread by the pinned trees (the knob audit warns instead)
    pub allow_unread: Vec<String>,
    pub select: Select,
    /// The installer's environment name (env/<name>/ in the EAS tree)
    pub env: String,
    /// With --dry-run: also write the generated files and plan.json here
    pub out: Option<PathBuf>,
    /// With --dry-run: `json` prints the plan (eas-plan/v1) as one JSON document on stdout
    pub output: crate::output::OutputFormat,
    /// Add each decision's source as a permalink to the plan
    pub explain: bool,
    /// Do not ask before changing the cluster (required without a terminal)
    pub yes: bool,
    /// Take over a lock left by a run that is no longer alive
    pub break_lock: bool,
    /// Run the installer even when nothing changed since the last completed run
    pub reinstall: bool,
    pub repos: Repos,
    pub image: bastion::BaseImage,
    pub gather: GatherOptions,
    /// How long a ledger snapshot is retried before the record is marked incomplete, in seconds
    pub ledger_timeout: u64,
    /// Each phase's act-half timeout: the declared ones unless `--install-timeout`,
    /// `--verify-timeout` or `--phase-timeout` set them (resolved once, conflicts refused).
    pub phase_timeouts: crate::pipeline::PhaseTimeouts,
}

/// Existing clones or mirrors to use instead of fetching (offline use).
#[derive(Debug, Clone, Default)]
pub struct Repos {
    /// An EAS clone or mirror holding the pinned commit
    pub eas_repo: Option<PathBuf>,
    /// An EI (enterprise-inference) clone or mirror holding the pinned commit
    pub ei_repo: Option<PathBuf>,
    /// An EAT (agent toolkit) clone or mirror holding the pinned commit
    pub eat_repo: Option<PathBuf>,
}

/// The bastion image for these base flags and pins.
pub fn image_args(base: &bastion::BaseImage, pins: crate::pins::Source, global: &Global) -> ImageSettings {
    ImageSettings::new(pins, base.clone(), global)
}

pub fn command(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    // `--output json` without `--dry-run` never gets here: the command line's parser refuses it.
    let result = crate::runtime::block_on(up(args, global, shell))?;
    // A dry run that failed before its plan was printed (bad input, an unreadable cluster)
    // leaves no outputs of an earlier run in `--out`: the stale plan would describe a run that is
    // not this one. A printed plan already wrote (or, on exit 2 or 3, cleared) them.
    if let (Err(f), true, Some(out)) = (&result, args.dry_run, args.out.as_deref())
        && !matches!(f, Failure::Blocked { .. })
    {
        write::clear(out)
            .map_err(|e| Failure::step("write", format!("cannot remove stale outputs in {}: {e}", out.display())))?;
    }
    result
}

pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn state_root(global: &Global) -> Result<PathBuf, Failure> {
    match &global.state_dir {
        Some(d) => Ok(d.clone()),
        None => Ok(crate::state::default_root(
            global.env.var("XDG_STATE_HOME").as_deref().map(std::ffi::OsStr::new),
            global.env.var("HOME").as_deref().map(std::ffi::OsStr::new),
        )?),
    }
}

/// The follow-up commands repeat the user's flags.
pub fn invocation(global: &Global, layer: &str, env: &str, select: &Select) -> Invocation {
    let mut g = Vec::new();
    if let Some(k) = &global.kubeconfig {
        g.extend(["--kubeconfig".to_string(), k.display().to_string()]);
    }
    if let Some(c) = &global.context {
        g.extend(["--context".to_string(), c.clone()]);
    }
    if let Some(s) = &global.state_dir {
        g.extend(["--state-dir".to_string(), s.display().to_string()]);
    }
    let mut sel = Vec::new();
    if let Some(p) = &select.profile {
        sel.extend(["--profile".to_string(), p.clone()]);
    }
    if let Some(r) = &select.git_ref {
        sel.extend(["--ref".to_string(), r.clone()]);
    }
    if let Some(m) = &select.model {
        sel.extend(["--model".to_string(), m.clone()]);
    }
    if let crate::pins::Source::Flag(p) = &select.pins {
        sel.extend(["--pins".to_string(), p.display().to_string()]);
    }
    Invocation { global: g, layer: layer.to_string(), env: env.to_string(), select: sel }
}

/// After a STOP: the other pins profiles whose overlay decides fully, each with its command.
fn way_forward(
    select: &crate::settings::Select,
    current: &str,
    mirror: &Path,
    generated: &crate::overlay::Generated,
    inv: &Invocation,
    dry_run: bool,
) -> Vec<String> {
    let Ok(pins) = select.pins.load() else { return Vec::new() };
    let tried = profiles::try_profiles(&pins, current, mirror, Some(generated));
    let command = |profile: &str| {
        let mut other = inv.clone();
        let mut sel = Vec::new();
        let mut words = inv.select.iter();
        while let Some(w) = words.next() {
            if w == "--profile" || w == "--ref" {
                words.next();
            } else {
                sel.push(w.clone());
            }
        }
        sel.extend(["--profile".to_string(), profile.to_string()]);
        other.select = sel;
        if dry_run { other.dry_run() } else { other.up() }
    };
    profiles::lines(&tried, &command)
}

/// The upstream trees resolved in the cache (or the operator's clones).
#[derive(Debug, Clone)]
pub struct Resolved {
    pub eas: trees::Resolved,
    pub ei: trees::Resolved,
    pub eat: trees::Resolved,
}

fn origin(pin: &Pin, local: &Option<PathBuf>) -> Origin {
    match local {
        Some(d) => Origin::Local(d.clone()),
        None => Origin::Remote(format!("https://github.com/{}", pin.repo.clone().unwrap_or_default())),
    }
}

fn resolve_trees(t: &Trees, repos: &Repos, cache: &Path, ca: Option<&[Vec<u8>]>) -> Result<Resolved, String> {
    let ca_file = match ca {
        Some(ders) => {
            Some(crate::net::trust::GitCaFile::write(ders).map_err(|e| format!("writing git's CA file: {e}"))?)
        }
        None => None,
    };
    let ca_path = ca_file.as_ref().map(|f| f.path());
    let one = |pin: &Pin, local: &Option<PathBuf>| {
        trees::resolve(pin, &origin(pin, local), cache, ca_path).map_err(|e| e.to_string())
    };
    Ok(Resolved {
        eas: one(&t.eas, &repos.eas_repo)?,
        ei: one(&t.ei, &repos.ei_repo)?,
        eat: one(&t.eat, &repos.eat_repo)?,
    })
}

/// `--model` is checked against the catalog at the pinned EI commit before the cluster is read.
/// The EI tree comes from `--ei-repo` or the mirror cache, and is fetched when missing (the trees
/// phase needs it anyway). When it cannot be had, the built-in candidates decide for a dry run
/// (as its config then does); a real run fails later in the trees phase, as it would have.
async fn model_before_cluster(
    model: &str,
    layer: &str,
    tree_pins: &Trees,
    args: &UpSettings,
    global: &Global,
    r: &mut Runner,
) -> Result<(), Failure> {
    let (pin, local, cache) = (tree_pins.ei.clone(), args.repos.ei_repo.clone(), trees::cache_dir(&global.env));
    let ca = global.ca_bundle.as_ref().map(|b| b.ders.clone());
    let ei = tokio::task::spawn_blocking(move || {
        let ca_file = match ca.as_deref() {
            Some(ders) => Some(crate::net::trust::GitCaFile::write(ders).map_err(|e| e.to_string())?),
            None => None,
        };
        trees::resolve(&pin, &origin(&pin, &local), &cache, ca_file.as_ref().map(|f| f.path()))
            .map_err(|e| e.to_string())
    });
    // The trees phase's plan half reads the same tree again, in its own window.
    let ei = r.plan_half(PhaseId::Trees, async { ei.await.map_err(|e| Failure::step("trees", e)) }).await?;
    let pinned = match ei {
        Ok(r) => catalog::read(&r.objects, &r.sha, &tree_pins.ei, layer)?,
        Err(_) if args.dry_run => None,
        Err(_) => return Ok(()),
    };
    catalog::check_model(model, layer, pinned.as_ref())
}

/// The EAS work tree, with EI and EAT placed under `ext/` at their pins so `init` finds them
/// (`with_ext`: a dry run decides the overlay on the EAS tree alone and runs no `init`).
fn make_work_tree(res: &Resolved, t: &Trees, dir: &Path, layer: &str, with_ext: bool) -> Result<(), String> {
    let url = |p: &Pin| format!("https://github.com/{}", p.repo.clone().unwrap_or_default());
    trees::work_tree(&res.eas, dir, Some(&url(&t.eas))).map_err(|e| e.to_string())?;
    let head = trees::head(dir).map_err(|e| e.to_string())?;
    if head != res.eas.sha {
        return Err(format!("the work tree {} is at {head}, not the pinned {}", dir.display(), res.eas.sha));
    }
    if !with_ext {
        return Ok(());
    }
    for row in &config::data::layers().layers[layer] {
        let (r, p) = match row.pin.as_str() {
            "ei" => (&res.ei, &t.ei),
            "eat" => (&res.eat, &t.eat),
            _ => continue,
        };
        trees::work_tree(r, &dir.join("ext").join(&row.dest), Some(&url(p))).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `eas up` as its list of phases: every plan half, in the order the run meets them, then, when
/// none blocked, every act half. A dry run prints the plan where the acts would begin; a real run
/// with blockers prints them all and exits with the first one's code, having written nothing to
/// the cluster.
async fn up(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let inv = invocation(global, &args.select.layer, &args.env, &args.select);
    let tree_pins = check_input(args)?;
    let mut r = runner(args, &tree_pins, interrupt);
    // --model against the EI catalog at the pinned commit: after the bad-input checks, before
    // the cluster is read.
    if let Some(model) = args.select.model.as_deref()
        && catalog::catalog_path(&args.select.layer).is_some()
    {
        model_before_cluster(model, &args.select.layer, &tree_pins, args, global, &mut r).await?;
    }
    r.plan.apply_command = crate::next_command::apply_command(&global.env.args);
    // A real run's log holds its own lines from the first phase on (the attempt's, or the
    // install's with the installer's output after them).
    if !args.dry_run {
        shell.keep_log();
    }
    let planned = match plan_halves(args, global, shell, &inv, &tree_pins, &mut r).await {
        Ok(p) => p,
        Err(f) => {
            // The attempt keeps its log: the lines printed, then the failure.
            if let Some(dir) = r.attempt.clone().filter(|_| !args.dry_run) {
                match attempt_log(&mut r, &dir, shell) {
                    Ok(()) => f.lines().iter().for_each(|l| shell.log_only(l)),
                    Err(e) => shell.warn(format!("the attempt's log was not written: {e}")),
                }
            }
            return Err(r.end_attempt(f));
        }
    };
    if args.dry_run {
        return dry_run_end(&mut r, args, global, &planned.files, shell);
    }
    if r.blocked() {
        return Err(blocked_run(&mut r, &planned, shell));
    }
    day_two::announce(&r, shell);
    // On a terminal without --yes: the plan's summary, then the question, before the first act
    // half (no lock taken, no image built, no work tree written yet).
    if !args.yes {
        let view = crate::plan_view::View { width: crate::plan_view::terminal_width(&global.env), explain: false };
        for line in crate::plan_view::summary(&r.plan, view, &crate::plan_view::Ending::DryRun) {
            shell.note(crate::text::escape_controls(&line));
        }
        let what = format!("eas up installs {} on {}", args.select.layer, planned.pre.target.context);
        prompt::ask(&what, &r.interrupt).await?;
    }
    let ready = planned.ready()?;
    let acted = act::run(args, global, shell, &inv, ready, &mut r).await;
    if let Err(f) = &acted {
        for l in f.lines() {
            shell.log_only(&l);
        }
    }
    acted
}

/// Every plan half, in the order the run meets them (`eas doctor` runs the same).
pub async fn plan_halves(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    inv: &Invocation,
    tree_pins: &Trees,
    r: &mut Runner,
) -> Result<plan::Planned, Failure> {
    let pre = plan::preflight(args, global, shell, r).await?;
    let (mut pre, facts, image, trees) = plan::gather(args, global, shell, tree_pins, pre, r).await?;
    let resolved = trees.as_ref().map(|(t, _)| t);
    let commits = day_two::commit_counts(pre.last.as_ref(), resolved).await;
    let work = pre.sd.work_dir().join("eas");
    let layer = &args.select.layer;
    let catalog = day_two::catalog_changes(pre.last.as_ref(), resolved, &work, &args.env, layer).await;
    let (decision, files, tree) =
        plan::decide(args, global, shell, inv, tree_pins, (&facts, &mut pre), trees, r).await?;
    let install = r.plan.commands.iter().find(|c| c.phase == PhaseId::Install).map(|c| c.argv.clone());
    // Against the last completed run: run_kind and since_last.
    day_two::classify(args, pre.latest.as_ref(), pre.last.as_ref(), &facts, &files, &commits, &catalog, r)?;
    // In the order the real run meets them: by phase, each phase's in the order found.
    r.plan.blockers.sort_by_key(|b| b.phase);
    Ok(plan::Planned { pre, facts, image, decision, files, tree, install: install.unwrap_or_default() })
}

/// The run's runner: a record and a plan for this selection, the effective timeouts.
pub fn runner(args: &UpSettings, tree_pins: &Trees, interrupt: Interrupt) -> Runner {
    let pins = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)];
    let info = RunInfo {
        cluster_key: String::new(),
        context: String::new(),
        layer: args.select.layer.clone(),
        env: args.env.clone(),
        pins: PinsRecord {
            profile: tree_pins.profile.clone(),
            shas: pins.into_iter().map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_default())).collect(),
        },
    };
    let mut plan = Plan::new(&args.select.layer, &args.env, &tree_pins.profile, &args.phase_timeouts);
    plan.pins_source = args.select.pins.label();
    plan.commits = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)]
        .into_iter()
        .map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_else(|| p.git_ref.clone())))
        .collect();
    Runner::new(State::new(info, &now()), plan, args.phase_timeouts.clone(), interrupt)
}

/// The dry run's end: the plan printed (and written with `--out`) whatever its exit code; 3 when
/// a refusal is among the blockers, else 4 on a STOP, else 0 (`--fail-on-blockers`: the first
/// blocker's code). On exit 2 or 3, `--out` holds none of the output files.
fn dry_run_end(
    r: &mut Runner,
    args: &UpSettings,
    global: &Global,
    files: &[(String, String)],
    shell: &Shell,
) -> Result<(), Failure> {
    let code = crate::pipeline::dry_run_exit(&r.plan.blockers, args.fail_on_blockers);
    r.plan.exit_code = code;
    print_plan(&r.plan, args, global, files, !matches!(code, 2 | 3), shell)?;
    if code == 0 {
        return Ok(());
    }
    Err(crate::pipeline::blocked(&r.plan.blockers, code))
}

/// A real run with blockers: every one printed, the attempt recorded beside the state (never in
/// place of an earlier install's record), and the first blocker's exit code. Nothing was
/// written to the cluster.
fn blocked_run(r: &mut Runner, planned: &plan::Planned, shell: &Shell) -> Failure {
    let code = r.plan.blockers[0].exit_code;
    r.plan.exit_code = code;
    let lock_held = r.plan.blockers.iter().any(|b| b.phase == PhaseId::Lock);
    shell.note(format!(
        "blockers: {} (the run stops before its first write; `eas up --dry-run` lists the same)",
        r.plan.blockers.len()
    ));
    // Another run's lock: its directory is not this run's to write.
    if !lock_held && let Err(e) = record_attempt(r, &planned.pre.sd, &planned.facts, &planned.files, shell) {
        shell.warn(format!("the attempt was not recorded: {e}"));
    }
    crate::pipeline::blocked(&r.plan.blockers, code)
}

/// The directory beside `state.json` that holds the latest attempt: a run that stopped before
/// its install phase began (a blocked run's `attempt.json`, facts, plan and choices; its journal
/// `state.json`).
pub use crate::state::records::ATTEMPT;

/// The attempt's log, `<attempt>/logs/up-<time>.log`: every line the run printed so far, and
/// each later one; the record names it.
pub fn attempt_log(r: &mut Runner, dir: &std::path::Path, shell: &Shell) -> std::io::Result<()> {
    crate::state::journal::create_private_dir(dir)?;
    let logs = dir.join("logs");
    crate::state::journal::create_private_dir(&logs)?;
    let log = logs.join(format!("up-{}.log", now().replace(':', "")));
    shell.log_to(&log)?;
    r.state.log_path = Some(log);
    Ok(())
}

/// The attempt's record: `attempt.json` (phase, exit code, cause, end) with its facts, plan and
/// choices beside it, in `<state>/attempt/`.
fn record_attempt(
    r: &mut Runner,
    sd: &StateDir,
    facts: &Facts,
    files: &[(String, String)],
    shell: &Shell,
) -> std::io::Result<()> {
    let dir = sd.dir().join(ATTEMPT);
    // Its log: the lines the run printed, then its blockers.
    attempt_log(r, &dir, shell)?;
    let first = &r.plan.blockers[0];
    let attempt = serde_json::json!({
        "phase": first.phase, "exit_code": first.exit_code, "cause": first.cause, "finished_at": now(),
        "blockers": r.plan.blockers,
    });
    let write = |name: &str, text: &str| crate::state::journal::write_atomic(&dir.join(name), text.as_bytes());
    for b in &r.plan.blockers {
        shell.log_only(&format!("blocker ({}): {}; fix: {} (exit {})", b.phase.name(), b.cause, b.fix, b.exit_code));
    }
    write("facts.json", &serde_json::to_string_pretty(facts).expect("json"))?;
    write("plan.json", &r.plan.to_json())?;
    let choices = files.iter().find(|(n, _)| n == "choices.txt").map(|(_, t)| t.as_str()).unwrap_or_default();
    write("choices.txt", choices)?;
    write("attempt.json", &serde_json::to_string_pretty(&attempt).expect("json"))?;
    let mut journal = r.state.clone();
    journal.exit_code = Some(first.exit_code);
    journal.finished = Some(now());
    write(crate::state::journal::FILE, &serde_json::to_string_pretty(&journal).expect("json"))
}

/// Bad input is found before anything else happens.
fn check_input(args: &UpSettings) -> Result<Trees, Failure> {
    let layer = &args.select.layer;
    let tree_pins = config::select_trees(&args.select)?;
    // The EI catalog at the pinned commit decides --model later (read after the trees phase).
    let with_catalog = catalog::catalog_path(layer).is_some();
    config::rules::selection(layer, args.select.model.as_deref(), with_catalog).map_err(|r| match r {
        config::rules::Rejection::BadInput { cause, hint } => Failure::bad_input(cause, hint),
        config::rules::Rejection::Refused(reasons) => Failure::Refused(reasons),
    })?;
    argv::init_argv(layer, &args.env)?;
    // Without a terminal the question cannot be asked: refused before anything is read.
    if !args.dry_run && !args.yes && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure::bad_input(
            "eas up changes the cluster and no terminal is attached to confirm",
            "pass --yes, or run `eas up --dry-run` to see the plan first",
        ));
    }
    Ok(tree_pins)
}

/// The prefix of a real run's scratch work trees in the state directory's `work/`.
pub const NEXT: &str = "eas.next-";

/// The directory the run's EAS work tree is made in: the system's temporary directory for a dry
/// run (it writes nothing of its own), the state directory's work directory for a real run (the
/// act moves it into place with a rename). The act removes what a killed run left there, once it
/// holds the lock.
fn scratch_dir(args: &UpSettings, pre: &plan::Preflight) -> Result<tempfile::TempDir, Failure> {
    if args.dry_run {
        tempfile::Builder::new().prefix("eas-plan-").tempdir()
    } else {
        let work = pre.sd.work_dir();
        std::fs::create_dir_all(&work).and_then(|()| tempfile::Builder::new().prefix(NEXT).tempdir_in(&work))
    }
    .map_err(|e| Failure::step("trees", e))
}

/// The inputs of each lasting phase, hashed: a later run skips the phase when they match.
fn inputs_hashes(
    state: &State,
    files: &[(String, String)],
    install: &[String],
    image: &str,
) -> BTreeMap<PhaseId, String> {
    use crate::state::inputs_hash;
    let shas: Vec<String> = state.pins.shas.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let trees = inputs_hash(&shas);
    let overlay = inputs_hash(&[trees.clone(), inputs_hash(&state.overlay)]);
    let texts: Vec<String> = files.iter().map(|(n, t)| format!("{n}\n{t}")).collect();
    let prepare = inputs_hash(&[overlay.clone(), inputs_hash(&texts), state.env.clone(), state.layer.clone()]);
    let mut inst = vec![prepare.clone(), image.to_string()];
    inst.extend(install.iter().cloned());
    [
        (PhaseId::Trees, trees),
        (PhaseId::Overlay, overlay),
        (PhaseId::Prepare, prepare),
        (PhaseId::Install, inputs_hash(&inst)),
    ]
    .into_iter()
    .collect()
}

fn expected_models(d: &config::Decision) -> Option<Vec<String>> {
    d.overrides.iter().find_map(|(k, v)| match (k, v) {
        (&"agent_toolkit_models", config::rules::Value::List(l)) => Some(l.clone()),
        (&"llm_services_deploy_models", config::rules::Value::Bool(on)) => Some(if *on {
            d.model_edits.iter().filter(|e| e.autodeploy).map(|e| e.name.clone()).collect()
        } else {
            vec![]
        }),
        _ => None,
    })
}

/// The generator's model line (`fact -> choice`): names the fit decision when no model fits.
fn model_decision(d: &config::Decision) -> Option<String> {
    d.choices.iter().find(|c| c.choice.starts_with("model:")).map(|c| format!("{} -> {}", c.fact, c.choice))
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
        let view =
            crate::plan_view::View { width: crate::plan_view::terminal_width(&global.env), explain: args.explain };
        for line in crate::plan_view::render(plan, view).lines() {
            shell.out(crate::text::escape_controls(line));
        }
    }
    if let Some(dir) = args.out.as_deref().filter(|_| !write_out) {
        return write::clear(dir)
            .map_err(|e| Failure::step("write", format!("cannot remove stale outputs in {}: {e}", dir.display())));
    }
    if let Some(dir) = args.out.as_deref() {
        let mut all = files.to_vec();
        all.push(("plan.json".to_string(), plan.to_json()));
        write::replace(dir, &all).map_err(|e| Failure::step("write", format!("{}: {e}", dir.display())))?;
    }
    Ok(())
}

/// The plan's summary, filled in with what happened, closes a real run (on stderr, as its log).
fn summary(plan: &Plan, state: &State, d: &config::Decision, sd: &StateDir, global: &Global, shell: &Shell) {
    shell.phase("done", format!("{} installed on {} (env {})", state.layer, state.context, state.env));
    let log = state.log_path.as_ref().map(|l| l.display().to_string());
    let state_file = sd.state_file().display().to_string();
    let view = crate::plan_view::View { width: crate::plan_view::terminal_width(&global.env), explain: false };
    let ending = crate::plan_view::Ending::Installed { log: log.as_deref(), state: &state_file };
    for line in crate::plan_view::summary(plan, view, &ending) {
        shell.note(crate::text::escape_controls(&line));
    }
    if let Some(models) = expected_models(d) {
        for m in models {
            let base = verify::kserve::vllm().proxy_base(verify::NAMESPACE, "http", &m);
            shell.note(format!("  model {m} answers at {base}/v1"));
        }
    }
}

#[derive(Debug, Clone)]
pub struct VerifySettings {
    /// How long to wait for the model servers, in seconds
    pub timeout: u64,
    /// How long to wait for every device node's resource and plugin pod, in seconds
    pub devices_timeout: u64,
    /// `json`: one document (eas-verify/v1) on stdout, passed or not
    pub output: crate::output::OutputFormat,
}

/// What a run expects verification to find, kept beside its state.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Expected {
    /// The device nodes the run's facts showed: node -> the device resources it advertised.
    #[serde(default)]
    pub device_nodes: BTreeMap<String, Vec<String>>,
    /// The model servers the run deployed (an empty list: none fits).
    pub models: Option<Vec<String>>,
    /// The generator's model decision, named when no model fits.
    #[serde(default)]
    pub fit: Option<String>,
}

impl Expected {
    pub fn expect(&self) -> verify::Expect {
        let models = match &self.models {
            Some(m) if m.is_empty() => verify::Models::NoneFits(self.fit.clone().unwrap_or_else(|| "-".into())),
            Some(m) => verify::Models::Named(m.clone()),
            None => verify::Models::Found,
        };
        verify::Expect { device_nodes: self.device_nodes.clone(), models }
    }
}

pub const EXPECTED_FILE: &str = "expected.json";

/// `eas verify`: the devices node by node, then what the recorded run deployed. Without a
/// record, the devices alone, then exit 5: there is no model server eas installed.
/// `eas verify`'s checks against what the recorded run expects (devices only, then "nothing
/// installed", when no run is recorded): one line per passing check, or the failure.
pub fn verify_recorded(args: &VerifySettings, global: &Global, shell: &Shell) -> Result<Vec<String>, Failure> {
    crate::runtime::block_on_interruptible(async {
        let target = gather::target(global, CALL).await?;
        let key = cluster::cluster_key(&target.client, CALL).await.map_err(|e| Failure::step("verify", e))?;
        let sd = StateDir::new(&state_root(global)?, &key)?;
        let file = sd.dir().join(EXPECTED_FILE);
        let recorded: Option<Expected> =
            crate::bounded::read(&file, crate::bounded::Kind::State).ok().and_then(|t| serde_json::from_slice(&t).ok());
        let exp = match recorded {
            Some(e) => e.expect(),
            None => verify::Expect {
                device_nodes: BTreeMap::new(),
                models: verify::Models::NotInstalled(sd.dir().display().to_string()),
            },
        };
        let t = verify::Timeouts {
            models: Duration::from_secs(args.timeout),
            devices: Duration::from_secs(args.devices_timeout),
            ..verify::Timeouts::default()
        };
        verify::verify(&target.client, &exp, &t, shell).await
    })
}
