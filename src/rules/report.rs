//! The `Report`: everything a renderer needs to show a diagnosis, produced by the
//! rules engine ([`crate::rules::engine::diagnose`]). Times are [`Millis`]
//! (renderers format them as RFC 3339); durations are milliseconds too.
//!
//! The JSON rendering serialises this value under a versioned envelope;
//! [`SCHEMA_VERSION`] changes whenever a field changes meaning or disappears.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{Severity, Threshold, Unit};
use crate::store::Millis;

/// Version of the report schema.
pub const SCHEMA_VERSION: u32 = 1;

/// Overall answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing lit and the symptom question answered "no".
    Healthy,
    /// An axis is lit at the assessment time (see `verdict.root_cause`).
    Degraded,
    /// Axes lit in the window, and every axis of that incident had recovered by
    /// the assessment time (`verdict.root_cause.recovered`).
    Recovered,
    /// The data cannot decide (e.g. the symptom signals are all missing and no
    /// axis is lit).
    Inconclusive,
}

impl Status {
    /// The status as written in JSON and in the unit-test expectations.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Healthy => "healthy",
            Status::Degraded => "degraded",
            Status::Recovered => "recovered",
            Status::Inconclusive => "inconclusive",
        }
    }
}

/// The result of one diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub status: Status,
    pub verdict: Verdict,
    /// The symptom question's timeline (what clients feel).
    pub symptom: Option<SymptomState>,
    /// Every leaf of the tree, in tree order.
    pub axes: Vec<AxisReport>,
    /// The walk of the tree at `window.at`.
    pub path: Vec<PathStep>,
    /// Where the walk ended: a leaf id or `healthy`.
    pub walk_end: String,
    pub gaps: Vec<Gap>,
    pub window: WindowInfo,
    pub sources: Vec<SourceInfo>,
    pub warnings: Vec<String>,
    /// Falsifier of the root-cause leaf.
    pub falsifier: Option<String>,
    /// The falsifier filled in with what was measured, and an ADR-ready
    /// sentence (`None` without a root cause).
    #[serde(default)]
    pub falsification: Option<Falsification>,
    /// Runbook of the root-cause leaf.
    pub runbook: Vec<String>,
    /// Which rules produced this report.
    pub rules: RulesInfo,
    /// Which parts of the control plane the data shows, and which were judged.
    pub scope: ScopeInfo,
    /// What the audit logs (`--audit`) held: counts, bad lines, the layer
    /// split of slow requests, the slowest requests, the most denied clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<crate::source::audit::AuditSummary>,
    /// What the etcd and kube-apiserver logs (`--logs`) held: files read and
    /// skipped, counts per member and class, bad lines, and the lines shown
    /// for the root cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<crate::source::logs::LogsSummary>,
    /// Advisories that hold in the window (`advisories:` of the rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advisories: Vec<AdvisoryReport>,
    /// Which signals were read from recorded series (`cptriage:<signal>`,
    /// `diagnose --prometheus`) and which from their raw expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<RecordedSignals>,
}

/// The paths the signals of a Prometheus diagnosis took when recorded
/// signals were found (`docs/prometheus.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedSignals {
    /// The recorded window (the export's `--window`): the diagnosis's
    /// `$window`.
    pub window: Millis,
    /// Signals read from their recorded series.
    pub recorded: Vec<String>,
    /// Signals read from their raw expressions, with why.
    pub raw: BTreeMap<String, String>,
}

impl RecordedSignals {
    /// One line for the warnings: how many signals took which path.
    pub fn line(&self) -> String {
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (s, why) in &self.raw {
            by_reason.entry(why.as_str()).or_default().push(s.as_str());
        }
        let raw: Vec<String> = by_reason
            .iter()
            .map(|(why, ss)| format!("{why}: {}", ss.join(", ")))
            .collect();
        let total = self.recorded.len() + self.raw.len();
        format!(
            "recorded signals ($window {}): {} of {total} read from cptriage:* series{}",
            crate::timefmt::format_duration(self.window),
            self.recorded.len(),
            if raw.is_empty() {
                String::new()
            } else {
                format!("; raw expressions for {} ({})", self.raw.len(), raw.join("; "))
            }
        )
    }
}

