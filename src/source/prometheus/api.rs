//! The Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`,
//! `/api/v1/label/<name>/values`) as Prometheus, Thanos Query, Mimir and Cortex
//! serve it: requests with the configured credentials and tenant headers, and
//! every way a request can fail turned into a [`PromError`] that names the
//! endpoint and what to do.

use std::io::Read;
use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION};
use serde::de::{DeserializeSeed, IgnoredAny};

use super::decode::{self, Envelope, EnvelopeSeed, QueryDataSeed};
use crate::eval::Value;
use crate::secret::KnownSecrets;
use crate::source::live::client::{self, BodyError, FailureKind, FetchError};
use crate::source::live::{ClientSpec, Secret};
use crate::store::{Millis, Series};
use crate::timefmt::format_timestamp;

/// Default largest answer read (`--prometheus-max-response`), after gzip
/// decoding. Answers are decoded as they arrive, so this bounds the time and
/// the bytes received, while memory follows the samples kept.
pub const MAX_RESPONSE: u64 = 256 << 20;

/// Timeout of each request by default (`--prometheus-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Most of an error response's body read (error documents are small).
const MAX_ERROR_BODY: u64 = 64 << 10;

/// How to reach the API.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Base URL: `http://prometheus:9090`, `https://thanos-query`, or Mimir's
    /// `http://mimir/prometheus`; `/api/v1/…` is appended to its path.
    pub url: String,
    pub client: ClientSpec,
    /// Sent as `Authorization: Bearer …`.
    pub token: Option<Secret>,
    /// Sent as `Authorization: Basic …`.
    pub basic: Option<(String, Secret)>,
    /// Extra headers (`X-Scope-OrgID: team`), sent as sensitive values.
    pub headers: Vec<(String, Secret)>,
    /// Per request, including reading the answer; also sent as the API's
    /// `timeout` parameter of queries.
    pub timeout: Duration,
    /// Largest answer read, after gzip decoding.
    pub max_response: u64,
}

/// Why an API request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromError {
    /// Bad configuration (URL, header, credential files).
    #[error("{0}")]
    Config(String),
    /// The HTTP client could not be set up (TLS material, proxy).
    #[error("{0}")]
    Client(#[from] crate::source::live::client::ClientError),
    /// No HTTP answer: unreachable, refused, TLS, timed out.
    #[error("prometheus {endpoint}: {source}")]
    Request {
        endpoint: String,
        #[source]
        source: FetchError,
    },
    /// The API answered with its error document.
    #[error("prometheus {endpoint}: HTTP {status}, {error_type}: {error}{}", hint(*.status, .error_type, .error))]
    Api {
        endpoint: String,
        status: u16,
        error_type: String,
        error: String,
    },
    /// An error status without the API's error document (a proxy, a gateway).
    #[error("prometheus {endpoint}: HTTP {status}{}{}", status_text(*.status), body_text(.body))]
    Http {
        endpoint: String,
        status: u16,
        body: String,
    },
    /// A success status whose body is not the API's document.
    #[error("prometheus {endpoint}: malformed response: {message}")]
    Malformed { endpoint: String, message: String },
}

impl PromError {
    /// Whether the request reached no API at all (unreachable, refused, TLS,
    /// credentials): no other request can succeed either.
    pub fn is_connection(&self) -> bool {
        match self {
            PromError::Request { source, .. } => source.kind != FailureKind::Timeout,
            PromError::Http { status, .. } => matches!(status, 401 | 403 | 404 | 407),
            _ => false,
        }
    }
}

impl PromError {
    /// Whether the query asked for too much at once (too many samples or
    /// points, a timeout, an answer over the size cap): the same query over a
    /// shorter range may succeed.
    pub fn is_too_much(&self) -> bool {
        match self {
            PromError::Request { source, .. } => {
                matches!(source.kind, FailureKind::Timeout | FailureKind::TooLarge)
            }
            PromError::Api {
                error_type, error, ..
            } => {
                let e = error.to_ascii_lowercase();
                error_type == "timeout"
                    || e.contains("too many samples")
                    || e.contains("exceeded maximum resolution")
                    || e.contains("context deadline exceeded")
                    || (e.contains("exceeded")
                        && (e.contains("samples") || e.contains("series") || e.contains("chunks")))
            }
            PromError::Http { status, .. } => matches!(status, 413 | 422 | 503 | 504),
            _ => false,
        }
    }
}

fn hint(status: u16, error_type: &str, error: &str) -> &'static str {
    if error.contains("too many samples") || error.contains("exceeded maximum resolution") {
        " (narrow the window with --from/--to or raise --step)"
    } else if error_type == "timeout" || error.contains("context deadline exceeded") {
        " (raise --prometheus-timeout or narrow the window)"
    } else if status == 401 {
        " (the credentials were not accepted)"
    } else {
        ""
    }
}

