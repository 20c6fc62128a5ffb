//! Runs remember their inputs (issue 32, item 3): the selection an install resolved is kept in
//! its record ([`selection`], `state::selection`), and a later run fills what it left unset from
//! the last completed install's once preflight's plan half has identified the cluster ([`fill`]),
//! before any phase that reads those settings: the node files or probing (facts), the base image
//! and the CA bundle (the bastion image), the trees' mirrors (trees), offline (config), and the
//! layer, env, profile or ref (the selection). Each filled setting is named `(from the last
//! install)` in the plan's settings; one that changed since is named in "since the last up" with
//! where its value came from ([`changed`]).
//!
//! The selection is re-resolved once the record is read ([`after_preflight`]): the run resolves
//! it first from its flags, the environment and the config file alone (bad input is found before
//! anything is read, and `--model` is checked against the pinned catalog before the cluster), and
//! only preflight's plan half can say which cluster, hence which record, the run is on (its key
//! is the `kube-system` namespace's uid). When the record fills any of the four, the pins' trees,
//! the selection's checks, the plan's and the record's layer, env, profile and commits, and the
//! commands printed for the next run are made again from the filled selection, before any later
//! phase reads them. Not filled: `--model` (the installed model is kept by the pick itself,
//! `config::model`'s `kept`), and nothing of the selection when a saved plan is applied (`--plan
//! DIR` runs with the plan's own).

use std::path::Path;

use crate::error::Failure;
use crate::pins::Trees;
use crate::pipeline::phase::Cx;
use crate::pipeline::phases::preflight::{Pre, start_egress};
use crate::pipeline::runner::Runner;
use crate::pipeline::settings::UpSettings;
use crate::settings::source::Source;
use crate::settings::{CaBundle, Global, NodeFile, NodeSocket};
use crate::state::resume::{Invocation, invocation};
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
    for (key, on) in SWITCHES.into_iter().zip([g.probe_nodes, args.image.allow_unpinned_base, args.offline]) {
        if on {
            s.insert(key.to_string(), true.into());
        }
    }
    s
}

/// The keys that are switches: kept in the record when on, and off when absent.
const SWITCHES: [&str; 3] = ["nodes.probe", "allow_unpinned_base", "offline"];

/// The selection filled after preflight: what picks the pins' trees and the installer's
/// environment. `profile` and `ref` are one choice of trees: filled only when neither is set.
pub const SELECTED: [&str; 4] = ["layer", "env", "profile", "ref"];

