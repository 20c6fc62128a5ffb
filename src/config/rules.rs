//! The decision rules of SPEC §3.3: facts, pins and flags in; choices, each with its reason and
//! source, out. Pure: no files, no cluster, no network.

use crate::facts::{self, Facts, Node};
use crate::pins::Trees;
use crate::settings::Layer;

use super::data;
use super::node_args;

// The decision's types live in a leaf of their own, so `config::model` (which fills them in)
// and this file (which calls it) do not import each other; callers keep naming them here.
pub use super::decision::{Choice, Decision, ManifestEntry, Value};

#[derive(Debug, PartialEq)]
pub enum Rejection {
    Refused(Vec<String>),
    BadInput { cause: String, hint: String },
}

pub struct Inputs<'a> {
    pub facts: &'a Facts,
    /// The fit that decides (SPEC §3.4): the facts' own, or an external document.
    pub fit: Option<&'a crate::facts::Fit>,
    pub trees: &'a Trees,
    pub layer: &'a Layer,
    pub model: Option<&'a str>,
    /// The model the last completed run deployed: kept unless `--model` names another, or it is
    /// no longer a catalog LLM entry that fits (`config::model`'s `kept`). `None`: no install,
    /// or `--repick`.
    pub kept: Option<&'a str>,
    /// EI's model catalog at the pinned commit (or `--catalog FILE`); without it the built-in
    /// candidates (`data/models.json`) stand in for it.
    pub catalog: Option<&'a super::catalog::Pinned>,
    /// The Hugging Face cache (`config::hf::cache_base`), read-only: figures found there win over
    /// `data/models.json`'s. `None`: not read.
    pub hf_cache: Option<&'a std::path::Path>,
    /// What Hugging Face said about downloading each model (`model_id`, `up::hf`'s reads): an
    /// automatic pick skips an entry it refused, a `--model` pick it refused is refused (exit 3),
    /// and an unknown answer is a warning. Empty: not read (`eas config`, `--offline`).
    pub downloads: &'a [(String, super::hf::Access)],
}

pub const NODE_ARGS: &str = "k3s.io/node-args";

/// The layer and model asked for, checked without reading anything: bad input (exit 2) before
/// any network call. `None`: a layer eas knows and refuses (the refusal comes with the facts).
/// `with_catalog`: a model catalog will decide, so `--model` is checked against it, not here.
pub fn selection<'l>(
    layer: &'l Layer,
    model: Option<&str>,
    with_catalog: bool,
) -> Result<Option<&'l Layer>, Rejection> {
    let layer = Some(layer).filter(|l| !matches!(l, Layer::Refused(_)));
    if let (Some(_), Some(m), false) = (layer, model, with_catalog)
        && !data::models().candidates.iter().any(|c| c.name == m)
    {
        let names: Vec<&str> = data::models().candidates.iter().map(|c| c.name.as_str()).collect();
        return Err(Rejection::BadInput {
            cause: format!("unknown model {m:?}"),
            hint: format!(
                "--model takes one of: {} (the built-in candidates; `eas up` and `--catalog FILE` take any LLM entry of the catalog)",
                names.join(", ")
            ),
        });
    }
    Ok(layer)
}

pub fn decide(inp: &Inputs) -> Result<Decision, Rejection> {
    let rules = data::cluster_rules();
    let layer = selection(inp.layer, inp.model, inp.catalog.is_some())?;
    let f = inp.facts;
    let (mut refuse, node_args) = refusals(inp, layer, rules)?;
    let layout = cni_layout(f, rules, &mut refuse);
    if !refuse.is_empty() {
        return Err(Rejection::Refused(refuse));
    }
    let layer = layer.expect("refused layers returned above");
    let layout = layout.expect("a refusal was returned otherwise");

    let mut d = Decision {
        layer: layer.clone(),
        overrides: Vec::new(),
        require_amx: false,
        model_edits: Vec::new(),
        manifest: Vec::new(),
        choices: Vec::new(),
        warnings: Vec::new(),
        network_no_proxy: None,
    };
    cluster_choices(&mut d, f, rules, layout, &node_args);
    if let Some(w) = super::version::pinned_kubectl()
        .and_then(|k| super::version::outside_skew(&f.cluster.server_version, &k, &rules.kubectl_skew))
    {
        d.warnings.push(w);
    }
    if *layer == Layer::AgentToolkit {
        choose(
            &mut d,
            format!("layer agent-toolkit, no foreign agent-sandbox (EAT's is {})", rules.eat_sandbox_version),
            "agent_sandbox_enabled: true".into(),
            "agent-sandbox-version",
        );
        d.overrides.push(("agent_sandbox_enabled", Value::Bool(true)));
    }
    super::model::pick(f, inp.fit, (inp.model, inp.kept), inp.catalog, (inp.hf_cache, inp.downloads), layer, &mut d)
        .map_err(|why| Rejection::Refused(vec![why]))?;

    manifest(&mut d, inp, layer);
    choose(
        &mut d,
        "overrides must win over global_config and config.<layer>.yaml".into(),
        "passed last: -- -e @eas-overrides.yaml".into(),
        "extra-vars-last",
    );
    Ok(d)
}

