//! The phases of `eas up`, one type each behind [`crate::pipeline::runner::Phase`], in the order of
//! `pipeline::PHASES`: lock, preflight, bastion, facts, trees, config, overlay, classify, prepare,
//! install, record, verify, unlock. `super` runs them as its list; what their plan halves settled is gathered in
//! [`planned::Planned`], and, once no plan half blocked, turned into what the acts consume
//! ([`planned::Ready`]). This file holds what the phases share; it names none of them, so no
//! phase's file imports a file that imports it.

pub mod bastion;
pub mod classify;
pub mod config;
pub mod facts;
pub mod install;
pub mod lock;
pub mod overlay;
pub mod planned;
pub mod preflight;
pub mod record;
pub mod trees;
pub mod unlock;
pub mod verify;

use std::collections::BTreeMap;

use crate::error::Failure;
use crate::plan::PhaseId;
use crate::state::journal::State;
use crate::state::ledger::Ledger;

use crate::pipeline::runner::Runner;

/// A plan's answer that is missing although no blocker said why: a fault of eas's.
pub fn missing(what: &str) -> Failure {
    Failure::step(crate::plan::Step::Plan, format!("no blocker was found, yet {what} was not planned"))
}

/// Replaces the run's ledger with `l`, keeping what this run recorded of its own objects.
pub fn keep_own(r: &mut Runner, l: Ledger) {
    // The probe pods the plan's facts were read with (`--probe-nodes`), made and deleted by
    // this run: recorded as its own, never as something `eas down` would look for.
    for (name, uid, node) in crate::gather::probe::take_created() {
        r.journal().ledger().own.push(crate::state::ledger::Own {
            kind: "Pod".into(),
            namespace: crate::gather::probe::NAMESPACE.into(),
            name,
            uid,
            holder: format!("probe of node {node}, deleted once read"),
        });
    }
    let mut journal = r.journal();
    let own = std::mem::take(&mut journal.ledger().own);
    *journal.ledger() = l.with_own(own);
}

/// The inputs of each lasting phase, hashed: a later run skips the phase when they match.
pub fn inputs_hashes(
    state: &State,
    files: &[(String, String)],
    install: &[String],
    image: &str,
) -> BTreeMap<PhaseId, String> {
    use crate::state::inputs_hash;
    let shas: Vec<String> = state.pins.shas.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let trees = inputs_hash(&shas);
    let overlay = inputs_hash(&[trees.clone(), inputs_hash(&state.overlay)]);
    let texts: Vec<String> = files.iter().map(|(n, t)| format!("{n}\n{t}")).collect();
    let prepare = inputs_hash(&[overlay.clone(), inputs_hash(&texts), state.env.clone(), state.layer.clone()]);
    let mut inst = vec![prepare.clone(), image.to_string()];
    inst.extend(install.iter().cloned());
    [
        (PhaseId::Trees, trees),
        (PhaseId::Overlay, overlay),
        (PhaseId::Prepare, prepare),
        (PhaseId::Install, inputs_hash(&inst)),
    ]
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each lasting phase's inputs hash covers the ones before it: a change to a generated file
    /// reruns prepare and install, a new bastion image only install, and the same inputs hash
    /// the same (a later run resumes past them).
    #[test]
    fn each_phases_inputs_cover_the_phases_before_it() {
        let state = State::sample("2026-01-01T00:00:00Z");
        let files = vec![("inference-config.cfg".to_string(), "a=1\n".to_string())];
        let argv = vec!["install".to_string()];
        let base = inputs_hashes(&state, &files, &argv, "eas-bastion:1");
        assert_eq!(base, inputs_hashes(&state, &files, &argv, "eas-bastion:1"));
        let edited = vec![("inference-config.cfg".to_string(), "a=2\n".to_string())];
        let file = inputs_hashes(&state, &edited, &argv, "eas-bastion:1");
        let image = inputs_hashes(&state, &files, &argv, "eas-bastion:2");
        let changed = |other: &BTreeMap<PhaseId, String>| -> Vec<PhaseId> {
            base.keys().filter(|k| base[*k] != other[*k]).copied().collect()
        };
        assert_eq!(changed(&file), [PhaseId::Prepare, PhaseId::Install]);
        assert_eq!(changed(&image), [PhaseId::Install]);
    }
}
