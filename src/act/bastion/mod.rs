//! `eas bastion`: the installer's toolbox (SPEC §8), an image built from pinned, checksummed
//! parts, reused while its build context is unchanged, and run with exactly the mounts and
//! environment the installer needs.
//!
//! - [`context`]: which files, which base, which digest (pure).
//! - [`artifacts`]: pinned downloads, checked and cached on the host.
//! - [`image`]: find or build the image through the Docker API.
//! - [`kubeconfig`]: how the container reaches the API server (pure).
//! - [`run`]: the run seam `eas up` uses for the installer.

pub mod artifacts;
pub mod context;
pub mod image;
pub mod kubeconfig;
pub mod labels;
pub mod publisher;
pub mod run;
pub mod toolbox;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bollard::Docker;
use serde::Deserialize;

use crate::act::bastion::artifacts::{ArtifactError, Cache, SystemFetcher};
use crate::act::bastion::context::{Base, Context, ContextError};
use crate::act::bastion::image::{BuildRequest, Built, ImageError};
use crate::act::bastion::kubeconfig::KubeconfigError;
use crate::act::bastion::run::{BindMount, Interrupt, RunError, RunSpec};
use crate::output::Shell;
use crate::pins::{Pins, PinsError};
use crate::settings::Global;

pub use labels::{MANAGED_LABEL, RUN_LABEL};
/// The image's virtual environment; the work tree's `.venv` links here.
pub const VENV: &str = "/opt/eas/venv";
pub const TREE_TARGET: &str = "/eas";
pub const KUBECONFIG_TARGET: &str = "/kube/config";

#[derive(Debug)]
pub enum BastionCommand {
    /// Build the pinned bastion image, or reuse it when its build context is unchanged; prints the image tag
    Build(BuildSettings),
    /// Run a command in the bastion with the installer's mounts and environment; exits with its exit code
    Run(RunSettings),
}

#[derive(Debug, Clone)]
pub struct ImageSettings {
    /// Where the pins come from; `--lock` rewrites that file (the user's, for the built-in pins).
    pub pins: crate::pins::Source,
    /// The user's pins file, which `--lock` writes when the pins are the built-in ones.
    pub user_pins: Option<PathBuf>,
    pub base: BaseImage,
    /// Where pinned downloads are cached (`$XDG_CACHE_HOME/eas/artifacts`).
    pub artifacts: PathBuf,
    /// Proxy settings passed to the build as Docker's predefined build arguments.
    pub proxy: Vec<(String, String)>,
    /// The host's proxy variables, for eas's own downloads.
    pub download_proxy: crate::net::proxy::ProxyEnv,
    /// The global `--ca-bundle`: trusted by the downloads, built into the image.
    pub ca_bundle: Option<crate::settings::CaBundle>,
    /// How long a build may take ([`crate::settings::timeouts::BASTION`]; `eas bastion build
    /// --timeout`); `eas up` bounds its build by the bastion phase's own timeout instead.
    pub build_timeout: std::time::Duration,
}

impl ImageSettings {
    /// `download_proxy`: the host's proxy variables, resolved once by the caller's run.
    pub fn new(
        pins: crate::pins::Source,
        base: BaseImage,
        global: &Global,
        download_proxy: crate::net::proxy::ProxyEnv,
    ) -> Self {
        let env = &global.env;
        ImageSettings {
            pins,
            user_pins: env.user_pins(),
            base,
            artifacts: Cache::default_dir(env),
            proxy: crate::act::bastion::image::proxy_env(env),
            download_proxy,
            ca_bundle: global.ca_bundle.clone(),
            build_timeout: crate::settings::timeouts::BASTION,
        }
    }
}

/// The image flags other commands share (`eas up`, `eas down` take `--pins` with the trees).
#[derive(Debug, Clone, Default)]
pub struct BaseImage {
    /// Base image, pinned by digest: REF@sha256:<digest> [default: the pins' base-image row]
    pub base_image: Option<String>,
    /// Accept a base image without a digest if it exists locally (test images); it is pinned by its local image ID
    pub allow_unpinned_base: bool,
}

#[derive(Debug, Clone)]
pub struct BuildSettings {
    pub image: ImageSettings,
    /// Build even when an image for this context exists, without Docker's layer cache
    pub rebuild: bool,
    /// Download artifacts that have no pinned sha256 (and resolve the base image's registry
    /// digest), and record each only when it matches its publisher's checksum
    pub lock: bool,
    /// With lock: record an artifact whose publisher publishes no checksum as downloaded (its
    /// pins row's source says so)
    pub trust_on_first_use: bool,
}

