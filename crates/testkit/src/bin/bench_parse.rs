//! Throughput and peak-memory benchmark of the exposition parser.
//!
//! Run: `cargo run --release --bin bench_parse [-- --iters N --mb SIZE]`;
//! `--write-payload PATH` only writes the synthetic payload (for profiling).
//!
//! It builds a deterministic apiserver-like payload (~30 MB by default) from
//! `testdata/realdata/apiserver_nri_v1.35.0.prom.gz` by repeating the big
//! per-resource families with renamed `resource` labels, writes it to a temp
//! file, and measures, each in its own child process (so peak memory is that of
//! one parse): (a) `prometheus-parse` full parse, (b) our full parse, (c) our
//! parse keeping only the families a triage needs; on the payload and on the
//! real capture. Memory is the growth of VmHWM over the RSS after loading the
//! input. Results are printed as a Markdown table (see `docs/parser.md`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cptriage::source::expfmt::{parse, SampleRef};

const REAL: &str = "apiserver_nri_v1.35.0.prom";

/// Families repeated to grow the payload (all carry a `resource` label).
const SCALED: &[&str] = &[
    "apiserver_request_duration_seconds",
    "apiserver_request_sli_duration_seconds",
    "etcd_request_duration_seconds",
    "apiserver_request_body_size_bytes",
    "apiserver_response_sizes",
    "apiserver_request_total",
    "etcd_requests_total",
];

/// The families a triage tree reads (plus every `apiserver_flowcontrol_*`).
const TRIAGE: &[&str] = &[
    "apiserver_request_duration_seconds",
    "apiserver_request_total",
    "apiserver_request_terminations_total",
    "apiserver_current_inflight_requests",
    "etcd_request_duration_seconds",
    "etcd_requests_total",
    "authentication_attempts",
    "authorization_attempts_total",
    "apiserver_admission_webhook_admission_duration_seconds",
    "apiserver_admission_webhook_rejection_count",
    "apiserver_watch_events_total",
    "apiserver_storage_objects",
    "etcd_disk_wal_fsync_duration_seconds",
    "etcd_server_has_leader",
    "etcd_mvcc_db_total_size_in_bytes",
];
const TRIAGE_PREFIX: &str = "apiserver_flowcontrol_";

fn triage_keep(family: &str) -> bool {
    family.starts_with(TRIAGE_PREFIX) || TRIAGE.contains(&family)
}

fn realdata_dir() -> PathBuf {
    cptriage_testkit::realdata_dir()
}

/// The family a HELP/TYPE line declares.
fn declared(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("# HELP ")
        .or_else(|| line.strip_prefix("# TYPE "))?;
    rest.split_whitespace().next()
}

/// Builds the synthetic payload: the real capture with every `SCALED` family's
/// samples repeated `k` times (`resource="x"` becomes `resource="sN.x"`).
fn synthesize(real: &str, target: usize) -> String {
    let scaled_bytes: usize = {
        let mut cur = "";
        real.lines()
            .filter(|l| {
                if let Some(f) = declared(l) {
                    cur = f;
                }
                !l.starts_with('#') && SCALED.contains(&cur)
            })
            .map(|l| l.len() + 1)
            .sum()
    };
    let rest = real.len() - scaled_bytes;
    let k = (target.saturating_sub(rest) / scaled_bytes.max(1)).max(1);
    let mut out = String::with_capacity(target + target / 8);
    let mut block: Vec<&str> = Vec::new();
    let mut cur = "";
    let flush = |block: &mut Vec<&str>, out: &mut String, scaled: bool| {
        for copy in 0..if scaled { k } else { 1 } {
            for l in block.iter() {
                if copy == 0 || l.starts_with('#') {
                    if copy == 0 {
                        out.push_str(l);
                        out.push('\n');
                    }
                } else if l.contains("resource=\"") {
                    out.push_str(&l.replacen("resource=\"", &format!("resource=\"s{copy}."), 1));
                    out.push('\n');
                }
            }
        }
        block.clear();
    };
    for l in real.lines() {
        if let Some(f) = declared(l) {
            if f != cur {
                flush(&mut block, &mut out, SCALED.contains(&cur));
                cur = f;
            }
        }
        block.push(l);
    }
    flush(&mut block, &mut out, SCALED.contains(&cur));
    out
}

