//! Progress on a real terminal: `eas up --dry-run` in a tmux pane (a pseudo-terminal), its
//! stdout sent to a file so the pane shows only what eas draws on stderr. While the spinner runs
//! (bastion, facts and trees are awaited together), warnings are printed; the screen they leave
//! must hold whole lines only. With NO_COLOR, and with stderr not a terminal, the lines are plain.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{ClusterServer, Fault, text};

const CLUSTER: &str = "k3d-gpu-desktop";

fn tmux(socket: &str, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .arg("-L")
        .arg(socket)
        .args(args)
        .output()
        .expect("tmux is installed (.ci/run installs it: apt-get install tmux)");
    assert!(out.status.success(), "tmux {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The dry run's command line, for a shell, with the test harness's isolation (no Docker, no
/// home, no host root) and `extra_env`.
fn command_line(server: &ClusterServer, dir: &Path, extra_env: &[&str], flags: &[&str]) -> String {
    let eas = env!("CARGO_BIN_EXE_eas");
    let mut env = vec![
        format!("HOME={}", dir.join("home").display()),
        format!("XDG_CONFIG_HOME={}", dir.join("config").display()),
        "DOCKER_HOST=unix:///nonexistent/eas-test/docker.sock".to_string(),
        format!("EAS_HOST_ROOT={}", dir.join("no-host-root").display()),
        // As support::eas: the state directory's free-space minimum is not this machine's disk.
        "EAS_STATE_MIN_FREE=1".to_string(),
        "TERM=xterm-256color".to_string(),
    ];
    env.extend(extra_env.iter().map(|e| e.to_string()));
    let mut argv = vec![eas.to_string(), "--kubeconfig".into(), server.kubeconfig().display().to_string()];
    argv.extend(["--state-dir".into(), dir.join("state").display().to_string()]);
    argv.extend(flags.iter().map(|f| f.to_string()));
    argv.extend([
        "up".into(),
        "--dry-run".into(),
        "--pins".into(),
        support::root().join("pins.json").display().to_string(),
    ]);
    argv.extend(support::facts_args(CLUSTER));
    format!(
        "cd {} && env -u CI -u NO_COLOR -u KUBECONFIG -u EAS_LOG {} {}",
        quote(&support::fixture(CLUSTER).display().to_string()),
        env.iter().map(|e| quote(e)).collect::<Vec<_>>().join(" "),
        argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    )
}

/// Runs `line` in a fresh 400x60 tmux pane (no line wraps) until it exits; the screen it leaves (with escape
/// sequences when `escapes`).
fn in_pane(line: &str, dir: &Path, escapes: bool) -> String {
    in_pane_of(line, dir, escapes, 400)
}

/// [`in_pane`] in a pane `columns` wide; the screen is captured with the lines the terminal
/// wrapped joined again (`capture-pane -J`), so a line longer than the pane shows as one.
fn in_pane_of(line: &str, dir: &Path, escapes: bool, columns: u16) -> String {
    let socket = format!("eas-test-{}-{}", std::process::id(), dir.file_name().unwrap().to_string_lossy());
    let script =
        format!("{line} >{} ; echo \"EXIT=$?\"; sleep 600", quote(&dir.join("plan.txt").display().to_string()));
    let width = columns.to_string();
    tmux(&socket, &["new-session", "-d", "-x", &width, "-y", "60", "sh", "-c", &script]);
    let start = Instant::now();
    let screen = loop {
        let mut args = vec!["capture-pane", "-p", "-J", "-t", "0"];
        if escapes {
            args.push("-e");
        }
        let screen = tmux(&socket, &args);
        if screen.contains("EXIT=") {
            break screen;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
            panic!("the dry run did not finish in 120 s:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
    screen
}

/// A screen line eas may leave: a phase line, a warning, a note or the plan's end.
/// A line no bar tore: it starts with its own prefix, or (a note, such as the model catalog's)
/// carries no phase, warning or spinner text in its middle.
fn whole(line: &str) -> bool {
    line.is_empty()
        || line.starts_with("==> ")
        || line.starts_with("warning: ")
        || line.starts_with("EXIT=")
        || !(line.contains("==> ") || line.contains("warning: ") || line.contains("waiting for the bastion image"))
}

#[test]
fn warnings_during_a_phase_leave_a_clean_screen() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    // A slow node list keeps the spinner on screen until the facts' warnings are printed.
    server.inject(Some("/api/v1/nodes"), Fault::Slow(Duration::from_secs(2)), None);
    let dir = tempfile::tempdir().unwrap();
    let screen = in_pane(&command_line(&server, dir.path(), &[], &["--progress", "tty"]), dir.path(), false);
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        lines.iter().any(|l| l.starts_with("warning: the nodes are named like k3d cluster \"gpu\"")),
        "the facts warn while the spinner is drawn:\n{screen}"
    );
    let torn: Vec<&&str> = lines.iter().filter(|l| !whole(l)).collect();
    assert!(torn.is_empty(), "torn lines {torn:?} on the screen:\n{screen}");
    let plan = std::fs::read_to_string(dir.path().join("plan.txt")).unwrap();
    assert!(plan.starts_with("eas --kubeconfig "), "stdout holds the plan only:\n{plan}");
}

/// On an 80-column terminal eas breaks its long lines (the facts' warnings, the phase lines)
/// between words itself: joined back, no line the terminal shows is wider than the pane, so none
/// was broken mid-word by the terminal.
#[test]
fn on_an_80_column_terminal_long_lines_break_between_words() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let dir = tempfile::tempdir().unwrap();
    let screen =
        in_pane_of(&command_line(&server, dir.path(), &["NO_COLOR=1"], &["--progress", "tty"]), dir.path(), false, 80);
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("warning: the nodes are named like k3d"), "a long warning is on screen:\n{screen}");
    let wide: Vec<&str> = screen.lines().map(str::trim_end).filter(|l| l.chars().count() > 80).collect();
    assert!(wide.is_empty(), "lines the terminal broke mid-word: {wide:?}\n{screen}");
}

#[test]
fn no_color_on_a_terminal_gives_plain_lines() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let dir = tempfile::tempdir().unwrap();
    let coloured = in_pane(&command_line(&server, dir.path(), &[], &[]), dir.path(), true);
    assert!(coloured.contains("\u{1b}["), "on a terminal the warning is coloured:\n{coloured}");
    let dir = tempfile::tempdir().unwrap();
    let plain = in_pane(&command_line(&server, dir.path(), &["NO_COLOR=1"], &[]), dir.path(), true);
    assert!(plain.contains("warning: "), "{plain}");
    assert!(!plain.contains("\u{1b}["), "NO_COLOR leaves escape sequences:\n{plain:?}");
}

