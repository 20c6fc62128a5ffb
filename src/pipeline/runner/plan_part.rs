//! What a phase may write into the plan: a narrow handle ([`Runner::plan_part`]) keyed by the
//! phase, one method for each part a phase owns (its decisions, warnings and blockers, what it
//! could not find out; the bastion its image, facts their summary, the trees their commits,
//! config the model it picked and the install's command, the overlay its rows, classify its
//! comparison and `init`); and the run's own part ([`Runner::plan_run`]: its selection,
//! settings, the command that applies the plan, what the plan wrote, the saved plan's
//! refusals, the exit code). Each field of the plan has one writer (`crate::plan::doc`); a part
//! several phases write is kept in phase order by the key, whatever order the phases run in.

use std::collections::BTreeMap;

use crate::plan::{
    Blocker, FactsSummary, ImagePlan, Met, Missing, PhaseId, Picked, Plan, PlanDecision, PlanPatch, Runs, Selected,
};
use crate::since_last::{RunKind, SinceLast};

use super::Runner;

/// A phase's part of the plan.
pub struct PlanPart<'r> {
    plan: &'r mut Plan,
    phase: PhaseId,
}

impl PlanPart<'_> {
    pub fn decisions(&mut self, decisions: impl IntoIterator<Item = PlanDecision>) {
        self.plan.add_decisions(self.phase, decisions);
    }

    pub fn warnings(&mut self, warnings: impl IntoIterator<Item = String>) {
        self.plan.add_warnings(self.phase, warnings);
    }

    /// What the phase could not find out.
    pub fn unknown(&mut self, reason: String) {
        self.plan.add_unknown(Missing { phase: self.phase, reason });
    }

    /// Why the overlay was not decided, as this phase saw it.
    pub fn not_decided(&mut self, why: &str) {
        self.plan.not_decided_by(self.phase, why);
    }

    /// Checks that failed, each listed under the phase it names.
    pub fn blockers(&mut self, blockers: impl IntoIterator<Item = Blocker>) {
        self.plan.add_blockers(Met::InPhase, blockers);
    }

    /// The bastion: the image built or reused.
    pub fn image(&mut self, image: ImagePlan) {
        self.plan.set_image(image);
    }

    /// Facts: their summary.
    pub fn facts(&mut self, facts: FactsSummary) {
        self.plan.set_facts(facts);
    }

    /// The trees: the commit each resolved to.
    pub fn trees(&mut self, trees: BTreeMap<String, String>) {
        self.plan.set_trees(trees);
    }

    /// Config: the model it picked and the fit verdict.
    pub fn picked(&mut self, picked: Picked) {
        self.plan.picked(picked);
    }

    /// The overlay: its rows.
    pub fn overlay(&mut self, rows: Vec<PlanPatch>) {
        self.plan.set_overlay(rows);
    }

    /// An installer command line (config: the install; classify: `init` and the undeploy).
    pub fn command(&mut self, runs: Runs, argv: Vec<String>) {
        self.plan.add_command(runs, argv);
    }

    /// Classify: the run against the last completed one.
    pub fn compared(&mut self, kind: RunKind, since: Option<SinceLast>) {
        self.plan.compared(kind, since);
    }
}

/// The run's own part of the plan (the list of phases writes it, no phase).
pub struct RunPlan<'r> {
    plan: &'r mut Plan,
}

impl RunPlan<'_> {
    /// The selection: before the cluster is read, and again once the last install filled it.
    pub fn select(&mut self, selected: Selected) {
        self.plan.select(selected);
    }

    pub fn settings(&mut self, settings: Vec<crate::settings::source::Setting>) {
        self.plan.set_settings(settings);
    }

    pub fn apply_command(&mut self, command: Option<String>) {
        self.plan.set_apply_command(command);
    }

    /// What making the plan wrote to the cluster and removed again.
    pub fn wrote(&mut self, wrote: Vec<String>) {
        self.plan.set_wrote(wrote);
    }

    /// `--plan DIR`: each difference from the saved plan, ahead of every other blocker.
    pub fn saved_plan_differs(&mut self, refusals: Vec<Blocker>) {
        self.plan.add_blockers(Met::SavedPlan, refusals);
    }

    /// The exit code the run ends with on its blockers.
    pub fn exited(&mut self, code: u8) {
        self.plan.exited(code);
    }
}

impl Runner {
    /// The narrow handle on the plan `phase` writes its part through.
    pub fn plan_part(&mut self, phase: PhaseId) -> PlanPart<'_> {
        PlanPart { plan: &mut self.plan, phase }
    }

    /// The handle on the run's own part of the plan.
    pub fn plan_run(&mut self) -> RunPlan<'_> {
        RunPlan { plan: &mut self.plan }
    }
}
