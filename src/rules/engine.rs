//! The assessment engine: evaluates every signal of a [`RuleSet`] over a
//! [`Dataset`] at every step of the window and hands the values to the pure
//! [`assess`](super::verdict::assess).
//!
//! Window and step: the window is the dataset's time span (or `from`/`to`), cut
//! at `at` when given; steps are aligned on the end of the window, so the last
//! step is the assessment time. The default step is the typical snapshot
//! interval.
//!
//! `$window` resolves to `max(4 × typical snapshot interval, 2 × step)`, rounded
//! up to a whole second: 20 s for 5 s live scrapes, 4 m for 1 m Prometheus data,
//! 1 m for 15 s captures. Four intervals keep at least three points in every
//! range (so `rate` survives one missed scrape); two steps make consecutive
//! steps overlap so no sample falls between windows. The instant-selector
//! lookback is the same range, so a target that stopped answering drops out
//! after one window instead of five minutes. Recorded signals
//! ([`super::recorded`]) give `$window` instead: the export's `--window`.

use std::collections::{BTreeMap, BTreeSet};

use super::load::RuleSet;
use super::model::{Across, Direction};
use super::report::{Availability, BaselineKind, Gap, GapKind, Report, SourceInfo};
use super::verdict::{self, median, AssessInput, BaselinePlan, BreakdownInput, SignalInput, Skip};
use crate::eval::seam::{LocalStore, QueryError, QueryResult, RangeQuery, SignalEvaluator};
use crate::eval::template;
use crate::source::{Dataset, Role, Target};
use crate::store::{Millis, Series};
use promql_parser::parser::Expr;

/// Default number of consecutive lit steps that make an onset.
pub const DEFAULT_DEBOUNCE: usize = 2;

/// Most steps one diagnosis evaluates; a longer window gets a larger step.
pub const MAX_STEPS: usize = 5000;

/// Where the baseline comes from.
#[derive(Clone, Copy, Debug, Default)]
pub enum BaselineSpec<'a> {
    /// The first quarter of the window (at least 2 steps; none below 6 steps).
    #[default]
    WindowStart,
    /// An explicit time range of the same data.
    Range { from: Millis, to: Millis },
    /// A separate (healthy) capture, evaluated over its own span.
    Dataset(&'a Dataset),
}

/// Settings of one diagnosis.
#[derive(Clone, Debug)]
pub struct Options<'a> {
    /// Assessment time (the walk and "lit at end"); default: end of the window.
    pub at: Option<Millis>,
    pub from: Option<Millis>,
    pub to: Option<Millis>,
    /// Default: the typical snapshot interval.
    pub step: Option<Millis>,
    pub baseline: BaselineSpec<'a>,
    /// Consecutive lit steps that make an onset (default 2).
    pub debounce: usize,
    /// `$window` as given (the window of recorded signals) instead of the one
    /// resolved from the data.
    pub window: Option<Millis>,
    /// Contributor breakdowns of the lit signals only (queried after the
    /// full window is judged, as the short windows are), instead of every
    /// evaluated signal's: recorded signals read no raw series otherwise.
    pub lazy_breakdowns: bool,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            at: None,
            from: None,
            to: None,
            step: None,
            baseline: BaselineSpec::WindowStart,
            debounce: DEFAULT_DEBOUNCE,
            window: None,
            lazy_breakdowns: false,
        }
    }
}

/// Why a diagnosis could not run at all.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EngineError {
    #[error("the data has no snapshots")]
    NoData,
    #[error("invalid window: {0}")]
    Window(String),
    #[error("invalid baseline ({what}): {message}")]
    Baseline { what: String, message: String },
}

/// The resolved time grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub steps: Vec<Millis>,
    pub step: Millis,
    /// The resolved `$window`.
    pub range: Millis,
    pub at_index: usize,
}

/// Resolves window, step, `$window` and the assessment time.
pub fn grid(data: &Dataset, opts: &Options) -> Result<(Grid, Vec<String>), EngineError> {
    let (dfrom, dto) = data.window().ok_or(EngineError::NoData)?;
    let mut warnings = Vec::new();
    let from = opts.from.unwrap_or(dfrom);
    let mut to = opts.to.unwrap_or(dto);
    if let Some(at) = opts.at {
        if at > dto {
            warnings.push(format!(
                "the assessment time {} is after the last snapshot; assessing at {}",
                crate::timefmt::format_time(at),
                crate::timefmt::format_time(dto)
            ));
        }
        if at < from {
            return Err(EngineError::Window(format!(
                "the assessment time {} is before the start of the window ({})",
                crate::timefmt::format_time(at),
                crate::timefmt::format_time(from)
            )));
        }
        to = to.min(at);
    }
    if to < from {
        return Err(EngineError::Window(format!(
            "the window ends ({}) before it starts ({})",
            crate::timefmt::format_time(to),
            crate::timefmt::format_time(from)
        )));
    }
    let interval = data.typical_interval();
    let mut step = match opts.step {
        Some(s) if s <= 0 => return Err(EngineError::Window(format!("step must be positive, got {s} ms"))),
        Some(s) => s,
        None => interval.unwrap_or(60_000),
    };
    let span = to - from;
    if span / step >= MAX_STEPS as i64 {
        let s = (span / (MAX_STEPS as i64 - 1)).max(1);
        warnings.push(format!(
            "the window has more than {MAX_STEPS} steps of {step} ms; using a step of {s} ms"
        ));
        step = s;
    }
    let mut steps = Vec::new();
    let mut t = to;
    while t >= from {
        steps.push(t);
        t -= step;
    }
    steps.reverse();
    let base = interval.unwrap_or(step);
    let range = match opts.window {
        Some(w) if w > 0 => w,
        _ => ((4 * base).max(2 * step) + 999) / 1000 * 1000,
    };
    let at_index = steps.len().saturating_sub(1);
    Ok((
        Grid {
            steps,
            step,
            range,
            at_index,
        },
        warnings,
    ))
}

