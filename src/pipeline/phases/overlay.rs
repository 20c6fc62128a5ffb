//! Overlay: the plan half decides each k3s/k3d patch once, on the one EAS tree the run would
//! install from, then audits the knobs (each key written must be read at the pinned commits, or
//! by a patch). A STOP or an audit refusal is a blocker; after a STOP the other pins profiles
//! whose overlay decides fully are named with their command. The act half applies the patches to
//! the tree put in place.

use crate::config;
use crate::error::Failure;
use crate::facts::Facts;
use crate::plan::{PhaseId, PlanDecision, PlanPatch};

use crate::gather::knob_audit;
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::phases::trees::{Resolved, Scratch};
use crate::pipeline::runner::{Phase, Runner};
use crate::state::resume::Invocation;
use std::path::Path;

pub struct Overlay<'a> {
    pub decision: &'a config::Decision,
    pub facts: &'a Facts,
    /// The trees' plan: the scratch tree the overlay is decided on (`None` at act time: the
    /// trees' act has put it in place).
    pub scratch: Option<&'a Scratch>,
    /// Where the trees' act puts the tree the patches are applied to.
    pub work: std::path::PathBuf,
}

/// The overlay decided on the scratch tree, and the knob audit's lines and warnings; the
/// overlay's part of the plan made from them once (its rows and decision lines), which the plan
/// is written from and classify compares with the last completed run.
pub struct Decided {
    pub op: crate::overlay::Plan,
    audit: Option<crate::knobs::Audit>,
    /// The plan's overlay rows.
    pub rows: Vec<PlanPatch>,
    /// The knob audit's lines, as the plan's decisions.
    pub lines: Vec<PlanDecision>,
}

/// The knob audit's lines as the plan's decisions.
fn audit_lines(audit: &crate::knobs::Audit) -> Vec<PlanDecision> {
    let source = "knob audit: git grep at the pinned commits";
    audit
        .lines
        .iter()
        .map(|l| {
            let (fact, choice) = l.split_once(" -> ").unwrap_or((l.as_str(), ""));
            PlanDecision {
                fact: format!("knob {fact}"),
                choice: choice.to_string(),
                source: source.to_string(),
                permalink: source.to_string(),
            }
        })
        .collect()
}

impl Phase for Overlay<'_> {
    const ID: PhaseId = PhaseId::Overlay;
    type Planned = Decided;
    type Done = ();

    async fn plan(&mut self, cx: &Cx<'_>, found: &mut Vec<Failure>) -> Result<Decided, NoPlan> {
        let Some(scratch) = self.scratch else { return Err(NoPlan::Upstream) };
        let generated = crate::overlay::Generated::from_decision(
            self.decision,
            self.facts,
            &crate::overlay::Overlay::builtin().map_err(Failure::from)?,
        );
        let (dir, pins, t) = (scratch.tree(), cx.tree_pins.clone(), scratch.resolved.clone());
        let (all, inv, dry_run) = (cx.services.pins.clone(), cx.inv.clone(), cx.args.dry_run);
        let job = tokio::task::spawn_blocking(move || {
            let op = crate::overlay::decide(&dir, &t.eas.sha, Some(&generated))?;
            // After a STOP: the other pins profiles whose overlay decides fully here.
            let forward = if op.stops().count() > 0 {
                way_forward(&all, &pins.profile, &t.eas.objects, &generated, &inv, dry_run)
            } else {
                Vec::new()
            };
            Ok::<_, Failure>((op, forward))
        });
        let decided = job.await.map_err(|e| Failure::step(PhaseId::Overlay, e))?;
        let (op, way_forward) = decided?;
        if op.stops().count() > 0 {
            let mut lines = op.stop_lines();
            lines.extend(way_forward);
            found.push(Failure::OverlayStop(lines));
        }
        let audit = match audit(cx, &scratch.resolved, self.decision, &op) {
            Ok(a) => {
                for w in &a.warnings {
                    cx.shell.warn(w);
                }
                if !a.refusals.is_empty() {
                    found.push(Failure::Refused(a.refusals.clone()));
                }
                Some(a)
            }
            Err(f) => {
                found.push(f);
                None
            }
        };
        let rows = crate::plan::data::patches(&op);
        let lines = audit.as_ref().map(audit_lines).unwrap_or_default();
        Ok(Decided { op, audit, rows, lines })
    }

    fn note(&mut self, d: &mut Decided, r: &mut Runner) -> Result<(), Failure> {
        let mut part = r.plan_part(PhaseId::Overlay);
        part.overlay(d.rows.clone());
        part.decisions(d.lines.iter().cloned());
        if let Some(audit) = &d.audit {
            part.warnings(audit.warnings.iter().cloned());
        }
        r.journal().overlaid(d.op.decisions.iter().map(|d| d.line(false)).collect());
        Ok(())
    }

    fn unplanned(&self, r: &mut Runner) {
        r.plan_part(PhaseId::Overlay).not_decided("the overlay decider failed");
    }

    /// The patches applied to the tree the trees' act put in place.
    async fn act(&mut self, d: Decided, _cx: &Cx<'_>, _r: &mut Runner) -> Result<(), Failure> {
        let op = crate::overlay::Plan { repo: self.work.clone(), ..d.op };
        let job = tokio::task::spawn_blocking(move || crate::overlay::apply(&op).map(|_| ()));
        Ok(job.await.map_err(|e| Failure::step(PhaseId::Overlay, e))??)
    }
}

