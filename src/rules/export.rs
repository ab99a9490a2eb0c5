//! The exclusion tree as a Prometheus rule file (`cptriage rules export`), and
//! promtool unit tests of that file built from captured data.
//!
//! One rule group, evaluated in order (Prometheus evaluates the rules of a group
//! sequentially, each reading what the earlier ones recorded at the same time):
//!
//! 1. `cptriage:<signal>`: one recording rule per signal, its value per
//!    instance (and `cptriage:observations:<signal>`, its observation count,
//!    for signals that have one), labelled with the digest of the expression
//!    ([`DIGEST_LABEL`]) and the window ([`WINDOW_LABEL`]), so that
//!    `cptriage diagnose --prometheus` can read it instead of the raw
//!    expression ([`super::recorded`]). `$window` is the export window; the `role="…"` matcher the
//!    engine injects is replaced by the role's selector (`{job="apiserver"}`,
//!    `{job=~".*etcd.*"}`, `{job=~".*controller-manager.*"}` by default). The
//!    expression and its alternatives are joined with `or`, so each instance
//!    uses the first alternative it exposes (cptriage picks one per role).
//! 2. `cptriage:node:<node>`: the instances on which a question of the tree is
//!    answered *yes* (`any` → `or`; `all` → `and on()`: every part lit somewhere).
//! 3. `cptriage:leaf:<leaf>`: the instances of a lit leaf: its deepest required
//!    question, gated (`and on()`) by the other questions on its path, as
//!    `cptriage diagnose` lights leaves; a fallback leaf is its question
//!    `unless on()` a leaf under that question is lit.
//! 4. One alert per leaf (`Cptriage<LeafInCamelCase>`) on its leaf rule, with a
//!    `for`, severity from the P-level and the question, falsifier and runbook
//!    as annotations.
//!
//! What cannot be expressed exactly (relative thresholds, unknown values) is
//! approximated as `docs/export.md` describes and the alerts' `approximation`
//! annotation says.

use std::collections::{BTreeMap, BTreeSet};

use promql_parser::parser::Expr;

use serde::Serialize;

use super::load::{LeafLogic, RuleSet, Signal};
use super::model::{Combine, Condition, Direction, LeafDef, Severity, SignalRole, Threshold};
use crate::eval::select::{RoleSelector, SelectorError};
#[cfg(test)]
use crate::eval::select::{DEFAULT_APISERVER_SELECTOR, DEFAULT_CONTROLLER_SELECTOR, DEFAULT_ETCD_SELECTOR};
use crate::eval::template::{substitute_window, ROLE_LABEL};
use crate::source::Dataset;
use crate::store::Role;
use crate::store::{is_stale, Labels, Millis, METRIC_NAME};
use crate::timefmt::format_duration;

/// Prefix of every rule name cptriage exports.
pub const PREFIX: &str = "cptriage";

/// Why an export or a generated unit test could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Selector(#[from] SelectorError),
    #[error("signal `{signal}`: expression {index} cannot be exported: {message}")]
    Expr {
        signal: String,
        index: usize,
        message: String,
    },
    #[error("node `{node}`: {message}")]
    Condition { node: String, message: String },
    #[error("`{a}` and `{b}` both export as `{name}`")]
    NameClash { a: String, b: String, name: String },
    #[error("invalid export option: {0}")]
    Option(String),
    #[error("unit test `{test}`: {message}")]
    UnitTest { test: String, message: String },
    #[error("cannot write YAML: {0}")]
    Yaml(String),
}

/// Settings of an export.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// What `$window` becomes.
    pub window: Millis,
    /// The alerts' `for`.
    pub for_: Millis,
    /// Relative thresholds compare with the median of the signal over this
    /// range …
    pub baseline_window: Millis,
    /// … ending this long before the evaluation time.
    pub baseline_offset: Millis,
    pub apiserver: RoleSelector,
    pub etcd: RoleSelector,
    pub controller: RoleSelector,
    /// Audit signals read cptriage's own counters of audit logs, which no
    /// Prometheus holds: they select [`AUDIT_SELECTOR`], so their recording
    /// rules are empty and a compound that needs them never fires.
    pub audit: RoleSelector,
    /// Name of the rule group.
    pub group: String,
    /// The fleet label (`--by cluster`): kept through every aggregation and
    /// vector match of every rule, so each alert carries its cluster.
    pub by: Option<String>,
}

/// Default `$window` of an export.
pub const DEFAULT_WINDOW: Millis = 5 * 60_000;
/// Default `for` of the alerts: two steps of a 1-minute evaluation (the
/// engine's default debounce of 2 steps).
pub const DEFAULT_FOR: Millis = 2 * 60_000;
/// Default baseline: the median over one hour …
pub const DEFAULT_BASELINE_WINDOW: Millis = 60 * 60_000;
/// … ending one hour ago.
pub const DEFAULT_BASELINE_OFFSET: Millis = 60 * 60_000;
/// The selector of audit signals in an export (see [`ExportOptions::audit`]).
pub const AUDIT_SELECTOR: &str = "{job=\"cptriage-audit-log\"}";

impl ExportOptions {
    /// The defaults with these selectors.
    pub fn new(apiserver: &str, etcd: &str, controller: &str) -> Result<ExportOptions, ExportError> {
        Ok(ExportOptions {
            window: DEFAULT_WINDOW,
            for_: DEFAULT_FOR,
            baseline_window: DEFAULT_BASELINE_WINDOW,
            baseline_offset: DEFAULT_BASELINE_OFFSET,
            apiserver: RoleSelector::parse(Role::Apiserver, "--apiserver-selector", apiserver)?,
            etcd: RoleSelector::parse(Role::Etcd, "--etcd-selector", etcd)?,
            controller: RoleSelector::parse(Role::Controller, "--controller-selector", controller)?,
            audit: RoleSelector::parse(Role::Audit, "the audit selector", AUDIT_SELECTOR)?,
            group: PREFIX.to_string(),
            by: None,
        })
    }

