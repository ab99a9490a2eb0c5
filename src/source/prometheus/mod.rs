//! Prometheus, Thanos Query, Mimir or Cortex as a source: the rules'
//! expressions are evaluated by the remote PromQL engine over its HTTP API
//! instead of over dumps.
//!
//! - **Roles.** Prometheus series have no `role` label: each role is a label
//!   selector (by default `{job="apiserver"}`, `{job=~".*etcd.*"}`,
//!   `{job=~".*controller-manager.*"}`, which fit kube-prometheus and kubeadm
//!   setups), added to every selector of the role's expressions together with
//!   the extra `--selector` matchers (e.g. `{cluster="prod"}`).
//! - **Instances** are told apart by the `instance` label, or another label
//!   (`pod`): the rules' `by (instance)`/`on (instance)` then group by that
//!   label, and results are named by its values.
//! - **Targets** are the instances of each role's `up` series in the window;
//!   the samples of `up` (= 1) are their snapshots, so the scrape interval, the
//!   gaps (scrapes that failed) and restarts (`process_start_time_seconds`)
//!   are reported as for a capture.
//! - **Alternatives** of a signal are chosen from the metric names each role's
//!   series have in the window (`/api/v1/label/__name__/values` with `match[]`;
//!   in fleet mode per cluster, from one `group by (LABEL, __name__)` query).
//! - Signals are queried with `/api/v1/query_range`, at most
//!   [`PromConfig::concurrency`] at a time, each range split into chunks of at
//!   most [`PromConfig::max_points`] steps; a chunk the server refuses as too
//!   much (samples, points, timeout, size) is halved and asked again. A chunk
//!   that fails is a warning naming the signal and its time range (those
//!   steps are not judged); a query that fails whole becomes a gap of the
//!   report, and the API's warnings (partial responses) become warnings.

pub mod api;
pub mod decode;
pub mod fleet;
mod nodes;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use promql_parser::label::Matcher;
use promql_parser::parser::Expr;

use crate::eval::select;
pub use crate::eval::select::{parse_selector, RoleSelector, SelectorError};
pub use api::{Answer, Api, ApiConfig, PromError};

use crate::eval::seam::{QueryError, QueryResult, RangeQuery, SignalEvaluator};
use crate::eval::template::{promql_duration, substitute_window};
use crate::source::{Dataset, Role, Snapshot, SourceWarning, Target, TimeSource};
use crate::store::{Labels, Millis, Series, Store};

/// Most points per series of one range query by default. Prometheus refuses
/// more than 11,000 (`exceeded maximum resolution of 11,000 points per
/// timeseries`); longer ranges are split into chunks.
pub const DEFAULT_MAX_POINTS: usize = 10_000;

/// A chunk that still asks too much is halved, down to this many points.
const MIN_SPLIT_POINTS: usize = 8;

/// Longest window whose `up` samples are read one by one; longer windows read
/// `up` at the evaluation step.
pub const RAW_UP_LIMIT: Millis = 6 * 3600 * 1000;

/// Most evaluation steps of the per-cluster metric-name query of fleet mode.
const NAME_STEPS: usize = 250;
/// Step of the per-cluster metric-name query for windows up to
/// [`NAME_STEPS`] × 5 minutes.
const NAME_STEP_MAX: Millis = 5 * 60 * 1000;

/// Everything the Prometheus source needs.
#[derive(Clone, Debug)]
pub struct PromConfig {
    pub api: ApiConfig,
    pub roles: Vec<RoleSelector>,
    /// Added to every selector (`--selector`).
    pub extra: Vec<Matcher>,
    /// The label that tells instances apart (`instance`, `pod`).
    pub instance_label: String,
    /// Queries in flight at once.
    pub concurrency: usize,
    /// Most points per series of one range query; longer ranges are split
    /// into chunks, and a chunk the server refuses as too much is halved.
    pub max_points: usize,
}

