//! A real node-exporter (Debian `prometheus-node-exporter`) on a free port of
//! a loopback address, with the collectors the node signals read; killed by
//! its pid when dropped, also when the test panics.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's node-exporter (`prometheus-node-exporter`).
pub(crate) const NODE_EXPORTER: &str = "/usr/bin/prometheus-node-exporter";

pub(crate) struct NodeExporter {
    child: Child,
    pub host: String,
    pub port: u16,
}

impl NodeExporter {
    /// A node-exporter on 127.0.0.1.
    pub(crate) fn start() -> NodeExporter {
        NodeExporter::start_on("127.0.0.1")
    }

    /// A node-exporter listening on `host` (a loopback address), up within
    /// 10 s.
    pub(crate) fn start_on(host: &str) -> NodeExporter {
        assert!(
            Path::new(NODE_EXPORTER).exists(),
            "{NODE_EXPORTER} is missing: install the Debian package prometheus-node-exporter (scripts/test does)"
        );
        let port = super::free_port();
        let child = Command::new(NODE_EXPORTER)
            .arg(format!("--web.listen-address={host}:{port}"))
            .args([
                "--collector.disable-defaults",
                "--collector.diskstats",
                "--collector.pressure",
                "--collector.cpu",
                "--collector.uname",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node-exporter");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((host, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "node-exporter did not listen on {host}:{port} within 10 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        NodeExporter {
            child,
            host: host.to_string(),
            port,
        }
    }

    /// `host:port`, as Prometheus names the target.
    pub(crate) fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/metrics", self.address())
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
