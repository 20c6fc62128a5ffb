//! The bastion image through the Docker API: connect, find an image built from this context,
//! build one from an in-memory tar with its output streamed.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateImageOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use futures::StreamExt;

use crate::act::bastion::labels::{CONTEXT_LABEL, MANAGED_LABEL};
use crate::act::bastion::run::Interrupt;
use crate::output::Shell;
use crate::settings::{Env, timeouts};
use crate::text::strip_ansi;

/// Lines of build output kept to show when a step fails.
const TAIL: usize = 25;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("no Docker Engine answers ({0})")]
    Connect(String),
    #[error("EAS_DOCKER_TIMEOUT {0:?} is not a number of seconds")]
    Timeout(String),
    #[error("Docker: {0}")]
    Api(#[from] bollard::errors::Error),
    #[error("the base image {0} is not present locally")]
    BaseMissing(String),
    /// One line (`status` keeps it as the run's cause); the build's last lines are printed as
    /// lines where it failed ([`say_failed`]), the known cause first.
    #[error("the build failed: {error}{}", .known.map(|k| format!("; {}", k.cause())).unwrap_or_default())]
    Build { error: String, tail: Vec<String>, known: Option<KnownCause> },
    #[error("the build did not finish within {} (its step container and layers were removed)", crate::output::clock(*.limit))]
    TimedOut { limit: Duration, tail: Vec<String> },
    #[error("cannot pull {reference}: {detail}")]
    Pull { reference: String, detail: String },
}

/// A failure of the build whose cause eas recognises in its output, and can name with its fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownCause {
    /// pip (or curl) could not verify a certificate: the usual sign of a TLS-intercepting proxy
    /// whose CA the build does not trust (pip says `[SSL: CERTIFICATE_VERIFY_FAILED]`, curl
    /// `SSL certificate problem`).
    UntrustedCertificate,
}

impl KnownCause {
    /// The cause recognised in the build's error and its last lines, if any.
    pub fn find(error: &str, lines: &[String]) -> Option<KnownCause> {
        let seen = |needle: &str| error.contains(needle) || lines.iter().any(|l| l.contains(needle));
        (seen("CERTIFICATE_VERIFY_FAILED") || seen("SSL certificate problem"))
            .then_some(KnownCause::UntrustedCertificate)
    }

    pub fn cause(self) -> &'static str {
        match self {
            KnownCause::UntrustedCertificate => {
                "a download in the build could not verify its server's certificate (CERTIFICATE_VERIFY_FAILED): \
                 behind a TLS-intercepting proxy the build must trust the proxy's CA"
            }
        }
    }

    pub fn fix(self) -> &'static str {
        match self {
            KnownCause::UntrustedCertificate => {
                "pass --ca-bundle FILE (or EAS_CA_BUNDLE) naming the proxy's CA, often the host's \
                 /etc/ssl/certs/ca-certificates.crt, then re-run"
            }
        }
    }
}

/// Says why a build failed before the error line ends the command: the recognised cause and its
/// fix first, then, when the build's output was not streamed (a terminal shows only its current
/// step), its last lines, each a line of its own.
fn say_failed(shell: &Shell, known: Option<KnownCause>, tail: &[String]) {
    if let Some(k) = known {
        shell.note(format!("bastion build failed: {}", k.cause()));
        shell.note(format!("  fix: {}", k.fix()));
    }
    // The run's log holds every line of the build already (`build`): these are for the screen.
    if !tail.is_empty() {
        shell.note_unlogged("last lines of the build:");
        for l in tail {
            shell.note_unlogged(format!("  | {l}"));
        }
    }
}

/// Connects as the docker CLI would ([`crate::docker_host`]), with the request
/// timeout from `EAS_DOCKER_TIMEOUT` (seconds, default 120; it bounds each request until its
/// response starts, not a streamed body), and agrees an API version with the daemon.
pub async fn connect(env: &Env) -> Result<Docker, ImageError> {
    let secs = match env.nonempty("EAS_DOCKER_TIMEOUT") {
        Some(v) => v.parse::<u64>().map_err(|_| ImageError::Timeout(v))?,
        None => timeouts::DOCKER_BUILD_SECS,
    };
    // The cause with its sources, as the gatherer words it (`gather::docker`).
    let docker = Docker::connect_with_host(&crate::docker_host::resolve(env))
        .map_err(|e| ImageError::Connect(crate::cluster::chain(&e)))?
        .with_timeout(Duration::from_secs(secs));
    docker.negotiate_version().await.map_err(|e| ImageError::Connect(crate::cluster::chain(&e)))
}

