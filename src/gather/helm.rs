//! Helm releases from Helm's storage Secrets (type `helm.sh/release.v1`).
//!
//! Helm stores each revision of a release as one Secret whose `release` key holds
//! base64(gzip(JSON release)); the API server base64-encodes Secret data once more. Only the
//! newest revision of each release is decoded, and only its chart name, chart version and
//! status are kept: the payload also carries the release's values, which may hold passwords,
//! so nothing else of it is stored, printed or logged.

use std::collections::BTreeMap;
use std::io::Read;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use crate::facts::HelmRelease;

pub const SECRET_TYPE: &str = "helm.sh/release.v1";
/// A decoded release larger than this is refused rather than read (Secrets are capped at 1 MiB
/// compressed; this bounds a hostile gzip bomb).
const MAX_DECODED: u64 = 256 * 1024 * 1024;

/// One Helm storage Secret as the list hands it over: its identity and its still-encoded payload.
pub struct StoredRevision {
    pub namespace: String,
    pub secret: String,
    pub labels: BTreeMap<String, String>,
    /// The Secret's `data.release`: base64 of Helm's own base64 text.
    pub payload: Option<String>,
}

/// The newest revision of each release seen so far, keyed by (namespace, release name).
#[derive(Default)]
pub struct Releases {
    newest: BTreeMap<(String, String), (u64, StoredRevision)>,
}

impl Releases {
    /// Keeps `rev` if it is the newest revision of its release so far. The revision number comes
    /// from Helm's `version` label, else from the Secret name's `.v<N>` suffix.
    pub fn offer(&mut self, rev: StoredRevision) {
        let name = rev.labels.get("name").cloned().or_else(|| release_from_secret_name(&rev.secret));
        let Some(name) = name else {
            // Not named the way Helm names its Secrets: keyed by the Secret so it is still reported.
            let key = (rev.namespace.clone(), rev.secret.clone());
            self.newest.insert(key, (0, rev));
            return;
        };
        let number = rev
            .labels
            .get("version")
            .and_then(|v| v.parse().ok())
            .or_else(|| revision_from_secret_name(&rev.secret))
            .unwrap_or(0);
        let key = (rev.namespace.clone(), name);
        match self.newest.get(&key) {
            Some((have, _)) if *have >= number => {}
            _ => {
                self.newest.insert(key, (number, rev));
            }
        }
    }

    /// Decodes the newest revision of every release. A payload that cannot be decoded still
    /// yields the release (its status from Helm's label, its chart empty) and a warning.
    pub fn decode(self) -> (Vec<HelmRelease>, Vec<String>) {
        let mut out = Vec::new();
        let mut warnings = Vec::new();
        for ((namespace, name), (_, rev)) in self.newest {
            match rev.payload.as_deref().ok_or(DecodeError::Missing).and_then(decode_payload) {
                Ok(r) => out.push(HelmRelease {
                    namespace: if r.namespace.is_empty() { namespace } else { r.namespace },
                    name: if r.name.is_empty() { name } else { r.name },
                    chart: chart_label(&r.chart.metadata.name, &r.chart.metadata.version),
                    status: r.info.status,
                }),
                Err(e) => {
                    warnings.push(format!(
                        "Helm release {namespace}/{name}: Secret {} could not be decoded ({e}); reported with an empty chart",
                        rev.secret
                    ));
                    let status = rev.labels.get("status").cloned().unwrap_or_default();
                    out.push(HelmRelease { namespace, name, chart: String::new(), status });
                }
            }
        }
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        (out, warnings)
    }
}

/// `helm list`'s CHART column: `<name>-<version>`.
fn chart_label(name: &str, version: &str) -> String {
    match (name.is_empty(), version.is_empty()) {
        (true, _) => String::new(),
        (false, true) => name.to_string(),
        (false, false) => format!("{name}-{version}"),
    }
}

/// `sh.helm.release.v1.<release>.v<N>` → `<release>`.
fn release_from_secret_name(secret: &str) -> Option<String> {
    let rest = secret.strip_prefix("sh.helm.release.v1.")?;
    let (name, _) = rest.rsplit_once(".v")?;
    (!name.is_empty()).then(|| name.to_string())
}

fn revision_from_secret_name(secret: &str) -> Option<u64> {
    secret.strip_prefix("sh.helm.release.v1.")?.rsplit_once(".v")?.1.parse().ok()
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("no `release` key")]
    Missing,
    #[error("not base64")]
    Base64,
    #[error("not gzip: {0}")]
    Gzip(String),
    #[error("not a Helm release: {0}")]
    Json(String),
}

#[derive(Deserialize, Default)]
struct Release {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    info: Info,
    #[serde(default)]
    chart: Chart,
}

#[derive(Deserialize, Default)]
struct Info {
    #[serde(default)]
    status: String,
}

#[derive(Deserialize, Default)]
struct Chart {
    #[serde(default)]
    metadata: ChartMetadata,
}

#[derive(Deserialize, Default)]
struct ChartMetadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
}

