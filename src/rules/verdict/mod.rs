//! The pure part of a diagnosis: per-step signal values → lit states →
//! per-leaf timelines → onsets → root cause, downstream axes, ties, the tree
//! walk and the [`Report`]. No evaluation happens here, so every rule of the
//! verdict can be tested with hand-built inputs.
//!
//! [`assess`] runs the phases in order, one module each:
//! 1. `judge`: every signal against its threshold, per instance and step;
//! 2. `timeline`: the tree's questions per step;
//! 3. `timeline`: each leaf's timeline;
//! 4. `axes`: one report per leaf (onset, recovery, instances, evidence);
//! 5. `decide`: the root cause, downstream axes and ties;
//! 6. `walk`: the walk of the tree at the assessment time;
//! 7. status and summary.
//!
//! Semantics (documented for users in `rules/README.md`):
//! - a value is judged only outside warm-up (the first window after a process
//!   start: a restart, or a process that started just before the capture) and
//!   with enough observations behind it; otherwise it is shown but unknown;
//! - a signal is lit at a step on an instance when its threshold says so and
//!   the lit run lasts at least the signal's persistence (`for:`); the signal
//!   is lit at the step when any instance is lit, unlit when at least one
//!   instance has a value and none is lit, unknown otherwise;
//! - conditions combine signal states with three-valued logic (`any`: lit if one
//!   is lit, unlit if all are unlit; `all`: unlit if one is unlit, lit if all are
//!   lit); a node answers "no" only when its `needs` were read;
//! - an ordinary leaf is lit when the conditions of the `yes` edges on its path
//!   from the root hold, except those of `gate` nodes (the symptom), so causes can
//!   light before clients feel them; when the path's only `yes` edges are gates,
//!   those count;
//! - a `fallback` leaf is lit when the condition of the deepest node its path
//!   leaves through `yes` holds and no ordinary leaf under that node is lit;
//! - an episode is a maximal lit run of a leaf (gaps shorter than its
//!   persistence merged); episodes of all leaves group into incidents, and the
//!   verdict is about the incident lit at the assessment time, or the latest;
//! - root cause = the incident's axis with the earliest onset; onsets within one
//!   step are a tie, broken by tree order as a stated assumption;
//! - status: degraded while an axis of the incident is lit at the assessment
//!   time, recovered when all had recovered and nothing unread could show one
//!   still lit (`recovery`); healthy only when every observed
//!   role's scope question answered "no" from signals that were read.

mod advise;
mod axes;
mod cause;
mod corroborate;
mod decide;
mod evidence;
mod falsify;
mod judge;
pub mod loglines;
mod recovery;
mod refine;
mod timeline;
mod undecided;
mod walk;

pub use judge::{judge, median};

use std::collections::BTreeMap;

use super::load::RuleSet;
use super::report::*;
use crate::store::Millis;

/// One signal's evaluated values, as the engine hands them over.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalInput {
    pub availability: Availability,
    /// Index of the expression used (0 = `expr`).
    pub alternative: Option<usize>,
    /// The expression evaluated, as text.
    pub expression: Option<String>,
    pub note: Option<String>,
    /// Instance → one value per step (`None` = no data at that step).
    pub values: BTreeMap<String, Vec<Option<f64>>>,
    /// Instance → baseline, when computed from a separate range or dataset.
    /// `None`: computed here from the baseline steps of the window.
    pub baseline: Option<BTreeMap<String, f64>>,
    /// Instance → per step, why the value is not judged (missing: judged).
    pub skips: BTreeMap<String, Vec<Option<Skip>>>,
    /// Instance → per step, the observations behind the value (signals with
    /// an `observations` count).
    pub observations: BTreeMap<String, Vec<Option<f64>>>,
    /// The same signal over the shortest window that holds two scrapes (rate
    /// signals): it never lights a step by itself, but dates the start of a run
    /// that the full window confirms, since a full window dilutes a new fault
    /// with the minutes before it.
    pub short: Option<Box<SignalInput>>,
    /// The contributors to the signal (its `breakdown:`), when it has one.
    pub breakdown: Option<BreakdownInput>,
}

/// A signal's contributors: the breakdown expression's values per label set,
/// summed over instances, per step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BreakdownInput {
    /// The labels naming a contributor.
    pub by: Vec<String>,
    /// Label values (in `by` order; `""` when a series lacks the label) →
    /// value per step.
    pub groups: BTreeMap<Vec<String>, Vec<Option<f64>>>,
    /// Why contributors are missing or unnamed (the breakdown's metrics not
    /// exposed, its labels absent in this version).
    pub note: Option<String>,
}