/// The knob audit: each key written must be read at the pinned commits (or by a patch).
fn audit(
    cx: &Cx<'_>,
    t: &Resolved,
    decision: &config::Decision,
    op: &crate::overlay::Plan,
) -> Result<crate::knobs::Audit, Failure> {
    let tree_pins = cx.tree_pins;
    let audited = [("eas", &tree_pins.eas, &t.eas), ("ei", &tree_pins.ei, &t.ei), ("eat", &tree_pins.eat, &t.eat)].map(
        |(name, pin, t)| knob_audit::Tree {
            name,
            repo: pin.repo.clone().unwrap_or_default(),
            objects: t.objects.as_path(),
            sha: t.sha.as_str(),
        },
    );
    Ok(knob_audit::run(&audited, decision, op, &cx.args.allow_unread)?)
}

/// After a STOP: the other profiles of the run's pins whose overlay decides fully, each with its
/// command.
pub fn way_forward(
    pins: &crate::pins::Pins,
    current: &str,
    mirror: &Path,
    generated: &crate::overlay::Generated,
    inv: &Invocation,
    dry_run: bool,
) -> Vec<String> {
    let tried = crate::overlay::profiles::try_profiles(pins, current, mirror, Some(generated));
    crate::overlay::profiles::lines(&tried, &|profile: &str| on_profile(inv, profile, dry_run))
}

/// The run's command on the pinned profile `profile`, in place of the `--profile` or `--ref` it
/// selected with; every other word as given.
fn on_profile(inv: &Invocation, profile: &str, dry_run: bool) -> String {
    let other = inv.on_profile(profile);
    if dry_run { other.dry_run() } else { other.up() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A STOP's way forward names the same run on another profile: the selection's `--ref` (or
    /// `--profile`) and its value are replaced, the model and the global flags kept, and a dry run
    /// is offered as a dry run.
    #[test]
    fn the_way_forward_is_the_same_run_on_the_other_profile() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let inv = Invocation {
            global: words(&["--context", "lab"]),
            layer: "inference".into(),
            env: "k3d-gpu".into(),
            select: words(&["--ref", "0123abc", "--model", "qwen3-0-6b"]),
            ..Invocation::default()
        };
        let up = on_profile(&inv, "release-1.5", false);
        assert_eq!(
            up,
            "eas up --context lab --layer inference --env k3d-gpu --model qwen3-0-6b --profile release-1.5 --yes"
        );
        // The run's own command line, when it has one, with its profile replaced and every other
        // flag kept.
        let typed = Invocation {
            typed: Some(words(&["eas", "up", "--yes", "--profile=main", "--eas-repo", "/m/eas", "--ref", "abc"])),
            ..inv.clone()
        };
        assert_eq!(on_profile(&typed, "release-1.5", false), "eas up --yes --eas-repo /m/eas --profile release-1.5");
        assert_eq!(on_profile(&typed, "release-1.5", true), "eas up --dry-run --eas-repo /m/eas --profile release-1.5");
        let dry = on_profile(&Invocation { select: words(&["--profile", "main"]), ..inv }, "release-1.5", true);
        assert!(dry.contains("--dry-run") && dry.ends_with("--profile release-1.5"), "{dry}");
        assert!(!dry.contains("main"), "{dry}");
    }
}
