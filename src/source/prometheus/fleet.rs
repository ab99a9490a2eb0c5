//! Fleet mode (`diagnose --prometheus URL --by cluster`): every cluster of a
//! Prometheus, Thanos or Mimir judged from the same queries.
//!
//! Each signal expression keeps the fleet label through every aggregation
//! and vector match ([`select::add_grouping_label`]), so one range query
//! answers for every cluster of a **shard**. The first cluster of a shard
//! whose diagnosis asks for an expression over a range sends the query; the
//! answer (or its error) is split once by the fleet label and every cluster
//! of the shard reads its own series from it.
//!
//! **Shards.** A fleet whose queries would select more samples than the
//! server allows in one query is cut into shards of clusters
//! ([`shards`]): each shard's selectors carry a matcher on the fleet label
//! naming its clusters, and the shard's answers are dropped once its clusters
//! are judged. The number of queries is that of one diagnosis per shard,
//! whatever the number of clusters in it (a cluster whose metrics choose
//! another alternative of a signal adds that alternative's query, once per
//! shard); the number of shards follows the fleet's series, not its clusters,
//! and cptriage's memory follows one shard, not the fleet.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Condvar, Mutex};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::Expr;

use super::Prometheus;
use crate::eval::seam::{QueryError, QueryResult, RangeQuery, SignalEvaluator};
use crate::eval::{select, template};

use crate::store::{Labels, Millis, Role, Series, Store};

/// A fleet answer split by the value of the fleet label (the label removed).
type Split = Result<HashMap<String, Vec<Series>>, QueryError>;

/// Key of one range query: the expression's text and its range and step.
type Key = (String, Millis, Millis, Millis);

/// Default of `--prometheus-max-samples`: a 25th of Prometheus's default
/// `--query.max-samples` (50,000,000). Prometheus's work per series grows
/// with the size of a query: 200 benchmark clusters took 151 s in shards of
/// 5,000,000 samples, 108 s in shards of 2,000,000 (124 s one cluster at a
/// time), and with 50 ms added to each request 151 s and 180 s (381 s one at
/// a time): at this size fleet mode is never slower than single runs
/// (docs/performance.md).
pub const DEFAULT_MAX_SAMPLES: u64 = 2_000_000;

/// The fleet cut into shards: consecutive clusters (in name order) whose
/// largest metrics, times `points` steps of a query, stay under
/// `max_samples`. A cluster over the budget alone is a shard of its own (its
/// queries are then halved in time when the server refuses them). A cluster
/// whose size is unknown counts as the largest known one; when no size is
/// known, or `max_samples` is 0, the fleet is one shard.
pub fn shards<'a>(
    clusters: impl IntoIterator<Item = &'a String>,
    largest: &BTreeMap<String, usize>,
    points: usize,
    max_samples: u64,
) -> Vec<Vec<String>> {
    let clusters: Vec<&String> = clusters.into_iter().collect();
    let known_max = largest.values().copied().max();
    let (Some(known_max), true) = (known_max, max_samples > 0) else {
        return vec![clusters.into_iter().cloned().collect()];
    };
    let cost = |c: &str| largest.get(c).copied().unwrap_or(known_max).max(1) as u64 * points.max(1) as u64;
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut used = 0u64;
    for c in clusters {
        let n = cost(c);
        match out.last_mut() {
            Some(shard) if used + n <= max_samples => {
                shard.push(c.clone());
                used += n;
            }
            _ => {
                out.push(vec![c.clone()]);
                used = n;
            }
        }
    }
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

/// The shared answers of one shard of a fleet run.
pub struct Fleet<'a> {
    prom: &'a Prometheus,
    label: String,
    /// The matcher on the fleet label the shard's queries carry: the one
    /// naming the shard's clusters, else the user's (`--clusters`), else none.
    shard: Option<Matcher>,
    cache: Mutex<HashMap<Key, Slot>>,
    /// Signalled when answers are added to the cache.
    answered: Condvar,
}

/// A query of the shard: being sent by one cluster, or answered.
enum Slot {
    Pending,
    Done(Split),
}

