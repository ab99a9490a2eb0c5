//! The series store: per series, its labels and its time-ordered `(time, value)`
//! points. Sources fill it (only with the metric families the loaded expressions
//! reference); the PromQL evaluator reads it.

pub mod labels;
pub mod points;
mod role;

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher as _;

use hashbrown::HashTable;

pub use labels::{Label, Labels, Str, METRIC_NAME};
pub use points::{Points, PointsIter};
pub use role::Role;

pub use crate::timefmt::Millis;

/// Bit pattern of Prometheus's staleness marker (a special NaN).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The staleness marker value.
pub fn stale_nan() -> f64 {
    f64::from_bits(STALE_NAN_BITS)
}

/// Whether `v` is the staleness marker (and not an ordinary NaN).
pub fn is_stale(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// One point of a series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub t: Millis,
    pub v: f64,
}

/// One series as evaluation results carry it: its label set (including
/// `__name__`) and its points in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<Sample>,
}

/// One series in the store: its label set and its compressed points.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSeries {
    pub labels: Labels,
    pub points: Points,
}

impl StoredSeries {
    /// The points, decoded.
    pub fn samples(&self) -> Vec<Sample> {
        self.points.to_vec()
    }
}

/// All series known to one evaluation, indexed by label set and by metric name.
///
/// Points are compressed as they arrive ([`Points`]); a point that is not later
/// than its series' last one (out of order, or a second value for the same
/// time) is kept aside and merged by [`Store::finish`], where for equal times the
/// last pushed wins.
#[derive(Debug, Default)]
pub struct Store {
    series: Vec<StoredSeries>,
    /// Series ids by the hash of their labels (the labels themselves are not
    /// stored twice).
    index: HashTable<u32>,
    hasher: std::hash::RandomState,
    by_name: HashMap<Str, Vec<u32>>,
    strings: HashSet<Str>,
    /// Points that arrived out of order, per series id, in push order.
    pending: HashMap<u32, Vec<Sample>>,
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a shared copy of `s`, reusing an earlier one when the same string
    /// was seen before (label names and values repeat across series and snapshots).
    pub fn intern(&mut self, s: &str) -> Str {
        if let Some(a) = self.strings.get(s) {
            return a.clone();
        }
        let a = Str::from(s);
        self.strings.insert(a.clone());
        a
    }

    /// Builds an interned label set.
    pub fn labels<N: AsRef<str>, V: AsRef<str>>(
        &mut self,
        pairs: impl IntoIterator<Item = (N, V)>,
    ) -> Labels {
        let v: Vec<Label> = pairs
            .into_iter()
            .map(|(n, v)| Label {
                name: self.intern(n.as_ref()),
                value: self.intern(v.as_ref()),
            })
            .collect();
        Labels::from_shared(v)
    }

    /// The index of the series with exactly these labels, if it exists.
    pub fn find(&self, labels: &Labels) -> Option<usize> {
        let h = self.hasher.hash_one(labels);
        self.index
            .find(h, |&i| self.series[i as usize].labels == *labels)
            .map(|&i| i as usize)
    }

    /// The index of the series with exactly these labels, creating it if needed.
    pub fn series_id(&mut self, labels: &Labels) -> usize {
        if let Some(i) = self.find(labels) {
            return i;
        }
        let i = self.series.len();
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        let name = self.intern(labels.metric_name().unwrap_or(""));
        self.by_name.entry(name).or_default().push(id);
        let h = self.hasher.hash_one(labels);
        let (series, hasher) = (&self.series, &self.hasher);
        self.index.insert_unique(h, id, |&j| {
            // Only series already stored are rehashed when the table grows.
            series
                .get(j as usize)
                .map(|s| hasher.hash_one(&s.labels))
                .unwrap_or(h)
        });
        self.series.push(StoredSeries {
            labels: labels.clone(),
            points: Points::new(),
        });
        i
    }

    /// Appends a point to series `id`. Points may arrive out of order; a point
    /// at a time the series already has replaces the earlier value.
    pub fn push_id(&mut self, id: usize, t: Millis, v: f64) {
        let Some(s) = self.series.get_mut(id) else {
            return;
        };
        if !s.points.push(Sample { t, v }) {
            self.pending.entry(id as u32).or_default().push(Sample { t, v });
        }
    }

    /// The time of the latest point of series `id`.
    pub fn last_time(&self, id: usize) -> Option<Millis> {
        self.series.get(id).and_then(|s| s.points.last()).map(|p| p.t)
    }

