//! Classify: this run against the last completed one. The plan half, after every other plan
//! half (it compares what they settled), counts the commits each moved pin advanced and reads
//! how the catalog changed, then writes the plan's `run_kind` and `since_last` (a layer other than
//! the installed one is a blocker: `day_two::classify`). The act half, once the bastion image and
//! the configuration are settled, hashes each lasting phase's inputs and decides what resuming
//! skips: when an earlier run installed with the same inputs, the phases that resume when
//! unchanged do not run again (their `should_run`), and the run goes on to record and verify.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Failure;
use crate::facts::Facts;
use crate::plan::PhaseId;
use crate::state::StateDir;
use crate::state::journal::State;
use crate::state::since::Completed;

use crate::pipeline::day_two::{self, Before, Classified, Resume};
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::phases::planned::Planned;
use crate::pipeline::phases::trees::Resolved;
use crate::pipeline::runner::{Phase, Runner};
use crate::pipeline::settings::UpSettings;
use crate::plan::PlanDecision;

/// What the plan half compares: the install record and the last completed run (the lock's plan
/// read them), and what the other plan halves settled.
pub struct Compare<'a> {
    pub args: &'a UpSettings,
    /// Where the global settings came from (the CA bundle's, for "since the last up").
    pub global: &'a crate::settings::Global,
    /// The kept work tree, whose seeded catalog an EI pin move is compared with.
    pub work: &'a Path,
    pub latest: Option<&'a State>,
    pub last: Option<&'a Completed>,
    pub facts: &'a Facts,
    pub files: &'a [(String, String)],
    pub trees: Option<&'a Resolved>,
    /// Config's `init` (none: config decided nothing); whether it upgrades is decided here.
    pub init: Option<&'a [String]>,
    /// The model config picked (none: none, or config decided nothing), which a model the last
    /// run deployed is compared with.
    pub pick: Option<String>,
    /// What the plan halves before it made (config's and the overlay's lines, the overlay's
    /// rows, the image), as the plan lists them.
    pub made: day_two::Made<'a>,
    /// What the plan half read from git, for its note.
    pub read: Read,
}

impl<'a> Compare<'a> {
    /// What the plan halves settled, as the plan lists it: the install record and the last
    /// completed run the lock read, the facts, config's files, `init` and model pick, the trees,
    /// the overlay's rows and the image's tag; `decisions`, config's and the overlay's lines.
    pub fn new(cx: &Cx<'a>, planned: &'a Planned, work: &'a Path, decisions: &'a [PlanDecision]) -> Compare<'a> {
        let records = planned.records.as_ref();
        let decided = planned.decided.as_ref();
        let overlay = planned.overlay.as_ref().map(|o| o.rows.as_slice()).unwrap_or_default();
        let image = planned.image.as_ref().map(|i| i.plan.tag.as_str());
        Compare {
            args: cx.args,
            global: cx.global,
            work,
            latest: records.and_then(|x| x.latest.as_ref()),
            last: records.and_then(|x| x.last.as_ref()),
            facts: &planned.facts,
            files: planned.files(),
            trees: planned.trees.as_ref().map(|t| &t.resolved),
            init: decided.map(|d| d.init.as_slice()),
            pick: decided.and_then(|d| crate::plan::data::model_pick(&d.decision)).and_then(|m| m.name),
            made: day_two::Made { decisions, overlay, image },
            read: Read::default(),
        }
    }
}

/// What the act half hashes and resumes from: the record re-read under the lock, and what the
/// acts before it produced.
pub struct Inputs<'a> {
    pub sd: &'a StateDir,
    pub prev: Option<&'a State>,
    pub last: Option<&'a Completed>,
    pub files: &'a [(String, String)],
    pub install: &'a [String],
    pub image: &'a str,
}

