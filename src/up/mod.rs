//! `eas up` (SPEC §4) as a list of phases ([`phases`], each a [`phase::Phase`]) run by one
//! [`runner`]: every plan half (preflight and lock; the bastion image's plan, facts and the
//! upstream trees at once; config; the overlay and the knob audit) runs before any act half (the
//! lock taken, the bastion image built or reused, the decided tree put in place and patched,
//! prepare and install, record and verify), in the dry run and the real run alike. A failed
//! check is a blocker: the dry run lists it, the real run stops on it before its first write.

mod attempt;
pub mod catalog;
pub mod crash;
mod day_two;
pub mod doctor;
pub mod down;
pub mod hf;
pub mod install;
pub mod knob_audit;
pub mod phase;
pub mod phases;
pub mod profiles;
mod prompt;
mod report;
pub mod runner;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::bastion::{self, ImageSettings};
use crate::config;
use crate::error::Failure;
use crate::facts::Facts;
use crate::gather::{self, GatherOptions};
use crate::installer::command as argv;
use crate::output::Shell;
use crate::pins::Trees;
use crate::pipeline::Plan;
use crate::runtime::Interrupt;
use crate::settings::{Global, Select};
use crate::state::StateDir;
use crate::state::journal::{PinsRecord, RunInfo, State};
use crate::state::resume::Invocation;
use crate::verify;
use phase::Cx;
use phases::bastion::Bastion;
use phases::config::Config;
use phases::install::{Bench, Install, Prepare};
use phases::lock::Lock;
use phases::overlay::Overlay;
use phases::preflight::{Pre, Preflight};
use phases::record::Record;
use phases::verify::Verify;
use phases::{Planned, Ready};
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
    /// How long a ledger snapshot is retried before the record is marked incomplete
    pub ledger_timeout: Duration,
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

/// How `eas up` ended, when it did not fail: a dry run's plan, with the files it generated, for
/// the command layer to print and write (`src/commands/up.rs`); or a real run, recorded.
pub enum Ran {
    Planned { plan: Box<Plan>, files: Vec<(String, String)> },
    Acted,
}

/// `eas up`: the list of phases on the run's runtime.
pub fn run(args: &UpSettings, global: &Global, shell: &Shell) -> Result<Ran, Failure> {
    crate::runtime::block_on(up(args, global, shell))?
}

