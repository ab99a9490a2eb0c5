//! Evidence: a signal's values, baseline, threshold and per-instance state at
//! the reference step, and the localisation sentence ("only etcd-2: …").

use super::judge::{median, Judged};
use super::{BreakdownInput, SignalInput};
use crate::rules::load::{RuleSet, Signal};
use crate::rules::model::{Direction, Threshold, Unit};
use crate::rules::report::{Contributor, Evidence, InstanceValue, StepState};
use crate::store::Millis;

pub(super) fn worst(dir_below: bool, vals: impl Iterator<Item = f64>) -> Option<f64> {
    vals.filter(|v| !v.is_nan()).fold(None, |acc: Option<f64>, v| {
        Some(match acc {
            None => v,
            Some(a) if dir_below => a.min(v),
            Some(a) => a.max(v),
        })
    })
}

pub(super) fn is_below(t: &Threshold) -> bool {
    t.below.is_some()
        || t.relative
            .as_ref()
            .is_some_and(|r| r.direction == Direction::Below)
}

/// Where and how a signal is shown as evidence.
pub(super) struct Shown {
    /// The reference step (the assessment time, or the episode's last lit step).
    pub ref_i: usize,
    /// The episode's steps `[start, end]`: instances lit anywhere in it are the
    /// lit ones of the localisation sentence.
    pub span: Option<(usize, usize)>,
    /// Shown only, not deciding the leaf.
    pub context: bool,
    /// The window-start baseline steps `[start, end)`, for the contributors'
    /// baselines.
    pub baseline_steps: Option<(usize, usize)>,
}

pub(super) fn evidence(
    rules: &RuleSet,
    k: usize,
    input: &SignalInput,
    j: &Judged,
    shown: &Shown,
    steps: &[Millis],
) -> Evidence {
    let ref_i = shown.ref_i;
    let sig = &rules.signals[k];
    let def = &sig.def;
    let below = is_below(&def.threshold);
    let n = steps.len();
    let series: Vec<Option<f64>> = (0..n)
        .map(|i| {
            worst(
                below,
                input.values.values().filter_map(|v| v.get(i).copied().flatten()),
            )
        })
        .collect();
    let instances: Vec<InstanceValue> = input
        .values
        .iter()
        .map(|(inst, v)| InstanceValue {
            instance: inst.clone(),
            value: v.get(ref_i).copied().flatten(),
            baseline: j.baseline.get(inst).copied(),
            lit: j.lit.get(inst).and_then(|l| l.get(ref_i).copied().flatten()),
        })
        .collect();
    let value = series.get(ref_i).copied().flatten();
    let worst_inst = instances
        .iter()
        .filter(|i| i.value.is_some() && i.value == value)
        .map(|i| i.instance.clone())
        .next();
    let lit = match j.states.get(ref_i) {
        Some(StepState::Lit) => Some(true),
        Some(StepState::Unlit) => Some(false),
        _ => None,
    };
    let in_span = lit_in_span(&instances, j, shown.span);
    let localisation = localise(def.unit, &def.threshold, &def.description, &in_span);
    let notes = evidence_notes(sig, input, j, shown, steps);
    let (contributors, contributors_note) = match (&input.breakdown, &sig.breakdown) {
        (Some(b), Some(def)) => who(b, def.unit, ref_i, shown.baseline_steps),
        _ => (Vec::new(), None),
    };
    Evidence {
        contributors,
        contributors_note,
        signal: def.id.clone(),
        description: def.description.clone(),
        role: def.role.as_str().to_string(),
        unit: def.unit,
        availability: input.availability,
        alternative: input.alternative,
        expression: input.expression.clone(),
        threshold: def.threshold.clone(),
        threshold_text: def.threshold.text(def.unit),
        value,
        value_at: value.and(steps.get(ref_i).copied()),
        baseline: worst_inst.and_then(|i| j.baseline.get(&i).copied()),
        lit,
        instances,
        series,
        instance_series: input.values.clone(),
        instance_lit: j.lit.clone(),
        threshold_lines: super::judge::threshold_lines(&def.threshold, &j.baseline),
        localisation,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        since_start: sig.since_start,
        context: shown.context,
    }
}

