//! One kube-apiserver audit event (`audit.k8s.io/v1` `Event`), as the log
//! backend writes it: one JSON object per line. Only the fields cptriage
//! reads are decoded; the rest (request and response objects included) is
//! skipped. Strings borrow from the line when they carry no escapes.
//!
//! Upstream: `k8s.io/apiserver/pkg/apis/audit/v1/types.go` (`Event`,
//! `ObjectReference`, `Stage`); the layer latencies are the audit annotations
//! `apiserver.latency.k8s.io/<layer>` added by
//! `k8s.io/apiserver/pkg/endpoints/filters/audit.go` (`writeLatencyToAnnotation`)
//! to requests slower than 500 ms, with Go duration values (`10.06s`, `512.3ms`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Prefix of the per-layer latency annotations (kube-apiserver 1.24+).
pub const LATENCY_PREFIX: &str = "apiserver.latency.k8s.io/";

/// kube-apiserver adds the latency annotations only to requests whose
/// total latency exceeds this (`writeLatencyToAnnotation`, 500 ms).
pub const ANNOTATION_THRESHOLD_SECONDS: f64 = 0.5;

/// The fields of an audit event that cptriage reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event<'a> {
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub level: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "auditID")]
    pub audit_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub stage: Cow<'a, str>,
    #[serde(borrow, default, rename = "requestURI")]
    pub request_uri: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub verb: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub user: Option<User<'a>>,
    #[serde(borrow, default)]
    pub user_agent: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub object_ref: Option<ObjectRef<'a>>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    #[serde(borrow)]
    pub request_received_timestamp: Cow<'a, str>,
    #[serde(borrow)]
    pub stage_timestamp: Cow<'a, str>,
    #[serde(borrow, default)]
    pub annotations: Annotations<'a>,
}

/// `authentication/v1` `UserInfo`: only the name.
#[derive(Debug, Deserialize)]
pub struct User<'a> {
    #[serde(borrow, default)]
    pub username: Option<Cow<'a, str>>,
}

/// `audit.k8s.io/v1` `ObjectReference`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef<'a> {
    #[serde(borrow, default)]
    pub resource: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub subresource: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub api_group: Option<Cow<'a, str>>,
}

/// `metav1.Status` of the response: only the HTTP code.
#[derive(Debug, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: Option<i64>,
}

/// The event's annotations, in order, without building a map.
#[derive(Debug, Default)]
pub struct Annotations<'a>(pub Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'de: 'a, 'a> Deserialize<'de> for Annotations<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Annotations<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Annotations::default())
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Self::Value, M::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = m.next_entry::<Borrowed<'a>, Borrowed<'a>>()? {
                    v.push((k.0, val.0));
                }
                Ok(Annotations(v))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A string that borrows from the input when it can.
struct Borrowed<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Borrowed<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct W<'a>(#[serde(borrow)] Cow<'a, str>);
        W::deserialize(d).map(|w| Borrowed(w.0))
    }
}

impl Event<'_> {
    /// The response's HTTP code, when recorded.
    pub fn code(&self) -> Option<i64> {
        self.response_status.as_ref().and_then(|s| s.code)
    }

    /// The layer latencies (`apiserver.latency.k8s.io/<layer>`), in seconds;
    /// `Err` names the first annotation whose value is not a Go duration.
    pub fn layers(&self) -> Result<Vec<(&str, f64)>, String> {
        let mut out = Vec::new();
        for (k, v) in &self.annotations.0 {
            if let Some(layer) = k.strip_prefix(LATENCY_PREFIX) {
                let secs =
                    parse_go_duration(v).ok_or_else(|| format!("annotation `{k}` is not a Go duration"))?;
                out.push((layer, secs));
            }
        }
        Ok(out)
    }
}

/// Parses a Go `time.Duration` string (`10.06s`, `512.3ms`, `1m2.5s`,
/// `1.5µs`, `850ns`, `0s`) into seconds. `None` when it is not one.
pub fn parse_go_duration(s: &str) -> Option<f64> {
    let (neg, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0.0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let n = rest
            .bytes()
            .position(|c| !(c.is_ascii_digit() || c == b'.'))
            .unwrap_or(rest.len());
        if n == 0 {
            return None;
        }
        let num = &rest[..n];
        if num == "." || num.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[u..];
        total += value * scale;
    }
    Some(if neg { -total } else { total })
}

