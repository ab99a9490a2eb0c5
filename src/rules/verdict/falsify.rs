//! Phase 7b: the root cause's falsifier filled in with the measured numbers.
//!
//! - **Deciding**: the root cause's deciding signals lit in its episode, at the
//!   reference step of its evidence (the assessment time, or the episode's last
//!   lit step), its own question's signals first.
//! - **Cleared**: every other axis with an ordinary P0/P1 leaf (the
//!   strong-consistency path, `rules/README.md`) whose leaves were all checked
//!   and clear in the window. For each, the deciding signal that came nearest
//!   to its threshold at the same time without crossing it (value over the
//!   absolute threshold, or over factor × baseline; a signal lit there is
//!   skipped, since a compound question is clear by its unlit part): "etcd:
//!   the apiserver's etcd p99 24 ms (threshold > 500 ms, baseline 22 ms)" is
//!   what rules etcd out under an APF verdict.
//! - The statement and the ADR sentence quote them, then the leaf's falsifier.

use std::collections::BTreeMap;

use super::axes::own_signals;
use super::axis_name;
use crate::rules::load::RuleSet;
use crate::rules::model::{Direction, Severity};
use crate::rules::report::{
    Availability, AxisReport, AxisState, Downstream, Evidence, Falsification, Measure,
};
use crate::store::Millis;

/// Most deciding measurements quoted.
const MAX_DECIDING: usize = 3;
/// Most cleared alternatives quoted.
const MAX_CLEARED: usize = 4;

fn measure(axis: &str, e: &Evidence, i: Option<usize>, steps: &[Millis]) -> Measure {
    // At the reference step: the worst instance of the evidence. At another
    // step: the worst value of the series there.
    let (value, at) = match i {
        None => (e.value, e.value_at),
        Some(i) => (e.series.get(i).copied().flatten(), steps.get(i).copied()),
    };
    let idx = i.or_else(|| at.and_then(|t| steps.iter().position(|x| *x == t)));
    let instance = match (value, idx) {
        (Some(v), Some(idx)) => e
            .instance_series
            .iter()
            .find(|(_, s)| s.get(idx).copied().flatten() == Some(v))
            .map(|(inst, _)| inst.clone()),
        _ => None,
    };
    let baseline = instance
        .as_ref()
        .and_then(|inst| e.instances.iter().find(|x| &x.instance == inst))
        .and_then(|x| x.baseline)
        .or(e.baseline);
    Measure {
        axis: axis.to_string(),
        signal: e.signal.clone(),
        description: e.description.clone(),
        unit: e.unit,
        value,
        baseline,
        threshold_text: e.threshold_text.clone(),
        instance,
        at,
    }
}

/// How near a value came to its threshold (1 = at it); `None` for thresholds
/// that light below a value (a gauge that is 1 when healthy says nothing by
/// being 1) and for values without a comparison.
fn nearness(e: &Evidence, v: f64, baseline: Option<f64>) -> Option<f64> {
    if !v.is_finite() || e.threshold.below.is_some() {
        return None;
    }
    let mut best: Option<f64> = None;
    if let Some(a) = e.threshold.above.filter(|a| *a > 0.0) {
        best = Some(v / a);
    }
    if let (Some(r), Some(b)) = (&e.threshold.relative, baseline) {
        if r.direction == Direction::Above {
            let t = (r.factor * b).max(r.floor);
            if t > 0.0 {
                let n = v / t;
                best = Some(best.map_or(n, |x: f64| x.max(n)));
            }
        }
    }
    best
}

/// The other axes of the strong-consistency path (a P0/P1 leaf) whose leaves
/// are all clear, each with its deciding signal nearest its threshold at
/// `ref_i`: the nearest misses first, then in tree order.
fn cleared_alternatives(
    rules: &RuleSet,
    axes: &[AxisReport],
    ax: &AxisReport,
    ref_i: Option<usize>,
    steps: &[Millis],
) -> Vec<Measure> {
    let mut by_axis: BTreeMap<&str, Vec<&AxisReport>> = BTreeMap::new();
    for a in axes.iter().filter(|a| a.axis != ax.axis) {
        by_axis.entry(a.axis.as_str()).or_default().push(a);
    }
    let mut cleared: Vec<(f64, usize, Measure)> = Vec::new();
    for (axis, leaves) in by_axis {
        let strong = leaves.iter().any(|a| {
            rules.leaf(&a.leaf).is_some_and(|i| {
                !rules.leaves[i].fallback && matches!(rules.leaves[i].severity, Severity::P0 | Severity::P1)
            })
        });
        if !strong || !leaves.iter().all(|a| a.state == AxisState::Clear) {
            continue;
        }
        let order = axes.iter().position(|a| a.axis == axis).unwrap_or(usize::MAX);
        if let Some((n, m)) = nearest_miss(axis, &leaves, ref_i, steps) {
            cleared.push((n, order, m));
        }
    }
    // The nearest misses first; then tree order.
    cleared.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    cleared.into_iter().take(MAX_CLEARED).map(|(_, _, m)| m).collect()
}