/// The instances with their state over the episode `span` (lit at any step
/// of it), so that the localisation agrees with the axis's instance list.
fn lit_in_span(instances: &[InstanceValue], j: &Judged, span: Option<(usize, usize)>) -> Vec<InstanceValue> {
    instances
        .iter()
        .map(|iv| {
            let lit_in_span = span.and_then(|(a, b)| {
                let l = j.lit.get(&iv.instance)?;
                let v: Vec<Option<bool>> = (a..=b).map(|i| l.get(i).copied().flatten()).collect();
                if v.contains(&Some(true)) {
                    Some(true)
                } else if v.contains(&Some(false)) {
                    Some(false)
                } else {
                    None
                }
            });
            InstanceValue {
                lit: lit_in_span.or(iv.lit),
                ..iv.clone()
            }
        })
        .collect()
}

/// What the evidence says of how the signal was judged: its input's note,
/// steps not judged, when a context signal was lit, an onset dated back,
/// steps quieted, a peer-judged relative threshold, runs too short.
fn evidence_notes(
    sig: &Signal,
    input: &SignalInput,
    j: &Judged,
    shown: &Shown,
    steps: &[Millis],
) -> Vec<String> {
    let mut notes: Vec<String> = input.note.iter().cloned().collect();
    for (reason, count) in input.skip_counts() {
        notes.push(format!("{count} step(s) not judged: {reason}"));
    }
    if shown.context {
        if let Some(t) = lit_over_time(j, steps) {
            notes.push(t);
        }
    }
    if j.dated_back > 0 {
        notes.push(format!(
            "onset dated {} step(s) earlier by the shortest window that holds two scrapes",
            j.dated_back
        ));
    }
    if let (true, Some(q)) = (j.quieted > 0, &sig.def.quiet_after) {
        notes.push(format!(
            "{} lit step(s) not counted: within {} after `{}` was lit (what was recorded then carries that fault's wait)",
            j.quieted,
            crate::timefmt::format_lag(q.duration.0),
            q.signal
        ));
    }
    if j.peer_judged {
        notes.push(
            "no baseline in the window: the relative part compared each step with the median of the other instances"
                .to_string(),
        );
    }
    if j.transient_steps > 0 {
        notes.push(format!(
            "{} step(s) above the threshold for less than its persistence of {} were not counted",
            j.transient_steps,
            crate::timefmt::format_lag(j.persistence)
        ));
    }
    notes
}

/// "only etcd-2: 1.2 s; others ≤ 7 ms" when some but not all instances are lit;
/// "all 3 instances" when every instance with a value is lit.
fn localise(unit: Unit, threshold: &Threshold, what: &str, inst: &[InstanceValue]) -> Option<String> {
    let lit: Vec<&InstanceValue> = inst.iter().filter(|i| i.lit == Some(true)).collect();
    let unlit: Vec<&InstanceValue> = inst.iter().filter(|i| i.lit == Some(false)).collect();
    if lit.is_empty() {
        return None;
    }
    let fmt_v = |i: &InstanceValue| {
        i.value
            .map(|v| threshold.format_value(unit, v))
            .unwrap_or_else(|| "no data".into())
    };
    let names: Vec<&str> = lit.iter().map(|i| i.instance.as_str()).collect();
    let values: Vec<String> = lit.iter().map(|i| fmt_v(i)).collect();
    if unlit.is_empty() {
        return Some(if lit.len() == 1 {
            format!("{}: {what} {} (the only instance with data)", names[0], values[0])
        } else {
            let each: Vec<String> = lit
                .iter()
                .map(|i| format!("{} {}", i.instance, fmt_v(i)))
                .collect();
            format!("all {} instances: {what} {}", lit.len(), each.join(", "))
        });
    }
    let others: Vec<f64> = unlit.iter().filter_map(|i| i.value).collect();
    let lo = others.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = others.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = if others.is_empty() {
        "no data".to_string()
    } else if lo == hi {
        threshold.format_value(unit, lo)
    } else {
        format!("{}–{}", unit.format(lo), unit.format(hi))
    };
    Some(format!(
        "only {}: {what} {}, others {range}",
        names.join(", "),
        values.join(", ")
    ))
}

