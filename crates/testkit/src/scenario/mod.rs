//! Deterministic scenario generator: builds multi-snapshot capture directories
//! of control-plane faults from real single-snapshot `/metrics` captures.
//!
//! A scenario spec (YAML, see `testdata/scenarios/README.md`) names the targets
//! (each starting from a real capture), the healthy background traffic and the
//! effects of a fault (counters growing, histogram observations, gauges set,
//! series created, members down or restarted). The generator advances only the
//! series the spec names and copies every other byte of the base capture as it
//! was; the output is a capture directory as `cptriage record` writes it and
//! `cptriage diagnose --dump DIR` reads it:
//!
//! ```text
//! DIR/manifest.yaml               format cptriage/capture/v1, tool, created, interval, targets
//! DIR/<target>/<unix-ms>.prom     (or .prom.gz)
//! ```
//!
//! Output is a pure function of the spec and the base files: no clock, no
//! randomness (the manifest's `created` is the scenario's last snapshot time).

pub mod audit;
pub mod duration;
pub mod expo;
pub mod gen;
pub mod scale;
pub mod spec;

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

pub use duration::PromDuration;
pub use gen::{GenOptions, Scenario, SnapshotRef};
pub use spec::{parse_spec, Expect, Spec, Validated};

use cptriage::store::Millis;

/// The `format` value of a capture manifest.
pub const CAPTURE_FORMAT: &str = cptriage::source::manifest::FORMAT;

/// A place in a spec or base file: `file[:line[:column]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        Ok(())
    }
}

/// Everything that can go wrong while loading a spec or generating a capture.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The spec is malformed or inconsistent with its base captures.
    #[error("{at}: {message}")]
    Spec { at: Location, message: String },
    /// A base capture could not be read as a text exposition.
    #[error("{at}: {message}")]
    Base { at: Location, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The output directory is not usable.
    #[error("{path}: {message}")]
    Output { path: String, message: String },
}

/// The capture manifest the generator writes (the one `record` writes and
/// `--dump` reads).
pub use cptriage::source::manifest::{Manifest, ManifestTarget};

/// What one generation wrote.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub files: usize,
    pub bytes: u64,
    /// Snapshots per target, in spec order.
    pub per_target: Vec<(String, usize)>,
}

/// Reads and validates a spec file.
pub fn load_spec(path: &Path) -> Result<Validated, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_spec(&text, &path.display().to_string(), path.parent())
}

fn rfc3339(ms: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_default()
}

impl Scenario {
    /// Writes `manifest.yaml` into the capture directory `out`.
    pub fn write_manifest(&self, out: &Path) -> Result<(), ScenarioError> {
        let mpath = out.join("manifest.yaml");
        let text = serde_yaml::to_string(&self.manifest()).map_err(|e| ScenarioError::Output {
            path: mpath.display().to_string(),
            message: e.to_string(),
        })?;
        std::fs::write(&mpath, text).map_err(io_err(&mpath))
    }

    /// The manifest describing this scenario's capture.
    pub fn manifest(&self) -> Manifest {
        Manifest {
            format: CAPTURE_FORMAT.to_string(),
            tool: Some(format!("cptriage {}", env!("CARGO_PKG_VERSION"))),
            created: Some(rfc3339(self.time(self.steps - 1))),
            interval: Some(self.spec.spec.interval.to_string()),
            targets: self
                .targets
                .iter()
                .map(|t| ManifestTarget {
                    name: t.name.clone(),
                    role: t.role,
                    url: None,
                    version: t.version.clone(),
                })
                .collect(),
            failures: Vec::new(),
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ScenarioError + '_ {
    move |source| ScenarioError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Generates the capture of `spec` into `out`, which must not exist or be empty.
/// Uses up to `threads` threads (targets are generated independently; the
/// files do not depend on the thread count).
pub fn generate(
    spec: Validated,
    opts: &GenOptions,
    out: &Path,
    threads: usize,
) -> Result<Summary, ScenarioError> {
    if out.exists() {
        let mut rd = std::fs::read_dir(out).map_err(io_err(out))?;
        if rd.next().is_some() {
            return Err(ScenarioError::Output {
                path: out.display().to_string(),
                message: "output directory is not empty".into(),
            });
        }
    }
    let mut sc = Scenario::build(spec, opts)?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let gzip = sc.spec.spec.gzip;
    let dirs: Vec<PathBuf> = sc.targets.iter().map(|t| out.join(&t.name)).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    let files = std::sync::atomic::AtomicUsize::new(0);
    let bytes = std::sync::atomic::AtomicU64::new(0);
    let counts: Vec<std::sync::atomic::AtomicUsize> = sc
        .targets
        .iter()
        .map(|_| std::sync::atomic::AtomicUsize::new(0))
        .collect();
    sc.run(threads, |s| {
        let ext = if gzip { "prom.gz" } else { "prom" };
        let path = dirs[s.target].join(format!("{}.{ext}", s.time));
        let data: Vec<u8>;
        let body: &[u8] = if gzip {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(s.bytes).map_err(io_err(&path))?;
            data = enc.finish().map_err(io_err(&path))?;
            &data
        } else {
            s.bytes
        };
        std::fs::write(&path, body).map_err(io_err(&path))?;
        files.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes.fetch_add(body.len() as u64, std::sync::atomic::Ordering::Relaxed);
        counts[s.target].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    })?;
    sc.write_manifest(out)?;
    Ok(Summary {
        files: files.into_inner(),
        bytes: bytes.into_inner(),
        per_target: sc
            .targets
            .iter()
            .zip(counts)
            .map(|(t, c)| (t.name.clone(), c.into_inner()))
            .collect(),
    })
}