/// Whether targets of `role` expose metric `name` (by family list, or by series
/// in the store).
fn exposed(data: &Dataset, role: Role, name: &str) -> bool {
    let fam = template::family_of(name);
    let has = |n: &str| {
        data.store
            .by_name(n)
            .any(|s| s.labels.get(template::ROLE_LABEL) == Some(role.as_str()))
    };
    // A histogram whose `_bucket` series were dropped (monitoring that keeps
    // `_sum` and `_count` only) still declares its family: its buckets are
    // not exposed when its `_count` is there without them.
    if name.ends_with("_bucket") && !has(name) && has(&format!("{fam}_count")) {
        return false;
    }
    if data
        .targets_with_role(role)
        .any(|t| t.families.contains(name) || t.families.contains(fam))
    {
        return true;
    }
    has(name)
}

/// Instance → values per step from an evaluation result; several series of one
/// instance reduce to the worst value (max, or min for `below` thresholds).
fn per_instance(series: &[Series], steps: &[Millis], below: bool) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut out: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    let index: BTreeMap<Millis, usize> = steps.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    for s in series {
        let inst = s.labels.get("instance").unwrap_or("(all)").to_string();
        let row = out.entry(inst).or_insert_with(|| vec![None; steps.len()]);
        for p in &s.samples {
            let Some(&i) = index.get(&p.t) else { continue };
            // NaN (nothing observed) is kept only when no series has a number.
            row[i] = Some(match row[i] {
                None => p.v,
                Some(o) if o.is_nan() => p.v,
                Some(_) if p.v.is_nan() => continue,
                Some(o) if below => o.min(p.v),
                Some(o) => o.max(p.v),
            });
        }
    }
    out
}

fn source_info(t: &Target, interval: Option<Millis>, from: Millis, to: Millis, range: Millis) -> SourceInfo {
    let mut restarts = Vec::new();
    for w in t.snapshots.windows(2) {
        if let (Some(a), Some(b)) = (w[0].process_start, w[1].process_start) {
            if (a - b).abs() > 0.5 {
                restarts.push(w[1].time);
            }
        }
    }
    let mut missing = Vec::new();
    let inside: Vec<Millis> = t
        .snapshots
        .iter()
        .map(|s| s.time)
        .filter(|x| *x >= from && *x <= to)
        .collect();
    // A failed scrape inside the window is a gap even when it is shorter than
    // two intervals; without an interval, failures alone show the gaps.
    let failed_in = |a: Millis, b: Millis| t.failures.iter().any(|&f| f > a && f < b);
    let gap = interval.map(|iv| iv.saturating_mul(2));
    let long = |a: Millis, b: Millis| gap.is_some_and(|g| b.saturating_sub(a) > g) || failed_in(a, b);
    match (inside.first(), inside.last()) {
        (Some(&first), Some(&last)) => {
            if long(from, first) && first > from {
                missing.push([from, first]);
            }
            for w in inside.windows(2) {
                if long(w[0], w[1]) {
                    missing.push([w[0], w[1]]);
                }
            }
            let failed_after = t.failures.iter().any(|&f| f > last && f <= to);
            if (gap.is_some_and(|g| to.saturating_sub(last) > g) || failed_after) && to > last {
                missing.push([last, to]);
            }
        }
        _ if interval.is_some() || !t.failures.is_empty() => missing.push([from, to]),
        _ => {}
    }
    SourceInfo {
        target: t.name.clone(),
        role: t.role.as_str().to_string(),
        role_reason: t.role_reason.clone(),
        version: t.version.clone(),
        time_source: serde_json::to_value(t.time_source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        snapshots: t.snapshots.len(),
        first: t.snapshots.first().map(|s| s.time),
        last: t.snapshots.last().map(|s| s.time),
        warmup: warmup(t, range).into_iter().map(|w| [w.from, w.to]).collect(),
        restarts,
        missing,
        failed_scrapes: t.failures.len(),
        failures: t.failures.clone(),
        last_attempt: t
            .snapshots
            .last()
            .map(|s| s.time)
            .into_iter()
            .chain(t.failures.iter().copied())
            .max(),
    }
}

/// A period of a target whose values are not judged.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WarmUp {
    from: Millis,
    to: Millis,
}