/// A connected Prometheus source; also the engine's remote
/// [`SignalEvaluator`].
#[derive(Debug)]
pub struct Prometheus {
    api: Api,
    cfg: PromConfig,
    warnings: Mutex<Vec<String>>,
    succeeded: AtomicUsize,
    failed: Mutex<Vec<PromError>>,
    /// Range requests sent and to send (chunks included), for a progress bar.
    requests_done: AtomicUsize,
    requests_total: AtomicUsize,
    /// Range requests in flight, at most [`PromConfig::concurrency`] across
    /// every caller (the clusters of a fleet shard, judged on every core, may
    /// query at once).
    in_flight: Mutex<usize>,
    slot_freed: Condvar,
    /// Which etcd member runs on which node target, per fleet group
    /// ([`nodes`]): written into node signals' expressions.
    node_maps: Mutex<nodes::NodeMaps>,
}

impl Prometheus {
    pub fn new(cfg: PromConfig) -> Result<Prometheus, PromError> {
        let api = Api::new(&cfg.api)?;
        Ok(Prometheus {
            api,
            cfg,
            warnings: Mutex::new(Vec::new()),
            succeeded: AtomicUsize::new(0),
            failed: Mutex::new(Vec::new()),
            requests_done: AtomicUsize::new(0),
            requests_total: AtomicUsize::new(0),
            in_flight: Mutex::new(0),
            slot_freed: Condvar::new(),
            node_maps: Mutex::new(nodes::NodeMaps::new()),
        })
    }

    /// The API's base URL (no credentials).
    pub fn url(&self) -> &str {
        self.api.url()
    }

    /// The API client (for `query`).
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// The matchers selecting `role`'s series, with the extra selector.
    pub fn role_matchers(&self, role: Role) -> Option<Vec<Matcher>> {
        let r = self.cfg.roles.iter().find(|r| r.role == role)?;
        let mut m = r.matchers.clone();
        m.extend(self.cfg.extra.iter().cloned());
        Some(m)
    }

    /// The extra selector's matchers.
    pub fn extra_matchers(&self) -> &[Matcher] {
        &self.cfg.extra
    }

    /// The selector of `role`, as configured.
    pub fn role_selector(&self, role: Role) -> Option<&RoleSelector> {
        self.cfg.roles.iter().find(|r| r.role == role)
    }

    /// The label that tells instances apart (`instance`, `pod`).
    pub fn instance_label(&self) -> &str {
        &self.cfg.instance_label
    }

    /// Warnings the API returned with answers so far (partial responses).
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Signal queries answered and failed so far.
    pub fn outcome(&self) -> (usize, Vec<PromError>) {
        (
            self.succeeded.load(Ordering::Relaxed),
            self.failed.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        )
    }

    /// Range requests answered (or failed) and planned so far, chunks and
    /// halvings included: what a progress bar shows.
    pub fn progress(&self) -> (usize, usize) {
        (
            self.requests_done.load(Ordering::Relaxed),
            self.requests_total.load(Ordering::Relaxed),
        )
    }

    fn warn(&self, w: String) {
        let mut ws = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if !ws.contains(&w) {
            ws.push(w);
        }
    }

    /// The targets of every role in `[from, to]`: instances of the role's
    /// `up` series, their scrape times as snapshots, and the metric names of
    /// the role's series as their families. `step` is used for windows longer
    /// than [`RAW_UP_LIMIT`].
    ///
    /// Fails when the API cannot be reached or answers no role's `up` query;
    /// a role without series is left out (its axes become gaps).
    pub fn dataset(&self, from: Millis, to: Millis, step: Option<Millis>) -> Result<Dataset, PromError> {
        let (mut all, _) = self.datasets_by(from, to, step, None)?;
        Ok(all.remove("").unwrap_or_default())
    }

