//! `eas up` again: the run's kind and what changed since the last completed run, decided after
//! the plan halves (`state::since`, `state::resume::classify`), and what the act halves do with
//! it: an up-to-date run verifies only, an upgrade keeps the work tree and takes the installer's
//! own path (`init --upgrade`), a completed run is kept for the next one to compare with.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::error::Failure;
use crate::facts::Facts;
use crate::output::Shell;
use crate::plan::{PhaseId, Runs};
use crate::state::journal::State;
use crate::state::resume::{RunKind, classify as kind_of, plan_resume};
use crate::state::since::{Completed, Now, since_last};

use crate::pipeline::runner::Runner;
use crate::pipeline::settings::UpSettings;

/// What classifying the run settles for the acts, written into the plan from these same values:
/// `init` as prepare runs it, whether that is an upgrade in place, and the undeploy of the last
/// completed run's model that install runs first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Classified {
    /// Config's `init`, with `--upgrade` when the run upgrades the kept env in place; empty when
    /// config decided nothing (a blocker says why).
    pub init: Vec<String>,
    /// The pins moved since the last completed run and the kept work tree holds the inited env:
    /// the tree is moved to the new commit and `init --upgrade` runs on it.
    pub upgrade: bool,
    pub undeploy: Option<Vec<String>>,
    /// The run against the last completed one (none: nothing to compare with), for resume.
    pub kind: Option<RunKind>,
}

/// What the plan halves before classify made, as values (the plan is written from the same
/// ones, never read back): config's and the overlay's decision lines, the overlay's rows, the
/// bastion image's tag; compared with the last completed run's.
#[derive(Default, Clone, Copy)]
pub struct Made<'a> {
    pub decisions: &'a [crate::plan::PlanDecision],
    pub overlay: &'a [crate::plan::PlanPatch],
    pub image: Option<&'a str>,
}

/// What the run compares with the last completed one: the install record (`latest`,
/// `state.json`), the last completed run, and the kept work tree (`work`).
pub struct Before<'a> {
    pub latest: Option<&'a State>,
    pub last: Option<&'a Completed>,
    pub work: &'a Path,
    /// What this run's plan halves made, compared with `last`.
    pub made: Made<'a>,
}

/// The plan's `run_kind` and `since_last`, against `latest` (the install record, `state.json`)
/// and `last` (the last completed run), and the installer's commands that follow from them:
/// `init` (config's, `init`: upgraded in place or not, decided here once, for the plan and the
/// act alike) and the undeploy of a model this run no longer picks. A layer other than the
/// installed one is a blocker: the installer cannot move an env from one layer to another.
#[allow(clippy::too_many_arguments)]
pub fn classify(
    (args, global): (&UpSettings, &crate::settings::Global),
    before: Before<'_>,
    (init, pick): (Option<&[String]>, Option<&str>),
    facts: &Facts,
    files: &[(String, String)],
    commits: &BTreeMap<String, u32>,
    catalog: &[String],
    r: &mut Runner,
) -> Result<Classified, Failure> {
    let Before { latest, last, work, made } = before;
    let installed = latest.map(|s| s.layer.as_str()).or(last.map(|c| c.state.layer.as_str()));
    if let Some(layer) = installed.filter(|l| args.select.layer != *l) {
        r.block(
            PhaseId::Config,
            Failure::bad_input(
                format!("{layer} is installed on this cluster; this run asks for {}", args.select.layer),
                format!("run `eas down --layer {layer}` first, then `eas up --layer {}`", args.select.layer),
            ),
        )?;
    }
    // Only while an install record exists: after `eas down` nothing is installed to compare with.
    let last = last.filter(|_| latest.is_some());
    let since = last.map(|l| {
        let now = Now {
            pins: &r.journaled().pins.shas,
            decisions: made.decisions,
            overlay: made.overlay,
            files,
            facts,
            image: made.image,
        };
        let mut s = since_last(l, &now);
        for p in &mut s.pins {
            p.commits = commits.get(&p.tree).copied();
        }
        s.catalog = catalog.to_vec();
        // The selection's settings that changed since the install, each with its source now.
        if let (Some(was), Some(now)) = (&l.state.selection, &r.journaled().selection) {
            let source = |k: &str| crate::pipeline::recorded::source_of(args, global, k);
            s.settings = crate::pipeline::recorded::changed(was, now, source);
        }
        s
    });
    let kind = kind_of(latest, last, since.as_ref());
    // The pins moved since the last completed run (an upgrade, or the resumption of one that
    // failed: its env still records the earlier revs) and the kept tree holds the inited env:
    // `init --upgrade`, the installer's own path, which refuses a changed rev without it.
    let upgrade = since.as_ref().is_some_and(|s| !s.pins.is_empty()) && inited(work, &args.env);
    let init = init.map(|argv| init_as_run(argv, upgrade)).unwrap_or_default();
    let mut part = r.plan_part(PhaseId::Classify);
    if !init.is_empty() {
        part.command(Runs::Init, init.clone());
    }
    part.compared(kind, since);
    let undeploy = undeploy_previous(last, pick, r);
    Ok(Classified { init, upgrade, undeploy, kind: Some(kind) })
}

