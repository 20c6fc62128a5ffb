//! The checks themselves, one function each; every one reads the facts and nothing else.

use crate::config::data as config_data;
use crate::facts::{self, Facts, Node};
use crate::plan::PhaseId;

use super::report::{Check, Data, Inputs, Recorded};

/// The kubelet's pressure conditions: any of them `True` on the landing node refuses.
const PRESSURE: [&str; 3] = ["DiskPressure", "MemoryPressure", "PIDPressure"];
/// Names listed in one finding before "and N more".
const SHOWN: usize = 8;
/// An earlier install's releases are what the plan's reader must see: more of them are named.
const RELEASES_SHOWN: usize = 20;

/// The node a model would land on (the fit's choice), or why there is none.
pub enum Landing<'a> {
    Node(&'a Node),
    NoNodes,
    AllTainted,
}

pub fn landing(f: &Facts) -> Landing<'_> {
    match crate::config::fit::landing_node(&f.nodes) {
        Some(n) => Landing::Node(n),
        None if f.nodes.is_empty() => Landing::NoNodes,
        None => Landing::AllTainted,
    }
}

pub fn storage_class(f: &Facts, d: &Data) -> Check {
    let mut c = Check::new("storage class", PhaseId::Facts);
    let Some(classes) = &f.storage_classes else {
        c.warn(
            "the StorageClasses were not read, so whether the model PVC model-store can bind is unknown",
            "use a context allowed to list storageclasses",
        );
        return c;
    };
    let defaults: Vec<&facts::StorageClass> = classes.iter().filter(|s| s.default).collect();
    let fix_default = format!(
        "mark one default (kubectl patch storageclass NAME -p '{{\"metadata\":{{\"annotations\":{{\"{}\":\"{}\"}}}}}}'), \
         or keep k3s's local-path (do not start k3s with --disable local-storage)",
        d.default_class_annotation.key, d.default_class_annotation.value
    );
    match defaults.as_slice() {
        [] => {
            let have = if classes.is_empty() {
                "the cluster has no StorageClass".to_string()
            } else {
                format!(
                    "none of its StorageClasses ({}) is marked default",
                    list(&classes.iter().map(|s| s.name.clone()).collect::<Vec<_>>())
                )
            };
            c.refuse(
                format!(
                    "no default StorageClass: {have}, so EI's model PVC model-store (namespace llm-inference, no class named) would stay Pending"
                ),
                fix_default,
            );
        }
        [one] => c.ok = format!("default {} ({})", one.name, one.provisioner),
        many => {
            c.ok = format!("default {} ({})", many[0].name, many[0].provisioner);
            c.warn(
                format!(
                    "{} StorageClasses are marked default ({}); Kubernetes gives a PVC without a class the newest of them",
                    many.len(),
                    list(&many.iter().map(|s| s.name.clone()).collect::<Vec<_>>())
                ),
                "leave one default",
            );
        }
    }
    c
}

