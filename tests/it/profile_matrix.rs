//! Partial evidence: the shipped capture, every scenario and the lab
//! recordings diagnosed as real monitoring setups show them
//! (`testdata/profiles/*.yaml`, applied by `cptriage_testkit::profile`).
//! A root cause is named only from what was read: without etcd latency, APF
//! saturating is failing with its cause undecided, never the root cause;
//! without buckets, latency is judged on the histograms' means.

use std::path::{Path, PathBuf};

use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{Report, Status};
use cptriage_testkit::matrix;
use cptriage_testkit::profile::Profile;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn profile(name: &str) -> Profile {
    Profile::load(&root().join(format!("testdata/profiles/{name}.yaml"))).expect("profile loads")
}

/// The shipped capture diagnosed under `profile`.
fn shipped(profile_name: &str) -> Report {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let (snaps, failures) =
        matrix::read_capture(&root().join("testdata/captures/bitter-zone-etcd-first")).expect("capture");
    let src = matrix::Source {
        name: "bitter-zone-etcd-first".into(),
        kind: "capture",
        expect: matrix::Expect {
            status: "degraded".into(),
            axis: Some("etcd".into()),
            sub_axis: Some("disk".into()),
            may_recover: false,
        },
        snaps,
        failures,
    };
    matrix::diagnose(&src, &profile(profile_name), &rules).expect("diagnose")
}

fn axis(r: &Report) -> Option<String> {
    r.verdict.root_cause.as_ref().map(|rc| match &rc.sub_axis {
        Some(s) => format!("{}/{s}", rc.axis),
        None => rc.axis.clone(),
    })
}

