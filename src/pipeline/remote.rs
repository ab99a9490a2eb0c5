//! The Prometheus paths of the pipeline: read the targets from `up`, judge
//! with the remote PromQL engine (audit signals in memory), and a fleet
//! judged shard by shard from shared queries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{FleetOutcome, Progress};
use crate::cli::ReportFormat;
use crate::error::CliError;
use crate::eval::seam::LocalRole;
use crate::plan::{Fleet, Plan, PromSource};
use crate::report::fleet::{Body, Entry};
use crate::rules::engine::{self, Options};
use crate::rules::recorded::{self, Choice, Expected, Found, RecordedEval};
use crate::rules::report::{GapKind, Report};
use crate::rules::RuleSet;
use crate::source::prometheus::Prometheus;
use crate::source::{Dataset, Role};
use crate::store::Millis;
use crate::timefmt::format_duration;
use crate::timefmt::format_time;

/// Connects the source, warning when the server's identity is not checked.
pub fn connect(source: &PromSource, progress: &mut dyn Progress) -> Result<Prometheus, CliError> {
    let prom = Prometheus::new(source.config.clone())?;
    if let Some(w) = insecure_warning(source, &prom) {
        progress.line(&format!("warning: {w}"));
    }
    Ok(prom)
}

/// The warning that TLS verification of the Prometheus server is off, when it is.
pub fn insecure_warning(source: &PromSource, prom: &Prometheus) -> Option<String> {
    (source.insecure() && prom.url().starts_with("https://")).then(|| {
        format!(
            "TLS verification is OFF for {} (--prometheus-insecure-skip-tls-verify): its identity is not checked, and the credentials go to whoever answers",
            prom.url()
        )
    })
}

/// The targets of every role in the window, with the source's warnings.
pub(super) fn read(
    prom: &Prometheus,
    opts: &Options,
    progress: &mut dyn Progress,
) -> Result<Dataset, CliError> {
    let (from, to) = bounds(opts);
    let ds = prom.dataset(from, to, opts.step)?;
    super::warn_sources(progress, &ds.warnings);
    Ok(ds)
}

/// The window of resolved remote options.
fn bounds(opts: &Options) -> (i64, i64) {
    (opts.from.unwrap_or_default(), opts.to.unwrap_or_default())
}

/// Judges a dataset read from Prometheus: the signals are evaluated by the
/// remote engine (audit signals in memory); signals that could not be
/// queried become gaps, and nothing answered at all is unusable data (exit 3).
/// The connected source of one diagnosis.
pub(super) struct Remote<'a> {
    pub prom: &'a Prometheus,
    /// The warning that TLS verification is off, when it is.
    pub insecure: Option<String>,
    /// Whether recorded signals are read (`--prometheus-recorded auto`).
    pub recorded: bool,
}

pub(super) fn judge(
    rules: &RuleSet,
    ds: &Dataset,
    remote: Remote<'_>,
    opts: &Options,
    progress: &mut dyn Progress,
) -> Result<Report, CliError> {
    let Remote {
        prom,
        insecure,
        recorded: read_recorded,
    } = remote;
    let (from, to) = bounds(opts);
    if ds.targets.is_empty() {
        return Err(CliError::data(format!(
            "no target of any role in {} from {} to {}: no `up` series match the role selectors",
            prom.url(),
            format_time(from),
            format_time(to)
        )));
    }
    let routed = LocalRole::new(prom, Role::Audit);
    let mut notes = Vec::new();
    let by = single_by(prom);
    let rec = read_recorded
        .then(|| Recorded::detect(rules, prom, &by, (from, to), ds.typical_interval(), &mut notes))
        .flatten();
    let choice = rec.as_ref().map(|r| r.choose(ds, "", prom.extra_matchers()));
    let mut opts = opts.clone();
    let recorded_eval = match (&rec, &choice) {
        (Some(r), Some(c)) if c.any() => {
            opts.window = Some(r.expected.window());
            opts.lazy_breakdowns = true;
            Some(RecordedEval::new(&routed, prom, c))
        }
        _ => None,
    };
    let eval: &dyn crate::eval::seam::SignalEvaluator = match &recorded_eval {
        Some(e) => e,
        None => &routed,
    };
    let mut report = with_query_progress(prom, None, progress.bars(), || {
        engine::diagnose_with(rules, ds, eval, &opts)
    })?;
    let failed = prom_outcome(prom)?;
    report.warnings.extend(notes);
    if let Some(c) = choice {
        report.warnings.push(c.paths.line());
        report.recorded = Some(c.paths);
    }
    report.warnings.extend(insecure);
    report.warnings.extend(prom.take_warnings());
    if failed > 0 {
        // A failed query over the short (onset-dating) window costs only the
        // dating; the signals that could not be evaluated are the gaps.
        let signals = report
            .gaps
            .iter()
            .filter(|g| g.kind == GapKind::EvaluationError)
            .count();
        report.warnings.push(format!(
            "{failed} queries to Prometheus failed ({signals} signal(s) not evaluated); their axes are listed under what could not be checked"
        ));
    }
    Ok(report)
}

