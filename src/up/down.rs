//! `eas down` (SPEC §6): the installer's teardown for the recorded layer, with the components
//! whose teardown would delete something that existed before `eas up` skipped; then the objects
//! the ledger says the run created and are still there; then a report of what is left and why.
//! Safe to run twice: with nothing recorded there is nothing to do.

use std::path::PathBuf;
use std::time::Duration;

use crate::bastion;
use crate::bastion::run::{ContainerRunner, DockerRunner, Interrupt, Outcome as RunOutcome, Sink, Stream};
use crate::config::render;
use crate::error::Failure;
use crate::gather;
use crate::installer::command::{shell_line, teardown_argv};
use crate::output::Shell;
use crate::settings::Global;
use crate::state::journal::{State, create_private_dir};
use crate::state::ledger::{Object, guard_teardown};
use crate::state::{StateDir, lock};

use super::{CALL, cluster, now, state_root};

#[derive(Debug, Clone)]
pub struct DownSettings {
    /// Layer to tear down [default: the recorded one]
    pub layer: Option<String>,
    /// Do not ask before changing the cluster (required without a terminal)
    pub yes: bool,
    /// Also remove the state directory of this cluster (logs, work tree)
    pub purge: bool,
    /// Take over a lock left by a run that is no longer alive
    pub break_lock: bool,
    /// Pins file [default: the pins.json built into eas]
    pub pins: Option<PathBuf>,
    pub image: crate::bastion::BaseImage,
    /// How long the installer's teardown may run, in seconds
    pub teardown_timeout: u64,
}

pub fn command(args: &DownSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    crate::runtime::block_on(down(args, global, shell))?
}

struct Quiet(Vec<u8>);

impl Sink for Quiet {
    fn write(&mut self, _s: Stream, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

async fn down(args: &DownSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let interrupt = Interrupt::on_signals().map_err(|e| Failure::step("signals", e))?;
    let target = gather::target(global, CALL).await?;
    let key = cluster::cluster_key(&target.client, CALL).await.map_err(|e| Failure::step("down", e))?;
    let sd = StateDir::new(&state_root(global)?, &key)?;
    let Some(mut state) = State::load(&sd.state_file())? else {
        shell.phase(
            "down",
            format!("nothing recorded for {} in {}: nothing to remove", target.context, sd.dir().display()),
        );
        if args.purge && sd.dir().exists() {
            std::fs::remove_dir_all(sd.dir()).map_err(|e| Failure::step("down", e))?;
        }
        return Ok(());
    };
    if !args.yes && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure::bad_input(
            "eas down changes the cluster and no terminal is attached to confirm",
            "pass --yes",
        ));
    }
    let _lock = lock::acquire(&sd.lock_file(), "eas down", &now(), args.break_lock)?;
    let layer = args.layer.clone().unwrap_or_else(|| state.layer.clone());
    let current = cluster::snapshot(&target.client, CALL).await.map_err(|e| Failure::step("down", e))?;
    let plan = guard_teardown(&state.ledger, &current);
    let skip = plan.skip_components();
    for p in &plan.protect {
        shell.note(format!("protecting {}: existed before eas up; {}", p.object, p.threat.by));
    }