fn choose(d: &mut Decision, fact: String, choice: String, source: &str) {
    d.choices.push(Choice { fact, choice, source: source.to_string() });
}

type NodeArgs<'f> = Vec<(&'f Node, Vec<String>)>;

/// Everything that refuses the cluster except its containerd layout, and each node's k3s args.
fn refusals<'f>(
    inp: &Inputs<'f>,
    layer: Option<&Layer>,
    rules: &data::ClusterRules,
) -> Result<(Vec<String>, NodeArgs<'f>), Rejection> {
    let mut refuse: Vec<String> = layer_refusal(inp.layer).into_iter().collect();
    if let (Some(_), Some(m), Some(cat)) = (layer, inp.model, inp.catalog)
        && !cat.catalog.llm_names().contains(&m)
    {
        refuse.push(format!(
            "--model {m}: not an LLM entry of the catalog {} (its LLM entries: {})",
            cat.describe(),
            cat.catalog.llm_names().join(", ")
        ));
    }
    let node_args = cluster_refusals(inp.facts, rules, &mut refuse)?;
    Ok((refuse, node_args))
}

/// `--layer L` when eas refuses L (`erag`), with why.
fn layer_refusal(layer: &Layer) -> Option<String> {
    data::layers().refused.get(layer.as_str()).map(|why| format!("--layer {layer}: {why}"))
}

/// The refusals no key of eas.yaml can lift, for `eas init`: a refused layer, and everything that
/// refuses the cluster as its facts stand, its CNI layout included; not the containerd facts eas
/// could not read, which node files or probing (keys of the file) lift. The same lines the plan
/// refuses with.
pub fn standing_refusals(f: &Facts, layer: &Layer) -> Result<Vec<String>, Rejection> {
    let rules = data::cluster_rules();
    let mut refuse: Vec<String> = layer_refusal(layer).into_iter().collect();
    cluster_refusals(f, rules, &mut refuse)?;
    let read = Facts { nodes: f.nodes.iter().filter(|n| n.containerd.is_some()).cloned().collect(), ..f.clone() };
    cni_layout(&read, rules, &mut refuse);
    Ok(refuse)
}

