//! The evaluation seam: where the rules engine has a signal's expression
//! evaluated. [`LocalStore`] evaluates over the series store (dumps, live
//! scrapes, audit counters); the Prometheus source implements
//! [`SignalEvaluator`] over a remote query API, and fleet mode over the shared
//! answers of many clusters. Everything else of a diagnosis is the same for all.

use std::collections::BTreeSet;

use promql_parser::parser::Expr;

use super::EvalError;
use crate::store::{Millis, Role, Series, Store};

/// Why a signal's expression has no answer. Its message is what the report
/// shows for the gap.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The expression cannot be parsed or evaluated here.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The role's series cannot be selected (no selector for it).
    #[error("{0}")]
    Selection(String),
    /// The remote engine refused or failed the query (its own message, with
    /// what to do about it).
    #[error("{0}")]
    Remote(String),
    /// The evaluator produced no answer for the query.
    #[error("not queried")]
    NotQueried,
}

/// One answer of [`SignalEvaluator::range`].
pub type QueryResult = Result<Vec<Series>, QueryError>;

/// One range query of a signal's expression, as the engine asks for it.
#[derive(Clone, Copy, Debug)]
pub struct RangeQuery<'a> {
    /// The signal's id (for messages).
    pub signal: &'a str,
    /// The instantiated expression ([`SignalEvaluator::instantiate`]).
    pub expr: &'a Expr,
    pub start: Millis,
    pub end: Millis,
    pub step: Millis,
    /// The resolved `$window`, also the instant-selector lookback of local evaluation.
    pub range: Millis,
}

/// Where signal expressions are evaluated: the dataset's own series store
/// ([`LocalStore`]) or a remote Prometheus-compatible API. Everything else of a
/// diagnosis (choice of alternatives from the targets' families, the grid,
/// baselines, sources, assessment) is the same for both.
pub trait SignalEvaluator: Sync {
    /// The expression of a signal for targets of `role`: `$window` resolved and
    /// the selection of the role's series added to every selector.
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError>;
    /// Evaluates `queries` (possibly concurrently); one result per query, in
    /// order. A series's `instance` label names the target.
    fn range(&self, store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult>;
}

/// Evaluation over the dataset's series store (dumps and live scrapes): the
/// role is selected by the `role` label cptriage adds to every series.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalStore;

impl SignalEvaluator for LocalStore {
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError> {
        Ok(super::template::instantiate(text, window, role.as_str())?)
    }

    fn range(&self, store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult> {
        queries
            .iter()
            .map(|q| {
                let opts = super::EvalOptions { lookback: q.range };
                super::range(store, q.expr, q.start, q.end, q.step, &opts).map_err(QueryError::from)
            })
            .collect()
    }
}

/// An evaluator that evaluates the signals of one role over the dataset's own
/// store and the others with `inner`: audit logs (`--audit`) read beside a
/// Prometheus source are counters in the local store, not in Prometheus.
pub struct LocalRole<'a> {
    pub inner: &'a dyn SignalEvaluator,
    pub role: Role,
    /// The instantiated expressions of `role` (by their text).
    local: std::sync::Mutex<BTreeSet<String>>,
}

impl<'a> LocalRole<'a> {
    pub fn new(inner: &'a dyn SignalEvaluator, role: Role) -> Self {
        LocalRole {
            inner,
            role,
            local: std::sync::Mutex::new(BTreeSet::new()),
        }
    }
}

impl SignalEvaluator for LocalRole<'_> {
    fn instantiate(&self, text: &str, window: Millis, role: Role) -> Result<Expr, QueryError> {
        if role != self.role {
            return self.inner.instantiate(text, window, role);
        }
        let e = LocalStore.instantiate(text, window, role)?;
        self.local
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(e.to_string());
        Ok(e)
    }

    fn range(&self, store: &Store, queries: &[RangeQuery]) -> Vec<QueryResult> {
        let local = self.local.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let is_local: Vec<bool> = queries
            .iter()
            .map(|q| local.contains(&q.expr.to_string()))
            .collect();
        let remote: Vec<RangeQuery> = queries
            .iter()
            .zip(&is_local)
            .filter(|(_, l)| !**l)
            .map(|(q, _)| *q)
            .collect();
        let mut remote_results = if remote.is_empty() {
            Vec::new()
        } else {
            self.inner.range(store, &remote)
        }
        .into_iter();
        queries
            .iter()
            .zip(is_local)
            .map(|(q, l)| {
                if l {
                    LocalStore
                        .range(store, std::slice::from_ref(q))
                        .pop()
                        .unwrap_or_else(|| Ok(Vec::new()))
                } else {
                    remote_results.next().unwrap_or(Err(QueryError::NotQueried))
                }
            })
            .collect()
    }
}
