//! Verdicts with audit logs (`--audit`): generated `audit.k8s.io/v1` logs per
//! axis, alone and beside the shipped metric scenarios (generated from real
//! captures, as `gen-scenario` writes them). Alone, each fault names its axis
//! (etcd without a sub-axis: the audit logs cannot see inside etcd); a log
//! without faults is not healthy (audit logs cannot prove health) and a log
//! without latency annotations does not name etcd. Beside metrics, the audit
//! logs confirm the axis the metrics name, or say that they disagree.

use crate::support;

use support::run as cptriage;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cptriage::eval::seam;
use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{CorroborationKind, GapKind, Report, Status};
use cptriage::source::audit::{self, AuditConfig};
use cptriage::source::ingest::Keep;
use cptriage::source::Dataset;
use cptriage_testkit::scenario;
use cptriage_testkit::scenario::audit::{AuditFault, AuditGen, STORM_AGENT};

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z, the scenarios' start

fn rules() -> RuleSet {
    RuleSet::default_rules().expect("shipped rules")
}

/// A scenario's dataset and its expected root-cause onset (ms).
fn scenario_ds(name: &str, rules: &RuleSet) -> (Dataset, i64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/scenarios")
        .join(name);
    let spec = scenario::load_spec(&path).unwrap();
    let onset = spec.start_ms
        + spec
            .spec
            .expect
            .as_ref()
            .and_then(|e| e.root_cause_onset)
            .map(|d| d.millis())
            .unwrap_or(0);
    let ds = scenario::dataset(spec, name, &Keep::Names(rules.referenced_metrics())).unwrap();
    (ds, onset)
}

/// Writes a generated log of `minutes` from T0 with `fault` from `fault_from`.
fn log(dir: &Path, fault: AuditFault, minutes: i64, fault_from: i64) -> PathBuf {
    let p = dir.join(format!("{fault:?}-{fault_from}.log"));
    let g = AuditGen {
        start: T0,
        duration: minutes * 60_000,
        rate: 30.0,
        fault,
        fault_from,
        seed: 11,
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    g.write(&mut f).unwrap();
    p
}

fn add_audit(ds: &mut Dataset, p: &Path) {
    let cfg = AuditConfig {
        resolution: ds.typical_interval().unwrap_or(15_000),
        clip: ds.window(),
        ..AuditConfig::default()
    };
    audit::load_into(ds, &[p.to_path_buf()], &cfg).unwrap();
}

fn audit_only(fault: AuditFault) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let p = log(dir.path(), fault, 8, T0 + 4 * 60_000);
    let mut ds = Dataset::default();
    add_audit(&mut ds, &p);
    engine::diagnose(&rules(), &ds, &Options::default()).unwrap()
}

fn axis(r: &Report) -> String {
    let rc = r.verdict.root_cause.as_ref().expect("a root cause");
    match &rc.sub_axis {
        Some(s) => format!("{}/{s}", rc.axis),
        None => rc.axis.clone(),
    }
}

#[test]
fn audit_only_names_the_axis_of_each_fault_from_its_onset() {
    for (fault, want) in [
        (AuditFault::EtcdSlow, "etcd"),
        (AuditFault::ApfQueue, "apf"),
        (AuditFault::Webhook, "admission"),
        (AuditFault::AuthStorm, "auth"),
    ] {
        let r = audit_only(fault);
        assert_eq!(r.status, Status::Degraded, "{fault:?}: {}", r.verdict.summary);
        assert_eq!(axis(&r), want, "{fault:?}: {}", r.verdict.summary);
        let onset = r.verdict.root_cause.as_ref().unwrap().onset.unwrap();
        assert!(
            (T0 + 4 * 60_000..=T0 + 4 * 60_000 + 30_000).contains(&onset),
            "{fault:?}: onset {onset} vs fault at 4m"
        );
        assert_eq!(
            r.verdict.root_cause.as_ref().unwrap().instances,
            vec!["audit".to_string()]
        );
        // No metric axis was checked: the etcd sub-axes say so.
        assert!(r
            .gaps
            .iter()
            .any(|g| g.subject == "etcd" && g.kind == GapKind::RoleAbsent));
        if want == "etcd" {
            let c = &r.verdict.corroboration;
            assert_eq!(c.len(), 1, "{c:?}");
            assert_eq!(c[0].kind, CorroborationKind::Confirms);
            assert!(c[0].value.unwrap() > 0.9, "{c:?}");
            assert!(
                r.verdict
                    .assumptions
                    .iter()
                    .any(|a| a.contains("could not be checked")),
                "etcd's sub-axes are named as unchecked: {:?}",
                r.verdict.assumptions
            );
        }
    }
}

