//! `eas up` on a recorded cluster with the synthetic trees, without a Docker Engine unless a test
//! gives one: the harness of the plan-is-the-run tests (tests/it/blockers.rs, tests/it/phase_timeouts.rs).

use std::path::Path;
use std::process::Command;

use super::ClusterServer;

/// `eas up` on `cluster` with the synthetic trees (`trees`, from [`trees`]), in state directory
/// `state`; `facts_args`: the fixture's node files and flags.
pub fn command(
    server: &ClusterServer,
    cluster: &str,
    state: &Path,
    trees: &Path,
    facts_args: bool,
    extra: &[&str],
) -> Command {
    let mut c: Command = super::eas(&super::fixture(cluster));
    c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(state).arg("up");
    c.arg("--pins").arg(trees.join("pins.json"));
    if facts_args {
        c.args(super::facts_args(cluster));
    }
    for n in ["eas", "ei", "eat"] {
        c.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    c.args(extra);
    c
}

/// The synthetic EAS, EI and EAT repositories under a new directory, with `pins.json` (the real
/// pins, their `main` rows pointed at the repositories) beside them; the directory goes when the
/// value does (it was kept: one `/tmp/blockers-*` left per call). Used as the directory's path.
pub fn trees() -> Trees {
    let dir = tempfile::Builder::new().prefix("blockers-").tempdir().unwrap();
    super::trees::synthetic_trees(dir.path());
    Trees(dir)
}

/// The directory [`trees`] made, removed on drop.
pub struct Trees(tempfile::TempDir);

impl std::ops::Deref for Trees {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}
