//! The plan halves of `eas up`, in the order the run meets them: lock, preflight, then the
//! bastion image's plan, the facts and the upstream trees at once, then config and the overlay,
//! decided once on the run's one EAS tree. They read and decide; none writes to the cluster, the
//! clone's work tree or the state file. Each check that fails is a blocker (the runner collects
//! it) and the checks after it still run where they do not depend on it; only an unreadable
//! cluster (its identity, its facts) ends the plan, since nothing after it could be decided.

use std::time::Duration;

use crate::bastion;
use crate::config::{self, render};
use crate::error::Failure;
use crate::facts::Facts;
use crate::gather;
use crate::installer::command as argv;
use crate::output::Shell;
use crate::pins::Trees;
use crate::pipeline::{FactsSummary, ImageAction, ImagePlan, PhaseId, PlanDecision, PlannedCommand};
use crate::settings::Global;
use crate::state::journal::State;
use crate::state::resume::Invocation;
use crate::state::{StateDir, lock};

use super::runner::Runner;
use super::{CALL, Resolved, UpSettings, catalog, cluster, knob_audit, state_root};

/// What the lock and preflight plan halves established.
pub struct Preflight {
    pub target: gather::kube::Target,
    pub sd: StateDir,
    pub docker: Option<bollard::Docker>,
    /// The install record (`state.json`) as the plan read it.
    pub latest: Option<State>,
    /// The last completed run, which this run is compared with (`crate::up::day_two`).
    pub last: Option<crate::state::since::Completed>,
    /// The egress probe, started first so that it overlaps the rest of the plan; `None` with
    /// `--offline` (or once its answers are taken).
    pub egress: Option<Egress>,
}

/// The egress probe in flight (`prereq::egress`), and how it reaches the hosts, for its line.
/// Dropped unfinished (an interrupted plan), it is aborted.
pub struct Egress {
    task: Option<tokio::task::JoinHandle<Vec<(crate::prereq::egress::Host, crate::prereq::egress::Answer)>>>,
    through: String,
}