/// What refuses the cluster whatever is selected, but its containerd layout: pushed onto
/// `refuse`; each node's k3s args returned.
fn cluster_refusals<'f>(
    f: &'f Facts,
    rules: &data::ClusterRules,
    refuse: &mut Vec<String>,
) -> Result<NodeArgs<'f>, Rejection> {
    if let Some(line) = super::version::below_floor(&f.cluster.server_version, &rules.kubernetes_floor) {
        refuse.push(line);
    }

    // Not k3s: no node carries k3s's node-args annotation.
    let node_args: Vec<(&Node, Vec<String>)> = f
        .nodes
        .iter()
        .filter_map(|n| n.annotations.get(NODE_ARGS).map(|a| node_args::parse(&n.name, a).map(|args| (n, args))))
        .collect::<Result<_, _>>()
        .map_err(|e| Rejection::BadInput { cause: e.to_string(), hint: e.hint().into() })?;
    if f.nodes.is_empty() {
        refuse.push("the facts list no nodes".into());
    } else if node_args.is_empty() {
        refuse.push(format!("not a k3s cluster: no node carries the {NODE_ARGS} annotation"));
    } else if node_args.len() != f.nodes.len() {
        let missing: Vec<&str> =
            f.nodes.iter().filter(|n| !n.annotations.contains_key(NODE_ARGS)).map(|n| n.name.as_str()).collect();
        refuse.push(format!("not a k3s cluster throughout: nodes without {NODE_ARGS}: {}", names_list(&missing)));
    }
    let servicelb_off: Vec<&str> =
        node_args.iter().filter(|(_, a)| disables(a, "servicelb")).map(|(n, _)| n.name.as_str()).collect();
    if !servicelb_off.is_empty() {
        refuse.push(format!(
            "k3s ServiceLB is disabled (--disable servicelb on {}): EAS's MetalLB role does not detect \
             another load balancer and eas keeps MetalLB off; re-enable ServiceLB",
            names_list(&servicelb_off)
        ));
    }
    for ns in &rules.eat1_namespaces {
        if f.namespaces.iter().any(|n| n == ns) {
            refuse.push(format!("EAT 1.x is installed (namespace {ns}); remove it before installing EAT 2.0"));
        }
    }
    if f.namespaces.contains(&rules.k3d_gpu_sandbox_namespace)
        || f.agent_sandbox.as_ref().is_some_and(|s| s.namespace == rules.k3d_gpu_sandbox_namespace)
    {
        let v = f.agent_sandbox.as_ref().map(|s| format!(" {}", s.version)).unwrap_or_default();
        refuse.push(format!(
            "k3d-gpu's own agent-sandbox{v} is installed (namespace {}); EAT brings agent-sandbox {}: remove k3d-gpu's first",
            rules.k3d_gpu_sandbox_namespace, rules.eat_sandbox_version
        ));
    } else if let Some(s) = &f.agent_sandbox
        && s.version != rules.eat_sandbox_version
    {
        refuse.push(format!(
            "agent-sandbox {} is installed in {}; EAT needs exactly {}",
            s.version, s.namespace, rules.eat_sandbox_version
        ));
    }
    Ok(node_args)
}

/// The one CNI layout all nodes' containerd facts share; a refusal when there is none.
fn cni_layout<'r>(f: &Facts, rules: &'r data::ClusterRules, refuse: &mut Vec<String>) -> Option<&'r data::CniLayout> {
    // containerd facts: every node's must be readable, and all must share one known layout.
    let unreadable: Vec<&str> = f.nodes.iter().filter(|n| n.containerd.is_none()).map(|n| n.name.as_str()).collect();
    let mut layout = None;
    if !unreadable.is_empty() {
        refuse.push(format!(
            "containerd facts unreadable on {}: the CNI layout and NRI socket decide istio_platform and the CPU policy \
             (pass `eas up` or `eas facts` --probe-nodes to read them with a short-lived read-only pod, or \
             --containerd-config NODE=FILE, or *=FILE for every node alike; their warnings say why each node could \
             not be read)",
            names_list(&unreadable)
        ));
    } else if !f.nodes.is_empty() {
        let mut found: Vec<(&Node, Option<&data::CniLayout>)> = Vec::new();
        for n in &f.nodes {
            let dirs = &n.containerd.as_ref().expect("checked").cni_bin_dirs;
            found.push((n, rules.cni_layouts.iter().find(|l| l.matches(dirs))));
        }
        let unknown: Vec<String> = found
            .iter()
            .filter(|(_, l)| l.is_none())
            .map(|(n, _)| format!("{} {:?}", n.name, n.containerd.as_ref().expect("checked").cni_bin_dirs))
            .collect();
        if !unknown.is_empty() {
            refuse.push(format!(
                "unknown CNI layout (containerd bin_dirs {}): no Istio platform profile matches",
                unknown.join("; ")
            ));
        } else {
            let platforms: Vec<&str> = found.iter().map(|(_, l)| l.expect("known").istio_platform.as_str()).collect();
            if platforms.iter().any(|p| *p != platforms[0]) {
                refuse.push(format!(
                    "nodes disagree on the CNI layout ({}): one Istio platform cannot serve them all",
                    platforms.join(", ")
                ));
            } else {
                layout = found[0].1;
            }
        }
    }
    layout
}