/// The fleet labels recordings of a single diagnosis may be kept by: none,
/// or the label of an equality `--selector` (`{cluster="prod"}` reads the
/// recordings exported with `--by cluster`).
fn single_by(prom: &Prometheus) -> Vec<Option<String>> {
    let mut by = vec![None];
    by.extend(
        prom.extra_matchers()
            .iter()
            .filter(|m| matches!(m.op, promql_parser::label::MatchOp::Equal))
            .map(|m| Some(m.name.clone())),
    );
    by
}

/// Recorded signals found in the source (`crate::rules::recorded`).
struct Recorded {
    found: Found,
    expected: Expected,
}

impl Recorded {
    /// Detects the recorded signals over `[from, to]` (per value of the
    /// fleet label when `by` names one); `None` when there are none or they
    /// cannot be used, with a note saying why in the second case.
    fn detect(
        rules: &RuleSet,
        prom: &Prometheus,
        by: &[Option<String>],
        (from, to): (Millis, Millis),
        interval: Option<Millis>,
        notes: &mut Vec<String>,
    ) -> Option<Recorded> {
        let fleet = by.first().and_then(|b| b.as_deref());
        let found = match recorded::detect(prom, fleet, from, to) {
            Ok(f) => f,
            Err(e) => {
                notes.push(format!(
                    "recorded signals could not be looked up ({e}): every signal is read from its raw expression"
                ));
                return None;
            }
        };
        let window = found.window()?;
        let others = found.other_windows(window);
        if !others.is_empty() {
            let list: Vec<String> = others.iter().map(|w| format_duration(*w)).collect();
            notes.push(format!(
                "recorded signals over {} are not read: the diagnosis reads those over {}",
                list.join(", "),
                format_duration(window)
            ));
        }
        if let Some(iv) = interval.filter(|iv| window < 2 * iv) {
            notes.push(format!(
                "recorded signals over {} are not read: the window holds fewer than two scrapes of {}",
                format_duration(window),
                format_duration(iv)
            ));
            return None;
        }
        match Expected::new(rules, prom, window, by) {
            Ok(expected) => Some(Recorded { found, expected }),
            Err(e) => {
                notes.push(format!("recorded signals are not read: {e}"));
                None
            }
        }
    }

    /// What `cluster` (`""` without a fleet label) reads from recordings:
    /// those that cover its data from one recorded window after it begins.
    fn choose(&self, ds: &Dataset, cluster: &str, own: &[promql_parser::label::Matcher]) -> Choice {
        let start = ds.window().map_or(Millis::MIN / 4, |(a, _)| a);
        let since = start + 2 * self.expected.window();
        let roles = ds.targets.iter().map(|t| t.role).collect();
        self.expected.choose(&self.found, cluster, (since, &roles), own)
    }
}

/// What each cluster's report is kept as: the fleet's output format.
fn body(format: ReportFormat) -> Body {
    match format {
        ReportFormat::Json => Body::Json,
        ReportFormat::Table | ReportFormat::Wide => Body::Row,
        ReportFormat::Html => Body::Html,
        ReportFormat::Markdown => Body::Markdown,
    }
}

/// Runs `f` with a progress bar of the range requests to `prom` on stderr
/// (drawn only when `bars` and stderr is a terminal; cleared at the end).
fn with_query_progress<T>(
    prom: &Prometheus,
    shards: Option<(&AtomicUsize, usize)>,
    bars: bool,
    f: impl FnOnce() -> T,
) -> T {
    use std::sync::atomic::AtomicBool;
    if !bars {
        return f();
    }
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} querying Prometheus [{bar:30}] {pos}/{len} range requests{msg}",
    ) {
        bar.set_style(style);
    }
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let (n, total) = prom.progress();
                bar.set_length(total as u64);
                bar.set_position(n as u64);
                if let Some((k, of)) = shards.filter(|(_, of)| *of > 1) {
                    bar.set_message(format!(" (shard {}/{of})", k.load(Ordering::Relaxed)));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    r
}

/// The queries to Prometheus that failed so far; an error when none was
/// answered at all (unusable data, not a healthy cluster).
fn prom_outcome(prom: &Prometheus) -> Result<usize, CliError> {
    let (answered, failed) = prom.outcome();
    if answered == 0 {
        if let Some(first) = failed.first() {
            return Err(CliError::data(format!(
                "no signal could be queried from Prometheus ({} failed); the first error: {first}",
                failed.len()
            )));
        }
    }
    Ok(failed.len())
}