impl Drop for Egress {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// Starts the egress probe with the proxy settings the bastion gets, unless `--offline`.
fn start_egress(args: &UpSettings, global: &Global) -> Option<Egress> {
    use crate::prereq::egress;
    if args.offline {
        return None;
    }
    let env = &global.env;
    let proxy = crate::net::proxy::ProxyEnv::from_lookup(env.lookup());
    let hosts = egress::hosts(args.select.profile.as_deref().unwrap_or("main"), env.var(egress::OVERRIDE).as_deref());
    let through = match hosts.first().map(|h| crate::net::proxy::route_for(&h.url, &proxy, None)) {
        Some(Ok(Some(route))) => format!("through {route}"),
        _ => "directly".to_string(),
    };
    let roots = global.ca_bundle.as_ref().map(|b| b.ders.clone()).unwrap_or_default();
    let d = crate::net::download::Downloader::with_timeouts(&roots, proxy, egress::CONNECT, egress::TOTAL).ok()?;
    let task = tokio::spawn(async move { egress::probe(&d, &hosts).await });
    Some(Egress { task: Some(task), through })
}

impl Egress {
    /// The probe's line; a probe that failed to run is a warning with its cause.
    pub async fn check(mut self) -> crate::prereq::Check {
        let Some(task) = self.task.take() else { return crate::prereq::egress::check(Some(&[]), &self.through) };
        match task.await {
            Ok(answers) => crate::prereq::egress::check(Some(&answers), &self.through),
            Err(e) => crate::prereq::egress::check(Some(&[]), &format!("(the probe failed: {e})")),
        }
    }
}

/// Everything the plan halves settled; what a phase could not settle is `None` and a blocker
/// says why ([`Planned::ready`] turns it into what the acts need).
pub struct Planned {
    pub pre: Preflight,
    pub facts: Facts,
    pub image: Option<bastion::ImagePlan>,
    pub decision: Option<config::Decision>,
    pub files: Vec<(String, String)>,
    /// The run's one EAS tree, the overlay decided on it; in a temporary directory until the
    /// act puts it in place.
    pub tree: Option<(tempfile::TempDir, crate::overlay::Plan)>,
    pub install: Vec<String>,
}

/// What the acts consume: present, because no plan half blocked.
pub struct Ready {
    pub pre: Preflight,
    pub docker: bollard::Docker,
    pub facts: Facts,
    pub image: bastion::ImagePlan,
    pub decision: config::Decision,
    pub files: Vec<(String, String)>,
    pub tree: (tempfile::TempDir, crate::overlay::Plan),
    pub install: Vec<String>,
}

impl Planned {
    /// The acts' inputs, once the plan has no blocker. A missing one without a blocker is a
    /// fault of eas's, reported as a failed step, never a panic.
    pub fn ready(self) -> Result<Ready, Failure> {
        let missing = |what: &str| Failure::step("plan", format!("no blocker was found, yet {what} was not planned"));
        let Planned { pre, facts, image, decision, files, tree, install } = self;
        Ok(Ready {
            docker: pre.docker.clone().ok_or_else(|| missing("the Docker Engine"))?,
            pre,
            facts,
            image: image.ok_or_else(|| missing("the bastion image"))?,
            decision: decision.ok_or_else(|| missing("the configuration"))?,
            files,
            tree: tree.ok_or_else(|| missing("the overlay"))?,
            install,
        })
    }
}

/// The preflight's failure to read the cluster's identity. When no answer came through a proxy,
/// the proxy is named (credentials masked) with what to check, as `eas facts` does.
fn identity_failure(target: &gather::kube::Target, e: cluster::KeyError) -> Failure {
    use gather::kube::ApiError;
    let (server, call, proxy) = (target.server.clone(), cluster::IDENTITY_CALL.to_string(), target.proxy.clone());
    let e = match (e, proxy.is_some()) {
        (cluster::KeyError::Unreachable(cause), true) => ApiError::Unreachable { server, call, cause, proxy },
        (cluster::KeyError::Timeout(secs), true) => ApiError::Timeout { server, call, secs, proxy },
        (e, _) => return Failure::step_next("preflight", e, "check the API server (`eas doctor`)"),
    };
    let next = e.next();
    Failure::step_next("preflight", e, next)
}

/// The lock as this run would meet it: held, stale, unreadable or another host's is a blocker
/// (with `--break-lock` a stale, unreadable or other host's lock is one the act takes over).
pub fn lock_blocker(sd: &StateDir, break_lock: bool) -> Result<(), Failure> {
    let path = sd.lock_file();
    let found = match lock::inspect(&path) {
        Ok(f) => f,
        Err(e) => {
            let hint = e.hint();
            return Err(Failure::step_next("lock", e, hint));
        }
    };
    let e = match found {
        None => return Ok(()),
        Some(lock::Found::Live(holder)) => lock::LockError::Held { path, holder },
        Some(_) if break_lock => return Ok(()),
        Some(lock::Found::Stale(h)) => lock::LockError::Stale { path, holder: h },
        Some(lock::Found::OtherHost(h)) => lock::LockError::OtherHost { path, holder: h },
        Some(lock::Found::Unreadable(msg)) => lock::LockError::Unreadable { path, msg },
    };
    let hint = e.hint();
    Err(Failure::step_next("lock", e, hint))
}

/// Docker and git, the host's part of preflight: each a blocker when it fails.
pub async fn host_checks(global: &Global) -> (Result<bollard::Docker, Failure>, Result<(), Failure>) {
    // Bounded as a whole (the connection's version negotiation included): a socket that accepts
    // and never answers is met in seconds, not at the build's timeout.
    let docker = bastion::image::engine(&global.env, crate::settings::timeouts::DOCKER_CALL)
        .await
        .map_err(|e| Failure::step_next("preflight", e, crate::hints::DOCKER));
    let git = crate::git::run(None, &["--version"], Duration::from_secs(10))
        .await
        .map(drop)
        .map_err(|e| Failure::step_next("preflight", e, "install git"));
    (docker, git)
}

/// Lock and preflight's plan halves. The cluster's identity must be read (it keys the state);
/// the lock, Docker and git become blockers when they fail.
pub async fn preflight(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    r: &mut Runner,
) -> Result<Preflight, Failure> {
    shell.phase("preflight", "reading the cluster's identity");
    let egress = start_egress(args, global);
    let (target, key) = r
        .plan_half(PhaseId::Preflight, async {
            let target = gather::target(global, CALL).await?;
            let key = cluster::identity(&target.client, CALL).await.map_err(|e| identity_failure(&target, e))?;
            Ok((target, key))
        })
        .await?;
    let sd = StateDir::new(&state_root(global)?, &key)?;
    r.state.cluster_key = key;
    r.state.context = target.context.clone();
    r.state.server = Some(target.server.clone());
    if !args.dry_run {
        r.attempt = Some(sd.dir().join(super::ATTEMPT));
    }
    // The lock's checks in one window of its plan timeout: the local lock, the cluster's Lease
    // (one run per cluster, whatever the state directory or host), the record the act will
    // resume from, which must be readable (the act re-reads it under the lock), and the last
    // completed run this one is classified against. Each failure is a blocker of its own; a
    // window that passes is one blocker naming the phase.
    let (client, break_lock) = (target.client.clone(), args.break_lock);
    let checks = r
        .plan_half(PhaseId::Lock, async {
            let locked = lock_blocker(&sd, break_lock);
            let lease = match super::lease::read(&client, CALL).await {
                Ok(found) => super::lease::blocker(&found, break_lock),
                Err(e) => Err(Failure::step_next("lock", e, "check the API server (`eas doctor`)")),
            };
            Ok((locked, lease, State::load(&sd.state_file()), crate::state::since::Completed::load(sd.dir())))
        })
        .await;
    let (mut latest, mut last) = (None, None);
    if let Some((locked, lease, prev, completed)) = r.or_block(PhaseId::Lock, checks)? {
        // The journal says the lock's checks failed when one did (the window itself passed).
        if let Some(first) = [&locked, &lease].into_iter().find_map(|c| c.as_ref().err()) {
            r.planned::<()>(PhaseId::Lock, &Err(Failure::step("lock", first)));
        }
        r.or_block(PhaseId::Lock, locked)?;
        r.or_block(PhaseId::Lock, lease)?;
        // What earlier runs created (the prerequisites' "earlier install" check discounts it).
        match prev {
            Ok(prev) => {
                r.state.ledger = prev.as_ref().map(|p| p.ledger.clone()).unwrap_or_default();
                latest = prev;
            }
            Err(e) => r.block(PhaseId::Lock, Failure::from(e))?,
        }
        match completed {
            Ok(l) => last = l,
            Err(e) => r.block(PhaseId::Lock, Failure::from(e))?,
        }
    }
    let (docker, git) = r.plan_half(PhaseId::Preflight, async { Ok(host_checks(global).await) }).await?;
    let docker = r.or_block(PhaseId::Preflight, docker)?;
    r.or_block(PhaseId::Preflight, git)?;
    Ok(Preflight { target, sd, docker, latest, last, egress })
}

/// The bastion's checks that need only the pins, each on its own: the requirements lock, the
/// base image's digest, then the artifacts' sha256.
pub fn bastion_pin_checks(args: &bastion::ImageSettings) -> Vec<Failure> {
    bastion::pin_checks(args).into_iter().map(Failure::from).collect()
}

/// Bastion, facts and trees side by side: the image's plan, the facts, and the pinned trees
/// with the run's one EAS work tree made from them.
pub async fn gather(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    tree_pins: &Trees,
    pre: Preflight,
    r: &mut Runner,
) -> Result<(Preflight, Facts, Option<bastion::ImagePlan>, Option<(Resolved, tempfile::TempDir)>), Failure> {
    let target = &pre.target;
    shell.phase("bastion", "planning the pinned bastion image (build or reuse)");
    shell.phase("facts", format!("gathering facts from {} ({})", target.context, target.server));
    shell.phase("trees", "fetching EAS, EI and EAT at their pinned commits");
    let image_args = super::image_args(&args.image, args.select.pins.clone(), global);
    let pin_checks = bastion_pin_checks(&image_args);
    let pins_ok = pin_checks.is_empty();
    for f in pin_checks {
        r.block(PhaseId::Bastion, f)?;
    }
    let image = async {
        match (&pre.docker, pins_ok) {
            (Some(d), true) => Some(bastion::plan_image(d, &image_args).await.map_err(Failure::from)),
            _ => None,
        }
    };
    // Eas's own pods do not count against the budget of the run after it.
    let gather_opts =
        gather::GatherOptions { discount_namespaces: r.state.ledger.created.namespaces.clone(), ..args.gather.clone() };
    let facts = gather::collect(target, &gather_opts, CALL, &global.env, shell, config::fit::landing_node);
    let (tp, repos, cache) = (tree_pins.clone(), args.repos.clone(), crate::trees::cache_dir(&global.env));
    let ca = global.ca_bundle.as_ref().map(|b| b.ders.clone());
    let (scratch, layer, with_ext) = (super::scratch_dir(args, &pre)?, args.select.layer.clone(), !args.dry_run);
    let trees = async {
        let made = tokio::task::spawn_blocking(move || {
            let r = super::resolve_trees(&tp, &repos, &cache, ca.as_deref())?;
            super::make_work_tree(&r, &tp, &scratch.path().join("eas"), &layer, with_ext)?;
            Ok::<_, String>((r, scratch))
        });
        made.await.map_err(|e| Failure::step("trees", e))?.map_err(|e| {
            Failure::step_next(
                "trees",
                e,
                "check network access to the repositories, or pass --eas-repo/--ei-repo/--eat-repo",
            )
        })
    };
    let waiting = shell.spinner("waiting for the bastion image's plan, the facts and the trees");
    let limit = |id: PhaseId| r.timeouts.plan(id);
    let (bastion_limit, facts_limit, trees_limit) =
        (limit(PhaseId::Bastion), limit(PhaseId::Facts), limit(PhaseId::Trees));
    let within = |id: PhaseId, d: Duration| move |_| super::phase::timed_out(id, d);
    // Side by side, each in its own plan window, all under the run's cancellation.
    r.begin_all(&[PhaseId::Bastion, PhaseId::Facts, PhaseId::Trees]);
    let joined = r
        .cancellable(async {
            tokio::join!(
                tokio::time::timeout(bastion_limit, image),
                tokio::time::timeout(facts_limit, facts),
                tokio::time::timeout(trees_limit, trees),
            )
        })
        .await;
    waiting.finish_and_clear();
    let (image, facts, trees) = match joined {
        Ok(j) => j,
        Err(f) => {
            for id in [PhaseId::Bastion, PhaseId::Facts, PhaseId::Trees] {
                r.planned::<()>(id, &Err(Failure::Interrupted));
            }
            return Err(f);
        }
    };
    let facts = facts.map_err(within(PhaseId::Facts, facts_limit)).and_then(|f| f);
    r.planned(PhaseId::Facts, &facts);
    // The facts as the decisions read them: what eas's runs created is not the cluster's.
    let facts: Facts = crate::state::since::discount(&facts?, &r.state.ledger.created);
    let facts_hash = crate::state::hash_json(&facts);
    r.state.facts_hash = Some(facts_hash.clone());
    let devices = &config::data::cluster_rules().device_resources;
    let prefixes: Vec<&str> = devices.iter().map(|d| d.prefix.as_str()).collect();
    r.plan.facts = Some(FactsSummary::new(&facts, &facts_hash, &prefixes));
    let image = match image.map_err(within(PhaseId::Bastion, bastion_limit)) {
        Ok(None) => None,
        Ok(Some(i)) => {
            r.planned(PhaseId::Bastion, &i);
            r.or_block(PhaseId::Bastion, i)?
        }
        Err(f) => r.or_block::<bastion::ImagePlan>(PhaseId::Bastion, Err(f))?,
    };
    if let Some(p) = &image {
        let action = if p.existing.is_some() { ImageAction::Reuse } else { ImageAction::Build };
        r.plan.image = Some(ImagePlan { tag: p.tag.clone(), action });
    }
    let trees = trees.map_err(within(PhaseId::Trees, trees_limit)).and_then(|t| t);
    r.planned(PhaseId::Trees, &trees);
    let trees = r.or_block(PhaseId::Trees, trees)?;
    if trees.is_none() {
        r.plan.overlay_not_decided = Some("the trees could not be read".into());
    }
    Ok((pre, facts, image, trees))
}

/// Config, then the overlay decided once, on the one tree the run would install from, then the
/// knob audit. A refusal, a STOP or an audit refusal is a blocker; the overlay needs the config.
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    args: &UpSettings,
    global: &Global,
    shell: &Shell,
    inv: &Invocation,
    tree_pins: &Trees,
    (facts, pre): (&Facts, &mut Preflight),
    trees: Option<(Resolved, tempfile::TempDir)>,
    r: &mut Runner,
) -> Result<(Option<config::Decision>, Vec<(String, String)>, Option<(tempfile::TempDir, crate::overlay::Plan)>), Failure>
{
    let layer = &args.select.layer;
    let seeded = seeded_catalog(pre, trees.as_ref().map(|(t, _)| t), &args.env, layer)?;
    let decided = r
        .plan_half(PhaseId::Config, async {
            // The models are decided against the catalog the installer will read: the one `init`
            // will copy, read at the pinned EI commit; or, when the run upgrades an inited env in
            // place, the copy `init` seeded then (an upgrade never re-seeds it).
            let pinned = match (&trees, seeded) {
                (_, Some(s)) => Some(s),
                (Some((t, _)), None) => catalog::read(&t.ei.objects, &t.ei.sha, &tree_pins.ei, layer)?,
                (None, None) => None,
            };
            match &pinned {
                Some(c) => shell.note(format!("model catalog: {}", c.describe())),
                None => {
                    shell.note("model catalog: not read (no trees); the built-in candidates (data/models.json) decide")
                }
            }
            let downloads = match (&pinned, args.offline) {
                (Some(c), false) => hf_reads(&c.catalog, global).await,
                (Some(_), true) => {
                    shell.warn(
                        "--offline: Hugging Face was not asked; the figures come from the cache or data/models.json, \
                         and whether the install can download the weights is not checked",
                    );
                    Vec::new()
                }
                _ => Vec::new(),
            };
            // What the plan cannot know then, said as unknown: whether the weights download.
            let unasked = match (&pinned, args.offline) {
                (_, true) => Some("not asked (--offline)"),
                (None, false) => Some("not asked (the catalog was not read)"),
                _ => None,
            };
            let mut decision = config::generate_with_downloads(facts, &args.select, pinned.as_ref(), &downloads)?;
            // With a proxy: the installer's proxy keys and the no_proxy the facts imply (issue 21).
            let proxy = crate::net::proxy::ProxyEnv::from_lookup(global.env.lookup());
            config::proxy::apply(&mut decision, facts, &proxy, Some(&pre.target.server));
            if let Some((t, _)) = &trees {
                // The layer manifest at the full SHAs resolved in the mirror, whatever the pins hold.
                let shas = [("eas", t.eas.sha.as_str()), ("ei", t.ei.sha.as_str()), ("eat", t.eat.sha.as_str())];
                config::rules::manifest_at(&mut decision, &shas);
                // The deploy path the pinned EAT tree proves: its own key when a reader is found.
                let repo = tree_pins.eat.repo.clone().unwrap_or_default();
                let eat =
                    knob_audit::Tree { name: "eat", repo: repo.clone(), objects: &t.eat.objects, sha: &t.eat.sha };
                // A reader counts only on the layer's install path: its manifest must include EAT.
                let on_path =
                    config::data::layers().layers.get(layer).is_some_and(|rows| rows.iter().any(|r| r.pin == "eat"));
                let readers = if on_path {
                    knob_audit::eat_model_readers(&eat).map_err(|e| Failure::step("config", e))?
                } else {
                    Vec::new()
                };
                let at = format!("{repo}@{}", &t.eat.sha[..t.eat.sha.len().min(7)]);
                // ... and the layer's components must enable the reader's role.
                let readers = readers_on_path(&t.eat.objects, &t.eat.sha, layer, &decision, readers, &at)?;
                config::model::prove_deploy_path(&mut decision, &readers, &at);
            }
            Ok((decision, pinned, unasked))
        })
        .await;
    let decided = r.or_block(PhaseId::Config, decided)?;
    let (decided, pinned) = match decided {
        Some((d, p, unasked)) => {
            if let Some(why) = unasked {
                let reason = format!("whether Hugging Face lets the model's weights be downloaded: {why}");
                r.plan.unknown.push(crate::pipeline::Missing { phase: PhaseId::Config, reason });
            }
            (Some(d), p)
        }
        None => (None, None),
    };
    let egress = match pre.egress.take() {
        Some(e) => e.check().await,
        None => crate::prereq::egress::check(None, ""),
    };
    prerequisites(facts, decided.as_ref(), pinned.as_ref(), egress, shell, r);
    let Some(decision) = decided else {
        if r.plan.overlay_not_decided.is_none() {
            r.plan.overlay_not_decided = Some("the configuration was not decided".into());
        }
        return Ok((None, Vec::new(), None));
    };
    for w in &decision.warnings {
        shell.warn(w);
    }
    crate::plan_data::fill_decisions(&mut r.plan, &decision);
    r.state.decisions = decision.choices.iter().map(|c| render::choice_line(c, false)).collect();
    let files = render::files(&decision);
    let overrides_in_tree = format!("env/{}/eas-overrides.yaml", args.env);
    let install = argv::install_argv(layer, &args.env, &format!("{}/{overrides_in_tree}", bastion::TREE_TARGET))?;
    r.plan.commands = vec![
        PlannedCommand { phase: PhaseId::Prepare, argv: argv::init_argv(layer, &args.env)? },
        PlannedCommand { phase: PhaseId::Install, argv: install.clone() },
    ];
    r.state.installer_command = super::install::redactor(&global.env).redact_argv(&install);

    let Some((resolved, scratch)) = trees else { return Ok((Some(decision), files, None)) };
    let generated = crate::overlay::Generated::from_decision(&decision, facts, &crate::overlay::Overlay::builtin()?);
    let (dir, pins, t) = (scratch.path().join("eas"), tree_pins.clone(), resolved.clone());
    let (select, inv, dry_run) = (args.select.clone(), inv.clone(), args.dry_run);
    let decided = r
        .plan_half(PhaseId::Overlay, async {
            let job = tokio::task::spawn_blocking(move || {
                let op = crate::overlay::decide(&dir, &t.eas.sha, Some(&generated))?;
                // After a STOP: the other pins profiles whose overlay decides fully here.
                let forward = if op.stops().count() > 0 {
                    super::way_forward(&select, &pins.profile, &t.eas.objects, &generated, &inv, dry_run)
                } else {
                    Vec::new()
                };
                Ok::<_, Failure>((op, forward))
            });
            job.await.map_err(|e| Failure::step("overlay", e))?
        })
        .await;
    let Some((op, way_forward)) = r.or_block(PhaseId::Overlay, decided)? else {
        r.plan.overlay_not_decided = Some("the overlay decider failed".into());
        return Ok((Some(decision), files, None));
    };
    r.plan.overlay = crate::plan_data::patches(&op);
    r.state.overlay = op.decisions.iter().map(|d| d.line(false)).collect();
    if op.stops().count() > 0 {
        let mut lines = op.stop_lines();
        lines.extend(way_forward);
        r.block(PhaseId::Overlay, Failure::OverlayStop(lines))?;
    }
    let audited = audit(args, shell, tree_pins, &resolved, &decision, &op, r);
    r.or_block(PhaseId::Overlay, audited)?;
    Ok((Some(decision), files, Some((scratch, op))))
}

