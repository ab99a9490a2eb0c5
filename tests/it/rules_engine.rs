//! The full path: rules + PromQL evaluator + series store, on small datasets
//! built by hand (counters advanced, histogram observations added per snapshot,
//! every series labelled with `instance` and `role` as the sources do).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cptriage::eval::template::family_of;
use cptriage::rules::engine::{diagnose, grid, BaselineSpec, EngineError, Options};
use cptriage::rules::report::*;
use cptriage::rules::{load_file, RuleSet};
use cptriage::source::{Dataset, Role, Snapshot, Target, TimeSource};
use cptriage::store::{Labels, Millis, Store};

const T0: Millis = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const IV: Millis = 15_000;
const BUCKETS: [f64; 12] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048,
];

/// Builds a dataset snapshot by snapshot.
struct Sim {
    n: usize,
    store: Store,
    targets: Vec<Target>,
    /// (target index, step) pairs with no snapshot (target down).
    down: BTreeSet<(usize, usize)>,
}

impl Sim {
    fn new(n: usize) -> Self {
        Sim {
            n,
            store: Store::new(),
            targets: Vec::new(),
            down: BTreeSet::new(),
        }
    }

    fn t(i: usize) -> Millis {
        T0 + i as Millis * IV
    }

    fn target(&mut self, name: &str, role: Role) -> usize {
        self.targets.push(Target {
            name: name.into(),
            role,
            role_reason: "given on the command line".into(),
            version: None,
            time_source: TimeSource::FileName,
            snapshots: Vec::new(),
            families: BTreeSet::new(),
            failures: Vec::new(),
        });
        self.targets.len() - 1
    }

    fn labels(&mut self, tgt: usize, name: &str, extra: &[(&str, &str)]) -> Labels {
        let t = &self.targets[tgt];
        let (inst, role) = (t.name.clone(), t.role.as_str().to_string());
        let mut pairs: Vec<(String, String)> = vec![
            ("__name__".into(), name.into()),
            ("instance".into(), inst),
            ("role".into(), role),
        ];
        pairs.extend(extra.iter().map(|(a, b)| (a.to_string(), b.to_string())));
        self.store.labels(pairs)
    }

    fn push(&mut self, tgt: usize, name: &str, extra: &[(&str, &str)], i: usize, v: f64) {
        if self.down.contains(&(tgt, i)) {
            return;
        }
        let l = self.labels(tgt, name, extra);
        self.store.push(&l, Self::t(i), v);
        self.targets[tgt].families.insert(family_of(name).to_string());
    }

    /// A counter growing at `rate(i)` per second from step `from` on (absent before).
    fn counter(
        &mut self,
        tgt: usize,
        name: &str,
        extra: &[(&str, &str)],
        from: usize,
        rate: impl Fn(usize) -> f64,
    ) {
        let mut v = 0.0;
        for i in from..self.n {
            if i > from {
                v += rate(i) * (IV / 1000) as f64;
            }
            self.push(tgt, name, extra, i, v);
        }
    }

    fn gauge(&mut self, tgt: usize, name: &str, extra: &[(&str, &str)], f: impl Fn(usize) -> f64) {
        for i in 0..self.n {
            self.push(tgt, name, extra, i, f(i));
        }
    }

    /// A histogram receiving `rate` observations per second of value `obs(i)`.
    fn histogram(
        &mut self,
        tgt: usize,
        name: &str,
        extra: &[(&str, &str)],
        rate: f64,
        obs: impl Fn(usize) -> f64,
    ) {
        let mut counts = vec![0.0; BUCKETS.len() + 1];
        let mut sum = 0.0;
        for i in 0..self.n {
            if i > 0 {
                let k = rate * (IV / 1000) as f64;
                let o = obs(i);
                for (b, le) in BUCKETS.iter().enumerate() {
                    if o <= *le {
                        counts[b] += k;
                    }
                }
                counts[BUCKETS.len()] += k;
                sum += k * o;
            }
            for (b, le) in BUCKETS.iter().enumerate() {
                let les = le.to_string();
                let mut l: Vec<(&str, &str)> = extra.to_vec();
                l.push(("le", &les));
                self.push(tgt, &format!("{name}_bucket"), &l, i, counts[b]);
            }
            let mut l: Vec<(&str, &str)> = extra.to_vec();
            l.push(("le", "+Inf"));
            self.push(tgt, &format!("{name}_bucket"), &l, i, counts[BUCKETS.len()]);
            self.push(tgt, &format!("{name}_count"), extra, i, counts[BUCKETS.len()]);
            self.push(tgt, &format!("{name}_sum"), extra, i, sum);
        }
    }

    fn finish(mut self) -> Dataset {
        self.store.finish();
        for (k, t) in self.targets.iter_mut().enumerate() {
            for i in 0..self.n {
                if !self.down.contains(&(k, i)) {
                    t.snapshots.push(Snapshot {
                        time: Self::t(i),
                        origin: format!("{}/{i}.prom", t.name),
                        process_start: Some(1.0),
                    });
                }
            }
        }
        Dataset {
            store: self.store,
            targets: self.targets,
            warnings: Vec::new(),
            audit: None,
            logs: None,
        }
    }
}

