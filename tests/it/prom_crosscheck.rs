//! cptriage's PromQL evaluator against a real Prometheus, on the same data.
//!
//! Two scenario captures (`etcd-raft-member-down`: a member down for 3 minutes,
//! then restarted so every counter resets to 0; `etcd-quota-nospace`: kube-apiserver
//! 1.35 and etcd 3.6, so other alternatives of the signals apply) are loaded as
//! `cptriage diagnose` loads them (each series labelled `instance` and `role`),
//! written as OpenMetrics text with timestamps, turned into TSDB blocks with
//! `promtool tsdb create-blocks-from openmetrics`, and served by
//! `/usr/bin/prometheus`. Every expression of every signal of
//! `rules/default.yaml` whose metrics exist in the data is instantiated as the
//! engine does (`$window` resolved, `role="…"` injected) and evaluated both
//! ways over the same range and step; the results must agree to 1e-6 relative
//! per series and step (NaN equals NaN; a series or point absent on one side
//! must be absent on the other).
//!
//! Details that make the comparison exact:
//! - Every family is declared `# TYPE <name> unknown`: OpenMetrics ties sample
//!   names to their family's type (`_total` for counters, `_bucket`/`_count`/
//!   `_sum` for histograms) and a counter family must not be called `x_total`;
//!   `unknown` families have exactly one sample name, the family name, so every
//!   stored series is written under its own name, unchanged. PromQL does not
//!   use the type.
//! - The installed Prometheus is 2.42, whose range windows and lookback are
//!   closed (`[t − range, t]`); cptriage mirrors Prometheus 3 (`(t − range, t]`).
//!   On a grid aligned with the 15 s samples the two legitimately differ by the
//!   sample on the boundary, so the query grid is offset by half a step
//!   (7.5 s) and no sample sits on a window boundary.
//! - The grid starts one `$window` after the first sample, so no window reaches
//!   before the data. Where one does, Prometheus 2.42 and 3 extrapolate `rate`
//!   differently: 2.42 limits the extrapolation to the counter's zero point
//!   before deciding whether to extrapolate by half an interval, Prometheus 3
//!   (and cptriage) after; on histogram buckets with small first counts this
//!   moved `histogram_quantile` by up to 0.3 % in the first two steps. After a
//!   restart or on a created series the first value is 0 and both agree.
//! - Prometheus runs with `--query.lookback-delta` equal to the engine's
//!   instant-selector lookback (the resolved `$window`, 1 m for 15 s captures)
//!   and a long retention (the blocks hold samples from 2026-01-01; the default
//!   15-day retention would delete them). create-blocks writes 2-hour-aligned
//!   blocks of past samples; the scenarios span 8–10 minutes, inside one block.
//! - Staleness markers cannot be written in OpenMetrics; these scenarios have
//!   none (a target that is down leaves a gap, no marker), which the test checks.

use crate::support::promrun;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cptriage::eval::template;
use cptriage::eval::{self, EvalOptions};
use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::source::ingest::Keep;
use cptriage::source::Dataset;
use cptriage_testkit::{openmetrics, scenario};

