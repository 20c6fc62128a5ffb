//! `eas up` (SPEC §4) as phases, each under its declared timeout and the run's one cancellation
//! token ([`phase`]). The plan halves run in every run: lock and preflight; the bastion image's
//! plan, facts and the upstream trees at once; config; the overlay, decided once on the run's one
//! EAS tree. `--dry-run` prints the plan there. The acts follow: the bastion image built or
//! reused, the decided tree put in place and patched, prepare and install; then verify and
//! record.

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
#[derive(Debug, Clone)]
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

/// `eas up` as its phases: the plan halves (preflight, gather, decide) run in every run; a dry
/// run prints the plan and stops before the first act (bastion build, trees and overlay,
/// prepare and install), then verify and record.
async fn up(args: &UpSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let inv = invocation(global, &args.select.layer, &args.env, &args.select);
    let tree_pins = check_input(args)?;
    // --model against the EI catalog at the pinned commit: after the bad-input checks, before
    // the cluster is read.
    if let Some(model) = args.select.model.as_deref()
        && catalog::catalog_path(&args.select.layer).is_some()
    {
        model_before_cluster(model, &args.select.layer, &tree_pins, args, global, &interrupt).await?;
    }
    let pre = preflight(args, global, shell, &interrupt, &inv).await?;
    let mut run = Journal::new(args, &pre, &tree_pins);
    let gathered = gather_all(args, global, shell, &interrupt, &pre, &tree_pins, &mut run).await;
    let gathered = gathered.map_err(|f| run.ended(f))?;
    let decided = decide(args, global, shell, &interrupt, &inv, &tree_pins, gathered, &mut run).await;
    let decided = decided.map_err(|f| run.ended(f))?;
    if args.dry_run {
        return print_plan(&run.plan, args, global, &decided.files);
    }
    let acted = act(args, global, shell, &interrupt, &pre, &inv, &decided, &mut run).await;
    acted.map_err(|f| run.ended(f))?;
    let verified = verify_phase(args, shell, &interrupt, &pre, &inv, &decided, &mut run).await;
    verified.map_err(|f| run.ended(f))?;
    run.state.begin(PhaseId::Record, None, &now());
    run.state.finish(PhaseId::Record, Status::Done, None, &now());
    run.state.exit_code = Some(0);
    run.state.finished = Some(now());
    run.save()?;
    summary(&run.plan, &run.state, &decided.decision, &pre.sd, global, shell);
    Ok(())
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
    if !args.dry_run && !args.yes && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure::bad_input(
            "eas up changes the cluster and no terminal is attached to confirm",
            "pass --yes, or run `eas up --dry-run` to see the plan first",
        ));
    }
    Ok(tree_pins)
}

/// What the lock and preflight phases established.
struct Preflight {
    target: gather::kube::Target,
    sd: StateDir,
    _lock: Option<lock::LockGuard>,
    prev: Option<State>,
    docker: Option<bollard::Docker>,
    key: String,
    /// The dead run whose lock `--break-lock` took over.
    dead: Option<lock::Holder>,
}

/// The preflight's failure to read the cluster's identity. When no answer came through a proxy,
/// the proxy is named (credentials masked) with what to check, as `eas facts` does.
fn identity_failure(target: &gather::kube::Target, e: cluster::KeyError) -> Failure {
    use gather::kube::ApiError;
    let (server, call, proxy) = (target.server.clone(), cluster::IDENTITY_CALL.to_string(), target.proxy.clone());
    let e = match (e, proxy.is_some()) {
        (cluster::KeyError::Unreachable(cause), true) => ApiError::Unreachable { server, call, cause, proxy },
        (cluster::KeyError::Timeout(secs), true) => ApiError::Timeout { server, call, secs, proxy },
        (e, _) => return Failure::step_next("preflight", e, "check the API server (`eas doctor`)"),
    };
    let next = e.next();
    Failure::step_next("preflight", e, next)
}

