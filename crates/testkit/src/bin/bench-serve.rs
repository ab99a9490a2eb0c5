//! `cptriage serve` benchmark: how long after Alertmanager's notification the
//! verdict of a one-hour window is ready.
//!
//! Run (release build of cptriage first):
//!
//! ```sh
//! cargo build --release
//! cargo run --release --bin bench-serve -- --duration 1h --runs 5
//! ```
//!
//! One cluster of a scenario (default: a slow etcd disk on one member) is
//! generated from the real captures as the scenario tests do, stretched to
//! `--duration` at 15 s with three apiservers and three etcd members, dated
//! to end three minutes after now, its fault 20 minutes before the end;
//! backfilled with `promtool tsdb create-blocks-from openmetrics` and served
//! by `/usr/bin/prometheus` on 127.0.0.1. `cptriage serve --by cluster` runs
//! beside it. Each run posts one notification (a new group, so nothing is
//! reused) whose alert started at the fault, with `--lookback` reaching back
//! to the window's start; the time measured is from the POST until
//! `GET /v1/triage/ID` answers 200 with the verdict (polled every 20 ms).
//! The same window through `cptriage diagnose --prometheus` is timed as a
//! reference. Every verdict is checked against the scenario's expectation.
//! Prints a Markdown table.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;

use cptriage::rules::load::RuleSet;
use cptriage::timefmt::{format_duration, parse_duration};
use cptriage_testkit::bench::{cptriage_binary, rfc3339, run, stretched, verdict, Generated, ROLE_SELECTORS};
use cptriage_testkit::{openmetrics, promrun};

#[derive(Parser, Debug)]
#[command(name = "bench-serve")]
struct Args {
    /// The scenario of the cluster (`testdata/scenarios/NAME.yaml`).
    #[arg(long, default_value = "etcd-disk-slow-one-member")]
    scenario: String,
    /// The window a notification judges (and the length of the data).
    #[arg(long, default_value = "1h")]
    duration: String,
    /// Notifications to time, one after the other.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Working directory (TSDB, serve's reports); removed first.
    #[arg(long, default_value = "/tmp/cptriage-bench-serve")]
    work: PathBuf,
    /// The cptriage binary (default: `cptriage` beside this one).
    #[arg(long)]
    cptriage: Option<PathBuf>,
}

const CLUSTER: &str = "bench";
/// The fault, and the alert, this long before the data's end.
const FAULT_BEFORE_END_MS: i64 = 20 * 60_000;
/// The data ends this long after now, so that every window up to now is inside it.
const AFTER_NOW_MS: i64 = 3 * 60_000;

/// A running `cptriage serve`; killed on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client() -> anyhow::Result<reqwest::blocking::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()?)
}

fn start_serve(
    bin: &std::path::Path,
    prom: u16,
    lookback: i64,
    work: &std::path::Path,
) -> anyhow::Result<(Serve, u16)> {
    let port = promrun::free_port();
    let mut args: Vec<String> = [
        "serve",
        "--prometheus",
        &format!("http://127.0.0.1:{prom}"),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--by",
        "cluster",
        "--lookback",
        &format_duration(lookback),
        "--step",
        "15s",
        "--reports",
        work.join("reports").to_str().context("path")?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(ROLE_SELECTORS.iter().map(|s| s.to_string()));
    let log = std::fs::File::create(work.join("serve.log"))?;
    let child = Command::new(bin)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let serve = Serve(child);
    let c = client()?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        let ok = c
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .is_ok_and(|r| r.status().is_success());
        if ok {
            return Ok((serve, port));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!(
        "serve not healthy within 30 s; see {}",
        work.join("serve.log").display()
    )
}

/// Alertmanager's webhook payload (version 4): one firing alert of group `k`.
fn notification(k: usize, starts: i64) -> serde_json::Value {
    let name = format!("BenchAlert{k}");
    serde_json::json!({
        "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"{name}\"}}"),
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "cptriage",
        "groupLabels": {"alertname": name},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": name, "cluster": CLUSTER, "severity": "critical"},
            "annotations": {},
            "startsAt": rfc3339(starts),
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "",
            "fingerprint": format!("{k:016x}"),
        }],
    })
}

