//! `histogram_quantile` over classic (`le`-labelled) buckets, as Prometheus's
//! `BucketQuantile` in promql/quantile.go.

use std::collections::HashMap;

use super::{Ctx, EvalError, Row};
use crate::store::{Labels, METRIC_NAME};

/// Relative difference below which neighbouring bucket counts are treated as
/// equal (floating-point noise), as Prometheus's `smallDeltaTolerance`.
const SMALL_DELTA_TOLERANCE: f64 = 1e-12;

/// Prometheus's `almost.Equal`: relative comparison with a tolerance, NaN equal to NaN.
pub fn almost_equal(a: f64, b: f64, epsilon: f64) -> bool {
    const MIN_NORMAL: f64 = f64::MIN_POSITIVE;
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < MIN_NORMAL {
        return diff < epsilon * MIN_NORMAL;
    }
    diff / abs_sum.min(f64::MAX) < epsilon
}

/// The `q`-quantile of classic buckets given as `(upper bound, cumulative count)`.
///
/// Mirrors Prometheus: buckets are sorted by bound and equal bounds merged
/// (so `le="1"` and `le="1.0"` are the same bucket); the highest bound must be
/// `+Inf` (else NaN); tiny relative differences are ignored and decreasing
/// counts are raised to keep the counts monotonic; fewer than two buckets or
/// zero observations give NaN; `q < 0` gives `-Inf`, `q > 1` gives `+Inf`,
/// NaN gives NaN. A quantile in the `+Inf` bucket returns the second-highest
/// bound; the lowest bucket interpolates from 0 unless its bound is ≤ 0.
pub fn bucket_quantile(q: f64, buckets: &mut Vec<(f64, f64)>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    let Some(merged) = sorted_merged(buckets) else {
        return f64::NAN;
    };
    *buckets = merged;
    // Monotonicity fix-up.
    let mut prev = buckets[0].1;
    for b in buckets.iter_mut().skip(1) {
        let curr = b.1;
        if curr == prev {
            continue;
        }
        if almost_equal(prev, curr, SMALL_DELTA_TOLERANCE) || curr < prev {
            b.1 = prev;
            continue;
        }
        prev = curr;
    }
    if buckets.len() < 2 {
        return f64::NAN;
    }
    let observations = buckets[buckets.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let b = buckets[..buckets.len() - 1].partition_point(|x| x.1 < rank);
    if b == buckets.len() - 1 {
        return buckets[buckets.len() - 2].0;
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return buckets[0].0;
    }
    let bucket_end = buckets[b].0;
    let mut count = buckets[b].1;
    let mut bucket_start = 0.0;
    if b > 0 {
        bucket_start = buckets[b - 1].0;
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    bucket_start + (bucket_end - bucket_start) * (rank / count)
}

/// Parses an `le` value the way Go's `strconv.ParseFloat` does for the forms
/// exporters write (`1`, `1.0`, `1e-3`, `+Inf`).
pub fn parse_le(s: &str) -> Option<f64> {
    let t = s.trim();
    match t {
        "+Inf" | "Inf" | "+inf" | "inf" => return Some(f64::INFINITY),
        "-Inf" | "-inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    t.parse::<f64>().ok()
}

/// Sorts the buckets by upper bound and adds up those with equal bounds;
/// `None` when there are none or no `+Inf` bucket (the result is then NaN).
fn sorted_merged(buckets: &mut [(f64, f64)]) -> Option<Vec<(f64, f64)>> {
    if buckets.is_empty() {
        return None;
    }
    buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    if buckets[buckets.len() - 1].0 != f64::INFINITY {
        return None;
    }
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for &(ub, c) in buckets.iter() {
        match merged.last_mut() {
            Some(last) if last.0 == ub => last.1 += c,
            _ => merged.push((ub, c)),
        }
    }
    Some(merged)
}

/// The fraction of observations between `lower` and `upper` in classic buckets
/// `(upper bound, cumulative count)`, as Prometheus's `BucketFraction`.
///
/// Linear interpolation inside a bucket; the lowest bucket starts at 0 when its
/// bound is positive (else at -Inf, where no interpolation is possible). No
/// `+Inf` bucket, zero observations or a NaN bound give NaN; `lower >= upper`
/// gives 0.
pub fn bucket_fraction(lower: f64, upper: f64, buckets: &mut [(f64, f64)]) -> f64 {
    let Some(merged) = sorted_merged(buckets) else {
        return f64::NAN;
    };
    let count = merged[merged.len() - 1].1;
    if count == 0.0 || lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }
    let (mut rank, mut lower_rank, mut upper_rank) = (0.0, 0.0, 0.0);
    let (mut lower_set, mut upper_set) = (false, false);
    let mut lower_bound = if merged[0].0 <= 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    for (i, &(upper_bound, cum)) in merged.iter().enumerate() {
        if i > 0 {
            lower_bound = merged[i - 1].0;
        }
        let interpolate = |v: f64| {
            if lower_bound == f64::NEG_INFINITY {
                cum
            } else {
                rank + (cum - rank) * (v - lower_bound) / (upper_bound - lower_bound)
            }
        };
        if !lower_set && lower_bound >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && lower_bound >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && lower_bound < lower && upper_bound > lower {
            lower_rank = interpolate(lower);
            lower_set = true;
        }
        if !upper_set && lower_bound < upper && upper_bound > upper {
            upper_rank = interpolate(upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank = cum;
    }
    if !lower_set || lower_rank > count {
        lower_rank = count;
    }
    if !upper_set || upper_rank > count {
        upper_rank = count;
    }
    (upper_rank - lower_rank) / count
}

/// `histogram_quantile(q, buckets)` over every step.
pub(crate) fn eval_histogram_quantile(ctx: &Ctx, q: &[f64], rows: Vec<Row>) -> Result<Vec<Row>, EvalError> {
    eval_over_buckets(ctx, rows, |i, b| bucket_quantile(q[i], b))
}

/// `histogram_fraction(lower, upper, buckets)` over every step.
pub(crate) fn eval_histogram_fraction(
    ctx: &Ctx,
    lower: &[f64],
    upper: &[f64],
    rows: Vec<Row>,
) -> Result<Vec<Row>, EvalError> {
    eval_over_buckets(ctx, rows, |i, b| bucket_fraction(lower[i], upper[i], b))
}

/// Groups bucket series into histograms once, then applies `f(step, buckets)`.
fn eval_over_buckets(
    ctx: &Ctx,
    rows: Vec<Row>,
    f: impl Fn(usize, &mut Vec<(f64, f64)>) -> f64,
) -> Result<Vec<Row>, EvalError> {
    // Group the bucket series once: signature = labels without `le` and name.
    let mut groups: HashMap<Labels, Vec<(f64, usize)>> = HashMap::new();
    let mut order: Vec<Labels> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(le) = r.labels.get("le").and_then(parse_le) else {
            continue;
        };
        // Buckets group by every label but `le` (the metric name included);
        // the output drops the name too.
        let key = r.labels.drop_names(&["le"]);
        let e = groups.entry(key.clone()).or_default();
        if e.is_empty() {
            order.push(key);
        }
        e.push((le, i));
    }
    let mut out = Vec::with_capacity(order.len());
    let mut buf: Vec<(f64, f64)> = Vec::new();
    for key in order {
        let members = &groups[&key];
        let mut vals = vec![None; ctx.n];
        for (i, slot) in vals.iter_mut().enumerate() {
            buf.clear();
            for &(le, ri) in members {
                if let Some(v) = rows[ri].vals[i] {
                    buf.push((le, v));
                }
            }
            if !buf.is_empty() {
                *slot = Some(f(i, &mut buf));
            }
        }
        out.push(Row {
            labels: key.drop_names(&[METRIC_NAME]),
            vals,
        });
    }
    super::merge_same_labels(out)
}