async fn preflight(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    interrupt: &Interrupt,
    inv: &Invocation,
) -> Result<Preflight, Failure> {
    shell.phase("preflight", "reading the cluster's identity");
    let t = &args.phase_timeouts;
    let (target, key) = phase::run(PhaseId::Preflight, t, interrupt, async {
        let target = gather::target(global, CALL).await?;
        let key = cluster::identity(&target.client, CALL).await.map_err(|e| identity_failure(&target, e))?;
        Ok((target, key))
    })
    .await?;
    let sd = StateDir::new(&state_root(global)?, &key)?;
    let mut dead = None;
    // A real run takes the lock, then reads the previous record (and says it resumes); a dry run
    // only looks.
    let (lock, prev) = if args.dry_run {
        if let Some(found) = lock::inspect(&sd.lock_file())? {
            shell.warn(format!("the lock is {found} (a dry run does not take it)"));
        }
        (None, State::load(&sd.state_file())?)
    } else {
        crate::state::journal::create_private_dir(sd.dir())
            .map_err(|e| crate::state::io_failure("lock", sd.dir(), e))?;
        dead = crash::dead_holder(&sd.lock_file(), args.break_lock);
        let lock = lock::acquire(&sd.lock_file(), "eas up", &now(), args.break_lock)?;
        let prev = State::load(&sd.state_file())?;
        if let Some(next) = prev.as_ref().and_then(|p| next_for(p, inv)) {
            shell.note(format!("the previous run did not finish ({next}); resuming: the installer is idempotent"));
        }
        (Some(lock), prev)
    };
    let docker = phase::run(PhaseId::Preflight, t, interrupt, async {
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
        crate::git::run(None, &["--version"], Duration::from_secs(10))
            .await
            .map_err(|e| Failure::step_next("preflight", e, "install git"))?;
        Ok(docker)
    })
    .await?;
    if let (Some(holder), Some(d)) = (&dead, &docker) {
        phase::run(PhaseId::Preflight, t, interrupt, crash::reap(d, holder, shell)).await?;
    }
    Ok(Preflight { target, sd, _lock: lock, prev, docker, key, dead })
}

/// The run's state and plan, saved to the state file in a real run only. The dry run's few
/// differences from a real run are here: what a plan half could not learn, and the plan printed
/// before a STOP.
struct Journal {
    state: State,
    plan: Plan,
    file: Option<PathBuf>,
    dry_run: bool,
}

impl Journal {
    fn new(args: &UpSettings, pre: &Preflight, tree_pins: &Trees) -> Journal {
        let pins = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)];
        let info = RunInfo {
            cluster_key: pre.key.clone(),
            context: pre.target.context.clone(),
            layer: args.select.layer.clone(),
            env: args.env.clone(),
            pins: PinsRecord {
                profile: tree_pins.profile.clone(),
                shas: pins.into_iter().map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_default())).collect(),
            },
        };
        let mut state = State::new(info, &now());
        if let Some(p) = &pre.prev {
            state.ledger = p.ledger.clone();
        }
        let mut plan = Plan::new(&args.select.layer, &args.env, &tree_pins.profile);
        plan.commits = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)]
            .into_iter()
            .map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_else(|| p.git_ref.clone())))
            .collect();
        Journal { state, plan, file: (!args.dry_run).then(|| pre.sd.state_file()), dry_run: args.dry_run }
    }

    /// A plan half's result. What it could not learn, a dry run names in the plan and goes on
    /// without; a real run stops with `fail`.
    fn plan_half<T, E: std::fmt::Display>(
        &mut self,
        phase: PhaseId,
        r: Result<T, E>,
        fail: impl FnOnce(E) -> Failure,
    ) -> Result<Option<T>, Failure> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) if self.dry_run => {
                self.plan.unknown.push(Missing { phase, reason: e.to_string() });
                Ok(None)
            }
            Err(e) => Err(fail(e)),
        }
    }

    /// The overlay stops the run (a STOP, or the knob audit's refusal): a dry run prints its
    /// plan first, so the decisions that led there are seen.
    fn stop(&mut self, args: &UpSettings, global: &Global, files: &[(String, String)], f: Failure) -> Failure {
        if self.dry_run
            && let Err(e) = print_plan(&self.plan, args, global, files)
        {
            return e;
        }
        self.failed(PhaseId::Overlay, f)
    }

    fn save(&self) -> Result<(), Failure> {
        save_to(self.file.as_deref(), &self.state)
    }

    fn done(&mut self, phases: &[PhaseId]) -> Result<(), Failure> {
        for p in phases {
            self.state.begin(*p, None, &now());
            self.state.finish(*p, Status::Done, None, &now());
        }
        self.save()
    }

    /// A phase that failed: recorded, saved, and returned.
    fn failed(&mut self, p: PhaseId, f: Failure) -> Failure {
        self.state.finish(p, Status::Failed, Some(f.to_string()), &now());
        self.state.exit_code = Some(f.exit_code());
        match self.save() {
            Ok(()) => f,
            Err(e) => e,
        }
    }

    /// A failure that ended the run where no phase recorded it (a facts read that failed, a
    /// refusal in the config, a tree that could not be checked out): the run's end and exit code
    /// are recorded, so `eas status` says how it ended. The phases keep what they were.
    fn ended(&mut self, f: Failure) -> Failure {
        if self.state.exit_code.is_some() {
            return f;
        }
        self.state.exit_code = Some(f.exit_code());
        self.state.finished = Some(now());
        match self.save() {
            Ok(()) => f,
            Err(e) => e,
        }
    }

    fn interrupted(&mut self) -> Failure {
        self.state.interrupt(&now());
        match self.save() {
            Ok(()) => Failure::Interrupted,
            Err(e) => e,
        }
    }
}

