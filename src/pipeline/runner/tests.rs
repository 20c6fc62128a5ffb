//! The runner's unit tests, and the fixtures the phases' tests share (a runner, a state
//! directory, the desktop facts, the settings and services a phase reads).

use super::*;
use crate::output::{ProgressMode, Shell, Terminal};
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::settings::UpSettings;
use crate::plan::{Blocker, PhaseTimeouts};
use crate::plan::{PhaseId, Plan};
use crate::state::journal::{State, Status};

pub(crate) fn runner(t: PhaseTimeouts) -> Runner {
    let plan = Plan::new(&t);
    Runner::new(State::sample("2026-01-01T00:00:00Z"), plan, t, Interrupt::default())
}

/// A line in the plan's warnings, as a log of what the test phases did: under one phase's key,
/// so the lines keep the order they were said in.
fn say(r: &mut Runner, line: String) {
    r.plan_part(PhaseId::Lock).warnings([line]);
}

/// A phase whose halves do what the test says: never end, fail, or answer.
struct Test<const ID: u8> {
    plan: Option<Result<u32, Failure>>,
    act: Option<Result<u32, Failure>>,
}

fn id(n: u8) -> PhaseId {
    crate::plan::PHASES[n as usize].id
}

impl<const N: u8> Phase for Test<N> {
    const ID: PhaseId = crate::plan::PHASES[N as usize].id;
    type Planned = u32;
    type Done = u32;
    fn says(&self, _cx: &Cx<'_>) -> String {
        "testing".into()
    }
    async fn plan(&mut self, _cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<u32, NoPlan> {
        match self.plan.take() {
            Some(r) => r.map_err(NoPlan::from),
            None => std::future::pending().await,
        }
    }
    async fn act(&mut self, _p: u32, _cx: &Cx<'_>, _r: &mut Runner) -> Result<u32, Failure> {
        match self.act.take() {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }
    /// Says it cleaned up, in the plan's warnings.
    fn cleanup(r: &mut Runner) -> std::pin::Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(async move { say(r, format!("cleaned up {}", Self::ID)) })
    }
}

/// A phase's row in the table, found by its id: a row added or moved does not shift the
/// test phases onto other ids.
const fn row(id: PhaseId) -> u8 {
    let mut i = 0;
    while i < crate::plan::PHASES.len() {
        if crate::plan::PHASES[i].id as u8 == id as u8 {
            return i as u8;
        }
        i += 1;
    }
    panic!("every phase has a row")
}

const INSTALL: u8 = row(PhaseId::Install);
const VERIFY: u8 = row(PhaseId::Verify);
const PREPARE: u8 = row(PhaseId::Prepare);
const BASTION: u8 = row(PhaseId::Bastion);
const FACTS: u8 = row(PhaseId::Facts);

fn stalled<const N: u8>() -> Test<N> {
    Test { plan: None, act: None }
}

/// A state directory for cluster `cluster-key` under a new temporary root (kept while the
/// root lives).
pub(crate) fn state_dir() -> (tempfile::TempDir, crate::state::StateDir) {
    let root = tempfile::tempdir().unwrap();
    let sd = crate::state::StateDir::new(root.path(), "cluster-key").unwrap();
    (root, sd)
}

/// The facts of the desktop fixture (fixtures/config/desktop-i9).
pub(crate) fn desktop_facts() -> crate::facts::Facts {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
    crate::facts::Facts::read(&path).unwrap()
}

/// The settings, shell and pins a phase reads.
pub(crate) struct Fixture {
    pub(crate) args: UpSettings,
    pub(crate) global: crate::settings::Global,
    shell: Shell,
    pub(crate) services: crate::pipeline::services::Services,
    tree_pins: crate::pins::Trees,
    inv: crate::state::resume::Invocation,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let args = UpSettings {
            dry_run: false,
            fail_on_blockers: false,
            offline: true,
            allow_unread: vec![],
            select: crate::settings::Select::default(),
            env: "k3d-gpu".into(),
            out: None,
            plan: None,
            saved: None,
            output: crate::output::OutputFormat::Text,
            explain: false,
            yes: true,
            break_lock: false,
            reinstall: false,
            repos: Default::default(),
            image: Default::default(),
            gather: Default::default(),
            ledger_timeout: Duration::from_secs(1),
            phase_timeouts: PhaseTimeouts::default(),
            sources: Default::default(),
        };
        let term = Terminal { stderr_is_tty: false, ci: true, no_color_env: true };
        let shell = Shell::new(ProgressMode::Plain, &term, true, 0, true);
        // The state directory's free-space minimum is a blocker of the lock's plan half: a test's
        // outcome does not hang on this machine's free disk (room's own tests check the minimum).
        let env = crate::settings::Env::of(&[(crate::state::room::MIN_FREE_VAR, "1")]);
        let global = crate::settings::Global { env, ..Default::default() };
        let services = crate::pipeline::services::Services::resolve(&args.select, &global).expect("the built-in pins");
        let tree_pins = crate::config::trees_in(&services.pins, &args.select).expect("the built-in pins");
        let inv = Default::default();
        Fixture { args, global, shell, services, tree_pins, inv }
    }

