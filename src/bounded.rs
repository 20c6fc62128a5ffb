//! The one reader for the files eas reads, each kind with a documented size limit, so a file
//! symlinked to `/dev/zero` or a runaway generator is refused (exit 2, naming the file and the
//! limit) before memory grows. A pipe or FIFO (`--kubeconfig <(…)`) is read on a helper thread
//! while the calling thread waits for SIGINT/SIGTERM too: a writer that never finishes cannot hold
//! eas past a signal (exit 130).
//!
//! Limits (generous: each is far above any real file of its kind, far below what hurts):
//!
//! | kind | limit | why |
//! |---|---|---|
//! | state (`state.json`, expected objects) | 16 MiB | a run's record with every object it created |
//! | lock | 64 KiB | one holder: host, pid, run id, start time |
//! | pins | 4 MiB | a few hundred rows |
//! | fit | 16 MiB | one verdict per catalog model |
//! | catalog | 16 MiB | EI's `models.yaml` is ~100 KiB |
//! | kubeconfig | 16 MiB | kubectl's biggest merged configs are a few MiB |
//! | containerd config | 4 MiB | the same bound as the copy read from a node container |
//! | CA bundle | 16 MiB | a system bundle is ~200 KiB |
//! | facts | 64 MiB | a 5000-node cluster's facts are a few MiB |
//! | an API answer | 256 MiB read whole, 1 GiB a streamed page | `net::body_limit` |

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// What a file is, which sets its limit and how it is named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    State,
    Lock,
    Pins,
    Fit,
    Catalog,
    Kubeconfig,
    Containerd,
    CaBundle,
    Facts,
    Plan,
    Config,
}

impl Kind {
    pub const fn limit(self) -> u64 {
        match self {
            Kind::Lock | Kind::Config => 64 * KIB,
            Kind::Pins | Kind::Containerd => 4 * MIB,
            Kind::State | Kind::Fit | Kind::Catalog | Kind::Kubeconfig | Kind::CaBundle | Kind::Plan => 16 * MIB,
            Kind::Facts => 64 * MIB,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Kind::State => "state file",
            Kind::Lock => "lock file",
            Kind::Pins => "pins file",
            Kind::Fit => "fit document",
            Kind::Catalog => "model catalog",
            Kind::Kubeconfig => "kubeconfig",
            Kind::Containerd => "containerd config",
            Kind::CaBundle => "CA bundle",
            Kind::Facts => "facts document",
            Kind::Plan => "saved plan",
            Kind::Config => "config file",
        }
    }
}

/// `1 MiB`, `64 KiB`: limits as people write them.
pub fn shown(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{} {path} does not exist", kind.name())]
    NotFound { kind: Kind, path: String },
    #[error("{} {path} cannot be read: {source}", kind.name())]
    Io { kind: Kind, path: String, source: std::io::Error },
    #[error("{} {path} is larger than its limit of {}", kind.name(), shown(kind.limit()))]
    TooLarge { kind: Kind, path: String },
    #[error("{} {path} is not UTF-8 text", kind.name())]
    NotText { kind: Kind, path: String },
    /// SIGINT or SIGTERM arrived while a pipe was being read.
    #[error("interrupted while reading {path}")]
    Interrupted { path: String },
}

impl ReadError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::NotFound { .. })
    }

    /// The io error kind, for callers that word some causes themselves (permissions, say).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            ReadError::Io { source, .. } => Some(source.kind()),
            ReadError::NotFound { .. } => Some(std::io::ErrorKind::NotFound),
            _ => None,
        }
    }
}

/// Reads at most `kind`'s limit of `path`; one byte more is [`ReadError::TooLarge`].
pub fn read(path: &Path, kind: Kind) -> Result<Vec<u8>, ReadError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| io_error(kind, &shown, e))?;
    if meta.is_file() {
        return read_capped(std::fs::File::open(path).map_err(|e| io_error(kind, &shown, e))?, kind, &shown);
    }
    if meta.is_dir() {
        return Err(ReadError::Io { kind, path: shown, source: std::io::Error::other("it is a directory") });
    }
    // A FIFO blocks in open() until a writer comes and in read() until it finishes: both on a
    // helper thread, abandoned (and ended with the process) when a signal comes first.
    let (tx, rx) = std::sync::mpsc::channel();
    let (p, s) = (path.to_path_buf(), shown.clone());
    std::thread::spawn(move || {
        let r = std::fs::File::open(&p).map_err(|e| io_error(kind, &s, e)).and_then(|f| read_capped(f, kind, &s));
        let _ = tx.send(r);
    });
    let _guard = SignalWatch::install();
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => return r,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ReadError::Io { kind, path: shown, source: std::io::Error::other("the reader stopped") });
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if SIGNALLED.swap(false, Ordering::SeqCst) {
                    return Err(ReadError::Interrupted { path: shown });
                }
            }
        }
    }
}