fn mini() -> RuleSet {
    load_file(Path::new("testdata/rules/good/mini.yaml")).expect("mini rules load")
}

/// One apiserver and three etcd members; etcd-2's disk slows at `disk_at`, the
/// apiserver's etcd latency follows, APF rejects from `apf_at` (`None`: never).
fn bitter(n: usize, disk_at: Option<usize>, apf_at: Option<usize>) -> Dataset {
    let mut s = Sim::new(n);
    let api = s.target("apiserver-0", Role::Apiserver);
    let etcd: Vec<usize> = (0..3)
        .map(|k| s.target(&format!("etcd-{k}"), Role::Etcd))
        .collect();
    let slow = move |i: usize| disk_at.is_some_and(|d| i >= d);
    s.counter(
        api,
        "apiserver_request_total",
        &[("code", "200"), ("verb", "GET")],
        0,
        |_| 100.0,
    );
    s.counter(
        api,
        "apiserver_request_total",
        &[("code", "429"), ("verb", "GET")],
        apf_at.unwrap_or(n),
        |_| 40.0,
    );
    s.counter(
        api,
        "apiserver_flowcontrol_dispatched_requests_total",
        &[("priority_level", "workload-low")],
        0,
        |_| 100.0,
    );
    if let Some(a) = apf_at {
        s.counter(
            api,
            "apiserver_flowcontrol_rejected_requests_total",
            &[("priority_level", "workload-low"), ("reason", "queue-full")],
            a,
            |_| 40.0,
        );
    }
    s.histogram(
        api,
        "etcd_request_duration_seconds",
        &[("operation", "update")],
        50.0,
        move |i| if slow(i + 1) { 0.9 } else { 0.005 },
    );
    for (k, &e) in etcd.iter().enumerate() {
        s.gauge(e, "etcd_server_has_leader", &[], |_| 1.0);
        let this = k == 2;
        s.histogram(e, "etcd_disk_wal_fsync_duration_seconds", &[], 20.0, move |i| {
            if this && slow(i) {
                1.5
            } else {
                0.003
            }
        });
    }
    s.finish()
}

#[test]
fn bitter_zone_etcd_first_through_the_evaluator() {
    // 40 snapshots at 15 s; etcd-2's disk at 5 m, APF rejections 90 s later.
    let data = bitter(40, Some(20), Some(26));
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    assert_eq!(r.status, Status::Degraded, "{}", r.verdict.summary);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(
        (rc.axis.as_str(), rc.sub_axis.as_deref()),
        ("etcd", Some("disk")),
        "{}",
        r.verdict.summary
    );
    let onset = rc.onset.expect("onset");
    assert!(
        (T0 + 20 * IV..=T0 + 22 * IV).contains(&onset),
        "onset {}",
        (onset - T0) / 1000
    );
    assert!(rc.instances.contains(&"etcd-2".to_string()));
    assert!(
        rc.localisation
            .as_deref()
            .unwrap_or("")
            .starts_with("only etcd-2"),
        "{:?}",
        rc.localisation
    );
    let d = r
        .verdict
        .downstream
        .iter()
        .find(|d| d.axis == "apf")
        .expect("apf downstream");
    assert!((60_000..=120_000).contains(&d.lag_ms), "lag {}", d.lag_ms);
    // The evidence names the expression actually evaluated, with the role injected.
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "etcd-disk")
        .unwrap()
        .evidence
        .iter()
        .find(|e| e.signal == "wal_fsync")
        .unwrap();
    let expr = ev.expression.as_deref().unwrap_or("");
    assert!(expr.contains("role=\"etcd\"") && expr.contains("[1m]"), "{expr}");
    assert_eq!(r.window.range, 60_000);
    assert_eq!(r.window.step, IV);
}

#[test]
fn apf_alone_while_etcd_stays_in_baseline() {
    let data = bitter(40, None, Some(20));
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.axis, "apf", "{}", r.verdict.summary);
    assert!(r.verdict.downstream.is_empty(), "{:?}", r.verdict.downstream);
    let disk = r.axes.iter().find(|a| a.leaf == "etcd-disk").unwrap();
    assert_eq!(disk.state, AxisState::Clear);
}

#[test]
fn healthy_cluster_is_healthy_and_rejections_family_absent_reads_as_zero() {
    let data = bitter(20, None, None);
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    assert_eq!(r.status, Status::Healthy, "{}\n{:?}", r.verdict.summary, r.gaps);
    let apf = r
        .path
        .iter()
        .flat_map(|p| p.signals.iter())
        .find(|s| s.signal == "apf_rejections");
    assert!(apf.is_none(), "the walk stops at the gate");
    let ax = r.axes.iter().find(|a| a.leaf == "apf").unwrap();
    let ev = &ax.evidence[0];
    assert_eq!(ev.availability, Availability::Evaluated);
    assert_eq!(ev.value, Some(0.0), "absent rejection family reads as zero");
    assert!(r.gaps.is_empty(), "{:?}", r.gaps);
}

