//! `eas down` (SPEC §6) as a list of phases (`pipeline::DOWN_PHASES`): two that only read (find
//! the record, preview what would go and what stays), then the ones that act (lock, teardown,
//! delete, settle, record, purge). Each runs in one window of its timeout under the run's
//! cancellation, by the same [`crate::pipeline::runner::window`] `eas up`'s phases run in, and says its
//! line; a dry run prints the preview and stops before the first act.
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

mod image;
mod phases;
mod plan;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use crate::error::Failure;
use crate::output::Shell;
use crate::plan::{DOWN_PHASES, DownId};
use crate::runtime::Interrupt;
use crate::settings::Global;
use crate::state::journal::{DownEntry, State, Status};

use crate::pipeline::down::phases::{Found, Held, Here, Scope};
use crate::pipeline::runner::window;
use crate::state::run::now;

pub use crate::pipeline::down::phases::sweep_probes;

#[derive(Debug, Clone)]
pub struct DownSettings {
    /// Print what would be removed and kept, and what the real `down` would stop on; write nothing
    pub dry_run: bool,
    /// Layer to tear down [default: the recorded one]
    pub layer: Option<String>,
    /// Do not ask before changing the cluster (required without a terminal)
    pub yes: bool,
    /// Also remove the state directory of this cluster (logs, work tree); takes the lock
    pub purge: bool,
    /// Drop the losses and leftovers an earlier `eas down` found, once dealt with
    pub acknowledge: bool,
    /// With an incomplete record: run the installer's teardown with every guard applied
    /// (deletes nothing directly)
    pub force_incomplete: bool,
    /// Take over a lock left by a run that is no longer alive
    pub break_lock: bool,
    /// Where the pins come from (resolved as every command does).
    pub pins: crate::pins::Source,
    pub image: crate::act::bastion::BaseImage,
    /// How long the installer's teardown may run
    pub teardown_timeout: Duration,
    /// Other phases' timeouts, when set (`--phase-timeout NAME=SECS`, for tests).
    pub phase_timeouts: Vec<(DownId, Duration)>,
}

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

/// Runs each of `eas down`'s phases in one window of its timeout (the teardown's is
/// `--teardown-timeout`; it stops itself, so its window is a backstop) under the run's
/// cancellation, and prints its line.
pub struct DownRunner {
    interrupt: Interrupt,
    limits: BTreeMap<DownId, Duration>,
    /// The phase whose window closed before it ended, if one did.
    late: Cell<Option<DownId>>,
}

impl DownRunner {
    pub fn new(interrupt: Interrupt, teardown: Duration, set: &[(DownId, Duration)]) -> DownRunner {
        let mut limits: BTreeMap<DownId, Duration> = set.iter().copied().collect();
        limits.insert(DownId::Teardown, teardown);
        DownRunner { interrupt, limits, late: Cell::new(None) }
    }

    /// The phase's effective timeout.
    pub fn limit(&self, id: DownId) -> Duration {
        self.limits.get(&id).copied().unwrap_or(id.spec().timeout)
    }

    pub async fn run<T>(
        &self,
        id: DownId,
        shell: &Shell,
        f: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        let spec = id.spec();
        shell.phase(spec.name, spec.says);
        let limit = self.limit(id);
        window(limit, spec.stops_itself, &self.interrupt, f, || {
            self.late.set(Some(id));
            timed_out(id, limit)
        })
        .await
    }

    /// The journal of a `down` that SIGINT/SIGTERM stopped, or whose phase outlived its window:
    /// the record stays as it was (the next `down` starts over from it) and says how this `down`
    /// ended, saved to `file`. Any other failure leaves the record as its phase wrote it.
    pub fn ended(&self, state: &mut State, file: &std::path::Path, started: &str, f: Failure) -> Failure {
        let (status, message) = match (&f, self.late.get()) {
            (Failure::Interrupted, _) => (
                Status::Interrupted,
                "interrupted (Ctrl-C or SIGTERM); the record is kept: run eas down again".to_string(),
            ),
            (f, Some(_)) => (Status::Failed, format!("{f}; the record is kept: run eas down again")),
            (_, None) => return f,
        };
        state.down = Some(DownEntry { status, started: started.to_string(), finished: now(), message });
        match state.save(file) {
            Ok(()) => f,
            Err(e) => e.into(),
        }
    }

    /// The phases a real `down` acts in, with their effective timeouts, as the preview prints them.
    pub fn acts(&self, purge: bool) -> String {
        let acts = DOWN_PHASES
            .iter()
            .filter(|p| !p.reads_only && (purge || p.id != DownId::Purge))
            .map(|p| format!("{} ({})", p.name, crate::pipeline::phase::shown(self.limit(p.id))));
        format!("phases: {}", acts.collect::<Vec<_>>().join(", "))
    }
}

fn timed_out(id: DownId, limit: Duration) -> Failure {
    Failure::step_next(
        id,
        format!("phase {id} of eas down did not finish within its timeout of {}", crate::pipeline::phase::shown(limit)),
        "run `eas down --yes` again: the record is kept and it starts over from it",
    )
}

