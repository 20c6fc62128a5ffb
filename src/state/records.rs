//! Whether something is installed, in one place (`status`, `verify` and `down` all ask here):
//! the install is the record of the last run whose install phase began (`state.json`); the
//! latest run is that or the attempt beside it (`attempt/state.json`: a run that stopped before
//! its install phase began, blocked or failed), whichever started last.

use serde::Serialize;

use super::StateDir;
use super::journal::{JournalError, State, Status};
use crate::plan::PhaseId;

/// The directory beside `state.json` that holds the latest attempt.
pub const ATTEMPT: &str = "attempt";

/// How the latest run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastRun {
    /// The phase it stopped in (failed or interrupted), else the last one it finished.
    pub phase: PhaseId,
    pub exit_code: Option<u8>,
    /// The failed phase's message, when one failed.
    pub cause: Option<String>,
    pub finished_at: Option<String>,
    /// Whether this run began its install phase.
    pub install: bool,
}

/// A cluster's records.
#[derive(Debug, Clone)]
pub struct Records {
    /// The install: the last run that began its install phase (a partial install included).
    pub install: Option<State>,
    /// The attempt recorded after it, if any.
    pub attempt: Option<State>,
}

/// Whether `s` began its install phase.
pub fn began_install(s: &State) -> bool {
    s.entry(PhaseId::Install).status != Status::Pending
}

impl Records {
    pub fn read(sd: &StateDir) -> Result<Records, JournalError> {
        let attempt_file = sd.dir().join(ATTEMPT).join(super::journal::FILE);
        let state = State::load(&sd.state_file())?;
        let attempt = State::load(&attempt_file)?;
        let install = state.filter(began_install);
        // An attempt older than the install is history: the install came after it. The records'
        // times are to the second; runs that start within one second of each other are told
        // apart by which file was written last (an attempt never writes `state.json`).
        let written = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let later = |a: &State, i: &State| match a.started.cmp(&i.started) {
            std::cmp::Ordering::Equal => written(&attempt_file) > written(&sd.state_file()),
            o => o == std::cmp::Ordering::Greater,
        };
        let attempt = attempt.filter(|a| install.as_ref().is_none_or(|i| later(a, i)));
        Ok(Records { install, attempt })
    }

    /// The latest run: the attempt when there is one after the install, else the install.
    pub fn last_run(&self) -> Option<LastRun> {
        let s = self.attempt.as_ref().or(self.install.as_ref())?;
        Some(last_run(s))
    }
}

pub fn last_run(s: &State) -> LastRun {
    let stopped = s.phases.iter().find(|p| matches!(p.status, Status::Failed | Status::Interrupted));
    let last = s.phases.iter().rev().find(|p| p.status == Status::Done);
    let phase = stopped.or(last).map_or(PhaseId::Lock, |p| p.phase);
    LastRun {
        phase,
        exit_code: s.exit_code,
        // One line: a failure's first (`error: ...`), not the lines printed under it.
        cause: stopped.and_then(|p| p.message.as_deref()).and_then(|m| m.lines().next()).map(str::to_string),
        finished_at: s.finished.clone(),
        install: began_install(s),
    }
}

/// The copy of the pins an install read, beside its `state.json`.
pub const PINS: &str = "pins.json";

/// What a run decided from, kept beside its record so `status`, the support bundle and a person
/// can read the run later: `facts.json`, `plan.json` and `choices.txt` in `dir` (the cluster's
/// state directory for an install; an attempt keeps its own in `attempt/`). Written when the
/// install phase begins, so a failed install keeps them too.
pub fn keep_inputs(
    dir: &std::path::Path,
    facts: &impl Serialize,
    plan: &impl Serialize,
    files: &[(String, String)],
) -> std::io::Result<()> {
    let write = |name: &str, text: &str| super::journal::write_atomic(&dir.join(name), text.as_bytes());
    write("facts.json", &pretty(facts))?;
    write("plan.json", &pretty(plan))?;
    let choices = files.iter().find(|(n, _)| n == "choices.txt").map(|(_, t)| t.as_str()).unwrap_or_default();
    write("choices.txt", choices)
}

fn pretty(v: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a record serialises");
    s.push('\n');
    s
}

/// A cluster's records found without its key (the API server does not answer to give it): the
/// state directory whose install or attempt recorded this context and server.
#[derive(Debug, Clone)]
pub struct Found {
    pub key: String,
    pub dir: std::path::PathBuf,
    pub records: Records,
    /// How it was matched, for the user: `context C and server S recorded in FILE`.
    pub by: String,
}