    /// The fixture whose run reached the cluster `fake` serves (as preflight's plan half hands it
    /// the services).
    pub(crate) fn on(fake: &crate::cluster::fake::Fake) -> Fixture {
        let f = Fixture::new();
        f.services.found(crate::pipeline::phases::preflight::sample_target(fake.cluster()));
        f
    }

    pub(crate) fn cx(&self) -> Cx<'_> {
        Cx {
            args: &self.args,
            global: &self.global,
            shell: &self.shell,
            inv: &self.inv,
            services: &self.services,
            tree_pins: &self.tree_pins,
        }
    }
}

/// The runner hands the half its window's deadline; outside a window there is none.
#[tokio::test]
async fn a_half_reads_the_deadline_of_its_window() {
    assert_eq!(deadline(), None);
    let before = tokio::time::Instant::now();
    let limit = Duration::from_secs(30);
    let seen = window(limit, false, &Interrupt::default(), async { Ok(deadline()) }, || Failure::Interrupted).await;
    let seen = seen.unwrap().expect("a deadline inside the window");
    assert!(seen >= before + limit && seen <= tokio::time::Instant::now() + limit, "{seen:?}");
    assert_eq!(deadline(), None);
}

#[test]
fn the_test_phases_are_the_phases_they_name() {
    assert_eq!((id(INSTALL), id(VERIFY), id(PREPARE)), (PhaseId::Install, PhaseId::Verify, PhaseId::Prepare));
    assert_eq!((id(BASTION), id(FACTS)), (PhaseId::Bastion, PhaseId::Facts));
}

#[tokio::test]
async fn an_act_half_past_its_effective_timeout_is_recorded_failed_naming_the_phase() {
    let t = PhaseTimeouts::resolve(Some(0), None, &[]).unwrap();
    let (mut r, f) = (runner(t), Fixture::new());
    let e = r.act_phase(stalled::<INSTALL>(), 1, &f.cx()).await.unwrap_err();
    assert_eq!(e.exit_code(), 1);
    assert!(e.to_string().contains("phase install did not finish within its timeout of 0 s"), "{e}");
    assert_eq!(r.state.entry(PhaseId::Install).status, Status::Failed);
    assert_eq!(r.state.exit_code, Some(1));
    assert_eq!(r.plan.phases().iter().find(|p| p.name == "install").unwrap().timeout_secs, 0);
}

#[tokio::test]
async fn verify_past_its_timeout_is_a_verification_failure() {
    let (mut r, f) = (runner(PhaseTimeouts::resolve(None, Some(0), &[]).unwrap()), Fixture::new());
    let e = r.act_phase(stalled::<VERIFY>(), 1, &f.cx()).await.unwrap_err();
    assert_eq!(e.exit_code(), 5);
}

#[tokio::test]
async fn an_interrupted_act_leaves_no_phase_running() {
    let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
    r.interrupt.graceful.cancel();
    let e = r.act_phase(stalled::<PREPARE>(), 1, &f.cx()).await.unwrap_err();
    assert_eq!(e.exit_code(), 130);
    assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Interrupted);
}