fn status_text(status: u16) -> String {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|c| c.canonical_reason())
        .unwrap_or("");
    let advice = match status {
        401 => ": the credentials were not accepted (--prometheus-token-file, --prometheus-user)",
        403 => ": the identity may not query this API (or the tenant header is missing)",
        404 => ": no Prometheus API at this URL (Mimir serves it under `/prometheus`)",
        _ => "",
    };
    format!(" {reason}{advice}").trim_end().to_string()
}

fn body_text(body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!(": {body}")
    }
}

/// A successful answer and the warnings that came with it (partial responses
/// from Thanos or Mimir, dropped native histograms).
#[derive(Clone, Debug, PartialEq)]
pub struct Answer<T> {
    pub data: T,
    pub warnings: Vec<String>,
}

/// A configured API endpoint.
#[derive(Clone, Debug)]
pub struct Api {
    base: reqwest::Url,
    display: String,
    client: Client,
    headers: HeaderMap,
    timeout: Duration,
    max_response: u64,
    /// The credentials sent, replaced wherever an answer repeats them.
    secrets: KnownSecrets,
}

fn sensitive(name: &str, value: &[u8]) -> Result<(HeaderName, HeaderValue), PromError> {
    let n = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| PromError::Config(format!("invalid header name `{}`", name.trim())))?;
    let mut v = HeaderValue::from_bytes(value).map_err(|_| {
        PromError::Config(format!(
            "the value of header `{n}` holds characters not allowed in a header"
        ))
    })?;
    v.set_sensitive(true);
    Ok((n, v))
}

impl Api {
    /// Checks the URL, builds the HTTP client and the request headers.
    pub fn new(cfg: &ApiConfig) -> Result<Api, PromError> {
        let base = reqwest::Url::parse(cfg.url.trim()).map_err(|e| {
            PromError::Config(format!(
                "invalid Prometheus URL `{}`: {e}",
                client::redact_url(&cfg.url)
            ))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(PromError::Config(format!(
                "invalid Prometheus URL `{}`: the scheme must be http or https",
                client::redact_url(&cfg.url)
            )));
        }
        if !base.username().is_empty() || base.password().is_some() {
            return Err(PromError::Config(format!(
                "the Prometheus URL `{}` holds credentials; pass them with --prometheus-user and --prometheus-password-file",
                client::redact_url(&cfg.url)
            )));
        }
        if base.query().is_some() {
            return Err(PromError::Config(format!(
                "the Prometheus URL `{base}` has a query string; give the base URL only"
            )));
        }
        let http = client::build(&cfg.client)?;
        let mut secrets = KnownSecrets::new();
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        match (&cfg.token, &cfg.basic) {
            (Some(_), Some(_)) => {
                return Err(PromError::Config(
                    "give either a bearer token or a user and password, not both".into(),
                ))
            }
            (Some(t), None) => {
                secrets.add(t.expose());
                let mut v = b"Bearer ".to_vec();
                v.extend_from_slice(t.expose());
                let (_, hv) = sensitive("authorization", &v)?;
                headers.insert(AUTHORIZATION, hv);
            }
            (None, Some((user, pass))) => {
                use base64::Engine;
                let mut raw = user.as_bytes().to_vec();
                raw.push(b':');
                raw.extend_from_slice(pass.expose());
                secrets.add(pass.expose());
                let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
                secrets.add(encoded.as_bytes());
                let mut v = b"Basic ".to_vec();
                v.extend_from_slice(encoded.as_bytes());
                let (_, hv) = sensitive("authorization", &v)?;
                headers.insert(AUTHORIZATION, hv);
            }
            (None, None) => {}
        }
        for (name, value) in &cfg.headers {
            let (n, v) = sensitive(name, value.expose())?;
            secrets.add(value.expose());
            headers.append(n, v);
        }
        let mut display = base.to_string();
        while display.ends_with('/') {
            display.pop();
        }
        Ok(Api {
            base,
            display,
            client: http,
            headers,
            timeout: cfg.timeout,
            max_response: cfg.max_response,
            secrets,
        })
    }

    /// The base URL as reports show it.
    pub fn url(&self) -> &str {
        &self.display
    }

    fn endpoint_url(&self, path: &str, params: &[(&str, String)]) -> reqwest::Url {
        let mut u = self.base.clone();
        let p = format!("{}/api/v1/{path}", self.base.path().trim_end_matches('/'));
        u.set_path(&p);
        if !params.is_empty() {
            let mut q = u.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
        }
        u
    }

    /// One GET of `/api/v1/<path>`: the `data` of a success decoded by
    /// `seed` as the answer arrives, or the error.
    fn call<T, S>(&self, path: &str, params: &[(&str, String)], seed: S) -> Result<Answer<T>, PromError>
    where
        S: for<'de> DeserializeSeed<'de, Value = T>,
    {
        let endpoint = format!("{} /api/v1/{path}", self.display);
        let url = self.endpoint_url(path, params);
        let req = self
            .client
            .get(url)
            .headers(self.headers.clone())
            .timeout(self.timeout);
        let resp = req.send().map_err(|e| PromError::Request {
            endpoint: endpoint.clone(),
            source: request_error(&e, self.timeout),
        })?;
        let status = resp.status().as_u16();
        let mut body = client::Body::new(resp, self.max_response, None, self.timeout);
        if !(200..300).contains(&status) {
            return Err(self.error_response(endpoint, status, &mut body));
        }
        // The first bytes are kept to show what came instead of the API's JSON
        // (a login page of a proxy, say).
        let head = std::cell::RefCell::new(Vec::new());
        let reader = Head {
            inner: body,
            head: &head,
        };
        let mut de =
            serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(64 << 10, reader));
        let env: Envelope<T> = EnvelopeSeed(seed)
            .deserialize(&mut de)
            .and_then(|env| de.end().map(|_| env))
            .map_err(|e| self.decode_error(&endpoint, e, &head.borrow()))?;
        let warnings: Vec<String> = env.warnings.iter().map(|w| self.secrets.scrub_str(w)).collect();
        if env.status.as_deref() != Some("success") {
            return Err(PromError::Api {
                endpoint,
                status,
                error_type: self.shown(env.error_type.as_deref().unwrap_or("error")),
                error: match env.error {
                    Some(e) => self.shown(&e),
                    None => format!(
                        "status `{}`",
                        self.shown(env.status.as_deref().unwrap_or("(none)"))
                    ),
                },
            });
        }
        let data = env.data.ok_or_else(|| PromError::Malformed {
            endpoint,
            message: "a success without `data`".into(),
        })?;
        Ok(Answer { data, warnings })
    }

