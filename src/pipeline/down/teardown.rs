//! teardown: the installer's teardown for the recorded layer, in the recorded work tree, in the
//! bastion. With a complete record the components whose teardown would delete something that
//! existed before `eas up` are skipped (`--skip`); with an incomplete one (`--force-incomplete`)
//! every guarded component is. It stops itself at its window's deadline (the container is
//! removed), and on a lost Lease or SIGINT/SIGTERM.

use crate::act::bastion;
use crate::act::bastion::run::Outcome;
use crate::config::render;
use crate::error::Failure;
use crate::installer::command::{shell_line, teardown_argv};
use crate::plan::{DownId, Step};
use crate::state::StateDir;
use crate::state::journal::{State, create_private_dir};
use crate::state::ledger::{TeardownPlan, all_guarded_components, guard_teardown};

use crate::pipeline::down::bench::Bench;
use crate::pipeline::down::cx::{Cx, Down, SNAPSHOT_DEADLINE, left, snapshot};
use crate::pipeline::down::removal::{How, Removal, refuse_incomplete};
use crate::pipeline::runner::{Phase, Runner};
use crate::state::run::now;

pub struct Teardown<'a> {
    pub sd: &'a StateDir,
    /// The layer, and whether the record is incomplete (every guard's `--skip`, once
    /// `--force-incomplete` allows it) or dropped (no teardown).
    pub removal: &'a Removal,
}

/// What the teardown hands on: what it ran on, whether it succeeded, and (with a complete
/// record) the guarded plan it followed.
pub struct Torn {
    pub bench: Bench,
    pub ok: bool,
    pub plan: Option<TeardownPlan>,
}

impl Torn {
    /// What the deletions need after a guarded teardown: the bench it ran on and its plan.
    pub fn guarded(&self) -> Option<(&Bench, &TeardownPlan)> {
        Some((&self.bench, self.plan.as_ref()?))
    }
}

impl Phase<Down> for Teardown<'_> {
    const ID: DownId = DownId::Teardown;
    const STOPS_ITSELF: bool = true;
    type Planned = ();
    type Done = Torn;

    /// An acknowledged incomplete record was torn down before: it is only dropped.
    fn should_run(&self, _cx: &Cx<'_>, _r: &Runner<Down>) -> bool {
        !matches!(self.removal.how, How::Drop)
    }

    /// An incomplete record: nothing is removed (exit 1) unless `--force-incomplete`.
    async fn before(&mut self, cx: &Cx<'_>, r: &mut Runner<Down>) -> Result<(), Failure> {
        match (self.removal.incomplete(), r.record().as_ref()) {
            (Some(reason), Some(loaded)) => refuse_incomplete(cx, &loaded.state, reason),
            _ => Ok(()),
        }
    }

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner<Down>) -> Result<Torn, Failure> {
        let r: &Runner<Down> = r;
        let state = &r.record().as_ref().ok_or_else(|| Failure::step(DownId::Teardown, "no record was loaded"))?.state;
        let (skip, plan) = match self.removal.incomplete() {
            Some(_) => (all_guarded_components(), None),
            None => {
                let current = snapshot(cx.cluster()?, cx.interrupt, SNAPSHOT_DEADLINE).await?;
                let plan = guard_teardown(&state.ledger, &current);
                for p in &plan.protect {
                    cx.shell.note(format!("protecting {}: existed before eas up; {}", p.object, p.threat.by));
                }
                (plan.skip_components(), Some(plan))
            }
        };
        let bench = Bench::new(cx, state).await?;
        let ok = teardown(cx, &bench, r.fence(), (self.sd, state), &self.removal.layer, &skip).await?;
        Ok(Torn { bench, ok, plan })
    }
}

/// The installer's teardown, in the recorded work tree, with `skip` passed as `--skip`. False
/// when it failed (its log tail is shown). A missing work tree is reported, not an error.
async fn teardown(
    cx: &Cx<'_>,
    bench: &Bench,
    fence: Option<&crate::cluster::lease::Fence>,
    (sd, state): (&StateDir, &State),
    layer: &str,
    skip: &[String],
) -> Result<bool, Failure> {
    let shell = cx.shell;
    let tree = sd.work_dir().join("eas");
    if !tree.join("env").join(&state.env).exists() {
        shell.warn(format!(
            "the work tree {} is gone: the installer's teardown cannot run; removing what the ledger recorded",
            tree.display()
        ));
        return Ok(true);
    }
    let logs = sd.logs_dir();
    create_private_dir(&logs).map_err(|e| crate::state::run::io_failure(Step::Log, &logs, e))?;
    let log_path = logs.join(format!("down-{}.log", now().replace(':', "")));
    let tag = bench.tag(cx).await?;
    let argv = argv(layer, &state.env, skip, tree.join("env").join(&state.env).join(render::OVERRIDES).exists())?;
    shell.phase("teardown", format!("{} (log: {})", shell_line(&argv), log_path.display()));
    let env = cx.global.env.lookup();
    let std = bastion::standard(tag, argv, Some(&tree), Some(&bench.kube), &env)?;
    let mut spec = std.spec.clone();
    // It stops itself at its window's deadline: the runner hands the window, never the table.
    spec.timeout = Some(left());
    let (fenced, watch) = crate::act::install::fenced(cx.interrupt, fence);
    let ran = bench.run(&spec, &fenced).await;
    watch.abort();
    let (outcome, out) = ran.map_err(|e| Failure::step(DownId::Teardown, e))?;
    let redactor = crate::act::install::redactor(&cx.global.env);
    let text: String = String::from_utf8_lossy(&out).lines().map(|l| redactor.redact(l) + "\n").collect();
    let _ = std::fs::write(&log_path, &text);
    match outcome {
        Outcome::Exited(0) => Ok(true),
        Outcome::Interrupted => match fence.and_then(crate::cluster::lease::Fence::lost) {
            Some(lost) => Err(Failure::step_next(
                DownId::Teardown,
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

/// The installer's teardown command: `skip` as `--skip`, and the run's overrides file when the
/// work tree has one.
fn argv(layer: &str, env: &str, skip: &[String], overrides: bool) -> Result<Vec<String>, Failure> {
    let mut argv = teardown_argv(layer, env)?;
    if !skip.is_empty() {
        argv.extend(["--skip".to_string(), skip.join(",")]);
    }
    if overrides {
        argv.extend([
            "--".to_string(),
            "-e".to_string(),
            format!("@{}/env/{env}/{}", bastion::TREE_TARGET, render::OVERRIDES),
        ]);
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guarded components go in one `--skip`; the overrides file the run wrote is passed
    /// to the playbooks as extra vars.
    #[test]
    fn the_teardown_skips_the_guarded_components_and_passes_the_runs_overrides() {
        let plain = argv("inference", "k3d-gpu", &[], false).unwrap();
        assert_eq!(plain[..3], ["./es_auto_installer.sh", "teardown", "inference"], "{plain:?}");
        assert!(!plain.iter().any(|a| a == "--skip" || a == "--"), "{plain:?}");
        let skip = ["cert-manager".to_string(), "istio".to_string()];
        let guarded = argv("inference", "k3d-gpu", &skip, true).unwrap();
        let at = guarded.iter().position(|a| a == "--skip").unwrap();
        assert_eq!(guarded[at + 1], "cert-manager,istio");
        assert_eq!(
            guarded[guarded.len() - 3..],
            ["--", "-e", &format!("@{}/env/k3d-gpu/{}", bastion::TREE_TARGET, render::OVERRIDES)]
        );
    }
}
