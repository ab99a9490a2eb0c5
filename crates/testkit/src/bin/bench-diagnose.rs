//! End-to-end benchmark of `cptriage diagnose --dump DIR` on a large capture.
//!
//! Run: `cargo run --release --bin bench-diagnose -- --dir /tmp/cptriage-scale`
//! (the capture is generated with `gen-scale`'s defaults when `DIR` has no
//! `manifest.yaml`; `--remove` deletes it afterwards).
//!
//! Measures, on warm page cache: `gzip -dc` of every snapshot file to
//! `/dev/null` (one process, and one per core over halves of the files), then
//! `diagnose` in a child process (this binary re-run with `--child`, so the
//! child holds only what `cptriage diagnose` holds): wall time, user+system CPU,
//! peak RSS (`/usr/bin/time`, i.e. the child's wait4 rusage; else the child's own
//! `VmHWM`), and throughput over compressed and uncompressed bytes. Prints a
//! Markdown table and the verdict (which must be the generated etcd disk fault).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Parser;

use cptriage_testkit::scenario::scale::{self, ScaleOptions};

#[derive(Parser, Debug)]
#[command(name = "bench-diagnose")]
struct Args {
    /// The capture directory (generated when it has no manifest.yaml).
    #[arg(long, default_value = "/tmp/cptriage-scale")]
    dir: PathBuf,
    /// Directory holding the real base captures (for generation).
    #[arg(long, default_value_os_t = cptriage_testkit::realdata_dir())]
    realdata: PathBuf,
    /// Resource multiplier when generating.
    #[arg(long, default_value_t = 8)]
    resources: usize,
    /// Capture length in seconds when generating.
    #[arg(long, default_value_t = 3600)]
    duration: u64,
    /// Runs of diagnose (the table shows each).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Delete the capture directory when done.
    #[arg(long)]
    remove: bool,
    /// Measure this cptriage binary instead of the library this benchmark
    /// was built with (e.g. an older build, for before/after numbers).
    #[arg(long, value_name = "PATH")]
    cptriage: Option<PathBuf>,
    /// Only load the capture as `diagnose` does (the default rules' families)
    /// and print the series and points kept and the peak RSS.
    #[arg(long)]
    load_only: bool,
    /// With `--load-only`: keep only the identity families (measures reading,
    /// decompressing and parsing without building the store).
    #[arg(long, requires = "load_only")]
    keep_none: bool,
    /// Internal: run `cptriage diagnose -o json --dump DIR` in this process.
    #[arg(long, hide = true)]
    child: bool,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if a.child {
        return child(&a.dir);
    }
    if a.load_only {
        return load_only(&a.dir, a.keep_none);
    }
    if !a.dir.join("manifest.yaml").is_file() {
        let opts = ScaleOptions {
            realdata: a.realdata.clone(),
            resources: a.resources,
            duration_s: a.duration,
            ..ScaleOptions::default()
        };
        eprintln!("generating {} (resources x{}) …", a.dir.display(), a.resources);
        let t0 = Instant::now();
        let s = scale::generate(&opts, &a.dir)?;
        eprintln!(
            "generated {} files in {:.1}s: {:.0} MB gzip, {:.0} MB text",
            s.files,
            t0.elapsed().as_secs_f64(),
            s.compressed_bytes as f64 / 1e6,
            s.raw_bytes as f64 / 1e6
        );
    }
    let files = snapshot_files(&a.dir)?;
    let gz: u64 = files.iter().map(|f| f.1).sum();
    let raw: u64 = files.iter().map(|f| f.2).sum();
    let paths: Vec<&Path> = files.iter().map(|f| f.0.as_path()).collect();
    println!(
        "capture: {} ({} files, {:.0} MB gzip, {:.0} MB text)\n",
        a.dir.display(),
        files.len(),
        gz as f64 / 1e6,
        raw as f64 / 1e6
    );
    println!("load average before: {}", loadavg());
    // Warm the page cache so that every measurement reads from memory.
    for p in &paths {
        let _ = std::fs::read(p);
    }
    println!("| run | load avg (after) | wall s | CPU s | peak RSS MB | MB/s gzip | MB/s text |");
    println!("|---|---|---|---|---|---|---|");
    let row = |name: &str, wall: f64, cpu: Option<f64>, rss: Option<f64>| {
        println!(
            "| {name} | {} | {wall:.2} | {} | {} | {:.0} | {:.0} |",
            loadavg(),
            cpu.map_or("-".into(), |c| format!("{c:.2}")),
            rss.map_or("-".into(), |r| format!("{r:.0}")),
            gz as f64 / 1e6 / wall,
            raw as f64 / 1e6 / wall
        );
    };
    let (wall1, cpu1) = zcat(&[&paths[..]])?;
    row("`gzip -dc` (1 process)", wall1, Some(cpu1), None);
    let (l, r) = paths.split_at(paths.len() / 2);
    let (wall2, cpu2) = zcat(&[l, r])?;
    row("`gzip -dc` (2 processes)", wall2, Some(cpu2), None);
    let mut verdict = String::new();
    for k in 0..a.runs.max(1) {
        let m = run_diagnose(&a.dir, a.cptriage.as_deref())?;
        row(&format!("`diagnose` #{}", k + 1), m.wall, m.cpu, m.rss_mb);
        verdict = m.verdict;
    }
    println!("\nverdict: {verdict}\nload average after: {}", loadavg());
    if a.remove {
        std::fs::remove_dir_all(&a.dir).with_context(|| format!("removing {}", a.dir.display()))?;
    }
    Ok(())
}

