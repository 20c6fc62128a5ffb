//! The act halves of `eas up`, run only when the plan has no blocker: the lock taken, the
//! bastion image built or reused, the decided tree put in place and patched, prepare and install
//! with the ledger around them, then verify and record. Each runs through the runner (one
//! window of its effective timeout, the journal, cancellation).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::bastion;
use crate::error::Failure;
use crate::output::Shell;
use crate::pipeline::PhaseId;
use crate::settings::Global;
use crate::state::journal::State;
use crate::state::ledger::Ledger;
use crate::state::lock;
use crate::state::resume::{Invocation, RunKind, next_for};
use crate::verify;

use super::plan::Ready;
use super::runner::Runner;
use super::{ATTEMPT, CALL, EXPECTED_FILE, Expected, UpSettings, cluster, crash, install, now};

/// How long past its effective timeout the runner waits for an act half that stops itself (it
/// removes its container, or prints what it waited for).
const GRACE: Duration = Duration::from_secs(30);

/// The acts, in order. Returns once the run is recorded.
pub async fn run(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    inv: &Invocation,
    x: Ready,
    r: &mut Runner,
) -> Result<(), Failure> {
    let sd = &x.pre.sd;
    // Lock: taken now, after every plan half; a run that took it since the plan is met here.
    crate::state::journal::create_private_dir(sd.dir()).map_err(|e| crate::state::io_failure("lock", sd.dir(), e))?;
    let dead = crash::dead_holder(&sd.lock_file(), args.break_lock);
    let lock_file = sd.lock_file();
    let break_lock = args.break_lock;
    let client = x.pre.target.client.clone();
    let (_lock, lease) = r
        .act(PhaseId::Lock, None, async move {
            let local = lock::acquire(&lock_file, "eas up", &now(), break_lock).map_err(Failure::from)?;
            // Then the cluster's Lease, named for this run: host, pid and run id.
            let me = &local.holder;
            let identity = format!("{}/{}/{}", me.host, me.pid, me.run_id());
            let lease = super::lease::acquire(&client, &identity, break_lock, CALL).await?;
            Ok((local, lease))
        })
        .await?;
    // The Lease is eas's own object: recorded in the ledger, so `eas down` can remove one a
    // killed run left, and only that one.
    r.state.ledger = std::mem::take(&mut r.state.ledger).with_own(lease.own());
    let result = run_locked(args, global, shell, inv, &x, dead, r).await;
    // The Lease goes whatever the outcome; one left by a killed run goes stale within its
    // duration.
    lease.release(CALL).await;
    result
}