    /// [`Prometheus::dataset`] split by the values of the label `by` (fleet
    /// mode, `--by cluster`): one dataset per value, from the same queries as
    /// one dataset, with the size of each cluster's largest metric (to shard
    /// the fleet). Targets without the label are left out, with a warning.
    pub fn fleet_datasets(
        &self,
        from: Millis,
        to: Millis,
        step: Option<Millis>,
        by: &str,
    ) -> Result<FleetData, PromError> {
        let (mut all, largest) = self.datasets_by(from, to, step, Some(by))?;
        if let Some(unlabelled) = all.remove("") {
            let n = unlabelled.targets.len();
            let w = SourceWarning {
                origin: self.url().to_string(),
                message: format!("{n} target(s) have no `{by}` label and are left out of the fleet"),
            };
            for ds in all.values_mut() {
                ds.warnings.extend(unlabelled.warnings.iter().cloned());
                if n > 0 {
                    ds.warnings.push(w.clone());
                }
            }
        }
        Ok(FleetData {
            datasets: all,
            largest,
        })
    }

    fn datasets_by(
        &self,
        from: Millis,
        to: Millis,
        step: Option<Millis>,
        by: Option<&str>,
    ) -> Result<(BTreeMap<String, Dataset>, Sizes), PromError> {
        let mut out: BTreeMap<String, Dataset> = BTreeMap::new();
        let mut largest: BTreeMap<String, usize> = BTreeMap::new();
        let mut warnings = Vec::new();
        let mut answered = 0;
        let mut last_err = None;
        for r in &self.cfg.roles {
            match self.role_targets(r.role, from, to, step, by) {
                Ok((mut targets, mut ws, sizes)) => {
                    answered += 1;
                    if r.role == Role::Node && self.cfg.instance_label != "instance" && !targets.is_empty() {
                        ws.push(nodes::instance_label_warning(
                            &self.cfg.instance_label,
                            targets.len(),
                        ));
                        targets.clear();
                    }
                    for (group, n) in sizes {
                        let e = largest.entry(group).or_default();
                        *e = (*e).max(n);
                    }
                    for w in ws {
                        warnings.push(SourceWarning {
                            origin: self.url().to_string(),
                            message: w,
                        });
                    }
                    for (group, t) in targets {
                        out.entry(group).or_default().targets.push(t);
                    }
                }
                Err(e) if e.is_connection() => return Err(e),
                Err(e) => {
                    warnings.push(SourceWarning {
                        origin: self.url().to_string(),
                        message: format!("the {} targets could not be listed: {e}", r.role),
                    });
                    last_err = Some(e);
                }
            }
        }
        if answered == 0 {
            if let Some(e) = last_err {
                return Err(e);
            }
        }
        if by.is_none() {
            out.entry(String::new()).or_default();
        }
        for ds in out.values_mut() {
            ds.warnings.extend(warnings.iter().cloned());
        }
        self.map_nodes(&mut out, (from, to), by);
        Ok((out, largest))
    }

    fn role_targets(
        &self,
        role: Role,
        from: Millis,
        to: Millis,
        step: Option<Millis>,
        by: Option<&str>,
    ) -> Result<RoleTargets, PromError> {
        let ms = self.role_matchers(role).unwrap_or_default();
        let q = RoleQuery {
            role,
            sel: select::selector_text(&ms),
            ms,
            il: self.cfg.instance_label.as_str(),
            by,
            from,
            to,
        };
        let (sel, il) = (&q.sel, q.il);
        let mut warnings = Vec::new();
        // Scrape times of `up`, and process start times, per instance.
        let (up, ps) = self.up_and_starts(&q, step)?;
        // Node metrics are optional evidence: their absence says nothing.
        if up.is_empty() && role == Role::Node {
            return Ok((Vec::new(), warnings, BTreeMap::new()));
        }
        if up.is_empty() {
            warnings.push(format!(
                "no `up` series match the {role} selector `{sel}` from {} to {}: the {role} axes are not checked (see --{role}-selector)",
                crate::timefmt::format_time(from),
                crate::timefmt::format_time(to)
            ));
            return Ok((Vec::new(), warnings, BTreeMap::new()));
        }
        let mut times: BTreeMap<TargetKey, BTreeSet<Millis>> = BTreeMap::new();
        for s in &up {
            let inst = q.key(&s.labels);
            let e = times.entry(inst).or_default();
            for p in &s.samples {
                if p.v == 1.0 {
                    e.insert(p.t);
                }
            }
        }
        if times.keys().any(|(_, i)| i.is_empty()) {
            warnings.push(format!(
                "some {role} `up` series have no `{il}` label; they are shown as one target `(none)`"
            ));
        }
        let mut starts: BTreeMap<TargetKey, BTreeMap<Millis, f64>> = BTreeMap::new();
        for s in ps.iter().flatten() {
            let inst = q.key(&s.labels);
            let e = starts.entry(inst).or_default();
            for p in &s.samples {
                e.insert(p.t, p.v);
            }
        }
        let (names, largest) = self.role_names(&q, &times, &mut warnings)?;
        let versions = self.role_versions(&q);
        let targets = self.grouped_targets(&q, times, &starts, &versions, &names);
        Ok((targets, warnings, largest))
    }

