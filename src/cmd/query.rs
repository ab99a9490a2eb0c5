//! `cptriage query`: evaluate one PromQL expression over captured metrics.

use std::io::Write;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use crate::cli::{QueryArgs, QueryFormat};
use crate::cmd::{load_dumps, resolve_time, When};
use crate::error::CliError;
use crate::eval::{self, EvalOptions, Value};
use crate::exit::ExitCode;
use crate::report::promapi;
use crate::source::dump::Keep;
use crate::store::is_stale;
use crate::timefmt;

/// The expression: the positional argument, or else the last `--dump` value when
/// it is not an existing path (`--dump` takes several values and swallows a
/// trailing expression).
fn split_expr(a: &mut QueryArgs) -> Result<String, CliError> {
    if let Some(e) = a.expr.take() {
        return Ok(e);
    }
    match a.dump.dump.last() {
        Some(last) if a.dump.dump.len() > 1 && !std::path::Path::new(last).exists() => {
            Ok(a.dump.dump.pop().unwrap_or_default())
        }
        _ => Err(CliError::Usage(
            "missing the PromQL expression: `cptriage query --dump PATH... 'EXPR'`".into(),
        )),
    }
}

pub fn run(mut a: QueryArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    let text = split_expr(&mut a)?;
    let expr = eval::parse(&text).map_err(|e| CliError::Usage(format!("`{text}`: {e}")))?;
    let refs = eval::referenced_metrics(&expr);
    let keep = if refs.all {
        Keep::All
    } else {
        Keep::Names(refs.names)
    };
    let ds = load_dumps(&a.dump, &keep, err)?;
    for t in &ds.targets {
        writeln!(
            err,
            "loaded {} ({}, {}; {} snapshot{}, time from {})",
            t.name,
            t.role,
            t.role_reason,
            t.snapshots.len(),
            if t.snapshots.len() == 1 { "" } else { "s" },
            time_source_text(t.time_source)
        )?;
    }
    let when = resolve_time(&a.time, &ds)?;
    let opts = EvalOptions::default();
    let (value, at) = match when {
        When::At(t) => (eval::instant(&ds.store, &expr, t, &opts), t),
        When::Range { from, to, step } => (
            eval::range(&ds.store, &expr, from, to, step, &opts).map(Value::Matrix),
            from,
        ),
    };
    let value = match value {
        Ok(v) => v,
        Err(e) => {
            if a.output == QueryFormat::Json {
                writeln!(out, "{}", promapi::render_error("execution", &e.to_string()))?;
            }
            return Err(CliError::Usage(format!("`{text}`: {e}")));
        }
    };
    match a.output {
        QueryFormat::Json => writeln!(out, "{}", promapi::render(&value, at))?,
        QueryFormat::Table => render_table(&value, at, out)?,
    }
    Ok(ExitCode::Ok)
}

/// How the report names a time source.
pub fn time_source_text(t: crate::source::TimeSource) -> &'static str {
    use crate::source::TimeSource as T;
    match t {
        T::FileName => "the file name",
        T::SampleTimestamp => "sample timestamps",
        T::Mtime => "the file modification time",
        T::Scrape => "the scrape",
        T::Prometheus => "Prometheus",
    }
}

fn render_table(v: &Value, at: i64, out: &mut dyn Write) -> Result<(), CliError> {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    match v {
        Value::Scalar(x) => {
            t.set_header(["time", "scalar"]);
            t.add_row([timefmt::format_time(at), promapi::format_value(*x)]);
        }
        Value::String(s) => {
            t.set_header(["time", "string"]);
            t.add_row([timefmt::format_time(at), s.clone()]);
        }
        Value::Vector(vs) => {
            t.set_header(["series", "value"]);
            for s in vs {
                t.add_row([s.labels.to_string(), promapi::format_value(s.v)]);
            }
            writeln!(
                out,
                "instant vector at {} ({} series)",
                timefmt::format_time(at),
                vs.len()
            )?;
        }
        Value::Matrix(ms) => {
            t.set_header(["series", "time", "value"]);
            for s in ms {
                for (i, p) in s.samples.iter().filter(|p| !is_stale(p.v)).enumerate() {
                    let name = if i == 0 {
                        s.labels.to_string()
                    } else {
                        String::new()
                    };
                    t.add_row([name, timefmt::format_time(p.t), promapi::format_value(p.v)]);
                }
            }
            writeln!(out, "range vector ({} series)", ms.len())?;
        }
    }
    writeln!(out, "{t}")?;
    Ok(())
}
