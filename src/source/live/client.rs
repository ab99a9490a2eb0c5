//! HTTP(S) access to one target: TLS (CA, client certificate, verification name),
//! bearer token, proxy, timeouts, gzip and a bounded body; and failures turned
//! into reasons an on-call engineer can act on.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION};
use serde::Serialize;

use crate::secret::Secret;

/// Default largest `/metrics` body read from one target (after gzip
/// decoding; `--max-body`): far above the largest real apiserver exposition.
pub const MAX_BODY: u64 = 512 << 20;
/// Default of what the scrapes in flight may hold together (`--max-body-total`).
pub const MAX_BODY_TOTAL: u64 = 1 << 30;
/// Largest health body kept.
pub const MAX_HEALTH_BODY: u64 = 64 << 10;

/// Bytes the scrapes in flight may hold at once, shared by all targets: the
/// response text read but not yet parsed, and the families kept from it, until
/// the scrape hands its snapshot over. A scrape that would go over it fails
/// (too large) and the others go on.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now by every scrape.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn try_take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|t| *t <= self.limit)
            })
            .is_ok()
    }

    fn give(&self, n: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| Some(u.saturating_sub(n)));
    }
}

/// What one scrape holds of a [`Budget`]; all of it is given back on drop.
#[derive(Debug)]
pub struct Held<'a> {
    budget: &'a Budget,
    n: std::cell::Cell<u64>,
}

impl<'a> Held<'a> {
    pub fn new(budget: &'a Budget) -> Held<'a> {
        Held {
            budget,
            n: std::cell::Cell::new(0),
        }
    }

    /// Takes `n` more bytes, or refuses when the budget would be exceeded.
    pub fn take(&self, n: u64) -> std::io::Result<()> {
        if self.budget.try_take(n) {
            self.n.set(self.n.get() + n);
            Ok(())
        } else {
            Err(std::io::Error::other(BodyError::Budget(self.budget.limit)))
        }
    }

    /// Gives `n` bytes back.
    pub fn give(&self, n: u64) {
        let n = n.min(self.n.get());
        self.budget.give(n);
        self.n.set(self.n.get() - n);
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.budget.give(self.n.get());
    }
}

/// Caps on reading `/metrics`: per response, and for all scrapes together.
#[derive(Clone, Debug)]
pub struct BodyLimits {
    /// Largest body read from one target, after gzip decoding.
    pub max_body: u64,
    pub budget: Arc<Budget>,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits {
            max_body: MAX_BODY,
            budget: Arc::new(Budget::new(MAX_BODY_TOTAL)),
        }
    }
}

/// Why reading a body stopped early (carried inside an `io::Error`).
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the response is larger than {} after gzip decoding; refused", crate::limits::format_size(*.0))]
    TooLarge(u64),
    #[error("the responses being read together would hold more than {} (see --max-body-total); this one was refused", crate::limits::format_size(*.0))]
    Budget(u64),
    #[error("the response took longer than {} to arrive; refused", crate::timefmt::format_seconds(*.0))]
    TooSlow(Duration),
}

impl BodyError {
    /// The body error inside an I/O error, if it is one.
    pub fn of(e: &std::io::Error) -> Option<&BodyError> {
        e.get_ref().and_then(|x| x.downcast_ref::<BodyError>())
    }

    pub fn kind(&self) -> FailureKind {
        match self {
            BodyError::TooLarge(_) | BodyError::Budget(_) => FailureKind::TooLarge,
            BodyError::TooSlow(_) => FailureKind::Timeout,
        }
    }
}

/// A response body read with a size cap, a deadline and a share of a
/// [`Budget`] (every byte read is taken from it; the reader's user gives
/// bytes back as it drops them).
pub struct Body<'a, R> {
    inner: R,
    read: u64,
    max: u64,
    held: Option<&'a Held<'a>>,
    deadline: Instant,
    timeout: Duration,
}

impl<'a, R: Read> Body<'a, R> {
    pub fn new(inner: R, max: u64, held: Option<&'a Held<'a>>, timeout: Duration) -> Body<'a, R> {
        Body {
            inner,
            read: 0,
            max,
            held,
            deadline: Instant::now() + timeout,
            timeout,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}

impl<R: Read> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if Instant::now() > self.deadline {
            return Err(std::io::Error::other(BodyError::TooSlow(self.timeout)));
        }
        // Never more than one byte past the cap.
        let room = (self.max + 1 - self.read.min(self.max + 1)).min(buf.len() as u64) as usize;
        if room == 0 {
            return Err(std::io::Error::other(BodyError::TooLarge(self.max)));
        }
        let n = self.inner.read(&mut buf[..room])?;
        self.read += n as u64;
        if self.read > self.max {
            return Err(std::io::Error::other(BodyError::TooLarge(self.max)));
        }
        if let Some(h) = self.held {
            h.take(n as u64)?;
        }
        Ok(n)
    }
}

