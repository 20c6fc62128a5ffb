//! Facts: the plan half gathers the facts document from the cluster (read-only; without it
//! nothing can be decided, so its failure ends the plan), discounting what eas's own runs
//! created. The act half has nothing left to do: the facts were read once, by the plan.

use crate::error::Failure;
use crate::facts::Facts as Document;
use crate::gather::{self, GatherOptions};
use crate::plan::{FactsSummary, PhaseId};
use crate::state::ledger::Snapshot;

use crate::cluster::CALL;
use crate::config;
use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::runner::{Phase, Runner};

pub struct Facts<'a> {
    /// The cluster and the Docker Engine preflight reached.
    pub pre: &'a crate::pipeline::phases::preflight::Pre,
    /// What eas's earlier runs created: not the cluster's (their pods do not count against the
    /// budget of the run after them).
    pub created: Snapshot,
}

impl Phase for Facts<'_> {
    const ID: PhaseId = PhaseId::Facts;
    const ENDS_PLAN: bool = true;
    type Planned = Document;
    type Done = Document;

    fn says(&self, _cx: &Cx<'_>) -> String {
        format!("{} from {} ({})", Self::ID.spec().says, self.pre.context, self.pre.server)
    }

    async fn plan(&mut self, cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Document, NoPlan> {
        let opts = GatherOptions { discount_namespaces: self.created.namespaces.clone(), ..cx.args.gather.clone() };
        let (target, docker) = (cx.services.target()?, self.pre.reach());
        let facts = gather::collect(target, &opts, CALL, (&cx.global.env, docker), cx.shell, config::fit::landing_node)
            .await
            .map_err(Failure::from)?;
        // The facts as the decisions read them: what eas's runs created is not the cluster's.
        Ok(crate::state::since::discount(&facts, &self.created))
    }

    fn note(&mut self, facts: &mut Document, r: &mut Runner) -> Result<(), Failure> {
        let hash = crate::state::hash_json(facts);
        r.journal().facts_hashed(hash.clone());
        let devices = &config::data::cluster_rules().device_resources;
        let prefixes: Vec<&str> = devices.iter().map(|d| d.prefix.as_str()).collect();
        r.plan_part(PhaseId::Facts).facts(FactsSummary::new(facts, &hash, &prefixes));
        Ok(())
    }

    async fn act(&mut self, facts: Document, _cx: &Cx<'_>, _r: &mut Runner) -> Result<Document, Failure> {
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::{desktop_facts, runner};
    use crate::plan::PhaseTimeouts;

    /// What the facts' plan half settled is noted once: the state's facts hash (which a later
    /// run compares with) and the plan's summary carry the same hash of the same document, and
    /// the summary counts its nodes.
    #[tokio::test]
    async fn the_facts_noted_are_hashed_into_the_state_and_summarised_in_the_plan() {
        let (mut r, root) = (runner(PhaseTimeouts::default()), tempfile::tempdir().unwrap());
        let pre = crate::pipeline::phases::preflight::sample(root.path());
        let mut doc = desktop_facts();
        let mut phase = Facts { pre: &pre, created: Snapshot::default() };
        assert!(r.journaled().facts_hash.is_none() && r.plan_doc().facts().is_none());
        phase.note(&mut doc, &mut r).unwrap();
        let hash = r.journaled().facts_hash.clone().expect("the facts hashed");
        assert_eq!(hash, crate::state::hash_json(&doc));
        let summary = r.plan_doc().facts().as_ref().expect("the facts summarised");
        assert_eq!(summary.facts_hash, hash);
        assert_eq!(summary.node_count, doc.nodes.len());
    }
}
