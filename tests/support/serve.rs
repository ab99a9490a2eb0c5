//! `cptriage serve` and a real Alertmanager (`/usr/bin/prometheus-alertmanager`,
//! Debian package) on 127.0.0.1, for the receiver's tests. Both are started
//! within bounded waits and killed by their pid on drop (also when the test
//! panics).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, wait_for};

pub(crate) const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

/// A plain-HTTP client without proxies.
pub(crate) fn client() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("http client")
}

/// A running `cptriage serve`; its stderr goes to a file.
pub(crate) struct Serve {
    child: Option<Child>,
    pub port: u16,
    pub token: Option<String>,
    log: PathBuf,
    pub http: reqwest::blocking::Client,
}

impl Serve {
    /// Starts `cptriage serve --listen 127.0.0.1:PORT ARGS…` (and
    /// `--token-file` when `token` is given, written under `dir`), and waits
    /// (at most 20 s) until `/healthz` answers 200.
    pub(crate) fn start(dir: &Path, args: &[String], token: Option<&str>) -> Serve {
        let port = free_port();
        let log = dir.join(format!("serve-{port}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cptriage"));
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .env("HOME", "/nonexistent")
            .env_remove("KUBECONFIG")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).expect("serve log")));
        if let Some(t) = token {
            let f = dir.join(format!("serve-token-{port}"));
            std::fs::write(&f, format!("{t}\n")).expect("token file");
            cmd.arg("--token-file").arg(&f);
        }
        let child = cmd.spawn().expect("start cptriage serve");
        let mut s = Serve {
            child: Some(child),
            port,
            token: token.map(str::to_string),
            log,
            http: client(),
        };
        let up = wait_for(Duration::from_secs(20), || {
            if let Some(Ok(Some(st))) = s.child.as_mut().map(Child::try_wait) {
                panic!("cptriage serve exited with {st}: {}", s.log_text());
            }
            s.get("/healthz").ok().filter(|r| r.status() == 200).map(|_| ())
        });
        assert!(up.is_some(), "serve not healthy within 20 s: {}", s.log_text());
        s
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn auth(&self, r: reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder {
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// `GET path` with the token.
    pub(crate) fn get(&self, path: &str) -> reqwest::Result<reqwest::blocking::Response> {
        self.auth(self.http.get(format!("{}{path}", self.url()))).send()
    }

    /// `GET path` as JSON: (status, body).
    #[track_caller]
    pub(crate) fn get_json(&self, path: &str) -> (u16, serde_json::Value) {
        let r = self.get(path).unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = r.status().as_u16();
        let text = r.text().expect("body");
        let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"));
        (status, v)
    }

    /// `POST /v1/alertmanager` with a JSON body: (status, body text).
    pub(crate) fn post_notification(&self, body: &str) -> (u16, String) {
        let r = self
            .auth(self.http.post(format!("{}/v1/alertmanager", self.url())))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .expect("POST /v1/alertmanager");
        (r.status().as_u16(), r.text().unwrap_or_default())
    }

    /// Everything it logged so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends SIGTERM and waits (at most `limit`) for the exit; returns the
    /// exit code and how long it took.
    pub(crate) fn terminate(&mut self, limit: Duration) -> (Option<i32>, Duration) {
        let mut c = self.child.take().expect("running");
        let t0 = Instant::now();
        let ok = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -TERM failed");
        let code = wait_for(limit, || c.try_wait().ok().flatten());
        let elapsed = t0.elapsed();
        match code {
            Some(st) => (st.code(), elapsed),
            None => {
                let _ = c.kill();
                let _ = c.wait();
                panic!(
                    "serve did not stop within {limit:?} of SIGTERM: {}",
                    self.log_text()
                );
            }
        }
    }

    /// The resident memory of the process, in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A running Alertmanager; killed on drop.
pub(crate) struct Alertmanager {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    http: reqwest::blocking::Client,
}

impl Alertmanager {
    /// Starts Alertmanager with `config` (YAML), without clustering, and
    /// waits (at most 30 s) until `/-/ready` answers.
    pub(crate) fn start(config: &str) -> Alertmanager {
        assert!(
            Path::new(ALERTMANAGER).exists(),
            "{ALERTMANAGER} is missing: install the Debian package prometheus-alertmanager (scripts/test does)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("alertmanager.yml");
        std::fs::write(&cfg, config).expect("write alertmanager.yml");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("alertmanager.log")).expect("log");
        let child = Command::new(ALERTMANAGER)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start alertmanager");
        let mut am = Alertmanager {
            child: Some(child),
            port,
            dir,
            http: client(),
        };
        let ready = wait_for(Duration::from_secs(30), || {
            if let Some(Ok(Some(st))) = am.child.as_mut().map(Child::try_wait) {
                panic!("alertmanager exited with {st}: {}", am.log_text());
            }
            am.http
                .get(format!("http://127.0.0.1:{port}/-/ready"))
                .send()
                .ok()
                .filter(|r| r.status().is_success())
                .map(|_| ())
        });
        assert!(
            ready.is_some(),
            "alertmanager not ready within 30 s: {}",
            am.log_text()
        );
        am
    }

    /// Posts alerts (a JSON array) to `/api/v2/alerts`.
    #[track_caller]
    pub(crate) fn post_alerts(&self, alerts: &serde_json::Value) {
        let r = self
            .http
            .post(format!("http://127.0.0.1:{}/api/v2/alerts", self.port))
            .header("content-type", "application/json")
            .body(alerts.to_string())
            .send()
            .expect("POST /api/v2/alerts");
        assert!(
            r.status().is_success(),
            "alertmanager refused the alerts: {} {}",
            r.status(),
            r.text().unwrap_or_default()
        );
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("alertmanager.log")).unwrap_or_default()
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A chat incoming webhook on 127.0.0.1: records each POST body, answers
/// 500 to the first `fail_first` posts and 200 after.
pub(crate) struct ChatSink {
    pub port: u16,
    pub bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ChatSink {
    pub(crate) fn start(fail_first: usize) -> ChatSink {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::atomic::Ordering;
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let port = l.local_addr().expect("addr").port();
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (b, st) = (bodies.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut seen = 0usize;
            while !st.load(Ordering::Relaxed) {
                let Ok((tcp, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = tcp.set_nonblocking(false);
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                let mut r = BufReader::new(&tcp);
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len.min(1 << 20)];
                let _ = r.read_exact(&mut body);
                b.lock()
                    .expect("bodies")
                    .push(String::from_utf8_lossy(&body).to_string());
                seen += 1;
                let status = if seen <= fail_first {
                    "500 Internal Server Error"
                } else {
                    "200 OK"
                };
                let _ = (&tcp).write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
                );
            }
        });
        ChatSink {
            port,
            bodies,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn bodies(&self) -> Vec<String> {
        self.bodies.lock().expect("bodies").clone()
    }
}

impl Drop for ChatSink {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
