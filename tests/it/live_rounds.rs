//! Scrape rounds over many targets: all concurrent, each with its own timeout,
//! so that a round with slow and unreachable targets lasts about one timeout,
//! not their sum; failures are evidence and the others go on.

use crate::support;

use std::time::{Duration, Instant};

use cptriage::source::ingest::Keep;
use cptriage::source::live::{self, FailureKind, LiveConfig, LiveEvent, TargetOptions};
use support::server::{Response, Server};

const ETCD_CAPTURE: &str = "etcd_nri_v3.5.21_k8s1.33.prom";

#[test]
fn a_round_of_eight_targets_with_slow_and_dead_ones_takes_about_one_timeout() {
    let body = support::realdata(ETCD_CAPTURE);
    let fast: Vec<Server> = (0..3)
        .map(|_| {
            let b = body.clone();
            Server::start(None, move |r| match r.path.as_str() {
                "/metrics" => Response::ok(b.clone()),
                _ => Response::ok("{\"health\":\"true\"}"),
            })
        })
        .collect();
    // Slow members: accept, then answer nothing for 30 s (metrics and health alike).
    let slow: Vec<Server> = (0..3)
        .map(|_| {
            Server::start(None, |_| Response {
                delay: Duration::from_secs(30),
                ..Response::ok("late")
            })
        })
        .collect();
    // Dead members: nothing listens on their port.
    let dead: Vec<u16> = (0..2).map(|_| support::free_port()).collect();
    let mut urls: Vec<String> = Vec::new();
    for (i, s) in fast.iter().enumerate() {
        urls.push(format!("fast{i}=http://127.0.0.1:{}", s.port()));
    }
    for (i, s) in slow.iter().enumerate() {
        urls.push(format!("slow{i}=http://127.0.0.1:{}", s.port()));
    }
    for (i, p) in dead.iter().enumerate() {
        urls.push(format!("dead{i}=http://127.0.0.1:{p}"));
    }
    let plan = live::plan_targets(&TargetOptions {
        etcd: urls,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(plan.targets.len(), 8);
    let timeout = Duration::from_millis(1500);
    let cfg = LiveConfig {
        targets: plan.targets,
        interval: Duration::from_millis(100),
        rounds: 2,
        timeout,
        keep: Keep::Names(["etcd_server_has_leader".to_string()].into()),
        retain_snapshots: true,
        limits: Default::default(),
        stop: None,
    };
    let mut events = Vec::new();
    let start = Instant::now();
    let res = live::scrape_rounds(&cfg, &mut |e| {
        events.push(match e {
            LiveEvent::RoundStarted { .. } => "start",
            LiveEvent::Snapshot(_) => "snapshot",
            LiveEvent::Failed(_) => "failed",
            LiveEvent::Switch(_) => "switch",
            LiveEvent::RoundDone(_) => "done",
        });
    });
    let total = start.elapsed();
    // Sequentially, each round would wait 3 slow targets × (metrics + health) × 1.5 s = 9 s.
    for r in &res.rounds {
        eprintln!(
            "round {} of 8 targets: {} ms (timeout {} ms)",
            r.round,
            r.elapsed_ms,
            timeout.as_millis()
        );
        assert!(r.elapsed_ms >= 1400, "the slow targets were waited for: {r:?}");
        assert!(r.elapsed_ms < 3000, "a round took more than 2 timeouts: {r:?}");
    }
    assert!(total < Duration::from_secs(7), "{total:?}");
    assert_eq!(events.iter().filter(|e| **e == "start").count(), 2);
    assert_eq!(events.iter().filter(|e| **e == "snapshot").count(), 6);
    assert_eq!(events.iter().filter(|e| **e == "failed").count(), 10);
    // The fast members were scraped in every round; the filter kept what was asked.
    assert_eq!(res.snapshots.len(), 6);
    let text = String::from_utf8_lossy(&res.snapshots[0].bytes).into_owned();
    assert!(text.contains("etcd_server_has_leader 1"), "{text}");
    assert!(
        text.contains("process_start_time_seconds"),
        "identity families are always kept"
    );
    assert!(
        !text.contains("etcd_disk_wal_fsync_duration_seconds"),
        "unwanted families are dropped"
    );
    for f in &res.failure_details {
        let want = if f.target.starts_with("slow") {
            FailureKind::Timeout
        } else {
            FailureKind::ConnectionRefused
        };
        assert_eq!(f.kind, want, "{f:?}");
        assert!(!f.target.starts_with("fast"));
    }
    assert!(
        res.failure_details
            .iter()
            .any(|f| f.error == "timed out after 1.5s"),
        "{:?}",
        res.failure_details
    );
    // Health: fast ones healthy, the others failing with a reason.
    for h in &res.health {
        assert_eq!(h.ok, h.target.starts_with("fast"), "{h:?}");
        assert_eq!(h.endpoint, "/health");
        if !h.ok {
            assert!(h.error.is_some());
        }
    }
    let ds = res.dataset(&Keep::All).unwrap();
    // The 3 fast targets answered; the 5 others are kept as evidence, with
    // their failed scrapes and no snapshot.
    assert_eq!(ds.targets.len(), 8);
    let answered: Vec<&str> = ds
        .targets
        .iter()
        .filter(|t| !t.snapshots.is_empty())
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(answered.len(), 3, "{answered:?}");
    assert!(answered.iter().all(|n| n.starts_with("fast")), "{answered:?}");
    for t in ds.targets.iter().filter(|t| t.snapshots.is_empty()) {
        assert_eq!(t.failures.len(), 2, "{}: {:?}", t.name, t.failures);
    }
    assert_eq!(res.targets.len(), 8);
    assert_eq!(res.targets[0].version.as_deref(), Some("3.5.21"));
    assert_eq!(res.targets[7].version, None);
}

#[test]
fn every_target_failing_is_exit_3_with_the_failures_recorded() {
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let port = support::free_port();
    let out = support::cptriage(
        &[
            "record",
            "--out",
            cap.to_str().unwrap(),
            "--etcd",
            &format!("http://127.0.0.1:{port}"),
            "--interval",
            "100ms",
            "--duration",
            "200ms",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    // Nothing listening is not fixed by waiting: the rounds stop after the
    // first, and say so.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stopped after the first round"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = cptriage::source::capture::manifest::parse(
        &std::fs::read_to_string(cap.join("manifest.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(m.failures.len(), 1);
    assert_eq!(m.targets[0].name, "etcd-127.0.0.1");
    assert!(
        m.failures[0].error.contains("connection refused"),
        "{:?}",
        m.failures
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("etcd-127.0.0.1: connection refused"), "{stdout}");
}

#[test]
fn a_recorded_capture_loads_like_the_live_rounds() {
    let body = support::realdata(ETCD_CAPTURE);
    let s = Server::start(None, move |r| match r.path.as_str() {
        "/metrics" => Response::ok(body.clone()),
        _ => Response::ok("{\"health\":\"true\"}"),
    });
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let url = format!("e1=http://127.0.0.1:{}", s.port());
    let out = support::cptriage(
        &[
            "record",
            "--out",
            cap.to_str().unwrap(),
            "--etcd",
            &url,
            "--interval",
            "100ms",
            "--duration",
            "300ms",
            "--all",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // --all keeps the exposition byte for byte.
    let files: Vec<_> = std::fs::read_dir(cap.join("e1"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 3);
    for f in &files {
        assert!(f.to_str().unwrap().ends_with(".prom.gz"));
        assert_eq!(
            cptriage::source::ingest::read_maybe_gzip(f).unwrap(),
            support::realdata(ETCD_CAPTURE)
        );
    }
    // The loader reads it without a warning about the layout (health/ is the one
    // directory it does not know yet: it is reported, not loaded as a target).
    let ds = cptriage::source::capture::load(
        &[cptriage::source::capture::DumpArg::parse(cap.to_str().unwrap()).unwrap()],
        &Keep::Names(["etcd_server_has_leader".to_string()].into()),
    )
    .unwrap();
    assert_eq!(ds.targets.len(), 1);
    assert_eq!(ds.targets[0].snapshots.len(), 3);
    assert_eq!(ds.targets[0].version.as_deref(), Some("3.5.21"));
    assert!(
        ds.warnings.iter().all(|w| w.origin.contains("health")),
        "{:?}",
        ds.warnings
    );
}

#[test]
fn an_interrupted_recording_is_still_a_readable_capture() {
    let body = support::realdata(ETCD_CAPTURE);
    let s = Server::start(None, move |r| match r.path.as_str() {
        "/metrics" => Response::ok(body.clone()),
        _ => Response::ok("{\"health\":\"true\"}"),
    });
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let mut child = support::etcd::Guard(Some(
        std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
            .args(["record", "--out", cap.to_str().unwrap(), "--no-apiserver"])
            .args(["--etcd", &format!("e1=http://127.0.0.1:{}", s.port())])
            .args(["--interval", "100ms", "--duration", "1h"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let got = support::wait_for(Duration::from_secs(20), || {
        let n = std::fs::read_dir(cap.join("e1")).map(|r| r.count()).unwrap_or(0);
        (n >= 3).then_some(n)
    });
    assert!(got.is_some(), "no snapshots written");
    // Killed mid-recording (as by Ctrl-C or a lost SSH session).
    if let Some(mut c) = child.0.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
    let ds = cptriage::source::capture::load(
        &[cptriage::source::capture::DumpArg::parse(cap.to_str().unwrap()).unwrap()],
        &Keep::Names(["etcd_server_has_leader".to_string()].into()),
    )
    .unwrap();
    assert_eq!(ds.targets.len(), 1);
    assert_eq!(ds.targets[0].role_reason, "capture manifest");
    assert!(
        ds.targets[0].snapshots.len() >= 2,
        "{:?}",
        ds.targets[0].snapshots.len()
    );
}
