//! The run seam: one command in the bastion image, its output streamed, its exit code returned,
//! and the container removed whatever happened. `eas up` runs the installer through
//! [`ContainerRunner`]; its tests swap in their own runner.
//!
//! Sequence (no `auto_remove`, which races `wait` on short containers): create → start → logs
//! and wait at once → exit code → remove. The end of the log stream is not the exit: the exit
//! code comes from `wait`, and logs are then drained for a bounded time. On an interrupt the
//! container is stopped (a second interrupt skips the grace period) and removed.
//!
//! The container never outlives the eas that started it: its command runs under [`FENCE`], and
//! eas holds the container's stdin open through an attach stream (`StdinOnce`) for as long as
//! it runs. When eas ends in any way, a SIGKILL included, the kernel closes that stream, the
//! Docker Engine closes the container's stdin, and the fence ends the command: SIGTERM to its
//! process group, SIGKILL 3 s later, and the container stops with the fence (its init is PID
//! 1). The documented bound is 10 s from the stream's close to no container running.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
    StopContainerOptionsBuilder,
};
use futures::StreamExt;

use crate::act::bastion::labels::{MANAGED_LABEL, RUN_LABEL};

/// The entrypoint of every container eas runs in the bastion (`bash -c FENCE eas-fence CMD...`):
/// CMD in its own session with no stdin, ended when the fence's stdin (eas's attach stream)
/// closes or when the container is stopped (the init forwards SIGTERM to the fence).
pub const FENCE: &str = r#"exec 3<&0
setsid "$@" </dev/null 3<&- &
child=$!
trap 'kill -TERM -- -"$child" 2>/dev/null' TERM INT
( cat <&3 >/dev/null; kill -TERM -- -"$child" 2>/dev/null; sleep 3; kill -KILL -- -"$child" 2>/dev/null ) &
watch=$!
exec 3<&-
while :; do
  wait "$child"
  code=$?
  kill -0 "$child" 2>/dev/null || break
done
kill -KILL "$watch" 2>/dev/null
exit "$code""#;

/// How long output may keep arriving after the container has exited.
const DRAIN: Duration = Duration::from_secs(10);
const NO_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 86_400);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot create a container from {image}: {source}")]
    Create { image: String, source: bollard::errors::Error },
    #[error("cannot start container {name}: {source}")]
    Start { name: String, source: bollard::errors::Error },
    #[error("lost the output of container {name}: {source}")]
    Logs { name: String, source: bollard::errors::Error },
    #[error("waiting for container {name} failed: {detail}")]
    Wait { name: String, detail: String },
    #[error("container {name} was not removed: {source}; remove it with `docker rm -f {name}`")]
    Remove { name: String, source: bollard::errors::Error },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub source: PathBuf,
    pub target: String,
    pub read_only: bool,
}

/// What to run. `env` values may be secrets: they reach the container and nothing else
/// (`Debug` shows their names only).
#[derive(Clone, Default)]
pub struct RunSpec {
    pub image: String,
    pub cmd: Vec<String>,
    pub env: Vec<(String, String)>,
    pub mounts: Vec<BindMount>,
    /// `host`, a network name, or the default network.
    pub network: Option<String>,
    pub workdir: Option<String>,
    /// Stop the container when it runs longer than this.
    pub timeout: Option<Duration>,
}

impl fmt::Debug for RunSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("RunSpec")
            .field("image", &self.image)
            .field("cmd", &self.cmd)
            .field("env (names only)", &env)
            .field("mounts", &self.mounts)
            .field("network", &self.network)
            .field("workdir", &self.workdir)
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Where the container's output goes, as it arrives.
pub trait Sink: Send {
    fn write(&mut self, stream: Stream, bytes: &[u8]);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Exited(i64),
    Interrupted,
    TimedOut,
}

/// The run-wide cancellation lives with the runtime; the container runner obeys it.
pub use crate::runtime::Interrupt;

pub trait ContainerRunner {
    fn run(
        &self,
        spec: &RunSpec,
        sink: &mut dyn Sink,
        interrupt: &Interrupt,
    ) -> impl Future<Output = Result<Outcome, RunError>>;
}

pub struct DockerRunner {
    pub docker: Docker,
    /// Time a stopped container gets to exit before it is killed.
    pub stop_grace: Duration,
}