#[test]
fn etcd_only_dataset_checks_etcd_and_says_the_apiserver_was_not() {
    let mut s = Sim::new(20);
    let e: Vec<usize> = (0..3)
        .map(|k| s.target(&format!("etcd-{k}"), Role::Etcd))
        .collect();
    for (k, &t) in e.iter().enumerate() {
        s.gauge(t, "etcd_server_has_leader", &[], move |i| {
            if k == 1 && i >= 8 {
                0.0
            } else {
                1.0
            }
        });
        s.histogram(t, "etcd_disk_wal_fsync_duration_seconds", &[], 20.0, |_| 0.003);
    }
    let data = s.finish();
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    assert!(
        r.gaps
            .iter()
            .any(|g| g.kind == GapKind::RoleAbsent && g.subject == "apiserver"),
        "{:?}",
        r.gaps
    );
    assert_eq!(
        r.axes.iter().find(|a| a.leaf == "apf").unwrap().state,
        AxisState::NotChecked
    );
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.sub_axis.as_deref(), Some("raft"));
    assert_eq!(rc.instances, ["etcd-1"]);
    assert_eq!(rc.onset, Some(T0 + 8 * IV));
}

#[test]
fn single_snapshot_evaluates_gauges_only() {
    let mut s = Sim::new(1);
    let a = s.target("apiserver-0", Role::Apiserver);
    let e = s.target("etcd-0", Role::Etcd);
    s.counter(a, "apiserver_request_total", &[("code", "200")], 0, |_| 10.0);
    s.gauge(e, "etcd_server_has_leader", &[], |_| 0.0);
    s.histogram(e, "etcd_disk_wal_fsync_duration_seconds", &[], 20.0, |_| 0.003);
    let data = s.finish();
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    let g = r
        .gaps
        .iter()
        .find(|g| g.kind == GapKind::NeedsTimeSeries)
        .expect("gap");
    assert!(
        g.message.contains("single snapshot") && g.message.contains("wal_fsync"),
        "{}",
        g.message
    );
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.sub_axis.as_deref(), Some("raft"));
    assert_eq!(rc.onset, None);
    assert_eq!(r.window.steps.len(), 1);
}

#[test]
fn missing_metrics_are_not_exposed_never_zero() {
    // An apiserver that exposes nothing the error signal reads.
    let mut s = Sim::new(10);
    let a = s.target("apiserver-0", Role::Apiserver);
    s.gauge(a, "process_start_time_seconds", &[], |_| 1.0);
    let data = s.finish();
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    let g = r
        .gaps
        .iter()
        .find(|g| g.subject == "errors")
        .expect("gap for errors");
    assert_eq!(g.kind, GapKind::NotExposed);
    assert!(g.message.contains("apiserver_request_total"), "{}", g.message);
    assert_eq!(r.status, Status::Inconclusive, "{}", r.verdict.summary);
}

#[test]
fn first_alternative_whose_metrics_exist_is_used() {
    let src = std::fs::read_to_string("testdata/rules/good/mini.yaml").unwrap().replace(
        "    expr: min by (instance) (etcd_server_has_leader)\n",
        "    expr: min by (instance) (etcd_server_is_leader_renamed)\n    alternatives: [min by (instance) (etcd_server_has_leader)]\n",
    );
    let rules = cptriage::rules::load_str(&src, "alt.yaml").expect("load");
    let data = bitter(10, None, None);
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "etcd-raft")
        .unwrap()
        .evidence
        .iter()
        .find(|e| e.signal == "no_leader")
        .unwrap()
        .clone();
    assert_eq!(ev.alternative, Some(1));
    assert!(ev.note.as_deref().unwrap_or("").contains("alternative 1"));
    assert_eq!(ev.value, Some(1.0));
}

