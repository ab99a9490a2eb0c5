//! The verdict's defences against noisy real data, on hand-built per-step
//! values for the tree in `testdata/rules/good/mechanisms.yaml`: persistence
//! per signal, observation counts and Wilson-bounded shares, warm-up, episodes
//! and incidents, the recovered status, scopes and `needs`, and a target that
//! stops answering named as the cause.

use std::path::Path;

use cptriage::rules::report::*;
use cptriage::rules::verdict::{assess, AssessInput, BaselinePlan, SignalInput, Skip};
use cptriage::rules::{load_file, RuleSet};
use cptriage::store::Millis;

use crate::values::{self, flat, sig, step_fn};

const T0: Millis = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const STEP: Millis = 5_000;
const RANGE: Millis = 20_000;

// Signal indices in mechanisms.yaml.
const ERRORS: usize = 0;
const LATENCY: usize = 1;
const SLOW: usize = 2;
const ELECTIONS: usize = 3;
const LEADER: usize = 4;

fn rules() -> RuleSet {
    load_file(Path::new("testdata/rules/good/mechanisms.yaml")).expect("mechanisms rules load")
}

fn steps(n: usize) -> Vec<Millis> {
    values::grid(T0, STEP, n)
}

const MEMBERS: [&str; 3] = ["etcd-0", "etcd-1", "etcd-2"];

/// Every member with the same values.
fn members(v: Vec<Option<f64>>) -> SignalInput {
    sig(MEMBERS.iter().map(|m| (*m, v.clone())).collect())
}

/// Observations behind a signal's values: `n` per window on every instance.
fn with_observations(mut s: SignalInput, n: f64) -> SignalInput {
    let len = s.values.values().next().map_or(0, Vec::len);
    s.observations = s.values.keys().map(|k| (k.clone(), vec![Some(n); len])).collect();
    s
}

fn source(target: &str, role: &str, n: usize) -> SourceInfo {
    SourceInfo {
        target: target.into(),
        role: role.into(),
        role_reason: "test".into(),
        version: None,
        time_source: "file-name".into(),
        snapshots: n,
        first: Some(T0),
        last: Some(T0 + (n as i64 - 1) * STEP),
        restarts: Vec::new(),
        missing: Vec::new(),
        failed_scrapes: 0,
        failures: Vec::new(),
        last_attempt: Some(T0 + (n as i64 - 1) * STEP),
        warmup: Vec::new(),
    }
}

/// A healthy apiserver and three healthy etcd members.
fn healthy(n: usize) -> Vec<SignalInput> {
    vec![
        sig(vec![("apiserver-0", flat(n, 0.001))]),
        with_observations(sig(vec![("apiserver-0", flat(n, 0.05))]), 500.0),
        with_observations(members(flat(n, 0.0)), 200.0),
        members(flat(n, 0.0)),
        members(flat(n, 1.0)),
    ]
}

fn input(n: usize, signals: Vec<SignalInput>, roles: &[&str]) -> AssessInput {
    let s = steps(n);
    let mut sources = Vec::new();
    if roles.contains(&"apiserver") {
        sources.push(source("apiserver-0", "apiserver", n));
    }
    if roles.contains(&"etcd") {
        sources.extend(MEMBERS.iter().map(|m| source(m, "etcd", n)));
    }
    AssessInput {
        baseline: BaselinePlan::window_start(&s),
        steps: s,
        step: STEP,
        at_index: n - 1,
        range: RANGE,
        debounce: 1,
        signals,
        sources,
        warnings: Vec::new(),
        gaps: Vec::new(),
    }
}

fn both(n: usize, signals: Vec<SignalInput>) -> AssessInput {
    input(n, signals, &["apiserver", "etcd"])
}

fn axis<'a>(r: &'a Report, leaf: &str) -> &'a AxisReport {
    r.axes.iter().find(|a| a.leaf == leaf).expect("leaf")
}

#[test]
fn a_healthy_cluster_is_healthy_in_both_scopes() {
    let r = assess(&rules(), &both(40, healthy(40)));
    assert_eq!(r.status, Status::Healthy, "{}", r.verdict.summary);
    assert_eq!(r.scope.observed, ["apiserver", "etcd"]);
    assert_eq!(r.scope.judged, ["apiserver", "etcd"]);
    assert!(r.scope.not_observed.is_empty());
}

