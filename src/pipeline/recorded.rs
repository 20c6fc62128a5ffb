//! Runs remember their inputs (issue 32, item 3): the selection an install resolved is kept in
//! its record ([`selection`], `state::selection`), and a later run fills what it left unset from
//! the last completed install's once preflight's plan half has identified the cluster ([`fill`]),
//! before any phase that reads those settings: the node files or probing (facts), the base image
//! and the CA bundle (the bastion image), the trees' mirrors (trees), offline (config). Each
//! filled setting is named `(from the last install)` in the plan's decisions; one that changed
//! since is named in "since the last up" with where its value came from ([`changed`]).
//!
//! Not filled here: the layer, env, profile or ref, which decide the pins' trees and the run's
//! record before the cluster is read, and `--model` (the installed model is kept by the pick
//! itself, `config::model`'s `kept`).

use std::path::Path;

use crate::error::Failure;
use crate::pipeline::phase::Cx;
use crate::pipeline::runner::Runner;
use crate::pipeline::settings::UpSettings;
use crate::settings::source::Source;
use crate::settings::{CaBundle, Global, NodeFile, NodeSocket};
use crate::state::StateDir;
use crate::state::selection::{Selection, flag_of, shown, values};
use crate::state::since::Completed;

/// The settings filled after preflight, keyed as `eas.yaml` spells them.
pub const FILLED: [&str; 10] = [
    "nodes.containerd_config",
    "nodes.nri_socket",
    "nodes.probe",
    "base_image",
    "allow_unpinned_base",
    "ca_bundle",
    "mirrors.eas",
    "mirrors.ei",
    "mirrors.eat",
    "offline",
];

/// The selection this run resolved, as its record keeps it: never a secret, never the pins;
/// paths made absolute, so a later run from another directory finds them.
pub fn selection(args: &UpSettings, global: &Global) -> Selection {
    let mut s = Selection::new();
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string();
    let mut text = |key: &str, v: Option<String>| {
        if let Some(v) = v {
            s.insert(key.to_string(), v.into());
        }
    };
    text("layer", Some(args.select.layer.to_string()));
    text("env", Some(args.env.clone()));
    text("profile", args.select.profile.clone());
    text("ref", args.select.git_ref.clone());
    text("model", args.select.model.clone());
    text("base_image", args.image.base_image.clone());
    text("ca_bundle", global.ca_bundle.as_ref().map(|b| abs(&b.path)));
    let repos = &args.repos;
    for (key, repo) in
        [("mirrors.eas", &repos.eas_repo), ("mirrors.ei", &repos.ei_repo), ("mirrors.eat", &repos.eat_repo)]
    {
        text(key, repo.as_deref().map(abs));
    }
    let g = &args.gather;
    let files: Vec<String> = g.containerd_config.iter().map(|f| format!("{}={}", f.node, abs(&f.file))).collect();
    let sockets: Vec<String> =
        g.nri_socket.iter().map(|n| format!("{}={}", n.node, if n.present { "present" } else { "absent" })).collect();
    for (key, list) in [("nodes.containerd_config", files), ("nodes.nri_socket", sockets)] {
        if !list.is_empty() {
            s.insert(key.to_string(), list.into());
        }
    }
    for (key, on) in [
        ("nodes.probe", g.probe_nodes),
        ("allow_unpinned_base", args.image.allow_unpinned_base),
        ("offline", args.offline),
    ] {
        if on {
            s.insert(key.to_string(), true.into());
        }
    }
    s
}

