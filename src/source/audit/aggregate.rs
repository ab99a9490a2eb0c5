//! Audit events → counters over time. Every counted event adds to the
//! counters of its time bucket (the bucket its `stageTimestamp` falls in);
//! [`Aggregator::emit`] turns the buckets into cumulative counter series in
//! the store, one point per bucket boundary, so the rules read them with
//! `rate`/`increase` over the same steps as the metrics.
//!
//! Label values are interned; each family holds at most
//! [`AuditConfig::max_series`](super::AuditConfig) label sets, later ones
//! folding into `other` (counted and reported), so memory is bounded by the
//! label sets and the buckets, not by the log.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::event::{Event, ANNOTATION_THRESHOLD_SECONDS};
use crate::store::{Millis, Store};

/// Upper bounds of the request-duration histogram: kube-apiserver's
/// `apiserver_request_duration_seconds` buckets (1.23+), so the same SLO
/// thresholds apply.
pub const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
    20.0, 30.0, 45.0, 60.0,
];

/// The label value of folded label sets.
pub const OTHER: &str = "other";

/// Metric names of the series an audit log becomes (all carry
/// `instance="<target>"` and `role="audit"`).
pub mod names {
    /// Counted events (ResponseComplete, and failed authentications), by
    /// `verb`, `resource`, `code`.
    pub const REQUESTS: &str = "cptriage_audit_requests_total";
    /// Duration of non-long-running requests (not watch, exec, attach,
    /// port-forward, proxy, log) by `verb`: `_bucket{le}`, `_sum`, `_count`.
    pub const DURATION: &str = "cptriage_audit_request_duration_seconds";
    /// Non-long-running requests slower than 500 ms, by `verb`, `resource`, `user_agent`.
    pub const SLOW: &str = "cptriage_audit_slow_requests_total";
    /// The slow requests that carry latency annotations (same labels).
    pub const SLOW_ANNOTATED: &str = "cptriage_audit_slow_annotated_total";
    /// Seconds of annotated slow requests per `layer` (`etcd`,
    /// `apf-queue-wait`, `mutating-webhook`, …, `total`, and `unattributed`:
    /// total minus the tracked layers), by `verb`, `resource`, `user_agent`.
    pub const LAYER_SECONDS: &str = "cptriage_audit_slow_layer_seconds_total";
    /// 401, 403 and 429 answers by `code`, `user`, `user_agent`.
    pub const DENIED: &str = "cptriage_audit_denied_total";
}

/// Interned label values.
#[derive(Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.into());
        self.ids.insert(s.into(), i);
        i
    }
    fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }
}

/// The counter families with plain increments (label ids per family).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Fam {
    Requests,
    Slow,
    SlowAnnotated,
    Layer,
    Denied,
}

impl Fam {
    fn name(self) -> &'static str {
        match self {
            Fam::Requests => names::REQUESTS,
            Fam::Slow => names::SLOW,
            Fam::SlowAnnotated => names::SLOW_ANNOTATED,
            Fam::Layer => names::LAYER_SECONDS,
            Fam::Denied => names::DENIED,
        }
    }
    fn labels(self) -> &'static [&'static str] {
        match self {
            Fam::Requests => &["verb", "resource", "code"],
            Fam::Slow | Fam::SlowAnnotated => &["verb", "resource", "user_agent"],
            Fam::Layer => &["layer", "verb", "resource", "user_agent"],
            Fam::Denied => &["code", "user", "user_agent"],
        }
    }
}

type Key = (Fam, [u32; 4]);

/// Per verb and bucket: counts per duration bucket (not cumulative), sum.
#[derive(Clone)]
struct Hist {
    counts: [u64; DURATION_BUCKETS.len() + 1],
    sum: f64,
}