fn save_to(file: Option<&Path>, s: &State) -> Result<(), Failure> {
    match file {
        Some(f) => s.save(f).map_err(Failure::from),
        None => Ok(()),
    }
}

/// The plan halves of bastion, facts and trees, side by side.
struct Gathered {
    facts: Facts,
    image: Option<bastion::ImagePlan>,
    /// The pinned trees, and the run's one EAS work tree made from them (`eas/` in the temporary
    /// directory), or why it could not be made (a failure raised after the config's own).
    resolved: Option<(Resolved, Result<tempfile::TempDir, String>)>,
}

/// The directory the run's EAS work tree is made in: the system's temporary directory for a dry
/// run (it writes nothing of its own), the state directory's work directory for a real run. A
/// real run first removes what a killed run left there: it holds the state lock, so no other
/// run's tree is among them (after `--break-lock` of another host's lock, that host's run is
/// taken to be dead, as breaking it says). What cannot be removed is named and left.
fn scratch_dir(args: &UpSettings, pre: &Preflight, shell: &Shell) -> Result<tempfile::TempDir, Failure> {
    const NEXT: &str = "eas.next-";
    if args.dry_run {
        tempfile::Builder::new().prefix("eas-plan-").tempdir()
    } else {
        let work = pre.sd.work_dir();
        if let Err(e) = remove_prefixed(&work, NEXT) {
            shell.warn(format!("an earlier run's work tree in {} was not removed: {e}", work.display()));
        }
        std::fs::create_dir_all(&work).and_then(|()| tempfile::Builder::new().prefix(NEXT).tempdir_in(&work))
    }
    .map_err(|e| Failure::step("trees", e))
}

/// Removes the directories in `dir` whose names start with `prefix` (not what a symlink points
/// at). A missing `dir` holds none.
fn remove_prefixed(dir: &Path, prefix: &str) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        r => r?,
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(prefix) && entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn gather_all(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    interrupt: &Interrupt,
    pre: &Preflight,
    tree_pins: &Trees,
    run: &mut Journal,
) -> Result<Gathered, Failure> {
    run.done(&[PhaseId::Lock, PhaseId::Preflight])?;
    let (t, target) = (&args.phase_timeouts, &pre.target);
    shell.phase("bastion", "building or reusing the pinned bastion image");
    shell.phase("facts", format!("gathering facts from {} ({})", target.context, target.server));
    shell.phase("trees", "fetching EAS, EI and EAT at their pinned commits");
    let image_args = image_args(&args.image, args.select.pins.clone(), global);
    let image = async {
        match &pre.docker {
            None => Err(bastion::BastionError::Input("no Docker Engine answers (scripts/docker-up.sh)".into())),
            Some(d) => bastion::plan_image(d, &image_args).await,
        }
    };
    let facts = gather::collect(target, &args.gather, CALL, &global.env, shell);
    // Running until they end: an interruption marks them so.
    for p in [PhaseId::Bastion, PhaseId::Facts, PhaseId::Trees] {
        run.state.begin(p, None, &now());
    }
    run.save()?;
    let (tp, repos, cache) = (tree_pins.clone(), args.repos.clone(), trees::cache_dir(&global.env));
    let ca = global.ca_bundle.as_ref().map(|b| b.ders.clone());
    // The work tree is made here, while the facts are gathered: the overlay is decided on it
    // once they are in. A resolved tree that cannot be checked out fails the run, dry or not,
    // after the config has decided (a refusal or bad input there comes first, as it did).
    let (scratch, layer, with_ext) = (scratch_dir(args, pre, shell)?, args.select.layer.clone(), !args.dry_run);
    let resolved = tokio::task::spawn_blocking(move || {
        let r = resolve_trees(&tp, &repos, &cache, ca.as_deref())?;
        let tree = make_work_tree(&r, &tp, &scratch.path().join("eas"), &layer, with_ext);
        Ok::<_, String>((r, tree.map(|()| scratch)))
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
            return Err(run.interrupted());
        }
    };
    waiting.finish_and_clear();
    let (image, resolved) = (image?, resolved?);
    let facts: Facts = facts??;
    let facts_hash = crate::state::hash_json(&facts);
    run.state.facts_hash = Some(facts_hash.clone());
    run.plan.facts = Some(FactsSummary::new(&facts, &facts_hash));
    let image = run.plan_half(PhaseId::Bastion, image, Failure::from)?;
    if let Some(p) = &image {
        let action = if p.existing.is_some() { ImageAction::Reuse } else { ImageAction::Build };
        run.plan.image = Some(ImagePlan { tag: p.tag.clone(), action });
    }
    let resolved = run.plan_half(PhaseId::Trees, resolved.map_err(|e| e.to_string()).and_then(|r| r), |e| {
        Failure::step_next(
            "trees",
            e,
            "check network access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo",
        )
    })?;
    // The bastion's act (a build, or the reuse) is still to come, and the trees' work tree.
    run.state.finish(PhaseId::Facts, Status::Done, None, &now());
    Ok(Gathered { facts, image, resolved })
}

