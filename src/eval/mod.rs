//! The PromQL evaluator: the subset of PromQL cptriage's rules use, evaluated over
//! the [`Store`] with Prometheus 3 semantics.
//!
//! Expressions are parsed with the `promql-parser` crate; [`check_supported`]
//! rejects anything outside the subset before evaluation, naming the construct.
//! `docs/promql.md` lists the subset and the Prometheus behaviour it mirrors.
//!
//! PUBLIC API CONTRACT (used by sources, rules and commands; keep it stable):
//! - [`parse`]  text → checked [`Expr`]
//! - [`check_supported`]
//! - [`referenced_metrics`] which metric families an expression reads
//! - [`instant`] and [`range`] evaluation
//! - [`Value`], [`VectorSample`], [`EvalError`]
//!
//! Evaluation is column-wise: every sub-expression is evaluated once for all
//! steps of the query, so series are selected once per query and label work
//! (grouping keys, match signatures) is done once per series, not per step.

mod aggregate;
mod binary;
mod check;
mod functions;
mod histogram;
pub mod seam;
pub mod select;
mod selector;
pub mod template;

use std::collections::{BTreeSet, HashMap};

pub use promql_parser::parser::Expr;

pub use check::{check_supported, referenced_metrics};
pub use histogram::{almost_equal, bucket_fraction, bucket_quantile, parse_le};

use crate::store::{Labels, Millis, Sample, Series, Store};

/// Default lookback for instant vector selectors (Prometheus `--query.lookback-delta`).
pub const DEFAULT_LOOKBACK: Millis = 5 * 60 * 1000;

/// Step of subqueries written without one (`x[5m:]`), as Prometheus's default
/// evaluation interval.
pub const DEFAULT_SUBQUERY_STEP: Millis = 60 * 1000;

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
    let e = crate::limits::parse_promql(text).map_err(EvalError::Parse)?;
    check_supported(&e)?;
    Ok(e)
}

/// Evaluates `expr` at time `t`.
///
/// A matrix selector or subquery at the top level yields [`Value::Matrix`]
/// with the points of its window; everything else yields a scalar, string or vector.
/// Vector elements come in Prometheus's output order (selection order sorted by
/// labels, or the order `sort`, `sort_desc`, `sort_by_label`, `topk` and
/// `bottomk` impose).
pub fn instant(store: &Store, expr: &Expr, t: Millis, opts: &EvalOptions) -> Result<Value, EvalError> {
    check_supported(expr)?;
    let ctx = Ctx::new(store, t, t, 1, opts);
    if matches!(unparen(expr), Expr::MatrixSelector(_) | Expr::Subquery(_)) {
        let input = selector::range_input(&ctx, expr)?;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for s in &input.series {
            let samples = s.samples(&mut buf);
            let (lo, hi) = input.window(&ctx, 0, samples);
            if lo < hi {
                out.push(Series {
                    labels: s.labels.clone().into_owned(),
                    samples: samples[lo..hi].to_vec(),
                });
            }
        }
        return Ok(Value::Matrix(out));
    }
    Ok(match eval(&ctx, expr)? {
        Val::Scalar(v) => Value::Scalar(v.first().copied().unwrap_or(f64::NAN)),
        Val::Str(s) => Value::String(s),
        Val::Vector(rows) => Value::Vector(
            rows.into_iter()
                .filter_map(|r| {
                    let v = r.vals.first().copied().flatten()?;
                    Some(VectorSample { labels: r.labels, v })
                })
                .collect(),
        ),
    })
}

