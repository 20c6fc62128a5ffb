//! `eas doctor`: the preflight alone, one line per check (Docker, API server, k3s/k3d, disk,
//! memory, git). Exit 1 when a check fails, naming it.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use crate::error::Failure;
use crate::gather;
use crate::output::Shell;
use crate::settings::Global;

use super::{CALL, state_root};

pub fn command(global: &Global, shell: &Shell) -> Result<(), Failure> {
    crate::runtime::block_on_interruptible(doctor(global, shell))
}

/// Free bytes on the filesystem holding `path` (or its nearest existing parent).
fn free_bytes(path: &Path) -> Option<u64> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        p = p.parent()?.to_path_buf();
    }
    let out = std::process::Command::new("df").arg("-Pk").arg(&p).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let kb: u64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kb * 1024)
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

async fn doctor(global: &Global, shell: &Shell) -> Result<(), Failure> {
    let mut failed = Vec::new();
    let mut line = |ok: bool, name: &str, detail: String| {
        println!("{} {name}: {}", if ok { "ok  " } else { "FAIL" }, crate::text::for_people(&detail));
        if !ok {
            failed.push(name.to_string());
        }
    };
    match crate::bastion::image::engine_version(&global.env, crate::settings::timeouts::DOCKER_CALL).await {
        Ok(v) => line(true, "docker", format!("engine {v}")),
        Err(e) => line(false, "docker", e),
    }
    match gather::target(global, CALL).await {
        Ok(t) => {
            match tokio::time::timeout(CALL, t.client.apiserver_version()).await {
                Ok(Ok(v)) => line(true, "api server", format!("{} at {} ({})", v.git_version, t.server, t.context)),
                Ok(Err(e)) => line(false, "api server", format!("{}: {}", t.server, gather::kube::said(&e))),
                Err(_) => line(false, "api server", format!("{}: no answer within {}s", t.server, CALL.as_secs())),
            }
            let nodes: Api<Node> = Api::all(t.client.clone());
            match tokio::time::timeout(CALL, nodes.list_metadata(&ListParams::default())).await {
                Ok(Ok(list)) => {
                    let k3s = list.items.iter().filter(|n| {
                        n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(crate::config::rules::NODE_ARGS))
                    });
                    let k3s = k3s.count();
                    let k3d =
                        list.items.iter().any(|n| n.metadata.name.as_deref().is_some_and(|x| x.starts_with("k3d-")));
                    line(
                        k3s == list.items.len() && k3s > 0,
                        "k3s",
                        format!("{k3s} of {} nodes run k3s{}", list.items.len(), if k3d { " (k3d)" } else { "" }),
                    );
                }
                Ok(Err(e)) => line(false, "k3s", format!("list nodes: {}", gather::kube::said(&e))),
                Err(_) => line(false, "k3s", "list nodes: no answer".into()),
            }
        }
        Err(f) => line(false, "api server", f.lines().join("; ")),
    }
    let root = state_root(global)?;
    match free_bytes(&root) {
        Some(b) => line(b >= 10 << 30, "disk", format!("{} GiB free at {}", b >> 30, root.display())),
        None => line(false, "disk", format!("cannot read free space at {}", root.display())),
    }
    match mem_available() {
        Some(b) => line(b >= 2 << 30, "memory", format!("{} GiB available on this host", b >> 30)),
        None => line(false, "memory", "cannot read /proc/meminfo".into()),
    }
    match crate::trees::git(None, &["--version"], Duration::from_secs(10)) {
        Ok(v) => line(true, "git", v),
        Err(e) => line(false, "git", e.to_string()),
    }
    if failed.is_empty() {
        shell.note("doctor: every check passed");
        Ok(())
    } else {
        Err(Failure::step_next("doctor", format!("failed: {}", failed.join(", ")), "fix the checks marked FAIL"))
    }
}
