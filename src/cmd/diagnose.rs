//! `cptriage diagnose`: dumps, live scrapes or Prometheus → dataset → rules
//! engine → report → renderer.

use std::io::Write;

use crate::cli::{DiagnoseArgs, DumpArgs, PromArgs, ReportFormat};
use crate::cmd::{config, load_dumps, load_rules};
use crate::error::CliError;
use crate::eval::seam::LocalRole;
use crate::exit::ExitCode;
use crate::report::{html, json, markdown, page, table};
use crate::rules::engine::{self, BaselineSpec, Options};
use crate::rules::report::Report;
use crate::rules::report::Status;
use crate::rules::RuleSet;
use crate::source::ingest::Keep;
use crate::source::live::{ClientSpec, Secret};
use crate::source::prometheus::{parse_selector, ApiConfig, PromConfig, PromError, Prometheus, RoleSelector};
use crate::source::{Dataset, Role};
use crate::store::Millis;
use crate::timefmt::{format_time, parse_duration};

pub(crate) fn run(
    mut a: DiagnoseArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    // `diagnose DIR` is `diagnose --dump DIR`.
    a.dump.append(&mut a.paths);
    if a.dump.is_empty() && !a.live && a.prom.prometheus.is_none() && a.audit.is_empty() {
        return Err(CliError::Usage(
            "no metrics to diagnose: give a capture (`cptriage diagnose DIR` or `--dump PATH`), \
             scrape now with `--live` (with a kubeconfig and/or `--etcd URL`), or query \
             `--prometheus URL` (and/or read audit logs with `--audit FILE`)"
                .into(),
        ));
    }
    if !a.live {
        if let Some(flag) = live_flag_given(&a.live_args) {
            return Err(CliError::Usage(format!(
                "`{flag}` scrapes live targets and needs `--live`; it would be ignored with {}",
                if a.prom.prometheus.is_some() {
                    "`--prometheus`"
                } else {
                    "`--dump`"
                }
            )));
        }
    }
    let rules = load_rules(a.rules.as_deref())?;
    let result = if a.watch {
        crate::cmd::watch::run(&a, &rules, out, err)
    } else if a.by.is_some() {
        run_fleet(&a, &rules, out, err)
    } else {
        run_one(&a, &rules, out, err)
    };
    match result {
        // Scripts always get a verdict: unusable data is `inconclusive`, with
        // the failures as warnings (so does the HTML page, which says why).
        Err(CliError::Data(msg)) if matches!(a.output, ReportFormat::Json | ReportFormat::Html) => {
            let mut lines = msg.lines();
            let reason = lines.next().unwrap_or("no usable data").trim_end_matches(':');
            let failures = lines
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            let now = chrono::Utc::now().timestamp_millis() / 1000 * 1000;
            let report = Report::unusable(&rules, reason, failures, now, a.debounce as usize);
            if a.output == ReportFormat::Html {
                html::render(&report, out)?;
            } else {
                json::render(&report, out)?;
            }
            Err(CliError::Data(msg))
        }
        r => r,
    }
}

/// Where the metrics of one diagnosis come from.
enum Metrics {
    /// Dumps or live rounds, evaluated in memory (with `--baseline-dump`).
    Local { baseline: Option<Box<Dataset>> },
    /// `--prometheus`: the targets from `up`, the signals evaluated by the
    /// remote PromQL engine.
    Remote {
        prom: Box<Prometheus>,
        insecure: Option<String>,
        window: PromWindow,
    },
}

/// `diagnose` of one control plane, whatever its metrics come from: read the
/// dataset (dumps, live rounds or Prometheus), add the audit logs, judge,
/// render. The watch (`cmd/watch.rs`) runs the same `judge` and `render`
/// each round.
fn run_one(
    a: &DiagnoseArgs,
    rules: &RuleSet,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    let keep = Keep::Names(rules.referenced_metrics());
    let (metrics, mut ds) = read_metrics(a, &keep, err)?;
    add_audit(a, &mut ds, err)?;
    let report = match &metrics {
        Metrics::Local { baseline } => {
            let opts = options(a, &ds, baseline.as_deref())?;
            judge(rules, &ds, &opts)?
        }
        Metrics::Remote {
            prom,
            insecure,
            window,
        } => judge_remote(a, rules, &ds, prom, insecure.clone(), *window)?,
    };
    render(&report, a, out)
}

