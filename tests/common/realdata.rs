//! The real `/metrics` captures kept in `testdata/realdata/` (gzipped; origin
//! and licence in its SOURCES.md): listing and reading them decompressed.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};

/// `testdata/realdata` of this repository.
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/realdata")
}

/// Every capture as `(name, path)`, sorted by name; `name` is the original
/// file name (`etcd_nri_v3.5.21_k8s1.33.prom`), `path` the `.prom.gz` file.
pub(crate) fn files() -> Vec<(String, PathBuf)> {
    let d = dir();
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", d.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.strip_suffix(".gz")?.to_string();
            name.ends_with(".prom").then_some((name, p))
        })
        .collect();
    out.sort();
    out
}

/// The decompressed bytes of the capture `name` (`….prom`).
pub(crate) fn read(name: &str) -> Vec<u8> {
    read_path(&dir().join(format!("{name}.gz")))
}

/// The decompressed bytes of a `.prom.gz` file.
pub(crate) fn read_path(p: &Path) -> Vec<u8> {
    let raw = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    out
}