/// Evaluates `expr` at every step from `start` to `end` inclusive; the result is
/// a matrix (one series per output label set, points at the step times).
///
/// Series are sorted by labels; a scalar result becomes one series with an empty
/// label set. `step` must be positive and `end` not before `start`.
pub fn range(
    store: &Store,
    expr: &Expr,
    start: Millis,
    end: Millis,
    step: Millis,
    opts: &EvalOptions,
) -> Result<Vec<Series>, EvalError> {
    check_supported(expr)?;
    if step <= 0 {
        return Err(EvalError::Runtime(format!(
            "invalid range query step {step}ms: zero or negative query resolution step widths are not accepted"
        )));
    }
    if end < start {
        return Err(EvalError::Runtime(
            "invalid range query: end timestamp must not be before start time".into(),
        ));
    }
    let n = check_resolution(start, end, step)?;
    let ctx = Ctx::new(store, start, step, n, opts);
    let rows = match eval(&ctx, expr)? {
        Val::Scalar(v) => vec![Row {
            labels: Labels::new(),
            vals: v.into_iter().map(Some).collect(),
        }],
        Val::Vector(rows) => rows,
        Val::Str(_) => {
            return Err(EvalError::Runtime(
                "invalid expression type \"string\" for range query, must be Scalar or instant Vector".into(),
            ))
        }
    };
    let mut out: Vec<Series> = rows
        .into_iter()
        .filter_map(|r| {
            let samples: Vec<Sample> = r
                .vals
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| Sample { t: ctx.t(i), v }))
                .collect();
            (!samples.is_empty()).then_some(Series {
                labels: r.labels,
                samples,
            })
        })
        .collect();
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(out)
}

/// Prometheus's limit on points per series in one query.
pub const MAX_POINTS_PER_SERIES: i64 = 11_000;

/// The number of steps from `start` to `end`, refused beyond
/// [`MAX_POINTS_PER_SERIES`] as Prometheus does.
pub(crate) fn check_resolution(start: Millis, end: Millis, step: Millis) -> Result<usize, EvalError> {
    let n = end.saturating_sub(start) / step + 1;
    if n > MAX_POINTS_PER_SERIES {
        return Err(rt(
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
        ));
    }
    Ok(n.max(0) as usize)
}

/// The evaluation frame: the step times being computed.
pub(crate) struct Ctx<'a> {
    pub store: &'a Store,
    pub start: Millis,
    pub step: Millis,
    pub n: usize,
    pub lookback: Millis,
    /// Start and end of the outermost query (what `start()`/`end()` in `@` mean).
    pub query_start: Millis,
    pub query_end: Millis,
}

impl<'a> Ctx<'a> {
    fn new(store: &'a Store, start: Millis, step: Millis, n: usize, opts: &EvalOptions) -> Self {
        let end = start.saturating_add(step.saturating_mul(n as i64 - 1));
        Ctx {
            store,
            start,
            step,
            n,
            lookback: opts.lookback,
            query_start: start,
            query_end: end,
        }
    }

    /// The time of step `i`.
    pub(crate) fn t(&self, i: usize) -> Millis {
        self.start.saturating_add(self.step.saturating_mul(i as i64))
    }

    /// The same frame over other step times (subqueries).
    pub(crate) fn sub(&self, start: Millis, step: Millis, n: usize) -> Ctx<'a> {
        Ctx {
            store: self.store,
            start,
            step,
            n,
            lookback: self.lookback,
            query_start: self.query_start,
            query_end: self.query_end,
        }
    }
}

/// One output series of an instant-vector expression: its labels and its value
/// at every step (`None` where it has none).
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub labels: Labels,
    pub vals: Vec<Option<f64>>,
}

/// An evaluated sub-expression over all steps.
pub(crate) enum Val {
    Scalar(Vec<f64>),
    Str(String),
    Vector(Vec<Row>),
}

pub(crate) fn rt(msg: impl Into<String>) -> EvalError {
    EvalError::Runtime(msg.into())
}

pub(crate) fn unparen(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unparen(&p.expr),
        other => other,
    }
}