/// A target's warm-up periods: the first range window after a process start,
/// anchored at the first snapshot after it: a restart during the capture, or
/// a process that started within one window before its first snapshot. A
/// fresh process's first elections, cache fills and slow commits are not the
/// incident, and its first rate windows hold them. A process already running
/// when the capture starts has no warm-up: its first windows are exact
/// Prometheus rates over fewer samples, and single slow observations in them
/// are rejected by the signals' observation counts and persistence.
fn warmup(t: &Target, range: Millis) -> Vec<WarmUp> {
    let mut out = Vec::new();
    let Some(first) = t.snapshots.first() else {
        return out;
    };
    let fresh = first
        .process_start
        .is_some_and(|ps| (ps * 1000.0) as Millis >= first.time.saturating_sub(range));
    if fresh {
        out.push(WarmUp {
            from: first.time,
            to: first.time.saturating_add(range),
        });
    }
    for w in t.snapshots.windows(2) {
        if let (Some(a), Some(b)) = (w[0].process_start, w[1].process_start) {
            if (a - b).abs() > 0.5 {
                out.push(WarmUp {
                    from: w[1].time,
                    to: w[1].time.saturating_add(range),
                });
            }
        }
    }
    out
}

/// Marks the warm-up steps of every instance of `role` in `input`.
fn mark_warmup(input: &mut SignalInput, data: &Dataset, role: Role, steps: &[Millis], range: Millis) {
    for t in data.targets_with_role(role) {
        let w = warmup(t, range);
        if w.is_empty() || !input.values.contains_key(&t.name) {
            continue;
        }
        let skips = input
            .skips
            .entry(t.name.clone())
            .or_insert_with(|| vec![None; steps.len()]);
        for (i, &st) in steps.iter().enumerate() {
            if w.iter().any(|w| st >= w.from && st <= w.to) {
                skips[i] = Some(Skip::WarmUp);
            }
        }
    }
}

/// What signal evaluation needs besides the signal.
struct Ctx<'a> {
    data: &'a Dataset,
    eval: &'a dyn SignalEvaluator,
    steps: &'a [Millis],
    step: Millis,
    range: Millis,
    /// The shortest window that holds two scrapes, used to date onsets
    /// (`None`: no shorter window than `range`).
    short: Option<Millis>,
}

/// A signal whose expression is chosen and instantiated, waiting for its values.
struct Planned {
    alternative: usize,
    expr: Expr,
    text: String,
    below: bool,
    /// The instantiated observation count and its minimum.
    observations: Option<(Expr, f64)>,
    /// The expression and its observation count over the short window, for
    /// signals with a range.
    short: Option<(Expr, Option<Expr>)>,
    /// Judged in warm-up too ([`SignalDef::judge_warmup`]).
    judge_warmup: bool,
}

/// The shortest window that still holds two scrapes (twice the typical
/// interval, at least one step), when it is shorter than `range`.
fn short_window(data: &Dataset, step: Millis, range: Millis) -> Option<Millis> {
    let iv = data.typical_interval()?;
    let w = (2 * iv).max(step);
    let w = (w + 999) / 1000 * 1000;
    (w < range).then_some(w)
}

/// The first of the signal's expressions whose metrics (its optional ones
/// aside) are all exposed by targets of its role.
fn chosen_read(sig: &crate::rules::load::Signal, data: &Dataset) -> Option<usize> {
    let role = sig.def.role.role();
    let optional: BTreeSet<&str> = sig.def.optional_metrics.iter().map(|s| s.as_str()).collect();
    sig.reads.iter().position(|r| {
        r.metrics
            .iter()
            .filter(|m| !optional.contains(m.as_str()) && !optional.contains(template::family_of(m)))
            .all(|m| exposed(data, role, m))
    })
}

/// The rule set with the mean form of every histogram signal whose buckets
/// are not exposed while its `_sum` and `_count` are (monitoring that drops
/// `_bucket` series), and a warning naming them.
fn on_means(rules: &RuleSet, data: &Dataset) -> (RuleSet, Option<String>) {
    let (r, replaced) =
        rules.on_means(|s, mean| chosen_read(s, data).is_none() && chosen_read(mean, data).is_some());
    let warning = (!replaced.is_empty()).then(|| {
        format!(
            "histogram buckets not exposed: {} judged on the mean (rate of _sum / rate of _count) against its baseline and an absolute floor ({})",
            if replaced.len() == 1 { "1 latency signal is" } else { "these latency signals are" },
            replaced.join(", ")
        )
    });
    (r, warning)
}

