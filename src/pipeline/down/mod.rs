//! `eas down` (SPEC §6) as a list of phases (`plan::DOWN_PHASES`), one file each, run by the
//! runner `eas up`'s phases run by ([`crate::pipeline::runner::Runner`] over [`Down`]): two
//! that only read ([`find`] the record, [`preview`] what would go and what stays), then the ones
//! that act ([`lock`], [`teardown`], [`delete`], [`settle`], [`record`], [`purge`]). Each runs in
//! one window of its timeout under the run's cancellation and says its line; a dry run prints the
//! preview and stops before the first act.
//!
//! The teardown is the installer's, for the recorded layer, with the components whose teardown
//! would delete something that existed before `eas up` skipped; then the objects the ledger says
//! the run created and are still there go; then a report of what is left and why. Safe to run
//! twice: with nothing recorded there is nothing to do.
//!
//! It fails closed. An incomplete ledger (a snapshot that could not be read, a run that died
//! before recording) stops it: nothing is removed, exit 1, unless `--force-incomplete`, which
//! runs the teardown with every guard's `--skip` and still deletes nothing directly. A loss (a
//! pre-existing object gone) or a leftover (a created object still there) keeps the record, and
//! every later `down` exits 1 and repeats it until `--acknowledge`. Nothing is saved or restored:
//! recreating a namespace or a CRD would not bring back what was inside it.

mod bench;
mod cx;
mod delete;
pub mod find;
mod image;
mod lock;
mod plan;
mod preview;
mod purge;
mod record;
mod settle;
mod teardown;

pub use cx::{Down, DownSettings};

use crate::error::Failure;
use crate::output::Shell;
use crate::plan::DownId;
use crate::runtime::Interrupt;
use crate::settings::Global;

use cx::Cx;
use delete::Delete;
use find::{Find, Found, Recorded};
use lock::Lock;
use preview::Preview;
use purge::Purge;
use record::{Record, earlier_findings};
use settle::Settle;
use teardown::Teardown;

use crate::pipeline::runner::Runner;

/// What a `down` that did not fail has to say on stdout (the command layer prints it,
/// `src/commands/down.rs`): a dry run's preview, or that nothing was installed.
pub enum Said {
    /// Nothing eas up installed is recorded: this line says so.
    NothingInstalled(String),
    /// The dry run: what would be removed and kept, and what the real `down` would stop on.
    Preview(Vec<String>),
    /// The real `down` ran; its lines went to stderr as it went.
    Done,
}

/// `eas down` on the run's runtime.
pub fn run(args: &DownSettings, global: &Global, shell: &Shell) -> Result<Said, Failure> {
    crate::runtime::block_on(down(args, global, shell))?
}

/// `eas down` as its list of phases (k0sctl's `action/apply.go`): find and preview, which only
/// read (a dry run ends with the preview), the question, then the phases that act under the lock
/// and the Lease, which are released whatever the outcome.
async fn down(args: &DownSettings, global: &Global, shell: &Shell) -> Result<Said, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step(crate::plan::Step::Signals, e))?;
    let cx = Cx::new(args, global, shell, &interrupt);
    let mut r = Runner::down(args.timeouts.clone(), interrupt.clone());
    let found = match r.act_phase(Find, (), &cx).await? {
        Found::Recorded(found) => found,
        // Nothing was installed: only reads were sent. An attempt's record is cleared (a dry
        // run only says so).
        Found::Nothing { line, .. } if args.dry_run => return Ok(Said::NothingInstalled(line)),
        Found::Nothing { line, sd } => {
            shell.phase("down", line);
            record::clear_attempt(&sd)?;
            return Ok(Said::Done);
        }
    };
    // What would go and what stays: a dry run prints it and ends; the real run lists it before
    // it asks.
    if args.dry_run || !args.yes {
        let lines = r.act_phase(Preview { found: &found }, (), &cx).await?;
        if args.dry_run {
            return Ok(Said::Preview(lines));
        }
        lines.iter().for_each(|l| shell.note(format!("  {}", crate::text::for_people(l))));
    }
    if !args.yes {
        crate::pipeline::prompt::ask(&question(args, &found), &interrupt).await?;
    }
    let acted = acts(&cx, &found, &mut r).await;
    let acted = r.finish(acted).await;
    // Whatever the outcome; a Lease left by a killed `down` goes stale with its run.
    r.release().await;
    acted.map(|()| Said::Done)
}

