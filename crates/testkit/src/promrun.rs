//! A real Prometheus (`/usr/bin/prometheus`) on TSDB blocks a test created with
//! `promtool tsdb create-blocks-from openmetrics`: started on a free
//! 127.0.0.1 port, waited for with a bounded loop, killed by its pid on drop
//! (also when the test panics). Used by the tests against a real Prometheus
//! and by the fleet benchmark.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const PROMETHEUS: &str = "/usr/bin/prometheus";
pub const PROMTOOL: &str = "/usr/bin/promtool";

/// Whether the Prometheus binaries are installed (`scripts/test` installs them).
pub fn available() -> bool {
    Path::new(PROMETHEUS).exists() && Path::new(PROMTOOL).exists()
}

/// Fails the test when Prometheus or promtool is missing: a test that needs
/// a real part never skips (`scripts/test` installs them).
pub fn require() {
    assert!(
        available(),
        "{PROMETHEUS} or {PROMTOOL} is not installed (scripts/test installs them)"
    );
}

/// Runs `promtool tsdb create-blocks-from openmetrics FILE DIR`.
pub fn create_blocks(openmetrics: &Path, dir: &Path) -> Result<(), String> {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(openmetrics)
        .arg(dir);
    run_promtool(cmd, "create-blocks")
}

/// Runs a promtool command; its output is the error when it fails.
fn run_promtool(mut cmd: Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("run promtool: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "promtool {what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// Runs `promtool tsdb create-blocks-from rules` over `[from, to]` (unix
/// ms, whole seconds) against the Prometheus at `port`, evaluating the rules
/// of `rules` every `interval` into blocks in `out`.
pub fn create_blocks_from_rules(
    port: u16,
    rules: &Path,
    (from, to): (i64, i64),
    interval: &str,
    out: &Path,
) -> Result<(), String> {
    let mut cmd = Command::new(PROMTOOL);
    cmd.args(["tsdb", "create-blocks-from", "rules"])
        .arg(format!("--start={}", from / 1000))
        .arg(format!("--end={}", to / 1000))
        .arg(format!("--url=http://127.0.0.1:{port}"))
        .arg(format!("--eval-interval={interval}"))
        .arg(format!("--output-dir={}", out.display()))
        .arg(rules);
    run_promtool(cmd, "create-blocks-from rules")
}

/// Moves every block of `from` (a promtool output directory) into the TSDB
/// `tsdb`.
pub fn move_blocks(from: &Path, tsdb: &Path) -> Result<usize, String> {
    let mut n = 0;
    for e in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        std::fs::rename(e.path(), tsdb.join(e.file_name())).map_err(|e| format!("move block: {e}"))?;
        n += 1;
    }
    Ok(n)
}

/// Keeps the recording rules of signals and observation counts of a rule
/// file `cptriage rules export` wrote (what `diagnose --prometheus` reads):
/// promtool backfills each rule alone, so the questions' rules, which read
/// the signals' records, cannot be backfilled with them.
pub fn signal_rules(export_yaml: &str) -> Result<String, String> {
    let mut file: serde_yaml::Value = serde_yaml::from_str(export_yaml).map_err(|e| e.to_string())?;
    let rules = file["groups"][0]["rules"]
        .as_sequence_mut()
        .ok_or("no rules in the first group")?;
    rules.retain(|r| {
        r["record"]
            .as_str()
            .is_some_and(|n| !n.starts_with("cptriage:node:") && !n.starts_with("cptriage:leaf:"))
    });
    serde_yaml::to_string(&file).map_err(|e| e.to_string())
}

/// One series of a range-query result: sorted labels, points (unix ms, value).
pub type RangeSeries = (Vec<(String, String)>, Vec<(i64, f64)>);

/// A running Prometheus; killed on drop.
pub struct Prometheus {
    child: Child,
    pub port: u16,
    pub data: PathBuf,
    log: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus on the blocks in `data` (a TSDB directory) with the
    /// given lookback delta, and waits (at most 30 s) until `/-/ready` answers 200.
    pub fn start(data: &Path, lookback: &str) -> Result<Prometheus, String> {
        Prometheus::start_with(data, lookback, &[])
    }

    /// [`Prometheus::start`] with more flags (e.g. `--query.max-samples=…`).
    pub fn start_with(data: &Path, lookback: &str, more: &[String]) -> Result<Prometheus, String> {
        let port = free_port();
        let config = data.join("cptriage-prometheus.yml");
        std::fs::write(&config, "global:\n  evaluation_interval: 1h\n").map_err(|e| e.to_string())?;
        let log = data.join("cptriage-prometheus.log");
        let logf = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--query.lookback-delta={lookback}"))
            // The blocks hold old samples: keep them (the default is 15 days).
            .arg("--storage.tsdb.retention.time=100y")
            .args(more)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(logf))
            .spawn()
            .map_err(|e| format!("start prometheus: {e}"))?;
        let mut p = Prometheus {
            child,
            port,
            data: data.to_path_buf(),
            log,
        };
        let client = p.client();
        let url = format!("http://127.0.0.1:{port}/-/ready");
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                return Err(format!("prometheus exited with {status}: {}", p.log_text()));
            }
            if client.get(&url).send().is_ok_and(|r| r.status().as_u16() == 200) {
                return Ok(p);
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(format!("prometheus not ready after 30 s: {}", p.log_text()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn client(&self) -> reqwest::blocking::Client {
        // reqwest is built without a default TLS provider; plain HTTP still needs one installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .no_proxy()
            .build()
            .expect("http client")
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET /api/v1/query_range`; returns the `data.result` matrix as
    /// (labels, points (unix ms, value)).
    pub fn query_range(
        &self,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<Vec<RangeSeries>, String> {
        let secs = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
        let url = format!(
            "http://127.0.0.1:{}/api/v1/query_range?query={}&start={}&end={}&step={}",
            self.port,
            percent_encode(query),
            secs(start_ms),
            secs(end_ms),
            secs(step_ms)
        );
        let resp = self
            .client()
            .get(&url)
            .send()
            .map_err(|e| format!("query_range: {e}"))?;
        let text = resp.text().map_err(|e| format!("query_range body: {e}"))?;
        let body: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("query_range body: {e}: {text}"))?;
        if body["status"] != "success" {
            return Err(format!("query_range `{query}` failed: {body}"));
        }
        let mut out = Vec::new();
        for s in body["data"]["result"].as_array().cloned().unwrap_or_default() {
            let mut labels: Vec<(String, String)> = s["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            labels.sort();
            let mut pts = Vec::new();
            for p in s["values"].as_array().cloned().unwrap_or_default() {
                let t = p[0].as_f64().ok_or("bad timestamp")?;
                let v = p[1].as_str().ok_or("bad value")?;
                let v = match v {
                    "NaN" => f64::NAN,
                    "+Inf" => f64::INFINITY,
                    "-Inf" => f64::NEG_INFINITY,
                    x => x.parse::<f64>().map_err(|e| format!("value `{x}`: {e}"))?,
                };
                pts.push(((t * 1000.0).round() as i64, v));
            }
            out.push((labels, pts));
        }
        Ok(out)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query parameter (everything but unreserved characters).
fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}
