//! `cptriage query`: evaluate one PromQL expression over captured metrics, or
//! send it to a Prometheus-compatible API.

use std::io::Write;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use crate::cli::{QueryArgs, QueryFormat, TimeArgs};
use crate::error::CliError;
use crate::eval::{self, EvalOptions, Value};
use crate::exit::ExitCode;
use crate::pipeline::{self, Lines};
use crate::plan::{self, PromSource};
use crate::report::promapi;
use crate::source::ingest::Keep;
use crate::source::Dataset;
use crate::store::is_stale;
use crate::timefmt::{self, Millis};

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

/// The expression as messages show it: its first 120 characters.
fn shown_expr(text: &str) -> String {
    let mut s: String = text.chars().take(120).collect();
    if text.chars().nth(120).is_some() {
        s.push('…');
    }
    s
}

pub(crate) fn run(mut a: QueryArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    if a.prom.prometheus.is_some() {
        return run_prometheus(a, out, err);
    }
    let text = split_expr(&mut a)?;
    let shown = shown_expr(&text);
    let expr = eval::parse(&text).map_err(|e| CliError::Usage(format!("`{shown}`: {e}")))?;
    let refs = eval::referenced_metrics(&expr);
    let keep = if refs.all {
        Keep::All
    } else {
        Keep::Names(refs.names)
    };
    let ds = pipeline::read_dumps(
        &plan::dump_args(&a.dump.dump)?,
        a.limits.max_body.0,
        &keep,
        &mut Lines::new(err),
    )?;
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
            return Err(CliError::Usage(format!("`{shown}`: {e}")));
        }
    };
    match a.output {
        QueryFormat::Json => writeln!(out, "{}", promapi::render(&value, at))?,
        QueryFormat::Table => render_table(&value, at, out)?,
    }
    Ok(ExitCode::Ok)
}

/// `query --prometheus`: the expression (with `--selector`'s matchers added to
/// every selector) evaluated by the remote API, printed as over a dump.
fn run_prometheus(a: QueryArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    let text = a.expr.clone().ok_or_else(|| {
        CliError::Usage("missing the PromQL expression: `cptriage query --prometheus URL 'EXPR'`".into())
    })?;
    let mut expr = crate::limits::parse_promql(&text)
        .map_err(|e| CliError::Usage(format!("`{}`: invalid PromQL: {e}", shown_expr(&text))))?;
    let prom = pipeline::remote::connect(&PromSource::from_args(&a.prom)?, &mut Lines::new(err))?;
    crate::eval::select::inject_matchers(&mut expr, prom.extra_matchers());
    let sent = expr.to_string();
    let step = a.time.step;
    let now = chrono::Utc::now().timestamp_millis();
    let result = match (a.time.at, a.time.from, a.time.to) {
        (None, Some(from), Some(to)) => {
            plan::ordered(from, to)?;
            // Default: about 250 points, at least 15 s apart.
            let step = step.unwrap_or_else(|| ((to - from) / 250).max(15_000));
            prom.api()
                .query_range(&sent, from, to, step)
                .map(|r| (Value::Matrix(r.data), from, r.warnings))
        }
        (at, _, _) => {
            let t = at.unwrap_or(now);
            prom.api().query(&sent, t).map(|r| (r.data, t, r.warnings))
        }
    };
    let (value, at, warnings) = match result {
        Ok(v) => v,
        Err(e) => {
            if a.output == QueryFormat::Json {
                if let crate::source::prometheus::PromError::Api {
                    error_type, error, ..
                } = &e
                {
                    writeln!(out, "{}", promapi::render_error(error_type, error))?;
                }
            }
            return Err(match e {
                crate::source::prometheus::PromError::Config(_) => CliError::Usage(e.to_string()),
                crate::source::prometheus::PromError::Api { status: 400, .. } => {
                    CliError::Usage(e.to_string())
                }
                _ => e.into(),
            });
        }
    };
    writeln!(err, "queried {}: {sent}", prom.url())?;
    for w in warnings {
        writeln!(err, "warning: {}: {w}", prom.url())?;
    }
    match a.output {
        QueryFormat::Json => writeln!(out, "{}", promapi::render(&value, at))?,
        QueryFormat::Table => render_table(&value, at, out)?,
    }
    Ok(ExitCode::Ok)
}

/// The evaluation times asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    At(Millis),
    Range { from: Millis, to: Millis, step: Millis },
}

/// Resolves `--at/--from/--to/--step` against the data (default: the last snapshot).
fn resolve_time(t: &TimeArgs, ds: &Dataset) -> Result<When, CliError> {
    match (t.at, t.from, t.to) {
        (Some(at), _, _) => Ok(When::At(at)),
        (None, Some(from), Some(to)) => {
            plan::ordered(from, to)?;
            let step = t.step.or_else(|| ds.typical_interval()).unwrap_or(60_000);
            Ok(When::Range { from, to, step })
        }
        _ => {
            let (_, last) = ds
                .window()
                .ok_or_else(|| CliError::data("the dumps hold no snapshot"))?;
            Ok(When::At(last))
        }
    }
}

/// How the report names a time source.
pub(crate) fn time_source_text(t: crate::source::TimeSource) -> &'static str {
    use crate::source::TimeSource as T;
    match t {
        T::FileName => "the file name",
        T::SampleTimestamp => "sample timestamps",
        T::Mtime => "the file modification time",
        T::Scrape => "the scrape",
        T::Prometheus => "Prometheus",
    }
}

/// A value for the table, as Go's `%g` prints it (what the Prometheus UI
/// shows): exponent form below 1e-4 and from 1e21 on (`1e+308`, not 309
/// digits); the JSON output keeps the API's exact form.
fn table_value(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() || a == 0.0 || (1e-4..1e21).contains(&a) {
        return promapi::format_value(v);
    }
    let s = format!("{v:e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

fn render_table(v: &Value, at: i64, out: &mut dyn Write) -> Result<(), CliError> {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    match v {
        Value::Scalar(x) => {
            t.set_header(["time", "scalar"]);
            t.add_row([timefmt::format_time(at), table_value(*x)]);
        }
        Value::String(s) => {
            t.set_header(["time", "string"]);
            t.add_row([timefmt::format_time(at), s.clone()]);
        }
        Value::Vector(vs) => {
            t.set_header(["series", "value"]);
            for s in vs {
                t.add_row([s.labels.to_string(), table_value(s.v)]);
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
                    t.add_row([name, timefmt::format_time(p.t), table_value(p.v)]);
                }
            }
            writeln!(out, "range vector ({} series)", ms.len())?;
        }
    }
    writeln!(out, "{t}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::table_value;

    #[test]
    fn table_values_as_go_prints_them() {
        assert_eq!(table_value(1e308), "1e+308");
        assert_eq!(table_value(-2.5e-7), "-2.5e-07");
        assert_eq!(table_value(1.5), "1.5");
        assert_eq!(table_value(123456789.0), "123456789");
        assert_eq!(table_value(0.0), "0");
        assert_eq!(table_value(f64::NAN), "NaN");
    }
}
