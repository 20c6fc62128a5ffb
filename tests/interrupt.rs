//! SIGINT and SIGTERM on the real binary while a phase waits on an API server that accepts and
//! never answers: `eas up` (preflight), `eas facts`, `eas verify` and `eas doctor` exit 130; a
//! phase past its (shortened) timeout exits 1 naming the phase. The 10 s bound only stops a
//! broken build from hanging the suite; nothing asserts how fast the exit is.

mod support;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::*;

/// An API server that accepts connections and never answers. The receiver hears of each accept.
fn silent_server() -> (u16, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
            let _ = tx.send(());
        }
    });
    (port, rx)
}

fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: silent\nclusters:\n- name: silent\n  cluster:\n    \
             server: http://127.0.0.1:{port}\ncontexts:\n- name: silent\n  context:\n    cluster: silent\n    \
             user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    path
}

fn start(dir: &Path, port: u16, args: &[&str]) -> Child {
    let mut c: Command = eas(dir);
    c.arg("--kubeconfig")
        .arg(kubeconfig(dir, port))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Waits for the child to exit (bounded, so a regression fails instead of hanging).
fn wait(child: &mut Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("eas did not exit within 10 s of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig}");
}

fn interrupted_while_waiting(args: &[&str], sig: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (port, accepted) = silent_server();
    let mut child = start(dir.path(), port, args);
    // The signal arrives while the call is outstanding: the server has the connection.
    accepted.recv_timeout(Duration::from_secs(10)).expect("eas connects to the API server");
    signal(&child, sig);
    let (code, err) = wait(&mut child);
    assert_eq!(code, Some(130), "{args:?} {sig}: {err}");
}

#[test]
fn up_preflight_against_a_silent_api_server_stops_on_sigint_and_sigterm() {
    for sig in ["-INT", "-TERM"] {
        interrupted_while_waiting(&["up", "--dry-run"], sig);
        interrupted_while_waiting(&["up", "--yes"], sig);
    }
}

#[test]
fn facts_verify_and_doctor_treat_sigterm_like_sigint() {
    for args in [&["facts"][..], &["verify"], &["doctor"]] {
        for sig in ["-INT", "-TERM"] {
            interrupted_while_waiting(args, sig);
        }
    }
}

#[test]
fn a_phase_past_its_timeout_exits_1_and_names_the_phase() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _accepted) = silent_server();
    let mut child = start(dir.path(), port, &["up", "--dry-run", "--phase-timeout", "preflight=1"]);
    let (code, err) = wait(&mut child);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("phase preflight did not finish within its timeout of 1 s"), "{err}");
    assert!(err.contains("eas doctor"), "the next command is named: {err}");
}

#[test]
fn an_unknown_phase_timeout_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = eas(dir.path()).args(["up", "--dry-run", "--phase-timeout", "nope=1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no phase named \"nope\""), "{}", text(&out.stderr));
}

/// A kubeconfig whose user runs a credential plugin that records its pid and never returns.
fn sleeping_plugin(dir: &Path) -> (PathBuf, PathBuf) {
    let pid_file = dir.join("plugin.pid");
    let plugin = dir.join("plugin");
    std::fs::write(&plugin, format!("#!/bin/sh\necho $$ > {}\nexec sleep 300\n", pid_file.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("kubeconfig-exec");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: sso\nclusters:\n- name: sso\n  cluster:\n    \
             server: http://127.0.0.1:1\ncontexts:\n- name: sso\n  context:\n    cluster: sso\n    user: u\n\
             users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      \
             command: {}\n",
            plugin.display()
        ),
    )
    .unwrap();
    (path, pid_file)
}

fn gone(pid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            // A zombie has been killed; it waits only for its parent (now init) to reap it.
            Ok(stat) if stat.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')) => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    false
}

#[test]
fn a_sleeping_credential_plugin_is_killed_on_sigint_and_sigterm() {
    for (args, sig) in [
        (&["facts"][..], "-INT"),
        (&["facts"], "-TERM"),
        (&["up", "--dry-run"], "-INT"),
        (&["up", "--yes"], "-TERM"),
        (&["verify"], "-TERM"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (kubeconfig, pid_file) = sleeping_plugin(dir.path());
        let mut child = eas(dir.path())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let pid = loop {
            if let Ok(p) = std::fs::read_to_string(&pid_file)
                && !p.trim().is_empty()
            {
                break p.trim().to_string();
            }
            assert!(Instant::now() < deadline, "{args:?}: the plugin never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        signal(&child, sig);
        let (code, err) = wait(&mut child);
        assert_eq!(code, Some(130), "{args:?} {sig}: {err}");
        assert!(gone(&pid), "{args:?} {sig}: the plugin (pid {pid}) is still running");
    }
}
