//! One thin handler per subcommand, wiring source → store → eval → report.

pub(crate) mod completions;
pub(crate) mod diagnose;
pub(crate) mod query;
pub(crate) mod record;
pub(crate) mod rules;
pub(crate) mod rules_export;
pub(crate) mod serve;
pub(crate) mod tree;
pub(crate) mod watch;

use std::io::Write;

use crate::cli::{Cli, Command, ReportFormat};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::pipeline::{self, Outcome};
use crate::plan::{self, Metrics, Output, Plan};
use crate::report::{fleet, html, json, markdown, page, table};
use crate::rules::report::Report;
use crate::rules::RuleSet;

/// Runs a parsed command line, writing results to `out` and warnings to `err`.
pub fn run(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Diagnose(a) => {
            let plan = Plan::from_args(a)?;
            let rules = plan::load_rules(plan.rules.as_deref())?;
            match &plan.metrics {
                Metrics::Live(l) if l.watch => watch::run(&plan, &rules, out, err),
                _ => diagnose::run(&plan, &rules, out, err),
            }
        }
        Command::Query(a) => query::run(a, out, err),
        Command::Record(a) => record::run(a, out, err),
        Command::Tree(a) => tree::run(a, out),
        Command::Rules(c) => rules::run(c, out, err),
        Command::Completions(a) => completions::run(a, out),
        Command::Serve(a) => serve::run(a),
    }
}

/// Writes the outcome of a diagnosis in the plan's output format and returns
/// its exit code; a run that failed on unusable data still writes a verdict
/// (`inconclusive`, the failures as warnings) on `-o json` and `-o html`,
/// then fails.
pub(crate) fn conclude(
    plan: &Plan,
    rules: &RuleSet,
    result: Result<Outcome, CliError>,
    out: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            if matches!(plan.output.format, ReportFormat::Json | ReportFormat::Html) {
                if let Some(report) = pipeline::unusable_report(&e, rules, plan) {
                    render(&report, plan.output, out)?;
                }
            }
            return Err(e);
        }
    };
    match &outcome {
        Outcome::One(report) => render(report, plan.output, out)?,
        Outcome::Watched { report, rounds } => {
            if matches!(plan.output.format, ReportFormat::Table | ReportFormat::Wide) {
                writeln!(out, "\nwatch ended after {rounds} rounds; the final report:\n")?;
            }
            render(report, plan.output, out)?;
        }
        Outcome::Fleet(f) => match plan.output.format {
            ReportFormat::Json => fleet::render_json(&f.entries, out)?,
            ReportFormat::Table | ReportFormat::Wide => fleet::render_table(&f.label, &f.entries, out)?,
            ReportFormat::Html => fleet::render_html(&f.label, &f.entries, out)?,
            ReportFormat::Markdown => fleet::render_markdown(&f.label, &f.entries, out)?,
        },
    }
    Ok(outcome.exit_code())
}

/// Writes one report in the plan's output format.
fn render(report: &Report, output: Output, out: &mut dyn Write) -> Result<(), CliError> {
    let opts = || screen_opts(output.color);
    match output.format {
        ReportFormat::Json => json::render(report, out)?,
        ReportFormat::Markdown => markdown::render(report, out)?,
        ReportFormat::Html => html::render(report, out)?,
        ReportFormat::Wide => table::render(report, &opts(), out)?,
        ReportFormat::Table => out.write_all(page::first_page(report, &opts()).as_bytes())?,
    }
    Ok(())
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
