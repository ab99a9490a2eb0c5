//! Neighbour processes that share the host with the members, as on a real
//! control-plane node: CPU-bound loops pinned to each core and a writer that
//! syncs to the same disk. They run as `lab noise …` child processes (under
//! `timeout`), so they are plain processes competing with etcd.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::cluster::{under_timeout, Wrapped};
use crate::log::Log;
use crate::util::LabError;

/// What neighbours to run.
#[derive(Clone, Debug)]
pub(crate) struct NoiseSpec {
    /// Share of each 100 ms period a CPU neighbour spins (one neighbour per core).
    pub cpu_duty: f64,
    /// Synced writes per second of the disk neighbour (0: none).
    pub fsync_per_s: f64,
    /// Size of each synced write.
    pub fsync_block_kib: usize,
}

impl NoiseSpec {
    pub(crate) fn describe(&self, cores: usize) -> String {
        format!(
            "{cores} CPU neighbours spinning {:.0}% of each 100 ms (one pinned per core), a disk neighbour writing {} KiB + fdatasync {}/s on the members' disk",
            self.cpu_duty * 100.0,
            self.fsync_block_kib,
            self.fsync_per_s
        )
    }
}

/// Running neighbours, ended on drop.
pub(crate) struct Neighbours {
    procs: Vec<Wrapped>,
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl Neighbours {
    /// Starts the neighbours for `life` (they end by themselves then).
    pub(crate) fn start(
        spec: &NoiseSpec,
        dir: &Path,
        life: Duration,
        log: &Log,
    ) -> Result<Neighbours, LabError> {
        let exe = std::env::current_exe()?;
        let secs = life.as_secs().max(1).to_string();
        let mut procs = Vec::new();
        if spec.cpu_duty > 0.0 {
            for core in 0..cores() {
                let mut t = under_timeout(life + Duration::from_secs(5), "TERM");
                t.args(["taskset", "-c", &core.to_string()])
                    .arg(&exe)
                    .args([
                        "noise",
                        "cpu",
                        "--seconds",
                        &secs,
                        "--duty",
                        &spec.cpu_duty.to_string(),
                    ])
                    .stdout(Stdio::null());
                procs.push(Wrapped::start(t, "CPU neighbour")?);
            }
        }
        if spec.fsync_per_s > 0.0 {
            let mut t = under_timeout(life + Duration::from_secs(5), "TERM");
            t.arg(&exe)
                .args(["noise", "fsync", "--seconds", &secs, "--per-second"])
                .arg(spec.fsync_per_s.to_string())
                .arg("--block-kib")
                .arg(spec.fsync_block_kib.to_string())
                .arg("--dir")
                .arg(dir)
                .stdout(Stdio::null());
            procs.push(Wrapped::start(t, "disk neighbour")?);
        }
        log.say(&format!("neighbours started: {}", spec.describe(cores())));
        Ok(Neighbours { procs })
    }

    /// `n` CPU-bound neighbours spinning all the time, pinned to `core`,
    /// for `life` at most.
    pub(crate) fn spinners(core: usize, n: usize, life: Duration) -> Result<Neighbours, LabError> {
        let exe = std::env::current_exe()?;
        let secs = life.as_secs().max(1).to_string();
        let mut procs = Vec::new();
        for _ in 0..n {
            let mut t = under_timeout(life + Duration::from_secs(5), "TERM");
            t.args(["taskset", "-c", &core.to_string()])
                .arg(&exe)
                .args(["noise", "cpu", "--seconds", &secs, "--duty", "1"])
                .stdout(Stdio::null());
            procs.push(Wrapped::start(t, "CPU neighbour")?);
        }
        Ok(Neighbours { procs })
    }
}

impl Drop for Neighbours {
    fn drop(&mut self) {
        for p in &mut self.procs {
            p.stop();
        }
    }
}

/// `lab noise cpu`: spins `duty` of each 100 ms for `seconds`.
pub(crate) fn cpu(seconds: u64, duty: f64) {
    let end = Instant::now() + Duration::from_secs(seconds);
    let period = Duration::from_millis(100);
    let busy = period.mul_f64(duty.clamp(0.0, 1.0));
    let mut x: u64 = 1;
    while Instant::now() < end {
        let start = Instant::now();
        while start.elapsed() < busy {
            x = x.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
        }
        std::hint::black_box(x);
        if let Some(rest) = period.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

/// `lab noise fsync`: writes a block and fdatasyncs it `per_s` times a second
/// for `seconds`, in a file under `dir` (kept below 64 MiB, removed at the end).
pub(crate) fn fsync(seconds: u64, per_s: f64, block_kib: usize, dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let path: PathBuf = dir.join(format!("noise-{}.dat", std::process::id()));
    let mut f = fs::File::create(&path)?;
    let block = vec![b'n'; block_kib * 1024];
    let end = Instant::now() + Duration::from_secs(seconds);
    let every = Duration::from_secs_f64(1.0 / per_s.max(0.1));
    let mut next = Instant::now();
    let mut written = 0usize;
    while Instant::now() < end {
        f.write_all(&block)?;
        f.sync_data()?;
        written += block.len();
        if written > 64 << 20 {
            f = fs::File::create(&path)?;
            written = 0;
        }
        next += every;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    drop(f);
    fs::remove_file(&path)
}
