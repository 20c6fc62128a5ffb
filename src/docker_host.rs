//! The one Docker endpoint resolver, used by the gatherer and the bastion alike: the address
//! the docker CLI would use. `DOCKER_HOST`, else the endpoint of the current docker context
//! (`DOCKER_CONTEXT`, else `currentContext` in `$DOCKER_CONFIG/config.json`; rootless setups
//! switch context rather than set `DOCKER_HOST`), else the system socket, else the rootless
//! socket under `$XDG_RUNTIME_DIR` when only that exists.

use std::path::{Path, PathBuf};

use crate::settings::Env;

pub const SYSTEM_SOCKET: &str = "/var/run/docker.sock";

pub fn resolve(env: &Env) -> String {
    if let Some(h) = env.nonempty("DOCKER_HOST") {
        return h;
    }
    if let Some(h) = context_host(env) {
        return h;
    }
    let rootless = env.nonempty("XDG_RUNTIME_DIR").map(|d| PathBuf::from(d).join("docker.sock"));
    match rootless {
        Some(r) if !Path::new(SYSTEM_SOCKET).exists() && r.exists() => format!("unix://{}", r.display()),
        _ => format!("unix://{SYSTEM_SOCKET}"),
    }
}

fn context_host(env: &Env) -> Option<String> {
    let dir = env.nonempty("DOCKER_CONFIG").map(PathBuf::from).or_else(|| env.home().map(|h| h.join(".docker")))?;
    let name = match env.nonempty("DOCKER_CONTEXT") {
        Some(c) => c,
        None => {
            let config: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("config.json")).ok()?).ok()?;
            config.get("currentContext")?.as_str()?.to_string()
        }
    };
    if name == "default" {
        return None;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("contexts").join("meta").join(hex).join("meta.json")).ok()?)
            .ok()?;
    meta.pointer("/Endpoints/docker/Host")?.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_host_then_the_current_context_then_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        std::fs::write(dir.path().join("config.json"), r#"{"currentContext":"proxy"}"#).unwrap();
        use sha2::Digest;
        let hex: String = sha2::Sha256::digest(b"proxy").iter().map(|b| format!("{b:02x}")).collect();
        let meta = dir.path().join("contexts/meta").join(hex);
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(
            meta.join("meta.json"),
            r#"{"Name":"proxy","Endpoints":{"docker":{"Host":"unix:///tmp/p.sock"}}}"#,
        )
        .unwrap();
        assert_eq!(resolve(&Env::of(&[("DOCKER_HOST", "tcp://h:1"), ("DOCKER_CONFIG", &d)])), "tcp://h:1");
        assert_eq!(resolve(&Env::of(&[("DOCKER_CONFIG", &d)])), "unix:///tmp/p.sock");
        let other = resolve(&Env::of(&[("DOCKER_CONFIG", &d), ("DOCKER_CONTEXT", "default")]));
        assert_ne!(other, "unix:///tmp/p.sock");
        assert!(other.starts_with("unix://"), "{other}");
    }
}
