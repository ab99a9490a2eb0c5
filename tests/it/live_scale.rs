//! Live rounds at scale: 20 targets on 127.0.0.1, of which 12 serve real
//! captures (8 apiservers with a 3 MB `/metrics`, 4 etcd members), 3 answer only
//! after the timeout, 3 accept connections and never answer, and 2 are closed
//! ports. Each round must last about one timeout, the healthy targets must
//! arrive complete in every round, and the others must be failures with a reason.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cptriage::rules::load::RuleSet;
use cptriage::source::expfmt;
use cptriage::source::ingest::Keep;
use cptriage::source::live::{self, FailureKind, LiveConfig, TargetOptions};
use cptriage::source::Role;
use support::server::{Response, Server};

const APISERVER_CAPTURE: &str = "apiserver_nri_v1.35.0.prom";
const ETCD_CAPTURE: &str = "etcd_nri_v3.6.6_k8s1.35.prom";

/// Accepts connections and holds them open without reading or answering.
struct Silent {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Silent {
    fn start() -> Silent {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        l.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !stop2.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Silent {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The series (name and labels, sorted) a capture holds in the kept families.
fn kept_series(body: &[u8], keep: &Keep) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut keep_fn = |f: &str| keep.wants(f);
    let mut sink = |s: &expfmt::SampleRef<'_>| {
        // The store drops empty label values, as Prometheus does.
        let mut l: Vec<String> = s
            .labels
            .iter()
            .filter(|l| !l.value.is_empty())
            .map(|l| format!("{}={}", l.name, l.value))
            .collect();
        l.sort();
        out.insert(format!("{}{{{}}}", s.name, l.join(",")));
    };
    expfmt::parse(body, &mut keep_fn, &mut sink).expect("real capture parses");
    out
}

#[test]
fn twenty_targets_with_slow_silent_and_closed_ones_take_about_one_timeout_per_round() {
    let api_body = Arc::new(support::realdata(APISERVER_CAPTURE));
    let etcd_body = Arc::new(support::realdata(ETCD_CAPTURE));
    let serve = |body: &Arc<Vec<u8>>, health: &'static str| {
        let b = body.clone();
        Server::start(None, move |r| {
            if r.path == "/metrics" {
                Response::ok(b.as_slice())
            } else {
                Response::ok(health)
            }
        })
    };
    let apis: Vec<Server> = (0..8).map(|_| serve(&api_body, "ok")).collect();
    let etcds: Vec<Server> = (0..4)
        .map(|_| serve(&etcd_body, "{\"health\":\"true\"}"))
        .collect();
    // Slow: a valid answer, but 3 s after the request (the timeout is 1 s).
    let slow: Vec<Server> = (0..3)
        .map(|_| {
            let b = etcd_body.clone();
            Server::start(None, move |_| Response {
                delay: Duration::from_secs(3),
                ..Response::ok(b.as_slice())
            })
        })
        .collect();
    let silent: Vec<Silent> = (0..3).map(|_| Silent::start()).collect();
    let closed: Vec<u16> = (0..2).map(|_| support::free_port()).collect();

    let mut urls = Vec::new();
    for (i, s) in apis.iter().enumerate() {
        urls.push(format!("api{i:02}=http://127.0.0.1:{}", s.port()));
    }
    for (i, s) in etcds.iter().enumerate() {
        urls.push(format!("etcd{i}=http://127.0.0.1:{}", s.port()));
    }
    for (i, s) in slow.iter().enumerate() {
        urls.push(format!("slow{i}=http://127.0.0.1:{}", s.port()));
    }
    for (i, s) in silent.iter().enumerate() {
        urls.push(format!("silent{i}=http://127.0.0.1:{}", s.port));
    }
    for (i, p) in closed.iter().enumerate() {
        urls.push(format!("closed{i}=http://127.0.0.1:{p}"));
    }
    let mut plan = live::plan_targets(&TargetOptions {
        etcd: urls,
        ..Default::default()
    })
    .expect("plan");
    assert_eq!(plan.targets.len(), 20);
    for t in plan.targets.iter_mut().filter(|t| t.name.starts_with("api")) {
        t.role = Role::Apiserver;
        t.role_reason = "given by the test".into();
        t.health_urls = vec![format!("{}z", t.health_urls[0])];
    }

    let rules = RuleSet::default_rules().expect("default rules");
    let keep = Keep::Names(rules.referenced_metrics());
    let timeout = Duration::from_secs(1);
    let rounds = 3;
    let cfg = LiveConfig {
        targets: plan.targets,
        interval: Duration::from_millis(200),
        rounds,
        timeout,
        keep: keep.clone(),
        retain_snapshots: true,
        limits: Default::default(),
        stop: None,
    };
    let start = Instant::now();
    let res = live::scrape_rounds(&cfg, &mut |_| {});
    let total = start.elapsed();