pub fn landing_node(f: &Facts, landing: &Landing) -> Check {
    let mut c = Check::new("landing node", PhaseId::Facts);
    let n = match landing {
        Landing::Node(n) => n,
        Landing::NoNodes => {
            c.refuse("the cluster has no nodes", "start the cluster's k3s server and join its nodes");
            return c;
        }
        Landing::AllTainted => {
            // Only an operator's own taints take a node out (`fit::operator_taints`): they are the
            // ones to name, and the only ones a person may remove.
            let tainted: Vec<String> = f
                .nodes
                .iter()
                .filter_map(|n| {
                    let keys: Vec<String> = crate::config::fit::operator_taints(n)
                        .iter()
                        .map(|t| format!("{}:{}", t.key, t.effect))
                        .collect();
                    (!keys.is_empty()).then(|| format!("{} ({})", n.name, keys.join(", ")))
                })
                .collect();
            c.refuse(
                format!(
                    "no node a model can land on: every node carries an operator's NoSchedule or NoExecute taint: {}",
                    list(&tainted)
                ),
                "remove the operator's taint from one node (kubectl taint nodes NODE KEY:EFFECT-) or add a node without one",
            );
            return c;
        }
    };
    if n.unschedulable {
        c.refuse(
            format!("node {} (where the model would land) is cordoned (spec.unschedulable)", n.name),
            format!("kubectl uncordon {}", n.name),
        );
    }
    if n.conditions.is_empty() {
        c.warn(
            format!("node {}'s conditions were not recorded, so whether it is Ready is unknown", n.name),
            "re-gather the facts with this eas (`eas facts`)",
        );
    } else {
        let ready = n.condition("Ready").is_some_and(|r| r.status == "True");
        for problem in condition_problems(n) {
            // Its lifecycle taints go with the condition: the fix is the node's, never the taint's.
            let fix = if !ready && problem.starts_with("not Ready") {
                format!(
                    "make the node Ready (its kubelet): `kubectl describe node {}` shows why; on k3s `systemctl status k3s` \
                     (or k3s-agent) on that node, on k3d `docker logs {}`",
                    n.name, n.name
                )
            } else {
                format!(
                    "let node {} recover (kubectl describe node {} shows why); a full disk under the k3s data dir shows as DiskPressure",
                    n.name, n.name
                )
            };
            c.refuse(format!("node {} (where the model would land) is {problem}", n.name), fix);
        }
    }
    c.ok = format!("{}: Ready, schedulable, no pressure", n.name);
    c
}

