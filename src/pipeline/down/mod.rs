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
mod removal;
mod settle;
mod teardown;

pub use cx::{Down, DownSettings};

use crate::error::Failure;
use crate::output::Shell;
use crate::runtime::Interrupt;
use crate::settings::Global;

use cx::Cx;
use delete::Delete;
use find::{Find, Found, Recorded};
use lock::Lock;
use preview::Preview;
use purge::Purge;
use record::{Ran, Record};
use settle::Settle;
use teardown::{Teardown, Torn};

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
/// and the Lease, which are released whatever the outcome. Each phase says whether it runs
/// (`should_run`): the preview when there is a dry run or a question; the teardown unless an
/// acknowledged incomplete record is only dropped; the deletions and the wait only after a
/// guarded teardown; the purge with `--purge`.
async fn down(args: &DownSettings, global: &Global, shell: &Shell) -> Result<Said, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step(crate::plan::Step::Signals, e))?;
    let cx = Cx::new(args, global, shell, &interrupt);
    let mut r = Runner::down(args.timeouts.clone(), interrupt.clone());
    let found = match r.act_phase(Find, (), &cx).await? {
        Found::Recorded(found) => found,
        Found::Nothing { line, sd } => return nothing_installed(&cx, line, &sd),
    };
    if let Some(lines) = r.act(Preview { found: &found }, (), &cx).await?.flatten() {
        return Ok(Said::Preview(lines));
    }
    if !args.yes {
        crate::pipeline::prompt::ask(&question(args, global, &found), &interrupt).await?;
    }
    let sd = &found.sd;
    let acted = async {
        let Some(removal) = r.act_phase(Lock { found: &found }, (), &cx).await? else {
            return r.act(Purge { sd }, (), &cx).await.map(drop);
        };
        let torn = r.act(Teardown { sd, removal: &removal }, (), &cx).await?;
        let cluster = cx.cluster()?;
        let deleted = r.act_given(Delete { cluster }, torn.as_ref().and_then(Torn::guarded), &cx).await?;
        let settled = r.act_given(Settle { cluster }, deleted.as_ref().map(|d| &d.going), &cx).await?;
        let ran = Ran { torn: torn.as_ref(), deleted: deleted.as_ref(), settled: settled.as_ref() };
        r.act_phase(Record::of(&found, &removal, ran)?, (), &cx).await?;
        r.act(Purge { sd }, (), &cx).await.map(drop)
    }
    .await;
    let acted = r.finish(resume_note(&cx, &r, acted)).await;
    // Whatever the outcome; a Lease left by a killed `down` goes stale with its run.
    r.release().await;
    acted.map(|()| Said::Done)
}

/// Nothing was installed: only reads were sent. An attempt's record is cleared (a dry run only
/// says so).
fn nothing_installed(cx: &Cx<'_>, line: String, sd: &crate::state::StateDir) -> Result<Said, Failure> {
    if cx.args.dry_run {
        return Ok(Said::NothingInstalled(line));
    }
    cx.shell.phase("down", line);
    record::clear_attempt(sd)?;
    Ok(Said::Done)
}

/// An interrupted removal says how to go on: the record is kept.
fn resume_note(cx: &Cx<'_>, r: &Runner<Down>, acted: Result<(), Failure>) -> Result<(), Failure> {
    if let (Err(Failure::Interrupted), Some(loaded)) = (&acted, r.record()) {
        let layer = cx.args.layer_of(&loaded.state);
        let inv = crate::state::resume::invocation(cx.global, &layer, &loaded.state.env, &Default::default());
        cx.shell.note(format!("next: `{} --yes` starts again from the record, which is kept", inv.down()));
    }
    acted
}

/// What the question before the first act names.
fn question(args: &DownSettings, global: &Global, found: &Recorded) -> String {
    match args.purge {
        true => format!("eas down --purge removes the state directory {}", found.sd.dir().display()),
        false => format!("eas down changes the cluster {}", global.named("context", &found.context)),
    }
}