/// The dataset of one diagnosis, and where it came from.
fn read_metrics(a: &DiagnoseArgs, keep: &Keep, err: &mut dyn Write) -> Result<(Metrics, Dataset), CliError> {
    if a.prom.prometheus.is_some() {
        let prom = connect(&a.prom)?;
        let insecure = insecure_warning(&a.prom, &prom);
        if let Some(w) = &insecure {
            writeln!(err, "warning: {w}")?;
        }
        let window = prom_window(a)?;
        let (from, to, _, step, _) = window;
        let ds = prom.dataset(from, to, step).map_err(prom_error)?;
        for w in &ds.warnings {
            writeln!(err, "warning: {}: {}", w.origin, w.message)?;
        }
        return Ok((
            Metrics::Remote {
                prom: Box::new(prom),
                insecure,
                window,
            },
            ds,
        ));
    }
    let ds = if a.live {
        live_dataset(a, keep, err)?
    } else if a.dump.is_empty() {
        Dataset::default()
    } else {
        load_dumps(
            &DumpArgs { dump: a.dump.clone() },
            &a.limits,
            keep,
            &mut std::io::sink(),
        )?
    };
    let baseline = baseline_dataset(a, keep, err)?.map(Box::new);
    Ok((Metrics::Local { baseline }, ds))
}

/// `--baseline-dump`, loaded.
pub(crate) fn baseline_dataset(
    a: &DiagnoseArgs,
    keep: &Keep,
    err: &mut dyn Write,
) -> Result<Option<crate::source::Dataset>, CliError> {
    if a.baseline_dump.is_empty() {
        return Ok(None);
    }
    let d = DumpArgs {
        dump: a.baseline_dump.clone(),
    };
    Ok(Some(load_dumps(&d, &a.limits, keep, err)?))
}

/// The window, step and baseline of a local diagnosis from the flags.
pub(crate) fn options<'a>(
    a: &DiagnoseArgs,
    ds: &crate::source::Dataset,
    baseline_ds: Option<&'a crate::source::Dataset>,
) -> Result<Options<'a>, CliError> {
    config::local_options(a, ds, baseline_ds)
}

/// Runs the rules over a dataset.
pub(crate) fn judge(
    rules: &RuleSet,
    ds: &crate::source::Dataset,
    opts: &Options,
) -> Result<Report, CliError> {
    Ok(engine::diagnose(rules, ds, opts)?)
}

pub(crate) fn render(report: &Report, a: &DiagnoseArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let opts = || crate::cmd::screen_opts(a.color);
    match (a.output, a.wide) {
        (ReportFormat::Json, _) => json::render(report, out)?,
        (ReportFormat::Markdown, _) => markdown::render(report, out)?,
        (ReportFormat::Html, _) => html::render(report, out)?,
        (_, true) | (ReportFormat::Wide, _) => table::render(report, &opts(), out)?,
        (ReportFormat::Table, _) => out.write_all(page::first_page(report, &opts()).as_bytes())?,
    }
    Ok(match report.status {
        Status::Healthy => ExitCode::Ok,
        Status::Degraded => ExitCode::AxisNamed,
        Status::Recovered => ExitCode::Recovered,
        Status::Inconclusive => ExitCode::Data,
    })
}