/// The plan half reads `Compare`, the act half `Inputs`: the list builds the one it runs.
pub enum Classify<'a> {
    Plan(Compare<'a>),
    Act(Inputs<'a>),
}

/// What the plan half read from git: the commits each moved pin advanced, the catalog's changes.
#[derive(Default)]
pub struct Read {
    commits: BTreeMap<String, u32>,
    catalog: Vec<String>,
}

impl Phase for Classify<'_> {
    const ID: PhaseId = PhaseId::Classify;
    /// The installer's commands as classified: the act half hands them on.
    type Planned = Classified;
    type Done = (Resume, Classified);

    async fn plan(&mut self, cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Classified, NoPlan> {
        let Classify::Plan(c) = self else { return Err(NoPlan::Upstream) };
        let (env, layer) = (&cx.args.env, &cx.args.select.layer);
        c.read.commits = day_two::commit_counts(c.last, c.trees).await;
        c.read.catalog = day_two::catalog_changes(c.last, c.trees, c.work, env, layer).await;
        Ok(Classified::default())
    }

    /// Against the last completed run: `run_kind` and `since_last`, whether `init` upgrades, and
    /// the undeploy of a model the last run deployed and this one does not pick, written into
    /// the plan from the values the acts are handed.
    fn note(&mut self, classified: &mut Classified, r: &mut Runner) -> Result<(), Failure> {
        let Classify::Plan(c) = self else { return Ok(()) };
        let before = Before { latest: c.latest, last: c.last, work: c.work, made: c.made };
        let (commits, catalog) = (&c.read.commits, &c.read.catalog);
        *classified = day_two::classify(
            (c.args, c.global),
            before,
            (c.init, c.pick.as_deref()),
            c.facts,
            c.files,
            commits,
            catalog,
            r,
        )?;
        Ok(())
    }

    async fn act(
        &mut self,
        classified: Classified,
        cx: &Cx<'_>,
        r: &mut Runner,
    ) -> Result<(Resume, Classified), Failure> {
        let Classify::Act(i) = self else { return Err(crate::pipeline::phases::missing("classify's inputs")) };
        let work = i.sd.work_dir().join("eas");
        r.hashed(crate::pipeline::phases::inputs_hashes(r.journaled(), i.files, i.install, i.image));
        let resume = day_two::resume(cx.args, classified.kind, i.prev, &work, r);
        if resume.installed {
            if resume.up_to_date {
                day_two::up_to_date_note(i.last, cx.shell);
            } else {
                cx.shell.phase("resume", "install finished earlier with the same inputs: going on to verify");
            }
            r.record_in(i.sd.state_file());
        }
        r.resume_installed(resume.installed);
        Ok((resume, classified))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::{Fixture, runner};
    use crate::plan::PhaseTimeouts;
    use crate::state::resume::RunKind;

    fn desktop() -> Facts {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
        Facts::read(&path).unwrap()
    }

    /// The plan half's note is the run's kind: a first install without a record, a resumption
    /// with the record of a run that did not complete; neither is a blocker.
    #[tokio::test]
    async fn the_plan_half_writes_the_run_kind_against_the_record() {
        let (f, facts, work) = (Fixture::new(), desktop(), tempfile::tempdir().unwrap());
        let mut failed = State::sample("2026-01-01T00:00:00Z");
        failed.layer = f.args.select.layer.to_string();
        for (latest, kind) in [(None, RunKind::Install), (Some(&failed), RunKind::Resume)] {
            let mut r = runner(PhaseTimeouts::default());
            let compare = Compare {
                args: &f.args,
                global: &f.global,
                work: work.path(),
                latest,
                last: None,
                facts: &facts,
                files: &[],
                trees: None,
                init: None,
                pick: None,
                made: Default::default(),
                read: Read::default(),
            };
            r.plan(&mut Classify::Plan(compare), &f.cx()).await.unwrap();
            assert_eq!(*r.plan_doc().run_kind(), Some(kind));
            assert!(r.plan_doc().blockers().is_empty(), "{:?}", r.plan_doc().blockers());
            assert_eq!(r.journaled().entry(PhaseId::Classify).status, crate::state::journal::Status::Done);
        }
    }

    /// The act half decides what resuming skips: an up-to-date run whose env is in the work tree
    /// skips the phases that resume when unchanged and records into `state.json`; one without
    /// the env runs them.
    #[tokio::test]
    async fn the_act_half_skips_the_install_only_when_an_earlier_one_is_in_the_work_tree() {
        let f = Fixture::new();
        let root = tempfile::tempdir().unwrap();
        let sd = StateDir::new(root.path(), "k").unwrap();
        let prev = State::sample("2026-01-01T00:00:00Z");
        for with_env in [false, true] {
            if with_env {
                std::fs::create_dir_all(sd.work_dir().join("eas").join("env").join(&f.args.env)).unwrap();
            }
            let mut r = runner(PhaseTimeouts::default());
            let classified = Classified { kind: Some(RunKind::UpToDate), ..Classified::default() };
            let inputs = Inputs { sd: &sd, prev: Some(&prev), last: None, files: &[], install: &[], image: "img" };
            let (resume, _) = r.act_phase(Classify::Act(inputs), classified, &f.cx()).await.unwrap();
            assert_eq!(*r.plan_doc().run_kind(), None, "resume reads the kind handed to it, not the plan");
            assert_eq!((resume.installed, resume.up_to_date), (with_env, with_env));
            assert_eq!(r.installed_earlier(), with_env);
            assert_eq!(r.inputs().len(), 4, "the lasting phases' inputs are hashed: {:?}", r.inputs());
        }
    }
}