#[test]
fn audit_only_without_a_fault_is_not_healthy_and_without_annotations_not_etcd() {
    let r = audit_only(AuditFault::None);
    assert_eq!(r.status, Status::Inconclusive, "{}", r.verdict.summary);
    assert!(
        r.verdict.summary.contains("audit logs alone cannot show"),
        "{}",
        r.verdict.summary
    );
    assert!(r
        .axes
        .iter()
        .all(|a| a.state != cptriage::rules::report::AxisState::Lit));

    let r = audit_only(AuditFault::EtcdSlowUnannotated);
    assert_ne!(
        r.verdict.root_cause.as_ref().map(|c| c.axis.as_str()),
        Some("etcd"),
        "{}",
        r.verdict.summary
    );
    assert!(
        r.gaps
            .iter()
            .any(|g| g.subject == "audit" && g.message.contains("apiserver.latency.k8s.io")),
        "{:?}",
        r.gaps
    );
    assert!(
        r.gaps
            .iter()
            .any(|g| g.subject == "audit_etcd_time_share" && g.kind == GapKind::NotExposed),
        "{:?}",
        r.gaps
    );
}

/// Metrics scenario + audit log of the same fault: same verdict, confirmed;
/// + another fault a minute later: same root cause, and the disagreement said.
#[test]
fn audit_beside_metrics_confirms_or_disagrees_per_axis() {
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    for (scen, fault, other, want) in [
        (
            "etcd-disk-slow-one-member.yaml",
            AuditFault::EtcdSlow,
            AuditFault::ApfQueue,
            "etcd/disk",
        ),
        (
            "apf-queue-full.yaml",
            AuditFault::ApfQueue,
            AuditFault::EtcdSlow,
            "apf",
        ),
        (
            "admission-webhook-timeouts.yaml",
            AuditFault::Webhook,
            AuditFault::EtcdSlow,
            "admission",
        ),
        (
            "auth-401-storm.yaml",
            AuditFault::AuthStorm,
            AuditFault::None,
            "auth",
        ),
    ] {
        let (base, onset) = scenario_ds(scen, &rules);
        let minutes = (base.window().unwrap().1 - T0) / 60_000 + 1;
        let metrics_only = engine::diagnose(&rules, &base, &Options::default()).unwrap();
        assert_eq!(axis(&metrics_only), want, "{scen}");
        assert!(metrics_only.verdict.corroboration.is_empty());
        assert!(metrics_only.audit.is_none());
        assert!(
            !metrics_only.gaps.iter().any(|g| g.subject == "audit"),
            "no audit gap without --audit"
        );

        let (mut ds, _) = scenario_ds(scen, &rules);
        add_audit(&mut ds, &log(dir.path(), fault, minutes, onset));
        let r = engine::diagnose(&rules, &ds, &Options::default()).unwrap();
        assert_eq!(axis(&r), want, "{scen} + {fault:?}: {}", r.verdict.summary);
        let rc = r.verdict.root_cause.as_ref().unwrap();
        let rc0 = metrics_only.verdict.root_cause.as_ref().unwrap();
        assert!(
            (rc.onset.unwrap() - rc0.onset.unwrap()).abs() <= 15_000,
            "{scen}: onset moved"
        );
        let c = &r.verdict.corroboration;
        assert_eq!(c.len(), 1, "{scen}: {c:?}");
        assert_eq!(c[0].kind, CorroborationKind::Confirms, "{scen}: {}", c[0].text);
        assert!(c[0].from.unwrap() >= onset - 15_000, "{scen}: {c:?}");

        // The other fault starts a minute after the metrics' onset: when
        // audit logs see a fault first, its axis is the root cause by onset
        // like any other evidence; here the metrics lit first.
        let (mut ds, _) = scenario_ds(scen, &rules);
        add_audit(&mut ds, &log(dir.path(), other, minutes, onset + 60_000));
        let r = engine::diagnose(&rules, &ds, &Options::default()).unwrap();
        assert_eq!(
            axis(&r),
            want,
            "{scen} + {other:?}: the metrics still decide: {}",
            r.verdict.summary
        );
        let c = &r.verdict.corroboration;
        assert_eq!(c.len(), 1, "{scen}: {c:?}");
        match other {
            AuditFault::None => {
                assert_eq!(
                    c[0].kind,
                    CorroborationKind::DoesNotConfirm,
                    "{scen}: {}",
                    c[0].text
                );
            }
            _ => {
                assert_eq!(c[0].kind, CorroborationKind::Contradicts, "{scen}: {}", c[0].text);
                assert!(c[0].other_axis.is_some());
                assert!(
                    r.warnings.iter().any(|w| w.contains("disagree")),
                    "{scen}: the disagreement is a warning: {:?}",
                    r.warnings
                );
            }
        }
    }
}

