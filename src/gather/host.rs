//! This machine, for the nodes that are this host (stock k3s on the machine running eas): its
//! hostname and its own IP addresses, and where its root is. A node is this host when its name,
//! its `kubernetes.io/hostname` label or its `k3s.io/hostname` annotation is this machine's
//! hostname, or one of its InternalIPs is an address of this machine (a node registered under
//! another name, `--node-name`, is still found). The address lists are the kernel's
//! (`/proc/net/fib_trie` local /32 entries, `/proc/net/if_inet6`), parsed here without effects.

use std::net::IpAddr;
use std::path::PathBuf;

use crate::facts::Node;

/// The annotation k3s sets to the hostname of the machine a node runs on.
const K3S_HOSTNAME: &str = "k3s.io/hostname";

pub struct Host {
    pub hostname: Option<String>,
    /// This machine's own addresses (loopback included).
    pub addresses: Vec<IpAddr>,
    /// Where the host's root is (a test seam; `/` on a real host).
    pub root: PathBuf,
}

impl Host {
    pub fn detect(env: &crate::settings::Env) -> Host {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty());
        let mut addresses = std::fs::read_to_string("/proc/net/fib_trie").map(|t| local_v4(&t)).unwrap_or_default();
        addresses.extend(std::fs::read_to_string("/proc/net/if_inet6").map(|t| local_v6(&t)).unwrap_or_default());
        let root = env.nonempty("EAS_HOST_ROOT").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
        Host { hostname, addresses, root }
    }

    /// Why `node` is this host, or `None` when it is not.
    pub fn matches(&self, node: &Node) -> Option<String> {
        if let Some(h) = &self.hostname {
            if node.name == *h {
                return Some(format!("its name is this machine's hostname {h}"));
            }
            let by = [
                ("label kubernetes.io/hostname", node.labels.get("kubernetes.io/hostname")),
                ("annotation k3s.io/hostname", node.annotations.get(K3S_HOSTNAME)),
            ];
            if let Some((what, _)) = by.iter().find(|(_, v)| v.is_some_and(|v| v == h)) {
                return Some(format!("its {what} is this machine's hostname {h}"));
            }
        }
        node.internal_ips
            .iter()
            .find(|ip| ip.parse::<IpAddr>().is_ok_and(|a| self.addresses.contains(&a)))
            .map(|ip| format!("its InternalIP {ip} is an address of this machine"))
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }
}

/// The IPv4 addresses of this machine from `/proc/net/fib_trie`: each `|-- A.B.C.D` leaf whose
/// next line is a `/32 host LOCAL` route (a `/8 host LOCAL` line is the loopback network, not
/// an address).
pub fn local_v4(fib_trie: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut leaf: Option<IpAddr> = None;
    for line in fib_trie.lines() {
        let t = line.trim();
        if let Some(a) = t.strip_prefix("|-- ") {
            leaf = a.parse().ok();
        } else if t.starts_with("/32 host LOCAL")
            && let Some(a) = leaf
            && !out.contains(&a)
        {
            out.push(a);
        }
    }
    out
}

/// The IPv6 addresses of this machine from `/proc/net/if_inet6` (32 hex digits, then the
/// interface's index, prefix length, scope, flags and name).
pub fn local_v6(if_inet6: &str) -> Vec<IpAddr> {
    if_inet6
        .lines()
        .filter_map(|l| {
            let hex = l.split_whitespace().next()?;
            (hex.len() == 32).then_some(())?;
            u128::from_str_radix(hex, 16).ok().map(|v| IpAddr::V6(std::net::Ipv6Addr::from(v)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::StringMap;

    // The shapes the kernel writes (net/ipv4/fib_trie.c, net/ipv6/addrconf.c), trimmed.
    const FIB_TRIE: &str = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n        |-- 127.255.255.255\n           /32 link BROADCAST\n     |-- 10.20.0.11\n        /32 host LOCAL\nLocal:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.20.0.11\n        /32 host LOCAL\n";
    const IF_INET6: &str = "00000000000000000000000000000001 01 80 10 80       lo\nfe8000000000000000fc00fffe000001 04 40 20 80     eth0\n";

    #[test]
    fn addresses_are_the_local_host_routes() {
        let v4: Vec<String> = local_v4(FIB_TRIE).iter().map(ToString::to_string).collect();
        assert_eq!(v4, ["127.0.0.1", "10.20.0.11"], "the /8 network and the broadcast are not addresses");
        let v6: Vec<String> = local_v6(IF_INET6).iter().map(ToString::to_string).collect();
        assert_eq!(v6, ["::1", "fe80::fc:ff:fe00:1"]);
        assert!(local_v6("garbage line\n").is_empty());
    }

    fn node(name: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": {"k3s.io/hostname": name},
            "capacity": {}, "allocatable": {}, "containerd": null, "internal_ips": ["10.20.0.11"]
        }))
        .unwrap()
    }

    #[test]
    fn a_node_is_this_host_by_name_hostname_or_address() {
        let host = |name: &str, addrs: &[&str]| Host {
            hostname: Some(name.into()),
            addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            root: "/".into(),
        };
        let n = node("box");
        assert!(host("box", &[]).matches(&n).unwrap().contains("its name"));
        // Registered under another name (k3s --node-name): k3s still records the machine's hostname.
        let mut renamed = node("worker-7");
        renamed.annotations.insert(K3S_HOSTNAME.into(), "box".into());
        assert!(host("box", &[]).matches(&renamed).unwrap().contains("annotation k3s.io/hostname"));
        assert!(host("other", &["10.20.0.11"]).matches(&n).unwrap().contains("InternalIP 10.20.0.11"));
        assert_eq!(host("other", &["127.0.0.1"]).matches(&n), None);
        let mut unnamed = node("x");
        unnamed.labels = StringMap::new();
        assert_eq!(Host { hostname: None, addresses: vec![], root: "/".into() }.matches(&unnamed), None);
    }
}
