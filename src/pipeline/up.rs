//! `eas up` (SPEC §4) as a list of phases ([`phases`], each a [`crate::pipeline::phase::Phase`]) run by one
//! [`runner`]: every plan half (preflight and lock; the bastion image's plan, facts and the
//! upstream trees at once; config; the overlay and the knob audit) runs before any act half (the
//! lock taken, the bastion image built or reused, the decided tree put in place and patched,
//! prepare and install, record and verify), in the dry run and the real run alike. A failed
//! check is a blocker: the dry run lists it, the real run stops on it before its first write.

use crate::cluster::CALL;
use crate::config;
use crate::error::Failure;
use crate::facts::Facts;
use crate::installer::command as argv;
use crate::output::Shell;
use crate::pins::Trees;
use crate::pipeline::phase::Cx;
use crate::pipeline::phases::bastion::Bastion;
use crate::pipeline::phases::config::Config;
use crate::pipeline::phases::install::{Bench, Install, Prepare};
use crate::pipeline::phases::lock::Lock;
use crate::pipeline::phases::overlay::Overlay;
use crate::pipeline::phases::preflight::{Pre, Preflight};
use crate::pipeline::phases::record::Record;
use crate::pipeline::phases::verify::Verify;
use crate::pipeline::phases::{Planned, Ready};
use crate::pipeline::runner::Runner;
use crate::pipeline::services::Services;
use crate::pipeline::settings::{UpSettings, image_args};
use crate::plan::Plan;
use crate::runtime::Interrupt;
use crate::settings::Global;
use crate::state::journal::{PinsRecord, RunInfo, State};
use crate::state::resume::invocation;
use crate::state::run::now;

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

