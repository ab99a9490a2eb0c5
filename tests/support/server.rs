//! A small HTTP(S) server on 127.0.0.1 for the live tests: std `TcpListener`,
//! rustls on top when TLS is asked for (optionally requesting a client
//! certificate), one thread per connection, `Connection: close`. Stopped on drop.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::pki::Leaf;

/// What the handler sees of a request.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    /// Path and query.
    pub path: String,
    pub authorization: Option<String>,
    pub accept_encoding: Option<String>,
    /// DER of the client certificate, when one was presented.
    pub client_cert: Option<Vec<u8>>,
}

pub(crate) struct Response {
    pub status: u16,
    pub body: Vec<u8>,
    /// The body already gzip-compressed (sent when the client accepts gzip).
    pub gz: Option<Arc<Vec<u8>>>,
    /// Sleep this long before answering.
    pub delay: Duration,
}

impl Response {
    /// A 200 response with a precompressed copy.
    pub(crate) fn ok_gz(body: &Arc<Vec<u8>>, gz: &Arc<Vec<u8>>) -> Response {
        Response {
            status: 200,
            body: body.to_vec(),
            gz: Some(gz.clone()),
            delay: Duration::ZERO,
        }
    }

    /// Gzip-compresses `body`.
    pub(crate) fn compress(body: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = e.write_all(body);
        e.finish().unwrap_or_default()
    }

    pub(crate) fn ok(body: impl Into<Vec<u8>>) -> Response {
        Response {
            status: 200,
            body: body.into(),
            gz: None,
            delay: Duration::ZERO,
        }
    }
    pub(crate) fn status(status: u16, body: &str) -> Response {
        Response {
            status,
            body: body.as_bytes().to_vec(),
            gz: None,
            delay: Duration::ZERO,
        }
    }
}

/// TLS for the server.
pub(crate) struct Tls {
    pub server: Leaf,
    /// Request (but do not require) client certificates signed by this CA.
    pub client_ca_pem: Option<String>,
}

type Handler = dyn Fn(&Request) -> Response + Send + Sync;

