//! `diagnose --prometheus` and `query --prometheus` against a canned
//! Prometheus HTTP API (a std `TcpListener` thread on 127.0.0.1): every way the
//! API can fail is reported with its cause, failed signals become gaps rather
//! than aborting, warnings (partial responses) reach the report, credentials
//! and tenant headers are sent and never printed.

use crate::support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request as the fake API saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    params: Vec<(String, String)>,
    /// Header names lowercased.
    headers: BTreeMap<String, String>,
}

impl Seen {
    fn param(&self, k: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
}

struct Reply {
    status: u16,
    body: String,
    delay: Duration,
}

fn reply(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        body: body.into(),
        delay: Duration::ZERO,
    }
}

struct FakeApi {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Most requests being answered at once.
    max_in_flight: Arc<AtomicUsize>,
}

impl FakeApi {
    /// Serves `handler` on a free port until the test process ends (the
    /// listener thread is detached; each test has its own port).
    fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> FakeApi {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (s2, h, m2) = (seen.clone(), Arc::new(handler), max_in_flight.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let (s3, h, m3, f3) = (s2.clone(), h.clone(), m2.clone(), in_flight.clone());
                std::thread::spawn(move || {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let mut lines = head.split("\r\n");
                    let target = lines
                        .next()
                        .unwrap_or("")
                        .split(' ')
                        .nth(1)
                        .unwrap_or("/")
                        .to_string();
                    let url = reqwest::Url::parse(&format!("http://x{target}")).unwrap();
                    let seen = Seen {
                        path: url.path().to_string(),
                        params: url
                            .query_pairs()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        headers: lines
                            .filter_map(|l| l.split_once(':'))
                            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                            .collect(),
                    };
                    s3.lock().unwrap().push(seen.clone());
                    let now = f3.fetch_add(1, Ordering::SeqCst) + 1;
                    m3.fetch_max(now, Ordering::SeqCst);
                    let r = h(&seen);
                    std::thread::sleep(r.delay);
                    f3.fetch_sub(1, Ordering::SeqCst);
                    let _ = write!(
                        c,
                        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                        r.status,
                        r.body.len(),
                        r.body
                    );
                });
            }
        });
        FakeApi {
            port,
            seen,
            max_in_flight,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
const FROM: &str = "2026-01-01T00:00:00Z";
const TO: &str = "2026-01-01T00:02:00Z";
const INST: &str = "10.0.0.1:2381";

/// A healthy single-member etcd behind the API: `up` scraped every 15 s, the
/// metric names of etcd 3.5, and every signal query answered with a value per
/// step (`etcd_server_has_leader` 1, everything else 0). `on_range` may answer
/// a range query instead.
fn etcd_api(on_range: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) -> FakeApi {
    FakeApi::start(move |s| {
        let q = s.param("query").unwrap_or("");
        match s.path.as_str() {
            "/api/v1/query" if q.starts_with("up{") && q.contains("etcd") => {
                let pts: Vec<String> = (0..=8).map(|i| format!("[{},\"1\"]", T0 + 15 * i)).collect();
                reply(
                    200,
                    format!(
                        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{"__name__":"up","job":"etcd","instance":"{INST}","pod":"etcd-0"}},"values":[{}]}}]}}}}"#,
                        pts.join(",")
                    ),
                )
            }
            "/api/v1/query" => reply(
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
            ),
            "/api/v1/label/__name__/values" => reply(
                200,
                r#"{"status":"success","data":["up","etcd_server_has_leader","etcd_server_leader_changes_seen_total","etcd_disk_wal_fsync_duration_seconds_bucket","etcd_disk_backend_commit_duration_seconds_bucket","etcd_server_proposals_failed_total","etcd_mvcc_db_total_size_in_bytes","etcd_server_quota_backend_bytes","grpc_server_handled_total","process_start_time_seconds"]}"#,
            ),
            "/api/v1/query_range" => {
                if let Some(r) = on_range(s) {
                    return r;
                }
                range_reply(s)
            }
            _ => reply(404, "404 page not found"),
        }
    })
}