#[test]
fn a_member_that_stops_answering_is_evidence() {
    let mut s = Sim::new(20);
    let e: Vec<usize> = (0..3)
        .map(|k| s.target(&format!("etcd-{k}"), Role::Etcd))
        .collect();
    for i in 10..20 {
        s.down.insert((e[2], i));
    }
    for &t in &e {
        s.gauge(t, "etcd_server_has_leader", &[], |_| 1.0);
    }
    let data = s.finish();
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    let src = r.sources.iter().find(|s| s.target == "etcd-2").unwrap();
    assert_eq!(src.missing, vec![[T0 + 9 * IV, T0 + 19 * IV]]);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("etcd-2 (etcd) has no snapshots")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn separate_baseline_dataset_is_used_for_relative_thresholds() {
    // The incident capture is short (no default baseline); its etcd latency is
    // 200 ms throughout, under the absolute 0.5 s. A healthy capture at 5 ms
    // makes it 40× the baseline.
    let mut s = Sim::new(4);
    let a = s.target("apiserver-0", Role::Apiserver);
    s.histogram(
        a,
        "etcd_request_duration_seconds",
        &[("operation", "get")],
        50.0,
        |_| 0.2,
    );
    let incident = s.finish();
    let mut s = Sim::new(10);
    let a = s.target("apiserver-0", Role::Apiserver);
    s.histogram(
        a,
        "etcd_request_duration_seconds",
        &[("operation", "get")],
        50.0,
        |_| 0.005,
    );
    let healthy = s.finish();

    let r = diagnose(&mini(), &incident, &Options::default()).expect("diagnose");
    assert!(r
        .axes
        .iter()
        .find(|a| a.leaf == "etcd-other")
        .unwrap()
        .onset
        .is_none());
    let opts = Options {
        baseline: BaselineSpec::Dataset(&healthy),
        ..Options::default()
    };
    let r = diagnose(&mini(), &incident, &opts).expect("diagnose");
    assert_eq!(r.window.baseline.kind, BaselineKind::Dataset);
    let ax = r.axes.iter().find(|a| a.leaf == "etcd-other").unwrap();
    assert!(ax.onset.is_some(), "{:?}", ax.timeline);
    let ev = ax.evidence.iter().find(|e| e.signal == "etcd_latency").unwrap();
    assert!(ev.baseline.is_some_and(|b| b < 0.01), "{:?}", ev.baseline);
}

#[test]
fn window_and_range_resolution() {
    let data = bitter(7, None, None);
    let (g, _) = grid(&data, &Options::default()).unwrap();
    assert_eq!(g.steps.len(), 7);
    assert_eq!(g.range, 60_000, "4 × 15 s");
    let (g, _) = grid(
        &data,
        &Options {
            step: Some(60_000),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(g.range, 120_000, "2 × step");
    assert_eq!(
        *g.steps.last().unwrap(),
        T0 + 6 * IV,
        "steps end at the window end"
    );
    let (g, _) = grid(
        &data,
        &Options {
            at: Some(T0 + 3 * IV),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(*g.steps.last().unwrap(), T0 + 3 * IV);
    assert!(matches!(
        grid(
            &data,
            &Options {
                at: Some(T0 - 1),
                ..Options::default()
            }
        ),
        Err(EngineError::Window(_))
    ));
    assert_eq!(
        grid(&Dataset::default(), &Options::default()).unwrap_err(),
        EngineError::NoData
    );
}

#[test]
fn default_rules_run_on_a_hand_built_cluster() {
    // The shipped tree on the bitter-zone data: etcd disk named, no evaluation errors.
    let rules = RuleSet::default_rules().expect("default rules");
    let data = bitter(40, Some(20), Some(26));
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    let errors: Vec<&Gap> = r
        .gaps
        .iter()
        .filter(|g| g.kind == GapKind::EvaluationError)
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(
        (rc.axis.as_str(), rc.sub_axis.as_deref()),
        ("etcd", Some("disk")),
        "{}",
        r.verdict.summary
    );
    assert!(
        r.verdict.downstream.iter().any(|d| d.axis == "apf"),
        "{:?}",
        r.verdict.downstream
    );
    // Controller signals have no targets: reported, not guessed.
    assert!(r
        .gaps
        .iter()
        .any(|g| g.kind == GapKind::RoleAbsent && g.subject == "controller"));
    // An unexposed family is named, optional families are not blamed.
    let g = r
        .gaps
        .iter()
        .find(|g| g.subject == "admission_webhook_errors")
        .expect("gap");
    assert_eq!(g.kind, GapKind::NotExposed);
    assert!(!g.message.contains("rejection_count"), "{}", g.message);
    assert!(
        g.message
            .contains("apiserver_admission_step_admission_duration_seconds_count"),
        "{}",
        g.message
    );
    // The other way round: APF saturates while etcd stays in its baseline.
    let r = diagnose(&rules, &bitter(40, None, Some(20)), &Options::default()).expect("diagnose");
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.axis, "apf", "{}", r.verdict.summary);
    assert!(
        r.verdict.downstream.iter().all(|d| d.axis != "etcd"),
        "{:?}",
        r.verdict.downstream
    );
}

/// An apiserver whose watch caches re-initialise: once because the process
/// restarted at step 20 (`restart`), or once while it was up (`!restart`).
fn reinit(restart: bool) -> Dataset {
    let n = 40;
    let mut s = Sim::new(n);
    let a = s.target("apiserver-0", Role::Apiserver);
    let t0s = (T0 / 1000) as f64;
    let start = move |i: usize| {
        if restart && i >= 20 {
            t0s + 300.0
        } else {
            t0s - 3600.0
        }
    };
    s.gauge(a, "process_start_time_seconds", &[], start);
    let inits = move |i: usize| match (restart, i) {
        (true, i) if i >= 20 => 60.0,
        (false, i) if i >= 25 => 71.0,
        _ => 70.0,
    };
    s.gauge(
        a,
        "apiserver_watch_cache_initializations_total",
        &[("resource", "pods")],
        inits,
    );
    let mut d = s.finish();
    for t in &mut d.targets {
        for (i, snap) in t.snapshots.iter_mut().enumerate() {
            snap.process_start = Some(start(i));
        }
    }
    d
}

#[test]
fn watch_cache_reinits_after_a_restart_are_not_a_cacher_failure() {
    let rules = RuleSet::default_rules().expect("default rules");
    let r = diagnose(&rules, &reinit(true), &Options::default()).expect("diagnose");
    let src = &r.sources[0];
    assert_eq!(src.restarts, vec![T0 + 20 * IV]);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("apiserver-0 (apiserver) restarted at 2026-01-01T00:05:00Z")),
        "{:?}",
        r.warnings
    );
    let wc = r.axes.iter().find(|a| a.leaf == "watch-cache").unwrap();
    assert!(wc.onset.is_none(), "{:?}", wc.timeline);
    let ev = wc
        .evidence
        .iter()
        .find(|e| e.signal == "watch_cache_reinits")
        .unwrap();
    assert_eq!(ev.availability, Availability::Evaluated);
    assert!(ev.series.iter().flatten().all(|v| *v == 0.0), "{:?}", ev.series);

    // The same re-initialisation while the process has been up for an hour lights it.
    let r = diagnose(&rules, &reinit(false), &Options::default()).expect("diagnose");
    let wc = r.axes.iter().find(|a| a.leaf == "watch-cache").unwrap();
    assert_eq!(wc.onset, Some(T0 + 25 * IV), "{:?}", wc.timeline);
    // Lit while the re-init is inside the 1 m range, then back to 0. The other
    // watch signals are not exposed here: they are left out of the questions,
    // so the leaf recovers.
    let ev = wc
        .evidence
        .iter()
        .find(|e| e.signal == "watch_cache_reinits")
        .unwrap();
    let positive: Vec<usize> = ev
        .series
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_some_and(|x| x > 0.0))
        .map(|(i, _)| i)
        .collect();
    // Ranges are left-open (Prometheus 3): the jump from step 24 to 25 is seen
    // by the windows ending at steps 25–27 only.
    assert_eq!(positive, vec![25, 26, 27]);
    assert_eq!(wc.recovered, Some(T0 + 28 * IV));
}

#[test]
fn live_scrape_of_six_rounds_at_five_seconds_gets_a_20s_window_and_rates() {
    let mut store = Store::new();
    let mut target = Target {
        name: "apiserver-0".into(),
        role: Role::Apiserver,
        role_reason: "given".into(),
        version: None,
        time_source: TimeSource::Scrape,
        snapshots: Vec::new(),
        families: ["apiserver_request_total".to_string()].into_iter().collect(),
        failures: Vec::new(),
    };
    let ok = store.labels([
        ("__name__", "apiserver_request_total"),
        ("instance", "apiserver-0"),
        ("role", "apiserver"),
        ("code", "200"),
    ]);
    let bad = store.labels([
        ("__name__", "apiserver_request_total"),
        ("instance", "apiserver-0"),
        ("role", "apiserver"),
        ("code", "503"),
    ]);
    for i in 0..6i64 {
        let t = T0 + i * 5_000;
        store.push(&ok, t, 1000.0 + 50.0 * i as f64);
        store.push(&bad, t, 10.0 + 25.0 * i as f64);
        target.snapshots.push(Snapshot {
            time: t,
            origin: "live".into(),
            process_start: Some(1.0),
        });
    }
    let data = Dataset {
        store,
        targets: vec![target],
        warnings: Vec::new(),
        audit: None,
        logs: None,
    };
    let r = diagnose(&mini(), &data, &Options::default()).expect("diagnose");
    assert_eq!(r.window.step, 5_000);
    assert_eq!(r.window.range, 20_000);
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "joint")
        .unwrap()
        .evidence
        .iter()
        .find(|e| e.signal == "errors")
        .unwrap();
    // A third of the requests fail; every step but the first has a rate.
    let known: Vec<f64> = ev.series.iter().flatten().copied().collect();
    assert_eq!(known.len(), 5, "{:?}", ev.series);
    // Early windows extrapolate each series differently at the start of the
    // data (Prometheus's extrapolatedRate); full windows give the exact share.
    assert!(known.iter().all(|v| (0.29..0.34).contains(v)), "{known:?}");
    assert!(
        known[3..].iter().all(|v| (v - 1.0 / 3.0).abs() < 1e-9),
        "{known:?}"
    );
    let rc = r
        .verdict
        .root_cause
        .as_ref()
        .expect("joint: symptom without a lit axis");
    assert_eq!(rc.axis, "joint");
    assert_eq!(rc.onset, Some(T0 + 5_000));

    let late = Options {
        at: Some(T0 + 3_600_000),
        ..Options::default()
    };
    let r = diagnose(&mini(), &data, &late).expect("diagnose");
    assert!(
        r.warnings.iter().any(|w| w.contains("after the last snapshot")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn proposals_failing_while_watch_events_collapse_is_the_p0_compound() {
    let n = 40;
    let mut s = Sim::new(n);
    let a = s.target("apiserver-0", Role::Apiserver);
    let e: Vec<usize> = (0..3)
        .map(|k| s.target(&format!("etcd-{k}"), Role::Etcd))
        .collect();
    s.counter(
        a,
        "apiserver_watch_events_total",
        &[("resource", "pods")],
        0,
        |i| if i >= 20 { 0.0 } else { 50.0 },
    );
    for &t in &e {
        s.counter(t, "etcd_server_proposals_failed_total", &[], 0, |i| {
            if i >= 20 {
                2.0
            } else {
                0.0
            }
        });
        s.gauge(t, "etcd_server_has_leader", &[], |_| 1.0);
    }
    let data = s.finish();
    let rules = RuleSet::default_rules().expect("default rules");
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    // Failed proposals light raft at once. The watch-event rate needs most of
    // a range window to fall below a fifth of its baseline, but the shortest
    // window that holds two scrapes sees the collapse at once and dates it: both
    // start together, and the more specific compound (P0) wins the tie, as the
    // tree orders it.
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(
        (rc.axis.as_str(), rc.sub_axis.as_deref()),
        ("etcd", Some("commit-stall")),
        "{}",
        r.verdict.summary
    );
    assert_eq!(rc.onset, Some(T0 + 20 * IV));
    assert_eq!(format!("{}", rc.severity), "P0");
    assert!(
        r.verdict
            .ties
            .iter()
            .any(|t| t.sub_axis.as_deref() == Some("raft")),
        "{:?}",
        r.verdict.ties
    );
    let ax = r.axes.iter().find(|a| a.leaf == "etcd-commit-stall").unwrap();
    assert!(
        ax.instances.contains(&"apiserver-0".to_string()) && ax.instances.contains(&"etcd-1".to_string())
    );
    let ev = ax
        .evidence
        .iter()
        .find(|e| e.signal == "watch_events_rate")
        .unwrap();
    assert!(
        ev.note.as_deref().unwrap_or("").contains("onset dated"),
        "{:?}",
        ev.note
    );
}

#[test]
fn explicit_baseline_range_of_the_same_data() {
    let data = bitter(40, Some(20), Some(26));
    let opts = Options {
        baseline: BaselineSpec::Range {
            from: T0,
            to: T0 + 10 * IV,
        },
        ..Options::default()
    };
    let r = diagnose(&mini(), &data, &opts).expect("diagnose");
    assert_eq!(r.window.baseline.kind, BaselineKind::Range);
    assert_eq!(
        (r.window.baseline.from, r.window.baseline.to),
        (Some(T0), Some(T0 + 10 * IV))
    );
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.sub_axis.as_deref(), Some("disk"));
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "etcd-disk")
        .unwrap()
        .evidence
        .iter()
        .find(|e| e.signal == "wal_fsync")
        .unwrap();
    let b = ev
        .instances
        .iter()
        .find(|i| i.instance == "etcd-0")
        .and_then(|i| i.baseline)
        .expect("baseline");
    assert!(b > 0.0 && b < 0.01, "{b}");

    let bad = Options {
        baseline: BaselineSpec::Range {
            from: T0 + 10 * IV,
            to: T0,
        },
        ..Options::default()
    };
    let err = diagnose(&mini(), &data, &bad).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid baseline (explicit range): the window ends"),
        "{err}"
    );
    let empty = Dataset::default();
    let none = Options {
        baseline: BaselineSpec::Dataset(&empty),
        ..Options::default()
    };
    let err = diagnose(&mini(), &data, &none).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid baseline (separate capture): it has no snapshots"
    );
}

