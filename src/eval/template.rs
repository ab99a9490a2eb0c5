//! Rule expression templates: the `$window` placeholder, the matchers an
//! evaluator injects (the role, user selectors), and what an expression reads.

use std::collections::BTreeSet;

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::Expr;
use promql_parser::util::visitor::{walk_expr, walk_expr_mut, ExprVisitor, ExprVisitorMut};

use super::EvalError;
use crate::store::{Millis, METRIC_NAME};

/// The placeholder rule expressions use for their range window.
pub const WINDOW_PLACEHOLDER: &str = "$window";

/// The label the sources add to every series to name the target's role.
pub const ROLE_LABEL: &str = "role";

/// Formats a duration in PromQL notation (`4m`, `20s`, `1500ms`).
pub fn promql_duration(ms: Millis) -> String {
    if ms > 0 && ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms > 0 && ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}ms", ms.max(1))
    }
}

/// Replaces `$window` with `window` written as a PromQL duration.
pub fn substitute_window(text: &str, window: Millis) -> String {
    text.replace(WINDOW_PLACEHOLDER, &promql_duration(window))
}

/// Parses a rule expression (with `$window` standing for a 5-minute range) and
/// checks it against the evaluator's supported subset.
pub fn parse_template(text: &str) -> Result<Expr, EvalError> {
    super::parse(&substitute_window(text, 5 * 60_000))
}

/// Parses an expression for evaluation: `$window` resolved, the role matcher
/// injected into every selector.
pub fn instantiate(text: &str, window: Millis, role: &str) -> Result<Expr, EvalError> {
    let mut e = super::parse(&substitute_window(text, window))?;
    inject_matcher(&mut e, ROLE_LABEL, role);
    Ok(e)
}

/// Adds `name="value"` to every vector and matrix selector of `expr` (replacing
/// any matcher on the same label).
pub fn inject_matcher(expr: &mut Expr, name: &str, value: &str) {
    inject_matchers(expr, &[Matcher::new(MatchOp::Equal, name, value)]);
}

/// Applies `fix` to every matcher list of every vector and matrix selector of
/// `expr` (each `or` group too).
fn rewrite_matchers(expr: &mut Expr, fix: impl FnMut(&mut Vec<Matcher>)) {
    struct Rewrite<F>(F);
    impl<F: FnMut(&mut Vec<Matcher>)> ExprVisitorMut for Rewrite<F> {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, e: &mut Expr) -> Result<bool, Self::Error> {
            let vs = match e {
                Expr::VectorSelector(vs) => vs,
                Expr::MatrixSelector(ms) => &mut ms.vs,
                _ => return Ok(true),
            };
            (self.0)(&mut vs.matchers.matchers);
            for group in &mut vs.matchers.or_matchers {
                (self.0)(group);
            }
            Ok(true)
        }
    }
    let _ = walk_expr_mut(&mut Rewrite(fix), expr);
}

/// Sets the matchers on the label `name` of every vector and matrix selector
/// of `expr` to `to`: each matcher on `name` is removed and `to` (if any)
/// added. Fleet mode shows each cluster's expressions with its own
/// `cluster="…"` and queries them with its shard's matcher instead.
pub fn replace_label_matchers(expr: &mut Expr, name: &str, to: Option<&Matcher>) {
    rewrite_matchers(expr, |m| {
        m.retain(|x| x.name != name);
        m.extend(to.cloned());
    });
}

/// Adds `matchers` to every vector and matrix selector of `expr`; a matcher of
/// the expression on a label the injected matchers name is replaced. Used for
/// the engine's role matcher, and for role and user selectors sent to
/// Prometheus or written into exported rules.
pub fn inject_matchers(expr: &mut Expr, matchers: &[Matcher]) {
    if matchers.is_empty() {
        return;
    }
    rewrite_matchers(expr, |m| {
        m.retain(|x| !matchers.iter().any(|a| a.name == x.name));
        m.extend(matchers.iter().cloned());
    });
}

/// What an expression reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reads {
    /// Metric names of the selectors.
    pub metrics: BTreeSet<String>,
    /// A selector has no fixed metric name.
    pub any_metric: bool,
    /// The expression contains a range selector or subquery, so it needs at
    /// least two snapshots.
    pub needs_series: bool,
    /// Label names used in selector matchers (besides `__name__`).
    pub matcher_labels: BTreeSet<String>,
}

