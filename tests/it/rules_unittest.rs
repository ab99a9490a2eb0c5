//! `cptriage rules test`: the shipped unit-test files pass, wrong expectations
//! are each reported, malformed files and tests are usage errors with their
//! location, and input series become snapshots exactly as written.

use crate::support;

use support::run as cptriage;

use cptriage::rules::unittest::{snapshots, TargetSeries};
use cptriage::source::ingest::{load_memory, Keep};
use cptriage::source::notation::{expand_values, parse_series};
use cptriage::source::Role;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn shipped_unit_tests_pass() {
    let o = cptriage(&[
        "rules",
        "test",
        "testdata/rules/unit/etcd.yaml",
        "testdata/rules/unit/mini.yaml",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("10 passed, 0 failed, 0 not run"), "{out}");
    assert!(out.contains("rules: the shipped rules"), "{out}");
    assert!(
        out.contains("rules: testdata/rules/unit/../good/mini.yaml"),
        "{out}"
    );
}

#[test]
fn verbose_shows_what_each_test_concluded() {
    let o = cptriage(&["rules", "test", "-v", "testdata/rules/unit/mini.yaml"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("(degraded: root cause etcd/raft onset 3m on etcd-1)"),
        "{out}"
    );
    assert!(
        out.contains("(degraded: root cause apf onset 4m30s on api-1)"),
        "{out}"
    );
}

#[test]
fn every_wrong_expectation_is_reported() {
    let f = "testdata/rules/unit/bad/wrong_expectations.yaml";
    let o = cptriage(&["rules", "test", f]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    for want in [
        "FAILED   leader lost, but the test expects a disk fault elsewhere (line 4)",
        "status: expected healthy, got degraded",
        "root cause: expected etcd/disk, got etcd/raft",
        "root cause onset: expected 1m ± 15s, got 3m",
        "root cause instances: expected [etcd-9], got [etcd-1]",
        "expected `etcd/raft` not lit, lit: [etcd/raft]",
        "0 passed, 1 failed, 0 not run",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
}

#[test]
fn malformed_files_and_tests_are_usage_errors_with_locations() {
    let f = "testdata/rules/unit/bad/unknown_key.yaml";
    let o = cptriage(&["rules", "test", f]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "{f}:5:9: tests[0].input_series[0]: unknown field `valeus`, expected `series` or `values`"
        )),
        "{err}"
    );

    let f = "testdata/rules/unit/bad/bad_values.yaml";
    let o = cptriage(&["rules", "test", f]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "{f}:2: target `etcd-1`, series `etcd_server_has_leader`: bad value `zero`"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{f}:11: target `db-1`: unknown role `postgres`")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let o = cptriage(&["rules", "test", "testdata/rules/unit/does-not-exist.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("does-not-exist.yaml: cannot read"));
}

#[test]
fn input_series_become_snapshots_as_written() {
    let t = TargetSeries {
        name: "m1".into(),
        role: Role::Etcd,
        series: vec![
            (
                parse_series(r#"x_total{code="a\"b"}"#).unwrap(),
                expand_values("0+5x3 _ 40 stale 50").unwrap(),
            ),
            (
                parse_series("g").unwrap(),
                expand_values("_ _ 1 1 _ _ 7").unwrap(),
            ),
        ],
    };
    let snaps = snapshots(&[t], 10_000);
    // Steps 0..=7; step 4 is `_` in both series → no scrape at 40 s. At step 6
    // `x_total` is `stale`, so that scrape has only `g`.
    let times: Vec<i64> = snaps.iter().map(|s| s.time).collect();
    assert_eq!(times, [0, 10_000, 20_000, 30_000, 50_000, 60_000, 70_000]);
    let ds = load_memory(snaps, Vec::new(), &Keep::All).expect("load");
    let x: Vec<(i64, f64)> = ds
        .store
        .by_name("x_total")
        .flat_map(|s| {
            assert_eq!(s.labels.get("code"), Some("a\"b"));
            assert_eq!(s.labels.get("instance"), Some("m1"));
            s.points.iter().map(|p| (p.t, p.v)).collect::<Vec<_>>()
        })
        .collect();
    let finite: Vec<(i64, f64)> = x.into_iter().filter(|(_, v)| !v.is_nan()).collect();
    assert_eq!(
        finite,
        [
            (0, 0.0),
            (10_000, 5.0),
            (20_000, 10.0),
            (30_000, 15.0),
            (50_000, 40.0),
            (70_000, 50.0)
        ]
    );
    assert_eq!(ds.targets.len(), 1);
    assert_eq!(ds.targets[0].role, Role::Etcd);
}
