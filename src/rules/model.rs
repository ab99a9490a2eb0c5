//! The rule-file format as written in YAML (`rules/default.yaml`, `--rules FILE`).
//!
//! Parsing is strict: unknown keys are rejected. The grammar is documented in
//! `rules/README.md`; [`super::load`] turns a [`RuleFile`] into a checked
//! [`super::RuleSet`].

use serde::{Deserialize, Serialize};

/// Format version this build reads.
pub const FORMAT_VERSION: u32 = 1;

/// The whole rule file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    /// Format version; must be [`FORMAT_VERSION`].
    pub version: u32,
    /// Free text shown by `cptriage tree`.
    #[serde(default)]
    pub description: Option<String>,
    /// Id of the first node of the walk (the symptom question).
    pub root: String,
    pub signals: Vec<SignalDef>,
    pub nodes: Vec<NodeDef>,
    pub leaves: Vec<LeafDef>,
    /// Per role of target, the question that says whether that part of the
    /// control plane is healthy by its own metrics. With data of some roles
    /// only, cptriage judges the scopes it can and says which it could not.
    #[serde(default)]
    pub scopes: Vec<ScopeDef>,
    /// Advice that is not a failing axis: a property of the control plane
    /// the data shows (a Kine backend, events on the shared etcd), stated with
    /// its evidence, an ADR-ready sentence and a falsifier.
    #[serde(default)]
    pub advisories: Vec<AdvisoryDef>,
    /// What can make an axis light from below (slow etcd makes requests hold
    /// APF seats): an axis is named the root cause only when each of its
    /// possible causes was read up to its onset.
    #[serde(default)]
    pub causes: Vec<CauseDef>,
}

/// A cause that can make other leaves light (see [`RuleFile::causes`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CauseDef {
    pub id: String,
    /// What it is, for people: "etcd latency".
    pub title: String,
    /// The signals that read it: it counts as read when one of them was
    /// judged in the window up to an effect's onset.
    pub read_by: Vec<String>,
    /// The leaves it can make light.
    pub effects: Vec<String>,
    /// The signals of its effects it makes light (e.g. the apiserver's etcd
    /// request errors, not its 409s): when given, an effect counts as caused
    /// by it only while one of them is lit; an effect lit by its other
    /// signals alone is decided without it. Empty: any of the effect's
    /// signals.
    #[serde(default)]
    pub through: Vec<String>,
    /// What a user adds to their monitoring to read it (shown when it could
    /// not be read).
    #[serde(default)]
    pub remedy: Option<String>,
}

/// An advisory: when `when` holds (and `unless` does not) at some step of the
/// window, the report states `advice` with the evidence signals and the
/// falsifier, and marks `not_applicable` leaves as such (with `reason`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvisoryDef {
    pub id: String,
    /// One line, for tables.
    pub title: String,
    pub when: Condition,
    /// The advisory does not apply at a step where this holds.
    #[serde(default)]
    pub unless: Option<Condition>,
    /// The decision the evidence supports, written to be pasted into an
    /// architecture decision record.
    pub advice: String,
    /// The observation that would prove the advice wrong.
    pub falsifier: String,
    /// Leaves that do not apply while the advisory holds (not lit ones are
    /// reported "not applicable" with `reason`).
    #[serde(default)]
    pub not_applicable: Vec<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Signals shown as its evidence.
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// The question that judges one role's health by its own metrics.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeDef {
    pub role: SignalRole,
    /// A node id: its `no` at the assessment time, with its `needs` read, is
    /// "healthy" for this role.
    pub node: String,
    /// How the healthy answer reads, e.g. "clients see no errors or slow requests".
    pub healthy: String,
}

/// Which kind of target a signal reads. The engine adds `role="<role>"` to every
/// selector of the expression, so expressions never mention the role.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum SignalRole {
    Apiserver,
    Etcd,
    Controller,
    /// Audit logs (`--audit`), as counters ([`crate::source::audit::names`]).
    Audit,
    /// etcd and kube-apiserver logs (`--logs`), as counters ([`crate::source::logs::names`]).
    Logs,
    /// node-exporter and cAdvisor series of the node a member runs on, mapped
    /// to the member ([`crate::source::nodemap`]).
    Node,
}

