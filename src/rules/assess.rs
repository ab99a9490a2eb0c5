//! The pure part of a diagnosis: per-step signal values → lit states →
//! per-leaf timelines → onsets → root cause, downstream axes, ties, the tree
//! walk and the [`Report`]. No evaluation happens here, so every rule of the
//! verdict can be tested with hand-built inputs.
//!
//! Semantics (documented for users in `rules/README.md`):
//! - a signal is lit at a step on an instance when its threshold says so; the
//!   signal is lit at the step when any instance is lit, unlit when at least one
//!   instance has a value and none is lit, unknown otherwise;
//! - conditions combine signal states with three-valued logic (`any`: lit if one
//!   is lit, unlit if all are unlit; `all`: unlit if one is unlit, lit if all are lit);
//! - an ordinary leaf is lit when the conditions of the `yes` edges on its path
//!   from the root hold, except those of `gate` nodes (the symptom), so causes can
//!   light before clients feel them; when the path's only `yes` edges are gates,
//!   those count;
//! - a `fallback` leaf is lit when the condition of the deepest node its path
//!   leaves through `yes` holds and no ordinary leaf under that node is lit;
//! - onset = first step of the first run lit for at least `debounce` steps;
//!   recovery = first step of an unlit run of at least `debounce` steps after the
//!   last lit step;
//! - root cause = the lit axis with the earliest onset; onsets within one step
//!   are a tie, broken by tree order as a stated assumption.

use std::collections::{BTreeMap, BTreeSet};

use super::load::{Child, RuleSet};
use super::model::{Combine, Condition, Direction, Threshold, Unit};
use super::report::*;
use crate::store::Millis;

/// One signal's evaluated values, as the engine hands them over.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalInput {
    pub availability: Availability,
    /// Index of the expression used (0 = `expr`).
    pub alternative: Option<usize>,
    /// The expression evaluated, as text.
    pub expression: Option<String>,
    pub note: Option<String>,
    /// Instance → one value per step (`None` = no data at that step).
    pub values: BTreeMap<String, Vec<Option<f64>>>,
    /// Instance → baseline, when computed from a separate range or dataset.
    /// `None`: computed here from the baseline steps of the window.
    pub baseline: Option<BTreeMap<String, f64>>,
}

impl SignalInput {
    /// A signal evaluated with expression 0 and these per-instance values.
    pub fn evaluated(values: BTreeMap<String, Vec<Option<f64>>>) -> Self {
        SignalInput {
            availability: Availability::Evaluated,
            alternative: Some(0),
            expression: None,
            note: None,
            values,
            baseline: None,
        }
    }

    /// A signal that could not be evaluated.
    pub fn unavailable(availability: Availability, note: impl Into<String>) -> Self {
        SignalInput {
            availability,
            alternative: None,
            expression: None,
            note: Some(note.into()),
            values: BTreeMap::new(),
            baseline: None,
        }
    }
}

/// How the baseline is taken.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselinePlan {
    pub kind: BaselineKind,
    /// For [`BaselineKind::WindowStart`]: the step indices `[start, end)` used.
    pub steps: Option<(usize, usize)>,
    pub from: Option<Millis>,
    pub to: Option<Millis>,
    pub description: String,
}

impl BaselinePlan {
    /// The default: the first quarter of the window (at least 2 steps), only
    /// when the window has at least 6 steps; otherwise no baseline.
    pub fn window_start(steps: &[Millis]) -> BaselinePlan {
        let n = steps.len();
        if n < MIN_STEPS_FOR_BASELINE {
            return BaselinePlan {
                kind: BaselineKind::None,
                steps: None,
                from: None,
                to: None,
                description: format!(
                    "no baseline: the window has {n} step(s), fewer than {MIN_STEPS_FOR_BASELINE}; relative thresholds are not applied"
                ),
            };
        }
        let k = n.div_ceil(4).max(2);
        BaselinePlan {
            kind: BaselineKind::WindowStart,
            steps: Some((0, k)),
            from: Some(steps[0]),
            to: Some(steps[k - 1]),
            description: format!("median of the first {k} of {n} steps (the first quarter of the window)"),
        }
    }
}

/// Fewest steps for a default (window-start) baseline.
pub const MIN_STEPS_FOR_BASELINE: usize = 6;