#[test]
fn without_a_terminal_the_lines_are_plain() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("sh").arg("-c").arg(command_line(&server, dir.path(), &[], &[])).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(!err.contains('\u{1b}') && !err.contains('\r'), "escape sequences without a terminal: {err:?}");
    assert!(err.lines().all(whole), "{err}");
    assert!(err.contains("==> facts:"), "{err}");
}

/// `eas verify` on a terminal: the device wait's spinner names the node it waits for and its
/// elapsed time against the timeout, and the clock moves while the state does not.
#[test]
fn verify_on_a_terminal_shows_what_it_waits_for_against_its_timeout() {
    let server = ClusterServer::start(support::fixture("gpu-nodes"));
    let dir = tempfile::tempdir().unwrap();
    let eas = env!("CARGO_BIN_EXE_eas");
    let argv = [
        eas.to_string(),
        "--kubeconfig".into(),
        server.kubeconfig().display().to_string(),
        "--state-dir".into(),
        dir.path().join("state").display().to_string(),
        "verify".into(),
        "--devices-timeout".into(),
        "90".into(),
    ];
    let line = format!(
        "env -u CI -u NO_COLOR -u KUBECONFIG -u EAS_LOG HOME={} TERM=xterm-256color {} 2>&1; sleep 600",
        quote(&dir.path().join("home").display().to_string()),
        argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    );
    let socket = format!("eas-test-verify-{}", std::process::id());
    tmux(&socket, &["new-session", "-d", "-x", "200", "-y", "20", "sh", "-c", &line]);
    let start = Instant::now();
    let want = "verify devices: waiting for gpu-b: plugin CrashLoopBackOff, 0:02 of 1:30";
    let screen = loop {
        let screen = tmux(&socket, &["capture-pane", "-p", "-t", "0"]);
        if screen.contains(want) || start.elapsed() > Duration::from_secs(30) {
            break screen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
    assert!(screen.contains(want), "no {want:?} on the screen:\n{screen}");
}

#[cfg(feature = "docker-tests")]
/// `eas bastion build` on a terminal: the build's spinner shows its elapsed time against the
/// build's timeout (30:00), as every wait does. Docker and the local base image are needed
/// (`bash scripts/docker-up.sh`, `bash scripts/base-image.sh`); the build is stopped with ^C
/// once the clock is seen, so it leaves no image.
#[test]
fn the_bastion_build_shows_its_elapsed_time_against_its_timeout() {
    let _engine = support::docker::engine();
    let docker_up = Command::new("docker").arg("info").output().is_ok_and(|o| o.status.success());
    assert!(docker_up, "no Docker Engine answers: start one with `bash scripts/docker-up.sh`");
    let base = Command::new("bash").arg(support::root().join("scripts/base-image.sh")).output().unwrap();
    assert!(base.status.success(), "scripts/base-image.sh: {}", text(&base.stderr));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("served")).unwrap();
    // A new context (its own nonce): the build runs, it does not reuse an image.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let nonce = format!("pty{nanos:x}{:x}", std::process::id());
    let pins = support::artifacts::write_pins(dir.path(), &nonce, &dir.path().join("pins.json"));
    let eas = env!("CARGO_BIN_EXE_eas");
    let d = |p: &str| quote(&dir.path().join(p).display().to_string());
    let line = format!(
        "env -u CI -u NO_COLOR -u KUBECONFIG -u EAS_LOG -u EAS_PINS -u HF_TOKEN HOME={} XDG_CONFIG_HOME={} \
         XDG_CACHE_HOME={} EAS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt TERM=xterm-256color {} bastion build \
         --pins {} --base-image eas-test-base:bookworm --allow-unpinned-base >/dev/null; echo \"EXIT=$?\"; sleep 600",
        d("home"),
        d("config"),
        d("cache"),
        quote(eas),
        quote(&pins.display().to_string()),
    );
    let socket = format!("eas-test-build-{}", std::process::id());
    tmux(&socket, &["new-session", "-d", "-x", "300", "-y", "30", "sh", "-c", &line]);
    let clock = |screen: &str| {
        screen.lines().find(|l| l.contains(" of 30:00]")).map(|l| l.trim().to_string()).filter(|l| {
            // `<spinner> building eas-bastion:<tag> [m:ss of 30:00]`, or the step in progress.
            let at = l.rfind('[').unwrap();
            let elapsed = &l[at + 1..l.len() - " of 30:00]".len()];
            elapsed.split_once(':').is_some_and(|(m, s)| m.parse::<u32>().is_ok() && s.len() == 2)
        })
    };
    let start = Instant::now();
    let (seen, screen) = loop {
        let screen = tmux(&socket, &["capture-pane", "-p", "-t", "0"]);
        if let Some(l) = clock(&screen) {
            break (Some(l), screen);
        }
        if screen.contains("EXIT=") || start.elapsed() > Duration::from_secs(120) {
            break (None, screen);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Stop the build, which removes its step container and layers (tests/it/bastion.rs checks
    // that), and wait for eas to exit; the pane's shell may go with the ^C.
    if !screen.contains("EXIT=") {
        tmux(&socket, &["send-keys", "-t", "0", "C-c"]);
        let give_up = Instant::now() + Duration::from_secs(60);
        while Instant::now() < give_up {
            let o = Command::new("tmux").args(["-L", &socket, "capture-pane", "-p", "-t", "0"]).output().unwrap();
            if !o.status.success() || text(&o.stdout).contains("EXIT=") {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
    let seen = seen.unwrap_or_else(|| panic!("no build clock against 30:00 on the screen:\n{screen}"));
    assert!(seen.contains("building eas-bastion:") || seen.contains("Step "), "{seen}");
}