/// This run's settings with what it left unset (neither a flag, the environment nor the config
/// file set it) filled from `rec`, each named `(from the last install)` in the sources; `None`
/// when nothing was. A recorded value that no longer reads (a CA bundle gone) is bad input
/// naming it.
pub fn fill(args: &UpSettings, global: &Global, rec: &Selection) -> Result<Option<(UpSettings, Global)>, Failure> {
    let (mut a, mut g) = (args.clone(), global.clone());
    let mut filled = fill_selection(&mut a, rec)?;
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

/// The layer, env and profile or ref left unset, filled from `rec` into `a` (named `(from the last
/// install)`); whether any was. A saved plan's selection is its own. A recorded layer this eas no
/// longer reads is bad input naming it.
fn fill_selection(a: &mut UpSettings, rec: &Selection) -> Result<bool, Failure> {
    if a.saved.is_some() {
        return Ok(false);
    }
    let trees_set = a.sources.is_set("profile") || a.sources.is_set("ref");
    let mut filled = false;
    for key in SELECTED {
        let v = values(rec, key);
        let set = if matches!(key, "profile" | "ref") { trees_set } else { a.sources.is_set(key) };
        let Some(one) = v.first().filter(|_| !set).cloned() else { continue };
        match key {
            "layer" => {
                let refused = |name: &str| crate::config::data::layers().refused.contains_key(name);
                a.select.layer = crate::settings::Layer::parse(&one, refused).map_err(|e| {
                    Failure::bad_input(format!("layer from the last install: {e}"), "give --layer again")
                })?
            }
            "env" => a.env = one.clone(),
            "profile" => a.select.profile = Some(one.clone()),
            _ => a.select.git_ref = Some(one.clone()),
        }
        a.sources.set(key, one, Source::LastInstall);
        filled = true;
    }
    Ok(filled)
}

/// The settings that differ between the last install's selection and this run's, one line each
/// for "since the last up": `setting KEY FROM -> TO (from WHERE)`; `source` names where this
/// run's value of a key came from.
pub fn changed(was: &Selection, now: &Selection, source: impl Fn(&str) -> String) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = was.keys().chain(now.keys()).collect();
    keys.into_iter()
        .filter(|k| k.as_str() != "model" && was.get(*k) != now.get(*k))
        .map(|k| {
            // A switch is recorded only when on: absent is off.
            let off = if SWITCHES.contains(&k.as_str()) { "false" } else { "(not set)" };
            let side = |s: &Selection| shown(s, k).unwrap_or_else(|| off.into());
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

/// The settings of a run with what it left unset filled from the last install's selection, and
/// the pins' trees and next commands of the selection as filled.
pub struct Filled {
    pub args: UpSettings,
    pub global: Global,
    pub tree_pins: Trees,
    pub inv: Invocation,
}

impl Filled {
    /// `cx` reading these settings.
    pub fn cx<'a>(&'a self, cx: &Cx<'a>) -> Cx<'a> {
        Cx { args: &self.args, global: &self.global, tree_pins: &self.tree_pins, inv: &self.inv, ..cx.clone() }
    }
}

/// After preflight's plan half: the last completed install on this cluster (`pre.sd`), if any,
/// fills what this run left unset, and the plan names each `(from the last install)`. A filled
/// layer, env, profile or ref is re-resolved ([`crate::pipeline::selected::reselect`]); a filled
/// profile or offline starts the egress probe again for the hosts it now needs (or stops it).
/// The run's record keeps the selection as resolved, filled values included, and the plan its
/// settings, each with its source (written here once, filled or not). A record that
/// cannot be read fills nothing (the lock's plan half names its damage).
pub async fn after_preflight(cx: &Cx<'_>, pre: &mut Pre, r: &mut Runner) -> Result<Option<Box<Filled>>, Failure> {
    let (args, global) = (cx.args, cx.global);
    let rec = Completed::load(pre.sd.dir()).ok().flatten().and_then(|c| c.state.selection);
    let filled = match &rec {
        Some(rec) => fill(args, global, rec)?,
        None => None,
    };
    let Some((args, global)) = filled else {
        resolved(args, global, r);
        return Ok(None);
    };
    let (tree_pins, inv) = if SELECTED.iter().any(|k| args.sources.of(k) == Source::LastInstall) {
        let tree_pins = crate::pipeline::selected::reselect(&args, cx, r).await?;
        let inv = invocation(&global, &args.select.layer, &args.env, &args.select);
        (tree_pins, Invocation { typed: cx.inv.typed.clone(), secrets: cx.inv.secrets.clone(), ..inv })
    } else {
        (cx.tree_pins.clone(), cx.inv.clone())
    };
    resolved(&args, &global, r);
    let filled = Filled { args, global, tree_pins, inv };
    let (was, now) = (&cx.args, &filled.args);
    if was.offline != now.offline || was.select.profile != now.select.profile {
        pre.egress = start_egress(&filled.cx(cx));
    }
    Ok(Some(Box::new(filled)))
}

/// The settings as resolved after preflight: the plan's, each with its source, and the
/// selection in the run's record.
fn resolved(args: &UpSettings, global: &Global, r: &mut Runner) {
    r.plan_run().settings(global.sources.chain(&args.sources));
    r.journal().selected(selection(args, global));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::Fixture;

    /// A record as an install of the inference layer on another env, at a ref, keeps it: `prod`,
    /// the env the installer's own usage names beside its default `local` (`init prod`, `install
    /// --env prod platform`: intel/enterprise-ai-solutions es_auto_installer.sh `usage()` at
    /// d274207648a827cb231cd7982bec6341d729ef08).
    fn record() -> Selection {
        let sha = "6595087de122cf642d35c42c9a1189985820af4a";
        serde_json::from_value(serde_json::json!({"layer": "inference", "env": "prod", "ref": sha})).unwrap()
    }

    #[test]
    fn the_layer_env_and_trees_left_unset_are_filled_from_the_last_install_and_named() {
        let f = Fixture::new();
        let (a, _) = fill(&f.args, &f.global, &record()).unwrap().expect("filled");
        assert_eq!((a.select.layer.to_string(), a.env.as_str()), ("inference".to_string(), "prod"));
        assert_eq!(a.select.git_ref.as_deref(), Some("6595087de122cf642d35c42c9a1189985820af4a"));
        for key in ["layer", "env", "ref"] {
            assert_eq!(a.sources.of(key), Source::LastInstall, "{key}");
        }
        assert!(!a.sources.is_set("profile"), "the record named no profile");
    }

    #[test]
    fn a_setting_given_now_is_kept_and_a_profile_given_now_replaces_the_recorded_ref() {
        let mut f = Fixture::new();
        f.args.select.profile = Some("next".into());
        f.args.sources.set("profile", "next", Source::Flag("--profile"));
        f.args.sources.set("layer", "agent-toolkit", Source::Flag("--layer"));
        let (a, _) = fill(&f.args, &f.global, &record()).unwrap().expect("the env is filled");
        assert_eq!(a.select.layer.to_string(), "agent-toolkit");
        assert_eq!((a.select.profile.as_deref(), a.select.git_ref.as_deref()), (Some("next"), None));
        assert_eq!((a.sources.of("layer"), a.sources.of("env")), (Source::Flag("--layer"), Source::LastInstall));
    }

    #[test]
    fn a_switch_turned_off_since_the_install_reads_true_to_false_and_a_new_mirror_from_not_set() {
        let was: Selection =
            serde_json::from_value(serde_json::json!({"offline": true, "layer": "inference"})).unwrap();
        let now: Selection =
            serde_json::from_value(serde_json::json!({"layer": "inference", "mirrors.eas": "/m/eas"})).unwrap();
        let lines = changed(&was, &now, |k| format!("--{k}"));
        assert_eq!(
            lines,
            [
                "setting mirrors.eas (not set) -> /m/eas (from --mirrors.eas)",
                "setting offline true -> false (from --offline)"
            ]
        );
    }

    #[test]
    fn a_recorded_layer_this_eas_does_not_read_is_bad_input_naming_it() {
        let f = Fixture::new();
        let rec = serde_json::from_value(serde_json::json!({"layer": "infrence"})).unwrap();
        let e = fill(&f.args, &f.global, &rec).expect_err("bad input");
        assert_eq!(e.exit_code(), 2);
        assert!(e.lines()[0].contains("layer from the last install"), "{:?}", e.lines());
    }
}
