//! Audit-log corroboration of the root cause: the audit signals a leaf lists
//! as `evidence` (role `audit`, e.g. the share of slow requests' time spent
//! in etcd) confirm the axis the tree named when they are lit during its
//! episode, and contradict it when they are read and unlit while another
//! axis's audit signal is lit ("apf-queue-wait owned 70% of slow requests'
//! time, not etcd"). With no audit logs nothing is said; with audit logs that
//! cannot tell (no latency annotations, too few slow requests) that is said.

use super::judge::Judged;
use super::AssessInput;
use crate::rules::load::RuleSet;
use crate::rules::model::SignalRole;
use crate::rules::report::{Availability, Corroboration, CorroborationKind, RootCause, StepState};
use crate::timefmt::format_time;

/// The audit evidence signals of leaf `l`.
fn audit_signals(rules: &RuleSet, l: usize) -> Vec<usize> {
    rules.leaves[l]
        .evidence
        .iter()
        .filter_map(|s| rules.signal(s))
        .filter(|&k| rules.signals[k].def.role == SignalRole::Audit)
        .collect()
}

fn axis_name(rules: &RuleSet, l: usize) -> String {
    let leaf = &rules.leaves[l];
    match &leaf.sub_axis {
        Some(s) => format!("{}/{s}", leaf.axis),
        None => leaf.axis.clone(),
    }
}

/// The first lit step of signal `k` in `[a, b]`, and its largest value there.
fn lit_in(judged: &[Judged], input: &AssessInput, k: usize, a: usize, b: usize) -> Option<(usize, f64)> {
    let first = (a..=b).find(|&i| judged[k].states.get(i) == Some(&StepState::Lit))?;
    let v = max_value(input, k, first, b);
    Some((first, v.unwrap_or(f64::NAN)))
}

fn max_value(input: &AssessInput, k: usize, a: usize, b: usize) -> Option<f64> {
    let s = input.signals.get(k)?;
    s.values
        .values()
        .flat_map(|row| row.iter().skip(a).take(b + 1 - a.min(b + 1)).flatten())
        .copied()
        .filter(|v| v.is_finite())
        .reduce(f64::max)
}

/// How the audit logs bear on the root cause (empty without audit logs or
/// without audit evidence for that axis).
pub(super) fn corroborate(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    root: Option<&RootCause>,
    at: usize,
) -> Vec<Corroboration> {
    let Some(rc) = root else { return Vec::new() };
    let Some(l) = rules.leaves.iter().position(|x| x.id == rc.leaf) else {
        return Vec::new();
    };
    let own = audit_signals(rules, l);
    if own.is_empty() {
        return Vec::new();
    }
    let avail = |k: usize| {
        input
            .signals
            .get(k)
            .map_or(Availability::Error, |s| s.availability)
    };
    if own.iter().all(|&k| avail(k) == Availability::RoleAbsent) {
        return Vec::new();
    }
    let a = rc
        .onset
        .and_then(|o| input.steps.iter().position(|&t| t >= o))
        .unwrap_or(0);
    let b = rc
        .recovered
        .and_then(|r| input.steps.iter().position(|&t| t >= r))
        .unwrap_or(at)
        .min(at);
    let (a, b) = (a.min(b), b);
    let axis = axis_name(rules, l);
    let sig_desc = |k: usize| rules.signals[k].def.description.clone();
    let unit = |k: usize| rules.signals[k].def.unit;
    if own.iter().all(|&k| avail(k) != Availability::Evaluated) {
        let why = own
            .iter()
            .filter_map(|&k| input.signals.get(k).and_then(|s| s.note.clone()))
            .next()
            .unwrap_or_default();
        return vec![Corroboration {
            kind: CorroborationKind::CannotTell,
            axis,
            signal: rules.signals[own[0]].def.id.clone(),
            other_axis: None,
            from: None,
            value: None,
            text: format!("the audit logs cannot confirm or contradict it: {why}"),
        }];
    }
    // Confirmed: an own audit signal lit during the episode.
    for &k in &own {
        if let Some((i, v)) = lit_in(judged, input, k, a, b) {
            return vec![Corroboration {
                kind: CorroborationKind::Confirms,
                axis: axis.clone(),
                signal: rules.signals[k].def.id.clone(),
                other_axis: None,
                from: Some(input.steps[i]),
                value: v.is_finite().then_some(v),
                text: format!(
                    "the audit logs confirm {axis}: {} {} from {}",
                    sig_desc(k),
                    unit(k).format(v),
                    format_time(input.steps[i])
                ),
            }];
        }
    }
    // Contradicted: another axis's audit signal lit instead.
    for &m in &rules.leaf_order {
        if rules.leaves[m].axis == rules.leaves[l].axis {
            continue;
        }
        for k in audit_signals(rules, m) {
            if own.contains(&k) {
                continue;
            }
            if let Some((i, v)) = lit_in(judged, input, k, a, b) {
                let mine = own
                    .iter()
                    .filter_map(|&o| max_value(input, o, a, b).map(|x| (o, x)))
                    .next();
                return vec![Corroboration {
                    kind: CorroborationKind::Contradicts,
                    axis: axis.clone(),
                    signal: rules.signals[k].def.id.clone(),
                    other_axis: Some(axis_name(rules, m)),
                    from: Some(input.steps[i]),
                    value: v.is_finite().then_some(v),
                    text: format!(
                        "the audit logs disagree with the metrics: they point at {} ({} {} from {}){}",
                        axis_name(rules, m),
                        sig_desc(k),
                        unit(k).format(v),
                        format_time(input.steps[i]),
                        match mine {
                            Some((o, x)) =>
                                format!(", not at {axis} ({} at most {})", sig_desc(o), unit(o).format(x)),
                            None => format!(", not at {axis}"),
                        }
                    ),
                }];
            }
        }
    }
    // Read, and neither confirming nor pointing elsewhere.
    let known = own
        .iter()
        .any(|&k| (a..=b).any(|i| judged[k].states.get(i).is_some_and(|s| *s != StepState::Unknown)));
    // The largest value at the steps judged unlit (a share over too few slow
    // requests is not judged, and not quoted).
    let mine = own
        .iter()
        .filter_map(|&o| {
            (a..=b)
                .filter(|&i| judged[o].states.get(i) == Some(&StepState::Unlit))
                .filter_map(|i| max_value(input, o, i, i))
                .reduce(f64::max)
                .map(|x| (o, x))
        })
        .next();
    vec![Corroboration {
        kind: if known {
            CorroborationKind::DoesNotConfirm
        } else {
            CorroborationKind::CannotTell
        },
        axis: axis.clone(),
        signal: rules.signals[own[0]].def.id.clone(),
        other_axis: None,
        from: None,
        value: mine.map(|(_, x)| x),
        text: match (known, mine) {
            (true, Some((o, x))) => format!(
                "the audit logs do not confirm {axis}: {} at most {} during its episode ({})",
                sig_desc(o),
                unit(o).format(x),
                rules.signals[o].def.threshold.text(unit(o))
            ),
            (true, None) => format!(
                "the audit logs do not confirm {axis}: no request slower than 500 ms with latency annotations during its episode"
            ),
            (false, _) => format!(
                "the audit logs cannot confirm or contradict {axis}: too few slow requests with latency annotations during its episode"
            ),
        },
    }]
}
