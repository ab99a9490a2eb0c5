//! One test per exposition quirk (METRICS.md §1.7 and §5) and per kind of bad
//! input, each on its own fixture in `testdata/expfmt/`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cptriage::source::expfmt::{
    parse, Issue, MetricType, ParseError, ParseReport, SampleRef, Severity, MAX_ISSUES,
};

/// An owned copy of one delivered sample.
#[derive(Clone, Debug, PartialEq)]
struct S {
    family: String,
    ty: MetricType,
    name: String,
    labels: Vec<(String, String)>,
    /// Per label: whether the value was borrowed from the input.
    borrowed: Vec<bool>,
    value: f64,
    ts: Option<i64>,
    line: usize,
}

impl S {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Got {
    report: ParseReport,
    samples: Vec<S>,
    asked: Vec<String>,
}

impl Got {
    fn errors(&self) -> Vec<&Issue> {
        self.report.issues_of(Severity::Error).collect()
    }
    fn warnings(&self) -> Vec<&Issue> {
        self.report.issues_of(Severity::Warning).collect()
    }
    fn values_of(&self, name: &str) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .collect()
    }
    fn by_label(&self, name: &str, label: &str, value: &str) -> &S {
        self.samples
            .iter()
            .find(|s| s.name == name && s.label(label) == Some(value))
            .unwrap_or_else(|| panic!("no sample {name}{{{label}=\"{value}\"}}"))
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/expfmt")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn try_run(input: &[u8], keep: &dyn Fn(&str) -> bool) -> Result<Got, ParseError> {
    let mut samples = Vec::new();
    let mut asked = Vec::new();
    let mut sink = |s: &SampleRef<'_>| {
        samples.push(S {
            family: s.family.to_string(),
            ty: s.family_type,
            name: s.name.to_string(),
            labels: s
                .labels
                .iter()
                .map(|l| (l.name.to_string(), l.value.to_string()))
                .collect(),
            borrowed: s
                .labels
                .iter()
                .map(|l| matches!(l.value, Cow::Borrowed(_)))
                .collect(),
            value: s.value,
            ts: s.timestamp_ms,
            line: s.line,
        });
    };
    let report = parse(
        input,
        &mut |f| {
            asked.push(f.to_string());
            keep(f)
        },
        &mut sink,
    )?;
    Ok(Got {
        report,
        samples,
        asked,
    })
}

#[track_caller]
fn run(input: &[u8]) -> Got {
    try_run(input, &|_| true).unwrap_or_else(|e| panic!("unexpected fatal error: {e}"))
}

#[track_caller]
fn run_fixture(name: &str) -> Got {
    run(&fixture(name))
}

#[track_caller]
fn assert_clean(g: &Got) {
    assert!(g.report.issues.is_empty(), "issues: {:#?}", g.report.issues);
}

#[track_caller]
fn only_issue(g: &Got, severity: Severity, line: usize, needle: &str) {
    let found: Vec<&Issue> = g.report.issues.iter().filter(|i| i.line == line).collect();
    assert_eq!(found.len(), 1, "issues at line {line}: {:#?}", g.report.issues);
    assert_eq!(found[0].severity, severity, "{:?}", found[0]);
    assert!(
        found[0].message.contains(needle),
        "line {line}: `{}` lacks `{needle}`",
        found[0].message
    );
}

// ---- Families and types -------------------------------------------------------

