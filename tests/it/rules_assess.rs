//! The pure assessment (signal values → timelines → onsets → verdict), fed with
//! hand-built per-step values for the small tree in `testdata/rules/good/mini.yaml`.

use std::path::Path;

use cptriage::rules::report::*;
use cptriage::rules::verdict::{assess, AssessInput, BaselinePlan, SignalInput};
use cptriage::rules::{load_file, RuleSet};
use cptriage::store::Millis;

use crate::values::{self, flat, sig, step_fn};

const T0: Millis = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const STEP: Millis = 15_000;

// Signal indices in mini.yaml.
const ERRORS: usize = 0;
const APF: usize = 1;
const ETCD_LAT: usize = 2;
const WAL: usize = 3;
const LEADER: usize = 4;

fn rules() -> RuleSet {
    load_file(Path::new("testdata/rules/good/mini.yaml")).expect("mini rules load")
}

fn steps(n: usize) -> Vec<Millis> {
    values::grid(T0, STEP, n)
}

/// A healthy cluster: one apiserver, three etcd members.
fn healthy(n: usize) -> Vec<SignalInput> {
    vec![
        sig(vec![("apiserver-0", flat(n, 0.001))]),
        sig(vec![("apiserver-0", flat(n, 0.0))]),
        sig(vec![("apiserver-0", flat(n, 0.02))]),
        sig(vec![
            ("etcd-0", flat(n, 0.007)),
            ("etcd-1", flat(n, 0.006)),
            ("etcd-2", flat(n, 0.008)),
        ]),
        sig(vec![
            ("etcd-0", flat(n, 1.0)),
            ("etcd-1", flat(n, 1.0)),
            ("etcd-2", flat(n, 1.0)),
        ]),
    ]
}

fn input(n: usize, signals: Vec<SignalInput>) -> AssessInput {
    let s = steps(n);
    AssessInput {
        baseline: BaselinePlan::window_start(&s),
        steps: s,
        step: STEP,
        at_index: n - 1,
        range: 60_000,
        debounce: 2,
        signals,
        sources: Vec::new(),
        warnings: Vec::new(),
        gaps: Vec::new(),
    }
}

fn axis<'a>(r: &'a Report, leaf: &str) -> &'a AxisReport {
    r.axes.iter().find(|a| a.leaf == leaf).expect("leaf in report")
}

#[test]
fn bitter_zone_etcd_first_names_etcd_with_apf_downstream() {
    let n = 40;
    let mut s = healthy(n);
    // etcd-2's disk slows at step 20; the apiserver sees slow etcd; APF rejects 90 s later.
    s[WAL] = sig(vec![
        ("etcd-0", flat(n, 0.007)),
        ("etcd-1", flat(n, 0.006)),
        ("etcd-2", step_fn(n, 0.008, 1.2, 20, n)),
    ]);
    // The apiserver notices slow etcd two steps before the disk metric crosses.
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.02, 0.9, 18, n))]);
    s[APF] = sig(vec![("apiserver-0", step_fn(n, 0.0, 30.0, 26, n))]);
    s[ERRORS] = sig(vec![("apiserver-0", step_fn(n, 0.001, 0.3, 26, n))]);
    let r = assess(&rules(), &input(n, s));

    assert_eq!(r.status, Status::Degraded);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!((rc.axis.as_str(), rc.sub_axis.as_deref()), ("etcd", Some("disk")));
    // The disk leaf needs "etcd slow?" and "disk slow?"; wal_fsync answers both from step 20.
    assert_eq!(rc.onset, Some(T0 + 20 * STEP));
    assert!(rc.instances.contains(&"etcd-2".to_string()), "{:?}", rc.instances);
    assert!(!rc.instances.contains(&"etcd-0".to_string()));
    let loc = rc.localisation.as_deref().unwrap_or("");
    assert_eq!(loc, "only etcd-2: p99 WAL fsync 1.2 s, others 6 ms–7 ms");
    assert_eq!(
        rc.instances,
        ["etcd-2"],
        "the disk leaf names the member, not the apiserver"
    );

    assert_eq!(r.verdict.downstream.len(), 1, "{:?}", r.verdict.downstream);
    let d = &r.verdict.downstream[0];
    assert_eq!(d.axis, "apf");
    assert_eq!(d.lag_ms, 6 * STEP);
    assert_eq!(d.note, "apf lit 90 s after etcd/disk");
    assert!(r.verdict.ties.is_empty());
    // The generic etcd leaf lit first (steps 18–19) but is superseded by the
    // specific one; joint is not lit.
    assert_eq!(axis(&r, "etcd-other").onset, Some(T0 + 18 * STEP));
    assert!(axis(&r, "etcd-other")
        .note
        .as_deref()
        .unwrap_or("")
        .contains("superseded by etcd-disk"));
    assert_eq!(axis(&r, "joint").state, AxisState::Clear);
    // The walk at the end stops at APF; the report says why the verdict differs.
    assert_eq!(r.walk_end, "apf");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("ends at `apf`, but etcd/disk lit first")),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.falsifier.as_deref(), Some("fsync at baseline."));
    assert_eq!(r.runbook, vec!["check the disk".to_string()]);
}