/// Judges a dataset read from Prometheus: the signals are evaluated by the
/// remote engine (audit signals in memory); signals that could not be
/// queried become gaps, and nothing answered at all is unusable data (exit 3).
fn judge_remote(
    a: &DiagnoseArgs,
    rules: &RuleSet,
    ds: &Dataset,
    prom: &Prometheus,
    insecure: Option<String>,
    window: PromWindow,
) -> Result<Report, CliError> {
    let (from, to, at, step, baseline) = window;
    if ds.targets.is_empty() {
        return Err(CliError::Data(format!(
            "no target of any role in {} from {} to {}: no `up` series match the role selectors",
            prom.url(),
            format_time(from),
            format_time(to)
        )));
    }
    let opts = prom_options(a, (from, to, at, step, baseline));
    let routed = LocalRole::new(prom, Role::Audit);
    let mut report = with_query_progress(prom, None, || engine::diagnose_with(rules, ds, &routed, &opts))?;
    let failed = prom_outcome(prom)?;
    report.warnings.extend(insecure);
    report.warnings.extend(prom.take_warnings());
    if failed > 0 {
        // A failed query over the short (onset-dating) window costs only the
        // dating; the signals that could not be evaluated are the gaps.
        let signals = report
            .gaps
            .iter()
            .filter(|g| g.kind == crate::rules::report::GapKind::EvaluationError)
            .count();
        report.warnings.push(format!(
            "{failed} queries to Prometheus failed ({signals} signal(s) not evaluated); their axes are listed under what could not be checked"
        ));
    }
    Ok(report)
}

/// Runs `f` with a progress bar of the range requests to `prom` on stderr
/// (drawn only when stderr is a terminal; cleared at the end).
pub(crate) fn with_query_progress<T>(
    prom: &Prometheus,
    shards: Option<(&std::sync::atomic::AtomicUsize, usize)>,
    f: impl FnOnce() -> T,
) -> T {
    use std::sync::atomic::{AtomicBool, Ordering};
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
            return Err(CliError::Data(format!(
                "no signal could be queried from Prometheus ({} failed); the first error: {first}",
                failed.len()
            )));
        }
    }
    Ok(failed.len())
}

/// The window of a Prometheus diagnosis: (from, to, at, step, baseline).
pub(crate) type PromWindow = (
    Millis,
    Millis,
    Option<Millis>,
    Option<Millis>,
    BaselineSpec<'static>,
);

/// The window and baseline of a Prometheus diagnosis from the flags.
fn prom_window(a: &DiagnoseArgs) -> Result<PromWindow, CliError> {
    let (o, from, to) = config::prometheus_options(a)?;
    Ok((from, to, o.at, o.step, o.baseline))
}

/// The engine's options of a Prometheus diagnosis over `window`.
fn prom_options(a: &DiagnoseArgs, window: PromWindow) -> Options<'static> {
    let (from, to, at, step, baseline) = window;
    Options {
        at,
        from: Some(from),
        to: Some(to),
        step,
        baseline,
        debounce: a.debounce as usize,
    }
}

