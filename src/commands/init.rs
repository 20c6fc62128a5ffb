//! `eas init`: a commented eas.yaml (eas-config/v1) for the current cluster, from its facts and
//! `eas up`'s selection and node flags, every choice stated beside its key. It reads the
//! cluster (the facts, as `eas facts` does, without probe pods) and this cluster's record (what
//! the last install selected fills what init was not given, as in `eas up`), nothing else: no tree is
//! fetched, nothing is written to the cluster, and the installer's own `init` is not run. The
//! model is only a comment: eas's pick from the built-in candidates, since `eas up` picks from
//! the pinned EI catalog and keeps the installed model afterwards.

use std::path::{Path, PathBuf};

use crate::cli::InitArgs;
use crate::error::Failure;
use crate::facts::Facts;
use crate::output::Shell;
use crate::pipeline::settings::UpSettings;
use crate::settings::Global;
use crate::settings::init::{Choice, Value, render};
use crate::settings::source::{Source, Sources};

pub fn run(a: InitArgs, global: &Global, shell: &Shell) -> Result<(), Failure> {
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(crate::settings::file::DEFAULT_NAME));
    let to_stdout = out.as_os_str() == "-";
    // Refused before the cluster is read.
    if !to_stdout && out.exists() && !a.force {
        return Err(Failure::Refused(vec![format!(
            "{} exists: eas init does not overwrite it (add --force to replace it, or -o - to print the file)",
            out.display()
        )]));
    }
    let up = crate::cli::init(a, global)?;
    // What init was not given, the last install on this cluster gives, as `eas up` fills it once
    // preflight has identified the cluster: a file that declared the defaults instead would turn
    // an installed `inference` layer (or env, mirrors, base image) into a reconfiguration.
    let recorded = crate::runtime::block_on_interruptible(async { Ok::<_, Failure>(last_install(global).await) })?;
    let filled = match &recorded {
        Some(rec) => crate::pipeline::recorded::fill(&up, global, rec)?,
        None => None,
    };
    let (up, global) = match &filled {
        Some((a, g)) => (a.clone(), g),
        None => (up, global),
    };
    let facts = crate::gather::FactsSettings {
        out: None,
        containerd_config: up.gather.containerd_config.clone(),
        nri_socket: up.gather.nri_socket.clone(),
        // The file declares probing; init itself creates no pod.
        probe_nodes: false,
        request_timeout: crate::settings::timeouts::CALL,
        output: crate::output::OutputFormat::Text,
    };
    let read = crate::gather::read(&facts, global, shell, crate::config::fit::landing_node);
    let gathered = crate::runtime::block_on_interruptible(async { read.await.map_err(Failure::from) })?;
    let facts = gathered.facts;
    refuse_standing(&facts, &up, &out, shell)?;
    let model = model_line(&facts, &up);
    let choices = choices(&facts, &up, global, model);
    let text = render(&header(&facts), &choices);
    if to_stdout {
        print!("{text}");
    } else {
        crate::atomic::write(&out, text.as_bytes()).map_err(|e| {
            Failure::step_next(
                crate::plan::Step::Write,
                format!("cannot write {}: {e}", out.display()),
                "name a writable file with -o, or -o - to print it",
            )
        })?;
    }
    // Every choice, as the file states it.
    for c in &choices {
        let value = match &c.value {
            Some(Value::Scalar(v) | Value::Raw(v)) => format!(" {v}"),
            Some(Value::Nodes(n)) => {
                format!(" {}", n.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "))
            }
            Some(Value::Commented(v)) => format!(" {v} (as a comment)"),
            None => String::new(),
        };
        shell.note(format!("  {}{value}: {}", c.key, c.why.replace('\n', " ")));
    }
    let here = out == Path::new(crate::settings::file::DEFAULT_NAME);
    let (wrote, next) = match (to_stdout, here) {
        (true, _) => ("printed the file on stdout".to_string(), String::new()),
        (false, true) => (format!("wrote {}", out.display()), "; next: `eas up --dry-run` reads it".to_string()),
        (false, false) => {
            let config = crate::installer::command::shell_line(&[out.display().to_string()]);
            (format!("wrote {}", out.display()), format!("; next: `eas --config {config} up --dry-run`"))
        }
    };
    shell.note(format!("{wrote} (the cluster, the trees and the installer were not touched){next}"));
    Ok(())
}

/// The selection the last completed install on the current cluster recorded, if one is: read as
/// `eas status` finds the record (the kube-system namespace's uid keys the state directory). A
/// cluster that cannot be identified, or a record that cannot be read, gives none: init then
/// states the defaults, as before an install.
async fn last_install(global: &Global) -> Option<crate::state::selection::Selection> {
    let call = crate::settings::timeouts::CALL;
    let root = crate::state::run::state_root(global).ok()?;
    let target = crate::gather::target(global, call).await.ok()?;
    let key = target.cluster.cluster_key(call).await.ok()?;
    let sd = crate::state::StateDir::new(&root, &key).ok()?;
    crate::state::since::Completed::load(sd.dir()).ok().flatten()?.state.selection
}