/// A LIST storm in the metrics and the storm's client in the audit logs:
/// the cause names the client by its user agent; without the audit logs it
/// names none (the metrics have no user agent), and a log without the storm
/// names a background client nowhere.
#[test]
fn a_list_storm_beside_audit_logs_names_the_client_by_user_agent() {
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    let scen = "list-storm.yaml";
    let cause = |r: &Report| {
        let rc = r.verdict.root_cause.as_ref().expect("a root cause");
        assert_eq!(axis(r), "expensive-reads", "{}", r.verdict.summary);
        rc.localisation.clone().unwrap_or_default()
    };
    let (base, onset) = scenario_ds(scen, &rules);
    let minutes = (base.window().unwrap().1 - T0) / 60_000 + 1;
    let metrics_only = cause(&engine::diagnose(&rules, &base, &Options::default()).unwrap());
    assert!(!metrics_only.contains("user agent"), "{metrics_only}");

    let (mut ds, _) = scenario_ds(scen, &rules);
    add_audit(&mut ds, &log(dir.path(), AuditFault::ListStorm, minutes, onset));
    let with_storm = cause(&engine::diagnose(&rules, &ds, &Options::default()).unwrap());
    assert!(
        with_storm.contains(&format!("user agent {STORM_AGENT}")),
        "the storm's client is named: {with_storm}"
    );

    let (mut ds, _) = scenario_ds(scen, &rules);
    add_audit(&mut ds, &log(dir.path(), AuditFault::None, minutes, onset));
    let quiet = cause(&engine::diagnose(&rules, &ds, &Options::default()).unwrap());
    assert!(!quiet.contains("user agent"), "no client's LISTs surged: {quiet}");
}

