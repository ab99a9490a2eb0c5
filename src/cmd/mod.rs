//! One thin handler per subcommand, wiring source → store → eval → report.

pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod diagnose;
pub(crate) mod query;
pub(crate) mod record;
pub(crate) mod rules;
pub(crate) mod rules_export;
pub(crate) mod tree;
pub(crate) mod watch;

use std::io::Write;

use crate::cli::{Cli, Command, DumpArgs, LimitArgs, TimeArgs};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::source::capture::{self, DumpArg};
use crate::source::ingest::Keep;
use crate::source::Dataset;
use crate::store::Millis;

/// Runs a parsed command line, writing results to `out` and warnings to `err`.
pub fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Diagnose(a) => diagnose::run(a, out, err),
        Command::Query(a) => query::run(a, out, err),
        Command::Record(a) => record::run(a, out, err),
        Command::Tree(a) => tree::run(a, out),
        Command::Rules(c) => rules::run(c, out, err),
        Command::Completions(a) => completions::run(a, out),
    }
}

/// Loads the `--dump` arguments, printing source warnings to `err`.
pub(crate) fn load_dumps(
    d: &DumpArgs,
    limits: &LimitArgs,
    keep: &Keep,
    err: &mut dyn Write,
) -> Result<Dataset, CliError> {
    let max = record::size_arg("--max-body", &limits.max_body)?;
    let args: Vec<DumpArg> = d
        .dump
        .iter()
        .map(|a| DumpArg::parse(a))
        .collect::<Result<_, _>>()?;
    let ds = capture::load_capped(&args, keep, max)?;
    for w in &ds.warnings {
        writeln!(err, "warning: {}: {}", w.origin, w.message)?;
    }
    Ok(ds)
}

/// How the terminal report is drawn: the width from `COLUMNS`, else the
/// terminal on stdout, else [`DEFAULT_WIDTH`](crate::report::page::DEFAULT_WIDTH);
/// colour per `--color` (`auto`: stdout is a terminal, `NO_COLOR` is unset or
/// empty, and `TERM` is not `dumb`).
pub(crate) fn screen_opts(color: crate::cli::ColorChoice) -> crate::report::page::RenderOpts {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or_else(|| {
            tty.then(|| terminal_size::terminal_size_of(std::io::stdout()))
                .flatten()
                .map(|(w, _)| w.0 as usize)
        })
        .unwrap_or(crate::report::page::DEFAULT_WIDTH);
    let color = match color {
        crate::cli::ColorChoice::Always => true,
        crate::cli::ColorChoice::Never => false,
        crate::cli::ColorChoice::Auto => {
            tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
        }
    };
    crate::report::page::RenderOpts { width, color }
}

/// Loads `--rules FILE`, or the shipped rules.
pub(crate) fn load_rules(path: Option<&std::path::Path>) -> Result<crate::rules::load::RuleSet, CliError> {
    let r = match path {
        Some(p) => crate::rules::load::load_file(p),
        None => crate::rules::load::RuleSet::default_rules(),
    };
    r.map_err(|e| CliError::Usage(e.to_string()))
}

/// The evaluation times asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum When {
    At(Millis),
    Range { from: Millis, to: Millis, step: Millis },
}

/// Resolves `--at/--from/--to/--step` against the data (default: the last snapshot).
pub(crate) fn resolve_time(t: &TimeArgs, ds: &Dataset) -> Result<When, CliError> {
    match (t.at, t.from, t.to) {
        (Some(at), _, _) => Ok(When::At(at)),
        (None, Some(from), Some(to)) => {
            config::ordered(from, to)?;
            let step = t.step.or_else(|| ds.typical_interval()).unwrap_or(60_000);
            Ok(When::Range { from, to, step })
        }
        _ => {
            let (_, last) = ds
                .window()
                .ok_or_else(|| CliError::Data("the dumps hold no snapshot".into()))?;
            Ok(When::At(last))
        }
    }
}
