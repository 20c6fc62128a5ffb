//! After a run died (SIGKILL, a lost terminal, a reboot of the host but not of Docker), its
//! bastion container may be left: stopped by its fence once eas's attach stream closed
//! (`bastion::run`), or still running if the Docker Engine never closed that stream. The run
//! that takes over its lock or the cluster's Lease with `--break-lock` finds its containers by
//! their run-id label (the run id the lock or the Lease names, so from another state directory
//! too) and stops and removes them before doing anything else, so two installers never act at
//! once.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptions, RemoveContainerOptionsBuilder};

use crate::act::bastion::MANAGED_LABEL;
use crate::output::Shell;
use crate::state::lock::{self, Found, Holder};

pub use crate::act::bastion::RUN_LABEL;

/// The holder of a stale lock that `--break-lock` is about to take over: a run that died.
pub fn dead_holder(lock_file: &Path, break_lock: bool) -> Option<Holder> {
    if !break_lock {
        return None;
    }
    match lock::inspect(lock_file) {
        Ok(Some(Found::Stale(h))) => Some(h),
        _ => None,
    }
}

/// Why the dead run's containers could not be stopped and removed (the command edge makes it a
/// failure of the lock's step, exit 1, with what to do).
#[derive(Debug, thiserror::Error)]
pub enum ReapError {
    #[error("cannot list the dead run's containers: {0}")]
    List(#[source] bollard::errors::Error),
    #[error("cannot remove {name}, left by the dead run {id}: {source}")]
    Remove {
        name: String,
        id: String,
        #[source]
        source: bollard::errors::Error,
    },
}

/// Stops and removes every container the dead run left, found by its run-id label.
pub async fn reap(docker: &Docker, id: &str, shell: &Shell) -> Result<Vec<String>, ReapError> {
    let filters =
        HashMap::from([("label".to_string(), vec![format!("{MANAGED_LABEL}=true"), format!("{RUN_LABEL}={id}")])]);
    let options = ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
    let list = docker.list_containers(Some(options)).await.map_err(ReapError::List)?;
    let mut removed = Vec::new();
    for c in list {
        let name =
            c.names.unwrap_or_default().into_iter().next().unwrap_or_default().trim_start_matches('/').to_string();
        let Some(cid) = c.id else { continue };
        // Force removal kills a running container at once: the dead run cannot stop it gracefully.
        let opts = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match docker.remove_container(&cid, Some(opts)).await {
            Ok(()) | Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
                shell.note(format!("stopped and removed {name}, left running by the dead run {id}"));
                removed.push(name);
            }
            Err(source) => return Err(ReapError::Remove { name, id: id.to_string(), source }),
        }
    }
    Ok(removed)
}