/// The env's `models.yaml` as `init` seeded it, when this run upgrades that env in place: the pins
/// moved since the last completed run and the kept work tree holds the inited env. `init
/// --upgrade` never re-seeds it, so the installer reads this copy, and the model is decided
/// against it (the new catalog's changes to it are listed in `since_last`). A seeded copy that
/// does not parse is bad input naming it.
fn seeded_catalog(
    pre: &Preflight,
    trees: Option<&Resolved>,
    env: &str,
    layer: &str,
) -> Result<Option<crate::config::catalog::Pinned>, Failure> {
    let (Some(last), Some(t)) = (pre.last.as_ref(), trees) else { return Ok(None) };
    let now = [("eas", &t.eas.sha), ("ei", &t.ei.sha), ("eat", &t.eat.sha)];
    let moved = now.iter().any(|(n, sha)| last.state.pins.shas.get(*n).is_some_and(|old| old != *sha));
    let dir = pre.sd.work_dir().join("eas").join("env").join(env);
    if !moved || catalog::catalog_path(layer).is_none() || !dir.join(".solutions.yaml").exists() {
        return Ok(None);
    }
    let path = dir.join("models.yaml");
    let Ok(text) = crate::bounded::read_string(&path, crate::bounded::Kind::Catalog) else { return Ok(None) };
    let parsed = crate::config::catalog::Catalog::parse(&text).map_err(|e| {
        Failure::bad_input(
            format!("{}: {e}", path.display()),
            "the env's models.yaml is what the installer reads; fix it, or `eas down` and install afresh",
        )
    })?;
    let shown = format!("env/{env}/models.yaml (as init seeded it; an upgrade does not re-seed it)");
    Ok(Some(crate::config::catalog::Pinned { catalog: parsed, path: shown, at: String::new() }))
}

