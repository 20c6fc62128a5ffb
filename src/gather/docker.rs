//! The Docker side of a k3d cluster, through the Docker API (bollard): whether the engine is
//! rootless, which containers are k3d nodes, and files inside them. Behind the [`Engine`] seam,
//! so the decisions built on it are tested without an engine.

use std::collections::HashMap;
use std::io::Read;
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::exec::StartExecResults;
use bollard::models::ExecConfig;
use bollard::query_parameters::{ContainerArchiveInfoOptions, DownloadFromContainerOptions, ListContainersOptions};
use futures::StreamExt;

/// The label k3d puts on every container of a cluster, valued with the cluster's name.
pub const K3D_CLUSTER_LABEL: &str = "k3d.cluster";
const K3D_ROLE_LABEL: &str = "k3d.role";
/// Go's `os.ModeSocket`, as the Docker API reports a path's mode.
const GO_MODE_SOCKET: u32 = 1 << 24;
/// A containerd config is a few KiB; anything past this is not one.
const MAX_FILE: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct K3dContainer {
    pub id: String,
    pub name: String,
    /// The container's hostname, which k3d sets to its name and k3s takes as the node name.
    pub hostname: Option<String>,
    pub cluster: String,
    pub role: String,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum DockerError {
    #[error("Docker is unreachable at {addr}: {cause}")]
    Unreachable { addr: String, cause: String },
    #[error("Docker at {addr}: {what}: {cause}")]
    Call { addr: String, what: String, cause: String },
    #[error("Docker at {addr}: {what} got no answer within {secs} s")]
    Timeout { addr: String, what: String, secs: u64 },
}

/// What the gatherer needs from a container engine.
#[allow(async_fn_in_trait)]
pub trait Engine {
    /// Where the engine was reached, for messages.
    fn addr(&self) -> &str;
    async fn rootless(&self) -> Result<bool, DockerError>;
    /// Running containers carrying the k3d cluster label, of any cluster.
    async fn k3d_containers(&self) -> Result<Vec<K3dContainer>, DockerError>;
    /// A regular file's bytes; `None` when the path does not exist in the container.
    async fn read_file(&self, container: &str, path: &str) -> Result<Option<Vec<u8>>, DockerError>;
    /// Whether `path` is a unix socket inside the running container.
    async fn is_socket(&self, container: &str, path: &str) -> Result<bool, DockerError>;
}

pub struct Bollard {
    docker: Docker,
    addr: String,
    timeout: Duration,
}

/// The engine the gatherer reads k3d's node containers from: one it connects to itself
/// (`eas facts`), or the one the run's preflight reached, or why it did not (`eas up`: one
/// connection to the engine per run).
pub enum Reach {
    Connect(String),
    Met { addr: String, docker: Result<Docker, DockerError> },
}

impl Bollard {
    /// Reaches the engine as `reach` says, each call bounded by `timeout`.
    pub async fn reach(reach: Reach, timeout: Duration) -> Result<Bollard, DockerError> {
        match reach {
            Reach::Connect(addr) => Bollard::connect(addr, timeout).await,
            Reach::Met { addr, docker } => Ok(Bollard { docker: docker?, addr, timeout }),
        }
    }

    /// Connects to `addr` (see [`crate::docker_host`]) and agrees an API version with the engine, so an older engine works.
    pub async fn connect(addr: String, timeout: Duration) -> Result<Bollard, DockerError> {
        let unreachable = |cause: String| DockerError::Unreachable { addr: addr.clone(), cause };
        let docker = Docker::connect_with_host(&addr).map_err(|e| unreachable(crate::cluster::chain(&e)))?;
        let docker = tokio::time::timeout(timeout, docker.negotiate_version())
            .await
            .map_err(|_| unreachable(format!("no answer within {} s", timeout.as_secs().max(1))))?
            .map_err(|e| unreachable(crate::cluster::chain(&e)))?;
        Ok(Bollard { docker, addr, timeout })
    }

    async fn bounded<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = Result<T, BollardError>>,
    ) -> Result<T, DockerError> {
        match tokio::time::timeout(self.timeout, f).await {
            Err(_) => Err(DockerError::Timeout {
                addr: self.addr.clone(),
                what: what.into(),
                secs: self.timeout.as_secs().max(1),
            }),
            Ok(r) => r.map_err(|e| DockerError::Call {
                addr: self.addr.clone(),
                what: what.into(),
                cause: crate::cluster::chain(&e),
            }),
        }
    }

    /// Runs `cmd` in the container and returns its exit code.
    async fn exec_status(&self, container: &str, cmd: Vec<String>) -> Result<i64, BollardError> {
        let config =
            ExecConfig { cmd: Some(cmd), attach_stdout: Some(true), attach_stderr: Some(true), ..Default::default() };
        let exec = self.docker.create_exec(container, config).await?;
        if let StartExecResults::Attached { mut output, .. } = self.docker.start_exec(&exec.id, None).await? {
            while output.next().await.is_some() {}
        }
        let inspect = self.docker.inspect_exec(&exec.id).await?;
        Ok(inspect.exit_code.unwrap_or(-1))
    }
}

fn not_found(e: &BollardError) -> bool {
    matches!(e, BollardError::DockerResponseServerError { status_code: 404, .. })
}

impl Engine for Bollard {
    fn addr(&self) -> &str {
        &self.addr
    }

    async fn rootless(&self) -> Result<bool, DockerError> {
        let info = self.bounded("docker info", self.docker.info()).await?;
        Ok(info.security_options.unwrap_or_default().iter().any(|o| is_rootless_option(o)))
    }