/// Picks the expression and instantiates it, or says why the signal cannot be
/// evaluated.
fn plan_signal(rules: &RuleSet, k: usize, ctx: &Ctx) -> Result<Planned, Box<SignalInput>> {
    let sig = &rules.signals[k];
    let role = sig.def.role.role();
    let targets: Vec<&Target> = ctx.data.targets_with_role(role).collect();
    if targets.is_empty() {
        return Err(Box::new(SignalInput::unavailable(
            Availability::RoleAbsent,
            format!("no {} targets in the data", role.as_str()),
        )));
    }
    let optional: BTreeSet<&str> = sig.def.optional_metrics.iter().map(|s| s.as_str()).collect();
    let Some(i) = chosen_read(sig, ctx.data) else {
        let tried: Vec<String> = sig
            .reads
            .iter()
            .map(|r| {
                let names: Vec<&str> = r
                    .metrics
                    .iter()
                    .filter(|m| {
                        !optional.contains(m.as_str())
                            && !optional.contains(template::family_of(m))
                            && !exposed(ctx.data, role, m)
                    })
                    .map(|m| m.as_str())
                    .collect();
                names.join(" + ")
            })
            .collect();
        return Err(Box::new(SignalInput::unavailable(
            Availability::NotExposed,
            format!(
                "`{}` not exposed by this version/target (missing: {})",
                sig.def.id,
                tried.join("; or ")
            ),
        )));
    };
    let needs_series = sig.reads[i].needs_series;
    let max_snaps = targets.iter().map(|t| t.snapshots.len()).max().unwrap_or(0);
    if needs_series && (ctx.steps.len() < 2 || max_snaps < 2) {
        return Err(Box::new(SignalInput {
            alternative: Some(i),
            ..SignalInput::unavailable(
                Availability::NeedsTimeSeries,
                format!("`{}` needs a time series (at least 2 snapshots)", sig.def.id),
            )
        }));
    }
    let expr = match ctx.eval.instantiate(&sig.exprs[i], ctx.range, role) {
        Ok(e) => e,
        Err(e) => {
            return Err(Box::new(SignalInput {
                alternative: Some(i),
                ..SignalInput::unavailable(Availability::Error, format!("`{}`: {e}", sig.def.id))
            }))
        }
    };
    let text = expr.to_string();
    if ctx.steps.is_empty() {
        return Err(Box::new(SignalInput::unavailable(
            Availability::Error,
            "empty window",
        )));
    }
    let below = sig.def.threshold.below.is_some()
        || sig
            .def
            .threshold
            .relative
            .as_ref()
            .is_some_and(|r| r.direction == Direction::Below);
    let short = match ctx.short {
        Some(w) if needs_series => {
            let e = ctx.eval.instantiate(&sig.exprs[i], w, role).ok();
            let o = sig
                .observations
                .as_ref()
                .and_then(|o| ctx.eval.instantiate(&o.expr, w, role).ok());
            e.map(|e| (e, o))
        }
        _ => None,
    };
    let observations = match &sig.observations {
        None => None,
        Some(o) => match ctx.eval.instantiate(&o.expr, ctx.range, role) {
            Ok(e) => Some((e, o.min)),
            Err(e) => {
                return Err(Box::new(SignalInput {
                    alternative: Some(i),
                    ..SignalInput::unavailable(
                        Availability::Error,
                        format!("`{}` observations: {e}", sig.def.id),
                    )
                }))
            }
        },
    };
    Ok(Planned {
        judge_warmup: sig.def.judge_warmup,
        alternative: i,
        expr,
        text,
        below,
        observations,
        short,
    })
}

/// What a query of a signal batch is for.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Values,
    Count,
    ShortValues,
    ShortCount,
}

/// The short-window input of the batch's `j`-th signal from its answers.
fn short_input(
    results: &mut BTreeMap<(usize, Part), QueryResult>,
    j: usize,
    p: &Planned,
    role: Role,
    ctx: &Ctx,
) -> Option<SignalInput> {
    let Some(Ok(sv)) = results.remove(&(j, Part::ShortValues)) else {
        return None;
    };
    let mut short = SignalInput::evaluated(per_instance(&sv, ctx.steps, p.below));
    if !p.judge_warmup {
        mark_warmup(&mut short, ctx.data, role, ctx.steps, ctx.range);
    }
    if let Some((_, min)) = &p.observations {
        let counts = match results.remove(&(j, Part::ShortCount)) {
            Some(Ok(c)) => per_instance(&c, ctx.steps, false),
            _ => BTreeMap::new(),
        };
        mark_few_observations(&mut short, &counts, *min, ctx.steps.len());
    }
    Some(short)
}

/// Picks the expressions of the signals `ks` and evaluates them as one batch;
/// returns the inputs for the pure part, in the order of `ks`. The short
/// windows are not evaluated: see [`eval_shorts`].
fn eval_signals(rules: &RuleSet, ks: &[usize], ctx: &Ctx) -> Vec<SignalInput> {
    eval_batch(rules, ks, ctx, false)
}

/// Evaluates the short window of the signals `ks` as one batch into
/// `signals` (indexed by signal). Only signals the full window lit need it:
/// the short window dates back runs the full window confirmed and nothing
/// else, so skipping it elsewhere leaves every verdict as it is and spares
/// the source about half of the queries' work on a healthy cluster.
fn eval_shorts(rules: &RuleSet, ks: &[usize], ctx: &Ctx, signals: &mut [SignalInput]) {
    for (&k, short) in ks.iter().zip(eval_batch(rules, ks, ctx, true)) {
        if let Some(input) = signals.get_mut(k) {
            if input.availability == Availability::Evaluated && short.availability == Availability::Evaluated
            {
                input.short = short.short;
            }
        }
    }
}

