//! What every phase of `eas down` reads ([`Cx`]: its settings, the host's kubeconfig and proxy
//! resolved once, the Docker Engine connected at most once) and `eas down`'s table for the one
//! runner ([`Down`]): each phase says its line as it acts, and the journal is the record the run
//! removes, which says how a `down` that SIGINT/SIGTERM stopped, or whose phase outlived its
//! window, ended.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::Cluster;
use crate::error::Failure;
use crate::kubeconfig::KubeSource;
use crate::net::proxy::ProxyEnv;
use crate::output::Shell;
use crate::plan::{DownId, DownTimeouts, Step};
use crate::runtime::Interrupt;
use crate::settings::Global;
use crate::state::journal::{DownEntry, State, Status};

use crate::pipeline::runner::{OpenJournal, Runner, Table};
use crate::state::run::now;

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
    /// Each phase's window: `--teardown-timeout` for the teardown (which stops itself at it),
    /// `--phase-timeout NAME=SECS` for the others (for tests), else the table's.
    pub timeouts: DownTimeouts,
    /// Where each of these that is not a default came from (the preview names it).
    pub sources: crate::settings::source::Sources,
}

impl DownSettings {
    /// The layer whose teardown runs: `--layer`, else the one the record names. Decided here only:
    /// the preview, the removal and the resume line name the same layer.
    pub fn layer_of(&self, state: &State) -> String {
        self.layer.clone().unwrap_or_else(|| state.layer.clone())
    }
}

/// What every phase of one `down` reads. The host's kubeconfig source and proxy settings are
/// resolved once, before the first phase; the Docker Engine is connected the first time a phase
/// needs it (`--break-lock`'s reaping, the teardown), and only once.
pub struct Cx<'a> {
    pub args: &'a DownSettings,
    pub global: &'a Global,
    pub shell: &'a Shell,
    pub interrupt: &'a Interrupt,
    pub kube: KubeSource,
    pub proxy: ProxyEnv,
    docker: tokio::sync::OnceCell<bollard::Docker>,
    /// The cluster find reached, from find on.
    target: std::sync::OnceLock<crate::cluster::Target>,
}

impl<'a> Cx<'a> {
    pub fn new(args: &'a DownSettings, global: &'a Global, shell: &'a Shell, interrupt: &'a Interrupt) -> Cx<'a> {
        let (proxy, kube) = crate::pipeline::services::Services::host(global);
        Cx { args, global, shell, interrupt, kube, proxy, docker: Default::default(), target: Default::default() }
    }

    /// Find: the cluster it reached (once; a second call changes nothing).
    pub fn found(&self, target: crate::cluster::Target) {
        let _ = self.target.set(target);
    }

    /// The cluster find reached, for a phase to read and write through.
    pub fn cluster(&self) -> Result<&Cluster, Failure> {
        let missing = || Failure::step(Step::DownRun, "the cluster was not reached before this phase");
        self.target.get().map(|t| &t.cluster).ok_or_else(missing)
    }

    /// The Docker Engine, connected on first use.
    pub async fn docker(&self) -> Result<&bollard::Docker, Failure> {
        let connect = || async {
            crate::act::bastion::image::connect(&self.global.env)
                .await
                .map_err(|e| Failure::step_next(Step::DownRun, e, crate::hints::DOCKER))
        };
        self.docker.get_or_try_init(connect).await
    }
}

/// `eas down`'s table ([`crate::plan::DOWN_PHASES`]) for the runner.
pub struct Down;

/// The record a `down` acts on, once the lock phase loaded it under the lock.
pub struct Loaded {
    pub state: State,
    /// Where it is saved (`state.json` in the cluster's state directory).
    pub file: PathBuf,
    /// When the phases that act on it began.
    pub started: String,
}

impl Table for Down {
    type Id = DownId;
    type Cx<'a> = Cx<'a>;
    type Plan = ();
    /// The record, from the lock phase on (none before, or when nothing is recorded).
    type Journal = Option<Loaded>;
    type Own = ();

    fn says(id: DownId) -> String {
        id.spec().says.into()
    }

    fn timed_out(id: DownId, limit: Duration) -> Failure {
        timed_out(id, limit)
    }

    /// `eas down` has no plan halves: each phase says its line as it acts.
    fn begin(_r: &mut Runner<Down>, id: DownId, says: &str, cx: &Cx<'_>) -> Result<(), Failure> {
        cx.shell.phase(id.name(), says);
        Ok(())
    }