/// Evaluates a sub-expression over every step of `ctx`.
pub(crate) fn eval(ctx: &Ctx, expr: &Expr) -> Result<Val, EvalError> {
    match expr {
        Expr::NumberLiteral(n) => Ok(Val::Scalar(vec![n.val; ctx.n])),
        Expr::StringLiteral(s) => Ok(Val::Str(s.val.clone())),
        Expr::Paren(p) => eval(ctx, &p.expr),
        Expr::Unary(u) => match eval(ctx, &u.expr)? {
            Val::Scalar(v) => Ok(Val::Scalar(v.into_iter().map(|x| -x).collect())),
            Val::Vector(rows) => {
                let rows = rows
                    .into_iter()
                    .map(|r| Row {
                        labels: r.labels.without_name(),
                        vals: r.vals.into_iter().map(|v| v.map(|x| -x)).collect(),
                    })
                    .collect();
                Ok(Val::Vector(merge_same_labels(rows)?))
            }
            Val::Str(_) => Err(rt("unary minus is not defined on strings")),
        },
        Expr::VectorSelector(vs) => Ok(Val::Vector(selector::eval_instant_selector(ctx, vs)?)),
        Expr::MatrixSelector(_) | Expr::Subquery(_) => Err(rt(
            "invalid expression type \"range vector\" for range query, must be Scalar or instant Vector",
        )),
        Expr::Call(c) => functions::eval_call(ctx, c),
        Expr::Aggregate(a) => aggregate::eval_aggregate(ctx, a),
        Expr::Binary(b) => binary::eval_binary(ctx, b),
        Expr::Extension(_) => Err(EvalError::Unsupported("parser extension expression".into())),
    }
}

/// Evaluates an expression that must be a scalar (function parameters).
pub(crate) fn eval_scalar(ctx: &Ctx, expr: &Expr) -> Result<Vec<f64>, EvalError> {
    match eval(ctx, expr)? {
        Val::Scalar(v) => Ok(v),
        _ => Err(rt(format!("expected a scalar, got `{expr}`"))),
    }
}

/// Evaluates an expression that must be an instant vector.
pub(crate) fn eval_vector(ctx: &Ctx, expr: &Expr) -> Result<Vec<Row>, EvalError> {
    match eval(ctx, expr)? {
        Val::Vector(v) => Ok(v),
        _ => Err(rt(format!("expected an instant vector, got `{expr}`"))),
    }
}

/// Merges rows whose label sets became equal (after the metric name was dropped
/// or labels were rewritten). Rows with a value at the same step are an error,
/// as in Prometheus.
pub(crate) fn merge_same_labels(rows: Vec<Row>) -> Result<Vec<Row>, EvalError> {
    if rows.len() < 2 {
        return Ok(rows);
    }
    let mut index: HashMap<Labels, usize> = HashMap::with_capacity(rows.len());
    let mut out: Vec<Row> = Vec::with_capacity(rows.len());
    for r in rows {
        match index.get(&r.labels) {
            Some(&i) => {
                let dst = &mut out[i];
                for (d, s) in dst.vals.iter_mut().zip(r.vals) {
                    if s.is_some() {
                        if d.is_some() {
                            return Err(same_labelset());
                        }
                        *d = s;
                    }
                }
            }
            None => {
                index.insert(r.labels.clone(), out.len());
                out.push(r);
            }
        }
    }
    Ok(out)
}

pub(crate) fn same_labelset() -> EvalError {
    rt("vector cannot contain metrics with the same labelset")
}

/// Go's `labels.Labels.String()`: `{a="b", c="d"}` with every label, the metric
/// name included, used in error messages.
pub(crate) fn go_labels(l: &Labels) -> String {
    let mut s = String::from("{");
    for (i, lb) in l.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&lb.name);
        s.push_str("=\"");
        for c in lb.value.chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '"' => s.push_str("\\\""),
                '\n' => s.push_str("\\n"),
                c => s.push(c),
            }
        }
        s.push('"');
    }
    s.push('}');
    s
}

/// Neumaier-compensated addition as Prometheus's `kahansum.Inc`.
pub(crate) fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    if t.is_infinite() {
        (t, 0.0)
    } else if sum.abs() >= inc.abs() {
        (t, c + ((sum - t) + inc))
    } else {
        (t, c + ((inc - t) + sum))
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)` (count_values, histogram_quantiles labels).
pub(crate) fn format_go_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f == f64::INFINITY {
        "+Inf".into()
    } else if f == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests;

/// Prometheus's `quantile()` over plain values (sorts `vals`).
pub(crate) fn quantile(q: f64, vals: &mut [f64]) -> f64 {
    if vals.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    // NaN sorts first, as Go's vectorByValueHeap.
    vals.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal),
    });
    let n = vals.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    vals[lower as usize] * (1.0 - weight) + vals[upper as usize] * weight
}
