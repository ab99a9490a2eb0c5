//! `cptriage record`: scrape live targets and write a capture directory
//! (`manifest.yaml`, `<target>/<unix-ms>.prom.gz`, `health/<target>.json`).

use std::io::Write;
use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use crate::cli::RecordArgs;
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::pipeline::live::{prepare, record_keep, OutDir, Recorder, ScrapeProgress};
use crate::pipeline::{Lines, Progress};
use crate::plan::Live;
use crate::source::capture::write::MANIFEST;
use crate::source::live::{self, HealthResult, LiveConfig, LiveResult};
use crate::timefmt;

pub(crate) fn run(a: RecordArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    let keep = record_keep(a.all)?;
    let dir = OutDir::claim(&a.out)?;
    let mut progress = Lines::new(err);
    let (cfg, _) = prepare(&Live::from_args(&a.live, &a.limits), keep, &mut progress)?;
    let mut rec = Recorder::start(dir, &cfg)?;
    let res = record_rounds(&cfg, &mut rec, &mut progress);
    rec.finish(&cfg, &res)?;
    summary(&cfg, &res, &a.out, out)?;
    if res.all_failed() {
        return Err(CliError::data(format!(
            "every scrape failed; the failures are recorded in `{}`",
            a.out.join(MANIFEST).display()
        )));
    }
    Ok(ExitCode::Ok)
}

/// Runs the rounds, writing each snapshot as it arrives, with a progress bar.
fn record_rounds(cfg: &LiveConfig, rec: &mut Recorder, progress: &mut dyn Progress) -> LiveResult {
    let mut bar = ScrapeProgress::new(cfg);
    let res = live::scrape_rounds(cfg, &mut |ev| {
        rec.on_event(&ev);
        bar.on_event(&ev, progress);
    });
    bar.finish();
    if let Some(why) = &res.stopped_early {
        progress.line(&format!("stopped after the first round: {why}"));
    }
    res
}

fn summary(cfg: &LiveConfig, res: &LiveResult, dir: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "capture written to {} ({} rounds, {} apart)",
        dir.display(),
        res.rounds.len(),
        timefmt::format_duration(cfg.interval.as_millis() as i64)
    )?;
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header([
        "target", "role", "url", "version", "ok", "failed", "health", "tls",
    ]);
    for spec in &cfg.targets {
        let version = res
            .targets
            .iter()
            .find(|t| t.name == spec.name)
            .and_then(|t| t.version.clone());
        let failed = res.failures.iter().filter(|f| f.target == spec.name).count();
        let health: Vec<&HealthResult> = res.health.iter().filter(|h| h.target == spec.name).collect();
        let bad = health.iter().filter(|h| !h.ok).count();
        t.add_row([
            spec.name.clone(),
            spec.role.to_string(),
            spec.display_url.clone(),
            version.unwrap_or_else(|| "-".into()),
            format!("{}", res.rounds.len() - failed.min(res.rounds.len())),
            failed.to_string(),
            if health.is_empty() {
                "-".into()
            } else {
                format!("{}/{} ok", health.len() - bad, health.len())
            },
            if !spec.metrics_url.starts_with("https://") {
                "plain http".into()
            } else if spec.tls_verified() {
                "verified".into()
            } else {
                "NOT VERIFIED".into()
            },
        ]);
    }
    writeln!(out, "{t}")?;
    let mut reasons: Vec<(&str, &str)> = res
        .failure_details
        .iter()
        .map(|f| (f.target.as_str(), f.error.as_str()))
        .collect();
    reasons.sort();
    reasons.dedup();
    for (target, e) in reasons {
        writeln!(out, "{target}: {e}")?;
    }
    for s in &res.switches {
        writeln!(
            out,
            "{}: a different process answered at round {} ({} → {})",
            s.target,
            s.round + 1,
            s.before,
            s.after
        )?;
    }
    if !res.unverified_tls.is_empty() {
        writeln!(
            out,
            "TLS verification was OFF for: {} (their identity was not checked)",
            res.unverified_tls.join(", ")
        )?;
    }
    Ok(())
}
