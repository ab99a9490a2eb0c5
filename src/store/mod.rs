//! The series store: per series, its labels and its time-ordered `(time, value)`
//! points. Sources fill it (only with the metric families the loaded expressions
//! reference); the PromQL evaluator reads it.

pub mod labels;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use labels::{Label, Labels, METRIC_NAME};

/// Milliseconds since the Unix epoch, as Prometheus timestamps are.
pub type Millis = i64;

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

/// One series: its label set (including `__name__`) and its points in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<Sample>,
}

/// All series known to one evaluation, indexed by label set and by metric name.
#[derive(Debug, Default)]
pub struct Store {
    series: Vec<Series>,
    index: HashMap<Labels, usize>,
    by_name: HashMap<Arc<str>, Vec<usize>>,
    strings: HashSet<Arc<str>>,
    unsorted: bool,
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns a shared copy of `s`, reusing an earlier one when the same string
    /// was seen before (label names and values repeat across series and snapshots).
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.strings.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
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

    /// The index of the series with exactly these labels, creating it if needed.
    pub fn series_id(&mut self, labels: &Labels) -> usize {
        if let Some(&i) = self.index.get(labels) {
            return i;
        }
        let i = self.series.len();
        let name = self.intern(labels.metric_name().unwrap_or(""));
        self.by_name.entry(name).or_default().push(i);
        self.index.insert(labels.clone(), i);
        self.series.push(Series {
            labels: labels.clone(),
            samples: Vec::new(),
        });
        i
    }

    /// Appends a point to series `id`. Points may arrive out of order; a point
    /// at a time the series already has replaces the earlier value.
    pub fn push_id(&mut self, id: usize, t: Millis, v: f64) {
        let s = &mut self.series[id].samples;
        match s.last() {
            Some(last) if last.t > t => self.unsorted = true,
            Some(last) if last.t == t => {
                if let Some(last) = s.last_mut() {
                    last.v = v;
                }
                return;
            }
            _ => {}
        }
        s.push(Sample { t, v });
    }

    /// The points of series `id`, to edit in place; [`Store::finish`] puts them
    /// back in time order afterwards.
    pub fn samples_mut(&mut self, id: usize) -> &mut Vec<Sample> {
        self.unsorted = true;
        &mut self.series[id].samples
    }

    /// Appends a point to the series with these labels.
    pub fn push(&mut self, labels: &Labels, t: Millis, v: f64) {
        let id = self.series_id(labels);
        self.push_id(id, t, v);
    }

    /// Puts every series' points in time order (stable: for equal times the last
    /// pushed wins). Called once after loading; cheap when nothing is out of order.
    pub fn finish(&mut self) {
        if !self.unsorted {
            return;
        }
        for s in &mut self.series {
            if s.samples.windows(2).all(|w| w[0].t < w[1].t) {
                continue;
            }
            s.samples.sort_by_key(|p| p.t);
            let mut out: Vec<Sample> = Vec::with_capacity(s.samples.len());
            for p in s.samples.drain(..) {
                match out.last_mut() {
                    Some(last) if last.t == p.t => *last = p,
                    _ => out.push(p),
                }
            }
            s.samples = out;
        }
        self.unsorted = false;
    }

    /// Every series.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// Series `id`.
    pub fn get(&self, id: usize) -> &Series {
        &self.series[id]
    }

    /// The series whose metric name is `name`.
    pub fn by_name<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Series> + 'a {
        self.by_name
            .get(name)
            .map(|v| v.as_slice())
            .unwrap_or(&[])
            .iter()
            .map(move |&i| &self.series[i])
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
            for p in [s.samples.first(), s.samples.last()].into_iter().flatten() {
                r = Some(match r {
                    None => (p.t, p.t),
                    Some((a, b)) => (a.min(p.t), b.max(p.t)),
                });
            }
        }
        r
    }

    /// Total number of points held.
    pub fn point_count(&self) -> usize {
        self.series.iter().map(|s| s.samples.len()).sum()
    }
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
            s.samples,
            vec![Sample { t: 1000, v: 1.0 }, Sample { t: 2000, v: 3.0 }]
        );
        assert_eq!(st.time_range(), Some((1000, 2000)));
    }

    #[test]
    fn interning_shares_strings() {
        let mut st = Store::new();
        let a = st.intern("apiserver_request_total");
        let b = st.intern("apiserver_request_total");
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn staleness_marker_is_not_plain_nan() {
        assert!(is_stale(stale_nan()));
        assert!(!is_stale(f64::NAN));
    }
}
