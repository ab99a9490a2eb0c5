//! Finding one's way around the command line: `diagnose PATH`, the error with
//! no source, relative times and `--since`, `rules export` without `--format`,
//! and live mode's etcdctl spellings, scheme hint, fail-fast first round and
//! one warning line per failing target.

use crate::support;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use support::cptriage;

const DEMO: &str = "testdata/captures/bitter-zone-etcd-first";

fn demo() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DEMO)
        .display()
        .to_string()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", text(&out.stdout), text(&out.stderr)))
}

#[test]
fn a_positional_path_is_a_dump() {
    let d = demo();
    let a = cptriage(&["diagnose", &d, "-o", "json"], &[]);
    let b = cptriage(&["diagnose", "--dump", &d, "-o", "json"], &[]);
    assert_eq!(a.status.code(), Some(1), "{}", text(&a.stderr));
    assert_eq!(a.status.code(), b.status.code());
    let (mut ja, mut jb) = (json(&a), json(&b));
    // Only the generation time may differ.
    ja["generated"] = serde_json::Value::Null;
    jb["generated"] = serde_json::Value::Null;
    assert_eq!(ja, jb);
    assert_eq!(ja["root_cause"]["axis"], "etcd");
    // A positional path with `--prometheus` is a contradiction, refused.
    let c = cptriage(&["diagnose", &d, "--prometheus", "http://127.0.0.1:9"], &[]);
    assert_eq!(c.status.code(), Some(2), "{}", text(&c.stderr));
}