/// What the decide phases settled: the config, the overlay on the run's one tree, the
/// installer's command. Everything the acts need.
struct Decided {
    facts: Facts,
    image: Option<bastion::ImagePlan>,
    decision: config::Decision,
    files: Vec<(String, String)>,
    /// The run's one EAS tree, the overlay decided on it; in a temporary directory until the
    /// act puts it in place.
    tree: Option<(tempfile::TempDir, crate::overlay::Plan)>,
    install: Vec<String>,
}

/// Config, then the overlay decided once, on the one tree the run will install from.
#[allow(clippy::too_many_arguments)]
async fn decide(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    interrupt: &Interrupt,
    inv: &Invocation,
    tree_pins: &Trees,
    g: Gathered,
    run: &mut Journal,
) -> Result<Decided, Failure> {
    let layer = &args.select.layer;
    // A refusal stops here, before anything reaches the cluster. The models are decided against
    // the catalog `init` will copy, read at the pinned EI commit.
    let pinned_catalog = match &g.resolved {
        Some((r, _)) => catalog::read(&r.ei.objects, &r.ei.sha, &tree_pins.ei, layer)?,
        None => None,
    };
    match &pinned_catalog {
        Some(c) => shell.note(format!("model catalog: {}", c.describe())),
        None => shell.note("model catalog: not read (no trees); the built-in candidates (data/models.json) decide"),
    }
    let decision = config::generate_with(&g.facts, &args.select, pinned_catalog.as_ref())?;
    for w in &decision.warnings {
        shell.warn(w);
    }
    crate::plan_data::fill_decisions(&mut run.plan, &decision);
    run.state.decisions = decision.choices.iter().map(|c| render::choice_line(c, false)).collect();
    let files = render::files(&decision);
    run.state.begin(PhaseId::Config, Some(crate::state::hash_json(&run.state.decisions)), &now());
    run.state.finish(PhaseId::Config, Status::Done, None, &now());

    let generated = crate::overlay::Generated::from_decision(&decision, &g.facts, &crate::overlay::Overlay::builtin()?);
    let tree = match g.resolved {
        None => None,
        Some((r, tree)) => {
            let scratch = tree.map_err(|e| Failure::step("trees", e))?;
            let (dir, pins, resolved) = (scratch.path().join("eas"), tree_pins.clone(), r.clone());
            let (select, inv, dry_run) = (args.select.clone(), inv.clone(), args.dry_run);
            let (op, way_forward) = blocking("trees", interrupt, run, move || {
                let op = crate::overlay::decide(&dir, &r.eas.sha, Some(&generated))?;
                // After a STOP: the other pins profiles whose overlay decides fully here.
                let forward = if op.stops().count() > 0 {
                    way_forward(&select, &pins.profile, &r.eas.objects, &generated, &inv, dry_run)
                } else {
                    Vec::new()
                };
                Ok((op, forward))
            })
            .await?;
            run.state.finish(PhaseId::Trees, Status::Done, None, &now());
            run.plan.overlay = crate::plan_data::patches(&op);
            run.state.overlay = op.decisions.iter().map(|d| d.line(false)).collect();
            if op.stops().count() > 0 {
                let mut lines = op.stop_lines();
                lines.extend(way_forward);
                return Err(run.stop(args, global, &files, Failure::OverlayStop(lines)));
            }
            audit(args, global, shell, tree_pins, &resolved, &decision, &op, &files, run)?;
            Some((scratch, op))
        }
    };
    let overrides_in_tree = format!("env/{}/eas-overrides.yaml", args.env);
    let install = argv::install_argv(layer, &args.env, &format!("{}/{overrides_in_tree}", bastion::TREE_TARGET))?;
    run.plan.commands = vec![
        PlannedCommand { phase: PhaseId::Prepare, argv: argv::init_argv(layer, &args.env)? },
        PlannedCommand { phase: PhaseId::Install, argv: install.clone() },
    ];
    run.state.installer_command = redactor(&global.env).redact_argv(&install);
    Ok(Decided { facts: g.facts, image: g.image, decision, files, tree, install })
}