#[test]
fn shipped_capture_without_buckets_names_etcd_from_the_means() {
    let r = shipped("no-buckets");
    assert_eq!(r.status, Status::Degraded, "{}", r.verdict.summary);
    assert_eq!(axis(&r).as_deref(), Some("etcd/disk"), "{}", r.verdict.summary);
    let rc = r.verdict.root_cause.as_ref().unwrap();
    assert_eq!(rc.instances, vec!["etcd-0".to_string()], "the slow member");
    assert!(
        r.verdict.downstream.iter().any(|d| d.axis == "apf"),
        "{:?}",
        r.verdict.downstream
    );
    let disk = r.axes.iter().find(|a| a.leaf == "etcd-disk").unwrap();
    let wal = disk
        .evidence
        .iter()
        .find(|e| e.signal == "etcd_wal_fsync_slow_ratio")
        .expect("the WAL signal is evidence");
    assert!(
        wal.note
            .as_deref()
            .unwrap_or("")
            .contains("judged on the mean (no buckets)"),
        "{:?}",
        wal.note
    );
    assert!(
        wal.description.starts_with("mean WAL fsync duration"),
        "{}",
        wal.description
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("judged on the mean")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn shipped_capture_with_sum_and_count_only_names_etcd_never_apf() {
    let r = shipped("sum-count-only");
    // etcd's own histograms are gone: the apiserver's etcd-request mean names
    // etcd, without a sub-axis.
    assert_eq!(r.status, Status::Degraded, "{}", r.verdict.summary);
    assert_eq!(axis(&r).as_deref(), Some("etcd"), "{}", r.verdict.summary);
    assert!(r.verdict.undecided.is_none());
}

#[test]
fn shipped_capture_without_etcd_latency_leaves_apf_undecided() {
    // AKS's minimal profile: request latency as _sum/_count, no etcd request
    // latency, no WAL or commit histograms. APF saturates; its cause cannot
    // be read.
    let r = shipped("aks-minimal");
    assert!(
        r.verdict.root_cause.is_none(),
        "a root cause over an unread axis: {}",
        r.verdict.summary
    );
    let u = r.verdict.undecided.as_ref().expect("undecided");
    // What etcd latency can cause is failing (APF's own families are not
    // kept; node-status lights on its mean latency), never a root cause.
    assert_ne!(u.failing.axis, "etcd", "{}", r.verdict.summary);
    assert_eq!(u.unread.len(), 1);
    assert_eq!(u.unread[0].cause, "etcd-latency");
    assert!(
        u.text.starts_with(
            "cause undecided: etcd latency could not be read (no etcd_request_duration_seconds_bucket"
        ),
        "{}",
        u.text
    );
    assert!(
        r.verdict.summary.contains("cause undecided"),
        "{}",
        r.verdict.summary
    );
    assert!(
        r.runbook[0].starts_with("To decide the cause, read etcd latency"),
        "{:?}",
        r.runbook
    );
}

#[test]
fn undecided_verdict_in_the_headline_json_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("aks");
    profile("aks-minimal")
        .apply_capture(&root().join("testdata/captures/bitter-zone-etcd-first"), &cap)
        .expect("apply profile");
    let cap = cap.to_string_lossy().to_string();
    let out = crate::support::run(&["diagnose", "--dump", &cap]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{page}");
    let first = page.lines().next().unwrap_or("");
    assert!(first.starts_with("DEGRADED P"), "{page}");
    // The headline (wrapped at 80 columns) says the cause is undecided, and why.
    let words: Vec<&str> = page.split_whitespace().collect();
    assert!(
        words.join(" ").contains(
            "— cause undecided: etcd latency could not be read (no etcd_request_duration_seconds_bucket"
        ),
        "{page}"
    );
    assert!(page.contains("  failing  "), "{page}");
    let out = crate::support::run(&["diagnose", "--dump", &cap, "-o", "json"]);
    assert_eq!(out.status.code(), Some(5));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["root_cause"].is_null(), "{}", v["root_cause"]);
    assert!(v["undecided"]["failing"]["axis"].is_string());
    assert_eq!(v["undecided"]["unread"][0]["cause"], "etcd-latency");
    // Validated with every object closed: each field written is described.
    let validator = crate::cli_diagnose::schema();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// Every scenario and the shipped capture under every profile: the verdict
/// is the full data's, or honestly weaker (`matrix::compare`: inconclusive;
/// healthy only where the full data is, or where every axis lit on it could
/// not be read and the report says what was not observed; a failing axis
/// only where the full data names one: the same, less specific, symptoms
/// only, or undecided with the unread cause named; ongoing or recovered as on
/// the full data). The full data itself gives the scenario's expected
/// verdict. The lab recordings' rows are produced by the `profile-matrix`
/// command (they take minutes); the rows computed here must be those of
/// docs/accuracy.md.
#[test]
fn every_profile_on_every_scenario_is_the_full_verdict_or_honestly_weaker() {
    let root = root();
    let rules = RuleSet::default_rules().expect("shipped rules");
    let profiles = Profile::load_dir(&root.join("testdata/profiles")).expect("profiles");
    assert!(profiles.len() >= 11, "{} profiles", profiles.len());
    let mut sources = matrix::scenario_sources(&root).expect("scenarios");
    assert!(sources.len() >= 20, "{} scenarios", sources.len());
    sources.push(matrix::capture_source(&root).expect("shipped capture"));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let cells = matrix::run(&sources, &profiles, &rules, threads);
    assert_eq!(cells.len(), sources.len() * (profiles.len() + 1));
    let problems = matrix::problems(&cells);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The rows of docs/accuracy.md are these.
    let table = matrix::table(&cells, &profiles);
    let doc = std::fs::read_to_string(root.join("docs/accuracy.md")).expect("docs/accuracy.md");
    let mut stale = Vec::new();
    for row in table.lines().skip(2) {
        if !doc.lines().any(|l| l == row) {
            stale.push(row);
        }
    }
    let header = table.lines().next().unwrap_or("");
    assert!(
        stale.is_empty() && doc.lines().any(|l| l == header),
        "the profile matrix of docs/accuracy.md is not current (regenerate it with \
         `cargo run -p cptriage-testkit --bin profile-matrix -- --write`):\n{}",
        stale.join("\n")
    );
}

/// A fleet row says when a recovery is not confirmed: etcd-raft-leader-loss
/// under AKS (has_leader scraped, elections and failed proposals not) stays
/// degraded with its recovery unconfirmed, and its row's root cause says so;
/// the full data, which reads the elections, has nothing to add.
#[test]
fn a_fleet_row_says_recovery_not_confirmed() {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let src = matrix::scenario_sources(&root())
        .expect("scenarios")
        .into_iter()
        .find(|s| s.name == "etcd-raft-leader-loss")
        .expect("etcd-raft-leader-loss scenario");
    let aks = matrix::diagnose(&src, &profile("aks-minimal"), &rules).expect("diagnose");
    assert!(
        aks.verdict.recovery_unconfirmed.is_some(),
        "{}",
        aks.verdict.summary
    );
    let row = cptriage::report::fleet::row("prod", &aks);
    assert_eq!(row[1], "degraded");
    assert_eq!(row[2], "etcd/raft (recovery not confirmed)", "{row:?}");
    let full = matrix::diagnose_full(&src, &rules).expect("diagnose");
    assert!(full.verdict.recovery_unconfirmed.is_none());
    let row = cptriage::report::fleet::row("prod", &full);
    assert_eq!(row[2], "etcd/raft", "{row:?}");
}