#[test]
fn type_line_decides_the_kind_never_the_name_suffix() {
    let g = run_fixture("type_not_suffix.prom");
    assert_clean(&g);
    let fam = |name: &str| {
        let s = g.samples.iter().find(|s| s.name == name).expect(name);
        (s.family.as_str(), s.ty)
    };
    // A counter whose name ends in `_count` is its own family (METRICS.md §1.7).
    assert_eq!(
        fam("apiserver_admission_webhook_rejection_count"),
        ("apiserver_admission_webhook_rejection_count", MetricType::Counter)
    );
    assert_eq!(
        fam("apiserver_admission_webhook_rejection"),
        ("apiserver_admission_webhook_rejection", MetricType::Gauge)
    );
    // Gauges named `_total`, counters without `_total`.
    assert_eq!(
        fam("etcd_server_proposals_committed_total"),
        ("etcd_server_proposals_committed_total", MetricType::Gauge)
    );
    assert_eq!(
        fam("authentication_attempts"),
        ("authentication_attempts", MetricType::Counter)
    );
    // Declared histogram and summary: children belong to the base family.
    for child in ["_bucket", "_sum", "_count"] {
        let name = format!("etcd_disk_wal_fsync_duration_seconds{child}");
        assert_eq!(
            fam(&name),
            ("etcd_disk_wal_fsync_duration_seconds", MetricType::Histogram)
        );
    }
    for name in ["go_gc_duration_seconds", "go_gc_duration_seconds_sum"] {
        assert_eq!(fam(name), ("go_gc_duration_seconds", MetricType::Summary));
    }
    // Without a TYPE line the suffix means nothing: each name is its own family.
    assert_eq!(fam("untyped_bucket"), ("untyped_bucket", MetricType::Untyped));
    assert_eq!(fam("untyped_count"), ("untyped_count", MetricType::Untyped));
    // `keep` sees each family once, by its base name.
    assert_eq!(
        g.asked,
        [
            "apiserver_admission_webhook_rejection_count",
            "apiserver_admission_webhook_rejection",
            "etcd_server_proposals_committed_total",
            "authentication_attempts",
            "etcd_disk_wal_fsync_duration_seconds",
            "go_gc_duration_seconds",
            "untyped_bucket",
            "untyped_count",
        ]
    );
    assert_eq!(g.report.families.len(), 8);
    assert_eq!(g.report.samples_kept, 14);
}

#[test]
fn help_is_unescaped_and_kubernetes_markers_are_readable() {
    let g = run_fixture("help_escapes.prom");
    assert_clean(&g);
    let f = g.report.family("apiserver_storage_objects").expect("family");
    assert_eq!(f.stability(), Some("STABLE"));
    assert_eq!(f.deprecated_since(), Some("1.34.0"));
    assert!(f
        .help
        .as_deref()
        .is_some_and(|h| h.contains("[DEPRECATED, consider using apiserver_resource_objects")));

    let f = g
        .report
        .family("job_controller_pod_failures_handled_by_failure_policy_total")
        .expect("family");
    let help = f.help.as_deref().expect("help");
    assert!(help.starts_with("[ALPHA] `The number of failed Pods"), "{help}");
    assert!(help.contains("with\n\t\t\trespect"), "{help:?}");
    assert!(help.contains("\"FailJob\", \"Ignore\""), "{help:?}");
    assert_eq!(f.stability(), Some("ALPHA"));
    assert_eq!(f.deprecated_since(), None);

    let f = g.report.family("path_help").expect("family");
    assert_eq!(f.help.as_deref(), Some("A backslash \\ and a C:\\dir path"));

    // etcd metrics carry no stability prefix.
    let f = g.report.family("etcd_server_has_leader").expect("family");
    assert_eq!(f.stability(), None);
    assert_eq!(g.values_of("etcd_server_has_leader"), [1.0]);
}

#[test]
fn invalid_help_escape_is_a_warning_and_kept_literally() {
    let g = run(b"# HELP x a \\t tab\n# TYPE x gauge\nx 1\n");
    only_issue(
        &g,
        Severity::Warning,
        1,
        "invalid escape sequence in the HELP text of `x`",
    );
    assert_eq!(
        g.report.family("x").and_then(|f| f.help.as_deref()),
        Some("a \\t tab")
    );
    assert_eq!(g.values_of("x"), [1.0]);
}

// ---- Values -------------------------------------------------------------------

#[test]
fn go_float_values_nan_infinities_and_exponents() {
    let g = run_fixture("values.prom");
    assert_clean(&g);
    let v = |k: &str| g.by_label("v", "k", k).value;
    assert!(v("nan").is_nan());
    assert_eq!(v("pinf"), f64::INFINITY);
    assert_eq!(v("ninf"), f64::NEG_INFINITY);
    assert_eq!(v("inf"), f64::INFINITY);
    assert_eq!(v("exp_big"), 1_000_000.0);
    assert_eq!(v("exp_small"), 2.5e-5);
    assert_eq!(v("exp_upper"), 1500.0);
    assert_eq!(v("zero"), 0.0);
    assert_eq!(v("big_int"), 9_007_199_254_740_993_f64);
    assert_eq!(v("decimal"), 0.005);
}

