//! Phase 5: which episodes belong to the incident the verdict is about, which
//! lit axis is its root cause (the earliest onset; ties within one step broken
//! by tree order, as a stated assumption), and what followed it.
//!
//! Episodes of all axes are grouped into incidents: an episode joins an
//! incident when it starts before the incident has been over for one range
//! window (downstream effects start while their cause lasts, or just after).
//! The verdict is about the incident still lit at the assessment time, or else
//! the latest one; earlier incidents are listed, not ordered with it.

use std::collections::BTreeMap;

use super::axes::{deciding_signals, lit_instances, own_signals};
use super::judge::Judged;
use super::timeline::Run;
use super::{axis_name, AssessInput};
use crate::rules::load::RuleSet;
use crate::rules::report::{AxisReport, AxisState, Downstream, Episode, Tie, Verdict};
use crate::store::Millis;

/// The incident the verdict is about.
pub(super) struct Selection {
    /// The episode each leaf is reported with: its runs within the incident
    /// merged into one, else its latest run.
    pub reported: Vec<Option<Run>>,
    /// Leaves with an episode in the incident, fallbacks superseded by a more
    /// specific leaf left out.
    pub incident: Vec<usize>,
    /// Fallback leaf → the ordinary leaves of the incident that supersede it.
    pub superseded: BTreeMap<usize, Vec<usize>>,
    /// Episodes of earlier incidents, in time order.
    pub earlier: Vec<(usize, Run)>,
    /// Leaves dated from their early signs (`early_signs:`), with the note
    /// that says from which.
    pub dated: BTreeMap<usize, String>,
}

fn end_time(r: &Run, steps: &[Millis], at: usize) -> Millis {
    steps[r.recovered.unwrap_or(at).min(steps.len() - 1)]
}

/// Groups every leaf's episodes into incidents and selects one.
pub(super) fn select(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    runs: &[Vec<Run>],
    at: usize,
) -> Selection {
    let steps = &input.steps;
    let mut all: Vec<(usize, Run)> = runs
        .iter()
        .enumerate()
        .flat_map(|(l, rs)| rs.iter().map(move |r| (l, *r)))
        .collect();
    all.sort_by_key(|(l, r)| (r.start, *l));
    let join = input.range.max(input.step);
    let mut incidents: Vec<Vec<(usize, Run)>> = Vec::new();
    let mut open_until: Millis = Millis::MIN;
    for (l, r) in all {
        let start = steps[r.start];
        match incidents.last_mut() {
            Some(cur) if start <= open_until.saturating_add(join) => cur.push((l, r)),
            _ => {
                incidents.push(vec![(l, r)]);
                open_until = Millis::MIN;
            }
        }
        open_until = open_until.max(end_time(&r, steps, at));
    }
    let chosen = incidents
        .iter()
        .position(|inc| inc.iter().any(|(_, r)| r.recovered.is_none()))
        .or_else(|| incidents.len().checked_sub(1));
    let mut reported: Vec<Option<Run>> = runs.iter().map(|rs| rs.last().copied()).collect();
    let mut incident = Vec::new();
    let mut earlier = Vec::new();
    if let Some(c) = chosen {
        let mut merged: BTreeMap<usize, Run> = BTreeMap::new();
        for (l, r) in &incidents[c] {
            merged
                .entry(*l)
                .and_modify(|m| {
                    m.start = m.start.min(r.start);
                    if r.end >= m.end {
                        m.end = r.end;
                        m.recovered = r.recovered;
                    }
                    m.lit_steps += r.lit_steps;
                })
                .or_insert(*r);
        }
        for (l, r) in &merged {
            reported[*l] = Some(*r);
        }
        incident = merged.keys().copied().collect();
        for inc in &incidents[..c] {
            earlier.extend(inc.iter().copied());
        }
    }
    let mut superseded = BTreeMap::new();
    for &l in &incident {
        if !rules.leaves[l].fallback {
            continue;
        }
        let by: Vec<usize> = rules.logic[l]
            .suppressed_by
            .iter()
            .copied()
            .filter(|o| incident.contains(o))
            .collect();
        if !by.is_empty() {
            superseded.insert(l, by);
        }
    }
    let dated = date_by_early_signs(rules, input, judged, &mut reported);
    date_back_superseding(rules, judged, &mut reported, &superseded);
    refine(rules, &mut reported, &mut incident, &mut superseded);
    incident.retain(|l| !superseded.contains_key(l));
    Selection {
        reported,
        incident,
        superseded,
        earlier,
        dated,
    }
}