/// `diagnose --prometheus URL --by LABEL`: every value of LABEL judged as
/// its own control plane from the same queries (see
/// [`crate::source::prometheus::fleet`]); the exit code is the worst of the
/// fleet.
fn run_fleet(
    a: &DiagnoseArgs,
    rules: &RuleSet,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    use crate::report::fleet;
    let label = a.by.as_deref().unwrap_or_default().trim().to_string();
    crate::eval::select::check_label_name("--by", &label).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut more = Vec::new();
    if let Some(re) = &a.clusters {
        let m = crate::eval::select::regex_matcher("--clusters", &label, re)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        more.push(m);
    }
    let prom = connect_with(&a.prom, more)?;
    let insecure = insecure_warning(&a.prom, &prom);
    if let Some(w) = &insecure {
        writeln!(err, "warning: {w}")?;
    }
    let (from, to, at, step, baseline) = prom_window(a)?;
    let data = prom.fleet_datasets(from, to, step, &label).map_err(prom_error)?;
    let datasets = data.datasets;
    if datasets.is_empty() {
        return Err(CliError::Data(format!(
            "no cluster in {} from {} to {}: no `up` series of the role selectors has a `{label}` label{}",
            prom.url(),
            format_time(from),
            format_time(to),
            if a.clusters.is_some() {
                " matching `--clusters`"
            } else {
                ""
            }
        )));
    }
    // One step for the whole fleet, so every cluster asks the same queries.
    let step = step.or_else(|| datasets.values().find_map(|d| d.typical_interval()));
    let points = step.map_or(1, |s| ((to - from).max(0) / s.max(1)) as usize + 1);
    let plan = crate::source::prometheus::fleet::shards(
        datasets.keys(),
        &data.largest,
        points.min(a.prom.prometheus_max_points as usize),
        a.prometheus_max_samples,
    );
    let body = match a.output {
        ReportFormat::Json => fleet::Body::Json,
        ReportFormat::Table | ReportFormat::Wide => fleet::Body::Row,
        ReportFormat::Html => fleet::Body::Html,
        ReportFormat::Markdown => fleet::Body::Markdown,
    };
    let opts = prom_options(a, (from, to, at, step, baseline));
    let judge = FleetJudge {
        rules,
        prom: &prom,
        label: &label,
        opts: &opts,
        insecure: insecure.as_deref(),
        body,
        sharded: plan.len() > 1,
    };
    let shard_no = std::sync::atomic::AtomicUsize::new(0);
    let entries: Vec<fleet::Entry> = with_query_progress(&prom, Some((&shard_no, plan.len())), || {
        let mut entries = Vec::with_capacity(datasets.len());
        for (k, members) in plan.iter().enumerate() {
            shard_no.store(k + 1, std::sync::atomic::Ordering::Relaxed);
            let shard: Vec<(&String, &crate::source::Dataset)> =
                members.iter().filter_map(|c| datasets.get_key_value(c)).collect();
            entries.extend(judge.shard(&shard));
        }
        entries
    });
    let (answered, failed) = prom.outcome();
    if answered == 0 {
        if let Some(first) = failed.first() {
            writeln!(
                err,
                "error: no signal could be queried from Prometheus ({} failed); the first error: {first}",
                failed.len()
            )?;
        }
    }
    let none_queried = answered == 0 && !failed.is_empty();
    writeln!(
        err,
        "{} clusters judged from {answered} signal queries ({} failed){}",
        entries.len(),
        failed.len(),
        if plan.len() > 1 {
            format!(
                ", in {} shards of at most {} samples a query",
                plan.len(),
                a.prometheus_max_samples
            )
        } else {
            String::new()
        }
    )?;
    match a.output {
        ReportFormat::Json => fleet::render_json(&entries, out)?,
        ReportFormat::Table | ReportFormat::Wide => fleet::render_table(&label, &entries, out)?,
        ReportFormat::Html => fleet::render_html(&label, &entries, out)?,
        ReportFormat::Markdown => fleet::render_markdown(&label, &entries, out)?,
    }
    if none_queried {
        return Ok(ExitCode::Data);
    }
    Ok(match fleet::worst_entry(&entries) {
        Some(Status::Degraded) => ExitCode::AxisNamed,
        Some(Status::Inconclusive) | None => ExitCode::Data,
        Some(Status::Recovered) => ExitCode::Recovered,
        Some(Status::Healthy) => ExitCode::Ok,
    })
}

/// What judging each shard of a fleet needs.
struct FleetJudge<'a> {
    rules: &'a RuleSet,
    prom: &'a Prometheus,
    label: &'a str,
    opts: &'a Options<'a>,
    insecure: Option<&'a str>,
    body: crate::report::fleet::Body,
    /// Whether the fleet is cut into shards (each shard's queries then name
    /// its clusters).
    sharded: bool,
}