/// A fleet: every value of the label judged as its own control plane from
/// the same queries (see [`crate::source::prometheus::fleet`]), shard by
/// shard.
pub(super) fn fleet(
    plan: &Plan,
    f: &Fleet,
    rules: &RuleSet,
    progress: &mut dyn Progress,
) -> Result<FleetOutcome, CliError> {
    let label = f.label.as_str();
    let prom = connect(&f.source, progress)?;
    let mut opts = plan.remote_options()?;
    let (from, to) = bounds(&opts);
    let data = prom.fleet_datasets(from, to, opts.step, label)?;
    let datasets = data.datasets;
    if datasets.is_empty() {
        return Err(CliError::data(format!(
            "no cluster in {} from {} to {}: no `up` series of the role selectors has a `{label}` label{}",
            prom.url(),
            format_time(from),
            format_time(to),
            if f.filtered { " matching `--clusters`" } else { "" }
        )));
    }
    // One step for the whole fleet, so every cluster asks the same queries.
    opts.step = opts
        .step
        .or_else(|| datasets.values().find_map(|d| d.typical_interval()));
    let points = opts
        .step
        .map_or(1, |s| ((to - from).max(0) / s.max(1)) as usize + 1);
    let shards = crate::source::prometheus::fleet::shards(
        datasets.keys(),
        &data.largest,
        points.min(f.source.config.max_points),
        f.max_samples,
    );
    let rec = f
        .source
        .recorded
        .then(|| fleet_recorded(rules, &prom, label, (from, to), &datasets, progress))
        .flatten();
    if let Some((r, choices)) = &rec {
        if choices.values().any(Choice::any) {
            opts.window = Some(r.expected.window());
            opts.lazy_breakdowns = true;
        }
    }
    // Recorded signals are one query set for the whole fleet.
    let whole = crate::source::prometheus::fleet::Fleet::new(&prom, label, &[]).ok();
    let insecure = insecure_warning(&f.source, &prom);
    let judge = FleetJudge {
        recorded: match (&rec, &whole) {
            (Some((_, choices)), Some(w)) => Some((w, choices)),
            _ => None,
        },
        rules,
        prom: &prom,
        label,
        opts: &opts,
        insecure: insecure.as_deref(),
        body: body(plan.output.format),
        sharded: shards.len() > 1,
    };
    let shard_no = AtomicUsize::new(0);
    let entries: Vec<Entry> =
        with_query_progress(&prom, Some((&shard_no, shards.len())), progress.bars(), || {
            let mut entries = Vec::with_capacity(datasets.len());
            for (k, members) in shards.iter().enumerate() {
                shard_no.store(k + 1, Ordering::Relaxed);
                let shard: Vec<(&String, &Dataset)> =
                    members.iter().filter_map(|c| datasets.get_key_value(c)).collect();
                entries.extend(judge.shard(&shard));
            }
            entries
        });
    let (answered, failed) = prom.outcome();
    let none_queried = answered == 0 && !failed.is_empty();
    if let Some(first) = failed.first().filter(|_| none_queried) {
        progress.line(&format!(
            "error: no signal could be queried from Prometheus ({} failed); the first error: {first}",
            failed.len()
        ));
    }
    progress.line(&format!(
        "{} clusters judged from {answered} signal queries ({} failed){}",
        entries.len(),
        failed.len(),
        if shards.len() > 1 {
            format!(
                ", in {} shards of at most {} samples a query",
                shards.len(),
                f.max_samples
            )
        } else {
            String::new()
        }
    ));
    Ok(FleetOutcome {
        label: label.to_string(),
        entries,
        none_queried,
    })
}

/// The recorded signals of a fleet and what each cluster reads from them;
/// `None` when there are none or they cannot be used (a warning says why).
fn fleet_recorded(
    rules: &RuleSet,
    prom: &Prometheus,
    label: &str,
    window: (Millis, Millis),
    datasets: &std::collections::BTreeMap<String, Dataset>,
    progress: &mut dyn Progress,
) -> Option<(Recorded, HashMap<String, Choice>)> {
    use promql_parser::label::{MatchOp, Matcher};
    let mut notes = Vec::new();
    let interval = datasets.values().find_map(|d| d.typical_interval());
    let by = [Some(label.to_string())];
    let rec = Recorded::detect(rules, prom, &by, window, interval, &mut notes);
    for n in notes {
        progress.line(&format!("warning: {n}"));
    }
    let rec = rec?;
    let choices = datasets
        .iter()
        .map(|(c, ds)| {
            let mut own = prom.extra_matchers().to_vec();
            own.push(Matcher::new(MatchOp::Equal, label, c));
            (c.clone(), rec.choose(ds, c, &own))
        })
        .collect();
    Some((rec, choices))
}

