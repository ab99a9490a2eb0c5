//! Series selection for remote evaluation and exported rules: parsing
//! `--selector`-style label selectors (`{job="etcd",cluster="prod"}`), the
//! role selectors with their one table of defaults, adding matchers to every
//! selector of an expression, grouping by another instance label, and keeping
//! a fleet label through every grouping.

use std::collections::BTreeMap;

use promql_parser::label::Matcher;
use promql_parser::parser::Expr;
use promql_parser::util::visitor::{walk_expr_mut, ExprVisitorMut};

use crate::store::Role;

/// Why a label selector given on the command line is not usable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid selector `{text}` for {flag}: {message}")]
    Invalid {
        flag: String,
        text: String,
        message: String,
    },
    #[error("invalid label name `{name}` for {flag}: a label name is ASCII letters, digits and `_`, not starting with a digit nor with `__` (e.g. `cluster`)")]
    LabelName { flag: String, name: String },
}

/// Checks that `name` can name the label of a fleet (`--by cluster`): a
/// Prometheus label name that is not reserved (`__…`).
pub fn check_label_name(flag: &str, name: &str) -> Result<(), SelectorError> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(SelectorError::LabelName {
            flag: flag.to_string(),
            name: name.to_string(),
        })
    }
}

/// The label matchers of a selector such as `{job="apiserver"}` or
/// `{job=~".*etcd.*", cluster="prod"}` (no metric name, no `or`).
pub fn parse_selector(flag: &str, text: &str) -> Result<Vec<Matcher>, SelectorError> {
    let bad = |message: String| SelectorError::Invalid {
        flag: flag.to_string(),
        text: text.to_string(),
        message,
    };
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed == "{}" {
        return Ok(Vec::new());
    }
    if !trimmed.starts_with('{') {
        return Err(bad(
            "expected label matchers in braces, e.g. `{job=\"etcd\"}`".into()
        ));
    }
    // `{a="b"}` alone is not a valid expression when every matcher can match the
    // empty string; a placeholder metric name makes any set of matchers parse.
    let expr = crate::limits::parse_promql(&format!("cptriage_selector{trimmed}")).map_err(bad)?;
    let Expr::VectorSelector(vs) = expr else {
        return Err(bad("expected label matchers only".into()));
    };
    if vs.offset.is_some() || vs.at.is_some() {
        return Err(bad("only label matchers are allowed (no offset or @)".into()));
    }
    if !vs.matchers.or_matchers.is_empty() {
        return Err(bad("`or` is not supported in a selector".into()));
    }
    let ms: Vec<Matcher> = vs
        .matchers
        .matchers
        .into_iter()
        .filter(|m| !(m.name == "__name__" && m.value == "cptriage_selector"))
        .collect();
    if ms.iter().any(|m| m.name == "__name__") {
        return Err(bad("a selector may not name a metric".into()));
    }
    Ok(ms)
}

/// The matcher `LABEL=~"REGEX"` (the regular expression anchored, as in
/// PromQL); `flag` names the option in an error.
pub fn regex_matcher(flag: &str, label: &str, regex: &str) -> Result<Matcher, SelectorError> {
    let text = format!(
        "{{{label}=~\"{}\"}}",
        regex.replace('\\', "\\\\").replace('"', "\\\"")
    );
    parse_selector(flag, &text)?
        .into_iter()
        .next()
        .ok_or_else(|| SelectorError::Invalid {
            flag: flag.to_string(),
            text,
            message: "expected one matcher".into(),
        })
}

/// Writes matchers as a selector: `{job="etcd",cluster="prod"}`.
pub fn selector_text(ms: &[Matcher]) -> String {
    let parts: Vec<String> = ms.iter().map(|m| m.to_string()).collect();
    format!("{{{}}}", parts.join(","))
}

pub use super::template::inject_matchers;

/// Default selector of the apiserver role: kube-prometheus, kubeadm and most
/// managed offerings name the job `apiserver`.
pub const DEFAULT_APISERVER_SELECTOR: &str = r#"{job="apiserver"}"#;
/// Default selector of the etcd role (`etcd`, `kube-etcd`, `etcd-server`…).
pub const DEFAULT_ETCD_SELECTOR: &str = r#"{job=~".*etcd.*"}"#;
/// Default selector of the controller role (`kube-controller-manager`, and
/// the `controller-manager` of distributions that rename it).
pub const DEFAULT_CONTROLLER_SELECTOR: &str = r#"{job=~".*controller-manager.*"}"#;

/// Default selector of the node role (optional evidence): node-exporter
/// (`node-exporter` in kube-prometheus, `node` in plain setups) and cAdvisor
/// (kube-prometheus scrapes it from the kubelet job at
/// `metrics_path="/metrics/cadvisor"`; standalone, job `cadvisor`). The
/// kubelet's other endpoints carry another `metrics_path`; node-exporter's
/// series carry none.
pub const DEFAULT_NODE_SELECTOR: &str =
    r#"{job=~"node-exporter|node|kubelet|cadvisor",metrics_path=~"|/metrics/cadvisor"}"#;

