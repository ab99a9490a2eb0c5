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
use std::path::Path;

pub use duration::PromDuration;
pub use gen::{GenOptions, Scenario, SnapshotRef};
pub use spec::{parse_spec, Expect, Spec, Validated};

use cptriage::source::capture::write::CaptureWriter;
use cptriage::store::Millis;

/// The `format` value of a capture manifest.
pub const CAPTURE_FORMAT: &str = cptriage::source::capture::manifest::FORMAT;

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
    /// A file of the capture could not be written.
    #[error(transparent)]
    Write(#[from] cptriage::source::capture::write::WriteError),
}

/// The capture manifest the generator writes (the one `record` writes and
/// `--dump` reads).
pub use cptriage::source::capture::manifest::{Manifest, ManifestTarget};

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
        Ok(CaptureWriter::new(out, None).write_manifest(&self.manifest())?)
    }

    /// The manifest describing this scenario's capture.
    pub fn manifest(&self) -> Manifest {
        Manifest::new(
            Some(rfc3339(self.time(self.steps - 1))),
            Some(self.spec.spec.interval.to_string()),
            self.targets
                .iter()
                .map(|t| ManifestTarget {
                    name: t.name.clone(),
                    role: t.role,
                    url: None,
                    version: t.version.clone(),
                    node: None,
                })
                .collect(),
            Vec::new(),
        )
    }
}

/// A generator writes only into a missing or empty directory: never over a
/// capture or anything else already there.
pub(crate) fn refuse_non_empty(out: &Path) -> Result<(), ScenarioError> {
    if out.exists() {
        let mut rd = std::fs::read_dir(out).map_err(io_err(out))?;
        if rd.next().is_some() {
            return Err(ScenarioError::Output {
                path: out.display().to_string(),
                message: "output directory is not empty".into(),
            });
        }
    }
    Ok(())
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ScenarioError + '_ {
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
    refuse_non_empty(out)?;
    let mut sc = Scenario::build(spec, opts)?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let gzip = sc.spec.spec.gzip.then(flate2::Compression::default);
    let writer = CaptureWriter::new(out, gzip);
    writer.create_targets(sc.targets.iter().map(|t| t.name.as_str()))?;
    let names: Vec<String> = sc.targets.iter().map(|t| t.name.clone()).collect();
    let files = std::sync::atomic::AtomicUsize::new(0);
    let bytes = std::sync::atomic::AtomicU64::new(0);
    let counts: Vec<std::sync::atomic::AtomicUsize> = sc
        .targets
        .iter()
        .map(|_| std::sync::atomic::AtomicUsize::new(0))
        .collect();
    sc.run(threads, |s| {
        let n = writer.write_snapshot(&names[s.target], s.time, s.bytes)?;
        files.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
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

/// Generates `spec` straight into a dataset, as its capture written by
/// [`generate`] and read with `--dump` would load (the same bytes through the
/// same ingest funnel), keeping `keep`. Snapshots are named `ORIGIN#STEP` in
/// warnings.
pub fn dataset(
    spec: Validated,
    origin: &str,
    keep: &cptriage::source::ingest::Keep,
) -> Result<cptriage::source::Dataset, ScenarioError> {
    let snaps = snapshots(spec, origin)?;
    cptriage::source::ingest::load_memory(snaps, vec![], keep).map_err(|e| ScenarioError::Output {
        path: origin.to_string(),
        message: e.to_string(),
    })
}

/// Generates `spec` into in-memory snapshots, the bytes [`generate`] writes.
/// Snapshots are named `ORIGIN#STEP`.
pub fn snapshots(
    spec: Validated,
    origin: &str,
) -> Result<Vec<cptriage::source::ingest::MemorySnapshot>, ScenarioError> {
    use cptriage::source::ingest::MemorySnapshot;
    use std::sync::{Arc, Mutex};
    let mut sc = Scenario::build(spec, &GenOptions::default())?;
    let names: Vec<(String, cptriage::source::Role)> =
        sc.targets.iter().map(|t| (t.name.clone(), t.role)).collect();
    let snaps = Mutex::new(Vec::new());
    sc.run(2, |s| {
        let (target, role) = &names[s.target];
        snaps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(MemorySnapshot {
                target: target.clone(),
                role: Some(*role),
                role_reason: "scenario spec".into(),
                time: s.time,
                origin: format!("{origin}#{}", s.step),
                bytes: Arc::new(s.bytes.to_vec()),
            });
        Ok(())
    })?;
    Ok(snaps
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
}
