//! Time-series traps: captures built here whose naive reading gives a false
//! rate or a false verdict. For each, `diagnose --dump DIR -o json` must light
//! no false axis and must say what it saw (in `warnings` or `sources`).

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::cptriage;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const STEP: i64 = 15_000;
const ROUNDS: i64 = 24;

/// One apiserver snapshot: requests answered 200 and 500 so far, the process
/// start time, and optionally an explicit timestamp on every sample.
fn apiserver(ok: f64, errors: f64, start: f64, ts: Option<i64>) -> String {
    let ts = ts.map(|t| format!(" {t}")).unwrap_or_default();
    format!(
        "# TYPE apiserver_request_total counter\n\
         apiserver_request_total{{code=\"200\",resource=\"pods\",verb=\"GET\"}} {ok}{ts}\n\
         apiserver_request_total{{code=\"500\",resource=\"pods\",verb=\"GET\"}} {errors}{ts}\n\
         # TYPE process_start_time_seconds gauge\n\
         process_start_time_seconds {start}{ts}\n\
         # TYPE kubernetes_build_info gauge\n\
         kubernetes_build_info{{git_version=\"v1.33.0\"}} 1{ts}\n"
    )
}

/// Writes a capture: `snaps` are (target, time in ms, exposition).
fn write_capture(dir: &Path, targets: &[&str], snaps: &[(String, i64, String)]) {
    let mut m = String::from("format: cptriage/capture/v1\ninterval: 15s\ntargets:\n");
    for t in targets {
        m.push_str(&format!("- {{name: {t}, role: apiserver}}\n"));
        std::fs::create_dir_all(dir.join(t)).expect("mkdir");
    }
    std::fs::write(dir.join("manifest.yaml"), m).expect("write manifest");
    for (t, ms, text) in snaps {
        std::fs::write(dir.join(t).join(format!("{ms}.prom")), text).expect("write snapshot");
    }
}

