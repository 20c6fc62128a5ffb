//! The phases of `eas down` ([`crate::pipeline::down::DownRunner`] runs each in its window): find the record and
//! preview what would go (read only; find checks the cluster lock before any write), then lock,
//! teardown, delete, settle, record and purge.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use crate::act::bastion;
use crate::act::bastion::run::{ContainerRunner, DockerRunner, Outcome as RunOutcome, Sink, Stream};
use crate::config::render;
use crate::error::Failure;
use crate::installer::command::{shell_line, teardown_argv};
use crate::output::Shell;
use crate::runtime::Interrupt;
use crate::settings::Global;
use crate::state::journal::{State, create_private_dir};
use crate::state::ledger::{Finding, FindingKind, Object, Snapshot, TeardownPlan};
use crate::state::{StateDir, lock};
use crate::{cluster, gather};

use crate::cluster::{CALL, Cluster};
use crate::pipeline::down::{DownSettings, image, plan};
use crate::state::run::{now, state_root};

const ACK_NEXT: &str = "deal with what is named above, then run `eas down --yes --acknowledge`";

/// How long `down` keeps retrying a cluster snapshot before it stops.
const SNAPSHOT_DEADLINE: Duration = crate::settings::timeouts::LEDGER;

/// What every phase of one `down` reads: its settings, where it prints, and the run's token.
pub struct Here<'a> {
    pub args: &'a DownSettings,
    pub global: &'a Global,
    pub shell: &'a Shell,
    pub interrupt: &'a Interrupt,
}

/// What the find phase found: nothing installed, or a record to act on.
pub enum Found {
    /// Nothing eas up installed is recorded (this line says so); `sd` may hold an attempt.
    Nothing {
        line: String,
        sd: StateDir,
    },
    Recorded(Box<Recorded>),
}

/// The cluster and the directory of its record.
pub struct Recorded {
    pub target: cluster::Target,
    pub sd: StateDir,
    /// What the lock phase would stop on (another run's lock or Lease), as the dry run lists it.
    pub blockers: Vec<String>,
}

impl Recorded {
    pub fn nothing(&self) -> String {
        format!("nothing recorded for {} in {}: nothing to remove", self.target.context, self.sd.dir().display())
    }
}

/// find: the cluster's identity, its state directory and what it records. A real run first
/// deletes the probe pods an earlier eas left ([`sweep_probes`]).
pub async fn find(h: &Here<'_>) -> Result<Found, Failure> {
    let (target, key) = cancellable(h.interrupt, async {
        let target = gather::target(h.global, CALL).await?;
        let key = target.cluster.cluster_key(CALL).await.map_err(|e| Failure::step(crate::plan::Step::DownRun, e))?;
        Ok((target, key))
    })
    .await?;
    let sd = StateDir::new(&state_root(h.global)?, &key)?;
    // The cluster lock, as `eas up` meets it, before any write (the probe sweep included): the
    // real run refuses on another run's lock or Lease, the dry run lists it.
    let blocked = cancellable(h.interrupt, async {
        Ok(crate::pipeline::phases::lock::blockers(&sd, &target.cluster, h.args.break_lock).await)
    })
    .await?;
    let blockers = blocked.iter().map(|f| f.lines().join("; ")).collect();
    // Without --yes and a terminal the prompt refuses (bad input, exit 2) before anything acts.
    let may_act = !h.args.dry_run && (h.args.yes || std::io::IsTerminal::is_terminal(&std::io::stdin()));
    if may_act && let Some(first) = blocked.into_iter().next() {
        return Err(first);
    }
    if may_act {
        sweep_probes(&target.cluster, h.shell, h.interrupt).await?;
    }
    let found = Recorded { target, sd, blockers };
    let purgeable = h.args.purge && found.sd.dir().exists();
    let records = crate::state::records::Records::read(&found.sd)?;
    if records.install.is_some() || purgeable {
        return Ok(Found::Recorded(Box::new(found)));
    }
    let line = match records.last_run() {
        Some(l) => format!(
            "nothing was installed on {} by eas up (last attempt: {}, exit {}); nothing to remove",
            found.target.context,
            l.phase,
            l.exit_code.map_or("-".to_string(), |c| c.to_string())
        ),
        None => found.nothing(),
    };
    Ok(Found::Nothing { line, sd: found.sd })
}