#[test]
fn a_tail_latency_must_last_its_persistence() {
    let n = 40;
    let mut s = healthy(n);
    // 2 s p99 for 15 s (first to last lit step), under the 20 s window: one
    // slow request stays in every window that holds it, so this is not counted.
    s[LATENCY] = with_observations(sig(vec![("apiserver-0", step_fn(n, 0.05, 2.0, 20, 24))]), 500.0);
    let r = assess(&rules(), &both(n, s.clone()));
    assert_eq!(r.status, Status::Healthy, "{}", r.verdict.summary);
    let ev = axis(&r, "joint")
        .evidence
        .iter()
        .find(|e| e.signal == "latency_p99")
        .expect("evidence");
    assert!(
        ev.note
            .as_deref()
            .unwrap_or("")
            .contains("4 step(s) above the threshold for less than its persistence of 20 s"),
        "{:?}",
        ev.note
    );
    // For 25 s it counts, from its first lit step.
    s[LATENCY] = with_observations(sig(vec![("apiserver-0", step_fn(n, 0.05, 2.0, 20, 26))]), 500.0);
    let r = assess(&rules(), &both(n, s));
    assert_eq!(r.status, Status::Recovered, "{}", r.verdict.summary);
    assert_eq!(r.symptom.as_ref().and_then(|s| s.onset), Some(T0 + 20 * STEP));
}

#[test]
fn an_event_counter_needs_no_persistence() {
    let n = 40;
    let mut s = healthy(n);
    // One election, seen in a single step: etcd-raft lights (`for: 0s`).
    s[ELECTIONS] = sig(vec![
        ("etcd-0", step_fn(n, 0.0, 1.0, 30, 31)),
        ("etcd-1", flat(n, 0.0)),
        ("etcd-2", flat(n, 0.0)),
    ]);
    let r = assess(&rules(), &both(n, s));
    let a = axis(&r, "etcd-raft");
    assert_eq!(a.state, AxisState::Lit);
    assert_eq!(a.onset, Some(T0 + 30 * STEP));
    assert_eq!(a.instances, ["etcd-0"]);
    // Over at 31 and nothing else lit: the incident is over.
    assert_eq!(r.status, Status::Recovered);
}

#[test]
fn a_share_of_few_observations_must_be_clearer_to_light() {
    let n = 40;
    let mut s = healthy(n);
    // 15% of 20 fsyncs slow on etcd-1: 3 slow fsyncs could be chance (the 95%
    // Wilson lower bound is about 5%, under 10%).
    let slow = |share: f64, obs: f64| {
        let mut x = sig(vec![
            ("etcd-0", flat(n, 0.0)),
            ("etcd-1", step_fn(n, 0.0, share, 20, n)),
            ("etcd-2", flat(n, 0.0)),
        ]);
        x.observations = MEMBERS
            .iter()
            .map(|m| (m.to_string(), vec![Some(obs); n]))
            .collect();
        x
    };
    s[SLOW] = slow(0.15, 20.0);
    let r = assess(&rules(), &both(n, s.clone()));
    assert_eq!(
        axis(&r, "etcd-disk").state,
        AxisState::Clear,
        "{}",
        r.verdict.summary
    );
    // The same share of 2000 fsyncs is a slow disk.
    s[SLOW] = slow(0.15, 2000.0);
    let r = assess(&rules(), &both(n, s.clone()));
    assert_eq!(r.status, Status::Degraded);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!((rc.axis.as_str(), rc.sub_axis.as_deref()), ("etcd", Some("disk")));
    assert_eq!(rc.instances, ["etcd-1"]);
    assert_eq!(rc.onset, Some(T0 + 20 * STEP));
    // All of 4 fsyncs slow (a disk so slow that few complete) is clear too.
    s[SLOW] = slow(1.0, 4.0);
    let r = assess(&rules(), &both(n, s));
    assert_eq!(r.status, Status::Degraded, "{}", r.verdict.summary);
}

#[test]
fn steps_not_judged_are_unknown_and_left_out_of_the_baseline() {
    let n = 40;
    let mut s = healthy(n);
    // etcd-2 restarted at step 10: its first window holds a leader change that
    // is the restart's, not the incident's.
    let mut e = sig(vec![
        ("etcd-0", flat(n, 0.0)),
        ("etcd-1", flat(n, 0.0)),
        ("etcd-2", step_fn(n, 0.0, 1.0, 10, 14)),
    ]);
    e.skips.insert(
        "etcd-2".into(),
        (0..n)
            .map(|i| (10..=14).contains(&i).then_some(Skip::WarmUp))
            .collect(),
    );
    s[ELECTIONS] = e;
    let r = assess(&rules(), &both(n, s));
    assert_eq!(r.status, Status::Healthy, "{}", r.verdict.summary);
    let ev = axis(&r, "etcd-raft")
        .evidence
        .iter()
        .find(|e| e.signal == "leader_changes")
        .expect("evidence");
    assert!(
        ev.note
            .as_deref()
            .unwrap_or("")
            .contains("5 step(s) not judged: warm-up"),
        "{:?}",
        ev.note
    );
}