#[derive(Debug, Clone)]
pub struct RunSettings {
    pub image: ImageSettings,
    /// EAS work tree, mounted read-write at /eas (its .venv is linked to the bastion's)
    pub tree: Option<PathBuf>,
    /// The command and its arguments
    pub command: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BastionError {
    #[error(transparent)]
    Pins(#[from] PinsError),
    #[error(transparent)]
    Context(#[from] ContextError),
    /// A context error about the pins, with the pins file it is about (`Source::describe`).
    #[error("{source} (pins: {pins})")]
    InPins { pins: String, source: ContextError },
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error(transparent)]
    Publisher(#[from] crate::act::bastion::publisher::PublisherError),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Busy(String),
    #[error("interrupted")]
    Interrupted,
    #[error("the reused bastion image {image} lacks a tool the installer calls: {missing}")]
    Toolbox { image: String, missing: String },
}

impl BastionError {
    /// A missing sha256 or digest names the pins file it is missing from: which file a command
    /// read is not always the one the user thinks of (SPEC §1).
    fn naming_pins(self, pins: &crate::pins::Source) -> Self {
        match self {
            BastionError::Context(
                c @ (ContextError::MissingSha256(_) | ContextError::UnpinnedBase { from_pins: true, .. }),
            ) => BastionError::InPins { pins: pins.describe(), source: c },
            other => other,
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BastionError {
    let what = what.into();
    move |source| BastionError::Io { what, source }
}

/// The image `eas up` and `eas bastion run` use.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub tag: String,
    pub id: String,
    pub digest: String,
    pub reused: bool,
}

/// Builds the bastion image, or finds the one built from the same context. With `lock`,
/// unpinned rows are checked against their publishers' checksums and recorded first; then it is [`plan_image`]'s plan
/// half and [`build_planned`]'s act half, the same path `eas up` takes in two steps.
pub async fn prepare(
    docker: &Docker,
    args: &ImageSettings,
    lock: bool,
    rebuild: bool,
    shell: &Shell,
    interrupt: &Interrupt,
) -> Result<Prepared, BastionError> {
    let mode = if lock { Some(LockMode { trust_on_first_use: false }) } else { None };
    prepare_with(docker, args, mode, rebuild, shell, interrupt).await
}

/// `--lock`, and whether trust on first use is allowed where a publisher publishes nothing.
#[derive(Debug, Clone, Copy)]
pub struct LockMode {
    pub trust_on_first_use: bool,
}

pub async fn prepare_with(
    docker: &Docker,
    args: &ImageSettings,
    lock_mode: Option<LockMode>,
    rebuild: bool,
    shell: &Shell,
    interrupt: &Interrupt,
) -> Result<Prepared, BastionError> {
    // Every error names the pins file it is about.
    let prepared: Result<Prepared, BastionError> = async {
        let lock = lock_mode.is_some();
        // With --lock, the file resolution picked is the one rewritten; the built-in pins are
        // written to the user's pins file (SPEC §1), so what is locked is what later runs read.
        let (pins_path, mut pins) = match lock {
            true => {
                let (path, pins) = args.pins.lock_target(args.user_pins.clone())?;
                (Some(path), pins)
            }
            false => (args.pins.path().map(Path::to_path_buf), args.pins.load()?),
        };
        crate::act::bastion::context::check_lock(
            &pins,
            &crate::act::bastion::context::parse_lock(crate::act::bastion::context::REQUIREMENTS_LOCK)?,
        )?;

        let mut changed = false;
        let base = match crate::act::bastion::context::choose_base(
            &pins,
            args.base.base_image.as_deref(),
            args.base.allow_unpinned_base,
        ) {
            Err(ContextError::UnpinnedBase { reference, from_pins: true }) if lock => {
                shell.phase("bastion", format!("pulling {reference} to record its digest"));
                let digest = crate::act::bastion::image::pull_digest(docker, &reference).await?;
                record(&mut pins, crate::act::bastion::context::BASE_ROW, digest.trim_start_matches("sha256:"));
                crate::act::bastion::publisher::set_source(
                    &mut pins,
                    crate::act::bastion::context::BASE_ROW,
                    &crate::act::bastion::publisher::base_source(&reference, &digest),
                );
                changed = true;
                shell.note(format!("base image {reference} recorded at its registry digest {reference}@{digest}"));
                Base::Digest(format!("{reference}@{digest}"))
            }
            other => other?,
        };
        if let Some(mode) = lock_mode {
            let (cache, fetcher) = (Cache::new(args.artifacts.clone()), fetcher_for(args)?);
            let wanted = crate::act::bastion::context::artifacts(&pins);
            // Every row is checked before any is recorded: a mismatch or a missing checksum
            // leaves the pins file as it was.
            let mut locked = Vec::new();
            for a in wanted.iter().filter(|a| a.sha256.is_none()) {
                shell.phase("bastion", format!("downloading {} from {} and its publisher's checksum", a.name, a.url));
                let fetch = crate::act::bastion::publisher::lock_artifact(
                    &fetcher,
                    &cache,
                    &a.name,
                    &a.url,
                    mode.trust_on_first_use,
                );
                locked.push((a.name.clone(), a.url.clone(), interruptible(interrupt, fetch).await??));
            }
            for (name, url, l) in locked {
                let (sha, line) = crate::act::bastion::publisher::describe(&name, &l);
                match &l {
                    crate::act::bastion::publisher::Locked::Verified { .. } => shell.note(&line),
                    crate::act::bastion::publisher::Locked::TrustedOnFirstUse { .. } => shell.warn(&line),
                }
                record(&mut pins, &name, &sha);
                crate::act::bastion::publisher::set_source(
                    &mut pins,
                    &name,
                    &crate::act::bastion::publisher::row_source(&url, &l),
                );
                changed = true;
            }
        }
        if let Some(path) = &pins_path
            && (changed || (lock && args.pins == crate::pins::Source::Builtin))
        {
            write_pins(path, &pins)?;
            match changed {
                true => shell.note(format!("recorded the new sha256s in {}", path.display())),
                false => shell.note(format!("wrote the built-in pins to {}", path.display())),
            }
        }
        let plan = plan_from(docker, args, &pins, base).await?;
        build_planned(docker, plan, rebuild, args.build_timeout, shell, interrupt).await
    }
    .await;
    prepared.map_err(|e| e.naming_pins(&args.pins))
}

/// The plan half of the bastion phase: the build context named by its content hash, and the
/// image already built from it. Nothing is downloaded or built.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    pub tag: String,
    pub digest: String,
    /// The id of the image built from this context, when one exists.
    pub existing: Option<String>,
    ctx: Context,
    pinned: Vec<(crate::act::bastion::context::Artifact, String)>,
    artifacts: PathBuf,
    fetcher: SystemFetcher,
    proxy: Vec<(String, String)>,
    /// A local base accepted unpinned: its reference and local image id.
    local_base: Option<(String, String)>,
}

/// What `prepare` would do, without downloading or building, for the dry run's plan and as the
/// first half of a real run's bastion phase.
/// The bastion's checks that need only the pins, each on its own so one does not hide the
/// next: the pins load, the requirements lock matches them, the base image is pinned by digest,
/// then every artifact has a pinned sha256. A local base (`--allow-unpinned-base`) is checked
/// against the engine by [`plan_image`].
pub fn pin_checks(args: &ImageSettings, pins: &Pins) -> Vec<BastionError> {
    let mut found = Vec::new();
    if let Err(e) = crate::act::bastion::context::parse_lock(crate::act::bastion::context::REQUIREMENTS_LOCK)
        .and_then(|l| crate::act::bastion::context::check_lock(pins, &l))
    {
        found.push(e.into());
    }
    if let Err(e) =
        crate::act::bastion::context::choose_base(pins, args.base.base_image.as_deref(), args.base.allow_unpinned_base)
    {
        found.push(e.into());
    }
    if let Err(e) = crate::act::bastion::context::require_sha256(&crate::act::bastion::context::artifacts(pins)) {
        found.push(e.into());
    }
    // Every tool the installer files call is provided by the Dockerfile (issue 28 item 1).
    let artifacts: Vec<(String, String)> =
        crate::act::bastion::context::artifacts(pins).into_iter().map(|a| (a.name, a.context_path)).collect();
    let artifacts: Vec<(&str, &str)> = artifacts.iter().map(|(n, p)| (n.as_str(), p.as_str())).collect();
    let lacking = crate::act::bastion::toolbox::unprovided(
        crate::act::bastion::toolbox::table(),
        crate::act::bastion::context::DOCKERFILE,
        &artifacts,
    );
    if !lacking.is_empty() {
        found.push(BastionError::Context(ContextError::ToolsUnprovided(
            lacking.iter().map(|t| format!("{} ({} needs it)", t.name, t.needed_by)).collect(),
        )));
    }
    found.into_iter().map(|e: BastionError| e.naming_pins(&args.pins)).collect()
}

/// `pins`: what `args.pins` holds, read once by the run.
pub async fn plan_image(docker: &Docker, args: &ImageSettings, pins: &Pins) -> Result<ImagePlan, BastionError> {
    plan_image_at(docker, args, pins).await.map_err(|e| e.naming_pins(&args.pins))
}

async fn plan_image_at(docker: &Docker, args: &ImageSettings, pins: &Pins) -> Result<ImagePlan, BastionError> {
    crate::act::bastion::context::check_lock(
        pins,
        &crate::act::bastion::context::parse_lock(crate::act::bastion::context::REQUIREMENTS_LOCK)?,
    )?;
    let base = crate::act::bastion::context::choose_base(
        pins,
        args.base.base_image.as_deref(),
        args.base.allow_unpinned_base,
    )?;
    plan_from(docker, args, pins, base).await
}

async fn plan_from(docker: &Docker, args: &ImageSettings, pins: &Pins, base: Base) -> Result<ImagePlan, BastionError> {
    let cache = Cache::new(args.artifacts.clone());
    let wanted = crate::act::bastion::context::artifacts(pins);
    crate::act::bastion::context::require_sha256(&wanted)?;
    let (base_arg, local_base) = match &base {
        Base::Digest(r) => (r.clone(), None),
        Base::Local(r) => {
            let id = crate::act::bastion::image::local_id(docker, r).await?;
            (id.clone(), Some((r.clone(), id)))
        }
    };
    let pinned = crate::act::bastion::artifacts::pinned(&wanted);
    let ca = args.ca_bundle.as_ref().map(|b| b.pem.clone());
    let ctx = Context::new(base_arg, ca, &pinned, |s| cache.path(s));
    let (digest, tag) = (ctx.digest(), ctx.tag());
    let existing = crate::act::bastion::image::find(docker, &tag, &digest).await?;
    Ok(ImagePlan {
        tag,
        digest,
        existing,
        ctx,
        pinned,
        artifacts: args.artifacts.clone(),
        fetcher: fetcher_for(args)?,
        proxy: args.proxy.clone(),
        local_base,
    })
}

/// The act half: reuses the planned image, or downloads the pinned artifacts and builds it, the
/// build within `limit`.
pub async fn build_planned(
    docker: &Docker,
    plan: ImagePlan,
    rebuild: bool,
    limit: std::time::Duration,
    shell: &Shell,
    interrupt: &Interrupt,
) -> Result<Prepared, BastionError> {
    let ImagePlan { tag, digest, ctx, pinned, artifacts: dir, fetcher, proxy, local_base, .. } = plan;
    if let Some((r, id)) = &local_base {
        shell.warn(format!("base image {r} is not pinned by a registry digest; pinned by its local image ID {id}"));
    }
    // One build per context at a time: a concurrent `eas` waits here, then reuses what this one built.
    let _lock = build_lock(&dir, &digest, &tag, shell, interrupt).await?;
    let existing = crate::act::bastion::image::find(docker, &tag, &digest).await?;
    if !rebuild && let Some(id) = existing {
        shell.phase("bastion", format!("reusing {tag} (context sha256 {digest})"));
        toolbox_check(docker, &id, interrupt).await?;
        return Ok(Prepared { tag, id, digest, reused: true });
    }
    let cache = Cache::new(dir);
    for (a, sha) in &pinned {
        let (_, replaced) = interruptible(interrupt, cache.ensure(&fetcher, &a.url, sha)).await??;
        if replaced {
            shell.warn(format!("cached {} did not match its sha256 and was downloaded again", a.name));
        }
    }
    let tar = ctx.tar().map_err(io("assembling the build context"))?;
    let within = crate::output::clock(limit);
    shell.phase(
        "bastion",
        format!("building {tag} ({} MB context, base {}; timeout {within})", tar.len() >> 20, ctx.base_arg),
    );
    let req = BuildRequest {
        tar,
        tag: &tag,
        digest: &digest,
        base_arg: &ctx.base_arg,
        nocache: rebuild,
        proxy: &proxy,
        limit,
    };
    match crate::act::bastion::image::build(docker, req, shell, interrupt).await? {
        Built::Image(id) => {
            shell.phase("bastion", format!("built {tag}"));
            // `--rebuild` moved the tag: the image it replaced would be left dangling.
            if let Some(old) = existing.filter(|old| *old != id) {
                match crate::act::bastion::image::remove_replaced(docker, &old).await {
                    Ok(()) => shell.note(format!("removed the image {old} this build replaced")),
                    Err(e) => shell.warn(format!("the image {old} this build replaced stays: {e}")),
                }
            }
            Ok(Prepared { tag, id, digest, reused: false })
        }
        Built::Interrupted => Err(BastionError::Interrupted),
    }
}

/// A reused image is checked as its build was (`crate::act::bastion::toolbox::check_script`, `command -v` for each
/// tool): an image changed after its build (a tool deleted, the tag moved to another image) fails
/// here, naming the tool and the task, before the installer runs into it.
async fn toolbox_check(docker: &Docker, id: &str, interrupt: &Interrupt) -> Result<(), BastionError> {
    use crate::act::bastion::run::ContainerRunner;
    let spec = crate::act::bastion::run::RunSpec {
        image: id.to_string(),
        cmd: vec![
            "bash".into(),
            "-c".into(),
            crate::act::bastion::toolbox::check_script(crate::act::bastion::toolbox::table()),
        ],
        network: Some("none".into()),
        timeout: Some(TOOLBOX_CHECK_LIMIT),
        ..run::RunSpec::default()
    };
    let mut out = crate::act::bastion::toolbox::Output::default();
    match crate::act::bastion::run::DockerRunner::new(docker.clone()).run(&spec, &mut out, interrupt).await? {
        crate::act::bastion::run::Outcome::Exited(0) => Ok(()),
        crate::act::bastion::run::Outcome::Interrupted => Err(BastionError::Interrupted),
        other => Err(BastionError::Toolbox { image: id.to_string(), missing: out.lines(other) }),
    }
}

/// A `command -v` per tool takes well under a second; the bound covers a slow engine start.
const TOOLBOX_CHECK_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

async fn interruptible<T>(interrupt: &Interrupt, f: impl Future<Output = T>) -> Result<T, BastionError> {
    tokio::select! {
        _ = interrupt.graceful.cancelled() => Err(BastionError::Interrupted),
        v = f => Ok(v),
    }
}

fn record(pins: &mut Pins, name: &str, sha256: &str) {
    if let Some(row) =
        pins.pins.iter_mut().find(|p| p.profile == crate::act::bastion::context::PROFILE && p.name == name)
    {
        row.sha256 = Some(Some(sha256.to_string()));
    }
}

fn write_pins(path: &Path, pins: &Pins) -> Result<(), BastionError> {
    Ok(crate::pins::source::write(path, pins)?)
}

/// How long a build waits for another `eas` building the same context.
const BUILD_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Takes the build lock of the context `digest` (a file lock beside the artifact cache, released
/// when the file is dropped or the process ends), waiting for another holder up to
/// `BUILD_LOCK_WAIT` and stopping on an interruption. A cache directory where no lock file can be
/// made builds without one, with a warning.
async fn build_lock(
    artifacts: &Path,
    digest: &str,
    tag: &str,
    shell: &Shell,
    interrupt: &Interrupt,
) -> Result<Option<std::fs::File>, BastionError> {
    let dir = artifacts.parent().unwrap_or(artifacts).join("locks");
    let path = dir.join(format!("bastion-{}.lock", &digest[..digest.len().min(32)]));
    let opened = std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path));
    let file = match opened {
        Ok(f) => f,
        Err(e) => {
            shell
                .warn(format!("no build lock ({}: {e}): a concurrent build of {tag} is not prevented", path.display()));
            return Ok(None);
        }
    };
    let deadline = std::time::Instant::now() + BUILD_LOCK_WAIT;
    // The wait says what it waits for against its timeout, as every wait does.
    let mut waiting: Option<crate::output::Wait> = None;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => {
                let w = waiting.get_or_insert_with(|| shell.wait("bastion", BUILD_LOCK_WAIT));
                w.update(&format!("another eas building {tag} (lock {})", path.display()));
                if std::time::Instant::now() >= deadline {
                    return Err(BastionError::Busy(format!(
                        "another eas held the build lock of {tag} for {}s ({})",
                        BUILD_LOCK_WAIT.as_secs(),
                        path.display()
                    )));
                }
                tokio::select! {
                    _ = interrupt.graceful.cancelled() => return Err(BastionError::Interrupted),
                    _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                }
            }
            Err(std::fs::TryLockError::Error(e)) => {
                shell.warn(format!(
                    "no build lock ({}: {e}): a concurrent build of {tag} is not prevented",
                    path.display()
                ));
                return Ok(None);
            }
        }
    }
}

/// The host's download client: the system's CAs plus the global `--ca-bundle`'s (checked once in
/// the settings), the proxy variables (curl's rules). A proxy variable that is not a URL is bad input.
fn fetcher_for(args: &ImageSettings) -> Result<SystemFetcher, BastionError> {
    let roots = args.ca_bundle.as_ref().map(|b| b.ders.clone()).unwrap_or_default();
    SystemFetcher::new(&roots, args.download_proxy.clone()).map_err(BastionError::Input)
}

#[derive(Debug, Deserialize)]
struct EnvData {
    env: Vec<EnvVar>,
}

#[derive(Debug, Deserialize)]
pub struct EnvVar {
    pub name: String,
    pub secret: bool,
}

/// The environment variables the installer reads (`data/bastion.json`).
pub fn installer_env() -> &'static [EnvVar] {
    static V: OnceLock<EnvData> = OnceLock::new();
    &V.get_or_init(|| {
        serde_json::from_str(include_str!("../../../data/bastion.json")).expect("data/bastion.json parses")
    })
    .env
}