#[test]
fn cli_audit_alone_and_beside_a_dump_json_valid_exit_codes() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/verdict-v1.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = log(dir.path(), AuditFault::EtcdSlow, 6, T0 + 105_000);
    let ps = p.to_str().unwrap();
    // Alone: etcd named from the audit logs, exit 1.
    let out = cptriage(&["diagnose", "--audit", ps, "-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(doc["root_cause"]["axis"], "etcd");
    assert!(doc["audit"]["slow_requests"].as_u64().unwrap() > 100);
    assert_eq!(doc["corroboration"][0]["kind"], "confirms");
    // Beside the shipped capture (etcd disk slow from 00:01:45): confirmed.
    let out = cptriage(&[
        "diagnose",
        "--dump",
        "testdata/captures/bitter-zone-etcd-first",
        "--audit",
        ps,
        "-o",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(validator.iter_errors(&doc).next().is_none());
    assert_eq!(doc["root_cause"]["sub_axis"], "disk");
    assert_eq!(
        doc["corroboration"][0]["kind"], "confirms",
        "{}",
        doc["corroboration"]
    );
    assert!(doc["sources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["role"] == "audit"));
    // The first page says it; the wide rendering shows the audit section.
    let capture = "testdata/captures/bitter-zone-etcd-first";
    let out = cptriage(&["diagnose", "--dump", capture, "--audit", ps]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the audit logs confirm etcd/disk"), "{text}");
    let out = cptriage(&["diagnose", "--dump", capture, "--audit", ps, "--wide"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("the audit logs confirm etcd/disk"), "{text}");
    let wide = cptriage(&[
        "diagnose",
        "--dump",
        "testdata/captures/bitter-zone-etcd-first",
        "--audit",
        ps,
        "--wide",
    ]);
    let text = String::from_utf8_lossy(&wide.stdout);
    assert!(
        text.contains("Audit logs") && text.contains("confirms: the audit logs confirm etcd/disk"),
        "{text}"
    );
    // A path that does not exist: usage error; nothing readable: unusable data.
    let out = cptriage(&["diagnose", "--audit", "/nonexistent/audit.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/audit.log"));
    let g = dir.path().join("garbage.log");
    std::fs::write(&g, "not json\n{\"kind\":\n").unwrap();
    let out = cptriage(&["diagnose", "--audit", g.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "inconclusive");
    assert!(String::from_utf8_lossy(&out.stderr).contains("garbage.log:1"));
}

/// A "remote" evaluator (as Prometheus is) that records what it is asked:
/// it evaluates over the same store, so verdicts can be compared.
struct Remote {
    asked: Mutex<Vec<String>>,
}

impl seam::SignalEvaluator for Remote {
    fn instantiate(
        &self,
        text: &str,
        window: i64,
        role: cptriage::source::Role,
    ) -> Result<promql_parser::parser::Expr, seam::QueryError> {
        seam::LocalStore.instantiate(text, window, role)
    }
    fn range(&self, store: &cptriage::store::Store, queries: &[seam::RangeQuery]) -> Vec<seam::QueryResult> {
        let mut asked = self.asked.lock().unwrap();
        for q in queries {
            asked.push(q.expr.to_string());
        }
        seam::LocalStore.range(store, queries)
    }
}

/// Beside `--prometheus`, audit signals are evaluated over the local store
/// (their counters are in no Prometheus), everything else remotely.
#[test]
fn beside_a_remote_source_audit_signals_stay_local() {
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    let (mut ds, onset) = scenario_ds("etcd-disk-slow-one-member.yaml", &rules);
    let minutes = (ds.window().unwrap().1 - T0) / 60_000 + 1;
    add_audit(&mut ds, &log(dir.path(), AuditFault::EtcdSlow, minutes, onset));
    let remote = Remote {
        asked: Mutex::new(Vec::new()),
    };
    let routed = seam::LocalRole::new(&remote, cptriage::source::Role::Audit);
    let r = engine::diagnose_with(&rules, &ds, &routed, &Options::default()).unwrap();
    let asked = remote.asked.lock().unwrap();
    assert!(!asked.is_empty());
    assert!(
        asked.iter().all(|e| !e.contains("cptriage_audit")),
        "audit queries went remote"
    );
    assert!(asked.iter().any(|e| e.contains("etcd_disk_wal_fsync")));
    let local = engine::diagnose(&rules, &ds, &Options::default()).unwrap();
    assert_eq!(r.verdict, local.verdict);
    assert_eq!(r.verdict.corroboration[0].kind, CorroborationKind::Confirms);
}