    /// Text from the server as messages show it: without the credentials
    /// sent, nor anything that looks like one.
    fn shown(&self, text: &str) -> String {
        self.secrets.scrub_str(text)
    }

    /// The error of a non-success status. The body of a 401 or 403 is never
    /// shown (a server may reflect the credentials in it); others show the
    /// API's error, or the start of the body, without credentials.
    fn error_response(&self, endpoint: String, status: u16, body: &mut dyn Read) -> PromError {
        if matches!(status, 401 | 403 | 407) {
            return PromError::Http {
                endpoint,
                status,
                body: String::new(),
            };
        }
        let mut buf = Vec::new();
        let _ = body.take(MAX_ERROR_BODY).read_to_end(&mut buf);
        let env = EnvelopeSeed(std::marker::PhantomData::<IgnoredAny>)
            .deserialize(&mut serde_json::Deserializer::from_slice(&buf))
            .ok();
        match env {
            Some(Envelope {
                error: Some(error),
                error_type,
                ..
            }) => PromError::Api {
                endpoint,
                status,
                error_type: self.shown(error_type.as_deref().unwrap_or("error")),
                error: self.shown(&error),
            },
            _ => PromError::Http {
                endpoint,
                status,
                body: self.shown(&snippet(&buf)),
            },
        }
    }

    /// The error of an answer that could not be decoded: too large, too
    /// slow, cut, or not the API's document (without quoting its content).
    fn decode_error(&self, endpoint: &str, e: serde_json::Error, head: &[u8]) -> PromError {
        if e.is_io() {
            let io: std::io::Error = e.into();
            return match BodyError::of(&io) {
                Some(BodyError::TooLarge(max)) => PromError::Malformed {
                    endpoint: endpoint.to_string(),
                    message: format!(
                        "the response is larger than {}; refused (raise --prometheus-max-response, or narrow the window or raise --step)",
                        crate::limits::format_size(*max)
                    ),
                },
                _ => PromError::Request {
                    endpoint: endpoint.to_string(),
                    source: read_error(&io, self.timeout),
                },
            };
        }
        // A body that is not JSON at all is shown (its start); one that is
        // JSON is described without its values.
        let shown = if e.line() == 1 && e.column() <= 1 {
            format!(": {}", self.shown(&snippet(head)))
        } else {
            String::new()
        };
        PromError::Malformed {
            endpoint: endpoint.to_string(),
            message: format!(
                "not the API's JSON document ({}){shown}",
                self.shown(&crate::secret::serde_message(&e.to_string()))
            ),
        }
    }

