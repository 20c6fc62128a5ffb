//! `eas up` (SPEC §4): lock, preflight; bastion image, facts and upstream trees at once;
//! config; overlay; prepare; install; verify; record. `--dry-run` is the same pipeline, stopped
//! before the first phase that writes, printing the plan.

pub mod catalog;
pub mod cluster;
pub mod crash;
pub mod doctor;
pub mod down;
pub mod install;
pub mod knob_audit;
pub mod phase;
pub mod profiles;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bastion::{self, ImageSettings, run::Interrupt};
use crate::config::{self, render, write};
use crate::error::Failure;
use crate::facts::Facts;
use crate::gather::{self, GatherOptions};
use crate::installer::command as argv;
use crate::output::Shell;
use crate::pins::{Pin, Trees};
use crate::pipeline::{FactsSummary, ImageAction, ImagePlan, Missing, PhaseId, Plan, PlanDecision, PlannedCommand};
use crate::settings::{Global, Select};
use crate::state::journal::{PinsRecord, RunInfo, State, Status};
use crate::state::ledger::Ledger;
use crate::state::resume::{Invocation, next_for, plan_resume};
use crate::state::{StateDir, lock};
use crate::trees::{self, Origin};
use crate::verify;
use install::redactor;

/// Every cluster API call's deadline (a list, a get, a delete).
pub const CALL: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct UpSettings {
    /// Everything that reads, nothing that writes: print the plan
    pub dry_run: bool,
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
    pub repos: Repos,
    pub image: bastion::BaseImage,
    pub gather: GatherOptions,
    /// How long the installer may run, in seconds
    pub install_timeout: u64,
    /// How long verification may wait for the model servers, in seconds
    pub verify_timeout: u64,
    /// How long a ledger snapshot is retried before the record is marked incomplete, in seconds
    pub ledger_timeout: u64,
    /// Phase timeouts (the declared ones unless shortened).
    pub phase_timeouts: phase::PhaseTimeouts,
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
pub fn image_args(base: &bastion::BaseImage, pins: Option<PathBuf>, global: &Global) -> ImageSettings {
    ImageSettings::new(pins, base.clone(), global)
}

pub fn command(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    if args.output.is_json() && !args.dry_run {
        return Err(Failure::bad_input(
            "--output json prints a plan, and only a dry run has one",
            "add --dry-run (a real run reports on stderr and records its state)",
        ));
    }
    let result = crate::runtime::block_on(up(args, global, shell))?;
    dry_run_outputs(args, result)
}

/// A dry run that fails leaves no outputs of an earlier run in `--out` (as `eas config`): the
/// stale plan would describe a run that is not this one. Files eas does not write stay. An
/// overlay STOP is the exception: its plan was written by this run, and its overlay decisions are
/// what a maintainer regenerates the patch from (the smoke's decision table reads them).
fn dry_run_outputs(args: &UpSettings, result: Result<(), Failure>) -> Result<(), Failure> {
    match (&result, args.dry_run, args.out.as_deref()) {
        (Err(Failure::OverlayStop(_)), true, Some(_)) => result,
        (Err(_), true, Some(out)) => {
            write::clear(out).map_err(|e| {
                Failure::step("write", format!("cannot remove stale outputs in {}: {e}", out.display()))
            })?;
            result
        }
        _ => result,
    }
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
    if let Some(p) = &select.pins {
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
    let Ok(pins) = crate::pins::Pins::load(select.pins.as_deref()) else { return Vec::new() };
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
struct Resolved {
    eas: trees::Resolved,
    ei: trees::Resolved,
    eat: trees::Resolved,
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
    interrupt: &Interrupt,
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
    let ei = phase::run(PhaseId::Trees, &args.phase_timeouts, interrupt, async {
        ei.await.map_err(|e| Failure::step("trees", e))
    })
    .await?;
    let pinned = match ei {
        Ok(r) => catalog::read(&r.objects, &r.sha, &tree_pins.ei, layer)?,
        Err(_) if args.dry_run => None,
        Err(_) => return Ok(()),
    };
    catalog::check_model(model, layer, pinned.as_ref())
}

/// The EAS work tree, with EI and EAT placed under `ext/` at their pins so `init` finds them.
fn make_work_tree(res: &Resolved, t: &Trees, dir: &Path, layer: &str) -> Result<(), String> {
    let url = |p: &Pin| format!("https://github.com/{}", p.repo.clone().unwrap_or_default());
    trees::work_tree(&res.eas, dir, Some(&url(&t.eas))).map_err(|e| e.to_string())?;
    let head = trees::head(dir).map_err(|e| e.to_string())?;
    if head != res.eas.sha {
        return Err(format!("the work tree {} is at {head}, not the pinned {}", dir.display(), res.eas.sha));
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

async fn up(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let layer = args.select.layer.clone();
    let inv = invocation(global, &layer, &args.env, &args.select);
    // Bad input is found before anything else happens.
    let tree_pins = config::select_trees(&args.select)?;
    // The EI catalog at the pinned commit decides --model later (read after the trees phase).
    let with_catalog = catalog::catalog_path(&layer).is_some();
    config::rules::selection(&layer, args.select.model.as_deref(), with_catalog).map_err(|r| match r {
        config::rules::Rejection::BadInput { cause, hint } => Failure::bad_input(cause, hint),
        config::rules::Rejection::Refused(reasons) => Failure::Refused(reasons),
    })?;
    argv::init_argv(&layer, &args.env)?;
    if !args.dry_run && !args.yes && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure::bad_input(
            "eas up changes the cluster and no terminal is attached to confirm",
            "pass --yes, or run `eas up --dry-run` to see the plan first",
        ));
    }

    if let (Some(model), true) = (args.select.model.as_deref(), with_catalog) {
        model_before_cluster(model, &layer, &tree_pins, args, global, &interrupt).await?;
    }

    // 1. Lock and preflight.
    shell.phase("preflight", "reading the cluster's identity");
    let t = &args.phase_timeouts;
    let (target, key) = phase::run(PhaseId::Preflight, t, &interrupt, async {
        let target = gather::target(global, CALL).await?;
        let key = cluster::cluster_key(&target.client, CALL)
            .await
            .map_err(|e| Failure::step_next("preflight", e, "check the API server (`eas doctor`)"))?;
        Ok((target, key))
    })
    .await?;
    let sd = StateDir::new(&state_root(global)?, &key)?;
    let mut dead = None;
    let _lock = if args.dry_run {
        if let Some(found) = lock::inspect(&sd.lock_file())? {
            shell.warn(format!("the lock is {found} (a dry run does not take it)"));
        }
        None
    } else {
        crate::state::journal::create_private_dir(sd.dir())
            .map_err(|e| Failure::step("lock", format!("{}: {e}", sd.dir().display())))?;
        dead = crash::dead_holder(&sd.lock_file(), args.break_lock);
        Some(lock::acquire(&sd.lock_file(), "eas up", &now(), args.break_lock)?)
    };
    let prev = State::load(&sd.state_file())?;
    if let Some(p) = &prev
        && let Some(next) = next_for(p, &inv)
        && !args.dry_run
    {
        shell.note(format!("the previous run did not finish ({next}); resuming: the installer is idempotent"));
    }
    let docker = phase::run(PhaseId::Preflight, t, &interrupt, async {
        let docker = match bastion::image::connect(&global.env).await {
            Ok(d) => Some(d),
            // A dry run still prints everything else, and names the step that needs Docker.
            Err(e) if args.dry_run => {
                shell.warn(format!("no Docker Engine: {e}; the plan cannot name the bastion image"));
                None
            }
            Err(e) => {
                return Err(Failure::step_next(
                    "preflight",
                    e,
                    "start a Docker Engine (scripts/docker-up.sh) or set DOCKER_HOST",
                ));
            }
        };
        tokio::task::spawn_blocking(|| trees::git(None, &["--version"], Duration::from_secs(10)))
            .await
            .map_err(|e| Failure::step("preflight", e))?
            .map_err(|e| Failure::step_next("preflight", e, "install git"))?;
        Ok(docker)
    })
    .await?;
    if let (Some(holder), Some(d)) = (&dead, &docker) {
        crash::reap(d, holder, shell).await?;
    }

    let mut plan = Plan::new(&layer, &args.env, &tree_pins.profile);
    plan.commits = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)]
        .into_iter()
        .map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_else(|| p.git_ref.clone())))
        .collect();
    let mut state = State::new(
        RunInfo {
            cluster_key: key.clone(),
            context: target.context.clone(),
            layer: layer.clone(),
            env: args.env.clone(),
            pins: PinsRecord {
                profile: tree_pins.profile.clone(),
                shas: [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)]
                    .into_iter()
                    .map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_default()))
                    .collect(),
            },
        },
        &now(),
    );
    if let Some(p) = &prev {
        state.ledger = p.ledger.clone();
    }
    let save = |s: &State| -> Result<(), Failure> {
        if args.dry_run { Ok(()) } else { s.save(&sd.state_file()).map_err(Failure::from) }
    };
    for p in [PhaseId::Lock, PhaseId::Preflight] {
        state.begin(p, None, &now());
        state.finish(p, Status::Done, None, &now());
    }
    save(&state)?;

    // 2. Bastion image, facts and trees, concurrently.
    shell.phase("bastion", "building or reusing the pinned bastion image");
    shell.phase("facts", format!("gathering facts from {} ({})", target.context, target.server));
    shell.phase("trees", "fetching EAS, EI and EAT at their pinned commits");
    let image_args = image_args(&args.image, args.select.pins.clone(), global);
    let image = async {
        match &docker {
            None => Err(bastion::BastionError::Input("no Docker Engine answers (scripts/docker-up.sh)".into())),
            Some(d) if args.dry_run => {
                bastion::plan_image(d, &image_args).await.map(|(tag, exists)| (tag, exists, None))
            }
            Some(d) => bastion::prepare(d, &image_args, false, false, shell, &interrupt)
                .await
                .map(|p| (p.tag.clone(), p.reused, Some(p))),
        }
    };
    let facts = gather::collect(&target, &args.gather, CALL, &global.env, shell);
    // The overlay is decided on a scratch clone of EAS (no checkout: the decider reads through
    // git only); it is made here, while the facts are read.
    let scratch = tempfile::Builder::new().prefix("eas-plan-").tempdir().map_err(|e| Failure::step("overlay", e))?;
    let scratch_tree = scratch.path().join("eas");
    let (tp, repos, cache, st) =
        (tree_pins.clone(), args.repos.clone(), trees::cache_dir(&global.env), scratch_tree.clone());
    let ca = global.ca_bundle.as_ref().map(|b| b.ders.clone());
    let resolved = tokio::task::spawn_blocking(move || {
        resolve_trees(&tp, &repos, &cache, ca.as_deref()).map(|r| {
            let made = trees::scratch_clone(&r.eas, &st).map_err(|e| e.to_string());
            (r, made)
        })
    });
    let waiting = shell.spinner("waiting for the bastion image, the facts and the trees");
    let (image, facts, resolved) = tokio::select! {
        r = async {
            tokio::join!(
                phase::limit(PhaseId::Bastion, t, image),
                phase::limit(PhaseId::Facts, t, facts),
                phase::limit(PhaseId::Trees, t, resolved)
            )
        } => r,
        _ = interrupt.graceful.cancelled() => {
            waiting.finish_and_clear();
            return interrupted(&mut state, &save);
        }
    };
    waiting.finish_and_clear();
    let (image, resolved) = (image?, resolved?);
    let facts: Facts = facts??;
    let facts_hash = crate::state::hash_json(&facts);
    state.facts_hash = Some(facts_hash.clone());
    plan.facts = Some(FactsSummary::new(&facts, &facts_hash));
    let prepared = match image {
        Ok((tag, exists, prepared)) => {
            plan.image = Some(ImagePlan { tag, action: if exists { ImageAction::Reuse } else { ImageAction::Build } });
            prepared
        }
        Err(e) if args.dry_run => {
            plan.unknown.push(Missing { phase: PhaseId::Bastion, reason: e.to_string() });
            None
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(p) = &prepared {
        state.bastion_image = Some(format!("{} ({})", p.tag, p.id));
    }
    let (resolved, scratch_made) = match resolved.map_err(|e| e.to_string()).and_then(|r| r) {
        Ok((r, made)) => (Some(r), Some(made)),
        Err(e) if args.dry_run => {
            plan.unknown.push(Missing { phase: PhaseId::Trees, reason: e });
            (None, None)
        }
        Err(e) => {
            return Err(Failure::step_next(
                "trees",
                e,
                "check network access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo",
            ));
        }
    };
    for p in [PhaseId::Bastion, PhaseId::Facts, PhaseId::Trees] {
        state.begin(p, None, &now());
        state.finish(p, Status::Done, None, &now());
    }

    // 3. Config: a refusal stops here, before anything reaches the cluster. The models are
    // decided against the catalog `init` will copy, read at the pinned EI commit.
    let pinned_catalog = match &resolved {
        Some(r) => catalog::read(&r.ei.objects, &r.ei.sha, &tree_pins.ei, &layer)?,
        None => None,
    };
    match &pinned_catalog {
        Some(c) => shell.note(format!("model catalog: {}", c.describe())),
        None => shell.note("model catalog: not read (no trees); the built-in candidates (data/models.json) decide"),
    }
    let decision = config::generate_with(&facts, &args.select, pinned_catalog.as_ref())?;
    for w in &decision.warnings {
        shell.warn(w);
    }
    crate::plan_data::fill_decisions(&mut plan, &decision);
    state.decisions = decision.choices.iter().map(|c| render::choice_line(c, false)).collect();
    let files = render::files(&decision);
    state.begin(PhaseId::Config, Some(crate::state::hash_json(&state.decisions)), &now());
    state.finish(PhaseId::Config, Status::Done, None, &now());

    // 4. Overlay: decided on a scratch work tree; a real run applies it to the run's own tree.
    let work = sd.work_dir().join("eas");
    let generated = crate::overlay::Generated::from_decision(&decision, &facts);
    if let Some(r) = &resolved {
        scratch_made.unwrap_or(Ok(())).map_err(|e| Failure::step("trees", e))?;
        let op = crate::overlay::decide(&scratch_tree, &r.eas.sha, Some(&generated))?;
        plan.overlay = crate::plan_data::patches(&op);
        state.overlay = op.decisions.iter().map(|d| d.line(false)).collect();
        if op.stops().count() > 0 {
            if args.dry_run {
                print_plan(&plan, args, global, &files)?;
            }
            let mut lines = op.stop_lines();
            lines.extend(way_forward(&args.select, &tree_pins.profile, &r.eas.objects, &generated, &inv, args.dry_run));
            let f = Failure::OverlayStop(lines);
            state.finish(PhaseId::Overlay, Status::Failed, Some(f.to_string()), &now());
            state.exit_code = Some(f.exit_code());
            save(&state)?;
            return Err(f);
        }
        // The knob audit: each key written must be read at the pinned commits (or by a patch).
        let audited = [("eas", &tree_pins.eas, &r.eas), ("ei", &tree_pins.ei, &r.ei), ("eat", &tree_pins.eat, &r.eat)]
            .map(|(name, pin, t)| knob_audit::Tree {
                name,
                repo: pin.repo.clone().unwrap_or_default(),
                objects: t.objects.as_path(),
                sha: t.sha.as_str(),
            });
        let audit = knob_audit::run(&audited, &decision, &op, &args.allow_unread)?;
        for w in &audit.warnings {
            shell.warn(w);
        }
        plan.decisions.extend(audit.lines.iter().map(|l| {
            let (fact, choice) = l.split_once(" -> ").unwrap_or((l.as_str(), ""));
            let source = "knob audit: git grep at the pinned commits".to_string();
            PlanDecision { fact: format!("knob {fact}"), choice: choice.to_string(), permalink: source.clone(), source }
        }));
        plan.warnings.extend(audit.warnings.iter().cloned());
        if !audit.refusals.is_empty() {
            if args.dry_run {
                print_plan(&plan, args, global, &files)?;
            }
            let f = Failure::Refused(audit.refusals.clone());
            state.finish(PhaseId::Overlay, Status::Failed, Some(f.to_string()), &now());
            state.exit_code = Some(f.exit_code());
            save(&state)?;
            return Err(f);
        }
    }
    let overrides_in_tree = format!("env/{}/eas-overrides.yaml", args.env);
    let install = argv::install_argv(&layer, &args.env, &format!("{}/{overrides_in_tree}", bastion::TREE_TARGET))?;
    plan.commands = vec![
        PlannedCommand { phase: PhaseId::Prepare, argv: argv::init_argv(&layer, &args.env)? },
        PlannedCommand { phase: PhaseId::Install, argv: install.clone() },
    ];
    state.installer_command = redactor(&global.env).redact_argv(&install);
    if args.dry_run {
        print_plan(&plan, args, global, &files)?;
        return Ok(());
    }
    let resolved = resolved.expect("trees resolve in a real run");
    let prepared = prepared.expect("the image is prepared in a real run");

    // Resume: the lasting phases are skipped when they finished with the same inputs.
    let inputs = inputs_hashes(&state, &files, &install, &prepared.tag);
    let resume = plan_resume(prev.as_ref(), &inputs);
    let skipped = resume.skipped();
    if let Some(p) = &prev {
        state.carry_over(p, &skipped);
    }
    let installed = skipped.contains(&PhaseId::Install) && work.join("env").join(&args.env).exists();
    if installed {
        shell.phase("resume", "install finished earlier with the same inputs: going on to verify");
    } else {
        state.begin(PhaseId::Trees, inputs.get(&PhaseId::Trees).cloned(), &now());
        make_work_tree(&resolved, &tree_pins, &work, &layer).map_err(|e| Failure::step("trees", e))?;
        state.finish(PhaseId::Trees, Status::Done, None, &now());
        state.begin(PhaseId::Overlay, inputs.get(&PhaseId::Overlay).cloned(), &now());
        save(&state)?;
        let applied = crate::overlay::decide(&work, &resolved.eas.sha, Some(&generated))
            .and_then(|op| crate::overlay::apply(&op).map(|_| ()));
        if let Err(f) = applied {
            state.finish(PhaseId::Overlay, Status::Failed, Some(f.to_string()), &now());
            state.exit_code = Some(f.exit_code());
            save(&state)?;
            return Err(f);
        }
        state.finish(PhaseId::Overlay, Status::Done, None, &now());
    }

    // 5-6. Prepare and install in the bastion, the ledger around them.
    let docker = docker.expect("a real run has a Docker Engine");
    let ctx = install::Ctx { docker: &docker, image: &prepared.tag, tree: &work, global, shell, interrupt: &interrupt };
    // The ledger fails closed: the `before` is saved before the installer runs, and a record
    // left pending (this run's, or a dead run's) is completed from the cluster afterwards.
    let ledger_deadline = Duration::from_secs(args.ledger_timeout);
    let result = if installed {
        Ok(())
    } else {
        let before = cluster::snapshot_within(&target.client, CALL, ledger_deadline).await.map_err(|e| {
            Failure::step_next("ledger", e, "check the API server (`eas doctor`); nothing was installed")
        })?;
        state.ledger = Ledger::begin(prev.as_ref().map(|p| &p.ledger), &before);
        save(&state)?;
        install::prepare_and_install(&ctx, &mut state, &sd, &files, &decision, &inputs, args, &save).await
    };
    let mut ledger_failure = None;
    if state.ledger.pending.is_some() {
        match cluster::snapshot_within(&target.client, CALL, ledger_deadline).await {
            Ok(after) => state.ledger = state.ledger.complete(&after),
            Err(e) => {
                shell.warn(format!("cannot read the cluster to record what the install created: {e}"));
                state.ledger = state.ledger.fail(&e);
                ledger_failure = Some(e);
            }
        }
        save(&state)?;
    }
    if let (Ok(()), Some(e)) = (&result, &ledger_failure) {
        state.exit_code = Some(1);
        state.finished = Some(now());
        save(&state)?;
        return Err(Failure::step_next(
            "ledger",
            format!("the install itself succeeded, but the record of what it created is incomplete ({e})"),
            format!("run `{} --yes` again to complete the record (the install is not repeated)", inv.up()),
        ));
    }
    if let Err(f) = result {
        state.exit_code = Some(f.exit_code());
        if matches!(f, Failure::Interrupted) {
            state.interrupt(&now());
        }
        state.finished = Some(now());
        save(&state)?;
        if let Some(next) = next_for(&state, &inv) {
            shell.note(format!("next: {next}"));
        }
        return Err(f);
    }

    // 7. Verify.
    state.begin(PhaseId::Verify, None, &now());
    save(&state)?;
    let expected = Expected {
        device_nodes: verify::devices::recorded_nodes(&facts),
        models: expected_models(&decision),
        fit: model_decision(&decision),
    };
    crate::state::journal::write_atomic(
        &sd.dir().join(EXPECTED_FILE),
        serde_json::to_string_pretty(&expected).expect("json").as_bytes(),
    )
    .map_err(|e| Failure::step("record", e))?;
    let exp = expected.expect();
    let t = verify::Timeouts { models: Duration::from_secs(args.verify_timeout), ..verify::Timeouts::default() };
    let verified = tokio::select! {
        r = verify::verify(&target.client, &exp, &t, shell) => r,
        _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
    };
    match verified {
        Ok(lines) => {
            for l in &lines {
                shell.note(format!("  ok {l}"));
            }
            state.finish(PhaseId::Verify, Status::Done, None, &now());
        }
        Err(f) => {
            state.finish(PhaseId::Verify, Status::Failed, Some(f.to_string()), &now());
            state.exit_code = Some(f.exit_code());
            state.finished = Some(now());
            save(&state)?;
            shell.note(format!("next: fix what is named above, then `{}`", inv.verify()));
            return Err(f);
        }
    }

    // 8. Record and summarise.
    state.begin(PhaseId::Record, None, &now());
    state.finish(PhaseId::Record, Status::Done, None, &now());
    state.exit_code = Some(0);
    state.finished = Some(now());
    save(&state)?;
    summary(&plan, &state, &decision, &sd, global, shell);
    Ok(())
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

fn interrupted(state: &mut State, save: &dyn Fn(&State) -> Result<(), Failure>) -> Result<(), Failure> {
    state.interrupt(&now());
    save(state)?;
    Err(Failure::Interrupted)
}

fn print_plan(plan: &Plan, args: &UpSettings, global: &Global, files: &[(String, String)]) -> Result<(), Failure> {
    if args.output.is_json() {
        // serde_json escapes control characters itself.
        print!("{}", plan.to_json());
    } else {
        let view =
            crate::plan_view::View { width: crate::plan_view::terminal_width(&global.env), explain: args.explain };
        for line in crate::plan_view::render(plan, view).lines() {
            println!("{}", crate::text::escape_controls(line));
        }
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
            shell.note(format!(
                "  model {m} answers at /api/v1/namespaces/{}/services/http:{m}-kserve-workload-svc:8000/proxy/v1",
                verify::NAMESPACE
            ));
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

/// `eas verify --output json`: what passed, or the failure's lines (also on stderr).
fn verify_json(result: &Result<Vec<String>, Failure>) -> String {
    let doc = match result {
        Ok(lines) => {
            serde_json::json!({ "schema": "eas-verify/v1", "passed": true, "checks": lines, "exit_code": 0, "failure": null })
        }
        Err(f) => serde_json::json!({
            "schema": "eas-verify/v1", "passed": false, "checks": [], "exit_code": f.exit_code(), "failure": f.lines()
        }),
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("json");
    s.push('\n');
    s
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
pub fn verify_command(args: &VerifySettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    crate::runtime::block_on_interruptible(async {
        // Every failure, the cluster not answering included, still makes the one JSON document.
        let result = async {
            let target = gather::target(global, CALL).await?;
            let key = cluster::cluster_key(&target.client, CALL).await.map_err(|e| Failure::step("verify", e))?;
            let sd = StateDir::new(&state_root(global)?, &key)?;
            let file = sd.dir().join(EXPECTED_FILE);
            let recorded: Option<Expected> =
                std::fs::read_to_string(&file).ok().and_then(|t| serde_json::from_str(&t).ok());
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
        }
        .await;
        if args.output.is_json() {
            print!("{}", verify_json(&result));
        } else if let Ok(lines) = &result {
            for l in lines {
                println!("ok {}", crate::text::for_people(l));
            }
        }
        result.map(|_| ())
    })
}