#[test]
fn no_source_names_all_three() {
    let out = cptriage(&["diagnose"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    for want in ["cptriage diagnose DIR", "--dump", "--live", "--prometheus"] {
        assert!(e.contains(want), "lacks {want}: {e}");
    }
}

#[test]
fn since_keeps_the_last_part_of_a_capture() {
    let d = demo();
    let full = json(&cptriage(&["diagnose", &d, "-o", "json"], &[]));
    let last = json(&cptriage(&["diagnose", &d, "--since", "2m", "-o", "json"], &[]));
    let t = |v: &serde_json::Value, k: &str| {
        chrono::DateTime::parse_from_rfc3339(v["window"][k].as_str().unwrap())
            .unwrap()
            .timestamp()
    };
    assert_eq!(t(&last, "to"), t(&full, "to"));
    assert_eq!(t(&last, "to") - t(&last, "from"), 120);
    assert!(t(&full, "to") - t(&full, "from") > 120);
    // `--since` with `--from` is a contradiction; a zero or bad duration is refused.
    let both = cptriage(&["diagnose", &d, "--since", "2m", "--from", "now-1h"], &[]);
    assert_eq!(both.status.code(), Some(2));
    for bad in ["0s", "2 minutes"] {
        let o = cptriage(&["diagnose", &d, "--since", bad], &[]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
    }
}

#[test]
fn relative_times_are_read_against_the_clock() {
    let d = demo();
    // The demo capture is from 2026-01-01: "up to now" covers all of it.
    let all = cptriage(
        &[
            "diagnose",
            &d,
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "now",
            "-o",
            "json",
        ],
        &[],
    );
    assert_eq!(all.status.code(), Some(1), "{}", text(&all.stderr));
    let to = json(&all)["window"]["to"].as_str().unwrap().to_string();
    let now = chrono::Utc::now().timestamp();
    let to = chrono::DateTime::parse_from_rfc3339(&to).unwrap().timestamp();
    assert!((now - to).abs() < 60, "to {to} vs now {now}");
    // "The last 30 minutes" of a capture from January holds none of it.
    let none = cptriage(&["diagnose", &d, "--from", "now-30m"], &[]);
    assert_eq!(none.status.code(), Some(2), "{}", text(&none.stderr));
    assert!(
        text(&none.stderr).contains("before it starts"),
        "{}",
        text(&none.stderr)
    );
    // A malformed relative time names the forms that are accepted.
    let bad = cptriage(&["diagnose", &d, "--from", "now-30"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("now-30m"), "{}", text(&bad.stderr));
}

#[test]
fn rules_export_needs_no_format() {
    let a = cptriage(&["rules", "export"], &[]);
    let b = cptriage(&["rules", "export", "--format", "prometheus"], &[]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    assert!(text(&a.stdout).contains("groups:"));
}

/// A port with nothing listening.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn every_target_refusing_fails_after_the_first_round() {
    let port = closed_port();
    let etcd = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let out = cptriage(
        &[
            "diagnose",
            "--live",
            "--etcd",
            &etcd,
            "--interval",
            "2s",
            "--duration",
            "30s",
        ],
        &[],
    );
    let took = t0.elapsed();
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {e}");
    assert!(e.contains("stopped after the first round"), "{e}");
    // The scheme hint, not `relative URL without a base`.
    assert!(e.contains("has no scheme: using http://"), "{e}");
    assert!(!e.contains("relative URL"), "{e}");
    // Without a kubeconfig the apiserver is skipped, and said so.
    assert!(e.contains("apiserver not scraped"), "{e}");
    // Role-neutral wording.
    assert!(
        e.contains("nothing listening: process down or wrong port?"),
        "{e}"
    );
    assert!(!e.contains("member down"), "{e}");

    // `record` stops too, and says so.
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("cap");
    let t0 = Instant::now();
    let out = cptriage(
        &[
            "record",
            "--out",
            cap.to_str().unwrap(),
            "--no-apiserver",
            "--etcd",
            &format!("http://{etcd}"),
            "--interval",
            "2s",
            "--duration",
            "30s",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(text(&out.stderr).contains("stopped after the first round"));
}

#[test]
fn etcdctl_environment_names_the_members() {
    let port = closed_port();
    let out = cptriage(
        &[
            "diagnose",
            "--live",
            "--no-apiserver",
            "--interval",
            "1s",
            "--duration",
            "2s",
        ],
        &[("ETCDCTL_ENDPOINTS", &format!("http://127.0.0.1:{port}"))],
    );
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(e.contains("etcd members from ETCDCTL_ENDPOINTS (1)"), "{e}");
    assert!(e.contains("warning: etcd-127.0.0.1: connection refused"), "{e}");
    // `--endpoints` takes a comma-separated list, as etcdctl does.
    let (p1, p2) = (closed_port(), closed_port());
    let out = cptriage(
        &[
            "diagnose",
            "--live",
            "--no-apiserver",
            "--endpoints",
            &format!("http://127.0.0.1:{p1},http://127.0.0.1:{p2}"),
            "--interval",
            "1s",
            "--duration",
            "2s",
        ],
        &[],
    );
    let e = text(&out.stderr);
    let warned: Vec<&str> = e.lines().filter(|l| l.starts_with("warning: etcd-")).collect();
    assert_eq!(warned.len(), 2, "two members, one line each: {e}");
    assert!(
        warned[0].contains(&format!("-{p1}:")) || warned[1].contains(&format!("-{p1}:")),
        "{e}"
    );
    assert!(
        warned[0].contains(&format!("-{p2}:")) || warned[1].contains(&format!("-{p2}:")),
        "{e}"
    );
}

#[test]
fn a_target_failing_every_round_is_one_warning_line() {
    // A server that accepts and never answers: every round times out, which
    // may pass, so the rounds go on; the warning is printed once.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    l.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let mut held = Vec::new();
        let t0 = Instant::now();
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(30) {
            match l.accept() {
                Ok((mut s, _)) => {
                    let mut buf = [0u8; 512];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
                    let _ = s.read(&mut buf);
                    held.push(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    let out = cptriage(
        &[
            "diagnose",
            "--live",
            "--no-apiserver",
            "--etcd",
            &format!("http://127.0.0.1:{port}"),
            "--interval",
            "600ms",
            "--duration",
            "2400ms",
            "--timeout",
            "300ms",
        ],
        &[],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    let warnings = e
        .lines()
        .filter(|l| l.starts_with("warning: etcd-127.0.0.1:"))
        .count();
    assert_eq!(warnings, 1, "{e}");
    assert!(!e.contains("stopped after the first round"), "{e}");
    assert!(e.contains("every scrape failed"), "{e}");
}

/// Time and duration flags are checked once, when the command line is read,
/// the same way for every command: a zero or negative step or `--since` and
/// a bad time are usage errors naming the flag; `--to` before `--from` is
/// refused by `diagnose` (dumps and Prometheus) and `query` alike.
#[test]
fn window_flags_are_checked_at_the_edge() {
    let d = demo();
    for (args, want) in [
        (vec!["diagnose", &d, "--step", "0s"], "--step"),
        (vec!["diagnose", &d, "--since", "0m"], "--since"),
        (vec!["diagnose", &d, "--from", "yesterday"], "--from"),
        (vec!["query", "--dump", &d, "--at", "12:00", "up"], "--at"),
        (
            vec![
                "query",
                "--dump",
                &d,
                "--from",
                "now-1h",
                "--to",
                "now",
                "--step=-5s",
                "up",
            ],
            "--step",
        ),
    ] {
        let out = cptriage(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        let e = text(&out.stderr);
        assert!(e.contains(want), "{args:?}: the error does not name {want}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
    }
    let later = "2026-01-01T01:00:00Z";
    let earlier = "2026-01-01T00:00:00Z";
    for args in [
        vec!["diagnose", &d, "--from", later, "--to", earlier],
        vec![
            "diagnose",
            "--prometheus",
            "http://127.0.0.1:9",
            "--from",
            later,
            "--to",
            earlier,
        ],
        vec!["query", "--dump", &d, "--from", later, "--to", earlier, "up"],
    ] {
        let out = cptriage(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("`--to` is before `--from`"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// Every duration and size flag is parsed when the command line is read: a
/// bad value is a usage error naming the flag and the value, before anything
/// is read or scraped; nothing is written on stdout.
#[test]
fn duration_and_size_flags_are_checked_at_the_edge() {
    use support::test::Test;
    let d = demo();
    let live = [
        "diagnose",
        "--live",
        "--no-apiserver",
        "--etcd",
        "http://127.0.0.1:9",
    ];
    for (args, flag, why) in [
        (&live[..], ["--interval", "0s"], "must be greater than zero"),
        (&live[..], ["--timeout", "4 s"], "invalid duration `4 s`"),
        (&live[..], ["--duration", "soon"], "invalid duration `soon`"),
        (&live[..], ["--max-body-total", "12XB"], "unknown unit `XB`"),
        (
            &["diagnose", "--dump", &d][..],
            ["--max-body", "0"],
            "must be greater than zero",
        ),
        (
            &["diagnose", "--prometheus", "http://127.0.0.1:9"][..],
            ["--prometheus-timeout", "0s"],
            "must be greater than zero",
        ),
        (
            &["query", "--prometheus", "http://127.0.0.1:9", "up"][..],
            ["--prometheus-max-response", "lots"],
            "invalid size `lots`",
        ),
        (
            &["rules", "export"][..],
            ["--for", "2 minutes"],
            "invalid duration",
        ),
    ] {
        Test::new()
            .args(args)
            .args(&flag)
            .status(2)
            .stdout("")
            .stderr_has(flag[0])
            .stderr_has(why)
            .run();
    }
    // The defaults themselves parse, and say so in the help.
    Test::new()
        .args(&["diagnose", "--help"])
        .stdout_has("[default: 5s]")
        .stdout_has("[default: 4s]")
        .stdout_has("[default: 1GiB]")
        .stdout_has("[default: 512MiB]")
        .stdout_has("[default: 256MiB]")
        .stdout_has("[default: 30s]")
        .run();
}