/// An advisory that holds: a property of the control plane, not a failing axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdvisoryReport {
    pub id: String,
    pub title: String,
    /// First step at which it holds.
    pub since: Millis,
    /// Whether it still holds at the assessment time.
    pub holds_at_end: bool,
    /// The ADR-ready sentence.
    pub advice: String,
    pub falsifier: String,
    pub evidence: Vec<AdvisoryEvidence>,
    /// Leaves that do not apply while it holds.
    pub not_applicable: Vec<String>,
    pub reason: Option<String>,
}

/// One signal behind an advisory, at the last step it held.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdvisoryEvidence {
    pub signal: String,
    pub description: String,
    pub value: Option<f64>,
    /// The value with its unit, or why there is none.
    pub value_text: String,
    pub threshold: String,
}

/// The root cause's falsifier filled in with the measured numbers: what the
/// verdict rests on, which competing axes were checked and found clear, and
/// what would prove it wrong.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Falsification {
    /// The root cause's deciding signals lit in its episode (its own question's
    /// first), at the reference step of its evidence.
    pub deciding: Vec<Measure>,
    /// Competing axes of the strong-consistency path (P0/P1 leaves) that were
    /// checked and stayed clear in the window: for each, the value of its
    /// deciding signal that came nearest to its threshold, at the same time.
    pub cleared: Vec<Measure>,
    /// The measurements, the cleared alternatives and the leaf's falsifier, as
    /// one paragraph for the incident record.
    pub statement: String,
    /// One sentence for an architecture decision record.
    pub adr: String,
}

/// One measured value of a signal, as the falsifier quotes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// `axis` or `axis/sub_axis`.
    pub axis: String,
    pub signal: String,
    pub description: String,
    pub unit: Unit,
    /// The worst instance's value.
    pub value: Option<f64>,
    /// That instance's baseline.
    pub baseline: Option<f64>,
    pub threshold_text: String,
    /// The instance the value is from.
    pub instance: Option<String>,
    /// When the value was measured.
    pub at: Option<Millis>,
}

impl Measure {
    /// "share of WAL fsyncs slower than 64 ms 100% on etcd-0 (threshold > 10%, baseline 0%)".
    pub fn text(&self) -> String {
        let v = self
            .value
            .map(|v| self.unit.format(v))
            .unwrap_or_else(|| "no value".into());
        let mut s = format!("{} {v}", self.description);
        if let Some(i) = &self.instance {
            s.push_str(&format!(" on {i}"));
        }
        s.push_str(&format!(" (threshold {}", self.threshold_text));
        if let Some(b) = self.baseline {
            s.push_str(&format!(", baseline {}", self.unit.format(b)));
        }
        s.push(')');
        s
    }
}

/// The parts of the control plane (roles) the data covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScopeInfo {
    /// Roles with at least one target in the data.
    pub observed: Vec<String>,
    /// Roles whose scope question could be answered at the assessment time.
    pub judged: Vec<String>,
    /// Roles the rules judge that the data does not show.
    pub not_observed: Vec<String>,
}

/// One lit run of an axis (gaps shorter than its persistence merged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub leaf: String,
    pub axis: String,
    pub sub_axis: Option<String>,
    pub onset: Millis,
    /// First unlit step after the episode; `None` while it lasts.
    pub recovered: Option<Millis>,
}

/// The verdict: the root cause and what followed it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// One sentence for the top of a table or an incident note.
    pub summary: String,
    pub root_cause: Option<RootCause>,
    /// The failing axis when its cause is undecided: an axis that could have
    /// made it light (`causes:` of the rules) could not be read up to its
    /// onset, so it is not named the root cause (`root_cause` is then `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecided: Option<Undecided>,
    /// The incident's axes are no longer lit, but only because signals that
    /// could show it continuing were not read: the recovery is not claimed
    /// (the status stays degraded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_unconfirmed: Option<RecoveryUnconfirmed>,
    /// More precise answers the root cause could not exclude: leaves that
    /// refine it (`refines:`) whose question could not be decided because
    /// signals that could light it were not read (the CPU, for a slow disk
    /// named without the peers' round trips).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_excluded: Vec<NotExcluded>,
    /// Axes lit after the root cause, with their lag.
    pub downstream: Vec<Downstream>,
    /// Axes whose onsets are within one step of the root cause's.
    pub ties: Vec<Tie>,
    /// Assumptions the verdict rests on (tie broken by tree order, no onsets
    /// available, …).
    pub assumptions: Vec<String>,
    /// Episodes of earlier, separate incidents in the window (the verdict is
    /// about the incident lit at the assessment time, or the latest one).
    pub earlier: Vec<Episode>,
    /// What audit logs (`--audit`) say about the root cause: they confirm it,
    /// contradict it (point at another axis), do not confirm it, or cannot tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corroboration: Vec<Corroboration>,
}

