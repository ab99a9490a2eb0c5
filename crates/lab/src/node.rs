//! A real node-exporter (Debian `prometheus-node-exporter`) beside the
//! cluster: on 127.0.0.1 (a free port), under `timeout` like every process
//! of the lab, with the collectors cptriage reads (diskstats, pressure, cpu,
//! uname), recorded with the members as target `node`. Every member runs on
//! this one host, so cptriage maps all three to it: a node they share, whose
//! metrics are shown as evidence and decide nothing (docs/accuracy.md).

use std::fs;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{apt_install, free_port, under_timeout, Wrapped};
use crate::log::Log;
use crate::util::LabError;

/// The Debian package and its binary.
pub(crate) const PACKAGE: &str = "prometheus-node-exporter";

/// Installs node-exporter when it is missing (the lab runs as root).
pub(crate) fn ensure(log: &Log) -> Result<(), LabError> {
    if Command::new(PACKAGE).arg("--version").output().is_err() {
        apt_install(&[PACKAGE], log)?;
    }
    Ok(())
}

/// A running node-exporter.
pub(crate) struct NodeExporter {
    _proc: Wrapped,
    port: u16,
}

impl NodeExporter {
    /// Starts node-exporter for at most `life`, its output in `log_path`, and
    /// waits (at most 10 s) until it listens.
    pub(crate) fn start(life: Duration, log_path: &Path) -> Result<NodeExporter, LabError> {
        let port = free_port()?;
        let out = fs::File::create(log_path)?;
        let mut t = under_timeout(life, "TERM");
        t.arg(PACKAGE)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args([
                "--collector.disable-defaults",
                "--collector.cpu",
                "--collector.diskstats",
                "--collector.pressure",
                "--collector.uname",
                "--collector.loadavg",
            ])
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out));
        let proc = Wrapped::start(t, PACKAGE)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(LabError::msg(format!(
                    "{PACKAGE} did not listen on 127.0.0.1:{port} within 10 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(NodeExporter { _proc: proc, port })
    }

    /// Its metrics URL.
    pub(crate) fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.port)
    }
}