    /// The selector of a role.
    pub fn selector(&self, role: SignalRole) -> &RoleSelector {
        match role {
            SignalRole::Apiserver => &self.apiserver,
            SignalRole::Etcd => &self.etcd,
            SignalRole::Controller => &self.controller,
            // Log signals read cptriage's own counters too, and node signals
            // its member-to-node map (`cptriage_node_member`): no Prometheus
            // holds them.
            SignalRole::Audit | SignalRole::Logs | SignalRole::Node => &self.audit,
        }
    }

    fn check(&self) -> Result<(), ExportError> {
        for (what, v) in [("window", self.window), ("baseline window", self.baseline_window)] {
            if v < 1000 || v % 1000 != 0 {
                return Err(ExportError::Option(format!(
                    "the {what} must be a whole number of seconds, at least 1s (got {})",
                    format_duration(v)
                )));
            }
        }
        if self.for_ < 0 || self.baseline_offset < 0 {
            return Err(ExportError::Option(
                "`for` and the baseline offset must not be negative".into(),
            ));
        }
        if self.group.trim().is_empty() {
            return Err(ExportError::Option("the group name is empty".into()));
        }
        if let Some(by) = &self.by {
            crate::eval::select::check_label_name("--by", by)?;
        }
        Ok(())
    }
}

/// A Prometheus rule file.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PromRuleFile {
    pub groups: Vec<PromGroup>,
}

/// A rule group.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PromGroup {
    pub name: String,
    pub rules: Vec<PromRule>,
}

/// A recording rule (`record`) or an alerting rule (`alert`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PromRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert: Option<String>,
    pub expr: String,
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl PromRule {
    /// A recording rule.
    fn record(name: String, expr: String, labels: BTreeMap<String, String>) -> PromRule {
        PromRule {
            record: Some(name),
            alert: None,
            expr,
            for_: None,
            labels,
            annotations: BTreeMap::new(),
        }
    }
}

/// The names of an exported file's rules: each is claimed once.
#[derive(Default)]
struct Names(BTreeMap<String, String>);

impl Names {
    /// `name` for `what`, or a clash with the rule that claimed it first.
    fn claim(&mut self, name: String, what: String) -> Result<String, ExportError> {
        if let Some(prev) = self.0.insert(name.clone(), what.clone()) {
            return Err(ExportError::NameClash {
                a: prev,
                b: what,
                name,
            });
        }
        Ok(name)
    }
}

impl PromRuleFile {
    /// The file as YAML, with a header comment naming its origin.
    pub fn to_yaml(&self, header: &str) -> Result<String, ExportError> {
        let body = serde_yaml::to_string(self).map_err(|e| ExportError::Yaml(e.to_string()))?;
        let mut out = String::new();
        for l in header.lines() {
            out.push_str("# ");
            out.push_str(l);
            out.push('\n');
        }
        out.push_str(&body);
        Ok(out)
    }

    /// The alerting rule named `name`.
    pub fn alert(&self, name: &str) -> Option<&PromRule> {
        self.groups
            .iter()
            .flat_map(|g| g.rules.iter())
            .find(|r| r.alert.as_deref() == Some(name))
    }
}

fn snake(id: &str) -> String {
    id.replace('-', "_")
}

/// The recording rule of a signal: `cptriage:<signal>`.
pub fn signal_record(id: &str) -> String {
    format!("{PREFIX}:{}", snake(id))
}

/// The recording rule of a signal's observation count:
/// `cptriage:observations:<signal>`.
pub fn observations_record(id: &str) -> String {
    format!("{PREFIX}:observations:{}", snake(id))
}

/// The label every recorded signal series carries: the [`digest`] of the
/// expression it records, so a reader can tell a compatible recording from
/// one of other rules (`docs/export.md`).
pub const DIGEST_LABEL: &str = "cptriage_digest";
/// The label every recorded signal series carries: the export's `--window`.
pub const WINDOW_LABEL: &str = "cptriage_window";

/// The digest of an exported expression: 16 hex digits of its XXH3-64.
pub fn digest(expr: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(expr.as_bytes()))
}

/// What the recording rules of one signal record: the exported expression
/// of its values and of its observation count (with the `--by` label kept),
/// each with its [`digest`].
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    pub values: (String, String),
    pub observations: Option<(String, String)>,
}

/// The recordings of a signal under `opts`: the expressions its recording
/// rules evaluate and their digests. `cptriage diagnose` computes the same to
/// tell whether recorded series are its own.
pub fn recording(sig: &Signal, opts: &ExportOptions) -> Result<Recording, ExportError> {
    let by = |e: String, what: &str| -> Result<(String, String), ExportError> {
        let e = match &opts.by {
            Some(by) => keep_label(&e, by).map_err(|message| {
                ExportError::Option(format!("`{what}` cannot keep the label `{by}`: {message}"))
            })?,
            None => e,
        };
        let d = digest(&e);
        Ok((e, d))
    };
    let values = by(signal_expr(sig, opts)?, &signal_record(&sig.def.id))?;
    let observations = match &sig.observations {
        None => None,
        Some(o) => {
            let sel = opts.selector(sig.def.role);
            let e = export_expr(&o.expr, opts.window, sel).map_err(|message| ExportError::Expr {
                signal: sig.def.id.clone(),
                index: 0,
                message: format!("observations: {message}"),
            })?;
            Some(by(e, &observations_record(&sig.def.id))?)
        }
    };
    Ok(Recording { values, observations })
}

/// A signal's recording rule reads as its series without the recording
/// labels ([`DIGEST_LABEL`], [`WINDOW_LABEL`]), so that the questions' rules
/// compare and join the signals on the instance (and `--by` label) alone.
fn plain(e: &str) -> String {
    format!("max without ({DIGEST_LABEL}, {WINDOW_LABEL}) ({e})")
}

