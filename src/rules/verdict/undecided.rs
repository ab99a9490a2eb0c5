//! Phase 5b: a root cause only from what was read. The axis with the earliest
//! onset is named the root cause only when every cause that could have made
//! it light (`causes:` of the rules: slow etcd makes requests hold APF seats)
//! was read in the range window up to its onset. When one was not (its
//! metrics not exposed, no target of its role, nothing judged there), an
//! earlier onset could have gone unseen: the axis is reported as failing,
//! its cause undecided, with what could not be read.

use super::judge::Judged;
use super::AssessInput;
use crate::rules::load::RuleSet;
use crate::rules::report::{AxisReport, StepState, UnreadCause};

/// The causes of `ax` (a lit axis) that were not read in the range window up
/// to its onset (the whole window up to `at` without an onset).
pub(super) fn unread_causes(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    ax: &AxisReport,
    at: usize,
) -> Vec<UnreadCause> {
    let Some(l) = rules.leaf(&ax.leaf) else {
        return Vec::new();
    };
    let end = ax
        .onset
        .and_then(|o| input.steps.iter().position(|&t| t >= o))
        .unwrap_or(at)
        .min(input.steps.len().saturating_sub(1));
    let back = (input.range / input.step.max(1)) as usize;
    let start = if ax.onset.is_some() {
        end.saturating_sub(back)
    } else {
        0
    };
    let read = |k: usize| {
        judged.get(k).is_some_and(|j| {
            j.states
                .get(start..=end)
                .is_some_and(|s| s.iter().any(|st| *st != StepState::Unknown))
        })
    };
    // A cause that lights its effects through some of their signals only
    // counts while one of those is lit (up to the assessment time).
    let through = |k: usize| {
        judged.get(k).is_some_and(|j| {
            j.lit.values().any(|v| {
                let last = at.min(v.len().saturating_sub(1));
                v.get(start.min(last)..=last)
                    .is_some_and(|s| s.contains(&Some(true)))
            })
        })
    };
    rules
        .causes
        .iter()
        .filter(|c| c.effects.contains(&l))
        .filter(|c| c.through.is_empty() || c.through.iter().any(|&k| through(k)))
        .filter(|c| !c.read_by.iter().any(|&k| read(k)))
        .map(|c| UnreadCause {
            cause: c.id.clone(),
            title: c.title.clone(),
            signals: c
                .read_by
                .iter()
                .map(|&k| rules.signals[k].def.id.clone())
                .collect(),
            reasons: c.read_by.iter().map(|&k| why_unread(rules, input, k)).collect(),
            remedy: c.remedy.clone(),
        })
        .collect()
}

/// Why signal `k` gave no judged value: its availability note, or that it
/// was evaluated without a value that could be judged there.
fn why_unread(rules: &RuleSet, input: &AssessInput, k: usize) -> String {
    let id = &rules.signals[k].def.id;
    match input.signals.get(k).and_then(|s| s.note.as_deref()) {
        Some(n) => n.to_string(),
        None => format!("`{id}` had no judged value before the onset"),
    }
}

/// The short form of the reasons, for a headline: the metric families that
/// were missing ("no etcd_request_duration_seconds_bucket"), else the first
/// reason.
pub(super) fn short_reason(u: &UnreadCause) -> String {
    let mut missing: Vec<String> = Vec::new();
    for r in &u.reasons {
        if let Some(rest) = r.split("(missing: ").nth(1) {
            let names = rest.trim_end_matches(')');
            // The first alternative names what the current versions expose.
            let first = names.split("; or ").next().unwrap_or("");
            for n in first.split(" + ") {
                let n = n.trim().to_string();
                if !n.is_empty() && !missing.contains(&n) {
                    missing.push(n);
                }
            }
        } else if let Some(role) = r
            .strip_prefix("no ")
            .and_then(|x| x.strip_suffix(" targets in the data"))
        {
            let s = format!("no {role} targets");
            if !missing.contains(&s) {
                missing.push(s);
            }
        }
    }
    if missing.is_empty() {
        return u.reasons.first().cloned().unwrap_or_default();
    }
    let shown: Vec<String> = missing
        .iter()
        .map(|m| {
            if m.starts_with("no ") {
                m.clone()
            } else {
                format!("no {m}")
            }
        })
        .collect();
    match shown.len() {
        1..=2 => shown.join(", "),
        n => format!("{}, {} +{}", shown[0], shown[1], n - 2),
    }
}

/// "cause undecided: etcd latency could not be read (no etcd_request_duration_seconds_bucket)".
pub(super) fn text(unread: &[UnreadCause]) -> String {
    let parts: Vec<String> = unread
        .iter()
        .map(|u| format!("{} could not be read ({})", u.title, short_reason(u)))
        .collect();
    format!("cause undecided: {}", parts.join("; "))
}