#[test]
fn bitter_zone_apf_alone_while_etcd_in_baseline_names_apf() {
    let n = 40;
    let mut s = healthy(n);
    s[APF] = sig(vec![("apiserver-0", step_fn(n, 0.0, 30.0, 20, n))]);
    s[ERRORS] = sig(vec![("apiserver-0", step_fn(n, 0.001, 0.3, 20, n))]);
    // etcd latency wobbles inside its baseline (under 4 × 20 ms).
    s[ETCD_LAT] = sig(vec![(
        "apiserver-0",
        (0..n).map(|i| Some(0.02 + 0.01 * (i % 3) as f64)).collect(),
    )]);
    let r = assess(&rules(), &input(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.axis, "apf");
    assert_eq!(rc.onset, Some(T0 + 20 * STEP));
    assert!(r.verdict.downstream.is_empty());
    for leaf in ["etcd-disk", "etcd-raft", "etcd-other"] {
        assert_eq!(axis(&r, leaf).state, AxisState::Clear, "{leaf}");
    }
    assert_eq!(r.walk_end, "apf");
    assert!(
        r.verdict.summary.starts_with("root cause: apf (P1)"),
        "{}",
        r.verdict.summary
    );
}

#[test]
fn onsets_within_one_step_are_a_tie_broken_by_tree_order() {
    let n = 40;
    let mut s = healthy(n);
    // etcd latency lights one step before APF: within one step, so a tie.
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.02, 0.9, 20, n))]);
    s[APF] = sig(vec![("apiserver-0", step_fn(n, 0.0, 30.0, 21, n))]);
    s[ERRORS] = sig(vec![("apiserver-0", step_fn(n, 0.001, 0.3, 21, n))]);
    let r = assess(&rules(), &input(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.axis, "apf", "tree order puts APF first");
    assert_eq!(r.verdict.ties.len(), 1);
    assert_eq!(r.verdict.ties[0].leaf, "etcd-other");
    assert_eq!(r.verdict.ties[0].onset, T0 + 20 * STEP);
    assert!(
        r.verdict.assumptions[0].contains("within one step"),
        "{:?}",
        r.verdict.assumptions
    );
    assert!(r.verdict.downstream.is_empty());

    // Two steps apart is no longer a tie: etcd first.
    let mut s = healthy(n);
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.02, 0.9, 20, n))]);
    s[APF] = sig(vec![("apiserver-0", step_fn(n, 0.0, 30.0, 22, n))]);
    let r = assess(&rules(), &input(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!((rc.axis.as_str(), rc.sub_axis.as_deref()), ("etcd", None));
    assert!(r.verdict.ties.is_empty());
    assert_eq!(r.verdict.downstream[0].lag_ms, 2 * STEP);
}

#[test]
fn a_single_step_blip_sets_no_onset() {
    let n = 30;
    let mut s = healthy(n);
    s[WAL] = sig(vec![("etcd-0", step_fn(n, 0.007, 1.5, 12, 13))]);
    let r = assess(&rules(), &input(n, s.clone()));
    assert_eq!(axis(&r, "etcd-disk").onset, None);
    assert_eq!(axis(&r, "etcd-disk").state, AxisState::Clear);
    assert_eq!(r.status, Status::Healthy);

    // Two steps make an onset with the default debounce, not with debounce 3.
    s[WAL] = sig(vec![("etcd-0", step_fn(n, 0.007, 1.5, 12, 14))]);
    let r = assess(&rules(), &input(n, s.clone()));
    assert_eq!(axis(&r, "etcd-disk").onset, Some(T0 + 12 * STEP));
    let mut i = input(n, s);
    i.debounce = 3;
    let r = assess(&rules(), &i);
    assert_eq!(axis(&r, "etcd-disk").onset, None);
}

#[test]
fn recovery_is_reported_and_the_incident_still_counts() {
    let n = 40;
    let mut s = healthy(n);
    s[WAL] = sig(vec![("etcd-1", step_fn(n, 0.006, 2.0, 12, 25))]);
    let r = assess(&rules(), &input(n, s));
    let a = axis(&r, "etcd-disk");
    assert_eq!(a.onset, Some(T0 + 12 * STEP));
    assert_eq!(a.recovered, Some(T0 + 25 * STEP));
    assert!(!a.lit_at_end);
    // Nothing of the incident is lit at the end: recovered (exit 4), and the
    // root cause is still named.
    assert_eq!(r.status, Status::Recovered);
    assert_eq!(
        r.verdict.root_cause.as_ref().map(|rc| rc.recovered),
        Some(Some(T0 + 25 * STEP))
    );
    assert!(
        r.verdict
            .summary
            .contains("recovered at 2026-01-01T00:06:15Z after 3m15s"),
        "{}",
        r.verdict.summary
    );
    // Evidence is taken at the last lit step, not at the (healthy) end.
    let ev = a
        .evidence
        .iter()
        .find(|e| e.signal == "wal_fsync")
        .expect("evidence");
    assert_eq!(ev.value, Some(2.0));
    assert_eq!(ev.value_at, Some(T0 + 24 * STEP));
    assert_eq!(ev.series.len(), n);
}

#[test]
fn relative_thresholds_use_the_baseline_and_its_floor() {
    let n = 40;
    // 20 ms → 200 ms: under the absolute 0.5 s but 10× the baseline.
    let mut s = healthy(n);
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.02, 0.2, 20, n))]);
    let r = assess(&rules(), &input(n, s));
    let a = axis(&r, "etcd-other");
    assert_eq!(a.onset, Some(T0 + 20 * STEP));
    let ev = a
        .evidence
        .iter()
        .find(|e| e.signal == "etcd_latency")
        .expect("evidence");
    assert_eq!(ev.baseline, Some(0.02));
    assert_eq!(ev.threshold_text, "> 500 ms or > 4 × baseline (and > 50 ms)");

    // 1 ms → 10 ms: 10× the baseline but under the 50 ms floor.
    let mut s = healthy(n);
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.001, 0.01, 20, n))]);
    let r = assess(&rules(), &input(n, s));
    assert_eq!(axis(&r, "etcd-other").onset, None);

    // Five steps: no default baseline, only the absolute part applies.
    let n = 5;
    let mut s = healthy(n);
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.02, 0.2, 2, n))]);
    let r = assess(&rules(), &input(n, s));
    assert_eq!(r.window.baseline.kind, BaselineKind::None);
    assert_eq!(axis(&r, "etcd-other").onset, None);
    assert!(r.gaps.iter().any(|g| g.kind == GapKind::NoBaseline));
}

