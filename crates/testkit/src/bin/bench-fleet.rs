//! Fleet benchmark: `cptriage diagnose --prometheus URL --by cluster` against a
//! real Prometheus holding many clusters, next to the same fleet judged one
//! cluster at a time.
//!
//! Run (release build of cptriage first):
//!
//! ```sh
//! cargo build --release
//! cargo run --release --bin bench-fleet -- --clusters 200 --duration 1h
//! ```
//!
//! Five scenarios (healthy, a slow etcd disk on one member, APF queue full, a
//! 401 storm, etcd quota full) are generated from the real captures as the
//! scenario tests do, stretched to `--duration` at 15 s with three apiservers
//! and three etcd members, the faults in the last 20 minutes (each scenario at
//! another onset). Cluster `cNNN` holds scenario `NNN % 5`, with a `cluster`
//! label on every series. The fleet is backfilled into a TSDB with `promtool
//! tsdb create-blocks-from openmetrics`, `--batch` clusters per OpenMetrics
//! file (each removed once turned into blocks, so the disk holds one batch of
//! text at a time), and served by `/usr/bin/prometheus` on 127.0.0.1.
//!
//! Measured: wall time, requests Prometheus answered (its own
//! `prometheus_http_requests_total`), and the peak RSS of the cptriage process
//! (`VmHWM` of its `/proc` status, polled every 20 ms), for the fleet run and
//! for `--single` runs with `--selector '{cluster="cNNN"}'`; every verdict is
//! checked against its scenario's expectation. Prints a Markdown table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;

use cptriage::rules::load::RuleSet;
use cptriage::source::Dataset;
use cptriage::timefmt::parse_duration;
use cptriage_testkit::bench::{
    cptriage_binary, rfc3339, run, stretched, verdict, Generated, Run, ROLE_SELECTORS,
};
use cptriage_testkit::{openmetrics, promrun};

const SCENARIOS: [&str; 5] = [
    "healthy",
    "etcd-disk-slow-one-member",
    "apf-queue-full",
    "auth-401-storm",
    "etcd-quota-nospace",
];

#[derive(Parser, Debug)]
#[command(name = "bench-fleet")]
struct Args {
    /// Clusters in the fleet.
    #[arg(long, default_value_t = 200)]
    clusters: usize,
    /// Length of the data (a Prometheus duration).
    #[arg(long, default_value = "1h")]
    duration: String,
    /// Working directory (TSDB, OpenMetrics batches); reused when it already
    /// holds a TSDB of the same shape.
    #[arg(long, default_value = "/tmp/cptriage-bench-fleet")]
    work: PathBuf,
    /// Clusters per OpenMetrics file.
    #[arg(long, default_value_t = 25)]
    batch: usize,
    /// Single-cluster runs to time (the first N clusters; 0: none).
    #[arg(long)]
    single: Option<usize>,
    /// The cptriage binary (default: `cptriage` beside this one).
    #[arg(long)]
    cptriage: Option<PathBuf>,
    /// Range requests in flight (`--prometheus-concurrency`).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Keep only the series of these resources (the `resource` label, or
    /// `type` of `etcd_request_*`; series without either are all kept), so
    /// that a fleet of hundreds fits this machine; `all` keeps every series
    /// (about 35,000 per cluster, 8 million samples an hour).
    #[arg(long, default_value = "pods,leases,nodes,configmaps,events,secrets")]
    resources: String,
    /// Delete the working directory when done.
    #[arg(long)]
    remove: bool,
    /// Add this many milliseconds to every request (a proxy on 127.0.0.1
    /// that holds each request before passing it on), as a remote query
    /// frontend (Thanos, Mimir) adds round trips and per-request work.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// `--prometheus-max-samples` of the fleet run (default: cptriage's).
    #[arg(long)]
    max_samples: Option<u64>,
    /// Also backfill the signal rules of `rules export --by cluster --window
    /// 1m` into the TSDB (`promtool tsdb create-blocks-from rules`, every 15
    /// s, once per working directory) and time the fleet from recorded
    /// signals beside the raw fleet (`--prometheus-recorded off`).
    #[arg(long)]
    recorded: bool,
    /// Fleet runs of each path, alternating (recorded, raw, recorded, …).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Only build the TSDB (and, with `--recorded`, backfill the signal
    /// rules), then stop: the backfill can run at a lower priority (`nice`)
    /// than the timed runs of a second invocation on the same `--work`.
    #[arg(long)]
    prepare: bool,
}

/// A TCP proxy on 127.0.0.1 that forwards to `port`, holding each chunk the
/// client sends for `delay` before passing it on (one HTTP request is one
/// chunk); answers flow back as they come. Returns the proxy's port.
fn delay_proxy(port: u16, delay: Duration) -> anyhow::Result<u16> {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let proxy_port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            let (mut s_read, mut c_write) = (server, client);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = c_read.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    std::thread::sleep(delay);
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_write.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
                let _ = c_write.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    Ok(proxy_port)
}

