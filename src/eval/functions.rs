//! PromQL functions, as promql/functions.go: range-vector functions (`rate`,
//! `increase`, `*_over_time`, …) with Prometheus 3's extrapolation, instant
//! functions (`abs`, `clamp`, `round`, …), label functions and `absent`.

use std::collections::HashSet;

use chrono::{DateTime, Datelike, Timelike};
use promql_parser::label::MatchOp;
use promql_parser::parser::{Call, Expr};

use super::histogram::{eval_histogram_fraction, eval_histogram_quantile};
use super::selector::{for_each_instant_row, instant_points, range_input, RangeInput};
use super::{
    eval_scalar, eval_vector, kahan_inc, merge_same_labels, quantile, rt, same_labelset, unparen, Ctx,
    EvalError, Row, Val,
};
use crate::store::{Labels, Millis, Sample, METRIC_NAME};

/// Functions taking a range vector, with the index of that argument.
fn matrix_arg(name: &str) -> Option<usize> {
    Some(match name {
        "rate" | "increase" | "delta" | "irate" | "idelta" | "resets" | "changes" | "deriv"
        | "predict_linear" | "avg_over_time" | "min_over_time" | "max_over_time" | "sum_over_time"
        | "count_over_time" | "last_over_time" | "first_over_time" | "stddev_over_time"
        | "stdvar_over_time" | "present_over_time" | "absent_over_time" => 0,
        "quantile_over_time" => 1,
        _ => return None,
    })
}

