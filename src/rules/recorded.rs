//! Recorded signals as a source: when the Prometheus (Thanos, Mimir) of
//! `diagnose --prometheus` holds the series that `cptriage rules export`
//! records (`cptriage:<signal>`, `cptriage:observations:<signal>`), a
//! signal is read from its recorded series instead of its raw expression:
//! one query per signal for the whole fleet, each series already one value
//! per cluster and instance. Everything after the values (baselines,
//! thresholds, onsets, the walk) is the same code as the raw path.
//!
//! - **Detection.** One range query over the window at [`DETECT_POINTS`]
//!   points, `group by (__name__, cptriage_digest, cptriage_window[, LABEL])`
//!   of the `last_over_time` of every recorded series over a detection step, tells which recordings exist, with which digest
//!   and window, for which cluster, and whether they cover the window.
//! - **Compatibility.** Every recorded series carries the digest of the
//!   expression it records ([`export::digest`]): the diagnosis computes the
//!   digest of each signal as it would export it (its own role selectors, the
//!   recorded window, the fleet label) and reads a recording only when the
//!   digests are equal. A signal whose recording is missing, from other rules
//!   (another digest), over another window, or absent at some detection
//!   point from one window after the data begins to the end (stale) is read
//!   from its raw expression; [`RecordedSignals`] says which path each signal
//!   took and why.
//! - **Window.** The recorded window (the export's `--window`) becomes the
//!   diagnosis's `$window`, so the raw expressions of the signals that fall
//!   back use the same window; the pipeline says when it cannot (a window
//!   shorter than two scrapes).
//! - **Reading.** [`RecordedEval`] instantiates a recorded signal's
//!   expression (any of its alternatives; the recording is their `or`, see
//!   docs/export.md) at the recorded window as the recorded selector
//!   `cptriage:<signal>{cptriage_digest="…"}`, and routes its queries to a
//!   separate evaluator (fleet mode: one query set for the whole fleet);
//!   every other query (short windows, contributor breakdowns, signals read
//!   raw) goes to the raw evaluator.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::Expr;

use super::export::{self, ExportOptions, DIGEST_LABEL, WINDOW_LABEL};
use super::load::RuleSet;
use super::model::SignalRole;
use super::report::RecordedSignals;
use crate::eval::seam::{QueryError, QueryResult, RangeQuery, SignalEvaluator};
use crate::eval::template::inject_matchers;
use crate::source::prometheus::{PromError, Prometheus};
use crate::store::{Millis, Role, Store};

/// Points of the detection query over the window (its ends included).
pub const DETECT_POINTS: i64 = 9;

/// What the detection query found.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// (cluster, digest) → the detection points at which it is recorded.
    points: HashMap<(String, String), Vec<Millis>>,
    /// (cluster, record name) → the digests and windows recorded under it.
    names: HashMap<(String, String), BTreeSet<(String, String)>>,
    /// Recorded window → number of (cluster, digest) recordings.
    windows: BTreeMap<Millis, usize>,
    /// The detection points.
    grid: Vec<Millis>,
}

impl Found {
    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The window most recordings have.
    pub fn window(&self) -> Option<Millis> {
        self.windows
            .iter()
            .max_by_key(|(w, n)| (**n, std::cmp::Reverse(**w)))
            .map(|(w, _)| *w)
    }

    /// The windows found besides `w`, for a message.
    pub fn other_windows(&self, w: Millis) -> Vec<Millis> {
        self.windows.keys().copied().filter(|x| *x != w).collect()
    }

    /// Whether `digest` is recorded for `cluster` at every detection point
    /// from `since` on.
    fn covers(&self, cluster: &str, digest: &str, since: Millis) -> Result<(), &'static str> {
        let Some(pts) = self.points.get(&(cluster.to_string(), digest.to_string())) else {
            return Err("absent");
        };
        let want = self.grid.iter().filter(|t| **t >= since);
        let have: HashSet<Millis> = pts.iter().copied().collect();
        for t in want {
            if !have.contains(t) {
                return Err("stale");
            }
        }
        Ok(())
    }
}

