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
                .filter(|c| !cannot_have(c, rules, judged))
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

/// Whether this data cannot have a condition at all: a signal not exposed
/// by the version or without targets of its role; an `all` with such a part
/// (a compound cannot be half-seen); an `any` whose every part is such. An
/// `any` leaves these parts out, so that e.g. an audit-log compound does not
/// make a metrics-only question unknown.
fn cannot_have(c: &Condition, rules: &RuleSet, judged: &[Judged]) -> bool {
    match c {
        Condition::Signal(s) => rules.signal(s).is_some_and(|k| judged[k].unavailable),
        Condition::All { all } => all.iter().any(|c| cannot_have(c, rules, judged)),
        Condition::Any { any } => any.iter().all(|c| cannot_have(c, rules, judged)),
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

/// Every node's answer at every step. "No" needs the node's `needs` read: an
/// unlit answer is unknown at a step where one of them is unknown.
pub(super) fn node_states(rules: &RuleSet, judged: &[Judged], n: usize) -> Vec<States> {
    rules
        .nodes
        .iter()
        .map(|node| {
            let needs: Vec<usize> = node.def.needs.iter().filter_map(|s| rules.signal(s)).collect();
            let mut states: States = (0..n)
                .map(|i| match eval_condition(&node.def.when, rules, judged, i) {
                    StepState::Unlit if needs.iter().any(|&k| judged[k].states[i] == StepState::Unknown) => {
                        StepState::Unknown
                    }
                    s => s,
                })
                .collect();
            if let Some(c) = &node.def.sustain {
                sustain(&mut states, |i| eval_condition(c, rules, judged, i));
            }
            states
        })
        .collect()
}

/// A node with `while:` stays lit after its `when` held, at every following
/// step where the `while` condition is lit.
fn sustain(states: &mut States, holds: impl Fn(usize) -> StepState) {
    for i in 1..states.len() {
        if states[i] != StepState::Lit && states[i - 1] == StepState::Lit && holds(i) == StepState::Lit {
            states[i] = StepState::Lit;
        }
    }
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

/// One lit run of a leaf, as step indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub start: usize,
    /// Last lit step.
    pub end: usize,
    /// First unlit step after the run; `None` while it lasts (or when no step
    /// after it is known to be unlit).
    pub recovered: Option<usize>,
    pub lit_steps: usize,
}

/// The episodes of one timeline within `[0, at]`: maximal lit runs, where
/// unlit gaps shorter than `merge` (ms) and unknown gaps no longer than
/// `unknown_merge` (ms) are merged into the run; runs with fewer than
/// `min_steps` lit steps are dropped.
pub(super) fn episodes(
    states: &[StepState],
    steps: &[i64],
    at: usize,
    merge: i64,
    unknown_merge: i64,
    min_steps: usize,
) -> Vec<Run> {
    let end = at.min(states.len().saturating_sub(1));
    let lit: Vec<usize> = (0..=end)
        .filter(|&i| states.get(i) == Some(&StepState::Lit))
        .collect();
    let mut out: Vec<Run> = Vec::new();
    let mut k = 0;
    while k < lit.len() {
        let mut e = k;
        while e + 1 < lit.len() {
            let (a, b) = (lit[e], lit[e + 1]);
            let gap = steps[b].saturating_sub(steps[a + 1]);
            let all_unknown = (a + 1..b).all(|i| states[i] == StepState::Unknown);
            if b == a + 1 || gap < merge || (all_unknown && gap <= unknown_merge) {
                e += 1;
            } else {
                break;
            }
        }
        let (s, l) = (lit[k], lit[e]);
        let recovered = (l + 1..=end).find(|&i| states[i] == StepState::Unlit);
        // Recovered only when every known step after the run is unlit up to
        // that point (a later run starts a new episode).
        out.push(Run {
            start: s,
            end: l,
            recovered,
            lit_steps: e - k + 1,
        });
        k = e + 1;
    }
    out.retain(|r| r.lit_steps >= min_steps.max(1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use StepState::{Lit, Unknown, Unlit};

    #[test]
    fn a_held_node_stays_lit_while_its_condition_holds_after_the_trigger() {
        // Triggered at 1, held at 2–3 while `while` is lit, not at 5 (the
        // hold broke at 4), and `while` alone never lights it.
        let mut s = vec![Unlit, Lit, Unlit, Unknown, Unlit, Unlit, Unlit];
        let hold = [Lit, Lit, Lit, Lit, Unlit, Lit, Lit];
        sustain(&mut s, |i| hold[i]);
        assert_eq!(s, vec![Unlit, Lit, Lit, Lit, Unlit, Unlit, Unlit]);
    }
}