/// Parses an RFC 3339 time with up to nanosecond fractions
/// (`2026-01-01T00:01:40.123456Z`, as `metav1.MicroTime` writes it) into
/// microseconds since the Unix epoch.
pub fn parse_micros(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    // The common form, fast: YYYY-MM-DDTHH:MM:SS[.frac]Z
    if b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b't')
        && b[13] == b':'
        && b[16] == b':'
        && (b[b.len() - 1] == b'Z' || b[b.len() - 1] == b'z')
    {
        let d = |r: std::ops::Range<usize>| -> Option<i64> {
            let mut v = 0i64;
            for &c in &b[r] {
                if !c.is_ascii_digit() {
                    return None;
                }
                v = v * 10 + i64::from(c - b'0');
            }
            Some(v)
        };
        let (y, mo, da) = (d(0..4)?, d(5..7)?, d(8..10)?);
        let (h, mi, se) = (d(11..13)?, d(14..16)?, d(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || se > 60 {
            return None;
        }
        let mut micros = 0i64;
        let end = b.len() - 1;
        if end > 19 {
            if b[19] != b'.' || end == 20 {
                return None;
            }
            let frac = &b[20..end];
            if frac.len() > 9 || !frac.iter().all(u8::is_ascii_digit) {
                return None;
            }
            for i in 0..6 {
                micros = micros * 10 + frac.get(i).map_or(0, |c| i64::from(c - b'0'));
            }
        }
        let days = days_from_civil(y, mo, da);
        return Some(((days * 24 + h) * 60 + mi) * 60_000_000 + se * 1_000_000 + micros);
    }
    let t = chrono::DateTime::parse_from_rfc3339(s).ok()?;
    Some(t.timestamp_micros())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let close = |s: &str, want: f64| {
            let got = parse_go_duration(s).unwrap_or_else(|| panic!("{s} did not parse"));
            assert!((got - want).abs() < 1e-12, "{s}: {got} != {want}");
        };
        close("10.06s", 10.06);
        close("512.3ms", 0.5123);
        close("1m2.5s", 62.5);
        close("2h3m4s", 7384.0);
        close("1.5µs", 1.5e-6);
        close("1.5μs", 1.5e-6);
        close("3us", 3e-6);
        close("850ns", 850e-9);
        close("0s", 0.0);
        close("0", 0.0);
        close("-1.5s", -1.5);
        for bad in ["", "s", "1", "1x", "1.2.3s", ".s", "ms5", "1s ", "one"] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn micro_times() {
        assert_eq!(parse_micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_micros("2026-01-01T00:01:40.123456Z"),
            Some(1_767_225_700_123_456)
        );
        assert_eq!(
            parse_micros("2026-01-01T00:01:40.5Z"),
            Some(1_767_225_700_500_000)
        );
        // Offsets go through chrono.
        assert_eq!(
            parse_micros("2026-01-01T01:01:40.5+01:00"),
            Some(1_767_225_700_500_000)
        );
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01 00:00:00",
            "yesterday",
        ] {
            assert_eq!(parse_micros(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn decodes_an_upstream_event_and_skips_the_rest() {
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"5f1c","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/pods/web-0","verb":"get","user":{"username":"system:serviceaccount:default:web","groups":["system:serviceaccounts"]},"sourceIPs":["10.0.0.7"],"userAgent":"kubectl/v1.30.1 (linux/amd64) kubernetes/abc","objectRef":{"resource":"pods","namespace":"default","name":"web-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestObject":{"a":[1,2,{"b":"c\"d"}]},"requestReceivedTimestamp":"2026-01-01T00:01:30.000000Z","stageTimestamp":"2026-01-01T00:01:40.060000Z","annotations":{"authorization.k8s.io/decision":"allow","apiserver.latency.k8s.io/etcd":"10.06s","apiserver.latency.k8s.io/total":"10.06s"}}"#;
        let e: Event = serde_json::from_str(line).unwrap();
        assert_eq!(e.stage, "ResponseComplete");
        assert_eq!(e.verb.as_deref(), Some("get"));
        assert_eq!(e.code(), Some(200));
        assert_eq!(e.object_ref.as_ref().unwrap().resource.as_deref(), Some("pods"));
        assert!(matches!(e.stage, Cow::Borrowed(_)));
        assert_eq!(e.layers().unwrap(), vec![("etcd", 10.06), ("total", 10.06)]);
        let bad = line.replace("\"10.06s\",\"apiserver", "\"ten\",\"apiserver");
        let e: Event = serde_json::from_str(&bad).unwrap();
        assert!(e.layers().unwrap_err().contains("apiserver.latency.k8s.io/etcd"));
    }
}