/// The selector of every recorded signal series, with `extra` matchers.
fn detect_query(by: Option<&str>, extra: &[Matcher], range: Millis) -> String {
    let mut sel = format!("__name__=~\"{}:.+\",{DIGEST_LABEL}!=\"\"", export::PREFIX);
    for m in extra {
        sel.push(',');
        sel.push_str(&m.to_string());
    }
    let mut labels = vec!["__name__".to_string(), DIGEST_LABEL.into(), WINDOW_LABEL.into()];
    labels.extend(by.map(str::to_string));
    // `last_over_time` keeps the metric name: a recording counts at a point
    // when it has a sample in the detection step before it, whatever the
    // server's lookback.
    format!(
        "group by ({}) (last_over_time({{{sel}}}[{}]))",
        labels.join(", "),
        crate::eval::template::promql_duration(range)
    )
}

/// One query: the recorded signal series of `prom` over `[from, to]`, per
/// value of `by` (`""` without it), with the source's extra matchers.
///
/// # Errors
/// When the query fails (the caller reads every signal raw).
pub fn detect(prom: &Prometheus, by: Option<&str>, from: Millis, to: Millis) -> Result<Found, PromError> {
    let step = ((to - from) / (DETECT_POINTS - 1)).max(1000);
    let q = detect_query(by, prom.extra_matchers(), step);
    let answer = prom.api().query_range(&q, from, to, step)?;
    let mut found = Found {
        grid: (0..).map(|k| from + k * step).take_while(|t| *t <= to).collect(),
        ..Found::default()
    };
    for s in answer.data {
        let get = |l: &str| s.labels.get(l).unwrap_or("").to_string();
        let cluster = by.map(get).unwrap_or_default();
        let (name, digest, window) = (get("__name__"), get(DIGEST_LABEL), get(WINDOW_LABEL));
        let Ok(w) = crate::timefmt::parse_duration(&window) else {
            continue;
        };
        found
            .names
            .entry((cluster.clone(), name))
            .or_default()
            .insert((digest.clone(), window));
        let pts = found.points.entry((cluster, digest)).or_default();
        if pts.is_empty() {
            *found.windows.entry(w).or_default() += 1;
        }
        pts.extend(s.samples.iter().map(|p| p.t));
    }
    Ok(found)
}

/// What one signal's recordings are expected to be.
struct Expect {
    id: String,
    role: Role,
    /// The signal's expressions (`$window` unresolved), as the engine
    /// instantiates them.
    exprs: Vec<String>,
    observations: Option<String>,
    /// Per candidate export: the digests of the values and observations
    /// (none when that export's recording cannot be read, see
    /// [`per_cluster`]).
    digests: Vec<Option<(String, Option<String>)>>,
}

/// Whether an exported expression keeps the fleet label `by` in its value:
/// `scalar()` of a fleet-wide aggregation is NaN as soon as the rule
/// evaluates more than one cluster at once, so such a recording is not the
/// cluster's value (the signal is read raw).
fn per_cluster(expr: &str, by: Option<&str>) -> bool {
    by.is_none() || !expr.contains("scalar(")
}

/// The recordings a diagnosis accepts: each signal's digests as it would
/// export them over the recorded window.
pub struct Expected {
    window: Millis,
    signals: Vec<Expect>,
}

/// Why [`Expected::new`] found no usable recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordedError {
    #[error("the instances are told apart by `{0}`, the recorded signals by `instance`")]
    InstanceLabel(String),
    #[error("{0}")]
    Export(#[from] export::ExportError),
}

