//! Reading the containerd config k3s generates for a node: which directories containerd looks
//! in for CNI plugins, and where (and whether) it serves NRI. Pure: text in, facts out.
//!
//! Three layouts occur in the wild, and k3s has written each over its history:
//! - config version 1 (containerd 1.x, old k3s): `[plugins.cri.cni] bin_dir = "..."`;
//! - config version 2 (containerd 1.x): `[plugins."io.containerd.grpc.v1.cri".cni] bin_dir = "..."`;
//! - config version 3 (containerd 2.x): `[plugins.'io.containerd.cri.v1.runtime'.cni]` with
//!   `bin_dir` (2.0) or `bin_dirs = [...]` (2.1 and later, where `bin_dir` is deprecated).
//!
//! A config without a CNI section (k3s with its flannel disabled writes none) leaves containerd
//! on its built-in default, which is what the node then uses, so that is what is reported.

use toml::Value;

/// Where k3s writes the containerd config, relative to its data dir.
pub const CONFIG_UNDER_DATA_DIR: &str = "agent/etc/containerd/config.toml";
/// k3s's data dir unless `--data-dir` says otherwise.
pub const DEFAULT_DATA_DIR: &str = "/var/lib/rancher/k3s";
/// containerd's NRI socket unless its config names another.
pub const DEFAULT_NRI_SOCKET: &str = "/var/run/nri/nri.sock";
/// containerd's CNI plugin directory when its config names none.
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";

const NRI_PLUGIN: &str = "io.containerd.nri.v1.nri";
/// CRI plugin tables holding the `cni` section, newest layout first.
const CRI_PLUGINS: [&str; 3] = ["io.containerd.cri.v1.runtime", "io.containerd.grpc.v1.cri", "cri"];

/// What a node's containerd config says.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerdConfig {
    pub version: i64,
    pub cni_bin_dirs: Vec<String>,
    /// Whether the CNI directories came from containerd's default rather than the file.
    pub cni_default: bool,
    pub nri: Nri,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Nri {
    /// The socket path the config names, or containerd's default.
    pub socket_path: String,
    /// Whether NRI is enabled by this config: an explicit `disable`, else the default of the
    /// containerd generation the config version implies (off in 1.x, on from 2.0).
    pub enabled: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ContainerdError {
    #[error("not valid TOML: {0}")]
    Toml(String),
    #[error("`{key}` is {found}, expected {expected}")]
    Shape { key: String, found: String, expected: &'static str },
}

pub fn parse(text: &str) -> Result<ContainerdConfig, ContainerdError> {
    let doc: toml::Table =
        text.parse().map_err(|e: toml::de::Error| ContainerdError::Toml(one_line(&e.to_string())))?;
    let version = match doc.get("version") {
        None => 1,
        Some(Value::Integer(v)) => *v,
        Some(other) => return Err(shape("version", other, "an integer")),
    };
    let plugins = doc.get("plugins").and_then(Value::as_table);
    let plugin = |name: &str| plugins.and_then(|p| p.get(name)).and_then(Value::as_table);

    let mut cni_bin_dirs = Vec::new();
    for name in CRI_PLUGINS {
        let Some(cni) = plugin(name).and_then(|t| t.get("cni")).and_then(Value::as_table) else {
            continue;
        };
        let key = |k: &str| format!("plugins.\"{name}\".cni.{k}");
        if let Some(v) = cni.get("bin_dirs") {
            let Value::Array(items) = v else {
                return Err(shape(&key("bin_dirs"), v, "a list of paths"));
            };
            for item in items {
                match item.as_str() {
                    Some(s) if !s.is_empty() => cni_bin_dirs.push(s.to_string()),
                    Some(_) => {}
                    None => return Err(shape(&key("bin_dirs"), item, "a list of paths")),
                }
            }
        }
        if cni_bin_dirs.is_empty()
            && let Some(v) = cni.get("bin_dir")
        {
            match v.as_str() {
                Some("") => {}
                Some(s) => cni_bin_dirs.push(s.to_string()),
                None => return Err(shape(&key("bin_dir"), v, "a path")),
            }
        }
        if !cni_bin_dirs.is_empty() {
            break;
        }
    }
    let cni_default = cni_bin_dirs.is_empty();
    if cni_default {
        cni_bin_dirs.push(DEFAULT_CNI_BIN_DIR.to_string());
    }

    let nri_table = plugin(NRI_PLUGIN);
    let socket_path = match nri_table.and_then(|t| t.get("socket_path")) {
        None => DEFAULT_NRI_SOCKET.to_string(),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => DEFAULT_NRI_SOCKET.to_string(),
        Some(other) => {
            return Err(shape(&format!("plugins.\"{NRI_PLUGIN}\".socket_path"), other, "a path"));
        }
    };
    let enabled = match nri_table.and_then(|t| t.get("disable")) {
        None => version >= 3,
        Some(Value::Boolean(disabled)) => !disabled,
        Some(other) => {
            return Err(shape(&format!("plugins.\"{NRI_PLUGIN}\".disable"), other, "true or false"));
        }
    };
    Ok(ContainerdConfig { version, cni_bin_dirs, cni_default, nri: Nri { socket_path, enabled } })
}

/// The containerd config path for a node whose k3s runs with these arguments.
pub fn config_path(node_args: &[String]) -> String {
    let data_dir = data_dir(node_args).unwrap_or(DEFAULT_DATA_DIR);
    format!("{}/{CONFIG_UNDER_DATA_DIR}", data_dir.trim_end_matches('/'))
}

/// `--data-dir`/`-d` from k3s's node args, in either `--flag v` or `--flag=v` form; the last wins.
fn data_dir(args: &[String]) -> Option<&str> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--data-dir" || a == "-d" {
            found = it.next().map(String::as_str);
        } else if let Some(v) = a.strip_prefix("--data-dir=").or_else(|| a.strip_prefix("-d=")) {
            found = Some(v);
        }
    }
    found.filter(|d| !d.is_empty())
}

