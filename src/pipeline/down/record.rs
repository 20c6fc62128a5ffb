//! record: what `down` found, written into the record or the record removed. After a guarded
//! teardown: what is left and why; the record goes when nothing was lost or left, else it is kept
//! with what was found, and `down` exits 1 (every later `down` repeats it until
//! `--acknowledge`). After `--force-incomplete`'s teardown: eas deleted nothing itself, and what
//! may be left is kept in the record. An incomplete record already torn down, once
//! `--acknowledge`d: dropped.

use crate::error::Failure;
use crate::plan::{DownId, Step};
use crate::state::StateDir;
use crate::state::journal::State;
use crate::state::ledger::{Finding, FindingKind, TeardownPlan};

use crate::pipeline::down::cx::{Cx, Down, Loaded, SNAPSHOT_DEADLINE, snapshot};
use crate::pipeline::down::delete::Deleted;
use crate::pipeline::down::find::Recorded;
use crate::pipeline::down::removal::{How, Removal};
use crate::pipeline::down::settle::Settled;
use crate::pipeline::down::teardown::Torn;
use crate::pipeline::runner::{Phase, Runner};
use crate::state::run::now;

const ACK_NEXT: &str = "deal with what is named above, then run `eas down --yes --acknowledge`";

pub enum Record<'a> {
    /// After a guarded teardown, the deletions and the wait.
    Report {
        sd: &'a StateDir,
        /// `LAYER removed from CONTEXT`, when nothing is left.
        removed: String,
        plan: &'a TeardownPlan,
        settled: &'a Settled,
        teardown_ok: bool,
        failures: &'a [String],
        earlier: Vec<Finding>,
    },
    /// After `--force-incomplete`'s teardown with every guard's `--skip`.
    Forced { teardown_ok: bool, reason: &'a str },
    /// An incomplete record whose teardown with every guard already ran, once `--acknowledge`d.
    Drop { sd: &'a StateDir },
}

/// What the phases before the record phase handed on (none for a phase that did not run).
pub struct Ran<'a> {
    pub torn: Option<&'a Torn>,
    pub deleted: Option<&'a Deleted>,
    pub settled: Option<&'a Settled>,
}

impl<'a> Record<'a> {
    /// The record phase for the removal that ran: an acknowledged incomplete record's drop, the
    /// forced teardown's record, or the guarded teardown's report.
    pub fn of(found: &'a Recorded, removal: &'a Removal, ran: Ran<'a>) -> Result<Record<'a>, Failure> {
        let ran_not = |what: &str| Failure::step(DownId::Record, format!("{what} did not run"));
        let torn = ran.torn.ok_or_else(|| ran_not("the teardown"));
        Ok(match &removal.how {
            How::Drop => Record::Drop { sd: &found.sd },
            How::Forced(reason) => Record::Forced { teardown_ok: torn?.ok, reason },
            How::Guarded => {
                let torn = torn?;
                Record::Report {
                    sd: &found.sd,
                    removed: format!("{} removed from {}", removal.layer, found.context),
                    plan: torn.plan.as_ref().ok_or_else(|| ran_not("the guarded teardown"))?,
                    settled: ran.settled.ok_or_else(|| ran_not("the settle phase"))?,
                    teardown_ok: torn.ok,
                    failures: &ran.deleted.ok_or_else(|| ran_not("the delete phase"))?.failures,
                    earlier: removal.earlier.clone(),
                }
            }
        })
    }
}

impl Phase<Down> for Record<'_> {
    const ID: DownId = DownId::Record;
    type Planned = ();
    type Done = ();

    async fn act(&mut self, (): (), cx: &Cx<'_>, r: &mut Runner<Down>) -> Result<(), Failure> {
        let loaded = r.record_mut().as_mut().ok_or_else(|| Failure::step(DownId::Record, "no record was loaded"))?;
        match self {
            Record::Drop { sd } => {
                std::fs::remove_file(sd.state_file()).map_err(|e| Failure::step(Step::DownRun, e))?;
                crate::state::since::Completed::forget(sd.dir()).map_err(|e| Failure::step(Step::DownRun, e))?;
                cx.shell.phase("down", "the incomplete record is dropped");
                Ok(())
            }
            Record::Forced { teardown_ok, reason } => {
                let current = snapshot(cx.cluster()?, cx.interrupt, SNAPSHOT_DEADLINE).await?;
                let found = may_be_left(&loaded.state, &current, reason, &now());
                for f in &found {
                    cx.shell.warn(f.to_string());
                }
                keep(loaded, found)?;
                let what = if *teardown_ok {
                    "the teardown ran with every guard"
                } else {
                    "the teardown with every guard failed"
                };
                Err(Failure::step_next(Step::DownRun, format!("{what}; the record is kept"), ACK_NEXT))
            }
            Record::Report { sd, removed, plan, settled, teardown_ok, failures, earlier } => {
                let after = &settled.after;
                for line in plan.report(after) {
                    cx.shell.note(format!("  {}", settled.explain(&line)));
                }
                let earlier = if cx.args.acknowledge { Vec::new() } else { std::mem::take(earlier) };
                let findings = findings(plan, settled, earlier, &now());
                if *teardown_ok && failures.is_empty() && findings.is_empty() {
                    // Done: the record goes, so a second `eas down` has nothing to do; so does an
                    // attempt made since the install, which would otherwise read as the cluster's
                    // last run, and the completed run the next `eas up` would compare with.
                    std::fs::remove_file(sd.state_file()).map_err(|e| Failure::step(Step::DownRun, e))?;
                    clear_attempt(sd)?;
                    crate::state::since::Completed::forget(sd.dir()).map_err(|e| Failure::step(Step::DownRun, e))?;
                    cx.shell.phase("down", removed.as_str());
                    return Ok(());
                }
                for f in failures.iter() {
                    cx.shell.warn(f);
                }
                let (cause, next) = if findings.is_empty() {
                    (
                        "teardown did not complete; the record is kept",
                        "read the log and the lines above, then run `eas down --yes` again",
                    )
                } else {
                    ("objects were lost or left (named above); the record is kept", ACK_NEXT)
                };
                keep(loaded, findings)?;
                Err(Failure::step_next(Step::DownRun, cause, next))
            }
        }
    }
}