impl Expected {
    /// The digests of every metric signal of `rules` as exported with `prom`'s
    /// role selectors, the window `window` and each of `by` (the fleet label,
    /// or none, or the label of an equality `--selector`).
    ///
    /// # Errors
    /// When the source tells instances apart by another label than
    /// `instance`, or a signal cannot be exported.
    pub fn new(
        rules: &RuleSet,
        prom: &Prometheus,
        window: Millis,
        by: &[Option<String>],
    ) -> Result<Expected, RecordedError> {
        if prom.instance_label() != "instance" {
            return Err(RecordedError::InstanceLabel(prom.instance_label().to_string()));
        }
        let text = |r: Role, default: &str| {
            prom.role_selector(r)
                .map(|s| s.text.clone())
                .unwrap_or_else(|| default.to_string())
        };
        use crate::eval::select::{
            DEFAULT_APISERVER_SELECTOR, DEFAULT_CONTROLLER_SELECTOR, DEFAULT_ETCD_SELECTOR,
        };
        let mut base = ExportOptions::new(
            &text(Role::Apiserver, DEFAULT_APISERVER_SELECTOR),
            &text(Role::Etcd, DEFAULT_ETCD_SELECTOR),
            &text(Role::Controller, DEFAULT_CONTROLLER_SELECTOR),
        )?;
        base.window = window;
        let mut signals = Vec::new();
        for sig in &rules.signals {
            if matches!(
                sig.def.role,
                SignalRole::Audit | SignalRole::Logs | SignalRole::Node
            ) {
                continue;
            }
            let mut digests = Vec::new();
            for b in by {
                let opts = ExportOptions {
                    by: b.clone(),
                    ..base.clone()
                };
                let r = export::recording(sig, &opts)?;
                let usable = per_cluster(&r.values.0, b.as_deref())
                    && r.observations
                        .as_ref()
                        .is_none_or(|o| per_cluster(&o.0, b.as_deref()));
                digests.push(usable.then(|| (r.values.1, r.observations.map(|o| o.1))));
            }
            signals.push(Expect {
                id: sig.def.id.clone(),
                role: sig.def.role.role(),
                exprs: sig.exprs.clone(),
                observations: sig.observations.as_ref().map(|o| o.expr.clone()),
                digests,
            });
        }
        Ok(Expected { window, signals })
    }

    /// The recorded window.
    pub fn window(&self) -> Millis {
        self.window
    }

    /// What one cluster (`""` without a fleet label) reads from recordings,
    /// given what was found; recordings are required from `since` on. `own`
    /// are the matchers every recorded selector carries (the cluster's, the
    /// extra selector's).
    /// Signals of roles without targets in `roles` are left out (they are
    /// not queried either way).
    pub fn choose(
        &self,
        found: &Found,
        cluster: &str,
        (since, roles): (Millis, &BTreeSet<Role>),
        own: &[Matcher],
    ) -> Choice {
        let mut map = HashMap::new();
        let mut paths = RecordedSignals {
            window: self.window,
            ..RecordedSignals::default()
        };
        for e in self.signals.iter().filter(|e| roles.contains(&e.role)) {
            match self.pick(e, found, cluster, since) {
                Ok((values, observations)) => {
                    let sel = |record: String, digest: &str| -> Option<Expr> {
                        let mut x = crate::eval::parse(&record).ok()?;
                        let mut ms = vec![Matcher::new(MatchOp::Equal, DIGEST_LABEL, digest)];
                        ms.extend(own.iter().cloned());
                        inject_matchers(&mut x, &ms);
                        Some(x)
                    };
                    let Some(v) = sel(export::signal_record(&e.id), &values) else {
                        paths
                            .raw
                            .insert(e.id.clone(), "its record name does not parse".into());
                        continue;
                    };
                    for text in &e.exprs {
                        map.insert(text.clone(), (e.role, v.clone()));
                    }
                    if let (Some(text), Some(o)) = (
                        &e.observations,
                        observations.and_then(|d| sel(export::observations_record(&e.id), &d)),
                    ) {
                        map.entry(text.clone()).or_insert((e.role, o));
                    }
                    paths.recorded.push(e.id.clone());
                }
                Err(why) => {
                    paths.raw.insert(e.id.clone(), why.to_string());
                }
            }
        }
        Choice {
            window: self.window,
            map,
            paths,
        }
    }

    /// The digests of `e`'s recordings for `cluster`, or why it is read raw.
    fn pick(
        &self,
        e: &Expect,
        found: &Found,
        cluster: &str,
        since: Millis,
    ) -> Result<(String, Option<String>), ReadRaw> {
        let mut stale = false;
        if e.digests.iter().all(Option::is_none) {
            return Err(ReadRaw::Scalar);
        }
        for (values, observations) in e.digests.iter().flatten() {
            let v = found.covers(cluster, values, since);
            let o = match (&e.observations, observations) {
                (Some(_), Some(d)) => found.covers(cluster, d, since),
                (Some(_), None) => Err("absent"),
                (None, _) => Ok(()),
            };
            match (v, o) {
                (Ok(()), Ok(())) => return Ok((values.clone(), observations.clone())),
                (Err("stale"), _) | (_, Err("stale")) => stale = true,
                _ => {}
            }
        }
        if stale {
            return Err(ReadRaw::Stale);
        }
        let under = found
            .names
            .get(&(cluster.to_string(), export::signal_record(&e.id)));
        let window = crate::timefmt::format_duration(self.window);
        Err(match under {
            None => ReadRaw::NotRecorded,
            Some(set) if set.iter().all(|(_, w)| *w != window) => ReadRaw::OtherWindow,
            Some(_) => ReadRaw::OtherRules,
        })
    }
}