impl<'a> Fleet<'a> {
    /// The answers of the clusters `members` (all clusters when empty).
    ///
    /// # Errors
    /// When the matcher naming the members cannot be built.
    pub fn new(
        prom: &'a Prometheus,
        label: &str,
        members: &[String],
    ) -> Result<Fleet<'a>, select::SelectorError> {
        Ok(Fleet {
            prom,
            label: label.to_string(),
            shard: match shard_matcher(label, members)? {
                Some(m) => Some(m),
                None => prom.extra_matchers().iter().find(|m| m.name == label).cloned(),
            },
            cache: Mutex::new(HashMap::new()),
            answered: Condvar::new(),
        })
    }

    /// The evaluator of one cluster (one value of the fleet label).
    pub fn cluster(&'a self, value: &str) -> ClusterView<'a> {
        ClusterView {
            fleet: self,
            value: value.to_string(),
        }
    }
}

/// The matcher `LABEL=~"m1|m2|…"` matching exactly the values `members`
/// (none when there are none).
fn shard_matcher(label: &str, members: &[String]) -> Result<Option<Matcher>, select::SelectorError> {
    if members.is_empty() {
        return Ok(None);
    }
    let alternatives: Vec<String> = members.iter().map(|m| regex_literal(m)).collect();
    select::regex_matcher("--by", label, &alternatives.join("|")).map(Some)
}

/// `s` as a regular expression (RE2) matching exactly `s`.
fn regex_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if "\\.+*?()|[]{}^$".contains(ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// One fleet answer split by the value of `label`, the label removed from
/// each series.
fn split(series: Vec<Series>, label: &str) -> HashMap<String, Vec<Series>> {
    let mut out: HashMap<String, Vec<Series>> = HashMap::new();
    for s in series {
        let value = s.labels.get(label).unwrap_or("").to_string();
        let mut l: Labels = s.labels;
        l.set(label, "");
        out.entry(value).or_default().push(Series {
            labels: l,
            samples: s.samples,
        });
    }
    out
}

/// One cluster's view of the fleet's answers: a [`SignalEvaluator`] whose
/// series are those of the fleet-wide answers with the fleet label equal to
/// the cluster's value (the label itself removed). Its expressions select
/// the cluster alone (`cluster="c1"`, what its report shows and a user can
/// paste); they are sent with the shard's matcher instead.
pub struct ClusterView<'a> {
    fleet: &'a Fleet<'a>,
    value: String,
}