/// A clear axis's evidence nearest its threshold at `ref_i` (by
/// [`nearness`]), else its first measured one; signals lit there cleared
/// nothing and are skipped.
fn nearest_miss(
    axis: &str,
    leaves: &[&AxisReport],
    ref_i: Option<usize>,
    steps: &[Millis],
) -> Option<(f64, Measure)> {
    let mut best: Option<(f64, Measure)> = None;
    let mut first: Option<Measure> = None;
    for e in leaves.iter().flat_map(|a| a.evidence.iter()) {
        if e.context || e.availability != Availability::Evaluated {
            continue;
        }
        // A signal over its threshold cleared nothing: the axis is clear
        // because another part of its question (`all:`) is not lit.
        let lit_here = match ref_i {
            Some(i) => e
                .instance_lit
                .values()
                .any(|l| l.get(i).copied().flatten() == Some(true)),
            None => e.lit == Some(true),
        };
        if lit_here {
            continue;
        }
        let m = measure(axis, e, ref_i, steps);
        let Some(v) = m.value else { continue };
        if first.is_none() {
            first = Some(m.clone());
        }
        if let Some(n) = nearness(e, v, m.baseline) {
            if best.as_ref().is_none_or(|(b, _)| n > *b) {
                best = Some((n, m));
            }
        }
    }
    best.or(first.map(|m| (f64::NEG_INFINITY, m)))
}

/// Fills in the root cause's falsifier; `root` indexes `axes`.
pub(super) fn falsification(
    rules: &RuleSet,
    axes: &[AxisReport],
    root: usize,
    downstream: &[Downstream],
    steps: &[Millis],
) -> Option<Falsification> {
    let ax = axes.get(root)?;
    let l = rules.leaf(&ax.leaf)?;
    let leaf = &rules.leaves[l];
    let name = axis_name(&ax.axis, &ax.sub_axis);
    // Deciding: lit at the reference step, the leaf's own question first.
    let own: Vec<&str> = own_signals(rules, l)
        .into_iter()
        .map(|k| rules.signals[k].def.id.as_str())
        .collect();
    let mut lit: Vec<&Evidence> = ax
        .evidence
        .iter()
        .filter(|e| !e.context && e.lit == Some(true) && e.value.is_some())
        .collect();
    lit.sort_by_key(|e| !own.contains(&e.signal.as_str()));
    let deciding: Vec<Measure> = lit
        .iter()
        .take(MAX_DECIDING)
        .map(|e| measure(&name, e, None, steps))
        .collect();
    let ref_time = deciding.first().and_then(|m| m.at).or(ax.onset);
    let ref_i = ref_time.and_then(|t| steps.iter().position(|x| *x == t));

    let cleared = cleared_alternatives(rules, axes, ax, ref_i, steps);

    let when = ax
        .onset
        .map(|o| format!(" from {}", crate::timefmt::format_time(o)))
        .unwrap_or_default();
    let rests = if deciding.is_empty() {
        "no deciding signal has a value at the reference step".to_string()
    } else {
        deciding.iter().map(Measure::text).collect::<Vec<_>>().join("; ")
    };
    let clear_text = |m: &Measure| format!("{}: {}", m.axis, m.text());
    let mut statement = format!("{name} ({}){when} rests on: {rests}.", leaf.severity);
    if !cleared.is_empty() {
        statement.push_str(&format!(
            " Cleared alternatives: {}.",
            cleared.iter().map(clear_text).collect::<Vec<_>>().join("; ")
        ));
    }
    statement.push_str(&format!(" This is wrong if: {}", leaf.falsifier.trim()));

    let mut adr = format!(
        "Decision: attribute the incident{when} to {name} ({}, {})",
        leaf.severity, leaf.title
    );
    if let Some(m) = deciding.first() {
        adr.push_str(&format!(", because {}", m.text()));
    }
    if let Some(c) = cleared.first() {
        adr.push_str(&format!(", while {} stayed clear ({})", c.axis, c.text()));
    }
    if !downstream.is_empty() {
        let d: Vec<&str> = downstream.iter().map(|d| d.note.as_str()).collect();
        adr.push_str(&format!("; downstream: {}", d.join(", ")));
    }
    adr.push_str(&format!(
        "; revisit if the falsifier holds: {}",
        leaf.falsifier.trim()
    ));
    Some(Falsification {
        deciding,
        cleared,
        statement,
        adr,
    })
}