/// Why a value is shown but not judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// The first window after a process start (a restart, or a process that
    /// started just before the capture).
    WarmUp,
    /// Fewer observations than the signal's `observations.min`.
    FewObservations,
}

impl Skip {
    fn text(self) -> &'static str {
        match self {
            Skip::WarmUp => "warm-up (the first window after the process started)",
            Skip::FewObservations => "too few observations in the window",
        }
    }
}

impl SignalInput {
    /// A signal evaluated with expression 0 and these per-instance values.
    pub fn evaluated(values: BTreeMap<String, Vec<Option<f64>>>) -> Self {
        SignalInput {
            availability: Availability::Evaluated,
            alternative: Some(0),
            expression: None,
            note: None,
            values,
            baseline: None,
            skips: BTreeMap::new(),
            observations: BTreeMap::new(),
            short: None,
            breakdown: None,
        }
    }

    /// Steps not judged, by reason, over all instances.
    pub fn skip_counts(&self) -> Vec<(&'static str, usize)> {
        let mut c: BTreeMap<Skip, usize> = BTreeMap::new();
        for v in self.skips.values() {
            for s in v.iter().flatten() {
                *c.entry(*s).or_default() += 1;
            }
        }
        c.into_iter().map(|(s, n)| (s.text(), n)).collect()
    }

    /// A signal that could not be evaluated.
    pub fn unavailable(availability: Availability, note: impl Into<String>) -> Self {
        SignalInput {
            availability,
            alternative: None,
            expression: None,
            note: Some(note.into()),
            values: BTreeMap::new(),
            baseline: None,
            skips: BTreeMap::new(),
            observations: BTreeMap::new(),
            short: None,
            breakdown: None,
        }
    }
}

/// How the baseline is taken.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselinePlan {
    pub kind: BaselineKind,
    /// For [`BaselineKind::WindowStart`]: the step indices `[start, end)` used.
    pub steps: Option<(usize, usize)>,
    pub from: Option<Millis>,
    pub to: Option<Millis>,
    pub description: String,
}

impl BaselinePlan {
    /// The default: the first quarter of the window (at least 2 steps), only
    /// when the window has at least 6 steps; otherwise no baseline.
    pub fn window_start(steps: &[Millis]) -> BaselinePlan {
        let n = steps.len();
        if n < MIN_STEPS_FOR_BASELINE {
            return BaselinePlan {
                kind: BaselineKind::None,
                steps: None,
                from: None,
                to: None,
                description: format!(
                    "no baseline: the window has {n} step(s), fewer than {MIN_STEPS_FOR_BASELINE}; relative thresholds are not applied"
                ),
            };
        }
        let k = n.div_ceil(4).max(2);
        BaselinePlan {
            kind: BaselineKind::WindowStart,
            steps: Some((0, k)),
            from: Some(steps[0]),
            to: Some(steps[k - 1]),
            description: format!("median of the first {k} of {n} steps (the first quarter of the window)"),
        }
    }
}

/// Fewest steps for a default (window-start) baseline.
pub const MIN_STEPS_FOR_BASELINE: usize = 6;

/// Everything the pure assessment needs.
#[derive(Clone, Debug)]
pub struct AssessInput {
    pub steps: Vec<Millis>,
    pub step: Millis,
    /// Index into `steps` of the assessment time.
    pub at_index: usize,
    /// The resolved `$window`.
    pub range: Millis,
    /// Fewest lit steps an episode needs (1: the signals' persistence decides).
    pub debounce: usize,
    pub baseline: BaselinePlan,
    /// One entry per rule signal, in rule order.
    pub signals: Vec<SignalInput>,
    pub sources: Vec<SourceInfo>,
    pub warnings: Vec<String>,
    pub gaps: Vec<Gap>,
}

fn axis_name(axis: &str, sub: &Option<String>) -> String {
    crate::rules::report::axis_id(axis, sub.as_deref())
}