/// Three etcd members with fast disks, a leader, and one leader change each
/// since they started.
fn quiet_etcd(n: usize) -> Sim {
    let mut s = Sim::new(n);
    for k in 0..3 {
        let t = s.target(&format!("etcd-{k}"), Role::Etcd);
        s.gauge(t, "etcd_server_has_leader", &[], |_| 1.0);
        s.histogram(t, "etcd_disk_wal_fsync_duration_seconds", &[], 20.0, |_| 0.003);
        s.histogram(t, "etcd_disk_backend_commit_duration_seconds", &[], 10.0, |_| {
            0.006
        });
    }
    s
}

fn default_rules() -> RuleSet {
    RuleSet::default_rules().expect("default rules")
}

#[test]
fn a_restarted_member_s_first_window_is_warm_up() {
    let n = 40;
    let data = |restart_seen: bool| {
        let mut s = quiet_etcd(n);
        for k in 0..3 {
            // etcd-2 restarts at step 20: its counter starts again and its own
            // first election counts one leader change.
            s.gauge(k, "etcd_server_leader_changes_seen_total", &[], move |i| {
                if k == 2 && (20..21).contains(&i) {
                    0.0
                } else {
                    1.0
                }
            });
        }
        let mut d = s.finish();
        if restart_seen {
            for snap in d.targets[2].snapshots.iter_mut().skip(20) {
                snap.process_start = Some(2.0);
            }
        }
        d
    };
    let r = diagnose(&default_rules(), &data(true), &Options::default()).expect("diagnose");
    assert_eq!(r.status, Status::Healthy, "{}", r.verdict.summary);
    let src = r.sources.iter().find(|s| s.target == "etcd-2").unwrap();
    assert_eq!(src.restarts, vec![T0 + 20 * IV]);
    assert_eq!(src.warmup, vec![[T0 + 20 * IV, T0 + 20 * IV + r.window.range]]);
    // The same counter without the restart in process_start_time_seconds is an
    // election the verdict cannot excuse.
    let r = diagnose(&default_rules(), &data(false), &Options::default()).expect("diagnose");
    assert_eq!(
        r.verdict.root_cause.as_ref().map(|rc| rc.leaf.as_str()),
        Some("etcd-raft"),
        "{}",
        r.verdict.summary
    );
}

