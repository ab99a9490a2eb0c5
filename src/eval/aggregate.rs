//! Aggregation operators (`sum`, `avg`, `count`, `min`, `max`, `group`,
//! `stddev`, `stdvar`, `topk`, `bottomk`, `quantile`, `count_values`) with
//! `by`/`without`, as Prometheus's `aggregation()` in promql/engine.go.

use std::collections::HashMap;

use promql_parser::parser::{AggregateExpr, Expr, LabelModifier};

use super::functions::for_each_row;
use super::{
    eval, eval_scalar, eval_vector, format_go_float, kahan_inc, quantile, rt, Ctx, EvalError, Row, Val,
};
use crate::store::{Labels, METRIC_NAME};

/// The output labels of a group: `by` keeps the listed labels, `without` drops
/// them and the metric name, no clause gives the empty set.
pub(crate) fn group_labels(l: &Labels, m: &Option<LabelModifier>) -> Labels {
    match m {
        None => Labels::new(),
        Some(LabelModifier::Include(ls)) => l.keep_only(&ls.labels),
        Some(LabelModifier::Exclude(ls)) => {
            let mut names: Vec<&str> = ls.labels.iter().map(|s| s.as_str()).collect();
            names.push(METRIC_NAME);
            l.drop_names(&names)
        }
    }
}

/// Groups rows by their output labels; returns (group labels, member rows) in
/// order of first appearance.
fn groups(rows: &[Row], m: &Option<LabelModifier>) -> Vec<(Labels, Vec<usize>)> {
    let mut idx: HashMap<Labels, usize> = HashMap::new();
    let mut out: Vec<(Labels, Vec<usize>)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let g = group_labels(&r.labels, m);
        match idx.get(&g) {
            Some(&j) => out[j].1.push(i),
            None => {
                idx.insert(g.clone(), out.len());
                out.push((g, vec![i]));
            }
        }
    }
    out
}

pub(crate) fn eval_aggregate(ctx: &Ctx, a: &AggregateExpr) -> Result<Val, EvalError> {
    let op = a.op.to_string();
    if op == "count_values" {
        return count_values(ctx, a);
    }
    let param: Option<Vec<f64>> = match (&a.param, op.as_str()) {
        (Some(p), "topk" | "bottomk" | "quantile") => Some(eval_scalar(ctx, p)?),
        (Some(_), other) => {
            return Err(EvalError::Unsupported(format!(
                "aggregation `{other}` with a parameter"
            )))
        }
        (None, _) => None,
    };
    if let Ok(kind) = AccOp::from_name(&op) {
        return accumulate(ctx, a, kind);
    }
    let rows = eval_vector(ctx, &a.expr)?;
    let gs = groups(&rows, &a.modifier);
    match op.as_str() {
        "topk" | "bottomk" => {
            let k = param.unwrap_or_default();
            topk(ctx, rows, &gs, &k, op == "topk")
        }
        "quantile" => {
            let mut out = Vec::with_capacity(gs.len());
            let mut buf: Vec<f64> = Vec::new();
            let q = param.unwrap_or_else(|| vec![f64::NAN; ctx.n]);
            for (labels, members) in gs {
                let mut vals = vec![None; ctx.n];
                for (i, slot) in vals.iter_mut().enumerate() {
                    buf.clear();
                    buf.extend(members.iter().filter_map(|&m| rows[m].vals[i]));
                    if !buf.is_empty() {
                        *slot = Some(quantile(q[i], &mut buf));
                    }
                }
                if vals.iter().any(|v| v.is_some()) {
                    out.push(Row { labels, vals });
                }
            }
            Ok(Val::Vector(out))
        }
        other => Err(EvalError::Unsupported(format!("aggregation `{other}`"))),
    }
}

