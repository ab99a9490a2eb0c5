//! Vector and matrix selectors: choosing series by matchers, the lookback and
//! staleness rules of instant selectors, and the left-open windows of range
//! selectors and subqueries.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{AtModifier, Expr, MatrixSelector, Offset, SubqueryExpr, VectorSelector};

use super::{eval_vector, Ctx, EvalError, Row, DEFAULT_SUBQUERY_STEP};
use crate::store::{is_stale, Labels, Millis, Points, Sample, StoredSeries, METRIC_NAME};

fn duration_ms(d: &Duration) -> Millis {
    d.as_millis().min(i64::MAX as u128) as Millis
}

/// Milliseconds an offset shifts the evaluation time back (negative for `offset -5m`).
pub(crate) fn offset_ms(o: &Option<Offset>) -> Millis {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => duration_ms(d),
        Some(Offset::Neg(d)) => -duration_ms(d),
    }
}

/// The fixed evaluation time an `@` modifier sets, if any.
pub(crate) fn at_ms(ctx: &Ctx, at: &Option<AtModifier>) -> Option<Millis> {
    match at {
        None => None,
        Some(AtModifier::Start) => Some(ctx.query_start),
        Some(AtModifier::End) => Some(ctx.query_end),
        Some(AtModifier::At(st)) => Some(match st.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => duration_ms(&d),
            Err(e) => -duration_ms(&e.duration()),
        }),
    }
}

fn matcher_matches(m: &Matcher, labels: &Labels) -> bool {
    m.is_match(labels.get(&m.name).unwrap_or(""))
}

/// Whether a series' labels satisfy the selector (name, matchers, `or` groups).
pub(crate) fn selector_matches(vs: &VectorSelector, labels: &Labels) -> bool {
    if let Some(n) = &vs.name {
        if labels.metric_name() != Some(n.as_str()) {
            return false;
        }
    }
    if !vs.matchers.matchers.iter().all(|m| matcher_matches(m, labels)) {
        return false;
    }
    vs.matchers.or_matchers.is_empty()
        || vs
            .matchers
            .or_matchers
            .iter()
            .any(|g| g.iter().all(|m| matcher_matches(m, labels)))
}

/// The fixed metric name a selector reads, if it has one.
pub(crate) fn fixed_name(vs: &VectorSelector) -> Option<&str> {
    if let Some(n) = &vs.name {
        return Some(n);
    }
    if !vs.matchers.or_matchers.is_empty() {
        return None;
    }
    vs.matchers
        .matchers
        .iter()
        .find(|m| m.name == METRIC_NAME && matches!(m.op, MatchOp::Equal))
        .map(|m| m.value.as_str())
}

/// The series a selector selects, sorted by labels (storage order in Prometheus).
pub(crate) fn select<'a>(ctx: &Ctx<'a>, vs: &VectorSelector) -> Vec<&'a StoredSeries> {
    let mut out: Vec<&'a StoredSeries> = match fixed_name(vs) {
        Some(n) => ctx
            .store
            .by_name(n)
            .filter(|s| selector_matches(vs, &s.labels))
            .collect(),
        None => ctx
            .store
            .series()
            .iter()
            .filter(|s| selector_matches(vs, &s.labels))
            .collect(),
    };
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    out
}

/// For each selected series and each step, the sample an instant selector
/// returns: the latest one in `(t - lookback, t]`, unless it is a staleness
/// marker.
pub(crate) fn instant_points<'a>(
    ctx: &Ctx<'a>,
    vs: &VectorSelector,
) -> Vec<(&'a StoredSeries, Vec<Option<Sample>>)> {
    let off = offset_ms(&vs.offset);
    let at = at_ms(ctx, &vs.at);
    let mut samples = Vec::new();
    select(ctx, vs)
        .into_iter()
        .map(|s| {
            s.points.decode_into(&mut samples);
            let pts = (0..ctx.n)
                .map(|i| {
                    let t = at.unwrap_or_else(|| ctx.t(i)).saturating_sub(off);
                    let idx = samples.partition_point(|p| p.t <= t);
                    if idx == 0 {
                        return None;
                    }
                    let p = samples[idx - 1];
                    (p.t > t.saturating_sub(ctx.lookback) && !is_stale(p.v)).then_some(p)
                })
                .collect();
            (s, pts)
        })
        .collect()
}

/// The row an instant selector yields for one series, `None` if it has no
/// value at any step. Step times never decrease, so the lookup slides forward.
fn instant_row(
    ctx: &Ctx,
    s: &StoredSeries,
    off: Millis,
    at: Option<Millis>,
    samples: &mut Vec<Sample>,
) -> Option<Row> {
    s.points.decode_into(samples);
    let samples = &samples[..];
    let mut vals = Vec::with_capacity(ctx.n);
    let mut any = false;
    let mut idx = 0usize;
    for i in 0..ctx.n {
        let t = at.unwrap_or_else(|| ctx.t(i)).saturating_sub(off);
        if i == 0 || at.is_some() {
            idx = samples.partition_point(|p| p.t <= t);
        } else {
            while idx < samples.len() && samples[idx].t <= t {
                idx += 1;
            }
        }
        let v = if idx == 0 {
            None
        } else {
            let p = samples[idx - 1];
            (p.t > t.saturating_sub(ctx.lookback) && !is_stale(p.v)).then_some(p.v)
        };
        any |= v.is_some();
        vals.push(v);
    }
    any.then(|| Row {
        labels: s.labels.clone(),
        vals,
    })
}

