//! The supported-subset check and the metric names an expression reads.

use promql_parser::parser::{Expr, VectorMatchFillValues};

use super::selector::fixed_name;
use super::{EvalError, MetricRefs};

/// Functions the evaluator implements.
const SUPPORTED_FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "exp",
    "first_over_time",
    "floor",
    "histogram_fraction",
    "histogram_quantile",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_desc",
    "sqrt",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "vector",
    "year",
];

/// Functions that only act on native histograms.
const NATIVE_HISTOGRAM_FUNCTIONS: &[&str] = &[
    "histogram_avg",
    "histogram_count",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "histogram_quantiles",
];

/// Rejects constructs outside the supported subset, naming the first one found:
/// unknown, experimental and native-histogram functions, the experimental
/// `limitk`/`limit_ratio` aggregations and `fill` modifiers, and parser
/// extensions. Subqueries and the `@` modifier are supported.
pub fn check_supported(expr: &Expr) -> Result<(), EvalError> {
    let uns = |s: String| Err(EvalError::Unsupported(s));
    match expr {
        Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::VectorSelector(_)
        | Expr::MatrixSelector(_) => Ok(()),
        Expr::Paren(p) => check_supported(&p.expr),
        Expr::Unary(u) => check_supported(&u.expr),
        Expr::Subquery(s) => check_supported(&s.expr),
        Expr::Aggregate(a) => {
            let op = a.op.to_string();
            if matches!(op.as_str(), "limitk" | "limit_ratio") {
                return uns(format!("experimental aggregation `{op}`"));
            }
            if let Some(p) = &a.param {
                check_supported(p)?;
            }
            check_supported(&a.expr)
        }
        Expr::Binary(b) => {
            if let Some(m) = &b.modifier {
                if m.fill_values != VectorMatchFillValues::default() {
                    return uns("experimental `fill` modifier of vector matching".into());
                }
            }
            check_supported(&b.lhs)?;
            check_supported(&b.rhs)
        }
        Expr::Call(c) => {
            let name = c.func.name;
            if NATIVE_HISTOGRAM_FUNCTIONS.contains(&name) {
                return uns(format!("native-histogram function `{name}`"));
            }
            if c.func.experimental {
                return uns(format!("experimental function `{name}`"));
            }
            if !SUPPORTED_FUNCTIONS.contains(&name) {
                return uns(format!("function `{name}`"));
            }
            c.args.args.iter().try_for_each(|a| check_supported(a))
        }
        Expr::Extension(_) => uns("parser extension expression".into()),
    }
}

/// The metric names `expr` selects.
pub fn referenced_metrics(expr: &Expr) -> MetricRefs {
    let mut refs = MetricRefs::default();
    walk(expr, &mut refs);
    refs
}

fn walk(expr: &Expr, refs: &mut MetricRefs) {
    match expr {
        Expr::VectorSelector(vs) => match fixed_name(vs) {
            Some(n) => {
                refs.names.insert(n.to_string());
            }
            None => refs.all = true,
        },
        Expr::MatrixSelector(ms) => walk(&Expr::VectorSelector(ms.vs.clone()), refs),
        Expr::Paren(p) => walk(&p.expr, refs),
        Expr::Unary(u) => walk(&u.expr, refs),
        Expr::Subquery(s) => walk(&s.expr, refs),
        Expr::Aggregate(a) => {
            if let Some(p) = &a.param {
                walk(p, refs);
            }
            walk(&a.expr, refs);
        }
        Expr::Binary(b) => {
            walk(&b.lhs, refs);
            walk(&b.rhs, refs);
        }
        Expr::Call(c) => c.args.args.iter().for_each(|a| walk(a, refs)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
        Expr::Extension(_) => refs.all = true,
    }
}