/// [`eval_signals`], or with `shorts_only` the short windows alone (each
/// input's `short`; its own values are left empty).
fn eval_batch(rules: &RuleSet, ks: &[usize], ctx: &Ctx, shorts_only: bool) -> Vec<SignalInput> {
    let plans: Vec<Result<Planned, Box<SignalInput>>> =
        ks.iter().map(|&k| plan_signal(rules, k, ctx)).collect();
    let (Some(&start), Some(&end)) = (ctx.steps.first(), ctx.steps.last()) else {
        return plans
            .into_iter()
            .map(|p| match p {
                Err(unavailable) => *unavailable,
                Ok(_) => SignalInput::unavailable(Availability::Error, "empty window"),
            })
            .collect();
    };
    let mut results: BTreeMap<(usize, Part), QueryResult> = {
        let mut tags: Vec<(usize, Part)> = Vec::new();
        let mut queries: Vec<RangeQuery> = Vec::new();
        for (j, (&k, p)) in ks.iter().zip(&plans).enumerate() {
            let Ok(p) = p else { continue };
            let mut add = |part: Part, expr, range| {
                tags.push((j, part));
                queries.push(RangeQuery {
                    signal: &rules.signals[k].def.id,
                    expr,
                    start,
                    end,
                    step: ctx.step,
                    range,
                });
            };
            if shorts_only {
                if let (Some((e, c)), Some(w)) = (&p.short, ctx.short) {
                    add(Part::ShortValues, e, w);
                    if let Some(c) = c {
                        add(Part::ShortCount, c, w);
                    }
                }
            } else {
                add(Part::Values, &p.expr, ctx.range);
                if let Some((e, _)) = &p.observations {
                    add(Part::Count, e, ctx.range);
                }
            }
        }
        tags.into_iter()
            .zip(ctx.eval.range(&ctx.data.store, &queries))
            .collect()
    };
    let role_of = |k: usize| rules.signals[k].def.role.role();
    ks.iter()
        .zip(plans)
        .enumerate()
        .map(|(j, (&k, p))| {
            let p = match p {
                Ok(p) => p,
                Err(unavailable) => return *unavailable,
            };
            let id = &rules.signals[k].def.id;
            if shorts_only {
                let mut input = SignalInput::evaluated(BTreeMap::new());
                input.short = short_input(&mut results, j, &p, role_of(k), ctx).map(Box::new);
                return input;
            }
            let series = results
                .remove(&(j, Part::Values))
                .unwrap_or(Err(QueryError::NotQueried));
            let series = match series {
                Ok(s) => s,
                Err(e) => {
                    return SignalInput {
                        availability: Availability::Error,
                        alternative: Some(p.alternative),
                        expression: Some(p.text),
                        note: Some(format!("`{id}`: {e}")),
                        ..SignalInput::unavailable(Availability::Error, "")
                    }
                }
            };
            let mut input = SignalInput {
                alternative: Some(p.alternative),
                expression: Some(p.text),
                note: (p.alternative > 0).then(|| {
                    format!(
                        "using alternative {}: the metrics of earlier expressions are not exposed",
                        p.alternative
                    )
                }),
                ..SignalInput::evaluated(per_instance(&series, ctx.steps, p.below))
            };
            if !p.judge_warmup {
                mark_warmup(&mut input, ctx.data, role_of(k), ctx.steps, ctx.range);
            }
            if let Some((_, min)) = &p.observations {
                match results.remove(&(j, Part::Count)) {
                    Some(Ok(c)) => {
                        mark_few_observations(&mut input, &per_instance(&c, ctx.steps, false), *min, ctx.steps.len());
                    }
                    other => {
                        let e = match other {
                            Some(Err(e)) => e,
                            _ => QueryError::NotQueried,
                        };
                        input.note = Some(format!(
                            "`{id}`: its observation count could not be evaluated ({e}); values are not judged"
                        ));
                        mark_few_observations(&mut input, &BTreeMap::new(), *min, ctx.steps.len());
                    }
                }
            }
            input
        })
        .collect()
}