/// Every signal of `input` judged against its threshold, with its
/// persistence.
fn judge_all(rules: &RuleSet, input: &AssessInput) -> Vec<judge::Judged> {
    let n = input.steps.len();
    let at = input.at_index.min(n.saturating_sub(1));
    let single = n <= 1;
    let empty = SignalInput::unavailable(Availability::Error, "missing input");
    let mut judged: Vec<judge::Judged> = rules
        .signals
        .iter()
        .enumerate()
        .map(|(k, s)| {
            judge::judge_signal(
                input.signals.get(k).unwrap_or(&empty),
                &judge::Plan {
                    threshold: &s.def.threshold,
                    proportion: s.observations.as_ref().is_some_and(|o| o.proportion),
                    baseline_steps: input.baseline.steps,
                    steps: &input.steps,
                    persistence: if single {
                        0
                    } else {
                        s.persistence(input.step, input.range)
                    },
                    // A run is dated back at most one window.
                    refine_steps: (input.range / input.step.max(1)) as usize,
                    at,
                },
            )
        })
        .collect();
    judge::apply_quiet(rules, &input.steps, &mut judged);
    judged
}

/// The signals lit at some step of the window for some instance, once
/// persistence is applied: the only ones whose short-window values can
/// change the assessment (the short window only dates back runs the full
/// window confirmed). The engine queries short windows for these alone.
pub fn lit_signals(rules: &RuleSet, input: &AssessInput) -> Vec<usize> {
    judge_all(rules, input)
        .iter()
        .enumerate()
        .filter(|(_, j)| j.lit.values().any(|l| l.contains(&Some(true))))
        .map(|(k, _)| k)
        .collect()
}

/// Runs the assessment.
pub fn assess(rules: &RuleSet, input: &AssessInput) -> Report {
    let n = input.steps.len();
    let at = input.at_index.min(n.saturating_sub(1));
    let single = n <= 1;
    let mut warnings = input.warnings.clone();
    let mut gaps = input.gaps.clone();

    // 1. Judge every signal.
    let judged = judge_all(rules, input);
    gaps.extend(baseline_gap(rules, input));

    // 2–3. Questions and leaf timelines.
    let node_states = timeline::node_states(rules, &judged, n);
    let leaf_states = timeline::leaf_states(rules, &node_states, n);

    // 4. Episodes, and the incident the verdict is about.
    let runs = leaf_runs(rules, input, &judged, &leaf_states, at, single);
    let sel = decide::select(rules, input, &judged, &runs, at);
    let frame = axes::Frame {
        judged: &judged,
        leaf_states: &leaf_states,
        runs: &runs,
        reported: &sel.reported,
        dated: &sel.dated,
        at,
        single,
    };
    let mut axes = axes::leaf_reports(rules, input, &frame, &mut warnings, &mut gaps);
    let advisories = advise::advisories(rules, input, &judged, at);
    advise::mark_not_applicable(&advisories, &mut axes, &mut gaps);

    // 5. Root cause, downstream, ties.
    let (mut verdict, root_axis) = decide::root_cause(rules, input, &mut axes, &sel, single);

    // 6. Symptom, walk.
    let symptom = symptom_state(rules, input, &node_states, at, single);
    let (path, walk_end) = walk::walk(rules, input, &judged, &node_states, at);

    // 7. Scope, status and summary.
    let scope = scope_info(rules, input, &node_states, at);
    let mut conclusion = Conclusion::default();
    if let Some(r) = root_axis {
        let ctx = Judgement {
            rules,
            input,
            judged: &judged,
            leaf_states: &leaf_states,
            sel: &sel,
            at,
            single,
        };
        conclusion = explain_root(&ctx, &axes, r, &walk_end, &mut verdict, &mut warnings);
    } else if let Some(summary) = healthy_summary(rules, input, &node_states, at, &axes, &scope) {
        conclusion.status = Status::Healthy;
        verdict.summary = summary;
    } else {
        conclusion.status = Status::Inconclusive;
        verdict.summary = inconclusive_summary(rules, &node_states, at, &scope);
    }

    Report {
        schema_version: SCHEMA_VERSION,
        status: conclusion.status,
        verdict,
        symptom: Some(symptom),
        axes,
        path,
        walk_end,
        gaps,
        window: window_info(input, at),
        sources: input.sources.clone(),
        warnings,
        falsifier: conclusion.falsifier,
        falsification: conclusion.falsification,
        runbook: conclusion.runbook,
        rules: RulesInfo {
            origin: rules.origin.clone(),
            signals: rules.signals.len(),
            nodes: rules.nodes.len(),
            leaves: rules.leaves.len(),
        },
        scope,
        audit: None,
        logs: None,
        advisories,
        recorded: None,
    }
}

