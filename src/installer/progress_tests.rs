use super::*;

/// A synthetic run in the installer's shape: its own coloured info lines, then Ansible.
const RUN: &str = "\
\x1b[0;34m[INFO]\x1b[0m Using env: k3d-gpu
\x1b[0;34m[INFO]\x1b[0m BYO cluster mode — kubeconfig: /kube/config
\x1b[0;34m[INFO]\x1b[0m Python venv ready

PLAY [Preflight] ***************************************************************

TASK [Gathering Facts] *********************************************************
ok: [localhost]

TASK [preflight : Check connectivity] ******************************************
ok: [localhost]

PLAY [Install components] ******************************************************

TASK [kubernetes : Skip when an existing cluster is used] **********************
skipping: [localhost]

TASK [nfd : Install node-feature-discovery] ************************************
changed: [localhost] => (item=nfd)

RUNNING HANDLER [nfd : Wait for workers] ***************************************
ok: [localhost]

PLAY RECAP *********************************************************************
localhost                  : ok=4    changed=1    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0

\x1b[0;32m════ INSTALLATION COMPLETE ════\x1b[0m
Target: agent-toolkit
";

fn run(text: &str) -> (Progress, Vec<Event>, Vec<Guard>) {
    let mut p = Progress::new();
    let mut events = Vec::new();
    let mut guards = Vec::new();
    for line in text.lines() {
        let (e, g) = p.feed(line);
        events.push(e);
        guards.push(g);
    }
    (p, events, guards)
}

#[test]
fn follows_plays_tasks_and_the_recap() {
    let (p, events, guards) = run(RUN);
    assert!(guards.iter().all(|g| *g == Guard::Continue));
    assert!(p.byo_seen());
    assert_eq!(p.byo.as_deref(), Some("/kube/config"));
    assert_eq!(p.plays, 2);
    assert_eq!(p.tasks, 5);
    assert_eq!(p.play.as_deref(), Some("Install components"));
    assert_eq!(p.task.as_deref(), Some("nfd : Wait for workers"));
    assert_eq!(p.banner, Some(Banner::Install));
    assert_eq!(
        p.recap,
        vec![RecapRow { host: "localhost".into(), ok: 4, changed: 1, skipped: 1, ..RecapRow::default() }]
    );
    let interesting: Vec<&Event> = events.iter().filter(|e| **e != Event::Text).collect();
    assert_eq!(interesting[0], &Event::Byo { kubeconfig: "/kube/config".into() });
    assert_eq!(interesting[1], &Event::Play("Preflight".into()));
    assert_eq!(interesting[2], &Event::Task { role: None, name: "Gathering Facts".into() });
    assert!(
        interesting.contains(&&Event::Task { role: Some("nfd".into()), name: "Install node-feature-discovery".into() })
    );
    assert!(interesting.contains(&&Event::Result { status: TaskStatus::Changed, host: "localhost".into() }));
    assert_eq!(p.outcome(Some(0)), Outcome::Complete(Banner::Install));
    assert_eq!(p.status(), "Install components · nfd : Wait for workers (task 5)");
}

#[test]
fn single_lines() {
    let cases = [
        ("PLAY [a [b] c] ***", Event::Play("a [b] c".into())),
        ("TASK [role : do x : y] ****", Event::Task { role: Some("role".into()), name: "do x : y".into() }),
        (
            "fatal: [localhost]: FAILED! => {\"msg\": \"x\"}",
            Event::Result { status: TaskStatus::Fatal, host: "localhost".into() },
        ),
        ("fatal: [h1]: UNREACHABLE! => {}", Event::Result { status: TaskStatus::Unreachable, host: "h1".into() }),
        ("failed: [localhost] (item=a) => {}", Event::Result { status: TaskStatus::Failed, host: "localhost".into() }),
        ("[INFO] BYO cluster mode - kubeconfig: /k/c", Event::Byo { kubeconfig: "/k/c".into() }),
        ("BYO cluster mode — kubeconfig:   /kube/config  ", Event::Byo { kubeconfig: "/kube/config".into() }),
        ("  TEARDOWN COMPLETE  ", Event::Banner(Banner::Teardown)),
        ("VALIDATE COMPLETE", Event::Banner(Banner::Validate)),
        (
            "\x1b[0;31m[ERROR]\x1b[0m site failed. Log: env/k3d-gpu/logs/install-agent-toolkit-20260101-120000.log",
            Event::Failed {
                playbook: "site".into(),
                log: "env/k3d-gpu/logs/install-agent-toolkit-20260101-120000.log".into(),
            },
        ),
        ("ok=3 is not a recap outside the recap", Event::Text),
        ("PLAY RECAP ***", Event::RecapStart),
        ("Tuesday 01 January 2026  12:00:00 +0000 (0:00:01.234)       0:00:05.678 *****", Event::Text),
    ];
    for (line, want) in cases {
        let mut p = Progress { byo: Some("/k".into()), ..Progress::new() };
        assert_eq!(p.feed(line).0, want, "{line:?}");
    }
}

#[test]
fn stops_an_installer_that_acts_before_announcing_byo() {
    // (output, index of the line that must stop it, or None)
    let cases: [(&str, Option<usize>); 6] = [
        ("[INFO] Using env: x\nPLAY [Preflight] ***\n", Some(1)),
        ("[INFO] Using env: x\nTASK [Gathering Facts] ***\n", Some(1)),
        ("[INFO] Running Kubespray cluster.yml\nPLAY [x] ***\n", Some(0)),
        ("[INFO] creating cluster: ansible-playbook cluster.yml\n", Some(0)),
        (
            "[INFO] venv ready\nBYO cluster mode — kubeconfig: /kube/config\nPLAY [x] ***\nTASK [kubespray : skipped in BYO] ***\n",
            None,
        ),
        ("[INFO] Using env: x\n[INFO] venv ready\n", None),
    ];
    for (text, at) in cases {
        let (p, _, guards) = run(text);
        let stops: Vec<usize> = (0..guards.len()).filter(|&i| matches!(guards[i], Guard::Stop(_))).collect();
        assert_eq!(stops, at.into_iter().collect::<Vec<_>>(), "{text:?}");
        assert_eq!(p.stopped.is_some(), at.is_some());
        assert_eq!(p.byo_seen(), text.contains("BYO"));
        if at.is_some() {
            assert!(matches!(p.outcome(Some(1)), Outcome::Stopped(r) if r.contains("existing_kubernetes")));
        }
    }
}

#[test]
fn outcomes_from_exit_and_output() {
    let failing = "BYO cluster mode — kubeconfig: /kube/config\nPLAY [p] ***\nTASK [kserve : Install CRDs] ***\nfatal: [localhost]: FAILED! => {}\nTASK [never reached] ***\n[ERROR] site failed. Log: /w/env/e/logs/install.log\n";
    let (p, _, _) = run(failing);
    assert_eq!(
        p.outcome(Some(1)),
        Outcome::Failed {
            code: 1,
            task: Some("kserve : Install CRDs".into()),
            log: Some("/w/env/e/logs/install.log".into())
        }
    );
    assert_eq!(p.outcome(None), Outcome::Killed);
    let (quiet, _, _) = run("BYO cluster mode — kubeconfig: /kube/config\nPLAY [p] ***\n");
    assert_eq!(quiet.outcome(Some(0)), Outcome::NoBanner);
    assert_eq!(quiet.outcome(Some(2)), Outcome::Failed { code: 2, task: None, log: None });
    assert_eq!(Progress::new().status(), "starting");
}

#[test]
fn tail_keeps_the_last_lines() {
    let mut t = Tail::new(3);
    for i in 0..5 {
        t.push(&format!("line {i}"));
    }
    assert_eq!(t.lines().collect::<Vec<_>>(), ["line 2", "line 3", "line 4"]);
    let mut none = Tail::new(0);
    none.push("x");
    assert_eq!(none.lines().count(), 0);
}