#[test]
fn the_verdict_is_about_the_incident_lit_at_the_end_and_lists_earlier_ones() {
    let n = 60;
    let mut s = healthy(n);
    // A slow disk on etcd-0 from 5 to 9, over; then an election on etcd-2
    // from step 40 on, still lit.
    s[SLOW] = with_observations(
        sig(vec![
            ("etcd-0", step_fn(n, 0.0, 0.9, 5, 10)),
            ("etcd-1", flat(n, 0.0)),
            ("etcd-2", flat(n, 0.0)),
        ]),
        200.0,
    );
    s[LEADER] = sig(vec![
        ("etcd-0", flat(n, 1.0)),
        ("etcd-1", flat(n, 1.0)),
        ("etcd-2", step_fn(n, 1.0, 0.0, 40, n)),
    ]);
    let r = assess(&rules(), &both(n, s));
    assert_eq!(r.status, Status::Degraded);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.sub_axis.as_deref(), Some("raft"), "{}", r.verdict.summary);
    assert_eq!(rc.onset, Some(T0 + 40 * STEP));
    assert!(r.verdict.downstream.is_empty(), "{:?}", r.verdict.downstream);
    assert_eq!(r.verdict.earlier.len(), 1, "{:?}", r.verdict.earlier);
    assert_eq!(r.verdict.earlier[0].sub_axis.as_deref(), Some("disk"));
    assert_eq!(r.verdict.earlier[0].onset, T0 + 5 * STEP);
    assert_eq!(r.verdict.earlier[0].recovered, Some(T0 + 10 * STEP));
    assert!(
        r.verdict.summary.contains("1 earlier episode(s)"),
        "{}",
        r.verdict.summary
    );
    // The disk axis keeps its own (earlier) episode, not the raft one's.
    let d = axis(&r, "etcd-disk");
    assert_eq!(d.onset, Some(T0 + 5 * STEP));
    assert_eq!(d.instances, ["etcd-0"]);
    // The first page names the earlier incident, and reads the leader flag
    // the right way round.
    let page = cptriage::report::page::first_page(&r, &Default::default());
    let at = cptriage::timefmt::format_clock(T0 + 5 * STEP, false);
    assert!(
        page.contains(&format!("earlier, over before this incident: etcd/disk at {at}")),
        "{page}"
    );
    assert!(
        page.contains("the etcd member has a leader: no on etcd-2"),
        "{page}"
    );
    let mut wide = Vec::new();
    cptriage::report::table::render(&r, &Default::default(), &mut wide).unwrap();
    let wide = String::from_utf8(wide).unwrap();
    assert!(
        wide.contains(&format!("earlier: etcd/disk from {at}, over at")),
        "{wide}"
    );
}

#[test]
fn a_recovered_incident_says_so_and_keeps_its_root_cause() {
    let n = 60;
    let mut s = healthy(n);
    s[SLOW] = with_observations(
        sig(vec![
            ("etcd-0", flat(n, 0.0)),
            ("etcd-1", step_fn(n, 0.0, 0.8, 20, 34)),
            ("etcd-2", flat(n, 0.0)),
        ]),
        200.0,
    );
    let r = assess(&rules(), &both(n, s));
    assert_eq!(r.status, Status::Recovered);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.recovered, Some(T0 + 34 * STEP));
    assert!(
        r.verdict
            .summary
            .contains("recovered at 2026-01-01T00:02:50Z after 70 s"),
        "{}",
        r.verdict.summary
    );
    assert!(
        r.verdict.summary.contains("nothing of this incident is lit"),
        "{}",
        r.verdict.summary
    );
}

#[test]
fn etcd_alone_is_judged_in_its_own_scope() {
    let n = 40;
    let mut s = healthy(n);
    for k in [ERRORS, LATENCY] {
        s[k] = SignalInput::unavailable(Availability::RoleAbsent, "no apiserver targets in the data");
    }
    let r = assess(&rules(), &input(n, s.clone(), &["etcd"]));
    assert_eq!(r.status, Status::Healthy, "{}", r.verdict.summary);
    assert_eq!(r.scope.observed, ["etcd"]);
    assert_eq!(r.scope.judged, ["etcd"]);
    assert_eq!(r.scope.not_observed, ["apiserver"]);
    assert!(
        r.verdict
            .summary
            .contains("etcd: etcd is fine by its own metrics; apiserver not observed"),
        "{}",
        r.verdict.summary
    );
    // Without the disk read, "etcd is fine" cannot be said.
    s[SLOW] = SignalInput::unavailable(Availability::NotExposed, "not exposed");
    let r = assess(&rules(), &input(n, s.clone(), &["etcd"]));
    assert_eq!(r.status, Status::Inconclusive, "{}", r.verdict.summary);
    assert!(r.scope.judged.is_empty());
    // And a fault is named as usual.
    s[SLOW] = with_observations(members(flat(n, 0.0)), 200.0);
    s[LEADER] = members(step_fn(n, 1.0, 0.0, 30, n));
    let r = assess(&rules(), &input(n, s, &["etcd"]));
    assert_eq!(r.status, Status::Degraded);
    assert_eq!(
        r.verdict.root_cause.as_ref().map(|rc| rc.leaf.as_str()),
        Some("etcd-raft")
    );
}