/// A cluster `eas up` refuses whatever the file declares (EAT 1.x installed, not k3s, ServiceLB
/// off, a foreign agent-sandbox, an unknown CNI layout, a refused layer) gets no file: exit 3
/// with the plan's own `REFUSE:` lines, nothing written. A file there would only declare a run
/// that is refused, and no layer escapes these (the recorded cluster eat1: both layers are
/// refused for EAT 1.x's namespaces, SPEC §3.3). Containerd facts eas could not read are not
/// among them: the file's node keys or probing lift that, and its comment says so.
fn refuse_standing(facts: &Facts, up: &UpSettings, out: &Path, shell: &Shell) -> Result<(), Failure> {
    let reasons = crate::config::rules::standing_refusals(facts, &up.select.layer)
        .map_err(|r| Failure::from(crate::config::ConfigError::from(r)))?;
    if reasons.is_empty() {
        return Ok(());
    }
    let file =
        if out.as_os_str() == "-" { "no file".to_string() } else { format!("{} was not written", out.display()) };
    shell.note(format!("{file}: `eas up` refuses this cluster whatever eas.yaml declares, for each reason below"));
    Err(Failure::Refused(reasons))
}

fn header(f: &Facts) -> Vec<String> {
    let k3d = f.cluster.k3d_cluster.as_deref().map(|c| format!("k3d cluster {c}, ")).unwrap_or_default();
    let nodes = if f.nodes.len() == 1 { "1 node".to_string() } else { format!("{} nodes", f.nodes.len()) };
    vec![
        "eas.yaml: what `eas up`, `doctor`, `down`, `verify` and `status` select on this cluster".into(),
        "(schema eas-config/v1: `eas schema eas-config/v1`). Written by `eas init` from the facts".into(),
        format!("of context {} ({k3d}{nodes}, {}).", f.cluster.context, f.cluster.server_version),
        "A flag, then an environment variable, wins over a key here; the plan names each source.".into(),
        "Secrets are never here: HF_TOKEN and a proxy's password come from the environment.".into(),
    ]
}

/// eas's pick against the built-in candidates, as the comment's reason; or why there is none.
fn model_line(facts: &Facts, up: &UpSettings) -> (Option<String>, String) {
    let mut select = up.select.clone();
    select.model = None;
    match crate::config::generate_with(facts, &select, None) {
        Ok(d) => match d.choices.iter().find_map(|c| Some((c.choice.strip_prefix("model: ")?, &c.fact))) {
            Some((choice, fact)) => {
                let name = choice.split_whitespace().next().unwrap_or(choice).to_string();
                // The fact's first part names the node sized (the rest is the fit's arithmetic).
                let node = fact.split(';').next().unwrap_or(fact);
                (Some(name), format!("eas's pick from the built-in candidates: {choice}, for the {node}"))
            }
            None => (None, "no model is picked for this layer".into()),
        },
        Err(e) => (None, format!("no pick: {}", crate::text::for_people(&e.to_string()))),
    }
}

/// What the file says for `key`, from the source the setting resolved from.
fn stated(sources: &Sources, key: &str, default: &str) -> String {
    match sources.of(key) {
        Source::Flag(f) => format!("given with {f}"),
        Source::Env(v) => format!("from {v}"),
        Source::File(p) => format!("kept from {}", p.display()),
        Source::LastInstall => "from the last install".into(),
        Source::Default => default.into(),
    }
}