impl SignalEvaluator for ClusterView<'_> {
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError> {
        let mut e =
            self.fleet
                .prom
                .instantiate_in(text, window, role, Some((&self.fleet.label, &self.value)))?;
        select::add_grouping_label(&mut e, &self.fleet.label);
        let own = Matcher::new(MatchOp::Equal, &self.fleet.label, &self.value);
        select::inject_matchers(&mut e, std::slice::from_ref(&own));
        Ok(e)
    }

    fn range(&self, store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult> {
        // The shard's form of each expression: what is sent and cached.
        let shard: Vec<Expr> = queries
            .iter()
            .map(|q| {
                let mut e = q.expr.clone();
                template::replace_label_matchers(&mut e, &self.fleet.label, self.fleet.shard.as_ref());
                e
            })
            .collect();
        let keys: Vec<Key> = queries
            .iter()
            .zip(&shard)
            .map(|(q, e)| (e.to_string(), q.start, q.end, q.step))
            .collect();
        // The queries no cluster has sent yet are this cluster's to send;
        // the ones another cluster is sending are waited for.
        let mine: Vec<RangeQuery> = {
            let mut cache = self.fleet.cache.lock().unwrap_or_else(|p| p.into_inner());
            queries
                .iter()
                .zip(&shard)
                .zip(&keys)
                .filter(|(_, k)| {
                    if cache.contains_key(*k) {
                        return false;
                    }
                    cache.insert((*k).clone(), Slot::Pending);
                    true
                })
                .map(|((q, e), _)| RangeQuery { expr: e, ..*q })
                .collect()
        };
        if !mine.is_empty() {
            let answers = self.fleet.prom.range(store, &mine);
            let split: Vec<(Key, Split)> = mine
                .iter()
                .zip(answers)
                .map(|(q, a)| {
                    (
                        (q.expr.to_string(), q.start, q.end, q.step),
                        a.map(|s| split(s, &self.fleet.label)),
                    )
                })
                .collect();
            let mut cache = self.fleet.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (k, v) in split {
                cache.insert(k, Slot::Done(v));
            }
            self.fleet.answered.notify_all();
        }
        let mut cache = self.fleet.cache.lock().unwrap_or_else(|p| p.into_inner());
        while keys.iter().any(|k| matches!(cache.get(k), Some(Slot::Pending))) {
            cache = self.fleet.answered.wait(cache).unwrap_or_else(|p| p.into_inner());
        }
        keys.iter()
            .map(|k| match cache.get(k) {
                Some(Slot::Done(Ok(by))) => Ok(by.get(&self.value).cloned().unwrap_or_default()),
                Some(Slot::Done(Err(e))) => Err(e.clone()),
                Some(Slot::Pending) | None => Err(QueryError::NotQueried),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i:03}")).collect()
    }

    #[test]
    fn shards_stay_under_the_budget_and_keep_every_cluster_once() {
        let cs = names(10);
        let largest: BTreeMap<String, usize> = cs.iter().map(|c| (c.clone(), 1000)).collect();
        // 1000 series × 240 steps = 240,000 samples a cluster: 4 fit 1,000,000.
        let s = shards(&cs, &largest, 240, 1_000_000);
        assert_eq!(s.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 2]);
        assert_eq!(s.concat(), cs);
        // A cluster over the budget is a shard of its own.
        let mut big = largest.clone();
        big.insert("c003".into(), 10_000);
        let s = shards(&cs, &big, 240, 1_000_000);
        assert!(s.contains(&vec!["c003".to_string()]), "{s:?}");
        assert_eq!(s.concat(), cs);
        // Unknown sizes count as the largest known one.
        let mut partial = largest.clone();
        partial.remove("c000");
        partial.insert("c001".into(), 2000);
        let s = shards(&cs, &partial, 240, 1_000_000);
        assert_eq!(s[0], ["c000", "c001"]);
    }

    #[test]
    fn without_sizes_or_budget_the_fleet_is_one_shard() {
        let cs = names(5);
        assert_eq!(shards(&cs, &BTreeMap::new(), 240, 1_000_000), vec![cs.clone()]);
        let largest: BTreeMap<String, usize> = cs.iter().map(|c| (c.clone(), 1_000_000)).collect();
        assert_eq!(shards(&cs, &largest, 240, 0), vec![cs.clone()]);
    }

    #[test]
    fn a_shard_matcher_matches_exactly_its_members() {
        let members = vec!["prod.eu-1".to_string(), "a|b".to_string(), "x\"y\\z".to_string()];
        let m = shard_matcher("cluster", &members).unwrap().unwrap();
        for v in &members {
            assert!(m.is_match(v), "{v}");
        }
        for v in ["prodXeu-1", "a", "b", "prod.eu-10", ""] {
            assert!(!m.is_match(v), "{v}");
        }
        // The matcher prints back as PromQL that parses to the same matcher.
        let text = format!("{{{m}}}");
        let again = select::parse_selector("t", &text).unwrap();
        assert_eq!(again[0].to_string(), m.to_string());
    }

    #[test]
    fn answers_split_by_the_fleet_label_without_it() {
        let s = |c: &str, i: &str| Series {
            labels: Labels::from_pairs([("cluster", c), ("instance", i)]),
            samples: vec![crate::store::Sample { t: 0, v: 1.0 }],
        };
        let by = split(vec![s("a", "1"), s("b", "1"), s("a", "2")], "cluster");
        assert_eq!(by["a"].len(), 2);
        assert_eq!(by["b"].len(), 1);
        assert_eq!(by["a"][1].labels.get("cluster"), None);
        assert_eq!(by["a"][1].labels.get("instance"), Some("2"));
    }
}
