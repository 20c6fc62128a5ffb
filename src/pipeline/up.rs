//! `eas up` (SPEC §4) as a list of phases ([`phases`], each a [`crate::pipeline::runner::Phase`]) run by one
//! [`runner`]: every plan half (preflight and lock; the bastion image's plan, facts and the
//! upstream trees at once; config; the overlay and the knob audit) runs before any act half (the
//! lock taken, the bastion image built or reused, the decided tree put in place and patched,
//! prepare and install, record and verify), in the dry run and the real run alike. A failed
//! check is a blocker: the dry run lists it, the real run stops on it before its first write.

use crate::config;
use crate::error::Failure;
use crate::output::Shell;
use crate::pins::Trees;
use crate::pipeline::attempt;
use crate::pipeline::phase::Cx;
use crate::pipeline::phases::bastion::Bastion;
use crate::pipeline::phases::classify::{Classify, Compare, Inputs};
use crate::pipeline::phases::config::{self as config_phase, Config};
use crate::pipeline::phases::facts::Facts as FactsPhase;
use crate::pipeline::phases::install::{Bench, Install, Prepare};
use crate::pipeline::phases::lock::Lock;
use crate::pipeline::phases::missing;
use crate::pipeline::phases::overlay::Overlay;
use crate::pipeline::phases::planned::{Planned, Ready};
use crate::pipeline::phases::preflight::Preflight;
use crate::pipeline::phases::record::{self, Record};
use crate::pipeline::phases::trees::{self as trees_phase, Trees as TreesPhase};
use crate::pipeline::phases::unlock::Unlock;
use crate::pipeline::phases::verify::{self, Verify};
use crate::pipeline::runner::Runner;
use crate::pipeline::selected;
use crate::pipeline::services::Services;
use crate::pipeline::settings::UpSettings;
use crate::plan::Plan;
use crate::runtime::Interrupt;
use crate::settings::Global;
use crate::state::journal::State;
use crate::state::resume::{Invocation, invocation};
use crate::state::run::now;

/// How `eas up` ended, when it did not fail: a dry run's plan, with the files it generated and
/// the kind it exits as (`None`: success), for the command layer to print and write
/// (`src/commands/up.rs`); or a real run, recorded.
pub enum Ran {
    Planned { plan: Box<Plan>, files: Vec<(String, String)>, kind: Option<crate::plan::Kind> },
    Acted,
}

/// `eas up`: the list of phases on the run's runtime.
pub fn run(args: &UpSettings, global: &Global, shell: &Shell) -> Result<Ran, Failure> {
    crate::runtime::block_on(up(args, global, shell))?
}

/// `eas up` as its list of phases: every plan half, in the order the run meets them, then, when
/// none blocked, every act half. A dry run prints the plan where the acts would begin; a real run
/// with blockers prints them all and exits with the first one's code, having written nothing to
/// the cluster. The driver: the plan halves, the dry-run stop, the blocked stop, the question,
/// the acts.
async fn up(args: &UpSettings, global: &Global, shell: &Shell) -> Result<Ran, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step(crate::plan::Step::Signals, e))?;
    let inv = up_invocation(args, global);
    let services = Services::resolve(&args.select, global).map_err(config::ConfigError::from)?;
    let tree_pins = check_input(args, &services)?;
    let cx = Cx { args, global, shell, inv: &inv, services: &services, tree_pins: &tree_pins };
    let mut r = runner(args, &tree_pins, interrupt);
    // --model against the EI catalog at the pinned commit: after the bad-input checks, before
    // the cluster is read.
    let model = args.select.model.as_deref();
    trees_phase::model_before_cluster(model, &args.select.layer, &tree_pins, args, global, &mut r).await?;
    // A real run's log holds its own lines from the first phase on (the attempt's, or the
    // install's with the installer's output after them).
    if !args.dry_run {
        shell.keep_log();
    }
    let mut planned = match plan_halves(&cx, &mut r).await {
        Ok(p) => p,
        Err(f) => return Err(attempt::plan_failed(f, &mut r, &cx)),
    };
    plan_ends(&cx, &mut r);
    if args.dry_run {
        return Ok(dry_run_stop(&planned, r, args.fail_on_blockers));
    }
    if r.blocked() {
        return Err(attempt::blocked_run(&mut r, (&planned.pre.sd, &planned.facts, planned.files()), shell));
    }
    crate::pipeline::day_two::announce(&r, shell);
    // The question and the acts read the settings the plan halves did, the last install's included.
    let filled = planned.filled.take();
    let cx = filled.as_ref().map_or(cx.clone(), |f| f.cx(&cx));
    if !cx.args.yes {
        crate::pipeline::prompt::ask_up(&cx, r.plan_doc(), &planned.pre.context, r.interrupt()).await?;
    }
    acts(&cx, planned.ready()?, &mut r).await.map(|()| Ran::Acted)
}

