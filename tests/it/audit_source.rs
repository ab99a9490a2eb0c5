//! The audit-log source: generated `audit.k8s.io/v1` logs (plain, gzip,
//! rotated into several files) become counters whose values match an
//! independent reading of the same lines with `serde_json::Value`; bad lines
//! are named by `file:line` and the rest is analysed; a log without latency
//! annotations is a gap; credentials never reach the summary.

use std::io::Write;
use std::path::{Path, PathBuf};

use cptriage::eval::{self, EvalOptions};
use cptriage::source::audit::{self, names, AuditConfig};
use cptriage::source::{Dataset, Role};
use cptriage_testkit::scenario::audit::{AuditFault, AuditGen};

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn gen(fault: AuditFault, minutes: i64, fault_at_min: i64) -> Vec<u8> {
    let g = AuditGen {
        start: T0,
        duration: minutes * 60_000,
        rate: 40.0,
        fault,
        fault_from: T0 + fault_at_min * 60_000,
        seed: 42,
    };
    let mut out = Vec::new();
    g.write(&mut out).unwrap();
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8], gz: bool) -> PathBuf {
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    if gz {
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap();
    } else {
        f.write_all(bytes).unwrap();
    }
    p
}

fn load(paths: &[PathBuf]) -> Dataset {
    let mut ds = Dataset::default();
    audit::load_into(&mut ds, paths, &AuditConfig::default()).expect("load");
    ds
}

/// The value of a PromQL expression over the whole store at `t`.
fn value(ds: &Dataset, expr: &str, t: i64) -> f64 {
    let e = eval::parse(expr).unwrap();
    match eval::instant(&ds.store, &e, t, &EvalOptions { lookback: 3_600_000 }).unwrap() {
        eval::Value::Vector(v) if v.len() == 1 => v[0].v,
        eval::Value::Vector(v) if v.is_empty() => 0.0,
        other => panic!("{expr}: {other:?}"),
    }
}

/// An independent reading: per layer, the seconds of ResponseComplete events
/// slower than 500 ms that carry annotations, and the counted events.
fn truth(bytes: &[u8]) -> (std::collections::BTreeMap<String, f64>, u64, u64, u64) {
    let mut layers = std::collections::BTreeMap::new();
    let (mut counted, mut slow, mut denied) = (0, 0, 0);
    for l in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(l).unwrap();
        let code = v["responseStatus"]["code"].as_i64();
        let complete = v["stage"] == "ResponseComplete";
        if !(complete || (v["stage"] == "ResponseStarted" && code == Some(401))) {
            continue;
        }
        counted += 1;
        if matches!(code, Some(401 | 403 | 429)) {
            denied += 1;
        }
        if !complete || v["verb"] == "watch" {
            continue;
        }
        let t = |k: &str| {
            chrono::DateTime::parse_from_rfc3339(v[k].as_str().unwrap())
                .unwrap()
                .timestamp_micros()
        };
        let secs = (t("stageTimestamp") - t("requestReceivedTimestamp")) as f64 / 1e6;
        if secs <= 0.5 {
            continue;
        }
        slow += 1;
        if let Some(m) = v["annotations"].as_object() {
            for (k, val) in m {
                if let Some(layer) = k.strip_prefix("apiserver.latency.k8s.io/") {
                    let s = val.as_str().unwrap();
                    let secs: f64 = if let Some(ms) = s.strip_suffix("ms") {
                        ms.parse::<f64>().unwrap() / 1e3
                    } else if let Some(us) = s.strip_suffix("µs") {
                        us.parse::<f64>().unwrap() / 1e6
                    } else if let Some((m, s)) = s.strip_suffix('s').unwrap().split_once('m') {
                        m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
                    } else {
                        s.strip_suffix('s').unwrap().parse().unwrap()
                    };
                    *layers.entry(layer.to_string()).or_insert(0.0) += secs;
                }
            }
        }
    }
    (layers, counted, slow, denied)
}