#[test]
fn absent_roles_are_not_checked_and_missing_symptoms_are_inconclusive() {
    let n = 20;
    let mut s = healthy(n);
    s[WAL] = SignalInput::unavailable(Availability::RoleAbsent, "no etcd targets in the data");
    s[LEADER] = SignalInput::unavailable(Availability::RoleAbsent, "no etcd targets in the data");
    let r = assess(&rules(), &input(n, s));
    assert_eq!(axis(&r, "etcd-disk").state, AxisState::NotChecked);
    assert_eq!(axis(&r, "etcd-raft").state, AxisState::NotChecked);
    assert_eq!(
        axis(&r, "etcd-disk").note.as_deref(),
        Some("not checked: no etcd targets in the data")
    );
    assert!(r
        .gaps
        .iter()
        .any(|g| g.kind == GapKind::NotChecked && g.subject == "etcd-disk"));
    // The apiserver side still answers; healthy, but the summary says what was not checked.
    assert_eq!(r.status, Status::Healthy);
    assert!(
        r.verdict.summary.contains("2 axes not checked"),
        "{}",
        r.verdict.summary
    );

    // Symptom metrics not exposed: never read as zero, never healthy.
    let mut s = healthy(n);
    s[ERRORS] = SignalInput::unavailable(
        Availability::NotExposed,
        "`errors` not exposed by this version/target",
    );
    let r = assess(&rules(), &input(n, s));
    assert_eq!(r.status, Status::Inconclusive);
    assert_eq!(r.path[0].answer, Answer::Unknown);
    assert_eq!(r.path[0].next, "apf_q", "an unknown gate continues the walk");
}

