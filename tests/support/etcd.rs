//! A real etcd cluster (`/usr/bin/etcd`) on free 127.0.0.1 ports (or each
//! member on its own loopback address, [`Cluster::start_on`]): client URLs
//! over TLS with client-certificate auth, peers over plain HTTP, and a plain
//! `--listen-metrics-urls` port per member. Members are killed by pid when the
//! cluster is dropped, also on panic.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use cptriage::source::live::{client, ClientSpec, Secret};

use super::pki::{write, Ca, Leaf};
use super::{free_port, wait_for};

pub(crate) const ETCD: &str = "/usr/bin/etcd";

pub(crate) struct Member {
    pub name: String,
    /// The address every port of the member listens on (127.0.0.1 unless
    /// started with [`Cluster::start_on`]).
    pub host: String,
    pub client_port: u16,
    pub peer_port: u16,
    pub metrics_port: u16,
    pub child: Option<Child>,
}

impl Member {
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

pub(crate) struct Cluster {
    pub dir: tempfile::TempDir,
    pub ca_path: PathBuf,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    pub members: Vec<Member>,
    pub client_leaf: Leaf,
    http: reqwest::blocking::Client,
    plain: reqwest::blocking::Client,
}

impl Cluster {
    /// Starts `n` members (with `--quota-backend-bytes` when given) and waits
    /// until every member reports healthy (at most 30 s). A port taken by
    /// another process in the meantime ("address already in use") starts the
    /// cluster again on new ports, at most 3 times.
    pub(crate) fn start(n: usize, quota: Option<u64>) -> Cluster {
        Cluster::start_on(&vec!["127.0.0.1"; n], quota)
    }

    /// [`Cluster::start`] with member `i` listening on `hosts[i]` (loopback
    /// addresses such as 127.0.0.2: every 127.x address is local on Linux),
    /// so that each member has a host of its own.
    pub(crate) fn start_on(hosts: &[&str], quota: Option<u64>) -> Cluster {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Cluster::try_start(hosts, quota) {
                Ok(c) => return c,
                // Another process took a port meanwhile: try again.
                Err(log) if attempt < 3 && log.contains("address already in use") => {}
                Err(log) => panic!("{log}"),
            }
        }
    }

