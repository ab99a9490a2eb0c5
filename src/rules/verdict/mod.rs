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
//! - a signal is lit at a step on an instance when its threshold says so; the
//!   signal is lit at the step when any instance is lit, unlit when at least one
//!   instance has a value and none is lit, unknown otherwise;
//! - conditions combine signal states with three-valued logic (`any`: lit if one
//!   is lit, unlit if all are unlit; `all`: unlit if one is unlit, lit if all are lit);
//! - an ordinary leaf is lit when the conditions of the `yes` edges on its path
//!   from the root hold, except those of `gate` nodes (the symptom), so causes can
//!   light before clients feel them; when the path's only `yes` edges are gates,
//!   those count;
//! - a `fallback` leaf is lit when the condition of the deepest node its path
//!   leaves through `yes` holds and no ordinary leaf under that node is lit;
//! - onset = first step of the first run lit for at least `debounce` steps;
//!   recovery = first step of an unlit run of at least `debounce` steps after the
//!   last lit step;
//! - root cause = the lit axis with the earliest onset; onsets within one step
//!   are a tie, broken by tree order as a stated assumption.

mod axes;
mod decide;
mod evidence;
mod judge;
mod timeline;
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
        }
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
    pub debounce: usize,
    pub baseline: BaselinePlan,
    /// One entry per rule signal, in rule order.
    pub signals: Vec<SignalInput>,
    pub sources: Vec<SourceInfo>,
    pub warnings: Vec<String>,
    pub gaps: Vec<Gap>,
}

fn axis_name(axis: &str, sub: &Option<String>) -> String {
    match sub {
        Some(s) => format!("{axis}/{s}"),
        None => axis.to_string(),
    }
}

