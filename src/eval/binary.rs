//! Binary operators: arithmetic, comparisons (filter and `bool`), set operators
//! and vector matching (`on`/`ignoring`, `group_left`/`group_right`), as
//! Prometheus's `VectorBinop`, `VectorscalarBinop`, `VectorAnd/Or/Unless`.

use std::collections::HashMap;

use promql_parser::parser::{BinaryExpr, LabelModifier, VectorMatchCardinality};

use super::{eval, go_labels, merge_same_labels, rt, Ctx, EvalError, Row, Val};
use crate::store::{Labels, METRIC_NAME};

fn is_comparison(op: &str) -> bool {
    matches!(op, "==" | "!=" | ">" | "<" | ">=" | "<=")
}

/// Arithmetic operators drop the metric name; comparisons keep it.
fn drops_name(op: &str) -> bool {
    matches!(op, "+" | "-" | "*" | "/" | "%" | "^" | "atan2")
}

/// One element operation: the value and whether a comparison holds.
fn elem(op: &str, l: f64, r: f64) -> Result<(f64, bool), EvalError> {
    Ok(match op {
        "+" => (l + r, true),
        "-" => (l - r, true),
        "*" => (l * r, true),
        "/" => (l / r, true),
        "%" => (l % r, true),
        "^" => (l.powf(r), true),
        "atan2" => (l.atan2(r), true),
        "==" => (l, l == r),
        "!=" => (l, l != r),
        ">" => (l, l > r),
        "<" => (l, l < r),
        ">=" => (l, l >= r),
        "<=" => (l, l <= r),
        other => return Err(EvalError::Unsupported(format!("binary operator `{other}`"))),
    })
}

pub(crate) fn eval_binary(ctx: &Ctx, b: &BinaryExpr) -> Result<Val, EvalError> {
    let op = b.op.to_string();
    let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
    let lhs = eval(ctx, &b.lhs)?;
    let rhs = eval(ctx, &b.rhs)?;
    match (lhs, rhs) {
        (Val::Scalar(l), Val::Scalar(r)) => {
            let mut out = Vec::with_capacity(ctx.n);
            for (x, y) in l.into_iter().zip(r) {
                let (v, keep) = elem(&op, x, y)?;
                out.push(if is_comparison(&op) {
                    f64::from(u8::from(keep))
                } else {
                    v
                });
            }
            Ok(Val::Scalar(out))
        }
        (Val::Vector(rows), Val::Scalar(s)) => vector_scalar(&op, rows, &s, false, return_bool),
        (Val::Scalar(s), Val::Vector(rows)) => vector_scalar(&op, rows, &s, true, return_bool),
        (Val::Vector(l), Val::Vector(r)) => {
            let matching = b.modifier.as_ref().and_then(|m| m.matching.clone());
            let card = b
                .modifier
                .as_ref()
                .map(|m| m.card.clone())
                .unwrap_or(VectorMatchCardinality::OneToOne);
            match op.as_str() {
                "and" | "or" | "unless" => set_op(ctx, &op, l, r, &matching),
                _ => vector_binop(ctx, &op, l, r, &matching, &card, return_bool),
            }
        }
        _ => Err(rt(format!("binary operator `{op}` is not defined on strings"))),
    }
}