/// A leaf with early signs is dated from the start of their unbroken run on
/// its cause members that reaches its episode (the rules are in
/// [`crate::rules::model::EarlySigns`]); returns the note of each leaf dated.
fn date_by_early_signs(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    reported: &mut [Option<Run>],
) -> BTreeMap<usize, String> {
    let mut dated = BTreeMap::new();
    for (l, leaf) in rules.leaves.iter().enumerate() {
        let (Some(signs), Some(run)) = (&leaf.early_signs, reported[l]) else {
            continue;
        };
        let during: Vec<usize> = (run.start..=run.end).collect();
        let members = lit_instances(judged, &own_signals(rules, l), &during);
        let limit = signs.within.0.saturating_add(input.step);
        let mut first: Option<(usize, &str, &str)> = None;
        for k in signs.signals.iter().filter_map(|s| rules.signal(s)) {
            for m in &members {
                let Some(s0) = judged[k].lit.get(m).and_then(|lit| early_start(lit, run.start)) else {
                    continue;
                };
                let early = input.steps[run.start].saturating_sub(input.steps[s0]) <= limit;
                if early && first.is_none_or(|(f, _, _)| s0 < f) {
                    first = Some((s0, m, &rules.signals[k].def.id));
                }
            }
        }
        let Some((s0, m, id)) = first else { continue };
        let lag = input.steps[run.start] - input.steps[s0];
        if let Some(r) = reported[l].as_mut() {
            r.start = s0;
        }
        dated.insert(
            l,
            format!(
                "onset dated from `{id}` on {m}, lit {} before the leaf's own signals (they confirm up to {} late)",
                crate::timefmt::format_lag(lag),
                crate::timefmt::format_lag(signs.within.0)
            ),
        );
    }
    dated
}

/// The first step of an unbroken lit run that reaches step `start` (lit there
/// or at the step before), when it began earlier than `start` and after a
/// step judged unlit (a run from the window's start or from unknown data may
/// be older than it looks).
fn early_start(lit: &[Option<bool>], start: usize) -> Option<usize> {
    let at = |i: usize| lit.get(i).copied().flatten();
    let mut i = if at(start) == Some(true) {
        start
    } else if start > 0 && at(start - 1) == Some(true) {
        start - 1
    } else {
        return None;
    };
    while i > 0 && at(i - 1) == Some(true) {
        i -= 1;
    }
    (i < start && i > 0 && at(i - 1) == Some(false)).then_some(i)
}

/// A fallback leaf lit before the more specific leaf that supersedes it, on
/// the same members and without a break between the two episodes, saw the
/// same trouble before the evidence naming its cause came in: the specific
/// leaf is dated from the fallback's onset, as a refining leaf is (etcd
/// records its peers' round trips every 30 s; a member's logs say it is slow
/// sooner). Members: those lit on the fallback's question from its onset to
/// the specific leaf's, and those lit on the specific leaf's own question in
/// its episode.
fn date_back_superseding(
    rules: &RuleSet,
    judged: &[Judged],
    reported: &mut [Option<Run>],
    superseded: &BTreeMap<usize, Vec<usize>>,
) {
    for (&f, by) in superseded {
        let Some(fb) = reported[f] else { continue };
        for &s in by {
            let Some(sp) = reported[s] else { continue };
            let joined = fb.start < sp.start && fb.recovered.is_none_or(|r| r >= sp.start);
            if !joined {
                continue;
            }
            let before: Vec<usize> = (fb.start..sp.start).collect();
            let during: Vec<usize> = (sp.start..=sp.end).collect();
            let theirs = lit_instances(judged, &deciding_signals(rules, f), &before);
            let mine = lit_instances(judged, &own_signals(rules, s), &during);
            if theirs.intersection(&mine).next().is_some() {
                if let Some(m) = reported[s].as_mut() {
                    m.start = fb.start;
                }
            }
        }
    }
}