/// The gap of a window without a baseline, when some signal needs one.
fn baseline_gap(rules: &RuleSet, input: &AssessInput) -> Option<Gap> {
    let relative = rules.signals.iter().any(|s| s.def.threshold.relative.is_some());
    (input.baseline.kind == BaselineKind::None && relative).then(|| Gap {
        kind: GapKind::NoBaseline,
        subject: "baseline".into(),
        message: format!(
            "{}; signals with only a relative threshold are unknown, the others use their absolute threshold",
            input.baseline.description
        ),
    })
}

/// Each leaf's episodes (none for a single snapshot), merged across gaps as
/// long as its own signals' persistence.
fn leaf_runs(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[judge::Judged],
    leaf_states: &[timeline::States],
    at: usize,
    single: bool,
) -> Vec<Vec<timeline::Run>> {
    (0..rules.leaves.len())
        .map(|l| {
            if single {
                return Vec::new();
            }
            let merge = axes::own_signals(rules, l)
                .iter()
                .map(|&k| judged[k].persistence)
                .max()
                .unwrap_or(0);
            timeline::episodes(
                &leaf_states[l],
                &input.steps,
                at,
                merge,
                input.range,
                input.debounce,
            )
        })
        .collect()
}

/// The root question (what clients feel) over the window.
fn symptom_state(
    rules: &RuleSet,
    input: &AssessInput,
    node_states: &[timeline::States],
    at: usize,
    single: bool,
) -> SymptomState {
    let root_node = &rules.nodes[rules.root];
    let symptom_states = node_states[rules.root].clone();
    let symptom_runs = if single {
        Vec::new()
    } else {
        timeline::episodes(&symptom_states, &input.steps, at, 0, input.range, input.debounce)
    };
    let symptom_at = symptom_states.get(at).copied().unwrap_or(StepState::Unknown);
    SymptomState {
        node: root_node.def.id.clone(),
        question: root_node.def.question.clone(),
        state: match (
            !symptom_runs.is_empty() || (single && symptom_at == StepState::Lit),
            symptom_states.iter().any(|s| *s != StepState::Unknown),
        ) {
            (true, _) => AxisState::Lit,
            (false, true) => AxisState::Clear,
            (false, false) => AxisState::Unknown,
        },
        onset: symptom_runs.last().map(|r| input.steps[r.start]),
        timeline: symptom_states,
    }
}

/// What the assessment has judged, as the root cause's explanation reads it.
struct Judgement<'a> {
    rules: &'a RuleSet,
    input: &'a AssessInput,
    judged: &'a [judge::Judged],
    leaf_states: &'a [timeline::States],
    sel: &'a decide::Selection,
    at: usize,
    single: bool,
}

/// The status and what the report says beside the verdict's summary.
struct Conclusion {
    status: Status,
    falsifier: Option<String>,
    falsification: Option<Falsification>,
    runbook: Vec<String>,
}

impl Default for Conclusion {
    fn default() -> Self {
        Conclusion {
            status: Status::Inconclusive,
            falsifier: None,
            falsification: None,
            runbook: Vec::new(),
        }
    }
}

