//! k3s's `k3s.io/node-args` annotation: the server's or agent's command line as a JSON list of
//! strings. Anything else, and a CIDR flag whose value is not a list of CIDRs, is bad input
//! (exit 2) naming the node and the annotation: reading it as "no arguments" would silently
//! give k3s's defaults, and an unchecked value would reach the overrides and the decision lines.

use ipnet::IpNet;

pub const ANNOTATION: &str = "k3s.io/node-args";

/// The flags whose values eas writes into the overrides; each a comma-separated list of CIDRs
/// (dual stack: one IPv4 and one IPv6).
pub const CIDR_FLAGS: [&str; 2] = ["--cluster-cidr", "--service-cidr"];

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NodeArgsError {
    #[error("node {node}: annotation {ANNOTATION} is not a JSON list of strings: {shown}")]
    NotAList { node: String, shown: String },
    #[error("node {node}: annotation {ANNOTATION} gives {flag} {value}, which is not a CIDR list")]
    BadCidr { node: String, flag: &'static str, value: String },
}

impl NodeArgsError {
    pub fn hint(&self) -> &'static str {
        "k3s writes this annotation from its command line; check the node with `kubectl get node <node> -o yaml` and the k3s flags it was started with"
    }
}

/// The arguments in the annotation of `node`, every CIDR flag checked.
pub fn parse(node: &str, text: &str) -> Result<Vec<String>, NodeArgsError> {
    let args: Vec<String> = serde_json::from_str(text)
        .map_err(|_| NodeArgsError::NotAList { node: shown(node), shown: shown(&crate::text::ellipsis(text, 80)) })?;
    for flag in CIDR_FLAGS {
        for value in values(&args, flag) {
            if !is_cidr_list(value) {
                return Err(NodeArgsError::BadCidr { node: shown(node), flag, value: shown(value) });
            }
        }
    }
    Ok(args)
}

/// `10.42.0.0/16` or `10.42.0.0/16,2001:cafe:42::/56`.
pub fn is_cidr_list(value: &str) -> bool {
    !value.is_empty() && value.split(',').all(|c| c.parse::<IpNet>().is_ok())
}

/// The values given to `flag` as `--flag v` or `--flag=v`, in order.
fn values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if a == flag {
            if let Some(v) = it.next() {
                out.push(v.as_str());
            }
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            out.push(v);
        }
    }
    out
}

/// Quoted, control characters escaped: safe on one line.
fn shown(s: &str) -> String {
    format!("{s:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_everything_else_is_named() {
        assert_eq!(
            parse("n", "[\"server\",\"--disable\",\"traefik\"]").unwrap(),
            vec!["server", "--disable", "traefik"]
        );
        assert_eq!(parse("n", "[]").unwrap(), Vec::<String>::new());
        let cases =
            ["server --disable servicelb --cluster-cidr 10.99.0.0/16", "", "{\"a\":1}", "[1,2]", "[\"server\"", "null"];
        for text in cases {
            let e = parse("gpu-1", text).unwrap_err();
            assert!(matches!(e, NodeArgsError::NotAList { .. }), "{text:?}");
            let msg = e.to_string();
            assert!(
                msg.starts_with("node \"gpu-1\": annotation k3s.io/node-args is not a JSON list of strings"),
                "{msg}"
            );
        }
    }

    #[test]
    fn cidr_flags_must_hold_cidrs() {
        let ok = [
            "[\"server\",\"--cluster-cidr\",\"10.99.0.0/16\"]",
            "[\"server\",\"--cluster-cidr=10.42.0.0/16,2001:cafe:42::/56\",\"--service-cidr\",\"10.43.0.0/16\"]",
        ];
        for text in ok {
            parse("n", text).unwrap();
        }
        let bad = [
            ("[\"server\",\"--cluster-cidr\",\"10.99.0.0/16\\nkubernetes_accelerator: gpu\"]", "--cluster-cidr"),
            ("[\"server\",\"--service-cidr=10.43.0.0\"]", "--service-cidr"),
            ("[\"server\",\"--service-cidr=\"]", "--service-cidr"),
            ("[\"server\",\"--cluster-cidr\",\"10.42.0.0/16,\"]", "--cluster-cidr"),
            ("[\"server\",\"--cluster-cidr\",\"\\u001b[31m\"]", "--cluster-cidr"),
        ];
        for (text, want) in bad {
            match parse("n", text) {
                Err(NodeArgsError::BadCidr { flag, value, .. }) => {
                    assert_eq!(flag, want, "{text}");
                    assert!(!value.contains('\n') && !value.contains('\u{1b}'), "shown escaped: {value}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
