//! `cptriage diagnose --live --watch`: scrape every `--interval`, re-judge all
//! the rounds so far after each one, and redraw the first page in place (as
//! `top` does), so that onsets, recoveries and the root cause stay those of
//! the whole watch. Ctrl-C ends the rounds: the round under way finishes, the
//! final report is printed, and a `--save` capture is completed.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::DiagnoseArgs;
use crate::cmd::diagnose::{all_failed_error, judge, options, render, scrape_keep};
use crate::cmd::record::{self, Progress, Recorder};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::report::page::{self, RenderOpts};
use crate::rules::report::Report;
use crate::rules::RuleSet;
use crate::source::capture::manifest::{ManifestTarget, ScrapeFailure};
use crate::source::ingest::Keep;
use crate::source::ingest::MemorySnapshot;
use crate::source::live::{self, LiveEvent, LiveResult};

/// Most snapshot text a watch keeps (the kept families only); beyond it the
/// oldest rounds are dropped, and the page says from when it judges.
const MAX_KEPT_BYTES: usize = 256 << 20;

/// How many warning lines the page shows under the verdict.
const WARNING_LINES: usize = 3;

pub(crate) fn run(
    a: &DiagnoseArgs,
    rules: &RuleSet,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    let keep = Keep::Names(rules.referenced_metrics());
    let out_dir = a.save.as_deref().map(record::OutDir::claim).transpose()?;
    let (mut cfg, plan) = record::prepare_live(&a.live_args, &a.limits, scrape_keep(a, &keep)?, err)?;
    if a.live_args.duration.is_none() {
        cfg.rounds = live::MAX_ROUNDS;
    }
    if let Some(d) = &plan.discovery {
        writeln!(err, "apiserver replicas {d}")?;
    }
    for w in &plan.warnings {
        writeln!(err, "warning: {w}")?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // The first Ctrl-C ends the rounds; a second one leaves at once.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    cfg.stop = Some(stop);
    cfg.retain_snapshots = false;
    let targets: Vec<ManifestTarget> = cfg
        .targets
        .iter()
        .map(|t| ManifestTarget {
            name: t.name.clone(),
            role: t.role,
            url: Some(t.display_url.clone()),
            version: None,
        })
        .collect();
    // The pages go where people look: stdout for the table; with `-o json`
    // or `-o markdown` stdout is kept for the final document, and the pages
    // go to stderr.
    let pages_on_stdout = a.output == crate::cli::ReportFormat::Table;
    let tty = if pages_on_stdout {
        std::io::stdout().is_terminal()
    } else {
        std::io::stderr().is_terminal()
    };
    let color = tty && crate::cmd::screen_opts(a.color).color;
    let mut rec = out_dir.map(|d| Recorder::start(d, &cfg)).transpose()?;
    let mut progress = Progress::hidden();
    let mut state = Watch {
        snapshots: VecDeque::new(),
        kept_bytes: 0,
        dropped: false,
        failures: Vec::new(),
        warnings: Vec::new(),
        last: None,
        last_error: None,
    };
    let what = describe(&cfg.targets);
    let interval = crate::timefmt::format_duration(cfg.interval.as_millis() as i64);
    let mut draw_error = None;
    let res =
        live::scrape_rounds(&cfg, &mut |ev| {
            if let Some(r) = rec.as_mut() {
                r.on_event(&ev);
            }
            let mut buf = Vec::new();
            progress.on_event(&ev, &mut buf);
            state
                .warnings
                .extend(String::from_utf8_lossy(&buf).lines().map(str::to_string));
            match ev {
                LiveEvent::Snapshot(s) => state.keep(s.clone()),
                LiveEvent::Failed(f) => state.failures.push(ScrapeFailure {
                    target: f.target.clone(),
                    time: f.time,
                    error: f.error.clone(),
                }),
                LiveEvent::RoundDone(stat) => {
                    state.judge(a, rules, &keep, &targets);
                    let header =
                        format!(
                    "cptriage watch: {what}; round {} every {interval}{}; Ctrl-C for the final report",
                    stat.round + 1,
                    if state.dropped { " (oldest rounds dropped)" } else { "" },
                );
                    let text = state.page(&header, terminal_size(), color);
                    let sink: &mut dyn Write = if pages_on_stdout { &mut *out } else { &mut *err };
                    let r = if tty {
                        // Home, clear, the page: redrawn in place.
                        write!(sink, "\x1b[H\x1b[2J{text}").and_then(|_| sink.flush())
                    } else {
                        writeln!(sink, "{text}").and_then(|_| sink.flush())
                    };
                    if let Err(e) = r {
                        draw_error.get_or_insert(e);
                        cfg_stop(&cfg);
                    }
                }
                _ => {}
            }
        });
    if let Some(e) = draw_error {
        return Err(e.into());
    }
    if let (Some(r), Some(dir)) = (rec, a.save.as_deref()) {
        r.finish(&cfg, &res)?;
        writeln!(err, "rounds saved to {}", dir.display())?;
    }
    finish(a, &res, state, out)
}

fn cfg_stop(cfg: &live::LiveConfig) {
    if let Some(s) = &cfg.stop {
        s.store(true, Ordering::SeqCst);
    }
}

/// After the rounds: the final report over everything kept, in the chosen
/// output format, and its exit code.
fn finish(
    a: &DiagnoseArgs,
    res: &LiveResult,
    state: Watch,
    out: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    if let Some(e) = all_failed_error(res) {
        return Err(e);
    }
    match (state.last, state.last_error) {
        (Some(report), _) => {
            if a.output == crate::cli::ReportFormat::Table {
                writeln!(
                    out,
                    "\nwatch ended after {} rounds; the final report:\n",
                    res.rounds.len()
                )?;
            }
            render(&report, a, out)
        }
        (None, Some(e)) => Err(e),
        (None, None) => Err(CliError::Data("no round was judged".into())),
    }
}

/// What the watch holds between rounds.
struct Watch {
    snapshots: VecDeque<MemorySnapshot>,
    kept_bytes: usize,
    dropped: bool,
    failures: Vec<ScrapeFailure>,
    warnings: Vec<String>,
    last: Option<Report>,
    last_error: Option<CliError>,
}

impl Watch {
    fn keep(&mut self, s: MemorySnapshot) {
        self.kept_bytes += s.bytes.len();
        self.snapshots.push_back(s);
        while self.kept_bytes > MAX_KEPT_BYTES && self.snapshots.len() > 1 {
            if let Some(old) = self.snapshots.pop_front() {
                self.kept_bytes -= old.bytes.len();
                self.dropped = true;
            }
        }
    }

    /// Judges every round kept so far, as `diagnose --dump` of a capture of
    /// them would.
    fn judge(&mut self, a: &DiagnoseArgs, rules: &RuleSet, keep: &Keep, targets: &[ManifestTarget]) {
        let first = self.snapshots.front().map(|s| s.time).unwrap_or(i64::MIN);
        let so_far = LiveResult {
            snapshots: self.snapshots.iter().cloned().collect(),
            failures: self
                .failures
                .iter()
                .filter(|f| f.time >= first)
                .cloned()
                .collect(),
            targets: targets.to_vec(),
            ..Default::default()
        };
        let result = so_far
            .dataset(keep)
            .map_err(CliError::from)
            .and_then(|ds| options(a, &ds, None).and_then(|o| judge(rules, &ds, &o)));
        match result {
            Ok(r) => {
                self.last = Some(r);
                self.last_error = None;
            }
            Err(e) => self.last_error = Some(e),
        }
    }

    /// The header, the latest warnings, then the first page, cut to the
    /// terminal's height.
    fn page(&self, header: &str, (width, height): (usize, usize), color: bool) -> String {
        let mut lines: Vec<String> = vec![header.to_string()];
        let recent: Vec<&String> = self.warnings.iter().rev().take(WARNING_LINES).collect();
        lines.extend(recent.into_iter().rev().cloned());
        lines.push(String::new());
        let body = match (&self.last, &self.last_error) {
            (_, Some(e)) => format!("no verdict yet: {e}\n"),
            (Some(r), None) => page::first_page(r, &RenderOpts { width, color }),
            (None, None) => "waiting for the first round\n".into(),
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