/// The record kept, with what was found: every later `down` repeats it until `--acknowledge`.
fn keep(loaded: &mut Loaded, findings: Vec<Finding>) -> Result<(), Failure> {
    loaded.state.ledger.findings = findings;
    loaded.state.down = None;
    loaded.state.finished = Some(now());
    Ok(loaded.state.save(&loaded.file)?)
}

/// What a guarded `down` found: the earlier findings still standing, then what was lost or left
/// (a namespace left with why it stays, when the settle phase read it).
fn findings(plan: &TeardownPlan, settled: &Settled, earlier: Vec<Finding>, at: &str) -> Vec<Finding> {
    let mut found = plan.findings(&settled.after, at);
    for f in found.iter_mut().filter(|f| f.kind == FindingKind::Left) {
        if let Some(w) = settled.why.get(&f.object) {
            f.note = format!("created by eas up, {w}");
        }
    }
    let mut findings = earlier;
    findings.extend(found);
    findings
}

/// After `--force-incomplete`: each object the record says the run created and the cluster still
/// has may be left, and so may anything the run created after its last record.
fn may_be_left(state: &State, current: &crate::state::ledger::Snapshot, reason: &str, at: &str) -> Vec<Finding> {
    let mut found: Vec<Finding> = state
        .ledger
        .created
        .intersect(current)
        .objects()
        .into_iter()
        .map(|o| Finding {
            kind: FindingKind::MayBeLeft,
            object: o.to_string(),
            note: "created by eas up; the teardown ran with every guard and eas deleted nothing itself".into(),
            found: at.to_string(),
        })
        .collect();
    found.push(Finding {
        kind: FindingKind::MayBeLeft,
        object: "anything the run created after its last record".into(),
        note: reason.to_string(),
        found: at.to_string(),
    });
    found
}

/// Removes the latest attempt's record (`attempt/`), when there is one.
pub fn clear_attempt(sd: &StateDir) -> Result<(), Failure> {
    let attempt = sd.dir().join(crate::pipeline::settings::ATTEMPT);
    if attempt.exists() {
        std::fs::remove_dir_all(&attempt)
            .map_err(|e| Failure::step(Step::DownRun, format!("{}: {e}", attempt.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::down::plan::tests::snapshot;
    use crate::state::ledger::{Ledger, Snapshot};

    /// A namespace the run created and the cluster still has is left, with why it stays when the
    /// settle phase read it; an earlier finding still standing comes first.
    #[test]
    fn what_is_left_is_found_with_why_and_earlier_findings_stand() {
        let ledger = Ledger::begin(None, &snapshot(&["default"])).complete(&snapshot(&["default", "kserve"]));
        let plan = crate::state::ledger::guard_teardown(&ledger, &snapshot(&["default", "kserve"]));
        let why = [("namespace kserve".to_string(), "still Terminating".to_string())];
        let settled = Settled { after: snapshot(&["default", "kserve"]), why: why.into_iter().collect() };
        let earlier = may_be_left(&State::sample("t0"), &Snapshot::default(), "an earlier reason", "t0");
        let found = findings(&plan, &settled, earlier, "t1");
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].note, "an earlier reason");
        assert_eq!((found[1].kind, found[1].object.as_str()), (FindingKind::Left, "namespace kserve"));
        assert_eq!(found[1].note, "created by eas up, still Terminating");
        let gone = Settled { after: snapshot(&["default"]), why: Default::default() };
        assert!(findings(&plan, &gone, Vec::new(), "t1").is_empty(), "nothing left, nothing found");
    }

    /// After `--force-incomplete`: what the record says was created and is still there may be
    /// left, and so may what the run created after its last record (the reason the record is
    /// incomplete).
    #[test]
    fn a_forced_teardown_keeps_what_may_be_left() {
        let mut state = State::sample("t0");
        state.ledger = Ledger::begin(None, &snapshot(&["default"])).complete(&snapshot(&["default", "kserve", "gone"]));
        let found = may_be_left(&state, &snapshot(&["default", "kserve"]), "the API server did not answer", "t1");
        let objects: Vec<&str> = found.iter().map(|f| f.object.as_str()).collect();
        assert_eq!(objects, ["namespace kserve", "anything the run created after its last record"]);
        assert!(found.iter().all(|f| f.kind == FindingKind::MayBeLeft && f.found == "t1"));
        assert_eq!(found[1].note, "the API server did not answer");
    }

    /// The record kept says what was found and clears how an earlier `down` ended.
    #[test]
    fn a_kept_record_is_saved_with_its_findings() {
        let (_dir, file) = crate::testing::temp_path("state.json");
        let mut loaded = Loaded { state: State::sample("t0"), file: file.clone(), started: "t0".into() };
        loaded.state.down = Some(crate::state::journal::DownEntry {
            status: crate::state::journal::Status::Interrupted,
            started: "t0".into(),
            finished: "t0".into(),
            message: "interrupted".into(),
        });
        let found = may_be_left(&loaded.state, &Snapshot::default(), "why", "t1");
        keep(&mut loaded, found).unwrap();
        let saved = State::load(&file).unwrap().unwrap();
        assert_eq!(saved.ledger.findings.len(), 1);
        assert!(saved.down.is_none() && saved.finished.is_some());
    }
}