impl SignalRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalRole::Apiserver => "apiserver",
            SignalRole::Etcd => "etcd",
            SignalRole::Controller => "controller",
            SignalRole::Audit => "audit",
            SignalRole::Logs => "logs",
            SignalRole::Node => "node",
        }
    }

    /// The dataset role this signal reads.
    pub fn role(self) -> crate::source::Role {
        match self {
            SignalRole::Apiserver => crate::source::Role::Apiserver,
            SignalRole::Etcd => crate::source::Role::Etcd,
            SignalRole::Controller => crate::source::Role::Controller,
            SignalRole::Audit => crate::source::Role::Audit,
            SignalRole::Logs => crate::source::Role::Logs,
            SignalRole::Node => crate::source::Role::Node,
        }
    }
}

/// How a signal's value is rendered.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    Seconds,
    Ratio,
    PerSecond,
    Bytes,
    Count,
}

impl Unit {
    /// Formats a value for people: `1.2 s`, `7 ms`, `3.5%`, `12/s`, `1.9 GiB`.
    pub fn format(self, v: f64) -> String {
        if v.is_nan() {
            return "NaN".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "+Inf".into() } else { "-Inf".into() };
        }
        let sig = |x: f64| -> String {
            let a = x.abs();
            if a == 0.0 {
                "0".into()
            } else if a >= 1e15 {
                // Not 309 digits for 1e308.
                format!("{x:.2e}")
            } else if a >= 1e4 {
                // Three significant digits and an SI prefix: 1.4M, not 1401000.
                let q = 10f64.powf(a.log10().floor() - 2.0);
                let r = (x / q).round() * q;
                let (d, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
                    .into_iter()
                    .find(|(d, _)| r.abs() >= *d)
                    .unwrap_or((1.0, ""));
                format!("{}{p}", trim_num(r / d))
            } else if a >= 100.0 {
                format!("{x:.0}")
            } else if a >= 10.0 {
                trim_num((x * 10.0).round() / 10.0)
            } else if a >= 1.0 {
                trim_num((x * 100.0).round() / 100.0)
            } else if a >= 1e-6 {
                // Two significant digits as a plain decimal (`0.095`), not `9.54e-2`.
                let decimals = (-a.log10()).ceil() as usize + 1;
                let t = format!("{x:.decimals$}");
                t.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                format!("{x:.2e}")
            }
        };
        match self {
            Unit::Seconds => {
                if v.abs() < 1.0 && v != 0.0 {
                    format!("{} ms", sig(v * 1000.0))
                } else {
                    format!("{} s", sig(v))
                }
            }
            Unit::Ratio => format!("{}%", sig(v * 100.0)),
            Unit::PerSecond => format!("{}/s", sig(v)),
            Unit::Bytes => {
                let units = ["B", "KiB", "MiB", "GiB", "TiB"];
                let mut x = v;
                let mut i = 0;
                while x.abs() >= 1024.0 && i + 1 < units.len() {
                    x /= 1024.0;
                    i += 1;
                }
                format!("{} {}", sig(x), units[i])
            }
            Unit::Count => sig(v),
        }
    }
}

/// A number with at most three decimals and no trailing zeros.
fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// One measured quantity: a PromQL expression per target of a role, compared with
/// a threshold.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalDef {
    pub id: String,
    pub role: SignalRole,
    pub description: String,
    pub unit: Unit,
    /// PromQL; `$window` stands for the range window chosen by the engine.
    pub expr: String,
    /// Further expressions for other metric names or labels, tried in order when
    /// the metrics of `expr` are not exposed.
    #[serde(default)]
    pub alternatives: Vec<String>,
    /// Metric families that targets expose only after the first event (for
    /// example APF rejections or webhook errors). Their absence does not rule an
    /// expression out; expressions read an absent family as zero with `or … * 0`.
    #[serde(default)]
    pub optional_metrics: Vec<String>,
    pub threshold: Threshold,
    /// What to evaluate instead when the data is a single snapshot (no time
    /// series, so no `rate`): a since-process-start form of the signal, with its
    /// own threshold.
    #[serde(default)]
    pub snapshot: Option<SnapshotDef>,
    /// What to evaluate instead when no expression's metrics are exposed but
    /// the histogram's `_sum` and `_count` are (monitoring that drops
    /// `_bucket` series): the mean, `rate(_sum) / rate(_count)`, with its own
    /// threshold (baseline and an absolute floor).
    #[serde(default)]
    pub mean: Option<SnapshotDef>,
    /// How long an instance must stay lit before the signal counts, like a
    /// Prometheus alert's `for:` (a duration, or `$window` for one range
    /// window). The onset is still the first lit step. Event counters need
    /// none (`0s`); tail latencies at least one window. Default: one step.
    #[serde(default, rename = "for")]
    pub persistence: Option<Persistence>,
    /// The observations a value rests on: below `min`, the value is shown but
    /// not judged (a quantile of a handful of observations is noise).
    #[serde(default)]
    pub observations: Option<ObservationsDef>,
    /// Who contributes: the signal's numerator by labels (flow schema and
    /// priority level, resource and verb), shown with the evidence.
    #[serde(default)]
    pub breakdown: Option<BreakdownDef>,
    /// Judged in the warm-up after a process start too: for signals about the
    /// start itself (a replica that restarted, caches initialising), which the
    /// warm-up would otherwise hide.
    #[serde(default)]
    pub judge_warmup: bool,
    /// Steps at which this signal's value still carries an earlier fault's
    /// wait, not the present (see [`QuietAfter`]).
    #[serde(default)]
    pub quiet_after: Option<QuietAfter>,
}

