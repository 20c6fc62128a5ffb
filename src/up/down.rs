//! `eas down` (SPEC §6): the installer's teardown for the recorded layer, with the components
//! whose teardown would delete something that existed before `eas up` skipped; then the objects
//! the ledger says the run created and are still there; then a report of what is left and why.
//! Safe to run twice: with nothing recorded there is nothing to do.
//!
//! It fails closed. An incomplete ledger (a snapshot that could not be read, a run that died
//! before recording) stops it: nothing is removed, exit 1, unless `--force-incomplete`, which
//! runs the teardown with every guard's `--skip` and still deletes nothing directly. A loss (a
//! pre-existing object gone) or a leftover (a created object still there) keeps the record, and
//! every later `down` exits 1 and repeats it until `--acknowledge`. Nothing is saved or restored:
//! recreating a namespace or a CRD would not bring back what was inside it.

use std::future::Future;
use std::time::Duration;

use crate::bastion;
use crate::bastion::run::{ContainerRunner, DockerRunner, Outcome as RunOutcome, Sink, Stream};
use crate::config::render;
use crate::error::Failure;
use crate::gather;
use crate::installer::command::{shell_line, teardown_argv};
use crate::output::Shell;
use crate::runtime::Interrupt;
use crate::settings::Global;
use crate::state::journal::{DownEntry, State, Status, create_private_dir};
use crate::state::ledger::{Finding, FindingKind, Object, Snapshot, all_guarded_components, guard_teardown};
use crate::state::{StateDir, lock};

use super::{CALL, now, state_root};
use crate::cluster;

const ACK_NEXT: &str = "deal with what is named above, then run `eas down --yes --acknowledge`";

/// How long `down` keeps retrying a cluster snapshot before it stops.
const SNAPSHOT_DEADLINE: Duration = crate::settings::timeouts::LEDGER;

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
    pub image: crate::bastion::BaseImage,
    /// How long the installer's teardown may run
    pub teardown_timeout: Duration,
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

struct Quiet(Vec<u8>);

impl Sink for Quiet {
    fn write(&mut self, _s: Stream, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// `--yes`, or the prompt ([`super::prompt::ask`]). Nothing has been written when this refuses.
async fn confirm(args: &DownSettings, what: &str, interrupt: &Interrupt) -> Result<(), Failure> {
    if args.yes { Ok(()) } else { super::prompt::ask(what, interrupt).await }
}

/// Removes the state directory: everything but the lock while it is held, then the lock.
fn purge(sd: &StateDir, lock: lock::LockGuard) -> Result<(), Failure> {
    let lock_file = sd.lock_file();
    for e in std::fs::read_dir(sd.dir()).map_err(|e| Failure::step("purge", e))? {
        let p = e.map_err(|e| Failure::step("purge", e))?.path();
        if p == lock_file {
            continue;
        }
        let r = if p.is_dir() && !p.is_symlink() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        r.map_err(|e| Failure::step("purge", format!("{}: {e}", p.display())))?;
    }
    drop(lock);
    std::fs::remove_dir(sd.dir()).map_err(|e| Failure::step("purge", format!("{}: {e}", sd.dir().display())))
}

/// Removes the latest attempt's record (`attempt/`), when there is one.
fn clear_attempt(sd: &StateDir) -> Result<(), Failure> {
    let attempt = sd.dir().join(super::ATTEMPT);
    if attempt.exists() {
        std::fs::remove_dir_all(&attempt).map_err(|e| Failure::step("down", format!("{}: {e}", attempt.display())))?;
    }
    Ok(())
}

/// What one `down` needs to run the installer's teardown.
struct Ctx<'a> {
    args: &'a DownSettings,
    global: &'a Global,
    shell: &'a Shell,
    interrupt: &'a Interrupt,
    sd: &'a StateDir,
    docker: bollard::Docker,
    /// The bastion the teardown runs in (`down_image`): the run's own, else its pins'.
    image: super::down_image::TeardownImage,
    /// The kubeconfig for the bastion, with an exec plugin's token minted once for this `down`.
    kube: crate::kubeconfig::KubeSource,
}

impl Ctx<'_> {
    /// The teardown's image tag: the run's own, or the one its kept pins build (or find).
    async fn bastion(&self) -> Result<String, Failure> {
        match &self.image {
            super::down_image::TeardownImage::Recorded { tag } => Ok(tag.clone()),
            super::down_image::TeardownImage::FromPins(pins) => {
                let args = super::image_args(&self.args.image, pins.clone(), self.global);
                let p = bastion::prepare(&self.docker, &args, false, false, self.shell, self.interrupt).await?;
                Ok(p.tag)
            }
        }
    }
}