/// The verdict of a root cause: its status, summary, members, what was not
/// read before it, what other sources say, and the leaf's falsifier and runbook.
fn explain_root(
    j: &Judgement,
    axes: &[AxisReport],
    r: usize,
    walk_end: &str,
    verdict: &mut Verdict,
    warnings: &mut Vec<String>,
) -> Conclusion {
    let ax = &axes[r];
    let unreachable = unreachable_during(ax, j.input);
    // Still lit at the end, or a member it names still not answering.
    let active = !j.single
        && (j
            .sel
            .incident
            .iter()
            .any(|&l| j.sel.reported[l].is_some_and(|run| run.recovered.is_none()))
            || unreachable.iter().any(|u| u.until.is_none()));
    // A recovery only from evidence that could show the incident continuing.
    if !j.single && !active {
        verdict.recovery_unconfirmed = recovery::unconfirmed(j.rules, j.input, j.judged, j.sel, j.at);
    }
    let unconfirmed = verdict.recovery_unconfirmed.is_some();
    let status = if j.single || active || unconfirmed {
        Status::Degraded
    } else {
        Status::Recovered
    };
    let l = j.rules.leaf(&ax.leaf).unwrap_or(0);
    let falsification = falsify::falsification(j.rules, axes, r, &verdict.downstream, &j.input.steps);
    let mut runbook = j.rules.leaves[l].runbook.clone();
    let name = axis_name(&ax.axis, &ax.sub_axis);
    let (instances, affected) = cause_members(j, ax, l, &unreachable);
    if let Some(run) = j.sel.reported[l] {
        verdict.not_excluded = refine::not_excluded(j.rules, j.input, j.judged, l, run.end);
    }
    // The first step of each alternative left open, after the root's own
    // first two (the first page shows two).
    for n in verdict.not_excluded.iter().rev() {
        let first = j
            .rules
            .leaf(&n.leaf)
            .and_then(|k| j.rules.leaves[k].runbook.first());
        if let Some(step) = first {
            let mut c = step.chars();
            let step: String = c
                .next()
                .map(|f| f.to_lowercase().chain(c).collect())
                .unwrap_or_default();
            runbook.insert(runbook.len().min(2), format!("{} not excluded: {step}", n.axis));
        }
    }
    verdict.summary = root_summary(ax, &name, &unreachable, verdict, status);
    verdict.root_cause = Some(RootCause {
        leaf: ax.leaf.clone(),
        axis: ax.axis.clone(),
        sub_axis: ax.sub_axis.clone(),
        severity: ax.severity,
        title: ax.title.clone(),
        onset: ax.onset,
        instances,
        localisation: ax.localisation.clone(),
        // Not claimed when unconfirmed: `recovery_unconfirmed.since` says
        // since when what was read is clear.
        recovered: ax.recovered.filter(|_| !unconfirmed),
        unreachable,
        affected,
    });
    mark_undecided(j, ax, verdict, &mut runbook);
    verdict.corroboration = corroborate::corroborate(j.rules, j.input, j.judged, verdict.failing(), j.at);
    for c in &verdict.corroboration {
        if c.kind == crate::rules::report::CorroborationKind::Contradicts {
            warnings.push(c.text.clone());
        }
    }
    if walk_end != ax.leaf && walk_end != crate::rules::HEALTHY {
        warnings.push(format!(
            "the tree walk at {} ends at `{walk_end}`, but {name} lit first: the walk shows the state at that time, the verdict follows the onsets",
            crate::timefmt::format_time(j.input.steps.get(j.at).copied().unwrap_or(0))
        ));
    }
    Conclusion {
        status,
        falsifier: Some(j.rules.leaves[l].falsifier.clone()),
        falsification,
        runbook,
    }
}

/// The cause members and the affected ones. The cause member is a target that
/// stopped answering during the episode, the lit instances then the affected
/// ones; otherwise the cause is where the leaf's own question lit, and the
/// other instances lit on its deciding signals in the episode felt it (the
/// followers that lost a leader whose heartbeats failed, the apiserver that saw
/// a member's slow disk).
fn cause_members(
    j: &Judgement,
    ax: &AxisReport,
    l: usize,
    unreachable: &[Unreachable],
) -> (Vec<String>, Vec<String>) {
    let stopped: Vec<String> = unreachable.iter().map(|u| u.target.clone()).collect();
    if !stopped.is_empty() {
        let affected = ax
            .instances
            .iter()
            .filter(|i| !stopped.contains(i))
            .cloned()
            .collect();
        return (stopped, affected);
    }
    let steps: Vec<usize> = match j.sel.reported[l] {
        Some(run) => (run.start..=run.end)
            .filter(|&i| j.leaf_states[l].get(i) == Some(&StepState::Lit))
            .collect(),
        None if j.single => vec![0],
        None => Vec::new(),
    };
    let affected: Vec<String> = axes::lit_instances(j.judged, &axes::deciding_signals(j.rules, l), &steps)
        .into_iter()
        .filter(|i| !ax.instances.contains(i))
        .collect();
    (ax.instances.clone(), affected)
}

