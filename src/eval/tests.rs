//! Table tests for the subtle parts of the evaluator.

use super::functions::{eval_range_fn_for_test, window_ctx};
use super::*;
use crate::store::stale_nan;

const S: Millis = 1000;

type Points = Vec<(Millis, f64)>;
type SeriesSpec<'a> = (&'a [(&'a str, &'a str)], &'a [(Millis, f64)]);
type RateCase = (&'static str, Millis, Millis, Points, Option<f64>);
type QuantileCase = (f64, Vec<(f64, f64)>, f64);

fn pts(p: &[(Millis, f64)]) -> Vec<Sample> {
    p.iter().map(|&(t, v)| Sample { t: t * S, v }).collect()
}

fn store(series: &[SeriesSpec]) -> Store {
    let mut st = Store::new();
    for (labels, points) in series {
        let l = st.labels(labels.iter().copied());
        for &(t, v) in *points {
            st.push(&l, t * S, v);
        }
    }
    st.finish();
    st
}

fn inst(st: &Store, q: &str, t: Millis) -> Vec<(String, f64)> {
    let e = parse(q).unwrap();
    match instant(st, &e, t * S, &EvalOptions::default()).unwrap() {
        Value::Vector(v) => v.into_iter().map(|s| (s.labels.to_string(), s.v)).collect(),
        Value::Scalar(f) => vec![("scalar".into(), f)],
        other => panic!("unexpected {other:?}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    almost_equal(a, b, 1e-9)
}

#[test]
fn extrapolation_edge_cases() {
    // (function, window end s, range s, points (s, v), expected)
    let even: Vec<(Millis, f64)> = (1..=10).map(|i| (i * 30, i as f64)).collect();
    let late: Vec<(Millis, f64)> = (0..6).map(|i| (150 + i * 30, 10.0 + i as f64)).collect();
    let near_zero: Vec<(Millis, f64)> = (0..9).map(|i| (60 + i * 30, 1.0 + 10.0 * i as f64)).collect();
    let falling: Vec<(Millis, f64)> = (0..10).map(|i| (30 + i * 30, 10.0 - i as f64)).collect();
    let cases: Vec<RateCase> = vec![
        // Samples cover the window: extrapolated by the full 30 s gap at the start.
        ("increase", 300, 300, even.clone(), Some(10.0)),
        ("rate", 300, 300, even.clone(), Some(10.0 / 300.0)),
        // Gap at the start ≥ 1.1 × average interval: only half an interval (15 s).
        ("increase", 300, 300, late.clone(), Some(5.0 * 165.0 / 150.0)),
        // A counter is not extrapolated below zero: 3 s to the zero point, not 15 s.
        ("increase", 300, 300, near_zero, Some(80.0 * 243.0 / 240.0)),
        // delta is a gauge function: no zero clamp, negative result.
        ("delta", 300, 300, falling, Some(-9.0 * 300.0 / 270.0)),
        // Counter reset inside the range: the pre-reset value is added.
        (
            "increase",
            120,
            120,
            vec![(30, 5.0), (60, 10.0), (90, 2.0), (120, 6.0)],
            Some(11.0 * 120.0 / 90.0),
        ),
        // One point is not enough.
        ("rate", 300, 300, vec![(100, 1.0)], None),
        ("irate", 300, 300, vec![(240, 10.0), (270, 2.0)], Some(2.0 / 30.0)),
        ("idelta", 300, 300, vec![(240, 10.0), (270, 2.0)], Some(-8.0)),
        (
            "resets",
            300,
            300,
            vec![(30, 5.0), (60, 1.0), (90, 3.0), (120, 0.0)],
            Some(2.0),
        ),
        (
            "changes",
            300,
            300,
            vec![(30, 5.0), (60, 5.0), (90, 3.0), (120, 3.0)],
            Some(1.0),
        ),
        (
            "deriv",
            300,
            300,
            vec![(0, 0.0), (60, 60.0), (120, 120.0)],
            Some(1.0),
        ),
    ];
    for (f, t, range, p, want) in cases {
        let got = eval_range_fn_for_test(f, &pts(&p), &window_ctx(t * S, range * S));
        match (want, got) {
            (None, None) => {}
            (Some(w), Some(g)) if close(w, g) => {}
            _ => panic!("{f} over {p:?}: expected {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn rate_through_the_store_matches_prometheus_windows() {
    // 0+10x40 every 10 s: rate over [1m] is exactly 1/s anywhere inside.
    let p: Vec<(Millis, f64)> = (0..=40).map(|i| (i * 10, i as f64 * 10.0)).collect();
    let st = store(&[(&[("__name__", "c_total"), ("job", "a")], &p)]);
    assert_eq!(
        inst(&st, "rate(c_total[1m])", 200),
        vec![("{job=\"a\"}".into(), 1.0)]
    );
    // Left-open window: (140 s, 200 s] holds 6 points, not 7.
    assert_eq!(
        inst(&st, "count_over_time(c_total[1m])", 200),
        vec![("{job=\"a\"}".into(), 6.0)]
    );
    // Offset moves the window back.
    assert_eq!(
        inst(&st, "max_over_time(c_total[1m] offset 100s)", 200),
        vec![("{job=\"a\"}".into(), 100.0)]
    );
}

#[test]
fn histogram_quantile_le_spellings_and_edge_cases() {
    // Two histograms, one with `le="1"`, one with `le="1.0"` (and numeric order
    // that differs from string order: 2.5 < 10).
    let st = store(&[
        (&[("__name__", "h_bucket"), ("v", "a"), ("le", "1")], &[(0, 5.0)]),
        (
            &[("__name__", "h_bucket"), ("v", "a"), ("le", "2.5")],
            &[(0, 8.0)],
        ),
        (
            &[("__name__", "h_bucket"), ("v", "a"), ("le", "10")],
            &[(0, 10.0)],
        ),
        (
            &[("__name__", "h_bucket"), ("v", "a"), ("le", "+Inf")],
            &[(0, 10.0)],
        ),
        (
            &[("__name__", "h_bucket"), ("v", "b"), ("le", "1.0")],
            &[(0, 5.0)],
        ),
        (
            &[("__name__", "h_bucket"), ("v", "b"), ("le", "2.5e0")],
            &[(0, 8.0)],
        ),
        (
            &[("__name__", "h_bucket"), ("v", "b"), ("le", "10.0")],
            &[(0, 10.0)],
        ),
        (
            &[("__name__", "h_bucket"), ("v", "b"), ("le", "+Inf")],
            &[(0, 10.0)],
        ),
    ]);
    let mut got = inst(&st, "histogram_quantile(0.5, h_bucket)", 0);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, vec![("{v=\"a\"}".into(), 1.0), ("{v=\"b\"}".into(), 1.0)]);
    let got = inst(
        &st,
        "histogram_quantile(0.65, sum by (le) (h_bucket{v=\"a\"}))",
        0,
    );
    assert!(close(got[0].1, 1.75), "{got:?}");

    // (q, buckets, expected)
    let cases: Vec<QuantileCase> = vec![
        (-0.1, vec![(1.0, 1.0), (f64::INFINITY, 2.0)], f64::NEG_INFINITY),
        (1.1, vec![(1.0, 1.0), (f64::INFINITY, 2.0)], f64::INFINITY),
        (f64::NAN, vec![(1.0, 1.0), (f64::INFINITY, 2.0)], f64::NAN),
        // No +Inf bucket.
        (0.5, vec![(1.0, 1.0), (2.0, 2.0)], f64::NAN),
        // No observations.
        (0.5, vec![(1.0, 0.0), (f64::INFINITY, 0.0)], f64::NAN),
        // Quantile in the +Inf bucket: second-highest bound.
        (0.99, vec![(1.0, 1.0), (2.0, 2.0), (f64::INFINITY, 10.0)], 2.0),
        // Non-monotonic counts are raised: 2 → 5, so the median is in (0.5, 1].
        (0.5, vec![(0.5, 5.0), (1.0, 2.0), (f64::INFINITY, 10.0)], 0.5),
        // Equal bounds are merged (counts added).
        (0.5, vec![(1.0, 2.0), (1.0, 2.0), (f64::INFINITY, 8.0)], 1.0),
        // Lowest bucket with bound ≤ 0 returns the bound.
        (0.1, vec![(-1.0, 5.0), (f64::INFINITY, 10.0)], -1.0),
    ];
    for (q, mut b, want) in cases {
        let got = bucket_quantile(q, &mut b);
        assert!(almost_equal(want, got, 1e-9), "q={q}: expected {want}, got {got}");
    }
}

#[test]
fn bucket_fraction_cases() {
    let b = || vec![(1.0, 2.0), (2.0, 6.0), (f64::INFINITY, 8.0)];
    // (lower, upper, expected)
    let cases: Vec<(f64, f64, f64)> = vec![
        (0.0, 1.0, 0.25),
        (0.0, 1.5, 0.5),
        (1.0, 2.0, 0.5),
        (f64::NEG_INFINITY, f64::INFINITY, 1.0),
        (2.0, 1.0, 0.0),
        (f64::NAN, 1.0, f64::NAN),
    ];
    for (lo, hi, want) in cases {
        let got = bucket_fraction(lo, hi, &mut b());
        assert!(
            almost_equal(want, got, 1e-9),
            "({lo}, {hi}): expected {want}, got {got}"
        );
    }
    assert!(bucket_fraction(0.0, 1.0, &mut [(1.0, 2.0), (2.0, 6.0)]).is_nan());
}

#[test]
fn histogram_quantile_survives_le_respelling_across_steps() {
    // The same bucket scraped as `le="1"` first and `le="1.0"` later (a
    // client-library change): every step still sees one consistent histogram.
    let st = store(&[
        (&[("__name__", "h_bucket"), ("le", "1")], &[(0, 4.0)]),
        (
            &[("__name__", "h_bucket"), ("le", "+Inf")],
            &[(0, 8.0), (600, 8.0)],
        ),
        (&[("__name__", "h_bucket"), ("le", "1.0")], &[(600, 4.0)]),
    ]);
    let e = parse("histogram_quantile(0.25, h_bucket)").unwrap();
    let opts = EvalOptions { lookback: 60 * S };
    let r = range(&st, &e, 0, 600 * S, 600 * S, &opts).unwrap();
    assert_eq!(r.len(), 1);
    let vals: Vec<f64> = r[0].samples.iter().map(|p| p.v).collect();
    assert_eq!(vals, vec![0.5, 0.5]);
}

#[test]
fn staleness_marker_ends_a_series_and_lookback_is_left_open() {
    let st = store(&[
        (
            &[("__name__", "m")],
            &[(0, 1.0), (10, 2.0), (20, stale_nan()), (30, 3.0)],
        ),
        (&[("__name__", "once")], &[(0, 7.0)]),
    ]);
    // (query, t in s, expected values)
    let cases: Vec<(&str, Millis, Vec<f64>)> = vec![
        ("m", 10, vec![2.0]),
        ("m", 20, vec![]),
        ("m", 25, vec![]),
        ("m", 30, vec![3.0]),
        ("once", 299, vec![7.0]),
        ("once", 300, vec![]),
        ("count_over_time(m[1m])", 30, vec![3.0]),
        ("count_over_time(m[15s])", 20, vec![1.0]),
    ];
    for (q, t, want) in cases {
        let got: Vec<f64> = inst(&st, q, t).into_iter().map(|(_, v)| v).collect();
        assert_eq!(got, want, "{q} at {t}s");
    }
    // A shorter lookback ends the series earlier.
    let e = parse("once").unwrap();
    let opts = EvalOptions { lookback: 60 * S };
    assert_eq!(
        instant(&st, &e, 59 * S, &opts).unwrap(),
        instant(&st, &e, 0, &opts).unwrap()
    );
    assert_eq!(instant(&st, &e, 60 * S, &opts).unwrap(), Value::Vector(vec![]));
}

#[test]
fn range_query_points_sorted_series_and_gaps() {
    let st = store(&[
        (
            &[("__name__", "x"), ("i", "b")],
            &[(0, 1.0), (60, 2.0), (120, 3.0)],
        ),
        (&[("__name__", "x"), ("i", "a")], &[(120, 5.0)]),
    ]);
    let e = parse("x * 2").unwrap();
    let r = range(&st, &e, 0, 120 * S, 60 * S, &EvalOptions::default()).unwrap();
    let got: Vec<(String, Vec<(Millis, f64)>)> = r
        .iter()
        .map(|s| {
            (
                s.labels.to_string(),
                s.samples.iter().map(|p| (p.t / S, p.v)).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("{i=\"a\"}".to_string(), vec![(120, 10.0)]),
            ("{i=\"b\"}".to_string(), vec![(0, 2.0), (60, 4.0), (120, 6.0)]),
        ]
    );
}

#[test]
fn binary_matching_and_errors() {
    let st = store(&[
        (&[("__name__", "req"), ("job", "a"), ("code", "500")], &[(0, 5.0)]),
        (
            &[("__name__", "req"), ("job", "a"), ("code", "200")],
            &[(0, 95.0)],
        ),
        (&[("__name__", "tot"), ("job", "a")], &[(0, 100.0)]),
        (&[("__name__", "info"), ("job", "a"), ("team", "x")], &[(0, 1.0)]),
    ]);
    let mut got = inst(&st, "req / ignoring(code) group_left tot", 0);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("{code=\"200\", job=\"a\"}".into(), 0.95),
            ("{code=\"500\", job=\"a\"}".into(), 0.05)
        ]
    );
    assert_eq!(
        inst(&st, "tot * on(job) group_left(team) info", 0),
        vec![("{job=\"a\", team=\"x\"}".into(), 100.0)]
    );
    assert_eq!(inst(&st, "tot > bool 50", 0), vec![("{job=\"a\"}".into(), 1.0)]);
    assert_eq!(inst(&st, "tot > 50", 0), vec![("tot{job=\"a\"}".into(), 100.0)]);
    let e = parse("tot / on(job) req").unwrap();
    let err = instant(&st, &e, 0, &EvalOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "found duplicate series for the match group {job=\"a\"} on the right hand-side of the operation: \
         [{__name__=\"req\", code=\"200\", job=\"a\"}, {__name__=\"req\", code=\"500\", job=\"a\"}];\
         many-to-many matching not allowed: matching labels must be unique on one side"
    );
    let e = parse("req + on(job) tot").unwrap();
    let err = instant(&st, &e, 0, &EvalOptions::default()).unwrap_err();
    assert!(
        err.to_string().starts_with("multiple matches for labels"),
        "{err}"
    );
}

#[test]
fn absent_and_aggregations() {
    let st = store(&[
        (&[("__name__", "up"), ("job", "a")], &[(0, 1.0)]),
        (&[("__name__", "up"), ("job", "b")], &[(0, 0.0)]),
    ]);
    assert_eq!(inst(&st, "absent(up)", 0), vec![]);
    assert_eq!(
        inst(&st, "absent(nope{job=\"x\", i=~\"y\"})", 0),
        vec![("{job=\"x\"}".into(), 1.0)]
    );
    assert_eq!(inst(&st, "sum by (job) (up)", 0).len(), 2);
    assert_eq!(inst(&st, "count(up == 1)", 0), vec![("{}".into(), 1.0)]);
    assert_eq!(inst(&st, "topk(1, up)", 0), vec![("up{job=\"a\"}".into(), 1.0)]);
    assert_eq!(
        inst(
            &st,
            "label_replace(up{job=\"a\"}, \"svc\", \"s-$1\", \"job\", \"(.*)\")",
            0
        ),
        vec![("up{job=\"a\", svc=\"s-a\"}".into(), 1.0)]
    );
    assert_eq!(inst(&st, "clamp_max(up, 0.5)", 0).len(), 2);
}

#[test]
fn subquery_and_at_modifier() {
    let p: Vec<(Millis, f64)> = (0..=20).map(|i| (i * 60, i as f64 * 60.0)).collect();
    let st = store(&[(&[("__name__", "c")], &p)]);
    // rate over 1m sub-steps of a counter growing 1/s: max is 1.
    assert_eq!(
        inst(&st, "max_over_time(rate(c[2m])[5m:1m])", 900),
        vec![("{}".into(), 1.0)]
    );
    assert_eq!(inst(&st, "c @ 300", 900), vec![("c".into(), 300.0)]);
}

#[test]
fn subquery_step_alignment_and_lookback() {
    // Prometheus's subquery.test: `metric 1 2` loaded every 10 s.
    let st = store(&[(&[("__name__", "metric")], &[(0, 1.0), (10, 2.0)])]);
    // (query, t in ms, expected)
    let cases: Vec<(&str, Millis, f64)> = vec![
        ("sum_over_time(metric[50s:10s])", 10_000, 3.0),
        ("sum_over_time(metric[50s:5s])", 10_000, 4.0),
        ("sum_over_time(metric[50s:10s])", 300_000, 10.0),
        // The last sample leaves the lookback window at 5m10s.
        ("sum_over_time(metric[60s:10s])", 359_000, 2.0),
        ("sum_over_time(metric[60s:5s] offset 10s)", 359_000, 8.0),
    ];
    for (q, t, want) in cases {
        let e = parse(q).unwrap();
        match instant(&st, &e, t, &EvalOptions::default()).unwrap() {
            Value::Vector(v) if v.len() == 1 => assert_eq!(v[0].v, want, "{q} at {t}ms"),
            other => panic!("{q} at {t}ms: {other:?}"),
        }
    }
    // A top-level subquery yields its points.
    let e = parse("metric[20s:10s]").unwrap();
    let Value::Matrix(m) = instant(&st, &e, 20_000, &EvalOptions::default()).unwrap() else {
        panic!("expected a matrix");
    };
    assert_eq!(m[0].samples, pts(&[(10, 2.0), (20, 2.0)]));
}

#[test]
fn check_supported_names_the_construct() {
    let cases: Vec<(&str, &str)> = vec![
        (
            "mad_over_time(x[5m])",
            "unsupported PromQL construct: experimental function `mad_over_time`",
        ),
        (
            "histogram_count(x)",
            "unsupported PromQL construct: native-histogram function `histogram_count`",
        ),
        (
            "sort_by_label(x, \"a\")",
            "unsupported PromQL construct: experimental function `sort_by_label`",
        ),
    ];
    for (q, want) in cases {
        let e = promql_parser::parser::parse(q).unwrap();
        assert_eq!(check_supported(&e).unwrap_err().to_string(), want, "{q}");
    }
    assert!(matches!(parse("rate(x[5m]"), Err(EvalError::Parse(_))));
}

#[test]
fn referenced_metrics_finds_names_and_wildcards() {
    let e = parse("sum(rate(a_total[5m])) / on() group_left {__name__=\"b\", x=\"y\"} + c").unwrap();
    let r = referenced_metrics(&e);
    assert!(!r.all);
    assert_eq!(r.names.into_iter().collect::<Vec<_>>(), vec!["a_total", "b", "c"]);
    let e = parse("count({__name__=~\"etcd_.*\"})").unwrap();
    assert!(referenced_metrics(&e).all);
}

#[test]
fn extreme_inputs_error_or_evaluate_without_panicking() {
    let st = store(&[(&[("__name__", "x")], &[(0, 1.0), (10, 2.0)])]);
    let opts = EvalOptions::default();
    let queries = [
        "rate(x[5m])",
        "x offset -1000y",
        "x @ 100000000000",
        "max_over_time(x[1000y:1s])",
        "topk(1e300, x)",
        "round(x, 0)",
        "histogram_quantile(0.5, x)",
        "count_values(\"v\", x)",
        "x / on() group_left x",
    ];
    for q in queries {
        let e = parse(q).unwrap();
        for t in [i64::MIN / 2, -1, 0, i64::MAX / 2] {
            let _ = instant(&st, &e, t, &opts);
        }
        let _ = range(&st, &e, i64::MIN / 2, i64::MAX / 2, i64::MAX / 4, &opts);
    }
    let e = parse("max_over_time(x[1000y:1s])").unwrap();
    assert!(matches!(instant(&st, &e, 0, &opts), Err(EvalError::Runtime(m)) if m.contains("11,000 points")));
    let e = parse("x").unwrap();
    assert!(range(&st, &e, 0, 10, 0, &opts).is_err());
    assert!(range(&st, &e, 10, 0, 1, &opts).is_err());
}