/// The choices every layer makes from the cluster's facts.
fn cluster_choices(
    d: &mut Decision,
    f: &Facts,
    rules: &data::ClusterRules,
    layout: &data::CniLayout,
    node_args: &NodeArgs,
) {
    choose(
        d,
        format!(
            "k3s {} ({NODE_ARGS} on {} node{})",
            f.cluster.server_version,
            f.nodes.len(),
            if f.nodes.len() == 1 { "" } else { "s" }
        ),
        "bring-your-own cluster: global_config existing_kubernetes: \"/kube/config\"".into(),
        "byo-global-config",
    );

    // istio_platform
    let dirs = &f.nodes[0].containerd.as_ref().expect("checked").cni_bin_dirs;
    let overlay = layout.overlay.as_deref().map(|o| format!(" (needs overlay {o})")).unwrap_or_default();
    if layout.overlay.is_none() {
        // Istio's own defaults serve this layout, and no pinned EAS file reads the key without
        // overlay 0002 (which this layout skips): written, the knob audit would refuse it as
        // unread (issue 28 item 5). Not written, overlay 0002's skip reads it as empty.
        choose(
            d,
            format!("containerd cni bin_dirs {} ({})", json_list(dirs), layout.what),
            "istio_platform not written: the istio-cni chart's defaults are this layout, no platform profile \
             is needed, and no pinned EAS file reads the key without overlay 0002 (skipped here)"
                .into(),
            &layout.source,
        );
    } else {
        choose(
            d,
            format!("containerd cni bin_dirs {} ({})", json_list(dirs), layout.what),
            format!("istio_platform: {:?}{overlay}", layout.istio_platform),
            &layout.source,
        );
        d.overrides.push(("istio_platform", Value::Str(layout.istio_platform.clone())));
    }

    // metallb
    choose(d, "k3s ServiceLB on".into(), "metallb_enabled: false".into(), "metallb-detect");
    d.overrides.push(("metallb_enabled", Value::Bool(false)));

    // CPU policy
    let (policy, fact, source) = cpu_policy(f);
    let suffix = if policy == "nri-balloons" { " (needs overlay 0003)" } else { "" };
    choose(d, fact, format!("kubernetes_cpu_policy: {policy:?}{suffix}"), source);
    d.overrides.push(("kubernetes_cpu_policy", Value::Str(policy.into())));

    // NFD
    let (nfd, fact) = nfd_enabled(f);
    let nfd_source = if f.helm_releases.iter().any(|r| r.name == "nfd") { "nfd-helm-docs" } else { "nfd-release-name" };
    choose(d, fact, format!("nfd_enabled: {nfd}"), nfd_source);
    d.overrides.push(("nfd_enabled", Value::Bool(nfd)));

    // CIDRs
    for (flag, key, default) in [
        ("--cluster-cidr", "kubernetes_cluster_cidr", &rules.k3s_defaults.cluster_cidr),
        ("--service-cidr", "kubernetes_service_cidr", &rules.k3s_defaults.service_cidr),
    ] {
        let found = node_args.iter().find_map(|(_, a)| flag_value(a, flag));
        let (fact, value) = match found {
            Some(v) => (format!("{NODE_ARGS} {flag} {v}"), v),
            None => (format!("{NODE_ARGS} without {flag} (k3s default)"), default.clone()),
        };
        choose(d, fact, format!("{key}: {value:?}"), "k3s-cidr-defaults");
        d.overrides.push((key, Value::Str(value)));
    }

    choose(
        d,
        "bring-your-own cluster (Kata is a Kubespray provisioning setting; BYO skips Kubespray)".into(),
        "kata_containers_enabled: false".into(),
        "kata-byo-2",
    );
    d.overrides.push(("kata_containers_enabled", Value::Bool(false)));

    choose(d, "vLLM serves on CPU in this stack".into(), "kubernetes_accelerator: \"cpu\"".into(), "accelerator-cpu");
    d.overrides.push(("kubernetes_accelerator", Value::Str("cpu".into())));
    for (node, res, qty, device) in devices(f) {
        choose(
            d,
            format!("node {node} has {res}={qty} allocatable"),
            format!("note: the {device} is served outside this stack (k3d-gpu agent up); EI's runtimes are CPU only"),
            "erag-experimental-2",
        );
    }

    // require_amx
    let amx: Vec<&str> = f
        .nodes
        .iter()
        .filter(|n| n.labels.get(&rules.amx_label).is_some_and(|v| v == "true"))
        .map(|n| n.name.as_str())
        .collect();
    d.require_amx = !amx.is_empty();
    let fact = if amx.is_empty() {
        "no node labelled cpu-cpuid.AMXBF16=true".to_string()
    } else {
        format!("cpu-cpuid.AMXBF16=true on {}", names_list(&amx))
    };
    let amx_choice = format!("models.yaml defaults.require_amx: {}", d.require_amx);
    choose(d, fact, amx_choice, "require-amx-affinity");
}

