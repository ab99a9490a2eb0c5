//! Regression guard of the dump loader (issue 28): `diagnose --dump` of a
//! generated capture against a single-process `gzip -dc` of the same files,
//! timed in the same run, as a ratio. An absolute time would fail on a slower
//! or busier machine; the ratio moves only when cptriage's own work per byte
//! does. The limit is several times the ratio recorded in docs/performance.md,
//! so it fails loudly on a real regression (a loader serialised again, a
//! quadratic step) and not on noise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cptriage_testkit::scenario::scale::{self, ScaleOptions};

/// `diagnose` / `gzip -dc` recorded on the 2-core machine of
/// docs/performance.md ("Regression guard"): about 0.6 with the rest of the
/// suite running beside it (1.1 at a load of 10 on 2 cores).
const RECORDED_RATIO: f64 = 0.6;
/// How many times the recorded ratio fails the guard.
const SLOWDOWN: f64 = 4.0;
/// Runs of each command; the fastest counts (the least disturbed).
const RUNS: usize = 3;

fn realdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/realdata")
}

/// The snapshot files of a capture, sorted.
fn gz_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "gz") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The fastest of [`RUNS`] runs of `make()`, which must succeed (exit 0 or,
/// for a verdict, any of cptriage's status codes).
fn fastest(what: &str, ok: &[i32], make: impl Fn() -> Command) -> Duration {
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let status = make()
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let code = status.code().unwrap_or(-1);
            assert!(ok.contains(&code), "{what}: exit {code}");
            t.elapsed()
        })
        .min()
        .expect("runs")
}

#[test]
fn the_dump_loader_keeps_its_ratio_to_gzip() {
    let d = tempfile::tempdir().expect("tempdir");
    let cap = d.path().join("capture");
    let opts = ScaleOptions {
        realdata: realdata(),
        resources: 2,
        duration_s: 900,
        interval_s: 15,
        apiservers: 1,
        etcd_members: 3,
        threads: 2,
        gzip_level: 1,
    };
    let summary = scale::generate(&opts, &cap).expect("generate the capture");
    let files = gz_files(&cap);
    assert_eq!(files.len(), summary.files);

    let gzip = fastest("gzip -dc", &[0], || {
        let mut c = Command::new("gzip");
        c.arg("-dc").args(&files);
        c
    });
    let diagnose = fastest("cptriage diagnose --dump", &[0, 1, 2, 3], || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cptriage"));
        c.args(["diagnose", "--dump"]).arg(&cap).args(["-o", "json"]);
        c
    });
    let ratio = diagnose.as_secs_f64() / gzip.as_secs_f64();
    eprintln!(
        "{} files, {:.0} MB of text: gzip -dc {:.2} s, diagnose --dump {:.2} s, ratio {ratio:.2} (recorded {RECORDED_RATIO})",
        files.len(),
        summary.raw_bytes as f64 / 1e6,
        gzip.as_secs_f64(),
        diagnose.as_secs_f64()
    );
    assert!(
        ratio <= RECORDED_RATIO * SLOWDOWN,
        "diagnose --dump took {ratio:.2}× a single gzip -dc of the same files, more than {SLOWDOWN}× the recorded {RECORDED_RATIO}: the dump loader became several times slower"
    );
}
