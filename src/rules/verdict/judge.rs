//! Phase 1: every signal judged against its threshold, per instance and step,
//! with the per-instance baselines the relative thresholds need.

use std::collections::BTreeMap;

use super::{BaselinePlan, SignalInput};
use crate::rules::model::{Combine, Direction, Threshold};
use crate::rules::report::{Availability, StepState};

/// Per-signal judgement at every step.
pub(super) struct Judged {
    /// Instance → baseline.
    pub baseline: BTreeMap<String, f64>,
    /// Instance → lit per step.
    pub lit: BTreeMap<String, Vec<Option<bool>>>,
    /// Aggregate per step.
    pub states: Vec<StepState>,
    /// Not exposed by this version, or no target of its role: an `any` list
    /// skips it instead of becoming unknown.
    pub unavailable: bool,
}

/// Judges one value against a threshold. `None` = cannot decide (no value).
/// NaN means the expression had nothing to measure in the window (0/0, the
/// quantile of an empty histogram): nothing was observed, so it is unlit.
pub fn judge(t: &Threshold, v: Option<f64>, baseline: Option<f64>) -> Option<bool> {
    let v = v?;
    if v.is_nan() {
        return Some(false);
    }
    let abs = match (t.above, t.below) {
        (Some(a), _) => Some(v > a),
        (None, Some(b)) => Some(v < b),
        (None, None) => None,
    };
    let rel = match (&t.relative, baseline.filter(|b| b.is_finite())) {
        (Some(r), Some(b)) => Some(match r.direction {
            Direction::Above => v > r.factor * b && v > r.floor,
            Direction::Below => v < r.factor * b && b > r.floor,
        }),
        _ => None,
    };
    match (abs, rel) {
        (Some(a), Some(r)) => Some(match t.combine {
            Combine::Any => a || r,
            Combine::All => a && r,
        }),
        (Some(a), None) => Some(a),
        (None, Some(r)) => Some(r),
        (None, None) => None,
    }
}

/// The median of the finite values, `None` when there are none.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub(super) fn judge_signal(t: &Threshold, input: &SignalInput, plan: &BaselinePlan, nsteps: usize) -> Judged {
    let mut baseline: BTreeMap<String, f64> = BTreeMap::new();
    if input.availability == Availability::Evaluated && t.relative.is_some() {
        if let Some(b) = &input.baseline {
            baseline = b.clone();
        } else if let Some((s, e)) = plan.steps {
            for (inst, vals) in &input.values {
                let vs: Vec<f64> = vals.iter().take(e).skip(s).flatten().copied().collect();
                if let Some(m) = median(vs) {
                    baseline.insert(inst.clone(), m);
                }
            }
        }
        // An instance without its own baseline uses the median of the others'.
        if !baseline.is_empty() {
            let all = median(baseline.values().copied().collect());
            if let Some(all) = all {
                for inst in input.values.keys() {
                    baseline.entry(inst.clone()).or_insert(all);
                }
            }
        }
    }
    let mut lit = BTreeMap::new();
    let mut states = vec![StepState::Unknown; nsteps];
    if input.availability == Availability::Evaluated {
        for (inst, vals) in &input.values {
            let b = baseline.get(inst).copied();
            let l: Vec<Option<bool>> = (0..nsteps)
                .map(|i| judge(t, vals.get(i).copied().flatten(), b))
                .collect();
            for (i, x) in l.iter().enumerate() {
                match (x, states[i]) {
                    (Some(true), _) => states[i] = StepState::Lit,
                    (Some(false), StepState::Unknown) => states[i] = StepState::Unlit,
                    _ => {}
                }
            }
            lit.insert(inst.clone(), l);
        }
    }
    let unavailable = matches!(
        input.availability,
        Availability::NotExposed | Availability::RoleAbsent
    );
    Judged {
        baseline,
        lit,
        states,
        unavailable,
    }
}