/// One of the slowest requests, with its layer split (report evidence).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SlowRequest {
    /// When it completed (`stageTimestamp`).
    pub time: Millis,
    pub audit_id: String,
    pub verb: String,
    pub resource: String,
    /// `namespace/name`, or the path of a non-resource request (no query string).
    pub object: String,
    pub user: String,
    pub user_agent: String,
    pub code: Option<i64>,
    pub total_seconds: f64,
    /// Seconds per layer (`apiserver.latency.k8s.io/<layer>`), largest first;
    /// empty when the event carries no latency annotations.
    pub layers: Vec<(String, f64)>,
}

/// A denied (401/403/429) client, over the whole log.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct DeniedClient {
    pub code: i64,
    pub user: String,
    pub user_agent: String,
    pub count: u64,
}

/// Accumulates events into bucketed counters.
pub struct Aggregator {
    resolution: Millis,
    max_series: usize,
    keep_slowest: usize,
    strings: Interner,
    counters: HashMap<Key, BTreeMap<i64, f64>>,
    per_family: HashMap<Fam, usize>,
    hist: HashMap<u32, BTreeMap<i64, Hist>>,
    /// Events whose labels were folded into `other` (a family was full).
    pub folded: u64,
    /// Non-long-running requests slower than 500 ms, and those with annotations.
    pub slow: u64,
    pub slow_annotated: u64,
    /// Counted events.
    pub events: u64,
    pub slowest: Vec<SlowRequest>,
    denied: HashMap<(i64, u32, u32), u64>,
    layer_totals: BTreeMap<String, f64>,
    first: Option<Millis>,
    last: Option<Millis>,
}

/// Whether a request is long-running (excluded from latency, as kube-apiserver's
/// SLO and latency trackers exclude them).
pub fn long_running(verb: &str, subresource: Option<&str>) -> bool {
    verb == "watch"
        || verb == "watchlist"
        || matches!(
            subresource,
            Some("exec" | "attach" | "portforward" | "proxy" | "log")
        )
}

/// The product token of a user agent (`kubelet/v1.30.1 (linux/amd64) kubernetes/…`
/// → `kubelet/v1.30.1`), at most 64 characters; credential-looking ones are redacted.
pub fn agent_token(ua: &str) -> String {
    let t = ua.split_whitespace().next().unwrap_or("");
    let t: String = t.chars().take(64).collect();
    if t.is_empty() {
        "unknown".into()
    } else if crate::secret::looks_secret(&t) {
        crate::secret::REDACTED.into()
    } else {
        t
    }
}

/// A user name as shown (credential-looking names are redacted).
pub fn user_name(u: Option<&str>) -> String {
    match u {
        None | Some("") => "unknown".into(),
        Some(u) if crate::secret::looks_secret(u) => crate::secret::REDACTED.into(),
        Some(u) => u.chars().take(128).collect(),
    }
}

impl Aggregator {
    pub fn new(resolution: Millis, max_series: usize, keep_slowest: usize) -> Self {
        Aggregator {
            resolution: resolution.max(1),
            max_series,
            keep_slowest,
            strings: Interner::default(),
            counters: HashMap::new(),
            per_family: HashMap::new(),
            hist: HashMap::new(),
            folded: 0,
            slow: 0,
            slow_annotated: 0,
            events: 0,
            slowest: Vec::new(),
            denied: HashMap::new(),
            layer_totals: BTreeMap::new(),
            first: None,
            last: None,
        }
    }

    /// The bucket of a time: events in `((k-1)·res, k·res]` count at `k·res`.
    fn bucket(&self, t: Millis) -> i64 {
        t.div_euclid(self.resolution) + i64::from(t.rem_euclid(self.resolution) != 0)
    }

