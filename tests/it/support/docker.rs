//! The Docker tier's engine (`--features docker-tests`): every test of the tier starts with
//! `let _engine = support::docker::engine();`.
//!
//! When each tests/*.rs file was its own binary, cargo ran them one after another, so no two
//! files' tests ever met at the engine. In one binary they would run side by side: a bastion
//! build beside `up_cycle`'s "a dry run built no image" (`docker images` before and after), two
//! first `eas up`s building the one synthetic_install image twice on a 2-core machine. So the
//! tier's tests take turns, one at a time (up_cycle's and down_safety's own locks were this, for
//! one file each), while the tests without Docker run beside them. The turn is also taken across
//! processes (a lock file in the temporary directory): two test runs on one machine, from two
//! checkouts, never meet at the engine either.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

static ENGINE: Mutex<()> = Mutex::new(());
static ANSWERED: AtomicBool = AtomicBool::new(false);

/// The engine's turn: this process's and, through the lock file, every other test run's.
pub struct Turn {
    _process: MutexGuard<'static, ()>,
    _machine: std::fs::File,
}

/// The engine, for as long as the turn lives, once it answers: with no engine the test fails
/// here, saying how to start one (the feature asks for the tier; it is never skipped).
pub fn engine() -> Turn {
    // A test that failed holding the guard poisons it; the engine is as usable as before.
    let guard = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join("eas-docker-tier.lock");
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path);
    let file = file.unwrap_or_else(|e| panic!("the Docker tier's lock file {}: {e}", path.display()));
    // Released when the file closes, with the test's process at the latest.
    file.lock().unwrap_or_else(|e| panic!("the Docker tier's lock file {}: {e}", path.display()));
    if !ANSWERED.load(Ordering::Relaxed) {
        let info = Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]).output();
        match info {
            Ok(o) if o.status.success() => ANSWERED.store(true, Ordering::Relaxed),
            Ok(o) => panic!(
                "the docker-tests feature needs a Docker Engine and none answers ({}): start one with \
                 `bash scripts/docker-up.sh`, or leave the feature off",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!(
                "the docker-tests feature needs the docker CLI and a Docker Engine ({e}): start one with \
                 `bash scripts/docker-up.sh`, or leave the feature off"
            ),
        }
    }
    Turn { _process: guard, _machine: file }
}