#[test]
fn minus_one_sentinel_is_kept_as_a_value() {
    let g = run_fixture("help_escapes.prom");
    let s = g.by_label(
        "apiserver_storage_objects",
        "resource",
        "leases.coordination.k8s.io",
    );
    assert_eq!(s.value, -1.0);
    assert_eq!(s.ty, MetricType::Gauge);
}

#[test]
fn le_text_is_kept_as_written() {
    let g = run_fixture("le_spelling.prom");
    assert_clean(&g);
    let les: Vec<(&str, &str)> = g
        .samples
        .iter()
        .filter(|s| s.name.ends_with("_bucket"))
        .map(|s| (s.label("verb").unwrap_or(""), s.label("le").unwrap_or("")))
        .collect();
    assert_eq!(
        les,
        [
            ("GET", "0.005"),
            ("GET", "1"),
            ("GET", "1e+06"),
            ("GET", "+Inf"),
            ("LIST", "0.005"),
            ("LIST", "1.0"),
            ("LIST", "+Inf"),
        ]
    );
    assert!(g
        .samples
        .iter()
        .all(|s| s.family == "apiserver_request_duration_seconds" && s.ty == MetricType::Histogram));
}

// ---- Families: empty, duplicate series ------------------------------------------

#[test]
fn empty_family_is_listed_with_zero_samples() {
    let g = run_fixture("empty_family.prom");
    assert_clean(&g);
    let names: Vec<&str> = g.report.families.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "apiserver_flowcontrol_rejected_requests_total",
            "apiserver_flowcontrol_dispatched_requests_total",
            "apiserver_admission_webhook_request_total",
        ]
    );
    let samples = |n: &str| g.report.family(n).map(|f| f.samples);
    assert_eq!(samples("apiserver_flowcontrol_rejected_requests_total"), Some(0));
    assert_eq!(
        samples("apiserver_flowcontrol_dispatched_requests_total"),
        Some(1)
    );
    assert_eq!(samples("apiserver_admission_webhook_request_total"), Some(0));
    assert_eq!(g.report.family("never_declared"), None);
}

#[test]
fn duplicate_series_warns_and_delivers_both_in_order() {
    let g = run_fixture("duplicate_series.prom");
    assert!(g.errors().is_empty());
    assert_eq!(g.warnings().len(), 2, "{:#?}", g.report.issues);
    only_issue(
        &g,
        Severity::Warning,
        3,
        "duplicate series `etcd_server_has_leader`",
    );
    only_issue(&g, Severity::Warning, 3, "also at line 2");
    // Same label set in another order is the same series.
    only_issue(
        &g,
        Severity::Warning,
        7,
        "duplicate series `apiserver_request_total{verb=\"GET\",code=\"200\"}` (also at line 5)",
    );
    // The sink sees both; the later one comes last, so a store keeps it.
    assert_eq!(g.values_of("etcd_server_has_leader"), [1.0, 0.0]);
    assert_eq!(g.values_of("apiserver_request_total"), [5.0, 1.0, 7.0]);
}

// ---- Label syntax ------------------------------------------------------------------

