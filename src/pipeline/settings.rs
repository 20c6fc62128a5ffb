//! The run settings of `eas up`, resolved once at the edge (`src/cli/resolve.rs`).

#[derive(Debug, Clone)]
pub struct UpSettings {
    /// Everything that reads, nothing that writes: print the plan
    pub dry_run: bool,
    /// With --dry-run: exit with the first blocker's code (for CI)
    pub fail_on_blockers: bool,
    /// Read nothing from Hugging Face: the models' figures come from the cache, else
    /// data/models.json, and whether the weights can be downloaded is not known
    pub offline: bool,
    /// Written keys that may go unread by the pinned trees (the knob audit warns instead)
    pub allow_unread: Vec<String>,
    pub select: Select,
    /// The installer's environment name (env/<name>/ in the EAS tree)
    pub env: String,
    /// With --dry-run: also write plan.json, plan.txt and (unless refused) the generated files here
    pub out: Option<PathBuf>,
    /// `--plan DIR`: the saved plan to apply (read by the command layer into `saved`)
    pub plan: Option<PathBuf>,
    /// The saved plan this run applies and is held to (`crate::plan::saved`)
    pub saved: Option<std::sync::Arc<crate::plan::saved::Saved>>,
    /// With --dry-run: `json` prints the plan (eas-plan/v1) as one JSON document on stdout
    pub output: crate::output::OutputFormat,
    /// Add each decision's source as a permalink to the plan
    pub explain: bool,
    /// Do not ask before changing the cluster (required without a terminal)
    pub yes: bool,
    /// Take over a lock left by a run that is no longer alive
    pub break_lock: bool,
    /// Run the installer even when nothing changed since the last completed run
    pub reinstall: bool,
    pub repos: Repos,
    pub image: bastion::BaseImage,
    pub gather: GatherOptions,
    /// How long a ledger snapshot is retried before the record is marked incomplete
    pub ledger_timeout: Duration,
    /// Each phase's act-half timeout: the declared ones unless `--install-timeout`,
    /// `--verify-timeout` or `--phase-timeout` set them (resolved once, conflicts refused).
    pub phase_timeouts: crate::plan::PhaseTimeouts,
    /// Where each of these that is not a default came from (flag, environment, config file;
    /// the last install fills what is still unset once the cluster is known).
    pub sources: crate::settings::source::Sources,
}

/// Existing clones or mirrors to use instead of fetching (offline use).
#[derive(Debug, Clone, Default)]
pub struct Repos {
    /// An EAS clone or mirror holding the pinned commit
    pub eas_repo: Option<PathBuf>,
    /// An EI (enterprise-inference) clone or mirror holding the pinned commit
    pub ei_repo: Option<PathBuf>,
    /// An EAT (agent toolkit) clone or mirror holding the pinned commit
    pub eat_repo: Option<PathBuf>,
}

/// The bastion image for these base flags and pins, its downloads through the run's proxy.
pub fn image_args(
    base: &bastion::BaseImage,
    pins: crate::pins::Source,
    global: &Global,
    proxy: &crate::net::proxy::ProxyEnv,
) -> ImageSettings {
    ImageSettings::new(pins, base.clone(), global, proxy.clone())
}

/// The prefix of a real run's scratch work trees in the state directory's `work/`.
pub const NEXT: &str = "eas.next-";

use crate::act::bastion;
use crate::act::bastion::ImageSettings;
use crate::gather::GatherOptions;
use crate::settings::{Global, Select};
/// The directory beside `state.json` that holds the latest attempt: a run that stopped before
/// its install phase began (see [`attempt`]).
pub use crate::state::records::ATTEMPT;
use std::path::PathBuf;
use std::time::Duration;
