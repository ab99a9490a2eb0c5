//! A real Prometheus server (`/usr/bin/prometheus`, Debian package) on a free
//! 127.0.0.1 port with a given scrape configuration and its own storage
//! directory. Started and waited for within bounds; killed by its pid when
//! dropped, also when the test panics.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_port, wait_for};

pub(crate) const PROMETHEUS: &str = "/usr/bin/prometheus";

pub(crate) struct Prometheus {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
    http: reqwest::blocking::Client,
}

impl Prometheus {
    /// Whether the binary is installed (`scripts/test` installs it).
    pub(crate) fn available() -> bool {
        Path::new(PROMETHEUS).exists()
    }

    /// Starts Prometheus with `config` (YAML) and waits until `/-/ready`
    /// answers (at most 30 s).
    pub(crate) fn start(config: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(&cfg, config).expect("write prometheus.yml");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(["--log.level=warn", "--storage.tsdb.retention.time=1d"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            dir,
            port,
            child: Some(child),
            http: reqwest::blocking::Client::builder()
                .no_proxy()
                .build()
                .expect("http client"),
        };
        let ready = wait_for(Duration::from_secs(30), || {
            p.http
                .get(format!("{}/-/ready", p.url()))
                .timeout(Duration::from_secs(2))
                .send()
                .ok()
                .filter(|r| r.status().is_success())
                .map(|_| ())
        });
        assert!(
            ready.is_some(),
            "prometheus not ready within 30s; log:\n{}",
            p.log()
        );
        p
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The result list of an instant query now, if it succeeds.
    pub(crate) fn query(&self, q: &str) -> Option<Vec<serde_json::Value>> {
        let url =
            reqwest::Url::parse_with_params(&format!("{}/api/v1/query", self.url()), &[("query", q)]).ok()?;
        let r = self.http.get(url).timeout(Duration::from_secs(5)).send().ok()?;
        let v: serde_json::Value = serde_json::from_str(&r.text().ok()?).ok()?;
        v["data"]["result"].as_array().cloned()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
