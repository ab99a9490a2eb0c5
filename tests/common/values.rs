//! Hand-built per-step signal values for the tests of the pure assessment.

use cptriage::rules::verdict::SignalInput;
use cptriage::store::Millis;

/// `n` steps from `t0`, `step` apart.
pub(crate) fn grid(t0: Millis, step: Millis, n: usize) -> Vec<Millis> {
    (0..n as i64).map(|i| t0 + i * step).collect()
}

/// `low` outside `[from, until)`, `high` inside.
pub(crate) fn step_fn(n: usize, low: f64, high: f64, from: usize, until: usize) -> Vec<Option<f64>> {
    (0..n)
        .map(|i| Some(if i >= from && i < until { high } else { low }))
        .collect()
}

/// `v` at every one of `n` steps.
pub(crate) fn flat(n: usize, v: f64) -> Vec<Option<f64>> {
    vec![Some(v); n]
}

/// A signal evaluated per instance.
pub(crate) fn sig(pairs: Vec<(&str, Vec<Option<f64>>)>) -> SignalInput {
    SignalInput::evaluated(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