fn cluster_name(i: usize) -> String {
    format!("c{i:03}")
}

/// Backfills the fleet into `tsdb`, `batch` clusters per OpenMetrics file.
fn backfill(
    gens: &[Generated],
    clusters: usize,
    batch: usize,
    resources: &str,
    work: &Path,
    tsdb: &Path,
) -> anyhow::Result<(usize, usize)> {
    let keep: Option<Vec<&str>> = (resources != "all").then(|| resources.split(',').map(str::trim).collect());
    std::fs::create_dir_all(tsdb)?;
    let om = work.join("batch.om.txt");
    let (mut series, mut samples) = (0, 0);
    for first in (0..clusters).step_by(batch.max(1)) {
        let names: Vec<String> = (first..(first + batch).min(clusters)).map(cluster_name).collect();
        let parts: Vec<(&str, &Dataset)> = names
            .iter()
            .enumerate()
            .map(|(k, n)| (n.as_str(), &gens[(first + k) % gens.len()].ds))
            .collect();
        let w = openmetrics::write_filtered(&parts, Some("cluster"), &om, |_, l| {
            let Some(keep) = &keep else { return true };
            match l.get("resource").or_else(|| l.get("type")) {
                Some(r) => keep.contains(&r.split('.').next().unwrap_or(r)),
                None => true,
            }
        })?;
        series += w.series;
        samples += w.samples;
        let size = std::fs::metadata(&om).map(|m| m.len()).unwrap_or(0);
        let t = Instant::now();
        promrun::create_blocks(&om, tsdb).map_err(anyhow::Error::msg)?;
        std::fs::remove_file(&om)?;
        eprintln!(
            "backfilled {}..{} ({:.0} MB of text, {} samples) in {:.1} s",
            names[0],
            names[names.len() - 1],
            size as f64 / 1e6,
            w.samples,
            t.elapsed().as_secs_f64()
        );
    }
    Ok((series, samples))
}

/// Requests Prometheus has answered so far, by handler.
fn requests(port: u16) -> anyhow::Result<BTreeMap<String, f64>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let text = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()?
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()?
        .text()?;
    let mut out = BTreeMap::new();
    for l in text
        .lines()
        .filter(|l| l.starts_with("prometheus_http_requests_total{"))
    {
        let Some(h) = l.split("handler=\"").nth(1).and_then(|r| r.split('"').next()) else {
            continue;
        };
        let v: f64 = l.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        if h.starts_with("/api/v1/") {
            *out.entry(h.to_string()).or_insert(0.0) += v;
        }
    }
    Ok(out)
}