/// What Hugging Face says of each LLM entry of the catalog (`HF_ENDPOINT`, `HF_TOKEN`, the proxy
/// and `--ca-bundle` as for every download; bounded, in parallel, cached): whether the weights
/// can be downloaded, by `model_id`. An entry Hugging Face itself refuses is skipped by an
/// automatic pick and refused for `--model`; no answer (offline, a proxy's refusal) is a warning.
async fn hf_reads(
    catalog: &crate::config::catalog::Catalog,
    global: &Global,
) -> Vec<(String, crate::config::hf::Access)> {
    let env = &global.env;
    let entries: Vec<(String, String)> =
        catalog.llms().filter(|e| !e.model_id.is_empty()).map(|e| (e.model_id.clone(), "main".to_string())).collect();
    let home = env.var("HOME").map(std::path::PathBuf::from);
    let xdg = env.var("XDG_CACHE_HOME").map(std::path::PathBuf::from);
    let Some(cache) = crate::config::hf::cache_base(xdg.as_deref(), home.as_deref()) else { return Vec::new() };
    let roots = global.ca_bundle.as_ref().map(|b| b.ders.clone()).unwrap_or_default();
    let proxy = crate::net::proxy::ProxyEnv::from_lookup(env.lookup());
    let Ok(d) = crate::net::download::Downloader::with_timeouts(&roots, proxy, super::hf::CONNECT, super::hf::TOTAL)
    else {
        return Vec::new();
    };
    let endpoint = super::hf::endpoint(env.var("HF_ENDPOINT").as_deref());
    let token = env.var("HF_TOKEN");
    let reads = super::hf::read_all(&d, &endpoint, token.as_deref(), &entries, &cache).await;
    reads.into_iter().map(|r| (r.model_id, r.access)).collect()
}

