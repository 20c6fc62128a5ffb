//! `eas doctor`: the read-only gates of `eas up`, one line per check. The gates are `eas up`'s
//! own plan halves (the same code, run as a dry run, bounded at 30 s): the lock, preflight
//! (Docker, git), the bastion's pins, the facts, the trees, the config's refusals, the overlay
//! and the knob audit; a doctor that passes means the plan has no blocker. Around them, the
//! host's own checks (API server and k3s, disk, memory). Each check runs on its own: one that
//! fails or cannot run does not stop the rest. Exit 1 naming each failure.

use std::path::Path;
use std::time::Duration;

use crate::error::Failure;
use crate::gather;
use crate::output::Shell;
use crate::settings::Global;

use crate::state::run::state_root;

/// `eas doctor`'s settings: `eas up`'s selection and node flags, as a dry run.
#[derive(Debug, Clone)]
pub struct DoctorSettings {
    pub up: crate::pipeline::settings::UpSettings,
    pub output: crate::output::OutputFormat,
}

/// How long every check that reads the cluster may take in all.
const GATES: Duration = Duration::from_secs(30);
/// Each of the API server's own checks (its version, its nodes), within [`GATES`].
const QUICK: Duration = Duration::from_secs(10);

/// `eas doctor`'s checks (the command layer prints them and makes the exit code).
pub fn checks(args: &DoctorSettings, global: &Global, shell: &Shell) -> Result<Vec<Check>, Failure> {
    crate::runtime::block_on_interruptible(doctor(args, global, shell))
}

/// One check's line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub name: String,
    /// Passed, or could not run (`skipped`): not a failure.
    pub ok: bool,
    /// `ok`, `fail` or `skipped`.
    pub status: &'static str,
    pub detail: String,
    /// The disk and memory checks' figure (free, available) in bytes, beside the sentence's GiB,
    /// so a script need not parse the detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The least of it the check passes with, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
}

impl Check {
    fn new(name: &str, status: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            ok: status != "fail",
            status,
            detail: detail.into(),
            bytes: None,
            min_bytes: None,
        }
    }

    /// A host check on a byte figure: passes with at least `min` bytes.
    fn bytes(name: &str, have: u64, min: u64, detail: String) -> Check {
        let status = if have >= min { "ok" } else { "fail" };
        Check { bytes: Some(have), min_bytes: Some(min), ..Check::new(name, status, detail) }
    }
}