    fn timeout_param(&self) -> String {
        format!("{}ms", self.timeout.as_millis().max(1))
    }

    /// `/api/v1/query_range`: one series per result, points at `start + k × step`.
    pub fn query_range(
        &self,
        query: &str,
        start: Millis,
        end: Millis,
        step: Millis,
    ) -> Result<Answer<Vec<Series>>, PromError> {
        let params = [
            ("query", query.to_string()),
            ("start", format_timestamp(start)),
            ("end", format_timestamp(end)),
            ("step", format!("{}", step as f64 / 1000.0)),
            ("timeout", self.timeout_param()),
        ];
        let endpoint = format!("{} /api/v1/query_range", self.display);
        match self.query_value("query_range", &params)? {
            Answer {
                data: Value::Matrix(m),
                warnings,
            } => Ok(Answer { data: m, warnings }),
            _ => Err(PromError::Malformed {
                endpoint,
                message: "a range query did not return a matrix".into(),
            }),
        }
    }

    /// `/api/v1/query` at `time`.
    pub fn query(&self, query: &str, time: Millis) -> Result<Answer<Value>, PromError> {
        let params = [
            ("query", query.to_string()),
            ("time", format_timestamp(time)),
            ("timeout", self.timeout_param()),
        ];
        self.query_value("query", &params)
    }

    /// `/api/v1/label/<name>/values` of the series matching `matches` in `[start, end]`.
    pub fn label_values(
        &self,
        name: &str,
        matches: &[String],
        start: Millis,
        end: Millis,
    ) -> Result<Answer<Vec<String>>, PromError> {
        let mut params: Vec<(&str, String)> = matches.iter().map(|m| ("match[]", m.clone())).collect();
        params.push(("start", format_timestamp(start)));
        params.push(("end", format_timestamp(end)));
        let path = format!("label/{name}/values");
        let mut a = self.call(&path, &params, std::marker::PhantomData::<Vec<String>>)?;
        for v in &mut a.data {
            if let Some(c) = self.secrets.replace_known(v) {
                *v = c;
            }
        }
        Ok(a)
    }

    fn query_value(&self, path: &str, params: &[(&str, String)]) -> Result<Answer<Value>, PromError> {
        let a = self.call(path, params, QueryDataSeed)?;
        let mut warnings = a.warnings;
        let mut v = decode::into_value(a.data, &mut warnings).map_err(|message| PromError::Malformed {
            endpoint: format!("{} /api/v1/{path}", self.display),
            message,
        })?;
        if !self.secrets.is_empty() && self.scrub_value(&mut v) {
            warnings.push(
                "the answer repeated the credentials sent (in label values); they were replaced by <redacted>"
                    .into(),
            );
        }
        Ok(Answer { data: v, warnings })
    }

    /// Replaces the credentials sent wherever an answer's labels or string
    /// repeat them (a server or proxy that reflects request headers).
    fn scrub_value(&self, v: &mut Value) -> bool {
        let fix = |l: &mut crate::store::Labels| {
            let leaks = l.iter().any(|x| self.secrets.replace_known(&x.value).is_some());
            if leaks {
                let pairs: Vec<(String, String)> = l
                    .iter()
                    .map(|x| {
                        let v = self.secrets.replace_known(&x.value);
                        (x.name.to_string(), v.unwrap_or_else(|| x.value.to_string()))
                    })
                    .collect();
                *l = crate::store::Labels::from_pairs(pairs);
            }
            leaks
        };
        match v {
            Value::Matrix(m) => m.iter_mut().fold(false, |a, s| fix(&mut s.labels) | a),
            Value::Vector(vs) => vs.iter_mut().fold(false, |a, s| fix(&mut s.labels) | a),
            Value::String(s) => match self.secrets.replace_known(s) {
                Some(c) => {
                    *s = c;
                    true
                }
                None => false,
            },
            Value::Scalar(_) => false,
        }
    }
}

/// A reader that keeps a copy of the first bytes that go through it.
struct Head<'a, R> {
    inner: R,
    head: &'a std::cell::RefCell<Vec<u8>>,
}

impl<R: Read> Read for Head<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut h = self.head.borrow_mut();
        let room = 512usize.saturating_sub(h.len()).min(n);
        h.extend_from_slice(&buf[..room]);
        Ok(n)
    }
}

/// The first 300 characters of a body, on one line.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s: String = one.chars().take(300).collect();
    if one.chars().count() > 300 {
        s.push('…');
    }
    s
}