/// Evaluates the contributor breakdown of every evaluated signal that has one:
/// the first expression whose metrics the role's targets expose, summed over
/// instances per label set of `by`. Labels no series carries are reported as
/// absent in this version instead of naming an empty contributor.
fn eval_breakdowns(rules: &RuleSet, signals: &mut [SignalInput], ctx: &Ctx, only: Option<&[usize]>) {
    let (Some(&start), Some(&end)) = (ctx.steps.first(), ctx.steps.last()) else {
        return;
    };
    let mut planned: Vec<(usize, Expr)> = Vec::new();
    for (k, sig) in rules.signals.iter().enumerate() {
        if only.is_some_and(|ks| !ks.contains(&k)) {
            continue;
        }
        let Some(b) = &sig.breakdown else { continue };
        let Some(input) = signals.get_mut(k) else { continue };
        if input.availability != Availability::Evaluated {
            continue;
        }
        let role = sig.def.role.role();
        let optional: BTreeSet<&str> = sig.def.optional_metrics.iter().map(|s| s.as_str()).collect();
        let chosen = b.reads.iter().position(|r| {
            r.metrics
                .iter()
                .filter(|m| !optional.contains(m.as_str()) && !optional.contains(template::family_of(m)))
                .all(|m| exposed(ctx.data, role, m))
        });
        let note = |msg: String| BreakdownInput {
            by: b.by.clone(),
            groups: BTreeMap::new(),
            note: Some(msg),
        };
        match chosen.map(|i| (i, ctx.eval.instantiate(&b.exprs[i], ctx.range, role))) {
            None => {
                input.breakdown = Some(note(format!(
                    "contributors by {} not exposed by this version/target",
                    b.by.join(", ")
                )));
            }
            Some((_, Err(e))) => input.breakdown = Some(note(format!("contributors: {e}"))),
            Some((_, Ok(e))) => planned.push((k, e)),
        }
    }
    let queries: Vec<RangeQuery> = planned
        .iter()
        .map(|(k, e)| RangeQuery {
            signal: &rules.signals[*k].def.id,
            expr: e,
            start,
            end,
            step: ctx.step,
            range: ctx.range,
        })
        .collect();
    let results = ctx.eval.range(&ctx.data.store, &queries);
    let index: BTreeMap<Millis, usize> = ctx.steps.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    for ((k, _), res) in planned.iter().zip(results) {
        let Some(b) = &rules.signals[*k].breakdown else {
            continue;
        };
        let mut out = BreakdownInput {
            by: b.by.clone(),
            ..BreakdownInput::default()
        };
        match res {
            Err(e) => out.note = Some(format!("contributors: {e}")),
            Ok(series) => {
                let mut seen: BTreeSet<&str> = BTreeSet::new();
                for s in &series {
                    let key: Vec<String> =
                        b.by.iter()
                            .map(|l| {
                                let v = s.labels.get(l).unwrap_or("");
                                if !v.is_empty() {
                                    seen.insert(l.as_str());
                                }
                                v.to_string()
                            })
                            .collect();
                    let row = out
                        .groups
                        .entry(key)
                        .or_insert_with(|| vec![None; ctx.steps.len()]);
                    for p in &s.samples {
                        let Some(&i) = index.get(&p.t) else { continue };
                        if p.v.is_nan() {
                            continue;
                        }
                        row[i] = Some(match (row[i], b.across) {
                            (None, _) => p.v,
                            (Some(o), Across::Sum) => o + p.v,
                            (Some(o), Across::Max) => o.max(p.v),
                        });
                    }
                }
                let absent: Vec<&str> =
                    b.by.iter()
                        .map(|l| l.as_str())
                        .filter(|l| !seen.contains(l))
                        .collect();
                if !series.is_empty() && !absent.is_empty() {
                    out.note = Some(format!(
                        "label(s) {} absent in this version: contributors are not named by them",
                        absent.join(", ")
                    ));
                }
            }
        }
        signals[*k].breakdown = Some(out);
    }
}

/// Marks the steps whose value rests on fewer than `min` observations (or on
/// an unknown number) as not judged. No observation at all is not "too few":
/// the value is then NaN (nothing was observed), which is judged unlit.
fn mark_few_observations(
    input: &mut SignalInput,
    counts: &BTreeMap<String, Vec<Option<f64>>>,
    min: f64,
    nsteps: usize,
) {
    input.observations = counts.clone();
    for (inst, vals) in &input.values {
        let skips = input
            .skips
            .entry(inst.clone())
            .or_insert_with(|| vec![None; nsteps]);
        for (i, v) in vals.iter().enumerate() {
            if v.is_none() || skips[i].is_some() {
                continue;
            }
            let n = counts.get(inst).and_then(|c| c.get(i).copied().flatten());
            let nothing = n == Some(0.0) && v.is_some_and(f64::is_nan);
            if !nothing && !n.is_some_and(|n| n >= min) {
                skips[i] = Some(Skip::FewObservations);
            }
        }
    }
}

/// Evaluates the whole rule set over `data` and assesses it.
pub fn diagnose(rules: &RuleSet, data: &Dataset, opts: &Options) -> Result<Report, EngineError> {
    diagnose_with(rules, data, &LocalStore, opts)
}