/// A signal not counted while another is lit on any instance and for `for`
/// after it (see [`SignalDef::quiet_after`]). etcd's peers keep probing a
/// member that is cut off; the probes sent into the cut complete when it
/// heals, and etcd's smoothed round trip carries their wait for minutes
/// after: those round trips are the echo of the cut, not a slow path now.
/// Such steps are judged unlit, and the evidence says how many.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuietAfter {
    pub signal: String,
    #[serde(rename = "for")]
    pub duration: RuleDuration,
}

/// The contributors to a signal (see [`SignalDef::breakdown`]): an expression
/// keeping `instance` and the `by` labels, tried like the signal's own
/// (alternatives in order, the first whose metrics are exposed).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakdownDef {
    /// The labels that name a contributor, e.g. `[flow_schema, priority_level]`.
    pub by: Vec<String>,
    /// The unit of the breakdown's values (e.g. `per-second` for the rate of
    /// the requests a ratio signal counts).
    pub unit: Unit,
    /// How instances combine: `sum` (rates, the default) or `max` (gauges
    /// of shared state every replica reports, such as object counts).
    #[serde(default)]
    pub across: Across,
    pub expr: String,
    #[serde(default)]
    pub alternatives: Vec<String>,
}

/// How a breakdown combines the instances' values of one contributor.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Across {
    #[default]
    Sum,
    Max,
}

/// How long a signal must stay lit (see [`SignalDef::persistence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Persistence {
    /// A fixed duration.
    Duration(RuleDuration),
    /// One range window (`$window`), whatever it resolves to.
    Window,
}

impl TryFrom<String> for Persistence {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.trim() == "$window" {
            return Ok(Persistence::Window);
        }
        RuleDuration::try_from(s)
            .map(Persistence::Duration)
            .map_err(|e| format!("{e}, or `$window`"))
    }
}

impl Persistence {
    /// The duration in milliseconds for a resolved `$window` of `range`.
    pub fn millis(self, range: i64) -> i64 {
        match self {
            Persistence::Duration(RuleDuration(ms)) => ms,
            Persistence::Window => range,
        }
    }

    /// As written in a rule file.
    pub fn text(self) -> String {
        match self {
            Persistence::Duration(RuleDuration(ms)) => crate::timefmt::format_duration(ms),
            Persistence::Window => "$window".into(),
        }
    }
}

/// The number of observations behind a signal's value (see
/// [`SignalDef::observations`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationsDef {
    /// PromQL giving, per instance, the observations in the window (e.g.
    /// `sum by (instance) (increase(x_count[$window]))`).
    pub expr: String,
    /// Fewest observations for the value to be judged.
    pub min: f64,
    /// The value is a share of these observations (e.g. of WAL fsyncs slower
    /// than 64 ms): it is judged by its 95% Wilson score bound (the lower bound
    /// against `above`, the upper against `below`), so that a share of few
    /// observations must be clearer to light than a share of many.
    #[serde(default)]
    pub proportion: bool,
}

/// Another form of a signal with its own expression and threshold: the
/// since-process-start form of a single snapshot (`snapshot:`), or the mean of
/// a histogram whose buckets are gone (`mean:`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotDef {
    pub description: String,
    /// PromQL without range functions.
    pub expr: String,
    #[serde(default)]
    pub alternatives: Vec<String>,
    #[serde(default)]
    pub optional_metrics: Vec<String>,
    pub threshold: Threshold,
    /// The unit of the since-start value when it differs from the signal's
    /// (a rate per second becomes a count since the process started).
    #[serde(default)]
    pub unit: Option<Unit>,
    /// The observations behind the since-start value (see [`ObservationsDef`]).
    #[serde(default)]
    pub observations: Option<ObservationsDef>,
}

