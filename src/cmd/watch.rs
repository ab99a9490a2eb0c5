//! `cptriage diagnose --live --watch`: the pipeline scrapes every
//! `--interval` and judges all the rounds so far after each one; this
//! handler redraws the first page in place after each (as `top` does), so
//! that onsets, recoveries and the root cause stay those of the whole watch.
//! Ctrl-C ends the rounds: the round under way finishes, the final report is
//! printed, and a `--save` capture is completed.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::ReportFormat;
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::pipeline::live::Round;
use crate::pipeline::{self, Progress};
use crate::plan::Plan;
use crate::report::page::{self, RenderOpts};
use crate::rules::report::Report;
use crate::rules::RuleSet;
use crate::source::live;

/// How many warning lines the page shows under the verdict.
const WARNING_LINES: usize = 3;

pub(crate) fn run(
    plan: &Plan,
    rules: &RuleSet,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // The first Ctrl-C ends the rounds; a second one leaves at once.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    // The pages go where people look: stdout for the table (and `-o wide`);
    // with `-o json`, `-o markdown` or `-o html` stdout is kept for the final
    // document, and the pages go to stderr.
    let pages_on_stdout = matches!(plan.output.format, ReportFormat::Table | ReportFormat::Wide);
    let tty = if pages_on_stdout {
        std::io::stdout().is_terminal()
    } else {
        std::io::stderr().is_terminal()
    };
    let color = tty && crate::cmd::screen_opts(plan.output.color).color;
    let result = {
        let mut pages = Pages {
            out: &mut *out,
            err: &mut *err,
            pages_on_stdout,
            tty,
            color,
            stop,
            warnings: Vec::new(),
        };
        pipeline::run(plan, rules, &mut pages)
    };
    crate::cmd::conclude(plan, rules, result, out)
}

/// The watch's progress: notes on stderr, the scrape warnings and the
/// verdict of each round on a page redrawn in place.
struct Pages<'a> {
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
    pages_on_stdout: bool,
    tty: bool,
    color: bool,
    stop: Arc<AtomicBool>,
    /// The scrape warnings so far (the page shows the latest).
    warnings: Vec<String>,
}

impl Progress for Pages<'_> {
    fn line(&mut self, line: &str) {
        let _ = writeln!(self.err, "{line}");
    }

    fn scrape(&mut self, line: &str) {
        self.warnings.push(line.to_string());
    }

    fn stop(&self) -> Option<Arc<AtomicBool>> {
        Some(self.stop.clone())
    }

    fn round(&mut self, round: &Round<'_>) -> std::io::Result<()> {
        let header = format!(
            "cptriage watch: {}; round {} every {}{}; Ctrl-C for the final report",
            describe(round.targets),
            round.number,
            crate::timefmt::format_duration(round.interval.as_millis() as i64),
            if round.dropped {
                " (oldest rounds dropped)"
            } else {
                ""
            },
        );
        let text = self.page(&header, round.verdict, terminal_size());
        let sink: &mut dyn Write = if self.pages_on_stdout {
            &mut *self.out
        } else {
            &mut *self.err
        };
        if self.tty {
            // Home, clear, the page: redrawn in place.
            write!(sink, "\x1b[H\x1b[2J{text}").and_then(|_| sink.flush())
        } else {
            writeln!(sink, "{text}").and_then(|_| sink.flush())
        }
    }
}

impl Pages<'_> {
    /// The header, the latest warnings, then the first page, cut to the
    /// terminal's height.
    fn page(
        &self,
        header: &str,
        verdict: Result<&Report, &CliError>,
        (width, height): (usize, usize),
    ) -> String {
        let color = self.color;
        let mut lines: Vec<String> = vec![header.to_string()];
        let recent: Vec<&String> = self.warnings.iter().rev().take(WARNING_LINES).collect();
        lines.extend(recent.into_iter().rev().cloned());
        lines.push(String::new());
        let body = match verdict {
            Err(e) => format!("no verdict yet: {e}\n"),
            Ok(r) => page::first_page(r, &RenderOpts { width, color }),
        };
        lines.extend(body.lines().map(str::to_string));
        // Rows on the screen: a line longer than the width wraps.
        let rows = |l: &String| l.chars().count().max(1).div_ceil(width.max(1));
        let room = height.saturating_sub(1).max(5);
        let mut used = 0;
        let mut fit = 0;
        for l in &lines {
            if used + rows(l) > room - 1 {
                break;
            }
            used += rows(l);
            fit += 1;
        }
        if fit < lines.len() {
            let cut = lines.len() - fit;
            lines.truncate(fit);
            lines.push(format!(
                "… {cut} more lines: the final report (Ctrl-C) has everything"
            ));
        }
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}

/// "2 etcd members, 3 apiservers".
fn describe(targets: &[live::TargetSpec]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for t in targets {
        let role = t.role.to_string();
        match counts.iter_mut().find(|(r, _)| *r == role) {
            Some((_, n)) => *n += 1,
            None => counts.push((role, 1)),
        }
    }
    let parts: Vec<String> = counts
        .into_iter()
        .map(|(r, n)| {
            let what = match r.as_str() {
                "etcd" => "etcd member",
                "apiserver" => "apiserver",
                "controller" => "controller",
                _ => "target",
            };
            format!("{n} {what}{}", if n == 1 { "" } else { "s" })
        })
        .collect();
    parts.join(", ")
}

/// The terminal's size: `COLUMNS`/`LINES`, else the tty's, else 80×24.
fn terminal_size() -> (usize, usize) {
    let env = |k: &str| std::env::var(k).ok().and_then(|c| c.trim().parse::<usize>().ok());
    let tty = terminal_size::terminal_size().map(|(w, h)| (w.0 as usize, h.0 as usize));
    let width = env("COLUMNS").or(tty.map(|t| t.0)).unwrap_or(80).max(40);
    let height = env("LINES").or(tty.map(|t| t.1)).unwrap_or(24).max(10);
    (width, height)
}
