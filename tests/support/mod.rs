//! Shared harness of the live tests: certificates generated per test (rcgen),
//! an HTTP(S) test server on 127.0.0.1, and a real etcd cluster runner. Every
//! process a test starts is owned by a guard that kills it by its pid on drop,
//! also when the test panics.
#![allow(dead_code)]

pub(crate) mod etcd;
pub(crate) mod node_exporter;
pub(crate) mod pki;
pub(crate) mod prometheus;
pub(crate) mod promrun;
pub(crate) mod report;
pub(crate) mod serve;
pub(crate) mod server;
pub(crate) mod snapshot;
pub(crate) mod test;

#[path = "../common/realdata.rs"]
pub(crate) mod realcap;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound, then released), for a server a test
/// starts later (etcd). Taken below the kernel's ephemeral range (32768+), so
/// that outgoing connections of parallel tests cannot grab it meanwhile;
/// successive calls walk the range from a per-process start.
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let seed = std::process::id().wrapping_mul(7919)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    for _ in 0..200 {
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = LOW + (seed.wrapping_add(k.wrapping_mul(1031))) % SPAN;
        if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// Variables that would make a test depend on the machine it runs on: a
/// kubeconfig, in-cluster service variables, proxies, etcdctl settings.
const SCRUBBED: &[&str] = &[
    "KUBECONFIG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ETCDCTL_ENDPOINTS",
    "ETCDCTL_CACERT",
    "ETCDCTL_CERT",
    "ETCDCTL_KEY",
    "NO_COLOR",
    "COLUMNS",
];

/// A run of the cptriage binary: in the repository root, with the machine's
/// kubeconfig, proxies, etcdctl settings and terminal settings removed and
/// `HOME` pointing nowhere. `Cptriage::new(&["diagnose", DIR]).env("COLUMNS",
/// "80").output()`.
pub(crate) struct Cptriage(Command);

impl Cptriage {
    pub(crate) fn new(args: &[&str]) -> Cptriage {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cptriage"));
        c.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
        for k in SCRUBBED {
            c.env_remove(k);
        }
        c.env("HOME", "/nonexistent-home-for-cptriage-tests");
        Cptriage(c)
    }

    pub(crate) fn env(mut self, k: &str, v: &str) -> Cptriage {
        self.0.env(k, v);
        self
    }

    pub(crate) fn current_dir(mut self, dir: &Path) -> Cptriage {
        self.0.current_dir(dir);
        self
    }

    /// Runs it to the end and returns its output; a binary that cannot be
    /// started fails the calling test at its line.
    #[track_caller]
    pub(crate) fn output(mut self) -> Output {
        match self.0.output() {
            Ok(o) => o,
            Err(e) => panic!("run cptriage: {e}"),
        }
    }
}

/// Runs the cptriage binary with `args` and extra environment `env`
/// (see [`Cptriage`]).
#[track_caller]
pub(crate) fn cptriage(args: &[&str], env: &[(&str, &str)]) -> Output {
    env.iter()
        .fold(Cptriage::new(args), |c, (k, v)| c.env(k, v))
        .output()
}

/// Runs the cptriage binary with `args` (see [`Cptriage`]).
#[track_caller]
pub(crate) fn run(args: &[&str]) -> Output {
    Cptriage::new(args).output()
}

/// Starts the cptriage binary with `args` in the background (a recording while
/// a test injects a fault), with no kubeconfig; killed by its pid on drop.
pub(crate) fn spawn_cptriage(args: &[String]) -> etcd::Guard {
    etcd::Guard(Some(
        Command::new(env!("CARGO_BIN_EXE_cptriage"))
            .args(args)
            .env("HOME", "/nonexistent")
            .env_remove("KUBECONFIG")
            .env_remove("ETCDCTL_ENDPOINTS")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start cptriage"),
    ))
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `limit`.
pub(crate) fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts that `needle` appears in no output and no file under `dir` (gzip files decompressed).
#[track_caller]
pub(crate) fn assert_absent_everywhere(needle: &str, outputs: &[&[u8]], dir: &Path) {
    for (i, o) in outputs.iter().enumerate() {
        assert!(
            !String::from_utf8_lossy(o).contains(needle),
            "secret found in output #{i}"
        );
    }
    let mut stack = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read capture dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            files += 1;
            let bytes = cptriage::source::ingest::read_maybe_gzip(&p).expect("read capture file");
            assert!(
                !String::from_utf8_lossy(&bytes).contains(needle),
                "secret found in {}",
                p.display()
            );
        }
    }
    assert!(files > 0, "no file under {}", dir.display());
}

/// A real capture of `testdata/realdata` (`….prom`), decompressed.
pub(crate) fn realdata(name: &str) -> Vec<u8> {
    realcap::read(name)
}
