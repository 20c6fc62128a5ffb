//! The recorded server's `pods/NAME/portforward` over a WebSocket, and the service proxy of a
//! namespace in Istio's ambient mesh, as a real API server and kubelet answer them.
//!
//! Port-forward (kubernetes/kubernetes@a23d4fdd `pkg/kubelet/cri/streaming/portforward/
//! websocket.go`: `NewV4Options` reads the `ports` query parameter, `handleWebSocketStreams`
//! opens per port a data channel 2n and an error channel 2n+1 under the subprotocol
//! `v4.channel.k8s.io` and writes the port as 2 little-endian bytes as the first frame of each;
//! `portForward` writes "error forwarding port P to pod NAME, uid U: ..." on the error channel
//! when the pod's port cannot be reached). Each binary message carries its channel as its first
//! byte (kube-client 5.0.0 `src/api/portforward.rs`, which checks the initial frames). Behind
//! the port of a Ready vLLM workload pod it answers one HTTP/1.1 request as vLLM does, then closes.
//!
//! The mesh: a namespace labelled `istio.io/dataplane-mode` (EI labels its model namespace
//! `ambient` when Istio is on: intel/enterprise-inference@eee44104
//! `roles/llm_services/tasks/install.yaml` lines 14-24) under STRICT mTLS refuses the API
//! server's plaintext connection to a pod, and the service proxy answers as the API server does
//! when its round trip to the backend fails: 503 ServiceUnavailable, "error trying to reach
//! service: <the dial or read error>" (k8s.io/apimachinery `pkg/util/proxy/transport.go`
//! `Transport.RoundTrip`; kubernetes/kubernetes@442a69c3 staging/src/k8s.io/apimachinery still
//! wrote it as a text/plain 503, newer ones return `errors.NewServiceUnavailable`, a Status).
//! The read error's text (a reset from ztunnel) is ours: no capture of a real one was read.

use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Message, handshake::derive_accept_key, protocol::Role};

use super::{Answer, State, parse_query, resource_by_plural, status};

const PROTOCOL: &str = "v4.channel.k8s.io";
pub const MESH_LABEL: &str = "istio.io/dataplane-mode";

/// `GET /api/v1/namespaces/NS/pods/NAME/portforward`: its namespace and pod.
pub fn target(method: &Method, path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (ns, rest) = rest.split_once("/pods/")?;
    let pod = rest.strip_suffix("/portforward")?;
    (method == Method::GET && !pod.contains('/')).then(|| (ns.to_string(), pod.to_string()))
}

/// Whether namespace `ns` is enrolled in the ambient mesh.
pub fn in_mesh(s: &State, ns: &str) -> bool {
    let r = resource_by_plural("v1", "namespaces").expect("namespaces");
    s.objects
        .get(&super::key(r, "", ns))
        .and_then(|n| n.pointer("/metadata/labels")?.get(MESH_LABEL)?.as_str().map(|m| m != "none"))
        .unwrap_or(false)
}

/// The service proxy's answer in a mesh namespace: the connection to the endpoint's pod is
/// reset by the mesh, and the API server says so.
pub fn mesh_refusal(s: &State, ns: &str, svc: &str) -> Answer {
    let ip = endpoint_ip(s, ns, svc).unwrap_or_else(|| "10.42.0.31".into());
    status(
        503,
        &format!("error trying to reach service: read tcp 10.42.0.1:41872->{ip}:8000: read: connection reset by peer"),
        None,
    )
}

fn endpoint_ip(s: &State, ns: &str, svc: &str) -> Option<String> {
    let r = resource_by_plural("v1", "endpoints")?;
    let ep = s.objects.get(&super::key(r, ns, svc))?;
    ep.pointer("/subsets/0/addresses/0/ip")?.as_str().map(str::to_string)
}