/// Each reader of EAT's model key with whether the install runs it: the pinned EAT tree's
/// `components.yaml` (at the layer row's `deployment_subdir`) must enable the reader's role in a
/// layer the install runs. A variable named in a component's `enabled` takes eas's override, else
/// the layer's seeded `config.yaml`. Without a `components.yaml` no role is run.
fn readers_on_path(
    objects: &std::path::Path,
    sha: &str,
    layer: &str,
    decision: &config::Decision,
    readers: Vec<String>,
    at: &str,
) -> Result<Vec<(String, config::components::OnPath)>, Failure> {
    use config::components::{Components, OnPath, on_path};
    if readers.is_empty() {
        return Ok(Vec::new());
    }
    let rows = config::data::layers().layers.get(layer).cloned().unwrap_or_default();
    let subdir = rows.iter().find(|r| r.pin == "eat").map(|r| r.deployment_subdir.clone()).unwrap_or_default();
    let file = |name: &str| {
        let path = if subdir.is_empty() { name.to_string() } else { format!("{subdir}/{name}") };
        crate::trees::git(Some(objects), &["cat-file", "blob", &format!("{sha}:{path}")], Duration::from_secs(60))
            .ok()
            .map(|text| (path, text))
    };
    let Some((path, text)) = file("components.yaml") else {
        let why = format!("{at} has no components.yaml, so the installer runs none of its roles");
        return Ok(readers.into_iter().map(|r| (r, OnPath::No(why.clone()))).collect());
    };
    let components = Components::parse(&text)
        .map_err(|e| Failure::step("config", format!("{path} at {at} is not a components manifest: {e}")))?;
    let seeded: serde_json::Map<String, serde_json::Value> =
        file("config.yaml").and_then(|(_, t)| serde_saphyr::from_str(&t).ok()).unwrap_or_default();
    let value = |key: &str| {
        let written = decision.overrides.iter().find(|(k, _)| *k == key).map(|(_, v)| match v {
            config::rules::Value::Bool(b) => serde_json::Value::Bool(*b),
            config::rules::Value::Str(s) => serde_json::Value::String(s.clone()),
            config::rules::Value::List(_) => serde_json::Value::Null,
        });
        written.or_else(|| seeded.get(key).cloned())
    };
    // Within the reader's own repository, the role's path is relative to the subdir.
    let relative = |r: &str| r.strip_prefix(&format!("{subdir}/")).unwrap_or(r).to_string();
    Ok(readers
        .into_iter()
        .map(|r| {
            let v = on_path(&components, layer, &relative(&r), &value);
            (r, v)
        })
        .collect())
}