/// Reads and deletes through the API server stop on SIGINT/SIGTERM; the bastion's runs react
/// to the same token themselves (the container is removed).
async fn cancellable<T>(interrupt: &Interrupt, f: impl Future<Output = Result<T, Failure>>) -> Result<T, Failure> {
    tokio::select! {
        r = f => r,
        _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
    }
}

/// One `eas down` on one record: its settings, the cluster and the record's directory.
struct Scope<'a> {
    args: &'a DownSettings,
    global: &'a Global,
    shell: &'a Shell,
    interrupt: &'a Interrupt,
    sd: &'a StateDir,
    client: &'a kube::Client,
    context: &'a str,
    layer: String,
}

impl Scope<'_> {
    /// What the installer's teardown needs: the Docker Engine and the bastion's kubeconfig.
    async fn ctx(&self, state: &State) -> Result<Ctx<'_>, Failure> {
        let docker = bastion::image::connect(&self.global.env)
            .await
            .map_err(|e| Failure::step_next("down", e, crate::hints::DOCKER))?;
        let minted = async { bastion::minted_source(self.global, self.shell).await.map_err(Failure::from) };
        let kube = cancellable(self.interrupt, minted).await?;
        // The run's image while Docker has it, else the pins the run kept: never today's.
        let present = match super::down_image::recorded(state) {
            Some((tag, _)) => match docker.inspect_image(&tag).await {
                Ok(img) => img.id,
                Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => None,
                Err(e) => return Err(Failure::step_next("down", e, crate::hints::DOCKER)),
            },
            None => None,
        };
        let kept = state.pins_kept.as_ref().map(|k| k.file.clone()).filter(|f| f.exists());
        let (image, line) = super::down_image::choose(state, present.as_deref(), kept, &self.args.pins);
        self.shell.phase("teardown", line);
        Ok(Ctx {
            args: self.args,
            global: self.global,
            shell: self.shell,
            interrupt: self.interrupt,
            sd: self.sd,
            docker,
            kube,
            image,
        })
    }

    /// A snapshot of the cluster, stopped by SIGINT/SIGTERM.
    async fn snapshot(&self) -> Result<Snapshot, Failure> {
        let read = async {
            cluster::snapshot_within(self.client, CALL, SNAPSHOT_DEADLINE).await.map_err(|e| Failure::step("down", e))
        };
        cancellable(self.interrupt, read).await
    }

    /// The cluster once `deleted` has gone from it, or at [`timeouts::SETTLE`] (what is still
    /// there is then reported as left). A namespace stays `Terminating` while its content goes.
    /// Each object still there is awaited by a watch of it (`cluster::gone`, kube-runtime's
    /// `await_condition`), all at once; the wait says what it still waits for as each one goes.
    async fn settled(&self, deleted: &Snapshot) -> Result<Snapshot, Failure> {
        use crate::settings::timeouts;
        use futures::StreamExt;
        let now = self.snapshot().await?;
        let mut still = deleted.intersect(&now).objects();
        if still.is_empty() {
            return Ok(now);
        }
        let first = still.iter().take(3).map(|o| o.to_string()).collect::<Vec<_>>().join(", ");
        self.shell.phase(
            "down",
            format!(
                "waiting up to {}s for {} deleted object(s) to go ({first}{}): namespaces terminate while their \
                 content is removed",
                timeouts::SETTLE.as_secs(),
                still.len(),
                if still.len() > 3 { ", ..." } else { "" }
            ),
        );
        let progress = self.shell.wait("down", timeouts::SETTLE);
        progress.update(&crate::up::down_plan::still_there(&still));
        let mut waits: futures::stream::FuturesUnordered<_> = still
            .iter()
            .cloned()
            .map(|o| async move {
                cluster::gone(self.client, &o).await;
                o
            })
            .collect();
        let all_gone = async {
            while let Some(o) = waits.next().await {
                still.retain(|s| *s != o);
                progress.update(&crate::up::down_plan::still_there(&still));
            }
        };
        // At the deadline what is still there is read and reported as left.
        cancellable(self.interrupt, async {
            let _ = tokio::time::timeout(timeouts::SETTLE, all_gone).await;
            Ok(())
        })
        .await?;
        self.snapshot().await
    }
}

