//! Prometheus's own PromQL conformance cases (`testdata/promqltest/*.test`)
//! run against cptriage's evaluator.
//!
//! Every case inside the supported subset must reproduce Prometheus's result,
//! and every passing instant case must give the same value as the last step of
//! the equivalent range query; cases outside the subset are skipped with a named
//! reason. Run with `cargo test --test it promqltest:: -- --nocapture` to see the
//! summary, and set `PROMQLTEST_VERBOSE=1` to list every skipped case.

use crate::promql_script as script;

use std::collections::BTreeMap;
use std::path::Path;

use script::{run_file, Outcome};

const FILES: &[&str] = &[
    "functions",
    "aggregators",
    "operators",
    "histograms",
    "selectors",
    "staleness",
    "range_queries",
    "literals",
];

#[test]
fn prometheus_conformance_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/promqltest");
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_file: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for f in FILES {
        let path = dir.join(format!("{f}.test"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let (mut p, mut fl, mut s) = (0, 0, 0);
        for (case, outcome) in run_file(&format!("{f}.test"), &text) {
            match outcome {
                Outcome::Pass => p += 1,
                Outcome::Fail(why) => {
                    fl += 1;
                    failures.push(format!("{}:{}: `{}`\n    {why}", case.file, case.line, case.expr));
                }
                Outcome::Skip(why) => {
                    if std::env::var_os("PROMQLTEST_VERBOSE").is_some() {
                        println!("SKIP {}:{}: `{}` ({why})", case.file, case.line, case.expr);
                    }
                    s += 1;
                    *reasons.entry(why).or_default() += 1;
                }
            }
        }
        per_file.push(format!("  {f}.test: {p} passed, {fl} failed, {s} skipped"));
        passed += p;
        failed += fl;
        skipped += s;
    }
    println!("promqltest: {passed} passed, {failed} failed, {skipped} skipped");
    for l in &per_file {
        println!("{l}");
    }
    println!("skip reasons:");
    let mut rs: Vec<(&String, &usize)> = reasons.iter().collect();
    rs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (r, n) in rs {
        println!("  {n:4}  {r}");
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    assert_eq!(failed, 0, "{failed} conformance cases failed");
}

#[test]
fn series_notation_and_durations() {
    use script::{expand_values, parse_duration, Point};
    let vals = |s: &str| -> Vec<Option<f64>> {
        expand_values(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .into_iter()
            .map(|p| match p {
                Point::Value(v) => Some(v),
                Point::Blank => None,
            })
            .collect()
    };
    // (notation, expanded)
    let cases: Vec<(&str, Vec<Option<f64>>)> = vec![
        ("0+10x3", vec![Some(0.0), Some(10.0), Some(20.0), Some(30.0)]),
        ("1-1x2", vec![Some(1.0), Some(0.0), Some(-1.0)]),
        ("-2+1x1", vec![Some(-2.0), Some(-1.0)]),
        ("1x2", vec![Some(1.0), Some(1.0), Some(1.0)]),
        ("0x2", vec![Some(0.0), Some(0.0), Some(0.0)]),
        ("_ 3 _x2", vec![None, Some(3.0), None, None]),
        ("1e3 -Inf", vec![Some(1000.0), Some(f64::NEG_INFINITY)]),
    ];
    for (s, want) in cases {
        assert_eq!(vals(s), want, "{s}");
    }
    let stale = vals("stale");
    assert!(stale.len() == 1 && stale[0].is_some_and(cptriage::store::is_stale));
    for (s, ms) in [
        ("0", 0),
        ("1m30s", 90_000),
        ("10s53ms", 10_053),
        ("2h", 7_200_000),
        ("8000s", 8_000_000),
    ] {
        assert_eq!(parse_duration(s), Ok(ms), "{s}");
    }
    assert!(parse_duration("5x").is_err());
}
