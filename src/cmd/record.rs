//! `cptriage record`: scrape live targets and write a capture directory
//! (`manifest.yaml`, `<target>/<unix-ms>.prom.gz`, `health/<target>.json`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use crate::cli::{LimitArgs, LiveArgs, RecordArgs};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::source::capture::manifest::{self, Manifest};
use crate::source::capture::write::{CaptureWriter, MANIFEST, MANIFEST_TMP};
use crate::source::ingest::Keep;
use crate::source::live::{
    self, families, kubeconfig, HealthResult, KubeconfigOptions, LiveConfig, LiveEvent, LiveResult, Plan,
    ReplicaSwitch, TargetFailure, TargetOptions,
};
use crate::timefmt;

/// The live targets and rounds asked for on the command line, with the
/// warnings planning produced (printed by the caller). Used by `record` and
/// by `diagnose --live`.
pub(crate) fn prepare_live(
    a: &LiveArgs,
    limits: &LimitArgs,
    keep: Keep,
    err: &mut dyn Write,
) -> Result<(LiveConfig, Plan), CliError> {
    let body_limits = live::BodyLimits {
        max_body: size_arg("--max-body", &limits.max_body)?,
        budget: std::sync::Arc::new(live::Budget::new(size_arg(
            "--max-body-total",
            &a.max_body_total,
        )?)),
    };
    let interval = duration_arg("--interval", &a.interval)?;
    let duration = duration_arg("--duration", a.duration.as_deref().unwrap_or(DEFAULT_DURATION))?;
    let timeout = duration_arg("--timeout", &a.timeout)?;
    if interval.is_zero() || timeout.is_zero() {
        return Err(CliError::Usage(
            "`--interval` and `--timeout` must be greater than zero".into(),
        ));
    }
    let a = &with_etcdctl_env(a, err)?;
    let kopts = KubeconfigOptions::from_env(a.kubeconfig.clone(), a.context.clone());
    let explicit = a.kubeconfig.is_some() || a.context.is_some();
    let others = !a.etcd.is_empty() || !a.controller.is_empty();
    let apiserver = if a.no_apiserver {
        None
    } else if explicit || kubeconfig::available(&kopts) {
        match kubeconfig::resolve(&kopts) {
            Ok(mut acc) => {
                if a.insecure_skip_tls_verify {
                    acc.insecure = true;
                }
                writeln!(err, "apiserver access from {}", acc.origin)?;
                Some(acc)
            }
            Err(e) if explicit || !others => return Err(CliError::Usage(e.to_string())),
            Err(e) => {
                writeln!(err, "warning: apiserver not scraped: {e}")?;
                None
            }
        }
    } else {
        writeln!(
            err,
            "warning: apiserver not scraped: no kubeconfig (KUBECONFIG, ~/.kube/config) and not in a pod; give --kubeconfig, or --no-apiserver to say so"
        )?;
        None
    };
    let topts = TargetOptions {
        apiserver,
        discover: !a.no_discovery,
        etcd: a.etcd.clone(),
        etcd_tls: live::EtcdTls {
            ca: a.etcd_cacert.clone(),
            cert: a.etcd_cert.clone(),
            key: a.etcd_key.clone(),
            insecure: false,
        },
        controllers: a.controller.clone(),
        timeout,
    };
    let plan = live::plan_targets(&topts).map_err(|e| CliError::Usage(e.to_string()))?;
    let cfg = LiveConfig {
        targets: plan.targets.clone(),
        interval,
        rounds: LiveConfig::rounds_for(duration, interval),
        timeout,
        keep,
        retain_snapshots: false,
        limits: body_limits,
        stop: None,
    };
    Ok((cfg, plan))
}

