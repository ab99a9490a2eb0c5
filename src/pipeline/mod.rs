//! plan → outcome: the one way a diagnosis runs, whatever asks for it
//! (`diagnose`, `diagnose --watch`, `cptriage serve`):
//!
//! 1. **read** the metrics of the plan's source (dumps, live rounds,
//!    Prometheus, a fleet) into a [`Dataset`];
//! 2. **add evidence** beside them (audit logs) over the same steps;
//! 3. **judge**: the rules engine, in memory or through the remote PromQL
//!    engine (a fleet: shard by shard);
//!
//! and hands back an [`Outcome`] for a renderer, with its exit code
//! ([`Outcome::exit_code`]). What happens meanwhile (warnings, notes,
//! progress bars, the rounds of a watch) goes to one [`Progress`].
//!
//! ```no_run
//! # fn f(plan: &cptriage::plan::Plan) -> Result<(), cptriage::error::CliError> {
//! let rules = cptriage::plan::load_rules(plan.rules.as_deref())?;
//! let outcome = cptriage::pipeline::run(plan, &rules, &mut cptriage::pipeline::Quiet)?;
//! if let cptriage::pipeline::Outcome::One(report) = &outcome {
//!     cptriage::report::json::render(report, &mut std::io::stdout())?;
//! }
//! # Ok(()) }
//! ```

pub mod live;
pub mod remote;

use std::io::Write;

use crate::error::CliError;
use crate::exit::ExitCode;
use crate::plan::{Baseline, Metrics, Plan};
use crate::report::fleet;
use crate::rules::engine;
use crate::rules::report::{Report, Status};
use crate::rules::RuleSet;
use crate::source::capture::{self, DumpArg};
use crate::source::ingest::Keep;
use crate::source::{Dataset, Role, SourceWarning};

/// What a diagnosis ends with.
#[derive(Debug)]
pub enum Outcome {
    /// The report of one control plane.
    One(Report),
    /// The final report of a watch, after `rounds` rounds.
    Watched { report: Report, rounds: usize },
    /// Every cluster of a fleet.
    Fleet(FleetOutcome),
}

/// The judged clusters of a fleet.
#[derive(Debug)]
pub struct FleetOutcome {
    /// The label that tells the clusters apart.
    pub label: String,
    pub entries: Vec<fleet::Entry>,
    /// No signal query was answered at all (unusable data, not a healthy fleet).
    pub none_queried: bool,
}

impl Outcome {
    /// The exit status: the report's, or the worst of the fleet's.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            // A failing axis whose cause is undecided: exit 5.
            Outcome::One(r) | Outcome::Watched { report: r, .. }
                if r.status == Status::Degraded && r.verdict.undecided.is_some() =>
            {
                ExitCode::Undecided
            }
            Outcome::One(r) | Outcome::Watched { report: r, .. } => status_code(Some(r.status)),
            Outcome::Fleet(f) if f.none_queried => ExitCode::Data,
            Outcome::Fleet(f) => status_code(fleet::worst_entry(&f.entries)),
        }
    }
}

/// The exit code of a verdict (none: nothing was judged).
fn status_code(status: Option<Status>) -> ExitCode {
    match status {
        Some(Status::Healthy) => ExitCode::Ok,
        Some(Status::Degraded) => ExitCode::AxisNamed,
        Some(Status::Recovered) => ExitCode::Recovered,
        Some(Status::Inconclusive) | None => ExitCode::Data,
    }
}

/// Where a run reports what happens meanwhile. The command line prints it
/// on stderr ([`Lines`]); a service may keep it or drop it ([`Quiet`]).
pub trait Progress {
    /// A line for the operator, whole: a note (`apiserver access from …`) or
    /// a warning (`warning: …`).
    fn line(&mut self, line: &str);

    /// A line about the scrapes of live rounds (a target failing, answering
    /// again): a line, unless a watch shows them on its page.
    fn scrape(&mut self, line: &str) {
        self.line(line);
    }

    /// Whether progress bars are drawn (on stderr, when it is a terminal).
    fn bars(&self) -> bool {
        false
    }

    /// A watch judged the rounds so far; an error ends the rounds and the run.
    fn round(&mut self, _round: &live::Round<'_>) -> std::io::Result<()> {
        Ok(())
    }

    /// What ends the rounds of a watch early when set (Ctrl-C).
    fn stop(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        None
    }
}

/// Progress as lines on a stream, with progress bars on a terminal.
pub struct Lines<'a> {
    out: &'a mut dyn Write,
}

impl<'a> Lines<'a> {
    pub fn new(out: &'a mut dyn Write) -> Lines<'a> {
        Lines { out }
    }
}

impl Progress for Lines<'_> {
    fn line(&mut self, line: &str) {
        let _ = writeln!(self.out, "{line}");
    }

    fn bars(&self) -> bool {
        true
    }
}

/// Progress dropped.
pub struct Quiet;

impl Progress for Quiet {
    fn line(&mut self, _line: &str) {}
}

/// The warnings of a source, one line each.
pub fn warn_sources(progress: &mut dyn Progress, warnings: &[SourceWarning]) {
    for w in warnings {
        progress.line(&format!("warning: {}: {}", w.origin, w.message));
    }
}