fn delta(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> usize {
    b.iter()
        .map(|(k, v)| v - a.get(k).copied().unwrap_or(0.0))
        .sum::<f64>() as usize
}

fn diagnose_args(url: &str, from: i64, to: i64, concurrency: usize) -> Vec<String> {
    [
        "diagnose",
        "--prometheus",
        url,
        "--from",
        &rfc3339(from),
        "--to",
        &rfc3339(to),
        "--step",
        "15s",
        "--prometheus-concurrency",
        &concurrency.to_string(),
        "-o",
        "json",
    ]
    .iter()
    .chain(ROLE_SELECTORS.iter())
    .map(|s| s.to_string())
    .collect()
}

/// One fleet run and what it judged.
struct FleetRun {
    run: Run,
    requests: usize,
    judged: usize,
    wrong: Vec<String>,
    /// What stderr says of the queries (`N signal queries (…)`).
    queries: String,
}

fn fleet_run(
    bin: &Path,
    url: &str,
    port: u16,
    (from, to): (i64, i64),
    a: &Args,
    recorded: bool,
    expected: &[(String, Option<String>)],
) -> anyhow::Result<FleetRun> {
    let before = requests(port)?;
    let mut args = diagnose_args(url, from, to, a.concurrency);
    args.extend(["--by".into(), "cluster".into()]);
    if let Some(n) = a.max_samples {
        args.extend(["--prometheus-max-samples".into(), n.to_string()]);
    }
    if !recorded && a.recorded {
        args.extend(["--prometheus-recorded".into(), "off".into()]);
    }
    let run = run(bin, &args)?;
    let requests = delta(&before, &requests(port)?);
    let v: serde_json::Value = serde_json::from_str(&run.stdout)
        .with_context(|| format!("fleet JSON (exit {:?}): {}", run.code, run.stderr))?;
    let arr = v.as_array().context("array")?;
    let mut wrong = Vec::new();
    for x in arr {
        let c = x["cluster"].as_str().unwrap_or_default();
        let i: usize = c[1..].parse().unwrap_or(0);
        if verdict(x) != expected[i % expected.len()] {
            wrong.push(format!(
                "{c}: {:?}, want {:?}",
                verdict(x),
                expected[i % expected.len()]
            ));
        }
        if recorded
            && x["recorded_signals"]["recorded"]
                .as_array()
                .is_none_or(Vec::is_empty)
        {
            wrong.push(format!("{c}: no recorded signal read: {}", x["recorded_signals"]));
        }
    }
    let queries = run
        .stderr
        .lines()
        .find_map(|l| l.split_once(" clusters judged from ").map(|(_, r)| r.to_string()))
        .unwrap_or_default();
    Ok(FleetRun {
        judged: arr.len(),
        run,
        requests,
        wrong,
        queries,
    })
}

/// The load average of the machine (1, 5, 15 minutes).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Backfills the signal rules of `rules export --by cluster --window 1m`
/// over `[from, to]` into `tsdb`, evaluated every 15 s by a Prometheus on
/// the TSDB (once: a marker file in `work` remembers it).
fn backfill_recorded(bin: &Path, work: &Path, tsdb: &Path, span: (i64, i64)) -> anyhow::Result<()> {
    let marker = work.join("recorded");
    let mut args: Vec<String> = [
        "rules",
        "export",
        "--format",
        "prometheus",
        "--by",
        "cluster",
        "--window",
        "1m",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(ROLE_SELECTORS.iter().map(|s| s.to_string()));
    let out = Command::new(bin).args(&args).output()?;
    if !out.status.success() {
        bail!("rules export: {}", String::from_utf8_lossy(&out.stderr));
    }
    let rules = promrun::signal_rules(&String::from_utf8_lossy(&out.stdout)).map_err(anyhow::Error::msg)?;
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(rules.as_str()) {
        return Ok(());
    }
    let path = work.join("signals.rules.yaml");
    std::fs::write(&path, &rules)?;
    let blocks = work.join("recorded-blocks");
    let _ = std::fs::remove_dir_all(&blocks);
    let t = Instant::now();
    {
        // One rule over the whole fleet selects far more than the default
        // 50,000,000 samples.
        let prom = promrun::Prometheus::start_with(
            tsdb,
            "5m",
            &[
                "--query.max-samples=2000000000".into(),
                "--query.timeout=30m".into(),
            ],
        )
        .map_err(anyhow::Error::msg)?;
        promrun::create_blocks_from_rules(prom.port, &path, span, "15s", &blocks)
            .map_err(anyhow::Error::msg)?;
    }
    let n = promrun::move_blocks(&blocks, tsdb).map_err(anyhow::Error::msg)?;
    std::fs::write(&marker, &rules)?;
    eprintln!(
        "backfilled the signal rules ({n} blocks) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let bin = cptriage_binary(a.cptriage.as_deref())?;
    let duration = parse_duration(&a.duration).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    let rules = RuleSet::default_rules()?;
    let t0 = Instant::now();
    // Faults in the last 20 minutes (the shipped scenarios put them at 4 m of
    // 8 m), each scenario a minute later than the one before.
    let gens: Vec<Generated> = SCENARIOS
        .iter()
        .enumerate()
        .map(|(k, n)| {
            stretched(
                n,
                duration,
                duration - 20 * 60_000 + k as i64 * 60_000,
                None,
                &rules,
            )
        })
        .collect::<anyhow::Result<_>>()?;
    let (from, to) = gens[0].ds.window().context("window")?;
    eprintln!(
        "generated {} scenarios in {:.1} s",
        gens.len(),
        t0.elapsed().as_secs_f64()
    );
    let shape = format!(
        "{} clusters, {}, {from}..{to}, resources {}\n",
        a.clusters, a.duration, a.resources
    );
    let tsdb = a.work.join("tsdb");
    let shape_file = a.work.join("shape");
    let reuse = std::fs::read_to_string(&shape_file).ok().as_deref() == Some(shape.as_str());
    let (mut series, mut samples) = (0, 0);
    let mut backfill_s = 0.0;
    if !reuse {
        if a.work.exists() {
            std::fs::remove_dir_all(&a.work)?;
        }
        std::fs::create_dir_all(&a.work)?;
        let t = Instant::now();
        (series, samples) = backfill(&gens, a.clusters, a.batch, &a.resources, &a.work, &tsdb)?;
        backfill_s = t.elapsed().as_secs_f64();
        std::fs::write(&shape_file, &shape)?;
    }
    let expected: Vec<(String, Option<String>)> =
        gens.iter().map(|g| (g.status.clone(), g.axis.clone())).collect();
    drop(gens);
    if a.recorded {
        backfill_recorded(&bin, &a.work, &tsdb, (from, to))?;
    }
    if a.prepare {
        eprintln!("prepared {} (load {})", a.work.display(), loadavg());
        return Ok(());
    }
    let prom = promrun::Prometheus::start(&tsdb, "5m").map_err(anyhow::Error::msg)?;
    let url = if a.latency_ms > 0 {
        let port = delay_proxy(prom.port, Duration::from_millis(a.latency_ms))?;
        eprintln!("requests pass a proxy adding {} ms each", a.latency_ms);
        format!("http://127.0.0.1:{port}")
    } else {
        format!("http://127.0.0.1:{}", prom.port)
    };

    // The fleet, from the queries of one diagnosis: recorded and raw
    // alternating.
    let paths: Vec<bool> = if a.recorded {
        vec![true, false]
    } else {
        vec![false]
    };
    let mut fleets: Vec<(bool, FleetRun)> = Vec::new();
    for _ in 0..a.repeat.max(1) {
        for &recorded in &paths {
            let f = fleet_run(&bin, &url, prom.port, (from, to), &a, recorded, &expected)?;
            eprintln!(
                "fleet ({}): {:.1} s, {} requests, {:.0} MiB, {} wrong; load {}",
                if recorded { "recorded" } else { "raw" },
                f.run.wall.as_secs_f64(),
                f.requests,
                f.run.rss_mib,
                f.wrong.len(),
                loadavg()
            );
            fleets.push((recorded, f));
        }
    }
    let fleet = &fleets[0].1;
    let wrong = fleet.wrong.clone();

    // The same fleet one cluster at a time.
    let single_n = a.single.unwrap_or(a.clusters).min(a.clusters);
    let before = requests(prom.port)?;
    let mut single_wall = Duration::ZERO;
    let mut single_rss: f64 = 0.0;
    let mut single_wrong = 0;
    for i in 0..single_n {
        let mut args = diagnose_args(&url, from, to, a.concurrency);
        args.extend([
            "--selector".into(),
            format!("{{cluster=\"{}\"}}", cluster_name(i)),
        ]);
        if a.recorded {
            args.extend(["--prometheus-recorded".into(), "off".into()]);
        }
        let r = run(&bin, &args)?;
        single_wall += r.wall;
        single_rss = single_rss.max(r.rss_mib);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_default();
        if verdict(&v) != expected[i % expected.len()] {
            single_wrong += 1;
        }
    }
    let single_requests = delta(&before, &requests(prom.port)?);

    println!(
        "\n{} clusters × 3 apiservers × 3 etcd members, {} at 15 s, resources: {}{}",
        a.clusters,
        a.duration,
        a.resources,
        if a.latency_ms > 0 {
            format!(", {} ms added to every request", a.latency_ms)
        } else {
            String::new()
        }
    );
    if !reuse {
        println!(
            "backfilled {series} series, {samples} samples in {backfill_s:.0} s ({} per batch)",
            a.batch
        );
    }
    println!();
    println!("| run | wall | Prometheus requests | peak RSS | verdicts right |");
    println!("|---|---|---|---|---|");
    for (recorded, f) in &fleets {
        println!(
            "| fleet (`--by cluster`{}): {} | {:.1} s | {} | {:.0} MiB | {}/{} |",
            if *recorded {
                ", recorded signals"
            } else if a.recorded {
                ", `--prometheus-recorded off`"
            } else {
                ""
            },
            f.queries,
            f.run.wall.as_secs_f64(),
            f.requests,
            f.run.rss_mib,
            f.judged - f.wrong.len(),
            a.clusters
        );
    }
    let fleet_requests = fleet.requests;
    let fleet = &fleet.run;
    if single_n > 0 {
        let scale = a.clusters as f64 / single_n as f64;
        println!(
            "| {single_n} single-cluster runs{} | {:.1} s{} | {single_requests}{} | {single_rss:.0} MiB (largest) | {}/{single_n} |",
            if single_n < a.clusters { " (timed)" } else { "" },
            single_wall.as_secs_f64(),
            if single_n < a.clusters { format!(" (× {scale:.0}: {:.0} s)", single_wall.as_secs_f64() * scale) } else { String::new() },
            if single_n < a.clusters { format!(" (× {scale:.0}: {:.0})", single_requests as f64 * scale) } else { String::new() },
            single_n - single_wrong
        );
        println!(
            "\nfleet speed-up: {:.0}× (wall), {:.0}× (requests)",
            single_wall.as_secs_f64() * scale / fleet.wall.as_secs_f64(),
            single_requests as f64 * scale / fleet_requests.max(1) as f64
        );
    }
    for w in wrong.iter().take(10) {
        println!("wrong: {w}");
    }
    drop(prom);
    if a.remove {
        std::fs::remove_dir_all(&a.work)?;
    }
    Ok(())
}