/// `not Ready (Ready=False since T, reason: message)`, `under DiskPressure (...)`: what keeps a
/// node from taking pods, with the condition's status, reason and since when.
fn condition_problems(n: &Node) -> Vec<String> {
    let why = |cond: &facts::NodeCondition| {
        let text = [cond.reason.as_str(), cond.message.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(": ");
        let since = if cond.since.is_empty() { String::new() } else { format!(" since {}", cond.since) };
        match (since.is_empty(), text.is_empty()) {
            (true, true) => String::new(),
            (_, true) => since,
            (true, _) => format!(" ({text})"),
            _ => format!("{since} ({text})"),
        }
    };
    let mut out = Vec::new();
    match n.condition("Ready") {
        Some(r) if r.status == "True" => {}
        Some(r) => out.push(format!("not Ready (Ready={}{})", r.status, why(r))),
        None => out.push("not Ready (no Ready condition reported)".to_string()),
    }
    for p in PRESSURE {
        if let Some(cond) = n.condition(p).filter(|c| c.status == "True") {
            out.push(format!("under {p}{}", why(cond)));
        }
    }
    out
}

pub fn other_nodes(f: &Facts, landing: &Landing) -> Check {
    let mut c = Check::new("other nodes", PhaseId::Facts);
    let landing_name = match landing {
        Landing::Node(n) => Some(n.name.as_str()),
        _ => None,
    };
    let mut unwell = Vec::new();
    for n in f.nodes.iter().filter(|n| Some(n.name.as_str()) != landing_name) {
        let mut problems = if n.conditions.is_empty() { Vec::new() } else { condition_problems(n) };
        if n.unschedulable {
            problems.push("cordoned".to_string());
        }
        if !problems.is_empty() {
            unwell.push(format!("{} {}", n.name, problems.join(", ")));
        }
    }
    let others = f.nodes.len() - usize::from(landing_name.is_some());
    if others == 0 {
        c.ok = "no other nodes".into();
    } else if unwell.is_empty() {
        let nodes = if others == 1 { "node" } else { "nodes" };
        c.ok = format!("{others} other {nodes} Ready, none under pressure");
    } else {
        c.warn(
            format!("{} of {others} other nodes cannot take every pod: {}", unwell.len(), list(&unwell)),
            "the stack's other pods may stay Pending until they recover",
        );
    }
    c
}

pub fn access(f: &Facts, d: &Data) -> Check {
    let mut c = Check::new("access", PhaseId::Facts);
    let Some(reviews) = &f.access_reviews else {
        c.warn(
            "the access reviews were not asked, so whether the installer may create what it needs is unknown",
            "re-gather the facts with this eas (`eas facts`)",
        );
        return c;
    };
    for r in reviews.iter().filter(|r| !r.allowed) {
        let resource = if r.group.is_empty() { r.resource.clone() } else { format!("{}.{}", r.resource, r.group) };
        let scope = r.namespace.as_ref().map(|n| format!("in namespace {n}")).unwrap_or("in all namespaces".into());
        let purpose = d
            .access_reviews
            .reviews
            .iter()
            .find(|s| s.verb == r.verb && s.group == r.group && s.resource == r.resource)
            .map(|s| format!(", needed for {}", s.purpose))
            .unwrap_or_default();
        let reason = if r.reason.is_empty() { String::new() } else { format!(" ({})", r.reason) };
        c.refuse(
            format!(
                "context {} may not {} {resource} {scope}{reason}{purpose}",
                f.cluster.context, r.verb
            ),
            "the installer needs cluster-admin: use a context bound to the cluster-admin ClusterRole (k3s: /etc/rancher/k3s/k3s.yaml)",
        );
    }
    c.ok = format!("{} access reviews allowed (cluster-wide create of what the installer makes)", reviews.len());
    c
}

pub fn ephemeral_storage(landing: &Landing, inputs: &Inputs, d: &Data) -> Check {
    let mut c = Check::new("ephemeral storage", PhaseId::Config);
    let Landing::Node(n) = landing else {
        c.ok = "no landing node: not checked".into();
        return c;
    };
    let Some(alloc) = n.allocatable.get("ephemeral-storage").and_then(|q| facts::parse_quantity(q)) else {
        c.warn(
            format!("node {} reports no allocatable ephemeral-storage, so room for the weights is unknown", n.name),
            "",
        );
        return c;
    };
    let Some(weights) = inputs.weights_bytes else {
        c.ok = format!("{}: {} allocatable (no model weights to compare)", n.name, gib(alloc));
        return c;
    };
    let margin = d.ephemeral_margin.bytes;
    let need = weights.saturating_add(margin) as f64;
    let model = inputs.model.map(|m| format!("model {m}'s ")).unwrap_or_default();
    if alloc < need {
        c.refuse(
            format!(
                "node {} has {} allocatable ephemeral-storage; {model}weights need {} plus a {} margin ({}), and local-path keeps them on that disk",
                n.name,
                gib(alloc),
                gib(weights as f64),
                gib(margin as f64),
                gib(need)
            ),
            format!("free or add disk under node {}'s k3s data dir, or choose a smaller model (--model)", n.name),
        );
    }
    c.ok = format!(
        "{}: {} allocatable for {} of weights + {} margin",
        n.name,
        gib(alloc),
        gib(weights as f64),
        gib(margin as f64)
    );
    c
}

pub fn earlier_install(f: &Facts, recorded: &Recorded, d: &Data) -> Check {
    let mut c = Check::new("earlier install", PhaseId::Facts);
    let stack_ns = |ns: &str| d.stack.namespaces.iter().any(|s| s == ns);
    let stack_release = |ns: &str, name: &str| d.stack.releases.iter().any(|r| r.namespace == ns && r.name == name);
    let mut releases = Vec::new();
    let mut failed = 0;
    for r in &f.helm_releases {
        let ours = recorded.releases.contains(&(r.namespace.clone(), r.name.clone()));
        if ours || !(stack_ns(&r.namespace) || stack_release(&r.namespace, &r.name)) {
            continue;
        }
        if r.status == "deployed" {
            releases.push(format!("{}/{}", r.namespace, r.name));
        } else {
            // Named first: a release that is not deployed is what the installer trips on.
            releases.insert(failed, format!("{}/{} ({})", r.namespace, r.name, r.status));
            failed += 1;
        }
    }
    let with_release: Vec<&str> = f.helm_releases.iter().map(|r| r.namespace.as_str()).collect();
    let namespaces: Vec<String> = f
        .namespaces
        .iter()
        .filter(|n| stack_ns(n) && !recorded.namespaces.contains(*n) && !with_release.contains(&n.as_str()))
        .cloned()
        .collect();
    if !releases.is_empty() {
        let failed = match failed {
            0 => String::new(),
            1 => ", one release not deployed".into(),
            n => format!(", {n} releases not deployed"),
        };
        c.warn(
            format!(
                "an earlier EAS/EI install that eas did not record: the installer will upgrade or replace {}{failed}",
                list_n(&releases, RELEASES_SHOWN)
            ),
            "remove them first if they hold data you need (helm uninstall -n NAMESPACE NAME)",
        );
    }
    if !namespaces.is_empty() {
        c.warn(
            format!(
                "namespaces of the stack that eas did not create: {}; the installer will write into them",
                list(&namespaces)
            ),
            "eas down will not delete them",
        );
    }
    // EAT 1.x's namespaces are not the stack's: the config check refuses them, and this check
    // names them too, so doctor does not print "ok earlier install" under that refusal.
    let eat1: Vec<String> =
        config_data::cluster_rules().eat1_namespaces.iter().filter(|ns| f.namespaces.contains(*ns)).cloned().collect();
    if !eat1.is_empty() {
        c.warn(
            format!(
                "an earlier EAT 1.x install (namespaces {}): the config check refuses to install over it",
                list(&eat1)
            ),
            "remove EAT 1.x before installing EAT 2.0",
        );
    }
    c.ok = "no namespace or Helm release of an earlier install".into();
    c
}

pub fn device_plugins(f: &Facts) -> Check {
    let mut c = Check::new("device plugins", PhaseId::Facts);
    let kinds = &config_data::cluster_rules().device_resources;
    let positive =
        |m: &facts::StringMap, r: &str| m.get(r).and_then(|q| facts::parse_quantity(q)).is_some_and(|q| q > 0.0);
    let mut seen = 0;
    for n in &f.nodes {
        for kind in kinds {
            let advertised: Vec<&String> =
                n.capacity.keys().filter(|r| r.starts_with(&kind.prefix) && positive(&n.capacity, r)).collect();
            let labelled = kind.node_label.as_ref().is_some_and(|l| n.labels.get(l).is_some_and(|v| v == "true"));
            if advertised.is_empty() && !labelled {
                continue;
            }
            seen += 1;
            if kind.allocatable.iter().any(|r| positive(&n.allocatable, r)) {
                continue;
            }
            let what = if advertised.is_empty() {
                format!(
                    "carries {} but advertises no {}* resource",
                    kind.node_label.as_deref().unwrap_or(""),
                    kind.prefix
                )
            } else {
                let alloc: Vec<String> = advertised
                    .iter()
                    .map(|r| format!("{r}={}", n.allocatable.get(*r).map(String::as_str).unwrap_or("0")))
                    .collect();
                format!("has {} allocatable", alloc.join(", "))
            };
            c.warn(
                format!(
                    "node {} {what}: its {} device plugin{} is not Ready, and eas verify will fail unless it recovers",
                    n.name,
                    kind.device,
                    kind.plugin.as_ref().map(|p| format!(" ({p})")).unwrap_or_default()
                ),
                format!("kubectl -n kube-system get pods -o wide --field-selector spec.nodeName={}", n.name),
            );
        }
    }
    c.ok = if seen == 0 {
        "no device nodes".into()
    } else {
        format!("{seen} device nodes, each with its resource allocatable")
    };
    c
}

fn gib(bytes: f64) -> String {
    format!("{:.1} GiB", bytes / facts::GIB)
}

fn list(items: &[String]) -> String {
    list_n(items, SHOWN)
}

fn list_n(items: &[String], shown: usize) -> String {
    if items.len() <= shown {
        return items.join(", ");
    }
    format!("{}, … and {} more", items[..shown].join(", "), items.len() - shown)
}