impl FleetJudge<'_> {
    /// Judges one shard's clusters from one query set: the first cluster
    /// sends the shard's queries, the others (on every core) read its
    /// answers. Each report gets the warnings of its shard's queries and
    /// becomes an entry; the shard's answers are dropped on return.
    fn shard(&self, shard: &[(&String, &crate::source::Dataset)]) -> Vec<crate::report::fleet::Entry> {
        use crate::report::fleet::Entry;
        use crate::source::prometheus::fleet::Fleet;
        let members: Vec<String> = if self.sharded {
            shard.iter().map(|(c, _)| (*c).clone()).collect()
        } else {
            Vec::new()
        };
        let (answered_before, failed_before) = {
            let (a, f) = self.prom.outcome();
            (a, f.len())
        };
        let shared = Fleet::new(self.prom, self.label, &members);
        let unusable = |why: &str| {
            let to = self.opts.to.unwrap_or_default();
            Report::unusable(self.rules, why, Vec::new(), to, self.opts.debounce)
        };
        // A cluster that cannot be judged stays in the fleet, as inconclusive
        // with the reason.
        let judge_one = |cluster: &str, ds: &crate::source::Dataset| -> Report {
            let why = match shared
                .as_ref()
                .map(|s| engine::diagnose_with(self.rules, ds, &s.cluster(cluster), self.opts))
            {
                Ok(Ok(r)) => return r,
                Ok(Err(engine::EngineError::NoData)) => "no snapshots in the window".to_string(),
                Ok(Err(e)) => format!("this cluster could not be judged: {e}"),
                Err(e) => format!("this cluster could not be judged: {e}"),
            };
            unusable(&why)
        };
        // The first cluster sends the shard's queries; the rest read their
        // answers, on every core.
        let slots: Vec<std::sync::Mutex<Option<Report>>> =
            shard.iter().map(|_| std::sync::Mutex::new(None)).collect();
        let judge_into = |k: usize| {
            if let (Some((c, ds)), Some(slot)) = (shard.get(k), slots.get(k)) {
                let r = judge_one(c, ds);
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            }
        };
        judge_into(0);
        let next = std::sync::atomic::AtomicUsize::new(1);
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(shard.len().saturating_sub(1));
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if k >= shard.len() {
                        break;
                    }
                    judge_into(k);
                });
            }
        });
        // The warnings of this shard's queries.
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
        shard
            .iter()
            .zip(slots)
            .map(|((c, _), slot)| {
                let r = slot.into_inner().unwrap_or_else(|p| p.into_inner());
                let mut r = r.unwrap_or_else(|| unusable("this cluster was not judged"));
                r.warnings.extend(self.insecure.map(str::to_string));
                r.warnings.extend(shard_warnings.iter().cloned());
                Entry::new(self.label, c, &r, self.body)
            })
            .collect()
    }
}

/// Reads `--audit` logs into the dataset: bucketed on `--step`, else on the
/// metrics' scrape interval (15 s alone), and cut to the metrics' window
/// when there are metrics.
fn add_audit(a: &DiagnoseArgs, ds: &mut crate::source::Dataset, err: &mut dyn Write) -> Result<(), CliError> {
    use crate::source::audit;
    if a.audit.is_empty() {
        return Ok(());
    }
    let resolution = a.step.or_else(|| ds.typical_interval()).unwrap_or(15_000);
    let cfg = audit::AuditConfig {
        resolution,
        clip: ds.window(),
        ..audit::AuditConfig::default()
    };
    let before = ds.warnings.len();
    audit::load_into(ds, &a.audit, &cfg)?;
    for w in &ds.warnings[before..] {
        writeln!(err, "warning: {}: {}", w.origin, w.message)?;
    }
    let empty = ds
        .targets
        .iter()
        .any(|t| t.role == crate::source::Role::Audit && t.snapshots.is_empty());
    if empty {
        let what = a
            .audit
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if ds.targets.iter().all(|t| t.snapshots.is_empty()) {
            return Err(CliError::Data(format!(
                "no usable event in the audit logs ({what}): no ResponseComplete event"
            )));
        }
        let m = format!("no audit event of {what} falls in the metrics' window: the audit logs add nothing");
        writeln!(err, "warning: {m}")?;
        ds.warnings.push(crate::source::SourceWarning {
            origin: "--audit".into(),
            message: m,
        });
    }
    Ok(())
}

fn prom_error(e: PromError) -> CliError {
    match e {
        PromError::Config(_) => CliError::Usage(e.to_string()),
        _ => CliError::Data(e.to_string()),
    }
}

fn read_secret(what: &str, p: &std::path::Path) -> Result<Secret, CliError> {
    let bytes = std::fs::read(p)
        .map_err(|e| CliError::Usage(format!("cannot read {what} `{}`: {e}", p.display())))?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(Secret::new(
        text.trim_end_matches(['\n', '\r']).as_bytes().to_vec(),
    ))
}