/// Secret data (base64) → Helm's text (base64) → gzip (or, from old Helm, plain JSON) → the
/// few fields kept. The JSON is read as a stream, so the values in it are never held whole.
fn decode_payload(secret_data: &str) -> Result<Release, DecodeError> {
    let helm_text = STANDARD.decode(secret_data.trim()).map_err(|_| DecodeError::Base64)?;
    let raw = STANDARD.decode(helm_text.trim_ascii()).map_err(|_| DecodeError::Base64)?;
    // An I/O error inside the JSON reader can only come from the gzip stream beneath it.
    let json = |r: &mut dyn Read| -> Result<Release, DecodeError> {
        serde_json::from_reader(r.take(MAX_DECODED))
            .map_err(|e| if e.is_io() { DecodeError::Gzip(e.to_string()) } else { DecodeError::Json(e.to_string()) })
    };
    if raw.starts_with(&[0x1f, 0x8b]) {
        json(&mut flate2::read::GzDecoder::new(raw.as_slice()))
    } else {
        json(&mut raw.as_slice())
    }
}

#[cfg(test)]
pub mod tests {
    use std::io::Write;

    use super::*;

    /// Encodes a release the way Helm and the API server do (test support, also used by the
    /// objects tests).
    pub fn encode(release_json: &str) -> String {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(release_json.as_bytes()).unwrap();
        let helm_text = STANDARD.encode(gz.finish().unwrap());
        STANDARD.encode(helm_text)
    }

    fn rev(ns: &str, name: &str, n: u64, status: &str, chart_version: &str) -> StoredRevision {
        let json = format!(
            r#"{{"name":"{name}","namespace":"{ns}","version":{n},"info":{{"status":"{status}"}},
               "chart":{{"metadata":{{"name":"{name}","version":"{chart_version}"}}}},
               "config":{{"adminPassword":"hunter2"}}}}"#
        );
        StoredRevision {
            namespace: ns.into(),
            secret: format!("sh.helm.release.v1.{name}.v{n}"),
            labels: [("name", name), ("owner", "helm"), ("status", status), ("version", &n.to_string())]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            payload: Some(encode(&json)),
        }
    }

    #[test]
    fn newest_revision_wins_whatever_the_order() {
        let mut r = Releases::default();
        r.offer(rev("kserve", "kserve", 2, "deployed", "0.15.2"));
        r.offer(rev("kserve", "kserve", 10, "failed", "0.16.0"));
        r.offer(rev("kserve", "kserve", 9, "superseded", "0.15.9"));
        r.offer(rev("nfd", "node-feature-discovery", 1, "deployed", "0.17.1"));
        let (releases, warnings) = r.decode();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            releases,
            vec![
                HelmRelease {
                    namespace: "kserve".into(),
                    name: "kserve".into(),
                    chart: "kserve-0.16.0".into(),
                    status: "failed".into()
                },
                HelmRelease {
                    namespace: "nfd".into(),
                    name: "node-feature-discovery".into(),
                    chart: "node-feature-discovery-0.17.1".into(),
                    status: "deployed".into()
                },
            ]
        );
    }

    #[test]
    fn revision_from_the_secret_name_when_labels_are_missing() {
        let mut a = rev("ns", "app", 3, "deployed", "3.0.0");
        let mut b = rev("ns", "app", 12, "deployed", "12.0.0");
        a.labels.clear();
        b.labels.clear();
        let mut r = Releases::default();
        r.offer(b);
        r.offer(a);
        let (releases, _) = r.decode();
        assert_eq!(releases.len(), 1);
        assert_eq!(releases[0].chart, "app-12.0.0");
    }

    #[test]
    fn plain_json_payloads_from_old_helm_decode_too() {
        let json = r#"{"name":"x","namespace":"y","info":{"status":"deployed"},"chart":{"metadata":{"name":"c","version":"1.2.3"}}}"#;
        let payload = STANDARD.encode(STANDARD.encode(json));
        let r = decode_payload(&payload).unwrap();
        assert_eq!((r.chart.metadata.name.as_str(), r.info.status.as_str()), ("c", "deployed"));
    }

    #[test]
    fn undecodable_payloads_are_reported_not_dropped_and_never_echoed() {
        let mut bad = rev("ns", "broken", 1, "deployed", "1.0.0");
        bad.payload = Some(STANDARD.encode("this is not base64 !!! hunter2"));
        let mut r = Releases::default();
        r.offer(bad);
        let (releases, warnings) = r.decode();
        assert_eq!(
            releases,
            vec![HelmRelease {
                namespace: "ns".into(),
                name: "broken".into(),
                chart: String::new(),
                status: "deployed".into()
            }]
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("ns/broken") && warnings[0].contains("not base64"), "{warnings:?}");
        assert!(!warnings[0].contains("hunter2"));
    }

    #[test]
    fn kept_fields_only() {
        let mut r = Releases::default();
        r.offer(rev("ns", "app", 1, "deployed", "1.0.0"));
        let (releases, _) = r.decode();
        let text = serde_json::to_string(&releases).unwrap();
        assert!(!text.contains("hunter2"), "values must never reach the facts: {text}");
    }
}
