//! Prepare and install, in the bastion: `init`, the text edits to the env files, then the
//! installer itself, its output streamed to the run's log (secrets masked) and read for progress
//! and for the bring-your-own-cluster line that must come before anything acts.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use bollard::Docker;
use indicatif::ProgressBar;
use tokio_util::sync::CancellationToken;

use crate::act::bastion;
use crate::act::bastion::run::{ContainerRunner, DockerRunner, Outcome as RunOutcome, Sink, Stream};
use crate::act::prepare::global_config::merge_global_edit;
use crate::act::prepare::models::{ModelsEdit, apply_models_edit};
use crate::cluster::lease::Fence;
use crate::config::{self, render};
use crate::installer::command::shell_line;
use crate::installer::progress::{Event, Guard, Outcome, Progress, Tail};
use crate::output::Shell;
use crate::runtime::Interrupt;
use crate::secrets::redact::Redactor;
use crate::settings::{Env, Global};
use crate::state::StateDir;
use crate::state::journal::create_private_dir;

use crate::state::run::now;

/// Why prepare or install (or the undeploy before it) did not finish; the command edge gives
/// each its exit code and `next:` line.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Kubeconfig(#[from] crate::kubeconfig::TargetError),
    #[error(transparent)]
    Bastion(#[from] bastion::BastionError),
    #[error(transparent)]
    Log(#[from] crate::state::run::PathIoError),
    /// The bastion's container could not be run.
    #[error(transparent)]
    Run(bastion::run::RunError),
    /// Ctrl-C or SIGTERM stopped the installer.
    #[error("interrupted")]
    Interrupted,
    #[error(transparent)]
    Grammar(#[from] crate::installer::command::GrammarError),
    #[error(transparent)]
    Command(#[from] crate::installer::command::CommandError),
    /// A file of the inited env that prepare could not read or write.
    #[error("{}: {source}", path.display())]
    Prepare {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    GlobalConfig(#[from] crate::act::prepare::global_config::GlobalConfigError),
    #[error(transparent)]
    Models(#[from] crate::act::prepare::models::ModelsError),
    /// The installer ran and did not succeed, in `step`: its cause, the log, and what to do.
    #[error("{cause}; log: {}", log.display())]
    Installer { step: crate::plan::PhaseId, cause: String, log: std::path::PathBuf, next: String },
}

pub struct Ctx<'a> {
    pub docker: &'a Docker,
    pub image: &'a str,
    pub tree: &'a Path,
    pub global: &'a Global,
    /// The kubeconfig the run resolved once; the bastion's copy is made from it.
    pub kube: &'a crate::kubeconfig::KubeSource,
    pub shell: &'a Shell,
    pub interrupt: &'a Interrupt,
    /// The cluster Lease's fence: a lost Lease stops the installer's container.
    pub fence: Option<Fence>,
}

/// The secrets the installer may see, so no log line carries them.
pub fn redactor(env: &Env) -> Redactor {
    let secrets: Vec<String> = bastion::installer_env()
        .iter()
        .filter(|v| v.secret)
        .filter_map(|v| env.var(&v.name))
        .filter(|s| !s.is_empty())
        .collect();
    // And every secret eas has read so far: the kubeconfig's tokens and keys (the installer
    // prints its kubeconfig), a minted token, proxy userinfo.
    crate::secrets::redactor_with(secrets)
}

/// Streams the container's output into the log and the progress reader.
struct InstallSink {
    log: std::fs::File,
    redactor: Redactor,
    progress: Progress,
    tail: Tail,
    partial: Vec<u8>,
    stop: CancellationToken,
    stopped: Option<String>,
    bar: ProgressBar,
    plain: bool,
    shell: Shell,
}

impl InstallSink {
    fn line(&mut self, raw: &str) {
        let line = self.redactor.redact(raw);
        let _ = writeln!(self.log, "{line}");
        self.tail.push(&line);
        let (event, guard) = self.progress.feed(&line);
        if let Guard::Stop(reason) = guard
            && self.stopped.is_none()
        {
            self.stopped = Some(reason);
            self.stop.cancel();
        }
        match event {
            Event::Play(p) if self.plain => self.shell.note(format!("    play: {p}")),
            Event::Byo { kubeconfig } if self.plain => {
                self.shell.note(format!("    bring-your-own cluster: {kubeconfig}"))
            }
            Event::Failed { .. } => self.shell.note(format!("    {line}")),
            _ => {}
        }
        self.bar.set_message(self.progress.status());
    }
}

impl Sink for InstallSink {
    fn write(&mut self, _stream: Stream, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        while let Some(pos) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).trim_end_matches('\r').to_string();
            self.line(&text);
        }
    }
}

impl InstallSink {
    fn flush(&mut self) {
        if !self.partial.is_empty() {
            let text = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).to_string();
            self.line(&text);
        }
    }
}

/// The run's cancellation for one container, also cancelled when the cluster Lease's `fence`
/// trips: the holder that lost its Lease stops its container. Abort the handle once the
/// container is gone.
pub fn fenced(interrupt: &Interrupt, fence: Option<&Fence>) -> (Interrupt, tokio::task::JoinHandle<()>) {
    let run = Interrupt { graceful: interrupt.graceful.child_token(), force: interrupt.force.child_token() };
    let (g, fence) = (run.graceful.clone(), fence.cloned());
    let watch = tokio::spawn(async move {
        if let Some(f) = fence {
            f.tripped().await;
            g.cancel();
        }
    });
    (run, watch)
}

/// Runs one installer command in the bastion; returns the reader's verdict and the sink.
async fn run_installer(
    ctx: &Ctx<'_>,
    argv: &[String],
    log_path: &Path,
    timeout: Duration,
    guard_byo: bool,
) -> Result<(Outcome, Tail), InstallError> {
    let kube = bastion::minted(ctx.kube, ctx.shell).await?;
    let std = bastion::standard(ctx.image, argv.to_vec(), Some(ctx.tree), Some(&kube), &ctx.global.env.lookup())?;
    let mut spec = std.spec.clone();
    spec.timeout = Some(timeout);
    // The work tree's clones borrow their objects from eas's mirror cache by absolute path
    // (`git clone --shared`): read-only at the same paths, `init --upgrade` can move `ext/`.
    for dir in borrowed_objects(ctx.tree) {
        let target = dir.display().to_string();
        spec.mounts.push(bastion::run::BindMount { source: dir, target, read_only: true });
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .map_err(|e| crate::state::run::io_failure(crate::plan::Step::Log, log_path, e))?;
    let stop = CancellationToken::new();
    let (run_int, fenced) = fenced(ctx.interrupt, ctx.fence.as_ref());
    let bar = ctx.shell.spinner_within(shell_line(argv), timeout);
    let mut sink = InstallSink {
        log,
        redactor: redactor(&ctx.global.env),
        progress: Progress::new(),
        tail: Tail::new(30),
        partial: Vec::new(),
        stop: stop.clone(),
        stopped: None,
        bar,
        plain: !ctx.shell.bars,
        shell: ctx.shell.clone(),
    };
    let runner = DockerRunner::new(ctx.docker.clone());
    let watcher = {
        let g = run_int.graceful.clone();
        let s = stop.clone();
        tokio::spawn(async move {
            s.cancelled().await;
            g.cancel();
        })
    };
    let res = runner.run(&spec, &mut sink, &run_int).await;
    watcher.abort();
    fenced.abort();
    sink.flush();
    scrub_tree_logs(ctx.tree, &sink.redactor, ctx.shell);
    sink.bar.finish_and_clear();
    let outcome = res.map_err(InstallError::Run)?;
    drop(std);
    let lost = ctx.fence.as_ref().and_then(Fence::lost);
    let verdict = match outcome {
        RunOutcome::Interrupted if lost.is_some() && !ctx.interrupt.graceful.is_cancelled() => {
            Outcome::Stopped(lost.unwrap_or_default())
        }
        RunOutcome::Interrupted if sink.stopped.is_some() => Outcome::Stopped(sink.stopped.clone().unwrap_or_default()),
        RunOutcome::Interrupted => return Err(InstallError::Interrupted),
        RunOutcome::TimedOut => Outcome::Failed {
            code: -1,
            task: Some(format!("no result within {}s (stopped)", timeout.as_secs())),
            log: None,
        },
        RunOutcome::Exited(code) => {
            let v = sink.progress.outcome(Some(code as i32));
            if guard_byo && code == 0 && !sink.progress.byo_seen() {
                Outcome::Stopped("the installer finished without printing its bring-your-own-cluster line".into())
            } else {
                v
            }
        }
    };
    Ok((verdict, sink.tail))
}

/// The object directories the work tree's clones (its own and each `ext/*`) borrow from, their
/// `objects/info/alternates` followed to the end: absolute paths outside the tree.
fn borrowed_objects(tree: &Path) -> Vec<std::path::PathBuf> {
    let mut todo = vec![tree.join(".git/objects")];
    if let Ok(ext) = std::fs::read_dir(tree.join("ext")) {
        todo.extend(ext.flatten().map(|e| e.path().join(".git/objects")));
    }
    let mut found: Vec<std::path::PathBuf> = Vec::new();
    while let Some(objects) = todo.pop() {
        let Ok(text) = std::fs::read_to_string(objects.join("info/alternates")) else { continue };
        for line in text.lines().map(str::trim).filter(|l| l.starts_with('/')) {
            let dir = std::path::PathBuf::from(line);
            if dir.is_dir() && !dir.starts_with(tree) && !found.contains(&dir) {
                found.push(dir.clone());
                todo.push(dir);
            }
        }
    }
    found
}

/// The installer `tee`s everything it prints into `env/<env>/logs/` of the work tree, where
/// eas's redactor never saw it (its preflight shows the proxy URL, credentials and all): those
/// files get the same masking as eas's own log, after every run.
fn scrub_tree_logs(tree: &Path, redactor: &Redactor, shell: &Shell) {
    for env in std::fs::read_dir(tree.join("env")).into_iter().flatten().flatten() {
        let logs = env.path().join("logs");
        if let Err(e) = crate::secrets::scrub_dir(&logs, redactor) {
            shell.warn(format!("could not mask secrets in {}: {e}", logs.display()));
        }
    }
}

fn failure(
    step: crate::plan::PhaseId,
    outcome: &Outcome,
    tail: &Tail,
    log: &Path,
    next: &str,
    shell: &Shell,
) -> Option<InstallError> {
    let cause = match outcome {
        Outcome::Complete(_) => return None,
        Outcome::NoBanner => return None,
        Outcome::Stopped(r) => format!("stopped by eas: {r}"),
        Outcome::Failed { code, task, .. } => match task {
            Some(t) => format!("the installer failed (exit {code}) at {t}"),
            None => format!("the installer failed (exit {code})"),
        },
        Outcome::Killed => "the installer was killed".to_string(),
    };
    shell.note(format!("last lines of {}:", log.display()));
    for l in tail.lines() {
        shell.note(format!("  | {l}"));
    }
    Some(InstallError::Installer { step, cause, log: log.to_path_buf(), next: next.to_string() })
}

/// The run's log file in the state directory's `logs/` (made private), named for the time.
pub fn log_file(sd: &StateDir) -> Result<std::path::PathBuf, crate::state::run::PathIoError> {
    let logs = sd.logs_dir();
    create_private_dir(&logs).map_err(|e| crate::state::run::io_failure(crate::plan::Step::Log, &logs, e))?;
    Ok(logs.join(format!("up-{}.log", now().replace(':', ""))))
}

/// Prepare's act half: the layer manifest first (init clones what it names), then `init` as the
/// plan printed it (`init --upgrade` when an upgrade keeps the inited env), then the edits to the env files,
/// which are idempotent: the installer never rewrites an env's files on upgrade. `limit` is the phase's effective timeout (the runner's window).
pub async fn prepare(
    ctx: &Ctx<'_>,
    files: &[(String, String)],
    decision: &config::Decision,
    inv: &crate::state::resume::Invocation,
    log_path: &Path,
    limit: Duration,
    init: &[String],
) -> Result<(), InstallError> {
    let (layer, env) = (inv.layer.as_str(), inv.env.as_str());
    let file = |name: &str| files.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str()).unwrap_or_default();
    let next_up = format!("fix the cause, then {}", inv.resume());
    crate::installer::command::detect_grammar_in(ctx.tree)?;
    let manifest = ctx.tree.join("configs/repos").join(render::repos_file(layer));
    let step = |e: std::io::Error, what: &Path| InstallError::Prepare { path: what.to_path_buf(), source: e };
    std::fs::create_dir_all(manifest.parent().expect("has parent")).map_err(|e| step(e, &manifest))?;
    std::fs::write(&manifest, file(&render::repos_file(layer))).map_err(|e| step(e, &manifest))?;
    ctx.shell.phase("prepare", shell_line(init));
    let (outcome, tail) = run_installer(ctx, init, log_path, limit, false).await?;
    if let Some(f) = failure(crate::plan::PhaseId::Prepare, &outcome, &tail, log_path, &next_up, ctx.shell) {
        return Err(f);
    }
    let env_dir = ctx.tree.join("env").join(env);
    let global_path = env_dir.join("global_config.yaml");
    let original = std::fs::read_to_string(&global_path).map_err(|e| step(e, &global_path))?;
    let merged = merge_global_edit(&original, file(render::GLOBAL_EDIT))?;
    std::fs::write(&global_path, merged).map_err(|e| step(e, &global_path))?;
    let models_path = env_dir.join("models.yaml");
    let edit = ModelsEdit::parse(file(render::MODELS_EDIT))?;
    match std::fs::read_to_string(&models_path) {
        Ok(text) => {
            let edited = apply_models_edit(&text, &edit)?;
            std::fs::write(&models_path, edited).map_err(|e| step(e, &models_path))?;
        }
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound && decision.model_edits.is_empty() && !decision.require_amx =>
        {
            ctx.shell.warn(format!("{} was not seeded by init; the catalog defaults apply", models_path.display()));
        }
        Err(e) => return Err(step(e, &models_path)),
    }
    let overrides = env_dir.join(render::OVERRIDES);
    std::fs::write(&overrides, file(render::OVERRIDES)).map_err(|e| step(e, &overrides))?;
    Ok(())
}

/// The last completed run's model removed (`./model-manager undeploy NAME --wait`), in the
/// bastion, before the install deploys the new pick.
pub async fn undeploy(ctx: &Ctx<'_>, argv: &[String], log_path: &Path, limit: Duration) -> Result<(), InstallError> {
    ctx.shell.phase("install", format!("{} (log: {})", shell_line(argv), log_path.display()));
    let (outcome, tail) = run_installer(ctx, argv, log_path, limit, false).await?;
    match failure(
        crate::plan::PhaseId::Install,
        &outcome,
        &tail,
        log_path,
        "remove the model by hand, then `eas up` again",
        ctx.shell,
    ) {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// Install's act half: the installer in the bastion, under the phase's effective timeout.
pub async fn install(
    ctx: &Ctx<'_>,
    install_argv: &[String],
    inv: &crate::state::resume::Invocation,
    log_path: &Path,
    limit: Duration,
) -> Result<(), InstallError> {
    let (_layer, _env) = (inv.layer.as_str(), inv.env.as_str());
    let next_up = format!("fix the cause, then {}", inv.resume());
    ctx.shell.phase("install", format!("{} (log: {})", shell_line(install_argv), log_path.display()));
    let (outcome, tail) = run_installer(ctx, install_argv, log_path, limit, true).await?;
    if let Some(f) = failure(crate::plan::PhaseId::Install, &outcome, &tail, log_path, &next_up, ctx.shell) {
        return Err(f);
    }
    if outcome == Outcome::NoBanner {
        ctx.shell.warn("the installer exited 0 without its completion banner; verification decides");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_logs_redactor_masks_the_kubeconfigs_secrets_and_the_installers_env() {
        use base64::Engine;
        let (_dir, path) = crate::testing::temp_path("config");
        let key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIINSTALLLOGkeyBODY0123456789abcdef\n-----END EC PRIVATE KEY-----\n";
        let key_data = base64::engine::general_purpose::STANDARD.encode(key);
        std::fs::write(
            &path,
            format!("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: INSTALLLOGtoken1\n    client-key-data: {key_data}\n"),
        )
        .unwrap();
        let source = crate::kubeconfig::KubeSource::file(path, true, None);
        source.load().unwrap();
        let r = redactor(&Env::of(&[("HF_TOKEN", "hf_INSTALLLOGhf0123")]));
        // What the installer prints when it shows its kubeconfig, and its environment.
        for line in [
            "    token: INSTALLLOGtoken1".to_string(),
            format!("    client-key-data: {key_data}"),
            "MHcCAQEEIINSTALLLOGkeyBODY0123456789abcdef".to_string(),
            "HF_TOKEN=hf_INSTALLLOGhf0123".to_string(),
        ] {
            let masked = r.redact(&line);
            assert!(!masked.contains("INSTALLLOG"), "{line} -> {masked}");
        }
    }
}