/// A value per step of the range query `s`: 1 for `etcd_server_has_leader` and
/// `up` (the member answers), 0 otherwise.
fn range_reply(s: &Seen) -> Reply {
    let q = s.param("query").unwrap_or("");
    let start: f64 = s.param("start").and_then(|x| x.parse().ok()).unwrap_or(0.0);
    let end: f64 = s.param("end").and_then(|x| x.parse().ok()).unwrap_or(0.0);
    let step: f64 = s.param("step").and_then(|x| x.parse().ok()).unwrap_or(15.0);
    let v = if q.contains("has_leader") || q.contains("(up") {
        "1"
    } else {
        "0"
    };
    // The instance label the query groups by (`by (pod)` with `--instance-label pod`).
    let metric = if q.contains("(pod") {
        r#"{"pod":"etcd-0"}"#.to_string()
    } else {
        format!(r#"{{"instance":"{INST}"}}"#)
    };
    let mut pts = Vec::new();
    let mut t = start;
    while t <= end + 1e-9 {
        pts.push(format!("[{t},\"{v}\"]"));
        t += step;
    }
    reply(
        200,
        format!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{metric},"values":[{}]}}]}}}}"#,
            pts.join(",")
        ),
    )
}

fn diagnose(url: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let mut args = vec![
        "diagnose",
        "--prometheus",
        url,
        "--from",
        FROM,
        "--to",
        TO,
        "-o",
        "json",
    ];
    args.extend(extra);
    let out = support::cptriage(&args, &[]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code(),
        v,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn gaps(v: &serde_json::Value, kind: &str) -> Vec<(String, String)> {
    v["gaps"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|g| g["kind"] == kind)
                .map(|g| {
                    (
                        g["subject"].as_str().unwrap_or("").to_string(),
                        g["message"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_healthy_member_is_diagnosed_from_range_queries() {
    let api = etcd_api(|_| None);
    let (code, v, err) = diagnose(&api.url(), &["--step", "15s"]);
    assert_eq!(v["sources"][0]["target"], INST, "{err}");
    assert_eq!(v["sources"][0]["time_source"], "prometheus");
    assert_eq!(v["sources"][0]["snapshots"], 9);
    assert_ne!(v["status"], "degraded", "{}", v["summary"]);
    assert_ne!(code, Some(1));
    // The window and step are sent as asked, the role as the etcd selector;
    // one more range query looks for recorded signals (docs/prometheus.md).
    let (detect, ranges): (Vec<Seen>, Vec<Seen>) = api
        .seen()
        .into_iter()
        .filter(|s| s.path == "/api/v1/query_range")
        .partition(|s| s.param("query").is_some_and(|q| q.contains("cptriage_digest")));
    assert_eq!(detect.len(), 1, "one detection query");
    assert!(ranges.len() >= 8, "{} range queries", ranges.len());
    for r in &ranges {
        assert_eq!(r.param("start"), Some(&*T0.to_string()));
        assert_eq!(r.param("end"), Some(&*(T0 + 120).to_string()));
        assert_eq!(r.param("step"), Some("15"));
        let q = r.param("query").unwrap();
        assert!(q.contains(r#"job=~".*etcd.*""#) && !q.contains("role="), "{q}");
        // $window = max(4 × 15 s scrape interval, 2 × step) = 1m; rate signals
        // are also asked over the shortest window that holds two scrapes (30 s),
        // which dates onsets.
        assert!(
            !q.contains('[') || q.contains("[1m]") || q.contains("[30s]"),
            "{q}"
        );
    }
    // The apiserver role has no `up` series: a gap, and a warning naming the flag.
    assert!(gaps(&v, "role-absent").iter().any(|(s, _)| s == "apiserver"));
    assert!(err.contains("--apiserver-selector"), "{err}");
}

#[test]
fn instances_by_another_label_and_an_explicit_baseline_range() {
    let api = etcd_api(|_| None);
    let (_, v, err) = diagnose(
        &api.url(),
        &[
            "--instance-label",
            "pod",
            "--baseline-from",
            "2025-12-31T23:50:00Z",
            "--baseline-to",
            "2025-12-31T23:55:00Z",
        ],
    );
    assert_eq!(v["sources"][0]["target"], "etcd-0", "{err}");
    assert_eq!(v["window"]["baseline"]["kind"], "range");
    let ranges: Vec<Seen> = api
        .seen()
        .into_iter()
        .filter(|s| s.path == "/api/v1/query_range")
        .collect();
    for r in &ranges {
        let q = r.param("query").unwrap();
        assert!(!q.contains("(instance"), "{q}");
    }
    assert!(ranges
        .iter()
        .any(|r| r.param("query").unwrap().contains("by (pod, le)")));
    // The relative-threshold signals are queried again over the baseline range.
    let base_end = (T0 - 300).to_string();
    let baseline: Vec<&Seen> = ranges
        .iter()
        .filter(|r| r.param("end") == Some(&*base_end))
        .collect();
    assert!(!baseline.is_empty());
    assert!(baseline
        .iter()
        .any(|r| r.param("query").unwrap().contains("wal_fsync")));
    // The etcd signals have per-instance values under the pod's name.
    let fsync = v["axes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["evidence"].as_array().unwrap().iter())
        .find(|e| e["signal"] == "etcd_wal_fsync_p99")
        .unwrap();
    assert_eq!(fsync["instances"][0]["instance"], "etcd-0", "{fsync}");
    assert_eq!(fsync["instances"].as_array().map(Vec::len), Some(1));
}

#[test]
fn signals_are_queried_concurrently_with_a_bound() {
    let api = etcd_api(|s| {
        Some(Reply {
            delay: Duration::from_millis(150),
            ..range_reply(s)
        })
    });
    let (_, v, err) = diagnose(&api.url(), &[]);
    assert!(v["status"].is_string(), "{err}");
    let m = api.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=4).contains(&m), "{m} requests in flight at most");
}

#[test]
fn a_failing_signal_is_a_gap_and_warnings_reach_the_report() {
    let api = etcd_api(|s| {
        let q = s.param("query").unwrap_or("");
        if q.contains("wal_fsync") && q.contains("histogram_quantile") {
            Some(reply(
                422,
                r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#,
            ))
        } else if q.contains("has_leader") {
            Some(reply(
                200,
                format!(
                    r#"{{"status":"success","warnings":["partial response: store 10.0.0.9:10901 unreachable"],"data":{{"resultType":"matrix","result":[{{"metric":{{"instance":"{INST}"}},"values":[[{T0},"1"]]}}]}}}}"#
                ),
            ))
        } else {
            None
        }
    });
    let (code, v, err) = diagnose(&api.url(), &[]);
    // The report is written (no apiserver: the symptom is unknown, so the
    // verdict may be inconclusive), not replaced by an error.
    assert!(v["status"].is_string(), "exit {code:?}: {err}");
    assert!(!err.contains("no signal could be queried"), "{err}");
    let failed = gaps(&v, "evaluation-error");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "etcd_wal_fsync_p99");
    assert!(
        failed[0]
            .1
            .contains("HTTP 422, execution: query processing would load too many samples")
            && failed[0].1.contains("raise --step"),
        "{}",
        failed[0].1
    );
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains(
            "`etcd_no_leader`: Prometheus warned: partial response: store 10.0.0.9:10901 unreachable"
        )),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("queries to Prometheus failed (1 signal(s) not evaluated)")),
        "{warnings:?}"
    );
}

#[test]
fn nothing_queryable_is_unusable_data() {
    // Every range query times out.
    let api = etcd_api(|_| {
        Some(Reply {
            status: 200,
            body: "{}".into(),
            delay: Duration::from_secs(3),
        })
    });
    let (code, _, err) = diagnose(&api.url(), &["--prometheus-timeout", "1s"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("no signal could be queried from Prometheus"),
        "{err}"
    );
    assert!(
        err.contains("no answer within 1s (raise --prometheus-timeout"),
        "{err}"
    );

    // A 500 with the API's error document, on every request.
    let api = FakeApi::start(|_| {
        reply(
            500,
            r#"{"status":"error","errorType":"internal","error":"tsdb is closing"}"#,
        )
    });
    let (code, _, err) = diagnose(&api.url(), &[]);
    assert_eq!(code, Some(3));
    assert!(
        err.contains("/api/v1/query: HTTP 500, internal: tsdb is closing"),
        "{err}"
    );

    // A 200 that is not the API's JSON.
    let api = FakeApi::start(|_| reply(200, "<html>login</html>"));
    let (code, _, err) = diagnose(&api.url(), &[]);
    assert_eq!(code, Some(3));
    assert!(
        err.contains("malformed response: not the API's JSON document"),
        "{err}"
    );
    assert!(err.contains("<html>login</html>"), "{err}");

    // Nothing listening.
    let port = support::free_port();
    let (code, _, err) = diagnose(&format!("http://127.0.0.1:{port}"), &[]);
    assert_eq!(code, Some(3));
    assert!(
        err.contains("connection refused (nothing listening at the Prometheus URL)"),
        "{err}"
    );

    // A gateway's error page without the API's document.
    let api = FakeApi::start(|_| reply(404, "404 page not found"));
    let (code, _, err) = diagnose(&api.url(), &[]);
    assert_eq!(code, Some(3));
    assert!(
        err.contains("HTTP 404 Not Found: no Prometheus API at this URL"),
        "{err}"
    );
}

#[test]
fn credentials_and_tenant_headers_are_sent_and_never_printed() {
    let canary = "canary-7f3a9c1e-token";
    let dir = tempfile::tempdir().unwrap();
    let tok = dir.path().join("token");
    std::fs::write(&tok, format!("{canary}\n")).unwrap();
    let api = etcd_api(|s| {
        s.param("query")
            .filter(|q| q.contains("fsync"))
            .map(|_| reply(401, "unauthorized"))
    });
    let out = support::cptriage(
        &[
            "diagnose",
            "--prometheus",
            &api.url(),
            "--from",
            FROM,
            "--to",
            TO,
            "--prometheus-token-file",
            tok.to_str().unwrap(),
            "--prometheus-header",
            "X-Scope-OrgID: team-a",
            "--selector",
            r#"{cluster="prod"}"#,
            "-o",
            "json",
        ],
        &[],
    );
    let seen = api.seen();
    assert!(!seen.is_empty());
    for s in &seen {
        assert_eq!(
            s.headers.get("authorization").map(String::as_str),
            Some(&*format!("Bearer {canary}"))
        );
        assert_eq!(s.headers.get("x-scope-orgid").map(String::as_str), Some("team-a"));
    }
    // The extra selector is in every query and every match[].
    for s in seen.iter().filter(|s| s.path == "/api/v1/query_range") {
        assert!(s.param("query").unwrap().contains(r#"cluster="prod""#));
    }
    assert!(seen
        .iter()
        .filter(|s| s.path.starts_with("/api/v1/label/"))
        .all(|s| s
            .param("match[]")
            .is_some_and(|m| m.contains(r#"cluster="prod""#))));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("HTTP 401 Unauthorized: the credentials were not accepted"),
        "{text}"
    );
    assert!(!text.contains(canary), "the token appears in the output");

    // Basic auth: the password is sent encoded and never printed.
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "canary-basic-pw").unwrap();
    let api = FakeApi::start(|_| {
        reply(
            200,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#,
        )
    });
    let out = support::cptriage(
        &[
            "query",
            "--prometheus",
            &api.url(),
            "--prometheus-user",
            "alice",
            "--prometheus-password-file",
            pw.to_str().unwrap(),
            "1+1",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    use base64::Engine;
    let want = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("alice:canary-basic-pw")
    );
    assert_eq!(api.seen()[0].headers.get("authorization"), Some(&want));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("canary-basic-pw"));
}

#[test]
fn query_prints_the_same_shapes_as_over_a_dump() {
    let api = FakeApi::start(|s| {
        if s.path == "/api/v1/query" {
            reply(
                200,
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"a:1","job":"etcd"},"value":[1767225600,"1"]}]}}"#,
            )
        } else {
            reply(
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance":"a:1"},"values":[[1767225600,"0.5"],[1767225660,"NaN"]]}]}}"#,
            )
        }
    });
    let out = support::cptriage(
        &[
            "query",
            "--prometheus",
            &api.url(),
            "--at",
            FROM,
            "up",
            "-o",
            "json",
            "--selector",
            r#"{cluster="x"}"#,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"a:1","job":"etcd"},"value":[1767225600,"1"]}]}}"#
    );
    let s = &api.seen()[0];
    assert_eq!(s.param("query"), Some(r#"up{cluster="x"}"#));
    assert_eq!(s.param("time"), Some("1767225600"));

    let out = support::cptriage(
        &[
            "query",
            "--prometheus",
            &api.url(),
            "--from",
            FROM,
            "--to",
            TO,
            "--step",
            "1m",
            "x",
        ],
        &[],
    );
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("range vector (1 series)") && table.contains("0.5") && table.contains("NaN"),
        "{table}"
    );
    let r = &api.seen()[1];
    assert_eq!(
        (r.param("start"), r.param("end"), r.param("step")),
        (Some("1767225600"), Some("1767225720"), Some("60"))
    );

    // A bad expression is the API's 400 bad_data: a usage error with its message.
    let bad = FakeApi::start(|_| {
        reply(
            400,
            r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error"}"#,
        )
    });
    let out = support::cptriage(&["query", "--prometheus", &bad.url(), "sum(x)"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 400, bad_data: invalid parameter"));
}

#[test]
fn sources_are_exclusive_and_selectors_checked() {
    let a = support::cptriage(
        &["diagnose", "--prometheus", "http://127.0.0.1:9", "--dump", "x"],
        &[],
    );
    assert_eq!(a.status.code(), Some(2));
    let b = support::cptriage(&["diagnose", "--prometheus", "http://127.0.0.1:9", "--live"], &[]);
    assert_eq!(b.status.code(), Some(2));
    let c = support::cptriage(
        &[
            "diagnose",
            "--prometheus",
            "http://127.0.0.1:9",
            "--etcd-selector",
            "job=etcd",
        ],
        &[],
    );
    assert_eq!(c.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&c.stderr)
        .contains("invalid selector `job=etcd` for --etcd-selector: expected label matchers in braces"));
    let d = support::cptriage(
        &["query", "--prometheus", "http://u:secret-pw@127.0.0.1:9", "up"],
        &[],
    );
    assert_eq!(d.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&d.stderr).contains("secret-pw"));
}

/// The (start, end, step) of every range query of `api` whose text contains
/// `needle`, in seconds.
fn ranges(api: &FakeApi, needle: &str) -> Vec<(f64, f64, f64)> {
    api.seen()
        .iter()
        .filter(|s| s.path == "/api/v1/query_range" && s.param("query").is_some_and(|q| q.contains(needle)))
        .map(|s| {
            let p = |k: &str| s.param(k).and_then(|x| x.parse::<f64>().ok()).unwrap();
            (p("start"), p("end"), p("step"))
        })
        .collect()
}

fn points((start, end, step): (f64, f64, f64)) -> usize {
    ((end - start) / step).round() as usize + 1
}

/// The verdict without what differs between runs of the same data.
fn verdict(v: &serde_json::Value) -> (String, Vec<String>) {
    let axes = v["axes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{} {}", a["axis"], a["state"]))
        .collect();
    (v["status"].as_str().unwrap_or_default().to_string(), axes)
}

#[test]
fn long_ranges_are_split_into_chunks_that_stitch_back() {
    let whole = etcd_api(|_| None);
    let (_, one, err) = diagnose(&whole.url(), &["--step", "1s"]);
    assert!(one["status"].is_string(), "{err}");
    let api = etcd_api(|_| None);
    let (_, chunked, err) = diagnose(&api.url(), &["--step", "1s", "--prometheus-max-points", "16"]);
    assert!(chunked["status"].is_string(), "{err}");
    // Every range query of the leader signal came in chunks of at most 16
    // steps that cover its range once, on one step grid.
    // (Several signals read the leader gauge: each query's chunks are the
    // same ranges, so the ranges are compared once.)
    let mut r = ranges(&api, "has_leader");
    r.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    r.dedup();
    assert!(r.len() >= 8, "{r:?}");
    assert!(r.iter().all(|&q| points(q) <= 16), "{r:?}");
    let whole_r = ranges(&whole, "has_leader");
    let (start, end) = (whole_r[0].0, whole_r[0].1);
    let mut t = start;
    for &(s, e, step) in r.iter().filter(|q| q.0 >= start && q.1 <= end) {
        assert!((s - t).abs() < 1e-6, "chunk at {s}, expected {t}: {r:?}");
        t = e + step;
    }
    assert!(
        (t - (end + 1.0)).abs() < 1e-6,
        "chunks end at {t}, range at {end}"
    );
    // The same verdict, the same evidence, no failure.
    assert_eq!(verdict(&chunked), verdict(&one));
    assert_eq!(chunked["axes"], one["axes"]);
    assert!(gaps(&chunked, "evaluation-error").is_empty());
}

#[test]
fn a_chunk_refused_as_too_much_is_halved() {
    // Like Prometheus's --query.max-samples: more than 40 steps is refused.
    let api = etcd_api(|s| {
        let p = |k: &str| s.param(k).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
        (points((p("start"), p("end"), p("step"))) > 40).then(|| {
            reply(
                422,
                r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#,
            )
        })
    });
    let (_, v, err) = diagnose(&api.url(), &["--step", "1s"]);
    assert!(
        gaps(&v, "evaluation-error").is_empty(),
        "{:?}\n{err}",
        gaps(&v, "evaluation-error")
    );
    let r = ranges(&api, "has_leader");
    // 121 steps refused, then 61 + 60 refused, then four quarters answered.
    let answered: Vec<_> = r.iter().filter(|&&q| points(q) <= 40).collect();
    assert!(answered.len() >= 4, "{r:?}");
    let whole = etcd_api(|_| None);
    let (_, one, _) = diagnose(&whole.url(), &["--step", "1s"]);
    assert_eq!(verdict(&v), verdict(&one));
}

#[test]
fn a_failing_chunk_is_named_and_the_rest_is_judged() {
    let api = etcd_api(|s| {
        let q = s.param("query").unwrap_or("");
        let start: f64 = s.param("start").and_then(|x| x.parse().ok()).unwrap_or(0.0);
        (q.contains("has_leader") && (start - (T0 as f64 + 32.0)).abs() < 0.5).then(|| {
            reply(
                400,
                r#"{"status":"error","errorType":"bad_data","error":"store gateway unavailable for this block"}"#,
            )
        })
    });
    let (code, v, err) = diagnose(&api.url(), &["--step", "1s", "--prometheus-max-points", "16"]);
    assert!(v["status"].is_string(), "exit {code:?}: {err}");
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert!(
        warnings.iter().any(|w| w
            .contains("`etcd_no_leader` from 2026-01-01T00:00:32Z to 2026-01-01T00:00:47Z")
            && w.contains("store gateway unavailable")
            && w.contains("not judged")),
        "{warnings:?}"
    );
    // The other chunks were answered: the signal is evaluated, not a gap.
    assert!(
        !gaps(&v, "evaluation-error")
            .iter()
            .any(|(s, _)| s == "etcd_no_leader"),
        "{:?}",
        gaps(&v, "evaluation-error")
    );
    // Progress is drawn only on a terminal: nothing of it in a pipe.
    assert!(!err.contains("range requests") && !err.contains('\r'), "{err}");
}