/// The cluster's prerequisites (`crate::prereq`): their refusals are blockers of the phase that
/// meets them (facts, or config for the room the weights need), their warnings are the plan's.
fn prerequisites(
    facts: &Facts,
    decision: Option<&config::Decision>,
    catalog: Option<&crate::config::catalog::Pinned>,
    egress: crate::prereq::Check,
    shell: &Shell,
    r: &mut Runner,
) {
    let recorded = crate::prereq::Recorded::from_created(&r.state.ledger.created);
    let model = decision.and_then(super::expected_models).and_then(|m| m.into_iter().next());
    // The pick's weights, from the figures eas sized it with (data/models.json by its
    // repository): the room the landing node needs for them.
    let weights = model.as_deref().and_then(|m| {
        let id = catalog?.catalog.entry(m)?.model_id.clone();
        config::data::models().architecture(&id).ok().map(|a| a.weights_bytes())
    });
    let inputs = crate::prereq::Inputs { weights_bytes: weights, model: model.as_deref(), recorded };
    let mut report = crate::prereq::check(facts, &inputs);
    // The egress line is in the plan whatever it found: it says what was asked, and that the
    // nodes' own egress is not.
    let source = "data/egress.json".to_string();
    r.plan.decisions.push(PlanDecision {
        fact: "egress the install needs, asked from this host".into(),
        choice: egress.ok.clone(),
        permalink: source.clone(),
        source,
    });
    report.checks.push(egress);
    r.plan.blockers.extend(report.blockers());
    for w in report.warnings() {
        shell.warn(&w);
        r.plan.warnings.push(w);
    }
    r.prereq = Some(report);
}

