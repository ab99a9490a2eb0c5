//! The HTTP interface: routes, the bearer token, body and content-type
//! checks, one log line per request. Handlers only read and update the
//! store; diagnoses run on the workers (`serve/mod.rs`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};

use super::metrics::Rejection;
use super::payload;
use super::store::{is_id, Phase};
use super::{log, Shared};

/// Largest request body.
pub(crate) const MAX_BODY: usize = 1024 * 1024;
/// Time to receive a request body.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// Seconds a refused notification is told to wait (`Retry-After`).
const RETRY_AFTER_SECS: &str = "30";

/// One answer, and what its log line says besides the status.
pub(crate) struct Reply {
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
    headers: Vec<(hyper::header::HeaderName, HeaderValue)>,
    note: String,
}

impl Reply {
    fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
        Reply {
            status,
            content_type,
            body: body.into(),
            headers: Vec::new(),
            note: String::new(),
        }
    }

    fn json(status: StatusCode, v: &serde_json::Value) -> Reply {
        let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
        s.push('\n');
        Reply::new(status, "application/json", s)
    }

    /// A refusal: `{"error": …}`, logged with the reason.
    fn error(status: StatusCode, msg: impl Into<String>) -> Reply {
        let msg = msg.into();
        let mut r = Reply::json(status, &serde_json::json!({ "error": msg }));
        r.note = msg;
        r
    }

    fn header(mut self, name: hyper::header::HeaderName, value: &'static str) -> Reply {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }
}

/// Serves one request and logs it.
pub(crate) async fn handle(
    req: Request<Incoming>,
    sh: Arc<Shared>,
    peer: SocketAddr,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let t0 = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let reply = route(req, &sh).await;
    let ms = t0.elapsed().as_millis();
    let level = if reply.status.is_success() { "info" } else { "warn" };
    log::line(
        level,
        "request",
        &[
            ("method", &method),
            ("path", &path),
            ("status", &reply.status.as_u16()),
            ("duration_ms", &ms),
            ("remote", &peer),
            ("note", &reply.note),
        ],
    );
    let mut resp = Response::new(Full::new(reply.body));
    *resp.status_mut() = reply.status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    for (k, v) in reply.headers {
        h.insert(k, v);
    }
    Ok(resp)
}

async fn route(req: Request<Incoming>, sh: &Shared) -> Reply {
    if !authorized(&req, sh.token.as_deref()) {
        sh.metrics.rejected(Rejection::Unauthorized);
        return Reply::error(
            StatusCode::UNAUTHORIZED,
            "a valid `Authorization: Bearer` token is required",
        )
        .header(WWW_AUTHENTICATE, "Bearer");
    }
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let allowed = match path.as_str() {
        "/v1/alertmanager" => "POST",
        "/healthz" | "/metrics" | "/v1/triage" => "GET",
        p if p.starts_with("/v1/triage/") => "GET",
        _ => {
            sh.metrics.rejected(Rejection::BadRequest);
            return Reply::error(StatusCode::NOT_FOUND, "no such path");
        }
    };
    if method.as_str() != allowed && !(allowed == "GET" && method == Method::HEAD) {
        sh.metrics.rejected(Rejection::BadRequest);
        return Reply::error(StatusCode::METHOD_NOT_ALLOWED, format!("{path} takes {allowed}"))
            .header(ALLOW, if allowed == "POST" { "POST" } else { "GET, HEAD" });
    }
    let reply = match path.as_str() {
        "/v1/alertmanager" => notification(req, sh).await,
        "/healthz" => healthz(sh),
        "/metrics" => Reply::new(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            sh.metrics.render(sh.lock().load()),
        ),
        "/v1/triage" => list(sh),
        p => triage(sh, &p["/v1/triage/".len()..]),
    };
    if reply.status.is_client_error() {
        sh.metrics.rejected(Rejection::BadRequest);
    }
    reply
}

/// Whether the request carries the token (always, without one). The
/// comparison takes the same time wherever the first difference is.
fn authorized(req: &Request<Incoming>, token: Option<&[u8]>) -> bool {
    let Some(token) = token else { return true };
    let Some(given) = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
    else {
        return false;
    };
    constant_time_eq(given, token)
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    diff == 0
}

fn healthz(sh: &Shared) -> Reply {
    if sh.stopping() {
        return Reply::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            "stopping\n",
        );
    }
    Reply::new(StatusCode::OK, "text/plain; charset=utf-8", "ok\n")
}

