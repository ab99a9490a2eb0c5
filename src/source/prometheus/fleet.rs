//! Fleet mode (`diagnose --prometheus URL --by cluster`): every cluster of a
//! Prometheus, Thanos or Mimir judged from the same queries.
//!
//! Each signal expression keeps the fleet label through every aggregation
//! and vector match ([`select::add_grouping_label`]), so one range query
//! answers for every cluster. The first cluster whose diagnosis asks for an
//! expression over a range sends the query; the answer (or its error) is kept
//! and every cluster reads its own series from it. The number of queries is
//! therefore that of one diagnosis, whatever the number of clusters (a
//! cluster whose metrics choose another alternative of a signal adds that
//! alternative's query, once).

use std::collections::HashMap;
use std::sync::Mutex;

use promql_parser::parser::Expr;

use super::Prometheus;
use crate::eval::seam::{QueryError, QueryResult, RangeQuery, SignalEvaluator};
use crate::eval::select;

use crate::store::{Labels, Millis, Role, Series, Store};

type Cached = QueryResult;

/// The shared answers of a fleet run.
pub struct Fleet<'a> {
    prom: &'a Prometheus,
    label: String,
    cache: Mutex<HashMap<(String, Millis, Millis, Millis), Cached>>,
}

impl<'a> Fleet<'a> {
    pub fn new(prom: &'a Prometheus, label: &str) -> Fleet<'a> {
        Fleet {
            prom,
            label: label.to_string(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The label that names the clusters.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The evaluator of one cluster (one value of the fleet label).
    pub fn cluster(&'a self, value: &str) -> ClusterView<'a> {
        ClusterView {
            fleet: self,
            value: value.to_string(),
        }
    }
}

/// One cluster's view of the fleet's answers: a [`SignalEvaluator`] whose
/// series are those of the fleet-wide answers with the fleet label equal to
/// the cluster's value (the label itself removed).
pub struct ClusterView<'a> {
    fleet: &'a Fleet<'a>,
    value: String,
}

impl SignalEvaluator for ClusterView<'_> {
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError> {
        let mut e = self.fleet.prom.instantiate(text, window, role)?;
        select::add_grouping_label(&mut e, &self.fleet.label);
        Ok(e)
    }

    fn range(&self, store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult> {
        let keys: Vec<_> = queries
            .iter()
            .map(|q| (q.expr.to_string(), q.start, q.end, q.step))
            .collect();
        let missing: Vec<RangeQuery> = {
            let cache = self.fleet.cache.lock().unwrap_or_else(|p| p.into_inner());
            let mut seen = std::collections::HashSet::new();
            queries
                .iter()
                .zip(&keys)
                .filter(|(_, k)| !cache.contains_key(*k) && seen.insert((*k).clone()))
                .map(|(q, _)| *q)
                .collect()
        };
        if !missing.is_empty() {
            let answers = self.fleet.prom.range(store, &missing);
            let mut cache = self.fleet.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (q, a) in missing.iter().zip(answers) {
                cache.insert((q.expr.to_string(), q.start, q.end, q.step), a);
            }
        }
        let cache = self.fleet.cache.lock().unwrap_or_else(|p| p.into_inner());
        keys.iter()
            .map(|k| match cache.get(k) {
                Some(Ok(series)) => Ok(series
                    .iter()
                    .filter(|s| s.labels.get(&self.fleet.label) == Some(self.value.as_str()))
                    .map(|s| {
                        let mut l: Labels = s.labels.clone();
                        l.set(&self.fleet.label, "");
                        Series {
                            labels: l,
                            samples: s.samples.clone(),
                        }
                    })
                    .collect()),
                Some(Err(e)) => Err(e.clone()),
                None => Err(QueryError::NotQueried),
            })
            .collect()
    }
}
