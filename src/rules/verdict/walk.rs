//! Phase 6: the walk of the tree at the assessment time, with each question's
//! answer, signals, values and thresholds.

use super::evidence::{is_below, worst};
use super::judge::Judged;
use super::timeline::States;
use super::AssessInput;
use crate::rules::load::{Child, RuleSet};
use crate::rules::report::{Answer, Availability, InstanceValue, PathSignal, PathStep, StepState};

pub(super) fn walk(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    node_states: &[States],
    at: usize,
) -> (Vec<PathStep>, String) {
    let mut path = Vec::new();
    let mut cur = rules.root;
    let mut guard = 0;
    loop {
        guard += 1;
        let node = &rules.nodes[cur];
        let state = node_states[cur].get(at).copied().unwrap_or(StepState::Unknown);
        let (answer, go_yes, note) = match state {
            StepState::Lit => (Answer::Yes, true, None),
            StepState::Unlit => (Answer::No, false, None),
            StepState::Unknown if node.def.gate => (
                Answer::Unknown,
                true,
                Some("cannot be answered from this data; the walk continues as if yes so that no axis is skipped".to_string()),
            ),
            StepState::Unknown => (
                Answer::Unknown,
                false,
                Some("cannot be answered from this data; the walk continues with the next question".to_string()),
            ),
        };
        let signals = node
            .def
            .when
            .signals()
            .into_iter()
            .filter_map(|s| rules.signal(s))
            .map(|k| {
                let def = &rules.signals[k].def;
                let inp = input.signals.get(k);
                let below = is_below(&def.threshold);
                let instances: Vec<InstanceValue> = inp
                    .map(|s| {
                        s.values
                            .iter()
                            .map(|(inst, v)| InstanceValue {
                                instance: inst.clone(),
                                value: v.get(at).copied().flatten(),
                                baseline: judged[k].baseline.get(inst).copied(),
                                lit: judged[k].lit.get(inst).and_then(|l| l.get(at).copied().flatten()),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let value = worst(below, instances.iter().filter_map(|i| i.value));
                let baseline = instances
                    .iter()
                    .find(|i| i.value.is_some() && i.value == value)
                    .and_then(|i| i.baseline);
                PathSignal {
                    signal: def.id.clone(),
                    unit: def.unit,
                    availability: inp.map(|s| s.availability).unwrap_or(Availability::Error),
                    value,
                    baseline,
                    threshold_text: def.threshold.text(def.unit),
                    lit: match judged[k].states.get(at) {
                        Some(StepState::Lit) => Some(true),
                        Some(StepState::Unlit) => Some(false),
                        _ => None,
                    },
                    instances,
                }
            })
            .collect();
        let child = if go_yes { node.yes } else { node.no };
        let next = match child {
            Child::Node(m) => rules.nodes[m].def.id.clone(),
            Child::Leaf(l) => rules.leaves[l].id.clone(),
            Child::Healthy => crate::rules::HEALTHY.to_string(),
        };
        path.push(PathStep {
            node: node.def.id.clone(),
            question: node.def.question.clone(),
            condition: match &node.def.sustain {
                Some(w) => format!("{}, then held while {w}", node.def.when),
                None => node.def.when.to_string(),
            },
            answer,
            note,
            signals,
            next: next.clone(),
        });
        match child {
            Child::Node(m) if guard <= rules.nodes.len() => cur = m,
            _ => return (path, next),
        }
    }
}