#[tokio::test]
async fn an_act_half_that_answers_is_done_with_the_inputs_hash_the_plan_computed() {
    let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
    r.hashed([(PhaseId::Install, "h1".to_string())].into_iter().collect());
    let done = r.act_phase(Test::<INSTALL> { plan: None, act: Some(Ok(7)) }, 1, &f.cx()).await.unwrap();
    assert_eq!(done, 7);
    let entry = r.state.entry(PhaseId::Install);
    assert_eq!((entry.status, entry.inputs_hash.as_deref()), (Status::Done, Some("h1")));
}

#[tokio::test]
async fn a_failed_plan_half_is_a_blocker_and_the_next_half_still_runs() {
    let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
    let mut bastion = Test::<BASTION> { plan: Some(Err(Failure::bad_input("no digest", "pin it"))), act: None };
    assert_eq!(r.plan(&mut bastion, &f.cx()).await.unwrap(), None);
    let mut facts = Test::<FACTS> { plan: Some(Ok(7)), act: None };
    assert_eq!(r.plan(&mut facts, &f.cx()).await.unwrap(), Some(7));
    assert_eq!(
        **r.plan.blockers(),
        [Blocker::new(PhaseId::Bastion, "no digest", "pin it", crate::plan::Kind::BadInput)]
    );
    assert_eq!(r.state.entry(PhaseId::Bastion).status, Status::Failed);
    assert!(r.block(PhaseId::Facts, Failure::Interrupted).is_err(), "an interruption ends the run");
}

#[tokio::test]
async fn a_stalled_plan_half_side_by_side_ends_at_its_own_window_and_the_others_answer() {
    let t = PhaseTimeouts::resolve(None, None, &[(PhaseId::Facts, 0)]).unwrap();
    let (mut r, f) = (runner(t), Fixture::new());
    let mut a = Test::<BASTION> { plan: Some(Ok(1)), act: None };
    let mut b = stalled::<FACTS>();
    let mut c = Test::<INSTALL> { plan: Some(Ok(3)), act: None };
    let (a, b, c) = r.plan3((&mut a, &mut b, &mut c), &f.cx(), "waiting").await.unwrap();
    assert_eq!((a, b, c), (Some(1), None, Some(3)));
    assert_eq!(r.plan.blockers().len(), 1);
    assert!(
        r.plan.blockers()[0].cause.contains("phase facts did not finish within its timeout"),
        "{:?}",
        r.plan.blockers()
    );
    for id in [PhaseId::Bastion, PhaseId::Facts, PhaseId::Install] {
        assert_ne!(r.state.entry(id).status, Status::Running, "{id} left running");
    }
}

/// `should_run`'s default is the resume rule of the table: once an earlier run installed with
/// the same inputs, a phase that resumes when unchanged is skipped (its entry untouched), and
/// one that always runs still runs.
#[tokio::test]
async fn an_install_done_earlier_with_the_same_inputs_skips_the_phases_that_resume_when_unchanged() {
    let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
    r.resume_installed(true);
    let skipped = r.act(Test::<INSTALL> { plan: None, act: Some(Ok(7)) }, 1, &f.cx()).await.unwrap();
    assert_eq!(skipped, None);
    assert_eq!(r.state.entry(PhaseId::Install).status, Status::Pending);
    let ran = r.act(Test::<VERIFY> { plan: None, act: Some(Ok(5)) }, 1, &f.cx()).await.unwrap();
    assert_eq!(ran, Some(5));
    r.resume_installed(false);
    let ran = r.act(Test::<INSTALL> { plan: None, act: Some(Ok(7)) }, 1, &f.cx()).await.unwrap();
    assert_eq!(ran, Some(7));
}

/// A phase whose hooks say, in the plan's warnings, that they ran.
struct Hooked {
    before: Option<Failure>,
    act: Option<Failure>,
}

