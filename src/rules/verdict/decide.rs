//! Phases 5 and 7: which lit axis is the root cause (the earliest onset; ties
//! within one step broken by tree order, as a stated assumption), what followed
//! it, and the status and summary of the report.

use std::collections::BTreeMap;

use super::timeline::States;
use super::{axis_name, AssessInput};
use crate::rules::load::RuleSet;
use crate::rules::report::{AxisReport, AxisState, Downstream, StepState, Tie, Verdict};

/// Chooses the root cause among the lit axes; returns the verdict (without its
/// summary) and the index into `axes` of the root cause.
pub(super) fn root_cause(
    rules: &RuleSet,
    input: &AssessInput,
    axes: &mut [AxisReport],
    onsets: &[Option<usize>],
    leaf_states: &[States],
    single: bool,
) -> (Verdict, Option<usize>) {
    // Candidates are lit axes; a fallback leaf is superseded when an
    // ordinary leaf under its question lit in the window.
    let pos_of = |leaf: &str| {
        rules
            .leaf_order
            .iter()
            .position(|&l| rules.leaves[l].id == leaf)
            .unwrap_or(usize::MAX)
    };
    let state_of: BTreeMap<String, AxisState> = axes.iter().map(|a| (a.leaf.clone(), a.state)).collect();
    let mut candidates: Vec<usize> = Vec::new(); // indices into `axes`
    let mut unchecked_notes: BTreeMap<usize, String> = BTreeMap::new();
    for (a, ax) in axes.iter_mut().enumerate() {
        if ax.state != AxisState::Lit {
            continue;
        }
        let Some(l) = rules.leaf(&ax.leaf) else { continue };
        if rules.leaves[l].fallback {
            let superseded: Vec<&str> = rules.logic[l]
                .suppressed_by
                .iter()
                .filter(|&&o| {
                    onsets[o].is_some() || (single && leaf_states[o].first() == Some(&StepState::Lit))
                })
                .map(|&o| rules.leaves[o].id.as_str())
                .collect();
            if !superseded.is_empty() {
                ax.note = Some(format!(
                    "lit only while no more specific axis was lit; superseded by {}",
                    superseded.join(", ")
                ));
                continue;
            }
            // A fallback is only as good as the questions it falls back from.
            let unchecked: Vec<&str> = rules.logic[l]
                .suppressed_by
                .iter()
                .map(|&o| rules.leaves[o].id.as_str())
                .filter(|id| {
                    matches!(
                        state_of.get(*id),
                        Some(AxisState::NotChecked | AxisState::Unknown)
                    )
                })
                .collect();
            if !unchecked.is_empty() {
                let note = format!(
                    "no more specific axis is lit, but these could not be checked: {}",
                    unchecked.join(", ")
                );
                ax.note = Some(note.clone());
                unchecked_notes.insert(a, note);
            }
        }
        candidates.push(a);
    }
    let mut verdict = Verdict::default();
    let step = input.step.max(1);
    let with_onset: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&a| axes[a].onset.is_some())
        .collect();
    let root_axis: Option<usize> = if !with_onset.is_empty() {
        let earliest = with_onset
            .iter()
            .filter_map(|&a| axes[a].onset)
            .min()
            .unwrap_or(0);
        let mut tied: Vec<usize> = with_onset
            .iter()
            .copied()
            .filter(|&a| axes[a].onset.is_some_and(|o| o - earliest <= step))
            .collect();
        tied.sort_by_key(|&a| (pos_of(&axes[a].leaf), axes[a].onset));
        let root = tied[0];
        let root_onset = axes[root].onset.unwrap_or(earliest);
        let root_name = axis_name(&axes[root].axis, &axes[root].sub_axis);
        for &a in &tied[1..] {
            let o = axes[a].onset.unwrap_or(earliest);
            verdict.ties.push(Tie {
                leaf: axes[a].leaf.clone(),
                axis: axes[a].axis.clone(),
                sub_axis: axes[a].sub_axis.clone(),
                onset: o,
                note: format!(
                    "{} lit within one step ({}) of {root_name}",
                    axis_name(&axes[a].axis, &axes[a].sub_axis),
                    crate::timefmt::format_lag(step)
                ),
            });
        }
        if tied.len() > 1 {
            let names: Vec<String> = tied
                .iter()
                .map(|&a| axis_name(&axes[a].axis, &axes[a].sub_axis))
                .collect();
            verdict.assumptions.push(format!(
                "onsets of {} are within one step of each other; the data cannot order them, and {root_name} was chosen only because it comes first in the tree",
                names.join(", ")
            ));
        }
        let mut downstream: Vec<usize> = with_onset.iter().copied().filter(|a| !tied.contains(a)).collect();
        downstream.sort_by_key(|&a| (axes[a].onset, pos_of(&axes[a].leaf)));
        for a in downstream {
            let o = axes[a].onset.unwrap_or(root_onset);
            let lag = o - root_onset;
            verdict.downstream.push(Downstream {
                leaf: axes[a].leaf.clone(),
                axis: axes[a].axis.clone(),
                sub_axis: axes[a].sub_axis.clone(),
                onset: o,
                lag_ms: lag,
                note: format!(
                    "{} lit {} after {root_name}",
                    axis_name(&axes[a].axis, &axes[a].sub_axis),
                    crate::timefmt::format_lag(lag)
                ),
            });
        }
        Some(root)
    } else if !candidates.is_empty() {
        let mut c = candidates.clone();
        c.sort_by_key(|&a| pos_of(&axes[a].leaf));
        if single {
            verdict.assumptions.push(
                "a single snapshot has no onsets (they need a time series); the first lit axis in tree order was chosen"
                    .to_string(),
            );
        }
        for &a in &c[1..] {
            verdict.ties.push(Tie {
                leaf: axes[a].leaf.clone(),
                axis: axes[a].axis.clone(),
                sub_axis: axes[a].sub_axis.clone(),
                onset: input.steps.first().copied().unwrap_or(0),
                note: format!(
                    "{} also lit; without a time series its order cannot be told",
                    axis_name(&axes[a].axis, &axes[a].sub_axis)
                ),
            });
        }
        Some(c[0])
    } else {
        None
    };

    if let Some((r, note)) = root_axis.and_then(|r| unchecked_notes.get(&r).map(|n| (r, n))) {
        verdict
            .assumptions
            .push(format!("{}: {note}", axis_name(&axes[r].axis, &axes[r].sub_axis)));
    }

    (verdict, root_axis)
}