/// The probe pods a killed `--probe-nodes` run left (labelled `io.eas.probe=true`) are eas's own
/// litter: the next real `eas up` or `eas down` deletes them, whatever it then does. A read that
/// fails is a warning: the probe's own sweep tries again.
pub async fn sweep_probes(client: &kube::Client, shell: &Shell, interrupt: &Interrupt) -> Result<(), Failure> {
    let swept = cancellable(interrupt, async { Ok(gather::probe::sweep(client, CALL).await) }).await?;
    match swept {
        Ok(0) => {}
        Ok(n) => shell.phase("probe", format!("deleted {n} probe pod(s) an earlier eas left in kube-system")),
        Err(e) => shell.warn(format!("could not look for probe pods an earlier eas left: {e}")),
    }
    Ok(())
}

async fn down(args: &DownSettings, global: &Global, shell: &Shell) -> Result<Said, Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let (target, key) = cancellable(&interrupt, async {
        let target = gather::target(global, CALL).await?;
        let key = cluster::cluster_key(&target.client, CALL).await.map_err(|e| Failure::step("down", e))?;
        Ok((target, key))
    })
    .await?;
    let sd = StateDir::new(&state_root(global)?, &key)?;
    if !args.dry_run {
        sweep_probes(&target.client, shell, &interrupt).await?;
    }
    let nothing = || format!("nothing recorded for {} in {}: nothing to remove", target.context, sd.dir().display());
    let purgeable = args.purge && sd.dir().exists();
    let records = crate::state::records::Records::read(&sd)?;
    if records.install.is_none() && !purgeable {
        // Nothing was installed: only reads were sent. An attempt's record is cleared (a dry
        // run only says so).
        let line = match records.last_run() {
            Some(l) => format!(
                "nothing was installed on {} by eas up (last attempt: {}, exit {}); nothing to remove",
                target.context,
                l.phase,
                l.exit_code.map_or("-".to_string(), |c| c.to_string())
            ),
            None => nothing(),
        };
        if args.dry_run {
            return Ok(Said::NothingInstalled(line));
        }
        shell.phase("down", line);
        clear_attempt(&sd)?;
        return Ok(Said::Done);
    }
    // The plan half: what would go and what stays, from the record and one read. A dry run
    // prints it and ends; the real run lists it before it asks.
    if args.dry_run || !args.yes {
        let lines = preview(&target, &sd, args, &interrupt).await?;
        if args.dry_run {
            return Ok(Said::Preview(lines));
        }
        for l in &lines {
            shell.note(format!("  {}", crate::text::for_people(l)));
        }
    }
    let what = if args.purge {
        format!("eas down --purge removes the state directory {}", sd.dir().display())
    } else {
        format!("eas down changes the cluster {}", target.context)
    };
    confirm(args, &what, &interrupt).await?;
    let dead = super::crash::dead_holder(&sd.lock_file(), args.break_lock);
    let lock = lock::acquire(&sd.lock_file(), "eas down", &now(), args.break_lock)?;
    // A dead `eas up` may have left its installer running: stopped and removed before anything
    // else, as `eas up --break-lock` does, so the teardown never runs beside it.
    if let Some(holder) = &dead {
        let docker = bastion::image::connect(&global.env)
            .await
            .map_err(|e| Failure::step_next("down", e, crate::hints::DOCKER))?;
        cancellable(&interrupt, super::crash::reap(&docker, holder, shell)).await?;
    }
    let Some(mut state) = State::load(&sd.state_file())? else {
        shell.phase("down", nothing());
        shell.note(format!("purging {}", sd.dir().display()));
        return purge(&sd, lock).map(|()| Said::Done);
    };
    // eas's own run Lease, left by a run that was killed: removed when it is still that object.
    if let Some(line) = cancellable(&interrupt, async {
        Ok(crate::cluster::lease::remove_leftover(&target.client, &state.ledger.own, CALL).await)
    })
    .await?
    {
        shell.note(line);
    }
    let layer = args.layer.clone().unwrap_or_else(|| state.layer.clone());
    let scope = Scope {
        args,
        global,
        shell,
        interrupt: &interrupt,
        sd: &sd,
        client: &target.client,
        context: &target.context,
        layer,
    };
    let started = now();
    let result = match state.ledger.incomplete_reason() {
        Some(reason) => incomplete(&scope, &mut state, &reason).await,
        None => guarded(&scope, &mut state).await,
    };
    match result {
        Ok(()) if args.purge => purge(&sd, lock).map(|()| Said::Done),
        Ok(()) => Ok(Said::Done),
        Err(Failure::Interrupted) => Err(interrupted(&scope, &mut state, &started)),
        Err(f) => Err(f),
    }
}