/// The run's words, for its record and the `next:` lines: the command line as typed, and the
/// names of the secrets it read from the environment.
fn up_invocation(args: &UpSettings, global: &Global) -> Invocation {
    Invocation {
        typed: crate::next_command::up_words(&global.env),
        secrets: crate::next_command::secrets_in(&global.env, &crate::act::bastion::secret_env_names()),
        ..invocation(global, &args.select.layer, &args.env, &args.select)
    }
}

/// The plan's last writes, once every plan half ran: the plan's own writes (probe pods, created
/// and deleted) for its summary, each difference from a saved plan (`--plan DIR`) as a refusal,
/// and the command that applies it.
fn plan_ends(cx: &Cx<'_>, r: &mut Runner) {
    r.plan_run().wrote(crate::gather::probe::created());
    if let Some(saved) = &cx.args.saved {
        held_to(saved, r);
    }
    let apply = apply_command(cx.args, cx.global, r.blocked());
    r.plan_run().apply_command(apply);
}

/// The dry-run stop: the plan, where the acts would begin, with the files config generated and
/// how the dry run exits on its blockers.
fn dry_run_stop(planned: &Planned, mut r: Runner, fail_on_blockers: bool) -> Ran {
    let files = planned.files().to_vec();
    let kind = crate::plan::dry_run_exit(r.plan_doc().blockers(), fail_on_blockers);
    r.plan_run().exited(kind.map_or(crate::plan::EXIT_SUCCESS, crate::plan::Kind::exit_code));
    Ran::Planned { plan: Box::new(r.into_plan()), files, kind }
}

/// The exact command that applies the plan (`null` when not made from an `eas up` command
/// line); a dry run that saves its plan (`--out`) without blockers names the saved plan.
fn apply_command(args: &UpSettings, global: &Global, blocked: bool) -> Option<String> {
    let typed = crate::next_command::apply_command(&global.env)?;
    match args.out.as_deref().filter(|_| !blocked) {
        Some(dir) => crate::next_command::apply_saved(&global.env, &dir.display().to_string()),
        None => Some(typed),
    }
}

/// `--plan DIR`: each difference between the plan made now and the saved one is a refusal,
/// ahead of every other blocker, so the run stops before its first write naming each (a dry run
/// lists them). One fix, on the last.
fn held_to(saved: &crate::plan::saved::Saved, r: &mut Runner) {
    let now = serde_json::to_value(r.plan_doc()).expect("the plan serialises");
    let found = saved.differences(&now);
    let last = found.len().saturating_sub(1);
    let fix =
        "review the plan as it is now (`eas up --dry-run --out DIR`), then apply that one with `eas up --plan DIR`";
    let refusals = found.into_iter().enumerate().map(|(i, (phase, what))| {
        let cause = format!("the saved plan {} differs: {what}", saved.file.display());
        crate::plan::Blocker::new(phase, cause, if i == last { fix } else { "" }, crate::plan::Kind::Refusal)
    });
    r.plan_run().saved_plan_differs(refusals.collect());
}

