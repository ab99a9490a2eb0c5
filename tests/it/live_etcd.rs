//! `record` against a real 3-member etcd (Debian `etcd-server`, TLS with client
//! certificates, plain metrics port) under load driven by the test, with real
//! faults: the leader killed, two of three members stopped, the backend quota
//! filled until NOSPACE, one member's WAL fsync delayed with strace. Each
//! scenario records a capture, checks through the library that the capture
//! shows the fault, and checks the `diagnose` verdict on it (one line each).

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cptriage::source::capture::manifest;
use cptriage::source::capture::{self, DumpArg};
use cptriage::source::ingest::Keep;
use cptriage::source::Dataset;
use cptriage::store::is_stale;
use support::etcd::Cluster;

/// The scenarios run one at a time: three members with 1 s election timeouts
/// on two shared cores must not starve each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `record` into a fresh directory and returns it with the output.
fn record(flags: &[String], extra: &[String]) -> (tempfile::TempDir, PathBuf, std::process::Output) {
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let mut args: Vec<&str> = vec!["record", "--out"];
    let caps = cap.display().to_string();
    args.push(&caps);
    args.extend(flags.iter().map(String::as_str));
    args.extend(extra.iter().map(String::as_str));
    let out = support::cptriage(&args, &[]);
    (d, cap, out)
}

fn load(cap: &Path) -> Dataset {
    capture::load(&[DumpArg::parse(&cap.display().to_string()).unwrap()], &Keep::All).unwrap()
}

fn manifest_of(cap: &Path) -> manifest::Manifest {
    manifest::parse(&std::fs::read_to_string(cap.join("manifest.yaml")).unwrap()).unwrap()
}

/// The non-stale values of `metric{instance=inst, extra…}`, in time order.
fn values(ds: &Dataset, metric: &str, inst: &str, extra: &[(&str, &str)]) -> Vec<f64> {
    let s: Vec<_> = ds
        .store
        .by_name(metric)
        .filter(|s| s.labels.get("instance") == Some(inst))
        .filter(|s| extra.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert!(s.len() <= 1, "{metric} on {inst}: several series");
    s.first()
        .map(|s| s.points.iter().filter(|p| !is_stale(p.v)).map(|p| p.v).collect())
        .unwrap_or_default()
}

fn last(ds: &Dataset, metric: &str, inst: &str) -> f64 {
    *values(ds, metric, inst, &[])
        .last()
        .unwrap_or_else(|| panic!("no {metric} for {inst}"))
}

fn health(cap: &Path, target: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(cap.join("health").join(format!("{target}.json"))).unwrap())
        .unwrap()
}