    /// The samples of `up` of the role's series in the window, and of
    /// `process_start_time_seconds` when they can be read: one by one for
    /// windows up to [`RAW_UP_LIMIT`], else at the evaluation step.
    fn up_and_starts(
        &self,
        q: &RoleQuery<'_>,
        step: Option<Millis>,
    ) -> Result<(Vec<Series>, Option<Vec<Series>>), PromError> {
        let (sel, from, to) = (&q.sel, q.from, q.to);
        let span = q.span();
        Ok(if span <= RAW_UP_LIMIT {
            let range = promql_duration(span + 1000);
            let up = self.api.query(&format!("up{sel}[{range}]"), to)?;
            let ps = self
                .api
                .query(&format!("process_start_time_seconds{sel}[{range}]"), to);
            (matrix_of(up.data), ps.ok().map(|a| matrix_of(a.data)))
        } else {
            let st = step.unwrap_or(60_000).max(span / 5000);
            let up = self.api.query_range(&format!("up{sel}"), from, to, st)?;
            let ps = self
                .api
                .query_range(&format!("process_start_time_seconds{sel}"), from, to, st);
            (up.data, ps.ok().map(|a| a.data))
        })
    }

    /// The metric names each target exposes: listed once for one cluster;
    /// per cluster in fleet mode, so that a cluster that lacks a family the
    /// others have reads it as not exposed (unknown), never as zero. In fleet
    /// mode, also the most series one name has at once per cluster.
    fn role_names(
        &self,
        q: &RoleQuery<'_>,
        times: &BTreeMap<TargetKey, BTreeSet<Millis>>,
        warnings: &mut Vec<String>,
    ) -> Result<(Names, Sizes), PromError> {
        let (role, sel, from, to) = (q.role, &q.sel, q.from, q.to);
        let mut largest = BTreeMap::new();
        let names: Names = match q.by {
            None => self
                .api
                .label_values("__name__", std::slice::from_ref(sel), from, to)
                .map(|a| {
                    warnings.extend(a.warnings);
                    BTreeMap::from([(String::new(), a.data.into_iter().collect())])
                })?,
            Some(b) => match self.names_by_group(sel, b, from, to, warnings) {
                Ok((m, sizes)) => {
                    largest = sizes;
                    m
                }
                Err(e) if e.is_connection() => return Err(e),
                // Without the per-cluster names, every cluster is taken to
                // expose what the fleet exposes, and the report says so.
                Err(e) => {
                    warnings.push(format!(
                        "the metric names of each {b} could not be listed ({e}); every {b} is taken to expose the {role} metrics of the whole fleet, so a signal a {b} does not expose may read as zero"
                    ));
                    let all: BTreeSet<String> = self
                        .api
                        .label_values("__name__", std::slice::from_ref(sel), from, to)
                        .map(|a| {
                            warnings.extend(a.warnings);
                            a.data.into_iter().collect()
                        })?;
                    times.keys().map(|(g, _)| (g.clone(), all.clone())).collect()
                }
            },
        };
        Ok((names, largest))
    }