/// The acts after the lock, with the lock and the cluster's Lease held.
async fn run_locked(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    inv: &Invocation,
    x: &Ready,
    dead: Option<lock::Holder>,
    r: &mut Runner,
) -> Result<(), Failure> {
    let sd = &x.pre.sd;
    // From here on the record is this run's: the previous one is re-read under the lock.
    let prev = State::load(&sd.state_file())?;
    if let Some(p) = &prev {
        keep_own(r, p.ledger.clone());
        if let Some(next) = next_for(p, inv) {
            shell.note(format!("the previous run did not finish ({next}); resuming: the installer is idempotent"));
        }
    }
    // The lock's act was journaled in memory (no state file before the lock). Until the install
    // phase begins, this run is an attempt: its record goes beside the state, never over the
    // record of an earlier install (`state.json`), which the install phase's start replaces.
    let attempt = sd.dir().join(ATTEMPT);
    crate::state::journal::create_private_dir(&attempt).map_err(|e| crate::state::io_failure("lock", &attempt, e))?;
    r.file = Some(attempt.join(crate::state::journal::FILE));
    // The attempt's log, until the install's (prepare's) takes over with every line so far.
    super::attempt_log(r, &attempt, shell).map_err(|e| crate::state::io_failure("log", &attempt, e))?;
    let docker = &x.docker;
    let r_interrupt = r.interrupt.clone();
    r.act(PhaseId::Preflight, None, async {
        if let Some(holder) = &dead {
            crash::reap(docker, holder, shell).await?;
        }
        sweep_work_trees(sd, x.tree.0.path(), shell);
        super::down::sweep_probes(&x.pre.target.client, shell, &r_interrupt).await
    })
    .await?;
    r.act(PhaseId::Facts, None, async { Ok(()) }).await?;

    // The build stops on the run's token itself, removing its step container and layers before it
    // returns.
    let interrupt = r.interrupt.clone();
    // The build stops itself at the phase's timeout (its spinner counts against it); the
    // runner's window is the backstop.
    let limit = r.timeouts.get(PhaseId::Bastion);
    let build = bastion::build_planned(docker, x.image.clone(), false, limit, shell, &interrupt);
    let prepared = r.act_self(PhaseId::Bastion, None, GRACE, async { build.await.map_err(Failure::from) }).await?;
    r.state.bastion_image = Some(format!("{} ({})", prepared.tag, prepared.id));
    r.act(PhaseId::Config, None, async { Ok(()) }).await?;

    // Resume: the lasting phases are skipped when they finished with the same inputs.
    let work = sd.work_dir().join("eas");
    let inputs = super::inputs_hashes(&r.state, &x.files, &x.install, &prepared.tag);
    let kind = r.plan.run_kind;
    let skipped = super::day_two::skipped(kind, args.reinstall, prev.as_ref(), &inputs);
    if let Some(p) = &prev {
        r.state.carry_over(p, &skipped);
    }
    let installed = skipped.contains(&PhaseId::Install) && work.join("env").join(&args.env).exists();
    let up_to_date = installed && kind == Some(RunKind::UpToDate);
    let in_place = super::day_two::upgrades_in_place(r, &work, &args.env);

    // Prepare and install in the bastion, the ledger around them. The ledger fails closed: the
    // `before` is saved before the installer runs, and a record left pending (this run's, or a
    // dead run's) is completed from the cluster afterwards.
    let ledger_deadline = Duration::from_secs(args.ledger_timeout);
    let client = &x.pre.target.client;
    let result = if installed {
        if up_to_date {
            super::day_two::up_to_date_note(x.pre.last.as_ref(), shell);
        } else {
            shell.phase("resume", "install finished earlier with the same inputs: going on to verify");
        }
        r.file = Some(sd.state_file());
        Ok(())
    } else {
        let (scratch, op) = &x.tree;
        let from = scratch.path().join("eas");
        let commit = op.commit.clone();
        r.act(PhaseId::Trees, inputs.get(&PhaseId::Trees).cloned(), async {
            // An upgrade keeps the work tree (its env is the installer's record) and moves it.
            if in_place {
                super::day_two::upgrade_tree(&work, &commit).await
            } else {
                put_in_place(&from, &work).map_err(|e| Failure::step("trees", e))
            }
        })
        .await?;
        let op = crate::overlay::Plan { repo: work.clone(), ..op.clone() };
        r.act(PhaseId::Overlay, inputs.get(&PhaseId::Overlay).cloned(), async {
            let job = tokio::task::spawn_blocking(move || crate::overlay::apply(&op).map(|_| ()));
            job.await.map_err(|e| Failure::step("overlay", e))?
        })
        .await?;
        shell.phase("ledger", "reading what exists before the install, for `eas down` to keep");
        let before = tokio::select! {
            b = cluster::snapshot_within(client, CALL, ledger_deadline) => b.map_err(|e| {
                Failure::step_next("ledger", e, "check the API server (`eas doctor`); nothing was installed")
            }),
            _ = r.interrupt.graceful.cancelled() => return Err(r.interrupted()),
        };
        let before = before.map_err(|f| r.ended(f))?;
        keep_own(r, Ledger::begin(prev.as_ref().map(|p| &p.ledger), &before));
        r.save()?;
        prepare_and_install(args, global, shell, x, &dead, &prepared.tag, &work, &inputs, in_place, r).await
    };
    // Record: what the install created, read from the cluster right after it (whatever its
    // outcome), so `eas down` knows what is eas's before verify's long wait begins.
    let after = record(client, ledger_deadline, shell, r).await?;
    match (result, after) {
        (Ok(()), After::Recorded) => {}
        (Ok(()), After::Unreadable(e)) => {
            r.state.exit_code = Some(1);
            r.state.finished = Some(now());
            r.save()?;
            return Err(Failure::step_next(
                "ledger",
                format!("the install itself succeeded, but the record of what it created is incomplete ({e})"),
                format!("run `{} --yes` again to complete the record (the install is not repeated)", inv.up()),
            ));
        }
        (result, after) => {
            let f = result.err().unwrap_or(Failure::Interrupted);
            r.state.exit_code = Some(f.exit_code());
            if matches!(f, Failure::Interrupted) {
                r.state.interrupt(&now());
            }
            r.state.finished = Some(now());
            r.save()?;
            if let Some(next) = next_for(&r.state, inv) {
                shell.note(format!("next: {next}"));
            }
            if matches!(after, After::Interrupted) {
                shell.note(format!(
                    "next: the record of what the install created is pending (`eas down` removes nothing until it \
                     is complete): run `{} --yes` again to complete it",
                    inv.up()
                ));
            }
            return Err(f);
        }
    }
    if let Err(f) = verify_phase(args, shell, x, inv, r).await {
        // A verification failure (exit 5) still completed the install: the next run compares
        // with it.
        super::day_two::keep_completed(sd.dir(), r, &x.facts, &x.files, shell);
        return Err(f);
    }
    r.state.exit_code = Some(0);
    r.state.finished = Some(now());
    r.save()?;
    super::day_two::keep_completed(sd.dir(), r, &x.facts, &x.files, shell);
    if up_to_date && let Some(last) = &x.pre.last {
        shell.phase("done", format!("up to date (installed {}, verified now)", last.installed_at()));
        return Ok(());
    }
    super::summary(&r.plan, &r.state, &x.decision, sd, global, shell);
    Ok(())
}