/// The live flags with etcdctl's environment filled in where no flag was
/// given: `ETCDCTL_ENDPOINTS` (comma-separated) when no `--etcd` member is,
/// and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY` for the TLS files.
/// Read only when scraping live, so that an etcdctl shell does not change
/// what `diagnose --dump` does.
fn with_etcdctl_env(a: &LiveArgs, err: &mut dyn Write) -> Result<LiveArgs, CliError> {
    let mut a = a.clone();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if a.etcd.is_empty() {
        if let Some(v) = var("ETCDCTL_ENDPOINTS") {
            a.etcd = v
                .split(',')
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty())
                .collect();
            writeln!(err, "etcd members from ETCDCTL_ENDPOINTS ({})", a.etcd.len())?;
        }
    }
    for (slot, k) in [
        (&mut a.etcd_cacert, "ETCDCTL_CACERT"),
        (&mut a.etcd_cert, "ETCDCTL_CERT"),
        (&mut a.etcd_key, "ETCDCTL_KEY"),
    ] {
        if slot.is_none() {
            *slot = var(k).map(std::path::PathBuf::from);
        }
    }
    if a.etcd_cert.is_some() != a.etcd_key.is_some() {
        return Err(CliError::Usage(
            "an etcd client certificate needs its key, and the key its certificate (--etcd-cert/--cert/ETCDCTL_CERT with --etcd-key/--key/ETCDCTL_KEY)".into(),
        ));
    }
    Ok(a)
}

/// How long live mode scrapes when `--duration` is not given (`--watch`:
/// until Ctrl-C).
pub(crate) const DEFAULT_DURATION: &str = "30s";

/// A size flag (`512MiB`).
pub(crate) fn size_arg(flag: &str, v: &str) -> Result<u64, CliError> {
    crate::limits::parse_size(v).map_err(|e| CliError::Usage(format!("`{flag}`: {e}")))
}

fn duration_arg(flag: &str, v: &str) -> Result<std::time::Duration, CliError> {
    let ms = timefmt::parse_duration(v).map_err(|e| CliError::Usage(format!("`{flag}`: {e}")))?;
    Ok(std::time::Duration::from_millis(ms.max(0) as u64))
}

/// The output directory of a recording, claimed atomically: a new directory
/// is created with `create_dir` (of two runs racing for it, one wins), an
/// existing empty one is claimed by creating its `manifest.yaml` with
/// `create_new`. Until [`OutDir::keep`], dropping it removes what the claim
/// created, so a run that fails before recording leaves nothing behind.
pub(crate) struct OutDir {
    path: PathBuf,
    /// Directories this claim created, outermost first.
    created: Vec<PathBuf>,
    /// Whether this claim created `manifest.yaml` (the directory is ours).
    claimed: bool,
    kept: bool,
}