fn vector_scalar(
    op: &str,
    rows: Vec<Row>,
    s: &[f64],
    swap: bool,
    return_bool: bool,
) -> Result<Val, EvalError> {
    let cmp = is_comparison(op);
    let drop = drops_name(op) || return_bool;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let mut vals = Vec::with_capacity(r.vals.len());
        for (i, v) in r.vals.iter().enumerate() {
            let Some(v) = *v else {
                vals.push(None);
                continue;
            };
            let (l, rr) = if swap { (s[i], v) } else { (v, s[i]) };
            let (mut f, mut keep) = elem(op, l, rr)?;
            if cmp && swap {
                f = rr;
            }
            if return_bool {
                f = if keep { 1.0 } else { 0.0 };
                keep = true;
            }
            vals.push(keep.then_some(f));
        }
        if vals.iter().any(|v| v.is_some()) {
            out.push(Row {
                labels: if drop { r.labels.without_name() } else { r.labels },
                vals,
            });
        }
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

/// The match signature of a series under `on`/`ignoring`.
fn signature(l: &Labels, matching: &Option<LabelModifier>) -> Labels {
    match matching {
        Some(LabelModifier::Include(ls)) => l.keep_only(&ls.labels),
        Some(LabelModifier::Exclude(ls)) => {
            let mut names: Vec<&str> = ls.labels.iter().map(|s| s.as_str()).collect();
            names.push(METRIC_NAME);
            l.drop_names(&names)
        }
        None => l.without_name(),
    }
}

/// Numbers every distinct signature of both sides.
fn sig_ids(l: &[Row], r: &[Row], matching: &Option<LabelModifier>) -> (Vec<usize>, Vec<usize>, Vec<Labels>) {
    let mut map: HashMap<Labels, usize> = HashMap::new();
    let mut sigs: Vec<Labels> = Vec::new();
    let mut id = |row: &Row| {
        let s = signature(&row.labels, matching);
        *map.entry(s.clone()).or_insert_with(|| {
            sigs.push(s);
            sigs.len() - 1
        })
    };
    let li = l.iter().map(&mut id).collect();
    let ri = r.iter().map(&mut id).collect();
    (li, ri, sigs)
}

fn set_op(
    ctx: &Ctx,
    op: &str,
    l: Vec<Row>,
    r: Vec<Row>,
    matching: &Option<LabelModifier>,
) -> Result<Val, EvalError> {
    let (li, ri, sigs) = sig_ids(&l, &r, matching);
    let mut seen = vec![usize::MAX; sigs.len()];
    let mut lvals: Vec<Vec<Option<f64>>> = l.iter().map(|_| vec![None; ctx.n]).collect();
    let mut rvals: Vec<Vec<Option<f64>>> = r.iter().map(|_| vec![None; ctx.n]).collect();
    for i in 0..ctx.n {
        match op {
            "and" | "unless" => {
                for (k, row) in r.iter().enumerate() {
                    if row.vals[i].is_some() {
                        seen[ri[k]] = i;
                    }
                }
                for (k, row) in l.iter().enumerate() {
                    if let Some(v) = row.vals[i] {
                        let hit = seen[li[k]] == i;
                        if hit == (op == "and") {
                            lvals[k][i] = Some(v);
                        }
                    }
                }
            }
            _ => {
                for (k, row) in l.iter().enumerate() {
                    if let Some(v) = row.vals[i] {
                        seen[li[k]] = i;
                        lvals[k][i] = Some(v);
                    }
                }
                for (k, row) in r.iter().enumerate() {
                    if let Some(v) = row.vals[i] {
                        if seen[ri[k]] != i {
                            rvals[k][i] = Some(v);
                        }
                    }
                }
            }
        }
    }
    let mut out: Vec<Row> = Vec::with_capacity(l.len() + r.len());
    for (row, vals) in l.into_iter().zip(lvals).chain(r.into_iter().zip(rvals)) {
        if vals.iter().any(|v| v.is_some()) {
            out.push(Row {
                labels: row.labels,
                vals,
            });
        }
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

fn result_labels(
    many: &Labels,
    one: &Labels,
    op: &str,
    matching: &Option<LabelModifier>,
    card: &VectorMatchCardinality,
    return_bool: bool,
) -> Labels {
    let mut l = if drops_name(op) || return_bool {
        many.without_name()
    } else {
        many.clone()
    };
    if matches!(card, VectorMatchCardinality::OneToOne) {
        match matching {
            Some(LabelModifier::Include(ls)) => l = l.keep_only(&ls.labels),
            Some(LabelModifier::Exclude(ls)) => l = l.drop_names(&ls.labels),
            None => {}
        }
    }
    if let Some(include) = card.labels() {
        for name in &include.labels {
            match one.get(name) {
                Some(v) if !v.is_empty() => l.set(name, v),
                _ => l.remove(name),
            }
        }
    }
    l
}

fn vector_binop(
    ctx: &Ctx,
    op: &str,
    l: Vec<Row>,
    r: Vec<Row>,
    matching: &Option<LabelModifier>,
    card: &VectorMatchCardinality,
    return_bool: bool,
) -> Result<Val, EvalError> {
    let swapped = matches!(card, VectorMatchCardinality::OneToMany(_));
    let one_to_one = matches!(card, VectorMatchCardinality::OneToOne);
    // `many` is the side whose series each produce output; `one` the side matched against.
    let (many, one) = if swapped { (r, l) } else { (l, r) };
    let (mi, oi, sigs) = sig_ids(&many, &one, matching);
    let mut one_by_sig: Vec<Vec<usize>> = vec![Vec::new(); sigs.len()];
    for (k, &s) in oi.iter().enumerate() {
        one_by_sig[s].push(k);
    }
    let side = if swapped { "left" } else { "right" };
    let mut out_index: HashMap<(usize, usize), usize> = HashMap::new();
    let mut label_index: HashMap<Labels, usize> = HashMap::new();
    let mut out: Vec<Row> = Vec::new();
    let mut matched_at = vec![usize::MAX; sigs.len()];
    for i in 0..ctx.n {
        for (k, row) in many.iter().enumerate() {
            let Some(mv) = row.vals[i] else { continue };
            let s = mi[k];
            let mut found: Option<usize> = None;
            for &o in &one_by_sig[s] {
                if one[o].vals[i].is_some() {
                    if let Some(prev) = found {
                        let mut pair = [go_labels(&one[prev].labels), go_labels(&one[o].labels)];
                        pair.sort();
                        return Err(rt(format!(
                            "found duplicate series for the match group {} on the {side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                            go_labels(&sigs[s]),
                            pair[0],
                            pair[1]
                        )));
                    }
                    found = Some(o);
                }
            }
            let Some(o) = found else { continue };
            let ov = one[o].vals[i].unwrap_or(f64::NAN);
            let (fl, fr) = if swapped { (ov, mv) } else { (mv, ov) };
            // One-to-one matching must be unique before any comparison filters.
            if one_to_one {
                if matched_at[s] == i {
                    return Err(rt(
                        "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)",
                    ));
                }
                matched_at[s] = i;
            }
            let (mut f, keep) = elem(op, fl, fr)?;
            if return_bool {
                f = if keep { 1.0 } else { 0.0 };
            } else if !keep {
                continue;
            }
            let j = match out_index.get(&(k, o)) {
                Some(&j) => j,
                None => {
                    let labels = result_labels(&row.labels, &one[o].labels, op, matching, card, return_bool);
                    let j = *label_index.entry(labels.clone()).or_insert_with(|| {
                        out.push(Row {
                            labels,
                            vals: vec![None; ctx.n],
                        });
                        out.len() - 1
                    });
                    out_index.insert((k, o), j);
                    j
                }
            };
            let slot = &mut out[j].vals[i];
            if slot.is_some() {
                return Err(if one_to_one {
                    super::same_labelset()
                } else {
                    rt("multiple matches for labels: grouping labels must ensure unique matches")
                });
            }
            *slot = Some(f);
        }
    }
    Ok(Val::Vector(out))
}