/// Replaces the run's ledger with `l`, keeping what this run recorded of its own objects.
fn keep_own(r: &mut Runner, l: Ledger) {
    // The probe pods the plan's facts were read with (`--probe-nodes`), made and deleted by
    // this run: recorded as its own, never as something `eas down` would look for.
    for (name, uid, node) in crate::gather::probe::take_created() {
        r.state.ledger.own.push(crate::state::ledger::Own {
            kind: "Pod".into(),
            namespace: crate::gather::probe::NAMESPACE.into(),
            name,
            uid,
            holder: format!("probe of node {node}, deleted once read"),
        });
    }
    let own = std::mem::take(&mut r.state.ledger.own);
    r.state.ledger = l.with_own(own);
}

#[allow(clippy::too_many_arguments)]
async fn prepare_and_install(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    x: &Ready,
    dead: &Option<lock::Holder>,
    image: &str,
    work: &Path,
    inputs: &BTreeMap<PhaseId, String>,
    upgrade: bool,
    r: &mut Runner,
) -> Result<(), Failure> {
    // The Docker Engine may finish a create or a start the dead run sent just before it died
    // after preflight's sweep: sweep again before this run's installer starts, so two installers
    // never act at once.
    if let Some(holder) = dead {
        tokio::select! {
            reaped = crash::reap(&x.docker, holder, shell) => { reaped?; }
            _ = r.interrupt.graceful.cancelled() => return Err(r.interrupted()),
        }
    }
    let log_path = install::log_file(&x.pre.sd)?;
    shell.log_to(&log_path).map_err(|e| crate::state::io_failure("log", &log_path, e))?;
    r.state.log_path = Some(log_path.clone());
    let interrupt = r.interrupt.clone();
    let ctx = install::Ctx { docker: &x.docker, image, tree: work, global, shell, interrupt: &interrupt };
    let limit = r.timeouts.get(PhaseId::Prepare);
    let prepare = install::prepare(&ctx, &x.files, &x.decision, args, &log_path, limit, upgrade);
    r.act_self(PhaseId::Prepare, inputs.get(&PhaseId::Prepare).cloned(), GRACE, prepare).await?;
    // The install begins: from here the run is an install, recorded in `state.json`.
    crate::state::records::keep_inputs(x.pre.sd.dir(), &x.facts, &r.plan, &x.files)
        .map_err(|e| Failure::step_next("install", e, "check --state-dir"))?;
    // The pins this run built its bastion from, kept for `eas down` (which must not depend on
    // what the pins say on the day it runs).
    let kept = x.pre.sd.dir().join(crate::state::records::PINS);
    let pins = args.select.pins.load().map_err(|e| Failure::step("install", e))?;
    crate::state::journal::write_atomic(&kept, pins.to_json().as_bytes())
        .map_err(|e| Failure::step_next("install", e, "check --state-dir"))?;
    r.state.pins_kept = Some(crate::state::journal::KeptPins { file: kept, source: args.select.pins.describe() });
    r.file = Some(x.pre.sd.state_file());
    let limit = r.timeouts.get(PhaseId::Install);
    let argv = r.state.installer_command.clone();
    let undeploy = super::day_two::planned_undeploy(r);
    let installing = async {
        // The model the last completed run deployed, when this run picks another.
        if let Some(u) = &undeploy {
            install::undeploy(&ctx, u, &log_path, limit).await?;
        }
        install::install(&ctx, &argv, args, &log_path, limit).await
    };
    r.act_self(PhaseId::Install, inputs.get(&PhaseId::Install).cloned(), GRACE, installing).await
}