/// preview ([`plan::preview`]): the record, read without the lock, and one snapshot of the
/// cluster.
pub async fn preview(h: &Here<'_>, found: &Recorded) -> Result<Vec<String>, Failure> {
    let Some(state) = State::load(&found.sd.state_file())? else {
        return Ok(vec![format!("nothing recorded in {}: nothing to remove", found.sd.dir().display())]);
    };
    let layer = h.args.layer.clone().unwrap_or_else(|| state.layer.clone());
    let read = async {
        found
            .target
            .cluster
            .snapshot_within(CALL, SNAPSHOT_DEADLINE)
            .await
            .map_err(|e| Failure::step(crate::plan::Step::DownRun, e))
    };
    let current = cancellable(h.interrupt, read).await?;
    let mut lines =
        vec![format!("eas down on {}: layer {layer} (recorded by the run of {})", found.target.context, state.started)];
    for b in &found.blockers {
        lines.push(format!("stop: {b} (`eas down` exits 1 before any write)"));
    }
    lines.extend(plan::preview(&state, &current, &layer));
    if h.args.purge {
        lines.push(format!("purge: the state directory {} (logs, work tree, record)", found.sd.dir().display()));
    }
    Ok(lines)
}

/// What the lock phase holds: the lock, the cluster's Lease (released when `down` ends), and the
/// record read under it (none: nothing to remove).
pub struct Held {
    pub lock: lock::LockGuard,
    pub lease: cluster::lease::Held,
    pub state: Option<State>,
}

/// lock: this cluster's lock and the cluster's Lease taken as `eas up` takes them
/// (`--break-lock` takes over a dead run's, first stopping and removing the containers it may
/// have left running on this engine, found by the run ids its lock and its Lease name, so the
/// teardown never runs beside them), then the record loaded.
pub async fn lock(h: &Here<'_>, found: &Recorded) -> Result<Held, Failure> {
    let sd = &found.sd;
    let cluster = &found.target.cluster;
    let break_lock = h.args.break_lock;
    let dead = crate::act::reap::dead_holder(&sd.lock_file(), break_lock);
    let lock = lock::acquire(&sd.lock_file(), "eas down", &now(), break_lock)?;
    let docker = if break_lock {
        let d = bastion::image::connect(&h.global.env)
            .await
            .map_err(|e| Failure::step_next(crate::plan::Step::DownRun, e, crate::hints::DOCKER))?;
        Some(d)
    } else {
        None
    };
    let lease_dead = cancellable(
        h.interrupt,
        crate::pipeline::phases::lock::reap_stale_holder(cluster, docker.as_ref(), break_lock, h.shell),
    )
    .await?;
    if let (Some(holder), Some(docker)) = (&dead, &docker)
        && lease_dead.as_deref() != Some(holder.run_id().as_str())
    {
        cancellable(h.interrupt, async { Ok(crate::act::reap::reap(docker, &holder.run_id(), h.shell).await?) })
            .await?;
    }
    let identity = crate::pipeline::phases::lock::identity(&lock.holder);
    let duration = cluster::lease::duration_from(h.global.env.var(crate::pipeline::phases::lock::LEASE_SECS));
    let taken = cancellable(h.interrupt, async {
        let here = &crate::pipeline::phases::lock::holder_here;
        cluster
            .take_lease(&identity, (break_lock, here), CALL, duration)
            .await
            .map_err(|e| Failure::step_next(crate::plan::DownId::Lock, e, "check the API server (`eas doctor`)"))
    })
    .await?;
    let lease = match taken {
        cluster::lease::Taken::Held(held) => held,
        cluster::lease::Taken::Refused(f) => {
            return Err(crate::pipeline::phases::lock::lease_blocker(&f, break_lock).err().unwrap_or_else(|| {
                Failure::step(crate::plan::DownId::Lock, "the cluster's Lease could not be taken")
            }));
        }
    };
    if let Some(id) = &lease_dead {
        h.shell.note(format!("took over the cluster's Lease from the run {id}, which is gone"));
    }
    let state = match State::load(&sd.state_file()) {
        Ok(s) => s,
        Err(e) => {
            lease.release(CALL).await;
            return Err(e.into());
        }
    };
    Ok(Held { lock, lease, state })
}

struct Quiet(Vec<u8>);

