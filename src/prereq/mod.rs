//! The cluster's prerequisites for the install (issue 21), decided from the facts alone: a
//! default StorageClass, a landing node that is Ready, schedulable, not under pressure and has
//! room for the weights, the access the installer needs, and what an earlier install left.
//! Pure: facts (and the figures other deciders own) in, one [`Check`] per gate out, each with its
//! blockers (refusals, exit 3) and warnings. The plan, `eas doctor` and the real run all read the
//! same [`Report`]; the data the checks match against is `data/prereq.json`.

mod checks;
pub mod egress;
mod report;

pub use report::*;

use crate::facts::Facts;

/// Runs every check on the facts. Pure.
pub fn check(facts: &Facts, inputs: &Inputs) -> Report {
    let d = data();
    let landing = checks::landing(facts);
    Report {
        checks: vec![
            checks::storage_class(facts, d),
            checks::landing_node(facts, &landing),
            checks::other_nodes(facts, &landing),
            checks::access(facts, d),
            checks::ephemeral_storage(&landing, inputs, d),
            checks::earlier_install(facts, &inputs.recorded, d),
            checks::device_plugins(facts),
        ],
    }
}

/// The lines `eas doctor` prints for the cluster's prerequisites: one per check.
#[cfg(test)]
pub fn doctor_lines(facts: &Facts, inputs: &Inputs) -> Vec<(bool, &'static str, String)> {
    check(facts, inputs).lines()
}

#[cfg(test)]
mod tests;
