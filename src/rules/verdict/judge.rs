//! Phase 1: every signal judged against its threshold, per instance and step:
//! the per-instance baselines the relative thresholds need (robust medians that
//! leave out the steps not judged), then the persistence a lit run needs before
//! it counts.

use std::collections::BTreeMap;

use super::SignalInput;
use crate::rules::load::RuleSet;
use crate::rules::model::{Combine, Direction, Threshold};
use crate::rules::report::{Availability, StepState, ThresholdLine};
use crate::store::Millis;

/// Per-signal judgement at every step.
pub(super) struct Judged {
    /// Instance → baseline.
    pub baseline: BTreeMap<String, f64>,
    /// No instance had a baseline and the relative part compared each step
    /// with the other instances' median instead (`relative.peers`).
    pub peer_judged: bool,
    /// Instance → lit per step, after persistence: a run shorter than the
    /// signal's persistence is unlit (or unknown while it may still grow at the
    /// end of the window).
    pub lit: BTreeMap<String, Vec<Option<bool>>>,
    /// Aggregate per step.
    pub states: Vec<StepState>,
    /// Not exposed by this version, no target of its role, or a rate in a
    /// single snapshot: an `any` list skips it instead of becoming unknown.
    pub unavailable: bool,
    /// Steps above the threshold that did not last long enough to count, over
    /// all instances.
    pub transient_steps: usize,
    /// Runs still too short at the end of the window: instance → steps.
    pub pending: BTreeMap<String, usize>,
    /// The persistence applied, in ms.
    pub persistence: Millis,
    /// Steps by which runs were dated back with the short window, over all
    /// instances.
    pub dated_back: usize,
    /// Lit steps not counted by the signal's `quiet_after:`, over all
    /// instances.
    pub quieted: usize,
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

/// The threshold as lines a plot can draw, in the signal's unit: the absolute
/// part once, the relative part per instance with a baseline (`factor ×
/// baseline`, raised to the floor for `above`; none for `below` when the
/// baseline is not above the floor, as [`judge`] then never lights). How the
/// parts combine stays in the threshold (`combine`).
pub(super) fn threshold_lines(t: &Threshold, baselines: &BTreeMap<String, f64>) -> Vec<ThresholdLine> {
    let mut out = Vec::new();
    if let Some(a) = t.above {
        out.push(ThresholdLine {
            instance: None,
            value: a,
            above: true,
        });
    } else if let Some(b) = t.below {
        out.push(ThresholdLine {
            instance: None,
            value: b,
            above: false,
        });
    }
    if let Some(r) = &t.relative {
        for (inst, b) in baselines.iter().filter(|(_, b)| b.is_finite()) {
            let line = match r.direction {
                Direction::Above => Some((r.factor * b).max(r.floor)),
                Direction::Below => (*b > r.floor).then_some(r.factor * b),
            };
            if let Some(value) = line.filter(|v| v.is_finite()) {
                out.push(ThresholdLine {
                    instance: Some(inst.clone()),
                    value,
                    above: r.direction == Direction::Above,
                });
            }
        }
    }
    out
}

/// The 95% Wilson score interval of a share `p` of `n` observations.
pub(super) fn wilson(p: f64, n: f64) -> (f64, f64) {
    const Z: f64 = 1.959_963_984_540_054;
    let p = p.clamp(0.0, 1.0);
    let z2 = Z * Z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z * ((p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()) / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn is_below(t: &Threshold) -> bool {
    t.below.is_some()
        || t.relative
            .as_ref()
            .is_some_and(|r| r.direction == Direction::Below)
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

/// How one signal is judged over the window.
pub(super) struct Plan<'a> {
    pub threshold: &'a Threshold,
    /// The value is a share of the input's observations: judge its Wilson bound.
    pub proportion: bool,
    /// Baseline steps `[start, end)` of the window, when the baseline is taken
    /// from the window itself.
    pub baseline_steps: Option<(usize, usize)>,
    pub steps: &'a [Millis],
    /// How long a lit run must last (first to last lit step), in ms.
    pub persistence: Millis,
    /// How many steps a confirmed run may be dated back by the short window.
    pub refine_steps: usize,
    /// Index of the assessment time: runs reaching it may still grow.
    pub at: usize,
}

fn skipped(input: &SignalInput, inst: &str, i: usize) -> bool {
    input
        .skips
        .get(inst)
        .and_then(|v| v.get(i).copied().flatten())
        .is_some()
}

pub(super) fn judge_signal(input: &SignalInput, plan: &Plan) -> Judged {
    let nsteps = plan.steps.len();
    let mut baseline: BTreeMap<String, f64> = BTreeMap::new();
    // Every signal gets its window-start baseline (evidence and the falsifier
    // quote it); only relative thresholds judge against it. A separate
    // baseline range or capture is evaluated for relative signals only.
    if input.availability == Availability::Evaluated {
        if let Some(b) = &input.baseline {
            baseline = b.clone();
        } else if let Some((s, e)) = plan.baseline_steps {
            for (inst, vals) in &input.values {
                let vs: Vec<f64> = (s..e.min(vals.len()))
                    .filter(|&i| !skipped(input, inst, i))
                    .filter_map(|i| vals[i])
                    .collect();
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
    let mut transient_steps = 0;
    let mut dated_back = 0;
    let mut pending = BTreeMap::new();
    let by_peers = baseline.is_empty() && plan.threshold.relative.as_ref().is_some_and(|r| r.peers);
    let mut peer_judged = false;
    // Steps where an instance's run is lit but not yet confirmed at the end
    // of the window: the signal is unknown there, not unlit.
    let mut pending_at = vec![false; nsteps];
    if input.availability == Availability::Evaluated {
        for (inst, vals) in &input.values {
            let b = baseline.get(inst).copied();
            let bases = Bases::of(input, inst, b, by_peers);
            peer_judged |= bases.by_peers();
            let raw = raw_lit(input, inst, vals, &bases, plan);
            let mut p = persist(&raw, &blank_steps(vals, plan.steps.len()), plan);
            if let Some(short) = &input.short {
                if let Some(svals) = short.values.get(inst) {
                    let sbases = Bases::of(short, inst, b, by_peers);
                    let sraw = raw_lit(short, inst, svals, &sbases, plan);
                    dated_back += date_back(&mut p.lit, &sraw, plan.refine_steps);
                }
            }
            transient_steps += p.transient;
            if p.pending > 0 {
                pending.insert(inst.clone(), p.pending);
            }
            for (i, x) in p.lit.iter().enumerate() {
                if x.is_none() && raw.get(i) == Some(&Some(true)) {
                    pending_at[i] = true;
                }
            }
            lit.insert(inst.clone(), p.lit);
        }
    }
    for (i, st) in states.iter_mut().enumerate() {
        *st = step_state(&lit, i);
    }
    for (st, _) in states
        .iter_mut()
        .zip(&pending_at)
        .filter(|(st, p)| **p && **st == StepState::Unlit)
    {
        *st = StepState::Unknown;
    }
    let unavailable = matches!(
        input.availability,
        Availability::NotExposed | Availability::RoleAbsent | Availability::NeedsTimeSeries
    );
    Judged {
        baseline,
        peer_judged,
        lit,
        states,
        unavailable,
        transient_steps,
        pending,
        persistence: plan.persistence,
        dated_back,
        quieted: 0,
    }
}

/// Applies every signal's `quiet_after:` ([`crate::rules::model::QuietAfter`]):
/// its lit steps while the other signal is lit on any instance, and up to
/// its duration after, are judged unlit, and counted.
pub(super) fn apply_quiet(rules: &RuleSet, steps: &[Millis], judged: &mut [Judged]) {
    for (k, s) in rules.signals.iter().enumerate() {
        let Some(q) = &s.def.quiet_after else { continue };
        let Some(o) = rules.signal(&q.signal) else {
            continue;
        };
        let quiet = quiet_steps(&judged[o].states, steps, q.duration.0);
        judged[k].quieted = quiet_lit(&mut judged[k], &quiet);
    }
}

/// The steps at which another signal is lit, or was at most `dur` before.
fn quiet_steps(other: &[StepState], steps: &[Millis], dur: Millis) -> Vec<bool> {
    let mut last: Option<Millis> = None;
    steps
        .iter()
        .zip(other)
        .map(|(&t, st)| {
            if *st == StepState::Lit {
                last = Some(t);
            }
            last.is_some_and(|l| t - l <= dur)
        })
        .collect()
}

/// Judges a signal unlit at the quiet steps; returns how many lit steps
/// that took, over all instances.
fn quiet_lit(j: &mut Judged, quiet: &[bool]) -> usize {
    let mut n = 0;
    for lit in j.lit.values_mut() {
        for (x, _) in lit
            .iter_mut()
            .zip(quiet)
            .filter(|(x, q)| **q && **x == Some(true))
        {
            *x = Some(false);
            n += 1;
        }
    }
    // Only the quiet steps change (elsewhere a run not yet confirmed keeps
    // the signal unknown).
    for (i, st) in j
        .states
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| quiet.get(*i) == Some(&true))
    {
        *st = step_state(&j.lit, i);
    }
    n
}

/// A signal's state at step `i` from its instances': lit if one is lit,
/// unlit if one is unlit and none lit, unknown otherwise.
fn step_state(lit: &BTreeMap<String, Vec<Option<bool>>>, i: usize) -> StepState {
    let at = lit.values().filter_map(|l| l.get(i).copied().flatten());
    at.fold(StepState::Unknown, |s, x| match (x, s) {
        (true, _) | (false, StepState::Lit) => StepState::Lit,
        (false, _) => StepState::Unlit,
    })
}

/// The median of the other instances' values at one step, the stand-in for
/// a missing baseline with `relative.peers`: their finite values, at least
/// two of them (one other member is no majority to stand out from).
pub(super) fn peer_median(others: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = others.into_iter().flatten().filter(|v| v.is_finite()).collect();
    if v.len() >= 2 {
        median(v)
    } else {
        None
    }
}

/// What each step of one instance is judged against.
enum Bases {
    /// Its baseline (or none) at every step.
    Fixed(Option<f64>),
    /// Per step, the other instances' [`peer_median`] (`relative.peers`, no
    /// instance has a baseline).
    Peers(Vec<Option<f64>>),
}

impl Bases {
    /// For `inst`: its baseline `b`, or with `by_peers` the other instances'
    /// median at each step where they were judged.
    fn of(input: &SignalInput, inst: &str, b: Option<f64>, by_peers: bool) -> Bases {
        if !by_peers {
            return Bases::Fixed(b);
        }
        let n = input.values.values().map(Vec::len).max().unwrap_or(0);
        Bases::Peers(
            (0..n)
                .map(|i| {
                    peer_median(
                        input
                            .values
                            .iter()
                            .filter(|(other, _)| other.as_str() != inst && !skipped(input, other, i))
                            .map(|(_, v)| v.get(i).copied().flatten()),
                    )
                })
                .collect(),
        )
    }

    fn at(&self, i: usize) -> Option<f64> {
        match self {
            Bases::Fixed(b) => *b,
            Bases::Peers(v) => v.get(i).copied().flatten(),
        }
    }

    /// Whether some step was judged against the other instances.
    fn by_peers(&self) -> bool {
        matches!(self, Bases::Peers(v) if v.iter().any(Option::is_some))
    }
}

/// One instance's values judged against the threshold, before persistence:
/// skipped steps are unknown; a share of observations is judged by its Wilson
/// bound. `bases`: what each step's relative part compares with.
fn raw_lit(
    input: &SignalInput,
    inst: &str,
    vals: &[Option<f64>],
    bases: &Bases,
    plan: &Plan,
) -> Vec<Option<bool>> {
    let t = plan.threshold;
    let obs = input.observations.get(inst);
    (0..plan.steps.len())
        .map(|i| {
            if skipped(input, inst, i) {
                return None;
            }
            let v = vals.get(i).copied().flatten();
            let n = obs.and_then(|o| o.get(i).copied().flatten());
            match (plan.proportion, v, n) {
                (true, Some(p), Some(n)) if p.is_finite() && n > 0.0 => {
                    let (lo, hi) = wilson(p, n);
                    judge(t, Some(if is_below(t) { hi } else { lo }), bases.at(i))
                }
                _ => judge(t, v, bases.at(i)),
            }
        })
        .collect()
}

/// The steps whose value is NaN: the expression had nothing to measure in
/// the window (no probe round trip recorded, no request answered). They are
/// unlit, but they are no evidence that a lit run ended: etcd records its
/// peers' round trips every 30 s, so a 20 s window holds one only part of the
/// time.
fn blank_steps(vals: &[Option<f64>], n: usize) -> Vec<bool> {
    (0..n)
        .map(|i| vals.get(i).copied().flatten().is_some_and(f64::is_nan))
        .collect()
}

/// Dates each confirmed run back over the steps just before it where the
/// short window is lit (at most `max` steps): the full window dilutes a new
/// fault with what came before it, the short one does not. Only runs the full
/// window confirmed move, so the short window's noise never lights a step of
/// its own. Returns the number of steps added.
fn date_back(lit: &mut [Option<bool>], short: &[Option<bool>], max: usize) -> usize {
    let mut added = 0;
    let mut i = 0;
    while i < lit.len() {
        if lit[i] == Some(true) && (i == 0 || lit[i - 1] != Some(true)) {
            let mut j = i;
            while j > 0
                && i - (j - 1) <= max
                && lit[j - 1] != Some(true)
                && short.get(j - 1).copied().flatten() == Some(true)
            {
                j -= 1;
            }
            for x in lit.iter_mut().take(i).skip(j) {
                *x = Some(true);
            }
            added += i - j;
        }
        i += 1;
    }
    added
}

struct Persisted {
    lit: Vec<Option<bool>>,
    transient: usize,
    pending: usize,
}

/// Applies the persistence to one instance's raw lit steps, like a Prometheus
/// alert's `for:`: lit steps separated by fewer unlit milliseconds than the
/// persistence form one run, and a run counts when its first and last lit steps
/// are at least the persistence apart. Unlit gaps inside a counted run become
/// lit (one episode, not several); unknown steps stay unknown. Blank steps
/// (nothing measured, [`blank_steps`]) neither break a run nor count as its
/// unlit time. A run too short that reaches the assessment time (or is
/// followed only by blank steps up to it) may still grow: its steps are unknown.
fn persist(raw: &[Option<bool>], blank: &[bool], plan: &Plan) -> Persisted {
    let mut out = raw.to_vec();
    let lit_idx: Vec<usize> = (0..raw.len()).filter(|&i| raw[i] == Some(true)).collect();
    let mut transient = 0;
    let mut pending = 0;
    let mut k = 0;
    while k < lit_idx.len() {
        let mut end = k;
        while end + 1 < lit_idx.len() {
            let (a, b) = (lit_idx[end], lit_idx[end + 1]);
            // Unlit time between two lit steps (unknown steps do not break a run).
            let unlit: Millis = (a + 1..b)
                .filter(|&i| raw[i] == Some(false) && !blank.get(i).copied().unwrap_or(false))
                .map(|i| plan.steps[i].saturating_sub(plan.steps[i - 1]))
                .sum();
            if unlit < plan.persistence || (unlit == 0) {
                end += 1;
            } else {
                break;
            }
        }
        let (first, last) = (lit_idx[k], lit_idx[end]);
        let span = plan.steps[last].saturating_sub(plan.steps[first]);
        if span >= plan.persistence {
            for x in out.iter_mut().take(last + 1).skip(first) {
                if *x == Some(false) {
                    *x = Some(true);
                }
            }
        } else if last >= plan.at || (last + 1..=plan.at).all(|i| blank.get(i).copied().unwrap_or(false)) {
            pending += end - k + 1;
            for x in out.iter_mut().take(last + 1).skip(first) {
                if *x == Some(true) {
                    *x = None;
                }
            }
        } else {
            transient += end - k + 1;
            for x in out.iter_mut().take(last + 1).skip(first) {
                if *x == Some(true) {
                    *x = Some(false);
                }
            }
        }
        k = end + 1;
    }
    Persisted {
        lit: out,
        transient,
        pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: &[Millis], persistence: Millis, t: &Threshold) -> Plan<'static> {
        Plan {
            threshold: Box::leak(Box::new(t.clone())),
            proportion: false,
            baseline_steps: None,
            steps: Box::leak(steps.to_vec().into_boxed_slice()),
            persistence,
            refine_steps: 4,
            at: steps.len() - 1,
        }
    }

    fn th() -> Threshold {
        Threshold {
            above: Some(1.0),
            below: None,
            relative: None,
            combine: Combine::Any,
        }
    }

    #[test]
    fn quiet_steps_run_from_the_other_signal_lit_to_the_duration_after() {
        use StepState::{Lit, Unknown, Unlit};
        let steps = [0, 5_000, 10_000, 15_000, 20_000, 25_000];
        let other = [Unlit, Lit, Unlit, Unknown, Unlit, Unlit];
        // Lit at 5 s: quiet there and up to 10 s after (5, 10, 15 s).
        assert_eq!(
            super::quiet_steps(&other, &steps, 10_000),
            vec![false, true, true, true, false, false]
        );
        assert_eq!(super::quiet_steps(&[Unlit; 6], &steps, 10_000), vec![false; 6]);
    }

    #[test]
    fn a_run_not_yet_confirmed_at_the_end_leaves_the_signal_unknown_there() {
        let steps: Vec<Millis> = (0..5).map(|i| i * 60_000).collect();
        let j = super::judge_signal(
            &SignalInput::evaluated(BTreeMap::from([
                (
                    "m0".to_string(),
                    vec![Some(1.0), Some(1.0), Some(1.0), Some(9.0), Some(9.0)],
                ),
                ("m1".to_string(), vec![Some(1.0); 5]),
            ])),
            &plan(
                &steps,
                180_000,
                &Threshold {
                    above: Some(5.0),
                    ..th()
                },
            ),
        );
        assert_eq!(j.lit["m0"][3..], [None, None]);
        // m1 is unlit, but m0 may still confirm: unknown, not unlit.
        assert_eq!(j.states[3..], [StepState::Unknown, StepState::Unknown]);
        assert_eq!(j.states[..3], [StepState::Unlit; 3]);
    }

    #[test]
    fn quieted_lit_steps_turn_unlit_and_are_counted() {
        let mut j = super::judge_signal(
            &SignalInput::evaluated(BTreeMap::from([
                ("a".to_string(), vec![Some(1.0), Some(9.0), Some(9.0)]),
                ("b".to_string(), vec![Some(9.0), Some(1.0), None]),
            ])),
            &plan(
                &[0, 5_000, 10_000],
                0,
                &Threshold {
                    above: Some(5.0),
                    ..th()
                },
            ),
        );
        assert_eq!(j.states, vec![StepState::Lit, StepState::Lit, StepState::Lit]);
        let n = super::quiet_lit(&mut j, &[false, true, true]);
        assert_eq!(n, 2);
        assert_eq!(j.lit["a"], vec![Some(false), Some(false), Some(false)]);
        assert_eq!(j.lit["b"], vec![Some(true), Some(false), None]);
        assert_eq!(j.states, vec![StepState::Lit, StepState::Unlit, StepState::Unlit]);
    }

    #[test]
    fn a_confirmed_run_is_dated_back_by_the_short_window_only() {
        let (l, f, u) = (Some(true), Some(false), None);
        // The full window confirms from step 5; the short one was lit from 3.
        let mut lit = vec![f, f, f, f, f, l, l, l];
        let short = vec![f, l, f, l, l, l, l, l];
        assert_eq!(date_back(&mut lit, &short, 4), 2);
        assert_eq!(lit, vec![f, f, f, l, l, l, l, l]);
        // Never further than `max` steps.
        let mut lit = vec![f, f, f, f, f, l];
        assert_eq!(date_back(&mut lit, &[l, l, l, l, l, l], 2), 2);
        assert_eq!(lit, vec![f, f, f, l, l, l]);
        // A short-window blip with no confirmed run after it lights nothing.
        let mut lit = vec![f, f, f, f];
        assert_eq!(date_back(&mut lit, &[l, l, l, l], 4), 0);
        assert_eq!(lit, vec![f; 4]);
        // An unknown step stops the dating.
        let mut lit = vec![f, f, f, l];
        assert_eq!(date_back(&mut lit, &[l, u, l, l], 4), 1);
        assert_eq!(lit, vec![f, f, l, l]);
    }

    #[test]
    fn threshold_lines_are_where_judge_flips() {
        use crate::rules::model::Relative;
        let base: BTreeMap<String, f64> = [("a".to_string(), 0.004), ("b".to_string(), 0.2)]
            .into_iter()
            .collect();
        let t = Threshold {
            above: Some(0.5),
            below: None,
            relative: Some(Relative {
                factor: 4.0,
                floor: 0.05,
                direction: Direction::Above,
                peers: false,
            }),
            combine: Combine::All,
        };
        let lines = threshold_lines(&t, &base);
        assert_eq!(lines.len(), 3);
        // The relative part alone (no absolute), judged just past each line.
        let rel = Threshold {
            above: None,
            ..t.clone()
        };
        for l in &lines[1..] {
            let inst = l.instance.as_deref().unwrap();
            let b = Some(base[inst]);
            assert_eq!(judge(&rel, Some(l.value * 1.001), b), Some(true), "{l:?}");
            assert_eq!(judge(&rel, Some(l.value * 0.999), b), Some(false), "{l:?}");
        }
        // The floor raises a's line (4 × 4 ms < 50 ms), not b's.
        assert_eq!(lines[1].value, 0.05);
        assert!((lines[2].value - 0.8).abs() < 1e-12);
        // Below: no line when the baseline is not above the floor.
        let below = Threshold {
            above: None,
            below: None,
            relative: Some(Relative {
                factor: 0.5,
                floor: 0.1,
                direction: Direction::Below,
                peers: false,
            }),
            combine: Combine::Any,
        };
        let lines = threshold_lines(&below, &base);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].instance.as_deref(), Some("b"));
        assert!(!lines[0].above);
    }

    #[test]
    fn without_any_baseline_peers_judge_each_step_against_the_others_median() {
        use crate::rules::model::Relative;
        use crate::rules::verdict::SignalInput;
        let rel = |peers| Threshold {
            above: Some(0.15),
            below: None,
            relative: Some(Relative {
                factor: 4.0,
                floor: 0.01,
                direction: Direction::Above,
                peers,
            }),
            combine: Combine::Any,
        };
        let steps: Vec<Millis> = (0..4).map(|i| i * 60_000).collect();
        let v = |xs: [f64; 4]| xs.iter().map(|x| Some(*x)).collect::<Vec<_>>();
        // The window has no baseline steps; m1 is reached 20× slower than
        // the others from step 2 on (a starved member at 60 s scrapes).
        let values: BTreeMap<String, Vec<Option<f64>>> = [
            ("m0".to_string(), v([0.0008, 0.0008, 0.0009, 0.0008])),
            ("m1".to_string(), v([0.0008, 0.0009, 0.017, 0.018])),
            ("m2".to_string(), v([0.0007, 0.0008, 0.0008, 0.0009])),
        ]
        .into_iter()
        .collect();
        let input = SignalInput::evaluated(values.clone());
        let t = rel(true);
        let j = judge_signal(&input, &plan(&steps, 0, &t));
        assert!(j.peer_judged && j.baseline.is_empty());
        let (l, f) = (Some(true), Some(false));
        assert_eq!(j.lit["m1"], vec![f, f, l, l]);
        assert_eq!(j.lit["m0"], vec![f; 4]);
        // Without `peers`, the absolute part alone decides: 17 ms < 150 ms.
        let t = rel(false);
        let j = judge_signal(&input, &plan(&steps, 0, &t));
        assert!(!j.peer_judged);
        assert_eq!(j.lit["m1"], vec![f; 4]);
        // With a baseline, `peers` changes nothing: the baseline decides.
        let mut with_base = SignalInput::evaluated(values);
        with_base.baseline = Some(
            [("m0", 0.0008), ("m1", 0.005), ("m2", 0.0008)]
                .into_iter()
                .map(|(k, b)| (k.to_string(), b))
                .collect(),
        );
        let t = rel(true);
        let j = judge_signal(&with_base, &plan(&steps, 0, &t));
        assert!(!j.peer_judged);
        assert_eq!(j.lit["m1"], vec![f; 4], "17 ms is under 4 × its 5 ms baseline");
        // One other member is not a peer median: no comparison.
        let two: BTreeMap<String, Vec<Option<f64>>> = [
            ("m0".to_string(), v([0.0008; 4])),
            ("m1".to_string(), v([0.017; 4])),
        ]
        .into_iter()
        .collect();
        let j = judge_signal(&SignalInput::evaluated(two), &plan(&steps, 0, &t));
        assert_eq!(j.lit["m1"], vec![f; 4]);
    }

    #[test]
    fn wilson_bounds_need_more_evidence_from_fewer_observations() {
        // 3 slow of 100: the share could well be under 10%.
        let (lo, _) = wilson(0.03, 100.0);
        assert!(lo > 0.009 && lo < 0.011, "{lo}");
        // All of 4 slow: at least half, with 95% confidence.
        let (lo, hi) = wilson(1.0, 4.0);
        assert!(lo > 0.5 && lo < 0.52 && hi == 1.0, "{lo} {hi}");
        // Many observations: the bound is close to the share.
        let (lo, hi) = wilson(0.2, 10_000.0);
        assert!(lo > 0.19 && hi < 0.21);
    }

    #[test]
    fn a_run_shorter_than_the_persistence_does_not_count() {
        let steps: Vec<Millis> = (0..10).map(|i| i * 5000).collect();
        let t = th();
        let p = plan(&steps, 20_000, &t);
        let f = Some(false);
        let l = Some(true);
        // 3 lit steps = 10 s from first to last: transient.
        let r = persist(&[f, l, l, l, f, f, f, f, f, f], &[false; 10], &p);
        assert_eq!(r.lit, vec![f; 10]);
        assert_eq!(r.transient, 3);
        // 5 lit steps = 20 s: counts.
        let r = persist(&[f, l, l, l, l, l, f, f, f, f], &[false; 10], &p);
        assert_eq!(r.lit[1..6], [l; 5]);
        // Two short runs 5 s apart (gap shorter than 20 s) are one run of 25 s.
        let r = persist(&[l, l, f, l, l, l, f, f, f, f], &[false; 10], &p);
        assert_eq!(r.lit[0..6], [l; 6]);
        // A short run at the end may still grow: unknown, not unlit.
        let r = persist(&[f, f, f, f, f, f, f, f, l, l], &[false; 10], &p);
        assert_eq!(r.lit[8..], [None, None]);
        assert_eq!(r.pending, 2);
        // Persistence 0: every lit step counts.
        let p0 = plan(&steps, 0, &t);
        let r = persist(&[f, l, f, f, f, f, f, f, f, f], &[false; 10], &p0);
        assert_eq!(r.lit[1], l);
        // Unknown steps neither break nor extend a run.
        let r = persist(&[l, None, None, None, l, f, f, f, f, f], &[false; 10], &p);
        assert_eq!(r.lit[0], l);
        assert_eq!(r.lit[1], None);
    }

    #[test]
    fn steps_with_nothing_measured_do_not_break_a_run() {
        // etcd records a peer round trip every 30 s: a 20 s window at 5 s
        // steps may see one for 3 steps, then none for 4.
        let steps: Vec<Millis> = (0..12).map(|i| i * 5000).collect();
        let t = th();
        let p = plan(&steps, 20_000, &t);
        let (f, l) = (Some(false), Some(true));
        let raw = [f, l, l, l, f, f, f, f, l, l, l, f];
        let mut blank = [false; 12];
        blank[4..8].fill(true);
        let r = persist(&raw, &blank, &p);
        assert_eq!(r.lit[1..11], [l; 10], "one run of 45 s from step 1");
        assert_eq!(r.transient, 0);
        // The same gap measured unlit: two runs of 10 s, neither counts.
        let r = persist(&raw, &[false; 12], &p);
        assert_eq!(r.lit, vec![f; 12]);
        assert_eq!(r.transient, 6);
        // A short run followed only by blank steps to the end may still grow.
        let raw = [f, f, f, f, f, f, f, f, l, l, f, f];
        let mut blank = [false; 12];
        blank[10..].fill(true);
        let r = persist(&raw, &blank, &p);
        assert_eq!(r.lit[8..10], [None, None]);
        assert_eq!(r.pending, 2);
    }
}
