//! argv → config: what the window and baseline flags of `diagnose` and
//! `query` mean, in one place. Flag values are already parsed and checked by
//! clap (`cli.rs`: times, positive durations); this module combines them with
//! the data (the default window is the data's own).

use crate::cli::DiagnoseArgs;
use crate::error::CliError;
use crate::rules::engine::{BaselineSpec, Options};
use crate::source::Dataset;
use crate::store::Millis;

/// Default length of the window diagnosed over Prometheus when `--from` is not given.
pub(crate) const PROMETHEUS_DEFAULT_WINDOW: Millis = 3600 * 1000;

/// `--to` must not be before `--from`.
pub(crate) fn ordered(from: Millis, to: Millis) -> Result<(), CliError> {
    if to < from {
        return Err(CliError::Usage("`--to` is before `--from`".into()));
    }
    Ok(())
}

/// The baseline flags: an explicit range of the same data, else a separate
/// healthy dataset (`--baseline-dump`), else the start of the window.
fn baseline<'a>(a: &DiagnoseArgs, baseline_ds: Option<&'a Dataset>) -> BaselineSpec<'a> {
    match (a.baseline_from, a.baseline_to, baseline_ds) {
        (Some(from), Some(to), _) => BaselineSpec::Range { from, to },
        (_, _, Some(b)) => BaselineSpec::Dataset(b),
        _ => BaselineSpec::WindowStart,
    }
}

/// The window, step and baseline of a diagnosis of local data (dumps, live
/// scrapes, audit logs): unset bounds are the data's own; `--since` counts
/// back from `--to` or the last snapshot.
pub(crate) fn local_options<'a>(
    a: &DiagnoseArgs,
    ds: &Dataset,
    baseline_ds: Option<&'a Dataset>,
) -> Result<Options<'a>, CliError> {
    let from = match (a.from, a.since) {
        (Some(f), _) => Some(f),
        (None, Some(d)) => {
            let end = match a.to {
                Some(t) => t,
                None => {
                    ds.window()
                        .ok_or_else(|| CliError::Data("no snapshot in the input".into()))?
                        .1
                }
            };
            Some(end - d)
        }
        (None, None) => None,
    };
    if let (Some(f), Some(t)) = (from, a.to) {
        ordered(f, t)?;
    }
    Ok(Options {
        at: a.at,
        from,
        to: a.to,
        step: a.step,
        baseline: baseline(a, baseline_ds),
        debounce: a.debounce as usize,
    })
}

/// The window of a Prometheus diagnosis: it ends at `--to`, else `--at`, else
/// now; it starts at `--from`, else `--since` (default one hour) before its end.
/// Returns the options and `(from, to)`.
pub(crate) fn prometheus_options(a: &DiagnoseArgs) -> Result<(Options<'static>, Millis, Millis), CliError> {
    let to = match (a.to, a.at) {
        (Some(t), _) => t,
        (None, Some(at)) => at,
        (None, None) => chrono::Utc::now().timestamp_millis() / 1000 * 1000,
    };
    let from = a
        .from
        .unwrap_or_else(|| to - a.since.unwrap_or(PROMETHEUS_DEFAULT_WINDOW));
    ordered(from, to)?;
    let opts = Options {
        at: a.at,
        from: Some(from),
        to: Some(to),
        step: a.step,
        baseline: baseline(a, None),
        debounce: a.debounce as usize,
    };
    Ok((opts, from, to))
}