/// This run's settings with what it left unset (neither a flag, the environment nor the config
/// file set it) filled from `rec`, each named `(from the last install)` in the sources; `None`
/// when nothing was. A recorded value that no longer reads (a CA bundle gone) is bad input
/// naming it.
pub fn fill(args: &UpSettings, global: &Global, rec: &Selection) -> Result<Option<(UpSettings, Global)>, Failure> {
    let (mut a, mut g) = (args.clone(), global.clone());
    let mut filled = false;
    for key in FILLED {
        let v = values(rec, key);
        if v.is_empty() || args.sources.is_set(key) || global.sources.is_set(key) {
            continue;
        }
        let one = || v[0].clone();
        let bad = |e: String| {
            Failure::bad_input(format!("{key} from the last install: {e}"), format!("give {} again", flag_of(key)))
        };
        match key {
            "nodes.containerd_config" => {
                a.gather.containerd_config =
                    v.iter().map(|s| NodeFile::parse(s)).collect::<Result<_, _>>().map_err(bad)?
            }
            "nodes.nri_socket" => {
                a.gather.nri_socket = v.iter().map(|s| NodeSocket::parse(s)).collect::<Result<_, _>>().map_err(bad)?
            }
            "nodes.probe" => a.gather.probe_nodes = true,
            "base_image" => a.image.base_image = Some(one()),
            "allow_unpinned_base" => a.image.allow_unpinned_base = true,
            "ca_bundle" => g.ca_bundle = Some(CaBundle::load(Path::new(&one())).map_err(bad)?),
            "mirrors.eas" => a.repos.eas_repo = Some(one().into()),
            "mirrors.ei" => a.repos.ei_repo = Some(one().into()),
            "mirrors.eat" => a.repos.eat_repo = Some(one().into()),
            _ => a.offline = true,
        }
        let sources = if key == "ca_bundle" { &mut g.sources } else { &mut a.sources };
        sources.set(key, shown(rec, key).unwrap_or_default(), Source::LastInstall);
        filled = true;
    }
    Ok(filled.then_some((a, g)))
}

/// The settings that differ between the last install's selection and this run's, one line each
/// for "since the last up": `setting KEY FROM -> TO (from WHERE)`; `source` names where this
/// run's value of a key came from.
pub fn changed(was: &Selection, now: &Selection, source: impl Fn(&str) -> String) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = was.keys().chain(now.keys()).collect();
    keys.into_iter()
        .filter(|k| k.as_str() != "model" && was.get(*k) != now.get(*k))
        .map(|k| {
            let side = |s: &Selection| shown(s, k).unwrap_or_else(|| "(not set)".into());
            format!("setting {k} {} -> {} (from {})", side(was), side(now), source(k))
        })
        .collect()
}

/// Where this run's value of `key` came from, as "since the last up" names it.
pub fn source_of(args: &UpSettings, global: &Global, key: &str) -> String {
    let source = match args.sources.of(key) {
        Source::Default => global.sources.of(key),
        s => s,
    };
    source.name().unwrap_or_else(|| "the defaults".into())
}

/// The settings of a run with what it left unset filled from the last install's selection.
pub struct Filled {
    pub args: UpSettings,
    pub global: Global,
}

impl Filled {
    /// `cx` reading these settings.
    pub fn cx<'a>(&'a self, cx: &Cx<'a>) -> Cx<'a> {
        Cx { args: &self.args, global: &self.global, ..cx.clone() }
    }
}

/// After preflight's plan half: the last completed install on this cluster (`sd`), if any, fills
/// what this run left unset, and the plan names each `(from the last install)`. The run's record
/// keeps the selection as resolved, filled values included. A record that cannot be read fills
/// nothing (the lock's plan half names its damage).
pub fn after_preflight(cx: &Cx<'_>, sd: &StateDir, r: &mut Runner) -> Result<Option<Box<Filled>>, Failure> {
    let (args, global) = (cx.args, cx.global);
    let rec = Completed::load(sd.dir()).ok().flatten().and_then(|c| c.state.selection);
    let filled = match &rec {
        Some(rec) => fill(args, global, rec)?,
        None => None,
    };
    let Some((args, global)) = filled else {
        r.journal().selected(selection(args, global));
        return Ok(None);
    };
    r.plan_doc_mut().settings = global.sources.chain(&args.sources);
    r.journal().selected(selection(&args, &global));
    Ok(Some(Box::new(Filled { args, global })))
}