fn read_file(what: &str, p: &std::path::Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(p).map_err(|e| CliError::Usage(format!("cannot read {what} `{}`: {e}", p.display())))
}

/// Builds the Prometheus source of `--prometheus` and its flags.
pub(crate) fn connect(a: &PromArgs) -> Result<Prometheus, CliError> {
    connect_with(a, Vec::new())
}

/// [`connect`] with more matchers added to every selector.
fn connect_with(a: &PromArgs, more: Vec<promql_parser::label::Matcher>) -> Result<Prometheus, CliError> {
    let url = a
        .prometheus
        .clone()
        .ok_or_else(|| CliError::Usage("missing `--prometheus URL`".into()))?;
    let timeout = parse_duration(&a.prometheus_timeout)?;
    if timeout <= 0 {
        return Err(CliError::Usage(
            "`--prometheus-timeout` must be greater than zero".into(),
        ));
    }
    let sel = |flag: &str, text: &str| parse_selector(flag, text).map_err(CliError::from);
    // A role selector must select: `{}` would make every series of every job that role.
    let roles = vec![
        RoleSelector::parse(Role::Apiserver, "--apiserver-selector", &a.apiserver_selector)?,
        RoleSelector::parse(Role::Etcd, "--etcd-selector", &a.etcd_selector)?,
        RoleSelector::parse(Role::Controller, "--controller-selector", &a.controller_selector)?,
    ];
    let mut extra = match &a.selector {
        Some(s) => sel("--selector", s)?,
        None => Vec::new(),
    };
    extra.retain(|m| !more.iter().any(|x| x.name == m.name));
    extra.extend(more);
    let mut headers = Vec::new();
    for h in &a.prometheus_header {
        let Some((name, value)) = h.split_once(':') else {
            return Err(CliError::Usage(format!(
                "`--prometheus-header` expects `NAME: VALUE`, got a value without `:` (header `{}`)",
                h.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>()
            )));
        };
        headers.push((
            name.trim().to_string(),
            Secret::new(value.trim().as_bytes().to_vec()),
        ));
    }
    let token = a
        .prometheus_token_file
        .as_deref()
        .map(|p| read_secret("the token file", p))
        .transpose()?;
    let basic = match (&a.prometheus_user, &a.prometheus_password_file) {
        (Some(u), Some(p)) => Some((u.clone(), read_secret("the password file", p)?)),
        _ => None,
    };
    let client = ClientSpec {
        ca_pem: a
            .prometheus_ca
            .as_deref()
            .map(|p| read_file("the CA file", p))
            .transpose()?,
        insecure: a.prometheus_insecure_skip_tls_verify,
        client_cert_pem: a
            .prometheus_cert
            .as_deref()
            .map(|p| read_file("the client certificate", p))
            .transpose()?,
        client_key_pem: a
            .prometheus_key
            .as_deref()
            .map(|p| read_secret("the client key", p))
            .transpose()?,
        ..ClientSpec::default()
    };
    let cfg = PromConfig {
        api: ApiConfig {
            url,
            client,
            token,
            basic,
            headers,
            timeout: std::time::Duration::from_millis(timeout as u64),
            max_response: crate::cmd::record::size_arg(
                "--prometheus-max-response",
                &a.prometheus_max_response,
            )?,
        },
        roles,
        extra,
        instance_label: a.instance_label.trim().to_string(),
        concurrency: usize::from(a.prometheus_concurrency),
        max_points: a.prometheus_max_points as usize,
    };
    if cfg.instance_label.is_empty() {
        return Err(CliError::Usage("`--instance-label` must not be empty".into()));
    }
    Prometheus::new(cfg).map_err(prom_error)
}

/// The warning that TLS verification of the Prometheus server is off, when it is.
pub(crate) fn insecure_warning(a: &PromArgs, prom: &Prometheus) -> Option<String> {
    (a.prometheus_insecure_skip_tls_verify && prom.url().starts_with("https://")).then(|| {
        format!(
            "TLS verification is OFF for {} (--prometheus-insecure-skip-tls-verify): its identity is not checked, and the credentials go to whoever answers",
            prom.url()
        )
    })
}