    fn add(&mut self, fam: Fam, labels: [&str; 4], b: i64, v: f64) {
        let n = fam.labels().len();
        let mut ids = [0u32; 4];
        for (i, l) in labels.iter().enumerate().take(n) {
            ids[i] = self.strings.id(l);
        }
        let key = (fam, ids);
        if !self.counters.contains_key(&key) {
            let used = self.per_family.entry(fam).or_default();
            if *used >= self.max_series {
                // Fold every label but the first (the layer, the code, the verb).
                let other = self.strings.id(OTHER);
                let mut ids2 = ids;
                for id in ids2.iter_mut().take(n).skip(1) {
                    *id = other;
                }
                self.folded += 1;
                *self
                    .counters
                    .entry((fam, ids2))
                    .or_default()
                    .entry(b)
                    .or_default() += v;
                return;
            }
            *used += 1;
        }
        *self.counters.entry(key).or_default().entry(b).or_default() += v;
    }

    /// Adds one event that is to be counted (ResponseComplete, or a failed
    /// authentication's ResponseStarted). `received`/`end` are microseconds.
    /// `Err` when its latency annotations are malformed (the event is then
    /// not counted).
    pub fn event(&mut self, e: &Event, received: i64, end: i64) -> Result<(), String> {
        let layers = e.layers()?;
        let t: Millis = end.div_euclid(1000);
        let b = self.bucket(t);
        self.events += 1;
        self.first = Some(self.first.map_or(t, |f| f.min(t)));
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
        let verb = e.verb.as_deref().unwrap_or("unknown").to_ascii_lowercase();
        let (resource, sub) = match &e.object_ref {
            Some(o) => (
                o.resource.as_deref().unwrap_or("unknown"),
                o.subresource.as_deref(),
            ),
            None => ("nonresource", None),
        };
        let resource_label = match sub {
            Some(s) if !s.is_empty() => format!("{resource}/{s}"),
            _ => resource.to_string(),
        };
        let code = e.code();
        let code_s = code.map_or_else(|| "unknown".to_string(), |c| c.to_string());
        self.add(Fam::Requests, [&verb, &resource_label, &code_s, ""], b, 1.0);
        let ua = agent_token(e.user_agent.as_deref().unwrap_or(""));
        if let Some(c @ (401 | 403 | 429)) = code {
            let user = user_name(e.user.as_ref().and_then(|u| u.username.as_deref()));
            self.add(Fam::Denied, [&code_s, &user, &ua, ""], b, 1.0);
            let (mut u, mut a) = (self.strings.id(&user), self.strings.id(&ua));
            if !self.denied.contains_key(&(c, u, a)) && self.denied.len() >= self.max_series {
                (u, a) = (self.strings.id(OTHER), self.strings.id(OTHER));
            }
            *self.denied.entry((c, u, a)).or_default() += 1;
        }
        if long_running(&verb, sub) || e.stage != "ResponseComplete" {
            return Ok(());
        }
        let secs = (end - received).max(0) as f64 / 1e6;
        let v = self.strings.id(&verb);
        let h = self.hist.entry(v).or_default().entry(b).or_insert_with(|| Hist {
            counts: [0; DURATION_BUCKETS.len() + 1],
            sum: 0.0,
        });
        let i = DURATION_BUCKETS
            .iter()
            .position(|&u| secs <= u)
            .unwrap_or(DURATION_BUCKETS.len());
        h.counts[i] += 1;
        h.sum += secs;
        if secs <= ANNOTATION_THRESHOLD_SECONDS {
            return Ok(());
        }
        self.slow += 1;
        self.add(Fam::Slow, [&verb, &resource_label, &ua, ""], b, 1.0);
        let mut split: Vec<(String, f64)> = Vec::new();
        if !layers.is_empty() {
            self.slow_annotated += 1;
            self.add(Fam::SlowAnnotated, [&verb, &resource_label, &ua, ""], b, 1.0);
            let total = layers
                .iter()
                .find(|(l, _)| *l == "total")
                .map(|(_, s)| *s)
                .unwrap_or(secs);
            let mut tracked = 0.0;
            for (layer, s) in &layers {
                if *layer != "total" {
                    tracked += s;
                }
                self.add(Fam::Layer, [layer, &verb, &resource_label, &ua], b, *s);
                *self.layer_totals.entry(layer.to_string()).or_default() += s;
                split.push((layer.to_string(), *s));
            }
            let rest = (total - tracked).max(0.0);
            self.add(Fam::Layer, ["unattributed", &verb, &resource_label, &ua], b, rest);
            *self.layer_totals.entry("unattributed".into()).or_default() += rest;
            if !layers.iter().any(|(l, _)| *l == "total") {
                self.add(Fam::Layer, ["total", &verb, &resource_label, &ua], b, total);
                *self.layer_totals.entry("total".into()).or_default() += total;
            }
            split.push(("unattributed".into(), rest));
            split.retain(|(l, _)| l != "total");
            split.sort_by(|a, b| b.1.total_cmp(&a.1));
        } else {
            // No tracked layer took time (or the apiserver does not annotate):
            // the whole request is unannotated time.
            self.add(Fam::Layer, ["unannotated", &verb, &resource_label, &ua], b, secs);
            self.add(Fam::Layer, ["total", &verb, &resource_label, &ua], b, secs);
            *self.layer_totals.entry("unannotated".into()).or_default() += secs;
            *self.layer_totals.entry("total".into()).or_default() += secs;
        }
        self.keep_slow(e, t, secs, &verb, &resource_label, ua, split);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn keep_slow(
        &mut self,
        e: &Event,
        t: Millis,
        secs: f64,
        verb: &str,
        resource: &str,
        ua: String,
        layers: Vec<(String, f64)>,
    ) {
        if self.keep_slowest == 0 {
            return;
        }
        if self.slowest.len() >= self.keep_slowest
            && self.slowest.last().is_some_and(|s| s.total_seconds >= secs)
        {
            return;
        }
        let object = match &e.object_ref {
            Some(o) => match (o.namespace.as_deref(), o.name.as_deref()) {
                (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}/{n}"),
                (_, Some(n)) => n.to_string(),
                (Some(ns), None) if !ns.is_empty() => format!("{ns}/"),
                _ => String::new(),
            },
            None => e
                .request_uri
                .as_deref()
                .map(|u| u.split('?').next().unwrap_or("").to_string())
                .unwrap_or_default(),
        };
        let s = SlowRequest {
            time: t,
            audit_id: e.audit_id.as_deref().unwrap_or("").chars().take(64).collect(),
            verb: verb.to_string(),
            resource: resource.to_string(),
            object: crate::secret::scrub(&object).into_owned(),
            user: user_name(e.user.as_ref().and_then(|u| u.username.as_deref())),
            user_agent: ua,
            code: e.code(),
            total_seconds: secs,
            layers,
        };
        let at = self.slowest.partition_point(|x| x.total_seconds >= secs);
        self.slowest.insert(at, s);
        self.slowest.truncate(self.keep_slowest);
    }

    /// Seconds per layer over the whole log (annotated slow requests).
    pub fn layer_totals(&self) -> &BTreeMap<String, f64> {
        &self.layer_totals
    }

    /// The most denied clients, most first.
    pub fn top_denied(&self, n: usize) -> Vec<DeniedClient> {
        let mut v: Vec<DeniedClient> = self
            .denied
            .iter()
            .map(|(&(code, u, a), &count)| DeniedClient {
                code,
                user: self.strings.name(u).to_string(),
                user_agent: self.strings.name(a).to_string(),
                count,
            })
            .collect();
        v.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.code.cmp(&b.code))
                .then(a.user.cmp(&b.user))
        });
        v.truncate(n);
        v
    }

    /// First and last event times.
    pub fn span(&self) -> Option<(Millis, Millis)> {
        Some((self.first?, self.last?))
    }

    /// The bucket boundaries the series get points at: from one bucket
    /// before the first event (the counters' zero) to the last event's.
    pub fn boundaries(&self) -> Vec<Millis> {
        let Some((f, l)) = self.span() else {
            return Vec::new();
        };
        let (a, b) = (self.bucket(f) - 1, self.bucket(l));
        (a..=b).map(|k| k * self.resolution).collect()
    }

    /// Writes every counter as a cumulative series with a point at every
    /// boundary, labelled `instance=<target>`, `role="audit"`. Returns the
    /// metric families written.
    pub fn emit(&self, store: &mut Store, target: &str) -> Vec<String> {
        let times = self.boundaries();
        let Some(&t0) = times.first() else {
            return Vec::new();
        };
        let k0 = t0 / self.resolution;
        let mut families = std::collections::BTreeSet::new();
        let base = [("instance", target), ("role", "audit")];
        let mut keys: Vec<&Key> = self.counters.keys().collect();
        keys.sort();
        for key in keys {
            let (fam, ids) = key;
            // Without a single annotated request the split is not known at
            // all: the family is left out (a gap), not made of `unannotated`.
            if *fam == Fam::Layer && self.slow_annotated == 0 {
                continue;
            }
            let mut pairs: Vec<(&str, &str)> = vec![("__name__", fam.name())];
            pairs.extend(base);
            for (i, l) in fam.labels().iter().enumerate() {
                pairs.push((l, self.strings.name(ids[i])));
            }
            let labels = store.labels(pairs);
            let id = store.series_id(&labels);
            write_cumulative(
                store,
                id,
                &times,
                k0,
                self.resolution,
                self.counters[key].iter().map(|(k, v)| (*k, *v)),
            );
            families.insert(fam.name().to_string());
        }
        let mut verbs: Vec<&u32> = self.hist.keys().collect();
        verbs.sort();
        for v in verbs {
            let per = &self.hist[v];
            let verb = self.strings.name(*v);
            let bucket_name = format!("{}_bucket", names::DURATION);
            for (i, le) in DURATION_BUCKETS
                .iter()
                .map(|u| format_le(*u))
                .chain(["+Inf".to_string()])
                .enumerate()
            {
                let labels = store.labels([
                    ("__name__", bucket_name.as_str()),
                    ("instance", target),
                    ("role", "audit"),
                    ("verb", verb),
                    ("le", le.as_str()),
                ]);
                let id = store.series_id(&labels);
                let incs = per
                    .iter()
                    .map(|(k, h)| (*k, h.counts[..=i].iter().sum::<u64>() as f64));
                write_cumulative(store, id, &times, k0, self.resolution, incs);
            }
            for (suffix, f) in [
                ("_sum", (|h: &Hist| h.sum) as fn(&Hist) -> f64),
                ("_count", |h: &Hist| h.counts.iter().sum::<u64>() as f64),
            ] {
                let name = format!("{}{suffix}", names::DURATION);
                let labels = store.labels([
                    ("__name__", name.as_str()),
                    ("instance", target),
                    ("role", "audit"),
                    ("verb", verb),
                ]);
                let id = store.series_id(&labels);
                write_cumulative(
                    store,
                    id,
                    &times,
                    k0,
                    self.resolution,
                    per.iter().map(|(k, h)| (*k, f(h))),
                );
            }
            families.insert(names::DURATION.to_string());
            families.insert(bucket_name);
            families.insert(format!("{}_sum", names::DURATION));
            families.insert(format!("{}_count", names::DURATION));
        }
        families.into_iter().collect()
    }
}

/// `le` as kube-apiserver writes it (`0.005`, `1`, `1.25`).
fn format_le(v: f64) -> String {
    let s = format!("{v}");
    s
}

/// Pushes the running sum of `incs` (bucket index → increment, in index
/// order) at every boundary.
pub(crate) fn write_cumulative(
    store: &mut Store,
    id: usize,
    times: &[Millis],
    k0: i64,
    res: Millis,
    incs: impl Iterator<Item = (i64, f64)>,
) {
    let mut incs = incs.peekable();
    let mut acc = 0.0;
    for &t in times {
        let k = t / res;
        debug_assert!(k >= k0);
        while let Some(&(b, v)) = incs.peek() {
            if b > k {
                break;
            }
            acc += v;
            incs.next();
        }
        store.push_id(id, t, acc);
    }
}