fn proc_status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Clone, Copy)]
enum Mode {
    PromParse,
    OursFull,
    OursTriage,
}

impl Mode {
    fn all() -> [Mode; 3] {
        [Mode::PromParse, Mode::OursFull, Mode::OursTriage]
    }
    fn id(self) -> &'static str {
        match self {
            Mode::PromParse => "prometheus-parse",
            Mode::OursFull => "ours-full",
            Mode::OursTriage => "ours-triage",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Mode::PromParse => "(a) prometheus-parse, full",
            Mode::OursFull => "(b) cptriage expfmt, full",
            Mode::OursTriage => "(c) cptriage expfmt, triage families only",
        }
    }
    fn from_id(s: &str) -> Option<Mode> {
        Mode::all().into_iter().find(|m| m.id() == s)
    }
}

/// Runs one parse; returns the number of samples delivered.
fn run_once(mode: Mode, input: &[u8]) -> Result<usize, String> {
    match mode {
        Mode::PromParse => {
            let text = std::str::from_utf8(input).map_err(|e| e.to_string())?;
            let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
                .map_err(|e| e.to_string())?;
            Ok(std::hint::black_box(scrape).samples.len())
        }
        Mode::OursFull | Mode::OursTriage => {
            let mut n = 0usize;
            let mut acc = 0f64;
            let mut sink = |s: &SampleRef<'_>| {
                n += 1;
                acc += s.value + s.labels.len() as f64;
            };
            let full = matches!(mode, Mode::OursFull);
            let mut keep = |f: &str| full || triage_keep(f);
            parse(input, &mut keep, &mut sink).map_err(|e| e.to_string())?;
            std::hint::black_box(acc);
            Ok(n)
        }
    }
}

/// CPU time (user + system) of this process in seconds, from `/proc/self/stat`
/// (clock ticks, assumed 100 Hz as on every mainstream Linux).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Minimum CPU time spent per measurement, so that 10 ms ticks stay below 1%.
const MIN_CPU_SECONDS: f64 = 1.5;

/// Child: measures one mode on one file; prints
/// `samples best_wall_s median_wall_s cpu_s_per_parse peak_kb`.
fn child(path: &Path, mode: Mode, iters: usize) -> Result<(), String> {
    let input = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let base = proc_status_kb("VmRSS:").ok_or("no VmRSS in /proc/self/status")?;
    let samples = run_once(mode, &input)?;
    let hwm = proc_status_kb("VmHWM:").ok_or("no VmHWM in /proc/self/status")?;
    let mut times = Vec::with_capacity(iters);
    let cpu0 = cpu_seconds().ok_or("no /proc/self/stat")?;
    let mut cpu = 0.0;
    // Under a profiler (`BENCH_PARSE_FIXED=1`), exactly `iters` parses.
    let fixed = std::env::var_os("BENCH_PARSE_FIXED").is_some();
    while times.len() < iters || (!fixed && cpu < MIN_CPU_SECONDS) {
        let t = Instant::now();
        run_once(mode, &input)?;
        times.push(t.elapsed().as_secs_f64());
        cpu = cpu_seconds().ok_or("no /proc/self/stat")? - cpu0;
    }
    let per_parse = cpu / times.len() as f64;
    times.sort_by(f64::total_cmp);
    let best = times.first().copied().unwrap_or(f64::NAN);
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    println!(
        "{samples} {best} {median} {per_parse} {}",
        hwm.saturating_sub(base)
    );
    Ok(())
}

struct Row {
    samples: usize,
    best: f64,
    median: f64,
    cpu: f64,
    peak_kb: u64,
}