/// The one table of default role selectors, for diagnoses over Prometheus and
/// for exported rules alike (exported rules have no node role: see
/// docs/export.md).
pub const DEFAULT_SELECTORS: [(Role, &str); 4] = [
    (Role::Apiserver, DEFAULT_APISERVER_SELECTOR),
    (Role::Etcd, DEFAULT_ETCD_SELECTOR),
    (Role::Controller, DEFAULT_CONTROLLER_SELECTOR),
    (Role::Node, DEFAULT_NODE_SELECTOR),
];

/// How one role's series are selected: label matchers that stand for the
/// `role` label cptriage gives series it scrapes itself (`{job="apiserver"}`).
#[derive(Clone, Debug)]
pub struct RoleSelector {
    pub role: Role,
    /// The selector as given.
    pub text: String,
    pub matchers: Vec<Matcher>,
}

impl RoleSelector {
    /// Parses the selector of `role` given by `flag`; at least one matcher is
    /// needed (an empty selector would select every series as that role).
    pub fn parse(role: Role, flag: &str, text: &str) -> Result<RoleSelector, SelectorError> {
        let matchers = parse_selector(flag, text)?;
        if matchers.is_empty() {
            return Err(SelectorError::Invalid {
                flag: flag.to_string(),
                text: text.to_string(),
                message: "needs at least one label matcher, e.g. `{job=\"etcd\"}`".into(),
            });
        }
        Ok(RoleSelector {
            role,
            text: text.trim().to_string(),
            matchers,
        })
    }

    /// Whether a series with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matchers
            .iter()
            .all(|m| m.is_match(labels.get(&m.name).map(String::as_str).unwrap_or("")))
    }
}

