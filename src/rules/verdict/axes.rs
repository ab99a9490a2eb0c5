//! Phase 4: one report per leaf over the window: state, onset, recovery,
//! instances, localisation and evidence.

use std::collections::BTreeSet;

use super::evidence::evidence;
use super::judge::Judged;
use super::timeline::{onset_index, recovery_index, States};
use super::{axis_name, AssessInput, SignalInput};
use crate::rules::load::RuleSet;
use crate::rules::report::{Availability, AxisReport, AxisState, Evidence, Gap, GapKind, StepState};

/// What the per-leaf reports need besides the rules and the input.
pub(super) struct Frame<'a> {
    pub judged: &'a [Judged],
    pub leaf_states: &'a [States],
    /// Index of the assessment time.
    pub at: usize,
    /// The data is one snapshot (no onsets).
    pub single: bool,
    /// Consecutive lit steps that make an onset.
    pub debounce: usize,
}

/// The leaves' reports in tree order, and each leaf's onset index (indexed like
/// `rules.leaves`).
pub(super) fn leaf_reports(
    rules: &RuleSet,
    input: &AssessInput,
    f: &Frame,
    warnings: &mut Vec<String>,
    gaps: &mut Vec<Gap>,
) -> (Vec<AxisReport>, Vec<Option<usize>>) {
    let (judged, leaf_states, at, single, d_eff) = (f.judged, f.leaf_states, f.at, f.single, f.debounce);
    let empty = SignalInput::unavailable(Availability::Error, "missing input");
    let mut axes: Vec<AxisReport> = Vec::new();
    let mut onsets: Vec<Option<usize>> = vec![None; rules.leaves.len()];
    for &l in &rules.leaf_order {
        let leaf = &rules.leaves[l];
        let states = &leaf_states[l];
        let sigs: Vec<usize> = dedup_keep_order(
            rules.logic[l]
                .required
                .iter()
                .flat_map(|&m| rules.nodes[m].def.when.signals())
                .filter_map(|s| rules.signal(s))
                .collect(),
        );
        let onset_i = if single {
            None
        } else {
            onset_index(states, d_eff, at)
        };
        onsets[l] = onset_i;
        let lit_single = single && states.first() == Some(&StepState::Lit);
        let lit = onset_i.is_some() || lit_single;
        let recovered_i = onset_i.and_then(|_| recovery_index(states, d_eff, at));
        let availability: Vec<Availability> = sigs
            .iter()
            .map(|&k| {
                input
                    .signals
                    .get(k)
                    .map(|s| s.availability)
                    .unwrap_or(Availability::Error)
            })
            .collect();
        // Not checked when the leaf's own question (the deepest required node)
        // reads only signals of absent roles or unexposed metrics.
        let own: Vec<usize> = rules.logic[l]
            .required
            .last()
            .map(|&m| rules.nodes[m].def.when.signals())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| rules.signal(s))
            .collect();
        let unavailable = |k: &usize| {
            matches!(
                input.signals.get(*k).map(|s| s.availability),
                Some(Availability::RoleAbsent | Availability::NotExposed) | None
            )
        };
        let not_checked = !availability.is_empty() && !own.is_empty() && own.iter().all(unavailable);
        let state = if lit {
            AxisState::Lit
        } else if not_checked {
            AxisState::NotChecked
        } else if states.iter().take(at + 1).any(|s| *s != StepState::Unknown) {
            AxisState::Clear
        } else {
            AxisState::Unknown
        };
        let mut note = None;
        if state == AxisState::NotChecked {
            let reasons: BTreeSet<String> = own
                .iter()
                .filter_map(|&k| input.signals.get(k).and_then(|s| s.note.clone()))
                .collect();
            let msg = format!(
                "not checked: {}",
                reasons.into_iter().collect::<Vec<_>>().join("; ")
            );
            gaps.push(Gap {
                kind: GapKind::NotChecked,
                subject: leaf.id.clone(),
                message: format!("{} ({}) {msg}", leaf.id, axis_name(&leaf.axis, &leaf.sub_axis)),
            });
            note = Some(msg);
        }
        if !lit && !single {
            let tail = states
                .iter()
                .take(at + 1)
                .rev()
                .take_while(|s| **s == StepState::Lit)
                .count();
            if tail > 0 {
                warnings.push(format!(
                    "{} lit in the last {tail} step(s), fewer than the debounce of {d_eff}: not yet confirmed",
                    axis_name(&leaf.axis, &leaf.sub_axis)
                ));
            }
        }
        if lit && !single && onset_i == Some(0) {
            warnings.push(format!(
                "{} is lit from the first step of the window: its real onset may be earlier",
                axis_name(&leaf.axis, &leaf.sub_axis)
            ));
        }
        // Reference step for evidence: `at` if lit there, else the last lit step.
        let ref_i = if states.get(at) == Some(&StepState::Lit) {
            at
        } else {
            states
                .iter()
                .take(at + 1)
                .rposition(|s| *s == StepState::Lit)
                .unwrap_or(at)
        };
        // Lit instances over the lit steps (or the reference step).
        let lit_steps: Vec<usize> = if let Some(o) = onset_i {
            (o..=at).filter(|&i| states[i] == StepState::Lit).collect()
        } else if lit_single {
            vec![0]
        } else {
            Vec::new()
        };
        // Instances: those lit on the leaf's own question when it names any
        // (etcd-2 for the disk leaf, not the apiserver that saw slow etcd),
        // else those of every required question.
        let lit_instances = |ks: &[usize]| -> BTreeSet<String> {
            let mut out = BTreeSet::new();
            for &k in ks {
                for (inst, l) in &judged[k].lit {
                    if lit_steps
                        .iter()
                        .any(|&i| l.get(i).copied().flatten() == Some(true))
                    {
                        out.insert(inst.clone());
                    }
                }
            }
            out
        };
        let mut instances = lit_instances(&own);
        if instances.is_empty() {
            instances = lit_instances(&sigs);
        }
        let evidence: Vec<Evidence> = sigs
            .iter()
            .map(|&k| {
                evidence(
                    rules,
                    k,
                    input.signals.get(k).unwrap_or(&empty),
                    &judged[k],
                    ref_i,
                    &input.steps,
                )
            })
            .collect();
        // Prefer a signal that singles out some instances ("only etcd-2 …").
        let localisation = if lit {
            let lit_ev = || evidence.iter().filter(|e| e.lit == Some(true));
            lit_ev()
                .filter_map(|e| e.localisation.clone())
                .find(|l| l.starts_with("only "))
                .or_else(|| lit_ev().find_map(|e| e.localisation.clone()))
        } else {
            None
        };
        axes.push(AxisReport {
            leaf: leaf.id.clone(),
            axis: leaf.axis.clone(),
            sub_axis: leaf.sub_axis.clone(),
            severity: leaf.severity,
            title: leaf.title.clone(),
            state,
            lit_at_end: states.get(at) == Some(&StepState::Lit),
            onset: onset_i.map(|i| input.steps[i]),
            recovered: recovered_i.map(|i| input.steps[i]),
            instances: instances.into_iter().collect(),
            localisation,
            timeline: states.clone(),
            evidence,
            note,
        });
    }

    (axes, onsets)
}

fn dedup_keep_order(v: Vec<usize>) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|x| seen.insert(*x)).collect()
}
