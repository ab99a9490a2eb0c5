//! `cptriage serve`'s HTTP interface against bad input, each answer asserted:
//! missing and wrong tokens, wrong methods, content types, malformed and
//! unknown payload versions, oversized bodies (declared and chunked), slow
//! clients, ids that are not ids, label values that look like paths, a full
//! queue and a flood (503 with `Retry-After`, counted, memory bounded), and a
//! SIGTERM while a diagnosis hangs. Its Prometheus is a socket that never
//! answers, so that diagnoses stay in flight.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::serve::Serve;
use crate::support::{free_port, run, wait_for};

const TOKEN: &str = "bad-input-Token-9c2e71f0aa";

/// A bad body: (case, content type, body, status, what the answer says).
type Case = (&'static str, Option<&'static str>, Vec<u8>, u16, &'static str);

fn notification(group: &str, cluster: &str) -> String {
    serde_json::json!({
        "version": "4",
        "groupKey": group,
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "cptriage",
        "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "externalURL": "http://alertmanager",
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": "EtcdHighFsyncDurations", "cluster": cluster},
            "annotations": {},
            "startsAt": "2026-01-01T00:00:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "",
            "fingerprint": format!("{group}-{cluster}"),
        }],
    })
    .to_string()
}

/// One raw HTTP exchange: writes `head` then `body`, waits for the answer
/// (at most `limit`); returns the status line, or "" when the server closed
/// without one.
fn raw(port: u16, head: &str, body: &[u8], limit: Duration) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(limit)).expect("timeout");
    s.write_all(head.as_bytes()).expect("write head");
    s.write_all(body).expect("write body");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn bad_requests_get_clear_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Accepts connections (the kernel's backlog) and never answers.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let prom = format!("http://127.0.0.1:{}", hang.local_addr().expect("addr").port());
    let reports = dir.path().join("reports");
    let args: Vec<String> = [
        "--prometheus",
        &prom,
        "--prometheus-timeout",
        "60s",
        "--by",
        "cluster",
        "--concurrency",
        "1",
        "--queue",
        "2",
        "--grace",
        "1s",
        "--reports",
        reports.to_str().expect("path"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut s = Serve::start(dir.path(), &args, Some(TOKEN));
    let url = s.url();
    let http = &s.http;
    let post = |ct: Option<&str>, body: Vec<u8>| {
        let mut r = http
            .post(format!("{url}/v1/alertmanager"))
            .bearer_auth(TOKEN)
            .body(body);
        if let Some(ct) = ct {
            r = r.header("content-type", ct);
        }
        let r = r.send().expect("post");
        let retry = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or("").to_string());
        (r.status().as_u16(), r.text().unwrap_or_default(), retry)
    };

    // Tokens.
    let cases: [(Option<String>, u16); 4] = [
        (None, 401),
        (Some("Bearer wrong-token-000000000".into()), 401),
        (Some(format!("Bearer {TOKEN}x")), 401),
        (Some(format!("Basic {TOKEN}")), 401),
    ];
    for (auth, want) in cases {
        let mut r = http.get(format!("{url}/healthz"));
        if let Some(a) = &auth {
            r = r.header("authorization", a);
        }
        let r = r.send().expect("get");
        assert_eq!(r.status().as_u16(), want, "authorization {auth:?}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
    }
    let r = s.get("/metrics").expect("metrics");
    assert_eq!(r.status().as_u16(), 200);

    // Bodies.
    let ok = notification("{}:{alertname=\"A\"}", "c1");
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&ok).expect("json");
        f(&mut v);
        v.to_string().into_bytes()
    };
    let table: Vec<Case> = vec![
        (
            "text/plain",
            Some("text/plain"),
            ok.clone().into_bytes(),
            415,
            "application/json",
        ),
        (
            "no content type",
            None,
            ok.clone().into_bytes(),
            415,
            "application/json",
        ),
        (
            "malformed",
            Some("application/json"),
            b"{\"version\":\"4\",".to_vec(),
            400,
            "not Alertmanager's webhook JSON",
        ),
        (
            "not an object",
            Some("application/json"),
            b"[1,2]".to_vec(),
            400,
            "missing field `version`",
        ),
        (
            "version 3",
            Some("application/json"),
            with(&|v| v["version"] = "3".into()),
            400,
            "unsupported payload version \\\"3\\\"",
        ),
        (
            "version as a number",
            Some("application/json"),
            with(&|v| v["version"] = 4.into()),
            400,
            "unsupported payload version",
        ),
        (
            "no alerts",
            Some("application/json"),
            with(&|v| v["alerts"] = serde_json::json!([])),
            400,
            "no alerts",
        ),
        (
            "bad time",
            Some("application/json"),
            with(&|v| v["alerts"][0]["startsAt"] = "yesterday".into()),
            400,
            "`startsAt` is not an RFC 3339 time",
        ),
        (
            "unknown status",
            Some("application/json"),
            with(&|v| v["alerts"][0]["status"] = "pending".into()),
            400,
            "unknown variant `pending`",
        ),
        (
            "no group key",
            Some("application/json"),
            with(&|v| {
                v.as_object_mut().expect("object").remove("groupKey");
            }),
            400,
            "missing field `groupKey`",
        ),
    ];
    for (case, ct, body, want, says) in table {
        let (code, text, _) = post(ct, body);
        assert_eq!(code, want, "{case}: {text}");
        assert!(text.contains(says), "{case}: {text}");
    }
    // Oversized: declared (answered before the body is sent), and chunked
    // without a length (cut at the limit).
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let head = |more: &str| {
        format!(
            "POST /v1/alertmanager HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n{more}\r\n"
        )
    };
    let line = raw(
        s.port,
        &head("Content-Length: 2097152\r\n"),
        b"",
        Duration::from_secs(5),
    );
    assert!(line.contains("413"), "declared 2 MiB: {line:?}");
    let mut chunk = format!("{:x}\r\n", 1024 * 1024 + 1).into_bytes();
    chunk.extend(vec![b' '; 1024 * 1024 + 1]);
    let line = raw(
        s.port,
        &head("Transfer-Encoding: chunked\r\n"),
        &chunk,
        Duration::from_secs(5),
    );
    assert!(line.contains("413"), "chunked 1 MiB + 1: {line:?}");

    // Paths and methods.
    for (path, want) in [
        ("/v1/triage/../../etc/passwd", "400"),
        ("/v1/triage/ZZZZ", "400"),
        ("/v1/triage/0123456789ABCDEF", "400"),
        ("/v1/triage/0123456789abcdef", "404"),
        ("/v1/triage/0123456789abcdef.html", "404"),
        ("/nope", "404"),
    ] {
        let line = raw(
            s.port,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
            b"",
            Duration::from_secs(5),
        );
        assert!(line.contains(want), "GET {path}: {line}");
    }
    let r = http
        .put(format!("{url}/v1/alertmanager"))
        .bearer_auth(TOKEN)
        .send()
        .expect("put");
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(r.headers()["allow"], "POST");

    // Slow clients: a body that stops, headers that never end.
    let t0 = Instant::now();
    let line = raw(
        s.port,
        &format!("POST /v1/alertmanager HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"),
        b"{\"version\"",
        Duration::from_secs(15),
    );
    assert!(line.contains("408"), "slow body: {line:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(12),
        "slow body answered after {:?}",
        t0.elapsed()
    );
    let t0 = Instant::now();
    let line = raw(
        s.port,
        "POST /v1/alertmanager HTTP/1.1\r\nHost: x\r\n",
        b"",
        Duration::from_secs(15),
    );
    assert!(!line.contains("202"), "slow headers: {line:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(12),
        "slow headers held for {:?}",
        t0.elapsed()
    );

    // A label value that looks like a path is a label value: the triage id
    // is made by serve, and reports stay in their directory.
    let (code, text, _) = post(
        Some("application/json"),
        notification("g1", "../../etc/passwd").into_bytes(),
    );
    assert_eq!(code, 202, "{text}");
    let first: serde_json::Value = serde_json::from_str(&text).expect("json");
    let id1 = first["triages"][0]["id"].as_str().expect("id").to_string();
    assert!(
        id1.len() == 16 && id1.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id1}"
    );
    assert_eq!(first["triages"][0]["cluster"], "../../etc/passwd");
    wait_for(Duration::from_secs(10), || {
        let (_, v) = s.get_json("/v1/triage");
        (v["triages"][0]["phase"] == "running").then_some(())
    })
    .expect("the first triage runs");

    // The queue holds two; the third waits for none: 503 + Retry-After.
    let mut queued = Vec::new();
    for g in ["g2", "g3"] {
        let (code, text, _) = post(Some("application/json"), notification(g, "c1").into_bytes());
        assert_eq!(code, 202, "{g}: {text}");
        queued.push(text);
    }
    let (code, text, retry) = post(Some("application/json"), notification("g4", "c1").into_bytes());
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("queue is full"), "{text}");
    assert_eq!(retry.as_deref(), Some("30"));
    // A repeat of a queued group needs no room: it reuses its triage.
    let (code, text, _) = post(Some("application/json"), notification("g2", "c1").into_bytes());
    assert_eq!(code, 202, "{text}");
    let again: serde_json::Value = serde_json::from_str(&text).expect("json");
    let before: serde_json::Value = serde_json::from_str(&queued[0]).expect("json");
    assert_eq!(again["triages"][0]["reused"], true);
    assert_eq!(again["triages"][0]["id"], before["triages"][0]["id"]);
    let id2 = before["triages"][0]["id"].as_str().expect("id");
    let r = s.get(&format!("/v1/triage/{id2}")).expect("get");
    assert_eq!(r.status().as_u16(), 202);
    let v: serde_json::Value = serde_json::from_str(&r.text().expect("body")).expect("json");
    assert_eq!(v["triage"]["phase"], "queued");

    // A flood of new groups: each refused at once, memory flat.
    let rss0 = s.rss_kib();
    let flood = 400;
    let refused = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for t in 0..8 {
            let (refused, url) = (&refused, &url);
            sc.spawn(move || {
                let http = crate::support::serve::client();
                for i in 0..flood / 8 {
                    let body = notification(&format!("flood-{t}-{i}"), &format!("c{i}"));
                    let r = http
                        .post(format!("{url}/v1/alertmanager"))
                        .bearer_auth(TOKEN)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .expect("post");
                    if r.status().as_u16() == 503 {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(refused.into_inner(), flood);
    let rss1 = s.rss_kib();
    assert!(rss1 < rss0 + 20 * 1024, "RSS grew from {rss0} KiB to {rss1} KiB");
    let metrics = s.get("/metrics").expect("metrics").text().expect("text");
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(
        line("cptriage_serve_rejected_total{reason=\"queue_full\"}"),
        format!(
            "cptriage_serve_rejected_total{{reason=\"queue_full\"}} {}",
            flood + 1
        )
    );
    assert_eq!(
        line("cptriage_serve_rejected_total{reason=\"unauthorized\"}"),
        "cptriage_serve_rejected_total{reason=\"unauthorized\"} 4"
    );
    assert_eq!(
        line("cptriage_serve_triages_in_flight"),
        "cptriage_serve_triages_in_flight 1"
    );
    assert_eq!(
        line("cptriage_serve_triages_queued"),
        "cptriage_serve_triages_queued 2"
    );

    // SIGTERM while a diagnosis hangs: stops within the grace, abandons it.
    let (code, took) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{}", s.log_text());
    assert!(took < Duration::from_secs(8), "stopped after {took:?}");
    let log = s.log_text();
    assert!(
        log.contains("abandoned_queued=2") && log.contains("abandoned_running=1"),
        "{log}"
    );
    for l in log.lines() {
        assert!(l.starts_with("ts="), "not a log line: {l}");
    }
    assert!(log.lines().any(|l| l.contains("status=415")), "{log}");
    assert!(log.lines().any(|l| l.contains("status=401")), "{log}");
    assert!(!log.contains(TOKEN));
    // Nothing was written outside the reports directory.
    assert!(std::fs::read_dir(&reports).expect("reports").flatten().all(|e| {
        let n = e.file_name().into_string().unwrap_or_default();
        n.len() == 21 || n.len() == 22
    }));
    drop(hang);
}

#[test]
fn unsafe_or_wrong_setups_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").expect("write");
    let port = free_port().to_string();
    let any = format!("0.0.0.0:{port}");
    let short = short.to_str().expect("path");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--listen", &any], "refusing to listen on 0.0.0.0"),
        (vec!["--listen", "localhost"], "`--listen` takes IP:PORT"),
        (vec!["--token-file", short], "at least 16 characters"),
        (
            vec!["--token-file", "/nonexistent/token"],
            "--token-file /nonexistent/token",
        ),
        (vec!["--keep", "lots"], "`--keep` takes a count"),
        (vec!["--by", "not a label"], "--by"),
        (vec!["--selector", "{cluster="], "--selector"),
    ];
    for (more, says) in cases {
        let mut args = vec!["serve", "--prometheus", "http://127.0.0.1:9"];
        args.extend(more.iter().copied());
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{more:?}: {err}");
        assert!(err.contains(says), "{more:?}: {err}");
    }
    let out = run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--prometheus"));
}