/// A leaf that refines another (`refines:`) replaces it in the incident when
/// both are in it and their episodes overlap: it explains the same episode,
/// so it is dated from the earlier of the two onsets.
fn refine(
    rules: &RuleSet,
    reported: &mut [Option<Run>],
    incident: &mut [usize],
    superseded: &mut BTreeMap<usize, Vec<usize>>,
) {
    for &l in incident.iter() {
        let Some(r) = rules.leaves[l].refines.as_deref().and_then(|id| rules.leaf(id)) else {
            continue;
        };
        if !incident.contains(&r) {
            continue;
        }
        let (Some(mine), Some(theirs)) = (reported[l], reported[r]) else {
            continue;
        };
        let overlap = mine.start <= theirs.recovered.unwrap_or(usize::MAX)
            && theirs.start <= mine.recovered.unwrap_or(usize::MAX);
        if overlap {
            if let Some(m) = reported[l].as_mut() {
                m.start = m.start.min(theirs.start);
            }
            superseded.entry(r).or_default().push(l);
        }
    }
}

/// Chooses the root cause among the incident's axes (or, for a single
/// snapshot, among the lit axes, in tree order); returns the verdict (without
/// its summary) and the index into `axes` of the root cause.
pub(super) fn root_cause(
    rules: &RuleSet,
    input: &AssessInput,
    axes: &mut [AxisReport],
    sel: &Selection,
    single: bool,
) -> (Verdict, Option<usize>) {
    let (candidates, unchecked_notes) = candidates(rules, axes, sel, single);
    let mut verdict = Verdict {
        earlier: earlier_episodes(rules, input, sel),
        ..Verdict::default()
    };
    let with_onset: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&a| axes[a].onset.is_some())
        .collect();
    let root_axis = if !with_onset.is_empty() {
        Some(order_by_onset(rules, input, axes, &with_onset, &mut verdict))
    } else if !candidates.is_empty() {
        Some(order_by_tree(
            rules,
            input,
            axes,
            &candidates,
            single,
            &mut verdict,
        ))
    } else {
        None
    };
    if let Some(r) = root_axis {
        if let Some(note) = rules.leaf(&axes[r].leaf).and_then(|l| sel.dated.get(&l)) {
            verdict
                .assumptions
                .push(format!("{}: {note}", axis_name(&axes[r].axis, &axes[r].sub_axis)));
        }
    }
    if let Some((r, note)) = root_axis.and_then(|r| unchecked_notes.get(&r).map(|n| (r, n))) {
        verdict
            .assumptions
            .push(format!("{}: {note}", axis_name(&axes[r].axis, &axes[r].sub_axis)));
    }
    (verdict, root_axis)
}

/// A leaf's position in the tree's walk order.
fn tree_pos(rules: &RuleSet, leaf: &str) -> usize {
    rules
        .leaf_order
        .iter()
        .position(|&l| rules.leaves[l].id == leaf)
        .unwrap_or(usize::MAX)
}