fn measure(path: &Path, mode: Mode, iters: usize) -> Result<Row, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .arg("--child")
        .arg(path)
        .arg(mode.id())
        .arg(iters.to_string())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    let bad = || format!("unexpected child output `{text}`");
    if f.len() != 5 {
        return Err(bad());
    }
    Ok(Row {
        samples: f[0].parse().map_err(|_| bad())?,
        best: f[1].parse().map_err(|_| bad())?,
        median: f[2].parse().map_err(|_| bad())?,
        cpu: f[3].parse().map_err(|_| bad())?,
        peak_kb: f[4].parse().map_err(|_| bad())?,
    })
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let (Some(path), Some(mode), Some(iters)) = (args.get(1), args.get(2), args.get(3)) else {
            return Err("usage: --child PATH MODE ITERS".into());
        };
        let mode = Mode::from_id(mode).ok_or("unknown mode")?;
        let iters = iters.parse().map_err(|_| "bad ITERS")?;
        return child(Path::new(path), mode, iters);
    }
    let mut iters = 7usize;
    let mut mb = 30usize;
    let mut write_to: Option<String> = None;
    let usage = "usage: bench_parse [--iters N] [--mb SIZE] [--write-payload PATH]";
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or(usage)?;
        let num = || v.parse::<usize>().map_err(|_| usage.to_string());
        match a.as_str() {
            "--iters" => iters = num()?,
            "--mb" => mb = num()?,
            "--write-payload" => write_to = Some(v.clone()),
            _ => return Err(format!("{usage}; got `{a}`")),
        }
    }

    let real_path = realdata_dir().join(format!("{REAL}.gz"));
    let real = cptriage::source::ingest::read_maybe_gzip(&real_path)
        .map_err(|e| e.to_string())
        .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8".to_string()))
        .map_err(|e| format!("{}: {e}", real_path.display()))?;
    let payload = synthesize(&real, mb * 1_000_000);
    if let Some(path) = write_to {
        return std::fs::write(&path, &payload).map_err(|e| format!("{path}: {e}"));
    }
    let synth_path = std::env::temp_dir().join(format!("cptriage-bench-parse-{}.prom", std::process::id()));
    std::fs::write(&synth_path, &payload).map_err(|e| e.to_string())?;
    let kept_families = {
        let mut n = 0;
        parse(
            payload.as_bytes(),
            &mut |f| {
                let k = triage_keep(f);
                n += usize::from(k);
                k
            },
            &mut |_: &SampleRef<'_>| {},
        )
        .map_err(|e| e.to_string())?;
        n
    };
    drop(payload);

    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("cores: {cpus}; iterations per mode: {iters} (prometheus-parse: {}); triage keeps {kept_families} families", iters.div_ceil(3));
    let mut result = Ok(());
    for (name, path) in [("synthetic", synth_path.as_path()), (REAL, real_path.as_path())] {
        let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len() as f64;
        println!("\n### {name}: {:.1} MB\n", size / 1e6);
        println!(
            "| mode | samples | MB/s (CPU time) | best wall MB/s | median wall MB/s | peak extra memory | vs (a), CPU time |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let mut base_best = None;
        for mode in Mode::all() {
            let n = if matches!(mode, Mode::PromParse) {
                iters.div_ceil(3)
            } else {
                iters
            };
            let row = match measure(path, mode, n) {
                Ok(r) => r,
                Err(e) => {
                    result = Err(format!("{} on {name}: {e}", mode.id()));
                    continue;
                }
            };
            let speed = |t: f64| size / t / 1e6;
            let ratio = base_best.map_or("1×".to_string(), |b: f64| format!("{:.1}×", b / row.cpu));
            if base_best.is_none() {
                base_best = Some(row.cpu);
            }
            println!(
                "| {} | {} | {:.0} | {:.0} | {:.0} | {:.1} MB | {} |",
                mode.label(),
                row.samples,
                speed(row.cpu),
                speed(row.best),
                speed(row.median),
                row.peak_kb as f64 / 1024.0,
                ratio
            );
        }
    }
    let _ = std::fs::remove_file(&synth_path);
    result
}