pub(crate) fn eval_call(ctx: &Ctx, c: &Call) -> Result<Val, EvalError> {
    let name = c.func.name;
    let args: Vec<&Expr> = c.args.args.iter().map(|a| unparen(a)).collect();
    if let Some(mi) = matrix_arg(name) {
        return eval_range_function(ctx, name, &args, mi);
    }
    match name {
        "time" => Ok(Val::Scalar(
            (0..ctx.n).map(|i| ctx.t(i) as f64 / 1000.0).collect(),
        )),
        "pi" => Ok(Val::Scalar(vec![std::f64::consts::PI; ctx.n])),
        "vector" => {
            let s = eval_scalar(ctx, arg(&args, 0, name)?)?;
            Ok(Val::Vector(vec![Row {
                labels: Labels::new(),
                vals: s.into_iter().map(Some).collect(),
            }]))
        }
        "scalar" => {
            let rows = eval_vector(ctx, arg(&args, 0, name)?)?;
            Ok(Val::Scalar(
                (0..ctx.n)
                    .map(|i| {
                        let mut it = rows.iter().filter_map(|r| r.vals[i]);
                        match (it.next(), it.next()) {
                            (Some(v), None) => v,
                            _ => f64::NAN,
                        }
                    })
                    .collect(),
            ))
        }
        "abs" | "ceil" | "floor" | "exp" | "sqrt" | "ln" | "log2" | "log10" | "sgn" | "sin" | "cos"
        | "tan" | "asin" | "acos" | "atan" | "sinh" | "cosh" | "tanh" | "asinh" | "acosh" | "atanh"
        | "rad" | "deg" => {
            let f = simple_fn(name)?;
            let rows = eval_vector(ctx, arg(&args, 0, name)?)?;
            map_rows(rows, |_, v| Some(f(v)))
        }
        "clamp" | "clamp_min" | "clamp_max" => {
            let rows = eval_vector(ctx, arg(&args, 0, name)?)?;
            let (lo, hi) = match name {
                "clamp" => (
                    eval_scalar(ctx, arg(&args, 1, name)?)?,
                    eval_scalar(ctx, arg(&args, 2, name)?)?,
                ),
                "clamp_min" => (
                    eval_scalar(ctx, arg(&args, 1, name)?)?,
                    vec![f64::INFINITY; ctx.n],
                ),
                _ => (
                    vec![f64::NEG_INFINITY; ctx.n],
                    eval_scalar(ctx, arg(&args, 1, name)?)?,
                ),
            };
            map_rows(rows, |i, v| (hi[i] >= lo[i]).then(|| lo[i].max(hi[i].min(v))))
        }
        "round" => {
            let rows = eval_vector(ctx, arg(&args, 0, name)?)?;
            let to = match args.get(1) {
                Some(a) => eval_scalar(ctx, a)?,
                None => vec![1.0; ctx.n],
            };
            map_rows(rows, |i, v| {
                let inv = 1.0 / to[i];
                Some((v * inv + 0.5).floor() / inv)
            })
        }
        "timestamp" => {
            let a = arg(&args, 0, name)?;
            if let Expr::VectorSelector(vs) = a {
                let rows = instant_points(ctx, vs)
                    .into_iter()
                    .filter(|(_, p)| p.iter().any(|p| p.is_some()))
                    .map(|(s, pts)| Row {
                        labels: s.labels.without_name(),
                        vals: pts.into_iter().map(|p| p.map(|p| p.t as f64 / 1000.0)).collect(),
                    })
                    .collect();
                return Ok(Val::Vector(merge_same_labels(rows)?));
            }
            let rows = eval_vector(ctx, a)?;
            let ts: Vec<f64> = (0..ctx.n).map(|i| ctx.t(i) as f64 / 1000.0).collect();
            map_rows(rows, |i, _| Some(ts[i]))
        }
        "sort" | "sort_desc" => {
            let mut rows = eval_vector(ctx, arg(&args, 0, name)?)?;
            if ctx.n == 1 {
                let desc = name == "sort_desc";
                // NaN sorts last in both directions.
                rows.sort_by(|a, b| {
                    let (x, y) = (a.vals[0].unwrap_or(f64::NAN), b.vals[0].unwrap_or(f64::NAN));
                    match (x.is_nan(), y.is_nan()) {
                        (true, true) => std::cmp::Ordering::Equal,
                        (true, false) => std::cmp::Ordering::Greater,
                        (false, true) => std::cmp::Ordering::Less,
                        _ if desc => y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal),
                        _ => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
                    }
                });
            }
            Ok(Val::Vector(rows))
        }
        "label_replace" => label_replace(ctx, &args),
        "label_join" => label_join(ctx, &args),
        "absent" => {
            let a = arg(&args, 0, name)?;
            let rows = eval_vector(ctx, a)?;
            let vals: Vec<Option<f64>> = (0..ctx.n)
                .map(|i| (!rows.iter().any(|r| r.vals[i].is_some())).then_some(1.0))
                .collect();
            Ok(Val::Vector(if vals.iter().any(|v| v.is_some()) {
                vec![Row {
                    labels: absent_labels(a),
                    vals,
                }]
            } else {
                Vec::new()
            }))
        }
        "histogram_fraction" => {
            let lower = eval_scalar(ctx, arg(&args, 0, name)?)?;
            let upper = eval_scalar(ctx, arg(&args, 1, name)?)?;
            let rows = eval_vector(ctx, arg(&args, 2, name)?)?;
            Ok(Val::Vector(eval_histogram_fraction(ctx, &lower, &upper, rows)?))
        }
        "histogram_quantile" => {
            let q = eval_scalar(ctx, arg(&args, 0, name)?)?;
            let rows = eval_vector(ctx, arg(&args, 1, name)?)?;
            Ok(Val::Vector(eval_histogram_quantile(ctx, &q, rows)?))
        }
        "minute" | "hour" | "day_of_week" | "day_of_month" | "day_of_year" | "days_in_month" | "month"
        | "year" => {
            let f = date_fn(name)?;
            match args.first() {
                None => Ok(Val::Vector(vec![Row {
                    labels: Labels::new(),
                    vals: (0..ctx.n).map(|i| Some(f(ctx.t(i).div_euclid(1000)))).collect(),
                }])),
                Some(a) => {
                    let rows = eval_vector(ctx, a)?;
                    map_rows(rows, |_, v| Some(f(v as i64)))
                }
            }
        }
        other => Err(EvalError::Unsupported(format!("function `{other}`"))),
    }
}

