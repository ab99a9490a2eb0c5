//! What cptriage's tests and measurements use and the product does not ship
//! (`cargo install cptriage` builds none of it):
//!
//! - [`scenario`]: synthetic captures of named failure scenarios
//!   (`testdata/scenarios/*.yaml`) and of large clusters (`scenario::scale`),
//!   with the `gen-scenario` and `gen-scale` commands;
//! - [`profile`]: monitoring profiles (`testdata/profiles/*.yaml`) applied to
//!   captures and snapshots, for the profile matrix (docs/accuracy.md);
//! - [`fuzzing`]: the entry points of the fuzz targets (`fuzz/`), replayed by
//!   the test suite over the committed corpora;
//! - the benchmark commands `bench-diagnose`, `bench-audit` and `bench_parse`
//!   (docs/performance.md).

pub mod bench;
pub mod fuzzing;
pub mod matrix;
pub mod openmetrics;
pub mod profile;
pub mod promrun;
pub mod scenario;

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `crates/testkit`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// The real captures the generators start from (`testdata/realdata`).
pub fn realdata_dir() -> PathBuf {
    repo_root().join("testdata/realdata")
}