    /// A `down` that SIGINT/SIGTERM stopped, or whose phase outlived its window: the record stays
    /// as it was (the next `down` starts over from it) and says how this `down` ended. Any other
    /// failure leaves the record as its phase wrote it.
    fn end<V>(r: &mut Runner<Down>, _id: DownId, result: Result<V, Failure>, late: bool) -> Result<V, Failure> {
        let f = match result {
            Ok(v) => return Ok(v),
            Err(f) => f,
        };
        let (status, message) = match (&f, late) {
            (Failure::Interrupted, _) => (
                Status::Interrupted,
                "interrupted (Ctrl-C or SIGTERM); the record is kept: run eas down again".to_string(),
            ),
            (f, true) => (Status::Failed, format!("{f}; the record is kept: run eas down again")),
            (_, false) => return Err(f),
        };
        let Some(Loaded { state, file, started }) = r.record_mut().as_mut() else { return Err(f) };
        state.down = Some(DownEntry { status, started: started.clone(), finished: now(), message });
        match state.save(file) {
            Ok(()) => Err(f),
            Err(e) => Err(e.into()),
        }
    }

    fn ends(_r: &mut Runner<Down>, f: Failure) -> Failure {
        f
    }
}

/// Its phases own the record whole: the lock phase loads it, the record phase writes it.
impl OpenJournal for Down {}

impl Runner<Down> {
    /// `eas down`'s runner: the effective windows and the run's token; no record until the lock
    /// phase loads one.
    pub fn down(timeouts: DownTimeouts, interrupt: Interrupt) -> Runner<Down> {
        Runner::with(None, (), timeouts, interrupt, ())
    }