fn arg<'e>(args: &[&'e Expr], i: usize, name: &str) -> Result<&'e Expr, EvalError> {
    args.get(i)
        .copied()
        .ok_or_else(|| rt(format!("function `{name}` is missing argument {}", i + 1)))
}

/// Applies `f(step, value)` to every value, dropping the metric name.
fn map_rows(rows: Vec<Row>, f: impl Fn(usize, f64) -> Option<f64>) -> Result<Val, EvalError> {
    let out: Vec<Row> = rows
        .into_iter()
        .filter_map(|r| {
            let vals: Vec<Option<f64>> = r
                .vals
                .iter()
                .enumerate()
                .map(|(i, v)| v.and_then(|v| f(i, v)))
                .collect();
            vals.iter().any(|v| v.is_some()).then(|| Row {
                labels: r.labels.without_name(),
                vals,
            })
        })
        .collect();
    Ok(Val::Vector(merge_same_labels(out)?))
}

fn simple_fn(name: &str) -> Result<fn(f64) -> f64, EvalError> {
    Ok(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "sqrt" => f64::sqrt,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "rad" => |v| v * std::f64::consts::PI / 180.0,
        "deg" => |v| v * 180.0 / std::f64::consts::PI,
        "sgn" => |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        },
        other => return Err(EvalError::Unsupported(format!("function `{other}`"))),
    })
}

fn date_fn(name: &str) -> Result<fn(i64) -> f64, EvalError> {
    fn dt(secs: i64) -> Option<DateTime<chrono::Utc>> {
        DateTime::from_timestamp(secs, 0)
    }
    Ok(match name {
        "minute" => |s| dt(s).map_or(f64::NAN, |d| d.minute() as f64),
        "hour" => |s| dt(s).map_or(f64::NAN, |d| d.hour() as f64),
        "day_of_week" => |s| dt(s).map_or(f64::NAN, |d| d.weekday().num_days_from_sunday() as f64),
        "day_of_month" => |s| dt(s).map_or(f64::NAN, |d| d.day() as f64),
        "day_of_year" => |s| dt(s).map_or(f64::NAN, |d| d.ordinal() as f64),
        "month" => |s| dt(s).map_or(f64::NAN, |d| d.month() as f64),
        "year" => |s| dt(s).map_or(f64::NAN, |d| d.year() as f64),
        "days_in_month" => |s| {
            dt(s).map_or(f64::NAN, |d| {
                let (y, m) = (d.year(), d.month());
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                match (
                    chrono::NaiveDate::from_ymd_opt(y, m, 1),
                    chrono::NaiveDate::from_ymd_opt(ny, nm, 1),
                ) {
                    (Some(a), Some(b)) => (b - a).num_days() as f64,
                    _ => f64::NAN,
                }
            })
        },
        other => return Err(EvalError::Unsupported(format!("function `{other}`"))),
    })
}

/// The labels `absent(x{…})` reports: the selector's equality matchers, except
/// the metric name and labels matched more than once.
fn absent_labels(e: &Expr) -> Labels {
    let vs = match e {
        Expr::VectorSelector(vs) => vs,
        Expr::MatrixSelector(ms) => &ms.vs,
        _ => return Labels::new(),
    };
    let mut l = Labels::new();
    let mut has: Vec<&str> = Vec::new();
    for m in vs
        .matchers
        .matchers
        .iter()
        .chain(vs.matchers.or_matchers.iter().flatten())
    {
        if m.name == METRIC_NAME {
            continue;
        }
        if matches!(m.op, MatchOp::Equal) && !has.contains(&m.name.as_str()) {
            l.set(&m.name, &m.value);
            has.push(&m.name);
        } else {
            l.remove(&m.name);
        }
    }
    l
}

