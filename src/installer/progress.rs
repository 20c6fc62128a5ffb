//! Reading the installer's output stream, one line at a time: a state machine with no I/O.
//!
//! It follows Ansible's `PLAY [..]` / `TASK [..]` lines, task results, the `PLAY RECAP` block,
//! the installer's bring-your-own-cluster line, its completion banner and its failure line. It
//! also guards the run: the installer must announce bring-your-own-cluster mode before any play
//! starts, or it is about to build a cluster with Kubespray instead of using this one.

use std::collections::VecDeque;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Markers {
    byo: Byo,
    banners: Vec<BannerRow>,
    failure: FailureLine,
    cluster_creation: ClusterCreation,
}

#[derive(Debug, Deserialize)]
struct Byo {
    marker: String,
    path_after: String,
}

#[derive(Debug, Deserialize)]
struct BannerRow {
    text: String,
    action: Banner,
}

/// The marker of the installer's failure line (data/installer-output.json, `failure`).
#[derive(Debug, Deserialize)]
struct FailureLine {
    infix: String,
}

#[derive(Debug, Deserialize)]
struct ClusterCreation {
    case_insensitive: Vec<String>,
}

fn markers() -> &'static Markers {
    data_table!(Markers, "installer-output.json")
}

/// The action a completion banner announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Banner {
    Install,
    Teardown,
    Validate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Ok,
    Changed,
    Skipping,
    Failed,
    Fatal,
    Unreachable,
}

/// One host's line of the `PLAY RECAP` block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecapRow {
    pub host: String,
    pub ok: u32,
    pub changed: u32,
    pub unreachable: u32,
    pub failed: u32,
    pub skipped: u32,
    pub rescued: u32,
    pub ignored: u32,
}

/// What one line was.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Play(String),
    Task { role: Option<String>, name: String },
    Result { status: TaskStatus, host: String },
    RecapStart,
    Recap(RecapRow),
    Byo { kubeconfig: String },
    Banner(Banner),
    Failed { playbook: String, log: String },
    Text,
}

/// Whether the run may go on.
#[derive(Debug, Clone, PartialEq)]
pub enum Guard {
    Continue,
    /// Stop the installer now; the reason is for the user.
    Stop(String),
}

/// How the installer's run ended, from its exit status and what it printed.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Complete(Banner),
    /// eas stopped it (see [`Guard::Stop`]).
    Stopped(String),
    Failed {
        code: i32,
        task: Option<String>,
        log: Option<String>,
    },
    /// Exit 0 without the completion banner: not trusted as a success.
    NoBanner,
    /// Ended by a signal.
    Killed,
}

#[derive(Debug, Default, Clone)]
pub struct Progress {
    pub play: Option<String>,
    /// The current task, as `role : name` or `name`.
    pub task: Option<String>,
    pub plays: usize,
    pub tasks: usize,
    pub byo: Option<String>,
    pub banner: Option<Banner>,
    /// From the installer's `<pb> failed. Log: <path>` line.
    pub failure: Option<(String, String)>,
    /// The last task that reported `failed` or `fatal`.
    pub failed_task: Option<String>,
    pub recap: Vec<RecapRow>,
    pub stopped: Option<String>,
    in_recap: bool,
}

impl Progress {
    pub fn new() -> Self {
        Progress::default()
    }

    pub fn byo_seen(&self) -> bool {
        self.byo.is_some()
    }

    /// Reads one line of output. Returns [`Guard::Stop`] once, for the line that shows the
    /// installer acting before it announced bring-your-own-cluster mode.
    pub fn feed(&mut self, raw: &str) -> (Event, Guard) {
        let line = crate::text::strip_ansi(raw);
        let line = line.trim_end();
        let event = self.classify(line);
        let guard = self.guard(line, &event);
        if let Guard::Stop(reason) = &guard {
            self.stopped = Some(reason.clone());
        }
        (event, guard)
    }

    fn classify(&mut self, line: &str) -> Event {
        let m = markers();
        if let Some(name) = header(line, "PLAY [") {
            self.in_recap = false;
            self.play = Some(name.clone());
            self.task = None;
            self.plays += 1;
            return Event::Play(name);
        }
        if line.starts_with("PLAY RECAP") {
            self.in_recap = true;
            return Event::RecapStart;
        }
        if let Some(full) = header(line, "TASK [").or_else(|| header(line, "RUNNING HANDLER [")) {
            self.in_recap = false;
            self.tasks += 1;
            self.task = Some(full.clone());
            let (role, name) = match full.split_once(" : ") {
                Some((r, n)) => (Some(r.trim().to_string()), n.trim().to_string()),
                None => (None, full),
            };
            return Event::Task { role, name };
        }
        if let Some((status, host)) = result(line) {
            if matches!(status, TaskStatus::Failed | TaskStatus::Fatal | TaskStatus::Unreachable) {
                self.failed_task = self.task.clone();
            }
            return Event::Result { status, host };
        }
        if self.in_recap
            && let Some(row) = recap_row(line)
        {
            self.recap.push(row.clone());
            return Event::Recap(row);
        }
        if let Some(pos) = line.find(&m.byo.marker) {
            let rest = &line[pos + m.byo.marker.len()..];
            if let Some(p) = rest.find(&m.byo.path_after) {
                let path = rest[p + m.byo.path_after.len()..].trim().to_string();
                self.byo = Some(path.clone());
                return Event::Byo { kubeconfig: path };
            }
        }
        if let Some(b) = m.banners.iter().find(|b| line.contains(&b.text)) {
            self.banner = Some(b.action);
            return Event::Banner(b.action);
        }
        if let Some(pos) = line.find(&m.failure.infix) {
            let playbook = line[..pos].split_whitespace().last().unwrap_or_default().to_string();
            let log = line[pos + m.failure.infix.len()..].trim().to_string();
            self.failure = Some((playbook.clone(), log.clone()));
            return Event::Failed { playbook, log };
        }
        Event::Text
    }

