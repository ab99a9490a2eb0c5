//! The parser against the 32 real `/metrics` captures in `testdata/realdata/`:
//! no Error issues, and the same samples as the `prometheus-parse` crate wherever
//! that crate can be trusted.

use crate::support::realcap;
use std::collections::{BTreeMap, HashMap, HashSet};

use cptriage::source::expfmt::{parse, MetricType, ParseReport, SampleRef, Severity};

fn realdata() -> Vec<(String, std::path::PathBuf)> {
    realcap::files()
}

/// An owned copy of one delivered sample.
#[derive(Clone, Debug, PartialEq)]
struct Owned {
    family: String,
    family_type: MetricType,
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
    line: usize,
}

impl Owned {
    fn of(s: &SampleRef<'_>) -> Self {
        Owned {
            family: s.family.to_string(),
            family_type: s.family_type,
            name: s.name.to_string(),
            labels: s
                .labels
                .iter()
                .map(|l| (l.name.to_string(), l.value.to_string()))
                .collect(),
            value: s.value,
            line: s.line,
        }
    }
}

fn parse_all(bytes: &[u8], keep: &mut dyn FnMut(&str) -> bool) -> (ParseReport, Vec<Owned>) {
    let mut out = Vec::new();
    let report = parse(bytes, keep, &mut |s: &SampleRef<'_>| out.push(Owned::of(s)))
        .unwrap_or_else(|e| panic!("fatal parse error: {e}"));
    (report, out)
}

/// Identity used to match samples across the two parsers: name, labels other
/// than `le`/`quantile`, and the numeric bound (prometheus-parse keeps `le` and
/// `quantile` only as numbers).
type Key = (String, String, Option<u64>);

fn key(name: &str, labels: &BTreeMap<String, String>, bound: Option<f64>) -> Key {
    let mut joined = String::new();
    for (k, v) in labels {
        joined.push_str(k);
        joined.push('\u{1f}');
        joined.push_str(v);
        joined.push('\u{1e}');
    }
    (name.to_string(), joined, bound.map(f64::to_bits))
}

/// Whether prometheus-parse reads this sample correctly. It splits the label
/// text on `,` and `=` without honouring quotes, stops the label set at the
/// first `}`, never unescapes, trims every `"` from the ends of a value, and
/// only matches `\w+` metric names (no `:`). Any sample touching one of these
/// is excluded from the value comparison.
fn trusted(s: &Owned) -> bool {
    !s.name.contains(':')
        && s.labels
            .values()
            .all(|v| !v.contains([',', '=', '}', '\\', '"', '\n']))
}

fn our_key(s: &Owned) -> Key {
    let bound_label = match s.family_type {
        MetricType::Histogram if s.name.ends_with("_bucket") => Some("le"),
        MetricType::Summary if s.name == s.family => Some("quantile"),
        _ => None,
    };
    let mut labels = s.labels.clone();
    let bound = bound_label.and_then(|b| labels.remove(b)).map(|v| {
        v.parse::<f64>()
            .unwrap_or_else(|_| panic!("bad bound `{v}` in {s:?}"))
    });
    key(&s.name, &labels, bound)
}

/// prometheus-parse's samples, flattened back to one entry per exposition line.
fn theirs(text: &str) -> HashMap<Key, Vec<f64>> {
    use prometheus_parse::{Scrape, Value};
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = Scrape::parse(lines).expect("prometheus-parse reads from memory");
    let mut out: HashMap<Key, Vec<f64>> = HashMap::new();
    for s in scrape.samples {
        let labels: BTreeMap<String, String> = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        match &s.value {
            Value::Histogram(buckets) => {
                let name = format!("{}_bucket", s.metric);
                for b in buckets {
                    let k = key(&name, &labels, Some(b.less_than));
                    out.entry(k).or_default().push(b.count);
                }
            }
            Value::Summary(qs) => {
                for q in qs {
                    let k = key(&s.metric, &labels, Some(q.quantile));
                    out.entry(k).or_default().push(q.count);
                }
            }
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => {
                out.entry(key(&s.metric, &labels, None)).or_default().push(*v);
            }
        }
    }
    out
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// Line and message start of each warning expected in the hand-edited capture.
fn expected_v1_25_3_warnings() -> Vec<(usize, String)> {
    let term = "apiserver_request_terminations_total";
    let depr = "apiserver_requested_deprecated_apis";
    let help = |f: &str| format!("second HELP line for family `{f}`");
    let ty = |f: &str| format!("second TYPE line for family `{f}`");
    let lines = [
        (19174, help(term)),
        (19175, ty(term)),
        (19176, format!("duplicate series `{term}{{code=\"504\",component=\"apiserver\",group=\"\",resource=\"\",scope=\"\",subresource=\"/metrics\",verb=\"GET\",version=\"\"}}`")),
        (19177, help(depr)),
        (19178, ty(depr)),
        (19179, format!("duplicate series `{depr}{{group=\"\",removed_release=\"\",resource=\"componentstatuses\",subresource=\"\",version=\"v1\"}}`")),
    ];
    lines.to_vec()
}

#[test]
fn all_32_captures_are_present() {
    assert_eq!(
        realdata().len(),
        32,
        "expected the 32 captures of testdata/realdata"
    );
}

#[test]
fn apiserver_captures_parse_cleanly_and_match_prometheus_parse() {
    let compared = check_against_prometheus_parse(|f| f.starts_with("apiserver_"), 18);
    assert!(compared > 300_000, "compared only {compared} samples");
}

#[test]
fn etcd_and_openshift_captures_parse_cleanly_and_match_prometheus_parse() {
    let compared = check_against_prometheus_parse(|f| !f.starts_with("apiserver_"), 14);
    assert!(compared > 20_000, "compared only {compared} samples");
}

/// Parses the captures whose file name passes `pick` (expecting `count` of
/// them) with both parsers; returns how many samples were compared by value.
fn check_against_prometheus_parse(pick: impl Fn(&str) -> bool, count: usize) -> usize {
    let files: Vec<(String, std::path::PathBuf)> = realdata().into_iter().filter(|(n, _)| pick(n)).collect();
    assert_eq!(files.len(), count);
    let mut compared = 0usize;
    for (file, path) in &files {
        let bytes = realcap::read_path(path);
        let (report, ours) = parse_all(&bytes, &mut |_| true);

        let errors: Vec<_> = report.issues_of(Severity::Error).collect();
        assert!(errors.is_empty(), "{file}: error issues {errors:?}");
        // One capture had families appended by hand ("### Metrics added
        // manually ###"), repeating `apiserver_request_terminations_total` and
        // others: the repeats must be flagged, and nothing else anywhere.
        let warnings: Vec<(usize, String)> = report
            .issues
            .iter()
            .map(|i| (i.line, i.message.split(" (").next().unwrap_or("").to_string()))
            .collect();
        if file == "apiserver_datadog_v1.25.3.prom" {
            assert_eq!(warnings, expected_v1_25_3_warnings(), "{file}");
        } else {
            assert!(warnings.is_empty(), "{file}: {:#?}", report.issues);
        }
        assert_eq!(report.samples_kept, ours.len(), "{file}");
        assert_eq!(report.samples_skipped, 0, "{file}");
        let sample_lines = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty() && l[0] != b'#')
            .count();
        assert_eq!(ours.len(), sample_lines, "{file}: one sample per sample line");
        let per_family: usize = report.family_info.iter().map(|f| f.samples).sum();
        assert_eq!(per_family, ours.len(), "{file}: family sample counts");

        let text = std::str::from_utf8(&bytes).expect("captures are UTF-8");
        let mut their = theirs(text);
        let their_total: usize = their.values().map(Vec::len).sum();
        let mut untrusted = 0usize;
        let mut matched = 0usize;
        for s in &ours {
            if !trusted(s) {
                untrusted += 1;
                continue;
            }
            let k = our_key(s);
            let v = their
                .get_mut(&k)
                .and_then(|vs| vs.pop())
                .unwrap_or_else(|| panic!("{file}:{}: prometheus-parse lacks {s:?}", s.line));
            assert!(
                same(v, s.value),
                "{file}:{}: value {} vs prometheus-parse {v}",
                s.line,
                s.value
            );
            matched += 1;
        }
        let leftover: usize = their.values().map(Vec::len).sum();
        assert_eq!(their_total, matched + leftover, "{file}");
        assert!(
            leftover <= untrusted,
            "{file}: prometheus-parse has {leftover} samples we do not, only {untrusted} untrusted"
        );
        if untrusted == 0 {
            assert_eq!(their_total, ours.len(), "{file}: sample count");
        }
        compared += matched;
    }
    compared
}

#[test]
fn keep_filter_yields_exactly_the_kept_families_samples() {
    let wanted: HashSet<&str> = [
        "apiserver_request_duration_seconds",
        "apiserver_request_total",
        "etcd_disk_wal_fsync_duration_seconds",
        "etcd_server_has_leader",
        "authentication_attempts",
        "apiserver_admission_webhook_rejection_count",
        "apiserver_request_latencies",
        "apiserver_request_count",
        "etcd_request_latencies_summary",
    ]
    .into_iter()
    .collect();
    // A spread of versions and components; the whole set is covered above.
    let picked = [
        "apiserver_datadog_v1.10.11.prom",
        "apiserver_datadog_v1.23.0.prom",
        "apiserver_nri_v1.35.0.prom",
        "etcd_nri_v3.3.15_k8s1.16.prom",
        "etcd_nri_v3.6.6_k8s1.35.prom",
        "etcd_qubership_v3.4.3_multimember.prom",
        "openshift-apiserver_qubership.prom",
    ];
    let files: Vec<(String, std::path::PathBuf)> = realdata()
        .into_iter()
        .filter(|(n, _)| picked.iter().any(|k| n == k))
        .collect();
    assert_eq!(files.len(), picked.len());
    for (file, path) in files {
        let bytes = realcap::read_path(&path);
        let (full_report, full) = parse_all(&bytes, &mut |_| true);
        let mut asked = Vec::new();
        let (report, filtered) = parse_all(&bytes, &mut |f| {
            asked.push(f.to_string());
            wanted.contains(f)
        });
        let expected: Vec<Owned> = full
            .into_iter()
            .filter(|s| wanted.contains(s.family.as_str()))
            .collect();
        assert_eq!(filtered, expected, "{file}");
        assert_eq!(
            report.samples_kept + report.samples_skipped,
            full_report.samples_kept,
            "{file}"
        );
        assert_eq!(report.families, full_report.families, "{file}");
        let unique: HashSet<&String> = asked.iter().collect();
        assert_eq!(
            unique.len(),
            asked.len(),
            "{file}: keep called twice for a family"
        );
        assert_eq!(asked.len(), report.families.len(), "{file}");
        assert!(!filtered.is_empty(), "{file}: none of the kept families");
    }
}