/// The knob audit: each key written must be read at the pinned commits (or by a patch).
fn audit(
    args: &UpSettings,
    shell: &Shell,
    tree_pins: &Trees,
    t: &Resolved,
    decision: &config::Decision,
    op: &crate::overlay::Plan,
    r: &mut Runner,
) -> Result<(), Failure> {
    let audited = [("eas", &tree_pins.eas, &t.eas), ("ei", &tree_pins.ei, &t.ei), ("eat", &tree_pins.eat, &t.eat)].map(
        |(name, pin, t)| knob_audit::Tree {
            name,
            repo: pin.repo.clone().unwrap_or_default(),
            objects: t.objects.as_path(),
            sha: t.sha.as_str(),
        },
    );
    let audit = knob_audit::run(&audited, decision, op, &args.allow_unread)?;
    for w in &audit.warnings {
        shell.warn(w);
    }
    r.plan.decisions.extend(audit.lines.iter().map(|l| {
        let (fact, choice) = l.split_once(" -> ").unwrap_or((l.as_str(), ""));
        let source = "knob audit: git grep at the pinned commits".to_string();
        PlanDecision { fact: format!("knob {fact}"), choice: choice.to_string(), permalink: source.clone(), source }
    }));
    r.plan.warnings.extend(audit.warnings.iter().cloned());
    if audit.refusals.is_empty() { Ok(()) } else { Err(Failure::Refused(audit.refusals.clone())) }
}