/// The recording rule of a tree question: `cptriage:node:<node>`.
pub fn node_record(id: &str) -> String {
    format!("{PREFIX}:node:{}", snake(id))
}

/// The recording rule of a leaf: `cptriage:leaf:<leaf>`.
pub fn leaf_record(id: &str) -> String {
    format!("{PREFIX}:leaf:{}", snake(id))
}

/// The alert of a leaf: `Cptriage` + the leaf id in CamelCase (`etcd-disk` →
/// `CptriageEtcdDisk`).
pub fn alert_name(leaf: &str) -> String {
    let mut out = String::from("Cptriage");
    for part in leaf.split(['-', '_']).filter(|p| !p.is_empty()) {
        let mut c = part.chars();
        if let Some(f) = c.next() {
            out.extend(f.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    out
}

/// Alertmanager severity of a P-level: P0 and P1 (the strong-consistency
/// path: writes and reads fail) page as `critical`, P2 (the eventual path) is
/// `warning`, P3 is `info`. The P-level itself is the `priority` label.
pub fn severity_label(s: Severity) -> &'static str {
    match s {
        Severity::P0 | Severity::P1 => "critical",
        Severity::P2 => "warning",
        Severity::P3 => "info",
    }
}

/// One expression of a signal as exported: `$window` resolved, the role
/// selector injected.
pub fn export_expr(text: &str, window: Millis, sel: &RoleSelector) -> Result<String, crate::eval::EvalError> {
    let mut e = crate::eval::parse(&substitute_window(text, window))?;
    crate::eval::template::inject_matchers(&mut e, &sel.matchers);
    Ok(e.to_string())
}

/// The exported expression of a signal: its alternatives joined with `or`.
pub fn signal_expr(sig: &Signal, opts: &ExportOptions) -> Result<String, ExportError> {
    let sel = opts.selector(sig.def.role);
    let mut parts = Vec::new();
    for (i, text) in sig.exprs.iter().enumerate() {
        let e = export_expr(text, opts.window, sel).map_err(|e| ExportError::Expr {
            signal: sig.def.id.clone(),
            index: i,
            message: e.to_string(),
        })?;
        parts.push(e);
    }
    Ok(if parts.len() == 1 {
        parts.remove(0)
    } else {
        parts
            .iter()
            .map(|p| format!("({p})"))
            .collect::<Vec<_>>()
            .join(" or ")
    })
}

/// `expr` with `label` kept through every aggregation and vector match
/// ([`crate::eval::select::add_grouping_label`]).
fn keep_label(expr: &str, label: &str) -> Result<String, crate::eval::EvalError> {
    let mut e = crate::eval::parse(expr)?;
    crate::eval::select::add_grouping_label(&mut e, label);
    Ok(e.to_string())
}

fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The instances on which a signal is lit, as PromQL over its recording rule.
pub fn lit_expr(id: &str, t: &Threshold, opts: &ExportOptions) -> Result<String, ExportError> {
    let r = plain(&signal_record(id));
    let abs = match (t.above, t.below) {
        (Some(a), _) => Some(format!("{r} > {}", num(a))),
        (None, Some(b)) => Some(format!("{r} < {}", num(b))),
        (None, None) => None,
    };
    let rel = t.relative.as_ref().map(|rel| {
        let base = plain(&format!(
            "quantile_over_time(0.5, {}[{}] offset {})",
            signal_record(id),
            format_duration(opts.baseline_window),
            format_duration(opts.baseline_offset)
        ));
        match rel.direction {
            Direction::Above => format!(
                "({r} > {} * {base}) and ({r} > {})",
                num(rel.factor),
                num(rel.floor)
            ),
            Direction::Below => format!(
                "({r} < {} * {base}) and ({base} > {})",
                num(rel.factor),
                num(rel.floor)
            ),
        }
    });
    match (abs, rel) {
        (Some(a), Some(b)) => Ok(match t.combine {
            Combine::Any => format!("({a}) or ({b})"),
            Combine::All => format!("({a}) and ({b})"),
        }),
        (Some(a), None) => Ok(a),
        (None, Some(b)) => Ok(b),
        (None, None) => Err(ExportError::Expr {
            signal: id.to_string(),
            index: 0,
            message: "the threshold has neither an absolute nor a relative part".into(),
        }),
    }
}

/// A node's recording rule: its condition, and with `while:` its own
/// previous result kept while that condition holds (a recording rule reads
/// its own last sample).
fn node_expr(
    n: &crate::rules::load::Node,
    rules: &RuleSet,
    opts: &ExportOptions,
) -> Result<String, ExportError> {
    let when = cond_expr(&n.def.when, rules, opts, &n.def.id)?;
    match &n.def.sustain {
        None => Ok(when),
        Some(w) => Ok(format!(
            "({when}) or (({}) and on () {})",
            cond_expr(w, rules, opts, &n.def.id)?,
            node_record(&n.def.id)
        )),
    }
}

fn cond_expr(
    c: &Condition,
    rules: &RuleSet,
    opts: &ExportOptions,
    node: &str,
) -> Result<String, ExportError> {
    let err = |message: String| ExportError::Condition {
        node: node.to_string(),
        message,
    };
    match c {
        Condition::Signal(s) => {
            let k = rules
                .signal(s)
                .ok_or_else(|| err(format!("unknown signal `{s}`")))?;
            let def = &rules.signals[k].def;
            let lit = lit_expr(s, &def.threshold, opts)?;
            let Some(q) = &def.quiet_after else {
                return Ok(lit);
            };
            let qk = rules
                .signal(&q.signal)
                .ok_or_else(|| err(format!("unknown signal `{}`", q.signal)))?;
            Ok(quiet_expr(
                &lit,
                &lit_expr(&q.signal, &rules.signals[qk].def.threshold, opts)?,
                q.duration.0,
            ))
        }
        Condition::Any { any } => {
            if any.is_empty() {
                return Err(err("empty `any` list".into()));
            }
            let parts: Vec<String> = any
                .iter()
                .map(|c| cond_expr(c, rules, opts, node).map(|e| format!("({e})")))
                .collect::<Result<_, _>>()?;
            Ok(parts.join(" or "))
        }
        Condition::All { all } => {
            if all.is_empty() {
                return Err(err("empty `all` list".into()));
            }
            let parts: Vec<String> = all
                .iter()
                .map(|c| cond_expr(c, rules, opts, node).map(|e| format!("({e})")))
                .collect::<Result<_, _>>()?;
            Ok(parts.join(" and on () "))
        }
    }
}

/// A signal's lit instances with its `quiet_after:` applied: none while the
/// other signal is lit on any instance or was within `for` (a subquery at
/// the rule group's evaluation interval).
fn quiet_expr(lit: &str, quiet_lit: &str, for_ms: i64) -> String {
    format!(
        "({lit}) unless on () count_over_time(({quiet_lit})[{}:])",
        format_duration(for_ms)
    )
}

/// Escapes Go-template actions in fixed annotation text.
fn literal(text: &str) -> String {
    text.replace("{{", "{{ \"{{\" }}")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The annotations of a leaf's alert; `instance` replaces the
/// `{{ $labels.instance }}` template when given (the expanded form promtool
/// compares with).
pub fn leaf_annotations(
    rules: &RuleSet,
    l: usize,
    logic: &LeafLogic,
    opts: &ExportOptions,
    instance: Option<&str>,
) -> BTreeMap<String, String> {
    let leaf = &rules.leaves[l];
    let mut a = BTreeMap::new();
    let inst = instance
        .map(str::to_string)
        .unwrap_or_else(|| "{{ $labels.instance }}".into());
    let text = |s: &str| {
        if instance.is_some() {
            one_line(s)
        } else {
            literal(&one_line(s))
        }
    };
    a.insert("summary".into(), format!("{} on {inst}", text(&leaf.title)));
    let questions: Vec<String> = logic
        .required
        .iter()
        .map(|&n| text(&rules.nodes[n].def.question))
        .collect();
    a.insert("question".into(), questions.join(" → "));
    let mut cond = Vec::new();
    let mut relative = false;
    for &n in &logic.required {
        let node = &rules.nodes[n].def;
        let sigs: Vec<String> = node
            .when
            .signals()
            .iter()
            .filter_map(|s| rules.signal(s).map(|k| (s, k)))
            .map(|(s, k)| {
                let d = &rules.signals[k].def;
                relative |= d.threshold.relative.is_some();
                format!("{s} {}", d.threshold.text(d.unit))
            })
            .collect();
        let op = if matches!(node.when, Condition::All { .. }) {
            " and "
        } else {
            " or "
        };
        cond.push(format!("{}: {}", node.id, sigs.join(op)));
    }
    if !logic.suppressed_by.is_empty() {
        let names: Vec<&str> = logic
            .suppressed_by
            .iter()
            .map(|&o| rules.leaves[o].id.as_str())
            .collect();
        cond.push(format!("and none of {} lit", names.join(", ")));
    }
    a.insert("condition".into(), text(&cond.join("; ")));
    a.insert("falsifier".into(), text(&leaf.falsifier));
    let steps: Vec<String> = leaf
        .runbook
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {}", i + 1, text(s)))
        .collect();
    a.insert("runbook".into(), steps.join("\n"));
    if relative {
        a.insert(
            "approximation".into(),
            format!(
                "relative thresholds compare with the median of the signal over {} ending {} earlier (cptriage diagnose uses the first quarter of its window); a signal with no data never fires",
                format_duration(opts.baseline_window),
                format_duration(opts.baseline_offset)
            ),
        );
    }
    a
}

/// The labels of a leaf's alert (besides the instance from the data).
pub fn leaf_labels(leaf: &LeafDef) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("severity".into(), severity_label(leaf.severity).into());
    l.insert("priority".into(), leaf.severity.to_string());
    l.insert("axis".into(), leaf.axis.clone());
    if let Some(s) = &leaf.sub_axis {
        l.insert("sub_axis".into(), s.clone());
    }
    l.insert("cptriage_leaf".into(), leaf.id.clone());
    l
}

/// Exports a rule set as a Prometheus rule file.
pub fn export(rules: &RuleSet, opts: &ExportOptions) -> Result<PromRuleFile, ExportError> {
    opts.check()?;
    let mut names = Names::default();
    // The signals' rules keep the `--by` label already (`recording`).
    let mut signals = signal_rules(rules, opts, &mut names)?;
    let mut out = Vec::new();
    for n in &rules.nodes {
        let name = names.claim(node_record(&n.def.id), format!("node {}", n.def.id))?;
        out.push(PromRule::record(
            name,
            node_expr(n, rules, opts)?,
            BTreeMap::new(),
        ));
    }
    out.extend(leaf_rules(rules, opts, &mut names)?);
    if let Some(by) = &opts.by {
        for r in &mut out {
            r.expr = keep_label(&r.expr, by).map_err(|message| {
                ExportError::Option(format!(
                    "`{}` cannot keep the label `{by}`: {message}",
                    r.record.as_deref().or(r.alert.as_deref()).unwrap_or_default()
                ))
            })?;
        }
    }
    signals.extend(out);
    Ok(PromRuleFile {
        groups: vec![PromGroup {
            name: opts.group.clone(),
            rules: signals,
        }],
    })
}

/// Each signal's recording rule (and its observations' where it has them),
/// labelled with its digest and window.
fn signal_rules(
    rules: &RuleSet,
    opts: &ExportOptions,
    names: &mut Names,
) -> Result<Vec<PromRule>, ExportError> {
    let labels = |digest: &str| {
        BTreeMap::from([
            (DIGEST_LABEL.to_string(), digest.to_string()),
            (WINDOW_LABEL.to_string(), format_duration(opts.window)),
        ])
    };
    let mut out = Vec::new();
    for s in &rules.signals {
        let rec = recording(s, opts)?;
        let name = names.claim(signal_record(&s.def.id), format!("signal {}", s.def.id))?;
        out.push(PromRule::record(name, rec.values.0, labels(&rec.values.1)));
        if let Some((expr, d)) = rec.observations {
            let name = names.claim(
                observations_record(&s.def.id),
                format!("observations of {}", s.def.id),
            )?;
            out.push(PromRule::record(name, expr, labels(&d)));
        }
    }
    Ok(out)
}

/// Each leaf's recording rule (its required questions, unless a leaf that
/// suppresses it is lit), then each leaf's alert; ordinary leaves first:
/// fallback leaves read them.
fn leaf_rules(
    rules: &RuleSet,
    opts: &ExportOptions,
    names: &mut Names,
) -> Result<Vec<PromRule>, ExportError> {
    let logic = &rules.logic;
    let order: Vec<usize> = (0..rules.leaves.len())
        .filter(|&l| !rules.leaves[l].fallback)
        .chain((0..rules.leaves.len()).filter(|&l| rules.leaves[l].fallback))
        .collect();
    let mut out = Vec::new();
    for &l in &order {
        let lg = &logic[l];
        let Some((&deepest, upper)) = lg.required.split_last() else {
            continue;
        };
        let mut e = node_record(&rules.nodes[deepest].def.id);
        for &n in upper {
            e.push_str(&format!(" and on () {}", node_record(&rules.nodes[n].def.id)));
        }
        if !lg.suppressed_by.is_empty() {
            let others: Vec<String> = lg
                .suppressed_by
                .iter()
                .map(|&o| leaf_record(&rules.leaves[o].id))
                .collect();
            e = format!("{e} unless on () ({})", others.join(" or "));
        }
        let id = &rules.leaves[l].id;
        out.push(PromRule::record(
            names.claim(leaf_record(id), format!("leaf {id}"))?,
            e,
            BTreeMap::new(),
        ));
    }
    for &l in &order {
        let leaf = &rules.leaves[l];
        if logic[l].required.is_empty() {
            continue;
        }
        out.push(PromRule {
            record: None,
            alert: Some(names.claim(alert_name(&leaf.id), format!("leaf {}", leaf.id))?),
            expr: leaf_record(&leaf.id),
            for_: (opts.for_ > 0).then(|| format_duration(opts.for_)),
            labels: leaf_labels(leaf),
            annotations: leaf_annotations(rules, l, &logic[l], opts, None),
        });
    }
    Ok(out)
}

// ───────────────────────────── promtool unit tests ─────────────────────────────

/// An alert a generated unit test expects at `eval_time` (an offset from the
/// first sample): firing on `instances`, or not firing at all when empty.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertCheck {
    pub eval_time: Millis,
    /// Leaf id.
    pub leaf: String,
    pub instances: Vec<String>,
}

/// The data and expectations of one generated promtool unit test.
#[derive(Clone, Debug)]
pub struct UnitTestInput<'a> {
    pub name: String,
    pub data: &'a Dataset,
    /// Time of the first sample (promtool's time 0).
    pub start: Millis,
    /// Spacing of the samples (the test's `interval`).
    pub interval: Millis,
    /// Labels added to every series of a role (they must match the role's
    /// selector), e.g. `job="apiserver"`.
    pub role_labels: BTreeMap<SignalRole, BTreeMap<String, String>>,
    pub checks: Vec<AlertCheck>,
    /// Drop series that cannot change what the rules conclude, to keep the
    /// file small: of a metric read only through range functions (`rate`,
    /// `increase`, `deriv`), a series group (the labels but `le`) whose values
    /// never change contributes 0 to every sum; one such group per metric and
    /// instance is kept so that zero-anchors (`or … * 0`) still have a series.
    /// Metrics read by instant selectors (gauges) are always kept whole.
    pub prune_constant: bool,
    /// How far a sample may be from its grid point and still be placed there
    /// (ms): 0 for generated data, up to half the interval for real scrapes,
    /// which start a few milliseconds late or early.
    pub snap: Millis,
}