/// The knob audit: each key written must be read at the pinned commits (or by a patch).
#[allow(clippy::too_many_arguments)]
fn audit(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    tree_pins: &Trees,
    r: &Resolved,
    decision: &config::Decision,
    op: &crate::overlay::Plan,
    files: &[(String, String)],
    run: &mut Journal,
) -> Result<(), Failure> {
    let audited = [("eas", &tree_pins.eas, &r.eas), ("ei", &tree_pins.ei, &r.ei), ("eat", &tree_pins.eat, &r.eat)].map(
        |(name, pin, t)| knob_audit::Tree {
            name,
            repo: pin.repo.clone().unwrap_or_default(),
            objects: t.objects.as_path(),
            sha: t.sha.as_str(),
        },
    );
    let audit = knob_audit::run(&audited, decision, op, &args.allow_unread)?;
    for w in &audit.warnings {
        shell.warn(w);
    }
    run.plan.decisions.extend(audit.lines.iter().map(|l| {
        let (fact, choice) = l.split_once(" -> ").unwrap_or((l.as_str(), ""));
        let source = "knob audit: git grep at the pinned commits".to_string();
        PlanDecision { fact: format!("knob {fact}"), choice: choice.to_string(), permalink: source.clone(), source }
    }));
    run.plan.warnings.extend(audit.warnings.iter().cloned());
    if !audit.refusals.is_empty() {
        return Err(run.stop(args, global, files, Failure::Refused(audit.refusals.clone())));
    }
    Ok(())
}

/// Blocking work (git, the file system) off the async workers, stopped by the run's token.
async fn blocking<T: Send + 'static>(
    step: &'static str,
    interrupt: &Interrupt,
    run: &mut Journal,
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::select! {
        r = tokio::task::spawn_blocking(f) => r.map_err(|e| Failure::step(step, e))?,
        _ = interrupt.graceful.cancelled() => Err(run.interrupted()),
    }
}

