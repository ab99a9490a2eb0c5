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

pub(super) fn evidence(
    rules: &RuleSet,
    k: usize,
    input: &SignalInput,
    j: &Judged,
    ref_i: usize,
    steps: &[Millis],
) -> Evidence {
    let def = &rules.signals[k].def;
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
    let localisation = localise(def.unit, &def.description, &instances);
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
        note: input.note.clone(),
    }
}

/// "only etcd-2: 1.2 s; others ≤ 7 ms" when some but not all instances are lit;
/// "all 3 instances" when every instance with a value is lit.
fn localise(unit: Unit, what: &str, inst: &[InstanceValue]) -> Option<String> {
    let lit: Vec<&InstanceValue> = inst.iter().filter(|i| i.lit == Some(true)).collect();
    let unlit: Vec<&InstanceValue> = inst.iter().filter(|i| i.lit == Some(false)).collect();
    if lit.is_empty() {
        return None;
    }
    let fmt_v = |i: &InstanceValue| {
        i.value
            .map(|v| unit.format(v))
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
        unit.format(lo)
    } else {
        format!("{}–{}", unit.format(lo), unit.format(hi))
    };
    Some(format!(
        "only {}: {what} {}, others {range}",
        names.join(", "),
        values.join(", ")
    ))
}
