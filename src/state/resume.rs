//! After a failed run: which phases `eas up` may skip, and what to tell the user to run next.
//!
//! A phase is skipped when the previous run finished it with the same inputs, it is one whose
//! result lasts ([`Resume::WhenUnchanged`]: the work tree, the overlay, the env files, the
//! install), and no earlier such phase runs again. Phases that read the cluster as it is now or
//! cost nothing always run.

use std::collections::BTreeMap;

use super::journal::{State, Status};
use super::since::{Completed, is_completed};
use crate::plan::{PHASES, PhaseId, Resume};
use crate::settings::{Global, Select};
pub use crate::since_last::RunKind;
use crate::since_last::SinceLast;

/// The run's kind: `resume` when the latest install record did not complete, else by what
/// changed since the last completed run (`since`, present when there is one).
pub fn classify(latest: Option<&State>, last: Option<&Completed>, since: Option<&SinceLast>) -> RunKind {
    match latest {
        Some(s) if !is_completed(s) => return RunKind::Resume,
        // No install record (none yet, or `eas down` removed it): nothing is installed, whatever
        // was kept of a completed run.
        None => return RunKind::Install,
        Some(_) => {}
    }
    match (last, since) {
        (Some(_), Some(s)) if !s.pins.is_empty() => RunKind::Upgrade,
        (Some(_), Some(s)) if s.reconfigures() => RunKind::Reconfigure,
        (Some(_), Some(_)) => RunKind::UpToDate,
        _ => RunKind::Install,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Run(String),
    Skip(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumePlan {
    pub steps: Vec<(PhaseId, Step)>,
}

impl ResumePlan {
    pub fn skipped(&self) -> Vec<PhaseId> {
        self.steps.iter().filter(|(_, s)| matches!(s, Step::Skip(_))).map(|(p, _)| *p).collect()
    }

    /// The first lasting phase that runs again: where the run really resumes.
    #[cfg(test)]
    pub fn resumes_at(&self) -> Option<PhaseId> {
        self.steps
            .iter()
            .find(|(p, s)| p.spec().resume == Resume::WhenUnchanged && matches!(s, Step::Run(_)))
            .map(|(p, _)| *p)
    }

    #[cfg(test)]
    pub fn step(&self, phase: PhaseId) -> &Step {
        &self.steps.iter().find(|(p, _)| *p == phase).expect("every phase has a step").1
    }
}

/// Decides each phase of a new run from the previous record and the current inputs' hashes
/// (a phase missing from `inputs` cannot be compared, so it runs).
pub fn plan_resume(prev: Option<&State>, inputs: &BTreeMap<PhaseId, String>) -> ResumePlan {
    let mut rerun = false;
    let mut steps = Vec::new();
    for spec in &PHASES {
        let p = spec.id;
        let step = match (prev, spec.resume) {
            (None, _) => Step::Run("first run on this cluster".into()),
            (Some(_), Resume::Always) => Step::Run("always runs".into()),
            (Some(_), Resume::WhenUnchanged) if rerun => Step::Run("an earlier phase runs again".into()),
            (Some(state), Resume::WhenUnchanged) => {
                let e = state.entry(p);
                match e.status {
                    Status::Done => match (&e.inputs_hash, inputs.get(&p)) {
                        (Some(was), Some(now)) if was == now => {
                            Step::Skip(format!("done at {} with the same inputs", e.finished.as_deref().unwrap_or("?")))
                        }
                        (Some(_), Some(_)) => Step::Run("its inputs changed".into()),
                        _ => Step::Run("its inputs cannot be compared".into()),
                    },
                    Status::Failed => {
                        Step::Run(format!("failed last time: {}", e.message.as_deref().unwrap_or("no message")))
                    }
                    Status::Interrupted => Step::Run("interrupted last time".into()),
                    Status::Running => Step::Run("the last run stopped while it ran".into()),
                    Status::Pending => Step::Run("not reached last time".into()),
                    Status::Skipped => Step::Run("skipped last time".into()),
                }
            }
        };
        if spec.resume == Resume::WhenUnchanged && matches!(step, Step::Run(_)) {
            rerun = true;
        }
        steps.push((p, step));
    }
    ResumePlan { steps }
}

/// The flags a follow-up command must repeat to act on the same cluster and install.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Invocation {
    /// The global inputs as `eas up`'s own line repeats them (`next_command::global_words`): the
    /// flags typed, and the variables that stand for one (`EAS_CONFIG`, `EAS_CA_BUNDLE`).
    pub global: Vec<String>,
    pub layer: String,
    pub env: String,
    /// `--profile P`, `--ref SHA`, `--model M` as the user gave them.
    pub select: Vec<String>,
    /// The run's own `eas up --yes` command line, when it was one: every flag as typed and the
    /// settings taken from the environment (`next_command::up_words`). A next `eas up` is this
    /// line, so it carries every input of the run (the trees' mirrors, the node files, the base
    /// image, the CA bundle...), not only the selection.
    pub typed: Option<Vec<String>>,
    /// The secrets the run read from the environment, by name (`next_command::secrets_in`).
    pub secrets: Vec<String>,
}

impl Invocation {
    fn cmd(&self, name: &str, rest: &[String]) -> String {
        let mut words = vec!["eas".to_string()];
        words.extend(name.split(' ').map(str::to_string));
        words.extend(self.global.iter().cloned());
        words.extend(rest.iter().cloned());
        crate::installer::command::shell_line(&words)
    }

    /// The run's command line with `--yes` (the one after `up`) replaced by `mode`.
    fn typed_as(&self, mode: &str) -> Option<String> {
        let mut words = self.typed.clone()?;
        if let Some(yes) = words.iter().position(|w| w == "--yes") {
            words[yes] = mode.to_string();
        }
        Some(crate::installer::command::shell_line(&words))
    }

    /// `eas up --yes` for this run: it runs without a terminal too.
    pub fn up(&self) -> String {
        if let Some(line) = self.typed_as("--yes") {
            return line;
        }
        let mut rest = vec!["--layer".to_string(), self.layer.clone(), "--env".to_string(), self.env.clone()];
        rest.extend(self.select.iter().cloned());
        rest.push("--yes".to_string());
        self.cmd("up", &rest)
    }

    /// [`Invocation::up`] as a `next:` line prints it: quoted, after the secrets it needs set.
    pub fn resume(&self) -> String {
        crate::next_command::with_secrets(&self.up(), &self.secrets)
    }

    pub fn dry_run(&self) -> String {
        if let Some(line) = self.typed_as("--dry-run") {
            return line;
        }
        let mut rest = vec![
            "--dry-run".to_string(),
            "--layer".to_string(),
            self.layer.clone(),
            "--env".to_string(),
            self.env.clone(),
        ];
        rest.extend(self.select.iter().cloned());
        self.cmd("up", &rest)
    }

    /// The same run on another pins profile: `--profile`/`--ref` and their values replaced.
    pub fn on_profile(&self, profile: &str) -> Invocation {
        let replace = |words: &[String]| {
            let mut out = Vec::new();
            let mut it = words.iter();
            while let Some(w) = it.next() {
                match w.as_str() {
                    "--profile" | "--ref" => {
                        it.next();
                    }
                    _ if w.starts_with("--profile=") || w.starts_with("--ref=") => {}
                    _ => out.push(w.clone()),
                }
            }
            out.extend(["--profile".to_string(), profile.to_string()]);
            out
        };
        Invocation { select: replace(&self.select), typed: self.typed.as_deref().map(replace), ..self.clone() }
    }

    pub fn down(&self) -> String {
        self.cmd("down", &["--layer".to_string(), self.layer.clone()])
    }

    pub fn verify(&self) -> String {
        self.cmd("verify", &[])
    }

    /// `eas <command>` with the global flags, e.g. `other("bastion build")`.
    pub fn other(&self, command: &str) -> String {
        self.cmd(command, &[])
    }
}

/// What to run next after `phase` ended with `status` (failed or interrupted); `pending`: the
/// record of what the install created is not complete, so `eas down` removes nothing until an
/// `eas up` completes it (one cause, one line: the install's resume line says so itself).
pub fn what_next(phase: PhaseId, status: Status, pending: bool, inv: &Invocation) -> String {
    let what = match status {
        Status::Interrupted | Status::Running => "was interrupted",
        _ => "failed",
    };
    format!("{phase} {what}: {}", advice(phase, status, pending, inv))
}

/// [`what_next`] without the phase and how it ended: the commands that go on from there. Stopped
/// by the user before anything was installed: the same run again; else the phase's own `next`
/// (a column of the phase table), its pending form while the record is pending.
fn advice(phase: PhaseId, status: Status, pending: bool, inv: &Invocation) -> String {
    if status == Status::Interrupted && phase < PhaseId::Prepare {
        return run_again(inv);
    }
    let next = &phase.spec().next;
    fill(next.pending.filter(|_| pending).unwrap_or(next.says), inv)
}

/// The `next:` of a run stopped before anything was installed: the same run again.
pub fn run_again(inv: &Invocation) -> String {
    format!("{} runs it again (nothing was installed)", inv.resume())
}

/// A phase's `next` with its placeholders filled from the run's invocation, in one pass (a
/// path in the command line that reads like a placeholder stays as it is). An unknown one is
/// left as written.
fn fill(text: &str, inv: &Invocation) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(len) = rest[open..].find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let key = &rest[open + 1..open + len];
        let value = match key {
            "up" => Some(inv.resume()),
            "down" => Some(format!("`{}`", inv.down())),
            "dry_run" => Some(inv.dry_run()),
            "verify" => Some(inv.verify()),
            "until" => Some(UNTIL.to_string()),
            _ => key.strip_prefix("eas ").map(|command| inv.other(command)),
        };
        out.push_str(value.as_deref().unwrap_or(&rest[open..=open + len]));
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}

const UNTIL: &str = "until then `eas down` removes nothing (the record of what the install created is pending)";

/// The next-step line for a record whose run did not succeed, if it did not.
pub fn next_for(state: &State, inv: &Invocation) -> Option<String> {
    let pending = state.ledger.incomplete_reason().is_some();
    state.failed_phase().map(|e| what_next(e.phase, e.status, pending, inv))
}

/// [`next_for`]'s commands alone, for a failure that names its phase and cause itself.
pub fn advice_for(state: &State, inv: &Invocation) -> Option<String> {
    let pending = state.ledger.incomplete_reason().is_some();
    state.failed_phase().map(|e| advice(e.phase, e.status, pending, inv))
}

/// The follow-up commands repeat the user's global inputs as [`crate::next_command::global_words`]
/// builds them for `eas up`'s own line (as typed, and the variables that stand for one, the config
/// file's among them), and the selection.
pub fn invocation(global: &Global, layer: &str, env: &str, select: &Select) -> Invocation {
    let g = crate::next_command::global_words(&global.env);
    let mut sel = Vec::new();
    if let Some(p) = &select.profile {
        sel.extend(["--profile".to_string(), p.clone()]);
    }
    if let Some(r) = &select.git_ref {
        sel.extend(["--ref".to_string(), r.clone()]);
    }
    if let Some(m) = &select.model {
        sel.extend(["--model".to_string(), m.clone()]);
    }
    if let crate::pins::Source::Flag(p) = &select.pins {
        sel.extend(["--pins".to_string(), p.display().to_string()]);
    }
    Invocation { global: g, layer: layer.to_string(), env: env.to_string(), select: sel, ..Invocation::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::journal::{PinsRecord, RunInfo};

    /// The global inputs of every next command come from one builder: as typed (before the
    /// command or after it), and `EAS_CONFIG`/`EAS_CA_BUNDLE` as flags when not typed; a config
    /// file found as `./eas.yaml` is not named (the next command, in the same directory, finds it).
    /// `eas up`'s line and `eas down`'s name the cluster the same way.
    #[test]
    fn the_next_commands_repeat_the_global_inputs_as_the_up_line_does() {
        let at = |line: &str, vars: &[(&str, &str)]| {
            let mut env = crate::settings::Env::of(vars);
            env.args = line.split(' ').map(str::to_string).collect();
            let typed = crate::next_command::up_words(&env);
            let global = Global { env, ..Default::default() };
            Invocation { typed, ..invocation(&global, "inference", "k3d-gpu", &Select::default()) }
        };
        let named = at("eas up --dry-run --context k3d-gpu -v", &[("EAS_CONFIG", "site/eas.yaml")]);
        assert_eq!(named.down(), "eas down --context k3d-gpu --config site/eas.yaml --layer inference");
        assert_eq!(named.up(), "eas --context k3d-gpu --config site/eas.yaml up --yes -v");
        let typed = at("eas --kubeconfig=/k up --yes --ca-bundle /ca.pem", &[("EAS_CA_BUNDLE", "/other.pem")]);
        assert_eq!(typed.verify(), "eas verify --kubeconfig=/k --ca-bundle /ca.pem");
        assert_eq!(typed.up(), "eas --kubeconfig=/k --ca-bundle /ca.pem up --yes");
        assert_eq!(at("eas up --yes", &[]).down(), "eas down --layer inference");
    }

    fn state(done: &[(PhaseId, &str)], last: Option<(PhaseId, Status)>) -> State {
        let info = RunInfo {
            cluster_key: "uid".into(),
            context: "c".into(),
            layer: "inference".into(),
            env: "k3d-gpu".into(),
            pins: PinsRecord::default(),
        };
        let mut s = State::new(info, "t0");
        for (p, h) in done {
            s.begin(*p, Some(h.to_string()), "t1");
            s.finish(*p, Status::Done, None, "t2");
        }
        if let Some((p, st)) = last {
            s.begin(p, Some("x".into()), "t3");
            if st != Status::Running {
                s.finish(p, st, Some("boom".into()), "t4");
            }
        }
        s
    }

    fn inputs(pairs: &[(PhaseId, &str)]) -> BTreeMap<PhaseId, String> {
        pairs.iter().map(|(p, h)| (*p, h.to_string())).collect()
    }

    use PhaseId::*;

    const ALL_DONE_BEFORE_INSTALL: [(PhaseId, &str); 3] = [(Trees, "t"), (Overlay, "o"), (Prepare, "p")];

    #[test]
    fn which_phases_a_resumed_run_skips() {
        // (previous record, current inputs, skipped, where it resumes)
        let same = inputs(&[(Trees, "t"), (Overlay, "o"), (Prepare, "p"), (Install, "i")]);
        type Case = (Option<State>, BTreeMap<PhaseId, String>, Vec<PhaseId>, Option<PhaseId>);
        let cases: Vec<Case> = vec![
            (None, same.clone(), vec![], Some(Trees)),
            (
                Some(state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Failed)))),
                same.clone(),
                vec![Trees, Overlay, Prepare],
                Some(Install),
            ),
            (
                Some(state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Interrupted)))),
                same.clone(),
                vec![Trees, Overlay, Prepare],
                Some(Install),
            ),
            // Killed without a chance to record: still "running".
            (
                Some(state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Running)))),
                same.clone(),
                vec![Trees, Overlay, Prepare],
                Some(Install),
            ),
            // The overlay's inputs changed: it and everything lasting after it run again.
            (
                Some(state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Failed)))),
                inputs(&[(Trees, "t"), (Overlay, "o2"), (Prepare, "p"), (Install, "i")]),
                vec![Trees],
                Some(Overlay),
            ),
            // Installed, verification failed: only the lasting phases up to install are skipped.
            (
                Some(state(
                    &[(Trees, "t"), (Overlay, "o"), (Prepare, "p"), (Install, "i")],
                    Some((Verify, Status::Failed)),
                )),
                same.clone(),
                vec![Trees, Overlay, Prepare, Install],
                None,
            ),
            // No hash to compare with: run.
            (Some(state(&ALL_DONE_BEFORE_INSTALL, None)), inputs(&[(Trees, "t")]), vec![Trees], Some(Overlay)),
        ];
        for (i, (prev, now, skipped, at)) in cases.into_iter().enumerate() {
            let plan = plan_resume(prev.as_ref(), &now);
            assert_eq!(plan.skipped(), skipped, "case {i}");
            assert_eq!(plan.resumes_at(), at, "case {i}");
            for p in [Lock, Preflight, Bastion, Facts, Config, Verify, Record] {
                assert!(matches!(plan.step(p), Step::Run(_)), "case {i}: {p} always runs");
            }
        }
    }

    #[test]
    fn a_run_is_classified_against_the_last_completed_run() {
        use crate::state::since::PinMove;
        let mut done = state(&[(Trees, "t"), (Overlay, "o"), (Prepare, "p"), (Install, "i")], None);
        done.exit_code = Some(0);
        let last = Completed {
            state: done.clone(),
            facts: None,
            decisions: vec![],
            overlay: vec![],
            image: None,
            model: None,
            files: vec![],
        };
        let same = SinceLast::default();
        let moved = SinceLast {
            pins: vec![PinMove { tree: "eas".into(), from: "a".into(), to: "b".into(), commits: None }],
            ..SinceLast::default()
        };
        let changed = SinceLast {
            files: vec![crate::state::since::FileChange { name: "x".into(), diff: String::new() }],
            ..SinceLast::default()
        };
        assert_eq!(classify(None, None, None), RunKind::Install);
        assert_eq!(classify(None, Some(&last), Some(&same)), RunKind::Install, "after a down");
        assert_eq!(classify(Some(&done), Some(&last), Some(&same)), RunKind::UpToDate);
        assert_eq!(classify(Some(&done), Some(&last), Some(&moved)), RunKind::Upgrade);
        assert_eq!(classify(Some(&done), Some(&last), Some(&changed)), RunKind::Reconfigure);
        let failed = state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Failed)));
        assert_eq!(classify(Some(&failed), Some(&last), Some(&same)), RunKind::Resume);
        // Verification failed (exit 5): still completed, so up to date.
        let mut five = done.clone();
        five.exit_code = Some(5);
        assert_eq!(classify(Some(&five), Some(&last), Some(&same)), RunKind::UpToDate);
        assert_eq!(RunKind::UpToDate.to_string(), "up-to-date");
    }

    #[test]
    fn reasons_say_why() {
        let prev = state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Failed)));
        let plan = plan_resume(Some(&prev), &inputs(&[(Trees, "t"), (Overlay, "o"), (Prepare, "p2")]));
        assert_eq!(plan.step(Trees), &Step::Skip("done at t2 with the same inputs".into()));
        assert_eq!(plan.step(Prepare), &Step::Run("its inputs changed".into()));
        assert_eq!(plan.step(Install), &Step::Run("an earlier phase runs again".into()));
        let plan = plan_resume(Some(&prev), &inputs(&[(Trees, "t"), (Overlay, "o"), (Prepare, "p")]));
        assert_eq!(plan.step(Install), &Step::Run("failed last time: boom".into()));
        assert_eq!(plan_resume(None, &BTreeMap::new()).step(Lock), &Step::Run("first run on this cluster".into()));
    }

    /// The flags of a run on context k3d-gpu, layer inference.
    fn on_k3d_gpu(select: &[&str]) -> Invocation {
        Invocation {
            global: vec!["--context".into(), "k3d-gpu".into()],
            layer: "inference".into(),
            env: "k3d-gpu".into(),
            select: select.iter().map(|s| s.to_string()).collect(),
            ..Invocation::default()
        }
    }

    /// Every phase's `next` fills in completely (no placeholder is left), in its pending form
    /// too; text that only looks like one, or a brace left open, stays as written.
    #[test]
    fn each_phases_next_fills_in_from_the_invocation() {
        let inv = on_k3d_gpu(&[]);
        for p in &crate::plan::PHASES {
            for pending in [false, true] {
                let said = advice(p.id, Status::Failed, pending, &inv);
                assert!(!said.contains('{') && !said.contains('}'), "{}: {said}", p.name);
                assert_eq!(said.contains("until then"), pending && p.next.pending.is_some(), "{}: {said}", p.name);
            }
        }
        assert_eq!(fill("{up} and {nope}", &inv), format!("{} and {{nope}}", inv.resume()));
        assert_eq!(fill("`{eas status}` {", &inv), "`eas status --context k3d-gpu` {");
    }

    #[test]
    fn what_to_run_next() {
        let inv = on_k3d_gpu(&["--profile", "v1.2.0-rc.1"]);
        let up = "`eas up --context k3d-gpu --layer inference --env k3d-gpu --profile v1.2.0-rc.1 --yes`";
        let cases = [
            (Install, Status::Failed, format!("install failed: {up} resumes at install (the installer is idempotent); `eas down --context k3d-gpu --layer inference` removes what was installed")),
            (Install, Status::Interrupted, format!("install was interrupted: {up} resumes at install (the installer is idempotent); `eas down --context k3d-gpu --layer inference` removes what was installed")),
            (Verify, Status::Failed, "verify failed: `eas verify --context k3d-gpu` checks again without reinstalling; `eas down --context k3d-gpu --layer inference` removes the install".to_string()),
            (Prepare, Status::Failed, format!("prepare failed: {up} resumes at prepare")),
            (Preflight, Status::Failed, format!("preflight failed: `eas doctor --context k3d-gpu` lists every check; fix the failing one, then {up}")),
            (Bastion, Status::Failed, format!("bastion failed: `eas bastion build --context k3d-gpu` shows the build; then {up}")),
            (Facts, Status::Failed, format!("facts failed: `eas facts --context k3d-gpu` shows what could not be read; then {up}")),
            (Overlay, Status::Failed, format!("overlay failed: `eas up --context k3d-gpu --dry-run --layer inference --env k3d-gpu --profile v1.2.0-rc.1` names the patch that no longer applies; regenerate it, then {up}")),
            (Config, Status::Failed, "config failed: `eas up --context k3d-gpu --dry-run --layer inference --env k3d-gpu --profile v1.2.0-rc.1` shows each decision and its source".to_string()),
            (Trees, Status::Failed, format!("trees failed: check access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo DIR with local clones; then {up}")),
            (Lock, Status::Failed, format!("lock failed: once the other run has ended, {up} (add --break-lock if its lock is stale)")),
            (Record, Status::Failed, format!("record failed: {up} records the run (nothing is reinstalled)")),
        ];
        for (p, st, want) in cases {
            assert_eq!(what_next(p, st, false, &inv), want);
        }
        let s = state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Failed)));
        assert_eq!(next_for(&s, &inv), Some(what_next(Install, Status::Failed, false, &inv)));
        assert_eq!(next_for(&state(&ALL_DONE_BEFORE_INSTALL, None), &inv), None);
        let quoted = Invocation { global: vec!["--kubeconfig".into(), "/my dir/config".into()], ..inv };
        assert!(quoted.up().starts_with("eas up --kubeconfig '/my dir/config' --layer"));
    }

    /// After an interrupted install the record is pending: one line says how to resume and that
    /// `eas down` removes nothing until then (it used to say both that it removes what was
    /// installed and, on a second `next:` line, that it removes nothing). The line is the run's
    /// own command line, and names the secrets it needs, never their values.
    #[test]
    fn an_interrupted_install_resumes_with_the_runs_own_command_line_and_one_next() {
        let inv = Invocation {
            typed: Some(
                ["eas", "--context", "k3d-gpu", "up", "--yes", "--eas-repo", "/m/eas", "--ca-bundle", "/ca.pem"]
                    .map(String::from)
                    .to_vec(),
            ),
            secrets: vec!["HF_TOKEN".into()],
            ..on_k3d_gpu(&[])
        };
        let mut s = state(&ALL_DONE_BEFORE_INSTALL, Some((Install, Status::Interrupted)));
        s.ledger = crate::state::ledger::Ledger::begin(None, &Default::default());
        let next = next_for(&s, &inv).unwrap();
        assert_eq!(
            next,
            "install was interrupted: with HF_TOKEN set in the environment, \
             `eas --context k3d-gpu up --yes --eas-repo /m/eas --ca-bundle /ca.pem` resumes at install (the \
             installer is idempotent) and completes the record; until then `eas down` removes nothing (the record \
             of what the install created is pending)"
        );
        assert_eq!(inv.dry_run(), "eas --context k3d-gpu up --dry-run --eas-repo /m/eas --ca-bundle /ca.pem");
        let before = state(&[(Trees, "t")], Some((Bastion, Status::Interrupted)));
        assert_eq!(
            next_for(&before, &inv).unwrap(),
            "bastion was interrupted: with HF_TOKEN set in the environment, `eas --context k3d-gpu up --yes --eas-repo \
             /m/eas --ca-bundle /ca.pem` runs it again (nothing was installed)"
        );
        // Completed, the record lets `eas down` remove what was installed.
        s.ledger = s.ledger.complete(&Default::default());
        assert!(
            next_for(&s, &inv)
                .unwrap()
                .ends_with("`eas down --context k3d-gpu --layer inference` removes what was installed")
        );
    }
}