/// `POST /v1/alertmanager`.
async fn notification(req: Request<Incoming>, sh: &Shared) -> Reply {
    if sh.stopping() {
        sh.metrics.rejected(Rejection::ShuttingDown);
        let mut r = Reply::error(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
        r = r.header(RETRY_AFTER, RETRY_AFTER_SECS);
        return r;
    }
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let n = match payload::parse(&body) {
        Ok(n) => n,
        Err(e) => return Reply::error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let reqs = payload::requests(&n, sh.by.as_deref());
    let admitted = sh.lock().admit(reqs, super::now_ms());
    match admitted {
        Ok(a) => {
            sh.wake.notify_all();
            let reused = a.iter().filter(|a| a.reused).count();
            sh.metrics.notification(reused);
            let ids: Vec<&str> = a.iter().map(|a| a.id.as_str()).collect();
            let mut r = Reply::json(StatusCode::ACCEPTED, &serde_json::json!({ "triages": a }));
            r.note = format!(
                "{} {} alert(s), triages {} ({reused} reused)",
                n.status.as_str(),
                n.alerts.len(),
                ids.join(",")
            );
            r
        }
        Err(full) => {
            sh.metrics.rejected(Rejection::QueueFull);
            Reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the queue is full ({} waiting, {} more asked for); retry later",
                    full.queued, full.wanted
                ),
            )
            .header(RETRY_AFTER, RETRY_AFTER_SECS)
        }
    }
}

/// The body of a notification: JSON, at most [`MAX_BODY`] bytes, received
/// within [`BODY_TIMEOUT`].
async fn read_body(req: Request<Incoming>) -> Result<Bytes, Reply> {
    let ct = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(Reply::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body must be `application/json`, got {:?}",
                payload::clip(media, 60)
            ),
        ));
    }
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let limited = Limited::new(req.into_body(), MAX_BODY);
    match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Err(_) => Err(Reply::error(
            StatusCode::REQUEST_TIMEOUT,
            format!("the body did not arrive within {} s", BODY_TIMEOUT.as_secs()),
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(Reply::error(
            StatusCode::BAD_REQUEST,
            format!("the body could not be read: {e}"),
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

fn too_large() -> Reply {
    Reply::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is larger than {MAX_BODY} bytes"),
    )
}

/// `GET /v1/triage`: every triage kept, newest first.
fn list(sh: &Shared) -> Reply {
    let all = sh.lock().list();
    Reply::json(StatusCode::OK, &serde_json::json!({ "triages": all }))
}

/// `GET /v1/triage/ID` and `GET /v1/triage/ID.html`.
fn triage(sh: &Shared, rest: &str) -> Reply {
    let (id, html) = match rest.strip_suffix(".html") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    if !is_id(id) {
        return Reply::error(
            StatusCode::BAD_REQUEST,
            "not a triage id (16 lowercase hex digits, as POST /v1/alertmanager answers)",
        );
    }
    let Some(t) = sh.lock().get(id).cloned() else {
        return Reply::error(
            StatusCode::NOT_FOUND,
            "no such triage (never made, or no longer kept)",
        );
    };
    let bodies = t.detail.bodies.clone();
    match (t.phase, bodies, html) {
        (Phase::Queued | Phase::Running, _, false) => Reply::new(
            StatusCode::ACCEPTED,
            "application/json",
            super::judge::document(&t, None),
        )
        .header(RETRY_AFTER, "2"),
        (Phase::Queued | Phase::Running, _, true) => Reply::new(
            StatusCode::ACCEPTED,
            "text/plain; charset=utf-8",
            format!("triage {id} is {}; try again shortly\n", phase_word(t.phase)),
        )
        .header(RETRY_AFTER, "2"),
        (Phase::Abandoned, _, _) => Reply::error(StatusCode::GONE, "the triage was abandoned at shutdown"),
        (Phase::Done, Some(b), false) => Reply::new(
            StatusCode::OK,
            "application/json",
            super::judge::document(&t, Some(&b.verdict)),
        ),
        (Phase::Done, Some(b), true) => {
            Reply::new(StatusCode::OK, "text/html; charset=utf-8", b.html.clone())
        }
        (Phase::Done, None, html) => {
            let ext = if html { "html" } else { "json" };
            match sh.reports.as_ref().and_then(|r| r.read(id, ext)) {
                Some(text) if html => Reply::new(StatusCode::OK, "text/html; charset=utf-8", text),
                Some(text) => Reply::new(StatusCode::OK, "application/json", text),
                None => Reply::error(
                    StatusCode::GONE,
                    "the report is no longer kept in memory (keep reports with --reports DIR)",
                ),
            }
        }
    }
}

fn phase_word(p: Phase) -> &'static str {
    match p {
        Phase::Queued => "queued",
        Phase::Running => "running",
        Phase::Done => "done",
        Phase::Abandoned => "abandoned",
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret-token", b"secret-token"));
        assert!(!constant_time_eq(b"secret-token", b"secret-tokem"));
        assert!(!constant_time_eq(b"secret", b"secret-token"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
