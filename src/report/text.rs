//! Shared text helpers of the table and Markdown renderers: sparklines,
//! timelines, value formatting.

use crate::rules::model::{Threshold, Unit};
use crate::rules::report::{AxisReport, Evidence, Report, StepState};

/// Widest sparkline or timeline drawn; longer series are bucketed.
pub const MAX_WIDTH: usize = 48;

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Groups `n` steps into at most `max` buckets (index ranges).
fn buckets(n: usize, max: usize) -> Vec<std::ops::Range<usize>> {
    let max = max.max(1);
    if n <= max {
        return (0..n).map(|i| i..i + 1).collect();
    }
    (0..max)
        .map(|b| (b * n / max)..((b + 1) * n / max).max(b * n / max + 1))
        .collect()
}

/// A unicode sparkline of values (missing steps as `·`), scaled min..max; each
/// character is the maximum of its bucket.
pub fn sparkline(values: &[Option<f64>]) -> String {
    fit_sparkline(values, MAX_WIDTH)
}

/// A sparkline of at most `width` characters.
pub fn fit_sparkline(values: &[Option<f64>], width: usize) -> String {
    let finite: Vec<f64> = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if finite.is_empty() {
        return "·".repeat(buckets(values.len(), width).len());
    }
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    buckets(values.len(), width)
        .into_iter()
        .map(|r| {
            let m = values[r]
                .iter()
                .flatten()
                .copied()
                .filter(|v| !v.is_nan())
                .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
            match m {
                None => '·',
                Some(v) if v.is_infinite() => {
                    if v > 0.0 {
                        '█'
                    } else {
                        '▁'
                    }
                }
                Some(v) if hi > lo => {
                    let i = (((v - lo) / (hi - lo)) * 7.0).round() as usize;
                    BARS[i.min(7)]
                }
                Some(_) => BARS[0],
            }
        })
        .collect()
}

/// An axis timeline: `█` lit, `▁` unlit, `·` unknown (a bucket is lit if any step is).
pub fn timeline(steps: &[StepState]) -> String {
    fit_timeline(steps, MAX_WIDTH)
}

/// A timeline of at most `width` cells (a cell is lit if any of its steps is).
pub fn fit_timeline(steps: &[StepState], width: usize) -> String {
    buckets(steps.len(), width)
        .into_iter()
        .map(|r| {
            let s = &steps[r];
            if s.contains(&StepState::Lit) {
                '█'
            } else if s.contains(&StepState::Unlit) {
                '▁'
            } else {
                '·'
            }
        })
        .collect()
}

/// Whether a signal is a yes/no flag ([`Threshold::is_flag`]).
pub fn is_flag(unit: Unit, t: &Threshold) -> bool {
    t.is_flag(unit)
}

/// A signal's value for people: `yes`/`no` for flags, else the unit's
/// format ([`Threshold::format_value`]); `—` when missing.
pub fn shown_value(e: &Evidence, v: Option<f64>) -> String {
    v.map(|x| e.threshold.format_value(e.unit, x))
        .unwrap_or_else(|| "—".into())
}

/// A signal's threshold for people: `failing when no` for flags.
pub fn shown_threshold(e: &Evidence) -> String {
    if is_flag(e.unit, &e.threshold) {
        "failing when no".to_string()
    } else {
        e.threshold_text.clone()
    }
}

/// A signal in plain words (its description), not its id.
pub fn signal_label(e: &Evidence) -> String {
    e.description.clone()
}

/// An axis's name for people: `etcd/disk`, `apf`. A catch-all leaf that
/// shares its axis with more specific ones (a second `watch-cache`, a bare
/// `etcd` beside `etcd/disk`) reads `etcd (other)`; the tree's final
/// catch-all, judged by the first question alone (clients are affected and
/// nothing more specific is), reads `unexplained`.
pub fn axis_name(r: &Report, a: &AxisReport) -> String {
    let label = a.axis_id();
    if is_catch_all(r, a) {
        return "unexplained".to_string();
    }
    if a.leaf == label {
        return label;
    }
    let shared = r.axes.iter().any(|o| {
        o.leaf != a.leaf && {
            let ol = o.axis_id();
            ol == label || ol.starts_with(&format!("{label}/"))
        }
    });
    if shared {
        format!("{label} (other)")
    } else {
        label
    }
}

/// Whether `a` is decided by exactly the signals of the walk's first question
/// (the symptom) and nothing else: a leaf with no question of its own. (A
/// leaf such as `auth` reads some of the symptom's signals, never all.)
fn is_catch_all(r: &Report, a: &AxisReport) -> bool {
    let Some(first) = r.path.first() else {
        return false;
    };
    let own: Vec<&Evidence> = a.evidence.iter().filter(|e| !e.context).collect();
    !own.is_empty()
        && own.len() == first.signals.len()
        && own
            .iter()
            .all(|e| first.signals.iter().any(|s| s.signal == e.signal))
}

/// A value for people, or `—` when missing.
pub fn value(unit: Unit, v: Option<f64>) -> String {
    v.map(|v| unit.format(v)).unwrap_or_else(|| "—".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_and_marks_missing() {
        assert_eq!(sparkline(&[Some(0.0), Some(1.0), None, Some(0.5)]), "▁█·▅");
        assert_eq!(sparkline(&[None, None]), "··");
        assert_eq!(sparkline(&[Some(2.0), Some(2.0)]), "▁▁");
        assert_eq!(sparkline(&vec![Some(1.0); 100]).chars().count(), MAX_WIDTH);
    }

    #[test]
    fn timeline_marks_lit_buckets() {
        use StepState::*;
        assert_eq!(timeline(&[Unlit, Lit, Unknown]), "▁█·");
    }
}