/// `eas up` as its list of phases: every plan half, in the order the run meets them, then, when
/// none blocked, every act half. A dry run prints the plan where the acts would begin; a real run
/// with blockers prints them all and exits with the first one's code, having written nothing to
/// the cluster.
async fn up(args: &UpSettings, global: &Global, shell: &Shell) -> Result<Ran, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let inv = invocation(global, &args.select.layer, &args.env, &args.select);
    let services = Services::resolve(&args.select, global).map_err(config::ConfigError::from)?;
    let tree_pins = check_input(args, &services)?;
    let cx = Cx { args, global, shell, inv: &inv, services: &services, tree_pins: &tree_pins };
    let mut r = runner(args, &tree_pins, interrupt);
    // --model against the EI catalog at the pinned commit: after the bad-input checks, before
    // the cluster is read.
    if let Some(model) = args.select.model.as_deref()
        && crate::gather::catalog::catalog_path(&args.select.layer).is_some()
    {
        crate::pipeline::phases::trees::model_before_cluster(
            model,
            &args.select.layer,
            &tree_pins,
            args,
            global,
            &mut r,
        )
        .await?;
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
                match crate::pipeline::attempt::attempt_log(&mut r, &dir, shell) {
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
        return Err(crate::pipeline::attempt::blocked_run(&mut r, &planned, shell));
    }
    crate::pipeline::day_two::announce(&r, shell);
    // On a terminal without --yes: the plan's summary, then the question, before the first act
    // half (no lock taken, no image built, no work tree written yet).
    if !args.yes {
        let view = crate::pipeline::plan_view::View {
            width: crate::pipeline::plan_view::terminal_width(&global.env),
            explain: false,
        };
        for line in crate::pipeline::plan_view::summary(&r.plan, view, &crate::pipeline::plan_view::Ending::DryRun) {
            shell.note(crate::text::escape_controls(&line));
        }
        let what = format!("eas up installs {} on {}", args.select.layer, planned.pre.target.context);
        crate::pipeline::prompt::ask(&what, &r.interrupt).await?;
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
    let mut pre =
        r.plan(&mut Preflight::default(), cx).await?.ok_or_else(|| crate::pipeline::phases::missing("the cluster"))?;
    let records = r.plan(&mut Lock { sd: &pre.sd, client: &pre.target.client, docker: None }, cx).await?;
    let mut bastion = Bastion {
        docker: pre.docker.clone(),
        image: image_args(&args.image, args.select.pins.clone(), global, &cx.services.proxy),
    };
    let mut facts = crate::pipeline::phases::facts::Facts { pre: &pre, created: r.state.ledger.created.clone() };
    let mut trees = crate::pipeline::phases::trees::Trees { sd: &pre.sd, upgrade_to: None };
    let waiting = "waiting for the bastion image's plan, the facts and the trees";
    let (image, facts, trees) = r.plan3((&mut bastion, &mut facts, &mut trees), cx, waiting).await?;
    let facts = facts.ok_or_else(|| crate::pipeline::phases::missing("the facts"))?;
    let last = records.as_ref().and_then(|x| x.last.as_ref());
    let resolved = trees.as_ref().map(|t| &t.resolved);
    let commits = crate::pipeline::day_two::commit_counts(last, resolved).await;
    let work = pre.sd.work_dir().join("eas");
    let catalog = crate::pipeline::day_two::catalog_changes(last, resolved, &work, &args.env, &args.select.layer).await;
    let mut config = Config { facts: &facts, pre: &pre, trees: resolved, last };
    let decided = r.plan(&mut config, cx).await?;
    // The cluster's prerequisites, with the egress probe's answers (started by preflight).
    let egress = match pre.egress.take() {
        Some(e) => e.check().await,
        None => crate::prereq::egress::check(None, ""),
    };
    let (decision, pinned) = (decided.as_ref().map(|d| &d.decision), decided.as_ref().and_then(|d| d.pinned.as_ref()));
    crate::pipeline::phases::config::prerequisites(&facts, decision, pinned, egress, cx.shell, r);
    // The configuration's own decisions and warnings, after the prerequisites' (the plan lists
    // them so).
    if let Some(d) = decision {
        for w in &d.warnings {
            cx.shell.warn(w);
        }
        crate::plan::data::fill_decisions(&mut r.plan, d);
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
    crate::pipeline::day_two::classify(args, latest, last, &facts, files, &commits, &catalog, r)?;
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
    let crate::pipeline::phases::lock::Held { local: _local, lease, dead, prev, last } = held;
    let planned = Locked { facts, image, decided, trees, overlay, dead, prev, last };
    let result = locked(cx, pre, planned, r).await;
    // One left by a killed run goes stale within its duration.
    lease.release(CALL).await;
    result
}

/// What the acts after the lock consume.
struct Locked {
    facts: Facts,
    image: crate::pipeline::phases::bastion::Image,
    decided: crate::pipeline::phases::config::Decided,
    trees: crate::pipeline::phases::trees::Scratch,
    overlay: crate::pipeline::phases::overlay::Decided,
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
    let facts = r
        .act_phase(crate::pipeline::phases::facts::Facts { pre: &pre, created: Default::default() }, x.facts, cx)
        .await?;
    let docker = x.image.docker.clone();
    let prepared = r
        .act_phase(
            Bastion {
                docker: Some(docker.clone()),
                image: image_args(&args.image, args.select.pins.clone(), cx.global, &cx.services.proxy),
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
    r.inputs = crate::pipeline::phases::inputs_hashes(&r.state, &decided.files, &decided.install, &prepared.tag);
    let resume = crate::pipeline::day_two::resume(args, x.prev.as_ref(), &work, r);
    let client = &pre.target.client;
    let ledger_deadline = args.ledger_timeout;
    let result = if resume.installed {
        if resume.up_to_date {
            crate::pipeline::day_two::up_to_date_note(x.last.as_ref(), shell);
        } else {
            shell.phase("resume", "install finished earlier with the same inputs: going on to verify");
        }
        r.file = Some(sd.state_file());
        Ok(())
    } else {
        let upgrade_to = resume.in_place.then(|| x.overlay.op.commit.clone());
        r.act_phase(crate::pipeline::phases::trees::Trees { sd, upgrade_to }, x.trees, cx).await?;
        let overlay = Overlay { decision: &decided.decision, facts: &facts, scratch: None, work: work.clone() };
        r.act_phase(overlay, x.overlay, cx).await?;
        crate::pipeline::phases::record::ledger_before(client, ledger_deadline, x.prev.as_ref(), cx, r).await?;
        let bench = Bench { docker: &docker, image: &prepared.tag, work: &work, sd };
        let prepare = Prepare {
            on: &bench,
            files: &decided.files,
            decision: &decided.decision,
            dead: &x.dead,
            upgrade: resume.in_place,
        };
        match r.act_phase(prepare, (), cx).await {
            Ok(()) => match crate::pipeline::phases::install::begin_install(&bench, &facts, &decided.files, cx, r) {
                Ok(()) => r.act_phase(Install { on: &bench }, (), cx).await,
                Err(f) => Err(r.ended(f)),
            },
            Err(f) => Err(f),
        }
    };
    // Record: what the install created, read from the cluster right after it (whatever its
    // outcome), so `eas down` knows what is eas's before verify's long wait begins.
    let after = crate::pipeline::phases::record::record(Record { client, deadline: ledger_deadline }, cx, r).await?;
    crate::pipeline::phases::record::installed(result, after, cx, r)?;
    let verify = Verify { client, sd, facts: &facts, decision: &decided.decision };
    if let Err(f) = crate::pipeline::phases::verify::verify(verify, cx, r).await {
        // A verification failure (exit 5) still completed the install: the next run compares
        // with it.
        crate::pipeline::day_two::keep_completed(sd.dir(), r, &facts, &decided.files, shell);
        return Err(f);
    }
    r.state.exit_code = Some(0);
    r.state.finished = Some(now());
    r.save()?;
    crate::pipeline::day_two::keep_completed(sd.dir(), r, &facts, &decided.files, shell);
    if resume.up_to_date
        && let Some(last) = &x.last
    {
        shell.phase("done", format!("up to date (installed {}, verified now)", last.installed_at()));
        return Ok(());
    }
    crate::pipeline::report::summary(&r.plan, &r.state, &decided.decision, sd, cx.global, shell);
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
fn check_input(args: &UpSettings, services: &Services) -> Result<Trees, Failure> {
    let layer = &args.select.layer;
    let tree_pins = config::trees_in(&services.pins, &args.select)?;
    // The EI catalog at the pinned commit decides --model later (read after the trees phase).
    let with_catalog = crate::gather::catalog::catalog_path(layer).is_some();
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