#[test]
fn etcd_fault_counters_match_an_independent_reading_across_rotated_gzip_files() {
    let bytes = gen(AuditFault::EtcdSlow, 6, 3);
    let dir = tempfile::tempdir().unwrap();
    // Rotated: the first half plain, the second gzip, in a directory.
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    write(
        dir.path(),
        "audit-2026-01-01T00-03-00.000.log",
        &a.concat(),
        false,
    );
    write(dir.path(), "audit.log.gz", &b.concat(), true);
    let ds = load(&[dir.path().to_path_buf()]);
    let sum = ds.audit.as_ref().unwrap();
    let (layers, counted, slow, denied) = truth(&bytes);
    assert_eq!(sum.files.len(), 2);
    assert_eq!(sum.bad_lines, 0, "{:?}", sum.bad_examples);
    assert_eq!(sum.events, counted);
    assert_eq!(sum.slow_requests, slow);
    assert_eq!(
        sum.slow_annotated, slow,
        "every slow request of a 1.30 apiserver is annotated"
    );
    assert!(slow > 1000, "the fault makes requests slow: {slow}");
    assert_eq!(sum.other_stages, counted, "one RequestReceived per counted event");
    assert!(sum.gaps.is_empty(), "{:?}", sum.gaps);

    let t = ds.window().unwrap().1;
    let layer = |l: &str| value(&ds, &format!("sum({}{{layer=\"{l}\"}})", names::LAYER_SECONDS), t);
    for (l, want) in &layers {
        let got = layer(l);
        assert!(
            (got - want).abs() < 1e-6 * want.max(1.0),
            "layer {l}: {got} != {want}"
        );
    }
    assert_eq!(value(&ds, &format!("sum({})", names::SLOW), t), slow as f64);
    assert_eq!(value(&ds, &format!("sum({})", names::DENIED), t), denied as f64);
    assert_eq!(
        value(&ds, &format!("sum({})", names::REQUESTS), t),
        counted as f64
    );

    // The fault starts at 3 min: etcd owns most slow time after it, and the
    // series are counters on 15 s boundaries with the `audit` role.
    let share = value(
        &ds,
        &format!(
            "sum(increase({n}{{layer=\"etcd\"}}[1m])) / sum(increase({n}{{layer=\"total\"}}[1m]))",
            n = names::LAYER_SECONDS
        ),
        T0 + 5 * 60_000,
    );
    assert!(share > 0.8, "etcd share after the fault {share}");
    let p99 = value(
        &ds,
        &format!(
            "histogram_quantile(0.99, sum by (le) (rate({}_bucket{{verb!=\"list\"}}[1m])))",
            names::DURATION
        ),
        T0 + 5 * 60_000,
    );
    assert!(p99 > 1.0, "p99 after the fault {p99}");
    let p99_before = value(
        &ds,
        &format!(
            "histogram_quantile(0.99, sum by (le) (rate({}_bucket{{verb!=\"list\"}}[1m])))",
            names::DURATION
        ),
        T0 + 2 * 60_000,
    );
    assert!(p99_before < 0.1, "p99 before the fault {p99_before}");
    let target = ds.targets.iter().find(|t| t.role == Role::Audit).unwrap();
    assert_eq!(target.name, audit::TARGET);
    let snaps: Vec<i64> = target.snapshots.iter().map(|s| s.time).collect();
    assert!(snaps.windows(2).all(|w| w[1] - w[0] == 15_000));
    assert!(
        snaps[0] < sum.first.unwrap() && snaps[0] % 15_000 == 0,
        "a zero point before the first event"
    );
    assert_eq!(value(&ds, &format!("sum({})", names::REQUESTS), snaps[0]), 0.0);
    // The slowest requests carry their layer split, etcd first.
    assert_eq!(sum.slowest.len(), 10);
    assert!(sum
        .slowest
        .windows(2)
        .all(|w| w[0].total_seconds >= w[1].total_seconds));
    assert_eq!(sum.slowest[0].layers[0].0, "etcd");
}

#[test]
fn a_log_without_latency_annotations_is_a_gap_not_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "audit.log",
        &gen(AuditFault::EtcdSlowUnannotated, 4, 2),
        false,
    );
    let ds = load(&[p]);
    let sum = ds.audit.as_ref().unwrap();
    assert!(sum.slow_requests > 100);
    assert_eq!(sum.slow_annotated, 0);
    assert_eq!(sum.gaps.len(), 1, "{:?}", sum.gaps);
    assert!(
        sum.gaps[0].contains("apiserver.latency.k8s.io"),
        "{}",
        sum.gaps[0]
    );
    assert!(sum.gaps[0].contains("audit.log:"), "names where: {}", sum.gaps[0]);
    let target = &ds.targets[0];
    assert!(
        !target.families.contains(names::LAYER_SECONDS),
        "the layer split is not exposed, so signals reading it are gaps"
    );
    assert!(ds.store.by_name(names::LAYER_SECONDS).next().is_none());
    // The latency itself is still read.
    assert!(target.families.contains(&format!("{}_bucket", names::DURATION)));
}