/// The one-sentence summary of a root cause.
fn root_summary(
    ax: &AxisReport,
    name: &str,
    unreachable: &[Unreachable],
    verdict: &Verdict,
    status: Status,
) -> String {
    let mut s = format!("root cause: {name} ({}) — {}", ax.severity, ax.title);
    if let Some(o) = ax.onset {
        s.push_str(&format!(", from {}", crate::timefmt::format_time(o)));
    }
    for u in unreachable {
        s.push_str(&format!(
            "; {} stopped answering at {}",
            u.target,
            crate::timefmt::format_time(u.from)
        ));
        if let Some(b) = u.until {
            s.push_str(&format!(" (again from {})", crate::timefmt::format_time(b)));
        }
    }
    if let Some(loc) = &ax.localisation {
        s.push_str(&format!("; {loc}"));
    }
    match (ax.onset, ax.recovered, &verdict.recovery_unconfirmed) {
        (_, _, Some(u)) => s.push_str(&format!(
            "; unlit since {} from what was read, {}",
            crate::timefmt::format_time(u.since),
            u.text
        )),
        (Some(o), Some(rec), None) => s.push_str(&format!(
            "; recovered at {} after {}",
            crate::timefmt::format_time(rec),
            crate::timefmt::format_lag(rec.saturating_sub(o))
        )),
        _ => {}
    }
    for n in &verdict.not_excluded {
        s.push_str(&format!("; {}", n.text));
    }
    if !verdict.downstream.is_empty() {
        let d: Vec<String> = verdict.downstream.iter().map(|d| d.note.clone()).collect();
        s.push_str(&format!("; downstream: {}", d.join(", ")));
    }
    if status == Status::Recovered {
        s.push_str("; nothing of this incident is lit at the end of the window");
    }
    if !verdict.earlier.is_empty() {
        s.push_str(&format!(
            "; {} earlier episode(s) in the window, before this incident",
            verdict.earlier.len()
        ));
    }
    s
}

/// A root cause only from what was read: a possible cause of this axis that
/// could not be read leaves the cause undecided.
fn mark_undecided(j: &Judgement, ax: &AxisReport, verdict: &mut Verdict, runbook: &mut Vec<String>) {
    let unread = undecided::unread_causes(j.rules, j.input, j.judged, ax, j.at);
    if unread.is_empty() {
        return;
    }
    let text = undecided::text(&unread);
    verdict.summary = format!(
        "failing: {}; {text}",
        verdict
            .summary
            .strip_prefix("root cause: ")
            .unwrap_or(&verdict.summary)
    );
    for u in &unread {
        if let Some(remedy) = &u.remedy {
            runbook.insert(0, format!("To decide the cause, read {}: {remedy}", u.title));
        }
    }
    if let Some(failing) = verdict.root_cause.take() {
        verdict.undecided = Some(crate::rules::report::Undecided {
            failing,
            unread,
            text,
        });
    }
}

/// The summary when no axis is lit and health cannot be told.
fn inconclusive_summary(
    rules: &RuleSet,
    node_states: &[timeline::States],
    at: usize,
    scope: &ScopeInfo,
) -> String {
    let symptom_at = node_states[rules.root]
        .get(at)
        .copied()
        .unwrap_or(StepState::Unknown);
    if symptom_at == StepState::Lit {
        return "inconclusive: clients are affected, no axis is lit, and the symptom is not yet confirmed"
            .to_string();
    }
    let judged_roles: Vec<&String> = scope
        .observed
        .iter()
        .filter(|r| rules.scopes.iter().any(|sc| sc.role.as_str() == r.as_str()))
        .collect();
    match judged_roles.as_slice() {
        [] if scope.observed.iter().any(|r| r == "logs") => {
            "inconclusive: no axis is lit in the logs, but logs alone cannot show that the control plane is healthy (a quiet log is not proof; add metrics)".to_string()
        }
        [] if scope.observed.iter().any(|r| r == "audit") => {
            "inconclusive: no axis is lit in the audit logs, but audit logs alone cannot show that the control plane is healthy (a policy may not log every request; add metrics)".to_string()
        }
        [] => "inconclusive: the data has no apiserver or etcd target the rules can judge".to_string(),
        [one] => format!(
            "inconclusive: no axis is lit, but the data cannot say that {one} is healthy (signals not read: see gaps)"
        ),
        many => format!(
            "inconclusive: no axis is lit, but the data cannot say that {} are healthy (signals not read: see gaps)",
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" and ")
        ),
    }
}

/// The window the report covers.
fn window_info(input: &AssessInput, at: usize) -> WindowInfo {
    WindowInfo {
        from: input.steps.first().copied().unwrap_or(0),
        to: input.steps.last().copied().unwrap_or(0),
        step: input.step,
        at: input.steps.get(at).copied().unwrap_or(0),
        steps: input.steps.clone(),
        range: input.range,
        debounce: input.debounce.max(1),
        baseline: BaselineInfo {
            kind: input.baseline.kind,
            from: input.baseline.from,
            to: input.baseline.to,
            description: input.baseline.description.clone(),
        },
    }
}