/// The down's plan half ([`super::down_plan::preview`]): the record, read without the lock, and
/// one snapshot of the cluster.
async fn preview(
    target: &crate::cluster::Target,
    sd: &StateDir,
    args: &DownSettings,
    interrupt: &Interrupt,
) -> Result<Vec<String>, Failure> {
    let Some(state) = State::load(&sd.state_file())? else {
        return Ok(vec![format!("nothing recorded in {}: nothing to remove", sd.dir().display())]);
    };
    let layer = args.layer.clone().unwrap_or_else(|| state.layer.clone());
    let read = async {
        cluster::snapshot_within(&target.client, CALL, SNAPSHOT_DEADLINE).await.map_err(|e| Failure::step("down", e))
    };
    let current = cancellable(interrupt, read).await?;
    let mut lines =
        vec![format!("eas down on {}: layer {layer} (recorded by the run of {})", target.context, state.started)];
    lines.extend(super::down_plan::preview(&state, &current, &layer));
    if args.purge {
        lines.push(format!("purge: the state directory {} (logs, work tree, record)", sd.dir().display()));
    }
    Ok(lines)
}

/// The findings of an earlier `down`, repeated (or acknowledged).
fn earlier_findings(s: &Scope<'_>, state: &State) -> Vec<Finding> {
    let earlier = state.ledger.findings.clone();
    for f in &earlier {
        if s.args.acknowledge {
            s.shell.note(format!("acknowledged: {f}"));
        } else {
            s.shell.warn(format!("{f} (found by an earlier eas down)"));
        }
    }
    earlier
}

/// A SIGINT/SIGTERM stopped this `down`: the record stays as it was (the next `down` starts
/// over from it), and says that a `down` was interrupted.
fn interrupted(s: &Scope<'_>, state: &mut State, started: &str) -> Failure {
    state.down = Some(DownEntry {
        status: Status::Interrupted,
        started: started.to_string(),
        finished: now(),
        message: "interrupted (Ctrl-C or SIGTERM); the record is kept: run eas down again".into(),
    });
    if let Err(e) = state.save(&s.sd.state_file()) {
        return e.into();
    }
    let inv = super::invocation(s.global, &s.layer, &state.env, &crate::settings::Select::default());
    s.shell.note(format!("next: `{} --yes` starts again from the record, which is kept", inv.down()));
    Failure::Interrupted
}

/// An incomplete record: nothing is removed (exit 1), unless `--force-incomplete` runs the
/// teardown with every guard, or `--acknowledge` drops a record whose guarded teardown ran.
async fn incomplete(s: &Scope<'_>, state: &mut State, reason: &str) -> Result<(), Failure> {
    let earlier = earlier_findings(s, state);
    if s.args.acknowledge && !earlier.is_empty() {
        // The teardown already ran with every guard; the user has seen what may be left.
        std::fs::remove_file(s.sd.state_file()).map_err(|e| Failure::step("down", e))?;
        crate::state::since::Completed::forget(s.sd.dir()).map_err(|e| Failure::step("down", e))?;
        s.shell.phase("down", "the incomplete record is dropped");
        return Ok(());
    }
    s.shell.warn(format!("the record is incomplete: {reason}"));
    s.shell.note(format!(
        "  known: {} objects existed before eas up; {} were recorded as created: {}",
        state.ledger.before.objects().len(),
        state.ledger.created.objects().len(),
        list(&state.ledger.created.objects())
    ));
    if !s.args.force_incomplete {
        s.shell.note("  everything on the cluster is treated as pre-existing: nothing was removed");
        return Err(Failure::step_next(
            "down",
            "the record of what eas up created is incomplete; nothing was removed",
            "complete the record by running the same `eas up ... --yes` again (it resumes and records what the install created), or run `eas down --yes --force-incomplete`",
        ));
    }
    force_incomplete(&s.ctx(state).await?, state, &s.layer, reason, s.client).await
}

