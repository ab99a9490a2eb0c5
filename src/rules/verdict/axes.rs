//! Phase 4: one report per leaf over the window: state, the episode the verdict
//! is about (onset, recovery), instances, localisation and evidence. Onset,
//! instances, localisation and recovery all come from the same episode, so the
//! instance list agrees with the localisation sentence.

use std::collections::BTreeSet;

use super::evidence::{evidence, Shown};
use super::judge::Judged;
use super::timeline::{Run, States};
use super::{axis_name, AssessInput, SignalInput};
use crate::rules::load::RuleSet;
use crate::rules::report::{Availability, AxisReport, AxisState, Episode, Evidence, Gap, GapKind, StepState};

/// What the per-leaf reports need besides the rules and the input.
pub(super) struct Frame<'a> {
    pub judged: &'a [Judged],
    pub leaf_states: &'a [States],
    /// Every episode of each leaf (indexed like `rules.leaves`).
    pub runs: &'a [Vec<Run>],
    /// The episode each leaf is reported with (the one in the incident the
    /// verdict is about, else its latest).
    pub reported: &'a [Option<Run>],
    /// Leaves dated from their early signs, with the note that says so.
    pub dated: &'a std::collections::BTreeMap<usize, String>,
    /// Index of the assessment time.
    pub at: usize,
    /// The data is one snapshot (no onsets).
    pub single: bool,
}

/// The deciding signals of a leaf: those of the questions it requires.
pub(super) fn deciding_signals(rules: &RuleSet, l: usize) -> Vec<usize> {
    dedup_keep_order(
        rules.logic[l]
            .required
            .iter()
            .flat_map(|&m| rules.nodes[m].def.when.signals())
            .filter_map(|s| rules.signal(s))
            .collect(),
    )
}

/// The signals of the leaf's own question (the deepest required node).
pub(super) fn own_signals(rules: &RuleSet, l: usize) -> Vec<usize> {
    rules.logic[l]
        .required
        .last()
        .map(|&m| rules.nodes[m].def.when.signals())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| rules.signal(s))
        .collect()
}

/// For a leaf whose own question is `all:` of parts, the instances lit on
/// every part (the member whose fsyncs are slow *and* whose peers see it
/// slow), when there are any; `None` otherwise.
fn both_lit(rules: &RuleSet, l: usize, judged: &[Judged], steps: &[usize]) -> Option<BTreeSet<String>> {
    let &m = rules.logic[l].required.last()?;
    let crate::rules::model::Condition::All { all } = &rules.nodes[m].def.when else {
        return None;
    };
    let mut common: Option<BTreeSet<String>> = None;
    for part in all {
        let ks: Vec<usize> = part
            .signals()
            .into_iter()
            .filter_map(|s| rules.signal(s))
            .collect();
        let lit = lit_instances(judged, &ks, steps);
        common = Some(match common {
            None => lit,
            Some(c) => c.intersection(&lit).cloned().collect(),
        });
    }
    common.filter(|c| !c.is_empty())
}

/// Instances lit on signals `ks` at any of `steps`.
pub(super) fn lit_instances(judged: &[Judged], ks: &[usize], steps: &[usize]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for &k in ks {
        for (inst, l) in &judged[k].lit {
            if steps.iter().any(|&i| l.get(i).copied().flatten() == Some(true)) {
                out.insert(inst.clone());
            }
        }
    }
    out
}

/// The leaves' reports in tree order.
pub(super) fn leaf_reports(
    rules: &RuleSet,
    input: &AssessInput,
    f: &Frame,
    warnings: &mut Vec<String>,
    gaps: &mut Vec<Gap>,
) -> Vec<AxisReport> {
    rules
        .leaf_order
        .iter()
        .map(|&l| leaf_report(rules, input, f, l, warnings, gaps))
        .collect()
}