/// `cptriage diagnose` on a capture: (status, root-cause leaf, summary).
fn verdict(cap: &Path) -> (String, String, String) {
    let out = support::cptriage(&["diagnose", "--dump", cap.to_str().unwrap(), "-o", "json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let r = (
        v["status"].as_str().unwrap_or("?").to_string(),
        v["root_cause"]["leaf"].as_str().unwrap_or("-").to_string(),
        format!("{} (exit {:?})", v["summary"], out.status.code()),
    );
    eprintln!("verdict on {}: {r:?}", cap.display());
    if let Ok(keep) = std::env::var("CPTRIAGE_KEEP_CAPTURES") {
        let to = Path::new(&keep).join(cap.parent().and_then(|p| p.file_name()).unwrap_or_default());
        let _ = std::process::Command::new("cp")
            .arg("-r")
            .arg(cap)
            .arg(&to)
            .status();
        eprintln!("kept {} as {}", cap.display(), to.display());
    }
    r
}

#[track_caller]
fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Puts small values to the members in `to`, round-robin, until stopped (at most 20 000).
fn load_thread(
    c: &Arc<Cluster>,
    to: Vec<usize>,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<(usize, usize)> {
    let (c, stop) = (c.clone(), stop.clone());
    std::thread::spawn(move || {
        let (mut ok, mut failed) = (0, 0);
        for n in 0..20_000usize {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let i = to[n % to.len()];
            match c.put(i, &format!("k{}", n % 100), b"v", Duration::from_millis(800)) {
                Ok(()) => ok += 1,
                Err(_) => {
                    failed += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        (ok, failed)
    })
}

fn timing(interval: &str, duration: &str) -> Vec<String> {
    ["--interval", interval, "--duration", duration, "--timeout", "1s"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn healthy_cluster_over_tls_and_the_plain_metrics_port() {
    let _s = serial();
    let c = Cluster::start(3, None);
    for k in 0..20 {
        c.put(k % 3, "warm", b"up", Duration::from_secs(2)).unwrap();
    }
    // Past the warm-up of a fresh process (the recording's window is 2 s,
    // up to 5 s when timed-out scrapes stretch the interval).
    c.wait_until_older_than(Duration::from_secs(6));
    let (_d, cap, out) = record(&c.record_flags(), &timing("300ms", "600ms"));
    assert_ok(&out);
    let ds = load(&cap);
    let v = verdict(&cap);
    assert_ne!(
        v.0, "degraded",
        "a healthy cluster is never given a failing axis: {v:?}"
    );
    let m = manifest_of(&cap);
    assert_eq!(m.targets.len(), 3);
    assert!(m.failures.is_empty(), "{:?}", m.failures);
    for (i, t) in m.targets.iter().enumerate() {
        assert_eq!(t.name, format!("m{i}"));
        assert_eq!(t.version.as_deref(), Some("3.4.23"));
        assert_eq!(t.url.as_deref(), Some(&*format!("{}/metrics", c.client_url(i))));
        assert_eq!(last(&ds, "etcd_server_has_leader", &t.name), 1.0);
        let h = health(&cap, &t.name);
        assert_eq!(h["tls_verified"], true);
        assert!(
            h["checks"].as_array().unwrap().iter().all(|x| x["ok"] == true),
            "{h}"
        );
        assert_eq!(h["checks"].as_array().unwrap().len(), 2, "one /health per round");
    }
    // Without a client certificate, or trusting another CA: each failure says which.
    let no_cert: Vec<String> = c.record_flags().into_iter().take(7).collect();
    let (_d3, cap3, out3) = record(&no_cert, &timing("100ms", "200ms"));
    assert_eq!(out3.status.code(), Some(3));
    let m3 = manifest_of(&cap3);
    assert!(
        m3.failures
            .iter()
            .all(|f| f.error.contains("rejected the client certificate")),
        "{:?}",
        m3.failures
    );
    let other = support::pki::Ca::new("another ca");
    let other_ca = support::pki::write(c.dir.path(), "other-ca.crt", &other.pem());
    let mut wrong_ca = c.record_flags();
    wrong_ca[6] = other_ca.display().to_string();
    let (_d4, cap4, out4) = record(&wrong_ca, &timing("100ms", "200ms"));
    assert_eq!(out4.status.code(), Some(3));
    let m4 = manifest_of(&cap4);
    assert!(
        m4.failures
            .iter()
            .all(|f| f.error.contains("unknown certificate authority")),
        "{:?}",
        m4.failures
    );
    let leaders: f64 = m
        .targets
        .iter()
        .map(|t| last(&ds, "etcd_server_is_leader", &t.name))
        .sum();
    assert_eq!(leaders, 1.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("verified"), "{stdout}");

    // The plain metrics port (kubeadm's http://127.0.0.1:2381), default names.
    let flags: Vec<String> = ["--no-apiserver".to_string(), "--etcd".into()]
        .into_iter()
        .chain((0..3).map(|i| c.metrics_url(i)))
        .collect();
    let (_d2, cap2, out2) = record(&flags, &timing("300ms", "600ms"));
    assert_ok(&out2);
    let m2 = manifest_of(&cap2);
    let names: Vec<String> = m2.targets.iter().map(|t| t.name.clone()).collect();
    let want: Vec<String> = (0..3)
        .map(|i| format!("etcd-127.0.0.1-{}", c.members[i].metrics_port))
        .collect();
    assert_eq!(names, want);
    let ds2 = load(&cap2);
    assert_eq!(last(&ds2, "etcd_server_has_leader", &names[0]), 1.0);
    assert!(String::from_utf8_lossy(&out2.stdout).contains("plain http"));
}

#[test]
fn leader_killed_during_the_recording() {
    let _s = serial();
    let c = Arc::new(Cluster::start(3, None));
    // Past the warm-up of a fresh process (the recording's window is 2 s,
    // up to 5 s when timed-out scrapes stretch the interval).
    c.wait_until_older_than(Duration::from_secs(6));
    let leader = c.leader().expect("a leader");
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let lt = load_thread(&c, others.clone(), &stop);
    let caps = tempfile::tempdir().unwrap();
    let cap = caps.path().join("cap");
    let mut args = vec!["record".to_string(), "--out".into(), cap.display().to_string()];
    args.extend(c.record_flags());
    args.extend(timing("500ms", "6s"));
    let mut rec = support::spawn_cptriage(&args);
    std::thread::sleep(Duration::from_millis(1200));
    // SIGKILL the leader (by its pid) while recording; the cluster guard reaps it.
    c.signal(leader, "KILL");
    let out = rec.0.take().unwrap().wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    let _ = lt.join();
    check_leader_killed(&c, leader, &others, &cap, out);
}

fn check_leader_killed(c: &Cluster, leader: usize, others: &[usize], cap: &Path, out: std::process::Output) {
    assert_ok(&out);
    let v = verdict(cap);
    assert_eq!(v.1, "etcd-raft", "{v:?}");
    let ds = load(cap);
    let m = manifest_of(cap);
    let dead = format!("m{leader}");
    // The killed member stops answering: failures with the reason.
    let fails: Vec<_> = m.failures.iter().filter(|f| f.target == dead).collect();
    assert!(!fails.is_empty(), "no failure recorded for the killed leader");
    // The scrape racing the kill may see the connection reset; the later ones are refused.
    assert!(
        fails
            .iter()
            .all(|f| f.error.contains("connection refused") || f.error.contains("connection reset")),
        "{fails:?}"
    );
    assert!(
        fails.last().unwrap().error.contains("connection refused"),
        "{fails:?}"
    );
    assert!(m.failures.iter().all(|f| f.target == dead), "{:?}", m.failures);
    let h = health(cap, &dead);
    assert!(h["checks"].as_array().unwrap().iter().any(|x| x["ok"] == false));
    // The survivors saw a new leader during the capture, and have one at the end.
    for &i in others {
        let t = format!("m{i}");
        let lc = values(&ds, "etcd_server_leader_changes_seen_total", &t, &[]);
        assert!(
            lc.last().unwrap() > lc.first().unwrap(),
            "{t}: leader changes {lc:?}"
        );
        assert_eq!(last(&ds, "etcd_server_has_leader", &t), 1.0, "{t}");
    }
    let new_leaders: f64 = others
        .iter()
        .map(|i| last(&ds, "etcd_server_is_leader", &format!("m{i}")))
        .sum();
    assert_eq!(new_leaders, 1.0);
    assert!(c.health(others[0]).is_some_and(|h| h.contains("true")));
}

#[test]
fn two_of_three_members_stopped() {
    let _s = serial();
    let c = Cluster::start(3, None);
    c.put(0, "a", b"1", Duration::from_secs(2)).unwrap();
    // Past the warm-up of a fresh process (the recording's window is 2 s,
    // up to 5 s when timed-out scrapes stretch the interval).
    c.wait_until_older_than(Duration::from_secs(6));
    let survivor = c.leader().map(|l| (l + 1) % 3).unwrap_or(0);
    let stopped: Vec<usize> = (0..3).filter(|&i| i != survivor).collect();
    for &i in &stopped {
        c.signal(i, "STOP");
    }
    let c = Arc::new(c);
    let stop = Arc::new(AtomicBool::new(false));
    let lt = load_thread(&c, vec![survivor], &stop);
    // Wait until the survivor has lost its leader (election timeout 1 s).
    let lost = support::wait_for(Duration::from_secs(15), || {
        (c.metric(survivor, "etcd_server_has_leader") == Some(0.0)).then_some(())
    });
    assert!(lost.is_some(), "survivor still has a leader");
    let (_d, cap, out) = record(&c.record_flags(), &timing("500ms", "2s"));
    stop.store(true, Ordering::Relaxed);
    let (_ok, failed_puts) = lt.join().unwrap();
    assert_ok(&out);
    assert!(failed_puts > 0, "puts without quorum should fail");
    let v = verdict(&cap);
    assert_eq!(v.1, "etcd-raft", "{v:?}");
    let ds = load(&cap);
    let m = manifest_of(&cap);
    let s = format!("m{survivor}");
    assert_eq!(last(&ds, "etcd_server_has_leader", &s), 0.0);
    let pf = values(&ds, "etcd_server_proposals_failed_total", &s, &[]);
    assert!(*pf.last().unwrap() > 0.0, "proposals failed: {pf:?}");
    for &i in &stopped {
        let t = format!("m{i}");
        let f: Vec<_> = m.failures.iter().filter(|f| f.target == t).collect();
        assert!(
            !f.is_empty() && f.iter().all(|f| f.error.contains("timed out")),
            "{t}: {f:?}"
        );
    }
    let h = health(&cap, &s);
    assert!(
        h["checks"].as_array().unwrap().iter().all(|x| x["ok"] == false),
        "{h}"
    );
}

#[test]
fn backend_quota_filled_until_nospace() {
    let _s = serial();
    let quota: u64 = 1 << 20;
    let c = Cluster::start(3, Some(quota));
    let big = vec![b'x'; 64 << 10];
    let mut nospace = None;
    for n in 0..200 {
        if let Err(e) = c.put(n % 3, &format!("big{n}"), &big, Duration::from_secs(5)) {
            nospace = Some(e);
            break;
        }
    }
    let e = nospace.expect("the quota was never reached");
    assert!(e.contains("database space exceeded"), "{e}");
    // Past the warm-up of a fresh process (the recording's window is 2 s,
    // up to 5 s when timed-out scrapes stretch the interval).
    c.wait_until_older_than(Duration::from_secs(6));

    let (_d, cap, out) = record(&c.record_flags(), &timing("300ms", "600ms"));
    let v = verdict(&cap);
    assert_eq!(v.1, "etcd-quota", "{v:?}");
    assert_ok(&out);
    let ds = load(&cap);
    for i in 0..3 {
        let t = format!("m{i}");
        assert_eq!(last(&ds, "etcd_server_quota_backend_bytes", &t), quota as f64);
        let size = last(&ds, "etcd_mvcc_db_total_size_in_bytes", &t);
        assert!(size >= quota as f64 * 0.9, "{t}: db size {size} vs quota {quota}");
        let h = health(&cap, &t);
        assert!(
            h["checks"].as_array().unwrap().iter().all(|x| x["ok"] == false),
            "{t}: {h}"
        );
    }
}

#[test]
fn one_member_fsync_delayed_with_strace() {
    let _s = serial();
    let c = Arc::new(Cluster::start(3, None));
    // Past the warm-up of a fresh process (the recording's window is 4 s,
    // more when slow scrapes stretch the interval).
    c.wait_until_older_than(Duration::from_secs(9));
    let leader = c.leader().expect("a leader");
    let slow = (leader + 1) % 3;
    let normal = (leader + 2) % 3;
    let _strace = c.delay_fsync(slow);
    std::thread::sleep(Duration::from_millis(700));
    let stop = Arc::new(AtomicBool::new(false));
    let lt = load_thread(&c, vec![leader], &stop);
    std::thread::sleep(Duration::from_millis(500));
    let (_d, cap, out) = record(&c.record_flags(), &timing("1s", "4s"));
    let v = verdict(&cap);
    assert_eq!(v.1, "etcd-disk", "{v:?}");
    stop.store(true, Ordering::Relaxed);
    let (ok, _) = lt.join().unwrap();
    assert_ok(&out);
    assert!(ok > 10, "load too small: {ok} puts");
    let ds = load(&cap);
    let slow_fraction = |inst: &str| {
        let f = "etcd_disk_wal_fsync_duration_seconds_bucket";
        let le = values(&ds, f, inst, &[("le", "0.064")]);
        let all = values(&ds, f, inst, &[("le", "+Inf")]);
        let total = all.last().unwrap() - all.first().unwrap();
        let fast = le.last().unwrap() - le.first().unwrap();
        assert!(total > 0.0, "{inst}: no fsync during the capture");
        (total - fast) / total
    };
    let s = slow_fraction(&format!("m{slow}"));
    let n = slow_fraction(&format!("m{normal}"));
    assert!(s > 0.8, "delayed member: only {s} of fsyncs slower than 64 ms");
    assert!(n < 0.2, "normal member: {n} of fsyncs slower than 64 ms");
}
