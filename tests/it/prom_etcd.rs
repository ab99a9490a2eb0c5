//! The acceptance test of `diagnose --prometheus`: a real 3-member etcd
//! (`/usr/bin/etcd`) scraped every second by a real Prometheus
//! (`/usr/bin/prometheus`, job `etcd`, the members' plain metrics ports) while
//! `cptriage record` records the same members over the same period. One
//! member's WAL fsync is delayed with strace (or, without strace, the leader
//! is stopped with SIGSTOP); `diagnose --prometheus` over the recording's
//! window, at the scrape interval, must name the same axis, sub-axis and
//! member as `diagnose --dump` on the recording.
//!
//! `CPTRIAGE_PROM_FAULT=stop` runs the SIGSTOP fault even where strace exists.
//!
//! Names: the recording names a member `etcd-127.0.0.1-PORT` (the default for
//! a plain metrics URL), Prometheus names it by its `instance` label
//! `127.0.0.1:PORT`; the test maps one to the other by the port.

use crate::support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::etcd::Cluster;
use support::prometheus::Prometheus;
use support::report::json_of;

fn strace_available() -> bool {
    Path::new("/usr/bin/strace").exists()
}

/// The port of a target name (`etcd-127.0.0.1-PORT` or `127.0.0.1:PORT`).
fn port_of(name: &str) -> String {
    name.rsplit([':', '-']).next().unwrap_or(name).to_string()
}

/// (leaf, axis, sub_axis, port of the member the localisation singles out
/// — "only NAME: …") of a verdict document, and the ports of every lit instance.
fn verdict(v: &serde_json::Value) -> ((String, String, String, String), Vec<String>) {
    let rc = &v["root_cause"];
    let s = |x: &serde_json::Value| x.as_str().unwrap_or("-").to_string();
    let only = rc["localisation"]
        .as_str()
        .and_then(|l| l.strip_prefix("only "))
        .and_then(|l| l.split(": ").next())
        .map(port_of)
        .unwrap_or_else(|| "-".into());
    let ports: Vec<String> = rc["instances"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i.as_str()).map(port_of).collect())
        .unwrap_or_default();
    ((s(&rc["leaf"]), s(&rc["axis"]), s(&rc["sub_axis"]), only), ports)
}

#[test]
fn prometheus_and_a_recording_name_the_same_failing_member() {
    assert!(
        Prometheus::available(),
        "/usr/bin/prometheus is not installed (scripts/test installs it)"
    );
    let c = Arc::new(Cluster::start(3, None));
    let targets: Vec<String> = c
        .members
        .iter()
        .map(|m| format!("'127.0.0.1:{}'", m.metrics_port))
        .collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: etcd\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    let prom = Prometheus::start(&config);
    let scraped = support::wait_for(Duration::from_secs(20), || {
        prom.query("up{job=\"etcd\"} == 1")
            .filter(|r| r.len() == 3)
            .map(|_| ())
    });
    assert!(
        scraped.is_some(),
        "prometheus never scraped the 3 members; log:\n{}",
        prom.log()
    );

    let leader = c.leader().expect("a leader");
    let faulty = (leader + 1) % 3;
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (c, stop) = (c.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut ok = 0;
            for n in 0..50_000usize {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if c.put(leader, &format!("k{}", n % 100), b"v", Duration::from_millis(800))
                    .is_ok()
                {
                    ok += 1;
                } else {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            ok
        })
    };

    // Record the same members over their plain metrics ports, 1 s apart.
    let caps = tempfile::tempdir().unwrap();
    let cap = caps.path().join("cap");
    let mut args = vec![
        "record".to_string(),
        "--out".into(),
        cap.display().to_string(),
        "--no-apiserver".into(),
        "--etcd".into(),
    ];
    args.extend((0..3).map(|i| c.metrics_url(i)));
    args.extend(["--interval", "1s", "--duration", "24s", "--timeout", "1s"].map(String::from));
    let mut rec = support::spawn_cptriage(&args);

    // A healthy first third (the baseline), then the fault on one member.
    std::thread::sleep(Duration::from_secs(8));
    // CPTRIAGE_PROM_FAULT=stop runs the fallback fault even where strace exists.
    let use_strace = strace_available() && std::env::var("CPTRIAGE_PROM_FAULT").as_deref() != Ok("stop");
    let (want_leaf, _fault) = if use_strace {
        let g = c.delay_fsync(faulty);
        ("etcd-disk", (faulty, Some(g)))
    } else {
        c.signal(leader, "STOP");
        ("etcd-raft", (leader, None))
    };
    let culprit = if want_leaf == "etcd-disk" { faulty } else { leader };
    let out = rec.0.take().unwrap().wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    let puts = load.join().unwrap_or(0);
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(puts > 10, "load too small: {puts} puts");
    // Let Prometheus scrape past the end of the recording.
    std::thread::sleep(Duration::from_secs(2));

    let dump_out = support::cptriage(&["diagnose", "--dump", cap.to_str().unwrap(), "-o", "json"], &[]);
    let dump = json_of(&dump_out, "diagnose --dump");
    let (from, to) = (
        dump["window"]["from"].as_str().unwrap().to_string(),
        dump["window"]["to"].as_str().unwrap().to_string(),
    );
    let started = std::time::Instant::now();
    let prom_out = support::cptriage(
        &[
            "diagnose",
            "--prometheus",
            &prom.url(),
            "--from",
            &from,
            "--to",
            &to,
            "--step",
            "1s",
            "-o",
            "json",
        ],
        &[],
    );
    eprintln!("diagnose --prometheus took {:?}", started.elapsed());
    let remote = json_of(&prom_out, "diagnose --prometheus");
    let (d, d_inst) = verdict(&dump);
    let (p, p_inst) = verdict(&remote);
    eprintln!("dump: {d:?} {d_inst:?}\nprometheus: {p:?} {p_inst:?}");
    let port = c.members[culprit].metrics_port.to_string();
    assert_eq!(d.0, want_leaf, "dump verdict: {}", dump["summary"]);
    let summaries = format!("prometheus: {}\ndump: {}", remote["summary"], dump["summary"]);
    if want_leaf == "etcd-disk" {
        // One member's disk: both single out the same member.
        assert_eq!(d.3, port, "dump verdict: {}", dump["summary"]);
        assert_eq!(p, d, "{summaries}");
    } else {
        // Raft instability is the cluster's: the stopped leader is among the
        // instances of both (it stopped answering); which survivor's counters
        // moved more within a window may differ between the two samplings.
        assert_eq!((&p.0, &p.1, &p.2), (&d.0, &d.1, &d.2), "{summaries}");
    }
    assert!(p_inst.contains(&port) && d_inst.contains(&port));
    assert_eq!(prom_out.status.code(), dump_out.status.code());

    // The sources are the members as Prometheus names them, found from `up`.
    let mut names: Vec<String> = remote["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["target"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    let mut want: Vec<String> = c
        .members
        .iter()
        .map(|m| format!("127.0.0.1:{}", m.metrics_port))
        .collect();
    want.sort();
    assert_eq!(names, want);
    assert!(remote["sources"][0]["version"]
        .as_str()
        .is_some_and(|v| v.starts_with("3.")));
    // The expressions sent carry the role's selector instead of `role`.
    let axis = remote["axes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["leaf"] == want_leaf)
        .unwrap();
    let expr = axis["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["expression"].as_str().filter(|_| e["role"] == "etcd"))
        .unwrap_or_default();
    assert!(
        expr.contains("job=~\".*etcd.*\"") && !expr.contains("role="),
        "{expr}"
    );
}