#[test]
fn clients_are_not_called_fine_from_signals_that_were_not_read() {
    let n = 40;
    let mut s = healthy(n);
    // A truncated dump: the error share is read, the latency is not.
    s[LATENCY] = SignalInput::unavailable(Availability::NotExposed, "not exposed");
    for k in [SLOW, ELECTIONS, LEADER] {
        s[k] = SignalInput::unavailable(Availability::RoleAbsent, "no etcd targets in the data");
    }
    let r = assess(&rules(), &input(n, s, &["apiserver"]));
    assert_eq!(r.status, Status::Inconclusive, "{}", r.verdict.summary);
    assert!(
        r.verdict.summary.contains("cannot say that apiserver is healthy"),
        "{}",
        r.verdict.summary
    );
}

#[test]
fn a_member_that_stops_answering_is_named_as_the_cause() {
    let n = 40;
    let mut s = healthy(n);
    // etcd-1 stops answering at step 20 (no values from then on); its peers
    // see an election.
    s[ELECTIONS] = sig(vec![
        ("etcd-0", step_fn(n, 0.0, 1.0, 21, 25)),
        ("etcd-1", (0..n).map(|i| (i < 20).then_some(0.0)).collect()),
        ("etcd-2", step_fn(n, 0.0, 1.0, 21, 25)),
    ]);
    let mut inp = both(n, s);
    for src in inp.sources.iter_mut().filter(|s| s.target == "etcd-1") {
        src.last = Some(T0 + 19 * STEP);
        src.missing = vec![[T0 + 19 * STEP, T0 + 39 * STEP]];
        src.failures = (20..n as i64).map(|i| T0 + i * STEP).collect();
        src.failed_scrapes = src.failures.len();
    }
    let r = assess(&rules(), &inp);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.leaf, "etcd-raft");
    assert_eq!(rc.instances, ["etcd-1"]);
    assert_eq!(rc.affected, ["etcd-0", "etcd-2"]);
    assert_eq!(rc.unreachable.len(), 1);
    assert_eq!(rc.unreachable[0].from, T0 + 20 * STEP);
    assert_eq!(rc.unreachable[0].until, None);
    assert!(
        r.verdict
            .summary
            .contains("etcd-1 stopped answering at 2026-01-01T00:01:40Z"),
        "{}",
        r.verdict.summary
    );
    // Still unreachable at the end: the incident is not over.
    assert_eq!(r.status, Status::Degraded, "{}", r.verdict.summary);
}

#[test]
fn the_short_window_dates_a_confirmed_run_but_lights_nothing_alone() {
    let n = 40;
    let mut s = healthy(n);
    // A new slow disk on etcd-2 from step 20: the full window's share crosses
    // 10% only at step 23 (diluted by the fast fsyncs before the fault); the
    // shortest window sees it at once.
    let full = |from: usize| -> Vec<Option<f64>> {
        (0..n).map(|i| Some(if i >= from { 0.9 } else { 0.0 })).collect()
    };
    let mut disk = with_observations(
        sig(vec![
            ("etcd-0", flat(n, 0.0)),
            ("etcd-1", flat(n, 0.0)),
            ("etcd-2", full(23)),
        ]),
        200.0,
    );
    let mut short = with_observations(
        sig(vec![
            ("etcd-0", flat(n, 0.0)),
            ("etcd-1", flat(n, 0.0)),
            ("etcd-2", full(20)),
        ]),
        50.0,
    );
    // A blip in the short window alone, long before: never lit by itself.
    short.values.get_mut("etcd-0").unwrap()[5] = Some(1.0);
    disk.short = Some(Box::new(short));
    s[SLOW] = disk;
    let r = assess(&rules(), &both(n, s));
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.leaf, "etcd-disk");
    assert_eq!(rc.onset, Some(T0 + 20 * STEP), "{}", r.verdict.summary);
    assert_eq!(rc.instances, ["etcd-2"]);
    assert!(r.verdict.earlier.is_empty(), "{:?}", r.verdict.earlier);
}