    fn guard(&self, line: &str, event: &Event) -> Guard {
        if self.byo.is_some() || self.stopped.is_some() {
            return Guard::Continue;
        }
        let acting = match event {
            Event::Play(_) | Event::Task { .. } | Event::Result { .. } => true,
            _ => {
                let lower = line.to_lowercase();
                markers().cluster_creation.case_insensitive.iter().any(|w| lower.contains(w.as_str()))
            }
        };
        if !acting {
            return Guard::Continue;
        }
        Guard::Stop(format!(
            "the installer printed {line:?} before its bring-your-own-cluster line (\"{} — kubeconfig: …\"): \
             it would create a cluster instead of using this one; existing_kubernetes is not set in env/<env>/global_config.yaml",
            markers().byo.marker
        ))
    }

    /// The run's outcome from its exit code (None when a signal ended it).
    pub fn outcome(&self, exit: Option<i32>) -> Outcome {
        if let Some(reason) = &self.stopped {
            return Outcome::Stopped(reason.clone());
        }
        match (exit, self.banner) {
            (None, _) => Outcome::Killed,
            (Some(0), Some(b)) => Outcome::Complete(b),
            (Some(0), None) => Outcome::NoBanner,
            (Some(code), _) => Outcome::Failed {
                code,
                task: self.failed_task.clone(),
                log: self.failure.as_ref().map(|(_, log)| log.clone()),
            },
        }
    }

    /// One line for a progress bar or a plain status line.
    pub fn status(&self) -> String {
        match (&self.play, &self.task) {
            (Some(p), Some(t)) => format!("{p} · {t} (task {})", self.tasks),
            (Some(p), None) => p.clone(),
            (None, _) if self.byo.is_some() => "bring-your-own cluster; starting".to_string(),
            (None, _) => "starting".to_string(),
        }
    }
}

/// The bracketed name of an Ansible header line (`PLAY [x] ****`).
fn header(line: &str, prefix: &str) -> Option<String> {
    let rest = line.strip_prefix(prefix)?;
    let body = rest.trim_end_matches(['*', ' ']);
    let name = body.strip_suffix(']')?;
    Some(name.to_string())
}

/// `ok: [host]`, `changed: [host] => (item=...)`, `fatal: [host]: FAILED! => {...}`.
fn result(line: &str) -> Option<(TaskStatus, String)> {
    let (word, rest) = line.split_once(": [")?;
    let status = match word {
        "ok" => TaskStatus::Ok,
        "changed" => TaskStatus::Changed,
        "skipping" => TaskStatus::Skipping,
        "failed" => TaskStatus::Failed,
        "fatal" if rest.contains("UNREACHABLE!") => TaskStatus::Unreachable,
        "fatal" => TaskStatus::Fatal,
        _ => return None,
    };
    let host = rest.split(']').next()?.to_string();
    Some((status, host))
}

/// `localhost : ok=10 changed=2 unreachable=0 failed=0 skipped=5 rescued=0 ignored=0`.
fn recap_row(line: &str) -> Option<RecapRow> {
    let (host, counts) = line.split_once(" : ")?;
    let mut row = RecapRow { host: host.trim().to_string(), ..RecapRow::default() };
    let mut seen = 0;
    for pair in counts.split_whitespace() {
        let (k, v) = pair.split_once('=')?;
        let v: u32 = v.parse().ok()?;
        let slot = match k {
            "ok" => &mut row.ok,
            "changed" => &mut row.changed,
            "unreachable" => &mut row.unreachable,
            "failed" => &mut row.failed,
            "skipped" => &mut row.skipped,
            "rescued" => &mut row.rescued,
            "ignored" => &mut row.ignored,
            _ => continue,
        };
        *slot = v;
        seen += 1;
    }
    (seen > 0 && !row.host.is_empty()).then_some(row)
}

/// The last `cap` lines of output, for the failure report.
#[derive(Debug, Clone)]
pub struct Tail {
    cap: usize,
    lines: VecDeque<String>,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail { cap, lines: VecDeque::with_capacity(cap) }
    }

    pub fn push(&mut self, line: &str) {
        if self.cap == 0 {
            return;
        }
        if self.lines.len() == self.cap {
            self.lines.pop_front();
        }
        self.lines.push_back(line.to_string());
    }

    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;