/// A complete record: the guarded teardown, then what the ledger says the run created and is
/// still there, then the report. The record goes when nothing was lost or left.
async fn guarded(s: &Scope<'_>, state: &mut State) -> Result<(), Failure> {
    let earlier = earlier_findings(s, state);
    let current = s.snapshot().await?;
    let plan = guard_teardown(&state.ledger, &current);
    for p in &plan.protect {
        s.shell.note(format!("protecting {}: existed before eas up; {}", p.object, p.threat.by));
    }
    let ctx = s.ctx(state).await?;
    let teardown_ok = teardown(&ctx, state, &s.layer, &plan.skip_components()).await?;

    // What the ledger says this run created and is still there.
    let after_teardown = s.snapshot().await?;
    let (failures, going) = delete_recorded(&ctx, s.client, &plan.delete.intersect(&after_teardown)).await?;
    let after = s.settled(&going).await?;
    for line in plan.report(&after) {
        s.shell.note(format!("  {line}"));
    }
    let mut findings = if s.args.acknowledge { Vec::new() } else { earlier };
    findings.extend(plan.findings(&after, &now()));
    if teardown_ok && failures.is_empty() && findings.is_empty() {
        // Done: the record goes, so a second `eas down` has nothing to do; so does an attempt
        // made since the install, which would otherwise read as the cluster's last run, and the
        // completed run the next `eas up` would compare with.
        std::fs::remove_file(s.sd.state_file()).map_err(|e| Failure::step("down", e))?;
        clear_attempt(s.sd)?;
        crate::state::since::Completed::forget(s.sd.dir()).map_err(|e| Failure::step("down", e))?;
        s.shell.phase("down", format!("{} removed from {}", s.layer, s.context));
        return Ok(());
    }
    for f in &failures {
        s.shell.warn(f);
    }
    state.ledger.findings = findings;
    state.down = None;
    state.finished = Some(now());
    state.save(&s.sd.state_file())?;
    let (cause, next) = if state.ledger.findings.is_empty() {
        (
            "teardown did not complete; the record is kept",
            "read the log and the lines above, then run `eas down --yes` again",
        )
    } else {
        ("objects were lost or left (named above); the record is kept", ACK_NEXT)
    };
    Err(Failure::step_next("down", cause, next))
}

/// `--force-incomplete`: the teardown with every guard's `--skip`, no deletion by eas itself,
/// and what may be left kept in the record until `--acknowledge`.
async fn force_incomplete(
    ctx: &Ctx<'_>,
    state: &mut State,
    layer: &str,
    reason: &str,
    client: &kube::Client,
) -> Result<(), Failure> {
    let ok = teardown(ctx, state, layer, &all_guarded_components()).await?;
    let snapshot =
        async { cluster::snapshot_within(client, CALL, SNAPSHOT_DEADLINE).await.map_err(|e| Failure::step("down", e)) };
    let current = cancellable(ctx.interrupt, snapshot).await?;
    let t = now();
    let mut found: Vec<Finding> = state
        .ledger
        .created
        .intersect(&current)
        .objects()
        .into_iter()
        .map(|o| Finding {
            kind: FindingKind::MayBeLeft,
            object: o.to_string(),
            note: "created by eas up; the teardown ran with every guard and eas deleted nothing itself".into(),
            found: t.clone(),
        })
        .collect();
    found.push(Finding {
        kind: FindingKind::MayBeLeft,
        object: "anything the run created after its last record".into(),
        note: reason.to_string(),
        found: t,
    });
    for f in &found {
        ctx.shell.warn(f.to_string());
    }
    state.ledger.findings = found;
    state.down = None;
    state.finished = Some(now());
    state.save(&ctx.sd.state_file())?;
    let what = if ok { "the teardown ran with every guard" } else { "the teardown with every guard failed" };
    Err(Failure::step_next("down", format!("{what}; the record is kept"), ACK_NEXT))
}

/// Deletes what the ledger says the run created and the teardown left; the failures. Stops
/// between deletions on SIGINT/SIGTERM.
/// Deletes `left`, in order. The failures, and the namespaces and CRDs deleted: they go only once
/// what they hold has gone, so `eas down` waits for them ([`Scope::settled`]).
async fn delete_recorded(
    ctx: &Ctx<'_>,
    client: &kube::Client,
    left: &Snapshot,
) -> Result<(Vec<String>, Snapshot), Failure> {
    let (mut failures, mut going) = (Vec::new(), Snapshot::default());
    for o in left.objects() {
        let r = match &o {
            Object::HelmRelease(rel) => helm_uninstall(ctx, &rel.namespace, &rel.name).await,
            // A DELETE the API server never answers ends on SIGINT/SIGTERM, not at its timeout.
            other => cluster::delete_object(client, other, CALL, &ctx.interrupt.graceful)
                .await
                .ok_or(Failure::Interrupted)?
                .map_err(|e| e.to_string()),
        };
        match r {
            Err(e) => failures.push(format!("{o}: {e}")),
            Ok(()) => {
                ctx.shell.note(format!("removed {o}"));
                match &o {
                    Object::Namespace(n) => {
                        going.namespaces.insert(n.clone());
                    }
                    Object::Crd(c) => {
                        going.crds.insert(c.clone());
                    }
                    _ => {}
                }
            }
        }
        if ctx.interrupt.graceful.is_cancelled() {
            return Err(Failure::Interrupted);
        }
    }
    Ok((failures, going))
}

