//! The one async runtime every command runs in, with one shutdown policy.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Worker threads: the machine is small and the work is I/O; blocking work goes to
/// `spawn_blocking`, never onto these.
const WORKERS: usize = 2;
/// How long tasks still running when the command's future returns may take to finish (a
/// container removal); a read abandoned at its timeout on a blocking thread is not waited for.
const SHUTDOWN: Duration = Duration::from_secs(2);

/// Why a command's future could not run, or ended early: the runtime or the signal handlers could
/// not start, or SIGINT/SIGTERM ended it. What each means for the exit code is the edge's
/// (`src/commands/edge.rs`).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot start the async runtime: {0}")]
    Start(std::io::Error),
    #[error("cannot listen for SIGINT and SIGTERM: {0}")]
    Signals(std::io::Error),
    #[error("interrupted")]
    Interrupted,
}

/// Runs `f` to completion on a fresh runtime.
pub fn block_on<F: Future>(f: F) -> Result<F::Output, RuntimeError> {
    crate::git::reopen();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .map_err(RuntimeError::Start)?;
    let out = rt.block_on(f);
    // The command is over: a git call abandoned on a blocking thread is not waited for.
    crate::git::kill_running();
    rt.shutdown_timeout(SHUTDOWN);
    Ok(out)
}

/// Like [`block_on`], and SIGINT or SIGTERM ends `f` with [`RuntimeError::Interrupted`] (exit 130)
/// for commands that only read (`facts`, `verify`, `doctor`): dropping `f` cancels its calls.
pub fn block_on_interruptible<T, E: From<RuntimeError>>(f: impl Future<Output = Result<T, E>>) -> Result<T, E> {
    block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)));
        let (mut int, mut term) = handlers.map_err(RuntimeError::Signals)?;
        tokio::select! {
            r = f => r,
            _ = int.recv() => Err(RuntimeError::Interrupted.into()),
            _ = term.recv() => Err(RuntimeError::Interrupted.into()),
        }
    })?
}

/// The run-wide cancellation: the first Ctrl-C/SIGTERM cancels `graceful` (every phase, wait and
/// child stops and cleans up), a second cancels `force` (cleanup is cut short).
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    pub graceful: CancellationToken,
    pub force: CancellationToken,
}

impl Interrupt {
    /// Listens for SIGINT and SIGTERM on the current runtime.
    pub fn on_signals() -> std::io::Result<Interrupt> {
        use tokio::signal::unix::{SignalKind, signal};
        let me = Interrupt::default();
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let (graceful, force) = (me.graceful.clone(), me.force.clone());
        tokio::spawn(async move {
            for token in [graceful, force] {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                token.cancel();
            }
        });
        Ok(me)
    }
}