#[test]
fn a_healthy_log_exposes_the_layer_family_even_with_no_slow_request() {
    let dir = tempfile::tempdir().unwrap();
    let g = AuditGen {
        start: T0,
        duration: 60_000,
        rate: 5.0,
        fault: AuditFault::None,
        fault_from: i64::MAX,
        seed: 3,
    };
    let mut bytes = Vec::new();
    g.write(&mut bytes).unwrap();
    // Drop the rare slow LIST of the background, if any.
    let kept: Vec<&[u8]> = bytes
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| !String::from_utf8_lossy(l).contains("apiserver.latency.k8s.io"))
        .collect();
    let p = write(dir.path(), "audit.log", &kept.concat(), false);
    let ds = load(&[p]);
    let sum = ds.audit.as_ref().unwrap();
    assert_eq!(sum.slow_requests, 0, "{:?}", sum.slowest);
    assert!(sum.gaps.is_empty());
    assert!(ds.targets[0].families.contains(names::LAYER_SECONDS));
}

#[test]
fn bad_lines_are_named_by_file_and_line_and_the_rest_is_analysed() {
    let good = gen(AuditFault::None, 1, 99);
    let good_lines: Vec<&[u8]> = good.split_inclusive(|b| *b == b'\n').collect();
    let complete = good_lines
        .iter()
        .find(|l| String::from_utf8_lossy(l).contains("\"ResponseComplete\""))
        .unwrap();
    let c = String::from_utf8_lossy(complete).trim_end().to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("not JSON", "GET /api/v1/pods 200".into(), "not an audit event"),
        (
            "truncated JSON",
            c[..c.len() / 2].to_string(),
            "not an audit event",
        ),
        ("binary", "\u{0}\u{1}\u{2}\u{fffd}".into(), "not an audit event"),
        ("a JSON array", "[1,2,3]".into(), "not an audit event"),
        (
            "no stage",
            c.replace("\"stage\":\"ResponseComplete\",", ""),
            "missing field `stage`",
        ),
        (
            "another kind",
            c.replace("\"kind\":\"Event\"", "\"kind\":\"EventList\""),
            "kind `EventList`",
        ),
        (
            "unknown stage",
            c.replace("\"ResponseComplete\"", "\"Finished\""),
            "unknown `stage`",
        ),
        (
            "bad time",
            c.replace("\"stageTimestamp\":\"2026", "\"stageTimestamp\":\"yesterday 2026"),
            "not an RFC 3339 time",
        ),
        (
            "bad duration",
            c.replace(
                "\"annotations\":{",
                "\"annotations\":{\"apiserver.latency.k8s.io/etcd\":\"ten seconds\",",
            ),
            "apiserver.latency.k8s.io/etcd",
        ),
        (
            "wrong type",
            c.replace("\"verb\":\"", "\"verb\":7,\"x\":\""),
            "not an audit event",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    let mut first_good = 0usize;
    for l in &good_lines {
        if String::from_utf8_lossy(l).contains("\"ResponseComplete\"") {
            first_good += 1;
        }
    }
    for (_, line, _) in &cases {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&String::from_utf8_lossy(&good));
    let p = write(dir.path(), "mixed.log", text.as_bytes(), false);
    let ds = load(std::slice::from_ref(&p));
    let sum = ds.audit.as_ref().unwrap();
    assert_eq!(sum.bad_lines, cases.len() as u64, "{:#?}", sum.bad_examples);
    for (i, (what, _, msg)) in cases.iter().enumerate() {
        let b = &sum.bad_examples[i];
        assert_eq!(b.at, format!("{}:{}", p.display(), i + 1), "{what}");
        assert!(b.message.contains(msg), "{what}: {}", b.message);
    }
    assert_eq!(sum.events as usize, first_good, "the good lines are all analysed");
    // The warning names the count and the first lines.
    assert!(ds.warnings.iter().any(
        |w| w.message.contains(&format!("{} line(s)", cases.len())) && w.message.contains("mixed.log:1")
    ));
    // Messages quote no content of the lines.
    for b in &sum.bad_examples {
        assert!(!b.message.contains("GET /api"), "{}", b.message);
    }
}

#[test]
fn long_lines_truncated_gzip_and_crlf() {
    let good = gen(AuditFault::None, 1, 99);
    let n_good = truth(&good).1;
    let dir = tempfile::tempdir().unwrap();
    // A 3 MiB line between good ones, with a 1 MiB limit.
    let mut text = Vec::new();
    text.extend_from_slice(&good);
    text.extend(std::iter::repeat_n(b'x', 3 << 20));
    text.push(b'\n');
    // CRLF line endings on the second copy.
    let crlf: Vec<u8> = String::from_utf8_lossy(&good).replace('\n', "\r\n").into_bytes();
    text.extend_from_slice(&crlf);
    let p = write(dir.path(), "a.log", &text, false);
    let mut ds = Dataset::default();
    let cfg = AuditConfig {
        max_line: 1 << 20,
        ..AuditConfig::default()
    };
    audit::load_into(&mut ds, &[p], &cfg).unwrap();
    let sum = ds.audit.as_ref().unwrap();
    assert_eq!(sum.bad_lines, 1, "{:?}", sum.bad_examples);
    assert!(
        sum.bad_examples[0].message.contains("3145728 bytes"),
        "{}",
        sum.bad_examples[0].message
    );
    assert_eq!(sum.events, 2 * n_good);

    // A gzip file cut in the middle: what was read is analysed.
    let mut gz = Vec::new();
    {
        let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::fast());
        e.write_all(&good).unwrap();
        e.finish().unwrap();
    }
    let p = write(dir.path(), "cut.log.gz", &gz[..gz.len() * 2 / 3], false);
    let mut ds = Dataset::default();
    audit::load_into(&mut ds, &[p], &AuditConfig::default()).unwrap();
    let sum = ds.audit.as_ref().unwrap();
    assert!(
        sum.events > 0 && sum.events < n_good,
        "{} of {n_good}",
        sum.events
    );
    assert!(
        sum.bad_examples
            .iter()
            .any(|b| b.message.contains("cannot read further")),
        "{:?}",
        sum.bad_examples
    );
}

