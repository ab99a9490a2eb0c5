//! `cptriage diagnose`: dumps → dataset → rules engine → report → renderer.

use std::io::Write;

use crate::cli::{DiagnoseArgs, DumpArgs, ReportFormat};
use crate::cmd::{load_dumps, load_rules};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::report::model::Status;
use crate::report::{json, markdown, table};
use crate::rules::engine::{self, BaselineSpec, Options};
use crate::source::dump::Keep;
use crate::timefmt::{parse_duration, parse_time};

pub fn run(a: DiagnoseArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    let rules = load_rules(a.rules.as_deref())?;
    let keep = Keep::Names(rules.referenced_metrics());
    let ds = if a.live {
        live_dataset(&a, &keep, err)?
    } else {
        load_dumps(&DumpArgs { dump: a.dump.clone() }, &keep, &mut std::io::sink())?
    };
    let baseline_ds = if a.baseline_dump.is_empty() {
        None
    } else {
        let d = DumpArgs {
            dump: a.baseline_dump.clone(),
        };
        Some(load_dumps(&d, &keep, err)?)
    };
    let step = a.step.as_deref().map(parse_duration).transpose()?;
    if step == Some(0) {
        return Err(CliError::Usage("`--step` must be greater than zero".into()));
    }
    let baseline = match (&a.baseline_from, &a.baseline_to, &baseline_ds) {
        (Some(f), Some(t), _) => BaselineSpec::Range {
            from: parse_time(f)?,
            to: parse_time(t)?,
        },
        (_, _, Some(b)) => BaselineSpec::Dataset(b),
        _ => BaselineSpec::WindowStart,
    };
    let opts = Options {
        at: a.at.as_deref().map(parse_time).transpose()?,
        from: a.from.as_deref().map(parse_time).transpose()?,
        to: a.to.as_deref().map(parse_time).transpose()?,
        step,
        baseline,
        debounce: a.debounce as usize,
    };
    let report = engine::diagnose(&rules, &ds, &opts).map_err(|e| match e {
        engine::EngineError::NoData => CliError::Data(e.to_string()),
        _ => CliError::Usage(e.to_string()),
    })?;
    match a.output {
        ReportFormat::Table => table::render(&report, out)?,
        ReportFormat::Json => json::render(&report, out)?,
        ReportFormat::Markdown => markdown::render(&report, out)?,
    }
    Ok(match report.status {
        Status::Healthy => ExitCode::Ok,
        Status::Degraded => ExitCode::AxisNamed,
        Status::Inconclusive => ExitCode::Data,
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
    let scrape_keep = match &a.save {
        Some(_) => match (record::record_keep(false)?, keep) {
            (Keep::Names(mut n), Keep::Names(r)) => {
                n.extend(r.iter().cloned());
                Keep::Names(n)
            }
            _ => Keep::All,
        },
        None => keep.clone(),
    };
    let (mut cfg, plan) = record::prepare_live(&a.live_args, scrape_keep, err)?;
    cfg.retain_snapshots = true;
    if let Some(d) = &plan.discovery {
        writeln!(err, "apiserver replicas {d}")?;
    }
    for w in &plan.warnings {
        writeln!(err, "warning: {w}")?;
    }
    let mut rec = a.save.as_deref().map(|d| Recorder::start(d, &cfg)).transpose()?;
    let bar = record::progress_bar(&cfg);
    let res = crate::source::live::scrape_rounds(&cfg, &mut |ev| {
        if let Some(r) = rec.as_mut() {
            r.on_event(&ev);
        }
        record::progress(&bar, &ev, err);
    });
    bar.finish_and_clear();
    if let (Some(r), Some(dir)) = (rec, a.save.as_deref()) {
        r.finish(&cfg, &res)?;
        writeln!(err, "rounds saved to {}", dir.display())?;
    }
    if res.all_failed() {
        return Err(CliError::Data(
            "every scrape failed; see the warnings above".into(),
        ));
    }
    Ok(res.dataset(keep)?)
}