/// [`diagnose`] with the signal expressions evaluated by `evaluator`; `data`
/// gives the targets (roles, families, snapshot times) and, for [`LocalStore`],
/// the series. A [`BaselineSpec::Dataset`] is always evaluated locally.
pub fn diagnose_with(
    rules: &RuleSet,
    data: &Dataset,
    evaluator: &dyn SignalEvaluator,
    opts: &Options,
) -> Result<Report, EngineError> {
    let (g, mut warnings) = grid(data, opts)?;
    // A single snapshot has no time series: signals with a `snapshot:` form are
    // read since the process started instead.
    let single;
    let rules = if data.typical_interval().is_none() {
        let (r, replaced) = rules.for_single_snapshot();
        if !replaced.is_empty() {
            warnings.push(format!(
                "single snapshot: {} read since the process started ({}); the verdict describes the process's history, not its current rate",
                if replaced.len() == 1 { "1 signal is" } else { "these signals are" },
                replaced.join(", ")
            ));
        }
        single = r;
        &single
    } else {
        rules
    };
    // No buckets: latency judged on the histograms' means.
    let meaned;
    let rules = match on_means(rules, data) {
        (r, Some(w)) if data.typical_interval().is_some() => {
            warnings.push(w);
            meaned = r;
            &meaned
        }
        _ => rules,
    };
    let ctx = Ctx {
        data,
        eval: evaluator,
        steps: &g.steps,
        step: g.step,
        range: g.range,
        short: short_window(data, g.step, g.range),
    };
    let all: Vec<usize> = (0..rules.signals.len()).collect();
    let mut signals: Vec<SignalInput> = eval_signals(rules, &all, &ctx);
    if !opts.lazy_breakdowns {
        eval_breakdowns(rules, &mut signals, &ctx, None);
    }
    note_means(rules, &mut signals);
    let plan = baseline_plan(rules, data, evaluator, opts, &g, &mut signals, &mut warnings)?;
    let sources = sources_of(data, &g, &mut warnings);
    let gaps = availability_gaps(rules, &signals, data);
    let mut input = AssessInput {
        steps: g.steps.clone(),
        step: g.step,
        at_index: g.at_index,
        range: g.range,
        debounce: opts.debounce,
        baseline: plan,
        signals,
        sources,
        warnings,
        gaps,
    };
    refine_lit(rules, &ctx, opts, &mut input);
    let mut report = verdict::assess(rules, &input);
    report.audit = data.audit.clone();
    report.logs = data.logs.clone();
    verdict::loglines::fill(rules, &mut report, g.range);
    Ok(report)
}

/// Signals judged on a histogram's mean say so.
fn note_means(rules: &RuleSet, signals: &mut [SignalInput]) {
    for (s, sig) in signals.iter_mut().zip(&rules.signals) {
        if sig.on_mean && s.availability == Availability::Evaluated {
            let note = "judged on the mean (no buckets): rate of _sum / rate of _count, against its baseline and an absolute floor";
            s.note = Some(match s.note.take() {
                Some(n) => format!("{note}; {n}"),
                None => note.to_string(),
            });
        }
    }
}

/// The baseline: the window's start, or medians evaluated over an explicit
/// range or a separate capture (stored in `signals`).
fn baseline_plan(
    rules: &RuleSet,
    data: &Dataset,
    evaluator: &dyn SignalEvaluator,
    opts: &Options,
    g: &Grid,
    signals: &mut [SignalInput],
    warnings: &mut Vec<String>,
) -> Result<BaselinePlan, EngineError> {
    Ok(match opts.baseline {
        BaselineSpec::WindowStart => BaselinePlan::window_start(&g.steps),
        BaselineSpec::Range { from, to } => {
            let bdata = data;
            let bopts = Options {
                from: Some(from),
                to: Some(to),
                step: Some(g.step),
                ..Options::default()
            };
            external_baseline(
                rules,
                bdata,
                evaluator,
                &bopts,
                signals,
                warnings,
                BaselineKind::Range,
                "explicit range",
            )?
        }
        BaselineSpec::Dataset(b) => {
            let bopts = Options::default();
            external_baseline(
                rules,
                b,
                &LocalStore,
                &bopts,
                signals,
                warnings,
                BaselineKind::Dataset,
                "separate capture",
            )?
        }
    })
}

/// Each target's sources info; restarts, missing snapshots and the data's own
/// warnings become warnings.
fn sources_of(data: &Dataset, g: &Grid, warnings: &mut Vec<String>) -> Vec<SourceInfo> {
    let interval = data.typical_interval();
    let (from, to) = (
        g.steps.first().copied().unwrap_or(0),
        g.steps.last().copied().unwrap_or(0),
    );
    let sources: Vec<SourceInfo> = data
        .targets
        .iter()
        .map(|t| source_info(t, interval, from, to, g.range))
        .collect();
    for s in &sources {
        for r in &s.restarts {
            warnings.push(format!(
                "{} ({}) restarted at {} (process_start_time_seconds changed): counters reset there",
                s.target,
                s.role,
                crate::timefmt::format_time(*r)
            ));
        }
        for [a, b] in &s.missing {
            warnings.push(format!(
                "{} ({}) has no snapshots from {} to {}: unreachable, down, or not captured",
                s.target,
                s.role,
                crate::timefmt::format_time(*a),
                crate::timefmt::format_time(*b)
            ));
        }
    }
    for w in &data.warnings {
        warnings.push(format!("{}: {}", w.origin, w.message));
    }
    sources
}