impl Phase for Hooked {
    const ID: PhaseId = PhaseId::Prepare;
    type Planned = ();
    type Done = ();
    fn says(&self, _cx: &Cx<'_>) -> String {
        "hooked".into()
    }
    async fn before(&mut self, _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        say(r, "before".into());
        self.before.take().map_or(Ok(()), Err)
    }
    async fn act(&mut self, (): (), _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        say(r, "act".into());
        self.act.take().map_or(Ok(()), Err)
    }
    fn after(&mut self, _cx: &Cx<'_>, r: &mut Runner) -> Result<(), Failure> {
        say(r, "after".into());
        Ok(())
    }
}

/// k0sctl's order: before, the act, then after only when the act succeeded; a failed
/// `before` ends the run (its exit code recorded) without beginning the phase.
#[tokio::test]
async fn after_runs_only_when_the_act_succeeded_and_a_failed_before_never_begins_the_act() {
    let f = Fixture::new();
    let said = |r: &Runner| r.plan.warnings().to_vec();
    let mut r = runner(PhaseTimeouts::default());
    r.act(Hooked { before: None, act: None }, (), &f.cx()).await.unwrap();
    assert_eq!(said(&r), ["before", "act", "after"]);
    let mut r = runner(PhaseTimeouts::default());
    let failed = Hooked { before: None, act: Some(Failure::step(PhaseId::Prepare, "no")) };
    assert!(r.act(failed, (), &f.cx()).await.is_err());
    assert_eq!(said(&r), ["before", "act"]);
    assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Failed);
    let mut r = runner(PhaseTimeouts::default());
    let refused = Hooked { before: Some(Failure::step(crate::plan::Step::Ledger, "unreadable")), act: None };
    assert!(r.act(refused, (), &f.cx()).await.is_err());
    assert_eq!(said(&r), ["before"]);
    assert_eq!(r.state.entry(PhaseId::Prepare).status, Status::Pending);
    assert_eq!(r.state.exit_code, Some(crate::plan::Kind::Failed.exit_code()));
}

/// k0sctl's manager: when the act list fails, each phase whose act ran (even the one that
/// failed) cleans up, once, in the order they ran; a skipped phase and a run that succeeds
/// clean nothing up.
#[tokio::test]
async fn a_failed_act_list_cleans_up_each_phase_whose_act_ran() {
    let (mut r, f) = (runner(PhaseTimeouts::default()), Fixture::new());
    r.act(Test::<BASTION> { plan: None, act: Some(Ok(1)) }, 1, &f.cx()).await.unwrap();
    r.resume_installed(true);
    r.act(Test::<INSTALL> { plan: None, act: Some(Ok(1)) }, 1, &f.cx()).await.unwrap();
    r.resume_installed(false);
    let failed =
        r.act(Test::<FACTS> { plan: None, act: Some(Err(Failure::step(PhaseId::Facts, "no"))) }, 1, &f.cx()).await;
    assert!(r.finish(Ok(())).await.is_ok());
    assert!(r.plan.warnings().is_empty(), "a run that succeeds cleans nothing up: {:?}", r.plan.warnings());
    assert!(r.finish(failed).await.is_err());
    assert_eq!(**r.plan.warnings(), ["cleaned up bastion", "cleaned up facts"]);
    assert!(r.finish(Err::<(), _>(Failure::Interrupted)).await.is_err());
    assert_eq!(r.plan.warnings().len(), 2, "each clean-up runs once");
}

#[test]
fn two_flags_for_one_phase_are_refused_and_the_plan_prints_the_effective_values() {
    let e = PhaseTimeouts::resolve(Some(600), None, &[(PhaseId::Install, 5)]).unwrap_err();
    assert!(e.contains("--install-timeout") && e.contains("--phase-timeout install=5"), "{e}");
    let t = PhaseTimeouts::resolve(Some(600), Some(60), &[(PhaseId::Prepare, 7)]).unwrap();
    let plan = Plan::new(&t);
    let secs = |n: &str| plan.phases().iter().find(|p| p.name == n).unwrap().timeout_secs;
    assert_eq!((secs("install"), secs("verify"), secs("prepare")), (600, 60, 7));
    assert_eq!(secs("facts"), PhaseId::Facts.spec().timeout.as_secs());
    assert_eq!(t.get(PhaseId::Install), Duration::from_secs(600));
}