#[test]
fn a_member_that_stops_answering_extends_the_window_and_is_named() {
    let n = 40;
    let mut s = quiet_etcd(n);
    // etcd-2 stops answering at step 30; its peers elect a new leader.
    for i in 30..n {
        s.down.insert((2, i));
    }
    for k in 0..3 {
        s.gauge(k, "etcd_server_leader_changes_seen_total", &[], |i| {
            if i >= 31 {
                2.0
            } else {
                1.0
            }
        });
    }
    let mut data = s.finish();
    // Its scrapes failed until after the others' last snapshot.
    data.targets[2].failures = (30..=n as i64).map(|i| T0 + i * IV).collect();
    let r = diagnose(&default_rules(), &data, &Options::default()).expect("diagnose");
    assert_eq!(
        r.window.to,
        T0 + n as i64 * IV,
        "the window ends at the last attempt"
    );
    let src = r.sources.iter().find(|s| s.target == "etcd-2").unwrap();
    assert_eq!(src.failed_scrapes, 11);
    assert_eq!(src.missing, vec![[T0 + 29 * IV, T0 + n as i64 * IV]]);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.leaf, "etcd-raft", "{}", r.verdict.summary);
    assert_eq!(rc.instances, ["etcd-2"]);
    assert_eq!(rc.affected, ["etcd-0", "etcd-1"]);
    assert_eq!(rc.unreachable[0].from, T0 + 30 * IV);
    assert!(
        r.verdict.summary.contains("etcd-2 stopped answering"),
        "{}",
        r.verdict.summary
    );
    assert_eq!(r.status, Status::Degraded);
}