/// Config's `init`, as prepare runs it.
fn init_as_run(init: &[String], upgrade: bool) -> Vec<String> {
    let mut argv = init.to_vec();
    if upgrade {
        argv.push("--upgrade".into());
    }
    argv
}

/// Whether the kept work tree holds the env `init` seeded.
fn inited(work: &Path, env: &str) -> bool {
    work.join("env").join(env).join(".solutions.yaml").exists()
}

/// `./model-manager undeploy`: the repo-root wrapper of EI's model-manager (one env: chosen by
/// itself), which deletes a model's CR and, with `--wait`, waits for its pods.
pub const MODEL_MANAGER: &str = "./model-manager";

/// A model change removes the last completed run's pick before the install deploys the new one
/// (EI's install only adds models): a decision line and a command of the install phase.
fn undeploy_previous(last: Option<&Completed>, new: Option<&str>, r: &mut Runner) -> Option<Vec<String>> {
    let old = last.and_then(|l| l.model.clone())?;
    if new == Some(old.as_str()) {
        return None;
    }
    let argv = vec![MODEL_MANAGER.to_string(), "undeploy".into(), old.clone(), "--wait".into()];
    let source = "issue 22: a model change removes the previous pick (EI model-manager's undeploy)".to_string();
    let mut part = r.plan_part(PhaseId::Classify);
    part.decisions([crate::plan::PlanDecision {
        fact: format!("the last completed run deployed {old}; this run picks {}", new.unwrap_or("none")),
        choice: format!("{}: {old} before the install", crate::state::since::UNDEPLOY),
        permalink: source.clone(),
        source,
    }]);
    part.command(Runs::Undeploy, argv.clone());
    Some(argv)
}

/// For each pinned tree whose commit moved since the last completed run, how many commits the
/// mirror counts from the old one to the new (`git rev-list --count OLD..NEW`); a tree the
/// mirror cannot count (the old commit is not in it, or the new one is older) is left out.
pub async fn commit_counts(
    last: Option<&Completed>,
    trees: Option<&crate::pipeline::phases::trees::Resolved>,
) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let (Some(last), Some(t)) = (last, trees) else { return out };
    for (name, r) in [("eas", &t.eas), ("ei", &t.ei), ("eat", &t.eat)] {
        let Some(old) = last.state.pins.shas.get(name).filter(|o| !o.is_empty() && **o != r.sha) else { continue };
        let range = format!("{old}..{}", r.sha);
        let counted =
            crate::git::run(Some(&r.objects), &["rev-list", "--count", &range], Duration::from_secs(10)).await;
        if let Some(n) = counted.ok().and_then(|c| c.trim().parse().ok()) {
            out.insert(name.to_string(), n);
        }
    }
    out
}