/// `--yes`, or the prompt ([`crate::pipeline::prompt::ask`]). Nothing has been written when this refuses.
async fn confirm(args: &DownSettings, what: &str, interrupt: &Interrupt) -> Result<(), Failure> {
    if args.yes { Ok(()) } else { crate::pipeline::prompt::ask(what, interrupt).await }
}

async fn down(args: &DownSettings, global: &Global, shell: &Shell) -> Result<Said, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step(crate::plan::Step::Signals, e))?;
    let r = DownRunner::new(interrupt.clone(), args.teardown_timeout, &args.phase_timeouts);
    let here = Here { args, global, shell, interrupt: &interrupt };
    let found = match r.run(DownId::Find, shell, crate::pipeline::down::phases::find(&here)).await? {
        Found::Nothing { line, sd } => {
            // Nothing was installed: only reads were sent. An attempt's record is cleared (a
            // dry run only says so).
            if args.dry_run {
                return Ok(Said::NothingInstalled(line));
            }
            shell.phase("down", line);
            crate::pipeline::down::phases::clear_attempt(&sd)?;
            return Ok(Said::Done);
        }
        Found::Recorded(found) => found,
    };
    // What would go and what stays: a dry run prints it and ends; the real run lists it
    // before it asks.
    if args.dry_run || !args.yes {
        let mut lines = r.run(DownId::Preview, shell, crate::pipeline::down::phases::preview(&here, &found)).await?;
        lines.push(r.acts(args.purge));
        if args.dry_run {
            return Ok(Said::Preview(lines));
        }
        for l in &lines {
            shell.note(format!("  {}", crate::text::for_people(l)));
        }
    }
    let what = if args.purge {
        format!("eas down --purge removes the state directory {}", found.sd.dir().display())
    } else {
        format!("eas down changes the cluster {}", found.target.context)
    };
    confirm(args, &what, &interrupt).await?;
    let Held { lock, lease, state } =
        r.run(DownId::Lock, shell, crate::pipeline::down::phases::lock(&here, &found)).await?;
    let fence = lease.fence();
    let ended = locked(&r, &here, &found, lock, state, &fence).await;
    // Whatever the outcome; a Lease left by a killed `down` goes stale with its run.
    lease.release(crate::cluster::CALL).await;
    ended
}

/// What `down` does under the lock and the Lease.
async fn locked(
    r: &DownRunner,
    here: &Here<'_>,
    found: &crate::pipeline::down::phases::Recorded,
    lock: crate::state::lock::LockGuard,
    state: Option<State>,
    fence: &crate::cluster::lease::Fence,
) -> Result<Said, Failure> {
    let (args, global, shell) = (here.args, here.global, here.shell);
    let sd = &found.sd;
    let Some(mut state) = state else {
        shell.phase("down", found.nothing());
        shell.note(format!("purging {}", sd.dir().display()));
        return r
            .run(DownId::Purge, shell, async move { crate::pipeline::down::phases::purge(sd, lock) })
            .await
            .map(|()| Said::Done);
    };
    let layer = args.layer.clone().unwrap_or_else(|| state.layer.clone());
    let scope = Scope::new(here, found, layer, fence);
    let started = now();
    match acts(r, &scope, &mut state).await {
        Ok(()) if args.purge => r
            .run(DownId::Purge, shell, async move { crate::pipeline::down::phases::purge(sd, lock) })
            .await
            .map(|()| Said::Done),
        Ok(()) => Ok(Said::Done),
        Err(f) => {
            let f = r.ended(&mut state, &sd.state_file(), &started, f);
            if matches!(f, Failure::Interrupted) {
                let inv = crate::state::resume::invocation(
                    global,
                    &scope.layer,
                    &state.env,
                    &crate::settings::Select::default(),
                );
                shell.note(format!("next: `{} --yes` starts again from the record, which is kept", inv.down()));
            }
            Err(f)
        }
    }
}