/// What judging each shard of a fleet needs.
struct FleetJudge<'a> {
    /// The fleet-wide answers of recorded signals, and what each cluster
    /// reads from them.
    recorded: Option<(
        &'a crate::source::prometheus::fleet::Fleet<'a>,
        &'a HashMap<String, Choice>,
    )>,
    rules: &'a RuleSet,
    prom: &'a Prometheus,
    label: &'a str,
    opts: &'a Options<'a>,
    insecure: Option<&'a str>,
    body: Body,
    /// Whether the fleet is cut into shards (each shard's queries then name
    /// its clusters).
    sharded: bool,
}

impl FleetJudge<'_> {
    /// Judges one shard's clusters from one query set: the first cluster
    /// sends the shard's queries, the others (on every core) read its
    /// answers. Each report gets the warnings of its shard's queries and
    /// becomes an entry; the shard's answers are dropped on return.
    fn shard(&self, shard: &[(&String, &Dataset)]) -> Vec<Entry> {
        let (answered_before, failed_before) = {
            let (a, f) = self.prom.outcome();
            (a, f.len())
        };
        let slots = self.judge_all(shard);
        let shard_warnings = self.shard_warnings(answered_before, failed_before);
        shard
            .iter()
            .zip(slots)
            .map(|((c, _), slot)| {
                let r = slot.into_inner().unwrap_or_else(|p| p.into_inner());
                let mut r = r.unwrap_or_else(|| self.unusable("this cluster was not judged"));
                r.warnings.extend(self.insecure.map(str::to_string));
                r.warnings.extend(shard_warnings.iter().cloned());
                Entry::new(self.label, c, &r, self.body)
            })
            .collect()
    }

    /// A cluster that cannot be judged stays in the fleet, as inconclusive
    /// with the reason.
    fn unusable(&self, why: &str) -> Report {
        let to = self.opts.to.unwrap_or_default();
        Report::unusable(self.rules, why, Vec::new(), to, self.opts.debounce)
    }

    /// Judges every cluster of the shard into its slot: the first cluster
    /// sends the shard's queries; the rest read their answers, on every core.
    fn judge_all(&self, shard: &[(&String, &Dataset)]) -> Vec<Mutex<Option<Report>>> {
        use crate::source::prometheus::fleet::Fleet as Shared;
        let members: Vec<String> = if self.sharded {
            shard.iter().map(|(c, _)| (*c).clone()).collect()
        } else {
            Vec::new()
        };
        let shared = Shared::new(self.prom, self.label, &members);
        let judge_one = |cluster: &str, ds: &Dataset| -> Report {
            let choice = self.recorded.and_then(|(w, cs)| cs.get(cluster).map(|c| (w, c)));
            let why = match shared.as_ref().map(|s| {
                let view = s.cluster(cluster);
                match choice {
                    Some((whole, c)) if c.any() => {
                        let rec = whole.cluster(cluster);
                        let eval = RecordedEval::new(&view, &rec, c);
                        engine::diagnose_with(self.rules, ds, &eval, self.opts)
                    }
                    _ => engine::diagnose_with(self.rules, ds, &view, self.opts),
                }
            }) {
                Ok(Ok(mut r)) => {
                    if let Some((_, c)) = choice {
                        r.warnings.push(c.paths.line());
                        r.recorded = Some(c.paths.clone());
                    }
                    return r;
                }
                Ok(Err(engine::EngineError::NoData)) => "no snapshots in the window".to_string(),
                Ok(Err(e)) => format!("this cluster could not be judged: {e}"),
                Err(e) => format!("this cluster could not be judged: {e}"),
            };
            self.unusable(&why)
        };
        let slots: Vec<Mutex<Option<Report>>> = shard.iter().map(|_| Mutex::new(None)).collect();
        let judge_into = |k: usize| {
            if let (Some((c, ds)), Some(slot)) = (shard.get(k), slots.get(k)) {
                let r = judge_one(c, ds);
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            }
        };
        judge_into(0);
        let next = AtomicUsize::new(1);
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(shard.len().saturating_sub(1));
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= shard.len() {
                        break;
                    }
                    judge_into(k);
                });
            }
        });
        slots
    }

    /// The warnings of this shard's queries.
    fn shard_warnings(&self, answered_before: usize, failed_before: usize) -> Vec<String> {
        let (answered, failed) = self.prom.outcome();
        let failed = &failed[failed_before.min(failed.len())..];
        let mut shard_warnings: Vec<String> = Vec::new();
        if answered == answered_before {
            if let Some(first) = failed.first() {
                shard_warnings.push(format!(
                    "no signal could be queried from Prometheus ({} failed); the first error: {first}",
                    failed.len()
                ));
            }
        }
        shard_warnings.extend(self.prom.take_warnings());
        if !failed.is_empty() {
            shard_warnings.push(format!(
                "{} queries to Prometheus failed; their axes are listed under what could not be checked",
                failed.len()
            ));
        }
        shard_warnings
    }
}