    fn try_start(hosts: &[&str], quota: Option<u64>) -> Result<Cluster, String> {
        let n = hosts.len();
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::new("etcd test ca");
        let mut names = vec!["localhost", "127.0.0.1"];
        names.extend(hosts.iter().copied().filter(|h| *h != "127.0.0.1"));
        let server = ca.peer(&names);
        let client_leaf = ca.client("cptriage-healthcheck");
        let ca_path = write(dir.path(), "ca.crt", &ca.pem());
        let scert = write(dir.path(), "server.crt", &server.cert_pem);
        let skey = write(dir.path(), "server.key", &server.key_pem);
        let cert_path = write(dir.path(), "client.crt", &client_leaf.cert_pem);
        let key_path = write(dir.path(), "client.key", &client_leaf.key_pem);
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                host: hosts[i].to_string(),
                client_port: free_port(),
                peer_port: free_port(),
                metrics_port: free_port(),
                child: None,
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}=http://{}:{}", m.name, m.host, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let http = client::build(&ClientSpec {
            ca_pem: Some(ca.pem().into_bytes()),
            client_cert_pem: Some(client_leaf.cert_pem.clone().into_bytes()),
            client_key_pem: Some(Secret::new(client_leaf.key_pem.clone().into_bytes())),
            ..Default::default()
        })
        .expect("etcd test client");
        let plain = client::build(&ClientSpec::default()).expect("plain client");
        let mut c = Cluster {
            dir,
            ca_path,
            cert_path,
            key_path,
            members,
            client_leaf,
            http,
            plain,
        };
        for i in 0..n {
            let m = &c.members[i];
            let data = c.dir.path().join(format!("{}.data", m.name));
            let log = std::fs::File::create(c.dir.path().join(format!("{}.log", m.name))).expect("log file");
            let curl = format!("https://{}:{}", m.host, m.client_port);
            let purl = format!("http://{}:{}", m.host, m.peer_port);
            let mut cmd = Command::new(ETCD);
            cmd.args(["--name", &m.name])
                .arg(format!("--data-dir={}", data.display()))
                .arg(format!("--listen-client-urls={curl}"))
                .arg(format!("--advertise-client-urls={curl}"))
                .arg(format!("--listen-peer-urls={purl}"))
                .arg(format!("--initial-advertise-peer-urls={purl}"))
                .arg(format!(
                    "--listen-metrics-urls=http://{}:{}",
                    m.host, m.metrics_port
                ))
                .arg(format!("--initial-cluster={initial}"))
                .args([
                    "--initial-cluster-state=new",
                    "--initial-cluster-token=cptriage-test",
                ])
                .arg(format!("--cert-file={}", scert.display()))
                .arg(format!("--key-file={}", skey.display()))
                .arg(format!("--trusted-ca-file={}", c.ca_path.display()))
                .args([
                    "--client-cert-auth",
                    "--heartbeat-interval=100",
                    "--election-timeout=1000",
                ])
                .args(["--snapshot-count=100000", "--metrics=extensive"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(log));
            if let Some(q) = quota {
                cmd.arg(format!("--quota-backend-bytes={q}"));
            }
            let child = cmd.spawn().expect("start etcd (Debian package etcd-server)");
            c.members[i].child = Some(child);
        }
        for i in 0..n {
            let ok = wait_for(Duration::from_secs(30), || {
                c.health(i).filter(|h| h.contains("\"true\"")).map(|_| ())
            });
            if ok.is_none() {
                // Dropping `c` kills every member started.
                let logs: String = (0..n).map(|j| c.log(j)).collect();
                return Err(format!("etcd member m{i} not healthy within 30s; logs:\n{logs}"));
            }
        }
        Ok(c)
    }

    pub(crate) fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("m{i}.log"))).unwrap_or_default()
    }

    pub(crate) fn client_url(&self, i: usize) -> String {
        format!("https://{}:{}", self.members[i].host, self.members[i].client_port)
    }

    pub(crate) fn metrics_url(&self, i: usize) -> String {
        format!("http://{}:{}", self.members[i].host, self.members[i].metrics_port)
    }

    /// `/health` on the plain metrics port.
    pub(crate) fn health(&self, i: usize) -> Option<String> {
        let r = self
            .plain
            .get(format!("{}/health", self.metrics_url(i)))
            .timeout(Duration::from_secs(2))
            .send()
            .ok()?;
        r.text().ok()
    }

    /// Waits until every running member's process is older than `age`:
    /// cptriage does not judge the first window after a process start
    /// (warm-up), so a test of a fault on a running cluster records only once
    /// its members are older than the recording's window.
    pub(crate) fn wait_until_older_than(&self, age: Duration) {
        let deadline = std::time::Instant::now() + age + Duration::from_secs(10);
        for i in 0..self.members.len() {
            let Some(start) = self.metric(i, "process_start_time_seconds") else {
                continue;
            };
            loop {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                if now - start > age.as_secs_f64() || std::time::Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The value of an unlabelled metric on member `i` (plain metrics port).
    pub(crate) fn metric(&self, i: usize, name: &str) -> Option<f64> {
        let text = self
            .plain
            .get(format!("{}/metrics", self.metrics_url(i)))
            .timeout(Duration::from_secs(2))
            .send()
            .ok()?
            .text()
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The member that is leader, among the running ones.
    pub(crate) fn leader(&self) -> Option<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].child.is_some())
            .find(|&i| self.metric(i, "etcd_server_is_leader") == Some(1.0))
    }

    /// A put through the gRPC gateway of member `i` (mTLS). Err holds etcd's error.
    pub(crate) fn put(&self, i: usize, key: &str, value: &[u8], timeout: Duration) -> Result<(), String> {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let body = serde_json::json!({"key": b64(key.as_bytes()), "value": b64(value)});
        let r = self
            .http
            .post(format!("{}/v3/kv/put", self.client_url(i)))
            .timeout(timeout)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .map_err(|e| client::chain(&e))?;
        let status = r.status();
        let text = r.text().unwrap_or_default();
        if status.is_success() && !text.contains("\"error\"") {
            Ok(())
        } else {
            Err(format!("HTTP {status}: {text}"))
        }
    }

    /// SIGKILL member `i` and reap it.
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal (`STOP`, `CONT`) to member `i` by its pid.
    pub(crate) fn signal(&self, i: usize, sig: &str) {
        if let Some(pid) = self.members[i].pid() {
            let st = Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(pid.to_string())
                .status()
                .expect("run kill");
            assert!(st.success(), "kill -{sig} {pid} failed");
        }
    }

    /// The `record` flags for every member over TLS, named m0, m1, …
    /// Delays every fsync/fdatasync of member `i` by 100 ms with strace
    /// (a slow disk on that node), until the returned guard is dropped.
    pub(crate) fn delay_fsync(&self, i: usize) -> Guard {
        let pid = self.members[i].pid().expect("member is running").to_string();
        Guard(Some(
            Command::new("strace")
                .args(["-f", "-qq", "-p", &pid, "-e", "trace=fdatasync,fsync"])
                .args([
                    "-e",
                    "inject=fdatasync,fsync:delay_enter=100000",
                    "-o",
                    "/dev/null",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("strace"),
        ))
    }

    pub(crate) fn record_flags(&self) -> Vec<String> {
        let mut v = vec!["--no-apiserver".to_string(), "--etcd".into()];
        for (i, m) in self.members.iter().enumerate() {
            v.push(format!("{}={}", m.name, self.client_url(i)));
        }
        v.extend([
            "--etcd-cacert".into(),
            self.ca_path.display().to_string(),
            "--etcd-cert".into(),
            self.cert_path.display().to_string(),
            "--etcd-key".into(),
            self.key_path.display().to_string(),
        ]);
        v
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.signal_quiet(i);
            self.kill(i);
        }
    }
}

impl Cluster {
    /// Resumes a stopped member before it is killed (a stopped process still dies on SIGKILL,
    /// but resuming first lets it be reaped promptly).
    fn signal_quiet(&self, i: usize) {
        if let Some(pid) = self.members[i].pid() {
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(pid.to_string())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A child process killed by pid on drop (strace, helpers).
pub(crate) struct Guard(pub Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