/// The names of the installer's secret variables (`HF_TOKEN`, the admin passwords).
pub fn secret_env_names() -> Vec<&'static str> {
    installer_env().iter().filter(|v| v.secret).map(|v| v.name.as_str()).collect()
}

pub use crate::kubeconfig::KubeSource;

/// A run spec with the standard mounts, network and environment, plus what must outlive the run.
pub struct Standard {
    pub spec: RunSpec,
    pub route: Option<crate::act::bastion::kubeconfig::Route>,
    _kube_copy: Option<tempfile::TempDir>,
}

/// The installer's container: the work tree read-write at `/eas`, the kubeconfig (or a rewritten
/// copy) read-only at `/kube/config`, the network that reaches the API server, and the
/// installer's variables and proxy settings from `env` (values never logged).
pub fn standard(
    image: &str,
    cmd: Vec<String>,
    tree: Option<&Path>,
    kube: Option<&KubeSource>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Standard, BastionError> {
    let mut spec = RunSpec { image: image.to_string(), cmd, ..Default::default() };
    if let Some(tree) = tree {
        let tree = tree.canonicalize().map_err(io(format!("work tree {}", tree.display())))?;
        link_venv(&tree)?;
        spec.mounts.push(BindMount { source: tree, target: TREE_TARGET.into(), read_only: false });
        spec.workdir = Some(TREE_TARGET.into());
    }
    let mut route = None;
    let mut copy_dir = None;
    let mut api_server_seen = String::new();
    if let Some(k) = kube
        && let Some((text, merged)) = kube_text(k)?
    {
        let shown = k.shown();
        let plan = crate::act::bastion::kubeconfig::plan(&shown, &text, k.context.as_deref())?;
        // Several files are merged into one copy: the bastion mounts a single file, holding the
        // selected context, its cluster and its user only.
        let copy = match plan.copy {
            Some(doc) => Some(doc),
            None if merged => {
                let doc: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| BastionError::Input(e.to_string()))?;
                Some(crate::act::bastion::kubeconfig::only_context(&doc, &plan.context))
            }
            None => None,
        };
        let source = match &copy {
            Some(doc) => {
                let dir = crate::scratch::private_dir(crate::scratch::KUBE_COPY).map_err(io("kubeconfig copy"))?;
                let path = dir.path().join("config");
                write_private(&path, &serde_json::to_vec_pretty(doc).expect("json")).map_err(io("kubeconfig copy"))?;
                copy_dir = Some(dir);
                path
            }
            None => {
                let p = k.single().expect("one file unless merged");
                p.canonicalize().map_err(io(format!("kubeconfig {}", p.display())))?
            }
        };
        spec.mounts.push(BindMount { source, target: KUBECONFIG_TARGET.into(), read_only: true });
        spec.network = plan.route.network_mode().map(str::to_string);
        api_server_seen = plan.server.clone();
        route = Some(plan.route);
    }
    for v in installer_env() {
        if let Some(value) = env(&v.name).filter(|s| !s.is_empty()) {
            spec.env.push((v.name.clone(), value));
        }
    }
    let api_server = route.as_ref().map(|r| match r {
        crate::act::bastion::kubeconfig::Route::K3dNetwork { server, .. } => server.clone(),
        _ => api_server_seen.clone(),
    });
    spec.env.extend(crate::net::proxy::child_env(env, api_server.as_deref()));
    Ok(Standard { spec, route, _kube_copy: copy_dir })
}