/// `sum`, `avg`, `count`, `group`, `min`, `max`, `stddev`, `stdvar`: input rows
/// stream into per-group, per-step accumulators (in input order, the order
/// Prometheus adds them), so large inputs are never held in full.
fn accumulate(ctx: &Ctx, a: &AggregateExpr, kind: AccOp) -> Result<Val, EvalError> {
    let mut index: HashMap<Labels, usize> = HashMap::new();
    let mut groups: Vec<(Labels, Vec<Acc>)> = Vec::new();
    for_each_row(ctx, &a.expr, &mut |row: Row| {
        let g = group_labels(&row.labels, &a.modifier);
        let gi = match index.get(&g) {
            Some(&gi) => gi,
            None => {
                index.insert(g.clone(), groups.len());
                groups.push((g, vec![Acc::default(); ctx.n]));
                groups.len() - 1
            }
        };
        for (acc, v) in groups[gi].1.iter_mut().zip(&row.vals) {
            if let Some(v) = *v {
                acc.add(kind, v);
            }
        }
        Ok(())
    })?;
    Ok(Val::Vector(
        groups
            .into_iter()
            .filter_map(|(labels, acc)| {
                let vals: Vec<Option<f64>> = acc.iter().map(|x| x.finish(kind)).collect();
                vals.iter().any(|v| v.is_some()).then_some(Row { labels, vals })
            })
            .collect(),
    ))
}

#[derive(Clone, Copy, PartialEq)]
enum AccOp {
    Sum,
    Avg,
    Count,
    Group,
    Min,
    Max,
    Stddev,
    Stdvar,
}

impl AccOp {
    fn from_name(op: &str) -> Result<Self, EvalError> {
        Ok(match op {
            "sum" => AccOp::Sum,
            "avg" => AccOp::Avg,
            "count" => AccOp::Count,
            "group" => AccOp::Group,
            "min" => AccOp::Min,
            "max" => AccOp::Max,
            "stddev" => AccOp::Stddev,
            "stdvar" => AccOp::Stdvar,
            other => return Err(EvalError::Unsupported(format!("aggregation `{other}`"))),
        })
    }
}

/// The running state of one group at one step, as Prometheus's
/// `groupedAggregation`.
#[derive(Clone, Copy, Default)]
struct Acc {
    count: f64,
    value: f64,
    comp: f64,
    mean: f64,
    incremental: bool,
}

impl Acc {
    fn add(&mut self, op: AccOp, v: f64) {
        if self.count == 0.0 {
            self.count = 1.0;
            self.value = v;
            self.mean = v;
            if matches!(op, AccOp::Stddev | AccOp::Stdvar) {
                // A NaN or infinite first value makes the result NaN.
                self.value = if v.is_finite() { 0.0 } else { f64::NAN };
            }
            return;
        }
        self.count += 1.0;
        match op {
            AccOp::Sum => (self.value, self.comp) = kahan_inc(v, self.value, self.comp),
            AccOp::Avg => {
                if !self.incremental {
                    let (ns, nc) = kahan_inc(v, self.value, self.comp);
                    if !ns.is_infinite() {
                        self.value = ns;
                        self.comp = nc;
                        return;
                    }
                    self.incremental = true;
                    self.mean = self.value / (self.count - 1.0);
                    self.comp /= self.count - 1.0;
                }
                let q = (self.count - 1.0) / self.count;
                (self.mean, self.comp) = kahan_inc(v / self.count, q * self.mean, q * self.comp);
            }
            AccOp::Min => {
                if self.value > v || self.value.is_nan() {
                    self.value = v;
                }
            }
            AccOp::Max => {
                if self.value < v || self.value.is_nan() {
                    self.value = v;
                }
            }
            AccOp::Stddev | AccOp::Stdvar => {
                let delta = v - self.mean;
                self.mean += delta / self.count;
                self.value += delta * (v - self.mean);
            }
            AccOp::Count | AccOp::Group => {}
        }
    }

