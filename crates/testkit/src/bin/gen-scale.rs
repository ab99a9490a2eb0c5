//! `gen-scale --out DIR`: writes one hour of a large control plane (3 apiservers
//! with tens of MB of `/metrics` each, 3 etcd members, 15 s interval, gzip) as a
//! capture directory, for `bench-diagnose` and for trying cptriage at scale.
//!
//! ```sh
//! cargo run --release --bin gen-scale -- --out /tmp/cptriage-scale
//! cptriage diagnose --dump /tmp/cptriage-scale
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use cptriage_testkit::scenario::scale::{self, ScaleOptions};

/// Generate a deterministic one-hour capture of a large control plane.
#[derive(Parser, Debug)]
#[command(name = "gen-scale", version)]
struct Args {
    /// Output capture directory (must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
    /// Directory holding the real base captures.
    #[arg(long, default_value_os_t = cptriage_testkit::realdata_dir())]
    realdata: PathBuf,
    /// Copies of every per-resource series of the apiserver capture.
    #[arg(long, default_value_t = 8)]
    resources: usize,
    /// Capture length in seconds.
    #[arg(long, default_value_t = 3600)]
    duration: u64,
    /// Seconds between snapshots.
    #[arg(long, default_value_t = 15)]
    interval: u64,
    /// Worker threads (the files do not depend on it).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Gzip level (0–9).
    #[arg(long, default_value_t = 1)]
    gzip_level: u32,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let opts = ScaleOptions {
        realdata: a.realdata,
        resources: a.resources,
        duration_s: a.duration,
        interval_s: a.interval,
        threads: a.threads,
        gzip_level: a.gzip_level,
        ..ScaleOptions::default()
    };
    let t0 = Instant::now();
    match scale::generate(&opts, &a.out) {
        Ok(s) => {
            eprintln!(
                "wrote {} snapshots to {} in {:.1}s: {:.0} MB gzip, {:.0} MB exposition text ({:.1} MB per apiserver snapshot)",
                s.files,
                a.out.display(),
                t0.elapsed().as_secs_f64(),
                s.compressed_bytes as f64 / 1e6,
                s.raw_bytes as f64 / 1e6,
                s.apiserver_snapshot_bytes as f64 / 1e6
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-scale: {e}");
            ExitCode::from(2)
        }
    }
}