/// The gates' failures less those a prerequisite's own line says (`lines`, failing ones): one
/// line per cause. A gate whose causes are all said below keeps one line with their distinct
/// fixes.
fn once_each(gates: Vec<Check>, lines: &[(bool, &'static str, String)]) -> Vec<Check> {
    let mut out: Vec<Check> = Vec::new();
    let mut fixes: Vec<(String, Vec<String>)> = Vec::new();
    for c in gates {
        let (cause, fix) = c.detail.split_once(" (fix: ").unwrap_or((&c.detail, ""));
        let said = c.status == "fail" && lines.iter().any(|(ok, _, d)| !ok && d.contains(cause));
        if !said {
            out.push(c);
            continue;
        }
        let fix = fix.strip_suffix(')').unwrap_or(fix).to_string();
        match fixes.iter_mut().find(|(n, _)| *n == c.name) {
            Some((_, f)) if !f.contains(&fix) => f.push(fix),
            Some(_) => {}
            None => {
                fixes.push((c.name.clone(), vec![fix]));
                out.push(Check::new(&c.name, "fail", String::new()));
            }
        }
    }
    for (name, f) in fixes {
        if let Some(c) = out.iter_mut().find(|c| c.name == name && c.detail.is_empty()) {
            c.detail = format!("the prerequisites below say why (fix: {})", f.join("; "));
        }
    }
    out
}

/// The least memory available on this host (the disk's minimum is the state directory's,
/// [`crate::state::room::MIN_FREE`], a gate of `eas up`'s lock plan half too).
const MEMORY_MIN: u64 = 2 << 30;

/// The gates: every plan half of `eas up` on these settings, one check per phase that has one,
/// each phase's blockers its failures. The phase a gate could not reach is skipped, with why.
pub fn gate_checks(plan: &crate::plan::Plan) -> Vec<Check> {
    use crate::plan::PhaseId as P;
    let gates = [
        (P::Lock, "lock", "no other run holds this cluster's lock"),
        (P::Preflight, "preflight", "Docker Engine and git answer"),
        (P::Bastion, "bastion", "the base image and every artifact are pinned"),
        (P::Facts, "facts", "the facts were gathered"),
        (P::Trees, "trees", "EAS, EI and EAT are readable at their pinned commits"),
        (P::Config, "config", "no refusal"),
        (P::Overlay, "overlay", "every patch decides, every written key is read"),
    ];
    let mut out = Vec::new();
    for (phase, name, ok) in gates {
        let failed: Vec<&crate::plan::Blocker> = plan.blockers().iter().filter(|b| b.phase == phase).collect();
        let undecided = plan.overlay_not_decided().first().map(String::as_str).filter(|_| phase == P::Overlay);
        match (failed.is_empty(), undecided) {
            (true, Some(why)) => out.push(Check::new(name, "skipped", why)),
            (true, None) => out.push(Check::new(name, "ok", ok)),
            (false, _) => out.extend(failed.into_iter().map(|b| {
                let detail = if b.fix.is_empty() { b.cause.clone() } else { format!("{} (fix: {})", b.cause, b.fix) };
                Check::new(name, "fail", detail)
            })),
        }
    }
    out
}

/// The disk line: the state directory's file system as `eas up`'s lock plan half judges it
/// (read-only, writable, free space against the minimum), on the directory or its nearest
/// existing parent; a failure names the path and the fix, as the plan's blocker does.
fn disk_check(root: &Path, min: u64) -> Check {
    let (seen, decided) = crate::state::room::check(root, min);
    let detail = match &decided {
        Err(e) => format!("{e} (fix: {})", e.hint()),
        Ok(()) => seen
            .as_ref()
            .map(|s| format!("{} GiB free at {}, writable", s.free >> 30, s.at.display()))
            .unwrap_or_default(),
    };
    let status = if decided.is_ok() { "ok" } else { "fail" };
    let bytes = seen.map(|s| s.free);
    Check { bytes, min_bytes: Some(min), ..Check::new("disk", status, detail) }
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Every check, in order: the API server and k3s, disk and memory, then `eas up`'s gates.
async fn doctor(args: &DoctorSettings, global: &Global, shell: &Shell) -> Result<Vec<Check>, Failure> {
    let mut checks: Vec<Check> = Vec::new();
    let line = |ok: bool, name: &str, detail: String| Check::new(name, if ok { "ok" } else { "fail" }, detail);
    // One deadline for every check that reads the cluster: doctor answers within GATES (plus
    // the host's own bounded checks), whatever the API server does.
    let deadline = tokio::time::Instant::now() + GATES;
    let quick = || QUICK.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
    // The host's settings (the kubeconfig source, the proxy) read once: this check and the
    // gates' preflight reach the cluster through the same.
    let (proxy, kube) = crate::pipeline::services::Services::host(global);
    match gather::target_at(&kube, &proxy, quick()).await {
        Ok(t) => {
            let bound = quick();
            match t.cluster.server_version(bound).await {
                Ok(v) => checks.push(line(true, "api server", format!("{v} at {} ({})", t.server, t.context))),
                Err(e) => checks.push(line(false, "api server", format!("{}: {e}", t.server))),
            }
            match t.cluster.node_metadata(quick()).await {
                Ok(nodes) => {
                    let k3s = nodes.iter().filter(|n| {
                        n.annotations.as_ref().is_some_and(|a| a.contains_key(crate::config::rules::NODE_ARGS))
                    });
                    let k3s = k3s.count();
                    let k3d = nodes.iter().any(|n| n.name.as_deref().is_some_and(|x| x.starts_with("k3d-")));
                    checks.push(line(
                        k3s == nodes.len() && k3s > 0,
                        "k3s",
                        format!("{k3s} of {} nodes run k3s{}", nodes.len(), if k3d { " (k3d)" } else { "" }),
                    ));
                }
                Err(e) => checks.push(line(false, "k3s", e.to_string())),
            }
        }
        Err(e) => checks.push(line(false, "api server", Failure::from(e).lines().join("; "))),
    }
    let root = state_root(global)?;
    checks.push(disk_check(&root, crate::state::room::min_free(&global.env)));
    match mem_available() {
        Some(b) => {
            checks.push(Check::bytes("memory", b, MEMORY_MIN, format!("{} GiB available on this host", b >> 30)))
        }
        None => checks.push(line(false, "memory", "cannot read /proc/meminfo".into())),
    }
    checks.extend(gates(args, (proxy, kube), global, shell, deadline).await?);
    Ok(checks)
}

/// `eas up`'s plan halves as a dry run, within [`GATES`]: their blockers as checks. When the
/// cluster cannot be read at all, the gates that need it are skipped with the reason.
async fn gates(
    args: &DoctorSettings,
    host: (crate::net::proxy::ProxyEnv, crate::kubeconfig::KubeSource),
    global: &Global,
    shell: &Shell,
    deadline: tokio::time::Instant,
) -> Result<Vec<Check>, Failure> {
    let up = &args.up;
    let services =
        crate::pipeline::services::Services::resolve_on(&up.select, host).map_err(crate::config::ConfigError::from);
    let tree_pins = services.and_then(|s| Ok((crate::config::trees_in(&s.pins, &up.select)?, s)));
    let (tree_pins, services) = match tree_pins {
        Ok(t) => t,
        Err(e) => return Ok(vec![Check::new("selection", "fail", Failure::from(e).lines().join("; "))]),
    };
    let inv = crate::state::resume::invocation(global, &up.select.layer, &up.env, &up.select);
    let interrupt =
        crate::runtime::Interrupt::on_signals().map_err(|e| Failure::step(crate::plan::Step::Signals, e))?;
    let mut r = crate::pipeline::up::runner(up, &tree_pins, interrupt);
    let cx =
        crate::pipeline::phase::Cx { args: up, global, shell, inv: &inv, services: &services, tree_pins: &tree_pins };
    // The host's checks (Docker, git) side by side, bounded on their own: they stand in for the
    // plan's when it cannot read the cluster or runs out of time.
    let (planned, host) = tokio::join!(
        tokio::time::timeout_at(deadline, crate::pipeline::up::plan_halves(&cx, &mut r)),
        crate::pipeline::phases::preflight::host_checks(&services, global)
    );
    // What this host's Docker and git said, for the preflight gate's line: it says they answered
    // only when they did.
    let host_failed: Vec<Check> = [host.0.as_ref().err(), host.1.as_ref().err()]
        .into_iter()
        .flatten()
        .flat_map(|f| f.blockers(crate::plan::PhaseId::Preflight))
        .map(|b| Check::new("preflight", "fail", format!("{} (fix: {})", b.cause, b.fix)))
        .collect();
    let host_only = |mut v: Vec<Check>| {
        let (docker, git) = host;
        let image = crate::pipeline::settings::image_args(&up.image, up.select.pins.clone(), global, &services.proxy);
        let pins = crate::pipeline::phases::bastion::pin_checks(&image, &services.pins);
        let failures = [docker.err(), git.err()].into_iter().flatten().map(|f| ("preflight", f));
        for (name, f) in failures.chain(pins.into_iter().map(|f| ("bastion", f))) {
            let lines = f.blockers(crate::plan::PhaseId::Preflight).into_iter();
            v.extend(lines.map(|b| Check::new(name, "fail", format!("{} (fix: {})", b.cause, b.fix))));
        }
        v
    };
    Ok(match planned {
        Ok(Ok(_)) => {
            // The cluster's prerequisites, one line per check, from the plan's own report.
            let lines = r.prereq().map(crate::prereq::Report::lines).unwrap_or_default();
            let mut v = once_each(gate_checks(r.plan_doc()), &lines);
            if let Some(i) = v.iter().position(|c| c.name == "preflight" && c.status == "ok")
                && !host_failed.is_empty()
            {
                v.splice(i..=i, host_failed);
            }
            v.extend(
                lines.into_iter().map(|(ok, name, detail)| Check::new(name, if ok { "ok" } else { "fail" }, detail)),
            );
            v
        }
        Ok(Err(Failure::Interrupted)) => return Err(Failure::Interrupted),
        // The cluster could not be read: the gates that need only this host and the pins
        // still run (the same functions as the plan's).
        // `eas up` would stop there too (its preflight reads the cluster's identity as doctor's
        // API check does not): a failure, and the gates after it are skipped.
        Ok(Err(f)) => host_only(vec![
            Check::new("preflight", "fail", format!("eas up stops here: {}", f.lines().join("; "))),
            Check::new("gates", "skipped", "the plan could not read the cluster (see preflight)".to_string()),
        ]),
        Err(_) => host_only(vec![Check::new(
            "gates",
            "fail",
            format!("the plan's checks did not finish within doctor's {} s", GATES.as_secs()),
        )]),
    })
}