fn shape(key: &str, found: &Value, expected: &'static str) -> ContainerdError {
    ContainerdError::Shape { key: key.to_string(), found: format!("{} {found}", found.type_str()), expected }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(text: &str) -> Vec<String> {
        parse(text).unwrap().cni_bin_dirs
    }

    #[test]
    fn cni_dirs_in_every_layout() {
        let v1 = "[plugins.cri.cni]\n  bin_dir = \"/var/lib/rancher/k3s/data/abc/bin\"\n";
        assert_eq!(dirs(v1), ["/var/lib/rancher/k3s/data/abc/bin"]);
        let v2 =
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/bin\"\n  conf_dir = \"/x\"\n";
        assert_eq!(dirs(v2), ["/bin"]);
        let v3_bin_dir = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dir = \"/usr/bin\"\n";
        assert_eq!(dirs(v3_bin_dir), ["/usr/bin"]);
        let v3_bin_dirs = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dir = ''\n  bin_dirs = ['/opt/cni/bin', '/usr/libexec/cni']\n";
        assert_eq!(dirs(v3_bin_dirs), ["/opt/cni/bin", "/usr/libexec/cni"]);
        // bin_dirs wins over the deprecated bin_dir when both name something.
        let both =
            "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".cni]\nbin_dir = \"/old\"\nbin_dirs = [\"/new\"]\n";
        assert_eq!(dirs(both), ["/new"]);
    }

    #[test]
    fn no_cni_section_means_containerds_default() {
        let c = parse("version = 3\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'overlayfs'\n").unwrap();
        assert_eq!(c.cni_bin_dirs, [DEFAULT_CNI_BIN_DIR]);
        assert!(c.cni_default);
        let c = parse("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/bin\"\n").unwrap();
        assert!(!c.cni_default);
    }

    #[test]
    fn nri_defaults_follow_the_config_version() {
        let v2 = parse("version = 2\n").unwrap();
        assert!(!v2.nri.enabled, "containerd 1.x ships NRI disabled");
        assert_eq!(v2.nri.socket_path, DEFAULT_NRI_SOCKET);
        let v3 = parse("version = 3\n").unwrap();
        assert!(v3.nri.enabled, "containerd 2.x ships NRI enabled");
        let off = parse("version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n").unwrap();
        assert!(!off.nri.enabled);
        let on = parse("version = 2\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n  socket_path = \"/run/nri/custom.sock\"\n")
            .unwrap();
        assert!(on.nri.enabled);
        assert_eq!(on.nri.socket_path, "/run/nri/custom.sock");
    }

    #[test]
    fn malformed_configs_are_named() {
        assert!(matches!(parse("version = 2\n[plugins\n"), Err(ContainerdError::Toml(_))));
        let e =
            parse("version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dirs = '/usr/bin'\n").unwrap_err();
        assert!(e.to_string().contains("bin_dirs"), "{e}");
        assert!(e.to_string().contains("expected a list of paths"), "{e}");
        assert!(matches!(parse("version = 'three'\n"), Err(ContainerdError::Shape { .. })));
    }

    #[test]
    fn config_path_honours_data_dir() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(config_path(&a(&["server"])), "/var/lib/rancher/k3s/agent/etc/containerd/config.toml");
        assert_eq!(
            config_path(&a(&["server", "--data-dir", "/srv/k3s/"])),
            "/srv/k3s/agent/etc/containerd/config.toml"
        );
        assert_eq!(config_path(&a(&["agent", "--data-dir=/d", "-d", "/e"])), "/e/agent/etc/containerd/config.toml");
        assert_eq!(config_path(&a(&["server", "--data-dir"])), "/var/lib/rancher/k3s/agent/etc/containerd/config.toml");
    }
}