fn list(objects: &[Object]) -> String {
    if objects.is_empty() {
        return "none".into();
    }
    objects.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The installer's teardown, in the recorded work tree, with `skip` passed as `--skip`. False
/// when it failed (its log tail is shown). A missing work tree is reported, not an error.
async fn teardown(ctx: &Ctx<'_>, state: &State, layer: &str, skip: &[String]) -> Result<bool, Failure> {
    let (shell, sd) = (ctx.shell, ctx.sd);
    let tree = sd.work_dir().join("eas");
    if !tree.join("env").join(&state.env).exists() {
        shell.warn(format!(
            "the work tree {} is gone: the installer's teardown cannot run; removing what the ledger recorded",
            tree.display()
        ));
        return Ok(true);
    }
    let logs = sd.logs_dir();
    create_private_dir(&logs).map_err(|e| crate::state::io_failure("log", &logs, e))?;
    let log_path = logs.join(format!("down-{}.log", now().replace(':', "")));
    let tag = ctx.bastion().await?;
    let mut argv = teardown_argv(layer, &state.env)?;
    if !skip.is_empty() {
        argv.extend(["--skip".to_string(), skip.join(",")]);
    }
    let overrides = tree.join("env").join(&state.env).join(render::OVERRIDES);
    if overrides.exists() {
        argv.extend([
            "--".to_string(),
            "-e".to_string(),
            format!("@{}/env/{}/{}", bastion::TREE_TARGET, state.env, render::OVERRIDES),
        ]);
    }
    shell.phase("teardown", format!("{} (log: {})", shell_line(&argv), log_path.display()));
    let env = ctx.global.env.lookup();
    let kube = &ctx.kube;
    let std = bastion::standard(&tag, argv, Some(&tree), Some(kube), &env)?;
    let mut spec = std.spec.clone();
    spec.timeout = Some(ctx.args.teardown_timeout);
    let mut sink = Quiet(Vec::new());
    let outcome = DockerRunner::new(ctx.docker.clone()).run(&spec, &mut sink, ctx.interrupt).await;
    let redactor = super::install::redactor(&ctx.global.env);
    let text: String = String::from_utf8_lossy(&sink.0).lines().map(|l| redactor.redact(l) + "\n").collect();
    let _ = std::fs::write(&log_path, &text);
    match outcome.map_err(|e| Failure::step("teardown", e))? {
        RunOutcome::Exited(0) => Ok(true),
        RunOutcome::Interrupted => Err(Failure::Interrupted),
        other => {
            shell.warn(format!("the installer's teardown ended {other:?}; log: {}", log_path.display()));
            for l in text.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev() {
                shell.note(format!("  | {l}"));
            }
            Ok(false)
        }
    }
}

async fn helm_uninstall(ctx: &Ctx<'_>, namespace: &str, name: &str) -> Result<(), String> {
    let (docker, interrupt) = (&ctx.docker, ctx.interrupt);
    let tag = ctx.bastion().await.map_err(|e| e.to_string())?;
    let env = ctx.global.env.lookup();
    let kube = &ctx.kube;
    let argv = ["helm", "uninstall", "--namespace", namespace, name, "--wait", "--timeout", "5m"];
    let std = bastion::standard(&tag, argv.iter().map(|s| s.to_string()).collect(), None, Some(kube), &env)
        .map_err(|e| e.to_string())?;
    let mut spec = std.spec.clone();
    spec.env.push(("KUBECONFIG".into(), bastion::KUBECONFIG_TARGET.into()));
    spec.timeout = Some(Duration::from_secs(600));
    let mut sink = Quiet(Vec::new());
    match DockerRunner::new(docker.clone()).run(&spec, &mut sink, interrupt).await.map_err(|e| e.to_string())? {
        RunOutcome::Exited(0) => Ok(()),
        other => Err(format!("helm uninstall {other:?}: {}", String::from_utf8_lossy(&sink.0).trim())),
    }
}