/// Calls `f` with the row of every selected series that has a value at some step.
pub(crate) fn for_each_instant_row(
    ctx: &Ctx,
    vs: &VectorSelector,
    f: &mut dyn FnMut(Row) -> Result<(), EvalError>,
) -> Result<(), EvalError> {
    let off = offset_ms(&vs.offset);
    let at = at_ms(ctx, &vs.at);
    let mut buf = Vec::new();
    for s in select(ctx, vs) {
        if let Some(r) = instant_row(ctx, s, off, at, &mut buf) {
            f(r)?;
        }
    }
    Ok(())
}

/// Evaluates an instant vector selector at every step.
pub(crate) fn eval_instant_selector(ctx: &Ctx, vs: &VectorSelector) -> Result<Vec<Row>, EvalError> {
    let mut out = Vec::new();
    for_each_instant_row(ctx, vs, &mut |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

/// One series of a range input. Stored series are decoded only when their
/// turn comes ([`RangeSeries::samples`]), so a selector over many series never
/// holds all their points decoded at once.
pub(crate) struct RangeSeries<'a> {
    pub labels: Cow<'a, Labels>,
    src: RangeSrc<'a>,
}

enum RangeSrc<'a> {
    Stored(&'a Points),
    Computed(Vec<Sample>),
}

impl RangeSeries<'_> {
    /// The series' points with staleness markers removed; stored series are
    /// decoded into `buf` (reused from series to series).
    pub(super) fn samples<'b>(&'b self, buf: &'b mut Vec<Sample>) -> &'b [Sample] {
        match &self.src {
            RangeSrc::Stored(p) => {
                buf.clear();
                buf.extend(p.iter().filter(|p| !is_stale(p.v)));
                buf
            }
            RangeSrc::Computed(v) => v,
        }
    }
}

/// The input of a range-vector function: series plus how to cut their window
/// at each step.
pub(crate) struct RangeInput<'a> {
    pub series: Vec<RangeSeries<'a>>,
    pub range: Millis,
    pub offset: Millis,
    pub at: Option<Millis>,
}

impl RangeInput<'_> {
    /// The window end (inclusive) at step `i`.
    pub(super) fn end(&self, ctx: &Ctx, i: usize) -> Millis {
        self.at.unwrap_or_else(|| ctx.t(i)).saturating_sub(self.offset)
    }

    /// Index bounds of the points in `(end - range, end]` at step `i`.
    pub(super) fn window(&self, ctx: &Ctx, i: usize, samples: &[Sample]) -> (usize, usize) {
        let end = self.end(ctx, i);
        let start = end.saturating_sub(self.range);
        let lo = samples.partition_point(|p| p.t <= start);
        let hi = samples.partition_point(|p| p.t <= end);
        (lo, hi.max(lo))
    }
}

/// The range input of a matrix selector `sel[5m]`.
pub(crate) fn range_input_for_selector<'a>(
    ctx: &Ctx<'a>,
    ms: &MatrixSelector,
) -> Result<RangeInput<'a>, EvalError> {
    let vs = &ms.vs;
    Ok(RangeInput {
        series: select(ctx, vs)
            .into_iter()
            .map(|s| RangeSeries {
                labels: Cow::Borrowed(&s.labels),
                src: RangeSrc::Stored(&s.points),
            })
            .collect(),
        range: duration_ms(&ms.range),
        offset: offset_ms(&vs.offset),
        at: at_ms(ctx, &vs.at),
    })
}

/// The range input of a subquery `expr[5m:1m]`: the inner expression evaluated
/// at step-aligned times covering every window of the outer query.
pub(crate) fn range_input_for_subquery<'a>(
    ctx: &Ctx<'a>,
    sq: &SubqueryExpr,
) -> Result<RangeInput<'a>, EvalError> {
    let range = duration_ms(&sq.range);
    let offset = offset_ms(&sq.offset);
    let at = at_ms(ctx, &sq.at);
    let step = sq
        .step
        .as_ref()
        .map(duration_ms)
        .unwrap_or(DEFAULT_SUBQUERY_STEP)
        .max(1);
    let (outer_start, outer_end) = match at {
        Some(a) => (a, a),
        None => (ctx.start, ctx.t(ctx.n.saturating_sub(1))),
    };
    let lower = outer_start.saturating_sub(offset).saturating_sub(range);
    let mut start = step * (lower / step);
    if start <= lower {
        start = start.saturating_add(step);
    }
    let end = outer_end.saturating_sub(offset);
    let series = if end < start {
        Vec::new()
    } else {
        let n = super::check_resolution(start, end, step)?;
        let inner = ctx.sub(start, step, n);
        eval_vector(&inner, &sq.expr)?
            .into_iter()
            .map(|r| RangeSeries {
                labels: Cow::Owned(r.labels),
                src: RangeSrc::Computed(
                    r.vals
                        .iter()
                        .enumerate()
                        .filter_map(|(i, v)| v.map(|v| Sample { t: inner.t(i), v }))
                        .collect(),
                ),
            })
            .collect()
    };
    Ok(RangeInput {
        series,
        range,
        offset,
        at,
    })
}

/// The range input of a function argument that is a matrix selector or a subquery.
pub(crate) fn range_input<'a>(ctx: &Ctx<'a>, e: &Expr) -> Result<RangeInput<'a>, EvalError> {
    match super::unparen(e) {
        Expr::MatrixSelector(ms) => range_input_for_selector(ctx, ms),
        Expr::Subquery(sq) => range_input_for_subquery(ctx, sq),
        other => Err(super::rt(format!("expected a range vector, got `{other}`"))),
    }
}