#[test]
fn label_values_with_separators_quotes_and_newlines() {
    let g = run_fixture("label_values.prom");
    assert_clean(&g);
    let s = &g.samples[0];
    assert_eq!(
        s.labels,
        [
            ("path", "/api/v1/namespaces/{namespace}/pods"),
            ("q", "a,b=c"),
            ("brace", "}{"),
            ("quote", "say \"hi\""),
            ("nl", "line1\nline2"),
            ("bs", "C:\\dir"),
            ("empty", ""),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert_eq!(s.value, 1.0);
    // Values without escapes are borrowed from the input, the others owned.
    assert_eq!(s.borrowed, [true, true, true, false, false, false, true]);
    assert_eq!(g.samples[1].borrowed, [true]);
    let s = &g.samples[2];
    assert_eq!(
        s.label("contentType"),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    assert_eq!(s.value, 3.0);
}

#[test]
fn trailing_comma_in_label_set() {
    let g = run_fixture("trailing_comma.prom");
    assert_clean(&g);
    assert_eq!(g.samples[0].labels.len(), 2);
    assert_eq!(g.samples[1].labels, [("a".to_string(), "3".to_string())]);
    assert!(g.samples[2].labels.is_empty());
    assert_eq!(g.values_of("tc"), [1.0, 2.0, 3.0]);
}

#[test]
fn tabs_and_runs_of_blanks_between_tokens() {
    let g = run_fixture("blanks.prom");
    assert_clean(&g);
    assert_eq!(g.values_of("blanks"), [7.0, 8.0, 9.0]);
    let s = g.by_label("blanks", "a", "3");
    assert_eq!(s.label("b"), Some("x"));
    assert_eq!(s.ts, Some(1_700_000_000_000));
    assert_eq!(g.values_of("blanks2"), [1.0]);
    assert_eq!(
        g.report.family("blanks2").map(|f| f.metric_type),
        Some(MetricType::Gauge)
    );
}

#[test]
fn blank_lines_and_comments_are_ignored() {
    let g = run_fixture("comments.prom");
    assert_clean(&g);
    assert_eq!(g.report.families, [("commented".to_string(), MetricType::Gauge)]);
    assert_eq!(g.values_of("commented"), [1.0, 2.0]);
    assert_eq!(g.samples[0].line, 9);
    assert_eq!(g.samples[1].line, 11);
    assert_eq!(g.report.lines, 11);
}

#[test]
fn timestamps_are_int64_milliseconds() {
    let g = run_fixture("timestamps.prom");
    assert_clean(&g);
    let ts: Vec<Option<i64>> = g.samples.iter().map(|s| s.ts).collect();
    assert_eq!(ts, [Some(1_700_000_000_000), Some(-1), None, Some(i64::MAX)]);
    let g = run(b"ts 1 1.7e12\nts2 1 17000000000000000000000\nok 1\nok2 2\n");
    only_issue(&g, Severity::Error, 1, "invalid timestamp `1.7e12`");
    only_issue(&g, Severity::Error, 2, "invalid timestamp");
    assert_eq!(g.report.samples_kept, 2);
}

#[test]
fn quoted_metric_names_inside_braces_are_accepted() {
    let g = run_fixture("quoted_names.prom");
    assert_clean(&g);
    let names: Vec<(&str, &str, MetricType)> = g
        .samples
        .iter()
        .map(|s| (s.family.as_str(), s.name.as_str(), s.ty))
        .collect();
    assert_eq!(
        names,
        [
            ("my.dotted.metric", "my.dotted.metric", MetricType::Counter),
            ("my.dotted.metric", "my.dotted.metric", MetricType::Counter),
            ("another.metric", "another.metric", MetricType::Untyped),
            ("plain", "plain", MetricType::Untyped),
        ]
    );
    assert_eq!(g.samples[0].labels, [("a".to_string(), "b".to_string())]);
    assert_eq!(g.samples[1].label("label.with.dots"), Some("v"));
    assert_eq!(g.samples[3].label("quoted.label"), Some("q"));
    assert_eq!(
        g.report
            .family("my.dotted.metric")
            .and_then(|f| f.help.as_deref()),
        Some("UTF-8 metric name (text format 1.0.0)")
    );
}

// ---- Framing: line ends, last line, BOM -----------------------------------------------

#[test]
fn crlf_line_endings() {
    let g = run_fixture("crlf.prom");
    assert_clean(&g);
    assert_eq!(g.values_of("crlf"), [1.0, 2.0, 3.0]);
    assert_eq!(g.samples[2].ts, Some(1_700_000_000_000));
    assert_eq!(g.samples[2].line, 6);
    assert_eq!(
        g.report.family("crlf").and_then(|f| f.help.as_deref()),
        Some("A CRLF file")
    );
}

#[test]
fn final_line_without_newline() {
    let g = run_fixture("no_final_newline.prom");
    assert_clean(&g);
    assert_eq!(g.values_of("nfn"), [1.0, 2.0]);
    assert_eq!(g.report.lines, 3);
}

#[test]
fn utf8_byte_order_mark_is_skipped() {
    let g = run_fixture("bom.prom");
    assert_clean(&g);
    assert_eq!(g.report.families, [("bom".to_string(), MetricType::Gauge)]);
    assert_eq!(
        g.report.family("bom").and_then(|f| f.help.as_deref()),
        Some("A file with a byte-order mark")
    );
    assert_eq!(g.values_of("bom"), [1.0]);
}

// ---- Bad lines: reported, dropped, parse goes on ------------------------------------------

#[test]
fn truncated_last_line_is_an_error_and_earlier_samples_survive() {
    let g = run_fixture("truncated.prom");
    only_issue(&g, Severity::Error, 4, "unterminated label value");
    assert_eq!(g.report.issues.len(), 1);
    assert_eq!(g.values_of("tr"), [1.0, 2.0]);
    assert_eq!(g.report.lines, 4);
    // Truncated anywhere in the line.
    for cut in ["tr{", "tr{a", "tr{a=", "tr{a=\"x\"", "tr{a=\"x\"}", "tr{a=\"x\\"] {
        let input = format!("# TYPE tr gauge\ntr 1\ntr2 2\n{cut}");
        let g = run(input.as_bytes());
        assert_eq!(g.errors().len(), 1, "{cut}: {:#?}", g.report.issues);
        assert_eq!(g.errors()[0].line, 4, "{cut}");
        assert_eq!(g.report.samples_kept, 2, "{cut}");
    }
}

#[test]
fn bad_escape_in_label_value_drops_the_line() {
    let g = run_fixture("bad_escape.prom");
    only_issue(
        &g,
        Severity::Error,
        3,
        "invalid escape sequence `\\q` in label value",
    );
    assert_eq!(g.report.issues.len(), 1);
    assert_eq!(g.values_of("be"), [1.0, 3.0]);
}

#[test]
fn invalid_utf8_in_label_value_drops_the_line() {
    let g = run_fixture("invalid_utf8.prom");
    only_issue(&g, Severity::Error, 3, "invalid UTF-8 in label value");
    assert_eq!(g.report.issues.len(), 1);
    assert_eq!(g.values_of("iu"), [1.0, 3.0]);
    assert_eq!(g.samples[1].label("a"), Some("café"));
}

#[test]
fn ten_megabyte_lines_take_linear_time() {
    const MB10: usize = 10 * 1024 * 1024;
    let budget = Duration::from_secs(20);
    // A valid sample with a 10 MB label value.
    let mut input = b"# TYPE big gauge\nbig{v=\"".to_vec();
    input.resize(input.len() + MB10, b'x');
    input.extend_from_slice(b"\"} 5\nafter 1\n");
    let t = Instant::now();
    let g = run(&input);
    assert!(t.elapsed() < budget, "took {:?}", t.elapsed());
    assert_clean(&g);
    assert_eq!(g.samples[0].labels[0].1.len(), MB10);
    assert_eq!(g.values_of("after"), [1.0]);

    // 10 MB of escapes, then 10 MB of unterminated label text: errors, short messages.
    for body in [&b"\\\\"[..], b"\\q", b"a"] {
        let mut input = b"ok 1\nok2 2\nbad{v=\"".to_vec();
        while input.len() < MB10 {
            input.extend_from_slice(body);
        }
        input.extend_from_slice(b"\nafter 3\n");
        let t = Instant::now();
        let g = run(&input);
        assert!(t.elapsed() < budget, "took {:?}", t.elapsed());
        assert_eq!(g.errors().len(), 1, "{:#?}", g.report.issues);
        assert_eq!(g.errors()[0].line, 3);
        assert!(g.errors()[0].message.len() < 200);
        assert_eq!(g.values_of("after"), [3.0]);
    }

    // A 10 MB metric name and a 10 MB run of label pairs.
    let mut name = vec![b'n'; MB10];
    name.extend_from_slice(b" 1\nok 1\n");
    let g = run(&name);
    assert_clean(&g);
    assert_eq!(g.samples[0].name.len(), MB10);
    let mut pairs = b"ok 1\nok2 2\nmany{".to_vec();
    let mut k = 0;
    while pairs.len() < MB10 {
        pairs.extend_from_slice(format!("l{k}=\"v\",").as_bytes());
        k += 1;
    }
    pairs.extend_from_slice(b"} 1\n");
    let t = Instant::now();
    let g = run(&pairs);
    assert!(t.elapsed() < budget, "took {:?}", t.elapsed());
    assert_clean(&g);
    assert_eq!(g.samples[2].labels.len(), k);
}

#[test]
fn second_type_and_late_type_warn_and_first_type_wins() {
    let g = run_fixture("second_type.prom");
    assert!(g.errors().is_empty());
    only_issue(
        &g,
        Severity::Warning,
        3,
        "second TYPE line for family `st` (`gauge`, first at line 2); the first TYPE wins",
    );
    only_issue(
        &g,
        Severity::Warning,
        7,
        "TYPE line for family `late` comes after its samples",
    );
    assert_eq!(g.by_label_free("st").ty, MetricType::Counter);
    assert_eq!(g.by_label_free("late").ty, MetricType::Untyped);
    assert_eq!(
        g.report.family("late").map(|f| f.metric_type),
        Some(MetricType::Untyped)
    );
    let g = run(b"# HELP d one\n# HELP d two\nd 1\n");
    only_issue(&g, Severity::Warning, 2, "second HELP line for family `d`");
    assert_eq!(g.report.family("d").and_then(|f| f.help.as_deref()), Some("one"));
}

impl Got {
    fn by_label_free(&self, name: &str) -> &S {
        self.samples
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no sample {name}"))
    }
}

#[test]
fn histogram_problems_warn_and_keep_the_samples() {
    let g = run_fixture("histogram_problems.prom");
    only_issue(
        &g,
        Severity::Warning,
        3,
        "histogram series `h{s=\"noinf\"}` has no `le=\"+Inf\"` bucket",
    );
    only_issue(
        &g,
        Severity::Warning,
        8,
        "histogram series `h{s=\"order\"}` has buckets out of increasing `le` order",
    );
    only_issue(
        &g,
        Severity::Warning,
        13,
        "histogram series `h{s=\"decrease\"}` has decreasing cumulative bucket counts",
    );
    only_issue(
        &g,
        Severity::Error,
        21,
        "`h_bucket{s=\"nole\"}` has no `le` label",
    );
    only_issue(&g, Severity::Error, 22, "has a non-numeric `le` label");
    assert_eq!(g.report.issues.len(), 5, "{:#?}", g.report.issues);
    // Every well-formed line, including those of problem series, is delivered.
    assert_eq!(g.report.samples_kept, 18);
    assert_eq!(g.report.family("h").map(|f| f.samples), Some(18));
}

#[test]
fn histogram_without_inf_is_reported_at_end_of_input_too() {
    let g = run(b"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"2\"} 1");
    only_issue(&g, Severity::Warning, 2, "`h` has no `le=\"+Inf\"` bucket");
    assert_eq!(g.report.samples_kept, 2);
}

#[test]
fn unknown_type_word_is_untyped_with_a_warning() {
    let g = run_fixture("unknown_type.prom");
    only_issue(
        &g,
        Severity::Warning,
        2,
        "unknown metric type `info` for family `info_metric`; treated as untyped",
    );
    only_issue(&g, Severity::Warning, 4, "unknown metric type `countr`");
    assert_eq!(g.report.issues.len(), 2);
    assert!(g.samples.iter().all(|s| s.ty == MetricType::Untyped));
    assert_eq!(g.samples.len(), 2);
}

#[test]
fn nan_or_negative_counter_warns_and_keeps_the_value() {
    let g = run_fixture("counter_nan.prom");
    only_issue(&g, Severity::Warning, 2, "counter `c_nan{a=\"1\"}` is NaN");
    only_issue(&g, Severity::Warning, 3, "counter `c_nan{a=\"2\"}` is negative");
    // NaN in gauges and summary quantiles (no observations) is normal.
    assert_eq!(g.report.issues.len(), 2, "{:#?}", g.report.issues);
    let c = g.values_of("c_nan");
    assert!(c[0].is_nan());
    assert_eq!(c[1..], [-3.0, 4.0]);
    assert!(g.values_of("g_nan")[0].is_nan());
    assert!(g.values_of("s")[0].is_nan());
}

#[test]
fn summary_quantile_must_be_numeric() {
    let g = run(b"# TYPE s summary\ns{quantile=\"0.5\"} 1\ns 2\ns{quantile=\"p99\"} 3\ns_count 4\n");
    only_issue(&g, Severity::Error, 3, "`s` has no `quantile` label");
    only_issue(&g, Severity::Error, 4, "non-numeric `quantile` label");
    assert_eq!(g.values_of("s"), [1.0]);
    assert_eq!(g.values_of("s_count"), [4.0]);
}

#[test]
fn other_malformed_lines_are_errors_naming_the_construct() {
    let cases: [(&[u8], &str); 8] = [
        (b"1abc 1", "expected a metric name"),
        (b"m{1a=\"x\"} 1", "invalid label name"),
        (b"m{a \"x\"} 1", "expected `=` after label name `a`"),
        (b"m{a=x} 1", "expected `\"` to open the value of label `a`"),
        (b"m{a=\"x\" b=\"y\"} 1", "expected `,` or `}` after label `a`"),
        (b"m{a=\"1\",a=\"2\"} 1", "duplicate label `a`"),
        (b"m fast", "invalid value `fast` for `m`"),
        (b"m", "missing value for `m`"),
    ];
    for (line, needle) in cases {
        let mut input = b"ok 1\nok2 2\nok3 3\n".to_vec();
        input.extend_from_slice(line);
        input.extend_from_slice(b"\nafter 4\n");
        let g = run(&input);
        only_issue(&g, Severity::Error, 4, needle);
        assert_eq!(g.report.issues.len(), 1, "{needle}");
        assert_eq!(g.report.samples_kept, 4, "{needle}");
    }
    let g = run(b"# TYPE\nok 1\nok2 1\n");
    only_issue(&g, Severity::Warning, 1, "malformed HELP or TYPE line");
}

// ---- Whole-input verdicts ---------------------------------------------------------

#[test]
fn nul_bytes_are_fatal_binary_data() {
    let err = try_run(&fixture("binary_nul.prom"), &|_| true).err();
    assert_eq!(
        err,
        Some(ParseError {
            line: 3,
            message: "not a Prometheus text exposition (binary data at line 3)".to_string()
        })
    );
    // gzip and protobuf bodies start with binary bytes.
    let gz = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff];
    let err = try_run(&gz, &|_| true).err().expect("fatal");
    assert_eq!(err.line, 1);
    assert!(err.message.contains("binary data at line 1"));
}

#[test]
fn mostly_unreadable_input_is_fatal() {
    let err = try_run(&fixture("mostly_garbage.txt"), &|_| true)
        .err()
        .expect("fatal");
    assert_eq!(err.line, 1);
    assert_eq!(
        err.message,
        "not a Prometheus text exposition (4 of the first 5 non-blank lines are unreadable, first at line 1)"
    );
    // High bytes without NUL: binary, named as such.
    let mut junk = Vec::new();
    for i in 0..4000u32 {
        junk.push((i.wrapping_mul(2_654_435_761) >> 24) as u8 | 0x80);
        if i % 50 == 49 {
            junk.push(b'\n');
        }
    }
    let err = try_run(&junk, &|_| true).err().expect("fatal");
    assert!(err.message.contains("binary data at line 1"), "{}", err.message);
    // Exactly half unreadable is still an exposition.
    let g = run(b"ok 1\n<html>\n");
    assert_eq!(g.errors().len(), 1);
}

#[test]
fn empty_input_is_an_empty_exposition() {
    for input in [&b""[..], b"\n\n", b"\xef\xbb\xbf", b"# just a comment\n"] {
        let g = run(input);
        assert_clean(&g);
        assert!(g.report.families.is_empty());
        assert_eq!(g.report.samples_kept, 0);
    }
}

#[test]
fn issues_are_capped() {
    let mut input = Vec::new();
    for k in 0..(MAX_ISSUES + 500) {
        input.extend_from_slice(format!("ok{k} 1\ndup 1\n").as_bytes());
    }
    let g = run(&input);
    assert_eq!(g.report.issues.len(), MAX_ISSUES);
    assert_eq!(g.report.issues_suppressed, 499);
    assert_eq!(g.report.samples_kept, 2 * (MAX_ISSUES + 500));
}

// ---- keep filter ---------------------------------------------------------------

#[test]
fn refused_families_are_skipped_and_counted() {
    let input = fixture("skipped_family.prom");
    let g = try_run(&input, &|f| f != "skip_me").expect("parses");
    assert_clean(&g);
    assert_eq!(g.asked, ["keep_me", "skip_me", "untyped_after"]);
    let got: Vec<(&str, f64)> = g.samples.iter().map(|s| (s.name.as_str(), s.value)).collect();
    assert_eq!(got, [("keep_me", 1.0), ("untyped_after", 5.0), ("keep_me", 2.0)]);
    assert_eq!(g.report.samples_kept, 3);
    // Skipped lines are counted, not validated (the broken bucket is among them).
    assert_eq!(g.report.samples_skipped, 6);
    let f = g.report.family("skip_me").expect("family");
    assert!(!f.kept);
    assert_eq!(f.samples, 6);
    assert_eq!(f.metric_type, MetricType::Histogram);
    // Kept, the same file reports the broken bucket.
    let g = run(&input);
    only_issue(&g, Severity::Error, 8, "unterminated label value");
}

#[test]
fn refused_family_does_not_swallow_a_counter_named_like_its_child() {
    let input = b"# TYPE a counter\na 1\na_count 2\n# TYPE b histogram\nb_bucket{le=\"+Inf\"} 1\nb_count 1\nb_count_x 3\n";
    let g = try_run(input, &|f| f != "a" && f != "b").expect("parses");
    assert_eq!(g.asked, ["a", "a_count", "b", "b_count_x"]);
    let got: Vec<(&str, &str, f64)> = g
        .samples
        .iter()
        .map(|s| (s.family.as_str(), s.name.as_str(), s.value))
        .collect();
    assert_eq!(
        got,
        [("a_count", "a_count", 2.0), ("b_count_x", "b_count_x", 3.0)]
    );
    assert_eq!(g.report.samples_skipped, 3);
}

#[test]
fn repeated_histogram_series_is_a_duplicate() {
    let g = run(b"# TYPE h histogram\n\
h_bucket{a=\"1\",le=\"1\"} 1\nh_bucket{a=\"1\",le=\"+Inf\"} 2\nh_sum{a=\"1\"} 1\nh_count{a=\"1\"} 2\n\
h_bucket{a=\"2\",le=\"+Inf\"} 2\n\
h_bucket{le=\"1\",a=\"1\"} 1\nh_bucket{a=\"1\",le=\"+Inf\"} 2\n");
    only_issue(
        &g,
        Severity::Warning,
        7,
        "duplicate histogram series `h{a=\"1\"}` (buckets also from line 2); the later values win",
    );
    assert_eq!(g.report.issues.len(), 1, "{:#?}", g.report.issues);
    assert_eq!(g.report.samples_kept, 7);
    assert_eq!(g.by_label("h_bucket", "le", "1").label("a"), Some("1"));
}

/// Deterministic xorshift generator for the mutation test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn random_mutations_never_panic_and_report_consistently() {
    const PIECES: &[&[u8]] = &[
        b"\"",
        b"\\",
        b"{",
        b"}",
        b",",
        b"=",
        b"\n",
        b" ",
        b"\t",
        b"\r",
        b"\xff",
        b"\xc3",
        b"\x00",
        b"le=\"",
        b"\"}",
        b"# TYPE h histogram\n",
        b"# TYPE h_bucket counter\n",
        b"# HELP ",
        b"NaN",
        b"+Inf",
        b"1e+06",
        b"_bucket",
        b"_count",
        b"{\"q.name\"",
        b"\\n",
        b"\\q",
    ];
    let bases = [
        fixture("histogram_problems.prom"),
        fixture("label_values.prom"),
        fixture("type_not_suffix.prom"),
        fixture("le_spelling.prom"),
        fixture("quoted_names.prom"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut fatal = 0;
    for round in 0..3000 {
        let mut input = bases[round % bases.len()].clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(input.len() + 1);
            match rng.below(3) {
                0 => {
                    let piece = PIECES[rng.below(PIECES.len())];
                    input.splice(at..at, piece.iter().copied());
                }
                1 => {
                    let end = (at + rng.below(12)).min(input.len());
                    input.drain(at..end);
                }
                _ => input.truncate(at),
            }
        }
        let keep_all = rng.below(2) == 0;
        match try_run(&input, &|f| keep_all || f.len() % 2 == 0) {
            Err(e) => {
                assert!(e.message.starts_with("not a Prometheus text exposition"), "{e}");
                fatal += 1;
            }
            Ok(g) => {
                let r = &g.report;
                assert_eq!(r.samples_kept, g.samples.len(), "round {round}");
                assert!(
                    r.issues.iter().all(|i| (1..=r.lines.max(1)).contains(&i.line)),
                    "round {round}"
                );
                assert!(
                    g.samples.iter().all(|s| (1..=r.lines).contains(&s.line)),
                    "round {round}"
                );
                assert_eq!(r.families.len(), r.family_info.len());
                let per_family: usize = r.family_info.iter().map(|f| f.samples).sum();
                assert_eq!(per_family, r.samples_kept + r.samples_skipped, "round {round}");
            }
        }
    }
    assert!(fatal < 3000 / 4, "{fatal} fatal verdicts");
}