/// Every plan half, in the order the run meets them (`eas doctor` runs the same): preflight
/// (the cluster's identity, Docker, git), lock, then the bastion image's plan, the facts and the
/// trees side by side, config (with the cluster's prerequisites), the overlay, and classify (the
/// run against the last completed one).
pub async fn plan_halves(cx: &Cx<'_>, r: &mut Runner) -> Result<Planned, Failure> {
    let mut pre = r.plan(&mut Preflight::default(), cx).await?.ok_or_else(|| missing("the cluster"))?;
    // The cluster is known: what this run left unset is filled from the last install's
    // selection, before any phase that reads it.
    let filled = crate::pipeline::recorded::after_preflight(cx, &mut pre, r).await?;
    let with_filled = filled.as_ref().map(|f| f.cx(cx));
    let cx = with_filled.as_ref().unwrap_or(cx);
    let records = r.plan(&mut Lock { sd: &pre.sd, docker: None }, cx).await?;
    let mut bastion = Bastion::of(cx, pre.docker.clone());
    let mut facts = FactsPhase { pre: &pre, created: r.journaled().ledger.created.clone() };
    let writable = records.as_ref().is_none_or(|x| x.writable);
    let mut trees = TreesPhase { sd: &pre.sd, upgrade_to: None, writable };
    let waiting = "waiting for the bastion image's plan, the facts and the trees";
    let (image, facts, trees) = r.plan3((&mut bastion, &mut facts, &mut trees), cx, waiting).await?;
    let facts = facts.ok_or_else(|| missing("the facts"))?;
    let (resolved, last) = (trees.as_ref().map(|t| &t.resolved), records.as_ref().and_then(|x| x.last.as_ref()));
    let decided = r.plan(&mut Config { facts: &facts, pre: &pre, trees: resolved, last }, cx).await?;
    let mut lines = config_phase::checked(&facts, decided.as_ref(), pre.egress.take(), cx.shell, r).await;
    let work = pre.sd.work_dir().join("eas");
    let overlay = match (&decided, &trees) {
        (Some(d), Some(t)) => {
            let mut overlay = Overlay { decision: &d.decision, facts: &facts, scratch: Some(t), work: work.clone() };
            r.plan(&mut overlay, cx).await?
        }
        _ => None,
    };
    let planned = Planned { pre, records, facts, image, decided, trees, overlay, classified: None, filled: None };
    // What classify compares with the last completed run, as the plan lists it.
    lines.extend(planned.overlay.iter().flat_map(|o| o.lines.iter().cloned()));
    let classified = r.plan(&mut Classify::Plan(Compare::new(cx, &planned, &work, &lines)), cx).await?;
    Ok(Planned { classified, filled, ..planned })
}

/// Every act half, in order, once no plan half blocked (k0sctl's `action/apply.go` over
/// `phase/manager.go`): when one fails, each phase whose act ran cleans up (the lock's releases
/// the cluster's Lease and the lock file, which unlock releases otherwise). A failed act's cause
/// goes to the log too, and an interrupted run says how to run it again.
async fn acts(cx: &Cx<'_>, x: Ready, r: &mut Runner) -> Result<(), Failure> {
    let acted = act_list(cx, x, r).await;
    let acted = r.finish(acted).await;
    if let Err(f) = &acted {
        attempt::resume_line(f, r, cx);
        f.lines().iter().for_each(|l| cx.shell.log_only(l));
    }
    acted
}

