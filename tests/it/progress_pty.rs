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
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let script = format!("{line} >{}", quote(&dir.join("plan.txt").display().to_string()));
    pane(&script, &name, columns, escapes, Duration::from_secs(120))
}

/// Runs `script` in a fresh tmux pane `columns` wide and 60 high until it ends (it may take
/// `limit`); all it left, the scrollback included, with the lines the terminal wrapped joined
/// again (`capture-pane -J`: a line longer than the pane shows as one), and escape sequences
/// when `escapes`. The last line is `EXIT=<its exit code>`.
fn pane(script: &str, name: &str, columns: u16, escapes: bool, limit: Duration) -> String {
    let socket = format!("eas-test-{}-{name}", std::process::id());
    let script = format!("{script}; echo \"EXIT=$?\"; sleep 600");
    let width = columns.to_string();
    tmux(&socket, &["new-session", "-d", "-x", &width, "-y", "60", "sh", "-c", &script]);
    let start = Instant::now();
    let screen = loop {
        let mut args = vec!["capture-pane", "-p", "-J", "-S", "-", "-t", "0"];
        if escapes {
            args.push("-e");
        }
        let screen = tmux(&socket, &args);
        if screen.contains("EXIT=") {
            break screen;
        }
        if start.elapsed() > limit {
            let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
            panic!("{script} did not finish in {limit:?}:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
    screen
}

/// The lines of `screen` wider than `columns` that have a space to break at: lines the terminal
/// broke wherever it was, mid-word (eas breaks its own between words). A line of one word (a
/// URL or a path longer than the pane) has no such place and stays whole, as `wrap_words` says.
fn wider_than(screen: &str, columns: usize) -> Vec<&str> {
    let breakable = |l: &&str| l.trim().contains(' ');
    screen.lines().map(str::trim_end).filter(|l| l.chars().count() > columns).filter(breakable).collect()
}

/// `c` as one shell command: its directory, its environment (what it sets and removes) and its
/// arguments, each quoted.
fn shell_line(c: &Command) -> String {
    let q = |s: &std::ffi::OsStr| quote(&s.to_string_lossy());
    // `env`'s options (the removals) before its assignments.
    let (mut unset, mut set) = (Vec::new(), Vec::new());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => set.push(format!("{}={}", k.to_string_lossy(), q(v))),
            None => unset.push(format!("-u {}", q(k))),
        }
    }
    let env = [unset, set].concat();
    let dir = c.get_current_dir().map(|d| format!("cd {} && ", q(d.as_os_str()))).unwrap_or_default();
    let args: Vec<String> = std::iter::once(c.get_program()).chain(c.get_args()).map(q).collect();
    format!("{dir}env {} {}", env.join(" "), args.join(" "))
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
    let wide = wider_than(&screen, 80);
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

/// `eas doctor` and `eas status` on 80- and 120-column terminals: every line they print, on
/// stdout (doctor's checks, status's table) and on stderr, breaks between words; none is wider
/// than the pane, so the terminal broke none mid-word. No Docker Engine answers here, so doctor
/// prints its failures (`FAIL preflight: …`, long lines with a fix) and the error that ends it.
#[test]
fn doctor_and_status_lines_break_between_words_at_80_and_120_columns() {
    let server = ClusterServer::start(support::fixture(CLUSTER));
    let dir = tempfile::tempdir().unwrap();
    let trees = support::trees::synthetic_trees(&dir.path().join("trees"));
    let eas = |args: &[&str]| {
        let mut c = support::eas(dir.path());
        // In the fixture's directory: its facts arguments name node files there.
        c.current_dir(support::fixture(CLUSTER)).env_remove("CI").env("TERM", "xterm-256color");
        c.arg("--kubeconfig").arg(server.kubeconfig()).arg("--state-dir").arg(dir.path().join("state")).args(args);
        c
    };
    let mut doctor = eas(&["doctor", "--pins"]);
    doctor.arg(trees.join("pins.json")).args(support::facts_args(CLUSTER));
    for n in ["eas", "ei", "eat"] {
        doctor.arg(format!("--{n}-repo")).arg(trees.join("repos").join(n));
    }
    let status = eas(&["status"]);
    // An error's lines (bad input: its cause and a long hint) are stderr lines too.
    let mut missing = support::eas(dir.path());
    missing.env_remove("CI").env("TERM", "xterm-256color").arg("--kubeconfig").arg(dir.path().join("none"));
    missing.arg("status");
    for columns in [80u16, 120] {
        let script = format!(
            "{}; echo \"DOCTOR=$?\"; {}; echo \"STATUS=$?\"; {}",
            shell_line(&doctor),
            shell_line(&status),
            shell_line(&missing)
        );
        let screen = pane(&script, &format!("doctor-{columns}"), columns, false, Duration::from_secs(120));
        assert!(screen.contains("DOCTOR=1") && screen.contains("STATUS=0") && screen.contains("EXIT=2"), "{screen}");
        assert!(screen.contains("hint: pass --kubeconfig PATH or set KUBECONFIG"), "{screen}");
        let long = |l: &&str| l.chars().count() > usize::from(columns) - 10;
        assert!(screen.lines().filter(long).count() >= 3, "lines long enough to need a break at {columns}:\n{screen}");
        assert!(
            screen.lines().any(|l| l.starts_with("FAIL preflight: no Docker Engine")),
            "doctor's checks:\n{screen}"
        );
        assert!(screen.contains("installed nothing: no run of `eas up` is recorded"), "{screen}");
        let wide = wider_than(&screen, usize::from(columns));
        assert!(wide.is_empty(), "lines the terminal broke mid-word at {columns} columns: {wide:?}\n{screen}");
    }
}

#[cfg(feature = "docker-tests")]
/// Issue 32 item 5: a real bastion build that fails at pip behind a TLS-intercepting proxy whose
/// CA the build was not given (no `--ca-bundle`), in `eas up --yes` on a 120-column terminal. The
/// proxy is a stand-in on the Docker bridge's gateway (`InterceptingProxy`: CONNECT answered, the
/// tunnel's TLS ended with an untrusted CA's certificate), reached through `HTTPS_PROXY`, which eas
/// hands the build; pip's own retries and error follow. The screen names the cause
/// (CERTIFICATE_VERIFY_FAILED) and the fix (`--ca-bundle`) before the build's last lines, which
/// are lines (no escaped `\n`), each wrapped between words; the run's log holds every line of the
/// build, more than the screen's last ones; `status` names the cause in one line.
#[test]
fn a_bastion_build_failing_behind_an_intercepting_proxy_says_its_cause_and_fix_first_on_a_terminal() {
    let _engine = support::docker::engine();
    let s = support::synthetic_install::setup("up-cycle");
    let inspect = Command::new("docker")
        .args(["network", "inspect", "bridge", "--format", "{{(index .IPAM.Config 0).Gateway}}"])
        .output()
        .unwrap();
    let gateway: std::net::IpAddr = text(&inspect.stdout).trim().parse().expect("the bridge network's gateway");
    let proxy = support::tls_front::InterceptingProxy::start(gateway);
    let server = ClusterServer::start(support::fixture(support::synthetic_install::CLUSTER));
    let home = tempfile::Builder::new().prefix("pty-build-").tempdir_in(&s.dir).unwrap();
    let state = home.path().join("state");
    let on_terminal = |args: &[String]| {
        let mut c = s.eas(home.path(), server.kubeconfig(), &state);
        c.env_remove("CI").env_remove("NO_COLOR").env("TERM", "xterm-256color").args(args);
        c
    };
    let mut up = on_terminal(&[&["up".to_string()][..], &s.up_args(), &["--yes".to_string()]].concat());
    // No CA bundle for the build; the proxy for HTTPS only, the loopback servers reached directly.
    up.env_remove("EAS_CA_BUNDLE").env("HTTPS_PROXY", &proxy.url).env("NO_PROXY", "127.0.0.1,localhost");
    let out = home.path().join("stdout.txt");
    let script = format!("{} >{}", shell_line(&up), quote(&out.display().to_string()));
    let screen = pane(&script, "bastion-fails", 120, false, Duration::from_secs(600));
    assert!(screen.contains("EXIT=1"), "{screen}");
    assert!(!proxy.connects().is_empty(), "the build's pip went through the intercepting proxy:\n{screen}");
    assert!(!screen.contains("\\n"), "an escaped newline on the screen:\n{screen}");
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let at = |prefix: &str| {
        lines.iter().position(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line:\n{screen}"))
    };
    let cause = at("bastion build failed: a download in the build could not verify");
    let fix = at("  fix: pass --ca-bundle FILE");
    let last = at("last lines of the build:");
    let error = at("error: bastion build: the build failed: ");
    assert!(cause < fix && fix < last && last < error, "cause, fix, the build's lines, the error:\n{screen}");
    assert!(lines[cause].contains("(CERTIFICATE_VERIFY_FAILED)"), "{screen}");
    // The failed RUN named by its step, not by Docker's whole shell line (that is above).
    assert!(lines[error].starts_with("error: bastion build: the build failed: step "), "{screen}");
    assert!(error < at("next: pass --ca-bundle FILE"), "the error ends with its fix:\n{screen}");
    // The build's lines, each its own line (a longer one continues indented under it).
    let build = &lines[last + 1..error];
    assert!(build.iter().all(|l| l.starts_with("  | ") || l.starts_with("      ")), "{screen}");
    let mut joined: Vec<String> = Vec::new();
    for l in build {
        match joined.last_mut() {
            Some(prev) if l.starts_with("      ") => *prev = format!("{prev} {}", l.trim_start()),
            _ => joined.push(l.to_string()),
        }
    }
    let retries =
        joined.iter().filter(|l| l.starts_with("  | WARNING: Retrying") && l.contains("CERTIFICATE_VERIFY_FAILED"));
    assert!(retries.count() >= 2, "pip's retries, a line each:\n{screen}");
    let wide = wider_than(&screen, 120);
    assert!(wide.is_empty(), "lines the terminal broke mid-word: {wide:?}\n{screen}");

    // The run's log (the attempt's: the run stopped before its install): every line of the
    // build, Docker's step lines included, then the cause and the error.
    let logs: Vec<std::path::PathBuf> =
        support::walk(&state).into_iter().filter(|p| p.to_string_lossy().contains("/attempt/logs/")).collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    let failing_step = joined.iter().rev().find(|l| l.starts_with("  | Step ")).expect("the failing step on screen");
    let steps = failing_step["  | Step ".len()..].split('/').next().unwrap().parse::<usize>().unwrap();
    for n in 1..=steps {
        assert!(log.contains(&format!("  | Step {n}/")), "step {n} is not in the log:\n{log}");
    }
    assert!(log.contains("  |  ---> "), "Docker's own lines are in the log:\n{log}");
    let logged = log.lines().filter(|l| l.starts_with("  | ")).count();
    let shown = joined.len();
    assert!(logged > shown, "the log holds more of the build ({logged} lines) than the screen ({shown})");
    assert!(log.contains("bastion build failed: a download in the build could not verify"), "{log}");
    assert!(log.contains("error: bastion build: the build failed: "), "{log}");

    // `status`: the cause in one line, in JSON and on an 80-column terminal.
    let json = on_terminal(&["status".into(), "--output".into(), "json".into()]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let last_run = &doc["last_run"];
    assert_eq!((&last_run["phase"], &last_run["exit_code"]), (&"bastion".into(), &1.into()), "{doc:#}");
    let cause = last_run["cause"].as_str().unwrap();
    assert!(!cause.contains('\n') && cause.contains("CERTIFICATE_VERIFY_FAILED"), "{cause:?}");
    assert!(cause.contains("the build failed: step ") && cause.contains(") returned a non-zero code: 1"), "{cause}");
    let table =
        pane(&shell_line(&on_terminal(&["status".into()])), "bastion-status", 80, false, Duration::from_secs(60));
    assert!(table.contains("installed nothing; last run failed at bastion (exit 1)"), "{table}");
    let wide = wider_than(&table, 80);
    assert!(wide.is_empty(), "status lines the terminal broke mid-word: {wide:?}\n{table}");
}