/// Everything the pure assessment needs.
#[derive(Clone, Debug)]
pub struct AssessInput {
    pub steps: Vec<Millis>,
    pub step: Millis,
    /// Index into `steps` of the assessment time.
    pub at_index: usize,
    /// The resolved `$window`.
    pub range: Millis,
    pub debounce: usize,
    pub baseline: BaselinePlan,
    /// One entry per rule signal, in rule order.
    pub signals: Vec<SignalInput>,
    pub sources: Vec<SourceInfo>,
    pub warnings: Vec<String>,
    pub gaps: Vec<Gap>,
}

type States = Vec<StepState>;

/// Per-signal judgement at every step.
struct Judged {
    /// Instance → baseline.
    baseline: BTreeMap<String, f64>,
    /// Instance → lit per step.
    lit: BTreeMap<String, Vec<Option<bool>>>,
    /// Aggregate per step.
    states: States,
    /// Not exposed by this version, or no target of its role: an `any` list
    /// skips it instead of becoming unknown.
    unavailable: bool,
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

fn median(mut v: Vec<f64>) -> Option<f64> {
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

fn judge_signal(t: &Threshold, input: &SignalInput, plan: &BaselinePlan, nsteps: usize) -> Judged {
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

fn eval_condition(c: &Condition, rules: &RuleSet, judged: &[Judged], i: usize) -> StepState {
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
            if v.contains(&StepState::Unlit) {
                StepState::Unlit
            } else if v.iter().all(|s| *s == StepState::Lit) {
                StepState::Lit
            } else {
                StepState::Unknown
            }
        }
    }
}

fn and_states(v: &[StepState]) -> StepState {
    if v.contains(&StepState::Unlit) {
        StepState::Unlit
    } else if v.iter().all(|s| *s == StepState::Lit) {
        StepState::Lit
    } else {
        StepState::Unknown
    }
}

/// The path from the root to each leaf: `(node, took_yes)` pairs (first path in
/// tree order when a leaf is reachable several ways).
fn leaf_paths(rules: &RuleSet) -> Vec<Vec<(usize, bool)>> {
    fn dfs(
        rules: &RuleSet,
        n: usize,
        path: &mut Vec<(usize, bool)>,
        out: &mut Vec<Option<Vec<(usize, bool)>>>,
        seen: &mut Vec<bool>,
    ) {
        if seen[n] {
            return;
        }
        seen[n] = true;
        for (child, yes) in [(rules.nodes[n].yes, true), (rules.nodes[n].no, false)] {
            path.push((n, yes));
            match child {
                Child::Node(m) => dfs(rules, m, path, out, seen),
                Child::Leaf(l) => {
                    if out[l].is_none() {
                        out[l] = Some(path.clone());
                    }
                }
                Child::Healthy => {}
            }
            path.pop();
        }
        seen[n] = false;
    }
    let mut out = vec![None; rules.leaves.len()];
    let mut seen = vec![false; rules.nodes.len()];
    dfs(rules, rules.root, &mut Vec::new(), &mut out, &mut seen);
    out.into_iter().map(|p| p.unwrap_or_default()).collect()
}

/// The nodes whose conditions an ordinary leaf requires.
fn required_nodes(rules: &RuleSet, path: &[(usize, bool)]) -> Vec<usize> {
    let yes: Vec<usize> = path.iter().filter(|(_, y)| *y).map(|(n, _)| *n).collect();
    let non_gate: Vec<usize> = yes
        .iter()
        .copied()
        .filter(|&n| !rules.nodes[n].def.gate)
        .collect();
    if non_gate.is_empty() {
        yes
    } else {
        non_gate
    }
}

/// Onset index: first step of the first run of `d` lit steps within `[0, end]`.
fn onset_index(states: &[StepState], d: usize, end: usize) -> Option<usize> {
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
fn recovery_index(states: &[StepState], d: usize, end: usize) -> Option<usize> {
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

fn dedup_keep_order(v: Vec<usize>) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|x| seen.insert(*x)).collect()
}

fn axis_name(axis: &str, sub: &Option<String>) -> String {
    match sub {
        Some(s) => format!("{axis}/{s}"),
        None => axis.to_string(),
    }
}

/// Runs the assessment.
pub fn assess(rules: &RuleSet, input: &AssessInput) -> Report {
    let n = input.steps.len();
    let at = input.at_index.min(n.saturating_sub(1));
    let single = n <= 1;
    let d_eff = if single { 1 } else { input.debounce.max(1).min(n) };
    let mut warnings = input.warnings.clone();
    let mut gaps = input.gaps.clone();
    let empty = SignalInput::unavailable(Availability::Error, "missing input");

    // 1. Judge every signal.
    let judged: Vec<Judged> = rules
        .signals
        .iter()
        .enumerate()
        .map(|(k, s)| {
            judge_signal(
                &s.def.threshold,
                input.signals.get(k).unwrap_or(&empty),
                &input.baseline,
                n,
            )
        })
        .collect();

    if input.baseline.kind == BaselineKind::None
        && rules.signals.iter().any(|s| s.def.threshold.relative.is_some())
    {
        gaps.push(Gap {
            kind: GapKind::NoBaseline,
            subject: "baseline".into(),
            message: format!(
                "{}; signals with only a relative threshold are unknown, the others use their absolute threshold",
                input.baseline.description
            ),
        });
    }

    // 2. Node conditions per step.
    let node_states: Vec<States> = rules
        .nodes
        .iter()
        .map(|node| {
            (0..n)
                .map(|i| eval_condition(&node.def.when, rules, &judged, i))
                .collect()
        })
        .collect();

    // 3. Leaf timelines.
    let paths = leaf_paths(rules);
    let mut leaf_states: Vec<States> = vec![vec![StepState::Unknown; n]; rules.leaves.len()];
    let mut leaf_nodes: Vec<Vec<usize>> = vec![Vec::new(); rules.leaves.len()];
    for (l, leaf) in rules.leaves.iter().enumerate() {
        if leaf.fallback {
            continue;
        }
        let req = required_nodes(rules, &paths[l]);
        leaf_states[l] = (0..n)
            .map(|i| and_states(&req.iter().map(|&m| node_states[m][i]).collect::<Vec<_>>()))
            .collect();
        leaf_nodes[l] = req;
    }
    // Fallback leaves: scope = deepest yes-node on the path.
    let mut scope_of: Vec<Option<usize>> = vec![None; rules.leaves.len()];
    let mut in_scope: Vec<Vec<usize>> = vec![Vec::new(); rules.leaves.len()];
    for (l, leaf) in rules.leaves.iter().enumerate() {
        if !leaf.fallback {
            continue;
        }
        let Some(&(scope, _)) = paths[l].iter().rev().find(|(_, y)| *y) else {
            continue;
        };
        scope_of[l] = Some(scope);
        let others: Vec<usize> = (0..rules.leaves.len())
            .filter(|&o| {
                o != l && !rules.leaves[o].fallback && paths[o].iter().any(|&(m, y)| m == scope && y)
            })
            .collect();
        leaf_states[l] = (0..n)
            .map(|i| match node_states[scope][i] {
                StepState::Lit if others.iter().any(|&o| leaf_states[o][i] == StepState::Lit) => {
                    StepState::Unlit
                }
                s => s,
            })
            .collect();
        leaf_nodes[l] = vec![scope];
        in_scope[l] = others;
    }

    // 4. Per-leaf reports.
    let mut axes: Vec<AxisReport> = Vec::new();
    let mut onsets: Vec<Option<usize>> = vec![None; rules.leaves.len()];
    for &l in &rules.leaf_order {
        let leaf = &rules.leaves[l];
        let states = &leaf_states[l];
        let sigs: Vec<usize> = dedup_keep_order(
            leaf_nodes[l]
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
        let own: Vec<usize> = leaf_nodes[l]
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

    // 5. Verdict: candidates are lit axes; a fallback leaf is superseded when an
    //    ordinary leaf under its question lit in the window.
    let pos_of = |leaf: &str| {
        rules
            .leaf_order
            .iter()
            .position(|&l| rules.leaves[l].id == leaf)
            .unwrap_or(usize::MAX)
    };
    let state_of: BTreeMap<String, AxisState> = axes.iter().map(|a| (a.leaf.clone(), a.state)).collect();
    let mut candidates: Vec<usize> = Vec::new(); // indices into `axes`
    let mut unchecked_notes: BTreeMap<usize, String> = BTreeMap::new();
    for (a, ax) in axes.iter_mut().enumerate() {
        if ax.state != AxisState::Lit {
            continue;
        }
        let Some(l) = rules.leaf(&ax.leaf) else { continue };
        if rules.leaves[l].fallback {
            let superseded: Vec<&str> = in_scope[l]
                .iter()
                .filter(|&&o| {
                    onsets[o].is_some() || (single && leaf_states[o].first() == Some(&StepState::Lit))
                })
                .map(|&o| rules.leaves[o].id.as_str())
                .collect();
            if !superseded.is_empty() {
                ax.note = Some(format!(
                    "lit only while no more specific axis was lit; superseded by {}",
                    superseded.join(", ")
                ));
                continue;
            }
            // A fallback is only as good as the questions it falls back from.
            let unchecked: Vec<&str> = in_scope[l]
                .iter()
                .map(|&o| rules.leaves[o].id.as_str())
                .filter(|id| {
                    matches!(
                        state_of.get(*id),
                        Some(AxisState::NotChecked | AxisState::Unknown)
                    )
                })
                .collect();
            if !unchecked.is_empty() {
                let note = format!(
                    "no more specific axis is lit, but these could not be checked: {}",
                    unchecked.join(", ")
                );
                ax.note = Some(note.clone());
                unchecked_notes.insert(a, note);
            }
        }
        candidates.push(a);
    }
    let mut verdict = Verdict::default();
    let step = input.step.max(1);
    let with_onset: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&a| axes[a].onset.is_some())
        .collect();
    let root_axis: Option<usize> = if !with_onset.is_empty() {
        let earliest = with_onset
            .iter()
            .filter_map(|&a| axes[a].onset)
            .min()
            .unwrap_or(0);
        let mut tied: Vec<usize> = with_onset
            .iter()
            .copied()
            .filter(|&a| axes[a].onset.is_some_and(|o| o - earliest <= step))
            .collect();
        tied.sort_by_key(|&a| (pos_of(&axes[a].leaf), axes[a].onset));
        let root = tied[0];
        let root_onset = axes[root].onset.unwrap_or(earliest);
        let root_name = axis_name(&axes[root].axis, &axes[root].sub_axis);
        for &a in &tied[1..] {
            let o = axes[a].onset.unwrap_or(earliest);
            verdict.ties.push(Tie {
                leaf: axes[a].leaf.clone(),
                axis: axes[a].axis.clone(),
                sub_axis: axes[a].sub_axis.clone(),
                onset: o,
                note: format!(
                    "{} lit within one step ({}) of {root_name}",
                    axis_name(&axes[a].axis, &axes[a].sub_axis),
                    crate::timefmt::format_lag(step)
                ),
            });
        }
        if tied.len() > 1 {
            let names: Vec<String> = tied
                .iter()
                .map(|&a| axis_name(&axes[a].axis, &axes[a].sub_axis))
                .collect();
            verdict.assumptions.push(format!(
                "onsets of {} are within one step of each other; the data cannot order them, and {root_name} was chosen only because it comes first in the tree",
                names.join(", ")
            ));
        }
        let mut downstream: Vec<usize> = with_onset.iter().copied().filter(|a| !tied.contains(a)).collect();
        downstream.sort_by_key(|&a| (axes[a].onset, pos_of(&axes[a].leaf)));
        for a in downstream {
            let o = axes[a].onset.unwrap_or(root_onset);
            let lag = o - root_onset;
            verdict.downstream.push(Downstream {
                leaf: axes[a].leaf.clone(),
                axis: axes[a].axis.clone(),
                sub_axis: axes[a].sub_axis.clone(),
                onset: o,
                lag_ms: lag,
                note: format!(
                    "{} lit {} after {root_name}",
                    axis_name(&axes[a].axis, &axes[a].sub_axis),
                    crate::timefmt::format_lag(lag)
                ),
            });
        }
        Some(root)
    } else if !candidates.is_empty() {
        let mut c = candidates.clone();
        c.sort_by_key(|&a| pos_of(&axes[a].leaf));
        if single {
            verdict.assumptions.push(
                "a single snapshot has no onsets (they need a time series); the first lit axis in tree order was chosen"
                    .to_string(),
            );
        }
        for &a in &c[1..] {
            verdict.ties.push(Tie {
                leaf: axes[a].leaf.clone(),
                axis: axes[a].axis.clone(),
                sub_axis: axes[a].sub_axis.clone(),
                onset: input.steps.first().copied().unwrap_or(0),
                note: format!(
                    "{} also lit; without a time series its order cannot be told",
                    axis_name(&axes[a].axis, &axes[a].sub_axis)
                ),
            });
        }
        Some(c[0])
    } else {
        None
    };

    if let Some((r, note)) = root_axis.and_then(|r| unchecked_notes.get(&r).map(|n| (r, n))) {
        verdict
            .assumptions
            .push(format!("{}: {note}", axis_name(&axes[r].axis, &axes[r].sub_axis)));
    }

    // 6. Symptom, walk.
    let root_node = &rules.nodes[rules.root];
    let symptom_states = node_states[rules.root].clone();
    let symptom_onset = if single {
        None
    } else {
        onset_index(&symptom_states, d_eff, at)
    };
    let symptom_at = symptom_states.get(at).copied().unwrap_or(StepState::Unknown);
    let symptom = Some(SymptomState {
        node: root_node.def.id.clone(),
        question: root_node.def.question.clone(),
        state: match (
            symptom_onset.is_some() || (single && symptom_at == StepState::Lit),
            symptom_states.iter().any(|s| *s != StepState::Unknown),
        ) {
            (true, _) => AxisState::Lit,
            (false, true) => AxisState::Clear,
            (false, false) => AxisState::Unknown,
        },
        onset: symptom_onset.map(|i| input.steps[i]),
        timeline: symptom_states,
    });
    let (path, walk_end) = walk(rules, input, &judged, &node_states, at);

    // 7. Status and summary.
    let mut falsifier = None;
    let mut runbook = Vec::new();
    let status;
    if let Some(r) = root_axis {
        status = Status::Degraded;
        let ax = &axes[r];
        let l = rules.leaf(&ax.leaf).unwrap_or(0);
        falsifier = Some(rules.leaves[l].falsifier.clone());
        runbook = rules.leaves[l].runbook.clone();
        let name = axis_name(&ax.axis, &ax.sub_axis);
        let mut s = format!("root cause: {name} ({}) — {}", ax.severity, ax.title);
        if let Some(o) = ax.onset {
            s.push_str(&format!(", from {}", crate::timefmt::format_time(o)));
        }
        if let Some(loc) = &ax.localisation {
            s.push_str(&format!("; {loc}"));
        }
        if let Some(rec) = ax.recovered {
            s.push_str(&format!("; recovered at {}", crate::timefmt::format_time(rec)));
        }
        if !verdict.downstream.is_empty() {
            let d: Vec<String> = verdict.downstream.iter().map(|d| d.note.clone()).collect();
            s.push_str(&format!("; downstream: {}", d.join(", ")));
        }
        verdict.summary = s;
        verdict.root_cause = Some(RootCause {
            leaf: ax.leaf.clone(),
            axis: ax.axis.clone(),
            sub_axis: ax.sub_axis.clone(),
            severity: ax.severity,
            title: ax.title.clone(),
            onset: ax.onset,
            instances: ax.instances.clone(),
            localisation: ax.localisation.clone(),
        });
        if walk_end != ax.leaf && walk_end != super::HEALTHY {
            warnings.push(format!(
                "the tree walk at {} ends at `{walk_end}`, but {name} lit first: the walk shows the state at that time, the verdict follows the onsets",
                crate::timefmt::format_time(input.steps.get(at).copied().unwrap_or(0))
            ));
        }
    } else if symptom_at == StepState::Unlit {
        status = Status::Healthy;
        let not_checked = axes.iter().filter(|a| a.state == AxisState::NotChecked).count();
        verdict.summary = if not_checked > 0 {
            format!("healthy: no axis lit and no client-visible symptom ({not_checked} axes not checked, see gaps)")
        } else {
            "healthy: no axis lit and no client-visible symptom".to_string()
        };
    } else {
        status = Status::Inconclusive;
        verdict.summary = match symptom_at {
            StepState::Lit => "inconclusive: the symptom is present but not yet confirmed and no axis is lit".to_string(),
            _ => format!(
                "inconclusive: the symptom question `{}` cannot be answered from this data and no axis is lit",
                root_node.def.id
            ),
        };
    }

    Report {
        schema_version: SCHEMA_VERSION,
        status,
        verdict,
        symptom,
        axes,
        path,
        walk_end,
        gaps,
        window: WindowInfo {
            from: input.steps.first().copied().unwrap_or(0),
            to: input.steps.last().copied().unwrap_or(0),
            step: input.step,
            at: input.steps.get(at).copied().unwrap_or(0),
            steps: input.steps.clone(),
            range: input.range,
            debounce: d_eff,
            baseline: BaselineInfo {
                kind: input.baseline.kind,
                from: input.baseline.from,
                to: input.baseline.to,
                description: input.baseline.description.clone(),
            },
        },
        sources: input.sources.clone(),
        warnings,
        falsifier,
        runbook,
        rules: RulesInfo {
            origin: rules.origin.clone(),
            signals: rules.signals.len(),
            nodes: rules.nodes.len(),
            leaves: rules.leaves.len(),
        },
    }
}

fn worst(dir_below: bool, vals: impl Iterator<Item = f64>) -> Option<f64> {
    vals.filter(|v| !v.is_nan()).fold(None, |acc: Option<f64>, v| {
        Some(match acc {
            None => v,
            Some(a) if dir_below => a.min(v),
            Some(a) => a.max(v),
        })
    })
}

fn is_below(t: &Threshold) -> bool {
    t.below.is_some()
        || t.relative
            .as_ref()
            .is_some_and(|r| r.direction == Direction::Below)
}

fn evidence(
    rules: &RuleSet,
    k: usize,
    input: &SignalInput,
    j: &Judged,
    ref_i: usize,
    steps: &[Millis],
) -> Evidence {
    let def = &rules.signals[k].def;
    let below = is_below(&def.threshold);
    let n = steps.len();
    let series: Vec<Option<f64>> = (0..n)
        .map(|i| {
            worst(
                below,
                input.values.values().filter_map(|v| v.get(i).copied().flatten()),
            )
        })
        .collect();
    let instances: Vec<InstanceValue> = input
        .values
        .iter()
        .map(|(inst, v)| InstanceValue {
            instance: inst.clone(),
            value: v.get(ref_i).copied().flatten(),
            baseline: j.baseline.get(inst).copied(),
            lit: j.lit.get(inst).and_then(|l| l.get(ref_i).copied().flatten()),
        })
        .collect();
    let value = series.get(ref_i).copied().flatten();
    let worst_inst = instances
        .iter()
        .filter(|i| i.value.is_some() && i.value == value)
        .map(|i| i.instance.clone())
        .next();
    let lit = match j.states.get(ref_i) {
        Some(StepState::Lit) => Some(true),
        Some(StepState::Unlit) => Some(false),
        _ => None,
    };
    let localisation = localise(def.unit, &def.description, &instances);
    Evidence {
        signal: def.id.clone(),
        description: def.description.clone(),
        role: def.role.as_str().to_string(),
        unit: def.unit,
        availability: input.availability,
        alternative: input.alternative,
        expression: input.expression.clone(),
        threshold: def.threshold.clone(),
        threshold_text: def.threshold.text(def.unit),
        value,
        value_at: value.and(steps.get(ref_i).copied()),
        baseline: worst_inst.and_then(|i| j.baseline.get(&i).copied()),
        lit,
        instances,
        series,
        instance_series: input.values.clone(),
        localisation,
        note: input.note.clone(),
    }
}

/// "only etcd-2: 1.2 s; others ≤ 7 ms" when some but not all instances are lit;
/// "all 3 instances" when every instance with a value is lit.
fn localise(unit: Unit, what: &str, inst: &[InstanceValue]) -> Option<String> {
    let lit: Vec<&InstanceValue> = inst.iter().filter(|i| i.lit == Some(true)).collect();
    let unlit: Vec<&InstanceValue> = inst.iter().filter(|i| i.lit == Some(false)).collect();
    if lit.is_empty() {
        return None;
    }
    let fmt_v = |i: &InstanceValue| {
        i.value
            .map(|v| unit.format(v))
            .unwrap_or_else(|| "no data".into())
    };
    let names: Vec<&str> = lit.iter().map(|i| i.instance.as_str()).collect();
    let values: Vec<String> = lit.iter().map(|i| fmt_v(i)).collect();
    if unlit.is_empty() {
        return Some(if lit.len() == 1 {
            format!("{}: {what} {} (the only instance with data)", names[0], values[0])
        } else {
            let each: Vec<String> = lit
                .iter()
                .map(|i| format!("{} {}", i.instance, fmt_v(i)))
                .collect();
            format!("all {} instances: {what} {}", lit.len(), each.join(", "))
        });
    }
    let others: Vec<f64> = unlit.iter().filter_map(|i| i.value).collect();
    let lo = others.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = others.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = if others.is_empty() {
        "no data".to_string()
    } else if lo == hi {
        unit.format(lo)
    } else {
        format!("{}–{}", unit.format(lo), unit.format(hi))
    };
    Some(format!(
        "only {}: {what} {}, others {range}",
        names.join(", "),
        values.join(", ")
    ))
}

fn walk(
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
            Child::Healthy => super::HEALTHY.to_string(),
        };
        path.push(PathStep {
            node: node.def.id.clone(),
            question: node.def.question.clone(),
            condition: node.def.when.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::model::Relative;

    fn t(above: Option<f64>, rel: Option<(f64, f64)>) -> Threshold {
        Threshold {
            above,
            below: None,
            relative: rel.map(|(factor, floor)| Relative {
                factor,
                floor,
                direction: Direction::Above,
            }),
            combine: Combine::Any,
        }
    }

    #[test]
    fn judge_absolute_relative_and_floor() {
        let th = t(Some(0.5), Some((3.0, 0.05)));
        assert_eq!(judge(&th, Some(0.6), None), Some(true));
        assert_eq!(judge(&th, Some(0.01), None), Some(false));
        // 3 × baseline but under the floor: 0 → tiny does not light.
        assert_eq!(judge(&th, Some(0.004), Some(0.001)), Some(false));
        assert_eq!(judge(&th, Some(0.1), Some(0.01)), Some(true));
        assert_eq!(judge(&th, None, Some(0.01)), None);
        assert_eq!(judge(&th, Some(f64::NAN), Some(0.01)), Some(false));
        let rel_only = t(None, Some((3.0, 0.05)));
        assert_eq!(judge(&rel_only, Some(1.0), None), None);
        let fall = Threshold {
            above: None,
            below: None,
            relative: Some(Relative {
                factor: 0.2,
                floor: 5.0,
                direction: Direction::Below,
            }),
            combine: Combine::Any,
        };
        assert_eq!(judge(&fall, Some(1.0), Some(100.0)), Some(true));
        assert_eq!(judge(&fall, Some(1.0), Some(4.0)), Some(false));
    }

    #[test]
    fn onset_needs_debounce_and_recovery_needs_a_clear_run() {
        use StepState::*;
        let s = [Unlit, Lit, Unlit, Lit, Lit, Lit, Unlit, Unlit];
        assert_eq!(onset_index(&s, 2, 7), Some(3));
        assert_eq!(onset_index(&s, 4, 7), None);
        assert_eq!(recovery_index(&s, 2, 7), Some(6));
        assert_eq!(recovery_index(&s, 2, 6), None);
        assert_eq!(recovery_index(&[Lit, Lit, Unknown, Unlit], 2, 3), None);
    }

    #[test]
    fn values_are_formatted_for_people() {
        assert_eq!(Unit::Seconds.format(1.2), "1.2 s");
        assert_eq!(Unit::Seconds.format(0.007), "7 ms");
        assert_eq!(Unit::Ratio.format(0.035), "3.5%");
        assert_eq!(Unit::Bytes.format(2.0 * 1024.0 * 1024.0 * 1024.0), "2 GiB");
        assert_eq!(crate::timefmt::format_lag(85_000), "85 s");
        assert_eq!(crate::timefmt::format_lag(125_000), "2m05s");
    }
}
