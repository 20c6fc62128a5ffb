//! A TLS server on 127.0.0.1 for the name `localhost`, its certificate signed by a throwaway CA
//! made here (rcgen): either a TLS front relaying each connection to a plain TCP backend (the
//! recorded cluster's HTTP server), or a static file server (git's dumb HTTP protocol).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

pub struct TlsFront {
    pub port: u16,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The CA certificate, DER.
    #[allow(dead_code)] // src/trees.rs's tests read it (src/main.rs includes this file)
    pub ca_der: Vec<u8>,
    /// Serves until dropped.
    _rt: tokio::runtime::Runtime,
}

enum Serve {
    Relay(SocketAddr),
    Files(PathBuf),
}

impl TlsFront {
    /// Terminates TLS and relays the bytes to `backend`.
    pub fn relay(backend: SocketAddr) -> TlsFront {
        start(Serve::Relay(backend))
    }

    /// Answers `GET /path[?query]` with the file under `root` (404 when absent).
    pub fn files(root: PathBuf) -> TlsFront {
        start(Serve::Files(root))
    }

    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }
}

/// A throwaway CA named `common_name` and a TLS acceptor whose certificate for `localhost` it
/// signed: what a test server needs, and what its client must be told to trust.
pub struct TestCa {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// The CA certificate, PEM.
    pub pem: String,
    /// The CA certificate, DER.
    pub der: Vec<u8>,
}

pub fn localhost_ca(common_name: &str) -> TestCa {
    let (ca_cert, issuer) = self_signed_ca(common_name);
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth();
    let (chain, key) = signed_for(&["localhost"], &issuer);
    TestCa {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config.with_single_cert(chain, key).unwrap())),
        pem: ca_cert.pem(),
        der: ca_cert.der().to_vec(),
    }
}

/// A throwaway CA named `common_name`: its certificate, and the issuer that signs with its key.
pub fn self_signed_ca(common_name: &str) -> (rcgen::Certificate, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, common_name);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    (ca_cert, rcgen::Issuer::new(ca_params, ca_key))
}

/// A serving certificate for `names` signed by `issuer`, with its key, as rustls serves them.
pub fn signed_for(
    names: &[&str],
    issuer: &rcgen::Issuer<'static, rcgen::KeyPair>,
) -> (Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = rcgen::CertificateParams::new(names).unwrap().signed_by(&key, issuer).unwrap();
    (vec![cert.der().clone()], rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()))
}

fn start(serve: Serve) -> TlsFront {
    let rt = runtime(1);
    let serve = Arc::new(serve);
    let Served { port, ca_pem, ca_der } = serve_tls(&rt, "eas test CA", move |mut tls| {
        let serve = serve.clone();
        async move {
            match &*serve {
                Serve::Relay(backend) => {
                    let Ok(mut up) = tokio::net::TcpStream::connect(backend).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                }
                Serve::Files(root) => serve_files(&mut tls, root).await,
            }
        }
    });
    TlsFront { port, ca_pem, ca_der, _rt: rt }
}

/// A runtime of `workers` threads with every driver on, for test servers and their clients.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap()
}

/// Where a server [`serve_tls`] started listens, and the CA its client must trust.
pub struct Served {
    pub port: u16,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The CA certificate, DER.
    pub ca_der: Vec<u8>,
}

/// One TLS connection, as [`serve_tls`] hands it over.
pub type Tls = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// A TLS server for `localhost` on a free port of 127.0.0.1, run on `rt`, its certificate signed
/// by a throwaway CA named `ca_name`: each connection, once its handshake succeeded, is handed to
/// `serve` on a task of its own.
pub fn serve_tls<F, Fut>(rt: &tokio::runtime::Runtime, ca_name: &str, serve: F) -> Served
where
    F: Fn(Tls) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let TestCa { acceptor, pem, der } = localhost_ca(ca_name);
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let serve = Arc::new(serve);
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (acceptor, serve) = (acceptor.clone(), serve.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    serve(tls).await;
                }
            });
        }
    });
    Served { port, ca_pem: pem, ca_der: der }
}

