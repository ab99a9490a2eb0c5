//! Phase 5c: a recovery only from evidence that could show the incident
//! continuing. A question of the tree answers "no" from the parts it could
//! read: an `any` leaves out a signal this data cannot have. That is right for
//! the question ("is raft unstable?" is answered from what was read, the gap
//! reported), but not for the claim that an incident is over: when the leader
//! is back and the failed proposals, which would show raft still unstable, are
//! not in the data (a monitoring profile dropped their family), the incident
//! is not shown to be over. Such a recovery is not claimed: the status stays
//! degraded and `recovery_unconfirmed` names the unread signals.
//!
//! A "no" counted over the window (a rate of failed peer sends, an increase of
//! leader changes) covers the time between scrapes and stands; a "no" from
//! samples alone (a leader present at each scrape, the member answering its
//! scrape) does not, when the question's event counters were unread.
//!
//! Unread here means not exposed: the role is in the data, its targets'
//! metrics do not include the signal's (a failed evaluation is unknown, which
//! already keeps a question from answering "no").
//! Signals of roles absent from the data (logs, node metrics, audit logs) are
//! other kinds of evidence, declared "not observed" in the scope; they do not
//! hold a recovery open.

use super::decide::Selection;
use super::judge::Judged;
use super::timeline::eval_condition;
use super::AssessInput;
use crate::rules::load::RuleSet;
use crate::rules::model::Condition;
use crate::rules::report::{Availability, RecoveryUnconfirmed, StepState, UnreadSignal};

/// Whether signal `k` is of a role in the data but was not read.
fn unread_signal(input: &AssessInput, judged: &[Judged], k: usize) -> bool {
    judged.get(k).is_some_and(|j| j.unavailable)
        && matches!(
            input.signals.get(k).map(|s| s.availability),
            Some(Availability::NotExposed)
        )
}

/// The unread signals that could make `c` lit at step `i`, where the parts
/// that were read leave it unlit: none when a read part of an `all` is
/// unlit by itself (the condition cannot hold, whatever the others say).
pub(super) fn could_light(
    c: &Condition,
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    i: usize,
) -> Vec<usize> {
    match c {
        Condition::Signal(s) => rules
            .signal(s)
            .filter(|&k| unread_signal(input, judged, k))
            .into_iter()
            .collect(),
        Condition::Any { any } => any
            .iter()
            .flat_map(|p| could_light(p, rules, input, judged, i))
            .collect(),
        Condition::All { all } => {
            let parts: Vec<Vec<usize>> = all
                .iter()
                .map(|p| could_light(p, rules, input, judged, i))
                .collect();
            let settled = all
                .iter()
                .zip(&parts)
                .any(|(p, u)| u.is_empty() && eval_condition(p, rules, judged, i) == StepState::Unlit);
            if settled {
                Vec::new()
            } else {
                parts.into_iter().flatten().collect()
            }
        }
    }
}

/// Whether signal `k` was read at step `i` from an expression over the
/// window (a rate or increase of a counter): it counts what happened between
/// scrapes, where a gauge or `up` is a sample at each scrape.
fn counted_over_window(rules: &RuleSet, input: &AssessInput, judged: &[Judged], k: usize, i: usize) -> bool {
    let Some(s) = input.signals.get(k) else {
        return false;
    };
    s.availability == Availability::Evaluated
        && judged[k]
            .states
            .get(i)
            .is_some_and(|st| *st != StepState::Unknown)
        && s.alternative
            .and_then(|a| rules.signals[k].reads.get(a))
            .is_some_and(|r| r.needs_series)
}

/// The unread signals that could show leaf `l` still lit at step `i`, where
/// its own question (the deepest it requires) answers "no" only without
/// them. None when that "no" stands on what was read: no unread part could
/// light it, or a part read there counts events over the window (failed peer
/// sends read as none in the window cover the time between scrapes too). A
/// "no" from samples alone (a leader present at each scrape, the member
/// answering its scrape) with the event counters unread (elections, failed
/// proposals) cannot show that the incident stopped.
fn holding_open(rules: &RuleSet, input: &AssessInput, judged: &[Judged], l: usize, i: usize) -> Vec<usize> {
    let Some(&own) = rules.logic[l].required.last() else {
        return Vec::new();
    };
    let when = &rules.nodes[own].def.when;
    if eval_condition(when, rules, judged, i) != StepState::Unlit {
        return Vec::new();
    }
    let counted = when
        .signals()
        .iter()
        .filter_map(|s| rules.signal(s))
        .any(|k| counted_over_window(rules, input, judged, k, i));
    if counted {
        return Vec::new();
    }
    let mut out = could_light(when, rules, input, judged, i);
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether the incident's recovery at `at` rests on unread signals: for each
/// of its recovered leaves, the signals that could show it continuing and
/// were not read. `None` when the recovery stands on what was read.
pub(super) fn unconfirmed(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    sel: &Selection,
    at: usize,
) -> Option<RecoveryUnconfirmed> {
    let mut leaves = Vec::new();
    let mut ks: Vec<usize> = Vec::new();
    let mut since = None;
    for &l in &sel.incident {
        let Some(rec) = sel.reported[l].and_then(|r| r.recovered) else {
            continue;
        };
        let open = holding_open(rules, input, judged, l, at);
        if open.is_empty() {
            continue;
        }
        leaves.push(rules.leaves[l].id.clone());
        ks.extend(open);
        since = Some(since.map_or(rec, |s: usize| s.max(rec)));
    }
    let since = input.steps.get(since?).copied()?;
    ks.sort_unstable();
    ks.dedup();
    let unread = unread_signals(rules, input, &ks);
    let text = text(&unread);
    Some(RecoveryUnconfirmed {
        leaves,
        since,
        unread,
        text,
    })
}

/// "recovery not confirmed: 5 signals that could show it continuing were not
/// read (no etcd_server_leader_changes_seen_total, no … +2)": the first metric
/// family each unread signal misses.
fn text(unread: &[UnreadSignal]) -> String {
    let what = match unread {
        [one] => format!(
            "`{}` ({}), which could show it continuing, was",
            one.signal, one.description
        ),
        many => format!("{} signals that could show it continuing were", many.len()),
    };
    format!("recovery not confirmed: {what} not read{}", missing_text(unread))
}

/// " (no etcd_server_leader_changes_seen_total, no … +2)": the first metric
/// family each unread signal misses, or nothing when none is named.
pub(super) fn missing_text(unread: &[UnreadSignal]) -> String {
    let mut missing: Vec<String> = Vec::new();
    for u in unread {
        let first = u
            .reason
            .split("(missing: ")
            .nth(1)
            .and_then(|r| r.split(['+', ';', ')']).next())
            .map(str::trim)
            .filter(|n| !n.is_empty());
        if let Some(n) = first.map(|n| format!("no {n}")) {
            if !missing.contains(&n) {
                missing.push(n);
            }
        }
    }
    match missing.len() {
        0 => String::new(),
        1..=2 => format!(" ({})", missing.join(", ")),
        n => format!(" ({}, {} +{})", missing[0], missing[1], n - 2),
    }
}

/// The unread signals `ks`, each with why it was not read.
pub(super) fn unread_signals(rules: &RuleSet, input: &AssessInput, ks: &[usize]) -> Vec<UnreadSignal> {
    ks.iter()
        .map(|&k| UnreadSignal {
            signal: rules.signals[k].def.id.clone(),
            description: rules.signals[k].def.description.clone(),
            reason: input.signals[k].note.clone().unwrap_or_default(),
        })
        .collect()
}