/// What serves a pod's port: a Ready vLLM workload pod's model name, or why nothing does.
fn serving(s: &State, ns: &str, pod: &str) -> Result<Option<String>, Box<Answer>> {
    let r = resource_by_plural("v1", "pods").expect("pods");
    let Some(p) = s.objects.get(&super::key(r, ns, pod)) else {
        return Err(Box::new(super::not_found(r, pod)));
    };
    let ready = p["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    let labels = &p["metadata"]["labels"];
    let model = labels["app.kubernetes.io/name"].as_str().filter(|_| labels["kserve.io/component"] == "workload");
    Ok(match (ready, model) {
        (true, Some(m)) => Some(super::served_name(s, ns, m)),
        _ => None,
    })
}

/// The upgrade to a WebSocket, as the kubelet answers it (through the API server), and the
/// forwarding behind it.
pub fn open(req: Request<Incoming>, state: &Arc<Mutex<State>>, ns: &str, pod: &str, query: &str) -> Answer {
    let ports: Vec<u16> = parse_query(query)
        .get("ports")
        .map(|p| p.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_default();
    if ports.is_empty() {
        return status(400, "query parameter \"ports\" is required", None);
    }
    let served = match serving(&state.lock().unwrap(), ns, pod) {
        Ok(s) => s,
        Err(a) => return *a,
    };
    let headers = req.headers();
    let upgrade = headers.get(hyper::header::UPGRADE).and_then(|v| v.to_str().ok());
    let Some(key) = headers.get(hyper::header::SEC_WEBSOCKET_KEY).cloned() else {
        return status(400, "the recorded server forwards ports over a WebSocket only", None);
    };
    let offered = headers.get(hyper::header::SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        || !offered.split(',').any(|p| p.trim() == PROTOCOL)
    {
        return status(400, &format!("unable to upgrade connection: the subprotocol {PROTOCOL} was not offered"), None);
    }
    let (ns, pod) = (ns.to_string(), pod.to_string());
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(req).await else { return };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        forward(ws, &ports, served.as_deref(), &ns, &pod).await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(hyper::header::UPGRADE, "websocket")
        .header(hyper::header::CONNECTION, "Upgrade")
        .header(hyper::header::SEC_WEBSOCKET_ACCEPT, derive_accept_key(key.as_bytes()))
        .header(hyper::header::SEC_WEBSOCKET_PROTOCOL, PROTOCOL)
        .body(http_body_util::Full::new(Bytes::new()).map_err(|e| match e {}).boxed())
        .expect("response")
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::binary(v)
}

/// The first frames (the port on each channel), then one HTTP exchange on the first port's
/// data channel, or the kubelet's error on its error channel when nothing serves the port.
async fn forward<S>(mut ws: WebSocketStream<S>, ports: &[u16], served: Option<&str>, ns: &str, pod: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    for (i, port) in ports.iter().enumerate() {
        let i = u8::try_from(i).expect("few ports");
        for ch in [2 * i, 2 * i + 1] {
            if ws.send(frame(ch, &port.to_le_bytes())).await.is_err() {
                return;
            }
        }
    }
    let Some(served) = served else {
        let why = format!(
            "error forwarding port {} to pod {pod}, uid : failed to connect to localhost:{} inside namespace of \
             pod {ns}/{pod}: connection refused",
            ports[0], ports[0]
        );
        let _ = ws.send(frame(1, why.as_bytes())).await;
        let _ = ws.close(None).await;
        return;
    };
    let mut asked = Vec::new();
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Binary(b) = msg else {
            if matches!(msg, Message::Close(_)) {
                return;
            }
            continue;
        };
        if b.first() == Some(&0) {
            asked.extend_from_slice(&b[1..]);
        }
        if let Some((method, path, body)) = request(&asked) {
            let (code, body) = super::vllm(&method, &path, &body, served);
            let reason = StatusCode::from_u16(code).map(|c| c.canonical_reason().unwrap_or("")).unwrap_or("");
            let head = format!(
                "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = ws.send(frame(0, &[head.as_bytes(), &body].concat())).await;
            let _ = ws.close(None).await;
            return;
        }
    }
}

/// An HTTP/1.1 request once all of it has arrived (its body by `content-length`).
fn request(b: &[u8]) -> Option<(Method, String, Vec<u8>)> {
    let end = b.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&b[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = Method::from_bytes(first.next()?.as_bytes()).ok()?;
    let path = first.next()?.to_string();
    let len: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let body = b.get(end + 4..end + 4 + len)?.to_vec();
    Some((method, path, body))
}