    /// The phases a real `down` acts in, with their effective timeouts, as the preview prints them.
    pub fn acts(&self, purge: bool) -> String {
        let acts = crate::plan::DOWN_PHASES
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

/// What is left of the window the calling phase runs in, as the runner hands it
/// ([`crate::pipeline::runner::deadline`]): what a phase budgets its waits against, never its
/// row's timeout. At least a second (outside a window, where there is no deadline, that is all).
pub fn left() -> Duration {
    crate::pipeline::runner::deadline()
        .map_or(Duration::ZERO, |d| d.saturating_duration_since(tokio::time::Instant::now()))
        .max(Duration::from_secs(1))
}

/// Reads and deletes through the API server stop on SIGINT/SIGTERM; the bastion's runs react
/// to the same token themselves (the container is removed).
pub async fn cancellable<T>(interrupt: &Interrupt, f: impl Future<Output = Result<T, Failure>>) -> Result<T, Failure> {
    tokio::select! {
        r = f => r,
        _ = interrupt.graceful.cancelled() => Err(Failure::Interrupted),
    }
}

/// How long `down` keeps retrying a cluster snapshot before it stops.
pub const SNAPSHOT_DEADLINE: Duration = crate::settings::timeouts::LEDGER;

/// A snapshot of the cluster retried for at most `deadline`, stopped by SIGINT/SIGTERM.
pub async fn snapshot(
    cluster: &Cluster,
    interrupt: &Interrupt,
    deadline: Duration,
) -> Result<crate::state::ledger::Snapshot, Failure> {
    let call = crate::cluster::CALL.min(deadline);
    let read = async { cluster.snapshot_within(call, deadline).await.map_err(|e| Failure::step(Step::DownRun, e)) };
    cancellable(interrupt, read).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::output::{ProgressMode, Terminal};
    use crate::pipeline::runner::Phase;

    /// `eas down`'s settings as the flags leave them by default (`--yes`).
    pub(crate) fn settings() -> DownSettings {
        DownSettings {
            dry_run: false,
            layer: None,
            yes: true,
            purge: false,
            acknowledge: false,
            force_incomplete: false,
            break_lock: false,
            pins: crate::pins::Source::Builtin,
            image: Default::default(),
            timeouts: DownTimeouts::set([(DownId::Teardown, Duration::from_secs(600))]),
            sources: Default::default(),
        }
    }

    pub fn plain() -> Shell {
        let term = Terminal { stderr_is_tty: false, ci: true, no_color_env: true };
        Shell::new(ProgressMode::Plain, &term, true, 0, true)
    }

    /// A phase of `eas down` that answers, fails, or never ends (`None`).
    struct Test<const N: u8>(Option<Result<u32, Failure>>);

    const fn id(n: u8) -> DownId {
        crate::plan::DOWN_PHASES[n as usize].id
    }

    const TEARDOWN: u8 = 3;
    const DELETE: u8 = 4;
    const SETTLE: u8 = 5;
    const RECORD: u8 = 6;

    impl<const N: u8> Phase<Down> for Test<N> {
        const ID: DownId = id(N);
        type Planned = ();
        type Done = u32;
        fn says(&self, _cx: &Cx<'_>) -> String {
            "testing".into()
        }
        async fn act(&mut self, (): (), _cx: &Cx<'_>, _r: &mut Runner<Down>) -> Result<u32, Failure> {
            match self.0.take() {
                Some(r) => r,
                None => std::future::pending().await,
            }
        }
    }

    #[test]
    fn the_test_phases_are_the_phases_they_name() {
        assert_eq!(
            [id(TEARDOWN), id(DELETE), id(SETTLE), id(RECORD)],
            [DownId::Teardown, DownId::Delete, DownId::Settle, DownId::Record]
        );
    }

    fn runner(set: &[(DownId, Duration)]) -> Runner<Down> {
        Runner::down(DownTimeouts::set(set.iter().copied()), Interrupt::default())
    }

    #[tokio::test]
    async fn a_down_phase_past_its_window_ends_naming_it_and_is_remembered() {
        let (args, global, shell, interrupt) = (settings(), Global::default(), plain(), Interrupt::default());
        let cx = Cx::new(&args, &global, &shell, &interrupt);
        let mut r = runner(&[(DownId::Settle, Duration::ZERO)]);
        let e = r.act_phase(Test::<SETTLE>(None), (), &cx).await.unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("phase settle of eas down did not finish within its timeout of 0 s"), "{e}");
        assert_eq!(r.act_phase(Test::<RECORD>(Some(Ok(7))), (), &cx).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn an_interrupted_down_phase_ends_with_130_and_no_timeout() {
        let (args, global, shell, interrupt) = (settings(), Global::default(), plain(), Interrupt::default());
        let cx = Cx::new(&args, &global, &shell, &interrupt);
        let mut r = runner(&[]);
        r.interrupt().graceful.cancel();
        let e = r.act_phase(Test::<DELETE>(None), (), &cx).await.unwrap_err();
        assert_eq!(e.exit_code(), 130);
    }

    /// Not ended by the token: the teardown removes its own container on it, and its window is
    /// a backstop past `--teardown-timeout`.
    #[tokio::test]
    async fn the_teardown_stops_itself_so_its_window_is_a_backstop_past_teardown_timeout() {
        struct Slow;
        impl Phase<Down> for Slow {
            const ID: DownId = DownId::Teardown;
            const STOPS_ITSELF: bool = true;
            type Planned = ();
            type Done = u32;
            fn says(&self, _cx: &Cx<'_>) -> String {
                "slow".into()
            }
            async fn act(&mut self, (): (), _cx: &Cx<'_>, _r: &mut Runner<Down>) -> Result<u32, Failure> {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(1)
            }
        }
        let (args, global, shell, interrupt) = (settings(), Global::default(), plain(), Interrupt::default());
        let cx = Cx::new(&args, &global, &shell, &interrupt);
        let mut r = runner(&[(DownId::Teardown, Duration::ZERO)]);
        r.interrupt().graceful.cancel();
        assert_eq!(r.act_phase(Slow, (), &cx).await.unwrap(), 1);
        assert_eq!(r.limit(DownId::Teardown), Duration::ZERO);
    }

    #[tokio::test]
    async fn the_runner_journals_how_a_down_ended_and_leaves_other_failures_to_their_phase() {
        let (_dir, file) = crate::testing::temp_path("state.json");
        let (args, global, shell, interrupt) = (settings(), Global::default(), plain(), Interrupt::default());
        let cx = Cx::new(&args, &global, &shell, &interrupt);
        let mut r = runner(&[(DownId::Delete, Duration::ZERO)]);
        // Before the lock phase loaded a record there is nothing to journal into.
        let e = r.act_phase(Test::<DELETE>(None), (), &cx).await.unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(!file.exists());
        *r.record_mut() =
            Some(Loaded { state: State::sample("2026-01-01T00:00:00Z"), file: file.clone(), started: "t0".into() });
        // A failure of its own (a leftover, say) is the phase's: nothing is journaled.
        let own = Failure::step_next(Step::DownRun, "objects were lost or left", "--acknowledge");
        assert_eq!(r.act_phase(Test::<RECORD>(Some(Err(own))), (), &cx).await.unwrap_err().exit_code(), 1);
        assert!(!file.exists());
        // A phase past its window: failed, saved, naming it.
        let late = r.act_phase(Test::<DELETE>(None), (), &cx).await.unwrap_err();
        assert_eq!(late.exit_code(), 1);
        let saved = State::load(&file).unwrap().unwrap().down.unwrap();
        assert_eq!((saved.status, saved.started.as_str()), (Status::Failed, "t0"));
        assert!(saved.message.contains("phase delete of eas down did not finish"), "{}", saved.message);
        // An interruption: interrupted, saved.
        r.interrupt().graceful.cancel();
        let e = r.act_phase(Test::<SETTLE>(None), (), &cx).await.unwrap_err();
        assert_eq!(e.exit_code(), 130);
        assert_eq!(State::load(&file).unwrap().unwrap().down.unwrap().status, Status::Interrupted);
    }

    #[test]
    fn the_preview_lists_each_act_with_its_effective_window() {
        let r = Runner::down(settings().timeouts, Interrupt::default());
        let line = r.acts(false);
        assert!(line.starts_with("phases: lock (2 min), teardown (10 min), delete (20 min), settle ("), "{line}");
        assert!(!line.contains("find") && !line.contains("preview") && !line.contains("purge"), "{line}");
        assert!(r.acts(true).ends_with("purge (1 min)"), "{}", r.acts(true));
    }
}