    /// The version of each target, from its build-information metric
    /// (`etcd_server_version`, `kubernetes_build_info`); none when the query
    /// fails.
    fn role_versions(&self, q: &RoleQuery<'_>) -> BTreeMap<TargetKey, String> {
        let il = q.il;
        let mut versions: BTreeMap<TargetKey, String> = BTreeMap::new();
        let by_list = q.by.map(|b| format!("{b}, ")).unwrap_or_default();
        let vq = format!(
            "group by ({by_list}{il}, server_version, git_version, gitVersion) (last_over_time({{__name__=~\"etcd_server_version|kubernetes_build_info\",{}}}[{}]))",
            q.sel.trim_start_matches('{').trim_end_matches('}'),
            promql_duration(q.span().clamp(60_000, RAW_UP_LIMIT) + 1000)
        );
        if let Ok(a) = self.api.query(&vq, q.to) {
            if let crate::eval::Value::Vector(v) = a.data {
                for s in v {
                    let inst = q.key(&s.labels);
                    let name = if s.labels.get("server_version").is_some() {
                        "etcd_server_version"
                    } else {
                        "kubernetes_build_info"
                    };
                    let pairs: Vec<(&str, &str)> = crate::source::VERSION_LABELS
                        .iter()
                        .filter_map(|(_, l)| s.labels.get(l).map(|v| (*l, v)))
                        .collect();
                    if let Some(ver) = crate::source::version_of(name, pairs.iter().copied()) {
                        versions.insert(inst, ver.to_string());
                    }
                }
            }
        }
        versions
    }

    /// The role's targets, each with the fleet label value it belongs to:
    /// the times of its `up` samples are its snapshots.
    fn grouped_targets(
        &self,
        q: &RoleQuery<'_>,
        times: BTreeMap<TargetKey, BTreeSet<Millis>>,
        starts: &BTreeMap<TargetKey, BTreeMap<Millis, f64>>,
        versions: &BTreeMap<TargetKey, String>,
        names: &Names,
    ) -> Vec<GroupedTarget> {
        let (role, ms, sel, il, by) = (q.role, &q.ms, &q.sel, q.il, q.by);
        times
            .into_iter()
            .map(|(k, ts)| {
                let st = starts.get(&k);
                let version = versions.get(&k).cloned();
                let (group, inst) = k;
                let name = if inst.is_empty() {
                    "(none)".to_string()
                } else {
                    inst.clone()
                };
                let t = Target {
                    name,
                    role,
                    role_reason: match by {
                        // The cluster's own selector, as a single-cluster run shows it.
                        Some(b) => {
                            let mut own: Vec<Matcher> = ms.iter().filter(|m| m.name != b).cloned().collect();
                            own.push(Matcher::new(promql_parser::label::MatchOp::Equal, b, &group));
                            format!("Prometheus series matching `{}`", select::selector_text(&own))
                        }
                        None => format!("Prometheus series matching `{sel}`"),
                    },
                    version,
                    time_source: TimeSource::Prometheus,
                    snapshots: ts
                        .into_iter()
                        .map(|t| Snapshot {
                            time: t,
                            origin: format!("{} up{{{il}=\"{inst}\"}}", self.url()),
                            process_start: st.and_then(|m| m.get(&t).copied()),
                        })
                        .collect(),
                    failures: Vec::new(),
                    families: names.get(&group).cloned().unwrap_or_default(),
                };
                (group, t)
            })
            .collect()
    }

    /// The metric names of the series matching `sel` in `[from, to]`, per
    /// value of the label `by`, and the most series one name has at once
    /// (per value), from one range query (`count by (BY, __name__) (SEL)`)
    /// whatever the number of clusters. The
    /// window is sampled every minute to every 5 minutes (Prometheus's default
    /// lookback), at most [`NAME_STEPS`] times: a metric present only between
    /// two samples of a very long window is then missed, which reads as not
    /// exposed (unknown), never as zero.
    fn names_by_group(
        &self,
        sel: &str,
        by: &str,
        from: Millis,
        to: Millis,
        warnings: &mut Vec<String>,
    ) -> Result<(Names, Sizes), PromError> {
        let span = (to - from).max(0);
        let step = (span / 12)
            .clamp(60_000, NAME_STEP_MAX)
            .max(span / NAME_STEPS as Millis);
        // `count by` keeps `__name__` (an aggregation's grouping label), so
        // each series of the answer is one name of one cluster.
        let q = format!("count by ({by}, __name__) ({sel})");
        let a = self.api.query_range(&q, from, to, step)?;
        warnings.extend(a.warnings);
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut largest: BTreeMap<String, usize> = BTreeMap::new();
        for s in a.data {
            if let Some(n) = s.labels.get(crate::store::METRIC_NAME) {
                let g = s.labels.get(by).unwrap_or("").to_string();
                let most = s.samples.iter().map(|p| p.v).fold(0.0, f64::max);
                let e = largest.entry(g.clone()).or_default();
                // A count is a small whole number; the cast saturates.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let most = most as usize;
                *e = (*e).max(most);
                out.entry(g).or_default().insert(n.to_string());
            }
        }
        Ok((out, largest))
    }

