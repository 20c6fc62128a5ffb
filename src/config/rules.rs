//! The decision rules of SPEC §3.3: facts, pins and flags in; choices, each with its reason and
//! source, out. Pure: no files, no cluster, no network.

#[cfg(test)]
use crate::config::fit::GIB;
use crate::facts::{self, Facts, Node};
use crate::pins::Trees;

use super::data::{self, ManifestRow};
use super::node_args;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Inference,
    AgentToolkit,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Inference => "inference",
            Layer::AgentToolkit => "agent-toolkit",
        }
    }
}

/// A YAML value as the overrides file carries it: strings quoted, booleans and lists native.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Bool(bool),
    List(Vec<String>),
}

/// One `choices.txt` line: `<fact> -> <choice> [<source>]`, the source an id in the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub fact: String,
    pub choice: String,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelEdit {
    pub name: String,
    /// Set the entry's `autodeploy: true` (EI's install deploys the pick this way).
    pub autodeploy: bool,
    /// The entry's `memory` (whole Gi), raised to what the pod needs.
    pub memory: Option<String>,
    /// The entry's `cpu`, lowered to what the landing node can schedule.
    pub cpu: Option<String>,
    pub env: Vec<(String, String)>,
    pub args_append: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry {
    pub row: ManifestRow,
    pub url: String,
    pub rev: String,
    pub locked: bool,
}

#[derive(Debug, Clone)]
pub struct Decision {
    pub layer: Layer,
    pub overrides: Vec<(&'static str, Value)>,
    pub require_amx: bool,
    pub model_edits: Vec<ModelEdit>,
    pub manifest: Vec<ManifestEntry>,
    pub choices: Vec<Choice>,
    pub warnings: Vec<String>,
}

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
    pub layer: &'a str,
    pub model: Option<&'a str>,
    /// EI's model catalog at the pinned commit (or `--catalog FILE`); without it the built-in
    /// candidates (`data/models.json`) stand in for it.
    pub catalog: Option<&'a super::catalog::Pinned>,
}

pub const NODE_ARGS: &str = "k3s.io/node-args";

/// The layer and model asked for, checked without reading anything: bad input (exit 2) before
/// any network call. `None`: a layer eas knows and refuses (the refusal comes with the facts).
/// `with_catalog`: a model catalog will decide, so `--model` is checked against it, not here.
pub fn selection(layer: &str, model: Option<&str>, with_catalog: bool) -> Result<Option<Layer>, Rejection> {
    let layer = match layer {
        "inference" => Some(Layer::Inference),
        "agent-toolkit" => Some(Layer::AgentToolkit),
        other if data::layers().refused.contains_key(other) => None,
        other => {
            return Err(Rejection::BadInput {
                cause: format!("unknown layer {other:?}"),
                hint: "use --layer agent-toolkit (default) or --layer inference".into(),
            });
        }
    };
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
        layer,
        overrides: Vec::new(),
        require_amx: false,
        model_edits: Vec::new(),
        manifest: Vec::new(),
        choices: Vec::new(),
        warnings: Vec::new(),
    };
    cluster_choices(&mut d, f, rules, layout, &node_args);
    if layer == Layer::AgentToolkit {
        choose(
            &mut d,
            format!("layer agent-toolkit, no foreign agent-sandbox (EAT's is {})", rules.eat_sandbox_version),
            "agent_sandbox_enabled: true".into(),
            "agent-sandbox-version",
        );
        d.overrides.push(("agent_sandbox_enabled", Value::Bool(true)));
    }
    super::model::pick(f, inp.fit, inp.model, inp.catalog, layer, &mut d)
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
    layer: Option<Layer>,
    rules: &data::ClusterRules,
) -> Result<(Vec<String>, NodeArgs<'f>), Rejection> {
    let f = inp.facts;
    let mut refuse = Vec::new();
    if let Some(why) = data::layers().refused.get(inp.layer) {
        refuse.push(format!("--layer {}: {why}", inp.layer));
    }
    if let (Some(_), Some(m), Some(cat)) = (layer, inp.model, inp.catalog)
        && !cat.catalog.llm_names().contains(&m)
    {
        refuse.push(format!(
            "--model {m}: not an LLM entry of the catalog {} (its LLM entries: {})",
            cat.describe(),
            cat.catalog.llm_names().join(", ")
        ));
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
    Ok((refuse, node_args))
}

/// The one CNI layout all nodes' containerd facts share; a refusal when there is none.
fn cni_layout<'r>(f: &Facts, rules: &'r data::ClusterRules, refuse: &mut Vec<String>) -> Option<&'r data::CniLayout> {
    // containerd facts: every node's must be readable, and all must share one known layout.
    let unreadable: Vec<&str> = f.nodes.iter().filter(|n| n.containerd.is_none()).map(|n| n.name.as_str()).collect();
    let mut layout = None;
    if !unreadable.is_empty() {
        refuse.push(format!(
            "containerd facts unreadable on {}: the CNI layout and NRI socket decide istio_platform and the CPU policy \
             (re-gather with `eas facts --containerd-config NODE=FILE`)",
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
    choose(
        d,
        format!("containerd cni bin_dirs {} ({})", json_list(dirs), layout.what),
        format!("istio_platform: {:?}{overlay}", layout.istio_platform),
        &layout.source,
    );
    d.overrides.push(("istio_platform", Value::Str(layout.istio_platform.clone())));

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
            format!("node {node} advertises {res}={qty}"),
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
fn manifest(d: &mut Decision, inp: &Inputs, layer: Layer) {
    for row in &data::layers().layers[layer.name()] {
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
            format!("repos.{}.yaml {} rev: {rev:?}{note}", layer.name(), row.dest),
            "layer-manifest-rev",
        );
        if !locked {
            d.warnings
                .push(format!("pin {}/{} is abbreviated ({rev}); run `eas pins lock`", inp.trees.profile, row.pin));
        }
        d.manifest.push(ManifestEntry { row: row.clone(), url: format!("https://github.com/{repo}"), rev, locked });
    }
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

fn devices(f: &Facts) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for n in &f.nodes {
        for (res, qty) in &n.capacity {
            let Some(dev) = data::cluster_rules().device_resources.iter().find(|d| res.starts_with(&d.prefix)) else {
                continue;
            };
            if facts::parse_quantity(qty).is_some_and(|q| q > 0.0) {
                out.push((n.name.clone(), res.clone(), qty.clone(), dev.device.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn servicelb_disabled_in_every_form() {
        let on = [
            &["server", "--disable", "servicelb"][..],
            &["server", "--disable=servicelb"],
            &["server", "--disable", "traefik,servicelb"],
            &["server", "--disable=traefik, servicelb"],
            &["server", "--disable", "\"servicelb\""],
            &["server", "--no-deploy", "servicelb"],
            &["server", "--no-deploy=servicelb"],
            &["server", "--disable-servicelb"],
            &["server", "--disable", "traefik", "--disable", "servicelb"],
        ];
        for a in on {
            assert!(disables(&args(a), "servicelb"), "{a:?}");
        }
        let off = [
            &["server", "--disable", "traefik"][..],
            &["server", "--disable=traefik"],
            &["server", "--disable", "servicelb-extra"],
            &["server"],
            &["server", "--disable"],
            &["server", "--kube-apiserver-arg", "servicelb"],
        ];
        for a in off {
            assert!(!disables(&args(a), "servicelb"), "{a:?}");
        }
    }

    #[test]
    fn cidr_flags_in_both_forms_last_wins() {
        assert_eq!(
            flag_value(&args(&["server", "--cluster-cidr", "10.1.0.0/16"]), "--cluster-cidr").as_deref(),
            Some("10.1.0.0/16")
        );
        assert_eq!(
            flag_value(&args(&["server", "--cluster-cidr=10.2.0.0/16"]), "--cluster-cidr").as_deref(),
            Some("10.2.0.0/16")
        );
        assert_eq!(
            flag_value(&args(&["--cluster-cidr=10.2.0.0/16", "--cluster-cidr", "10.3.0.0/16"]), "--cluster-cidr")
                .as_deref(),
            Some("10.3.0.0/16")
        );
        assert_eq!(flag_value(&args(&["--cluster-cidr-extra=x"]), "--cluster-cidr"), None);
    }

    #[test]
    fn node_args_that_are_not_a_json_list_or_hold_a_bad_cidr_are_bad_input() {
        for (text, want) in [
            ("server --disable servicelb --cluster-cidr 10.99.0.0/16", "is not a JSON list of strings"),
            ("[\"server\",\"--cluster-cidr\",\"10.99.0.0/16\\nx: y\"]", "--cluster-cidr \"10.99.0.0/16\\nx: y\""),
        ] {
            let mut f = desktop();
            let node = f.nodes[0].name.clone();
            f.nodes[0].annotations.insert(NODE_ARGS.into(), text.into());
            match decide_on(&f, "agent-toolkit", None) {
                Err(Rejection::BadInput { cause, .. }) => {
                    assert!(cause.starts_with(&format!("node {node:?}: annotation k3s.io/node-args")), "{cause}");
                    assert!(cause.contains(want), "{cause}");
                }
                other => panic!("{text}: {:?}", other.map(|_| ())),
            }
        }
    }
    fn desktop() -> Facts {
        Facts::parse(include_str!("../../fixtures/config/desktop-i9/facts.json")).unwrap()
    }

    fn decide_on(f: &Facts, layer: &str, model: Option<&str>) -> Result<Decision, Rejection> {
        let pins = crate::pins::Pins::parse(crate::pins::EMBEDDED).unwrap();
        let trees = pins.trees("main").unwrap();
        // As `config::generate_with` does: the facts' fit, else eas's own.
        let targets = crate::config::fit::Target::for_catalog(None);
        let fit = crate::config::fit::external::resolve(f, None, &targets).0;
        decide(&Inputs { facts: f, fit: Some(&fit), trees: &trees, layer, model, catalog: None })
    }

    fn overrides(d: &Decision, key: &str) -> Value {
        d.overrides.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap()
    }

    #[test]
    fn cpu_policy_each_reason_alone() {
        // Start from a cluster where nothing forces best-effort.
        let mut base = desktop();
        base.daemonsets.clear();
        assert_eq!(cpu_policy(&base).0, "nri-balloons");
        let mut rootless = base.clone();
        rootless.docker = Some(facts::Docker { rootless: true });
        assert_eq!(cpu_policy(&rootless).0, "best-effort");
        let mut no_socket = base.clone();
        no_socket.nodes[0].containerd.as_mut().unwrap().nri_socket = false;
        assert_eq!(cpu_policy(&no_socket).0, "best-effort");
        let with_addon = desktop();
        assert_eq!(cpu_policy(&with_addon).0, "best-effort");
        // The chart's Helm labels alone do not make the DaemonSet an addon.
        let mut helm_only = desktop();
        helm_only.daemonsets.retain(|d| d.name.contains("balloons"));
        helm_only.daemonsets[0].annotations.remove("objectset.rio.cattle.io/owner-gvk");
        assert_eq!(cpu_policy(&helm_only).0, "nri-balloons");
    }

    #[test]
    fn nfd_cases() {
        let mut f = desktop();
        f.daemonsets.clear();
        assert!(nfd_enabled(&f).0, "no NFD at all");
        let release = |ns: &str, name: &str| facts::HelmRelease {
            namespace: ns.into(),
            name: name.into(),
            chart: "node-feature-discovery-0.17.1".into(),
            status: "deployed".into(),
        };
        f.helm_releases = vec![release("node-feature-discovery", "node-feature-discovery")];
        assert!(nfd_enabled(&f).0, "EI's own release");
        f.helm_releases = vec![release("kube-system", "node-feature-discovery")];
        assert!(!nfd_enabled(&f).0, "the right name in another namespace is not what EI checks");
        f.helm_releases = vec![release("node-feature-discovery", "nfd")];
        assert!(!nfd_enabled(&f).0, "release nfd");
        f.helm_releases.clear();
        f.daemonsets = desktop().daemonsets;
        assert!(!nfd_enabled(&f).0, "k3s addon");
        f.daemonsets.retain(|d| d.name.starts_with("node-feature"));
        f.daemonsets[0].annotations.clear();
        assert!(!nfd_enabled(&f).0, "plain manifests, no release");
    }

    #[test]
    fn nodes_that_disagree_on_cni_are_refused() {
        let mut f = desktop();
        let mut other = f.nodes[0].clone();
        other.name = "agent-0".into();
        other.containerd.as_mut().unwrap().cni_bin_dirs = vec!["/opt/cni/bin".into()];
        f.nodes.push(other);
        match decide_on(&f, "agent-toolkit", None) {
            Err(Rejection::Refused(r)) => assert!(r.iter().any(|l| l.contains("disagree")), "{r:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn kv_cache_equal_to_the_catalog_is_kept_and_lower_is_applied() {
        let mut f = desktop();
        let fit = f.fit.as_mut().unwrap();
        fit.candidates.get_mut("qwen2-5-coder-7b").unwrap().env.insert(facts::KV_CACHE_ENV.into(), "40".into());
        let d = decide_on(&f, "agent-toolkit", None).unwrap();
        let e = &d.model_edits[0];
        assert!(e.env.is_empty() && e.args_append.is_empty(), "{:?}", d.model_edits);
        // 15.23 GB of weights + 2 GiB headroom → 17, + the built-in 40 GiB cache: 57 GiB > 16.
        assert_eq!(e.memory.as_deref(), Some("57Gi"));
        let mut f = desktop();
        let fit = f.fit.as_mut().unwrap();
        fit.candidates.get_mut("qwen2-5-coder-7b").unwrap().env.insert(facts::KV_CACHE_ENV.into(), "39.5".into());
        let d = decide_on(&f, "agent-toolkit", None).unwrap();
        assert_eq!(d.model_edits[0].env, vec![(facts::KV_CACHE_ENV.to_string(), "39".to_string())]);
        assert!(d.model_edits[0].args_append.is_empty(), "32768 × 56 KiB fits 39 GiB: no --max-model-len");
    }

    #[test]
    fn both_layers_deploy_their_pick_through_eis_path() {
        let d = decide_on(&desktop(), "inference", None).unwrap();
        assert!(d.overrides.iter().all(|(k, _)| *k != "agent_sandbox_enabled" && *k != "agent_toolkit_models"));
        assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
        let auto: Vec<&str> = d.model_edits.iter().filter(|e| e.autodeploy).map(|e| e.name.as_str()).collect();
        assert_eq!(auto.len(), 1, "{:?}", d.model_edits);
        let d = decide_on(&desktop(), "inference", Some("llama-3-1-8b")).unwrap();
        assert!(d.model_edits.iter().any(|e| e.name == "llama-3-1-8b" && e.autodeploy), "{:?}", d.model_edits);
        assert!(matches!(decide_on(&desktop(), "inference", Some("nope")), Err(Rejection::BadInput { .. })));
        // agent-toolkit: no stored EAT file reads agent_toolkit_models, so EI's path deploys the
        // pick and the EAT key is written only as a defensive one.
        let d = decide_on(&desktop(), "agent-toolkit", None).unwrap();
        assert_eq!(overrides(&d, "agent_sandbox_enabled"), Value::Bool(true));
        assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
        let auto: Vec<&str> = d.model_edits.iter().filter(|e| e.autodeploy).map(|e| e.name.as_str()).collect();
        assert_eq!(overrides(&d, "agent_toolkit_models"), Value::List(auto.iter().map(|s| s.to_string()).collect()));
        assert!(d.choices.iter().any(|c| c.fact.contains("not checked")), "{:#?}", d.choices);
    }

    #[test]
    fn a_reader_in_the_eat_tree_proves_eats_path_and_none_keeps_eis() {
        let d0 = decide_on(&desktop(), "agent-toolkit", None).unwrap();
        let mut d = d0.clone();
        super::super::model::prove_deploy_path(&mut d, &[], "intel/agent-toolkit@036b662");
        assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
        assert!(
            d.choices.iter().any(|c| c.fact.contains("no file of intel/agent-toolkit@036b662 reads")),
            "{:#?}",
            d.choices
        );
        assert!(d.model_edits.iter().any(|e| e.autodeploy));
        let mut d = d0.clone();
        super::super::model::prove_deploy_path(
            &mut d,
            &["roles/models/tasks/main.yaml".into()],
            "intel/agent-toolkit@036b662",
        );
        assert!(d.overrides.iter().all(|(k, _)| *k != "llm_services_deploy_models"), "{:?}", d.overrides);
        assert_eq!(overrides(&d, "agent_toolkit_models"), Value::List(vec!["qwen2-5-coder-7b".into()]));
        assert!(d.model_edits.iter().all(|e| !e.autodeploy), "{:?}", d.model_edits);
        assert!(d.model_edits.iter().any(|e| e.memory.is_some()), "the sizing edits stay: {:?}", d.model_edits);
        assert!(
            d.choices
                .iter()
                .any(|c| c.fact.contains("read by roles/models/tasks/main.yaml in intel/agent-toolkit@036b662")
                    && c.choice.starts_with("deploy path: EAT's")),
            "{:#?}",
            d.choices
        );
        let mut inf = decide_on(&desktop(), "inference", None).unwrap();
        let before = inf.clone();
        super::super::model::prove_deploy_path(&mut inf, &["x".into()], "a@b");
        assert_eq!(inf.choices, before.choices, "the inference layer keeps EI's path");
    }

    /// The real catalog's shape: category KV cache and memory, other names beside eas's candidates.
    const CATALOG: &str = "models:\n  - name: qwen3-0-6b\n    model_id: Qwen/Qwen3-0.6B\n    category: llm\n  - name: coder\n    model_id: Qwen/Qwen2.5-Coder-7B-Instruct\n    category: llm\n  - name: llama-3-1-8b\n    model_id: meta-llama/Llama-3.1-8B-Instruct\n    category: llm\n    env: {VLLM_CPU_KVCACHE_SPACE: \"20\"}\n  - name: bge\n    model_id: BAAI/bge\n    category: embed\nruntimes:\n  vllm:\n    categories:\n      llm:\n        env: {VLLM_CPU_KVCACHE_SPACE: \"${KV_CACHE_GB}\"}\n        defaults: {memory: 16Gi, kv_cache_gb: 8}\n";

    fn with_catalog(f: &Facts, layer: &str, model: Option<&str>, text: &str) -> Result<Decision, Rejection> {
        let pins = crate::pins::Pins::parse(crate::pins::EMBEDDED).unwrap();
        let trees = pins.trees("main").unwrap();
        let cat = super::super::catalog::Pinned {
            catalog: super::super::catalog::Catalog::parse(text).unwrap(),
            path: "model_manager/models.yaml".into(),
            at: "intel/enterprise-inference@abc1234".into(),
        };
        let targets = crate::config::fit::Target::for_catalog(Some(&cat.catalog));
        let fit = crate::config::fit::external::resolve(f, None, &targets).0;
        decide(&Inputs { facts: f, fit: Some(&fit), trees: &trees, layer, model, catalog: Some(&cat) })
    }

    #[test]
    fn the_catalog_decides_the_pick_and_its_kv_ceiling() {
        // desktop()'s fit sizes qwen2-5-coder-7b at 24 GiB: above the catalog's 8, so 8 is kept.
        // The entry is named `coder` here: the preference matches it by model_id.
        let mut f = desktop();
        f.nodes[0].capacity.insert("memory".into(), "100Gi".into());
        f.fit.as_mut().unwrap().candidates = std::mem::take(&mut f.fit.as_mut().unwrap().candidates)
            .into_iter()
            .map(|(k, v)| (k.replace("qwen2-5-coder-7b", "coder"), v))
            .collect();
        let d = with_catalog(&f, "agent-toolkit", None, CATALOG).unwrap();
        assert_eq!(overrides(&d, "agent_toolkit_models"), Value::List(vec!["coder".into()]));
        assert!(
            d.choices.iter().any(|c| c
                .choice
                .contains("model: coder (rule: preference, EAT's fallback qwen2-5-coder-7b by model_id)")),
            "{:#?}",
            d.choices
        );
        assert!(d.model_edits[0].env.is_empty(), "never raised over the category's 8 GiB: {:?}", d.model_edits);
        assert_eq!(d.model_edits[0].memory.as_deref(), Some("25Gi"), "17 GiB of weights and headroom + 8 GiB > 16Gi");
        assert!(d.choices.iter().any(|c| c.choice.contains("catalog's 8 GiB kept")), "{:#?}", d.choices);
        assert!(
            d.choices
                .iter()
                .any(|c| c.fact.contains("model_manager/models.yaml at intel/enterprise-inference@abc1234"))
        );
        // A lower fit figure is rounded down under the ceiling.
        let fit = f.fit.as_mut().unwrap();
        fit.candidates.get_mut("coder").unwrap().env.insert(facts::KV_CACHE_ENV.into(), "6.5".into());
        let d = with_catalog(&f, "agent-toolkit", None, CATALOG).unwrap();
        assert_eq!(d.model_edits[0].env, vec![(facts::KV_CACHE_ENV.to_string(), "6".to_string())]);
        // The per-model override is the ceiling for that entry; its 131072-token context needs
        // 16 GiB for one request, more than the cache: the largest power of two that fits.
        let d = with_catalog(&f, "agent-toolkit", Some("llama-3-1-8b"), CATALOG).unwrap();
        assert!(d.choices.iter().any(|c| c.fact.contains("< catalog 20")), "{:#?}", d.choices);
        let e = d.model_edits.iter().find(|e| e.name == "llama-3-1-8b").unwrap();
        // 16 GiB holds one 131072-token request exactly, but k3d-gpu fit sized it for 32768: fit wins.
        assert_eq!(e.args_append, vec!["--max-model-len".to_string(), "32768".to_string()], "{e:?}");
        let fit = f.fit.as_mut().unwrap();
        let llama = fit.candidates.get_mut("llama-3-1-8b").unwrap();
        llama.env.insert(facts::KV_CACHE_ENV.into(), "8".into());
        llama.args.clear();
        let d = with_catalog(&f, "agent-toolkit", Some("llama-3-1-8b"), CATALOG).unwrap();
        let e = d.model_edits.iter().find(|e| e.name == "llama-3-1-8b").unwrap();
        assert_eq!(e.args_append, vec!["--max-model-len".to_string(), "65536".to_string()], "16 GiB / 128 KiB");
        // Any LLM entry may be forced; an embed entry or an unknown name is refused.
        let d = with_catalog(&f, "inference", Some("qwen3-0-6b"), CATALOG).unwrap();
        assert!(d.model_edits.iter().any(|e| e.name == "qwen3-0-6b" && e.autodeploy));
        for bad in ["bge", "qwen2-5-coder-14b"] {
            match with_catalog(&f, "inference", Some(bad), CATALOG) {
                Err(Rejection::Refused(r)) => {
                    assert!(r[0].contains("its LLM entries: qwen3-0-6b, coder, llama-3-1-8b"), "{r:?}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn no_fit_is_refused_naming_each_entry_and_why() {
        let other = "models:\n  - name: qwen3-0-6b\n    model_id: Qwen/Qwen3-0.6B\n    category: llm\n  - name: llama3-8b-awq\n    model_id: casperhansen/llama-3-8b-instruct-awq\n    category: llm\n";
        let mut f = desktop();
        f.fit = None;
        match with_catalog(&f, "agent-toolkit", None, other) {
            Err(Rejection::Refused(r)) => {
                assert!(r[0].starts_with("no model of the EI catalog"), "{r:?}");
                assert!(
                    r[0].contains("qwen2-5-coder-14b (Qwen/Qwen2.5-Coder-14B-Instruct) is not in the catalog"),
                    "{r:?}"
                );
                assert!(r[0].contains("qwen3-0-6b: does not fit: architecture unknown"), "{r:?}");
                assert!(r[0].contains("llama3-8b-awq: does not fit: architecture unknown"), "{r:?}");
            }
            other => panic!("{other:?}"),
        }
        let d = with_catalog(&f, "agent-toolkit", Some("qwen3-0-6b"), other).unwrap();
        assert!(d.warnings.iter().any(|w| w.contains("architecture unknown")), "{:?}", d.warnings);
    }

    /// The synthetic EI catalog (the real entries plus PR #251's two): every pick, automatic and
    /// forced, on both layers and on nodes of 20 to 256 GiB, satisfies weights + KV + working
    /// headroom ≤ pod memory ≤ node budget, holds one request at the served context in its cache,
    /// and is deployed through EI's path with autodeploy on the pick only.
    #[test]
    fn every_pick_fits_its_pod_and_its_node() {
        let text = include_str!("../../fixtures/synthetic/ei/model_manager/models.yaml");
        let cat = super::super::catalog::Catalog::parse(text).unwrap();
        let models = data::models();
        for gib in [20u64, 24, 28, 32, 48, 64, 125, 256] {
            let mut f = desktop();
            f.fit = None;
            f.nodes[0].allocatable.insert("memory".into(), format!("{gib}Gi"));
            f.nodes[0].capacity.insert("memory".into(), format!("{gib}Gi"));
            let budget = crate::config::fit::budget(&f).unwrap().budget_bytes;
            let mut forced: Vec<Option<&str>> = vec![None];
            forced.extend(cat.llms().filter(|e| e.runtime == "vllm").map(|e| Some(e.name.as_str())));
            for layer in ["inference", "agent-toolkit"] {
                for m in &forced {
                    let d = match with_catalog(&f, layer, *m, text) {
                        Ok(d) => d,
                        Err(Rejection::Refused(r)) if m.is_none() => {
                            assert!(gib <= 20, "{gib} GiB: refused although an entry fits: {r:?}");
                            continue;
                        }
                        Err(e) => panic!("{gib} GiB {layer} {m:?}: {e:?}"),
                    };
                    assert_eq!(overrides(&d, "llm_services_deploy_models"), Value::Bool(true));
                    let auto: Vec<&ModelEdit> = d.model_edits.iter().filter(|e| e.autodeploy).collect();
                    assert_eq!(auto.len(), 1, "autodeploy on the pick only: {:?}", d.model_edits);
                    let e = auto[0];
                    let entry = cat.entry(&e.name).unwrap();
                    let Ok(arch) = models.architecture(&entry.model_id) else {
                        assert!(m.is_some(), "{gib} GiB: an unknown architecture was picked automatically");
                        continue;
                    };
                    let cache: u64 =
                        e.env.first().map(|(_, v)| v.parse().unwrap()).unwrap_or(entry.kv_cache_gib.unwrap() as u64);
                    let memory = e
                        .memory
                        .as_deref()
                        .map(|m| facts::parse_quantity(m).unwrap() as u64)
                        .or(entry.memory_bytes)
                        .unwrap();
                    let need = arch.weights_bytes() + cache * GIB + models.pod_headroom_gib * GIB;
                    let len = e.args_append.get(1).map(|l| l.parse().unwrap()).unwrap_or(arch.max_position_embeddings);
                    let what = format!("{gib} GiB {layer} {m:?} → {}: {:?}", e.name, d.model_edits);
                    if m.is_none() || need <= budget {
                        assert!(need <= memory, "{what}: weights + KV + headroom over the pod memory");
                        assert!(memory <= budget, "{what}: pod memory over the node budget");
                        assert!(len * arch.kv_bytes_per_token() <= cache * GIB, "{what}: one request does not fit");
                    } else {
                        assert!(
                            d.warnings.iter().any(|w| w.contains("more than the node's")),
                            "{what}: {:?}",
                            d.warnings
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn refusals_are_all_reported_together() {
        let mut f = desktop();
        f.namespaces.push("genai-gateway".into());
        f.nodes[0].annotations.insert(NODE_ARGS.into(), "[\"server\",\"--disable=servicelb\"]".into());
        match decide_on(&f, "erag", None) {
            Err(Rejection::Refused(r)) => assert_eq!(r.len(), 3, "{r:?}"),
            other => panic!("{other:?}"),
        }
    }
}
