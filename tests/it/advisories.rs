//! The advisories of the shipped rules on real captures (testdata/realdata),
//! positive and negative: a Kine backend (Kine's own `kine_sql_*` families
//! beside a real apiserver's), events dominating the shared etcd, and an
//! apiserver already storing into two etcd clusters (the real 1.19.7 capture:
//! `etcd_db_total_size_in_bytes` for :4001 and :4002, kube-up's events etcd).

use crate::support::realcap;

use std::path::Path;

use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{GapKind, Report};
use cptriage::source::capture::{self, DumpArg};
use cptriage::source::ingest::Keep;

/// Kine's families as K3s exposes them (k3s-io/kine pkg/metrics).
const KINE: &str = "# HELP kine_sql_total Total number of SQL operations
# TYPE kine_sql_total counter
kine_sql_total{error_code=\"\"} 38211
kine_sql_total{error_code=\"constraint failed\"} 3
# HELP kine_sql_time_seconds Length of time per SQL operation
# TYPE kine_sql_time_seconds histogram
kine_sql_time_seconds_bucket{error_code=\"\",le=\"0.005\"} 37000
kine_sql_time_seconds_bucket{error_code=\"\",le=\"0.05\"} 38100
kine_sql_time_seconds_bucket{error_code=\"\",le=\"+Inf\"} 38211
kine_sql_time_seconds_sum{error_code=\"\"} 61.2
kine_sql_time_seconds_count{error_code=\"\"} 38211
# HELP kine_compact_total Total number of compactions
# TYPE kine_compact_total counter
kine_compact_total{result=\"success\"} 12
";

fn diagnose_text(dir: &Path, text: &str) -> Report {
    let p = dir.join("apiserver.prom");
    std::fs::write(&p, text).unwrap();
    let rules = RuleSet::default_rules().unwrap();
    let arg = DumpArg::parse(&format!("apiserver:api={}", p.display())).unwrap();
    let ds = capture::load(&[arg], &Keep::Names(rules.referenced_metrics())).unwrap();
    engine::diagnose(&rules, &ds, &Options::default()).unwrap()
}

fn capture(name: &str) -> String {
    String::from_utf8(realcap::read(name)).unwrap()
}

fn ids(r: &Report) -> Vec<&str> {
    r.advisories.iter().map(|a| a.id.as_str()).collect()
}

#[test]
fn kine_backend_positive_and_negative() {
    let dir = tempfile::tempdir().unwrap();
    let base = capture("apiserver_nri_v1.30.0.prom");
    let r = diagnose_text(dir.path(), &base);
    assert!(!ids(&r).contains(&"kine-backend"), "{:?}", ids(&r));
    let disk = r.axes.iter().find(|a| a.leaf == "etcd-disk").unwrap();
    assert!(!disk.note.as_deref().unwrap_or("").contains("not applicable"));

    let r = diagnose_text(dir.path(), &format!("{base}{KINE}"));
    let a = r
        .advisories
        .iter()
        .find(|a| a.id == "kine-backend")
        .expect("kine advisory");
    assert!(
        a.advice.contains("no ErrCompacted window") && a.advice.contains("polling SQL"),
        "{}",
        a.advice
    );
    assert!(a.falsifier.contains("etcd_server_has_leader"));
    assert_eq!(a.evidence[0].signal, "kine_backend");
    assert_eq!(a.evidence[0].value, Some(2.0), "two kine_sql_total series");
    for leaf in ["etcd-quota", "etcd-disk", "etcd-raft", "etcd-commit-stall"] {
        let ax = r.axes.iter().find(|a| a.leaf == leaf).unwrap();
        assert!(
            ax.note
                .as_deref()
                .unwrap_or("")
                .contains("not applicable (kine-backend)"),
            "{leaf}: {:?}",
            ax.note
        );
        let gaps: Vec<_> = r.gaps.iter().filter(|g| g.subject == leaf).collect();
        assert_eq!(gaps.len(), 1, "{leaf}: {gaps:?}");
        assert!(
            gaps[0].kind == GapKind::NotChecked && gaps[0].message.contains("Kine"),
            "{:?}",
            gaps[0]
        );
    }
    // Leaves that still apply to a SQL backend are not marked.
    let other = r.axes.iter().find(|a| a.leaf == "etcd-other").unwrap();
    assert!(!other.note.as_deref().unwrap_or("").contains("not applicable"));
}

#[test]
fn record_keeps_kine_families() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k3s.prom");
    std::fs::write(&p, format!("{}{KINE}", capture("apiserver_nri_v1.30.0.prom"))).unwrap();
    let keep = cptriage::source::live::families::default_keep();
    let arg = DumpArg::parse(&format!("apiserver:api={}", p.display())).unwrap();
    let ds = capture::load(&[arg], &keep).unwrap();
    for f in [
        "kine_sql_total",
        "kine_sql_time_seconds_bucket",
        "kine_compact_total",
    ] {
        assert!(
            ds.store.by_name(f).next().is_some(),
            "{f} kept by record's default families"
        );
    }
}

#[test]
fn events_split_positive_and_negative() {
    let dir = tempfile::tempdir().unwrap();
    let base = capture("apiserver_nri_v1.30.0.prom");
    // The real capture: 115 events among its objects, one storage cluster.
    let r = diagnose_text(dir.path(), &base);
    assert!(!ids(&r).contains(&"events-split"), "{:?}", ids(&r));
    assert!(!ids(&r).contains(&"events-already-split"), "{:?}", ids(&r));
    // Events grown to most of the objects.
    let grown = base.replace(
        "apiserver_storage_objects{resource=\"events\"} 115",
        "apiserver_storage_objects{resource=\"events\"} 50000",
    );
    assert_ne!(grown, base);
    let r = diagnose_text(dir.path(), &grown);
    let a = r
        .advisories
        .iter()
        .find(|a| a.id == "events-split")
        .expect("events-split");
    assert!(
        a.advice.contains("--etcd-servers-overrides=/events#"),
        "{}",
        a.advice
    );
    assert!(
        a.advice.contains("before 1.28"),
        "the version caveat: {}",
        a.advice
    );
    let share = a
        .evidence
        .iter()
        .find(|e| e.signal == "events_object_share")
        .unwrap();
    assert!(share.value.unwrap() > 0.9, "{share:?}");
    assert!(!ids(&r).contains(&"events-already-split"));
}

#[test]
fn an_apiserver_with_an_events_etcd_is_already_split() {
    let dir = tempfile::tempdir().unwrap();
    // 1.19.7: etcd_db_total_size_in_bytes for :4001 (7.3 MB) and :4002 (1.2 MB).
    let base = capture("apiserver_datadog_v1.19.7.prom");
    let r = diagnose_text(dir.path(), &base);
    let a = r
        .advisories
        .iter()
        .find(|a| a.id == "events-already-split")
        .expect("already split");
    assert_eq!(a.evidence[0].value, Some(2.0));
    assert!(a.advice.contains(":4002"), "{}", a.advice);
    // Even with events dominating, splitting is not advised again.
    let grown = base.replace(
        "etcd_object_counts{resource=\"events\"} 0",
        "etcd_object_counts{resource=\"events\"} 90000",
    );
    assert_ne!(grown, base);
    let r = diagnose_text(dir.path(), &grown);
    assert!(ids(&r).contains(&"events-already-split"));
    assert!(!ids(&r).contains(&"events-split"), "{:?}", ids(&r));
    // One endpoint (1.23), and a three-member cluster of similar sizes
    // (OpenShift): not split.
    for name in [
        "apiserver_datadog_v1.23.0.prom",
        "openshift-apiserver_qubership.prom",
    ] {
        let r = diagnose_text(dir.path(), &capture(name));
        assert!(
            !ids(&r).contains(&"events-already-split"),
            "{name}: {:?}",
            ids(&r)
        );
    }
}

#[test]
fn tree_shows_the_advisories_with_advice_and_falsifier() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args(["tree"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for id in ["kine-backend", "events-split", "events-already-split"] {
        assert!(text.contains(&format!("[{id}]")), "{id}");
    }
    assert_eq!(text.matches("     advice: ").count(), 3);
    assert_eq!(text.matches("     falsifier: ").count(), 3);
    assert!(
        text.contains("audit_etcd_time_share"),
        "audit signals appear in the tree's conditions"
    );
}

#[test]
fn already_split_shows_each_members_database_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    for (role, name, file) in [
        ("apiserver", "api", "apiserver_datadog_v1.19.7.prom"),
        ("etcd", "etcd-main", "etcd_nri_v3.4.13_k8s1.19.prom"),
        ("etcd", "etcd-events", "etcd_nri_v3.4.3_k8s1.17.prom"),
    ] {
        let p = dir.path().join(file);
        std::fs::write(&p, realcap::read(file)).unwrap();
        args.push(DumpArg::parse(&format!("{role}:{name}={}", p.display())).unwrap());
    }
    let rules = RuleSet::default_rules().unwrap();
    let ds = capture::load(&args, &Keep::Names(rules.referenced_metrics())).unwrap();
    let r = engine::diagnose(&rules, &ds, &Options::default()).unwrap();
    let a = r
        .advisories
        .iter()
        .find(|a| a.id == "events-already-split")
        .expect("already split");
    let sizes = a
        .evidence
        .iter()
        .find(|e| e.signal == "etcd_member_db_size")
        .unwrap();
    assert!(
        sizes.value_text.contains("etcd-main ") && sizes.value_text.contains("etcd-events "),
        "{}",
        sizes.value_text
    );
}

#[test]
fn advisories_in_json_match_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.prom");
    std::fs::write(&p, format!("{}{KINE}", capture("apiserver_datadog_v1.19.7.prom"))).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args([
            "diagnose",
            "--dump",
            &format!("apiserver:api={}", p.display()),
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/verdict-v1.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let ids: Vec<&str> = doc["advisories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["kine-backend", "events-already-split"]);
    // An advisory never changes the exit code or the status: the same
    // capture without Kine's families is judged alike.
    let q = dir.path().join("b.prom");
    std::fs::write(&q, capture("apiserver_datadog_v1.19.7.prom")).unwrap();
    let plain = std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args([
            "diagnose",
            "--dump",
            &format!("apiserver:api={}", q.display()),
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    let plain_doc: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert_eq!(plain_doc["status"], doc["status"]);
    assert_eq!(out.status.code(), plain.status.code());
}

/// Event writes dominating the apiserver's etcd writes (1.26–1.33 `type`
/// label, and 1.34+ `resource`) advise the split; a pods-heavy write mix
/// does not.
#[test]
fn events_write_share_from_the_apiservers_etcd_requests() {
    for (label, events_rate, pods_rate, want) in [
        ("type", 40.0, 5.0, true),
        ("resource", 40.0, 5.0, true),
        ("type", 2.0, 30.0, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("api");
        std::fs::create_dir(&t).unwrap();
        for i in 0..6 {
            let secs = 1_767_225_600 + i * 15;
            let body = format!(
                "# TYPE etcd_request_duration_seconds histogram
etcd_request_duration_seconds_bucket{{operation=\"create\",{label}=\"events\",le=\"+Inf\"}} {e}
etcd_request_duration_seconds_sum{{operation=\"create\",{label}=\"events\"}} 1
etcd_request_duration_seconds_count{{operation=\"create\",{label}=\"events\"}} {e}
etcd_request_duration_seconds_bucket{{operation=\"update\",{label}=\"pods\",le=\"+Inf\"}} {p}
etcd_request_duration_seconds_sum{{operation=\"update\",{label}=\"pods\"}} 1
etcd_request_duration_seconds_count{{operation=\"update\",{label}=\"pods\"}} {p}
",
                e = events_rate * 15.0 * i as f64,
                p = pods_rate * 15.0 * i as f64
            );
            std::fs::write(t.join(format!("{secs}.prom")), body).unwrap();
        }
        let rules = RuleSet::default_rules().unwrap();
        let arg = DumpArg::parse(&format!("apiserver:api={}", t.display())).unwrap();
        let ds = capture::load(&[arg], &Keep::Names(rules.referenced_metrics())).unwrap();
        let r = engine::diagnose(&rules, &ds, &Options::default()).unwrap();
        assert_eq!(
            ids(&r).contains(&"events-split"),
            want,
            "{label} {events_rate}/{pods_rate}: {:?}",
            ids(&r)
        );
        if want {
            let a = r.advisories.iter().find(|a| a.id == "events-split").unwrap();
            let e = a
                .evidence
                .iter()
                .find(|e| e.signal == "events_write_share")
                .unwrap();
            let v = e.value.unwrap();
            assert!((v - 40.0 / 45.0).abs() < 0.01, "{label}: {v}");
        }
    }
}
