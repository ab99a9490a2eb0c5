//! `diagnose --live --save DIR`: the rounds diagnosed live are written as a
//! capture, and `diagnose --dump DIR` on it gives the same verdict — the same
//! report, apart from where each snapshot's time came from.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use support::server::{Response, Server};

const ETCD_CAPTURE: &str = "etcd_nri_v3.5.21_k8s1.33.prom";

/// A member serving the real etcd capture; from its `lose_after`-th scrape on
/// it reports no leader and one more leader change per scrape.
fn member(lose_after: Option<usize>) -> Server {
    let body = String::from_utf8(support::realdata(ETCD_CAPTURE)).expect("utf-8 capture");
    let n = Arc::new(AtomicUsize::new(0));
    Server::start(None, move |r| match r.path.as_str() {
        "/metrics" => {
            let i = n.fetch_add(1, Ordering::SeqCst);
            match lose_after {
                Some(k) if i >= k => Response::ok(
                    body.replace("etcd_server_has_leader 1", "etcd_server_has_leader 0")
                        .replace(
                            "etcd_server_leader_changes_seen_total 1",
                            &format!("etcd_server_leader_changes_seen_total {}", 1 + i - k + 1),
                        ),
                ),
                _ => Response::ok(body.clone()),
            }
        }
        _ => Response::ok("{\"health\":\"true\"}"),
    })
}

/// The report without what legitimately differs between the two runs: where
/// each source's time and role came from (the scrape and `--etcd` live, the
/// file names and the manifest from the capture).
fn normalised(json: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(json).expect("json report");
    if let Some(sources) = v.get_mut("sources").and_then(|s| s.as_array_mut()) {
        for s in sources {
            if let Some(o) = s.as_object_mut() {
                o.remove("time_source");
                o.remove("role_reason");
            }
        }
    }
    v
}

#[test]
fn saved_rounds_give_the_same_verdict_as_live() {
    let members = [member(None), member(Some(2)), member(None)];
    let etcd: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(i, s)| format!("m{}=http://127.0.0.1:{}", i + 1, s.port()))
        .collect();
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("saved");
    let mut args = vec![
        "diagnose",
        "--live",
        "--save",
        cap.to_str().unwrap(),
        "--interval",
        "300ms",
        "--duration",
        "1800ms",
        "-o",
        "json",
        "--etcd",
    ];
    args.extend(etcd.iter().map(|s| s.as_str()));
    let live = support::cptriage(&args, &[]);
    let live_err = String::from_utf8_lossy(&live.stderr);
    assert_eq!(live.status.code(), Some(1), "{live_err}");
    assert!(live_err.contains("rounds saved to"), "{live_err}");
    let report = normalised(&live.stdout);
    let rc = &report["root_cause"];
    assert_eq!(rc["axis"], "etcd", "{report:#}");
    assert_eq!(rc["sub_axis"], "raft", "{report:#}");
    assert_eq!(rc["instances"], serde_json::json!(["m2"]), "{report:#}");

    // The capture: a manifest, 6 snapshots per member, health files.
    assert!(cap.join("manifest.yaml").is_file());
    for m in ["m1", "m2", "m3"] {
        assert_eq!(std::fs::read_dir(cap.join(m)).unwrap().count(), 6, "{m}");
        assert!(cap.join("health").join(format!("{m}.json")).is_file());
    }

    let dump = support::cptriage(&["diagnose", "--dump", cap.to_str().unwrap(), "-o", "json"], &[]);
    assert_eq!(
        dump.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert_eq!(normalised(&dump.stdout), report);

    // --save never writes into existing data.
    let again = support::cptriage(&args, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists and is not empty"));
}