/// Runs the assessment.
pub fn assess(rules: &RuleSet, input: &AssessInput) -> Report {
    let n = input.steps.len();
    let at = input.at_index.min(n.saturating_sub(1));
    let single = n <= 1;
    let d_eff = if single { 1 } else { input.debounce.max(1).min(n) };
    let mut warnings = input.warnings.clone();
    let mut gaps = input.gaps.clone();
    let empty = SignalInput::unavailable(Availability::Error, "missing input");

    // 1. Judge every signal.
    let judged: Vec<judge::Judged> = rules
        .signals
        .iter()
        .enumerate()
        .map(|(k, s)| {
            judge::judge_signal(
                &s.def.threshold,
                input.signals.get(k).unwrap_or(&empty),
                &input.baseline,
                n,
            )
        })
        .collect();
    if input.baseline.kind == BaselineKind::None
        && rules.signals.iter().any(|s| s.def.threshold.relative.is_some())
    {
        gaps.push(Gap {
            kind: GapKind::NoBaseline,
            subject: "baseline".into(),
            message: format!(
                "{}; signals with only a relative threshold are unknown, the others use their absolute threshold",
                input.baseline.description
            ),
        });
    }

    // 2–3. Questions and leaf timelines.
    let node_states = timeline::node_states(rules, &judged, n);
    let leaf_states = timeline::leaf_states(rules, &node_states, n);

    // 4. Per-leaf reports.
    let frame = axes::Frame {
        judged: &judged,
        leaf_states: &leaf_states,
        at,
        single,
        debounce: d_eff,
    };
    let (mut axes, onsets) = axes::leaf_reports(rules, input, &frame, &mut warnings, &mut gaps);

    // 5. Root cause, downstream, ties.
    let (mut verdict, root_axis) = decide::root_cause(rules, input, &mut axes, &onsets, &leaf_states, single);

    // 6. Symptom, walk.
    let root_node = &rules.nodes[rules.root];
    let symptom_states = node_states[rules.root].clone();
    let symptom_onset = if single {
        None
    } else {
        timeline::onset_index(&symptom_states, d_eff, at)
    };
    let symptom_at = symptom_states.get(at).copied().unwrap_or(StepState::Unknown);
    let symptom = Some(SymptomState {
        node: root_node.def.id.clone(),
        question: root_node.def.question.clone(),
        state: match (
            symptom_onset.is_some() || (single && symptom_at == StepState::Lit),
            symptom_states.iter().any(|s| *s != StepState::Unknown),
        ) {
            (true, _) => AxisState::Lit,
            (false, true) => AxisState::Clear,
            (false, false) => AxisState::Unknown,
        },
        onset: symptom_onset.map(|i| input.steps[i]),
        timeline: symptom_states,
    });
    let (path, walk_end) = walk::walk(rules, input, &judged, &node_states, at);

    // 7. Status and summary.
    let mut falsifier = None;
    let mut runbook = Vec::new();
    let status;
    if let Some(r) = root_axis {
        status = Status::Degraded;
        let ax = &axes[r];
        let l = rules.leaf(&ax.leaf).unwrap_or(0);
        falsifier = Some(rules.leaves[l].falsifier.clone());
        runbook = rules.leaves[l].runbook.clone();
        let name = axis_name(&ax.axis, &ax.sub_axis);
        let mut s = format!("root cause: {name} ({}) — {}", ax.severity, ax.title);
        if let Some(o) = ax.onset {
            s.push_str(&format!(", from {}", crate::timefmt::format_time(o)));
        }
        if let Some(loc) = &ax.localisation {
            s.push_str(&format!("; {loc}"));
        }
        if let Some(rec) = ax.recovered {
            s.push_str(&format!("; recovered at {}", crate::timefmt::format_time(rec)));
        }
        if !verdict.downstream.is_empty() {
            let d: Vec<String> = verdict.downstream.iter().map(|d| d.note.clone()).collect();
            s.push_str(&format!("; downstream: {}", d.join(", ")));
        }
        verdict.summary = s;
        verdict.root_cause = Some(RootCause {
            leaf: ax.leaf.clone(),
            axis: ax.axis.clone(),
            sub_axis: ax.sub_axis.clone(),
            severity: ax.severity,
            title: ax.title.clone(),
            onset: ax.onset,
            instances: ax.instances.clone(),
            localisation: ax.localisation.clone(),
        });
        if walk_end != ax.leaf && walk_end != crate::rules::HEALTHY {
            warnings.push(format!(
                "the tree walk at {} ends at `{walk_end}`, but {name} lit first: the walk shows the state at that time, the verdict follows the onsets",
                crate::timefmt::format_time(input.steps.get(at).copied().unwrap_or(0))
            ));
        }
    } else if symptom_at == StepState::Unlit {
        status = Status::Healthy;
        let not_checked = axes.iter().filter(|a| a.state == AxisState::NotChecked).count();
        verdict.summary = if not_checked > 0 {
            format!("healthy: no axis lit and no client-visible symptom ({not_checked} axes not checked, see gaps)")
        } else {
            "healthy: no axis lit and no client-visible symptom".to_string()
        };
    } else {
        status = Status::Inconclusive;
        verdict.summary = match symptom_at {
            StepState::Lit => "inconclusive: the symptom is present but not yet confirmed and no axis is lit".to_string(),
            _ => format!(
                "inconclusive: the symptom question `{}` cannot be answered from this data and no axis is lit",
                root_node.def.id
            ),
        };
    }

    Report {
        schema_version: SCHEMA_VERSION,
        status,
        verdict,
        symptom,
        axes,
        path,
        walk_end,
        gaps,
        window: WindowInfo {
            from: input.steps.first().copied().unwrap_or(0),
            to: input.steps.last().copied().unwrap_or(0),
            step: input.step,
            at: input.steps.get(at).copied().unwrap_or(0),
            steps: input.steps.clone(),
            range: input.range,
            debounce: d_eff,
            baseline: BaselineInfo {
                kind: input.baseline.kind,
                from: input.baseline.from,
                to: input.baseline.to,
                description: input.baseline.description.clone(),
            },
        },
        sources: input.sources.clone(),
        warnings,
        falsifier,
        runbook,
        rules: RulesInfo {
            origin: rules.origin.clone(),
            signals: rules.signals.len(),
            nodes: rules.nodes.len(),
            leaves: rules.leaves.len(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::judge::judge;
    use super::timeline::{onset_index, recovery_index};
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
            }),
            combine: Combine::Any,
        };
        assert_eq!(judge(&fall, Some(1.0), Some(100.0)), Some(true));
        assert_eq!(judge(&fall, Some(1.0), Some(4.0)), Some(false));
    }

    #[test]
    fn onset_needs_debounce_and_recovery_needs_a_clear_run() {
        use StepState::*;
        let s = [Unlit, Lit, Unlit, Lit, Lit, Lit, Unlit, Unlit];
        assert_eq!(onset_index(&s, 2, 7), Some(3));
        assert_eq!(onset_index(&s, 4, 7), None);
        assert_eq!(recovery_index(&s, 2, 7), Some(6));
        assert_eq!(recovery_index(&s, 2, 6), None);
        assert_eq!(recovery_index(&[Lit, Lit, Unknown, Unlit], 2, 3), None);
    }

    #[test]
    fn values_are_formatted_for_people() {
        assert_eq!(Unit::Seconds.format(1.2), "1.2 s");
        assert_eq!(Unit::Seconds.format(0.007), "7 ms");
        assert_eq!(Unit::Ratio.format(0.035), "3.5%");
        assert_eq!(Unit::Bytes.format(2.0 * 1024.0 * 1024.0 * 1024.0), "2 GiB");
        assert_eq!(crate::timefmt::format_lag(85_000), "85 s");
        assert_eq!(crate::timefmt::format_lag(125_000), "2m05s");
    }
}