/// When the EI pin moved: how the catalog at the new commit differs from the env's seeded
/// `models.yaml` in the kept work tree (`work`), which the installer reads and `init --upgrade`
/// never re-seeds. Nothing when either cannot be read.
pub async fn catalog_changes(
    last: Option<&Completed>,
    trees: Option<&crate::pipeline::phases::trees::Resolved>,
    work: &Path,
    env: &str,
    layer: &str,
) -> Vec<String> {
    let (Some(last), Some(t), Some(path)) = (last, trees, crate::gather::catalog::catalog_path(layer)) else {
        return Vec::new();
    };
    if last.state.pins.shas.get("ei").is_none_or(|old| *old == t.ei.sha) {
        return Vec::new();
    }
    let Ok(seeded) = std::fs::read_to_string(work.join("env").join(env).join("models.yaml")) else {
        return Vec::new();
    };
    let spec = format!("{}:{path}", t.ei.sha);
    let Ok(new) = crate::git::run(Some(&t.ei.objects), &["show", &spec], Duration::from_secs(10)).await else {
        return Vec::new();
    };
    let at = format!("ei@{}", &t.ei.sha[..t.ei.sha.len().min(7)]);
    crate::state::since::catalog_changes(&seeded, &new, &at, env)
}

/// The lasting phases this run skips: every one up to install for an up-to-date run (unless
/// `--reinstall`), those a resumed run finished with the same inputs, none otherwise.
pub fn skipped(
    kind: Option<RunKind>,
    reinstall: bool,
    prev: Option<&State>,
    inputs: &BTreeMap<PhaseId, String>,
) -> Vec<PhaseId> {
    match kind {
        _ if reinstall => Vec::new(),
        Some(RunKind::UpToDate) => vec![PhaseId::Trees, PhaseId::Overlay, PhaseId::Prepare, PhaseId::Install],
        _ => plan_resume(prev, inputs).skipped(),
    }
}

/// What an up-to-date run says before it verifies.
pub fn up_to_date_note(last: Option<&Completed>, shell: &Shell) {
    match last {
        Some(l) if l.verify_failed() => shell.phase("up to date", "up to date (last verification failed): verifying"),
        Some(l) => shell.phase(
            "up to date",
            format!("nothing the install reads changed since {}: verifying only", l.installed_at()),
        ),
        None => {}
    }
}

/// Keeps this run as the last completed one (its install finished; it exited 0 or 5).
pub fn keep_completed(sd: &Path, r: &Runner, facts: &Facts, files: &[(String, String)], shell: &Shell) {
    if !crate::state::since::is_completed(r.journaled()) {
        return;
    }
    if let Err(e) = Completed::save(sd, r.journaled(), facts, &r.plan_doc().to_json(), files) {
        shell.warn(format!("the completed run was not kept for the next `eas up` to compare with: {e}"));
    }
}

/// A real run says what it is and what changed before its first act.
pub fn announce(r: &Runner, shell: &Shell) {
    let Some(kind) = r.plan_doc().run_kind() else { return };
    shell.phase("plan", format!("run: {kind}"));
    if let Some(since) = &r.plan_doc().since_last() {
        for l in crate::state::since::lines(since, false) {
            shell.note(format!("  since the last up: {}", crate::text::escape_controls(&l)));
        }
    }
}

/// What resuming this run skips, decided once its inputs are hashed (`Runner::inputs`).
pub struct Resume {
    /// An earlier run installed with the same inputs: straight to record and verify.
    pub installed: bool,
    /// ... and nothing changed since the last completed run: verify only.
    pub up_to_date: bool,
}