/// A file or directory under the state directory that cannot be made or written: exit 1, with a
/// `next:` line for the cause (a full disk, a read-only file system, permissions).
pub fn io_failure(step: &str, path: &std::path::Path, e: std::io::Error) -> Failure {
    let next = crate::state::journal::io_hint(&e, &path.join("x"));
    Failure::step_next(step, format!("{}: {e}", path.display()), next)
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

/// `eas up` as its list of phases: every plan half, in the order the run meets them, then, when
/// none blocked, every act half. A dry run prints the plan where the acts would begin; a real run
/// with blockers prints them all and exits with the first one's code, having written nothing to
/// the cluster.
async fn up(args: &UpSettings, global: &Global, shell: &Shell) -> Result<Ran, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let inv = invocation(global, &args.select.layer, &args.env, &args.select);
    let tree_pins = check_input(args)?;
    let cx = Cx { args, global, shell, inv: &inv, tree_pins: &tree_pins };
    let mut r = runner(args, &tree_pins, interrupt);
    // --model against the EI catalog at the pinned commit: after the bad-input checks, before
    // the cluster is read.
    if let Some(model) = args.select.model.as_deref()
        && catalog::catalog_path(&args.select.layer).is_some()
    {
        phases::trees::model_before_cluster(model, &args.select.layer, &tree_pins, args, global, &mut r).await?;
    }
    r.plan.apply_command = crate::next_command::apply_command(&global.env.args);
    // A real run's log holds its own lines from the first phase on (the attempt's, or the
    // install's with the installer's output after them).
    if !args.dry_run {
        shell.keep_log();
    }
    let planned = match plan_halves(&cx, &mut r).await {
        Ok(p) => p,
        Err(f) => {
            // The attempt keeps its log: the lines printed, then the failure.
            if let Some(dir) = r.attempt.clone().filter(|_| !args.dry_run) {
                match attempt::attempt_log(&mut r, &dir, shell) {
                    Ok(()) => f.lines().iter().for_each(|l| shell.log_only(l)),
                    Err(e) => shell.warn(format!("the attempt's log was not written: {e}")),
                }
            }
            return Err(r.end_attempt(f));
        }
    };
    // The plan's own writes (probe pods, created and deleted), for its summary.
    r.plan.wrote = crate::gather::probe::created();
    // The dry-run stop: the plan, where the acts would begin.
    if args.dry_run {
        let files = planned.files().to_vec();
        return Ok(Ran::Planned { plan: Box::new(r.plan), files });
    }
    if r.blocked() {
        return Err(attempt::blocked_run(&mut r, &planned, shell));
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
    let acted = acts(&cx, planned.ready()?, &mut r).await;
    if let Err(f) = &acted {
        for l in f.lines() {
            shell.log_only(&l);
        }
    }
    acted.map(|()| Ran::Acted)
}

/// Every plan half, in the order the run meets them (`eas doctor` runs the same): preflight
/// (the cluster's identity, Docker, git), lock, then the bastion image's plan, the facts and the
/// trees side by side, config (with the cluster's prerequisites) and the overlay; then the run
/// is classified against the last completed one.
pub async fn plan_halves(cx: &Cx<'_>, r: &mut Runner) -> Result<Planned, Failure> {
    let (args, global) = (cx.args, cx.global);
    let mut pre = r.plan(&mut Preflight::default(), cx).await?.ok_or_else(|| phases::missing("the cluster"))?;
    let records = r.plan(&mut Lock { sd: &pre.sd, client: &pre.target.client, docker: None }, cx).await?;
    let mut bastion =
        Bastion { docker: pre.docker.clone(), image: image_args(&args.image, args.select.pins.clone(), global) };
    let mut facts = phases::facts::Facts { target: &pre.target, created: r.state.ledger.created.clone() };
    let mut trees = phases::trees::Trees { sd: &pre.sd, upgrade_to: None };
    let waiting = "waiting for the bastion image's plan, the facts and the trees";
    let (image, facts, trees) = r.plan3((&mut bastion, &mut facts, &mut trees), cx, waiting).await?;
    let facts = facts.ok_or_else(|| phases::missing("the facts"))?;
    let last = records.as_ref().and_then(|x| x.last.as_ref());
    let resolved = trees.as_ref().map(|t| &t.resolved);
    let commits = day_two::commit_counts(last, resolved).await;
    let work = pre.sd.work_dir().join("eas");
    let catalog = day_two::catalog_changes(last, resolved, &work, &args.env, &args.select.layer).await;
    let mut config = Config { facts: &facts, pre: &pre, trees: resolved, last };
    let decided = r.plan(&mut config, cx).await?;
    // The cluster's prerequisites, with the egress probe's answers (started by preflight).
    let egress = match pre.egress.take() {
        Some(e) => e.check().await,
        None => crate::prereq::egress::check(None, ""),
    };
    let (decision, pinned) = (decided.as_ref().map(|d| &d.decision), decided.as_ref().and_then(|d| d.pinned.as_ref()));
    phases::config::prerequisites(&facts, decision, pinned, egress, cx.shell, r);
    // The configuration's own decisions and warnings, after the prerequisites' (the plan lists
    // them so).
    if let Some(d) = decision {
        for w in &d.warnings {
            cx.shell.warn(w);
        }
        crate::plan_data::fill_decisions(&mut r.plan, d);
    }
    let overlay = match (&decided, &trees) {
        (Some(d), Some(scratch)) => {
            let mut overlay =
                Overlay { decision: &d.decision, facts: &facts, scratch: Some(scratch), work: work.clone() };
            r.plan(&mut overlay, cx).await?
        }
        _ => None,
    };
    let files = decided.as_ref().map(|d| d.files.as_slice()).unwrap_or_default();
    let (latest, last) =
        (records.as_ref().and_then(|x| x.latest.as_ref()), records.as_ref().and_then(|x| x.last.as_ref()));
    // Against the last completed run: run_kind and since_last.
    day_two::classify(args, latest, last, &facts, files, &commits, &catalog, r)?;
    // In the order the real run meets them: by phase, each phase's in the order found.
    r.plan.blockers.sort_by_key(|b| b.phase);
    Ok(Planned { pre, records, facts, image, decided, trees, overlay })
}

/// Every act half, in order, once no plan half blocked: the lock taken (and the cluster's Lease,
/// released whatever the outcome), then the rest under it. Returns once the run is recorded.
async fn acts(cx: &Cx<'_>, x: Ready, r: &mut Runner) -> Result<(), Failure> {
    let Ready { pre, records, facts, image, decided, trees, overlay } = x;
    let held =
        r.act_phase(Lock { sd: &pre.sd, client: &pre.target.client, docker: pre.docker.as_ref() }, records, cx).await?;
    let phases::lock::Held { local: _local, lease, dead, prev, last } = held;
    let planned = Locked { facts, image, decided, trees, overlay, dead, prev, last };
    let result = locked(cx, pre, planned, r).await;
    // One left by a killed run goes stale within its duration.
    lease.release(CALL).await;
    result
}

/// What the acts after the lock consume.
struct Locked {
    facts: Facts,
    image: phases::bastion::Image,
    decided: phases::config::Decided,
    trees: phases::trees::Scratch,
    overlay: phases::overlay::Decided,
    dead: Vec<String>,
    prev: Option<State>,
    last: Option<crate::state::since::Completed>,
}

/// The acts with the lock and the cluster's Lease held: preflight's sweep, the facts, the
/// bastion image, config; then, unless an earlier run installed with the same inputs, the trees
/// put in place, the overlay applied, the ledger's `before`, prepare and install; then record and
/// verify.
async fn locked(cx: &Cx<'_>, pre: Pre, x: Locked, r: &mut Runner) -> Result<(), Failure> {
    let (args, shell) = (cx.args, cx.shell);
    let pre = r.act_phase(Preflight { dead: x.dead.clone(), own: Some(x.trees.dir.path()) }, pre, cx).await?;
    let facts =
        r.act_phase(phases::facts::Facts { target: &pre.target, created: Default::default() }, x.facts, cx).await?;
    let docker = x.image.docker.clone();
    let prepared = r
        .act_phase(
            Bastion {
                docker: Some(docker.clone()),
                image: image_args(&args.image, args.select.pins.clone(), cx.global),
            },
            x.image,
            cx,
        )
        .await?;
    let config = Config { facts: &facts, pre: &pre, trees: None, last: None };
    let decided = r.act_phase(config, x.decided, cx).await?;
    let sd = &pre.sd;
    // Resume: the lasting phases are skipped when they finished with the same inputs.
    let work = sd.work_dir().join("eas");
    r.inputs = phases::inputs_hashes(&r.state, &decided.files, &decided.install, &prepared.tag);
    let resume = day_two::resume(args, x.prev.as_ref(), &work, r);
    let client = &pre.target.client;
    let ledger_deadline = args.ledger_timeout;
    let result = if resume.installed {
        if resume.up_to_date {
            day_two::up_to_date_note(x.last.as_ref(), shell);
        } else {
            shell.phase("resume", "install finished earlier with the same inputs: going on to verify");
        }
        r.file = Some(sd.state_file());
        Ok(())
    } else {
        let upgrade_to = resume.in_place.then(|| x.overlay.op.commit.clone());
        r.act_phase(phases::trees::Trees { sd, upgrade_to }, x.trees, cx).await?;
        let overlay = Overlay { decision: &decided.decision, facts: &facts, scratch: None, work: work.clone() };
        r.act_phase(overlay, x.overlay, cx).await?;
        phases::record::ledger_before(client, ledger_deadline, x.prev.as_ref(), cx, r).await?;
        let bench = Bench { docker: &docker, image: &prepared.tag, work: &work, sd };
        let prepare = Prepare {
            on: &bench,
            files: &decided.files,
            decision: &decided.decision,
            dead: &x.dead,
            upgrade: resume.in_place,
        };
        match r.act_phase(prepare, (), cx).await {
            Ok(()) => match phases::install::begin_install(&bench, &facts, &decided.files, cx, r) {
                Ok(()) => r.act_phase(Install { on: &bench }, (), cx).await,
                Err(f) => Err(r.ended(f)),
            },
            Err(f) => Err(f),
        }
    };
    // Record: what the install created, read from the cluster right after it (whatever its
    // outcome), so `eas down` knows what is eas's before verify's long wait begins.
    let after = phases::record::record(Record { client, deadline: ledger_deadline }, cx, r).await?;
    phases::record::installed(result, after, cx, r)?;
    let verify = Verify { client, sd, facts: &facts, decision: &decided.decision };
    if let Err(f) = phases::verify::verify(verify, cx, r).await {
        // A verification failure (exit 5) still completed the install: the next run compares
        // with it.
        day_two::keep_completed(sd.dir(), r, &facts, &decided.files, shell);
        return Err(f);
    }
    r.state.exit_code = Some(0);
    r.state.finished = Some(now());
    r.save()?;
    day_two::keep_completed(sd.dir(), r, &facts, &decided.files, shell);
    if resume.up_to_date
        && let Some(last) = &x.last
    {
        shell.phase("done", format!("up to date (installed {}, verified now)", last.installed_at()));
        return Ok(());
    }
    report::summary(&r.plan, &r.state, &decided.decision, sd, cx.global, shell);
    Ok(())
}

/// The run's runner: a record and a plan for this selection, the effective timeouts.
pub fn runner(args: &UpSettings, tree_pins: &Trees, interrupt: Interrupt) -> Runner {
    let pins = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)];
    let info = RunInfo {
        cluster_key: String::new(),
        context: String::new(),
        layer: args.select.layer.to_string(),
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
    let mut r = Runner::new(State::new(info, &now()), plan, args.phase_timeouts.clone(), interrupt);
    r.dry_run = args.dry_run;
    r
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

/// The directory beside `state.json` that holds the latest attempt: a run that stopped before
/// its install phase began (see [`attempt`]).
pub use crate::state::records::ATTEMPT;

/// The prefix of a real run's scratch work trees in the state directory's `work/`.
pub const NEXT: &str = "eas.next-";

#[derive(Debug, Clone)]
pub struct VerifySettings {
    /// How long to wait for the model servers
    pub timeout: Duration,
    /// How long to wait for every device node's resource and plugin pod
    pub devices_timeout: Duration,
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
        let key = crate::cluster::cluster_key(&target.client, CALL).await.map_err(|e| Failure::step("verify", e))?;
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
        let t = verify::Timeouts { models: args.timeout, devices: args.devices_timeout, ..verify::Timeouts::default() };
        verify::verify(&target.client, &exp, &t, shell).await.map_err(Failure::from)
    })
}
