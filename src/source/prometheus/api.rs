//! The Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`,
//! `/api/v1/label/<name>/values`) as Prometheus, Thanos Query, Mimir and Cortex
//! serve it: requests with the configured credentials and tenant headers, and
//! every way a request can fail turned into a [`PromError`] that names the
//! endpoint and what to do.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION};
use serde::Deserialize;

use crate::eval::{Value, VectorSample};
use crate::report::promapi::format_timestamp;
use crate::source::live::client::{self, FailureKind, FetchError};
use crate::source::live::{ClientSpec, Secret};
use crate::store::{Labels, Millis, Sample, Series};

/// Largest response body accepted.
pub const MAX_RESPONSE: u64 = 256 << 20;

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
    /// Per request; also sent as the API's `timeout` parameter of queries.
    pub timeout: Duration,
}

/// Why an API request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromError {
    /// Bad configuration (URL, header, credential files).
    #[error("{0}")]
    Config(String),
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

/// The API's response envelope.
#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
    #[serde(rename = "errorType", default)]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
struct QueryData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct MatrixItem {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
    #[serde(default)]
    histograms: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct VectorItem {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<(f64, String)>,
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
}

fn to_millis(t: f64) -> Millis {
    (t * 1000.0).round() as Millis
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
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
        let http = client::build(&cfg.client).map_err(PromError::Config)?;
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        match (&cfg.token, &cfg.basic) {
            (Some(_), Some(_)) => {
                return Err(PromError::Config(
                    "give either a bearer token or a user and password, not both".into(),
                ))
            }
            (Some(t), None) => {
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
                let mut v = b"Basic ".to_vec();
                v.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(raw).as_bytes());
                let (_, hv) = sensitive("authorization", &v)?;
                headers.insert(AUTHORIZATION, hv);
            }
            (None, None) => {}
        }
        for (name, value) in &cfg.headers {
            let (n, v) = sensitive(name, value.expose())?;
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

    /// One GET of `/api/v1/<path>`: the `data` of a success, or the error.
    fn call(&self, path: &str, params: &[(&str, String)]) -> Result<Answer<serde_json::Value>, PromError> {
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
        let mut body = Vec::new();
        resp.take(MAX_RESPONSE + 1)
            .read_to_end(&mut body)
            .map_err(|e| PromError::Request {
                endpoint: endpoint.clone(),
                source: read_error(&e, self.timeout),
            })?;
        if body.len() as u64 > MAX_RESPONSE {
            return Err(PromError::Malformed {
                endpoint,
                message: format!("the response is larger than {} MiB", MAX_RESPONSE >> 20),
            });
        }
        let env: Result<Envelope, _> = serde_json::from_slice(&body);
        if !(200..300).contains(&status) {
            return Err(match env {
                Ok(Envelope {
                    error: Some(error),
                    error_type,
                    ..
                }) => PromError::Api {
                    endpoint,
                    status,
                    error_type: error_type.unwrap_or_else(|| "error".into()),
                    error,
                },
                _ => PromError::Http {
                    endpoint,
                    status,
                    body: snippet(&body),
                },
            });
        }
        let env = env.map_err(|e| PromError::Malformed {
            endpoint: endpoint.clone(),
            message: format!("not the API's JSON document ({e}): {}", snippet(&body)),
        })?;
        if env.status != "success" {
            return Err(PromError::Api {
                endpoint,
                status,
                error_type: env.error_type.unwrap_or_else(|| "error".into()),
                error: env.error.unwrap_or_else(|| format!("status `{}`", env.status)),
            });
        }
        let data = env.data.ok_or_else(|| PromError::Malformed {
            endpoint,
            message: "a success without `data`".into(),
        })?;
        Ok(Answer {
            data,
            warnings: env.warnings,
        })
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
        let a = self.call("query_range", &params)?;
        let endpoint = format!("{} /api/v1/query_range", self.display);
        let mut warnings = a.warnings;
        match self.query_value(&endpoint, a.data, end, &mut warnings)? {
            Value::Matrix(m) => Ok(Answer { data: m, warnings }),
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
        let a = self.call("query", &params)?;
        let endpoint = format!("{} /api/v1/query", self.display);
        let mut warnings = a.warnings;
        let v = self.query_value(&endpoint, a.data, time, &mut warnings)?;
        Ok(Answer { data: v, warnings })
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
        let a = self.call(&path, &params)?;
        let values: Vec<String> = serde_json::from_value(a.data).map_err(|e| PromError::Malformed {
            endpoint: format!("{} /api/v1/{path}", self.display),
            message: format!("label values are not a list of strings: {e}"),
        })?;
        Ok(Answer {
            data: values,
            warnings: a.warnings,
        })
    }

    fn query_value(
        &self,
        endpoint: &str,
        data: serde_json::Value,
        time: Millis,
        warnings: &mut Vec<String>,
    ) -> Result<Value, PromError> {
        let bad = |message: String| PromError::Malformed {
            endpoint: endpoint.to_string(),
            message,
        };
        let d: QueryData = serde_json::from_value(data).map_err(|e| bad(format!("query data: {e}")))?;
        let number =
            |s: &str| parse_value(s).ok_or_else(|| bad(format!("sample value `{s}` is not a number")));
        match d.result_type.as_str() {
            "matrix" => {
                let items: Vec<MatrixItem> =
                    serde_json::from_value(d.result).map_err(|e| bad(format!("matrix result: {e}")))?;
                let mut out = Vec::with_capacity(items.len());
                let mut histograms = 0;
                for it in items {
                    histograms += usize::from(!it.histograms.is_empty());
                    let mut samples = Vec::with_capacity(it.values.len());
                    for (t, v) in &it.values {
                        samples.push(Sample {
                            t: to_millis(*t),
                            v: number(v)?,
                        });
                    }
                    out.push(Series {
                        labels: Labels::from_pairs(it.metric),
                        samples,
                    });
                }
                if histograms > 0 {
                    warnings.push(format!(
                        "{histograms} series held native histogram samples, which cptriage does not read"
                    ));
                }
                Ok(Value::Matrix(out))
            }
            "vector" => {
                let items: Vec<VectorItem> =
                    serde_json::from_value(d.result).map_err(|e| bad(format!("vector result: {e}")))?;
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    let Some((_, v)) = it.value else { continue };
                    out.push(VectorSample {
                        labels: Labels::from_pairs(it.metric),
                        v: number(&v)?,
                    });
                }
                Ok(Value::Vector(out))
            }
            "scalar" => {
                let (_, v): (f64, String) =
                    serde_json::from_value(d.result).map_err(|e| bad(format!("scalar result: {e}")))?;
                let _ = time;
                Ok(Value::Scalar(number(&v)?))
            }
            "string" => {
                let (_, v): (f64, String) =
                    serde_json::from_value(d.result).map_err(|e| bad(format!("string result: {e}")))?;
                Ok(Value::String(v))
            }
            other => Err(bad(format!("unknown result type `{other}`"))),
        }
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

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s}s")
    }
}