/// Posts one notification and waits (at most 120 s) for its verdict:
/// seconds from the POST to the verdict, and (status, root cause).
fn one_triage(port: u16, k: usize, starts: i64) -> anyhow::Result<(f64, (String, Option<String>))> {
    let c = client()?;
    let base = format!("http://127.0.0.1:{port}");
    let t = Instant::now();
    let r = c
        .post(format!("{base}/v1/alertmanager"))
        .header("Content-Type", "application/json")
        .body(notification(k, starts).to_string())
        .send()?;
    if r.status().as_u16() != 202 {
        bail!("POST answered {}: {}", r.status(), r.text().unwrap_or_default());
    }
    let v: serde_json::Value = serde_json::from_str(&r.text()?)?;
    let id = v["triages"][0]["id"].as_str().context("triage id")?.to_string();
    while t.elapsed() < Duration::from_secs(120) {
        let r = c.get(format!("{base}/v1/triage/{id}")).send()?;
        if r.status().as_u16() == 200 {
            let secs = t.elapsed().as_secs_f64();
            let v: serde_json::Value = serde_json::from_str(&r.text()?)?;
            return Ok((secs, verdict(&v["verdict"])));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("triage {id} not ready within 120 s")
}

fn show(v: &(String, Option<String>)) -> String {
    format!("{} {}", v.0, v.1.as_deref().unwrap_or("-"))
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let bin = cptriage_binary(a.cptriage.as_deref())?;
    let duration = parse_duration(&a.duration).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    if duration <= FAULT_BEFORE_END_MS {
        bail!("--duration must be over 20m");
    }
    let rules = RuleSet::default_rules()?;
    let now = chrono::Utc::now().timestamp_millis();
    let end = (now / 60_000) * 60_000 + AFTER_NOW_MS;
    let start = end - duration;
    // The scenarios put their fault at 4 m.
    let shift = duration - FAULT_BEFORE_END_MS - 4 * 60_000;
    let g: Generated = stretched(&a.scenario, duration, shift, Some(start), &rules)?;
    if a.work.exists() {
        std::fs::remove_dir_all(&a.work)?;
    }
    let tsdb = a.work.join("tsdb");
    std::fs::create_dir_all(&tsdb)?;
    let om = a.work.join("cluster.om.txt");
    let w = openmetrics::write(&[(CLUSTER, &g.ds)], Some("cluster"), &om)?;
    let t = Instant::now();
    promrun::create_blocks(&om, &tsdb).map_err(anyhow::Error::msg)?;
    std::fs::remove_file(&om)?;
    eprintln!(
        "backfilled {} series, {} samples in {:.1} s",
        w.series,
        w.samples,
        t.elapsed().as_secs_f64()
    );
    let expected = (g.status.clone(), g.axis.clone());
    drop(g);
    let prom = promrun::Prometheus::start(&tsdb, "5m").map_err(anyhow::Error::msg)?;

    // The alert starts at the fault; the lookback reaches back to the
    // window's start (`duration` before now, when the triage runs).
    let starts = end - FAULT_BEFORE_END_MS;
    let lookback = duration - (now - starts);
    let (serve, port) = start_serve(&bin, prom.port, lookback, &a.work)?;
    println!("| run | notification → verdict | verdict |");
    println!("|---|---|---|");
    let mut secs = Vec::new();
    for k in 0..a.runs {
        let (s, v) = one_triage(port, k, starts)?;
        println!("| serve {} | {s:.2} s | {} |", k + 1, show(&v));
        if v != expected {
            bail!(
                "verdict {} differs from the scenario's {}",
                show(&v),
                show(&expected)
            );
        }
        secs.push(s);
    }
    drop(serve);
    let window_to = chrono::Utc::now().timestamp_millis();
    let mut args: Vec<String> = [
        "diagnose",
        "--prometheus",
        &format!("http://127.0.0.1:{}", prom.port),
        "--selector",
        &format!("{{cluster=\"{CLUSTER}\"}}"),
        "--from",
        &rfc3339(window_to - duration),
        "--to",
        &rfc3339(window_to),
        "--step",
        "15s",
        "-o",
        "json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(ROLE_SELECTORS.iter().map(|s| s.to_string()));
    let d = run(&bin, &args)?;
    let v: serde_json::Value =
        serde_json::from_str(&d.stdout).with_context(|| format!("diagnose JSON: {}", d.stderr))?;
    println!(
        "| diagnose (same window) | {:.2} s, peak RSS {:.0} MiB | {} |",
        d.wall.as_secs_f64(),
        d.rss_mib,
        show(&verdict(&v))
    );
    secs.sort_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (secs.first(), secs.last()) {
        println!(
            "\n{} series, {} samples, window {}: serve {lo:.2}–{hi:.2} s (median {:.2} s) from notification to verdict",
            w.series,
            w.samples,
            a.duration,
            secs[secs.len() / 2]
        );
    }
    Ok(())
}