impl Verdict {
    /// The failing axis the verdict is about: the root cause, or the axis
    /// whose cause is undecided.
    pub fn failing(&self) -> Option<&RootCause> {
        self.root_cause
            .as_ref()
            .or(self.undecided.as_ref().map(|u| &u.failing))
    }
}

/// An axis as people and the rules name it: `etcd/disk`, or `apf` without a
/// sub-axis. The one place `axis/sub` is written.
pub fn axis_id(axis: &str, sub_axis: Option<&str>) -> String {
    match sub_axis {
        Some(s) => format!("{axis}/{s}"),
        None => axis.to_string(),
    }
}

macro_rules! axis_id_of {
    ($($t:ty),*) => {$(
        impl $t {
            /// Its axis as people read it ([`axis_id`]): `etcd/disk`.
            pub fn axis_id(&self) -> String {
                axis_id(&self.axis, self.sub_axis.as_deref())
            }
        }
    )*};
}

axis_id_of!(RootCause, Downstream, Tie, Episode, AxisReport);

/// A failing axis whose cause the data cannot decide.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Undecided {
    /// The failing axis, as a root cause would be reported.
    pub failing: RootCause,
    /// The possible causes that could not be read up to its onset.
    pub unread: Vec<UnreadCause>,
    /// "cause undecided: etcd latency could not be read (no etcd_request_duration_seconds_bucket)".
    pub text: String,
}

/// A possible cause of the failing axis that the data could not read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnreadCause {
    /// The cause's id in the rules (`etcd-latency`).
    pub cause: String,
    pub title: String,
    /// The signals that would have read it.
    pub signals: Vec<String>,
    /// Why each could not be read (metrics not exposed, no targets of the role).
    pub reasons: Vec<String>,
    /// What to add to the monitoring to read it.
    pub remedy: Option<String>,
}

/// A leaf refining the root cause whose question could not be decided: the
/// root cause may be it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotExcluded {
    /// The refining leaf.
    pub leaf: String,
    /// Its axis name (`etcd/cpu`).
    pub axis: String,
    /// Signals of its question, not read, that could light it.
    pub unread: Vec<UnreadSignal>,
    /// "etcd/cpu not excluded (no etcd_network_peer_round_trip_time_seconds_count)".
    pub text: String,
}

/// A recovery the data cannot confirm: the incident's axes answer "no" at the
/// assessment time only from the signals that were read, and signals that
/// could show them still lit were not read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryUnconfirmed {
    /// The incident's leaves whose recovery rests on unread signals.
    pub leaves: Vec<String>,
    /// Since when what was read shows them unlit.
    pub since: Millis,
    /// The signals that could show the incident continuing and were not read.
    pub unread: Vec<UnreadSignal>,
    /// "recovery not confirmed: 5 signals that could show it continuing were
    /// not read (no etcd_server_leader_changes_seen_total, …)".
    pub text: String,
}

/// A signal that was not read, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnreadSignal {
    pub signal: String,
    pub description: String,
    /// Why it could not be read (its metrics not exposed).
    pub reason: String,
}

/// How audit logs bear on an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CorroborationKind {
    /// The axis's audit signal is lit during its episode.
    Confirms,
    /// Another axis's audit signal is lit instead.
    Contradicts,
    /// Read, and not lit.
    DoesNotConfirm,
    /// Not readable (no latency annotations, too few slow requests).
    CannotTell,
}

impl CorroborationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CorroborationKind::Confirms => "confirms",
            CorroborationKind::Contradicts => "contradicts",
            CorroborationKind::DoesNotConfirm => "does-not-confirm",
            CorroborationKind::CannotTell => "cannot-tell",
        }
    }
}

