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
use crate::plan::PhaseId;
use crate::state::journal::State;
use crate::state::resume::{RunKind, classify as kind_of, plan_resume};
use crate::state::since::{Completed, Now, since_last};

use crate::pipeline::runner::Runner;
use crate::pipeline::settings::UpSettings;

/// The plan's `run_kind` and `since_last`, against `latest` (the install record, `state.json`)
/// and `last` (the last completed run). A layer other than the installed one is a blocker: the
/// installer cannot move an env from one layer to another.
#[allow(clippy::too_many_arguments)]
pub fn classify(
    args: &UpSettings,
    latest: Option<&State>,
    last: Option<&Completed>,
    facts: &Facts,
    files: &[(String, String)],
    commits: &BTreeMap<String, u32>,
    catalog: &[String],
    r: &mut Runner,
) -> Result<(), Failure> {
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
            pins: &r.state.pins.shas,
            decisions: &r.plan.decisions,
            overlay: &r.plan.overlay,
            files,
            facts,
            image: r.plan.image.as_ref().map(|i| i.tag.as_str()),
        };
        let mut s = since_last(l, &now);
        for p in &mut s.pins {
            p.commits = commits.get(&p.tree).copied();
        }
        s.catalog = catalog.to_vec();
        s
    });
    let kind = kind_of(latest, last, since.as_ref());
    // The pins moved since the last completed run: an upgrade, or the resumption of one that
    // failed (its env still records the earlier revs, so `init` needs `--upgrade` as well).
    if since.as_ref().is_some_and(|s| !s.pins.is_empty())
        && let Some(c) = r.plan.commands.iter_mut().find(|c| c.phase == PhaseId::Prepare)
    {
        c.argv.push("--upgrade".into());
    }
    r.plan.run_kind = Some(kind);
    r.plan.since_last = since;
    undeploy_previous(last, r);
    Ok(())
}

/// `./model-manager undeploy`: the repo-root wrapper of EI's model-manager (one env: chosen by
/// itself), which deletes a model's CR and, with `--wait`, waits for its pods.
pub const MODEL_MANAGER: &str = "./model-manager";

/// A model change removes the last completed run's pick before the install deploys the new one
/// (EI's install only adds models): a decision line and a command of the install phase.
fn undeploy_previous(last: Option<&Completed>, r: &mut Runner) {
    let Some(old) = last.and_then(|l| l.model.clone()) else { return };
    let new = r.plan.model_pick.as_ref().and_then(|m| m.name.clone());
    if new.as_deref() == Some(old.as_str()) {
        return;
    }
    let argv = vec![MODEL_MANAGER.to_string(), "undeploy".into(), old.clone(), "--wait".into()];
    let source = "issue 22: a model change removes the previous pick (EI model-manager's undeploy)".to_string();
    r.plan.decisions.push(crate::plan::PlanDecision {
        fact: format!("the last completed run deployed {old}; this run picks {}", new.as_deref().unwrap_or("none")),
        choice: format!("{}: {old} before the install", crate::state::since::UNDEPLOY),
        permalink: source.clone(),
        source,
    });
    let at = r.plan.commands.iter().position(|c| c.phase == PhaseId::Install).unwrap_or(r.plan.commands.len());
    r.plan.commands.insert(at, crate::plan::PlannedCommand { phase: PhaseId::Install, argv });
}

/// The undeploy this run plans before its install, if any.
pub fn planned_undeploy(r: &Runner) -> Option<Vec<String>> {
    r.plan.commands.iter().find(|c| c.argv.first().is_some_and(|a| a == MODEL_MANAGER)).map(|c| c.argv.clone())
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

/// Whether this run upgrades in place: the pins moved since the last completed run (an upgrade,
/// or a resumed one) and the work tree holds the inited env.
pub fn upgrades_in_place(r: &Runner, work: &Path, env: &str) -> bool {
    r.plan.since_last.as_ref().is_some_and(|s| !s.pins.is_empty())
        && work.join("env").join(env).join(".solutions.yaml").exists()
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
    if !crate::state::since::is_completed(&r.state) {
        return;
    }
    if let Err(e) = Completed::save(sd, &r.state, facts, &r.plan.to_json(), files) {
        shell.warn(format!("the completed run was not kept for the next `eas up` to compare with: {e}"));
    }
}

/// A real run says what it is and what changed before its first act.
pub fn announce(r: &Runner, shell: &Shell) {
    let Some(kind) = r.plan.run_kind else { return };
    shell.phase("plan", format!("run: {kind}"));
    if let Some(since) = &r.plan.since_last {
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
    /// The pins moved: the kept work tree is upgraded in place (`init --upgrade`).
    pub in_place: bool,
}

/// The lasting phases a run skips when they finished with the same inputs (their journal
/// entries carried over from `prev`), and whether it upgrades the kept work tree in place.
pub fn resume(args: &UpSettings, prev: Option<&State>, work: &Path, r: &mut Runner) -> Resume {
    let kind = r.plan.run_kind;
    let skipped = skipped(kind, args.reinstall, prev, r.inputs());
    if let Some(p) = prev {
        r.state.carry_over(p, &skipped);
    }
    let installed = skipped.contains(&PhaseId::Install) && work.join("env").join(&args.env).exists();
    let up_to_date = installed && kind == Some(RunKind::UpToDate);
    Resume { installed, up_to_date, in_place: upgrades_in_place(r, work, &args.env) }
}