/// The kubeconfig for a bastion run, with a token minted on the host when the context's user
/// has an exec credential plugin; says how long the token lives.
pub async fn minted_source(global: &Global, shell: &Shell) -> Result<KubeSource, crate::kubeconfig::TargetError> {
    minted(&KubeSource::resolve(global), shell).await
}

/// [`minted_source`] for a kubeconfig source already resolved (`eas up` resolves it once).
pub async fn minted(kube: &KubeSource, shell: &Shell) -> Result<KubeSource, crate::kubeconfig::TargetError> {
    let mut kube = kube.clone();
    match kube.mint(crate::settings::timeouts::CREDENTIAL).await {
        Ok(Some(m)) => {
            let until = m.expires.as_deref().unwrap_or("an unknown time (the plugin gave no expiry)");
            shell.warn(format!(
                "the credential plugin's token is written into the bastion's private kubeconfig copy and lives until {until}; \
                 an install that outlasts it fails at that point"
            ));
            Ok(kube)
        }
        Ok(None) => Ok(kube),
        Err(e) => Err(e),
    }
}

/// The kubeconfig's text (the list's files merged, as JSON, and `true`), or `None` when the
/// default file is absent.
fn kube_text(k: &KubeSource) -> Result<Option<(String, bool)>, BastionError> {
    if let Some(text) = &k.minted {
        return Ok(Some((text.clone(), true)));
    }
    if let Some(path) = k.single() {
        return match crate::bounded::read_string(path, crate::bounded::Kind::Kubeconfig) {
            Ok(text) => Ok(Some((text, false))),
            Err(e) if k.explicit || !e.is_not_found() => Err(BastionError::Input(e.to_string())),
            Err(_) => Ok(None),
        };
    }
    let (merged, _) = k.load().map_err(|e| BastionError::Input(e.to_string()))?;
    let text =
        serde_json::to_string(&merged).map_err(|e| BastionError::Input(format!("kubeconfig {}: {e}", k.shown())))?;
    Ok(Some((text, true)))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(bytes)
}