/// The failure of reading a body (after the status line came).
pub fn read_failure(e: &std::io::Error, timeout: Duration) -> FetchError {
    if let Some(b) = BodyError::of(e) {
        return FetchError::new(b.kind(), b.to_string());
    }
    let text = chain(e);
    if text.contains("timed out") || text.contains("TimedOut") {
        FetchError::new(
            FailureKind::Timeout,
            format!(
                "timed out after {} reading the response",
                crate::timefmt::format_seconds(timeout)
            ),
        )
    } else {
        FetchError::new(FailureKind::Other, format!("reading the response failed: {text}"))
    }
}

/// How to reach one target.
#[derive(Clone, Debug, Default)]
pub struct ClientSpec {
    /// Trusted CA certificates (PEM); `None`: the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Do not verify the server certificate.
    pub insecure: bool,
    /// Client certificate (PEM) and its key.
    pub client_cert_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Secret>,
    /// Connect to this address whenever the URL names this host: scrapes one
    /// replica directly while verifying its certificate for the cluster's name.
    pub resolve: Option<(String, Vec<SocketAddr>)>,
    pub proxy_url: Option<String>,
}

/// What went wrong with one request, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    ConnectionRefused,
    ConnectionReset,
    Unreachable,
    Timeout,
    TlsUnknownCa,
    TlsExpired,
    TlsNameMismatch,
    TlsClientCertificateRejected,
    Tls,
    Unauthorized,
    Forbidden,
    HttpStatus,
    TooLarge,
    Other,
}

/// A failed request: the kind and a message naming the cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct FetchError {
    pub kind: FailureKind,
    pub message: String,
}

impl FetchError {
    fn new(kind: FailureKind, message: impl Into<String>) -> FetchError {
        FetchError {
            kind,
            message: message.into(),
        }
    }
}

/// A successful response.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    pub body: Vec<u8>,
    pub elapsed: Duration,
}

/// Installs rustls's ring provider once per process (every HTTP client of cptriage needs it).
pub fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Fails only when a provider is already installed, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Why a target's HTTP client could not be set up (its TLS material, its proxy).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("the CA bundle is not valid PEM")]
    CaNotPem,
    #[error("the CA bundle holds no certificate")]
    CaEmpty,
    #[error("the client certificate or key is not valid PEM")]
    IdentityNotPem,
    #[error("a client certificate was given without its key")]
    CertWithoutKey,
    #[error("a client key was given without its certificate")]
    KeyWithoutCert,
    /// The proxy URL, redacted.
    #[error("invalid proxy URL `{0}`")]
    Proxy(String),
    #[error("cannot set up the HTTP client: {0}")]
    Setup(String),
}

/// Builds a client for one target.
pub fn build(spec: &ClientSpec) -> Result<Client, ClientError> {
    install_crypto();
    let mut b = Client::builder()
        .gzip(true)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("cptriage/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(2);
    if let Some(ca) = &spec.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(ca).map_err(|_| ClientError::CaNotPem)?;
        if certs.is_empty() {
            return Err(ClientError::CaEmpty);
        }
        b = b.tls_certs_only(certs);
    }
    if spec.insecure {
        b = b.tls_danger_accept_invalid_certs(true);
    }
    match (&spec.client_cert_pem, &spec.client_key_pem) {
        (Some(cert), Some(key)) => {
            let mut pem = pem_blocks(cert, &["CERTIFICATE"]);
            pem.extend(pem_blocks(
                key.expose(),
                &["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"],
            ));
            let id = reqwest::Identity::from_pem(&pem).map_err(|_| ClientError::IdentityNotPem)?;
            b = b.identity(id);
        }
        (Some(_), None) => return Err(ClientError::CertWithoutKey),
        (None, Some(_)) => return Err(ClientError::KeyWithoutCert),
        (None, None) => {}
    }
    if let Some((host, addrs)) = &spec.resolve {
        b = b.resolve_to_addrs(host, addrs);
    }
    match &spec.proxy_url {
        Some(p) => {
            let proxy = reqwest::Proxy::all(p).map_err(|_| ClientError::Proxy(redact_url(p)))?;
            b = b.proxy(proxy);
        }
        None => b = b.no_proxy(),
    }
    b.build().map_err(|e| ClientError::Setup(chain(&e)))
}