#[test]
fn a_p99_of_too_few_requests_is_not_judged() {
    let n = 40;
    let run = |rate: f64| {
        let mut s = Sim::new(n);
        let a = s.target("apiserver-0", Role::Apiserver);
        s.counter(
            a,
            "apiserver_request_total",
            &[("code", "200"), ("verb", "GET")],
            0,
            move |_| rate,
        );
        // Every request takes 2 s from step 20 on.
        s.histogram(
            a,
            "apiserver_request_duration_seconds",
            &[("verb", "GET"), ("subresource", "")],
            rate,
            |i| if i >= 20 { 2.0 } else { 0.05 },
        );
        diagnose(&default_rules(), &s.finish(), &Options::default()).expect("diagnose")
    };
    // 1 request a second: 60 per 1 m window, fewer than the 100 a p99 needs.
    let r = run(1.0);
    assert_eq!(r.status, Status::Inconclusive, "{}", r.verdict.summary);
    let ev = r
        .axes
        .iter()
        .flat_map(|a| a.evidence.iter())
        .find(|e| e.signal == "request_latency_p99")
        .unwrap();
    assert!(
        ev.note
            .as_deref()
            .unwrap_or("")
            .contains("not judged: too few observations"),
        "{:?}",
        ev.note
    );
    // 10 a second: the slow p99 is judged, and clients feel it.
    let r = run(10.0);
    assert_eq!(
        r.symptom.as_ref().map(|s| s.state),
        Some(AxisState::Lit),
        "{}",
        r.verdict.summary
    );
}

/// One apiserver whose APF rejects from step 20 on, with the rejections'
/// labels as given (snake case from 1.20, camel case in 1.17–1.19).
fn apf_rejecting(rejected: &[(&[(&str, &str)], f64)]) -> Dataset {
    let mut s = Sim::new(40);
    let api = s.target("apiserver-0", Role::Apiserver);
    s.counter(
        api,
        "apiserver_request_total",
        &[("code", "200"), ("verb", "GET")],
        0,
        |_| 100.0,
    );
    s.counter(
        api,
        "apiserver_flowcontrol_dispatched_requests_total",
        &[
            ("priority_level", "workload-low"),
            ("flow_schema", "service-accounts"),
        ],
        0,
        |_| 100.0,
    );
    for (labels, rate) in rejected {
        let r = *rate;
        s.counter(
            api,
            "apiserver_flowcontrol_rejected_requests_total",
            labels,
            20,
            move |_| r,
        );
    }
    s.finish()
}