/// A request error, with messages about the Prometheus server rather than a scrape target.
fn request_error(e: &reqwest::Error, timeout: Duration) -> FetchError {
    let text = client::chain(e);
    let f = |kind, message: String| FetchError { kind, message };
    if e.is_timeout() || text.contains("timed out") {
        f(
            FailureKind::Timeout,
            format!(
                "no answer within {} (raise --prometheus-timeout or narrow the window)",
                secs(timeout)
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
    } else if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        f(
            FailureKind::TlsUnknownCa,
            "TLS: the server certificate is signed by an unknown certificate authority (check --prometheus-ca)".into(),
        )
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        f(
            FailureKind::TlsNameMismatch,
            "TLS: the server certificate is not valid for the URL's host name".into(),
        )
    } else if ["CertificateRequired", "BadCertificate", "UnknownCA"]
        .iter()
        .any(|a| text.contains(a))
    {
        f(
            FailureKind::TlsClientCertificateRejected,
            "TLS: the server rejected the client certificate (missing, or not signed by a CA it trusts; check --prometheus-cert and --prometheus-key)".into(),
        )
    } else if text.contains("certificate") || text.contains("tls") || text.contains("TLS") {
        f(FailureKind::Tls, format!("TLS: {text}"))
    } else {
        f(FailureKind::Other, text)
    }
}

fn read_error(e: &std::io::Error, timeout: Duration) -> FetchError {
    let text = client::chain(e);
    if text.contains("timed out") || text.contains("TimedOut") {
        FetchError {
            kind: FailureKind::Timeout,
            message: format!(
                "timed out after {} reading the response (raise --prometheus-timeout)",
                secs(timeout)
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
