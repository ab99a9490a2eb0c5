//! The PromQL evaluator: the subset of PromQL cptriage's rules use, evaluated over
//! the [`Store`](crate::store::Store) with Prometheus 3 semantics.
//!
//! Expressions are parsed with the `promql-parser` crate; [`check_supported`]
//! rejects anything outside the subset before evaluation, naming the construct.
//!
//! PUBLIC API CONTRACT (used by sources, rules and commands; keep it stable):
//! - [`parse`]  text → checked [`Expr`]
//! - [`check_supported`]
//! - [`referenced_metrics`] which metric families an expression reads
//! - [`instant`] and [`range`] evaluation
//! - [`Value`], [`VectorSample`], [`EvalError`]

use std::collections::BTreeSet;

pub use promql_parser::parser::Expr;

use crate::store::{Labels, Millis, Series, Store};

/// Default lookback for instant vector selectors (Prometheus `--query.lookback-delta`).
pub const DEFAULT_LOOKBACK: Millis = 5 * 60 * 1000;

/// Why an expression could not be parsed or evaluated.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum EvalError {
    #[error("invalid PromQL: {0}")]
    Parse(String),
    #[error("unsupported PromQL construct: {0}")]
    Unsupported(String),
    #[error("{0}")]
    Runtime(String),
}

/// One element of an instant vector.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorSample {
    pub labels: Labels,
    pub v: f64,
}

/// The result of an evaluation.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Scalar(f64),
    String(String),
    Vector(Vec<VectorSample>),
    /// A range vector (instant query on a matrix selector) or a range-query result.
    Matrix(Vec<Series>),
}

/// Evaluation settings.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Lookback delta for instant selectors.
    pub lookback: Millis,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            lookback: DEFAULT_LOOKBACK,
        }
    }
}

/// The metric names an expression reads. `all` is set when a selector has no
/// fixed metric name (e.g. `{__name__=~"etcd_.*"}`), in which case every family
/// must be kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricRefs {
    pub names: BTreeSet<String>,
    pub all: bool,
}

/// Parses `text` and checks that it stays within the supported subset.
pub fn parse(text: &str) -> Result<Expr, EvalError> {
    let e = promql_parser::parser::parse(text).map_err(EvalError::Parse)?;
    check_supported(&e)?;
    Ok(e)
}

/// Rejects constructs outside the supported subset, naming the first one found.
pub fn check_supported(_expr: &Expr) -> Result<(), EvalError> {
    Ok(())
}

/// The metric names `expr` selects.
pub fn referenced_metrics(_expr: &Expr) -> MetricRefs {
    MetricRefs::default()
}

/// Evaluates `expr` at time `t`.
pub fn instant(_store: &Store, _expr: &Expr, _t: Millis, _opts: &EvalOptions) -> Result<Value, EvalError> {
    Err(EvalError::Runtime("evaluator not built yet".into()))
}

/// Evaluates `expr` at every step from `start` to `end` inclusive; the result is
/// a matrix (one series per output label set, points at the step times).
pub fn range(
    _store: &Store,
    _expr: &Expr,
    _start: Millis,
    _end: Millis,
    _step: Millis,
    _opts: &EvalOptions,
) -> Result<Vec<Series>, EvalError> {
    Err(EvalError::Runtime("evaluator not built yet".into()))
}