/// One statement of audit logs about the root cause.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Corroboration {
    pub kind: CorroborationKind,
    /// The axis judged (`etcd/disk`).
    pub axis: String,
    /// The audit signal the statement rests on.
    pub signal: String,
    /// The axis the audit logs point at instead (contradicts).
    pub other_axis: Option<String>,
    /// First lit step of `signal` during the episode.
    pub from: Option<Millis>,
    /// Its largest value there.
    pub value: Option<f64>,
    /// The sentence for people.
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RootCause {
    pub leaf: String,
    pub axis: String,
    pub sub_axis: Option<String>,
    pub severity: Severity,
    pub title: String,
    /// `None` when the data has no time series (a single snapshot).
    pub onset: Option<Millis>,
    /// Instances lit for this axis (all of its role's targets when the whole
    /// tier is affected).
    pub instances: Vec<String>,
    /// Per-instance localisation, e.g. "only etcd-2: WAL fsync p99 1.2 s, others 7 ms".
    pub localisation: Option<String>,
    /// When the root cause's episode ended (`None`: still lit at the assessment time).
    pub recovered: Option<Millis>,
    /// Targets that stopped answering during the episode (the likely cause
    /// member), with the time of their first failed scrape.
    pub unreachable: Vec<Unreachable>,
    /// Lit instances that are not named as the cause (e.g. the members that
    /// lost their leader when another stopped answering).
    pub affected: Vec<String>,
}

/// A target that stopped answering.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unreachable {
    pub target: String,
    /// First failed (or missing) scrape.
    pub from: Millis,
    /// First answer again; `None` if it never answered again in the window.
    pub until: Option<Millis>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Downstream {
    pub leaf: String,
    pub axis: String,
    pub sub_axis: Option<String>,
    pub onset: Millis,
    /// Onset minus the root cause's onset.
    pub lag_ms: Millis,
    /// E.g. "apf lit 85 s after etcd".
    pub note: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tie {
    pub leaf: String,
    pub axis: String,
    pub sub_axis: Option<String>,
    pub onset: Millis,
    pub note: String,
}

/// Timeline of the symptom question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SymptomState {
    pub node: String,
    pub question: String,
    pub state: AxisState,
    pub onset: Option<Millis>,
    pub timeline: Vec<StepState>,
}

/// State of one step of a timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepState {
    Lit,
    Unlit,
    /// No data decides this step.
    Unknown,
}

/// Summary state of an axis over the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AxisState {
    /// Lit (with an onset, or in a single snapshot).
    Lit,
    /// Checked and not lit.
    Clear,
    /// Signals exist but the assessment time could not be decided (whatever
    /// earlier steps said: unreadable at the end is unknown, never clear).
    Unknown,
    /// No target of the role(s) it reads, or its metrics are not exposed.
    NotChecked,
}

/// One leaf of the tree over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AxisReport {
    pub leaf: String,
    pub axis: String,
    pub sub_axis: Option<String>,
    pub severity: Severity,
    pub title: String,
    pub state: AxisState,
    /// Lit at `window.at`.
    pub lit_at_end: bool,
    /// First step of the first run lit for at least `debounce` steps.
    pub onset: Option<Millis>,
    /// First step of the first unlit run of at least `debounce` steps after the onset.
    pub recovered: Option<Millis>,
    /// Every lit run of this axis in the window (onset and recovery above are
    /// those of the run the verdict is about).
    pub episodes: Vec<Episode>,
    /// Instances lit at any step of the lit run(s).
    pub instances: Vec<String>,
    pub localisation: Option<String>,
    /// The localisation is the leaf's cause sentence (`cause:` in the
    /// rules): it says why, not only where, so it is shown even when every
    /// instance of the role is the cause.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub says_why: bool,
    /// Instances on which the axis is lit at the end of the window for less
    /// than its persistence: not yet confirmed, so not lit, but a verdict
    /// that may change within one window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// One state per step of `window.steps`.
    pub timeline: Vec<StepState>,
    /// Signals that decide this leaf (conditions on its path).
    pub evidence: Vec<Evidence>,
    /// Why the axis is not checked, when it is not.
    pub note: Option<String>,
}

/// Whether and how a signal could be evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Availability {
    Evaluated,
    /// No expression's metrics exist for targets of the role: not exposed by
    /// this version/target (never read as zero or healthy).
    NotExposed,
    /// The dataset has no target of the role.
    RoleAbsent,
    /// The signal needs a time series (a range function) and the dataset has a
    /// single snapshot.
    NeedsTimeSeries,
    /// Evaluation failed (message in `note`).
    Error,
}