    async fn k3d_containers(&self) -> Result<Vec<K3dContainer>, DockerError> {
        let filters = HashMap::from([("label".to_string(), vec![K3D_CLUSTER_LABEL.to_string()])]);
        let options = ListContainersOptions { all: false, filters: Some(filters), ..Default::default() };
        let list = self.bounded("list k3d containers", self.docker.list_containers(Some(options))).await?;
        let found: Vec<K3dContainer> = list
            .into_iter()
            .filter_map(|c| {
                let labels = c.labels.unwrap_or_default();
                let cluster = labels.get(K3D_CLUSTER_LABEL)?.clone();
                let name = c.names.unwrap_or_default().into_iter().next()?.trim_start_matches('/').to_string();
                Some(K3dContainer {
                    id: c.id?,
                    name,
                    hostname: None,
                    cluster,
                    role: labels.get(K3D_ROLE_LABEL).cloned().unwrap_or_default(),
                })
            })
            .collect();
        // A node is found by its container's name, or failing that its hostname: one inspect per
        // k3d container (a few per cluster), made at once.
        let inspected = futures::future::join_all(found.into_iter().map(|mut c| async move {
            let what = format!("inspect container {}", c.name);
            if let Ok(info) = self.bounded(&what, self.docker.inspect_container(&c.id, None)).await {
                c.hostname = info.config.and_then(|cfg| cfg.hostname);
            }
            c
        }))
        .await;
        Ok(inspected)
    }

    async fn read_file(&self, container: &str, path: &str) -> Result<Option<Vec<u8>>, DockerError> {
        let what = format!("read {path} in container {container}");
        let options = DownloadFromContainerOptions { path: path.to_string() };
        let download = async {
            let mut stream = self.docker.download_from_container(container, Some(options));
            let mut tar = Vec::new();
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(b) => tar.extend_from_slice(&b),
                    Err(e) if not_found(&e) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            Ok(Some(tar))
        };
        let Some(tar) = self.bounded(&what, download).await? else {
            return Ok(None);
        };
        first_file(&tar).map(Some).map_err(|cause| DockerError::Call { addr: self.addr.clone(), what, cause })
    }

    async fn is_socket(&self, container: &str, path: &str) -> Result<bool, DockerError> {
        let what = format!("check {path} in container {container}");
        // The archive API sees the container's image and volumes, not tmpfs mounts (k3d mounts
        // one on /run), so a socket it does not see is looked for from inside, with `test -S`.
        let options = ContainerArchiveInfoOptions { path: path.to_string() };
        let stat = async {
            match self.docker.get_container_archive_info(container, Some(options)).await {
                Ok(s) => Ok(Some(s.file_mode & GO_MODE_SOCKET != 0)),
                Err(e) if not_found(&e) => Ok(None),
                Err(e) => Err(e),
            }
        };
        if let Some(true) = self.bounded(&what, stat).await? {
            return Ok(true);
        }
        let code =
            self.bounded(&what, self.exec_status(container, vec!["test".into(), "-S".into(), path.into()])).await?;
        match code {
            0 => Ok(true),
            1 => Ok(false),
            other => Err(DockerError::Call {
                addr: self.addr.clone(),
                what,
                cause: format!("`test -S` exited {other} (is there a `test` binary in the node image?)"),
            }),
        }
    }
}

/// The first regular file in a tar archive, as the archive API returns one file.
fn first_file(tar: &[u8]) -> Result<Vec<u8>, String> {
    let mut archive = tar::Archive::new(tar);
    let entries = archive.entries().map_err(|e| format!("not a tar archive: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("not a tar archive: {e}"))?;
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut out = Vec::new();
                entry.take(MAX_FILE).read_to_end(&mut out).map_err(|e| format!("cannot read the file: {e}"))?;
                return Ok(out);
            }
            tar::EntryType::Directory => return Err("is a directory".into()),
            tar::EntryType::Symlink => {
                let target = entry.link_name().ok().flatten().map(|p| p.display().to_string()).unwrap_or_default();
                return Err(format!("is a symbolic link to {target}"));
            }
            _ => {}
        }
    }
    Err("the archive holds no file".into())
}

/// `docker info`'s security options name rootless mode as `name=rootless`.
pub fn is_rootless_option(option: &str) -> bool {
    option.split(',').any(|kv| kv.trim() == "name=rootless")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rootless_is_read_from_security_options() {
        assert!(is_rootless_option("name=rootless"));
        assert!(is_rootless_option("name=seccomp,profile=builtin,name=rootless"));
        assert!(!is_rootless_option("name=seccomp,profile=builtin"));
        assert!(!is_rootless_option("name=rootlessish"));
    }

    fn tar_with(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                h.set_link_name("/elsewhere").unwrap();
                h.set_size(0);
            }
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn the_file_comes_out_of_the_archive() {
        let tar = tar_with(&[("config.toml", tar::EntryType::Regular, b"version = 3\n")]);
        assert_eq!(first_file(&tar).unwrap(), b"version = 3\n");
        let dir = tar_with(&[("containerd", tar::EntryType::Directory, b"")]);
        assert_eq!(first_file(&dir).unwrap_err(), "is a directory");
        let link = tar_with(&[("config.toml", tar::EntryType::Symlink, b"")]);
        assert!(first_file(&link).unwrap_err().contains("symbolic link to /elsewhere"));
        assert!(first_file(b"not a tar").is_err());
    }
}
