//! The live paths of the pipeline: plan the targets (kubeconfig, etcd
//! members, controllers, etcdctl's environment), scrape the rounds, keep them
//! as a capture directory when asked (`--save`, `record`), and judge them:
//! once at the end, or after every round (a watch).

use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde::Serialize;

use super::{Outcome, Progress};
use crate::error::{CliError, Unusable};
use crate::plan::{Live, Plan};
use crate::rules::report::Report;
use crate::rules::RuleSet;
use crate::source::capture::manifest::{self, Manifest, ManifestTarget, ScrapeFailure};
use crate::source::capture::write::{CaptureWriter, MANIFEST, MANIFEST_TMP};
use crate::source::ingest::{Keep, MemorySnapshot};
use crate::source::live::{
    self, families, kubeconfig, HealthResult, KubeconfigOptions, LiveConfig, LiveEvent, LiveResult,
    Plan as Targets, ReplicaSwitch, TargetFailure, TargetOptions,
};
use crate::source::Dataset;
use crate::timefmt;

/// The live targets and rounds of the plan, with the notes and warnings of
/// planning them (kubeconfig, etcdctl's environment, discovery) on
/// `progress`. Used by `record` and by `diagnose --live`.
pub fn prepare(a: &Live, keep: Keep, progress: &mut dyn Progress) -> Result<(LiveConfig, Targets), CliError> {
    let body_limits = live::BodyLimits {
        max_body: a.max_body,
        budget: std::sync::Arc::new(live::Budget::new(a.max_body_total)),
    };
    let duration = a.duration.unwrap_or(LiveConfig::DEFAULT_DURATION);
    if a.interval.is_zero() || a.timeout.is_zero() {
        return Err(CliError::Usage(
            "`--interval` and `--timeout` must be greater than zero".into(),
        ));
    }
    let a = &with_etcdctl_env(a, progress)?;
    let kopts = KubeconfigOptions::from_env(a.kubeconfig.clone(), a.context.clone());
    let explicit = a.kubeconfig.is_some() || a.context.is_some();
    let others = !a.etcd.is_empty() || !a.controllers.is_empty() || !a.nodes.is_empty();
    let apiserver = if !a.apiserver {
        None
    } else if explicit || kubeconfig::available(&kopts) {
        match kubeconfig::resolve(&kopts) {
            Ok(mut acc) => {
                if a.insecure_skip_tls_verify {
                    acc.insecure = true;
                }
                progress.line(&format!("apiserver access from {}", acc.origin));
                Some(acc)
            }
            Err(e) if explicit || !others => return Err(CliError::Usage(e.to_string())),
            Err(e) => {
                progress.line(&format!("warning: apiserver not scraped: {e}"));
                None
            }
        }
    } else {
        progress.line(
            "warning: apiserver not scraped: no kubeconfig (KUBECONFIG, ~/.kube/config) and not in a pod; give --kubeconfig, or --no-apiserver to say so",
        );
        None
    };
    let topts = TargetOptions {
        apiserver,
        discover: a.discover,
        etcd: a.etcd.clone(),
        etcd_tls: live::EtcdTls {
            ca: a.etcd_cacert.clone(),
            cert: a.etcd_cert.clone(),
            key: a.etcd_key.clone(),
            insecure: false,
        },
        controllers: a.controllers.clone(),
        nodes: a.nodes.clone(),
        timeout: a.timeout,
    };
    let targets = live::plan_targets(&topts).map_err(|e| CliError::Usage(e.to_string()))?;
    let cfg = LiveConfig {
        targets: targets.targets.clone(),
        interval: a.interval,
        rounds: LiveConfig::rounds_for(duration, a.interval),
        timeout: a.timeout,
        keep,
        retain_snapshots: false,
        limits: body_limits,
        stop: None,
    };
    if let Some(d) = &targets.discovery {
        progress.line(&format!("apiserver replicas {d}"));
    }
    for w in &targets.warnings {
        progress.line(&format!("warning: {w}"));
    }
    Ok((cfg, targets))
}