    // The installer's teardown, in the recorded work tree.
    let tree = sd.work_dir().join("eas");
    let logs = sd.logs_dir();
    create_private_dir(&logs).map_err(|e| Failure::step("log", e))?;
    let log_path = logs.join(format!("down-{}.log", now().replace(':', "")));
    let docker = bastion::image::connect(&global.env)
        .await
        .map_err(|e| Failure::step_next("down", e, "start a Docker Engine (scripts/docker-up.sh)"))?;
    let image_args = super::image_args(&args.image, args.pins.clone(), global);
    let mut teardown_ok = true;
    if tree.join("env").join(&state.env).exists() {
        let prepared = bastion::prepare(&docker, &image_args, false, false, shell, &interrupt).await?;
        let mut argv = teardown_argv(&layer, &state.env)?;
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
        let env = global.env.lookup();
        let kube = bastion::minted_source(global, shell).await?;
        let std = bastion::standard(&prepared.tag, argv, Some(&tree), Some(&kube), &env)?;
        let mut spec = std.spec.clone();
        spec.timeout = Some(Duration::from_secs(args.teardown_timeout));
        let mut sink = Quiet(Vec::new());
        let outcome = DockerRunner::new(docker.clone()).run(&spec, &mut sink, &interrupt).await;
        let redactor = super::install::redactor(&global.env);
        let text: String = String::from_utf8_lossy(&sink.0).lines().map(|l| redactor.redact(l) + "\n").collect();
        let _ = std::fs::write(&log_path, &text);
        match outcome.map_err(|e| Failure::step("teardown", e))? {
            RunOutcome::Exited(0) => {}
            RunOutcome::Interrupted => return Err(Failure::Interrupted),
            other => {
                teardown_ok = false;
                shell.warn(format!("the installer's teardown ended {other:?}; log: {}", log_path.display()));
                for l in text.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev() {
                    shell.note(format!("  | {l}"));
                }
            }
        }
    } else {
        shell.warn(format!(
            "the work tree {} is gone: the installer's teardown cannot run; removing what the ledger recorded",
            tree.display()
        ));
    }

    // What the ledger says this run created and is still there.
    let after_teardown = cluster::snapshot(&target.client, CALL).await.map_err(|e| Failure::step("down", e))?;
    let mut failures = Vec::new();
    for o in plan.delete.intersect(&after_teardown).objects() {
        let r = match &o {
            Object::Namespace(n) => cluster::delete_namespace(&target.client, n, CALL).await,
            Object::Crd(c) => cluster::delete_crd(&target.client, c, CALL).await,
            Object::HelmRelease(rel) => {
                helm_uninstall(&docker, &image_args, global, shell, &interrupt, &rel.namespace, &rel.name).await
            }
        };
        match r {
            Ok(()) => shell.note(format!("removed {o}")),
            Err(e) => failures.push(format!("{o}: {e}")),
        }
    }
    let after = cluster::snapshot(&target.client, CALL).await.map_err(|e| Failure::step("down", e))?;
    for line in plan.report(&after) {
        shell.note(format!("  {line}"));
    }
    let lost = plan.lost(&after);
    if !teardown_ok || !failures.is_empty() || !lost.is_empty() {
        for f in &failures {
            shell.warn(f);
        }
        for l in lost {
            shell.warn(format!("{} existed before eas up and is gone", l.object));
        }
        state.finished = Some(now());
        state.save(&sd.state_file())?;
        return Err(Failure::step_next(
            "down",
            "teardown did not complete; the record is kept",
            "read the log and the lines above, then run `eas down --yes` again",
        ));
    }
    // Done: the record goes, so a second `eas down` has nothing to do.
    std::fs::remove_file(sd.state_file()).map_err(|e| Failure::step("down", e))?;
    if args.purge {
        drop(_lock);
        std::fs::remove_dir_all(sd.dir()).map_err(|e| Failure::step("down", e))?;
    }
    shell.phase("down", format!("{layer} removed from {}", target.context));
    Ok(())
}

async fn helm_uninstall(
    docker: &bollard::Docker,
    image_args: &bastion::ImageSettings,
    global: &Global,
    shell: &Shell,
    interrupt: &Interrupt,
    namespace: &str,
    name: &str,
) -> Result<(), String> {
    let prepared =
        bastion::prepare(docker, image_args, false, false, shell, interrupt).await.map_err(|e| e.to_string())?;
    let env = global.env.lookup();
    let kube = bastion::minted_source(global, shell).await.map_err(|f| f.lines().join("; "))?;
    let argv = ["helm", "uninstall", "--namespace", namespace, name, "--wait", "--timeout", "5m"];
    let std = bastion::standard(&prepared.tag, argv.iter().map(|s| s.to_string()).collect(), None, Some(&kube), &env)
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