/// The layer manifest, every rev from the pins.
fn manifest(d: &mut Decision, inp: &Inputs, layer: &Layer) {
    for row in &data::layers().layers[layer.as_str()] {
        let pin = match row.pin.as_str() {
            "ei" => &inp.trees.ei,
            "eat" => &inp.trees.eat,
            "eas" => &inp.trees.eas,
            other => panic!("data/layers.json names unknown pin {other}"),
        };
        let repo = pin.repo.clone().expect("tree pins name a repo");
        let rev = pin.sha.clone().expect("tree pins carry a sha");
        let locked = pin.locked;
        let note = if locked { String::new() } else { " (unlocked: abbreviated; `eas pins lock`)".into() };
        choose(
            d,
            format!("pins {} {} {} at {}", inp.trees.profile, row.pin, pin.git_ref, rev),
            format!("repos.{}.yaml {} rev: {rev:?}{note}", layer, row.dest),
            "layer-manifest-rev",
        );
        if !locked {
            d.warnings.push(abbreviated_warning(inp.trees, row.pin.as_str(), &rev));
        }
        d.manifest.push(ManifestEntry { row: row.clone(), url: format!("https://github.com/{repo}"), rev, locked });
    }
}

/// The layer manifest at the commits eas resolved in its mirror (`eas up`): an abbreviated pin
/// becomes the full SHA it named there, so the installer's manifest never carries a prefix
/// (SPEC §3.2). `resolved` pairs a pin name (`eas`, `ei`, `eat`) with its full SHA; a SHA that
/// does not extend the pinned prefix is left alone (it is not the commit the pin names).
pub fn manifest_at(d: &mut Decision, resolved: &[(&str, &str)]) {
    for e in d.manifest.iter_mut() {
        let Some((_, full)) = resolved.iter().find(|(name, _)| *name == e.row.pin) else { continue };
        if e.rev == *full || !full.starts_with(e.rev.as_str()) {
            continue;
        }
        let (old, new) = (format!("rev: {:?}", e.rev), format!("rev: {full:?} (resolved in the mirror)"));
        for c in d.choices.iter_mut().filter(|c| c.source == "layer-manifest-rev" && c.choice.contains(&old)) {
            if c.choice.contains(&format!(" {} ", e.row.dest)) {
                c.choice = c.choice.replace(&old, &new);
            }
        }
        e.rev = full.to_string();
    }
}

/// The warning for a pin not yet locked, naming the pins file it is in.
fn abbreviated_warning(trees: &Trees, pin: &str, rev: &str) -> String {
    let file = if trees.from.is_empty() { String::new() } else { format!(" in {}", trees.from) };
    format!("pin {}/{pin} is abbreviated ({rev}){file}; run `eas pins lock` to resolve it there", trees.profile)
}

/// Node names for a choice line: the first three, then how many more (a line per decision
/// stays a line on a 2000-node cluster).
fn names_list(names: &[&str]) -> String {
    match names.len() {
        0..=3 => names.join(", "),
        n => format!("{} and {} more", names[..3].join(", "), n - 3),
    }
}

fn json_list(v: &[String]) -> String {
    serde_json::to_string(v).expect("strings serialise")
}

/// The values given to `flag` in either `--flag v` or `--flag=v` form, in order.
fn flag_values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == flag {
            if let Some(v) = args.get(i + 1) {
                out.push(v.as_str());
            }
            i += 2;
            continue;
        }
        if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            out.push(v);
        }
        i += 1;
    }
    out
}

fn flag_value(args: &[String], flag: &str) -> Option<String> {
    flag_values(args, flag).last().map(|v| v.trim_matches('"').to_string())
}

/// Whether k3s's node args disable a packaged component, in any of the forms k3s accepts:
/// `--disable X`, `--disable=X`, comma lists, quoted values, the legacy `--no-deploy`, and a
/// `--disable-X` switch.
pub fn disables(args: &[String], component: &str) -> bool {
    let listed = |v: &str| v.trim_matches(|c| c == '"' || c == '\'').split(',').any(|c| c.trim() == component);
    ["--disable", "--no-deploy"].iter().any(|flag| flag_values(args, flag).into_iter().any(listed))
        || args.iter().any(|a| a == &format!("--disable-{component}"))
}