/// The records under `root` whose run recorded `context` and `server` (a record from before the
/// server was kept matches on its context alone, and says so); the latest run wins when several
/// do. Unreadable records are skipped: this is a fallback, and says what it matched.
pub fn find_by_target(root: &std::path::Path, context: &str, server: &str) -> Option<Found> {
    let mut best: Option<(String, Found)> = None;
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let key = entry.file_name().to_string_lossy().into_owned();
        let Ok(sd) = StateDir::new(root, &key) else { continue };
        let Ok(records) = Records::read(&sd) else { continue };
        let files = [
            (sd.state_file(), records.install.as_ref()),
            (sd.dir().join(ATTEMPT).join(super::journal::FILE), records.attempt.as_ref()),
        ];
        for (file, s) in files {
            let Some(s) = s else { continue };
            let by = match s.server.as_deref() {
                Some(sv) if s.context == context && sv == server => {
                    format!("context {context} and server {server} recorded in {}", file.display())
                }
                None if s.context == context => {
                    format!("context {context} recorded in {} (it records no server)", file.display())
                }
                _ => continue,
            };
            if best.as_ref().is_none_or(|(started, _)| s.started > *started) {
                let found = Found { key: key.clone(), dir: sd.dir().to_path_buf(), records: records.clone(), by };
                best = Some((s.started.clone(), found));
            }
        }
    }
    best.map(|(_, f)| f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(started: &str) -> State {
        State::sample(started)
    }

    #[test]
    fn an_install_keeps_its_facts_plan_and_choices_beside_its_state() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![("choices.txt".to_string(), "a -> b [s]\n".to_string()), ("x.yaml".into(), "k: v\n".into())];
        keep_inputs(
            dir.path(),
            &serde_json::json!({"schema": "eas-facts/v1"}),
            &serde_json::json!({"schema": "eas-plan/v1"}),
            &files,
        )
        .unwrap();
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert_eq!(read("choices.txt"), "a -> b [s]\n");
        assert!(read("facts.json").contains("eas-facts/v1") && read("plan.json").contains("eas-plan/v1"));
        assert!(!dir.path().join("x.yaml").exists(), "only the run's inputs, not every generated file");
    }

    #[test]
    fn without_the_key_the_record_is_found_by_its_context_and_server() {
        let root = tempfile::tempdir().unwrap();
        let save = |key: &str, context: &str, server: Option<&str>, started: &str, attempt: bool| {
            let sd = StateDir::new(root.path(), key).unwrap();
            let mut s = state(started);
            s.context = context.into();
            s.server = server.map(str::to_string);
            let file = if attempt {
                std::fs::create_dir_all(sd.dir().join(ATTEMPT)).unwrap();
                sd.dir().join(ATTEMPT).join("state.json")
            } else {
                s.begin(PhaseId::Install, None, "t");
                sd.state_file()
            };
            s.save(&file).unwrap();
        };
        save("uid-a", "k3d-gpu", Some("https://a:6443"), "2026-01-01T00:00:00Z", false);
        save("uid-b", "k3d-gpu", Some("https://b:6443"), "2026-01-02T00:00:00Z", true);
        save("uid-c", "other", Some("https://a:6443"), "2026-01-03T00:00:00Z", false);
        let f = find_by_target(root.path(), "k3d-gpu", "https://a:6443").expect("found");
        assert_eq!(f.key, "uid-a");
        assert!(f.records.install.is_some());
        assert!(f.by.contains("context k3d-gpu and server https://a:6443"), "{}", f.by);
        let f = find_by_target(root.path(), "k3d-gpu", "https://b:6443").expect("the attempt");
        assert_eq!((f.key.as_str(), f.records.install.is_none()), ("uid-b", true));
        assert!(
            find_by_target(root.path(), "k3d-gpu", "https://z:6443").is_none(),
            "another server is another cluster"
        );
        save("uid-d", "old", None, "2026-01-01T00:00:00Z", false);
        let f = find_by_target(root.path(), "old", "https://z:6443").expect("an old record matches on its context");
        assert!(f.by.contains("records no server"), "{}", f.by);
    }

    #[test]
    fn an_attempt_is_not_an_install_and_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let sd = StateDir::new(dir.path(), "k-1").unwrap();
        let mut attempt = state("2026-01-02T00:00:00Z");
        // A failure as the runner journals it: its error line, then the lines under it.
        let message = "the build failed\nnext: pass --ca-bundle FILE\n  | Step 6/14 : RUN pip install";
        attempt.finish(PhaseId::Bastion, Status::Failed, Some(message.into()), "t");
        attempt.exit_code = Some(1);
        std::fs::create_dir_all(sd.dir().join(ATTEMPT)).unwrap();
        attempt.save(&sd.dir().join(ATTEMPT).join("state.json")).unwrap();
        let r = Records::read(&sd).unwrap();
        assert!(r.install.is_none(), "an attempt alone installs nothing");
        let last = r.last_run().unwrap();
        assert_eq!((last.phase, last.exit_code, last.install), (PhaseId::Bastion, Some(1), false));
        assert_eq!(last.cause.as_deref(), Some("the build failed"));

        // An earlier install stays the install; the later attempt is the last run.
        let mut install = state("2026-01-01T00:00:00Z");
        install.begin(PhaseId::Install, None, "t");
        install.finish(PhaseId::Install, Status::Done, None, "t");
        install.exit_code = Some(0);
        install.save(&sd.state_file()).unwrap();
        let r = Records::read(&sd).unwrap();
        assert_eq!(r.install.as_ref().map(|s| s.started.as_str()), Some("2026-01-01T00:00:00Z"));
        assert_eq!(r.last_run().unwrap().phase, PhaseId::Bastion);

        // A record whose install never began is not an install either.
        let mut never = state("2026-01-03T00:00:00Z");
        never.finish(PhaseId::Facts, Status::Failed, None, "t");
        never.save(&sd.state_file()).unwrap();
        assert!(Records::read(&sd).unwrap().install.is_none());
    }
}