#[test]
fn a_single_snapshot_evaluates_gauges_and_says_onsets_need_a_series() {
    let n = 1;
    let nts = || SignalInput::unavailable(Availability::NeedsTimeSeries, "needs a time series");
    let s = vec![
        nts(),
        nts(),
        nts(),
        nts(),
        sig(vec![
            ("etcd-0", flat(1, 1.0)),
            ("etcd-1", flat(1, 0.0)),
            ("etcd-2", flat(1, 1.0)),
        ]),
    ];
    let r = assess(&rules(), &input(n, s));
    assert_eq!(r.status, Status::Degraded);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.sub_axis.as_deref(), Some("raft"));
    assert_eq!(rc.onset, None);
    assert_eq!(rc.instances, vec!["etcd-1".to_string()]);
    assert_eq!(
        rc.localisation.as_deref(),
        Some("only etcd-1: member has a leader no, others yes")
    );
    assert!(
        r.verdict
            .assumptions
            .iter()
            .any(|a| a.contains("single snapshot")),
        "{:?}",
        r.verdict.assumptions
    );
}

#[test]
fn healthy_walk_answers_no_at_the_gate() {
    let n = 20;
    let r = assess(&rules(), &input(n, healthy(n)));
    assert_eq!(r.status, Status::Healthy);
    assert_eq!(r.walk_end, "healthy");
    assert_eq!(r.path.len(), 1);
    assert_eq!(r.path[0].answer, Answer::No);
    assert_eq!(r.path[0].signals[0].value, Some(0.001));
    assert!(r.axes.iter().all(|a| a.state == AxisState::Clear));
    assert!(r.verdict.root_cause.is_none());
    assert!(r.falsifier.is_none());
}