/// Targets of the axis's roles that stopped answering during its episode
/// (from one range window before the onset to its recovery): no snapshots, or
/// failed scrapes, over part of it.
fn unreachable_during(ax: &AxisReport, input: &AssessInput) -> Vec<Unreachable> {
    let Some(onset) = ax.onset else {
        return Vec::new();
    };
    let until = ax
        .recovered
        .unwrap_or(input.steps.last().copied().unwrap_or(onset));
    let roles: std::collections::BTreeSet<&str> = ax
        .evidence
        .iter()
        .filter(|e| !e.context)
        .map(|e| e.role.as_str())
        .collect();
    let mut out = Vec::new();
    // Logs and audit logs are read, not scraped: they never stop answering.
    for s in input
        .sources
        .iter()
        // A target of a single snapshot has no time series: it did not stop
        // answering, it was read once.
        .filter(|s| {
            roles.contains(s.role.as_str()) && s.role != "logs" && s.role != "audit" && s.snapshots > 1
        })
    {
        let hit = s
            .missing
            .iter()
            .filter(|[a, b]| *a <= until && *b >= onset.saturating_sub(input.range))
            .min_by_key(|[a, _]| *a);
        if let Some([a, b]) = hit {
            // `missing` runs from the last answer to the next one (or to the end
            // of the window): the target stopped answering at its first failed
            // scrape in between, or one step after its last answer.
            let from = s
                .failures
                .iter()
                .copied()
                .filter(|f| f > a && f <= b)
                .min()
                .unwrap_or(a.saturating_add(input.step).min(*b));
            let answered_again = s.last.is_some_and(|l| l >= *b);
            out.push(Unreachable {
                target: s.target.clone(),
                from,
                until: answered_again.then_some(*b),
            });
        }
    }
    out
}

