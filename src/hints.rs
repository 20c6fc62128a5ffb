//! Hints that recur across commands, worded for someone with a release tarball: they name
//! services, variables and `eas` commands, never a file of the eas repository (`scripts/…`,
//! `patches/README.md`), which such a user does not have.

/// No Docker Engine answered.
pub const DOCKER: &str = "start the Docker service (`sudo systemctl start docker`, or Docker Desktop), or set DOCKER_HOST to a running engine";

/// The bastion's Python lock and the pins disagree: only a new eas build fixes that.
pub const PYTHON_LOCK: &str = "this eas build's bastion/requirements.lock and its pins disagree: use the pins this release ships \
     (omit --pins and EAS_PINS), or a release whose lock matches them";

/// A base image named without a digest is not present locally.
pub fn base_missing(reference: &str) -> String {
    format!("load or pull {reference} first (`docker pull {reference}`), or pass --base-image REF@sha256:<digest>")
}

/// The engine answered but could not pull `reference`: it could not reach the registry (none is
/// reachable, or a proxy the engine itself does not use) or the registry has no such image.
pub fn pull_failed(reference: &str) -> String {
    format!(
        "the Docker Engine answered but could not pull {reference}: give the engine registry access (its own proxy \
         settings, not eas's), or load the image locally and pass --base-image {reference}@sha256:<digest>"
    )
}

#[cfg(test)]
mod tests {
    /// The hints the CLI prints never point into the eas repository.
    #[test]
    fn no_hint_names_a_repository_file() {
        for h in [super::DOCKER, super::PYTHON_LOCK, &super::base_missing("x"), &super::pull_failed("x")] {
            assert!(!h.contains("scripts/") && !h.contains("README"), "{h}");
        }
    }
}