/// The phases that act on a loaded record: a complete one's guarded teardown, deletion, wait
/// and report; an incomplete one's refusal, forced teardown, or acknowledged drop.
async fn acts(r: &DownRunner, s: &Scope<'_>, state: &mut State) -> Result<(), Failure> {
    let earlier = s.earlier_findings(state);
    if let Some(reason) = state.ledger.incomplete_reason() {
        if s.args.acknowledge && !earlier.is_empty() {
            // The teardown already ran with every guard; the user has seen what may be left.
            return r.run(DownId::Record, s.shell, async { s.drop_incomplete() }).await;
        }
        s.refuse_incomplete(state, &reason)?;
        let torn = async {
            let ctx = s.ctx(state).await?;
            let ok = crate::pipeline::down::phases::teardown(
                &ctx,
                state,
                &s.layer,
                &crate::state::ledger::all_guarded_components(),
            )
            .await?;
            Ok((ctx, ok))
        };
        let (ctx, ok) = r.run(DownId::Teardown, s.shell, torn).await?;
        return r
            .run(DownId::Record, s.shell, crate::pipeline::down::phases::forced_record(&ctx, s, state, ok, &reason))
            .await;
    }
    let torn = async {
        let current = s.snapshot().await?;
        let plan = crate::state::ledger::guard_teardown(&state.ledger, &current);
        for p in &plan.protect {
            s.shell.note(format!("protecting {}: existed before eas up; {}", p.object, p.threat.by));
        }
        let ctx = s.ctx(state).await?;
        let ok = crate::pipeline::down::phases::teardown(&ctx, state, &s.layer, &plan.skip_components()).await?;
        Ok((plan, ctx, ok))
    };
    let (plan, ctx, ok) = r.run(DownId::Teardown, s.shell, torn).await?;
    let deleted = async {
        // What the ledger says this run created and is still there.
        let after_teardown = s.snapshot().await?;
        crate::pipeline::down::phases::delete_recorded(&ctx, s.cluster, &plan.delete.intersect(&after_teardown)).await
    };
    let (failures, going) = r.run(DownId::Delete, s.shell, deleted).await?;
    let settled = r.run(DownId::Settle, s.shell, s.settled(&going, r.limit(DownId::Settle))).await?;
    r.run(DownId::Record, s.shell, async { s.report(state, &plan, &settled, ok, &failures, earlier) }).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{ProgressMode, Terminal};

    fn plain() -> Shell {
        let term = Terminal { stderr_is_tty: false, ci: true, no_color_env: true };
        Shell::new(ProgressMode::Plain, &term, true, 0, true)
    }

    #[tokio::test]
    async fn a_down_phase_past_its_window_ends_naming_it_and_is_remembered() {
        let shell = plain();
        let r = DownRunner::new(Interrupt::default(), Duration::from_secs(3600), &[(DownId::Settle, Duration::ZERO)]);
        let e = r.run(DownId::Settle, &shell, std::future::pending::<Result<(), Failure>>()).await.unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("phase settle of eas down did not finish within its timeout of 0 s"), "{e}");
        assert_eq!(r.late.get(), Some(DownId::Settle));
        assert_eq!(r.run(DownId::Record, &shell, async { Ok(7) }).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn an_interrupted_down_phase_ends_with_130_and_no_timeout() {
        let shell = plain();
        let r = DownRunner::new(Interrupt::default(), Duration::from_secs(3600), &[]);
        r.interrupt.graceful.cancel();
        let e = r.run(DownId::Delete, &shell, std::future::pending::<Result<(), Failure>>()).await.unwrap_err();
        assert_eq!(e.exit_code(), 130);
        assert_eq!(r.late.get(), None);
    }

    #[tokio::test]
    async fn the_teardown_stops_itself_so_its_window_is_a_backstop_past_teardown_timeout() {
        let shell = plain();
        let r = DownRunner::new(Interrupt::default(), Duration::ZERO, &[]);
        r.interrupt.graceful.cancel();
        // Not ended by the token: the teardown removes its own container on it.
        let f = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(1)
        };
        assert_eq!(r.run(DownId::Teardown, &shell, f).await.unwrap(), 1);
        assert_eq!(r.limit(DownId::Teardown), Duration::ZERO);
    }

    #[tokio::test]
    async fn the_runner_journals_how_a_down_ended_and_leaves_other_failures_to_their_phase() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state.json");
        let shell = plain();
        let r = DownRunner::new(Interrupt::default(), Duration::from_secs(3600), &[(DownId::Delete, Duration::ZERO)]);
        let mut state = State::sample("2026-01-01T00:00:00Z");
        // A failure of its own (a leftover, say) is the phase's: nothing is journaled.
        let own = Failure::step_next(crate::plan::Step::DownRun, "objects were lost or left", "--acknowledge");
        assert_eq!(r.ended(&mut state, &file, "t0", own).exit_code(), 1);
        assert!(state.down.is_none() && !file.exists());
        // A phase past its window: failed, saved, naming it.
        let late = r.run(DownId::Delete, &shell, std::future::pending::<Result<(), Failure>>()).await.unwrap_err();
        assert_eq!(r.ended(&mut state, &file, "t0", late).exit_code(), 1);
        let saved = State::load(&file).unwrap().unwrap().down.unwrap();
        assert_eq!(saved.status, Status::Failed);
        assert!(saved.message.contains("phase delete of eas down did not finish"), "{}", saved.message);
        // An interruption: interrupted, saved.
        assert_eq!(r.ended(&mut state, &file, "t0", Failure::Interrupted).exit_code(), 130);
        assert_eq!(State::load(&file).unwrap().unwrap().down.unwrap().status, Status::Interrupted);
    }

    #[test]
    fn the_preview_lists_each_act_with_its_effective_window() {
        let r = DownRunner::new(Interrupt::default(), Duration::from_secs(600), &[]);
        let line = r.acts(false);
        assert!(line.starts_with("phases: lock (2 min), teardown (10 min), delete (20 min), settle ("), "{line}");
        assert!(!line.contains("find") && !line.contains("preview") && !line.contains("purge"), "{line}");
        assert!(r.acts(true).ends_with("purge (1 min)"), "{}", r.acts(true));
    }
}