/// The axes that can be the root cause (indices into `axes`), with the notes
/// of fallbacks whose more specific axes could not be checked; superseded
/// axes get their note.
fn candidates(
    rules: &RuleSet,
    axes: &mut [AxisReport],
    sel: &Selection,
    single: bool,
) -> (Vec<usize>, BTreeMap<usize, String>) {
    let state_of: BTreeMap<String, AxisState> = axes.iter().map(|a| (a.leaf.clone(), a.state)).collect();
    let mut candidates: Vec<usize> = Vec::new(); // indices into `axes`
    let mut unchecked_notes: BTreeMap<usize, String> = BTreeMap::new();
    for (a, ax) in axes.iter_mut().enumerate() {
        let Some(l) = rules.leaf(&ax.leaf) else { continue };
        if let Some(by) = sel.superseded.get(&l) {
            let names: Vec<&str> = by.iter().map(|&o| rules.leaves[o].id.as_str()).collect();
            ax.note = Some(if rules.leaves[l].fallback {
                format!(
                    "lit only while no more specific axis was lit; superseded by {}",
                    names.join(", ")
                )
            } else {
                format!(
                    "the same episode is explained more precisely by {} (refines {})",
                    names.join(", "),
                    rules.leaves[l].id
                )
            });
            continue;
        }
        let counts = if single {
            ax.state == AxisState::Lit
        } else {
            sel.incident.contains(&l)
        };
        if !counts {
            continue;
        }
        if rules.leaves[l].fallback {
            if single
                && rules.logic[l]
                    .suppressed_by
                    .iter()
                    .any(|&o| state_of.get(&rules.leaves[o].id) == Some(&AxisState::Lit))
            {
                ax.note = Some("lit only while no more specific axis was lit".into());
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
    (candidates, unchecked_notes)
}

/// Episodes of earlier, separate incidents in the window.
fn earlier_episodes(rules: &RuleSet, input: &AssessInput, sel: &Selection) -> Vec<Episode> {
    sel.earlier
        .iter()
        .map(|(l, r)| {
            let leaf = &rules.leaves[*l];
            Episode {
                leaf: leaf.id.clone(),
                axis: leaf.axis.clone(),
                sub_axis: leaf.sub_axis.clone(),
                onset: input.steps[r.start],
                recovered: r.recovered.map(|i| input.steps[i]),
            }
        })
        .collect()
}

/// The earliest onset is the root cause; axes within one step of it are ties
/// (broken by tree order, as an assumption), the later ones downstream.
fn order_by_onset(
    rules: &RuleSet,
    input: &AssessInput,
    axes: &[AxisReport],
    with_onset: &[usize],
    verdict: &mut Verdict,
) -> usize {
    let pos_of = |leaf: &str| tree_pos(rules, leaf);
    let step = input.step.max(1);
    let earliest = with_onset
        .iter()
        .filter_map(|&a| axes[a].onset)
        .min()
        .unwrap_or(0);
    let mut tied: Vec<usize> = with_onset
        .iter()
        .copied()
        .filter(|&a| axes[a].onset.is_some_and(|o| o.saturating_sub(earliest) <= step))
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
        let lag = o.saturating_sub(root_onset);
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
    root
}

/// Without onsets (a single snapshot), the first lit axis in tree order; the
/// others are ties whose order cannot be told.
fn order_by_tree(
    rules: &RuleSet,
    input: &AssessInput,
    axes: &[AxisReport],
    candidates: &[usize],
    single: bool,
    verdict: &mut Verdict,
) -> usize {
    let pos_of = |leaf: &str| tree_pos(rules, leaf);
    let mut c = candidates.to_vec();
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
    c[0]
}

#[cfg(test)]
mod tests {
    use super::early_start;

    const T: Option<bool> = Some(true);
    const F: Option<bool> = Some(false);

    #[test]
    fn an_early_run_must_reach_the_episode_and_begin_after_an_unlit_step() {
        // Lit from step 1 up to the episode at 3: dated from 1.
        assert_eq!(early_start(&[F, T, T, T], 3), Some(1));
        // Lit up to the step before the episode: the same.
        assert_eq!(early_start(&[F, T, T, F], 3), Some(1));
        // Lit from the window's start, or after unknown data: may be older.
        assert_eq!(early_start(&[T, T, T], 2), None);
        assert_eq!(early_start(&[None, T, T], 2), None);
        // A run that ended before the episode, or none before it.
        assert_eq!(early_start(&[F, T, F, F, T], 4), None);
        assert_eq!(early_start(&[F, F, F, T], 3), None);
        // The episode at the first step has nothing before it.
        assert_eq!(early_start(&[T], 0), None);
    }
}
