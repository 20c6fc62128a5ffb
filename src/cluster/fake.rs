//! A fake [`Cluster`] for unit tests: the real `kube::Client` over an in-memory service (kube's
//! `Client::new(service, namespace)`) that answers each request from a table of paths, with the
//! JSON a Kubernetes API server sends. The code under test is the code that runs: only the wire
//! is replaced. Objects come from the recorded clusters under `fixtures/clusters/` (written to
//! the shapes a k3s API server returns, see its README), or are planted by the test; a path
//! with no answer is the API server's 404 `Status` (its shape as the integration tests' server,
//! `tests/it/support/cluster_server.rs` `not_found`, sends it). Every request is kept, so a test
//! can assert what was asked and what was not.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

use super::Cluster;

type Answers = BTreeMap<(String, String), (u16, Value)>;

/// The in-memory API server: answers by method and path (the query aside), and what was asked.
#[derive(Clone, Default)]
pub struct Fake {
    answers: Arc<Mutex<Answers>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    /// An API server with nothing in it: every GET is a 404.
    pub fn new() -> Fake {
        Fake::default()
    }

    /// The namespaces and nodes of the recorded cluster `fixtures/clusters/NAME`, each at its
    /// path and listed at its collection's.
    pub fn recorded(name: &str) -> Fake {
        let fake = Fake::new();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/clusters").join(name);
        for (file, collection) in [("namespaces.json", "/api/v1/namespaces"), ("nodes.json", "/api/v1/nodes")] {
            let text = std::fs::read_to_string(dir.join(file)).expect("a recorded cluster's objects");
            let list: Value = serde_json::from_str(&text).expect("JSON");
            for item in list["items"].as_array().into_iter().flatten() {
                let name = item["metadata"]["name"].as_str().expect("a named object");
                fake.answer("GET", &format!("{collection}/{name}"), 200, item.clone());
            }
            fake.answer("GET", collection, 200, list);
        }
        fake
    }

    /// Answers `method path` with `status` and `body` from now on.
    pub fn answer(&self, method: &str, path: &str, status: u16, body: Value) {
        self.answers.lock().unwrap().insert((method.to_string(), path.to_string()), (status, body));
    }

    /// Answers `method path` with the API server's refusal of that code (`Status`, `Failure`).
    pub fn refuse(&self, method: &str, path: &str, code: u16, reason: &str, message: &str) {
        self.answer(method, path, code, status(code, reason, message));
    }

    /// Every request so far, as `METHOD path?query`.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    /// A cluster whose client talks to this server.
    pub fn cluster(&self) -> Cluster {
        let fake = self.clone();
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let fake = fake.clone();
            async move { Ok::<_, Infallible>(fake.serve(&req)) }
        });
        Cluster::new(kube::Client::new(service, "default"))
    }

    fn serve<B>(&self, req: &http::Request<B>) -> http::Response<Full<Bytes>> {
        let (method, uri) = (req.method().to_string(), req.uri());
        self.asked.lock().unwrap().push(format!("{method} {}", uri.path_and_query().map_or("", |p| p.as_str())));
        let found = self.answers.lock().unwrap().get(&(method, uri.path().to_string())).cloned();
        let (code, body) = found.unwrap_or_else(|| {
            let name = uri.path().rsplit('/').next().unwrap_or_default();
            (404, status(404, "NotFound", &format!("\"{name}\" not found")))
        });
        http::Response::builder()
            .status(code)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(&body).expect("JSON"))))
            .expect("a response")
    }
}

/// The API server's `Status` for a failed request.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The fake answers the real client as an API server would: the recorded cluster's identity
    /// (its kube-system namespace's uid) and its nodes; a path it does not hold is a 404.
    #[tokio::test]
    async fn the_fake_answers_the_real_client_with_the_recorded_objects() {
        let fake = Fake::recorded("k3d-gpu-desktop");
        let cluster = fake.cluster();
        let t = Duration::from_secs(5);
        let key = cluster.identity(t).await.unwrap();
        let recorded: Value = serde_json::from_str(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("fixtures/clusters/k3d-gpu-desktop/namespaces.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let uid = recorded["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["metadata"]["name"] == "kube-system")
            .unwrap()["metadata"]["uid"]
            .clone();
        assert_eq!(Value::from(key), uid);
        assert_eq!(cluster.nodes(t).await.unwrap().len(), 1);
        let none = cluster.get_cluster::<k8s_openapi::api::core::v1::Namespace>("absent", "Namespace", t).await;
        assert!(none.unwrap().is_none(), "a 404 is an absent object");
        let asked = fake.asked();
        assert_eq!(asked[0], "GET /api/v1/namespaces/kube-system");
        assert!(asked[1].starts_with("GET /api/v1/nodes?"), "{asked:?}");
    }
}