/// The acts: the bastion image, the tree put in place with its overlay, prepare and install.
#[allow(clippy::too_many_arguments)]
async fn act(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    interrupt: &Interrupt,
    pre: &Preflight,
    inv: &Invocation,
    d: &Decided,
    run: &mut Journal,
) -> Result<(), Failure> {
    let docker = pre.docker.as_ref().expect("a real run has a Docker Engine");
    let image = d.image.clone().expect("the image is planned in a real run");
    // The build stops on the run's token itself, removing its step container and layers before
    // it returns: a race with the token here would drop it half-way through that clean-up.
    let build = bastion::build_planned(docker, image, false, shell, interrupt);
    let prepared = match phase::limit(PhaseId::Bastion, &args.phase_timeouts, build).await {
        Ok(Ok(p)) => p,
        Ok(Err(bastion::BastionError::Interrupted)) => return Err(run.interrupted()),
        Ok(Err(e)) => return Err(run.failed(PhaseId::Bastion, e.into())),
        Err(f) => return Err(run.failed(PhaseId::Bastion, f)),
    };
    run.state.bastion_image = Some(format!("{} ({})", prepared.tag, prepared.id));
    run.state.finish(PhaseId::Bastion, Status::Done, None, &now());

    // Resume: the lasting phases are skipped when they finished with the same inputs.
    let work = pre.sd.work_dir().join("eas");
    let inputs = inputs_hashes(&run.state, &d.files, &d.install, &prepared.tag);
    let skipped = plan_resume(pre.prev.as_ref(), &inputs).skipped();
    if let Some(p) = &pre.prev {
        run.state.carry_over(p, &skipped);
    }
    let installed = skipped.contains(&PhaseId::Install) && work.join("env").join(&args.env).exists();

    // Prepare and install in the bastion, the ledger around them. The ledger fails closed: the
    // `before` is saved before the installer runs, and a record left pending (this run's, or a
    // dead run's) is completed from the cluster afterwards.
    let ledger_deadline = Duration::from_secs(args.ledger_timeout);
    let client = &pre.target.client;
    let result = if installed {
        shell.phase("resume", "install finished earlier with the same inputs: going on to verify");
        Ok(())
    } else {
        put_tree(interrupt, d, &inputs, &work, run).await?;
        shell.phase("ledger", "reading what exists before the install, for `eas down` to keep");
        let before = tokio::select! {
            r = cluster::snapshot_within(client, CALL, ledger_deadline) => r.map_err(|e| {
                Failure::step_next("ledger", e, "check the API server (`eas doctor`); nothing was installed")
            })?,
            _ = interrupt.graceful.cancelled() => return Err(run.interrupted()),
        };
        run.state.ledger = Ledger::begin(pre.prev.as_ref().map(|p| &p.ledger), &before);
        run.save()?;
        // The Docker Engine may finish a create or a start the dead run sent just before it
        // died after preflight's sweep: sweep again before this run's installer starts, so two
        // installers never act at once.
        if let Some(holder) = &pre.dead {
            tokio::select! {
                r = crash::reap(docker, holder, shell) => { r?; }
                _ = interrupt.graceful.cancelled() => return Err(run.interrupted()),
            }
        }
        let ctx = install::Ctx { docker, image: &prepared.tag, tree: &work, global, shell, interrupt };
        let file = run.file.clone();
        let save = |s: &State| save_to(file.as_deref(), s);
        install::prepare_and_install(&ctx, &mut run.state, &pre.sd, &d.files, &d.decision, &inputs, args, &save).await
    };
    let after = if run.state.ledger.pending.is_some() {
        after_snapshot(client, ledger_deadline, interrupt, shell, run).await?
    } else {
        After::Recorded
    };
    match (result, after) {
        (Ok(()), After::Recorded) => Ok(()),
        (Ok(()), After::Unreadable(e)) => {
            run.state.exit_code = Some(1);
            run.state.finished = Some(now());
            run.save()?;
            Err(Failure::step_next(
                "ledger",
                format!("the install itself succeeded, but the record of what it created is incomplete ({e})"),
                format!("run `{} --yes` again to complete the record (the install is not repeated)", inv.up()),
            ))
        }
        (result, after) => {
            let f = result.err().unwrap_or(Failure::Interrupted);
            run.state.exit_code = Some(f.exit_code());
            if matches!(f, Failure::Interrupted) {
                run.state.interrupt(&now());
            }
            run.state.finished = Some(now());
            run.save()?;
            if let Some(next) = next_for(&run.state, inv) {
                shell.note(format!("next: {next}"));
            }
            if matches!(after, After::Interrupted) {
                shell.note(format!(
                    "next: the record of what the install created is pending (`eas down` removes nothing until it \
                     is complete): run `{} --yes` again to complete it",
                    inv.up()
                ));
            }
            Err(f)
        }
    }
}

/// How the ledger's `after` read ended.
enum After {
    Recorded,
    Unreadable(String),
    /// A SIGINT/SIGTERM stopped the read: the record stays pending, marked incomplete.
    Interrupted,
}