async fn serve_files(tls: &mut Tls, root: &std::path::Path) {
    let mut seen = Vec::new();
    loop {
        let Some(head) = request_head(tls, &mut seen).await else { return };
        let target = head.split_whitespace().nth(1).unwrap_or("/");
        let path = target.split('?').next().unwrap_or("/").trim_start_matches('/');
        let file = if path.split('/').any(|c| c == "..") { None } else { std::fs::read(root.join(path)).ok() };
        let (status, body) = match file {
            Some(b) => ("200 OK", b),
            None => ("404 Not Found", b"not found\n".to_vec()),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if tls.write_all(reply.as_bytes()).await.is_err() || tls.write_all(&body).await.is_err() {
            return;
        }
    }
}

/// The next HTTP request head from `conn` (through its blank line), taken off `seen`, which keeps
/// what was read past it; `None` once the peer closes or fails first.
pub async fn request_head<S: tokio::io::AsyncRead + Unpin>(conn: &mut S, seen: &mut Vec<u8>) -> Option<String> {
    let mut buf = [0u8; 8192];
    loop {
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&seen[..at + 4]).into_owned();
            seen.drain(..at + 4);
            return Some(head);
        }
        match tokio::io::AsyncReadExt::read(conn, &mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// A loopback stand-in for the hosts the egress check asks: every row of `data/egress.json`, by
/// its host name, at a URL of one TLS server here, which answers `/ok` with 200 (a status the
/// installer's preflight accepts from google.com) and anything else with 404 (any answer passes
/// for the other hosts), without a body, so a `HEAD` and the next request share a connection.
/// Its CA is trusted through `SSL_CERT_FILE` ([`EgressStandIn::cert_file`]: the system's CAs and
/// it), which rustls-native-certs reads for eas's own connections, so the bastion's build context
/// (only `--ca-bundle` goes there) does not change.
///
/// The file has no name on disk: an unnamed temporary file held open by this process, reached as
/// `/proc/<pid>/fd/<fd>` by the processes it starts (each opens it afresh). The tests keep the
/// stand-in in a static, which is never dropped, so a named file would outlive every test process;
/// this one goes with the process, however it ends.
pub struct EgressStandIn {
    /// `EAS_EGRESS_URLS`: `google.com=https://localhost:PORT/ok,...`.
    pub urls: String,
    /// `/proc/<this process>/fd/<fd>`, valid while the stand-in lives.
    pub cert_file: PathBuf,
    _file: std::fs::File,
    _rt: tokio::runtime::Runtime,
}

/// The hosts `data/egress.json` names (its rows' `host`).
pub const EGRESS_HOSTS: [&str; 4] = ["google.com", "ghcr.io", "registry.k8s.io", "docker.io"];

impl EgressStandIn {
    pub fn start() -> EgressStandIn {
        let rt = runtime(1);
        let served = serve_tls(&rt, "eas egress stand-in CA", |mut tls| async move {
            let mut seen = Vec::new();
            while let Some(head) = request_head(&mut tls, &mut seen).await {
                let ok = head.split_whitespace().nth(1) == Some("/ok");
                let status = if ok { "200 OK" } else { "404 Not Found" };
                let reply = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                if tls.write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, format!("{system}{}", served.ca_pem).as_bytes()).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let cert_file = PathBuf::from(format!("/proc/{}/fd/{fd}", std::process::id()));
        let url = format!("https://localhost:{}/ok", served.port);
        let urls = EGRESS_HOSTS.iter().map(|h| format!("{h}={url}")).collect::<Vec<_>>().join(",");
        EgressStandIn { urls, cert_file, _file: file, _rt: rt }
    }
}

/// A TLS-intercepting forward proxy, as a corporate one is to a client that lacks its CA: each
/// `CONNECT host:port` is answered `200 Connection established`, then the tunnel's TLS is ended
/// here with a certificate of a throwaway CA no client was given, so the client's verification
/// fails before a byte of its request is sent (pip: `[SSL: CERTIFICATE_VERIFY_FAILED]`). Any
/// other request is 405. It listens on `ip` (the Docker bridge's gateway, for a build's RUN step)
/// and keeps the targets asked for. The Docker tier's.
#[cfg(feature = "docker-tests")]
pub struct InterceptingProxy {
    /// `http://IP:PORT`, for HTTPS_PROXY.
    pub url: String,
    connects: Arc<std::sync::Mutex<Vec<String>>>,
    _rt: tokio::runtime::Runtime,
}

#[cfg(feature = "docker-tests")]
impl InterceptingProxy {
    pub fn start(ip: std::net::IpAddr) -> InterceptingProxy {
        let rt = runtime(1);
        let TestCa { acceptor, .. } = localhost_ca("eas intercepting proxy CA");
        let listener = rt.block_on(tokio::net::TcpListener::bind((ip, 0))).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connects: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let seen_by = connects.clone();
        rt.spawn(async move {
            loop {
                let Ok((mut tcp, _)) = listener.accept().await else { return };
                let (acceptor, connects) = (acceptor.clone(), seen_by.clone());
                tokio::spawn(async move {
                    let Some(head) = request_head(&mut tcp, &mut Vec::new()).await else { return };
                    let mut words = head.split_whitespace();
                    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                    if method != "CONNECT" {
                        let _ = tcp.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n").await;
                        return;
                    }
                    connects.lock().unwrap().push(target.to_string());
                    if tcp.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
                        return;
                    }
                    // A client that trusted this CA would get 403 for everything; none here does.
                    if let Ok(mut tls) = acceptor.accept(tcp).await {
                        let _ = tls.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n").await;
                    }
                });
            }
        });
        InterceptingProxy { url, connects, _rt: rt }
    }

    /// The `host:port` of each CONNECT received, in order.
    pub fn connects(&self) -> Vec<String> {
        self.connects.lock().unwrap().clone()
    }
}