#[test]
fn unusable_inputs_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut ds = Dataset::default();
    let missing = dir.path().join("nope.log");
    let e = audit::load_into(&mut ds, &[missing], &AuditConfig::default()).unwrap_err();
    assert!(e.to_string().contains("nope.log"), "{e}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = audit::load_into(&mut ds, &[empty], &AuditConfig::default()).unwrap_err();
    assert!(e.to_string().contains("no audit log file"), "{e}");
    let p = write(dir.path(), "garbage.log", b"hello\nworld\n", false);
    let e = audit::load_into(&mut ds, &[p], &AuditConfig::default()).unwrap_err();
    assert!(e.to_string().contains("garbage.log:1"), "{e}");
}

#[test]
fn credentials_in_uris_user_agents_and_names_never_reach_the_summary() {
    let jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlU2lnbmF0dXJl";
    let line = |i: u32, uri: &str, ua: &str, user: &str| {
        format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a-{i}","stage":"ResponseComplete","requestURI":"{uri}","verb":"get","user":{{"username":"{user}"}},"userAgent":"{ua}","responseStatus":{{"metadata":{{}},"code":401}},"requestReceivedTimestamp":"2026-01-01T00:00:0{i}.000000Z","stageTimestamp":"2026-01-01T00:00:0{i}.900000Z","annotations":{{"apiserver.latency.k8s.io/total":"900ms"}}}}"#
        )
    };
    let text = [
        line(1, &format!("/metrics?access_token={jwt}"), "curl/8.0", "alice"),
        line(2, "/healthz", &format!("{jwt} (bot)"), "bob"),
        line(3, "/livez", "curl/8.0", &format!("token-{jwt}")),
    ]
    .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "audit.log", text.as_bytes(), false);
    let ds = load(&[p]);
    let sum = ds.audit.as_ref().unwrap();
    let shown = serde_json::to_string(sum).unwrap();
    assert!(!shown.contains("eyJhbGci"), "{shown}");
    assert!(!shown.contains("c2lnbmF0dXJl"), "{shown}");
    assert_eq!(sum.slowest.len(), 3);
    assert!(sum.slowest.iter().any(|s| s.object == "/metrics"));
    assert!(sum.denied.iter().any(|d| d.user_agent == "<redacted>"));
    assert!(sum.denied.iter().any(|d| d.user == "<redacted>"));
    let mut labels = String::new();
    for s in ds.store.by_name(names::DENIED) {
        labels.push_str(&format!("{:?}", s.labels));
    }
    assert!(!labels.contains("eyJhbGci"), "{labels}");
}