    /// One chunk of a range query (`start`..=`end`, on the query's step). A
    /// chunk the server refuses as too much is halved and both halves asked,
    /// down to [`MIN_SPLIT_POINTS`]; the answers are stitched in time order.
    fn chunk_query(&self, q: &RangeQuery, start: Millis, end: Millis) -> Result<Vec<Series>, PromError> {
        let text = q.expr.to_string();
        let r = self.limited(|| self.api.query_range(&text, start, end, q.step));
        self.requests_done.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(a) => {
                for w in a.warnings {
                    self.warn(format!("`{}`: Prometheus warned: {w}", q.signal));
                }
                Ok(a.data
                    .into_iter()
                    .map(|s| rename_instance(s, &self.cfg.instance_label))
                    .collect())
            }
            Err(e) if e.is_too_much() && points(start, end, q.step) >= 2 * MIN_SPLIT_POINTS => {
                let half = points(start, end, q.step) / 2;
                let mid = start + (half as Millis - 1) * q.step;
                self.requests_total.fetch_add(2, Ordering::Relaxed);
                let a = self.chunk_query(q, start, mid)?;
                let b = self.chunk_query(q, mid + q.step, end)?;
                Ok(stitch(vec![a, b]))
            }
            Err(e) => Err(e),
        }
    }
}

impl Prometheus {
    /// Runs one request once fewer than [`PromConfig::concurrency`] are in
    /// flight.
    fn limited<T>(&self, f: impl FnOnce() -> T) -> T {
        let max = self.cfg.concurrency.clamp(1, 32);
        {
            let mut n = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            while *n >= max {
                n = self.slot_freed.wait(n).unwrap_or_else(|p| p.into_inner());
            }
            *n += 1;
        }
        let r = f();
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.slot_freed.notify_one();
        r
    }
}

/// Steps of a range `start..=end` at `step` (at least one).
fn points(start: Millis, end: Millis, step: Millis) -> usize {
    ((end - start).max(0) / step.max(1)) as usize + 1
}

/// The chunks of `start..=end` at `step` with at most `max_points` steps
/// each: consecutive, on the same step grid, covering every step once.
fn chunks(start: Millis, end: Millis, step: Millis, max_points: usize) -> Vec<(Millis, Millis)> {
    let step = step.max(1);
    let per = max_points.max(2) as Millis;
    let mut out = Vec::new();
    let mut s = start;
    while s <= end {
        let e = (s + (per - 1) * step).min(end);
        out.push((s, e));
        s = e + step;
    }
    if out.is_empty() {
        out.push((start, end));
    }
    out
}

/// Joins the answers of consecutive chunks: one series per label set, its
/// samples in time order.
fn stitch(parts: Vec<Vec<Series>>) -> Vec<Series> {
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else {
        return Vec::new();
    };
    let mut out: Vec<Series> = first;
    let mut index: std::collections::HashMap<Labels, usize> = out
        .iter()
        .enumerate()
        .map(|(i, s)| (s.labels.clone(), i))
        .collect();
    for part in parts {
        for s in part {
            match index.get(&s.labels) {
                Some(&i) => out[i].samples.extend(s.samples),
                None => {
                    index.insert(s.labels.clone(), out.len());
                    out.push(s);
                }
            }
        }
    }
    out
}