/// Why a signal is read from its raw expression instead of its recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadRaw {
    #[error("its recording is not per cluster (scalar)")]
    Scalar,
    #[error("not recorded over the whole window")]
    Stale,
    #[error("not recorded")]
    NotRecorded,
    #[error("recorded over another window")]
    OtherWindow,
    #[error("recorded by other rules")]
    OtherRules,
}

/// What one diagnosis reads from recordings.
pub struct Choice {
    window: Millis,
    /// A signal's expression text → the role and its recorded selector.
    map: HashMap<String, (Role, Expr)>,
    pub paths: RecordedSignals,
}

impl Choice {
    /// Whether any signal is read from recordings.
    pub fn any(&self) -> bool {
        !self.paths.recorded.is_empty()
    }
}

/// A [`SignalEvaluator`] that reads the recorded signals of a [`Choice`]
/// through `recorded` and everything else through `raw`.
pub struct RecordedEval<'a> {
    pub raw: &'a dyn SignalEvaluator,
    pub recorded: &'a dyn SignalEvaluator,
    choice: &'a Choice,
    /// The recorded selectors instantiated (by their text).
    sent: Mutex<HashSet<String>>,
}

impl<'a> RecordedEval<'a> {
    pub fn new(raw: &'a dyn SignalEvaluator, recorded: &'a dyn SignalEvaluator, choice: &'a Choice) -> Self {
        RecordedEval {
            raw,
            recorded,
            choice,
            sent: Mutex::new(HashSet::new()),
        }
    }
}

impl SignalEvaluator for RecordedEval<'_> {
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError> {
        match self.choice.map.get(text) {
            Some((r, e)) if window == self.choice.window && *r == role => {
                self.sent
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(e.to_string());
                Ok(e.clone())
            }
            _ => self.raw.instantiate(text, window, role),
        }
    }

    fn range(&self, store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult> {
        let sent = self.sent.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let is_rec: Vec<bool> = queries
            .iter()
            .map(|q| sent.contains(&q.expr.to_string()))
            .collect();
        let pick = |want: bool| -> Vec<RangeQuery> {
            queries
                .iter()
                .zip(&is_rec)
                .filter(|(_, r)| **r == want)
                .map(|(q, _)| *q)
                .collect()
        };
        let (rec, raw) = (pick(true), pick(false));
        let mut rec_out = if rec.is_empty() {
            Vec::new()
        } else {
            self.recorded.range(store, &rec)
        }
        .into_iter();
        let mut raw_out = if raw.is_empty() {
            Vec::new()
        } else {
            self.raw.range(store, &raw)
        }
        .into_iter();
        is_rec
            .into_iter()
            .map(|r| {
                let next = if r { rec_out.next() } else { raw_out.next() };
                next.unwrap_or(Err(QueryError::NotQueried))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detection_query_groups_by_name_digest_window_and_label() {
        let q = detect_query(Some("cluster"), &[], 60_000);
        assert_eq!(
            q,
            "group by (__name__, cptriage_digest, cptriage_window, cluster) (last_over_time({__name__=~\"cptriage:.+\",cptriage_digest!=\"\"}[1m]))"
        );
        crate::eval::parse(&q).expect("parses");
    }

    #[test]
    fn a_scalar_recording_is_not_per_cluster() {
        assert!(per_cluster("scalar(max(x))", None));
        assert!(!per_cluster("a * scalar(max by (cluster) (x))", Some("cluster")));
        assert!(per_cluster("sum by (instance, cluster) (x)", Some("cluster")));
    }

    #[test]
    fn coverage_needs_every_point_from_since() {
        let mut f = Found {
            grid: vec![0, 10, 20, 30],
            ..Found::default()
        };
        f.points.insert((String::new(), "d".into()), vec![10, 20, 30]);
        assert_eq!(f.covers("", "d", 5), Ok(()));
        assert_eq!(f.covers("", "d", 0), Err("stale"));
        assert_eq!(f.covers("", "x", 0), Err("absent"));
        f.points.insert((String::new(), "e".into()), vec![0, 10, 20]);
        assert_eq!(f.covers("", "e", 0), Err("stale"));
    }
}