/// The snapshot files of a capture: path, size on disk, uncompressed size
/// (from the gzip trailer; the size itself for plain files).
fn snapshot_files(dir: &Path) -> anyhow::Result<Vec<(PathBuf, u64, u64)>> {
    let mut out = Vec::new();
    let mut targets: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    targets.sort();
    for t in targets {
        let mut fs: Vec<PathBuf> = std::fs::read_dir(&t)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        fs.sort();
        for f in fs {
            let len = std::fs::metadata(&f)?.len();
            let raw = if f.extension().is_some_and(|e| e == "gz") {
                let mut file = std::fs::File::open(&f)?;
                use std::io::Seek as _;
                file.seek(std::io::SeekFrom::End(-4))?;
                let mut b = [0u8; 4];
                file.read_exact(&mut b)?;
                u64::from(u32::from_le_bytes(b))
            } else {
                len
            };
            out.push((f, len, raw));
        }
    }
    if out.is_empty() {
        bail!("{}: no snapshot files", dir.display());
    }
    Ok(out)
}

/// Wall time and user+system CPU (the children's wait4 rusage) of
/// decompressing every group of files with its own `gzip -dc`.
fn zcat(groups: &[&[&Path]]) -> anyhow::Result<(f64, f64)> {
    use wait4::Wait4 as _;
    let t0 = Instant::now();
    let mut children = Vec::new();
    for g in groups {
        children.push(
            Command::new("gzip")
                .arg("-dc")
                .args(g.iter())
                .stdout(Stdio::null())
                .spawn()
                .context("running gzip")?,
        );
    }
    let mut cpu = 0.0;
    for mut c in children {
        let r = c.wait4()?;
        if !r.status.success() {
            bail!("gzip -dc failed: {}", r.status);
        }
        cpu += (r.rusage.utime + r.rusage.stime).as_secs_f64();
    }
    Ok((t0.elapsed().as_secs_f64(), cpu))
}

struct Measured {
    wall: f64,
    cpu: Option<f64>,
    rss_mb: Option<f64>,
    verdict: String,
}