/// The PEM blocks of the given kinds (others, such as `EC PARAMETERS`, are dropped).
fn pem_blocks(pem: &[u8], kinds: &[&str]) -> Vec<u8> {
    let text = String::from_utf8_lossy(pem);
    let mut out = String::new();
    let mut rest: &str = &text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let Some(kind_end) = after.find("-----") else {
            break;
        };
        let kind = &after[..kind_end];
        let end_marker = format!("-----END {kind}-----");
        let Some(end) = rest[start..].find(&end_marker) else {
            break;
        };
        let block_end = start + end + end_marker.len();
        if kinds.contains(&kind) {
            out.push_str(&rest[start..block_end]);
            out.push('\n');
        }
        rest = &rest[block_end..];
    }
    out.into_bytes()
}

/// GETs `url` with an optional bearer token, within `timeout`, reading at most `limit` bytes.
pub fn get(
    client: &Client,
    url: &str,
    token: Option<&Secret>,
    accept: &str,
    timeout: Duration,
    limit: u64,
) -> Result<Fetched, FetchError> {
    let start = Instant::now();
    let resp = open(client, url, token, accept, timeout)?;
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    Body::new(resp, limit, None, timeout)
        .read_to_end(&mut body)
        .map_err(|e| read_failure(&e, timeout))?;
    Ok(Fetched {
        status,
        body,
        elapsed: start.elapsed(),
    })
}

/// Sends a GET of `url` with an optional bearer token; the response's body
/// is left to read (with [`Body`]).
pub fn open(
    client: &Client,
    url: &str,
    token: Option<&Secret>,
    accept: &str,
    timeout: Duration,
) -> Result<reqwest::blocking::Response, FetchError> {
    let mut req = client.get(url).timeout(timeout);
    if let Ok(v) = HeaderValue::from_str(accept) {
        req = req.header(ACCEPT, v);
    }
    if let Some(t) = token {
        let mut v = Vec::with_capacity(t.expose().len() + 7);
        v.extend_from_slice(b"Bearer ");
        v.extend_from_slice(t.expose());
        let mut hv = HeaderValue::from_bytes(&v).map_err(|_| {
            FetchError::new(
                FailureKind::Other,
                "the bearer token holds characters not allowed in a header",
            )
        })?;
        hv.set_sensitive(true);
        req = req.header(AUTHORIZATION, hv);
    }
    req.send().map_err(|e| classify(&e, timeout))
}

/// The reason for a non-success HTTP status on `path`.
pub fn status_error(status: u16, path: &str) -> FetchError {
    match status {
        401 => FetchError::new(
            FailureKind::Unauthorized,
            "HTTP 401 Unauthorized: the credentials were not accepted (expired token, wrong client certificate?)",
        ),
        403 => FetchError::new(
            FailureKind::Forbidden,
            format!("HTTP 403 Forbidden: the identity lacks `get` on the non-resource URL `{path}`"),
        ),
        s => FetchError::new(FailureKind::HttpStatus, format!("HTTP {s} {}", reason(s))),
    }
}

fn reason(s: u16) -> &'static str {
    reqwest::StatusCode::from_u16(s)
        .ok()
        .and_then(|c| c.canonical_reason())
        .unwrap_or("")
}

/// The whole source chain of an error, in one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// Turns a request error into a reason.
fn classify(e: &reqwest::Error, timeout: Duration) -> FetchError {
    let text = chain(e);
    let debug = format!("{e:?}");
    let has = |s: &str| text.contains(s) || debug.contains(s);
    if let Some(f) = tls_failure(&has, "the CA file or data") {
        f
    } else if e.is_timeout() || has("timed out") {
        FetchError::new(
            FailureKind::Timeout,
            format!("timed out after {}", crate::timefmt::format_seconds(timeout)),
        )
    } else if has("No route to host")
        || has("Network is unreachable")
        || has("HostUnreachable")
        || has("NetworkUnreachable")
    {
        FetchError::new(
            FailureKind::Unreachable,
            "network unreachable (no route to the host)",
        )
    } else if has("Connection reset") || has("ConnectionReset") {
        FetchError::new(
            FailureKind::ConnectionReset,
            "connection reset (the process closed the connection: crashing or restarting?)",
        )
    } else if has("Connection refused") || has("ConnectionRefused") {
        FetchError::new(
            FailureKind::ConnectionRefused,
            "connection refused (nothing listening: process down or wrong port?)",
        )
    } else if has("tls") || has("TLS") || has("certificate") {
        FetchError::new(FailureKind::Tls, format!("TLS: {}", crate::secret::scrub(&text)))
    } else {
        FetchError::new(FailureKind::Other, crate::secret::scrub(&text).into_owned())
    }
}