/// One leaf's report: its state, the episode reported, its instances,
/// evidence and the sentence that localises it.
fn leaf_report(
    rules: &RuleSet,
    input: &AssessInput,
    f: &Frame,
    l: usize,
    warnings: &mut Vec<String>,
    gaps: &mut Vec<Gap>,
) -> AxisReport {
    let (judged, at) = (f.judged, f.at);
    let leaf = &rules.leaves[l];
    let states = &f.leaf_states[l];
    let sigs = deciding_signals(rules, l);
    let own = own_signals(rules, l);
    let run = f.reported[l];
    let lit_single = f.single && states.first() == Some(&StepState::Lit);
    let lit = run.is_some() || lit_single;
    let state = axis_state(input, states, &sigs, &own, lit, at);
    let note = (state == AxisState::NotChecked)
        .then(|| not_checked(rules, input, l, &own, gaps))
        .or_else(|| f.dated.get(&l).cloned());
    let pending = leaf_warnings(rules, f, l, &own, lit, warnings);
    // Reference step for evidence: `at` if the episode lasts until then,
    // else its last lit step.
    let ref_i = match run {
        Some(r) if r.recovered.is_none() && states.get(at) == Some(&StepState::Lit) => at,
        Some(r) => r.end,
        None if lit_single => 0,
        None => at,
    };
    let span = run.map(|r| (r.start, r.end)).or(lit_single.then_some((0, 0)));
    let lit_steps: Vec<usize> = match span {
        Some((a, b)) => (a..=b).filter(|&i| states[i] == StepState::Lit).collect(),
        None => Vec::new(),
    };
    let instances = cause_instances(rules, judged, l, &sigs, &own, &lit_steps);
    let evidence = leaf_evidence(
        rules,
        input,
        judged,
        l,
        &sigs,
        &Shown {
            ref_i,
            span,
            context: false,
            baseline_steps: input.baseline.steps,
        },
    );
    let localisation = lit
        .then(|| localisation(rules, &own, &evidence, &instances))
        .flatten();
    // A leaf that says why its member is the cause says so instead.
    let why = match span {
        Some(span) if lit => why_sentence(rules, input, l, &evidence, &instances, span),
        _ => None,
    };
    let says_why = why.is_some();
    let localisation = why.or(localisation);
    let episodes = f.runs[l]
        .iter()
        .map(|r| Episode {
            leaf: leaf.id.clone(),
            axis: leaf.axis.clone(),
            sub_axis: leaf.sub_axis.clone(),
            onset: input.steps[r.start],
            recovered: r.recovered.map(|i| input.steps[i]),
        })
        .collect();
    AxisReport {
        leaf: leaf.id.clone(),
        axis: leaf.axis.clone(),
        sub_axis: leaf.sub_axis.clone(),
        severity: leaf.severity,
        title: leaf.title.clone(),
        state,
        lit_at_end: states.get(at) == Some(&StepState::Lit),
        onset: run.map(|r| input.steps[r.start]),
        recovered: run.and_then(|r| r.recovered).map(|i| input.steps[i]),
        episodes,
        instances: instances.into_iter().collect(),
        localisation,
        says_why,
        pending,
        timeline: states.clone(),
        evidence,
        note,
    }
}

/// Lit, not checked (the leaf's own question reads only signals of absent
/// roles or unexposed metrics), clear (decided unlit at the assessment
/// time), or unknown: a leaf whose evidence is unknown at the assessment
/// time is not clear, however it was decided before (a role's signals lost
/// at an onset, e.g. watch reconnects lit where the controllers' work
/// queues are not read, must not read as "checked, not failing").
fn axis_state(
    input: &AssessInput,
    states: &States,
    sigs: &[usize],
    own: &[usize],
    lit: bool,
    at: usize,
) -> AxisState {
    let unavailable = |k: &usize| {
        matches!(
            input.signals.get(*k).map(|s| s.availability),
            Some(Availability::RoleAbsent | Availability::NotExposed) | None
        )
    };
    let not_checked = !sigs.is_empty() && !own.is_empty() && own.iter().all(unavailable);
    if lit {
        AxisState::Lit
    } else if not_checked {
        AxisState::NotChecked
    } else if states.get(at).is_some_and(|s| *s != StepState::Unknown) {
        AxisState::Clear
    } else {
        AxisState::Unknown
    }
}

/// Why a leaf was not checked, as its note and a gap.
fn not_checked(rules: &RuleSet, input: &AssessInput, l: usize, own: &[usize], gaps: &mut Vec<Gap>) -> String {
    let leaf = &rules.leaves[l];
    let name = axis_name(&leaf.axis, &leaf.sub_axis);
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
        message: format!("{} ({name}) {msg}", leaf.id),
    });
    msg
}