#[test]
fn symptom_without_a_lit_axis_is_joint() {
    let n = 20;
    let mut s = healthy(n);
    s[ERRORS] = sig(vec![("apiserver-0", step_fn(n, 0.001, 0.4, 8, n))]);
    let r = assess(&rules(), &input(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.axis, "joint");
    assert_eq!(rc.onset, Some(T0 + 8 * STEP));
    assert_eq!(r.walk_end, "joint");
    let steps: Vec<Answer> = r.path.iter().map(|p| p.answer).collect();
    assert_eq!(steps, [Answer::Yes, Answer::No, Answer::No]);
}

#[test]
fn the_walk_runs_at_the_assessment_time() {
    let n = 40;
    let mut s = healthy(n);
    s[APF] = sig(vec![("apiserver-0", step_fn(n, 0.0, 30.0, 10, 20))]);
    s[ERRORS] = sig(vec![("apiserver-0", step_fn(n, 0.001, 0.3, 10, 20))]);
    let mut i = input(n, s);
    i.at_index = 15;
    let r = assess(&rules(), &i);
    assert_eq!(r.window.at, T0 + 15 * STEP);
    assert_eq!(r.walk_end, "apf");
    assert!(axis(&r, "apf").lit_at_end);
    assert_eq!(axis(&r, "apf").recovered, None, "recovery after `at` is not seen");
}

#[test]
fn all_instances_lit_points_at_load() {
    let n = 30;
    let mut s = healthy(n);
    s[WAL] = sig(vec![
        ("etcd-0", step_fn(n, 0.007, 0.9, 10, n)),
        ("etcd-1", step_fn(n, 0.006, 0.8, 10, n)),
        ("etcd-2", step_fn(n, 0.008, 1.1, 10, n)),
    ]);
    let r = assess(&rules(), &input(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.instances, ["etcd-0", "etcd-1", "etcd-2"]);
    assert_eq!(
        rc.localisation.as_deref(),
        Some("all 3 instances: p99 WAL fsync etcd-0 900 ms, etcd-1 800 ms, etcd-2 1.1 s")
    );
}

/// A run at the end shorter than its persistence is a warning, and the axis
/// names the member on which it is pending (`axes[].pending`, for scripts).
/// Clients are not affected here, so the status stays healthy
/// (`lab_recordings::a_fault_seen_for_less_than_its_persistence_is_not_yet_confirmed`
/// has a fault without the apiserver in the data: inconclusive).
#[test]
fn a_run_at_the_end_shorter_than_the_persistence_is_a_warning() {
    let n = 20;
    let mut s = healthy(n);
    s[WAL] = sig(vec![("etcd-0", step_fn(n, 0.007, 2.0, 19, n))]);
    let r = assess(&rules(), &input(n, s));
    assert_eq!(axis(&r, "etcd-disk").onset, None);
    assert!(
        r.warnings.iter().any(|w| w
            .contains("etcd/disk is lit at the end of the window on etcd-0 for less than its persistence")),
        "{:?}",
        r.warnings
    );
    assert_eq!(axis(&r, "etcd-disk").pending, ["etcd-0"]);
}

#[test]
fn report_serialises_to_json_and_back() {
    let n = 20;
    let r = assess(&rules(), &input(n, healthy(n)));
    let j = serde_json::to_string(&r).expect("serialise");
    assert!(j.contains("\"status\":\"healthy\""));
    let back: Report = serde_json::from_str(&j).expect("deserialise");
    assert_eq!(back, r);
}

#[test]
fn an_any_question_leaves_out_signals_the_data_cannot_have() {
    let n = 20;
    let mut s = healthy(n);
    s[ETCD_LAT] = SignalInput::unavailable(Availability::NotExposed, "not exposed");
    let r = assess(&rules(), &input(n, s));
    // "Is etcd slow?" is answered by wal_fsync and no_leader alone.
    assert_eq!(axis(&r, "etcd-other").state, AxisState::Clear);
    assert!(axis(&r, "etcd-other")
        .timeline
        .iter()
        .all(|s| *s == StepState::Unlit));

    // Every part unavailable: unknown, and the leaf is not checked.
    let mut s = healthy(n);
    for k in [ETCD_LAT, WAL, LEADER] {
        s[k] = SignalInput::unavailable(Availability::RoleAbsent, "no etcd targets in the data");
    }
    s[ETCD_LAT] = SignalInput::unavailable(Availability::NotExposed, "not exposed");
    let r = assess(&rules(), &input(n, s));
    assert!(axis(&r, "etcd-other")
        .timeline
        .iter()
        .all(|s| *s == StepState::Unknown));
    assert_eq!(axis(&r, "etcd-other").state, AxisState::NotChecked);
}

#[test]
fn nan_means_nothing_observed_and_is_unlit() {
    let n = 20;
    let mut s = healthy(n);
    s[ERRORS] = sig(vec![("apiserver-0", flat(n, f64::NAN))]);
    let r = assess(&rules(), &input(n, s));
    assert_eq!(r.status, Status::Healthy);
    assert_eq!(r.path[0].answer, Answer::No);
}

#[test]
fn a_fallback_says_which_specific_questions_it_could_not_ask() {
    // Apiserver-only data: the apiserver sees slow etcd, etcd itself is absent.
    let n = 30;
    let mut s = healthy(n);
    s[ETCD_LAT] = sig(vec![("apiserver-0", step_fn(n, 0.02, 0.9, 10, n))]);
    s[WAL] = SignalInput::unavailable(Availability::RoleAbsent, "no etcd targets in the data");
    s[LEADER] = SignalInput::unavailable(Availability::RoleAbsent, "no etcd targets in the data");
    let r = assess(&rules(), &input(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!((rc.axis.as_str(), rc.sub_axis.as_deref()), ("etcd", None));
    assert_eq!(
        axis(&r, "etcd-other").note.as_deref(),
        Some("no more specific axis is lit, but these could not be checked: etcd-disk, etcd-raft")
    );
    assert!(
        r.verdict
            .assumptions
            .iter()
            .any(|a| a.starts_with("etcd: no more specific axis is lit")),
        "{:?}",
        r.verdict.assumptions
    );
}