/// What the data shows and which roles' scope questions were answered at `at`.
fn scope_info(
    rules: &RuleSet,
    input: &AssessInput,
    node_states: &[timeline::States],
    at: usize,
) -> ScopeInfo {
    let observed: Vec<String> = {
        let mut v: Vec<String> = input
            .sources
            .iter()
            .filter(|s| s.snapshots > 0 || s.failed_scrapes > 0)
            .map(|s| s.role.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut judged = Vec::new();
    let mut not_observed = Vec::new();
    for sc in &rules.scopes {
        let role = sc.role.as_str().to_string();
        if !observed.contains(&role) {
            not_observed.push(role);
        } else if node_states[sc.node]
            .get(at)
            .is_some_and(|s| *s != StepState::Unknown)
        {
            judged.push(role);
        }
    }
    ScopeInfo {
        observed,
        judged,
        not_observed,
    }
}

/// The healthy summary when the data shows a role whose scope question
/// answered "no" at `at` and no axis is lit; `None` when health cannot be told.
/// The first scope of the rules (what clients feel) decides when its role is
/// observed; otherwise every observed role's scope must answer "no".
fn healthy_summary(
    rules: &RuleSet,
    input: &AssessInput,
    node_states: &[timeline::States],
    at: usize,
    axes: &[AxisReport],
    scope: &ScopeInfo,
) -> Option<String> {
    if axes.iter().any(|a| a.state == AxisState::Lit) {
        return None;
    }
    let state = |node: usize| node_states[node].get(at).copied().unwrap_or(StepState::Unknown);
    let observed: Vec<&crate::rules::load::Scope> = rules
        .scopes
        .iter()
        .filter(|sc| scope.observed.iter().any(|r| r == sc.role.as_str()))
        .collect();
    let healthy_parts: Vec<String> = if rules.scopes.is_empty() {
        // Rules without scopes: the root question decides, as a gate.
        if state(rules.root) != StepState::Unlit {
            return None;
        }
        vec!["no client-visible symptom".to_string()]
    } else {
        let first_observed = observed.first()?;
        let primary = rules
            .scopes
            .first()
            .is_some_and(|p| p.role == first_observed.role);
        let deciding: Vec<&&crate::rules::load::Scope> = if primary {
            vec![first_observed]
        } else {
            observed.iter().collect()
        };
        if deciding.iter().any(|sc| state(sc.node) != StepState::Unlit) {
            return None;
        }
        observed
            .iter()
            .filter(|sc| state(sc.node) == StepState::Unlit)
            .map(|sc| format!("{}: {}", sc.role.as_str(), sc.healthy))
            .collect()
    };
    let not_checked = axes.iter().filter(|a| a.state == AxisState::NotChecked).count();
    let mut s = format!("healthy: no axis lit; {}", healthy_parts.join("; "));
    for r in &scope.not_observed {
        s.push_str(&format!("; {r} not observed"));
    }
    let unjudged: Vec<&String> = scope
        .observed
        .iter()
        .filter(|r| !scope.judged.contains(r) && rules.scopes.iter().any(|sc| sc.role.as_str() == r.as_str()))
        .collect();
    for r in unjudged {
        s.push_str(&format!("; {r} could not be judged (see gaps)"));
    }
    if not_checked > 0 {
        s.push_str(&format!(" ({not_checked} axes not checked, see gaps)"));
    }
    let _ = input;
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::judge::judge;
    use super::timeline::episodes;
    use super::*;
    use crate::rules::model::{Combine, Direction, Relative, Threshold, Unit};

    fn t(above: Option<f64>, rel: Option<(f64, f64)>) -> Threshold {
        Threshold {
            above,
            below: None,
            relative: rel.map(|(factor, floor)| Relative {
                factor,
                floor,
                direction: Direction::Above,
                peers: false,
            }),
            combine: Combine::Any,
        }
    }

    #[test]
    fn judge_absolute_relative_and_floor() {
        let th = t(Some(0.5), Some((3.0, 0.05)));
        assert_eq!(judge(&th, Some(0.6), None), Some(true));
        assert_eq!(judge(&th, Some(0.01), None), Some(false));
        // 3 × baseline but under the floor: 0 → tiny does not light.
        assert_eq!(judge(&th, Some(0.004), Some(0.001)), Some(false));
        assert_eq!(judge(&th, Some(0.1), Some(0.01)), Some(true));
        assert_eq!(judge(&th, None, Some(0.01)), None);
        assert_eq!(judge(&th, Some(f64::NAN), Some(0.01)), Some(false));
        let rel_only = t(None, Some((3.0, 0.05)));
        assert_eq!(judge(&rel_only, Some(1.0), None), None);
        let fall = Threshold {
            above: None,
            below: None,
            relative: Some(Relative {
                factor: 0.2,
                floor: 5.0,
                direction: Direction::Below,
                peers: false,
            }),
            combine: Combine::Any,
        };
        assert_eq!(judge(&fall, Some(1.0), Some(100.0)), Some(true));
        assert_eq!(judge(&fall, Some(1.0), Some(4.0)), Some(false));
    }

    #[test]
    fn episodes_merge_short_gaps_and_recover_on_the_first_unlit_step() {
        use StepState::*;
        let steps: Vec<Millis> = (0..12).map(|i| i * 5000).collect();
        let s = [
            Unlit, Lit, Lit, Unlit, Lit, Lit, Unlit, Unlit, Unlit, Lit, Unknown, Unknown,
        ];
        // No merging: three runs; the last is still lit (unknown after it).
        let r = episodes(&s, &steps, 11, 0, 0, 1);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].start, r[0].end, r[0].recovered), (1, 2, Some(3)));
        assert_eq!(r[2].recovered, None);
        // A 5 s unlit gap is shorter than a 10 s persistence: one episode.
        let r = episodes(&s, &steps, 11, 10_000, 0, 1);
        assert_eq!((r[0].start, r[0].end, r[0].recovered), (1, 5, Some(6)));
        // Runs of fewer lit steps than the debounce are dropped.
        let r = episodes(&s, &steps, 11, 0, 0, 2);
        assert_eq!(r.len(), 2);
        // Only steps up to `at` count.
        let r = episodes(&s, &steps, 4, 0, 0, 1);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].recovered, None);
    }

    #[test]
    fn values_are_formatted_for_people() {
        assert_eq!(Unit::Seconds.format(1.2), "1.2 s");
        assert_eq!(Unit::Seconds.format(0.007), "7 ms");
        assert_eq!(Unit::Ratio.format(0.035), "3.5%");
        // Small values as plain decimals, not `9.54e-4%`.
        assert_eq!(Unit::Ratio.format(0.000954), "0.095%");
        assert_eq!(Unit::Count.format(0.001), "0.001");
        assert_eq!(Unit::Count.format(29.999999999999996), "30");
        assert_eq!(Unit::Count.format(1e-9), "1.00e-9");
        assert_eq!(Unit::Bytes.format(2.0 * 1024.0 * 1024.0 * 1024.0), "2 GiB");
        assert_eq!(crate::timefmt::format_lag(85_000), "85 s");
        assert_eq!(crate::timefmt::format_lag(125_000), "2m05s");
    }
}