fn is_addon_owned(annotations: &facts::StringMap) -> bool {
    let rules = data::cluster_rules();
    annotations.get(&rules.addon_owner_annotation).is_some_and(|v| v.trim() == rules.addon_owner_value)
}

fn cpu_policy(f: &Facts) -> (&'static str, String, &'static str) {
    let addon_balloons = f.daemonsets.iter().find(|ds| ds.name.contains("balloons") && is_addon_owned(&ds.annotations));
    if let Some(ds) = addon_balloons {
        return (
            "best-effort",
            format!("balloons DaemonSet {}/{} owned by a k3s addon", ds.namespace, ds.name),
            "k3s-addon-owner",
        );
    }
    if f.docker.as_ref().is_some_and(|d| d.rootless) {
        return (
            "best-effort",
            "Docker is rootless (k3s in a user namespace; the balloons policy needs an NRI-enabled containerd)".into(),
            "nri-requires-runtime",
        );
    }
    let no_socket: Vec<&str> = f
        .nodes
        .iter()
        .filter(|n| n.containerd.as_ref().is_some_and(|c| !c.nri_socket))
        .map(|n| n.name.as_str())
        .collect();
    if !no_socket.is_empty() {
        return ("best-effort", format!("no NRI socket on {}", names_list(&no_socket)), "nri-requires-runtime");
    }
    ("nri-balloons", "NRI socket on every node, no k3s-addon balloons policy".into(), "eas-cpu-policy")
}

fn nfd_enabled(f: &Facts) -> (bool, String) {
    let nfd = &data::cluster_rules().nfd;
    let is_nfd_ds = |ds: &facts::DaemonSet| {
        ds.name.starts_with("node-feature-discovery")
            || ds.name.starts_with("nfd-")
            || ds.labels.get("app.kubernetes.io/name").is_some_and(|v| v == "node-feature-discovery")
    };
    let daemonsets: Vec<&facts::DaemonSet> = f.daemonsets.iter().filter(|d| is_nfd_ds(d)).collect();
    let releases: Vec<&facts::HelmRelease> =
        f.helm_releases.iter().filter(|r| r.chart.starts_with(&nfd.chart_prefix)).collect();
    if daemonsets.is_empty() && releases.is_empty() {
        return (true, "no NFD in the cluster".into());
    }
    if let Some(ds) = daemonsets.iter().find(|ds| is_addon_owned(&ds.annotations)) {
        return (false, format!("NFD DaemonSet {}/{} owned by a k3s addon", ds.namespace, ds.name));
    }
    let ours = |r: &&facts::HelmRelease| r.name == nfd.release && r.namespace == nfd.namespace;
    if let Some(r) = releases.iter().find(|r| !ours(r)) {
        return (
            false,
            format!(
                "NFD from Helm release {}/{} (EI checks only {}/{})",
                r.namespace, r.name, nfd.namespace, nfd.release
            ),
        );
    }
    let foreign_ds = daemonsets.iter().find(|ds| {
        ds.namespace != nfd.namespace
            || ds.annotations.get("meta.helm.sh/release-name").is_none_or(|n| *n != nfd.release)
    });
    if let Some(ds) = foreign_ds {
        return (false, format!("NFD DaemonSet {}/{} not from Helm release {}", ds.namespace, ds.name, nfd.release));
    }
    if releases.is_empty() {
        return (false, "NFD DaemonSets without their Helm release".into());
    }
    (true, format!("NFD is Helm release {}/{}", nfd.namespace, nfd.release))
}

/// The device resources each node advertises (capacity above 0), with the figure the plan's
/// nodes section shows too: allocatable (0 while the device plugin is not serving the device).
fn devices(f: &Facts) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for n in &f.nodes {
        for (res, qty) in &n.capacity {
            let Some(dev) = data::cluster_rules().device_resources.iter().find(|d| res.starts_with(&d.prefix)) else {
                continue;
            };
            if facts::parse_quantity(qty).is_some_and(|q| q > 0.0) {
                let alloc = n.allocatable.get(res).cloned().unwrap_or_else(|| "0".into());
                out.push((n.name.clone(), res.clone(), alloc, dev.device.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
