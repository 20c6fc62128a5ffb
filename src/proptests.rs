//! Property tests over the parsers of what eas reads from outside: the facts document, a node's
//! containerd TOML, and k3s's node-args annotation. None panics on any input; bad input gives a
//! typed error; what parses is exactly what was written. The case count is bounded (CI runs
//! these with the rest of the unit tests).

use proptest::prelude::*;

use crate::config::node_args::{self, NodeArgsError};
use crate::facts::Facts;
use crate::gather::containerd;

const DESKTOP: &str = include_str!("../fixtures/config/desktop-i9/facts.json");

fn config() -> ProptestConfig {
    ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() }
}

/// A path-like string: no quotes or backslashes, so it is written into TOML verbatim.
fn path() -> impl Strategy<Value = String> {
    "/[a-z0-9_./-]{1,24}"
}

fn cidr() -> impl Strategy<Value = String> {
    (any::<[u8; 4]>(), 8u8..=30).prop_map(|(a, len)| format!("{}.{}.{}.{}/{len}", a[0], a[1], a[2], a[3]))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn facts_parse_never_panics(text in ".{0,400}") {
        let _ = Facts::parse(&text);
    }

    /// A damaged valid document (a cut, or a byte replaced) is an error or a document that
    /// survives its own round trip: never a half-read value.
    #[test]
    fn damaged_facts_are_an_error_or_a_whole_document(cut in 0usize..DESKTOP.len(), byte in 0x20u8..0x7f, at in 0usize..DESKTOP.len()) {
        let mut bytes = DESKTOP.as_bytes().to_vec();
        bytes[at] = byte;
        for text in [&DESKTOP[..cut], std::str::from_utf8(&bytes).unwrap()] {
            if let Ok(f) = Facts::parse(text) {
                let again = Facts::parse(&serde_json::to_string(&f).unwrap()).unwrap();
                prop_assert_eq!(again, f);
            }
        }
    }

    #[test]
    fn containerd_parse_never_panics(text in ".{0,300}") {
        let _ = containerd::parse(&text);
    }

    /// Every layout reports exactly the directories and NRI settings written.
    #[test]
    fn containerd_configs_read_back_what_was_written(
        dirs in prop::collection::vec(path(), 1..4),
        socket in path(),
        disable in any::<Option<bool>>(),
        layout in 0usize..3,
    ) {
        let list = dirs.iter().map(|d| format!("\"{d}\"")).collect::<Vec<_>>().join(", ");
        let (version, cni) = match layout {
            0 => (3, format!("[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dirs = [{list}]\n")),
            1 => (2, format!("[plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"{}\"\n", dirs[0])),
            _ => (1, format!("[plugins.cri.cni]\nbin_dir = \"{}\"\n", dirs[0])),
        };
        let nri = match disable {
            Some(d) => format!("[plugins.\"io.containerd.nri.v1.nri\"]\ndisable = {d}\nsocket_path = \"{socket}\"\n"),
            None => format!("[plugins.\"io.containerd.nri.v1.nri\"]\nsocket_path = \"{socket}\"\n"),
        };
        let text = format!("version = {version}\n{cni}{nri}");
        let c = containerd::parse(&text).unwrap();
        let want_dirs = if layout == 0 { dirs.clone() } else { vec![dirs[0].clone()] };
        prop_assert_eq!(c.cni_bin_dirs, want_dirs);
        prop_assert!(!c.cni_default);
        prop_assert_eq!(c.nri.socket_path, socket);
        prop_assert_eq!(c.nri.enabled, disable.map_or(version >= 3, |d| !d));
    }

    /// A value of the wrong type is a typed error, not a default.
    #[test]
    fn containerd_values_of_the_wrong_type_are_errors(n in any::<i64>()) {
        let text = format!("version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\nbin_dirs = {n}\n");
        let is_shape = matches!(containerd::parse(&text), Err(containerd::ContainerdError::Shape { .. }));
        prop_assert!(is_shape);
    }

    #[test]
    fn node_args_parse_never_panics(text in ".{0,200}") {
        if let Ok(args) = node_args::parse("n", &text) {
            // Only a JSON list of strings parses.
            prop_assert_eq!(serde_json::from_str::<Vec<String>>(&text).unwrap(), args);
        }
    }

    /// A list of strings reads back as written; a CIDR flag holds CIDRs or the list is refused.
    #[test]
    fn node_args_lists_read_back_and_cidrs_are_checked(
        words in prop::collection::vec("[a-z=-]{0,12}", 0..6),
        cidr in cidr(),
        junk in "[^0-9./,:a-f]{1,6}",
    ) {
        let words: Vec<String> = words.into_iter().filter(|w| !w.starts_with("--cluster-cidr") && !w.starts_with("--service-cidr")).collect();
        let json = serde_json::to_string(&words).unwrap();
        prop_assert_eq!(node_args::parse("n", &json).unwrap(), words.clone());

        let mut with = words.clone();
        with.extend(["--cluster-cidr".to_string(), cidr.clone()]);
        prop_assert_eq!(node_args::parse("n", &serde_json::to_string(&with).unwrap()).unwrap(), with);

        let bad = vec!["server".to_string(), format!("--service-cidr={cidr}{junk}")];
        let refused = matches!(node_args::parse("n", &serde_json::to_string(&bad).unwrap()), Err(NodeArgsError::BadCidr { .. }));
        prop_assert!(refused);
    }
}