/// The phases under the lock: the removal ([`removal`]), then the purge; an interrupted removal
/// says how to go on (the record is kept).
async fn acts(cx: &Cx<'_>, found: &Recorded, r: &mut Runner<Down>) -> Result<(), Failure> {
    let (args, sd) = (cx.args, &found.sd);
    if !r.act_phase(Lock { found }, (), cx).await? {
        cx.shell.phase("down", found.nothing());
        cx.shell.note(format!("purging {}", sd.dir().display()));
        return r.act_phase(Purge { sd }, (), cx).await;
    }
    let state = &r.record().as_ref().ok_or_else(|| Failure::step(DownId::Lock, "the record was not loaded"))?.state;
    let (layer, env) = (args.layer.clone().unwrap_or_else(|| state.layer.clone()), state.env.clone());
    match removal(cx, found, &layer, r).await {
        Ok(()) if args.purge => r.act_phase(Purge { sd }, (), cx).await,
        Err(Failure::Interrupted) => {
            let inv = crate::state::resume::invocation(cx.global, &layer, &env, &Default::default());
            cx.shell.note(format!("next: `{} --yes` starts again from the record, which is kept", inv.down()));
            Err(Failure::Interrupted)
        }
        ended => ended,
    }
}

/// The loaded record's removal: a complete one's guarded teardown, deletion, wait and report; an
/// incomplete one's refusal, forced teardown, or acknowledged drop.
async fn removal(cx: &Cx<'_>, found: &Recorded, layer: &str, r: &mut Runner<Down>) -> Result<(), Failure> {
    let (args, cluster, sd) = (cx.args, &found.target.cluster, &found.sd);
    let state = &r.record().as_ref().ok_or_else(|| Failure::step(DownId::Lock, "the record was not loaded"))?.state;
    let (incomplete, earlier) = (state.ledger.incomplete_reason(), earlier_findings(cx, state));
    match incomplete {
        Some(_) if args.acknowledge && !earlier.is_empty() => r.act_phase(Record::Drop { sd }, (), cx).await,
        Some(reason) => {
            let torn = r.act_phase(Teardown { cluster, sd, layer, incomplete: Some(&reason) }, (), cx).await?;
            let (teardown_ok, reason) = (torn.ok, reason.as_str());
            r.act_phase(Record::Forced { cluster, teardown_ok, reason }, (), cx).await
        }
        None => {
            let torn = r.act_phase(Teardown { cluster, sd, layer, incomplete: None }, (), cx).await?;
            let plan =
                torn.plan.as_ref().ok_or_else(|| Failure::step(DownId::Teardown, "the guarded plan is missing"))?;
            let deleted = r.act_phase(Delete { cluster, bench: &torn.bench, created: &plan.delete }, (), cx).await?;
            let settled = r.act_phase(Settle { cluster, going: &deleted.going }, (), cx).await?;
            let (failures, removed) = (&deleted.failures, format!("{layer} removed from {}", found.target.context));
            let record =
                Record::Report { sd, removed, plan, settled: &settled, teardown_ok: torn.ok, failures, earlier };
            r.act_phase(record, (), cx).await
        }
    }
}

/// What the question before the first act names.
fn question(args: &DownSettings, found: &Recorded) -> String {
    match args.purge {
        true => format!("eas down --purge removes the state directory {}", found.sd.dir().display()),
        false => format!("eas down changes the cluster {}", found.target.context),
    }
}