/// The live flags with etcdctl's environment filled in where no flag was
/// given: `ETCDCTL_ENDPOINTS` (comma-separated) when no `--etcd` member is,
/// and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY` for the TLS files.
/// Read only when scraping live, so that an etcdctl shell does not change
/// what `diagnose --dump` does.
fn with_etcdctl_env(a: &Live, progress: &mut dyn Progress) -> Result<Live, CliError> {
    let mut a = a.clone();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if a.etcd.is_empty() {
        if let Some(v) = var("ETCDCTL_ENDPOINTS") {
            a.etcd = v
                .split(',')
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty())
                .collect();
            progress.line(&format!("etcd members from ETCDCTL_ENDPOINTS ({})", a.etcd.len()));
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

/// The output directory of a recording, claimed atomically: a new directory
/// is created with `create_dir` (of two runs racing for it, one wins), an
/// existing empty one is claimed by creating its `manifest.yaml` with
/// `create_new`. Until [`OutDir::keep`], dropping it removes what the claim
/// created, so a run that fails before recording leaves nothing behind.
pub struct OutDir {
    path: PathBuf,
    /// Directories this claim created, outermost first.
    created: Vec<PathBuf>,
    /// Whether this claim created `manifest.yaml` (the directory is ours).
    claimed: bool,
    kept: bool,
}

impl OutDir {
    /// Claims `dir`, refusing anything but a missing or empty directory.
    pub fn claim(dir: &Path) -> Result<OutDir, CliError> {
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

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory now holds a recording: keep it whatever happens next.
    pub fn keep(&mut self) {
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
pub fn record_keep(all: bool) -> Result<Keep, CliError> {
    if all {
        return Ok(Keep::All);
    }
    Ok(match families::default_keep() {
        Keep::Names(mut names) => {
            names.extend(crate::plan::load_rules(None)?.referenced_metrics());
            Keep::Names(names)
        }
        k => k,
    })
}

/// Writes live rounds as a capture directory while they happen: a provisional
/// manifest first (so an interrupted recording is still readable), each
/// snapshot as it arrives (memory stays bounded), then the health files and
/// the final manifest. Used by `record` and `diagnose --live --save`.
pub struct Recorder {
    dir: PathBuf,
    writer: CaptureWriter,
    out: OutDir,
    created: String,
    write_error: Option<crate::source::capture::write::WriteError>,
}

impl Recorder {
    /// Writes the provisional manifest into the claimed directory. Until the
    /// first snapshot is written, a failure removes the directory again.
    pub fn start(out: OutDir, cfg: &LiveConfig) -> Result<Recorder, CliError> {
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
                node: None,
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
    pub fn on_event(&mut self, ev: &LiveEvent) {
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
    pub fn finish(mut self, cfg: &LiveConfig, res: &LiveResult) -> Result<(), CliError> {
        // From here the directory holds the record of the rounds.
        self.out.keep();
        if let Some(e) = self.write_error {
            return Err(e.into());
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
            let text = serde_json::to_string_pretty(&hf).map_err(|e| CliError::data(e.to_string()))?;
            fs::write(health_dir.join(format!("{}.json", t.name)), text + "\n")?;
        }
        let m = self.manifest(cfg, res.targets.clone(), res.failures.clone());
        Ok(self.writer.write_manifest(&m)?)
    }
}

/// Shows the live events: the round on a progress bar (hidden when stderr is
/// not a terminal); failures and process switches as warnings above it. A
/// target that keeps failing the same way is reported once, not once per
/// round (the summary counts its rounds), and again when it answers or fails
/// differently.
pub struct ScrapeProgress {
    bar: indicatif::ProgressBar,
    failing: std::collections::HashMap<String, String>,
}

impl ScrapeProgress {
    pub fn new(cfg: &LiveConfig) -> Self {
        ScrapeProgress {
            bar: progress_bar(cfg),
            failing: Default::default(),
        }
    }

    /// No bar: the warnings only (for a watch, which draws its own page).
    pub fn hidden() -> Self {
        ScrapeProgress {
            bar: indicatif::ProgressBar::hidden(),
            failing: Default::default(),
        }
    }

    pub fn on_event(&mut self, ev: &LiveEvent, progress: &mut dyn Progress) {
        let bar = &self.bar;
        let mut warn = |l: String| {
            bar.suspend(|| progress.scrape(&l));
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

    pub fn finish(self) {
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

/// The families live mode keeps from each scrape: what the rules read, and
/// with `--save` also what `record` keeps.
fn scrape_keep(a: &Live, keep: &Keep) -> Result<Keep, CliError> {
    Ok(match &a.save {
        Some(_) => match (record_keep(false)?, keep) {
            (Keep::Names(mut n), Keep::Names(r)) => {
                n.extend(r.iter().cloned());
                Keep::Names(n)
            }
            _ => Keep::All,
        },
        None => keep.clone(),
    })
}

/// Scrapes the live targets for the planned rounds and loads the snapshots
/// from memory, as `record` + `diagnose --dump` would. With `save` the
/// rounds are also written as a capture directory (the families `record`
/// keeps), so the same rounds can be diagnosed again later.
pub(super) fn dataset(a: &Live, keep: &Keep, progress: &mut dyn Progress) -> Result<Dataset, CliError> {
    let out_dir = a.save.as_deref().map(OutDir::claim).transpose()?;
    let (mut cfg, _) = prepare(a, scrape_keep(a, keep)?, progress)?;
    cfg.retain_snapshots = true;
    let mut rec = out_dir.map(|d| Recorder::start(d, &cfg)).transpose()?;
    let mut bar = if progress.bars() {
        ScrapeProgress::new(&cfg)
    } else {
        ScrapeProgress::hidden()
    };
    let res = live::scrape_rounds(&cfg, &mut |ev| {
        if let Some(r) = rec.as_mut() {
            r.on_event(&ev);
        }
        bar.on_event(&ev, progress);
    });
    bar.finish();
    if let (Some(r), Some(dir)) = (rec, a.save.as_deref()) {
        r.finish(&cfg, &res)?;
        progress.line(&format!("rounds saved to {}", dir.display()));
    }
    if let Some(e) = all_failed_error(&res) {
        return Err(e);
    }
    Ok(res.dataset(keep)?)
}

/// When every scrape of live rounds failed: the error naming each distinct
/// failure (and why the rounds stopped early, if they did).
pub fn all_failed_error(res: &LiveResult) -> Option<CliError> {
    if !res.all_failed() {
        return None;
    }
    let mut failures: Vec<String> = res
        .failure_details
        .iter()
        .map(|f| format!("{}: {}", f.target, f.error))
        .collect();
    failures.sort();
    failures.dedup();
    let when = match &res.stopped_early {
        Some(why) => format!(" (stopped after the first round: {why})"),
        None => String::new(),
    };
    Some(CliError::Data(Unusable {
        reason: format!("every scrape failed{when}"),
        failures,
    }))
}

/// Most snapshot text a watch keeps (the kept families only); beyond it the
/// oldest rounds are dropped, and the page says from when it judges.
const MAX_KEPT_BYTES: usize = 256 << 20;

/// A round of a watch, judged with every round kept so far.
pub struct Round<'a> {
    /// 1-based.
    pub number: usize,
    pub interval: std::time::Duration,
    /// The scraped targets.
    pub targets: &'a [live::TargetSpec],
    /// Whether the oldest rounds were dropped (memory).
    pub dropped: bool,
    /// The verdict over the rounds so far, or why there is none yet.
    pub verdict: Result<&'a Report, &'a CliError>,
}

/// A watch: scrape until stopped (or for the planned duration), judge every
/// round kept so far after each round and hand it to
/// [`Progress::round`], so that onsets, recoveries and the root cause stay
/// those of the whole watch; then the final report.
pub(super) fn watch(
    plan: &Plan,
    a: &Live,
    rules: &RuleSet,
    keep: &Keep,
    progress: &mut dyn Progress,
) -> Result<Outcome, CliError> {
    let out_dir = a.save.as_deref().map(OutDir::claim).transpose()?;
    let (mut cfg, _) = prepare(a, scrape_keep(a, keep)?, progress)?;
    if a.duration.is_none() {
        cfg.rounds = live::MAX_ROUNDS;
    }
    cfg.stop = progress.stop();
    cfg.retain_snapshots = false;
    let targets: Vec<ManifestTarget> = cfg
        .targets
        .iter()
        .map(|t| ManifestTarget {
            name: t.name.clone(),
            role: t.role,
            url: Some(t.display_url.clone()),
            version: None,
            node: None,
        })
        .collect();
    let mut rec = out_dir.map(|d| Recorder::start(d, &cfg)).transpose()?;
    let mut events = ScrapeProgress::hidden();
    let mut state = Watch::default();
    let mut draw_error = None;
    let res = live::scrape_rounds(&cfg, &mut |ev| {
        if let Some(r) = rec.as_mut() {
            r.on_event(&ev);
        }
        events.on_event(&ev, progress);
        match ev {
            LiveEvent::Snapshot(s) => state.keep(s.clone()),
            LiveEvent::Failed(f) => state.failures.push(ScrapeFailure {
                target: f.target.clone(),
                time: f.time,
                error: f.error.clone(),
            }),
            LiveEvent::RoundDone(stat) => {
                state.judge(plan, rules, keep, &targets);
                let verdict = match (&state.last, &state.last_error) {
                    (_, Some(e)) => Err(e),
                    (Some(r), None) => Ok(r),
                    (None, None) => return,
                };
                let round = Round {
                    number: stat.round + 1,
                    interval: cfg.interval,
                    targets: &cfg.targets,
                    dropped: state.dropped,
                    verdict,
                };
                if let Err(e) = progress.round(&round) {
                    draw_error.get_or_insert(e);
                    if let Some(s) = &cfg.stop {
                        s.store(true, Ordering::SeqCst);
                    }
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
        progress.line(&format!("rounds saved to {}", dir.display()));
    }
    if let Some(e) = all_failed_error(&res) {
        return Err(e);
    }
    match (state.last, state.last_error) {
        (Some(report), _) => Ok(Outcome::Watched {
            report,
            rounds: res.rounds.len(),
        }),
        (None, Some(e)) => Err(e),
        (None, None) => Err(CliError::data("no round was judged")),
    }
}

/// What a watch holds between rounds.
#[derive(Default)]
struct Watch {
    snapshots: VecDeque<MemorySnapshot>,
    kept_bytes: usize,
    dropped: bool,
    failures: Vec<ScrapeFailure>,
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
    fn judge(&mut self, plan: &Plan, rules: &RuleSet, keep: &Keep, targets: &[ManifestTarget]) {
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
        let result = so_far.dataset(keep).map_err(CliError::from).and_then(|ds| {
            let opts = plan.local_options(&ds, None)?;
            Ok(crate::rules::engine::diagnose(rules, &ds, &opts)?)
        });
        match result {
            Ok(r) => {
                self.last = Some(r);
                self.last_error = None;
            }
            Err(e) => self.last_error = Some(e),
        }
    }
}