/// A request error, with messages about the Prometheus server rather than a scrape target.
fn request_error(e: &reqwest::Error, timeout: Duration) -> FetchError {
    let text = client::chain(e);
    let debug = format!("{e:?}");
    let f = |kind, message: String| FetchError { kind, message };
    if e.is_timeout() || text.contains("timed out") {
        f(
            FailureKind::Timeout,
            format!(
                "no answer within {} (raise --prometheus-timeout or narrow the window)",
                crate::timefmt::format_seconds(timeout)
            ),
        )
    } else if text.contains("Connection refused") || text.contains("ConnectionRefused") {
        f(
            FailureKind::ConnectionRefused,
            "connection refused (nothing listening at the Prometheus URL)".into(),
        )
    } else if text.contains("Connection reset") {
        f(
            FailureKind::ConnectionReset,
            "connection reset by the server".into(),
        )
    } else if text.contains("dns error") || text.contains("failed to lookup address") {
        f(
            FailureKind::Unreachable,
            format!("cannot resolve the host name: {text}"),
        )
    } else if let Some(mut t) = client::tls_failure(
        &|s: &str| text.contains(s) || debug.contains(s),
        "--prometheus-ca",
    ) {
        match t.kind {
            FailureKind::TlsNameMismatch => {
                t.message = "TLS: the server certificate is not valid for the URL's host name".into();
            }
            FailureKind::TlsClientCertificateRejected => t
                .message
                .push_str(" (check --prometheus-cert and --prometheus-key)"),
            _ => {}
        }
        t
    } else if text.contains("certificate") || text.contains("tls") || text.contains("TLS") {
        f(FailureKind::Tls, format!("TLS: {}", crate::secret::scrub(&text)))
    } else {
        f(FailureKind::Other, crate::secret::scrub(&text).into_owned())
    }
}

fn read_error(e: &std::io::Error, timeout: Duration) -> FetchError {
    let text = client::chain(e);
    if text.contains("timed out")
        || text.contains("TimedOut")
        || matches!(BodyError::of(e), Some(BodyError::TooSlow(_)))
    {
        FetchError {
            kind: FailureKind::Timeout,
            message: format!(
                "timed out after {} reading the response (raise --prometheus-timeout)",
                crate::timefmt::format_seconds(timeout)
            ),
        }
    } else {
        FetchError {
            kind: FailureKind::Other,
            message: format!("reading the response failed: {text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_the_api_writes_them() {
        use decode::{parse_value, to_millis};
        assert_eq!(parse_value("1.5"), Some(1.5));
        assert!(parse_value("NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_value("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_value("-Inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_value("x"), None);
        assert_eq!(to_millis(1435781451.781), 1_435_781_451_781);
    }

    #[test]
    fn error_messages_name_the_cause_and_the_remedy() {
        let e = PromError::Api {
            endpoint: "http://p:9090 /api/v1/query_range".into(),
            status: 422,
            error_type: "execution".into(),
            error: "query processing would load too many samples into memory in query execution".into(),
        };
        assert_eq!(
            e.to_string(),
            "prometheus http://p:9090 /api/v1/query_range: HTTP 422, execution: query processing would load too many samples into memory in query execution (narrow the window with --from/--to or raise --step)"
        );
        let h = PromError::Http {
            endpoint: "http://p /api/v1/query".into(),
            status: 404,
            body: "404 page not found".into(),
        };
        assert_eq!(
            h.to_string(),
            "prometheus http://p /api/v1/query: HTTP 404 Not Found: no Prometheus API at this URL (Mimir serves it under `/prometheus`): 404 page not found"
        );
        assert!(h.is_connection());
    }

    #[test]
    fn urls_with_credentials_are_refused_without_echoing_them() {
        let cfg = ApiConfig {
            url: "http://alice:hunter2@prom:9090".into(),
            client: ClientSpec::default(),
            token: None,
            basic: None,
            headers: vec![],
            timeout: Duration::from_secs(1),
            max_response: MAX_RESPONSE,
        };
        let e = Api::new(&cfg).unwrap_err().to_string();
        assert!(e.contains("holds credentials") && !e.contains("hunter2"), "{e}");
        let api = Api::new(&ApiConfig {
            url: "http://mimir:8080/prometheus/".into(),
            ..cfg
        })
        .unwrap();
        assert_eq!(
            api.endpoint_url("label/__name__/values", &[("match[]", "{job=\"etcd\"}".into())])
                .as_str(),
            "http://mimir:8080/prometheus/api/v1/label/__name__/values?match%5B%5D=%7Bjob%3D%22etcd%22%7D"
        );
    }
}
