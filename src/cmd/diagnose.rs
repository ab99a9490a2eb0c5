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
    let ds = load_dumps(&a.dump, &keep, &mut std::io::sink())?;
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
