//! One HTTP/1.1 exchange with a pod's port through the API server's `pods/portforward`
//! subresource, over a WebSocket (kube's `ws` feature, kube-client 5.0.0
//! `src/api/portforward.rs`): the way to a model pod the API server's service proxy cannot reach.
//!
//! Why: a pod enrolled in Istio's ambient mesh with STRICT mTLS accepts only mesh traffic, and the
//! API server runs on the host network with no mesh identity, so its service proxy's connection
//! to the pod is refused (EAS says so of its own webhook: intel/enterprise-ai-solutions@cc887cb4
//! `roles/envoy_gateway/tasks/install.yaml`, task "Allow apiserver to reach controller webhook
//! (port-level mTLS)"). A port-forward is served by the kubelet, which connects inside the pod's
//! own network namespace, so the mesh is not on its way.
//!
//! The protocol (kubernetes/kubernetes@a23d4fdd `pkg/kubelet/cri/streaming/portforward/
//! websocket.go`, `handleWebSocketStreams`): subprotocol `v4.channel.k8s.io`, per port a data
//! channel (2n) and an error channel (2n+1), each channel's first frame the port as 2
//! little-endian bytes; kube's `Portforwarder` checks those frames and gives a byte stream per
//! port, which hyper's HTTP/1.1 client speaks over.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::Cluster;
use super::api::{ApiError, said};

/// What the pod answered: its status, and its body line by line, each with when it arrived
/// since the port-forward was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub lines: Vec<(Duration, String)>,
}

impl Answer {
    pub fn text(&self) -> String {
        self.lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n")
    }
}

impl Cluster {
    /// `req` (its path and body; the Host header is added) sent to `port` of pod `ns/pod`, and the
    /// whole answer read, within `t`. `what` names the exchange in an error.
    pub async fn forward_http(
        &self,
        ns: &str,
        pod: &str,
        port: u16,
        req: http::Request<Vec<u8>>,
        what: &str,
        t: Duration,
    ) -> Result<Answer, ApiError> {
        let client = &self.client;
        let call = format!("{what} through a port-forward to pod {ns}/{pod}:{port}");
        let err = |cause: String| ApiError::Call { call: call.clone(), cause };
        let started = Instant::now();
        let exchange = async {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let mut pf = api.portforward(pod, &[port]).await.map_err(|e| err(said(&e)))?;
            let stream = pf.take_stream(port).ok_or_else(|| err("the port-forward gave no stream".into()))?;
            let failed = pf.take_error(port);
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| err(e.to_string()))?;
            let driven = tokio::spawn(conn);
            let (mut parts, body) = req.into_parts();
            parts
                .headers
                .insert(http::header::HOST, http::HeaderValue::from_str(&format!("localhost:{port}")).expect("host"));
            let asked = http::Request::from_parts(parts, http_body_util::Full::new(bytes::Bytes::from(body)));
            let sent = sender.send_request(asked).await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) => {
                    // The kubelet says why on the port's error channel (nothing listening, say).
                    let said = match failed {
                        Some(f) => tokio::time::timeout(Duration::from_secs(2), f).await.ok().flatten(),
                        None => None,
                    };
                    return Err(err(said.unwrap_or_else(|| e.to_string())));
                }
            };
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let (mut lines, mut partial) = (Vec::new(), Vec::<u8>::new());
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| err(format!("reading the answer: {e}")))?;
                let Some(data) = frame.data_ref() else { continue };
                partial.extend_from_slice(data);
                while let Some(i) = partial.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = partial.drain(..=i).collect();
                    let line = String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_string();
                    lines.push((started.elapsed(), line));
                }
            }
            if !partial.is_empty() {
                lines.push((started.elapsed(), String::from_utf8_lossy(&partial).into_owned()));
            }
            drop(sender);
            driven.abort();
            pf.abort();
            Ok(Answer { status, lines })
        };
        match tokio::time::timeout(t, exchange).await {
            Ok(r) => r,
            Err(_) => Err(ApiError::NoAnswer { call, secs: t.as_secs() }),
        }
    }
}
