//! A Docker Engine stand-in on a Unix socket that answers the calls made to find an engine
//! (`/_ping`, `/version`, `/info`) and lists no containers, as an idle engine does, and never
//! answers anything else (an image inspect, a build): an engine that hangs once work is asked
//! of it. The answers carry the fields bollard reads (`ApiVersion`, Docker Engine API v1.43).

use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt;

pub struct StalledDocker {
    pub socket: PathBuf,
    _rt: tokio::runtime::Runtime,
}

impl StalledDocker {
    pub fn start(dir: &Path) -> StalledDocker {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let socket = dir.join("docker.sock");
        let listener = rt.block_on(async { tokio::net::UnixListener::bind(&socket) }).unwrap();
        rt.spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                tokio::spawn(async move {
                    let mut req = Vec::new();
                    loop {
                        let Some(head) = super::tls_front::request_head(&mut conn, &mut req).await else { return };
                        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                        let body = match answer(&path) {
                            Some(b) => b,
                            None => {
                                // Work asked of the engine: no answer, ever.
                                std::future::pending::<()>().await;
                                return;
                            }
                        };
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\nApi-Version: 1.43\r\nContent-Type: application/json\r\n\
                             Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        StalledDocker { socket, _rt: rt }
    }

    /// `DOCKER_HOST` for it.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

fn answer(path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/_ping") {
        Some("OK".into())
    } else if path.ends_with("/version") {
        Some(r#"{"ApiVersion":"1.43","MinAPIVersion":"1.12","Version":"24.0.9","Os":"linux","Arch":"amd64"}"#.into())
    } else if path.ends_with("/info") {
        Some(r#"{"ID":"stand-in","Containers":0,"SecurityOptions":["name=seccomp,profile=builtin"]}"#.into())
    } else if path.ends_with("/containers/json") {
        Some("[]".into())
    } else {
        None
    }
}