/// One signal's values as evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    pub description: String,
    pub role: String,
    pub unit: Unit,
    pub availability: Availability,
    /// Index of the expression used (0 = `expr`, n = alternative n).
    pub alternative: Option<usize>,
    /// The expression evaluated (window resolved, role matcher injected).
    pub expression: Option<String>,
    pub threshold: Threshold,
    /// Human form of the threshold, e.g. "> 0.5 or > 3 × baseline (min 0.01)".
    pub threshold_text: String,
    /// Worst value over instances at the reference step (`at`, or the last lit step).
    pub value: Option<f64>,
    /// Time of `value`.
    pub value_at: Option<Millis>,
    /// Baseline of the worst instance.
    pub baseline: Option<f64>,
    pub lit: Option<bool>,
    /// Per instance at the reference step.
    pub instances: Vec<InstanceValue>,
    /// Worst value over instances per step (sparkline).
    pub series: Vec<Option<f64>>,
    /// Values per instance per step.
    pub instance_series: BTreeMap<String, Vec<Option<f64>>>,
    /// Judged state per instance per step (`Some(true)` lit, after the
    /// persistence, warm-up and observation rules; `None` not judged): what a
    /// plot of `instance_series` marks as lit.
    #[serde(default)]
    pub instance_lit: BTreeMap<String, Vec<Option<bool>>>,
    /// The threshold as lines in the signal's unit: the absolute part for every
    /// instance, the relative part per instance from its baseline.
    #[serde(default)]
    pub threshold_lines: Vec<ThresholdLine>,
    pub localisation: Option<String>,
    pub note: Option<String>,
    /// The value is the since-process-start form (a single snapshot): counts
    /// and ratios over the process life, not rates.
    pub since_start: bool,
    /// Shown as evidence only: this signal does not decide the leaf.
    pub context: bool,
    /// Who contributes at the reference step (the signal's `breakdown:`), the
    /// largest first.
    #[serde(default)]
    pub contributors: Vec<Contributor>,
    /// Why contributors are missing or unnamed (labels absent in this version).
    #[serde(default)]
    pub contributors_note: Option<String>,
}

/// One contributor to a signal: a label set of its breakdown, its value at the
/// reference step, its share of all contributors and its window-start baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contributor {
    /// `by` label → value (`""`: the series lacks the label).
    pub labels: BTreeMap<String, String>,
    pub unit: Unit,
    pub value: Option<f64>,
    /// Share of the total over all contributors at that step.
    pub share: Option<f64>,
    pub baseline: Option<f64>,
}

impl Contributor {
    /// "flow_schema=service-accounts, priority_level=workload-low 25/s (100%, baseline 0/s)".
    pub fn text(&self) -> String {
        let names: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={}", if v.is_empty() { "(none)" } else { v }))
            .collect();
        let mut s = format!(
            "{} {}",
            names.join(", "),
            self.value
                .map(|v| self.unit.format(v))
                .unwrap_or_else(|| "no value".into())
        );
        let mut paren = Vec::new();
        if let Some(sh) = self.share {
            paren.push(format!("{} of the total", Unit::Ratio.format(sh)));
        }
        if let Some(b) = self.baseline {
            paren.push(format!("baseline {}", self.unit.format(b)));
        }
        if !paren.is_empty() {
            s.push_str(&format!(" ({})", paren.join(", ")));
        }
        s
    }
}

/// One line of a signal's threshold on a plot of its values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdLine {
    /// The instance whose baseline the line derives from (a relative
    /// threshold); `None` for the absolute part, which holds for every instance.
    pub instance: Option<String>,
    /// The value the signal is compared with, in the signal's unit.
    pub value: f64,
    /// Lit above the line (`true`) or below it.
    pub above: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceValue {
    pub instance: String,
    pub value: Option<f64>,
    pub baseline: Option<f64>,
    pub lit: Option<bool>,
}

/// An answer of the tree walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Yes,
    No,
    Unknown,
}

/// One question of the walk at `window.at`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathStep {
    pub node: String,
    pub question: String,
    /// The condition, e.g. "(apf_rejections or apf_queue_wait_p99)".
    pub condition: String,
    pub answer: Answer,
    /// Why the walk went on the way it did for an unknown answer.
    pub note: Option<String>,
    pub signals: Vec<PathSignal>,
    /// Child taken: node id, leaf id or `healthy`.
    pub next: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathSignal {
    pub signal: String,
    pub unit: Unit,
    pub availability: Availability,
    pub value: Option<f64>,
    pub baseline: Option<f64>,
    pub threshold_text: String,
    pub lit: Option<bool>,
    pub instances: Vec<InstanceValue>,
}

/// What could not be checked, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    pub kind: GapKind,
    /// Signal id, role or leaf id concerned.
    pub subject: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapKind {
    NotExposed,
    RoleAbsent,
    NeedsTimeSeries,
    NotChecked,
    NoBaseline,
    EvaluationError,
}