/// A real run removes the work trees a killed run left (`eas.next-*`) before it goes on: it holds
/// the lock, so none is another live run's. Its own scratch tree stays. What cannot be removed
/// is named and left.
fn sweep_work_trees(sd: &crate::state::StateDir, own: &Path, shell: &Shell) {
    let work = sd.work_dir();
    let entries = match std::fs::read_dir(&work) {
        Ok(e) => e,
        Err(_) => return,
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir
            && name.to_string_lossy().starts_with(super::NEXT)
            && path != own
            && let Err(e) = std::fs::remove_dir_all(&path)
        {
            shell.warn(format!("an earlier run's work tree {} was not removed: {e}", path.display()));
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

/// The record phase's act half: reads the cluster after the install to complete the ledger,
/// retried within `deadline`, all in one window of the phase's effective timeout. Past that
/// window, or when the cluster cannot be read, the record is marked incomplete and the phase
/// failed, naming it. A first SIGINT/SIGTERM (one that ended the install, or one during the read)
/// stops it at once: the record stays pending, marked incomplete, so `eas down` removes nothing
/// until the next `eas up` completes it. A resumed run whose install was done earlier has
/// nothing left to read.
async fn record(client: &kube::Client, deadline: Duration, shell: &Shell, r: &mut Runner) -> Result<After, Failure> {
    if r.state.ledger.pending.is_none() {
        r.act(PhaseId::Record, None, async { Ok(()) }).await?;
        return Ok(After::Recorded);
    }
    let interrupted = "interrupted (Ctrl-C or SIGTERM) before the cluster was read after the install";
    let end = if r.interrupt.graceful.is_cancelled() {
        r.state.ledger = r.state.ledger.fail(interrupted);
        After::Interrupted
    } else {
        shell.phase("record", "recording what the install created");
        let read = async {
            cluster::snapshot_within(client, CALL, deadline).await.map_err(|e| {
                shell.warn(format!("cannot read the cluster to record what the install created: {e}"));
                Failure::step("record", e)
            })
        };
        match r.act(PhaseId::Record, None, read).await {
            Ok(after) => {
                r.state.ledger = r.state.ledger.complete(&after);
                After::Recorded
            }
            Err(Failure::Interrupted) => {
                r.state.ledger = r.state.ledger.fail(interrupted);
                After::Interrupted
            }
            Err(f) => {
                let why = f.to_string();
                r.state.ledger = r.state.ledger.fail(&why);
                After::Unreadable(why)
            }
        }
    };
    r.save()?;
    Ok(end)
}

/// The decided tree replaces the run's work tree (a clone moves as a directory: its objects are
/// shared with the cache by absolute path).
fn put_in_place(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::rename(from, to)
}

/// Verify's act half: the devices and the model servers, the whole phase in one window of its
/// effective timeout (`--verify-timeout`); past it, a verification failure (exit 5).
async fn verify_phase(
    args: &UpSettings,
    shell: &Shell,
    x: &Ready,
    inv: &Invocation,
    r: &mut Runner,
) -> Result<(), Failure> {
    let expected = Expected {
        device_nodes: verify::devices::recorded_nodes(&x.facts),
        models: super::expected_models(&x.decision),
        fit: super::model_decision(&x.decision),
    };
    crate::state::journal::write_atomic(
        &x.pre.sd.dir().join(EXPECTED_FILE),
        serde_json::to_string_pretty(&expected).expect("json").as_bytes(),
    )
    .map_err(|e| Failure::step("record", e))?;
    let exp = expected.expect();
    let limit = r.timeouts.get(PhaseId::Verify);
    // The whole phase, devices included, within the effective timeout: verify ends itself at
    // that deadline and says what it waited for; the runner's window is the backstop.
    let t = verify::Timeouts {
        devices: limit.min(verify::Timeouts::default().devices),
        models: limit,
        whole: true,
        ..verify::Timeouts::default()
    };
    let _ = args;
    let client = x.pre.target.client.clone();
    let interrupt = r.interrupt.clone();
    let verified = async move {
        tokio::select! {
            v = verify::verify(&client, &exp, &t, shell) => v,
            _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
        }
    };
    match r.act_self(PhaseId::Verify, None, GRACE, verified).await {
        Ok(lines) => {
            for l in &lines {
                shell.note(format!("  ok {l}"));
            }
            Ok(())
        }
        Err(Failure::Interrupted) => {
            if let Some(next) = next_for(&r.state, inv) {
                shell.note(format!("next: {next}"));
            }
            Err(Failure::Interrupted)
        }
        Err(f) => {
            shell.note(format!("next: fix what is named above, then `{}`", inv.verify()));
            Err(f)
        }
    }
}
