//! Every default timeout in one place. Flags and settings override them; the plan's phase table
//! (`pipeline.rs`) and the flags' defaults both read from here, so they cannot disagree.

use std::time::Duration;

const fn mins(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

/// Each cluster API call (a list, a get, a delete).
pub const CALL: Duration = Duration::from_secs(30);
/// Each Docker call while gathering facts: Docker answers locally or not at all.
pub const DOCKER_CALL: Duration = Duration::from_secs(10);
/// Each Docker request while building or finding the bastion image (`EAS_DOCKER_TIMEOUT`).
pub const DOCKER_BUILD_SECS: u64 = 120;
/// The installer's run (`eas up --install-timeout`).
pub const INSTALL: Duration = mins(90);
/// Waiting for the model servers (`eas up --verify-timeout`, `eas verify --timeout`).
pub const VERIFY: Duration = mins(40);
/// The installer's teardown (`eas down --teardown-timeout`).
pub const TEARDOWN: Duration = mins(45);
/// Retrying a ledger snapshot before the record is marked incomplete (`eas up`), and a
/// cluster snapshot before `eas down` stops.
pub const LEDGER: Duration = mins(2);
/// Waiting for the device plugins' resources during verification.
pub const VERIFY_DEVICES: Duration = Duration::from_secs(90);
/// How often verification polls.
pub const VERIFY_POLL: Duration = Duration::from_secs(5);
/// Building the bastion image.
pub const BASTION: Duration = mins(30);
/// An exec credential plugin (aws, gcloud, kubelogin) minting a token; an SSO login waiting in a
/// browser gives up here instead of hanging the run.
pub const CREDENTIAL: Duration = Duration::from_secs(60);
/// `eas down` waiting for what it deleted to go: a namespace stays `Terminating` while its
/// content is removed. Past it, what is still there is reported as left.
pub const SETTLE: Duration = mins(5);
/// Waiting for an answer at a confirmation prompt on a terminal (`eas down` without `--yes`).
pub const PROMPT: Duration = mins(10);
