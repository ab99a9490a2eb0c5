//! `cptriage query` end to end: the binary, a capture on disk, Prometheus-shaped JSON,
//! exit codes, and counter resets computed as Prometheus computes them.

use crate::support;

use support::run as cptriage;

use std::path::Path;
use std::process::{Command, Output};

const T0: i64 = 1_767_225_600_000;

/// A capture of counter `x` scraped every 15 s whose process restarts between
/// the 4th and 5th scrape (the series of testdata/promtool/counter_reset.yaml).
fn restart_capture(dir: &Path) {
    std::fs::write(
        dir.join("manifest.yaml"),
        "format: cptriage/capture/v1\ninterval: 15s\ntargets:\n  - {name: c, role: unknown}\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("c")).unwrap();
    for (i, v) in [0, 150, 300, 450, 30, 180, 330, 480].iter().enumerate() {
        let start = if i < 4 { 1000 } else { 1060 };
        std::fs::write(
            dir.join("c").join(format!("{}.prom", T0 + i as i64 * 15_000)),
            format!("# TYPE x counter\nx{{job=\"t\"}} {v}\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {start}\n"),
        )
        .unwrap();
    }
}

fn json_value(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// The values pinned here were checked by a real Prometheus (promtool 2.42) with
/// testdata/promtool/counter_reset.yaml; `promtool_agrees_with_the_pinned_values`
/// re-runs that check.
#[test]
fn rate_and_increase_across_a_counter_reset_match_prometheus() {
    let d = tempfile::tempdir().unwrap();
    restart_capture(d.path());
    let dir = d.path().display().to_string();
    let at = format!("{}", (T0 + 100_000) / 1000);
    for (expr, want) in [
        ("increase(x[1m])", "440"),
        ("rate(x[1m])", "7.333333333333332"),
        ("irate(x[1m])", "10"),
        ("resets(x[1m])", "1"),
    ] {
        let v = json_value(&cptriage(&[
            "query", "--dump", &dir, expr, "--at", &at, "-o", "json",
        ]));
        assert_eq!(v["status"], "success");
        assert_eq!(v["data"]["resultType"], "vector", "{expr}");
        let r = &v["data"]["result"][0];
        assert_eq!(r["metric"]["instance"], "c", "{expr}");
        assert_eq!(r["metric"]["role"], "unknown", "{expr}");
        assert_eq!(r["value"][0], serde_json::json!(1_767_225_700), "{expr}");
        let got: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
        let want: f64 = want.parse().unwrap();
        assert!(
            (got - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{expr}: got {got}, want {want}"
        );
    }
    let at = format!("{}", (T0 + 117_000) / 1000);
    let v = json_value(&cptriage(&[
        "query",
        "--dump",
        &dir,
        "increase(x[1m])",
        "--at",
        &at,
        "-o",
        "json",
    ]));
    assert_eq!(v["data"]["result"][0]["value"][1], "600");
}

#[test]
fn promtool_agrees_with_the_pinned_values() {
    if std::env::var_os("CPTRIAGE_NO_PROMTOOL").is_some() {
        eprintln!("CPTRIAGE_NO_PROMTOOL set: not running promtool");
        return;
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/promtool/counter_reset.yaml");
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool (Debian package prometheus; scripts/test installs it)");
    assert!(
        out.status.success(),
        "promtool disagrees:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn range_query_is_a_matrix_at_each_step() {
    let d = tempfile::tempdir().unwrap();
    restart_capture(d.path());
    let dir = d.path().display().to_string();
    let from = format!("{}", T0 / 1000);
    let to = format!("{}", (T0 + 105_000) / 1000);
    let v = json_value(&cptriage(&[
        "query", "--dump", &dir, "x", "--from", &from, "--to", &to, "--step", "15s", "-o", "json",
    ]));
    assert_eq!(v["data"]["resultType"], "matrix");
    let values = v["data"]["result"][0]["values"].as_array().unwrap();
    let got: Vec<&str> = values.iter().map(|p| p[1].as_str().unwrap()).collect();
    assert_eq!(got, ["0", "150", "300", "450", "30", "180", "330", "480"]);
}

#[test]
fn default_time_is_the_last_snapshot_and_table_output_names_series() {
    let d = tempfile::tempdir().unwrap();
    restart_capture(d.path());
    let out = cptriage(&["query", "--dump", &d.path().display().to_string(), "x"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2026-01-01T00:01:45Z"), "{text}");
    assert!(
        text.contains(r#"x{instance="c", job="t", role="unknown"}"#),
        "{text}"
    );
    assert!(text.contains("480"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("time from the file name"), "{err}");
}

#[test]
fn exit_codes() {
    let d = tempfile::tempdir().unwrap();
    restart_capture(d.path());
    let dir = d.path().display().to_string();
    // 2: a bad expression, named in the message.
    let out = cptriage(&["query", "--dump", &dir, "rate(x[1m]"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid PromQL"));
    // 2: an unsupported construct, named.
    let out = cptriage(&["query", "--dump", &dir, "holt_winters(x[1m], 0.5, 0.5)"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holt_winters"));
    // 2: a path that does not exist.
    let out = cptriage(&["query", "--dump", "/nonexistent/dump", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dump"));
    // 3: nothing usable.
    let e = tempfile::tempdir().unwrap();
    std::fs::write(e.path().join("empty.prom"), "").unwrap();
    let out = cptriage(&[
        "query",
        "--dump",
        &e.path().join("empty.prom").display().to_string(),
        "x",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 2: bad time.
    let out = cptriage(&["query", "--dump", &dir, "x", "--at", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
}