/// Replaces the label `from` by `to` in every `by`/`without`, `on`/`ignoring`
/// and `group_left`/`group_right` list of `expr`, so that rules grouping by
/// `instance` group by the label that tells instances apart in this Prometheus
/// (e.g. `pod`).
pub fn rename_grouping_label(expr: &mut Expr, from: &str, to: &str) {
    struct Rename<'a>(&'a str, &'a str);
    fn fix(ls: &mut promql_parser::label::Labels, from: &str, to: &str) {
        for l in &mut ls.labels {
            if l == from {
                *l = to.to_string();
            }
        }
    }
    impl ExprVisitorMut for Rename<'_> {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, e: &mut Expr) -> Result<bool, Self::Error> {
            match e {
                Expr::Aggregate(a) => {
                    if let Some(m) = a.modifier.as_mut() {
                        match m {
                            promql_parser::parser::LabelModifier::Include(l)
                            | promql_parser::parser::LabelModifier::Exclude(l) => fix(l, self.0, self.1),
                        }
                    }
                }
                Expr::Binary(b) => {
                    if let Some(m) = b.modifier.as_mut() {
                        if let Some(
                            promql_parser::parser::LabelModifier::Include(l)
                            | promql_parser::parser::LabelModifier::Exclude(l),
                        ) = m.matching.as_mut()
                        {
                            fix(l, self.0, self.1);
                        }
                        match &mut m.card {
                            promql_parser::parser::VectorMatchCardinality::ManyToOne(l)
                            | promql_parser::parser::VectorMatchCardinality::OneToMany(l) => {
                                fix(l, self.0, self.1);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            Ok(true)
        }
    }
    if from == to {
        return;
    }
    let _ = walk_expr_mut(&mut Rename(from, to), expr);
}

/// Keeps the label `label` through every aggregation and vector match of
/// `expr`, so that one query answers for every value of it (fleet mode,
/// `--by cluster`): `label` is added to every `by (…)` list and every
/// `on (…)` list, an aggregation without a grouping becomes `by (label)`, and
/// `label` is removed from every `without (…)`/`ignoring (…)` list.
/// `group_left`/`group_right` lists are left alone: the label is on both
/// sides of the match already.
pub fn add_grouping_label(expr: &mut Expr, label: &str) {
    use promql_parser::parser::LabelModifier;
    struct Add<'a>(&'a str);
    fn keep(m: &mut LabelModifier, label: &str) {
        match m {
            LabelModifier::Include(l) => {
                if !l.labels.iter().any(|x| x == label) {
                    l.labels.push(label.to_string());
                }
            }
            LabelModifier::Exclude(l) => l.labels.retain(|x| x != label),
        }
    }
    impl ExprVisitorMut for Add<'_> {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, e: &mut Expr) -> Result<bool, Self::Error> {
            match e {
                Expr::Aggregate(a) => match a.modifier.as_mut() {
                    Some(m) => keep(m, self.0),
                    None => {
                        a.modifier = Some(LabelModifier::Include(promql_parser::label::Labels::new(vec![
                            self.0,
                        ])));
                    }
                },
                Expr::Binary(b) => {
                    if let Some(m) = b.modifier.as_mut() {
                        if let Some(l) = m.matching.as_mut() {
                            keep(l, self.0);
                        }
                    }
                }
                _ => {}
            }
            Ok(true)
        }
    }
    let _ = walk_expr_mut(&mut Add(label), expr);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_labels_are_label_names() {
        assert!(check_label_name("--by", "cluster").is_ok());
        assert!(check_label_name("--by", "_k8s_cluster2").is_ok());
        for bad in ["", "2cluster", "clus-ter", "__name__", "a b", "clüster"] {
            let e = check_label_name("--by", bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")) && e.contains("--by"), "{e}");
        }
    }

    #[test]
    fn selectors_parse_into_matchers() {
        let ms = parse_selector("--etcd-selector", r#"{job=~".*etcd.*", cluster="prod"}"#).unwrap();
        assert_eq!(selector_text(&ms), r#"{job=~".*etcd.*",cluster="prod"}"#);
        assert!(parse_selector("--selector", "").unwrap().is_empty());
        assert!(parse_selector("--selector", r#"{a=""}"#).is_ok());
        let e = parse_selector("--selector", "job=etcd").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid selector `job=etcd` for --selector: expected label matchers in braces, e.g. `{job=\"etcd\"}`"
        );
        assert!(parse_selector("--selector", "{job=}").is_err());
        assert!(parse_selector("--selector", r#"{__name__="up"}"#).is_err());
    }

    #[test]
    fn role_selectors_need_a_matcher_and_match_labels() {
        for (role, text) in DEFAULT_SELECTORS {
            let s = RoleSelector::parse(role, "-", text).unwrap();
            assert_eq!(s.text, text);
        }
        let etcd = RoleSelector::parse(Role::Etcd, "--etcd-selector", DEFAULT_ETCD_SELECTOR).unwrap();
        let l = |job: &str| BTreeMap::from([("job".to_string(), job.to_string())]);
        assert!(etcd.matches(&l("kube-etcd")));
        assert!(!etcd.matches(&l("apiserver")));
        let ctl = RoleSelector::parse(Role::Controller, "-", DEFAULT_CONTROLLER_SELECTOR).unwrap();
        assert!(ctl.matches(&l("kube-controller-manager")));
        let node = RoleSelector::parse(Role::Node, "-", DEFAULT_NODE_SELECTOR).unwrap();
        let lp = |job: &str, path: &str| {
            BTreeMap::from([
                ("job".to_string(), job.to_string()),
                ("metrics_path".to_string(), path.to_string()),
            ])
        };
        for job in ["node-exporter", "node", "cadvisor"] {
            assert!(node.matches(&l(job)), "{job}");
        }
        assert!(node.matches(&lp("kubelet", "/metrics/cadvisor")));
        assert!(!node.matches(&lp("kubelet", "/metrics")));
        assert!(!node.matches(&lp("kubelet", "/metrics/probes")));
        assert!(!node.matches(&l("kube-etcd")));
        for bad in ["{}", "", r#"{job="x"} offset 5m"#, r#"etcd_up{job="x"}"#] {
            assert!(
                RoleSelector::parse(Role::Etcd, "--etcd-selector", bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn matchers_go_into_every_selector() {
        let mut e = promql_parser::parser::parse(
            r#"sum by (instance) (rate(a_total{job="x",code="5"}[1m])) / on (instance) b"#,
        )
        .unwrap();
        let ms = parse_selector("-", r#"{job=~".*etcd.*",cluster="prod"}"#).unwrap();
        inject_matchers(&mut e, &ms);
        assert_eq!(
            e.to_string(),
            r#"sum by (instance) (rate(a_total{cluster="prod",code="5",job=~".*etcd.*"}[1m])) / on (instance) b{cluster="prod",job=~".*etcd.*"}"#
        );
    }

    #[test]
    fn the_fleet_label_is_kept_through_every_grouping() {
        let mut e = promql_parser::parser::parse(
            "histogram_quantile(0.99, sum by (instance, le) (rate(x_bucket[1m]))) / on (instance) max without (instance, cluster) (y) > ignoring (le, cluster) group_left (instance) sum(z) + count(w)",
        )
        .unwrap();
        add_grouping_label(&mut e, "cluster");
        assert_eq!(
            e.to_string(),
            "histogram_quantile(0.99, sum by (instance, le, cluster) (rate(x_bucket[1m]))) / on (instance, cluster) max without (instance) (y) > ignoring (le) group_left (instance) sum by (cluster) (z) + count by (cluster) (w)"
        );
    }

    #[test]
    fn grouping_by_another_instance_label() {
        let mut e = promql_parser::parser::parse(
            "histogram_quantile(0.99, sum by (instance, le) (rate(x_bucket[1m]))) / on (instance) max without (instance) (y) * ignoring (le) group_left (instance) z",
        )
        .unwrap();
        rename_grouping_label(&mut e, "instance", "pod");
        assert_eq!(
            e.to_string(),
            "histogram_quantile(0.99, sum by (pod, le) (rate(x_bucket[1m]))) / on (pod) max without (pod) (y) * ignoring (le) group_left (pod) z"
        );
    }
}
