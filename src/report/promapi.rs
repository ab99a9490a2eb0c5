//! The Prometheus HTTP API response shape (`/api/v1/query`, `/api/v1/query_range`),
//! written exactly as Prometheus writes it so scripts and Prometheus tooling read
//! `cptriage query -o json` unchanged: timestamps as seconds with up to three
//! decimals, values as strings in Go's shortest `'f'` format, `NaN`, `+Inf`, `-Inf`.

use crate::eval::Value;
use crate::store::{is_stale, Labels, Millis};

/// Go's `strconv.FormatFloat(v, 'f', -1, 64)` with Prometheus's NaN/Inf spellings.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        // Rust's Display for f64 is the shortest round-trip decimal without exponent,
        // which is what Go's 'f' with precision -1 prints.
        let s = format!("{v}");
        if s == "-0" {
            "-0".into()
        } else {
            s
        }
    }
}

pub use crate::timefmt::format_timestamp;

fn metric_json(l: &Labels) -> String {
    let mut m = serde_json::Map::new();
    for x in l.iter() {
        m.insert(x.name.to_string(), serde_json::Value::String(x.value.to_string()));
    }
    serde_json::Value::Object(m).to_string()
}

fn point(t: Millis, v: f64) -> String {
    format!("[{},\"{}\"]", format_timestamp(t), format_value(v))
}

/// Renders an evaluation result at time `t` (instant) as the API's success body.
pub fn render(value: &Value, t: Millis) -> String {
    let (kind, result) = match value {
        Value::Scalar(v) => ("scalar", point(t, *v)),
        Value::String(s) => (
            "string",
            format!(
                "[{},{}]",
                format_timestamp(t),
                serde_json::Value::String(s.clone())
            ),
        ),
        Value::Vector(vs) => {
            let items: Vec<String> = vs
                .iter()
                .map(|s| {
                    format!(
                        "{{\"metric\":{},\"value\":{}}}",
                        metric_json(&s.labels),
                        point(t, s.v)
                    )
                })
                .collect();
            ("vector", format!("[{}]", items.join(",")))
        }
        Value::Matrix(ms) => {
            let items: Vec<String> = ms
                .iter()
                .map(|s| {
                    let pts: Vec<String> = s
                        .samples
                        .iter()
                        .filter(|p| !is_stale(p.v))
                        .map(|p| point(p.t, p.v))
                        .collect();
                    format!(
                        "{{\"metric\":{},\"values\":[{}]}}",
                        metric_json(&s.labels),
                        pts.join(",")
                    )
                })
                .collect();
            ("matrix", format!("[{}]", items.join(",")))
        }
    };
    format!("{{\"status\":\"success\",\"data\":{{\"resultType\":\"{kind}\",\"result\":{result}}}}}")
}

/// The API's error body.
pub fn render_error(error_type: &str, message: &str) -> String {
    serde_json::json!({"status": "error", "errorType": error_type, "error": message}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::VectorSample;
    use crate::store::{Sample, Series};

    #[test]
    fn values_and_timestamps_as_prometheus_writes_them() {
        assert_eq!(format_value(1.0), "1");
        assert_eq!(format_value(0.1), "0.1");
        assert_eq!(format_value(1e21), "1000000000000000000000");
        assert_eq!(format_value(2.5e-5), "0.000025");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_timestamp(1_435_781_451_781), "1435781451.781");
        assert_eq!(format_timestamp(1_435_781_451_000), "1435781451");
        assert_eq!(format_timestamp(1_500), "1.500");
        assert_eq!(format_timestamp(1_005), "1.005");
    }

    #[test]
    fn shapes() {
        let l = Labels::from_pairs([("__name__", "up"), ("instance", "etcd-0")]);
        let v = Value::Vector(vec![VectorSample {
            labels: l.clone(),
            v: 1.0,
        }]);
        assert_eq!(
            render(&v, 10_000),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"etcd-0"},"value":[10,"1"]}]}}"#
        );
        let m = Value::Matrix(vec![Series {
            labels: l,
            samples: vec![Sample { t: 0, v: 1.0 }, Sample { t: 5000, v: 2.5 }],
        }]);
        assert_eq!(
            render(&m, 0),
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","instance":"etcd-0"},"values":[[0,"1"],[5,"2.5"]]}]}}"#
        );
        assert_eq!(
            render(&Value::Scalar(3.0), 1000),
            r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#
        );
    }
}