/// Warnings about a leaf's dating: lit at the end for less than its
/// persistence (only while its path leaves it open), or lit from the
/// window's first step. Returns the instances on which it is not yet
/// confirmed.
fn leaf_warnings(
    rules: &RuleSet,
    f: &Frame,
    l: usize,
    own: &[usize],
    lit: bool,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let leaf = &rules.leaves[l];
    let name = axis_name(&leaf.axis, &leaf.sub_axis);
    let mut pending: Vec<String> = Vec::new();
    // Only a leaf its path leaves open at the end: one whose questions
    // already answer "no" there stays unlit however its own signals confirm.
    let open = f.leaf_states[l].get(f.at) != Some(&StepState::Unlit);
    if !lit && open && !f.single && !leaf.fallback {
        let on: BTreeSet<&String> = own.iter().flat_map(|&k| f.judged[k].pending.keys()).collect();
        pending = on.into_iter().cloned().collect();
        if !pending.is_empty() {
            warnings.push(format!(
                "{name} is lit at the end of the window on {} for less than its persistence: not yet confirmed",
                pending.join(", ")
            ));
        }
    }
    if let Some(r) = f.reported[l] {
        if r.start == 0 {
            warnings.push(format!(
                "{name} is lit from the first step of the window: its real onset may be earlier"
            ));
        }
    }
    pending
}

/// Instances: those of the leaf's `cause_instances` signal, else those lit on
/// every part of its own question, else on its own question (etcd-2 for the
/// disk leaf, not the apiserver that saw slow etcd), else on every required
/// question.
fn cause_instances(
    rules: &RuleSet,
    judged: &[Judged],
    l: usize,
    sigs: &[usize],
    own: &[usize],
    lit_steps: &[usize],
) -> BTreeSet<String> {
    let named = rules.leaves[l]
        .cause_instances
        .as_deref()
        .and_then(|s| rules.signal(s))
        .map(|k| lit_instances(judged, &[k], lit_steps))
        .filter(|c| !c.is_empty());
    let instances = named
        .or_else(|| both_lit(rules, l, judged, lit_steps))
        .unwrap_or_else(|| lit_instances(judged, own, lit_steps));
    if instances.is_empty() {
        lit_instances(judged, sigs, lit_steps)
    } else {
        instances
    }
}

/// The deciding signals' evidence, then the leaf's context signals'.
fn leaf_evidence(
    rules: &RuleSet,
    input: &AssessInput,
    judged: &[Judged],
    l: usize,
    sigs: &[usize],
    shown: &Shown,
) -> Vec<Evidence> {
    let empty = SignalInput::unavailable(Availability::Error, "missing input");
    let context: Vec<usize> = rules.leaves[l]
        .evidence
        .iter()
        .filter_map(|s| rules.signal(s))
        .filter(|k| !sigs.contains(k))
        .collect();
    let show = |k: usize, context: bool| {
        evidence(
            rules,
            k,
            input.signals.get(k).unwrap_or(&empty),
            &judged[k],
            &Shown { context, ..*shown },
            &input.steps,
        )
    };
    sigs.iter()
        .map(|&k| show(k, false))
        .chain(context.iter().map(|&k| show(k, true)))
        .collect()
}

/// The localisation sentence: prefer a signal of the leaf's own question that
/// singles out some instances ("only etcd-2 …").
fn localisation(
    rules: &RuleSet,
    own: &[usize],
    evidence: &[Evidence],
    instances: &BTreeSet<String>,
) -> Option<String> {
    let own_ids: BTreeSet<&str> = own.iter().map(|&k| rules.signals[k].def.id.as_str()).collect();
    let lit_ev = || {
        evidence
            .iter()
            .filter(|e| !e.context && e.localisation.is_some())
            .filter(|e| e.instances.iter().any(|i| instances.contains(&i.instance)))
    };
    lit_ev()
        .filter(|e| own_ids.contains(e.signal.as_str()))
        .filter_map(|e| e.localisation.clone())
        .find(|l| l.starts_with("only "))
        .or_else(|| {
            lit_ev()
                .filter_map(|e| e.localisation.clone())
                .find(|l| l.starts_with("only "))
        })
        .or_else(|| lit_ev().find_map(|e| e.localisation.clone()))
}

/// The leaf's `cause:` sentence, filled from its evidence.
fn why_sentence(
    rules: &RuleSet,
    input: &AssessInput,
    l: usize,
    evidence: &[Evidence],
    instances: &BTreeSet<String>,
    span: (usize, usize),
) -> Option<String> {
    super::cause::sentence(
        &rules.leaves[l].cause,
        &super::cause::Facts {
            evidence,
            instances,
            span,
            by: evidence
                .iter()
                .filter_map(|e| {
                    let k = rules.signal(&e.signal)?;
                    let b = rules.signals[k].breakdown.as_ref()?;
                    Some((e.signal.as_str(), b.by.as_slice()))
                })
                .collect(),
            steps: &input.steps,
        },
    )
}

fn dedup_keep_order(v: Vec<usize>) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|x| seen.insert(*x)).collect()
}