/// Most runs [`lit_over_time`] lists.
const MAX_RUNS: usize = 8;

/// Which instances a context signal lit on over the window, as runs: "lit
/// over the window: etcd-0 from 00:00:00Z, etcd-1 from 00:04:30Z" (for
/// `etcd_is_leader`: who led when). `None` when it never lit.
fn lit_over_time(j: &Judged, steps: &[Millis]) -> Option<String> {
    let at_step = |i: usize| -> Option<Vec<&str>> {
        let mut known = false;
        let mut lit = Vec::new();
        for (inst, l) in &j.lit {
            match l.get(i).copied().flatten() {
                Some(true) => lit.push(inst.as_str()),
                Some(false) => known = true,
                None => {}
            }
        }
        (known || !lit.is_empty()).then_some(lit)
    };
    let mut runs: Vec<(usize, Option<Vec<&str>>)> = Vec::new();
    for i in 0..steps.len() {
        let cur = at_step(i);
        if runs.last().is_none_or(|(_, prev)| *prev != cur) {
            runs.push((i, cur));
        }
    }
    if !runs
        .iter()
        .any(|(_, r)| r.as_ref().is_some_and(|v| !v.is_empty()))
    {
        return None;
    }
    let name = |r: &Option<Vec<&str>>| match r {
        None => "unknown".to_string(),
        Some(v) if v.is_empty() => "none".to_string(),
        Some(v) => v.join(", "),
    };
    if runs.len() == 1 {
        return Some(format!("lit over the window: {} throughout", name(&runs[0].1)));
    }
    let mut parts: Vec<String> = runs
        .iter()
        .take(MAX_RUNS)
        .map(|(i, r)| format!("{} from {}", name(r), crate::timefmt::format_time(steps[*i])))
        .collect();
    if runs.len() > MAX_RUNS {
        parts.push(format!("… ({} changes in all)", runs.len() - 1));
    }
    Some(format!("lit over the window: {}", parts.join(", ")))
}

/// Most contributors shown per signal.
const MAX_CONTRIBUTORS: usize = 5;

/// The largest contributors at step `i`, with their share of the total and
/// their median over the baseline steps.
fn who(
    b: &BreakdownInput,
    unit: Unit,
    i: usize,
    base: Option<(usize, usize)>,
) -> (Vec<Contributor>, Option<String>) {
    let mut notes: Vec<String> = b.note.iter().cloned().collect();
    let mut at: Vec<(&Vec<String>, f64)> = b
        .groups
        .iter()
        .filter_map(|(k, v)| {
            v.get(i)
                .copied()
                .flatten()
                .filter(|x| x.is_finite())
                .map(|x| (k, x))
        })
        .collect();
    let total: f64 = at.iter().map(|(_, v)| v).sum();
    if at.is_empty() || total <= 0.0 {
        return (Vec::new(), (!notes.is_empty()).then(|| notes.join("; ")));
    }
    at.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let nonzero = at.iter().filter(|(_, v)| *v > 0.0).count();
    if nonzero > MAX_CONTRIBUTORS {
        notes.push(format!(
            "{} smaller contributors not shown",
            nonzero - MAX_CONTRIBUTORS
        ));
    }
    let out = at
        .into_iter()
        .filter(|(_, v)| *v > 0.0)
        .take(MAX_CONTRIBUTORS)
        .map(|(k, v)| Contributor {
            labels: b.by.iter().cloned().zip(k.iter().cloned()).collect(),
            unit,
            value: Some(v),
            share: Some(v / total),
            baseline: base.and_then(|(s, e)| {
                let vals = &b.groups[k];
                median(
                    (s..e.min(vals.len()))
                        .filter_map(|j| vals[j])
                        .filter(|x| x.is_finite())
                        .collect(),
                )
            }),
        })
        .collect();
    (out, (!notes.is_empty()).then(|| notes.join("; ")))
}