#[test]
fn apf_contributors_are_named_by_flow_schema_and_priority_level() {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let data = apf_rejecting(&[
        (
            &[
                ("flow_schema", "service-accounts"),
                ("priority_level", "workload-low"),
                ("reason", "queue-full"),
            ],
            30.0,
        ),
        (
            &[
                ("flow_schema", "global-default"),
                ("priority_level", "global-default"),
                ("reason", "time-out"),
            ],
            10.0,
        ),
    ]);
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    // No etcd latency in this data: APF is failing, its cause undecided.
    let rc = r.verdict.failing().expect("failing axis");
    assert_eq!(rc.axis, "apf", "{}", r.verdict.summary);
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "apf")
        .and_then(|a| a.evidence.iter().find(|e| e.signal == "apf_rejection_ratio"))
        .expect("apf evidence");
    let who: Vec<(String, String, f64, f64)> = ev
        .contributors
        .iter()
        .map(|c| {
            (
                c.labels["flow_schema"].clone(),
                c.labels["priority_level"].clone(),
                c.value.unwrap(),
                c.share.unwrap(),
            )
        })
        .collect();
    assert_eq!(who.len(), 2, "{who:?}");
    assert_eq!(
        (who[0].0.as_str(), who[0].1.as_str()),
        ("service-accounts", "workload-low")
    );
    assert!(
        (who[0].2 - 30.0).abs() < 1e-6 && (who[0].3 - 0.75).abs() < 1e-9,
        "{who:?}"
    );
    assert_eq!(who[1].0, "global-default");
    assert!((who[1].3 - 0.25).abs() < 1e-9, "{who:?}");
    assert!(ev.contributors_note.is_none(), "{:?}", ev.contributors_note);
    // The same rejections in the camel-case labels of 1.17–1.19: the
    // contributors cannot be named, and the evidence says why.
    let data = apf_rejecting(&[(
        &[
            ("flowSchema", "service-accounts"),
            ("priorityLevel", "workload-low"),
            ("reason", "queue-full"),
        ],
        30.0,
    )]);
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    assert_eq!(r.verdict.failing().map(|rc| rc.axis.as_str()), Some("apf"));
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "apf")
        .and_then(|a| a.evidence.iter().find(|e| e.signal == "apf_rejection_ratio"))
        .unwrap();
    let note = ev.contributors_note.as_deref().unwrap_or("");
    assert!(
        note.contains("flow_schema, priority_level absent in this version"),
        "{note}"
    );
    assert!(ev
        .contributors
        .iter()
        .all(|c| c.labels.values().all(|v| v.is_empty())));
}

/// Context evidence of what fills etcd and where LISTs go: the LIST
/// fall-through share (1 − cached LISTs / LISTs) rising from 10% to 80%, and
/// the fragmentation of a 500 MB file with 200 MB in use (60% free) against one
/// under the 100 MB floor of etcdDatabaseHighFragmentationRatio.
#[test]
fn list_fallthrough_and_fragmentation_are_measured_as_context() {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let mut s = Sim::new(40);
    let api = s.target("apiserver-0", Role::Apiserver);
    let e0 = s.target("etcd-0", Role::Etcd);
    let e1 = s.target("etcd-1", Role::Etcd);
    s.counter(
        api,
        "apiserver_request_total",
        &[("code", "200"), ("verb", "LIST")],
        0,
        |_| 10.0,
    );
    s.counter(
        api,
        "apiserver_cache_list_total",
        &[("resource_prefix", "/pods")],
        0,
        |i| {
            if i < 20 {
                9.0
            } else {
                2.0
            }
        },
    );
    for (e, in_use) in [(e0, 200e6), (e1, 50e6)] {
        s.gauge(e, "etcd_mvcc_db_total_size_in_bytes", &[], |_| 500e6);
        s.gauge(e, "etcd_mvcc_db_total_size_in_use_in_bytes", &[], move |_| in_use);
        s.gauge(e, "etcd_server_has_leader", &[], |_| 1.0);
    }
    let data = s.finish();
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    let ev = |leaf: &str, sig: &str| {
        r.axes
            .iter()
            .find(|a| a.leaf == leaf)
            .and_then(|a| a.evidence.iter().find(|e| e.signal == sig))
            .unwrap_or_else(|| panic!("{leaf}: no {sig}"))
            .clone()
    };
    let ft = ev("etcd-other", "list_cache_fallthrough_ratio");
    assert!(ft.context);
    assert!((ft.value.unwrap() - 0.8).abs() < 1e-6, "{:?}", ft.value);
    assert!((ft.baseline.unwrap() - 0.1).abs() < 1e-6, "{:?}", ft.baseline);
    assert_eq!(ft.lit, Some(true), "8 × its baseline share");
    let series = &ft.series;
    assert!(series[5].is_some_and(|v| (v - 0.1).abs() < 1e-6), "{series:?}");
    let fr = ev("etcd-quota", "etcd_db_fragmentation");
    let by: BTreeMap<&str, Option<f64>> = fr
        .instances
        .iter()
        .map(|i| (i.instance.as_str(), i.value))
        .collect();
    assert!((by["etcd-0"].unwrap() - 0.6).abs() < 1e-9, "{by:?}");
    assert_eq!(
        by["etcd-1"],
        Some(0.0),
        "under 100 MB in use: not judged fragmented"
    );
    assert_eq!(fr.lit, Some(true));
    assert!(
        fr.localisation
            .as_deref()
            .unwrap_or("")
            .starts_with("only etcd-0"),
        "{:?}",
        fr.localisation
    );
    // Context only: neither lights an axis by itself.
    assert!(
        r.axes.iter().all(|a| a.state != AxisState::Lit),
        "{}",
        r.verdict.summary
    );
}