pub(crate) struct Server {
    pub addr: SocketAddr,
    pub requests: Arc<std::sync::Mutex<Vec<Request>>>,
    pub hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(
        tls: Option<Tls>,
        handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind test server");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let cfg = tls.map(|t| Arc::new(server_config(&t)));
        let handler: Arc<Handler> = Arc::new(handler);
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stop2, hits2, req2) = (stop.clone(), hits.clone(), requests.clone());
        let accept = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let (cfg, handler, hits, reqs, stop) = (
                            cfg.clone(),
                            handler.clone(),
                            hits2.clone(),
                            req2.clone(),
                            stop2.clone(),
                        );
                        std::thread::spawn(move || {
                            let _ = tcp.set_nonblocking(false);
                            let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                            let _ = tcp.set_write_timeout(Some(Duration::from_secs(10)));
                            serve(tcp, cfg, &*handler, &hits, &reqs, &stop);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Server {
            addr,
            requests,
            hits,
            stop,
            accept: Some(accept),
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Paths requested so far.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.requests
            .lock()
            .map(|r| r.iter().map(|x| x.path.clone()).collect())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn server_config(t: &Tls) -> rustls::ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(t.server.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("server cert pem");
    let key = PrivateKeyDer::from_pem_slice(t.server.key_pem.as_bytes()).expect("server key pem");
    let b = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let b = match &t.client_ca_pem {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(c.expect("ca pem")).expect("add root");
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .expect("client verifier");
            b.with_client_cert_verifier(v)
        }
        None => b.with_no_client_auth(),
    };
    b.with_single_cert(certs, key).expect("server cert")
}

fn serve(
    tcp: TcpStream,
    cfg: Option<Arc<rustls::ServerConfig>>,
    handler: &Handler,
    hits: &AtomicUsize,
    reqs: &std::sync::Mutex<Vec<Request>>,
    stop: &AtomicBool,
) {
    match cfg {
        Some(cfg) => {
            let Ok(conn) = rustls::ServerConnection::new(cfg) else {
                return;
            };
            let mut s = rustls::StreamOwned::new(conn, tcp);
            let Some(head) = read_head(&mut s) else {
                return;
            };
            let cert = s
                .conn
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| c.as_ref().to_vec());
            respond(&mut s, &head, cert, handler, hits, reqs, stop);
            s.conn.send_close_notify();
            let _ = s.flush();
        }
        None => {
            let mut s = tcp;
            let Some(head) = read_head(&mut s) else {
                return;
            };
            respond(&mut s, &head, None, handler, hits, reqs, stop);
        }
    }
}

fn read_head(s: &mut impl Read) -> Option<String> {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut b).ok()?;
        if n == 0 || buf.len() > 64 << 10 {
            return None;
        }
        buf.extend_from_slice(&b[..n]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn respond(
    s: &mut impl Write,
    head: &str,
    client_cert: Option<Vec<u8>>,
    handler: &Handler,
    hits: &AtomicUsize,
    reqs: &std::sync::Mutex<Vec<Request>>,
    stop: &AtomicBool,
) {
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("/")
        .to_string();
    let mut req = Request {
        path,
        authorization: None,
        accept_encoding: None,
        client_cert,
    };
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "authorization" => req.authorization = Some(v.trim().to_string()),
                "accept-encoding" => req.accept_encoding = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    hits.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut r) = reqs.lock() {
        r.push(req.clone());
    }
    let resp = handler(&req);
    // Sleep in small steps so that a stopped server does not linger.
    let mut slept = Duration::ZERO;
    while slept < resp.delay && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        slept += Duration::from_millis(20);
    }
    let gzip = req.accept_encoding.as_deref().is_some_and(|a| a.contains("gzip")) && resp.status == 200;
    let body = if gzip && resp.gz.is_some() {
        resp.gz.as_deref().cloned().unwrap_or_default()
    } else if gzip {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = e.write_all(&resp.body);
        e.finish().unwrap_or_default()
    } else {
        resp.body
    };
    let head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        resp.status,
        body.len(),
        if gzip { "Content-Encoding: gzip\r\n" } else { "" }
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&body);
    let _ = s.flush();
}

/// An HTTP CONNECT proxy on 127.0.0.1 (for `proxy-url`); records the CONNECT targets.
pub(crate) struct ConnectProxy {
    pub addr: SocketAddr,
    pub targets: Arc<std::sync::Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl ConnectProxy {
    pub(crate) fn start() -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let targets = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stop2, targets2) = (stop.clone(), targets.clone());
        let accept = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut client, _)) => {
                        let targets = targets2.clone();
                        std::thread::spawn(move || {
                            let _ = client.set_nonblocking(false);
                            let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
                            let Some(head) = read_head(&mut client) else {
                                return;
                            };
                            let Some(target) = head
                                .strip_prefix("CONNECT ")
                                .and_then(|r| r.split(' ').next())
                                .map(str::to_string)
                            else {
                                let _ = client.write_all(b"HTTP/1.1 405 X\r\nContent-Length: 0\r\n\r\n");
                                return;
                            };
                            if let Ok(mut t) = targets.lock() {
                                t.push(target.clone());
                            }
                            // Test servers listen on 127.0.0.1 whatever name the client used.
                            let port = target.rsplit(':').next().unwrap_or("0");
                            let Ok(upstream) = TcpStream::connect(format!("127.0.0.1:{port}")) else {
                                let _ = client.write_all(b"HTTP/1.1 502 X\r\nContent-Length: 0\r\n\r\n");
                                return;
                            };
                            let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                            let (Ok(mut c2), Ok(mut u2)) = (client.try_clone(), upstream.try_clone()) else {
                                return;
                            };
                            let mut upstream = upstream;
                            let t = std::thread::spawn(move || {
                                let _ = std::io::copy(&mut c2, &mut u2);
                                let _ = u2.shutdown(std::net::Shutdown::Write);
                            });
                            let _ = std::io::copy(&mut upstream, &mut client);
                            let _ = client.shutdown(std::net::Shutdown::Write);
                            let _ = t.join();
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        ConnectProxy {
            addr,
            targets,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}
