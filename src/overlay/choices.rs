//! What the skip conditions read: the generator's choices (from `eas config`'s rules, never
//! re-derived here) and the nodes' labels from the facts document.

use std::collections::BTreeMap;

use crate::config::{self, rules::Value};
use crate::facts::Facts;
use crate::overlay::data::Overlay;
use crate::settings::Select;

/// The generated choices and node labels one cluster's overlay decisions depend on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Generated {
    /// Every override the generator writes, as text (`false`, `"k3d"` → `k3d`).
    pub choices: BTreeMap<String, String>,
    /// Each node's labels that the overlay's skip conditions read, by node name.
    pub node_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl Generated {
    /// From a facts document: runs the generator's own rules (the default layer and profile; the
    /// choices the overlay reads do not depend on either). A refusal is the generator's, exit 3.
    pub fn from_facts(facts: &Facts, overlay: &Overlay) -> Result<Generated, config::ConfigError> {
        let select = Select { layer: crate::settings::Layer::AgentToolkit, ..Select::default() };
        let decision = config::generate(facts, &select)?;
        Ok(Generated::from_decision(&decision, facts, overlay))
    }

    /// From choices the caller already generated (what `eas up` has in hand). Of the nodes'
    /// labels, only those `overlay` reads are kept: a large cluster's others are not copied.
    pub fn from_decision(decision: &config::Decision, facts: &Facts, overlay: &Overlay) -> Generated {
        let choices = decision
            .overrides
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::Str(s) => s.clone(),
                    Value::Bool(b) => b.to_string(),
                    Value::List(l) => l.join(","),
                };
                (k.to_string(), text)
            })
            .collect();
        let read = overlay.labels_read();
        let node_labels = facts
            .nodes
            .iter()
            .map(|n| {
                let kept = n.labels.iter().filter(|(k, _)| read.contains(k.as_str()));
                (n.name.clone(), kept.map(|(k, v)| (k.clone(), v.clone())).collect())
            })
            .collect();
        Generated { choices, node_labels }
    }

    pub fn choice(&self, key: &str) -> Option<&str> {
        self.choices.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desktop() -> Facts {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
        Facts::read(&path).unwrap()
    }

    #[test]
    fn reads_the_generators_choices_for_the_skip_conditions() {
        let g = Generated::from_facts(&desktop(), &Overlay::builtin().unwrap()).unwrap();
        // k3d-gpu's merged-usr node image and its k3s-addon balloons policy.
        assert_eq!(g.choice("istio_platform"), Some("k3d"));
        assert_eq!(g.choice("kubernetes_cpu_policy"), Some("best-effort"));
        assert_eq!(g.choice("metallb_enabled"), Some("false"));
        assert_eq!(
            g.node_labels["k3d-gpu-server-0"].get("node-role.kubernetes.io/control-plane").map(String::as_str),
            Some("true")
        );
        // Only the labels the overlay reads are copied (a 2000-node cluster's others are not).
        assert!(desktop().nodes[0].labels.contains_key("kubernetes.io/hostname"));
        assert_eq!(g.node_labels["k3d-gpu-server-0"].len(), 1, "{:?}", g.node_labels);
    }

    #[test]
    fn follows_the_facts_not_a_fixed_answer() {
        let mut f = desktop();
        f.daemonsets.retain(|d| !d.name.contains("balloons"));
        for n in &mut f.nodes {
            n.containerd.as_mut().unwrap().cni_bin_dirs = vec!["/opt/cni/bin".into()];
        }
        let g = Generated::from_facts(&f, &Overlay::builtin().unwrap()).unwrap();
        // Istio's default CNI layout: the key is not written at all (issue 28 item 5).
        assert_eq!(g.choice("istio_platform"), None);
        assert_eq!(g.choice("kubernetes_cpu_policy"), Some("nri-balloons"));
    }

    #[test]
    fn a_refused_cluster_is_the_generators_refusal() {
        let mut f = desktop();
        for n in &mut f.nodes {
            n.containerd.as_mut().unwrap().cni_bin_dirs = vec!["/somewhere/else".into()];
        }
        let e = Generated::from_facts(&f, &Overlay::builtin().unwrap()).unwrap_err();
        assert!(matches!(e, config::ConfigError::Refused(_)), "{e}");
    }
}
