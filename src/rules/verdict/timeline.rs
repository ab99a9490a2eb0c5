//! Phases 2–3: the tree's questions answered at every step (three-valued), and
//! each leaf's timeline from the questions it requires.

use super::judge::Judged;
use crate::rules::load::RuleSet;
use crate::rules::model::Condition;
use crate::rules::report::StepState;

/// One state per step.
pub(super) type States = Vec<StepState>;

/// A condition at step `i`: `any` is lit if one part is lit and unlit if all
/// are unlit; `all` is unlit if one part is unlit and lit if all are lit.
pub(super) fn eval_condition(c: &Condition, rules: &RuleSet, judged: &[Judged], i: usize) -> StepState {
    match c {
        Condition::Signal(s) => rules
            .signal(s)
            .map(|k| judged[k].states[i])
            .unwrap_or(StepState::Unknown),
        Condition::Any { any } => {
            // Signals this data cannot have (version, role) are left out of an
            // `any`; if nothing is left, the answer is unknown.
            let v: Vec<StepState> = any
                .iter()
                .filter(|c| match c {
                    Condition::Signal(s) => !rules.signal(s).is_some_and(|k| judged[k].unavailable),
                    _ => true,
                })
                .map(|c| eval_condition(c, rules, judged, i))
                .collect();
            if v.is_empty() {
                return StepState::Unknown;
            }
            if v.contains(&StepState::Lit) {
                StepState::Lit
            } else if v.iter().all(|s| *s == StepState::Unlit) {
                StepState::Unlit
            } else {
                StepState::Unknown
            }
        }
        Condition::All { all } => {
            let v: Vec<StepState> = all.iter().map(|c| eval_condition(c, rules, judged, i)).collect();
            and_states(&v)
        }
    }
}

/// Three-valued `and`.
pub(super) fn and_states(v: &[StepState]) -> StepState {
    if v.contains(&StepState::Unlit) {
        StepState::Unlit
    } else if v.iter().all(|s| *s == StepState::Lit) {
        StepState::Lit
    } else {
        StepState::Unknown
    }
}

/// Every node's answer at every step.
pub(super) fn node_states(rules: &RuleSet, judged: &[Judged], n: usize) -> Vec<States> {
    rules
        .nodes
        .iter()
        .map(|node| {
            (0..n)
                .map(|i| eval_condition(&node.def.when, rules, judged, i))
                .collect()
        })
        .collect()
}

/// Every leaf's timeline: an ordinary leaf is lit when all the questions it
/// requires are; a fallback leaf when its question is and no ordinary leaf
/// under it is lit at that step.
pub(super) fn leaf_states(rules: &RuleSet, node_states: &[States], n: usize) -> Vec<States> {
    let mut out: Vec<States> = vec![vec![StepState::Unknown; n]; rules.leaves.len()];
    for (l, leaf) in rules.leaves.iter().enumerate() {
        if leaf.fallback {
            continue;
        }
        let req = &rules.logic[l].required;
        out[l] = (0..n)
            .map(|i| and_states(&req.iter().map(|&m| node_states[m][i]).collect::<Vec<_>>()))
            .collect();
    }
    for (l, leaf) in rules.leaves.iter().enumerate() {
        if !leaf.fallback {
            continue;
        }
        let Some(&scope) = rules.logic[l].required.first() else {
            continue;
        };
        let others = &rules.logic[l].suppressed_by;
        out[l] = (0..n)
            .map(|i| match node_states[scope][i] {
                StepState::Lit if others.iter().any(|&o| out[o][i] == StepState::Lit) => StepState::Unlit,
                s => s,
            })
            .collect();
    }
    out
}

/// Onset index: first step of the first run of `d` lit steps within `[0, end]`.
pub(super) fn onset_index(states: &[StepState], d: usize, end: usize) -> Option<usize> {
    let d = d.max(1);
    let mut run = 0;
    for (i, s) in states.iter().enumerate().take(end + 1) {
        if *s == StepState::Lit {
            run += 1;
            if run >= d {
                return Some(i + 1 - d);
            }
        } else {
            run = 0;
        }
    }
    None
}

/// Recovery index: first step of an unlit run of `d` steps after the last lit
/// step, within `[0, end]`.
pub(super) fn recovery_index(states: &[StepState], d: usize, end: usize) -> Option<usize> {
    let last_lit = states.iter().take(end + 1).rposition(|s| *s == StepState::Lit)?;
    let start = last_lit + 1;
    let d = d.max(1);
    if start + d - 1 > end {
        return None;
    }
    states[start..start + d]
        .iter()
        .all(|s| *s == StepState::Unlit)
        .then_some(start)
}