impl DockerRunner {
    pub fn new(docker: Docker) -> DockerRunner {
        DockerRunner { docker, stop_grace: Duration::from_secs(10) }
    }

    fn create_body(spec: &RunSpec) -> ContainerCreateBody {
        let mounts = spec
            .mounts
            .iter()
            .map(|m| Mount {
                typ: Some(MountType::BIND),
                source: Some(m.source.display().to_string()),
                target: Some(m.target.clone()),
                read_only: Some(m.read_only),
                ..Default::default()
            })
            .collect();
        let fenced = ["bash", "-c", FENCE, "eas-fence"].into_iter().map(str::to_string).chain(spec.cmd.iter().cloned());
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(fenced.collect()),
            // The fence's stdin: held open by eas's attach stream, closed with it.
            open_stdin: Some(true),
            stdin_once: Some(true),
            attach_stdin: Some(true),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(HashMap::from([
                (MANAGED_LABEL.to_string(), "true".to_string()),
                (RUN_LABEL.to_string(), crate::state::lock::this_run_id()),
            ])),
            working_dir: spec.workdir.clone(),
            tty: Some(false),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            host_config: Some(HostConfig {
                mounts: Some(mounts),
                network_mode: spec.network.clone(),
                // An init process forwards the stop signal, so a stop does not wait out the grace.
                init: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn drive(
        &self,
        name: &str,
        spec: &RunSpec,
        sink: &mut dyn Sink,
        interrupt: &Interrupt,
    ) -> Result<Outcome, RunError> {
        if interrupt.graceful.is_cancelled() {
            return Ok(Outcome::Interrupted);
        }
        self.docker
            .start_container(name, None)
            .await
            .map_err(|source| RunError::Start { name: name.into(), source })?;
        let opts = LogsOptionsBuilder::new().follow(true).stdout(true).stderr(true).build();
        let mut logs = self.docker.logs(name, Some(opts));
        let mut wait = self.docker.wait_container(name, None);
        let deadline = tokio::time::sleep(spec.timeout.unwrap_or(NO_TIMEOUT));
        tokio::pin!(deadline);
        let mut drain: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        let mut code: Option<i64> = None;
        let mut logs_open = true;
        while code.is_none() || logs_open {
            tokio::select! {
                _ = interrupt.graceful.cancelled() => {
                    self.stop(name, interrupt).await;
                    return Ok(Outcome::Interrupted);
                }
                _ = &mut deadline, if code.is_none() => {
                    self.stop(name, interrupt).await;
                    return Ok(Outcome::TimedOut);
                }
                item = logs.next(), if logs_open => match item {
                    Some(Ok(out)) => match out {
                        bollard::container::LogOutput::StdErr { message } => sink.write(Stream::Stderr, &message),
                        other => sink.write(Stream::Stdout, &other.into_bytes()),
                    },
                    Some(Err(source)) => return Err(RunError::Logs { name: name.into(), source }),
                    None => logs_open = false,
                },
                w = wait.next(), if code.is_none() => {
                    code = Some(match w {
                        Some(Ok(r)) => r.status_code,
                        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
                        Some(Err(e)) => return Err(RunError::Wait { name: name.into(), detail: e.to_string() }),
                        None => return Err(RunError::Wait { name: name.into(), detail: "no answer".into() }),
                    });
                    drain = Some(Box::pin(tokio::time::sleep(DRAIN)));
                }
                _ = async { drain.as_mut().expect("set with the code").await }, if drain.is_some() && logs_open => {
                    tracing::warn!("container {name}: output still open {} s after exit; not waiting for it", DRAIN.as_secs());
                    logs_open = false;
                }
            }
        }
        Ok(Outcome::Exited(code.unwrap_or_default()))
    }

    async fn stop(&self, name: &str, interrupt: &Interrupt) {
        let grace = i32::try_from(self.stop_grace.as_secs()).unwrap_or(10);
        let stop = self.docker.stop_container(name, Some(StopContainerOptionsBuilder::new().t(grace).build()));
        tokio::select! {
            r = stop => if let Err(e) = r { tracing::debug!("stop {name}: {e}") },
            _ = interrupt.force.cancelled() => tracing::debug!("stop {name}: second interrupt, removing at once"),
        }
    }

    async fn remove(&self, name: &str) -> Result<(), RunError> {
        let opts = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match self.docker.remove_container(name, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
            Err(source) => Err(RunError::Remove { name: name.into(), source }),
        }
    }
}

impl ContainerRunner for DockerRunner {
    async fn run(&self, spec: &RunSpec, sink: &mut dyn Sink, interrupt: &Interrupt) -> Result<Outcome, RunError> {
        let name = container_name();
        // -v: the command the container runs (the installer's, in the bastion); -vv: its time.
        tracing::debug!(
            "container {name}: {} in {} (env: {})",
            crate::installer::command::shell_line(&spec.cmd),
            spec.image,
            spec.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(" ")
        );
        let started = std::time::Instant::now();
        let opts = CreateContainerOptionsBuilder::new().name(&name).build();
        self.docker
            .create_container(Some(opts), Self::create_body(spec))
            .await
            .map_err(|source| RunError::Create { image: spec.image.clone(), source })?;
        // The stream the fence watches, attached before the start: held until the container is
        // removed, and closed by the kernel if eas dies.
        let attach = AttachContainerOptionsBuilder::new().stream(true).stdin(true).build();
        let stream = match self.docker.attach_container(&name, Some(attach)).await {
            Ok(s) => s,
            Err(source) => {
                let _ = self.remove(&name).await;
                return Err(RunError::Start { name, source });
            }
        };
        let outcome = self.drive(&name, spec, sink, interrupt).await;
        tracing::trace!("container {name}: {:?} after {} ms", outcome.as_ref().ok(), started.elapsed().as_millis());
        let removed = self.remove(&name).await;
        drop(stream);
        let outcome = outcome?;
        removed?;
        Ok(outcome)
    }
}

fn container_name() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("eas-bastion-{}-{nanos:08x}", std::process::id())
}

/// The container's stdout to ours, its stderr to ours: `eas bastion run` is a pass-through.
pub struct Stdio;

impl Sink for Stdio {
    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        use std::io::Write;
        let _ = match stream {
            Stream::Stdout => std::io::stdout().lock().write_all(bytes).and_then(|_| std::io::stdout().flush()),
            Stream::Stderr => std::io::stderr().lock().write_all(bytes),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_names_env_but_never_shows_values() {
        let spec = RunSpec {
            image: "eas-bastion:0123".into(),
            cmd: vec!["true".into()],
            env: vec![("HF_TOKEN".into(), "hf_secretvalue".into())],
            ..Default::default()
        };
        let text = format!("{spec:?}");
        assert!(text.contains("HF_TOKEN") && !text.contains("hf_secretvalue"), "{text}");
    }

    #[test]
    fn the_container_is_labelled_bind_mounted_and_has_an_init() {
        let spec = RunSpec {
            image: "img".into(),
            cmd: vec!["sh".into(), "-c".into(), "exit 3".into()],
            env: vec![("A".into(), "b".into())],
            mounts: vec![BindMount { source: "/k".into(), target: "/kube/config".into(), read_only: true }],
            network: Some("host".into()),
            ..Default::default()
        };
        let body = DockerRunner::create_body(&spec);
        assert_eq!(body.labels.unwrap().get(MANAGED_LABEL).map(String::as_str), Some("true"));
        // The command runs under the fence, whose stdin is eas's attach stream.
        let cmd = body.cmd.unwrap();
        assert_eq!(cmd[..4], ["bash", "-c", FENCE, "eas-fence"]);
        assert_eq!(cmd[4..], ["sh", "-c", "exit 3"]);
        assert_eq!((body.open_stdin, body.stdin_once, body.attach_stdin), (Some(true), Some(true), Some(true)));
        assert_eq!(body.env.unwrap(), vec!["A=b"]);
        let hc = body.host_config.unwrap();
        assert_eq!((hc.init, hc.network_mode.as_deref(), hc.auto_remove), (Some(true), Some("host"), None));
        let m = &hc.mounts.unwrap()[0];
        assert_eq!(
            (m.typ, m.target.as_deref(), m.read_only),
            (Some(MountType::BIND), Some("/kube/config"), Some(true))
        );
    }
}
