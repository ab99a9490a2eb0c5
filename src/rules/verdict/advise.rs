//! Advisories (`advisories:` in the rule file): properties of the control
//! plane that are not failing axes (a Kine backend, events on the shared
//! etcd, events already on their own etcd). One is reported when its `when`
//! condition holds, and its `unless` does not, at some step of the window,
//! with its evidence values, its ADR-ready advice and its falsifier; the
//! leaves it marks `not_applicable` are said to be so, with its reason.

use super::judge::Judged;
use super::timeline::eval_condition;
use super::AssessInput;
use crate::rules::load::RuleSet;
use crate::rules::report::{
    AdvisoryEvidence, AdvisoryReport, AxisReport, AxisState, Gap, GapKind, StepState,
};

/// The value of signal `k` at step `i` (the largest over instances), or
/// else its latest value before.
fn value_at(input: &AssessInput, k: usize, i: usize) -> Option<f64> {
    let s = input.signals.get(k)?;
    (0..=i).rev().find_map(|j| {
        s.values
            .values()
            .filter_map(|row| row.get(j).copied().flatten())
            .filter(|v| !v.is_nan())
            .reduce(f64::max)
    })
}

/// The advisories that hold in the window, in file order.
pub(super) fn advisories(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    at: usize,
) -> Vec<AdvisoryReport> {
    let n = input.steps.len();
    if n == 0 {
        return Vec::new();
    }
    let at = at.min(n - 1);
    let mut out = Vec::new();
    for a in &rules.advisories {
        let holds = |i: usize| {
            eval_condition(&a.when, rules, judged, i) == StepState::Lit
                && a.unless
                    .as_ref()
                    .is_none_or(|u| eval_condition(u, rules, judged, i) != StepState::Lit)
        };
        let Some(first) = (0..=at).find(|&i| holds(i)) else {
            continue;
        };
        let last = (first..=at).rev().find(|&i| holds(i)).unwrap_or(first);
        let mut ids: Vec<&str> = a.when.signals();
        ids.extend(a.evidence.iter().map(String::as_str));
        let mut seen = std::collections::BTreeSet::new();
        let evidence = ids
            .into_iter()
            .filter(|s| seen.insert(*s))
            .filter_map(|s| rules.signal(s))
            .map(|k| {
                let def = &rules.signals[k].def;
                // At the last step it held, else the latest in the window (a
                // member scraped at another time than the apiserver).
                let when = if value_at(input, k, last).is_some() {
                    last
                } else {
                    at
                };
                let v = value_at(input, k, when);
                // Several instances (etcd members, apiserver replicas): each
                // one's value, so members can be told apart.
                let per: Vec<String> = input
                    .signals
                    .get(k)
                    .map(|s| {
                        s.values
                            .iter()
                            .filter_map(|(inst, row)| {
                                (0..=when)
                                    .rev()
                                    .find_map(|j| row.get(j).copied().flatten().filter(|v| !v.is_nan()))
                                    .map(|v| format!("{inst} {}", def.unit.format(v)))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                AdvisoryEvidence {
                    signal: def.id.clone(),
                    description: def.description.clone(),
                    value: v,
                    value_text: v.map_or_else(
                        || {
                            input
                                .signals
                                .get(k)
                                .and_then(|s| s.note.clone())
                                .unwrap_or_else(|| "no value".into())
                        },
                        |v| {
                            if per.len() > 1 {
                                per.join(", ")
                            } else {
                                def.unit.format(v)
                            }
                        },
                    ),
                    threshold: def.threshold.text(def.unit),
                }
            })
            .collect();
        out.push(AdvisoryReport {
            id: a.id.clone(),
            title: a.title.clone(),
            since: input.steps[first],
            holds_at_end: holds(at),
            advice: a.advice.trim().to_string(),
            falsifier: a.falsifier.trim().to_string(),
            evidence,
            not_applicable: a.not_applicable.clone(),
            reason: a.reason.clone(),
        });
    }
    out
}

/// Marks the leaves the advisories make not applicable (unless lit): their
/// note and their gap say why.
pub(super) fn mark_not_applicable(
    advisories: &[AdvisoryReport],
    axes: &mut [AxisReport],
    gaps: &mut Vec<Gap>,
) {
    for a in advisories {
        let reason = a.reason.clone().unwrap_or_default();
        for l in &a.not_applicable {
            let Some(ax) = axes.iter_mut().find(|x| &x.leaf == l) else {
                continue;
            };
            if ax.state == AxisState::Lit {
                continue;
            }
            let msg = format!("not applicable ({}): {reason}", a.id);
            ax.note = Some(msg.clone());
            gaps.retain(|g| !(g.kind == GapKind::NotChecked && &g.subject == l));
            gaps.push(Gap {
                kind: GapKind::NotChecked,
                subject: l.clone(),
                message: format!("{l} {msg}"),
            });
        }
    }
}