/// The first live-scraping flag given (other than at its default), if any.
fn live_flag_given(l: &crate::cli::LiveArgs) -> Option<&'static str> {
    [
        (l.kubeconfig.is_some(), "--kubeconfig"),
        (l.context.is_some(), "--context"),
        (l.no_apiserver, "--no-apiserver"),
        (l.no_discovery, "--no-discovery"),
        (l.insecure_skip_tls_verify, "--insecure-skip-tls-verify"),
        (!l.etcd.is_empty(), "--etcd"),
        (l.etcd_cacert.is_some(), "--etcd-cacert"),
        (l.etcd_cert.is_some(), "--etcd-cert"),
        (l.etcd_key.is_some(), "--etcd-key"),
        (!l.controller.is_empty(), "--controller"),
        (l.interval != "5s", "--interval"),
        (l.duration.is_some(), "--duration"),
        (l.timeout != "4s", "--timeout"),
    ]
    .into_iter()
    .find(|(given, _)| *given)
    .map(|(_, flag)| flag)
}

/// The families live mode keeps from each scrape: what the rules read, and
/// with `--save` also what `record` keeps.
pub(crate) fn scrape_keep(a: &DiagnoseArgs, keep: &Keep) -> Result<Keep, CliError> {
    Ok(match &a.save {
        Some(_) => match (crate::cmd::record::record_keep(false)?, keep) {
            (Keep::Names(mut n), Keep::Names(r)) => {
                n.extend(r.iter().cloned());
                Keep::Names(n)
            }
            _ => Keep::All,
        },
        None => keep.clone(),
    })
}

/// Scrapes the live targets for the configured rounds and loads the snapshots
/// from memory, as `record` + `diagnose --dump` would. With `--save DIR` the
/// rounds are also written as a capture directory (the families `record`
/// keeps), so the same rounds can be diagnosed again later.
fn live_dataset(
    a: &DiagnoseArgs,
    keep: &Keep,
    err: &mut dyn Write,
) -> Result<crate::source::Dataset, CliError> {
    use crate::cmd::record::{self, Recorder};
    let out_dir = a.save.as_deref().map(record::OutDir::claim).transpose()?;
    let (mut cfg, plan) = record::prepare_live(&a.live_args, &a.limits, scrape_keep(a, keep)?, err)?;
    cfg.retain_snapshots = true;
    if let Some(d) = &plan.discovery {
        writeln!(err, "apiserver replicas {d}")?;
    }
    for w in &plan.warnings {
        writeln!(err, "warning: {w}")?;
    }
    let mut rec = out_dir.map(|d| Recorder::start(d, &cfg)).transpose()?;
    let mut progress = record::Progress::new(&cfg);
    let res = crate::source::live::scrape_rounds(&cfg, &mut |ev| {
        if let Some(r) = rec.as_mut() {
            r.on_event(&ev);
        }
        progress.on_event(&ev, err);
    });
    progress.finish();
    if let (Some(r), Some(dir)) = (rec, a.save.as_deref()) {
        r.finish(&cfg, &res)?;
        writeln!(err, "rounds saved to {}", dir.display())?;
    }
    if let Some(e) = all_failed_error(&res) {
        return Err(e);
    }
    Ok(res.dataset(keep)?)
}

/// When every scrape of live rounds failed: the error naming each distinct
/// failure (and why the rounds stopped early, if they did).
pub(crate) fn all_failed_error(res: &crate::source::live::LiveResult) -> Option<CliError> {
    if !res.all_failed() {
        return None;
    }
    let mut reasons: Vec<String> = res
        .failure_details
        .iter()
        .map(|f| format!("{}: {}", f.target, f.error))
        .collect();
    reasons.sort();
    reasons.dedup();
    let when = match &res.stopped_early {
        Some(why) => format!(" (stopped after the first round: {why})"),
        None => String::new(),
    };
    Some(CliError::Data(format!(
        "every scrape failed{when}:\n  {}",
        reasons.join("\n  ")
    )))
}