/// Collects the metric names, label names and range use of `expr`.
pub fn reads(expr: &Expr) -> Reads {
    struct V(Reads);
    impl ExprVisitor for V {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, Self::Error> {
            let vs = match e {
                Expr::VectorSelector(vs) => vs,
                Expr::MatrixSelector(ms) => {
                    self.0.needs_series = true;
                    &ms.vs
                }
                Expr::Subquery(_) => {
                    self.0.needs_series = true;
                    return Ok(true);
                }
                _ => return Ok(true),
            };
            let mut name = vs.name.clone();
            let all = vs
                .matchers
                .matchers
                .iter()
                .chain(vs.matchers.or_matchers.iter().flatten());
            for m in all {
                if m.name == METRIC_NAME {
                    if matches!(m.op, MatchOp::Equal) && name.is_none() {
                        name = Some(m.value.clone());
                    }
                } else {
                    self.0.matcher_labels.insert(m.name.clone());
                }
            }
            match name {
                Some(n) => {
                    self.0.metrics.insert(n);
                }
                None => self.0.any_metric = true,
            }
            Ok(true)
        }
    }
    let mut v = V(Reads::default());
    let _ = walk_expr(&mut v, expr);
    v.0
}

/// The metric family a sample name belongs to (`x_bucket` → `x`).
pub fn family_of(name: &str) -> &str {
    for suffix in ["_bucket", "_count", "_sum"] {
        if let Some(base) = name.strip_suffix(suffix) {
            return base;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_promql_notation() {
        assert_eq!(promql_duration(240_000), "4m");
        assert_eq!(promql_duration(20_000), "20s");
        assert_eq!(promql_duration(1500), "1500ms");
    }

    #[test]
    fn a_labels_matchers_are_replaced_or_removed_in_every_selector() {
        let mut e =
            crate::eval::parse(r#"sum(rate(a{cluster="c1",job="x"}[1m])) / b{cluster=~"c.*"}"#).unwrap();
        let shard = Matcher::new_matcher(
            promql_parser::parser::token::T_EQL_REGEX,
            "cluster".into(),
            "c1|c2".into(),
        )
        .unwrap();
        replace_label_matchers(&mut e, "cluster", Some(&shard));
        assert_eq!(
            e.to_string(),
            r#"sum(rate(a{cluster=~"c1|c2",job="x"}[1m])) / b{cluster=~"c1|c2"}"#
        );
        replace_label_matchers(&mut e, "cluster", None);
        assert_eq!(e.to_string(), r#"sum(rate(a{job="x"}[1m])) / b"#);
    }

    #[test]
    fn role_is_injected_into_every_selector() {
        let mut e =
            promql_parser::parser::parse("sum by (instance) (rate(a_total{x=\"1\"}[1m])) / on (instance) b")
                .unwrap();
        inject_matcher(&mut e, "role", "etcd");
        assert_eq!(
            e.to_string(),
            "sum by (instance) (rate(a_total{role=\"etcd\",x=\"1\"}[1m])) / on (instance) b{role=\"etcd\"}"
        );
        // A matcher on the same label is replaced, not duplicated.
        let mut e = promql_parser::parser::parse("up{role=\"x\"}").unwrap();
        inject_matcher(&mut e, "role", "etcd");
        assert_eq!(e.to_string(), "up{role=\"etcd\"}");
    }

    #[test]
    fn reads_reports_names_and_ranges() {
        let e = promql_parser::parser::parse(
            "histogram_quantile(0.99, sum by (le) (rate(x_bucket{a=\"b\"}[5m]))) > y",
        )
        .unwrap();
        let r = reads(&e);
        assert!(r.needs_series);
        assert_eq!(
            r.metrics.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            ["x_bucket", "y"]
        );
        assert!(r.matcher_labels.contains("a"));
        let g = promql_parser::parser::parse("etcd_server_has_leader == 0").unwrap();
        assert!(!reads(&g).needs_series);
        assert_eq!(family_of("x_bucket"), "x");
    }
}