fn string_arg(e: &Expr, what: &str) -> Result<String, EvalError> {
    match e {
        Expr::StringLiteral(s) => Ok(s.val.clone()),
        other => Err(rt(format!("{what} must be a string literal, got `{other}`"))),
    }
}

fn valid_label_name(s: &str) -> bool {
    !s.is_empty()
}

fn label_replace(ctx: &Ctx, args: &[&Expr]) -> Result<Val, EvalError> {
    let name = "label_replace";
    let dst = string_arg(arg(args, 1, name)?, "label_replace destination")?;
    let repl = string_arg(arg(args, 2, name)?, "label_replace replacement")?;
    let src = string_arg(arg(args, 3, name)?, "label_replace source")?;
    let re_str = string_arg(arg(args, 4, name)?, "label_replace regex")?;
    let re = regex::Regex::new(&format!("^(?s:{re_str})$"))
        .map_err(|_| rt(format!("invalid regular expression in label_replace(): {re_str}")))?;
    if !valid_label_name(&dst) {
        return Err(rt(format!(
            "invalid destination label name in label_replace(): {dst}"
        )));
    }
    let rows = eval_vector(ctx, arg(args, 0, name)?)?;
    let mut out = Vec::with_capacity(rows.len());
    for mut r in rows {
        let sv = r.labels.get(&src).unwrap_or("").to_string();
        if let Some(caps) = re.captures(&sv) {
            let mut res = String::new();
            caps.expand(&repl, &mut res);
            r.labels.set(&dst, &res);
        }
        out.push(r);
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

fn label_join(ctx: &Ctx, args: &[&Expr]) -> Result<Val, EvalError> {
    let name = "label_join";
    let dst = string_arg(arg(args, 1, name)?, "label_join destination")?;
    let sep = string_arg(arg(args, 2, name)?, "label_join separator")?;
    let mut srcs = Vec::new();
    for a in args.iter().skip(3) {
        srcs.push(string_arg(a, "label_join source")?);
    }
    if !valid_label_name(&dst) {
        return Err(rt(format!(
            "invalid destination label name in label_join(): {dst}"
        )));
    }
    let rows = eval_vector(ctx, arg(args, 0, name)?)?;
    let mut out = Vec::with_capacity(rows.len());
    for mut r in rows {
        let joined = srcs
            .iter()
            .map(|s| r.labels.get(s).unwrap_or(""))
            .collect::<Vec<_>>()
            .join(&sep);
        r.labels.set(&dst, &joined);
        out.push(r);
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

/// What a range function needs besides the window's points.
pub(crate) struct WindowCtx {
    range_start: Millis,
    range_end: Millis,
    range: Millis,
    t: Millis,
    param: f64,
}

fn eval_range_function(ctx: &Ctx, name: &str, args: &[&Expr], mi: usize) -> Result<Val, EvalError> {
    if name == "absent_over_time" {
        let input: RangeInput = range_input(ctx, arg(args, mi, name)?)?;
        let mut present = vec![false; ctx.n];
        let mut buf = Vec::new();
        for s in &input.series {
            let samples = s.samples(&mut buf);
            for (i, p) in present.iter_mut().enumerate() {
                if !*p {
                    let (lo, hi) = input.window(ctx, i, samples);
                    *p = hi > lo;
                }
            }
        }
        let vals: Vec<Option<f64>> = present.iter().map(|p| (!p).then_some(1.0)).collect();
        if vals.iter().all(|v| v.is_none()) {
            return Ok(Val::Vector(Vec::new()));
        }
        return Ok(Val::Vector(vec![Row {
            labels: absent_labels(arg(args, mi, name)?),
            vals,
        }]));
    }
    let mut out = Vec::new();
    for_each_range_row(ctx, name, args, mi, &mut |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(Val::Vector(out))
}

/// Calls `f` with each output row of a range-vector function (`rate(x[5m])`),
/// one input series at a time. Two output rows with equal labels are an error.
fn for_each_range_row(
    ctx: &Ctx,
    name: &str,
    args: &[&Expr],
    mi: usize,
    f: &mut dyn FnMut(Row) -> Result<(), EvalError>,
) -> Result<(), EvalError> {
    let input: RangeInput = range_input(ctx, arg(args, mi, name)?)?;
    let param: Vec<f64> = match name {
        "predict_linear" => eval_scalar(ctx, arg(args, 1, name)?)?,
        "quantile_over_time" => eval_scalar(ctx, arg(args, 0, name)?)?,
        _ => vec![f64::NAN; ctx.n],
    };
    let keep_name = name == "last_over_time";
    let rf = RangeFn::from_name(name)?;
    let mut seen: HashSet<Labels> = HashSet::new();
    let mut buf = Vec::new();
    for s in &input.series {
        let mut vals = vec![None; ctx.n];
        let mut any = false;
        let samples = s.samples(&mut buf);
        // Window ends never decrease from step to step, so both bounds slide forward.
        let (mut lo, mut hi) = input.window(ctx, 0, samples);
        for (i, slot) in vals.iter_mut().enumerate() {
            if i > 0 {
                let end = input.end(ctx, i);
                let start = end.saturating_sub(input.range);
                while lo < samples.len() && samples[lo].t <= start {
                    lo += 1;
                }
                while hi < samples.len() && samples[hi].t <= end {
                    hi += 1;
                }
                hi = hi.max(lo);
            }
            if lo >= hi {
                continue;
            }
            let end = input.end(ctx, i);
            let w = WindowCtx {
                range_start: end.saturating_sub(input.range),
                range_end: end,
                range: input.range,
                t: ctx.t(i),
                param: param[i],
            };
            *slot = range_fn(rf, &samples[lo..hi], &w);
            any |= slot.is_some();
        }
        if !any {
            continue;
        }
        let labels = if keep_name {
            s.labels.clone().into_owned()
        } else {
            s.labels.without_name()
        };
        if !seen.insert(labels.clone()) {
            return Err(same_labelset());
        }
        f(Row { labels, vals })?;
    }
    Ok(())
}

/// Calls `f` with each row of an instant-vector expression. Selectors and
/// range-vector functions stream one series at a time; anything else is
/// evaluated first.
pub(crate) fn for_each_row(
    ctx: &Ctx,
    expr: &Expr,
    f: &mut dyn FnMut(Row) -> Result<(), EvalError>,
) -> Result<(), EvalError> {
    match unparen(expr) {
        Expr::VectorSelector(vs) => for_each_instant_row(ctx, vs, f),
        Expr::Call(c) if c.func.name != "absent_over_time" && matrix_arg(c.func.name).is_some() => {
            let args: Vec<&Expr> = c.args.args.iter().map(|a| unparen(a)).collect();
            let mi = matrix_arg(c.func.name).unwrap_or(0);
            for_each_range_row(ctx, c.func.name, &args, mi, f)
        }
        other => {
            for r in eval_vector(ctx, other)? {
                f(r)?;
            }
            Ok(())
        }
    }
}

/// A range-vector function, resolved once per query.
#[derive(Clone, Copy)]
enum RangeFn {
    Rate,
    Increase,
    Delta,
    Irate,
    Idelta,
    Resets,
    Changes,
    Deriv,
    PredictLinear,
    Avg,
    Sum,
    Count,
    Min,
    Max,
    Last,
    First,
    Present,
    Stddev,
    Stdvar,
    Quantile,
}

impl RangeFn {
    fn from_name(name: &str) -> Result<Self, EvalError> {
        use RangeFn::*;
        Ok(match name {
            "rate" => Rate,
            "increase" => Increase,
            "delta" => Delta,
            "irate" => Irate,
            "idelta" => Idelta,
            "resets" => Resets,
            "changes" => Changes,
            "deriv" => Deriv,
            "predict_linear" => PredictLinear,
            "avg_over_time" => Avg,
            "sum_over_time" => Sum,
            "count_over_time" => Count,
            "min_over_time" => Min,
            "max_over_time" => Max,
            "last_over_time" => Last,
            "first_over_time" => First,
            "present_over_time" => Present,
            "stddev_over_time" => Stddev,
            "stdvar_over_time" => Stdvar,
            "quantile_over_time" => Quantile,
            other => return Err(EvalError::Unsupported(format!("function `{other}`"))),
        })
    }
}

/// One range function over a non-empty window.
fn range_fn(f: RangeFn, w: &[Sample], c: &WindowCtx) -> Option<f64> {
    use RangeFn::*;
    match f {
        Rate => extrapolated_rate(w, c, true, true),
        Increase => extrapolated_rate(w, c, true, false),
        Delta => extrapolated_rate(w, c, false, false),
        Irate => instant_value(w, true),
        Idelta => instant_value(w, false),
        Resets => Some(w.windows(2).filter(|p| p[1].v < p[0].v).count() as f64),
        Changes => Some(
            w.windows(2)
                .filter(|p| p[1].v != p[0].v && !(p[1].v.is_nan() && p[0].v.is_nan()))
                .count() as f64,
        ),
        Deriv => (w.len() >= 2).then(|| linear_regression(w, w[0].t).0),
        PredictLinear => (w.len() >= 2).then(|| {
            let (slope, intercept) = linear_regression(w, c.t);
            slope * c.param + intercept
        }),
        Avg => Some(avg_over_time(w)),
        Sum => {
            let (mut s, mut comp) = (0.0, 0.0);
            for p in w {
                (s, comp) = kahan_inc(p.v, s, comp);
            }
            Some(if s.is_infinite() { s } else { s + comp })
        }
        Count => Some(w.len() as f64),
        Min => Some(
            w[1..]
                .iter()
                .fold(w[0].v, |m, p| if p.v < m || m.is_nan() { p.v } else { m }),
        ),
        Max => Some(
            w[1..]
                .iter()
                .fold(w[0].v, |m, p| if p.v > m || m.is_nan() { p.v } else { m }),
        ),
        Last => w.last().map(|p| p.v),
        First => w.first().map(|p| p.v),
        Present => Some(1.0),
        Stddev => Some(variance_over_time(w).sqrt()),
        Stdvar => Some(variance_over_time(w)),
        Quantile => {
            let mut vals: Vec<f64> = w.iter().map(|p| p.v).collect();
            Some(quantile(c.param, &mut vals))
        }
    }
}

/// `rate`, `increase` and `delta` as Prometheus 3's `extrapolatedRate`.
///
/// Needs two points. Counter resets add the pre-reset value. The result is
/// extrapolated to each window boundary when the gap to it is below 1.1× the
/// average sample interval, else by half an interval; a counter is never
/// extrapolated below zero at the start.
pub(crate) fn extrapolated_rate(w: &[Sample], c: &WindowCtx, is_counter: bool, is_rate: bool) -> Option<f64> {
    if w.len() < 2 {
        return None;
    }
    let first = w[0];
    let last = w[w.len() - 1];
    let mut result = last.v - first.v;
    if is_counter {
        for p in w.windows(2) {
            if p[1].v < p[0].v {
                result += p[0].v;
            }
        }
    }
    let mut duration_to_start = (first.t - c.range_start) as f64 / 1000.0;
    let mut duration_to_end = (c.range_end - last.t) as f64 / 1000.0;
    let sampled_interval = (last.t - first.t) as f64 / 1000.0;
    let avg = sampled_interval / (w.len() - 1) as f64;
    let threshold = avg * 1.1;
    if duration_to_start >= threshold {
        duration_to_start = avg / 2.0;
    }
    if is_counter && result > 0.0 && first.v >= 0.0 {
        let duration_to_zero = sampled_interval * (first.v / result);
        if duration_to_zero < duration_to_start {
            duration_to_start = duration_to_zero;
        }
    }
    if duration_to_end >= threshold {
        duration_to_end = avg / 2.0;
    }
    let mut factor = (sampled_interval + duration_to_start + duration_to_end) / sampled_interval;
    if is_rate {
        factor /= c.range as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `irate` / `idelta`: the last two points.
fn instant_value(w: &[Sample], is_rate: bool) -> Option<f64> {
    if w.len() < 2 {
        return None;
    }
    let (a, b) = (w[w.len() - 2], w[w.len() - 1]);
    let dt = b.t - a.t;
    if dt == 0 {
        return None;
    }
    let mut r = b.v;
    if !is_rate || b.v >= a.v || b.v.is_nan() || a.v.is_nan() {
        r = b.v - a.v;
    }
    if is_rate {
        r /= dt as f64 / 1000.0;
    }
    Some(r)
}

fn avg_over_time(w: &[Sample]) -> f64 {
    let (mut sum, mut c, mut count) = (w[0].v, 0.0, 1.0f64);
    let mut mean = 0.0;
    let mut incremental = false;
    for p in &w[1..] {
        count += 1.0;
        if !incremental {
            let (ns, nc) = kahan_inc(p.v, sum, c);
            if !ns.is_infinite() {
                sum = ns;
                c = nc;
                continue;
            }
            incremental = true;
            mean = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        (mean, c) = kahan_inc(p.v / count, q * mean, q * c);
    }
    if incremental {
        mean + c
    } else {
        sum / count + c / count
    }
}

fn variance_over_time(w: &[Sample]) -> f64 {
    let (mut count, mut mean, mut c_mean, mut aux, mut c_aux) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    for p in w {
        count += 1.0;
        let delta = p.v - (mean + c_mean);
        (mean, c_mean) = kahan_inc(delta / count, mean, c_mean);
        (aux, c_aux) = kahan_inc(delta * (p.v - (mean + c_mean)), aux, c_aux);
    }
    (aux + c_aux) / count
}

/// Least-squares slope and intercept at `intercept_time`, as Prometheus's
/// `linearRegression` (Kahan-summed; a constant series has slope 0).
fn linear_regression(w: &[Sample], intercept_time: Millis) -> (f64, f64) {
    let (mut n, mut sx, mut cx, mut sy, mut cy, mut sxy, mut cxy, mut sx2, mut cx2) =
        (0.0f64, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let init_y = w[0].v;
    let mut const_y = true;
    for (i, p) in w.iter().enumerate() {
        if const_y && i > 0 && p.v != init_y {
            const_y = false;
        }
        n += 1.0;
        let x = (p.t - intercept_time) as f64 / 1e3;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(p.v, sy, cy);
        (sxy, cxy) = kahan_inc(x * p.v, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    if const_y {
        if init_y.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init_y);
    }
    sx += cx;
    sy += cy;
    sxy += cxy;
    sx2 += cx2;
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    let intercept = sy / n - slope * sx / n;
    (slope, intercept)
}

/// Reused by unit tests: a window context for a plain `[range]` at `t`.
#[cfg(test)]
pub(crate) fn window_ctx(t: Millis, range: Millis) -> WindowCtx {
    WindowCtx {
        range_start: t - range,
        range_end: t,
        range,
        t,
        param: f64::NAN,
    }
}

#[cfg(test)]
pub(crate) fn eval_range_fn_for_test(name: &str, w: &[Sample], c: &WindowCtx) -> Option<f64> {
    RangeFn::from_name(name).ok().and_then(|f| range_fn(f, w, c))
}