/// A TLS failure in plain words, from the text of a request error (`has`
/// tells whether the error's text or debug form holds a string); `ca` names
/// where the trusted CA came from (`--prometheus-ca`, the CA file or data).
/// `None` when the error is not about TLS.
pub fn tls_failure(has: &dyn Fn(&str) -> bool, ca: &str) -> Option<FetchError> {
    let f = |kind, message: String| Some(FetchError::new(kind, message));
    if has("CaUsedAsEndEntity") {
        f(
            FailureKind::Tls,
            "TLS: the server presented a CA certificate as its own; a server needs a certificate issued for it by that CA".into(),
        )
    } else if has("UnknownIssuer") || has("unknown issuer") {
        f(
            FailureKind::TlsUnknownCa,
            format!("TLS: the server certificate is signed by an unknown certificate authority (check {ca})"),
        )
    } else if has("NotValidYet") || has("not valid yet") || has("not valid before") {
        f(
            FailureKind::TlsExpired,
            "TLS: the server certificate is not valid yet (check the clocks of both machines)".into(),
        )
    } else if has("certificate expired") || has("Expired") || has("not valid after") {
        f(
            FailureKind::TlsExpired,
            "TLS: the server certificate has expired".into(),
        )
    } else if has("NotValidForName") || has("not valid for name") {
        f(
            FailureKind::TlsNameMismatch,
            "TLS: the server certificate is not valid for the name cptriage verified (certificate name mismatch)".into(),
        )
    } else if has("UnsupportedSignatureAlgorithm") || has("BadSignature") || has("bad signature") {
        f(
            FailureKind::TlsUnknownCa,
            format!(
                "TLS: the server certificate's signature does not verify with the trusted CA (a different CA of the same name, or one with another key type: check {ca})"
            ),
        )
    } else if has("InvalidPurpose") || has("invalid purpose") {
        f(
            FailureKind::Tls,
            "TLS: the server certificate is not meant for servers (its extended key usage lacks server authentication)".into(),
        )
    } else if has("Revoked") {
        f(FailureKind::Tls, "TLS: the server certificate is revoked".into())
    } else if has("BadEncoding") || has("bad encoding") {
        f(
            FailureKind::Tls,
            "TLS: the server certificate is malformed".into(),
        )
    } else if has("CertificateRequired")
        || has("BadCertificate")
        || has("UnknownCA")
        || has("DecryptError") && has("alert")
    {
        f(
            FailureKind::TlsClientCertificateRejected,
            "TLS: the server rejected the client certificate (missing, or not signed by a CA it trusts)"
                .into(),
        )
    } else if has("HandshakeFailure") || has("ProtocolVersion") || has("PeerIncompatible") {
        f(
            FailureKind::Tls,
            "TLS: the handshake failed (no protocol version or cipher suite in common)".into(),
        )
    } else if has("CorruptMessage") || has("InvalidContentType") || has("received corrupt message") {
        f(
            FailureKind::Tls,
            "TLS: the server does not speak TLS on this port (plain HTTP? try http://)".into(),
        )
    } else if has("handshake eof") {
        f(
            FailureKind::Tls,
            "TLS: the server closed the connection during the handshake (not TLS on this port? try http://)"
                .into(),
        )
    } else if has("invalid peer certificate") {
        f(
            FailureKind::Tls,
            "TLS: the server certificate was refused (it could not be verified)".into(),
        )
    } else {
        None
    }
}

/// A URL with any user information removed (for reports).
pub fn redact_url(u: &str) -> String {
    match reqwest::Url::parse(u) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        // Not a URL: mask anything that could be `user:password@`.
        Err(_) => match u.rfind('@') {
            Some(at) => {
                let start = u.find("//").map(|i| i + 2).unwrap_or(0).min(at);
                format!("{}<redacted>{}", &u[..start], &u[at..])
            }
            None => u.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_blocks_keep_only_the_asked_kinds() {
        let pem = b"-----BEGIN EC PARAMETERS-----\nBggq\n-----END EC PARAMETERS-----\n-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n";
        let got = pem_blocks(pem, &["EC PRIVATE KEY"]);
        assert_eq!(
            got,
            b"-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n"
        );
        assert!(pem_blocks(b"garbage", &["CERTIFICATE"]).is_empty());
    }

    #[test]
    fn status_errors_name_the_cause() {
        assert!(status_error(403, "/metrics")
            .message
            .contains("lacks `get` on the non-resource URL `/metrics`"));
        assert_eq!(status_error(401, "/metrics").kind, FailureKind::Unauthorized);
        assert_eq!(
            status_error(503, "/readyz").message,
            "HTTP 503 Service Unavailable"
        );
        assert_eq!(redact_url("https://u:p@h:1/metrics"), "https://h:1/metrics");
        assert_eq!(redact_url("htps//u:p@h:1:2:3"), "htps//<redacted>@h:1:2:3");
        assert_eq!(redact_url("not a url"), "not a url");
    }
}
