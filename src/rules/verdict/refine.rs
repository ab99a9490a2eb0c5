//! Phase 5d: the more precise answers a root cause could not exclude. A leaf
//! that refines another (`refines:` — the CPU leaf explains slow fsyncs that
//! slowed the peers' probes too) is how the tree tells them apart. When its
//! question could not be answered at the root cause's last lit step, because
//! signals that could light it were not read (their metrics not exposed by
//! targets that are in the data), the root cause is named with that
//! alternative left open — "etcd/cpu not excluded (no
//! etcd_network_peer_round_trip_time_seconds_count)" — instead of
//! being passed over in silence: a slow disk named without the peers' round
//! trips may be a member starved of CPU.
//!
//! A refining question answered "no" from what was read excludes it (a NaN
//! round trip, no probe in the window, measured nothing: unlit, excluded),
//! as does a part read unlit that settles an `all` on its own. Signals of
//! roles absent from the data (node metrics) are other kinds of evidence,
//! declared "not observed" in the scope: they are not listed.

use super::judge::Judged;
use super::recovery::{could_light, missing_text, unread_signals};
use super::timeline::eval_condition;
use super::{axis_name, AssessInput};
use crate::rules::load::RuleSet;
use crate::rules::report::{NotExcluded, StepState};

/// The leaves refining leaf `root` whose question is unknown at step `i`
/// for want of signals that were not read, each with those signals.
pub(super) fn not_excluded(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    root: usize,
    i: usize,
) -> Vec<NotExcluded> {
    let root_id = rules.leaves[root].id.as_str();
    rules
        .leaves
        .iter()
        .enumerate()
        .filter(|(_, l)| l.refines.as_deref() == Some(root_id))
        .filter_map(|(r, l)| {
            let &own = rules.logic[r].required.last()?;
            let when = &rules.nodes[own].def.when;
            if eval_condition(when, rules, judged, i) != StepState::Unknown {
                return None;
            }
            let mut ks = could_light(when, rules, input, judged, i);
            ks.sort_unstable();
            ks.dedup();
            if ks.is_empty() {
                return None;
            }
            let unread = unread_signals(rules, input, &ks);
            let axis = axis_name(&l.axis, &l.sub_axis);
            let missing = missing_text(&unread);
            let text = if missing.is_empty() {
                format!("{axis} not excluded: its question could not be read")
            } else {
                format!("{axis} not excluded{missing}")
            };
            Some(NotExcluded {
                leaf: l.id.clone(),
                axis,
                unread,
                text,
            })
        })
        .collect()
}