fn matrix_of(v: crate::eval::Value) -> Vec<Series> {
    match v {
        crate::eval::Value::Matrix(m) => m,
        _ => Vec::new(),
    }
}

/// Names a result series by the configured instance label, as the engine
/// expects it in `instance`.
fn rename_instance(mut s: Series, label: &str) -> Series {
    if label != "instance" {
        let v = s.labels.get(label).map(str::to_string);
        let mut l: Labels = s.labels.clone();
        l.set(label, "");
        l.set("instance", v.as_deref().unwrap_or(""));
        s.labels = l;
    }
    s
}

/// A target with the value of the fleet label it belongs to (empty outside
/// fleet mode).
type GroupedTarget = (String, Target);

/// A role's targets, the warnings of listing them, and per fleet label value
/// the most series one metric name had at once (fleet mode only).
type RoleTargets = (Vec<GroupedTarget>, Vec<String>, Sizes);

/// What one role's targets are listed for.
struct RoleQuery<'a> {
    role: Role,
    /// The role's matchers, and the selector they make.
    ms: Vec<Matcher>,
    sel: String,
    /// The label that tells instances apart.
    il: &'a str,
    /// The fleet label (fleet mode), if any.
    by: Option<&'a str>,
    from: Millis,
    to: Millis,
}

impl RoleQuery<'_> {
    fn span(&self) -> Millis {
        (self.to - self.from).max(0)
    }

    /// Targets are keyed by (group, instance): the group is the value of
    /// `by` (fleet mode), else empty.
    fn key(&self, l: &Labels) -> TargetKey {
        (
            self.by.and_then(|b| l.get(b)).unwrap_or("").to_string(),
            l.get(self.il).unwrap_or("").to_string(),
        )
    }
}

/// A target's fleet label value (empty outside fleet mode) and instance.
type TargetKey = (String, String);

/// Metric names per fleet label value.
type Names = BTreeMap<String, BTreeSet<String>>;

/// A number of series per fleet label value.
type Sizes = BTreeMap<String, usize>;

/// The targets of a fleet, one dataset per cluster (`--by` value).
#[derive(Debug, Default)]
pub struct FleetData {
    pub datasets: BTreeMap<String, Dataset>,
    /// Per cluster, the most series one metric name of one role had at once
    /// in the window: what one query of that cluster selects at most, which
    /// sizes the fleet's shards. Empty when the per-cluster names could not
    /// be listed.
    pub largest: BTreeMap<String, usize>,
}

impl Prometheus {
    /// A signal's expression as sent: `$window` substituted, the role's
    /// matchers in every selector, grouped by the instance label, and for a
    /// node signal the member-to-node map of the group written out (`fleet`:
    /// the fleet label and the cluster's value, in fleet mode).
    ///
    /// # Errors
    /// When the expression does not parse or the role has no selector.
    pub fn instantiate_in(
        &self,
        text: &str,
        window: Millis,
        role: Role,
        fleet: Option<(&str, &str)>,
    ) -> Result<Expr, QueryError> {
        let mut e = crate::eval::parse(&substitute_window(text, window))?;
        if role == Role::Node {
            self.write_node_map(&mut e, fleet)?;
        }
        let ms = self
            .role_matchers(role)
            .ok_or_else(|| QueryError::Selection(format!("no selector for the {role} role")))?;
        select::inject_matchers(&mut e, &ms);
        select::rename_grouping_label(&mut e, "instance", &self.cfg.instance_label);
        Ok(e)
    }
}

impl SignalEvaluator for Prometheus {
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError> {
        self.instantiate_in(text, window, role, None)
    }

