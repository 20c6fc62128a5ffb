//! What a phase may write into the run's record: a narrow handle on the runner's journal
//! ([`Runner::journal`]), one method for each part a phase owns (preflight names the cluster,
//! facts its hash, config its choices and the installer's redacted command, the overlay its
//! decisions, the bastion its image, prepare and the attempt the log, install the pins it kept,
//! record how the run ended, lock and record the ledger). The runner's own fields (the phase
//! entries, the inputs' hashes, the file it is written to) are not reachable through it, so a
//! phase cannot begin, finish or save a phase's entry: the runner does.

use std::path::PathBuf;

use crate::state::journal::{KeptPins, State};
use crate::state::ledger::Ledger;

use super::Runner;
use crate::plan::Plan;

pub struct Journal<'r> {
    state: &'r mut State,
}

impl<'r> Journal<'r> {
    /// Preflight: the cluster this run is on (its key, context and API server).
    pub fn identified(&mut self, key: &str, context: &str, server: &str) {
        self.state.cluster_key = key.to_string();
        self.state.context = context.to_string();
        self.state.server = Some(server.to_string());
    }

    /// Facts: the hash of the facts the run decided from.
    pub fn facts_hashed(&mut self, hash: String) {
        self.state.facts_hash = Some(hash);
    }

    /// Config: its choices, and the installer's command as recorded (redacted).
    pub fn decided(&mut self, choices: Vec<String>, installer_command: Vec<String>) {
        self.state.decisions = choices;
        self.state.installer_command = installer_command;
    }

    /// The overlay: its decisions.
    pub fn overlaid(&mut self, decisions: Vec<String>) {
        self.state.overlay = decisions;
    }

    /// The bastion: the image the run uses.
    pub fn image(&mut self, image: String) {
        self.state.bastion_image = Some(image);
    }

    /// The selection the run resolved, filled from the last install's where it left one unset.
    pub fn selected(&mut self, selection: crate::state::selection::Selection) {
        self.state.selection = Some(selection);
    }

    /// Preflight, when the last install filled the selection: the layer, env and pins the run
    /// now installs (the cluster it named stays).
    pub fn reselected(&mut self, info: &crate::state::journal::RunInfo) {
        (self.state.layer, self.state.env, self.state.pins) = (info.layer.clone(), info.env.clone(), info.pins.clone());
    }

    /// The attempt's and then the install's log.
    pub fn logged_to(&mut self, log: PathBuf) {
        self.state.log_path = Some(log);
    }

    /// Install: the pins the run read and built from, kept beside the record.
    pub fn pins_kept(&mut self, kept: KeptPins) {
        self.state.pins_kept = Some(kept);
    }

    /// Record: how the run ended (its exit code; an interruption marks the running phase).
    pub fn ended(&mut self, exit_code: u8, interrupted: bool, now: &str) {
        self.state.exit_code = Some(exit_code);
        if interrupted {
            self.state.interrupt(now);
        }
        self.state.finished = Some(now.to_string());
    }

    /// Resume: the entries of the phases skipped because an earlier run finished them.
    pub fn carry_over(&mut self, prev: &State, kept: &[crate::plan::PhaseId]) {
        self.state.carry_over(prev, kept);
    }

    /// The ledger of what runs created: lock starts it from the last record and adds the Lease,
    /// prepare's `before` begins it, record completes or fails it.
    pub fn ledger(&mut self) -> &mut Ledger {
        &mut self.state.ledger
    }

    /// The ledger replaced by what `next` makes of it (completed, failed).
    pub fn ledger_with(&mut self, next: impl FnOnce(&Ledger) -> Ledger) {
        self.state.ledger = next(&self.state.ledger);
    }
}

impl Runner {
    /// The narrow handle on the run's record a phase writes through.
    pub fn journal(&mut self) -> Journal<'_> {
        Journal { state: &mut self.state }
    }

    /// The run's record as it stands, to read.
    pub fn journaled(&self) -> &State {
        &self.state
    }

    /// The plan as it stands, to read.
    pub fn plan_doc(&self) -> &Plan {
        &self.plan
    }

    /// The plan, once the run is done with it (a dry run's, to print and write).
    pub fn into_plan(self) -> Plan {
        self.plan
    }

    /// The whole record, for a test to set up what an earlier step would have written.
    #[cfg(test)]
    pub(crate) fn state_for_test(&mut self) -> &mut State {
        &mut self.state
    }
}