/// Points `<tree>/.venv` at the image's venv: the installer reuses an existing
/// `.venv/bin/ansible-playbook` as is, so nothing is pip-installed at install time.
pub fn link_venv(tree: &Path) -> Result<(), BastionError> {
    let link = tree.join(".venv");
    match std::fs::read_link(&link) {
        Ok(target) if target == Path::new(VENV) => Ok(()),
        Ok(target) => Err(BastionError::Input(format!(
            "{} links to {}, not the bastion's {VENV}; remove it",
            link.display(),
            target.display()
        ))),
        Err(_) if link.symlink_metadata().is_ok() => Err(BastionError::Input(format!(
            "{} exists; the installer would use it instead of the bastion's venv: remove it",
            link.display()
        ))),
        Err(_) => std::os::unix::fs::symlink(VENV, &link).map_err(io(format!("linking {}", link.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn a_missing_sha256_names_the_pins_file_it_is_missing_from() {
        let user = crate::pins::Source::User("/home/u/.config/eas/pins.json".into());
        let e = BastionError::Context(ContextError::MissingSha256(vec!["kubectl".into(), "helm".into()]));
        let named = e.naming_pins(&user);
        assert!(matches!(named, BastionError::InPins { source: ContextError::MissingSha256(_), .. }), "{named:?}");
        assert_eq!(
            named.to_string(),
            "2 bastion artifact(s) have no pinned sha256: kubectl, helm \
             (pins: /home/u/.config/eas/pins.json (the user's pins file))"
        );
        // Errors that are not about the pins' content are left as they are.
        let other = BastionError::Context(ContextError::LockStale("x".into())).naming_pins(&user);
        assert!(matches!(other, BastionError::Context(_)));
    }

    #[test]
    fn secrets_and_proxies_reach_the_container_env_only_when_set() {
        let env = env_of(&[("HF_TOKEN", "hf_x"), ("HTTPS_PROXY", "http://proxy:3128"), ("GRAFANA_ADMIN_PASSWORD", "")]);
        let s = standard("img", vec!["true".into()], None, None, &env).unwrap();
        assert_eq!(
            s.spec.env,
            vec![
                ("HF_TOKEN".to_string(), "hf_x".to_string()),
                ("HTTPS_PROXY".into(), "http://proxy:3128".into()),
                ("https_proxy".into(), "http://proxy:3128".into())
            ]
        );
        assert!(s.spec.mounts.is_empty() && s.spec.network.is_none());
        assert_eq!(s.spec.cmd, vec!["true"], "secrets never join argv");
    }

    #[test]
    fn behind_a_proxy_the_installer_reaches_the_api_server_directly() {
        let (_dir, path) = crate::testing::temp_path("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n\
             clusters:\n- name: k\n  cluster:\n    server: https://10.0.0.9:6443\nusers:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        let kube = KubeSource::file(path, true, None);
        let env = env_of(&[("HTTPS_PROXY", "http://proxy:3128"), ("NO_PROXY", "localhost")]);
        let s = standard("img", vec![], None, Some(&kube), &env).unwrap();
        let no_proxy: Vec<&(String, String)> =
            s.spec.env.iter().filter(|(k, _)| k.eq_ignore_ascii_case("no_proxy")).collect();
        assert_eq!(no_proxy.len(), 2, "{:?}", s.spec.env);
        assert!(no_proxy.iter().all(|(_, v)| v == "localhost,10.0.0.9"), "{no_proxy:?}");
    }

    #[test]
    fn the_tree_is_mounted_and_its_venv_linked() {
        let tree = tempfile::tempdir().unwrap();
        let s = standard("img", vec![], Some(tree.path()), None, &env_of(&[])).unwrap();
        let m = &s.spec.mounts[0];
        assert_eq!((m.target.as_str(), m.read_only), (TREE_TARGET, false));
        assert_eq!(std::fs::read_link(tree.path().join(".venv")).unwrap(), Path::new(VENV));
        // Idempotent; a real .venv is refused rather than shadowing the bastion's.
        standard("img", vec![], Some(tree.path()), None, &env_of(&[])).unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join(".venv")).unwrap();
        let e = standard("img", vec![], Some(other.path()), None, &env_of(&[])).err().unwrap().to_string();
        assert!(e.contains(".venv exists"), "{e}");
    }

    #[test]
    fn the_kubeconfig_is_mounted_read_only_or_rewritten_in_a_private_copy() {
        let (_dir, path) = crate::testing::temp_path("config");
        let yaml = |server: &str| {
            format!(
                "current-context: k3d-gpu\nclusters:\n- name: k3d-gpu\n  cluster:\n    server: {server}\n\
                 contexts:\n- name: k3d-gpu\n  context:\n    cluster: k3d-gpu\nusers: []\n"
            )
        };
        std::fs::write(&path, yaml("https://0.0.0.0:6550")).unwrap();
        let k = KubeSource::file(path.clone(), true, None);
        let s = standard("img", vec![], None, Some(&k), &env_of(&[])).unwrap();
        let m = &s.spec.mounts[0];
        assert_eq!(
            (m.source.clone(), m.target.as_str(), m.read_only),
            (path.canonicalize().unwrap(), KUBECONFIG_TARGET, true)
        );
        assert_eq!(s.spec.network.as_deref(), Some("host"));

        std::fs::write(&path, yaml("https://172.18.0.3:6443")).unwrap();
        let before = std::fs::read(&path).unwrap();
        let s = standard("img", vec![], None, Some(&k), &env_of(&[])).unwrap();
        let m = &s.spec.mounts[0];
        assert_ne!(m.source, path);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&m.source).unwrap().permissions().mode() & 0o777, 0o600);
        let copy: serde_json::Value = serde_json::from_slice(&std::fs::read(&m.source).unwrap()).unwrap();
        assert_eq!(copy.pointer("/clusters/0/cluster/server").unwrap(), "https://k3d-gpu-server-0:6443");
        assert_eq!(s.spec.network.as_deref(), Some("k3d-gpu"));
        assert_eq!(std::fs::read(&path).unwrap(), before, "the user's file is untouched");
        let copy_path = m.source.clone();
        drop(s);
        assert!(!copy_path.exists(), "the copy goes with the run");
    }

    #[test]
    fn a_missing_kubeconfig_is_an_error_only_when_named() {
        let k = KubeSource::file("/nonexistent/eas/config".into(), false, None);
        assert!(standard("img", vec![], None, Some(&k), &env_of(&[])).unwrap().spec.mounts.is_empty());
        let k = KubeSource { explicit: true, ..k };
        let e = standard("img", vec![], None, Some(&k), &env_of(&[])).err().unwrap().to_string();
        assert_eq!(e, "kubeconfig /nonexistent/eas/config does not exist");
    }

    #[test]
    fn kubeconfig_source_order() {
        use crate::settings::{Env, Global};
        let g = |k: Option<&str>, env: &[(&str, &str)]| Global {
            kubeconfig: k.map(PathBuf::from),
            env: Env::of(env),
            ..Global::default()
        };
        let env = [("KUBECONFIG", "/e/config"), ("HOME", "/h")];
        assert_eq!(KubeSource::resolve(&g(Some("/f"), &env)).paths, [Path::new("/f")]);
        assert_eq!(KubeSource::resolve(&g(None, &env)).paths, [Path::new("/e/config")]);
        let s = KubeSource::resolve(&g(None, &[("HOME", "/h")]));
        assert_eq!((s.paths, s.explicit), (vec![PathBuf::from("/h/.kube/config")], false));
        let s = KubeSource::resolve(&g(None, &[("KUBECONFIG", "/a::/b")]));
        assert_eq!((s.paths, s.explicit), (vec![PathBuf::from("/a"), PathBuf::from("/b")], true));
    }

    #[test]
    fn a_kubeconfig_list_is_merged_into_one_private_copy() {
        let (dir, a) = crate::testing::temp_path("a");
        let b = dir.path().join("b");
        std::fs::write(
            &a,
            // Another cluster's context and user, as a merged KUBECONFIG carries them (issue 30
            // item 6): they stay out of the copy.
            "apiVersion: v1\nkind: Config\ncurrent-context: k3d-gpu\nclusters:\n- name: prod\n  cluster:\n    server: https://10.0.0.9:6443\n\
             contexts:\n- name: prod\n  context:\n    cluster: prod\n    user: prod-admin\n\
             users:\n- name: prod-admin\n  user:\n    token: PRODSENTINEL\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k3d-gpu\n  cluster:\n    server: https://127.0.0.1:6550\n\
             contexts:\n- name: k3d-gpu\n  context:\n    cluster: k3d-gpu\n    user: admin\n\
             users:\n- name: admin\n  user:\n    token: s3cret\n",
        )
        .unwrap();
        let k = KubeSource {
            paths: vec![a.clone(), b.clone()],
            explicit: true,
            context: None,
            minted: None,
            extra_roots: None,
            read_timeout: None,
        };
        let s = standard("img", vec![], None, Some(&k), &env_of(&[])).unwrap();
        let m = &s.spec.mounts[0];
        assert!(m.source != a && m.source != b && m.read_only);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&m.source).unwrap().permissions().mode() & 0o777, 0o600);
        let copy: serde_json::Value = serde_json::from_slice(&std::fs::read(&m.source).unwrap()).unwrap();
        assert_eq!(copy["current-context"], "k3d-gpu");
        assert_eq!(copy.pointer("/clusters/0/cluster/server").unwrap(), "https://127.0.0.1:6550");
        assert_eq!(copy.pointer("/users/0/user/token").unwrap(), "s3cret");
        let count = |list: &str| copy[list].as_array().map_or(0, Vec::len);
        assert_eq!((count("contexts"), count("clusters"), count("users")), (1, 1, 1), "{copy}");
        assert!(!copy.to_string().contains("PRODSENTINEL"), "{copy}");
        assert_eq!(s.spec.network.as_deref(), Some("host"));
    }

    #[tokio::test]
    async fn an_exec_plugins_token_is_minted_on_the_host_into_the_private_copy() {
        let (dir, plugin) = crate::testing::temp_path("plugin");
        std::fs::write(
            &plugin,
            "#!/bin/sh\necho '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"minted\",\"expirationTimestamp\":\"2030-01-01T00:00:00Z\"}}'\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n\
                 contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    exec:\n      \
                 apiVersion: client.authentication.k8s.io/v1\n      command: {}\n",
                plugin.display()
            ),
        )
        .unwrap();
        let mut k = KubeSource::file(path.clone(), true, None);
        let m = k.mint(std::time::Duration::from_secs(10)).await.unwrap().unwrap();
        assert_eq!(m.expires.as_deref(), Some("2030-01-01T00:00:00Z"));
        let s = standard("img", vec![], None, Some(&k), &env_of(&[])).unwrap();
        let m = &s.spec.mounts[0];
        assert!(m.source != path && m.read_only);
        assert_eq!(std::fs::metadata(&m.source).unwrap().permissions().mode() & 0o777, 0o600);
        let copy: serde_json::Value = serde_json::from_slice(&std::fs::read(&m.source).unwrap()).unwrap();
        assert_eq!(copy.pointer("/users/0/user/token").unwrap(), "minted");
        assert!(copy.pointer("/users/0/user/exec").is_none(), "the plugin does not exist in the bastion");
        let copy_path = m.source.clone();
        drop(s);
        assert!(!copy_path.exists(), "the copy with the token goes with the run");
    }

    #[test]
    fn installer_env_names_the_secrets() {
        let secret: Vec<&str> = installer_env().iter().filter(|v| v.secret).map(|v| v.name.as_str()).collect();
        assert_eq!(secret, ["HF_TOKEN", "KEYCLOAK_ADMIN_PASSWORD", "GRAFANA_ADMIN_PASSWORD"]);
    }
}