/// Runs `diagnose --dump DIR -o json`; returns the exit code and the report.
fn diagnose(dir: &Path) -> (i32, Value) {
    let d = dir.display().to_string();
    let out = cptriage(&["diagnose", "--dump", &d, "-o", "json"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
    (out.status.code().unwrap_or(-1), v)
}

fn lit_axes(v: &Value) -> Vec<String> {
    v["axes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|x| x["lit"] == Value::Bool(true))
                .map(|x| x["leaf"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The per-step values of signal `signal` over every axis that shows it.
fn signal_series(v: &Value, signal: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for a in v["axes"].as_array().into_iter().flatten() {
        for e in a["evidence"].as_array().into_iter().flatten() {
            if e["signal"] == signal {
                out.extend(
                    e["series"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_f64),
                );
            }
        }
    }
    out
}

fn warnings(v: &Value) -> String {
    v["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

#[track_caller]
fn assert_no_false_error_rate(v: &Value) {
    let lit = lit_axes(v);
    assert!(
        lit.is_empty(),
        "false lit axes {lit:?}\nwarnings: {}",
        warnings(v)
    );
    assert_ne!(v["status"], "degraded");
    let errs = signal_series(v, "request_error_ratio");
    assert!(!errs.is_empty(), "request_error_ratio was not evaluated");
    assert!(
        errs.iter().all(|x| (0.0..0.02).contains(x)),
        "false error ratio: {errs:?}"
    );
}

fn snap(target: &str, k: i64, text: String) -> (String, i64, String) {
    (target.to_string(), T0 + k * STEP, text)
}

#[test]
fn counter_reset_by_a_restart_is_counted_not_negative() {
    let d = tempfile::tempdir().expect("tempdir");
    // 100 requests/s, 0.5 errors/s (0.5%); the process restarts at round 12.
    let snaps: Vec<_> = (0..ROUNDS)
        .map(|k| {
            let (since, start) = if k < 12 {
                (k + 40, 1.7e9)
            } else {
                (k - 12, 1.7e9 + 600.0)
            };
            let s = (since * 15) as f64;
            snap("apiserver-0", k, apiserver(100.0 * s, 0.5 * s, start, None))
        })
        .collect();
    write_capture(d.path(), &["apiserver-0"], &snaps);
    let (code, v) = diagnose(d.path());
    assert_ne!(code, 1, "{v}");
    assert_no_false_error_rate(&v);
    assert_eq!(
        v["sources"][0]["restarts"][0], "2026-01-01T00:03:00Z",
        "{}",
        v["sources"]
    );
    assert!(
        warnings(&v).contains("apiserver-0 (apiserver) restarted at 2026-01-01T00:03:00Z"),
        "{}",
        warnings(&v)
    );
    // `increase` over the reset counts the restarted counter from zero: never
    // negative, never the whole counter.
    let dir = d.path().display().to_string();
    let out = cptriage(
        &[
            "query",
            "--dump",
            &dir,
            "sum(increase(apiserver_request_total{code=\"200\"}[1m]))",
            "--from",
            "2026-01-01T00:01:00Z",
            "--to",
            "2026-01-01T00:05:45Z",
            "--step",
            "15s",
            "-o",
            "json",
        ],
        &[],
    );
    let q: Value = serde_json::from_slice(&out.stdout).expect("query JSON");
    let values: Vec<f64> = q["data"]["result"][0]["values"]
        .as_array()
        .expect("values")
        .iter()
        .filter_map(|p| p[1].as_str().and_then(|s| s.parse().ok()))
        .collect();
    assert!(values.len() >= 15, "{q}");
    for x in &values {
        // 100/s over 1 m = 6000, extrapolated from 45 s of points.
        assert!((4000.0..=8000.0).contains(x), "increase {x} in {values:?}");
    }
}

#[test]
fn load_balancer_alternating_replicas_is_split_not_a_false_rate() {
    let d = tempfile::tempdir().expect("tempdir");
    // Replica A: no errors ever. Replica B: 5000 old errors, none new. Both
    // serve 100 requests/s; the address alternates between them every round.
    let snaps: Vec<_> = (0..ROUNDS)
        .map(|k| {
            let s = (k * 15) as f64;
            let text = if k % 2 == 0 {
                apiserver(10_000.0 + 100.0 * s, 0.0, 1.7e9, None)
            } else {
                apiserver(9_000.0 + 100.0 * s, 5_000.0, 1.7e9 + 3600.0, None)
            };
            snap("apiserver-0", k, text)
        })
        .collect();
    write_capture(d.path(), &["apiserver-0"], &snaps);
    let (code, v) = diagnose(d.path());
    assert_ne!(code, 1, "{v}");
    assert_no_false_error_rate(&v);
    let w = warnings(&v);
    assert!(
        w.contains("apiserver-0: process_start_time_seconds alternates between 2 processes")
            && w.contains("`apiserver-0`, `apiserver-0.p2`"),
        "{w}"
    );
    let targets: Vec<&str> = v["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .filter_map(|s| s["target"].as_str())
        .collect();
    assert_eq!(targets, ["apiserver-0", "apiserver-0.p2"]);
    assert!(!w.contains("restarted at"), "alternation is not a restart: {w}");
}

#[test]
fn scrape_gap_is_reported_and_not_bridged_by_a_false_rate() {
    let d = tempfile::tempdir().expect("tempdir");
    let snaps: Vec<_> = (0..ROUNDS)
        .filter(|k| !(8..15).contains(k))
        .map(|k| {
            let s = (k * 15) as f64;
            snap("apiserver-0", k, apiserver(100.0 * s, 0.2 * s, 1.7e9, None))
        })
        .collect();
    write_capture(d.path(), &["apiserver-0"], &snaps);
    let (code, v) = diagnose(d.path());
    assert_ne!(code, 1, "{v}");
    assert_no_false_error_rate(&v);
    assert_eq!(
        v["sources"][0]["missing"][0],
        serde_json::json!(["2026-01-01T00:01:45Z", "2026-01-01T00:03:45Z"]),
        "{}",
        v["sources"]
    );
    assert!(
        warnings(&v).contains(
            "apiserver-0 (apiserver) has no snapshots from 2026-01-01T00:01:45Z to 2026-01-01T00:03:45Z"
        ),
        "{}",
        warnings(&v)
    );
}

#[test]
fn clock_skew_of_one_target_does_not_move_its_onset() {
    let d = tempfile::tempdir().expect("tempdir");
    // apiserver-1's clock runs 5 minutes ahead and it stamps its samples; it
    // starts failing 20% of requests at round 12 (00:03:00 on the recorder's clock).
    let mut snaps = Vec::new();
    for k in 0..ROUNDS {
        let s = (k * 15) as f64;
        snaps.push(snap("apiserver-0", k, apiserver(100.0 * s, 0.0, 1.7e9, None)));
        let errors = if k < 12 {
            0.0
        } else {
            20.0 * ((k - 12) * 15) as f64
        };
        let skewed = T0 + k * STEP + 300_000;
        snaps.push(snap(
            "apiserver-1",
            k,
            apiserver(80.0 * s, errors, 1.7e9, Some(skewed)),
        ));
    }
    write_capture(d.path(), &["apiserver-0", "apiserver-1"], &snaps);
    let (code, v) = diagnose(d.path());
    let w = warnings(&v);
    assert!(
        w.contains("samples carry explicit timestamps more than 60 s from the snapshot time")
            && w.contains("+5 min off"),
        "{w}"
    );
    // Degraded; the data has no etcd latency, so its cause is undecided (exit 5).
    assert_eq!(code, 5, "the errors of apiserver-1 are real: {v}");
    let joint = v["axes"]
        .as_array()
        .expect("axes")
        .iter()
        .find(|a| a["lit"] == Value::Bool(true))
        .expect("a lit axis");
    assert_eq!(joint["instances"], serde_json::json!(["apiserver-1"]), "{joint}");
    let onset = joint["onset"].as_str().expect("onset");
    assert!(
        ("2026-01-01T00:03:00Z"..="2026-01-01T00:03:30Z").contains(&onset),
        "onset {onset} moved by the skewed clock"
    );
}

#[test]
fn out_of_order_and_duplicate_timestamps() {
    let d = tempfile::tempdir().expect("tempdir");
    // Rounds carry explicit timestamps equal to their time, except round 10,
    // stamped 20 s early (before round 9): kept, it would fake a counter reset
    // of the error counter (50 000 old errors) and a burst of errors.
    let mut snaps: Vec<_> = (0..ROUNDS)
        .map(|k| {
            let s = (k * 15) as f64;
            let ts = T0 + k * STEP - if k == 10 { 20_000 } else { 0 };
            snap(
                "apiserver-0",
                k,
                apiserver(100.0 * s + 1e6, 50_000.0 + 0.1 * s, 1.7e9, Some(ts)),
            )
        })
        .collect();
    write_capture(d.path(), &["apiserver-0"], &snaps);
    // A second file for round 5 (named in seconds): the same time twice.
    let dup = d
        .path()
        .join("apiserver-0")
        .join(format!("{}.prom", (T0 + 5 * STEP) / 1000));
    snaps.truncate(0);
    std::fs::write(&dup, apiserver(1e6 + 100.0 * 75.0, 50_000.0 + 7.5, 1.7e9, None)).expect("write");
    let (code, v) = diagnose(d.path());
    assert_ne!(code, 1, "{v}");
    assert_no_false_error_rate(&v);
    let w = warnings(&v);
    assert!(
        w.contains("1767225750000.prom: 4 samples have explicit timestamps older than the series' previous point (out of order); they were dropped"),
        "{w}"
    );
    assert!(
        w.contains("a second snapshot of `apiserver-0` at the same time; its values replace the first"),
        "{w}"
    );
}