#[derive(Serialize)]
struct UnitFile {
    rule_files: Vec<String>,
    evaluation_interval: String,
    tests: Vec<UnitTest>,
}

#[derive(Serialize)]
struct UnitTest {
    name: String,
    interval: String,
    input_series: Vec<InputSeries>,
    alert_rule_test: Vec<AlertTest>,
}

#[derive(Serialize)]
struct InputSeries {
    series: String,
    values: String,
}

#[derive(Serialize)]
struct AlertTest {
    eval_time: String,
    alertname: String,
    exp_alerts: Vec<ExpAlert>,
}

#[derive(Serialize)]
struct ExpAlert {
    exp_labels: BTreeMap<String, String>,
    exp_annotations: BTreeMap<String, String>,
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// `name{a="b",…}` in the series notation of promtool (labels sorted).
pub fn series_text(name: &str, labels: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// Writes points in expanding notation: runs that promtool's `a+bxN` (repeated
/// addition) reproduces bit for bit are folded, everything else is explicit;
/// `None` is `_`, a staleness marker `stale`.
pub fn notation(points: &[Option<f64>]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let tok = |v: f64| {
        if is_stale(v) {
            "stale".to_string()
        } else {
            num_token(v)
        }
    };
    while i < points.len() {
        let Some(a) = points[i] else {
            let mut j = i;
            while j < points.len() && points[j].is_none() {
                j += 1;
            }
            out.push(if j - i == 1 {
                "_".into()
            } else {
                format!("_x{}", j - i)
            });
            i = j;
            continue;
        };
        if !a.is_finite() {
            out.push(tok(a));
            i += 1;
            continue;
        }
        // Longest run from i reproduced by repeated addition of d.
        let mut best = i;
        let mut delta = 0.0;
        if let Some(Some(b)) = points.get(i + 1) {
            let d = b - a;
            if b.is_finite() && d.is_finite() && a + d == *b {
                let mut k = a;
                let mut j = i;
                while let Some(Some(next)) = points.get(j + 1) {
                    let nk = k + d;
                    if nk.to_bits() != next.to_bits() {
                        break;
                    }
                    k = nk;
                    j += 1;
                }
                best = j;
                delta = d;
            }
        }
        let n = best - i;
        if n >= 2 {
            if delta == 0.0 {
                out.push(format!("{}x{n}", num_token(a)));
            } else if delta > 0.0 {
                out.push(format!("{}+{}x{n}", num_token(a), num_token(delta)));
            } else {
                out.push(format!("{}-{}x{n}", num_token(a), num_token(-delta)));
            }
            i = best + 1;
        } else {
            out.push(tok(a));
            i += 1;
        }
    }
    out.join(" ")
}

fn num_token(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// A promtool unit-test file (`promtool test rules`) for the rules exported
/// with `opts` (written as `rule_file`), from the series of `input.data` that
/// the rules read: each series keeps its labels (`instance` is the target),
/// loses cptriage's `role` label and gains the role's `role_labels`; an
/// exposition's own `job` label becomes `exported_job`. Points are on the
/// `interval` grid from `start`, `_` where a target has no sample.
pub fn promtool_test(
    rules: &RuleSet,
    opts: &ExportOptions,
    rule_file: &str,
    input: &UnitTestInput,
) -> Result<String, ExportError> {
    let err = |message: String| ExportError::UnitTest {
        test: input.name.clone(),
        message,
    };
    if input.interval <= 0 {
        return Err(err("the interval must be positive".into()));
    }
    for (role, labels) in &input.role_labels {
        if !opts.selector(*role).matches(labels) {
            return Err(err(format!(
                "the {} labels {} do not match the selector `{}`",
                role.as_str(),
                series_text("", labels),
                opts.selector(*role).text
            )));
        }
    }
    let series = input_series(rules, opts, input).map_err(err)?;
    let tests = alert_tests(rules, opts, input).map_err(err)?;
    let file = UnitFile {
        rule_files: vec![rule_file.to_string()],
        evaluation_interval: format_duration(input.interval),
        tests: vec![UnitTest {
            name: input.name.clone(),
            interval: format_duration(input.interval),
            input_series: series,
            alert_rule_test: tests,
        }],
    };
    serde_yaml::to_string(&file).map_err(|e| ExportError::Yaml(e.to_string()))
}

/// The series of a unit test: those of the metrics the rules read, of a
/// role they judge, labelled as the selectors expect, sorted.
fn input_series(
    rules: &RuleSet,
    opts: &ExportOptions,
    input: &UnitTestInput,
) -> Result<Vec<InputSeries>, String> {
    let roles: BTreeMap<&str, SignalRole> = [SignalRole::Apiserver, SignalRole::Etcd, SignalRole::Controller]
        .into_iter()
        .map(|r| (r.as_str(), r))
        .collect();
    let wanted: BTreeSet<String> = rules
        .signals
        .iter()
        .flat_map(|s| s.reads.iter())
        .flat_map(|r| r.metrics.iter().cloned())
        .collect();
    let instant = instant_metrics(rules, opts.window);
    let keep = input
        .prune_constant
        .then(|| pruned_keep_set(input.data, &wanted, &instant));
    let end = input
        .data
        .store
        .time_range()
        .map(|(_, b)| b)
        .unwrap_or(input.start);
    let steps = usize::try_from((end - input.start + input.snap) / input.interval).unwrap_or(0) + 1;
    let mut series = Vec::new();
    for (id, s) in input.data.store.series().iter().enumerate() {
        let Some(name) = s.labels.metric_name() else {
            continue;
        };
        if !wanted.contains(name) || keep.as_ref().is_some_and(|k| !k.contains(&id)) {
            continue;
        }
        let Some(role) = s.labels.get(ROLE_LABEL).and_then(|r| roles.get(r)) else {
            continue;
        };
        let mut labels = export_labels(&s.labels);
        if let Some(extra) = input.role_labels.get(role) {
            labels.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let text = series_text(name, &labels);
        let points = grid_points(s.points.iter().map(|p| (p.t, p.v)), steps, input)
            .map_err(|e| format!("series {text} has {e}"))?;
        if !points.is_empty() {
            series.push(InputSeries {
                series: text,
                values: notation(&points),
            });
        }
    }
    series.sort_by(|a, b| a.series.cmp(&b.series));
    Ok(series)
}

/// A series' samples on the test's grid (`None` where it has none), each
/// within `input.snap` of its grid point; trailing gaps dropped.
fn grid_points(
    samples: impl Iterator<Item = (Millis, f64)>,
    steps: usize,
    input: &UnitTestInput,
) -> Result<Vec<Option<f64>>, String> {
    let mut points = vec![None; steps];
    for (t, v) in samples {
        let off = t - input.start;
        let k = (off + input.interval / 2).div_euclid(input.interval);
        if off < -input.snap || (off - k * input.interval).abs() > input.snap {
            return Err(format!(
                "a sample at {t} ms, off the {} grid from the start",
                format_duration(input.interval)
            ));
        }
        if let Some(slot) = points.get_mut(usize::try_from(k).unwrap_or(usize::MAX)) {
            if slot.is_some() {
                return Err(format!(
                    "two samples within {} ms of one grid point ({t} ms)",
                    input.snap
                ));
            }
            *slot = Some(v);
        }
    }
    while points.last().is_some_and(Option::is_none) {
        points.pop();
    }
    Ok(points)
}

/// The alert checks of a unit test: each leaf's alert firing on the given
/// instances (with the annotations the export writes), or not at all.
fn alert_tests(
    rules: &RuleSet,
    opts: &ExportOptions,
    input: &UnitTestInput,
) -> Result<Vec<AlertTest>, String> {
    let mut tests = Vec::new();
    for c in &input.checks {
        let l = rules
            .leaf(&c.leaf)
            .ok_or_else(|| format!("unknown leaf `{}`", c.leaf))?;
        let leaf = &rules.leaves[l];
        let mut insts = c.instances.clone();
        insts.sort();
        insts.dedup();
        let exp_alerts = insts
            .iter()
            .map(|i| {
                let mut labels = leaf_labels(leaf);
                labels.insert("instance".into(), i.clone());
                ExpAlert {
                    exp_labels: labels,
                    exp_annotations: leaf_annotations(rules, l, &rules.logic[l], opts, Some(i)),
                }
            })
            .collect();
        tests.push(AlertTest {
            eval_time: format_duration(c.eval_time),
            alertname: alert_name(&leaf.id),
            exp_alerts,
        });
    }
    Ok(tests)
}

/// Metric names some signal expression reads with an instant selector (outside
/// a range selector), with `$window` resolved.
fn instant_metrics(rules: &RuleSet, window: Millis) -> BTreeSet<String> {
    use promql_parser::util::visitor::{walk_expr, ExprVisitor};
    struct V(BTreeSet<String>);
    impl ExprVisitor for V {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, Self::Error> {
            if let Expr::VectorSelector(vs) = e {
                let name = vs.name.clone().or_else(|| {
                    vs.matchers
                        .matchers
                        .iter()
                        .find(|m| m.name == METRIC_NAME)
                        .map(|m| m.value.clone())
                });
                if let Some(n) = name {
                    self.0.insert(n);
                }
            }
            Ok(true)
        }
    }
    let mut v = V(BTreeSet::new());
    for text in rules.signals.iter().flat_map(|s| s.exprs.iter()) {
        if let Ok(e) = crate::eval::parse(&substitute_window(text, window)) {
            let _ = walk_expr(&mut v, &e);
        }
    }
    v.0
}

/// Ids of the stored series a pruned unit test keeps (see
/// [`UnitTestInput::prune_constant`]).
fn pruned_keep_set(data: &Dataset, wanted: &BTreeSet<String>, instant: &BTreeSet<String>) -> BTreeSet<usize> {
    // (metric, labels but `le`) → (series ids, whether any changes).
    type Group = (String, Vec<(String, String)>);
    let mut groups: BTreeMap<Group, (Vec<usize>, bool)> = BTreeMap::new();
    for (id, s) in data.store.series().iter().enumerate() {
        let Some(name) = s.labels.metric_name() else {
            continue;
        };
        if !wanted.contains(name) {
            continue;
        }
        let key: Vec<(String, String)> = s
            .labels
            .iter()
            .filter(|l| &*l.name != "le" && &*l.name != METRIC_NAME)
            .map(|l| (l.name.to_string(), l.value.to_string()))
            .collect();
        let changes = instant.contains(name)
            || s.points
                .first()
                .is_some_and(|f| s.points.iter().any(|p| p.v.to_bits() != f.v.to_bits()));
        let g = groups.entry((name.to_string(), key)).or_default();
        g.0.push(id);
        g.1 |= changes;
    }
    let mut keep = BTreeSet::new();
    let mut anchored: BTreeSet<(String, String)> = BTreeSet::new();
    for ((name, key), (ids, changes)) in groups {
        let inst = key
            .iter()
            .find(|(k, _)| k == "instance")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if changes || anchored.insert((name, inst)) {
            keep.extend(ids);
        }
    }
    keep
}

/// A stored series' labels as written for Prometheus: without the metric name
/// and cptriage's `role`, an exposition's own `job` renamed `exported_job`.
fn export_labels(l: &Labels) -> BTreeMap<String, String> {
    l.iter()
        .filter(|x| &*x.name != METRIC_NAME && &*x.name != ROLE_LABEL)
        .map(|x| {
            let n = if &*x.name == "job" {
                "exported_job".to_string()
            } else {
                x.name.to_string()
            };
            (n, x.value.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::notation::{expand_values, Point};

    #[test]
    fn alert_names_are_camel_case() {
        assert_eq!(alert_name("etcd-disk"), "CptriageEtcdDisk");
        assert_eq!(alert_name("etcd-commit-stall"), "CptriageEtcdCommitStall");
        assert_eq!(alert_name("apf"), "CptriageApf");
    }

    #[test]
    fn selectors_refuse_what_is_not_label_matchers() {
        for bad in ["up{job=\"x\"}", "{job=\"x\"} offset 5m", "rate(x[5m])", "{job="] {
            let e = ExportOptions::new(DEFAULT_APISERVER_SELECTOR, bad, DEFAULT_CONTROLLER_SELECTOR)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("invalid selector `{bad}` for --etcd-selector")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn selector_replaces_role_in_every_selector() {
        let sel = RoleSelector::parse(Role::Apiserver, "-", "{job=\"apiserver\", cluster=~\"a|b\"}").unwrap();
        let e = export_expr(
            "sum by (instance) (rate(a_total{x=\"1\"}[$window])) / on (instance) b",
            120_000,
            &sel,
        )
        .unwrap();
        assert_eq!(
            e,
            "sum by (instance) (rate(a_total{cluster=~\"a|b\",job=\"apiserver\",x=\"1\"}[2m])) / on (instance) b{cluster=~\"a|b\",job=\"apiserver\"}"
        );
    }

    #[test]
    fn notation_round_trips_through_the_expander() {
        let cases: Vec<Vec<Option<f64>>> = vec![
            vec![
                Some(0.0),
                Some(300.0),
                Some(600.0),
                Some(900.0),
                None,
                None,
                Some(5.0),
                Some(0.1),
            ],
            vec![Some(0.1), Some(0.2), Some(0.30000000000000004), Some(0.4)],
            vec![
                Some(7.0),
                Some(7.0),
                Some(7.0),
                Some(3.0),
                Some(1.0),
                Some(-1.0),
                Some(-3.0),
            ],
            vec![
                Some(f64::NAN),
                Some(1e21),
                Some(-2.5e-7),
                Some(crate::store::stale_nan()),
            ],
        ];
        for pts in cases {
            let text = notation(&pts);
            let back = expand_values(&text).unwrap();
            assert_eq!(back.len(), pts.len(), "{text}");
            for (p, b) in pts.iter().zip(&back) {
                match (p, b) {
                    (None, Point::Blank) => {}
                    (Some(x), Point::Value(y)) if x.is_nan() => assert!(y.is_nan(), "{text}"),
                    (Some(x), Point::Value(y)) => assert_eq!(x.to_bits(), y.to_bits(), "{text}"),
                    _ => panic!("{text}: {p:?} vs {b:?}"),
                }
            }
        }
        assert_eq!(notation(&[Some(0.0), Some(300.0), Some(600.0)]), "0+300x2");
        assert_eq!(
            notation(&[Some(5.0), Some(5.0), Some(5.0), None, None]),
            "5x2 _x2"
        );
    }
    fn opts() -> ExportOptions {
        ExportOptions::new(
            DEFAULT_APISERVER_SELECTOR,
            DEFAULT_ETCD_SELECTOR,
            DEFAULT_CONTROLLER_SELECTOR,
        )
        .expect("default selectors")
    }

    #[test]
    fn thresholds_become_comparisons_with_a_rolling_median() {
        use crate::rules::model::Relative;
        let mut o = opts();
        o.baseline_window = 600_000;
        o.baseline_offset = 1_800_000;
        let t = Threshold {
            above: Some(0.5),
            below: None,
            relative: Some(Relative {
                factor: 4.0,
                floor: 0.05,
                direction: Direction::Above,
                peers: false,
            }),
            combine: Combine::Any,
        };
        // The signals are read without their recording labels.
        let x = "max without (cptriage_digest, cptriage_window) (cptriage:x)";
        let base = "max without (cptriage_digest, cptriage_window) (quantile_over_time(0.5, cptriage:x[10m] offset 30m))";
        assert_eq!(
            lit_expr("x", &t, &o).unwrap(),
            format!("({x} > 0.5) or (({x} > 4 * {base}) and ({x} > 0.05))")
        );
        let below = Threshold {
            above: None,
            below: None,
            relative: Some(Relative {
                factor: 0.2,
                floor: 1.0,
                direction: Direction::Below,
                peers: false,
            }),
            combine: Combine::Any,
        };
        let w = "max without (cptriage_digest, cptriage_window) (cptriage:w_r)";
        let base = "max without (cptriage_digest, cptriage_window) (quantile_over_time(0.5, cptriage:w_r[10m] offset 30m))";
        assert_eq!(
            lit_expr("w-r", &below, &o).unwrap(),
            format!("({w} < 0.2 * {base}) and ({base} > 1)")
        );
        let all = Threshold {
            combine: Combine::All,
            ..t
        };
        assert!(lit_expr("x", &all, &o)
            .unwrap()
            .starts_with(&format!("({x} > 0.5) and (")));
    }

    fn one_series(times: &[Millis]) -> Dataset {
        let mut store = crate::store::Store::new();
        let l = Labels::from_pairs([
            (METRIC_NAME, "etcd_server_has_leader"),
            ("instance", "etcd-0"),
            ("role", "etcd"),
            ("job", "own"),
        ]);
        for &t in times {
            store.push(&l, t, 1.0);
        }
        store.finish();
        Dataset {
            store,
            targets: Vec::new(),
            warnings: Vec::new(),
            audit: None,
            logs: None,
        }
    }

    fn input<'a>(data: &'a Dataset, job: &str) -> UnitTestInput<'a> {
        UnitTestInput {
            name: "t".into(),
            data,
            start: 1_000_000,
            interval: 15_000,
            role_labels: BTreeMap::from([(
                SignalRole::Etcd,
                BTreeMap::from([("job".to_string(), job.to_string())]),
            )]),
            checks: vec![AlertCheck {
                eval_time: 30_000,
                leaf: "etcd-raft".into(),
                instances: vec![],
            }],
            prune_constant: false,
            snap: 0,
        }
    }

    #[test]
    fn unit_tests_carry_the_series_in_notation_with_selector_labels() {
        let rules = RuleSet::default_rules().unwrap();
        let data = one_series(&[1_000_000, 1_030_000, 1_045_000]);
        let text = promtool_test(&rules, &opts(), "r.yaml", &input(&data, "etcd")).unwrap();
        assert!(
            text.contains(
                "series: etcd_server_has_leader{exported_job=\"own\",instance=\"etcd-0\",job=\"etcd\"}"
            ),
            "{text}"
        );
        assert!(text.contains("values: 1 _ 1 1"), "{text}");
        assert!(
            text.contains("alertname: CptriageEtcdRaft\n    exp_alerts: []"),
            "{text}"
        );
        assert!(!text.contains("role="), "{text}");
    }

    #[test]
    fn unit_tests_refuse_labels_off_the_selector_and_samples_off_the_grid() {
        let rules = RuleSet::default_rules().unwrap();
        let data = one_series(&[1_000_000, 1_030_000]);
        let e = promtool_test(&rules, &opts(), "r.yaml", &input(&data, "apiserver")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unit test `t`: the etcd labels {job=\"apiserver\"} do not match the selector `{job=~\".*etcd.*\"}`"
        );
        let data = one_series(&[1_000_000, 1_020_000]);
        let e = promtool_test(&rules, &opts(), "r.yaml", &input(&data, "etcd")).unwrap_err();
        assert!(e.to_string().contains("off the 15s grid"), "{e}");
    }
}