/// Reads the cluster after the install to complete the ledger, retried within `deadline`. A
/// first SIGINT/SIGTERM (one that ended the install, or one during the read) stops it at once:
/// the record stays pending and is marked incomplete, so `eas down` removes nothing until the
/// next `eas up` completes it.
async fn after_snapshot(
    client: &kube::Client,
    deadline: Duration,
    interrupt: &Interrupt,
    shell: &Shell,
    run: &mut Journal,
) -> Result<After, Failure> {
    let read = async {
        tokio::select! {
            r = cluster::snapshot_within(client, CALL, deadline) => Some(r),
            _ = interrupt.graceful.cancelled() => None,
        }
    };
    let after = if interrupt.graceful.is_cancelled() {
        None
    } else {
        shell.phase("ledger", "recording what the install created");
        read.await
    };
    let end = match after {
        Some(Ok(after)) => {
            run.state.ledger = run.state.ledger.complete(&after);
            After::Recorded
        }
        Some(Err(e)) => {
            shell.warn(format!("cannot read the cluster to record what the install created: {e}"));
            run.state.ledger = run.state.ledger.fail(&e);
            After::Unreadable(e)
        }
        None => {
            let why = "interrupted (Ctrl-C or SIGTERM) before the cluster was read after the install";
            run.state.ledger = run.state.ledger.fail(why);
            After::Interrupted
        }
    };
    run.save()?;
    Ok(end)
}

/// The trees and overlay acts: the decided tree put in place as the run's work tree, then its
/// overlay applied.
async fn put_tree(
    interrupt: &Interrupt,
    d: &Decided,
    inputs: &BTreeMap<PhaseId, String>,
    work: &Path,
    run: &mut Journal,
) -> Result<(), Failure> {
    let (scratch, op) = d.tree.as_ref().expect("trees resolve in a real run");
    run.state.begin(PhaseId::Trees, inputs.get(&PhaseId::Trees).cloned(), &now());
    put_in_place(&scratch.path().join("eas"), work).map_err(|e| Failure::step("trees", e))?;
    run.state.finish(PhaseId::Trees, Status::Done, None, &now());
    run.state.begin(PhaseId::Overlay, inputs.get(&PhaseId::Overlay).cloned(), &now());
    run.save()?;
    let op = crate::overlay::Plan { repo: work.to_path_buf(), ..op.clone() };
    match blocking("overlay", interrupt, run, move || crate::overlay::apply(&op).map(|_| ())).await {
        Err(Failure::Interrupted) => Err(Failure::Interrupted),
        Err(f) => Err(run.failed(PhaseId::Overlay, f)),
        Ok(()) => {
            run.state.finish(PhaseId::Overlay, Status::Done, None, &now());
            Ok(())
        }
    }
}

/// The decided tree replaces the run's work tree (a clone moves as a directory: its objects are
/// shared with the cache by absolute path).
fn put_in_place(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::rename(from, to)
}

#[allow(clippy::too_many_arguments)]
async fn verify_phase(
    args: &UpSettings,
    shell: &Shell,
    interrupt: &Interrupt,
    pre: &Preflight,
    inv: &Invocation,
    d: &Decided,
    run: &mut Journal,
) -> Result<(), Failure> {
    run.state.begin(PhaseId::Verify, None, &now());
    run.save()?;
    let expected = Expected {
        device_nodes: verify::devices::recorded_nodes(&d.facts),
        models: expected_models(&d.decision),
        fit: model_decision(&d.decision),
    };
    crate::state::journal::write_atomic(
        &pre.sd.dir().join(EXPECTED_FILE),
        serde_json::to_string_pretty(&expected).expect("json").as_bytes(),
    )
    .map_err(|e| Failure::step("record", e))?;
    let exp = expected.expect();
    let t = verify::Timeouts { models: Duration::from_secs(args.verify_timeout), ..verify::Timeouts::default() };
    let verified = tokio::select! {
        r = verify::verify(&pre.target.client, &exp, &t, shell) => r,
        _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
    };
    match verified {
        Ok(lines) => {
            for l in &lines {
                shell.note(format!("  ok {l}"));
            }
            run.state.finish(PhaseId::Verify, Status::Done, None, &now());
            Ok(())
        }
        Err(Failure::Interrupted) => {
            let f = run.interrupted();
            if let Some(next) = next_for(&run.state, inv) {
                shell.note(format!("next: {next}"));
            }
            Err(f)
        }
        Err(f) => {
            run.state.finish(PhaseId::Verify, Status::Failed, Some(f.to_string()), &now());
            run.state.exit_code = Some(f.exit_code());
            run.state.finished = Some(now());
            run.save()?;
            shell.note(format!("next: fix what is named above, then `{}`", inv.verify()));
            Err(f)
        }
    }
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