/// When a signal value is "lit".
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    /// Lit when the value is strictly above this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<f64>,
    /// Lit when the value is strictly below this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    /// Lit relative to the instance's baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<Relative>,
    /// How the absolute and relative parts combine when both are given.
    #[serde(default)]
    pub combine: Combine,
}

impl Threshold {
    /// Whether the signal is a yes/no flag: a 0/1 count lit below 1 (a member
    /// answering its scrape, having a leader); its description states the "yes".
    pub fn is_flag(&self, unit: Unit) -> bool {
        unit == Unit::Count && self.above.is_none() && self.relative.is_none() && self.below == Some(1.0)
    }

    /// A value of a signal with this threshold for people: `yes`/`no` for a
    /// flag, else [`Unit::format`].
    pub fn format_value(&self, unit: Unit, v: f64) -> String {
        if self.is_flag(unit) && (v == 0.0 || v == 1.0) {
            if v == 1.0 { "yes" } else { "no" }.to_string()
        } else {
            unit.format(v)
        }
    }

    /// Human form of the threshold, values formatted in `unit`:
    /// `> 500 ms or > 4 × baseline (and > 50 ms)`.
    pub fn text(&self, unit: Unit) -> String {
        let mut parts = Vec::new();
        if let Some(a) = self.above {
            parts.push(format!("> {}", unit.format(a)));
        }
        if let Some(b) = self.below {
            parts.push(format!("< {}", unit.format(b)));
        }
        if let Some(r) = &self.relative {
            parts.push(match r.direction {
                Direction::Above => format!(
                    "> {} × baseline (and > {})",
                    trim_num(r.factor),
                    unit.format(r.floor)
                ),
                Direction::Below => format!(
                    "< {} × baseline (when baseline > {})",
                    trim_num(r.factor),
                    unit.format(r.floor)
                ),
            });
        }
        let sep = match self.combine {
            Combine::Any => " or ",
            Combine::All => " and ",
        };
        parts.join(sep)
    }
}

/// A threshold relative to the baseline (the median of the instance's values over
/// the baseline period).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Relative {
    /// `above`: lit when value > factor × baseline and value > floor.
    /// `below`: lit when value < factor × baseline and baseline > floor.
    pub factor: f64,
    pub floor: f64,
    #[serde(default)]
    pub direction: Direction,
    /// Where no instance has a baseline (the window holds no step outside
    /// warm-up in its first quarter), judge each step against the median of
    /// the other instances at that step instead (at least two of them). Only
    /// for signals on which the instances are peers doing the same work
    /// (the round trips of the probes to each etcd member): one member far
    /// from the others is the anomaly a baseline would have shown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peers: bool,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Above,
    Below,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    #[default]
    Any,
    All,
}

/// A condition over signals: a signal id, or `any:` / `all:` lists (nestable).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Condition {
    Signal(String),
    Any { any: Vec<Condition> },
    All { all: Vec<Condition> },
}

impl Condition {
    /// Every signal id mentioned, in order of appearance.
    pub fn signals(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Condition::Signal(s) => out.push(s),
            Condition::Any { any: v } | Condition::All { all: v } => {
                for c in v {
                    c.collect(out);
                }
            }
        }
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Condition::Signal(s) => f.write_str(s),
            Condition::Any { any: v } | Condition::All { all: v } => {
                let op = if matches!(self, Condition::Any { .. }) {
                    " or "
                } else {
                    " and "
                };
                f.write_str("(")?;
                for (i, c) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(op)?;
                    }
                    write!(f, "{c}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// A question of the exclusion tree.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDef {
    pub id: String,
    pub question: String,
    /// A gate (the symptom question) stops the walk at `no`, but axis timelines
    /// do not require it: an upstream cause lights before clients feel it.
    #[serde(default)]
    pub gate: bool,
    pub when: Condition,
    /// Once `when` holds, the node stays lit at the following steps for as
    /// long as this condition holds: an effect that outlasts its trigger (the
    /// clients a restart affected, after the restart itself).
    #[serde(default, rename = "while")]
    pub sustain: Option<Condition>,
    /// Signals that must be read for the answer to be `no`: when one of them
    /// cannot be evaluated, an unlit condition is unknown instead (the answer
    /// "no" is never given from signals that were not read).
    #[serde(default)]
    pub needs: Vec<String>,
    /// Child when the condition holds: a node id, a leaf id or `healthy`.
    pub yes: String,
    /// Child when it does not.
    pub no: String,
}

/// Severity of a leaf: P0/P1 on the strong-consistency path (apiserver → etcd
/// writes and reads), P2/P3 on the eventual path (watch propagation, controller
/// work queues, kubelet status).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    P0,
    P1,
    P2,
    P3,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::P0 => "P0",
            Severity::P1 => "P1",
            Severity::P2 => "P2",
            Severity::P3 => "P3",
        })
    }
}