    /// Every query split into chunks of at most `max_points` steps, the
    /// chunks run at most `concurrency` at a time, and each query's chunks
    /// stitched back. A chunk that fails is a warning naming the signal and
    /// its time range, and its steps stay without samples (not judged); a
    /// query whose every chunk fails is an error (a gap of the report).
    fn range(&self, _store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult> {
        let jobs: Vec<(usize, Millis, Millis)> = queries
            .iter()
            .enumerate()
            .flat_map(|(i, q)| {
                chunks(q.start, q.end, q.step, self.cfg.max_points)
                    .into_iter()
                    .map(move |(s, e)| (i, s, e))
            })
            .collect();
        self.requests_total.fetch_add(jobs.len(), Ordering::Relaxed);
        let next = AtomicUsize::new(0);
        let results: Vec<ChunkSlot> = jobs.iter().map(|_| Mutex::new(None)).collect();
        let workers = self.cfg.concurrency.clamp(1, 32).min(jobs.len().max(1));
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(i, start, end)) = jobs.get(k) else {
                        break;
                    };
                    let r = self.chunk_query(&queries[i], start, end);
                    if let Some(slot) = results.get(k) {
                        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                    }
                });
            }
        });
        let mut per_query: Vec<Vec<ChunkAnswer>> = queries.iter().map(|_| Vec::new()).collect();
        for (&(i, start, end), slot) in jobs.iter().zip(results) {
            if let Some(r) = slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
                per_query[i].push((start, end, r));
            }
        }
        per_query
            .into_iter()
            .zip(queries)
            .map(|(parts, q)| self.settle(q, parts))
            .collect()
    }
}

/// The answer of one chunk, filled by whichever worker ran it.
type ChunkSlot = Mutex<Option<Result<Vec<Series>, PromError>>>;

/// One chunk's range (start, end) and its answer.
type ChunkAnswer = (Millis, Millis, Result<Vec<Series>, PromError>);

impl Prometheus {
    /// One query's answer from its chunks' answers (in time order).
    fn settle(
        &self,
        q: &RangeQuery,
        parts: Vec<(Millis, Millis, Result<Vec<Series>, PromError>)>,
    ) -> QueryResult {
        let chunked = parts.len() > 1;
        let mut ok = Vec::new();
        let mut first_err = None;
        for (start, end, r) in parts {
            match r {
                Ok(series) => ok.push(series),
                Err(e) => {
                    if chunked {
                        self.warn(format!(
                            "`{}` from {} to {}: {e}; those steps are not judged",
                            q.signal,
                            crate::timefmt::format_time(start),
                            crate::timefmt::format_time(end)
                        ));
                    }
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) if ok.is_empty() => {
                let msg = e.to_string();
                self.failed.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                Err(QueryError::Remote(msg))
            }
            _ => {
                self.succeeded.fetch_add(1, Ordering::Relaxed);
                Ok(stitch(ok))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Sample;

    #[test]
    fn results_are_named_by_the_instance_label() {
        let s = Series {
            labels: Labels::from_pairs([("pod", "etcd-0"), ("instance", "10.0.0.1:2381")]),
            samples: vec![Sample { t: 0, v: 1.0 }],
        };
        let r = rename_instance(s.clone(), "pod");
        assert_eq!(r.labels.get("instance"), Some("etcd-0"));
        assert_eq!(r.labels.get("pod"), None);
        assert_eq!(rename_instance(s.clone(), "instance"), s);
    }

    #[test]
    fn chunks_cover_every_step_once() {
        for (start, end, step, max) in [
            (0, 120_000, 1000, 16),
            (0, 0, 15_000, 16),
            (5, 5 + 15_000 * 40, 15_000, 40),
        ] {
            let c = chunks(start, end, step, max);
            let mut t = start;
            for &(s, e) in &c {
                assert_eq!(s, t);
                assert!(points(s, e, step) <= max);
                t = e + step;
            }
            assert_eq!(t, end + step, "{c:?}");
        }
        assert_eq!(chunks(0, 120_000, 1000, 16).len(), 8);
    }

    #[test]
    fn stitched_series_keep_time_order_and_join_by_labels() {
        let s = |inst: &str, ts: &[i64]| Series {
            labels: Labels::from_pairs([("instance", inst)]),
            samples: ts.iter().map(|&t| Sample { t, v: 1.0 }).collect(),
        };
        let out = stitch(vec![vec![s("a", &[0, 1])], vec![s("b", &[2]), s("a", &[2, 3])]]);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].samples.iter().map(|p| p.t).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(out[1].labels.get("instance"), Some("b"));
    }
}