/// The engine not reached: the line for people, and the same cause as the gatherer's
/// `Unreachable`, so a run's facts say what its preflight met without connecting again.
#[derive(Debug, Clone)]
pub struct EngineDown {
    said: String,
    pub unreachable: crate::gather::docker::DockerError,
}

impl std::fmt::Display for EngineDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.said)
    }
}

/// A connection to the engine that answered its version call, or why there is none, within `bound` for the connection and the call
/// together (doctor's check: a socket that accepts and never answers took 120 s, the build
/// timeout, before).
pub async fn engine(env: &Env, bound: Duration) -> Result<Docker, EngineDown> {
    let addr = crate::docker_host::resolve(env);
    let down = |said: String, cause: String| EngineDown {
        said,
        unreachable: crate::gather::docker::DockerError::Unreachable { addr: addr.clone(), cause },
    };
    let ask = async {
        let docker = connect(env).await.map_err(|e| match &e {
            ImageError::Connect(cause) => down(e.to_string(), cause.clone()),
            _ => down(e.to_string(), e.to_string()),
        })?;
        docker
            .version()
            .await
            .map_err(|e| down(format!("no Docker Engine answers: {e}"), crate::cluster::chain(&e)))?;
        Ok(docker)
    };
    match tokio::time::timeout(bound, ask).await {
        Ok(r) => r,
        Err(_) => {
            let secs = bound.as_secs().max(1);
            let said = format!("the Docker Engine at {addr} gave no answer within {secs} s");
            Err(down(said, format!("no answer within {secs} s")))
        }
    }
}