/// The analysed window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowInfo {
    pub from: Millis,
    pub to: Millis,
    pub step: Millis,
    /// The assessment time of the walk and of "lit at end".
    pub at: Millis,
    /// Step times.
    pub steps: Vec<Millis>,
    /// The range `$window` resolved to.
    pub range: Millis,
    pub debounce: usize,
    pub baseline: BaselineInfo,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineInfo {
    pub kind: BaselineKind,
    pub from: Option<Millis>,
    pub to: Option<Millis>,
    pub description: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaselineKind {
    /// The early part of the window.
    WindowStart,
    /// An explicit time range of the same data.
    Range,
    /// A separate (healthy) capture.
    Dataset,
    /// No baseline available; relative thresholds are not applied.
    None,
}

/// One target the data came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub target: String,
    pub role: String,
    pub role_reason: String,
    pub version: Option<String>,
    pub time_source: String,
    pub snapshots: usize,
    pub first: Option<Millis>,
    pub last: Option<Millis>,
    /// Snapshot times at which `process_start_time_seconds` changed (restarts,
    /// or a load balancer switching replicas).
    pub restarts: Vec<Millis>,
    /// Gaps between snapshots longer than twice the typical interval, and a
    /// missing tail/head against the window, as `[from, to]`.
    pub missing: Vec<[Millis; 2]>,
    /// Scrapes that failed (recorded by `record`, live mode or a capture's manifest).
    pub failed_scrapes: usize,
    /// Their times.
    pub failures: Vec<Millis>,
    /// The last scrape attempted, answered or not.
    pub last_attempt: Option<Millis>,
    /// Warm-up periods not judged: the first window after each process start
    /// seen in the data (a restart, or a start just before the capture), as
    /// `[from, to]`.
    pub warmup: Vec<[Millis; 2]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RulesInfo {
    pub origin: String,
    pub signals: usize,
    pub nodes: usize,
    pub leaves: usize,
}

impl Report {
    /// The report when nothing could be analysed (every scrape failed, the
    /// Prometheus API answered nothing, no snapshot was usable): status
    /// `inconclusive`, every axis not checked with `reason`, each failure
    /// as a warning. Scripts reading `-o json` always get a verdict.
    pub fn unusable(
        rules: &super::load::RuleSet,
        reason: &str,
        failures: Vec<String>,
        at: Millis,
        debounce: usize,
    ) -> Report {
        let axes = rules
            .leaf_order
            .iter()
            .filter_map(|&i| rules.leaves.get(i))
            .map(|l| AxisReport {
                leaf: l.id.clone(),
                axis: l.axis.clone(),
                sub_axis: l.sub_axis.clone(),
                severity: l.severity,
                title: l.title.clone(),
                state: AxisState::NotChecked,
                lit_at_end: false,
                onset: None,
                recovered: None,
                episodes: Vec::new(),
                instances: Vec::new(),
                localisation: None,
                says_why: false,
                pending: Vec::new(),
                timeline: vec![StepState::Unknown],
                evidence: Vec::new(),
                note: Some(format!("not checked: {reason}")),
            })
            .collect();
        const STEP: Millis = 60_000;
        Report {
            schema_version: SCHEMA_VERSION,
            status: Status::Inconclusive,
            verdict: Verdict {
                summary: format!("inconclusive: {reason}"),
                ..Verdict::default()
            },
            symptom: None,
            axes,
            path: Vec::new(),
            walk_end: "inconclusive".into(),
            gaps: vec![Gap {
                kind: GapKind::NotChecked,
                subject: "all".into(),
                message: reason.to_string(),
            }],
            window: WindowInfo {
                from: at,
                to: at,
                step: STEP,
                at,
                steps: vec![at],
                range: 5 * STEP,
                debounce: debounce.max(1),
                baseline: BaselineInfo {
                    kind: BaselineKind::None,
                    from: None,
                    to: None,
                    description: "no data".into(),
                },
            },
            sources: Vec::new(),
            warnings: failures,
            falsifier: None,
            falsification: None,
            runbook: Vec::new(),
            rules: RulesInfo {
                origin: rules.origin.clone(),
                signals: rules.signals.len(),
                nodes: rules.nodes.len(),
                leaves: rules.leaves.len(),
            },
            scope: ScopeInfo::default(),
            audit: None,
            logs: None,
            advisories: Vec::new(),
            recorded: None,
        }
    }
}