/// [`read`], as UTF-8 text.
pub fn read_string(path: &Path, kind: Kind) -> Result<String, ReadError> {
    let bytes = read(path, kind)?;
    String::from_utf8(bytes).map_err(|_| ReadError::NotText { kind, path: path.display().to_string() })
}

fn read_capped(f: impl Read, kind: Kind, shown: &str) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    f.take(kind.limit() + 1).read_to_end(&mut bytes).map_err(|e| io_error(kind, shown, e))?;
    if bytes.len() as u64 > kind.limit() {
        return Err(ReadError::TooLarge { kind, path: shown.to_string() });
    }
    Ok(bytes)
}

fn io_error(kind: Kind, shown: &str, e: std::io::Error) -> ReadError {
    match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound { kind, path: shown.to_string() },
        _ => ReadError::Io { kind, path: shown.to_string(), source: e },
    }
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// The same signals, for [`interruptible`]: a read inside it resets [`SIGNALLED`], never this.
static WORK_SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: atomic stores.
    SIGNALLED.store(true, Ordering::SeqCst);
    WORK_SIGNALLED.store(true, Ordering::SeqCst);
}

/// Runs `work` (a command's computation without an async runtime: `config`'s reads and
/// decisions) on a helper thread while this thread waits for it or for SIGINT/SIGTERM: a signal
/// returns `None` at once (within 50 ms), the helper abandoned and ended with the process, so
/// the command exits 130 instead of being killed by the signal.
pub fn interruptible<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let _guard = SignalWatch::install();
    WORK_SIGNALLED.store(false, Ordering::SeqCst);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    loop {
        if WORK_SIGNALLED.swap(false, Ordering::SeqCst) {
            return None;
        }
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => return Some(r),
            // The helper panicked: its message is already on stderr.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::process::exit(101),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

/// SIGINT and SIGTERM set [`SIGNALLED`] while this lives; the handlers before it (the runtime's,
/// or the default) are put back on drop.
struct SignalWatch {
    old: [(libc::c_int, libc::sigaction); 2],
}

impl SignalWatch {
    fn install() -> SignalWatch {
        SIGNALLED.store(false, Ordering::SeqCst);
        let mut old = [(libc::SIGINT, unsafe { std::mem::zeroed() }), (libc::SIGTERM, unsafe { std::mem::zeroed() })];
        for (sig, prev) in old.iter_mut() {
            // SAFETY: a plain handler that only stores an atomic; `prev` receives the old one.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as *const () as usize;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(*sig, &act, prev);
            }
        }
        SignalWatch { old }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores the handler saved by `install`.
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_its_limit_is_refused_naming_the_file_and_the_limit() {
        let e = read(Path::new("/dev/zero"), Kind::Lock).unwrap_err().to_string();
        assert_eq!(e, "lock file /dev/zero is larger than its limit of 64 KiB");
        let (dir, p) = crate::testing::temp_path("pins.json");
        std::fs::write(&p, vec![b' '; Kind::Pins.limit() as usize]).unwrap();
        assert_eq!(read(&p, Kind::Pins).unwrap().len() as u64, Kind::Pins.limit());
        std::fs::write(&p, vec![b' '; Kind::Pins.limit() as usize + 1]).unwrap();
        assert!(matches!(read(&p, Kind::Pins), Err(ReadError::TooLarge { .. })));
        assert!(read(&dir.path().join("none"), Kind::State).unwrap_err().is_not_found());
        std::fs::write(&p, [0xff, 0xfe, 0x00]).unwrap();
        assert_eq!(
            read_string(&p, Kind::Pins).unwrap_err().to_string(),
            format!("pins file {} is not UTF-8 text", p.display())
        );
    }

    #[test]
    fn a_fifo_is_read_whole_once_its_writer_finishes() {
        let (_dir, fifo) = crate::testing::temp_path("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let w = fifo.clone();
        let writer = std::thread::spawn(move || std::fs::write(w, "apiVersion: v1\n").unwrap());
        assert_eq!(read_string(&fifo, Kind::Kubeconfig).unwrap(), "apiVersion: v1\n");
        writer.join().unwrap();
    }

    #[test]
    fn limits_are_shown_as_people_write_them() {
        assert_eq!(shown(16 * MIB), "16 MiB");
        assert_eq!(shown(64 * KIB), "64 KiB");
        assert_eq!(shown(100), "100 bytes");
    }
}