    /// Removes and returns the points of series `id` (in time order, including
    /// any that arrived out of order).
    pub fn take_samples(&mut self, id: usize) -> Vec<Sample> {
        let Some(s) = self.series.get_mut(id) else {
            return Vec::new();
        };
        let mut pts = std::mem::replace(&mut s.points, Points::new()).to_vec();
        if let Some(extra) = self.pending.remove(&(id as u32)) {
            pts.extend(extra);
            pts = sort_last_wins(pts);
        }
        pts
    }

    /// Adds points to series `id` in any order (merged by [`Store::finish`]).
    pub fn extend_samples(&mut self, id: usize, pts: impl IntoIterator<Item = Sample>) {
        for p in pts {
            self.push_id(id, p.t, p.v);
        }
    }

    /// Appends a point to the series with these labels.
    pub fn push(&mut self, labels: &Labels, t: Millis, v: f64) {
        let id = self.series_id(labels);
        self.push_id(id, t, v);
    }

    /// Merges the points that arrived out of order into their series (stable:
    /// for equal times the last pushed wins) and releases spare capacity.
    /// Called once after loading.
    pub fn finish(&mut self) {
        let mut pending: Vec<(u32, Vec<Sample>)> = self.pending.drain().collect();
        pending.sort_by_key(|(id, _)| *id);
        for (id, extra) in pending {
            let Some(s) = self.series.get_mut(id as usize) else {
                continue;
            };
            let mut pts = s.points.to_vec();
            pts.extend(extra);
            s.points = Points::from_sorted(sort_last_wins(pts));
        }
        for s in &mut self.series {
            s.points.shrink();
        }
    }

    /// Every series.
    pub fn series(&self) -> &[StoredSeries] {
        &self.series
    }

    /// Series `id`.
    pub fn get(&self, id: usize) -> &StoredSeries {
        &self.series[id]
    }

    /// The series whose metric name is `name`.
    pub fn by_name<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a StoredSeries> + 'a {
        self.by_name
            .get(name)
            .map(|v| v.as_slice())
            .unwrap_or(&[])
            .iter()
            .map(move |&i| &self.series[i as usize])
    }

    /// Whether any series has metric name `name`.
    pub fn has_metric(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|v| !v.is_empty())
    }

    /// Metric names present in the store.
    pub fn metric_names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(|k| &**k)
    }

    /// Earliest and latest point time over all series.
    pub fn time_range(&self) -> Option<(Millis, Millis)> {
        let mut r: Option<(Millis, Millis)> = None;
        for s in &self.series {
            for p in [s.points.first(), s.points.last()].into_iter().flatten() {
                r = Some(match r {
                    None => (p.t, p.t),
                    Some((a, b)) => (a.min(p.t), b.max(p.t)),
                });
            }
        }
        for p in self.pending.values().flatten() {
            r = Some(match r {
                None => (p.t, p.t),
                Some((a, b)) => (a.min(p.t), b.max(p.t)),
            });
        }
        r
    }

    /// Total number of points held.
    pub fn point_count(&self) -> usize {
        self.series.iter().map(|s| s.points.len()).sum::<usize>()
            + self.pending.values().map(Vec::len).sum::<usize>()
    }

    /// Bytes held by the compressed points (for memory accounting).
    pub fn point_bytes(&self) -> usize {
        self.series.iter().map(|s| s.points.heap_bytes()).sum()
    }
}

/// Sorts points by time; for equal times the later one in `pts` wins.
fn sort_last_wins(mut pts: Vec<Sample>) -> Vec<Sample> {
    pts.sort_by_key(|p| p.t);
    let mut out: Vec<Sample> = Vec::with_capacity(pts.len());
    for p in pts {
        match out.last_mut() {
            Some(last) if last.t == p.t => *last = p,
            _ => out.push(p),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_order_points_are_sorted_and_duplicates_replaced() {
        let mut st = Store::new();
        let l = st.labels([("__name__", "x"), ("a", "1")]);
        st.push(&l, 2000, 2.0);
        st.push(&l, 1000, 1.0);
        st.push(&l, 2000, 3.0);
        st.finish();
        let s = st.by_name("x").next().unwrap();
        assert_eq!(
            s.samples(),
            vec![Sample { t: 1000, v: 1.0 }, Sample { t: 2000, v: 3.0 }]
        );
        assert_eq!(st.time_range(), Some((1000, 2000)));
    }

    #[test]
    fn interning_shares_strings() {
        let mut st = Store::new();
        let a = st.intern("apiserver_request_total");
        let b = st.intern("apiserver_request_total");
        assert!(Str::ptr_eq(&a, &b));
    }

    #[test]
    fn staleness_marker_is_not_plain_nan() {
        assert!(is_stale(stale_nan()));
        assert!(!is_stale(f64::NAN));
    }
}