impl OutDir {
    /// Claims `dir`, refusing anything but a missing or empty directory.
    pub(crate) fn claim(dir: &Path) -> Result<OutDir, CliError> {
        let shown = dir.display();
        let mut created = Vec::new();
        // Create the missing ancestors one by one, remembering them.
        let mut missing = Vec::new();
        let mut cur = dir.to_path_buf();
        while !cur.as_os_str().is_empty() && fs::symlink_metadata(&cur).is_err() {
            missing.push(cur.clone());
            if !cur.pop() {
                break;
            }
        }
        let mut out = OutDir {
            path: dir.to_path_buf(),
            created: Vec::new(),
            claimed: false,
            kept: false,
        };
        for d in missing.iter().rev() {
            match fs::create_dir(d) {
                Ok(()) => created.push(d.clone()),
                // Another process created it meanwhile: claim it below like an existing one.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    out.created = created;
                    return Err(CliError::Usage(format!("`{}`: cannot create: {e}", d.display())));
                }
            }
        }
        out.created = created;
        match fs::read_dir(dir) {
            Ok(mut rd) => {
                if rd.next().is_some() {
                    return Err(CliError::Usage(format!(
                        "`{shown}`: exists and is not empty; cptriage never writes into existing data (choose a new directory)"
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(CliError::Usage(format!(
                    "`{shown}`: exists and is not a directory"
                )))
            }
            Err(e) => return Err(CliError::Usage(format!("`{shown}`: cannot read: {e}"))),
        }
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(MANIFEST))
        {
            Ok(_) => {
                out.claimed = true;
                Ok(out)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(CliError::Usage(format!(
                "`{shown}`: another run started writing into it (its `manifest.yaml` appeared); choose a new directory"
            ))),
            Err(e) => Err(CliError::Usage(format!("`{shown}`: cannot write into it: {e}"))),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory now holds a recording: keep it whatever happens next.
    pub(crate) fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        // Only what a claim and a provisional start write; `remove_dir` leaves
        // any directory that holds something else.
        if self.claimed {
            let _ = fs::remove_file(self.path.join(MANIFEST));
            let _ = fs::remove_file(self.path.join(MANIFEST_TMP));
            if let Ok(rd) = fs::read_dir(&self.path) {
                for e in rd.flatten() {
                    let _ = fs::remove_dir(e.path());
                }
            }
        }
        for d in self.created.iter().rev() {
            let _ = fs::remove_dir(d);
        }
    }
}

/// The health file of one target (`health/<target>.json`).
#[derive(Serialize)]
struct HealthFile<'a> {
    target: &'a str,
    url: &'a str,
    /// true only for HTTPS with the server certificate verified (false for
    /// plain HTTP and with verification turned off).
    tls_verified: bool,
    checks: Vec<&'a HealthResult>,
    failures: Vec<&'a TargetFailure>,
    switches: Vec<&'a ReplicaSwitch>,
}

/// What `record` keeps by default: the triage families plus every metric the
/// shipped rules read, so a recording always holds what `diagnose` needs;
/// everything with `--all`.
pub(crate) fn record_keep(all: bool) -> Result<Keep, CliError> {
    if all {
        return Ok(Keep::All);
    }
    Ok(match families::default_keep() {
        Keep::Names(mut names) => {
            names.extend(crate::cmd::load_rules(None)?.referenced_metrics());
            Keep::Names(names)
        }
        k => k,
    })
}

pub(crate) fn run(a: RecordArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    let keep = record_keep(a.all)?;
    let dir = OutDir::claim(&a.out)?;
    let (cfg, plan) = prepare_live(&a.live, &a.limits, keep, err)?;
    if let Some(d) = &plan.discovery {
        writeln!(err, "apiserver replicas {d}")?;
    }
    for w in &plan.warnings {
        writeln!(err, "warning: {w}")?;
    }
    let mut rec = Recorder::start(dir, &cfg)?;
    let res = record_rounds(&cfg, &mut rec, err)?;
    rec.finish(&cfg, &res)?;
    summary(&cfg, &res, &a.out, out)?;
    if res.all_failed() {
        return Err(CliError::Data(format!(
            "every scrape failed; the failures are recorded in `{}`",
            a.out.join(MANIFEST).display()
        )));
    }
    Ok(ExitCode::Ok)
}

/// Writes live rounds as a capture directory while they happen: a provisional
/// manifest first (so an interrupted recording is still readable), each
/// snapshot as it arrives (memory stays bounded), then the health files and
/// the final manifest. Used by `record` and `diagnose --live --save`.
pub(crate) struct Recorder {
    dir: PathBuf,
    writer: CaptureWriter,
    out: OutDir,
    created: String,
    write_error: Option<crate::source::capture::write::WriteError>,
}

impl Recorder {
    /// Writes the provisional manifest into the claimed directory. Until the
    /// first snapshot is written, a failure removes the directory again.
    pub(crate) fn start(out: OutDir, cfg: &LiveConfig) -> Result<Recorder, CliError> {
        let dir = out.path().to_path_buf();
        let dir = dir.as_path();
        let rec = Recorder {
            dir: dir.to_path_buf(),
            writer: CaptureWriter::new(dir, Some(flate2::Compression::fast())),
            out,
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            write_error: None,
        };
        let provisional = cfg
            .targets
            .iter()
            .map(|t| manifest::ManifestTarget {
                name: t.name.clone(),
                role: t.role,
                url: Some(t.display_url.clone()),
                version: None,
            })
            .collect();
        rec.writer
            .write_manifest(&rec.manifest(cfg, provisional, Vec::new()))?;
        rec.writer
            .create_targets(cfg.targets.iter().map(|t| t.name.as_str()))?;
        Ok(rec)
    }

    fn manifest(
        &self,
        cfg: &LiveConfig,
        targets: Vec<manifest::ManifestTarget>,
        failures: Vec<manifest::ScrapeFailure>,
    ) -> Manifest {
        Manifest::new(
            Some(self.created.clone()),
            Some(timefmt::format_duration(cfg.interval.as_millis() as i64)),
            targets,
            failures,
        )
    }

    /// Writes a snapshot event; the first write error stops writing and is
    /// reported by [`Recorder::finish`].
    pub(crate) fn on_event(&mut self, ev: &LiveEvent) {
        if let LiveEvent::Snapshot(s) = ev {
            if self.write_error.is_none() {
                match self.writer.write_snapshot(&s.target, s.time, &s.bytes) {
                    Ok(_) => self.out.keep(),
                    Err(e) => self.write_error = Some(e),
                }
            }
        }
    }

    /// Writes the health files and the final manifest (with the failures of
    /// the rounds, also when every scrape failed).
    pub(crate) fn finish(mut self, cfg: &LiveConfig, res: &LiveResult) -> Result<(), CliError> {
        // From here the directory holds the record of the rounds.
        self.out.keep();
        if let Some(e) = self.write_error {
            return Err(CliError::Data(e.to_string()));
        }
        let health_dir = self.dir.join("health");
        fs::create_dir_all(&health_dir)?;
        for t in &cfg.targets {
            let hf = HealthFile {
                target: &t.name,
                url: &t.display_url,
                tls_verified: t.tls_verified(),
                checks: res.health.iter().filter(|h| h.target == t.name).collect(),
                failures: res
                    .failure_details
                    .iter()
                    .filter(|f| f.target == t.name)
                    .collect(),
                switches: res.switches.iter().filter(|s| s.target == t.name).collect(),
            };
            let text = serde_json::to_string_pretty(&hf).map_err(|e| CliError::Data(e.to_string()))?;
            fs::write(health_dir.join(format!("{}.json", t.name)), text + "\n")?;
        }
        let m = self.manifest(cfg, res.targets.clone(), res.failures.clone());
        Ok(self.writer.write_manifest(&m)?)
    }
}

/// Runs the rounds, writing each snapshot as it arrives, with a progress bar.
fn record_rounds(cfg: &LiveConfig, rec: &mut Recorder, err: &mut dyn Write) -> Result<LiveResult, CliError> {
    let mut progress = Progress::new(cfg);
    let res = live::scrape_rounds(cfg, &mut |ev| {
        rec.on_event(&ev);
        progress.on_event(&ev, err);
    });
    progress.finish();
    if let Some(why) = &res.stopped_early {
        writeln!(err, "stopped after the first round: {why}")?;
    }
    Ok(res)
}

/// Shows the live events: the round on a progress bar (hidden when stderr is
/// not a terminal); failures and process switches as warnings above it. A
/// target that keeps failing the same way is reported once, not once per
/// round (the summary counts its rounds), and again when it answers or fails
/// differently.
pub(crate) struct Progress {
    bar: indicatif::ProgressBar,
    failing: std::collections::HashMap<String, String>,
}

impl Progress {
    pub(crate) fn new(cfg: &LiveConfig) -> Self {
        Progress {
            bar: progress_bar(cfg),
            failing: Default::default(),
        }
    }

    /// No bar: the warnings only (for a watch, which draws its own page).
    pub(crate) fn hidden() -> Self {
        Progress {
            bar: indicatif::ProgressBar::hidden(),
            failing: Default::default(),
        }
    }

    pub(crate) fn on_event(&mut self, ev: &LiveEvent, err: &mut dyn Write) {
        let bar = &self.bar;
        let mut warn = |l: String| {
            bar.suspend(|| {
                let _ = writeln!(err, "{l}");
            });
        };
        match ev {
            LiveEvent::RoundStarted { round, rounds, .. } => bar.set_message(format!("{}/{rounds}", round + 1)),
            LiveEvent::Snapshot(s) => {
                bar.inc(1);
                if self.failing.remove(&s.target).is_some() {
                    warn(format!("{}: answering again", s.target));
                }
            }
            LiveEvent::Failed(f) => {
                bar.inc(1);
                if self.failing.get(&f.target) != Some(&f.error) {
                    warn(format!(
                        "warning: {}: {} (round {}; repeats are counted, not shown)",
                        f.target,
                        f.error,
                        f.round + 1
                    ));
                    self.failing.insert(f.target.clone(), f.error.clone());
                }
            }
            LiveEvent::Switch(s) => warn(format!(
                "warning: {}: a different process answered at round {} ({} → {}); rates across it are not valid",
                s.target,
                s.round + 1,
                s.before,
                s.after
            )),
            LiveEvent::RoundDone(_) => {}
        }
    }

    pub(crate) fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// A progress bar over every scrape of the rounds, on stderr (hidden when
/// stderr is not a terminal).
fn progress_bar(cfg: &LiveConfig) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some((cfg.rounds * cfg.targets.len()) as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} round {msg} [{bar:30}] {pos}/{len} scrapes")
    {
        bar.set_style(style);
    }
    bar
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