    // Rounds: all targets at once, so each lasts one timeout (the slow and
    // silent ones) plus slack, not the sum of 6 timeouts.
    assert_eq!(res.rounds.len(), rounds);
    for r in &res.rounds {
        eprintln!(
            "round {}: {} ms for 20 targets (timeout 1 s)",
            r.round, r.elapsed_ms
        );
        assert!(r.elapsed_ms >= 900, "the slow targets were waited for: {r:?}");
        assert!(
            r.elapsed_ms < 2500,
            "a round took far more than one timeout: {r:?}"
        );
    }
    assert!(total < Duration::from_secs(10), "{total:?}");

    // Healthy targets: one snapshot per round each, every kept series present
    // with one point per round.
    assert_eq!(res.scraped, 12 * rounds);
    let mut per_target: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &res.snapshots {
        *per_target.entry(s.target.as_str()).or_default() += 1;
    }
    assert_eq!(per_target.len(), 12, "{per_target:?}");
    assert!(per_target.values().all(|&n| n == rounds), "{per_target:?}");
    let ds = res.dataset(&keep).expect("dataset");
    // The 8 targets that never answered are kept as evidence, without snapshots.
    assert_eq!(ds.targets.len(), 20);
    assert_eq!(ds.targets.iter().filter(|t| !t.snapshots.is_empty()).count(), 12);
    assert!(ds
        .targets
        .iter()
        .filter(|t| t.snapshots.is_empty())
        .all(|t| t.failures.len() == rounds));
    let want_api = kept_series(&api_body, &keep);
    let want_etcd = kept_series(&etcd_body, &keep);
    assert!(want_api.len() > 5000, "{}", want_api.len());
    assert!(want_api
        .iter()
        .any(|s| s.starts_with("apiserver_request_duration_seconds_bucket")));
    assert!(!want_api.iter().any(|s| s.starts_with("apiserver_response_sizes")));
    for t in ds.targets.iter().filter(|t| !t.snapshots.is_empty()) {
        let want = if t.name.starts_with("api") {
            &want_api
        } else {
            &want_etcd
        };
        assert_eq!(
            t.role,
            if t.name.starts_with("api") {
                Role::Apiserver
            } else {
                Role::Etcd
            },
            "{}",
            t.name
        );
        assert_eq!(t.snapshots.len(), rounds, "{}", t.name);
        let mut got = BTreeSet::new();
        for s in ds.store.series() {
            // `up` is cptriage's own record of each scrape, not the target's.
            if s.labels.get("instance") != Some(t.name.as_str()) || s.labels.metric_name() == Some("up") {
                continue;
            }
            assert_eq!(s.points.len(), rounds, "{} {:?}", t.name, s.labels);
            let mut l: Vec<String> = s
                .labels
                .iter()
                .filter(|l| !matches!(&*l.name, "__name__" | "instance" | "role"))
                .map(|l| format!("{}={}", l.name, l.value))
                .collect();
            l.sort();
            got.insert(format!(
                "{}{{{}}}",
                s.labels.metric_name().unwrap_or(""),
                l.join(",")
            ));
        }
        let missing: Vec<_> = want.difference(&got).take(5).collect();
        let extra: Vec<_> = got.difference(want).take(5).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{}: kept series differ: missing {missing:?}, unexpected {extra:?}",
            t.name
        );
    }

    // The others: a failure in every round, with a reason.
    let mut failed: BTreeMap<&str, Vec<&live::TargetFailure>> = BTreeMap::new();
    for f in &res.failure_details {
        failed.entry(f.target.as_str()).or_default().push(f);
    }
    assert_eq!(failed.len(), 8, "{:?}", failed.keys());
    for (name, fs) in &failed {
        assert_eq!(fs.len(), rounds, "{name}: {fs:?}");
        let (kind, reason) = if name.starts_with("closed") {
            (FailureKind::ConnectionRefused, "connection refused")
        } else {
            (FailureKind::Timeout, "timed out after 1s")
        };
        for f in fs {
            assert_eq!(f.kind, kind, "{f:?}");
            assert!(f.error.contains(reason), "{f:?}");
        }
    }
    assert_eq!(res.failures.len(), 8 * rounds);
    assert_eq!(res.targets.len(), 20);
    // Health: only the healthy targets pass, the others carry an error.
    for h in &res.health {
        let healthy = h.target.starts_with("api") || h.target.starts_with("etcd");
        assert_eq!(h.ok, healthy, "{h:?}");
        assert_eq!(h.error.is_some(), !healthy, "{h:?}");
    }
}
