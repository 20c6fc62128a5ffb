//! The run's selection (layer, env, the pins' trees, `--model`), checked and made the run's: once
//! from the flags, the environment and the config file before the cluster is read
//! (`crate::pipeline::up`), and again when the last install on the cluster preflight identified
//! fills any of it ([`reselect`], from `crate::pipeline::recorded::after_preflight`).

use crate::config;
use crate::error::Failure;
use crate::installer::command as argv;
use crate::pins::Trees;
use crate::pipeline::phase::Cx;
use crate::pipeline::runner::Runner;
use crate::pipeline::services::Services;
use crate::pipeline::settings::UpSettings;
use crate::plan::Selected;
use crate::state::journal::{PinsRecord, RunInfo};

/// The selection's own checks (the layer and `--model`, the installer's environment), and the
/// pins' trees it selects.
pub(crate) fn selected(args: &UpSettings, services: &Services) -> Result<Trees, Failure> {
    let layer = &args.select.layer;
    let tree_pins = config::trees_in(&services.pins, &args.select)?;
    // The EI catalog at the pinned commit decides --model later (read after the trees phase).
    let with_catalog = crate::gather::catalog::catalog_path(layer).is_some();
    config::rules::selection(layer, args.select.model.as_deref(), with_catalog).map_err(|r| match r {
        config::rules::Rejection::BadInput { cause, hint } => Failure::bad_input(cause, hint),
        config::rules::Rejection::Refused(reasons) => Failure::Refused(reasons),
    })?;
    argv::init_argv(layer, &args.env)?;
    Ok(tree_pins)
}

/// The selection the last install filled after preflight (`recorded::after_preflight`), made
/// the run's: its checks and its pins' trees, in the record and the plan, as [`crate::pipeline::up::runner`] made
/// them from the selection resolved before the cluster was read. Returns the trees.
pub async fn reselect(args: &UpSettings, cx: &Cx<'_>, r: &mut Runner) -> Result<Trees, Failure> {
    let tree_pins = selected(args, cx.services)?;
    r.journal().reselected(&run_info(args, &tree_pins));
    r.plan_run().select(plan_selected(args, &tree_pins));
    // --model against the catalog of the layer and EI commit the run now installs.
    let moved = args.select.layer != cx.args.select.layer || tree_pins.ei.sha != cx.tree_pins.ei.sha;
    let model = args.select.model.as_deref().filter(|_| moved);
    crate::pipeline::phases::trees::model_before_cluster(model, &args.select.layer, &tree_pins, args, cx.global, r)
        .await?;
    Ok(tree_pins)
}

/// What identifies the run in its record: its layer, env and pins (the cluster once preflight
/// has read it).
pub(crate) fn run_info(args: &UpSettings, tree_pins: &Trees) -> RunInfo {
    let pins = [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)];
    RunInfo {
        cluster_key: String::new(),
        context: String::new(),
        layer: args.select.layer.to_string(),
        env: args.env.clone(),
        pins: PinsRecord {
            profile: tree_pins.profile.clone(),
            shas: pins.into_iter().map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_default())).collect(),
        },
    }
}

/// The plan's selection: layer, env, the trees' profile and commits, the pins' source.
pub(crate) fn plan_selected(args: &UpSettings, tree_pins: &Trees) -> Selected {
    Selected {
        layer: args.select.layer.to_string(),
        env: args.env.clone(),
        profile: tree_pins.profile.clone(),
        pins_source: args.select.pins.label(),
        selection: Some(selection(args)),
        commits: [("eas", &tree_pins.eas), ("ei", &tree_pins.ei), ("eat", &tree_pins.eat)]
            .into_iter()
            .map(|(n, p)| (n.to_string(), p.sha.clone().unwrap_or_else(|| p.git_ref.clone())))
            .collect(),
    }
}

/// The run's selection as the plan records it: what `eas up --plan DIR` runs with again.
fn selection(args: &UpSettings) -> crate::plan::saved::Selection {
    let s = &args.select;
    let path = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string();
    let values = [
        Some(s.layer.to_string()),
        Some(args.env.clone()),
        s.profile.clone(),
        s.git_ref.clone(),
        s.model.clone(),
        s.pins.path().map(path),
        s.fit.as_deref().map(path),
    ];
    let chosen = crate::plan::saved::SELECTION.iter().map(|n| n.to_string()).zip(values).collect();
    crate::plan::saved::Selection { chosen, repick: s.repick }
}