/// The act halves: the lock, preflight's sweep, the facts, the bastion image, config, classify
/// (what resuming skips); then, unless an earlier run installed with the same inputs, the trees
/// put in place, the overlay applied, prepare (the ledger's `before` first) and install; then
/// record, verify and unlock.
async fn act_list(cx: &Cx<'_>, x: Ready, r: &mut Runner) -> Result<(), Failure> {
    let Ready { pre, records, facts, image, decided, trees, overlay, classified } = x;
    let held = r.act_phase(Lock { sd: &pre.sd, docker: pre.docker.as_ref() }, records, cx).await?;
    let pre = r.act_phase(Preflight { dead: held.dead.clone(), own: Some(trees.dir.path()) }, pre, cx).await?;
    let facts = r.act_phase(FactsPhase { pre: &pre, created: Default::default() }, facts, cx).await?;
    let docker = image.docker.clone();
    let prepared = r.act_phase(Bastion::of(cx, Some(docker.clone())), image, cx).await?;
    let decided = r.act_phase(Config { facts: &facts, pre: &pre, trees: None, last: None }, decided, cx).await?;
    let (sd, work, decision) = (&pre.sd, pre.sd.work_dir().join("eas"), &decided.decision);
    let (prev, last, files) = (held.prev.as_ref(), held.last.as_ref(), decided.files.as_slice());
    let inputs = Inputs { sd, prev, last, files, install: &decided.install, image: &prepared.tag };
    let (resume, classified) = r.act_phase(Classify::Act(inputs), classified, cx).await?;
    let upgrade_to = classified.upgrade.then(|| overlay.op.commit.clone());
    r.act(TreesPhase { sd, upgrade_to, writable: true }, trees, cx).await?;
    r.act(Overlay { decision, facts: &facts, scratch: None, work: work.clone() }, overlay, cx).await?;
    let bench = Bench { docker: &docker, image: &prepared.tag, work: &work, sd };
    let (dead, init, undeploy) = (&held.dead, &classified.init, classified.undeploy.as_deref());
    let prepare = Prepare { on: &bench, files, decision, dead, init, prev, facts: &facts };
    let install = Install { on: &bench, argv: &decided.install, undeploy };
    // Install runs only once prepare did.
    let installed = async {
        r.act(prepare, (), cx).await?;
        r.act(install, (), cx).await.map(drop)
    };
    let installed = installed.await;
    // Record: what the install created, read from the cluster right after it (whatever its
    // outcome), so `eas down` knows what is eas's before verify's long wait begins.
    let after = record::record(Record { deadline: cx.args.ledger_timeout }, cx, r).await?;
    record::installed(installed, after, cx, r)?;
    let verified = verify::verify(Verify { sd, facts: &facts, decision }, cx, r).await;
    if verified.is_ok() {
        r.act_phase(Unlock, (), cx).await?;
        r.completed()?;
    }
    // A verification failure (exit 5) still completed the install: the next run compares with it.
    crate::pipeline::day_two::keep_completed(sd.dir(), r, &facts, files, cx.shell);
    verified?;
    let up_to_date = last.filter(|_| resume.up_to_date);
    crate::pipeline::report::done(up_to_date, r.plan_doc(), r.journaled(), decision, sd, cx);
    Ok(())
}

/// The run's runner: a record and a plan for this selection, the effective timeouts.
pub fn runner(args: &UpSettings, tree_pins: &Trees, interrupt: Interrupt) -> Runner {
    let mut plan = Plan::new(&args.phase_timeouts);
    plan.select(selected::plan_selected(args, tree_pins));
    let info = selected::run_info(args, tree_pins);
    let mut r = Runner::new(State::new(info, &now()), plan, args.phase_timeouts.clone(), interrupt);
    r.dry_run(args.dry_run);
    r
}

/// Bad input is found before anything else happens.
fn check_input(args: &UpSettings, services: &Services) -> Result<Trees, Failure> {
    let tree_pins = selected::selected(args, services)?;
    // Without a terminal the question cannot be asked: refused before anything is read.
    if !args.dry_run && !args.yes && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure::bad_input(
            "eas up changes the cluster and no terminal is attached to confirm",
            "pass --yes, or run `eas up --dry-run` to see the plan first",
        ));
    }
    Ok(tree_pins)
}