/// What could not be evaluated: signals not exposed or failing, roles absent,
/// rates that need a time series, and what the audit logs lacked.
fn availability_gaps(rules: &RuleSet, signals: &[SignalInput], data: &Dataset) -> Vec<Gap> {
    let mut gaps = Vec::new();
    let mut roles_absent = BTreeSet::new();
    let mut needs_series = Vec::new();
    for (k, s) in signals.iter().enumerate() {
        let id = &rules.signals[k].def.id;
        match s.availability {
            // Audit logs, logs and node metrics are optional evidence:
            // without them nothing of the tree goes unchecked that etcd's and
            // the apiserver's metrics cover.
            Availability::RoleAbsent
                if matches!(
                    rules.signals[k].def.role.role(),
                    Role::Audit | Role::Logs | Role::Node
                ) => {}
            Availability::RoleAbsent => {
                roles_absent.insert(rules.signals[k].def.role.as_str());
            }
            Availability::NotExposed => gaps.push(Gap {
                kind: GapKind::NotExposed,
                subject: id.clone(),
                message: s.note.clone().unwrap_or_default(),
            }),
            Availability::NeedsTimeSeries => needs_series.push(id.clone()),
            Availability::Error => gaps.push(Gap {
                kind: GapKind::EvaluationError,
                subject: id.clone(),
                message: s.note.clone().unwrap_or_default(),
            }),
            Availability::Evaluated => {}
        }
    }
    for r in roles_absent {
        gaps.push(Gap {
            kind: GapKind::RoleAbsent,
            subject: r.to_string(),
            message: format!("no {r} targets in the data: the axes read from {r} metrics are not checked"),
        });
    }
    if !needs_series.is_empty() {
        gaps.push(Gap {
            kind: GapKind::NeedsTimeSeries,
            subject: "time series".into(),
            message: format!(
                "the data has a single snapshot: {} rate signals need a time series ({}); gauges and since-start ratios were evaluated, and onsets need a time series",
                needs_series.len(),
                needs_series.join(", ")
            ),
        });
    }

    if let Some(a) = &data.audit {
        for m in &a.gaps {
            gaps.push(Gap {
                kind: GapKind::NotExposed,
                subject: "audit".into(),
                message: m.clone(),
            });
        }
    }
    gaps
}

/// Short windows (and lazy breakdowns) for the signals the full window lit,
/// and only those.
fn refine_lit(rules: &RuleSet, ctx: &Ctx, opts: &Options, input: &mut AssessInput) {
    if ctx.short.is_some() || opts.lazy_breakdowns {
        let lit = verdict::lit_signals(rules, input);
        if !lit.is_empty() && ctx.short.is_some() {
            eval_shorts(rules, &lit, ctx, &mut input.signals);
        }
        if !lit.is_empty() && opts.lazy_breakdowns {
            eval_breakdowns(rules, &mut input.signals, ctx, Some(&lit));
        }
    }
}

/// Evaluates the chosen expressions over a baseline range or dataset and stores
/// per-instance medians in `signals`.
#[allow(clippy::too_many_arguments)]
fn external_baseline(
    rules: &RuleSet,
    bdata: &Dataset,
    evaluator: &dyn SignalEvaluator,
    bopts: &Options,
    signals: &mut [SignalInput],
    warnings: &mut Vec<String>,
    kind: BaselineKind,
    what: &str,
) -> Result<BaselinePlan, EngineError> {
    let (bg, _) = grid(bdata, bopts).map_err(|e| EngineError::Baseline {
        what: what.to_string(),
        message: match e {
            EngineError::Window(m) => m,
            EngineError::NoData => "it has no snapshots".to_string(),
            other => other.to_string(),
        },
    })?;
    let bctx = Ctx {
        data: bdata,
        eval: evaluator,
        steps: &bg.steps,
        step: bg.step,
        range: bg.range,
        short: None,
    };
    let mut missing = Vec::new();
    let wanted: Vec<usize> = signals
        .iter()
        .enumerate()
        .filter(|(k, s)| {
            s.availability == Availability::Evaluated && rules.signals[*k].def.threshold.relative.is_some()
        })
        .map(|(k, _)| k)
        .collect();
    let evaluated = eval_signals(rules, &wanted, &bctx);
    for (&k, b) in wanted.iter().zip(evaluated) {
        let s = &mut signals[k];
        if b.availability != Availability::Evaluated || b.alternative != s.alternative {
            missing.push(rules.signals[k].def.id.clone());
            continue;
        }
        let m: BTreeMap<String, f64> = b
            .values
            .into_iter()
            .filter_map(|(inst, v)| median(v.into_iter().flatten().collect()).map(|m| (inst, m)))
            .collect();
        if m.is_empty() {
            missing.push(rules.signals[k].def.id.clone());
        }
        s.baseline = Some(m);
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "the baseline ({what}) has no values for {}: only their absolute thresholds apply",
            missing.join(", ")
        ));
    }
    Ok(BaselinePlan {
        kind,
        steps: None,
        from: bg.steps.first().copied(),
        to: bg.steps.last().copied(),
        description: format!("median per instance over the {what} ({} steps)", bg.steps.len()),
    })
}