fn scenario_dataset(name: &str, rules: &RuleSet) -> Dataset {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/scenarios")
        .join(format!("{name}.yaml"));
    let spec = scenario::load_spec(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    scenario::dataset(spec, name, &Keep::Names(rules.referenced_metrics())).expect("generate scenario")
}

/// Writes every stored series as OpenMetrics (one `unknown` family per metric
/// name, timestamps in seconds); returns (series, samples, staleness markers).
fn write_openmetrics(ds: &Dataset, path: &Path) -> (usize, usize, usize) {
    let w = openmetrics::write(&[("", ds)], None, path).expect("write openmetrics");
    (w.series, w.samples, w.stale)
}

/// Whether targets of `role` have series of `metric` in the store.
fn exists(ds: &Dataset, role: &str, metric: &str) -> bool {
    ds.store
        .by_name(metric)
        .any(|s| s.labels.get(template::ROLE_LABEL) == Some(role))
}

type Key = Vec<(String, String)>;

fn agree(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}

struct Tally {
    exprs: usize,
    steps: usize,
    points: usize,
    skipped: Vec<String>,
}

fn crosscheck(name: &str) -> Tally {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let ds = scenario_dataset(name, &rules);
    let dir = tempfile::tempdir().expect("tempdir");
    let om = dir.path().join(format!("{name}.om.txt"));
    let (nseries, nsamples, nstale) = write_openmetrics(&ds, &om);
    assert_eq!(
        nstale, 0,
        "{name}: staleness markers cannot be written as OpenMetrics"
    );
    assert!(
        nseries > 100 && nsamples > 1000,
        "{name}: {nseries} series, {nsamples} samples"
    );
    let tsdb = dir.path().join("tsdb");
    std::fs::create_dir_all(&tsdb).expect("mkdir");
    promrun::create_blocks(&om, &tsdb).unwrap_or_else(|e| panic!("{name}: {e}"));

    let (g, _) = engine::grid(&ds, &Options::default()).expect("grid");
    let (range, step) = (g.range, g.step);
    let prom = promrun::Prometheus::start(&tsdb, &template::promql_duration(range))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let (from, to) = ds.window().expect("window");
    // Half a step off the sample grid, one window into the data (see the module comment).
    let start = from + range + step / 2;
    let end = to - step / 2;
    let grid: Vec<i64> = (0..)
        .map(|i| start + i * step)
        .take_while(|t| *t <= end)
        .collect();
    let opts = EvalOptions { lookback: range };

    let mut tally = Tally {
        exprs: 0,
        steps: grid.len(),
        points: 0,
        skipped: Vec::new(),
    };
    let mut failures = Vec::new();
    for sig in &rules.signals {
        let role = sig.def.role.as_str();
        let optional: BTreeSet<&str> = sig.def.optional_metrics.iter().map(String::as_str).collect();
        for (i, text) in sig.exprs.iter().enumerate() {
            let missing: Vec<&String> = sig.reads[i]
                .metrics
                .iter()
                .filter(|m| !optional.contains(m.as_str()) && !optional.contains(template::family_of(m)))
                .filter(|m| !exists(&ds, role, m))
                .collect();
            if !missing.is_empty() {
                tally.skipped.push(format!("{}[{i}]", sig.def.id));
                continue;
            }
            tally.exprs += 1;
            let expr = template::instantiate(text, range, role).expect("instantiate");
            let q = expr.to_string();
            let local = eval::range(&ds.store, &expr, start, end, step, &opts)
                .unwrap_or_else(|e| panic!("{name}: {}[{i}] local: {e}", sig.def.id));
            let remote = prom
                .query_range(&q, start, end, step)
                .unwrap_or_else(|e| panic!("{name}: {}[{i}] remote: {e}", sig.def.id));
            let mut l: BTreeMap<Key, BTreeMap<i64, f64>> = BTreeMap::new();
            for s in &local {
                let mut k: Key = s
                    .labels
                    .iter()
                    .map(|x| (x.name.to_string(), x.value.to_string()))
                    .collect();
                k.sort();
                l.insert(k, s.samples.iter().map(|p| (p.t, p.v)).collect());
            }
            let r: BTreeMap<Key, BTreeMap<i64, f64>> = remote
                .into_iter()
                .map(|(k, pts)| (k, pts.into_iter().collect()))
                .collect();
            let keys: BTreeSet<&Key> = l.keys().chain(r.keys()).collect();
            for k in keys {
                for t in &grid {
                    let a = l.get(k).and_then(|m| m.get(t)).copied();
                    let b = r.get(k).and_then(|m| m.get(t)).copied();
                    let ok = match (a, b) {
                        (None, None) => true,
                        (Some(a), Some(b)) => {
                            tally.points += 1;
                            agree(a, b)
                        }
                        _ => false,
                    };
                    if !ok {
                        failures.push(format!(
                            "{}[{i}] {k:?} at {t}: cptriage {a:?}, prometheus {b:?}\n    {q}",
                            sig.def.id
                        ));
                    }
                }
            }
        }
    }
    drop(prom);
    assert!(
        failures.is_empty(),
        "{name}: {} disagreements, first ones:\n{}",
        failures.len(),
        failures.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
    );
    tally
}

#[test]
fn evaluator_agrees_with_prometheus_on_every_signal() {
    promrun::require();
    let mut total = 0;
    for name in ["etcd-raft-member-down", "etcd-quota-nospace"] {
        let t = crosscheck(name);
        eprintln!(
            "{name}: {} signal expressions × {} steps compared ({} values present on both sides); not in the data: {}",
            t.exprs,
            t.steps,
            t.points,
            t.skipped.join(", ")
        );
        assert!(
            t.exprs >= 40,
            "{name}: only {} expressions could be compared",
            t.exprs
        );
        assert!(
            t.points > t.exprs * t.steps / 2,
            "{name}: mostly empty results ({} points)",
            t.points
        );
        total += t.exprs * t.steps;
    }
    eprintln!("{total} (signal expression, step) pairs compared in all");
}

/// The counter reset of `etcd-raft-member-down` is in the compared data: etcd-2's
/// counters drop to 0 at its restart, and `rate` over the reset is compared
/// (as part of the signals above); here the reset itself is checked.
#[test]
fn member_down_scenario_has_a_counter_reset() {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let ds = scenario_dataset("etcd-raft-member-down", &rules);
    let resets = ds
        .store
        .by_name("grpc_server_handled_total")
        .filter(|s| s.labels.get("instance") == Some("etcd-2"))
        .filter(|s| s.samples().windows(2).any(|w| w[1].v < w[0].v))
        .count();
    assert!(resets > 0, "no counter reset on etcd-2");
}