/// Each key, in the schema's order: written when the run sets it, else a comment saying what the
/// default is.
fn choices(f: &Facts, up: &UpSettings, global: &Global, (model, model_why): (Option<String>, String)) -> Vec<Choice> {
    let (g, s) = (&global.sources, &up.sources);
    let path =
        |p: &Path| Value::Scalar(std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string());
    let set = |key: &'static str, value: Option<Value>, why: String| Choice { key, value, why };
    let mut out = Vec::new();
    // The first step: which cluster, and where its runs are recorded.
    let kubeconfig = match g.of("kubeconfig") {
        Source::Env(_) => global.env.nonempty("KUBECONFIG").map(Value::Commented),
        _ => global.kubeconfig.as_deref().map(path),
    };
    let kube_default = "the default: $KUBECONFIG, else ~/.kube/config";
    out.push(set("kubeconfig", kubeconfig, stated(g, "kubeconfig", kube_default)));
    let k3d = f.cluster.k3d_cluster.as_deref().map(|c| format!(" (k3d cluster {c})")).unwrap_or_default();
    let context_why = format!("{}{k3d}", stated(g, "context", "the kubeconfig's current context"));
    out.push(set("context", Some(Value::Scalar(f.cluster.context.clone())), context_why));
    let state = global.state_dir.as_deref().map(path);
    let state_default = "the default: $XDG_STATE_HOME/eas, else ~/.local/state/eas";
    out.push(set("state_dir", state, stated(g, "state_dir", state_default)));
    // The selection.
    let layer_default =
        "the default: the Agent Toolkit on the inference layer (`inference`: the inference layer alone)";
    out.push(set("layer", Some(Value::Scalar(up.select.layer.to_string())), stated(s, "layer", layer_default)));
    let profile = up.select.profile.clone().map(Value::Scalar);
    out.push(set("profile", profile, stated(s, "profile", "the pins' main profile (or set ref: to an EAS commit)")));
    let git_ref = up.select.git_ref.clone().map(Value::Scalar);
    out.push(set("ref", git_ref, stated(s, "ref", "none: the profile's commits")));
    let model_why = match &up.select.model {
        Some(m) => format!("{m} was asked (--model); still a comment: uncomment it to serve {m} whatever the pick"),
        None => format!(
            "{model_why}.\n`eas up` picks from the pinned EI catalog and, after an install, keeps the installed model;\nuncomment to serve this model whatever the pick"
        ),
    };
    let model = up.select.model.clone().or(model).map(Value::Commented);
    out.push(set("model", model, model_why));
    let env_default = "the default: the installer's environment env/k3d-gpu/ in the EAS tree";
    out.push(set("env", Some(Value::Scalar(up.env.clone())), stated(s, "env", env_default)));
    let pins = match &up.select.pins {
        crate::pins::Source::User(p) => Some(Value::Commented(p.display().to_string())),
        p => p.path().map(path),
    };
    let pins_default = "the default: $EAS_PINS, else the user's pins file when it exists, else the pins built into eas";
    out.push(set("pins", pins, stated(s, "pins", pins_default)));
    let ca = global.ca_bundle.as_ref().map(|b| path(&b.path));
    let ca_default = "none: behind a TLS-intercepting proxy, name its CA bundle here";
    out.push(set("ca_bundle", ca, stated(g, "ca_bundle", ca_default)));
    let base = up.image.base_image.clone().map(Value::Scalar);
    out.push(set("base_image", base, stated(s, "base_image", "the pins' base-image row, pinned by digest")));
    // A switch is written when on, or when something said off (`--no-offline` over a file's
    // `true`); left to the default, a comment.
    let switch = |on: bool, key: &str| (on || s.is_set(key)).then(|| Value::Raw(on.to_string()));
    let unpinned = switch(up.image.allow_unpinned_base, "allow_unpinned_base");
    out.push(set(
        "allow_unpinned_base",
        unpinned,
        stated(s, "allow_unpinned_base", "off: the base image is pinned by digest"),
    ));
    // The node facts eas cannot read itself.
    let unread: Vec<&str> = f.nodes.iter().filter(|n| n.containerd.is_none()).map(|n| n.name.as_str()).collect();
    let nodes_default = match unread.as_slice() {
        [] => "none needed: eas read every node's containerd facts".to_string(),
        names => format!(
            "eas could not read the containerd facts of {}: give a copy of each config.toml here (`*`: every other node), or set probe: true",
            names.join(", ")
        ),
    };
    let pairs = |v: Vec<(String, String)>| (!v.is_empty()).then_some(Value::Nodes(v));
    let files = up.gather.containerd_config.iter().map(|n| {
        let file = std::path::absolute(&n.file).unwrap_or_else(|_| n.file.clone());
        (n.node.clone(), file.display().to_string())
    });
    out.push(set(
        "nodes.containerd_config",
        pairs(files.collect()),
        stated(s, "nodes.containerd_config", &nodes_default),
    ));
    let presence = |p: bool| if p { "present" } else { "absent" }.to_string();
    let sockets = up.gather.nri_socket.iter().map(|n| (n.node.clone(), presence(n.present))).collect();
    let nri_default = "the default: whether each given config enables NRI";
    out.push(set("nodes.nri_socket", pairs(sockets), stated(s, "nodes.nri_socket", nri_default)));
    let probe = switch(up.gather.probe_nodes, "nodes.probe");
    let probe_default = "off: no probe pod (eas up --probe-nodes creates a short-lived read-only pod per unread node)";
    out.push(set("nodes.probe", probe, stated(s, "nodes.probe", probe_default)));
    let offline = switch(up.offline, "offline");
    let offline_default = "off: Hugging Face and the registries the install needs are asked";
    out.push(set("offline", offline, stated(s, "offline", offline_default)));
    for (key, id) in
        [("timeouts.install", crate::plan::PhaseId::Install), ("timeouts.verify", crate::plan::PhaseId::Verify)]
    {
        let secs = up.phase_timeouts.get(id).as_secs();
        let value = s.is_set(key).then(|| Value::Raw(secs.to_string()));
        out.push(set(key, value, stated(s, key, &format!("the default: {secs} s"))));
    }
    let mirrors =
        [("mirrors.eas", &up.repos.eas_repo), ("mirrors.ei", &up.repos.ei_repo), ("mirrors.eat", &up.repos.eat_repo)];
    for (key, mirror) in mirrors {
        let default = "none: eas fetches the pinned commit";
        out.push(set(key, mirror.as_deref().map(path), stated(s, key, default)));
    }
    out
}
