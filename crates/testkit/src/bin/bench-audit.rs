//! Audit-log reader benchmark, and the generator of test logs.
//!
//! ```sh
//! cargo run --release --bin bench-audit                      # 1 GiB log in /tmp (generated once), read 3 times
//! cargo run --release --bin bench-audit -- --size-mib 256 --runs 5
//! cargo run --release --bin bench-audit -- gen --out audit.log.gz --fault etcd --minutes 10 --fault-at 5
//! ```
//!
//! Reports MB/s of log text and events per second for the whole source
//! (line splitting, JSON decoding, timestamps, annotations, bucketing), the
//! peak RSS of the process (VmHWM), and for comparison how long a plain
//! `memchr` line count of the same bytes takes.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use cptriage::source::audit::{self, AuditConfig};
use cptriage_testkit::scenario::audit::{AuditFault, AuditGen};

const T0: i64 = 1_767_225_600_000;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// CPU seconds (user + system) of this process so far.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime), counted after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = l.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn generate(path: &PathBuf, g: &AuditGen) -> std::io::Result<u64> {
    let f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    if path.extension().is_some_and(|e| e == "gz") {
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        let n = g.write(&mut e)?;
        e.finish()?.flush()?;
        Ok(n)
    } else {
        let mut f = f;
        let n = g.write(&mut f)?;
        f.flush()?;
        Ok(n)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("gen") {
        let out = PathBuf::from(arg(&args, "--out").ok_or("gen needs --out FILE")?);
        let fault = arg(&args, "--fault").unwrap_or_else(|| "none".into());
        let fault = AuditFault::parse(&fault)
            .ok_or("--fault: none, etcd, apf, webhook, auth, etcd-unannotated or list-storm")?;
        let minutes: i64 = arg(&args, "--minutes").unwrap_or_else(|| "10".into()).parse()?;
        let at: i64 = arg(&args, "--fault-at").unwrap_or_else(|| "5".into()).parse()?;
        let rate: f64 = arg(&args, "--rate").unwrap_or_else(|| "40".into()).parse()?;
        let start: i64 = arg(&args, "--start-ms")
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(T0);
        let g = AuditGen {
            start,
            duration: minutes * 60_000,
            rate,
            fault,
            fault_from: start + at * 60_000,
            seed: 42,
        };
        let n = generate(&out, &g)?;
        eprintln!("wrote {} ({n} counted events)", out.display());
        return Ok(());
    }
    let size_mib: u64 = arg(&args, "--size-mib")
        .unwrap_or_else(|| "1024".into())
        .parse()?;
    let runs: usize = arg(&args, "--runs").unwrap_or_else(|| "3".into()).parse()?;
    let path = PathBuf::from(
        arg(&args, "--file").unwrap_or_else(|| format!("/tmp/cptriage-audit-{size_mib}MiB.log")),
    );
    if !path.exists() {
        // ~1 KB per line, two lines per request: rate × minutes to reach the size.
        let minutes = (size_mib as f64 * 1024.0 * 1024.0 / 1000.0 / 2.0 / 200.0 / 60.0).ceil() as i64;
        let g = AuditGen {
            start: T0,
            duration: minutes * 60_000,
            rate: 200.0,
            fault: AuditFault::EtcdSlow,
            fault_from: T0 + minutes * 30_000,
            seed: 42,
        };
        eprintln!("generating {} ({minutes} min at 200 requests/s)…", path.display());
        generate(&path, &g)?;
    }
    let bytes = std::fs::metadata(&path)?.len() as f64;
    let t = Instant::now();
    let mut lines = 0u64;
    audit::for_each_line(std::fs::File::open(&path)?, usize::MAX, |_, _| lines += 1)?;
    let scan = t.elapsed().as_secs_f64();
    println!(
        "file {} ({:.0} MiB, {lines} lines); line splitting alone: {:.2} s ({:.0} MB/s)",
        path.display(),
        bytes / 1048576.0,
        scan,
        bytes / 1e6 / scan
    );
    for run in 0..runs {
        let t = Instant::now();
        let c0 = cpu_seconds();
        let (_agg, sum) = audit::read(std::slice::from_ref(&path), &AuditConfig::default())?;
        let s = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - c0;
        println!(
            "run {}: {:.2} s wall ({:.0} MB/s), {:.2} s CPU ({:.0} MB per CPU-second), {:.2} M lines/s, {} events counted, {} slow, {} bad lines",
            run + 1,
            s,
            bytes / 1e6 / s,
            cpu,
            bytes / 1e6 / cpu.max(0.01),
            sum.lines as f64 / 1e6 / s,
            sum.events,
            sum.slow_requests,
            sum.bad_lines
        );
    }
    if let Some(m) = peak_rss_mib() {
        println!("peak RSS {m:.0} MiB");
    }
    Ok(())
}