/// An answer of the tree: a failing axis.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafDef {
    pub id: String,
    /// Axis id (kebab-case), e.g. `etcd`, `apf`, `watch-cache`, `joint`.
    pub axis: String,
    #[serde(default)]
    pub sub_axis: Option<String>,
    pub severity: Severity,
    /// One-line name of the failure, for tables.
    pub title: String,
    /// A fallback leaf lights only when no other leaf under the same question is
    /// lit (e.g. `joint`: a symptom that no axis explains).
    #[serde(default)]
    pub fallback: bool,
    /// The observation that would prove this verdict wrong, written for an
    /// incident record.
    pub falsifier: String,
    /// Next steps, in order.
    pub runbook: Vec<String>,
    /// Further signals shown as this leaf's evidence without deciding it (a
    /// p99 next to the robust statistic that lights the leaf).
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Why the member named is the cause, as clauses of one line: `{instance}`
    /// is the cause member(s), `{others}` the other members with data, `{ID}`
    /// signal ID's value on the cause member, `{ID.baseline}` its baseline and
    /// `{if:ID}` nothing. A clause is said when every signal it names is lit
    /// on the cause member; the first said leads. The signals must be the
    /// leaf's deciding or evidence signals.
    #[serde(default)]
    pub cause: Vec<String>,
    /// Another leaf this one explains more precisely from the same evidence
    /// plus its own (the CPU leaf refines the disk leaf: the same slow
    /// fsyncs, and the process waiting for CPU). When both are in an incident
    /// and their episodes overlap, this leaf replaces the other, dated from
    /// the earlier onset.
    #[serde(default)]
    pub refines: Option<String>,
    /// The signal whose lit instances in the episode are the cause members
    /// (the replica that restarted, not the replicas whose clients felt it),
    /// when it lit on any; otherwise they come from the leaf's own question.
    #[serde(default)]
    pub cause_instances: Option<String>,
    /// Signals that show this leaf's trouble on its cause members before its
    /// own question can (see [`EarlySigns`]).
    #[serde(default)]
    pub early_signs: Option<EarlySigns>,
}

/// A leaf's early signs (see [`LeafDef::early_signs`]). Some deciding
/// signals are recorded late: etcd records its peers' round trips only every
/// 30 s, so the network leaf confirms a slow path up to 30 s after it began,
/// while the member's own slow linearizable reads show it at the next scrape.
/// The leaf's onset is dated from the start of an unbroken run of these
/// signals on its cause members that reaches its episode, when that run
/// began after a step where they were judged unlit, and at most `within`
/// (plus one step) before the episode: a run older than that is a condition
/// of its own, not this leaf's first sign.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EarlySigns {
    pub signals: Vec<String>,
    /// How late the leaf's own question can confirm (a duration).
    pub within: RuleDuration,
}

/// A duration written in a rule file (`30s`, `1m`), in milliseconds: a
/// signal's persistence, a leaf's `early_signs.within`, `quiet_after.for`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct RuleDuration(pub i64);

impl TryFrom<String> for RuleDuration {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        crate::timefmt::parse_duration(&s)
            .map(RuleDuration)
            .map_err(|_| format!("invalid duration `{s}`: expected e.g. 30s or 1m"))
    }
}

/// The `{…}` placeholders of a cause clause, in order.
pub fn cause_placeholders(clause: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = clause;
    while let Some(a) = rest.find('{') {
        let Some(b) = rest[a..].find('}') else { break };
        out.push(&rest[a + 1..a + b]);
        rest = &rest[a + b + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Unit;

    #[test]
    fn large_values_take_an_si_prefix_and_three_digits() {
        let f = |v| Unit::PerSecond.format(v);
        assert_eq!(f(9999.0), "9999/s");
        assert_eq!(f(10000.0), "10k/s");
        assert_eq!(f(1_401_000.0), "1.4M/s");
        assert_eq!(f(1_048_576.0), "1.05M/s");
        assert_eq!(f(67_108_864.0), "67.1M/s");
        assert_eq!(f(999_999.0), "1M/s");
        assert_eq!(f(-25_000.0), "-25k/s");
        assert_eq!(Unit::Count.format(4.2e12), "4.2T");
    }
}