    fn finish(&self, op: AccOp) -> Option<f64> {
        if self.count == 0.0 {
            return None;
        }
        Some(match op {
            AccOp::Sum => {
                if self.value.is_infinite() {
                    self.value
                } else {
                    self.value + self.comp
                }
            }
            AccOp::Avg => {
                if self.incremental {
                    self.mean + self.comp
                } else {
                    self.value / self.count + self.comp / self.count
                }
            }
            AccOp::Count => self.count,
            AccOp::Group => 1.0,
            AccOp::Min | AccOp::Max => self.value,
            AccOp::Stdvar => self.value / self.count,
            AccOp::Stddev => (self.value / self.count).sqrt(),
        })
    }
}

fn topk(
    ctx: &Ctx,
    rows: Vec<Row>,
    gs: &[(Labels, Vec<usize>)],
    k: &[f64],
    top: bool,
) -> Result<Val, EvalError> {
    let mut out_vals: Vec<Vec<Option<f64>>> = vec![vec![None; ctx.n]; rows.len()];
    // For instant queries, the output order Prometheus gives: groups in order,
    // each sorted by value (NaN last).
    let mut order: Vec<usize> = Vec::new();
    let mut cand: Vec<(usize, f64)> = Vec::new();
    for i in 0..ctx.n {
        let kf = k[i];
        if kf.is_nan() {
            return Err(rt("Parameter value is NaN"));
        }
        let kk = if kf >= i64::MAX as f64 {
            i64::MAX
        } else {
            kf as i64
        };
        if kk < 1 {
            continue;
        }
        for (_, members) in gs {
            cand.clear();
            cand.extend(members.iter().filter_map(|&m| rows[m].vals[i].map(|v| (m, v))));
            // Stable sort: on ties the earlier series wins, as Prometheus's heap.
            cand.sort_by(|a, b| {
                let (x, y) = (a.1, b.1);
                match (x.is_nan(), y.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ if top => y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal),
                    _ => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
                }
            });
            for &(m, v) in cand.iter().take(kk.min(cand.len() as i64) as usize) {
                out_vals[m][i] = Some(v);
                if ctx.n == 1 {
                    order.push(m);
                }
            }
        }
    }
    let mut rows: Vec<Option<Row>> = rows
        .into_iter()
        .zip(out_vals)
        .map(|(r, vals)| {
            Some(Row {
                labels: r.labels,
                vals,
            })
        })
        .collect();
    if ctx.n == 1 {
        return Ok(Val::Vector(
            order.into_iter().filter_map(|m| rows[m].take()).collect(),
        ));
    }
    Ok(Val::Vector(
        rows.into_iter()
            .flatten()
            .filter(|r| r.vals.iter().any(|v| v.is_some()))
            .collect(),
    ))
}

fn count_values(ctx: &Ctx, a: &AggregateExpr) -> Result<Val, EvalError> {
    let label = match a.param.as_deref().map(super::unparen) {
        Some(Expr::StringLiteral(s)) => s.val.clone(),
        Some(other) => match eval(ctx, other)? {
            Val::Str(s) => s,
            _ => return Err(rt("count_values: the label parameter must be a string")),
        },
        None => return Err(rt("count_values: missing label parameter")),
    };
    if label.is_empty() {
        return Err(rt(format!("invalid label name {label:?}")));
    }
    let rows = eval_vector(ctx, &a.expr)?;
    let gs = groups(&rows, &a.modifier);
    let mut idx: HashMap<Labels, usize> = HashMap::new();
    let mut out: Vec<Row> = Vec::new();
    for (glabels, members) in &gs {
        for i in 0..ctx.n {
            for &m in members {
                let Some(v) = rows[m].vals[i] else { continue };
                let mut l = glabels.clone();
                l.set(&label, &format_go_float(v));
                let j = *idx.entry(l.clone()).or_insert_with(|| {
                    out.push(Row {
                        labels: l,
                        vals: vec![None; ctx.n],
                    });
                    out.len() - 1
                });
                let slot = &mut out[j].vals[i];
                *slot = Some(slot.unwrap_or(0.0) + 1.0);
            }
        }
    }
    Ok(Val::Vector(out))
}