/// The lasting phases a run skips when they finished with the same inputs (their journal
/// entries carried over from `prev`). Whether it upgrades in place was classified once
/// ([`Classified::upgrade`]), and so was the run's kind ([`Classified::kind`]), handed here
/// as a value, not read back from the plan.
pub fn resume(args: &UpSettings, kind: Option<RunKind>, prev: Option<&State>, work: &Path, r: &mut Runner) -> Resume {
    let skipped = skipped(kind, args.reinstall, prev, r.inputs());
    if let Some(p) = prev {
        r.journal().carry_over(p, &skipped);
    }
    let installed = skipped.contains(&PhaseId::Install) && work.join("env").join(&args.env).exists();
    let up_to_date = installed && kind == Some(RunKind::UpToDate);
    Resume { installed, up_to_date }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::{Fixture, runner};
    use crate::plan::PhaseTimeouts;
    use crate::state::journal::Status;

    fn desktop() -> Facts {
        Facts::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json")).unwrap()
    }

    /// A run on the EAS commit `eas`: completed (its install done, exit 0) or failed at install.
    fn run_at(eas: &str, completed: bool) -> State {
        let mut state = State::sample("2026-01-01T00:00:00Z");
        state.pins.shas = [("eas".to_string(), eas.to_string())].into();
        state.begin(PhaseId::Install, None, "t1");
        let status = if completed { Status::Done } else { Status::Failed };
        state.finish(PhaseId::Install, status, None, "2026-01-01T00:30:00Z");
        state.exit_code = Some(if completed { 0 } else { 1 });
        state
    }

    fn completed(eas: &str, facts: &Facts) -> Completed {
        let state = run_at(eas, true);
        let (decisions, overlay, files) = (Vec::new(), Vec::new(), Vec::new());
        Completed { state, facts: Some(facts.clone()), decisions, overlay, image: None, model: None, files }
    }

    /// The `init` the plan prints is the value prepare's act is handed (`Classified::init`), and
    /// it says `--upgrade` exactly when the run upgrades the kept tree in place: the pins moved
    /// since the last completed run (an upgrade, or the resumption of one that failed) and the
    /// kept tree holds the inited env. Pins that moved over a tree without the inited env print
    /// a plain `init`, as the act runs it (the plan printed `init --upgrade` there before).
    #[test]
    fn the_printed_init_is_the_one_prepare_runs_in_the_upgrade_and_resume_cases() {
        let (f, facts) = (Fixture::new(), desktop());
        let init = crate::installer::command::init_argv("inference", "k3d-gpu").unwrap();
        let (inited, bare) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let env = inited.path().join("env/k3d-gpu");
        std::fs::create_dir_all(&env).unwrap();
        std::fs::write(env.join(".solutions.yaml"), "").unwrap();
        // (the last completed run's EAS commit, the install record's, the kept tree, whether
        // init upgrades); this run is on commit "new".
        let cases = [
            ("old", run_at("old", true), inited.path(), true),
            ("old", run_at("new", false), inited.path(), true),
            ("old", run_at("old", true), bare.path(), false),
            ("new", run_at("new", false), inited.path(), false),
            ("new", run_at("new", true), inited.path(), false),
        ];
        for (was, latest, work, upgrades) in cases {
            let mut r = runner(PhaseTimeouts::default());
            r.state_for_test().pins.shas = [("eas".to_string(), "new".to_string())].into();
            let last = completed(was, &facts);
            let before = Before { latest: Some(&latest), last: Some(&last), work, made: Made::default() };
            let c =
                classify((&f.args, &f.global), before, (Some(&init), None), &facts, &[], &BTreeMap::new(), &[], &mut r)
                    .unwrap();
            let case = format!("last completed at {was}, record at {:?}, tree {}", latest.pins.shas, work.display());
            let printed: Vec<_> = r.plan_doc().commands().iter().filter(|c| c.phase == PhaseId::Prepare).collect();
            assert_eq!(printed.len(), 1, "{case}");
            assert_eq!(printed[0].argv, c.init, "{case}: the plan prints the init the act runs");
            assert_eq!(c.upgrade, upgrades, "{case}");
            let mut want = init.clone();
            want.extend(upgrades.then(|| "--upgrade".to_string()));
            assert_eq!(c.init, want, "{case}");
        }
    }

    /// A run against the last completed one and its install record, both at commit "new": the
    /// fixture, the desktop facts, a kept work tree, the record and the completed run.
    fn against_last_at_new() -> (Fixture, Facts, tempfile::TempDir, State, Completed) {
        let facts = desktop();
        let last = completed("new", &facts);
        (Fixture::new(), facts, tempfile::tempdir().unwrap(), run_at("new", true), last)
    }

    /// What classify compares with the last completed run is what the plan halves before it
    /// made, handed as values ([`Made`]), never read back from the plan: a plan holding other
    /// lines and another image changes nothing in `since_last`.
    #[test]
    fn classify_compares_the_values_it_is_handed_not_the_plan() {
        let (f, facts, work, latest, mut last) = against_last_at_new();
        last.image = Some("eas-bastion:aaa".into());
        let line = |choice: &str| crate::plan::PlanDecision {
            fact: "k3s ServiceLB on".into(),
            choice: choice.into(),
            source: "s".into(),
            permalink: "s".into(),
        };
        last.decisions = vec![line("metallb_enabled: true")];
        let mut r = runner(PhaseTimeouts::default());
        r.plan_part(PhaseId::Config).decisions([line("metallb_enabled: true")]);
        r.plan_part(PhaseId::Bastion)
            .image(crate::plan::ImagePlan { tag: "eas-bastion:aaa".into(), action: crate::plan::ImageAction::Reuse });
        let now = [line("metallb_enabled: false")];
        let made = Made { decisions: &now, overlay: &[], image: Some("eas-bastion:bbb") };
        let before = Before { latest: Some(&latest), last: Some(&last), work: work.path(), made };
        classify((&f.args, &f.global), before, (None, None), &facts, &[], &BTreeMap::new(), &[], &mut r).unwrap();
        let since = r.plan_doc().since_last().clone().expect("a last completed run to compare with");
        assert_eq!(since.decisions.len(), 1, "{:?}", since.decisions);
        assert_eq!(since.bastion_image, Some(("eas-bastion:aaa".into(), "eas-bastion:bbb".into())));
    }

    /// A model the last completed run deployed and this run does not pick is undeployed before
    /// the install: classify hands the command on (`Classified::undeploy`) and the plan prints the
    /// same one in the install phase, with its decision line; the pick compared is the value
    /// config decided, handed to classify, not read back from the plan. The same model again,
    /// or no model deployed before, undeploys nothing.
    #[test]
    fn a_model_the_last_run_deployed_and_this_one_does_not_pick_is_undeployed_first() {
        let (f, facts, work, latest, mut last) = against_last_at_new();
        last.model = Some("Qwen/Qwen3-8B".into());
        let undeploy = ["./model-manager", "undeploy", "Qwen/Qwen3-8B", "--wait"];
        let cases: [(Option<&str>, Option<&[&str]>); 3] =
            [(Some("Qwen/Qwen3-14B"), Some(&undeploy)), (None, Some(&undeploy)), (Some("Qwen/Qwen3-8B"), None)];
        for (pick, want) in cases {
            let mut r = runner(PhaseTimeouts::default());
            let before = Before { latest: Some(&latest), last: Some(&last), work: work.path(), made: Made::default() };
            let c = classify((&f.args, &f.global), before, (None, pick), &facts, &[], &BTreeMap::new(), &[], &mut r)
                .unwrap();
            let want: Option<Vec<String>> = want.map(|w| w.iter().map(|s| s.to_string()).collect());
            assert_eq!(c.undeploy, want, "this run picks {pick:?}");
            let printed: Vec<_> = r.plan_doc().commands().iter().filter(|c| c.phase == PhaseId::Install).collect();
            assert_eq!(printed.iter().map(|c| Some(c.argv.clone())).next().flatten(), want, "{pick:?}");
            assert_eq!(*r.plan_doc().model_pick(), None, "the plan's own pick is not what was compared");
        }
    }
}
