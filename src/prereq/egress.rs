//! Egress the install needs (issue 21 item 6): the hosts of `data/egress.json` (the installer's
//! internet probe, the registries its charts and images come from), each asked once from this
//! host through the proxy the bastion gets, bounded, all at once. Any HTTP answer counts; no
//! answer is a warning naming the host and the error. `--offline` skips it. The nodes pull images
//! themselves, and their egress is not checked from here: the check's line says so.
//!
//! The decision ([`check`]) is pure; [`probe`] is the one effect.

use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;

use super::Check;
use crate::net::download::Downloader;
use crate::plan::PhaseId;

/// Each request's connect and whole-answer limits; the probe as a whole ends at [`WHOLE`].
pub const CONNECT: Duration = Duration::from_secs(5);
pub const TOTAL: Duration = Duration::from_secs(8);
pub const WHOLE: Duration = Duration::from_secs(10);

/// Replaces the data's hosts (`name=https://url,...`): for tests' loopback stand-ins and for
/// installs whose registries are mirrored.
pub const OVERRIDE: &str = "EAS_EGRESS_URLS";

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Host {
    pub host: String,
    pub url: String,
    #[serde(default)]
    pub profiles: Vec<String>,
    pub needed_for: String,
    #[serde(default)]
    pub upstream: String,
}

#[derive(Debug, Deserialize)]
struct Data {
    schema: String,
    hosts: Vec<Host>,
}

fn data() -> &'static [Host] {
    static V: OnceLock<Vec<Host>> = OnceLock::new();
    V.get_or_init(|| {
        let d: Data = serde_json::from_str(include_str!("../../data/egress.json")).expect("data/egress.json parses");
        assert_eq!(d.schema, "eas-egress/v1");
        d.hosts
    })
}

/// The hosts to ask for pins profile `profile`: [`OVERRIDE`]'s when set, else the data's rows
/// for that profile (or every profile, `*`).
pub fn hosts(profile: &str, override_value: Option<&str>) -> Vec<Host> {
    if let Some(v) = override_value.filter(|v| !v.trim().is_empty()) {
        return v
            .split(',')
            .filter_map(|pair| pair.trim().split_once('='))
            .map(|(host, url)| Host {
                host: host.trim().to_string(),
                url: url.trim().to_string(),
                profiles: vec!["*".into()],
                needed_for: format!("its entry in {OVERRIDE}"),
                upstream: String::new(),
            })
            .collect();
    }
    data().iter().filter(|h| h.profiles.iter().any(|p| p == "*" || p == profile)).cloned().collect()
}

/// What one host answered: an HTTP status, or why there was no answer.
pub type Answer = Result<u16, String>;

/// Asks every host at once (`HEAD`), each bounded by the downloader's limits and all within
/// [`WHOLE`]; a host still unanswered then is a timeout.
pub async fn probe(d: &Downloader, hosts: &[Host]) -> Vec<(Host, Answer)> {
    let asks = hosts.iter().map(|h| async move {
        let answer = match tokio::time::timeout(WHOLE, d.small(&h.url, None, true, 64 << 10)).await {
            Ok(Ok(reply)) => Ok(reply.status),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("no answer within {} s", WHOLE.as_secs())),
        };
        (h.clone(), answer)
    });
    futures::future::join_all(asks).await
}

/// The check's line from the answers. `through` names the proxy (credentials masked) or says
/// the hosts were asked directly; `None` answers: skipped (`--offline`).
pub fn check(answers: Option<&[(Host, Answer)]>, through: &str) -> Check {
    let mut c = Check::new("egress", PhaseId::Preflight);
    let nodes = "the nodes' own egress (they pull the images) is not checked from here";
    let Some(answers) = answers else {
        c.ok = format!("not checked (--offline); {nodes}");
        return c;
    };
    let answered: Vec<&str> = answers.iter().filter(|(_, a)| a.is_ok()).map(|(h, _)| h.host.as_str()).collect();
    for (h, a) in answers {
        if let Err(e) = a {
            c.warn(
                format!("{} does not answer from this host {through}: {e} (needed for {})", h.host, h.needed_for),
                "check the proxy and firewall (HTTPS_PROXY, NO_PROXY), or pass --offline to skip this check",
            );
        }
    }
    c.ok = format!(
        "{} answered {through}; {nodes}",
        if answered.is_empty() { "no host".into() } else { answered.join(", ") }
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_names_each_host_with_its_source_and_an_https_url() {
        let hosts = hosts("main", None);
        assert!(hosts.len() >= 4, "{hosts:?}");
        for h in &hosts {
            assert!(h.url.starts_with("https://") && !h.upstream.is_empty() && !h.needed_for.is_empty(), "{h:?}");
        }
        assert_eq!(hosts, super::hosts("v1.2.0-rc.1", None), "every profile uses the rows read");
    }

    #[test]
    fn the_override_replaces_the_data() {
        let h = hosts("main", Some("a=https://127.0.0.1:1/v2/, b=https://127.0.0.1:2/"));
        assert_eq!(
            h.iter().map(|h| (h.host.as_str(), h.url.as_str())).collect::<Vec<_>>(),
            [("a", "https://127.0.0.1:1/v2/"), ("b", "https://127.0.0.1:2/")]
        );
    }

    #[test]
    fn a_host_without_an_answer_is_a_warning_and_an_answer_of_any_status_passes() {
        let h = |n: &str| Host {
            host: n.into(),
            url: String::new(),
            profiles: vec![],
            needed_for: "charts".into(),
            upstream: String::new(),
        };
        let answers = vec![(h("ghcr.io"), Ok(401)), (h("docker.io"), Err("connection refused".into()))];
        let c = check(Some(&answers), "through the proxy http://***@p:3128 (HTTPS_PROXY)");
        assert!(!c.refused(), "a warning, never a refusal");
        assert_eq!(c.findings.len(), 1);
        assert!(
            c.findings[0]
                .cause
                .starts_with("docker.io does not answer from this host through the proxy http://***@p:3128")
        );
        assert!(c.findings[0].cause.ends_with("connection refused (needed for charts)"), "{}", c.findings[0].cause);
        assert!(c.ok.starts_with("ghcr.io answered"), "{}", c.ok);
        assert!(c.ok.contains("nodes' own egress"), "{}", c.ok);
        let skipped = check(None, "");
        assert!(skipped.findings.is_empty() && skipped.ok.starts_with("not checked (--offline)"));
    }
}