impl Sink for Quiet {
    fn write(&mut self, _s: Stream, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// Removes the state directory: everything but the lock while it is held, then the lock.
pub fn purge(sd: &StateDir, lock: lock::LockGuard) -> Result<(), Failure> {
    let lock_file = sd.lock_file();
    for e in std::fs::read_dir(sd.dir()).map_err(|e| Failure::step(crate::plan::DownId::Purge, e))? {
        let p = e.map_err(|e| Failure::step(crate::plan::DownId::Purge, e))?.path();
        if p == lock_file {
            continue;
        }
        let r = if p.is_dir() && !p.is_symlink() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        r.map_err(|e| Failure::step(crate::plan::DownId::Purge, format!("{}: {e}", p.display())))?;
    }
    drop(lock);
    std::fs::remove_dir(sd.dir())
        .map_err(|e| Failure::step(crate::plan::DownId::Purge, format!("{}: {e}", sd.dir().display())))
}

/// Removes the latest attempt's record (`attempt/`), when there is one.
pub fn clear_attempt(sd: &StateDir) -> Result<(), Failure> {
    let attempt = sd.dir().join(crate::pipeline::settings::ATTEMPT);
    if attempt.exists() {
        std::fs::remove_dir_all(&attempt)
            .map_err(|e| Failure::step(crate::plan::Step::DownRun, format!("{}: {e}", attempt.display())))?;
    }
    Ok(())
}

/// What one `down` needs to run the installer's teardown.
pub struct Ctx<'a> {
    args: &'a DownSettings,
    global: &'a Global,
    shell: &'a Shell,
    interrupt: &'a Interrupt,
    fence: &'a cluster::lease::Fence,
    sd: &'a StateDir,
    docker: bollard::Docker,
    /// The bastion the teardown runs in (`down_image`): the run's own, else its pins'.
    image: image::TeardownImage,
    /// The kubeconfig for the bastion, with an exec plugin's token minted once for this `down`.
    kube: crate::kubeconfig::KubeSource,
}

impl Ctx<'_> {
    /// The teardown's image tag: the run's own, or the one its kept pins build (or find).
    async fn bastion(&self) -> Result<String, Failure> {
        match &self.image {
            image::TeardownImage::Recorded { tag } => Ok(tag.clone()),
            image::TeardownImage::FromPins(pins) => {
                let proxy = crate::net::proxy::ProxyEnv::from_lookup(self.global.env.lookup());
                let args = crate::pipeline::settings::image_args(&self.args.image, pins.clone(), self.global, &proxy);
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
pub struct Scope<'a> {
    pub args: &'a DownSettings,
    pub global: &'a Global,
    pub shell: &'a Shell,
    pub interrupt: &'a Interrupt,
    pub sd: &'a StateDir,
    pub cluster: &'a Cluster,
    pub context: &'a str,
    pub layer: String,
    /// The cluster Lease's fence: a lost Lease stops the teardown's container.
    pub fence: &'a cluster::lease::Fence,
}

impl<'a> Scope<'a> {
    pub fn new(h: &Here<'a>, found: &'a Recorded, layer: String, fence: &'a cluster::lease::Fence) -> Scope<'a> {
        Scope {
            args: h.args,
            global: h.global,
            shell: h.shell,
            interrupt: h.interrupt,
            sd: &found.sd,
            cluster: &found.target.cluster,
            context: &found.target.context,
            layer,
            fence,
        }
    }
}

impl Scope<'_> {
    /// What the installer's teardown needs: the Docker Engine and the bastion's kubeconfig.
    pub async fn ctx(&self, state: &State) -> Result<Ctx<'_>, Failure> {
        let docker = bastion::image::connect(&self.global.env)
            .await
            .map_err(|e| Failure::step_next(crate::plan::Step::DownRun, e, crate::hints::DOCKER))?;
        let minted = async { bastion::minted_source(self.global, self.shell).await.map_err(Failure::from) };
        let kube = cancellable(self.interrupt, minted).await?;
        // The run's image while Docker has it, else the pins the run kept: never today's.
        let present = match image::recorded(state) {
            Some((tag, _)) => match docker.inspect_image(&tag).await {
                Ok(img) => img.id,
                Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => None,
                Err(e) => return Err(Failure::step_next(crate::plan::Step::DownRun, e, crate::hints::DOCKER)),
            },
            None => None,
        };
        let kept = state.pins_kept.as_ref().map(|k| k.file.clone()).filter(|f| f.exists());
        let (image, line) = image::choose(state, present.as_deref(), kept, &self.args.pins);
        self.shell.phase("teardown", line);
        Ok(Ctx {
            args: self.args,
            global: self.global,
            shell: self.shell,
            interrupt: self.interrupt,
            fence: self.fence,
            sd: self.sd,
            docker,
            kube,
            image,
        })
    }

    /// A snapshot of the cluster, stopped by SIGINT/SIGTERM.
    pub async fn snapshot(&self) -> Result<Snapshot, Failure> {
        let read = async {
            self.cluster
                .snapshot_within(CALL, SNAPSHOT_DEADLINE)
                .await
                .map_err(|e| Failure::step(crate::plan::Step::DownRun, e))
        };
        cancellable(self.interrupt, read).await
    }

    /// A snapshot of the cluster retried for at most `deadline`, stopped by SIGINT/SIGTERM.
    async fn snapshot_by(&self, deadline: Duration) -> Result<Snapshot, Failure> {
        let deadline = deadline.max(Duration::from_secs(1));
        let read = async {
            self.cluster
                .snapshot_within(CALL.min(deadline), deadline)
                .await
                .map_err(|e| Failure::step(crate::plan::Step::DownRun, e))
        };
        cancellable(self.interrupt, read).await
    }

    /// The cluster once `deleted` has gone from it, or once the settle phase's `window` is all but
    /// spent: its last quarter (at most [`crate::settings::timeouts::LEDGER`]) is kept for the
    /// last read, which reports what is still there as left, a namespace with why (its deletion
    /// conditions, [`Cluster::namespace_left`]). A namespace stays `Terminating` while its content
    /// goes, and its watch may be quiet all that time. Each object still there is awaited by a
    /// watch of it ([`Cluster::gone`]), all at once; the wait says what it still waits for as each
    /// one goes. A wait the API server refuses is a warning: the last read decides.
    pub async fn settled(&self, deleted: &Snapshot, window: Duration) -> Result<Settled, Failure> {
        use futures::StreamExt;
        let start = tokio::time::Instant::now();
        let reserve = (window / 4).min(crate::settings::timeouts::LEDGER);
        let wait_end = window.saturating_sub(reserve);
        let now = self.snapshot_by(wait_end).await?;
        let mut still = deleted.intersect(&now).objects();
        if still.is_empty() {
            return Ok(Settled { after: now, why: BTreeMap::new() });
        }
        let budget = wait_end.saturating_sub(start.elapsed());
        let first = still.iter().take(3).map(|o| o.to_string()).collect::<Vec<_>>().join(", ");
        self.shell.phase(
            "down",
            format!(
                "waiting up to {}s for {} deleted object(s) to go ({first}{}): namespaces terminate while their \
                 content is removed",
                budget.as_secs(),
                still.len(),
                if still.len() > 3 { ", ..." } else { "" }
            ),
        );
        let progress = self.shell.wait("down", budget);
        progress.update(&plan::still_there(&still));
        let mut waits: futures::stream::FuturesUnordered<_> = still
            .iter()
            .cloned()
            .map(|o| async move {
                let r = self.cluster.gone(&o).await;
                (o, r)
            })
            .collect();
        let all_gone = async {
            while let Some((o, r)) = waits.next().await {
                match r {
                    Ok(()) => {
                        still.retain(|s| *s != o);
                        progress.update(&plan::still_there(&still));
                    }
                    Err(e) => self.shell.warn(format!("cannot wait for {o} to go: {e}")),
                }
            }
        };
        // At the end of the wait what is still there is read and reported as left.
        cancellable(self.interrupt, async {
            let _ = tokio::time::timeout(budget, all_gone).await;
            Ok(())
        })
        .await?;
        let left = window.saturating_sub(start.elapsed());
        let after = self.snapshot_by(left.saturating_sub(reserve / 4)).await?;
        let mut why = BTreeMap::new();
        for n in &deleted.intersect(&after).namespaces {
            let t = CALL.min(window.saturating_sub(start.elapsed()).max(Duration::from_secs(1)));
            let read = async { Ok(self.cluster.namespace_left(n, t).await) };
            let said = match cancellable(self.interrupt, read).await? {
                Ok(Some(w)) => w,
                Ok(None) => continue,
                Err(e) => format!("its status could not be read: {e}"),
            };
            why.insert(Object::Namespace(n.clone()).to_string(), said);
        }
        Ok(Settled { after, why })
    }

    /// The findings of an earlier `down`, repeated (or acknowledged).
    pub fn earlier_findings(&self, state: &State) -> Vec<Finding> {
        let earlier = state.ledger.findings.clone();
        for f in &earlier {
            if self.args.acknowledge {
                self.shell.note(format!("acknowledged: {f}"));
            } else {
                self.shell.warn(format!("{f} (found by an earlier eas down)"));
            }
        }
        earlier
    }

    /// record, for an incomplete record whose teardown with every guard already ran, once
    /// `--acknowledge`d: the record is dropped.
    pub fn drop_incomplete(&self) -> Result<(), Failure> {
        std::fs::remove_file(self.sd.state_file()).map_err(|e| Failure::step(crate::plan::Step::DownRun, e))?;
        crate::state::since::Completed::forget(self.sd.dir())
            .map_err(|e| Failure::step(crate::plan::Step::DownRun, e))?;
        self.shell.phase("down", "the incomplete record is dropped");
        Ok(())
    }

    /// An incomplete record: nothing is removed (exit 1) unless `--force-incomplete`.
    pub fn refuse_incomplete(&self, state: &State, reason: &str) -> Result<(), Failure> {
        self.shell.warn(format!("the record is incomplete: {reason}"));
        self.shell.note(format!(
            "  known: {} objects existed before eas up; {} were recorded as created: {}",
            state.ledger.before.objects().len(),
            state.ledger.created.objects().len(),
            list(&state.ledger.created.objects())
        ));
        if self.args.force_incomplete {
            return Ok(());
        }
        self.shell.note("  everything on the cluster is treated as pre-existing: nothing was removed");
        Err(Failure::step_next(
            crate::plan::Step::DownRun,
            "the record of what eas up created is incomplete; nothing was removed",
            "complete the record by running the same `eas up ... --yes` again (it resumes and records what the install created), or run `eas down --yes --force-incomplete`",
        ))
    }

    /// record, after a guarded teardown: what is left and why; the record goes when nothing was
    /// lost or left, else it is kept with what was found, and `down` exits 1.
    pub fn report(
        &self,
        state: &mut State,
        plan: &TeardownPlan,
        settled: &Settled,
        teardown_ok: bool,
        failures: &[String],
        earlier: Vec<Finding>,
    ) -> Result<(), Failure> {
        let after = &settled.after;
        for line in plan.report(after) {
            self.shell.note(format!("  {}", settled.explain(&line)));
        }
        let mut findings = if self.args.acknowledge { Vec::new() } else { earlier };
        let mut found = plan.findings(after, &now());
        for f in found.iter_mut().filter(|f| f.kind == FindingKind::Left) {
            if let Some(w) = settled.why.get(&f.object) {
                f.note = format!("created by eas up, {w}");
            }
        }
        findings.extend(found);
        if teardown_ok && failures.is_empty() && findings.is_empty() {
            // Done: the record goes, so a second `eas down` has nothing to do; so does an
            // attempt made since the install, which would otherwise read as the cluster's last
            // run, and the completed run the next `eas up` would compare with.
            std::fs::remove_file(self.sd.state_file()).map_err(|e| Failure::step(crate::plan::Step::DownRun, e))?;
            clear_attempt(self.sd)?;
            crate::state::since::Completed::forget(self.sd.dir())
                .map_err(|e| Failure::step(crate::plan::Step::DownRun, e))?;
            self.shell.phase("down", format!("{} removed from {}", self.layer, self.context));
            return Ok(());
        }
        for f in failures {
            self.shell.warn(f);
        }
        state.ledger.findings = findings;
        state.down = None;
        state.finished = Some(now());
        state.save(&self.sd.state_file())?;
        let (cause, next) = if state.ledger.findings.is_empty() {
            (
                "teardown did not complete; the record is kept",
                "read the log and the lines above, then run `eas down --yes` again",
            )
        } else {
            ("objects were lost or left (named above); the record is kept", ACK_NEXT)
        };
        Err(Failure::step_next(crate::plan::Step::DownRun, cause, next))
    }
}

/// What the settle phase found: the cluster after the wait, and why each namespace still there
/// is (keyed by the object as the report names it).
pub struct Settled {
    pub after: Snapshot,
    pub why: BTreeMap<String, String>,
}

impl Settled {
    /// A report line (`left: namespace x: created by eas up, still present ...`), with why the
    /// object is still there in place of the guess, when it is known.
    fn explain(&self, line: &str) -> String {
        let Some(rest) = line.strip_prefix("left: ") else { return line.to_string() };
        match self.why.iter().find(|(o, _)| rest.starts_with(&format!("{o}: "))) {
            Some((o, w)) => format!("left: {o}: created by eas up, {w}"),
            None => line.to_string(),
        }
    }
}

/// The probe pods a killed `--probe-nodes` run left (labelled `io.eas.probe=true`) are eas's own
/// litter: the next real `eas up` or `eas down` deletes them, whatever it then does. A read that
/// fails is a warning: the probe's own sweep tries again.
pub async fn sweep_probes(cluster: &Cluster, shell: &Shell, interrupt: &Interrupt) -> Result<(), Failure> {
    let swept = cancellable(interrupt, async { Ok(gather::probe::sweep(cluster, CALL).await) }).await?;
    match swept {
        Ok(0) => {}
        Ok(n) => shell.phase("probe", format!("deleted {n} probe pod(s) an earlier eas left in kube-system")),
        Err(e) => shell.warn(format!("could not look for probe pods an earlier eas left: {e}")),
    }
    Ok(())
}

/// record, after `--force-incomplete`'s teardown with every guard's `--skip`: eas deleted
/// nothing itself, and what may be left is kept in the record until `--acknowledge`.
pub async fn forced_record(
    ctx: &Ctx<'_>,
    s: &Scope<'_>,
    state: &mut State,
    ok: bool,
    reason: &str,
) -> Result<(), Failure> {
    let current = s.snapshot().await?;
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
    Err(Failure::step_next(crate::plan::Step::DownRun, format!("{what}; the record is kept"), ACK_NEXT))
}

/// Deletes what the ledger says the run created and the teardown left; the failures. Stops
/// between deletions on SIGINT/SIGTERM.
/// Deletes `left`, in order. The failures, and the namespaces and CRDs deleted: they go only once
/// what they hold has gone, so `eas down` waits for them ([`Scope::settled`]).
pub async fn delete_recorded(
    ctx: &Ctx<'_>,
    cluster: &Cluster,
    left: &Snapshot,
) -> Result<(Vec<String>, Snapshot), Failure> {
    let (mut failures, mut going) = (Vec::new(), Snapshot::default());
    for o in left.objects() {
        let r = match &o {
            Object::HelmRelease(rel) => helm_uninstall(ctx, &rel.namespace, &rel.name).await,
            // A DELETE the API server never answers ends on SIGINT/SIGTERM, not at its timeout.
            other => cluster
                .delete_object(other, CALL, &ctx.interrupt.graceful)
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
pub async fn teardown(ctx: &Ctx<'_>, state: &State, layer: &str, skip: &[String]) -> Result<bool, Failure> {
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
    create_private_dir(&logs).map_err(|e| crate::state::run::io_failure(crate::plan::Step::Log, &logs, e))?;
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
    let (fenced, watch) = crate::act::install::fenced(ctx.interrupt, Some(ctx.fence));
    let outcome = DockerRunner::new(ctx.docker.clone()).run(&spec, &mut sink, &fenced).await;
    watch.abort();
    let redactor = crate::act::install::redactor(&ctx.global.env);
    let text: String = String::from_utf8_lossy(&sink.0).lines().map(|l| redactor.redact(l) + "\n").collect();
    let _ = std::fs::write(&log_path, &text);
    match outcome.map_err(|e| Failure::step(crate::plan::DownId::Teardown, e))? {
        RunOutcome::Exited(0) => Ok(true),
        RunOutcome::Interrupted => match ctx.fence.lost() {
            Some(lost) => Err(Failure::step_next(
                crate::plan::DownId::Teardown,
                format!("{lost}; the teardown's container was stopped; log: {}", log_path.display()),
                "run `eas down --yes` again once no other run holds the cluster: the record is kept",
            )),
            None => Err(Failure::Interrupted),
        },
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
