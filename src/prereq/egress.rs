//! Egress the install needs (issue 21 item 6): the hosts of `data/egress.json` (the installer's
//! internet probe, the registries its charts and images come from), each asked once from this
//! host through the proxy the bastion gets, bounded, all at once. Any HTTP answer counts; no
//! answer is a warning naming the host and the error, except for a host the installer's own
//! preflight aborts the install without (its row's `aborts_unless`): there no answer, or a status
//! its preflight does not accept, is what the real run would fail on, a blocker of kind failed
//! (issue 32 item 5). `--offline` skips it. The nodes pull images themselves, and their egress is
//! not checked from here: the check's line says so.
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
    /// The statuses the installer's preflight accepts from this host, aborting the install on any
    /// other answer or none; empty: the install needs the host later, and no answer is a warning.
    #[serde(default)]
    pub aborts_unless: Vec<u16>,
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
/// for that profile (or every profile, `*`). An override named as a data row's host is that row
/// at another URL (a mirror, a test's loopback stand-in): what it is needed for, and whether the
/// install aborts without it, stay the row's.
pub fn hosts(profile: &str, override_value: Option<&str>) -> Vec<Host> {
    let rows = data().iter().filter(|h| h.profiles.iter().any(|p| p == "*" || p == profile));
    if let Some(v) = override_value.filter(|v| !v.trim().is_empty()) {
        let rows: Vec<&Host> = rows.collect();
        return v
            .split(',')
            .filter_map(|pair| pair.trim().split_once('='))
            .map(|(host, url)| {
                let (host, url) = (host.trim().to_string(), url.trim().to_string());
                match rows.iter().find(|r| r.host == host) {
                    Some(row) => Host { url, ..(*row).clone() },
                    None => Host {
                        host,
                        url,
                        profiles: vec!["*".into()],
                        needed_for: format!("its entry in {OVERRIDE}"),
                        aborts_unless: Vec::new(),
                        upstream: String::new(),
                    },
                }
            })
            .collect();
    }
    rows.cloned().collect()
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
    let fix = "check the proxy and firewall (HTTPS_PROXY, NO_PROXY), or pass --offline to skip this check";
    for (h, a) in answers {
        let aborts = !h.aborts_unless.is_empty();
        match a {
            Err(e) if aborts => c.fail(
                format!(
                    "{} does not answer from this host {through}: {e}; the installer's preflight asks it on every \
                     install and aborts without an answer ({})",
                    h.host, h.needed_for
                ),
                "make it reachable through the proxy the bastion gets (HTTPS_PROXY, NO_PROXY, --ca-bundle)",
            ),
            Ok(status) if aborts && !h.aborts_unless.contains(status) => c.fail(
                format!(
                    "{} answered {status} from this host {through}; the installer's preflight accepts only {} \
                     and aborts the install otherwise",
                    h.host,
                    h.aborts_unless.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
                ),
                "make it reachable through the proxy the bastion gets (HTTPS_PROXY, NO_PROXY, --ca-bundle)",
            ),
            Err(e) => c.warn(
                format!("{} does not answer from this host {through}: {e} (needed for {})", h.host, h.needed_for),
                fix,
            ),
            Ok(_) => {}
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
        assert!(h.iter().all(|h| h.aborts_unless.is_empty()), "a name no row has aborts nothing");
        // A data row's host at another URL keeps the row's meaning.
        let g = hosts("main", Some("google.com=https://localhost:9/ok"));
        let row = hosts("main", None).into_iter().find(|h| h.host == "google.com").unwrap();
        assert_eq!(g, [Host { url: "https://localhost:9/ok".into(), ..row }]);
    }

    /// The installer's preflight GETs https://google.com and aborts the install unless it answers
    /// 200, 301, 302, 303, 307 or 429 (intel/enterprise-ai-solutions@38406a08
    /// playbooks/includes/preflight.yaml): the data's row says so, and eas's check of that host
    /// fails (a blocker of kind failed, exit 1) where the other hosts only warn.
    #[test]
    fn a_host_the_installer_aborts_without_fails_the_check_when_it_does_not_answer_as_the_installer_needs() {
        let row = |n: &str| hosts("main", None).into_iter().find(|h| h.host == n).unwrap();
        let google = row("google.com");
        assert_eq!(google.aborts_unless, [200, 301, 302, 303, 307, 429]);
        assert!(hosts("main", None).iter().filter(|h| h.host != "google.com").all(|h| h.aborts_unless.is_empty()));
        for (answer, says) in [
            (
                Err("connection refused".to_string()),
                "google.com does not answer from this host directly: connection refused",
            ),
            (
                Ok(403),
                "google.com answered 403 from this host directly; the installer's preflight accepts only 200, 301",
            ),
        ] {
            let answers = vec![(google.clone(), answer), (row("ghcr.io"), Err("timed out".into()))];
            let c = check(Some(&answers), "directly");
            let report = crate::prereq::Report { checks: vec![c.clone()] };
            let blockers = report.blockers();
            assert_eq!(blockers.len(), 1, "{blockers:?}");
            assert_eq!(blockers[0].kind, crate::plan::Kind::Failed);
            assert_eq!(blockers[0].exit_code(), 1);
            assert!(blockers[0].cause.starts_with(says), "{}", blockers[0].cause);
            assert_eq!(report.warnings().len(), 1, "ghcr.io only warns");
            let (passed, _, detail) = c.line();
            assert!(!passed, "doctor fails it: {detail}");
        }
        let ok = check(Some(&[(google.clone(), Ok(301))]), "directly");
        assert!(ok.findings.is_empty() && ok.line().0, "{ok:?}");
    }

    #[test]
    fn a_host_without_an_answer_is_a_warning_and_an_answer_of_any_status_passes() {
        let h = |n: &str| Host {
            host: n.into(),
            url: String::new(),
            profiles: vec![],
            needed_for: "charts".into(),
            aborts_unless: vec![],
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