/// The ID of the image tagged `tag` if it was built from the context with `digest`.
pub async fn find(docker: &Docker, tag: &str, digest: &str) -> Result<Option<String>, ImageError> {
    match docker.inspect_image(tag).await {
        Ok(img) => {
            let labels = img.config.and_then(|c| c.labels).unwrap_or_default();
            let same = labels.get(CONTEXT_LABEL).map(String::as_str) == Some(digest);
            Ok(if same { img.id } else { None })
        }
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The local image ID of a reference, which pins a base that has no registry digest.
pub async fn local_id(docker: &Docker, reference: &str) -> Result<String, ImageError> {
    match docker.inspect_image(reference).await {
        Ok(img) => img.id.ok_or_else(|| ImageError::BaseMissing(reference.into())),
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
            Err(ImageError::BaseMissing(reference.into()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Pulls `reference` and returns its registry digest (`sha256:...`).
pub async fn pull_digest(docker: &Docker, reference: &str) -> Result<String, ImageError> {
    let pull_err = |detail: String| ImageError::Pull { reference: reference.into(), detail };
    let opts = CreateImageOptionsBuilder::new().from_image(reference).build();
    let mut s = docker.create_image(Some(opts), None, None);
    while let Some(item) = s.next().await {
        item.map_err(|e| pull_err(e.to_string()))?;
    }
    let img = docker.inspect_image(reference).await?;
    let name = reference.split('@').next().unwrap_or(reference);
    let repo = name.rsplit_once(':').filter(|(_, t)| !t.contains('/')).map_or(name, |(r, _)| r);
    img.repo_digests
        .unwrap_or_default()
        .iter()
        .find_map(|d| d.rsplit_once('@').filter(|(r, _)| r.ends_with(repo)).map(|(_, d)| d.to_string()))
        .ok_or_else(|| pull_err("the pulled image has no registry digest".into()))
}

pub struct BuildRequest<'a> {
    pub tar: Vec<u8>,
    pub tag: &'a str,
    pub digest: &'a str,
    pub base_arg: &'a str,
    pub nocache: bool,
    pub proxy: &'a [(String, String)],
    /// The build's timeout: the bastion phase's in `eas up`, [`timeouts::BASTION`] alone. The
    /// build stops itself there, as on an interrupt, so nothing it started is left.
    pub limit: Duration,
}

pub enum Built {
    Image(String),
    Interrupted,
}

/// Proxy settings reach the build as Docker's predefined build arguments (not kept in the
/// image) and the run as environment.
pub fn proxy_env(env: &Env) -> Vec<(String, String)> {
    let names = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"];
    names.iter().filter_map(|n| env.nonempty(n).map(|v| (n.to_string(), v))).collect()
}

pub async fn build(
    docker: &Docker,
    req: BuildRequest<'_>,
    shell: &Shell,
    interrupt: &Interrupt,
) -> Result<Built, ImageError> {
    let labels = HashMap::from([
        (MANAGED_LABEL.to_string(), "true".to_string()),
        (CONTEXT_LABEL.to_string(), req.digest.to_string()),
    ]);
    let mut args: HashMap<String, String> = req.proxy.iter().cloned().collect();
    args.insert("BASE_IMAGE".into(), req.base_arg.into());
    let opts = BuildImageOptionsBuilder::new()
        .dockerfile("Dockerfile")
        .t(req.tag)
        .labels(&labels)
        .buildargs(&args)
        .rm(true)
        .forcerm(true)
        .nocache(req.nocache)
        .build();
    // The elapsed time against the timeout, as every wait shows it: `[0:42 of 30:00]`.
    let bar = shell.spinner_within(format!("building {}", req.tag), req.limit);
    let deadline = tokio::time::sleep(req.limit);
    tokio::pin!(deadline);
    let mut out = LineBuffer::default();
    // Plain mode shows the build as it goes; bars show only the current step, so a failure
    // then carries the last lines.
    let streamed = !shell.bars && !shell.quiet;
    let tail = |out: &LineBuffer| if streamed { Vec::new() } else { out.tail() };
    let mut stream = docker.build_image(opts, None, Some(bollard::body_full(req.tar.into())));
    let mut id = None;
    // The classic builder's container for the step in progress ("Running in <id>").
    let mut step_container: Option<String> = None;
    // The images this build's steps committed (or took from the cache), in order: removed when the
    // build does not finish, so an interrupted or failed build leaves no untagged layers.
    let mut steps = StepImages::default();
    // The step in progress (`Step 11/25 : RUN …`), which names a failed RUN in the error.
    let mut step: Option<String> = None;
    loop {
        let item = tokio::select! {
            _ = interrupt.graceful.cancelled() => {
                bar.finish_and_clear();
                // Dropping the stream closes the request, which cancels the build in the daemon.
                drop(stream);
                abandon(docker, step_container, &steps, shell).await;
                return Ok(Built::Interrupted);
            }
            _ = &mut deadline => {
                bar.finish_and_clear();
                drop(stream);
                abandon(docker, step_container, &steps, shell).await;
                say_failed(shell, None, &tail(&out));
                return Err(ImageError::TimedOut { limit: req.limit, tail: tail(&out) });
            }
            item = stream.next() => item,
        };
        let Some(item) = item else { break };
        match item {
            Ok(info) => {
                if let Some(text) = info.stream {
                    for line in out.push(&text) {
                        steps.see(&line);
                        if line.starts_with("Step ") {
                            bar.set_message(crate::text::ellipsis(&line, 100));
                            step = Some(line.clone());
                        }
                        if let Some(c) = line.strip_prefix(" ---> Running in ") {
                            step_container = Some(c.trim().to_string());
                        } else if line.starts_with("Removing intermediate container") {
                            step_container = None;
                        }
                        // Every line goes to the run's log (`eas up`'s), the step's and
                        // Docker's own too; the screen gets them as they come only in plain mode.
                        if streamed && !is_noise(&line) {
                            shell.note(format!("  | {line}"));
                        } else {
                            shell.log_only(&crate::text::for_people(&format!("  | {line}")));
                        }
                    }
                }
                if let Some(aux) = info.aux.and_then(|a| a.id) {
                    id = Some(aux);
                }
            }
            Err(e) => {
                bar.finish_and_clear();
                let error = match e {
                    bollard::errors::Error::DockerStreamError { error } => error,
                    other => other.to_string(),
                };
                remove_unfinished(docker, &steps).await;
                let error = named_by_step(&strip_ansi(error.trim()), step.as_deref());
                let known = KnownCause::find(&error, &out.tail());
                say_failed(shell, known, &tail(&out));
                return Err(ImageError::Build { error, tail: tail(&out), known });
            }
        }
    }
    bar.finish_and_clear();
    match id {
        Some(id) => Ok(Built::Image(id)),
        // The classic builder reports the ID in a stream line on older engines.
        None => match find(docker, req.tag, req.digest).await? {
            Some(id) => Ok(Built::Image(id)),
            None => {
                say_failed(shell, None, &tail(&out));
                Err(ImageError::Build {
                    error: "the build ended without an image".into(),
                    tail: tail(&out),
                    known: None,
                })
            }
        },
    }
}

/// The image IDs a classic build's output names (` ---> <id>` after each step), except the
/// base's (the result of `FROM`), which is not this build's to remove. `committed` are the ones
/// this build made (not taken from Docker's layer cache).
#[derive(Debug, Default)]
struct StepImages {
    ids: Vec<String>,
    committed: Vec<String>,
    in_from: bool,
    cached: bool,
}

impl StepImages {
    fn see(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("Step ") {
            self.in_from =
                rest.split_once(" : ").is_some_and(|(_, ins)| ins.trim_start().to_uppercase().starts_with("FROM "));
            self.cached = false;
            return;
        }
        let Some(id) = line.strip_prefix(" ---> ") else { return };
        let id = id.trim();
        if id == "Using cache" {
            self.cached = true;
        }
        if self.in_from || id.len() < 12 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
            return;
        }
        if !self.ids.iter().any(|i| i == id) {
            self.ids.push(id.to_string());
            if !self.cached {
                self.committed.push(id.to_string());
            }
        }
    }
}

/// How long an interrupted build waits for Docker to have killed its step's container and begun
/// removing it, before waiting for the removal itself.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Cleans up after an interrupted build: the step's container is killed (force removal sends
/// SIGKILL: no stop grace period) and removed, then the step images go.
///
/// Removing a container deletes its writable layer, and on a busy disk that takes seconds, all of
/// it in the daemon (issue 10 measured 1.2 to 4.6 s from the container's death to its removal:
/// the overlay's unmount syncs the disk under it, then each freed block is discarded). So eas
/// waits only until the container is dead and Docker is removing it, which the classic builder's
/// own cancellation also does, and lets Docker finish without it. The images this build committed
/// are removed with force, which only overrides the dead container still using one. If Docker is
/// not removing the container within [`KILL_WAIT`], eas waits for its own removal request.
async fn abandon(docker: &Docker, step_container: Option<String>, steps: &StepImages, shell: &Shell) {
    if let Some(c) = step_container {
        let removal = tokio::spawn({
            let (docker, c) = (docker.clone(), c.clone());
            async move {
                let opts = RemoveContainerOptionsBuilder::new().force(true).build();
                docker.remove_container(&c, Some(opts)).await
            }
        });
        match tokio::time::timeout(KILL_WAIT, dead_and_going(docker, &c)).await {
            Ok(true) => {
                shell.note(format!("the interrupted step's container {} is dead; Docker is removing it", short_id(&c)))
            }
            Ok(false) => tracing::debug!("build container {c} is gone"),
            Err(_) => match tokio::time::timeout(timeouts::CALL, removal).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::debug!("removing build container {c}: {e}"),
                Ok(Err(_)) | Err(_) => {
                    shell.warn(format!("the interrupted build's container {c} may remain: docker rm -f {c}"))
                }
            },
        }
    }
    remove_unfinished(docker, steps).await;
}

/// Waits until the container is no longer running and Docker is removing it (`true`), or it is
/// gone (`false`).
async fn dead_and_going(docker: &Docker, id: &str) -> bool {
    use bollard::models::ContainerStateStatusEnum as S;
    loop {
        match docker.inspect_container(id, None).await {
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => return false,
            Ok(c) => {
                let state = c.state.unwrap_or_default();
                if state.running != Some(true) && state.status == Some(S::REMOVING) {
                    return true;
                }
            }
            Err(e) => tracing::debug!("inspecting build container {id}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn short_id(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Removes the step images of a build that did not finish, newest first. The images this build
/// committed go with force, which only overrides a dead container still using one (the
/// interrupted step's, while Docker removes it); images taken from the layer cache are removed
/// without force, so one another image builds on, a container uses or a tag names stays. Untagged
/// parents go with their last child (Docker's prune).
///
/// An interruption between two steps can find the next step's container still running on the
/// newest image (Docker refuses even with force) until the builder's cancellation kills it: a
/// committed image is retried for up to [`CONFLICT_WAIT`].
async fn remove_unfinished(docker: &Docker, steps: &StepImages) {
    let deadline = tokio::time::Instant::now() + CONFLICT_WAIT;
    for id in steps.ids.iter().rev() {
        let force = steps.committed.contains(id);
        let opts = RemoveImageOptionsBuilder::new().force(force).noprune(false).build();
        loop {
            match docker.remove_image(id, Some(opts.clone()), None).await {
                Ok(_) => tracing::debug!("removed the unfinished build's image {id}"),
                Err(bollard::errors::Error::DockerResponseServerError { status_code: 409, .. })
                    if force && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => tracing::debug!("kept image {id}: {e}"),
            }
            break;
        }
    }
}

/// How long the removal of an interrupted build's images retries an image a container still uses.
const CONFLICT_WAIT: Duration = Duration::from_secs(3);

/// Removes the image a `--rebuild` replaced (by ID, without force). A container still using it
/// keeps it; that is said, not an error.
pub async fn remove_replaced(docker: &Docker, old_id: &str) -> Result<(), String> {
    let opts = RemoveImageOptionsBuilder::new().force(false).noprune(false).build();
    match docker.remove_image(old_id, Some(opts), None).await {
        Ok(_) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError { message, .. }) => Err(message),
        Err(e) => Err(e.to_string()),
    }
}

/// The classic builder's bookkeeping lines, hidden from the streamed output (kept in the tail).
/// Docker's error for a failed RUN (the classic builder's `The command '<the step's whole shell
/// line>' returned a non-zero code: N`, hundreds of characters for the pip step) named by its
/// step instead, the instruction cut short: this error is the line `status` keeps as the run's
/// cause, and the whole command is in the build's lines (on screen, and every one in the run's
/// log). Any other error, or one without a step seen, is kept as it is. Pure.
fn named_by_step(error: &str, step: Option<&str>) -> String {
    let code = error.strip_prefix("The command '").and_then(|r| r.rsplit_once("' returned a non-zero code: "));
    let at = step.and_then(|s| s.strip_prefix("Step ")).and_then(|s| s.split_once(" : "));
    match (code, at) {
        (Some((_, code)), Some((n, instruction))) => {
            format!("step {n} ({}) returned a non-zero code: {code}", crate::text::ellipsis(instruction.trim(), 60))
        }
        _ => error.to_string(),
    }
}

fn is_noise(line: &str) -> bool {
    line.starts_with(" ---> ") || line.starts_with("Removing intermediate container")
}

/// Splits the build's text chunks into lines and keeps the last few.
#[derive(Default)]
struct LineBuffer {
    partial: String,
    last: VecDeque<String>,
}

impl LineBuffer {
    fn push(&mut self, chunk: &str) -> Vec<String> {
        self.partial.push_str(chunk);
        let mut lines = Vec::new();
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            let line = strip_ansi(line.trim_end());
            if line.trim().is_empty() {
                continue;
            }
            if !is_noise(&line) {
                if self.last.len() == TAIL {
                    self.last.pop_front();
                }
                self.last.push_back(line.clone());
            }
            lines.push(line);
        }
        lines
    }

    fn tail(&self) -> Vec<String> {
        let mut v: Vec<String> = self.last.iter().cloned().collect();
        if !self.partial.trim().is_empty() {
            v.push(self.partial.trim().to_string());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_docker_socket_that_never_answers_is_bounded() {
        let (_dir, sock) = crate::testing::temp_path("docker.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().take(4).collect();
            std::thread::sleep(Duration::from_secs(30));
            drop(held);
        });
        let host = format!("unix://{}", sock.display());
        let env = Env::of(&[("DOCKER_HOST", host.as_str())]);
        let started = std::time::Instant::now();
        let e = engine(&env, Duration::from_millis(300)).await.map(drop).unwrap_err();
        assert!(e.to_string().contains("gave no answer within 1 s"), "{e}");
        // The same cause, as the facts of the run say it (no second connection).
        assert_eq!(e.unreachable.to_string(), format!("Docker is unreachable at {host}: no answer within 1 s"));
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn build_output_is_split_into_lines_and_the_tail_kept() {
        let mut b = LineBuffer::default();
        assert_eq!(b.push("Step 1/3 : FROM x\n ---> abc\nStep 2"), vec!["Step 1/3 : FROM x", " ---> abc"]);
        assert_eq!(b.push("\n\x1b[91mWARNING: x\n\x1b[0m\n"), vec!["Step 2", "WARNING: x"]);
        assert_eq!(b.push("Step 2/3 : RUN false\n\n"), vec!["Step 2/3 : RUN false"]);
        assert_eq!(
            b.tail(),
            vec!["Step 1/3 : FROM x", "Step 2", "WARNING: x", "Step 2/3 : RUN false"],
            "no bookkeeping"
        );
        assert_eq!(crate::text::ellipsis("Step 1/2 : RUN ééé", 16), "Step 1/2 : RUN é…");
        for i in 0..40 {
            b.push(&format!("line {i}\n"));
        }
        b.push("partial");
        let t = b.tail();
        assert_eq!(t.len(), TAIL + 1);
        assert_eq!((t[0].as_str(), t[TAIL - 1].as_str(), t[TAIL].as_str()), ("line 15", "line 39", "partial"));
    }

    #[test]
    fn step_images_are_the_builds_own_not_the_base() {
        let mut s = StepImages::default();
        for line in [
            "Step 1/4 : ARG BASE_IMAGE",
            "Step 2/4 : FROM ${BASE_IMAGE}",
            " ---> 0123456789ab",
            "Step 3/4 : LABEL io.eas.managed=true",
            " ---> Running in ffffeeeeddddcccc",
            " ---> 111111111111",
            "Step 4/4 : RUN pip install",
            " ---> Using cache",
            " ---> 222222222222",
            " ---> 111111111111",
            "Successfully built 222222222222",
        ] {
            s.see(line);
        }
        assert_eq!(s.ids, ["111111111111", "222222222222"]);
        assert_eq!(s.committed, ["111111111111"], "the cached step is not this build's");
    }

    #[test]
    fn a_failed_run_step_is_named_by_its_step_not_by_its_whole_command() {
        // The classic builder's words for a failed RUN, the pip step of bastion/Dockerfile.
        let docker = "The command '/bin/bash -o pipefail -c python3 -c 'import sys; assert sys.version_info >= (3, 11)'  \
                      && python3 -m venv /opt/eas/venv  && /opt/eas/venv/bin/pip install --require-hashes -r \
                      /opt/eas/requirements.lock' returned a non-zero code: 1";
        let step = "Step 11/25 : RUN python3 -c 'import sys; assert sys.version_info >= (3, 11)' && python3 -m venv /opt/eas/venv";
        assert_eq!(
            named_by_step(docker, Some(step)),
            "step 11/25 (RUN python3 -c 'import sys; assert sys.version_info >= (3, 1…) returned a non-zero code: 1"
        );
        // No step seen, or another error: as Docker said it.
        assert_eq!(named_by_step(docker, None), docker);
        let other = "failed to register layer: no space left on device";
        assert_eq!(named_by_step(other, Some(step)), other);
    }

    #[test]
    fn a_failed_build_is_one_line_and_its_known_cause_is_named() {
        let tail = vec!["Step 4/9 : RUN x".to_string()];
        let e = ImageError::Build { error: "returned a non-zero code: 1".into(), tail: tail.clone(), known: None };
        assert_eq!(e.to_string(), "the build failed: returned a non-zero code: 1");
        // pip behind a TLS-intercepting proxy, as pip words it.
        let pip = vec![
            "Step 6/14 : RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes -r /tmp/requirements.lock".to_string(),
            "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)'))': /simple/ansible-core/".to_string(),
        ];
        let known = KnownCause::find("The command '/bin/sh -c python3 -m venv' returned a non-zero code: 1", &pip);
        assert_eq!(known, Some(KnownCause::UntrustedCertificate));
        let e = ImageError::Build { error: "returned a non-zero code: 1".into(), tail: pip, known };
        let line = e.to_string();
        assert!(!line.contains('\n') && line.contains("CERTIFICATE_VERIFY_FAILED"), "{line}");
        assert_eq!(KnownCause::find("returned a non-zero code: 1", &tail), None);
    }
}
