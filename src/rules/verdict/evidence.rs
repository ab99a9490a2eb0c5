//! Evidence: a signal's values, baseline, threshold and per-instance state at
//! the reference step, and the localisation sentence ("only etcd-2: …").

use super::judge::Judged;
use super::SignalInput;
use crate::rules::load::RuleSet;
use crate::rules::model::{Direction, Threshold, Unit};
use crate::rules::report::{Evidence, InstanceValue, StepState};
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
    // The localisation names the instances lit anywhere in the episode, so that
    // it agrees with the axis's instance list.
    let in_span: Vec<InstanceValue> = instances
        .iter()
        .map(|iv| {
            let lit_in_span = shown.span.and_then(|(a, b)| {
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
        .collect();
    let localisation = localise(def.unit, &def.threshold, &def.description, &in_span);
    let mut notes: Vec<String> = input.note.iter().cloned().collect();
    for (reason, count) in input.skip_counts() {
        notes.push(format!("{count} step(s) not judged: {reason}"));
    }
    if j.dated_back > 0 {
        notes.push(format!(
            "onset dated {} step(s) earlier by the shortest window that holds two scrapes",
            j.dated_back
        ));
    }
    if j.transient_steps > 0 {
        notes.push(format!(
            "{} step(s) above the threshold for less than its persistence of {} were not counted",
            j.transient_steps,
            crate::timefmt::format_lag(j.persistence)
        ));
    }
    Evidence {
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
        localisation,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        since_start: sig.since_start,
        context: shown.context,
    }
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
