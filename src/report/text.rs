//! Shared text helpers of the table and Markdown renderers: sparklines,
//! timelines, value formatting.

use crate::rules::model::Unit;
use crate::rules::report::{AxisReport, StepState};

/// Widest sparkline or timeline drawn; longer series are bucketed.
pub const MAX_WIDTH: usize = 48;

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Groups `n` steps into at most `MAX_WIDTH` buckets (index ranges).
fn buckets(n: usize) -> Vec<std::ops::Range<usize>> {
    if n <= MAX_WIDTH {
        return (0..n).map(|i| i..i + 1).collect();
    }
    (0..MAX_WIDTH)
        .map(|b| (b * n / MAX_WIDTH)..((b + 1) * n / MAX_WIDTH).max(b * n / MAX_WIDTH + 1))
        .collect()
}

/// A unicode sparkline of values (missing steps as `·`), scaled min..max; each
/// character is the maximum of its bucket.
pub fn sparkline(values: &[Option<f64>]) -> String {
    let finite: Vec<f64> = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if finite.is_empty() {
        return "·".repeat(buckets(values.len()).len());
    }
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    buckets(values.len())
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
    buckets(steps.len())
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

/// A value for people, or `—` when missing.
pub fn value(unit: Unit, v: Option<f64>) -> String {
    v.map(|v| unit.format(v)).unwrap_or_else(|| "—".into())
}

/// `etcd/disk` or `apf`.
pub fn axis_label(a: &AxisReport) -> String {
    match &a.sub_axis {
        Some(s) => format!("{}/{s}", a.axis),
        None => a.axis.clone(),
    }
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