/// Runs the plan: read → add evidence → judge.
pub fn run(plan: &Plan, rules: &RuleSet, progress: &mut dyn Progress) -> Result<Outcome, CliError> {
    let keep = Keep::Names(rules.referenced_metrics());
    match &plan.metrics {
        Metrics::Prometheus(source) => {
            let prom = remote::connect(source, progress)?;
            let opts = plan.remote_options()?;
            let mut ds = remote::read(&prom, &opts, progress)?;
            add_evidence(plan, &mut ds, progress)?;
            let insecure = remote::insecure_warning(source, &prom);
            let remote = remote::Remote {
                prom: &prom,
                insecure,
                recorded: source.recorded,
            };
            Ok(Outcome::One(remote::judge(rules, &ds, remote, &opts, progress)?))
        }
        Metrics::Fleet(f) => Ok(Outcome::Fleet(remote::fleet(plan, f, rules, progress)?)),
        Metrics::Live(l) if l.watch => live::watch(plan, l, rules, &keep, progress),
        Metrics::Live(l) => {
            let mut ds = live::dataset(l, &keep, progress)?;
            judge_local(plan, rules, &mut ds, &keep, progress)
        }
        Metrics::Dumps { dumps, max_body } => {
            let mut ds = read_dumps(dumps, *max_body, &keep, &mut Quiet)?;
            judge_local(plan, rules, &mut ds, &keep, progress)
        }
        Metrics::None => judge_local(plan, rules, &mut Dataset::default(), &keep, progress),
    }
}

/// Adds the evidence, then judges local data in memory (with the baseline
/// dumps, if any).
fn judge_local(
    plan: &Plan,
    rules: &RuleSet,
    ds: &mut Dataset,
    keep: &Keep,
    progress: &mut dyn Progress,
) -> Result<Outcome, CliError> {
    let baseline = match &plan.baseline {
        Baseline::Dumps { dumps, max_body } => Some(read_dumps(dumps, *max_body, keep, progress)?),
        _ => None,
    };
    add_evidence(plan, ds, progress)?;
    let opts = plan.local_options(ds, baseline.as_ref())?;
    Ok(Outcome::One(engine::diagnose(rules, ds, &opts)?))
}

/// Reads dumps, each file up to `max_body` bytes, with their warnings.
pub fn read_dumps(
    dumps: &[DumpArg],
    max_body: u64,
    keep: &Keep,
    progress: &mut dyn Progress,
) -> Result<Dataset, CliError> {
    let ds = capture::load_capped(dumps, keep, max_body)?;
    warn_sources(progress, &ds.warnings);
    Ok(ds)
}

/// Adds the evidence of the plan to the dataset: the audit logs, bucketed on
/// the plan's step, else on the metrics' scrape interval (15 s alone), and
/// cut to the metrics' window when there are metrics.
pub fn add_evidence(plan: &Plan, ds: &mut Dataset, progress: &mut dyn Progress) -> Result<(), CliError> {
    add_audit(plan, ds, progress)?;
    add_logs(plan, ds, progress)
}

/// Adds `--logs`: bucketed on the plan's step, else on the metrics' scrape
/// interval (5 s alone), and cut to the metrics' window when there are metrics.
fn add_logs(plan: &Plan, ds: &mut Dataset, progress: &mut dyn Progress) -> Result<(), CliError> {
    use crate::source::logs;
    if plan.evidence.logs.is_empty() {
        return Ok(());
    }
    // A single metrics snapshot has no window to cut to: the logs give the
    // timeline (and the verdict its dates).
    let metrics = ds.targets.iter().any(|t| t.role != Role::Audit) && ds.typical_interval().is_some();
    let cfg = logs::LogsConfig {
        resolution: plan
            .window
            .step
            .or_else(|| ds.typical_interval())
            .unwrap_or(5_000),
        clip: if metrics { ds.window() } else { None },
        ..logs::LogsConfig::default()
    };
    let before = ds.warnings.len();
    logs::load_into(ds, &plan.evidence.logs, &cfg)?;
    warn_sources(progress, &ds.warnings[before..]);
    Ok(())
}

fn add_audit(plan: &Plan, ds: &mut Dataset, progress: &mut dyn Progress) -> Result<(), CliError> {
    use crate::source::audit;
    let paths = &plan.evidence.audit;
    if paths.is_empty() {
        return Ok(());
    }
    let resolution = plan
        .window
        .step
        .or_else(|| ds.typical_interval())
        .unwrap_or(15_000);
    let cfg = audit::AuditConfig {
        resolution,
        clip: ds.window(),
        ..audit::AuditConfig::default()
    };
    let before = ds.warnings.len();
    audit::load_into(ds, paths, &cfg)?;
    warn_sources(progress, &ds.warnings[before..]);
    let empty = ds
        .targets
        .iter()
        .any(|t| t.role == Role::Audit && t.snapshots.is_empty());
    if empty {
        let what = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if ds.targets.iter().all(|t| t.snapshots.is_empty()) {
            return Err(CliError::data(format!(
                "no usable event in the audit logs ({what}): no ResponseComplete event"
            )));
        }
        let m = format!("no audit event of {what} falls in the metrics' window: the audit logs add nothing");
        progress.line(&format!("warning: {m}"));
        ds.warnings.push(SourceWarning {
            origin: "--audit".into(),
            message: m,
        });
    }
    Ok(())
}

/// The report of a run that failed on unusable data (exit 3), for outputs
/// that always carry a verdict (`-o json`, `-o html`): `inconclusive`, with
/// the reason and each failure as warnings. `None` for other errors.
pub fn unusable_report(e: &CliError, rules: &RuleSet, plan: &Plan) -> Option<Report> {
    let u = e.unusable()?;
    let now = chrono::Utc::now().timestamp_millis() / 1000 * 1000;
    Some(Report::unusable(rules, &u.reason, u.failures, now, plan.debounce))
}