fn run_diagnose(dir: &Path, cptriage: Option<&Path>) -> anyhow::Result<Measured> {
    let exe = match cptriage {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?,
    };
    let time = Path::new("/usr/bin/time");
    let report = std::env::temp_dir().join(format!("bench-diagnose-{}.time", std::process::id()));
    let mut cmd = if time.is_file() {
        let mut c = Command::new(time);
        c.arg("-f").arg("%e %U %S %M").arg("-o").arg(&report).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    match cptriage {
        Some(_) => cmd.args(["diagnose", "-o", "json", "--dump"]).arg(dir),
        None => cmd.arg("--child").arg("--dir").arg(dir),
    };
    let t0 = Instant::now();
    let out = cmd.stderr(Stdio::piped()).stdout(Stdio::piped()).output()?;
    let wall = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = serde_json::from_str(&stdout)
        .with_context(|| format!("diagnose printed no JSON report; stderr:\n{stderr}"))?;
    let rc = &json["root_cause"];
    let verdict = format!(
        "status {} · root cause {}/{} since {} on {}",
        json["status"].as_str().unwrap_or("?"),
        rc["axis"].as_str().unwrap_or("-"),
        rc["sub_axis"].as_str().unwrap_or("-"),
        rc["onset"].as_str().unwrap_or("-"),
        rc["instances"]
            .as_array()
            .map(|v| v.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    );
    let (mut cpu, mut rss_mb) = (None, None);
    if let Ok(t) = std::fs::read_to_string(&report) {
        let _ = std::fs::remove_file(&report);
        // The last line holds the format (earlier ones report a non-zero exit).
        let f: Vec<f64> = t
            .lines()
            .last()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if let [_, u, s, m] = f[..] {
            cpu = Some(u + s);
            rss_mb = Some(m / 1024.0);
        }
    }
    if rss_mb.is_none() {
        rss_mb = stderr
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb / 1024.0);
    }
    Ok(Measured {
        wall,
        cpu,
        rss_mb,
        verdict,
    })
}

/// Runs `cptriage diagnose -o json --dump DIR` as the `cptriage` binary does,
/// then prints this process's peak RSS (`VmHWM`) to stderr.
fn child(dir: &Path) -> anyhow::Result<()> {
    let argv = ["cptriage", "diagnose", "-o", "json", "--dump"];
    let cli = cptriage::cli::Cli::try_parse_from(
        argv.iter().map(|s| s.into()).chain([dir.as_os_str().to_owned()]),
    )?;
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    let _code = cptriage::run(cli, &mut out, &mut err)?;
    if let Ok(s) = std::fs::read_to_string("/proc/self/status") {
        if let Some(l) = s.lines().find(|l| l.starts_with("VmHWM:")) {
            eprintln!("{l}");
        }
    }
    Ok(())
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages (other work on the machine
/// shows in wall times, not in CPU times).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Loads the capture with the families the default rules read and prints what
/// the store holds, the load time and this process's peak RSS.
fn load_only(dir: &Path, keep_none: bool) -> anyhow::Result<()> {
    use cptriage::source::capture::{self, DumpArg};
    use cptriage::source::ingest::Keep;
    let rules = cptriage::rules::load::RuleSet::default_rules()?;
    let keep = Keep::Names(if keep_none {
        Default::default()
    } else {
        rules.referenced_metrics()
    });
    let t0 = Instant::now();
    let ds = capture::load(&[DumpArg::parse(&dir.display().to_string())?], &keep)?;
    let secs = t0.elapsed().as_secs_f64();
    let series = ds.store.series().len();
    let points = ds.store.point_count();
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.to_string()))
        .unwrap_or_default();
    let bytes = ds.store.point_bytes();
    let labels: usize = ds.store.series().iter().map(|s| s.labels.len()).sum();
    println!(
        "loaded {} targets in {secs:.2}s: {series} series ({labels} labels), {points} points in {:.1} MB compressed ({:.2} bytes/point; {:.0} MB as 16-byte points), {} warnings; {hwm}",
        ds.targets.len(),
        bytes as f64 / 1e6,
        bytes as f64 / points.max(1) as f64,
        points as f64 * 16.0 / 1e6,
        ds.warnings.len()
    );
    Ok(())
}
