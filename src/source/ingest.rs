//! The ingest funnel: every exposition cptriage reads — capture files, live
//! scrapes held in memory, rule unit tests, fuzz inputs — goes through here
//! into the series store.
//!
//! A [`Plan`] lists the snapshots (files or bytes) with their targets and
//! declared roles; [`run_plan`] parses them (in parallel, streamed, gzip
//! detected by its magic bytes, each capped in size), resolves every
//! snapshot's time, orders each target's snapshots, marks series that
//! disappear stale, splits targets whose snapshots alternate between two
//! processes, and infers roles from the metric families. A snapshot that
//! cannot be read or parsed becomes a warning and the rest is analysed; only
//! when nothing usable remains is it an error. Reading the capture format
//! itself (manifest, directories, `--dump` arguments) is
//! [`crate::source::capture`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, RwLock};

use crate::source::expfmt::{self, Severity};
use crate::source::{Dataset, Role, Snapshot, SourceWarning, Target, TimeSource};
use crate::store::{stale_nan, Millis, Store, Str};

/// Families every load keeps, whatever the expressions need: they identify
/// the component, its version and its restarts.
pub const ALWAYS_KEEP: &[&str] = &[
    "process_start_time_seconds",
    "kubernetes_build_info",
    "etcd_server_version",
    "etcd_cluster_version",
    super::nodemap::UNAME,
];

/// At most this many parse problems are reported per file; the rest are counted.
const MAX_ISSUES_PER_FILE: usize = 5;

/// An explicit sample timestamp further than this from its snapshot's time is
/// not trusted (clock skew between the target and the recorder, or a bad
/// timestamp): the sample is stored at the snapshot's time instead.
pub const SKEW_TOLERANCE_MS: Millis = 60_000;

/// A snapshot time further than this after the current time is reported as
/// being in the future.
const FUTURE_TOLERANCE_MS: Millis = 10 * 60_000;

/// Two `process_start_time_seconds` values closer than this are one process.
const SAME_PROCESS_S: f64 = 0.5;

/// A problem that stops the load.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("`{0}`: no such file or directory")]
    NotFound(PathBuf),
    #[error("`{path}`: {message}")]
    BadArgument { path: String, message: String },
    #[error("`{path}`: cannot read: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}:{line}:{column}`: invalid capture manifest: {message}")]
    Manifest {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("no usable snapshot in the given dumps{}", .0.iter().map(|w| format!("\n  {}: {}", w.origin, w.message)).collect::<String>())]
    NoData(Vec<SourceWarning>),
}

/// Why one snapshot could not be read; the load reports it and goes on
/// with the other snapshots.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    /// Larger than the cap after decompression.
    #[error("{0}")]
    TooLarge(crate::limits::TooLarge),
    #[error("corrupt gzip data: {0}")]
    CorruptGzip(std::io::Error),
    /// Not an exposition at all (the parser's error names the line).
    #[error("{0}")]
    Parse(expfmt::ParseError),
    #[error("empty file")]
    Empty,
    /// The parsing thread stopped (a bug): the file is skipped.
    #[error("parser failed")]
    ParserFailed,
}

impl SnapshotError {
    /// The error of a read that failed: the cap, corrupt gzip (when `gzip`),
    /// or the file itself.
    fn of_read(e: std::io::Error, gzip: bool) -> SnapshotError {
        use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
        if let Some(t) = crate::limits::TooLarge::of(&e) {
            return SnapshotError::TooLarge(crate::limits::TooLarge(t.0));
        }
        if gzip && matches!(e.kind(), InvalidData | InvalidInput | UnexpectedEof) {
            SnapshotError::CorruptGzip(e)
        } else {
            SnapshotError::Read(e)
        }
    }
}

/// A scrape that failed (evidence: a member that stopped answering). Live
/// runs collect them; a capture keeps them in its manifest.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScrapeFailure {
    pub target: String,
    /// Unix milliseconds.
    pub time: i64,
    pub error: String,
}

/// Which metric families to keep.
#[derive(Clone, Debug, Default)]
pub enum Keep {
    /// Every family (e.g. `record --all`).
    #[default]
    All,
    /// Only these metric names (as referenced by expressions), plus [`ALWAYS_KEEP`].
    Names(BTreeSet<String>),
}

impl Keep {
    /// Whether family `family` holds any of the wanted names (`x` covers the
    /// samples `x`, `x_bucket`, `x_sum`, `x_count`, `x_total`, `x_created`).
    pub fn wants(&self, family: &str) -> bool {
        match self {
            Keep::All => true,
            Keep::Names(names) => {
                ALWAYS_KEEP.contains(&family)
                    || names.contains(family)
                    || ["_bucket", "_sum", "_count", "_total"]
                        .iter()
                        .any(|s| names.contains(&format!("{family}{s}")))
                    || names
                        .range(family.to_string()..)
                        .take_while(|n| n.starts_with(family))
                        .any(|n| matches!(&n[family.len()..], "_bucket" | "_sum" | "_count" | "_total"))
                    || family
                        .strip_suffix("_total")
                        .is_some_and(|base| names.contains(base))
            }
        }
    }
}

/// A file planned for loading.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) target: String,
    pub(super) path: PathBuf,
    /// Content already in memory (live scrapes); `path` is then only its origin.
    pub(super) bytes: Option<std::sync::Arc<Vec<u8>>>,
    /// Time from the manifest or the file name.
    pub(super) name_time: Option<Millis>,
}

/// A target as declared by the user or a manifest.
#[derive(Clone, Debug, Default)]
pub(super) struct Declared {
    pub(super) role: Option<(Role, String)>,
    pub(super) version: Option<String>,
    /// The node it runs on (a manifest's `node:`, else its URL's host).
    pub(super) node: Option<String>,
}

#[derive(Default)]
pub(super) struct Plan {
    pub(super) files: Vec<Planned>,
    pub(super) declared: BTreeMap<String, Declared>,
    pub(super) failures: Vec<ScrapeFailure>,
    pub(super) warnings: Vec<SourceWarning>,
    /// Largest snapshot text read (after decompression); default
    /// [`crate::limits::DEFAULT_MAX_BODY`].
    pub(super) max_bytes: Option<u64>,
}

impl Plan {
    pub(super) fn warn(&mut self, origin: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(SourceWarning {
            origin: origin.into(),
            message: message.into(),
        });
    }

    pub(super) fn declare(&mut self, target: &str, role: Option<(Role, String)>, version: Option<String>) {
        let d = self.declared.entry(target.to_string()).or_default();
        if role.is_some() {
            d.role = role;
        }
        if version.is_some() {
            d.version = version;
        }
    }

    /// Declares the node a target runs on ([`super::nodemap`]).
    pub(super) fn declare_node(&mut self, target: &str, node: String) {
        self.declared.entry(target.to_string()).or_default().node = Some(node);
    }
}

/// Reads a file, transparently decompressing gzip (detected by magic bytes),
/// at most [`crate::limits::DEFAULT_MAX_BODY`] after decompression.
pub fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>, SnapshotError> {
    let raw = fs::read(path).map_err(SnapshotError::Read)?;
    if raw.len() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
        let mut out = Vec::with_capacity(gzip_size_hint(&raw));
        gunzip_capped(&raw, crate::limits::DEFAULT_MAX_BODY, &mut out)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Decompresses gzip `raw` into `out`, at most `max` bytes; returns the
/// number of bytes after the last gzip member that were ignored.
fn gunzip_capped(raw: &[u8], max: u64, out: &mut Vec<u8>) -> Result<u64, SnapshotError> {
    let mut r = crate::limits::Capped::new(GzMembers::new(raw), max);
    r.read_to_end(out)
        .map_err(|e| match crate::limits::TooLarge::of(&e) {
            Some(t) => SnapshotError::TooLarge(crate::limits::TooLarge(t.0)),
            None => SnapshotError::CorruptGzip(e),
        })?;
    Ok(r.inner_mut().trailing)
}

/// Gzip members one after another, as `MultiGzDecoder` reads them, except
/// that bytes after the last member that do not start another member end the
/// stream instead of failing it as "an invalid gzip header": they are counted
/// in `trailing` and reported (gzip(1) ignores such trailing garbage too).
struct GzMembers<R: BufRead> {
    dec: Option<flate2::bufread::GzDecoder<R>>,
    trailing: u64,
}

impl<R: BufRead> GzMembers<R> {
    fn new(r: R) -> GzMembers<R> {
        GzMembers {
            dec: Some(flate2::bufread::GzDecoder::new(r)),
            trailing: 0,
        }
    }
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(d) = self.dec.as_mut() else {
                return Ok(0);
            };
            let n = d.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // A member ended: another one, the end, or trailing bytes.
            let Some(mut r) = self.dec.take().map(|d| d.into_inner()) else {
                return Ok(0);
            };
            let next = r.fill_buf()?;
            if next.is_empty() {
                return Ok(0);
            }
            if next.starts_with(&[0x1f, 0x8b]) {
                self.dec = Some(flate2::bufread::GzDecoder::new(r));
                continue;
            }
            loop {
                let n = r.fill_buf()?.len();
                if n == 0 {
                    break;
                }
                self.trailing += n as u64;
                r.consume(n);
            }
            return Ok(0);
        }
    }
}

/// The decompressed size announced by a gzip member's trailer (ISIZE, the size
/// modulo 4 GiB), used only to size the output buffer: bounded to 64 times the
/// compressed size and to 1 GiB, so that a lying trailer costs nothing.
fn gzip_size_hint(gz: &[u8]) -> usize {
    let n = gz.len();
    let isize = match gz.get(n.saturating_sub(4)..) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
        _ => 0,
    };
    isize.max(n * 4).min(n.saturating_mul(64)).min(1 << 30)
}

/// The kept samples of one parsed file, packed: each sample's series key (its
/// name and label pairs, length-prefixed) in one buffer, so a file costs one
/// allocation per column rather than two per label.
#[derive(Default)]
struct Packed {
    keys: Vec<u8>,
    /// End of each sample's key in `keys`.
    ends: Vec<usize>,
    /// Each key's 128-bit hash ([`key_hash`]), computed by the parsing worker.
    hashes: Vec<u128>,
    values: Vec<f64>,
    /// Explicit timestamps.
    /// Explicit timestamps, only for the samples that have one: (sample
    /// index, milliseconds), by index.
    ts: Vec<(usize, i64)>,
}

impl Packed {
    fn push_str(&mut self, s: &str) {
        let mut n = s.len();
        // LEB128 length, then the bytes.
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.keys.push(b);
                break;
            }
            self.keys.push(b | 0x80);
        }
        self.keys.extend_from_slice(s.as_bytes());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.keys[start..self.ends[i]]
    }
}

/// A 128-bit XXH3 hash of a packed series key, with a seed drawn once per
/// process. The loader recognises a series seen in an earlier snapshot of the
/// same target by this hash instead of keeping every key: 16 bytes per series
/// rather than the key's 100–300. Two of a target's keys collide with
/// probability about n²/2¹²⁹ (10⁻²⁸ for a million series), far below the
/// chance of a memory error.
fn key_hash(key: &[u8]) -> u128 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        use std::hash::BuildHasher as _;
        std::collections::hash_map::RandomState::new().hash_one("cptriage series keys")
    });
    xxhash_rust::xxh3::xxh3_128_with_seed(key, seed)
}

/// Per target, the series ids of the keys seen so far, by [`key_hash`]. Shared
/// between the thread that fills the store (the only writer) and the parsing
/// workers, which keep a sample's key only when its series is not known yet:
/// after a target's first snapshot, parsed files hold hashes, not keys.
type SeriesKeys = RwLock<HashMap<String, hashbrown::HashMap<u128, u32>>>;

/// Samples a worker parses between two acquisitions of the [`SeriesKeys`] read
/// lock, so that the store's thread never waits long to add new series.
const KNOWN_RELOCK_SAMPLES: usize = 4096;

/// The strings of a packed key: the metric name, then label names and values.
fn key_strings(mut key: &[u8]) -> impl Iterator<Item = &str> {
    std::iter::from_fn(move || {
        let (mut n, mut shift, mut i) = (0usize, 0u32, 0usize);
        loop {
            let b = *key.get(i)?;
            n |= usize::from(b & 0x7f) << shift;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let s = key.get(i..i + n)?;
        key = &key[i + n..];
        // Keys are built from `&str`s, so this never fails.
        std::str::from_utf8(s).ok()
    })
}

/// The kept samples of one parsed file.
#[derive(Default)]
struct FileData {
    samples: Packed,
    families: BTreeSet<String>,
    max_ts: Option<i64>,
    process_start: Option<f64>,
    apiserver_version: Option<String>,
    etcd_version: Option<String>,
    /// `node_uname_info{nodename}`: the node a node-exporter runs on.
    nodename: Option<String>,
    mtime: Option<Millis>,
    issues: Vec<String>,
}

/// An opened snapshot file, read as a stream (gzip detected by its magic
/// bytes), at most `max` bytes after decompression.
enum Input {
    Plain(crate::limits::Capped<std::io::BufReader<fs::File>>),
    Gzip(Box<crate::limits::Capped<GzMembers<std::io::BufReader<fs::File>>>>),
}

impl Input {
    fn open(path: &Path, max: u64) -> Result<Input, SnapshotError> {
        let f = fs::File::open(path).map_err(SnapshotError::Read)?;
        let mut r = std::io::BufReader::with_capacity(64 * 1024, f);
        let magic = r.fill_buf().map_err(SnapshotError::Read)?;
        Ok(if magic.starts_with(&[0x1f, 0x8b]) {
            Input::Gzip(Box::new(crate::limits::Capped::new(GzMembers::new(r), max)))
        } else {
            Input::Plain(crate::limits::Capped::new(r, max))
        })
    }

    fn reader(&mut self) -> &mut dyn Read {
        match self {
            Input::Plain(r) => r,
            Input::Gzip(r) => r.as_mut(),
        }
    }

    /// Bytes after the gzip data that were ignored.
    fn trailing(&mut self) -> u64 {
        match self {
            Input::Plain(_) => 0,
            Input::Gzip(r) => r.inner_mut().trailing,
        }
    }

    /// The error of a read that failed, as for a file read whole.
    fn read_error(&self, e: std::io::Error) -> SnapshotError {
        SnapshotError::of_read(e, matches!(self, Input::Gzip(_)))
    }
}

/// What one snapshot is read from.
enum Source<'a> {
    /// A live scrape already in memory.
    Memory(&'a [u8]),
    File(Input),
}

impl FileData {
    /// What a sample says of its snapshot: its latest timestamp, the
    /// process start, the apiserver's or etcd's version, the node's name.
    fn note(&mut self, s: &expfmt::SampleRef<'_>) {
        if let Some(ts) = s.timestamp_ms {
            self.max_ts = Some(self.max_ts.map_or(ts, |m: i64| m.max(ts)));
        }
        match s.name {
            "process_start_time_seconds" => self.process_start = Some(s.value),
            "kubernetes_build_info" => {
                if let Some(v) =
                    super::version_of(s.name, s.labels.iter().map(|l| (l.name, l.value.as_ref())))
                {
                    self.apiserver_version = Some(v.to_string());
                }
            }
            "etcd_server_version" => {
                if let Some(v) =
                    super::version_of(s.name, s.labels.iter().map(|l| (l.name, l.value.as_ref())))
                {
                    self.etcd_version = Some(v.to_string());
                }
            }
            super::nodemap::UNAME => {
                if let Some(l) = s.labels.iter().find(|l| l.name == "nodename") {
                    self.nodename = Some(l.value.to_string());
                }
            }
            _ => {}
        }
    }

    /// The parser's issues worth a warning: malformed lines, and those that
    /// change values (NaN or negative counters, duplicate series, NaN bucket
    /// bounds), the first [`MAX_ISSUES_PER_FILE`] of them.
    fn note_issues(&mut self, issues: &[expfmt::Issue]) {
        let errors: Vec<&expfmt::Issue> = issues
            .iter()
            .filter(|i| {
                i.severity == Severity::Error
                    || i.message.starts_with("counter `")
                    || i.message.starts_with("duplicate series `")
                    || i.message.starts_with("bucket `le=\"NaN\"`")
            })
            .collect();
        for i in errors.iter().take(MAX_ISSUES_PER_FILE) {
            self.issues.push(format!("line {}: {}", i.line, i.message));
        }
        if errors.len() > MAX_ISSUES_PER_FILE {
            self.issues.push(format!(
                "… and {} more malformed lines",
                errors.len() - MAX_ISSUES_PER_FILE
            ));
        }
    }
}

/// Parses one snapshot. Files are streamed through the parser (a 20 MB
/// snapshot is never held whole); in-memory snapshots are parsed in place.
fn parse_file(pf: &Planned, keep: &Keep, known: &SeriesKeys, max: u64) -> Result<FileData, SnapshotError> {
    let (mut input, mtime) = match &pf.bytes {
        Some(b) => (Source::Memory(b), None),
        None => (
            Source::File(Input::open(&pf.path, max)?),
            fs::metadata(&pf.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as Millis),
        ),
    };
    let mut data = FileData {
        mtime,
        ..Default::default()
    };
    let mut keep_fn = |fam: &str| keep.wants(fam);
    let read_known = || known.read().unwrap_or_else(|e| e.into_inner());
    let mut guard = Some(read_known());
    let mut since_lock = 0usize;
    let mut sink = |s: &expfmt::SampleRef<'_>| {
        let p = &mut data.samples;
        let start = p.keys.len();
        p.push_str(s.name);
        for l in s.labels {
            p.push_str(l.name);
            p.push_str(&l.value);
        }
        let h = key_hash(&p.keys[start..]);
        since_lock += 1;
        if since_lock == KNOWN_RELOCK_SAMPLES {
            since_lock = 0;
            // Release before re-acquiring: a waiting writer blocks new readers,
            // so reading twice at once could deadlock with the store's thread.
            guard = None;
            guard = Some(read_known());
        }
        let ids = guard.as_ref().and_then(|g| g.get(&pf.target));
        if ids.is_some_and(|ids| ids.contains_key(&h)) {
            // A series the store already has: its hash is enough.
            p.keys.truncate(start);
        }
        p.hashes.push(h);
        p.ends.push(p.keys.len());
        p.values.push(s.value);
        if let Some(t) = s.timestamp_ms {
            p.ts.push((p.ends.len() - 1, t));
        }
        data.note(s);
    };
    let (report, total) = match &mut input {
        Source::Memory(b) => (
            expfmt::parse(b, &mut keep_fn, &mut sink).map_err(SnapshotError::Parse)?,
            b.len() as u64,
        ),
        Source::File(inp) => match expfmt::parse_reader(inp.reader(), &mut keep_fn, &mut sink) {
            Ok(r) => r,
            Err(expfmt::StreamError::Read(e)) => return Err(inp.read_error(e)),
            Err(expfmt::StreamError::Parse(e)) => return Err(SnapshotError::Parse(e)),
        },
    };
    drop(guard);
    if let Source::File(inp) = &mut input {
        let n = inp.trailing();
        if n > 0 {
            data.issues
                .push(format!("{n} bytes after the end of the gzip data ignored"));
        }
    }
    data.families = report.families.iter().map(|(n, _)| n.clone()).collect();
    data.note_issues(&report.issues);
    if total == 0 {
        return Err(SnapshotError::Empty);
    }
    if report.samples_kept + report.samples_skipped == 0 && data.issues.is_empty() {
        data.issues
            .push("no samples (only comments, HELP/TYPE lines or blank lines)".into());
    }
    Ok(data)
}

/// Infers a target's role from the families it exposes, with the reason.
pub fn infer_role(families: &BTreeSet<String>) -> (Role, String) {
    let has = |n: &str| families.contains(n);
    let etcd = [
        "etcd_server_has_leader",
        "etcd_server_version",
        "etcd_disk_wal_fsync_duration_seconds",
    ]
    .into_iter()
    .find(|n| has(n));
    let api = [
        "apiserver_request_total",
        "apiserver_request_count",
        "apiserver_request_duration_seconds",
    ]
    .into_iter()
    .find(|n| has(n));
    match (etcd, api) {
        (Some(e), None) => (Role::Etcd, format!("exposes `{e}`")),
        (None, Some(a)) => (Role::Apiserver, format!("exposes `{a}`")),
        (Some(e), Some(a)) => (
            Role::Unknown,
            format!("exposes both `{e}` (etcd) and `{a}` (apiserver); name the role with `role:NAME=PATH`"),
        ),
        (None, None) if has("workqueue_adds_total") => (
            Role::Controller,
            "exposes `workqueue_adds_total` and no apiserver request metrics".into(),
        ),
        (None, None) if super::nodemap::node_family(families).is_some() => (
            Role::Node,
            format!(
                "exposes `{}` (node-exporter or cAdvisor)",
                super::nodemap::node_family(families).unwrap_or_default()
            ),
        ),
        (None, None) => (
            Role::Unknown,
            "exposes no apiserver, etcd or controller metric cptriage knows".into(),
        ),
    }
}

/// Parses files on all cores, handing each result to `f` in input order, on
/// the calling thread, while the workers go on parsing the next files. At most
/// `2 × workers` parsed files wait to be handed over, so memory holds a few
/// files whatever the length of the capture.
fn parse_all(
    files: &[Planned],
    keep: &Keep,
    known: &SeriesKeys,
    max: u64,
    mut f: impl FnMut(usize, Result<FileData, SnapshotError>),
) {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len().max(1));
    let window = workers * 2;
    struct Shared {
        done: BTreeMap<usize, Result<FileData, SnapshotError>>,
        /// Files handed to `f` so far.
        consumed: usize,
    }
    let shared = Mutex::new(Shared {
        done: BTreeMap::new(),
        consumed: 0,
    });
    let changed = Condvar::new();
    let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= files.len() {
                    break;
                }
                // Files are taken in order, so the one `f` waits for never waits here.
                let mut g = lock();
                while i >= g.consumed + window {
                    g = changed.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                drop(g);
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    parse_file(&files[i], keep, known, max)
                }))
                .unwrap_or(Err(SnapshotError::ParserFailed));
                lock().done.insert(i, r);
                changed.notify_all();
            });
        }
        for i in 0..files.len() {
            let mut g = lock();
            let r = loop {
                if let Some(r) = g.done.remove(&i) {
                    break r;
                }
                g = changed.wait(g).unwrap_or_else(|e| e.into_inner());
            };
            g.consumed = i + 1;
            drop(g);
            changed.notify_all();
            f(i, r);
        }
    });
}

#[derive(Default)]
struct TargetState {
    target: Option<Target>,
    /// Series ids in the target's last snapshot, sorted.
    live: Vec<u32>,
    last_time: Option<Millis>,
    /// Whether a snapshot in the future (or at or before 1970) was already reported.
    warned_future: bool,
    /// `node_uname_info{nodename}` of its latest snapshot ([`super::nodemap`]).
    nodename: Option<String>,
}

/// A snapshot already in memory (a live scrape), loaded like a file.
#[derive(Clone, Debug)]
pub struct MemorySnapshot {
    pub target: String,
    pub role: Option<Role>,
    /// Why the role (e.g. "given on the command line", "discovered from kubeconfig").
    pub role_reason: String,
    pub time: Millis,
    /// The URL it came from (without credentials), for warnings.
    pub origin: String,
    /// The exposition text (gzip is detected and decompressed).
    pub bytes: std::sync::Arc<Vec<u8>>,
}

/// Loads in-memory snapshots (live scrapes) into a [`Dataset`], exactly as the
/// same snapshots written to a capture directory would load. `failures` are
/// scrapes that failed (target, time, error): they end the target's series.
pub fn load_memory(
    snaps: Vec<MemorySnapshot>,
    failures: Vec<ScrapeFailure>,
    keep: &Keep,
) -> Result<Dataset, DumpError> {
    let mut plan = Plan::default();
    for s in snaps {
        let bytes = if s.bytes.len() >= 2 && s.bytes[0] == 0x1f && s.bytes[1] == 0x8b {
            let mut out = Vec::new();
            match gunzip_capped(&s.bytes, crate::limits::DEFAULT_MAX_BODY, &mut out) {
                Ok(trailing) => {
                    if trailing > 0 {
                        plan.warn(
                            &s.origin,
                            format!("{trailing} bytes after the end of the gzip data ignored"),
                        );
                    }
                    std::sync::Arc::new(out)
                }
                Err(e) => {
                    plan.warn(&s.origin, format!("{e}; snapshot skipped"));
                    continue;
                }
            }
        } else {
            s.bytes
        };
        if let Some(r) = s.role {
            plan.declare(&s.target, Some((r, s.role_reason.clone())), None);
        }
        if let Some(host) = super::nodemap::host_of(&s.origin) {
            plan.declare_node(&s.target, host);
        }
        plan.files.push(Planned {
            target: s.target,
            path: PathBuf::from(s.origin),
            bytes: Some(bytes),
            name_time: Some(s.time),
        });
    }
    plan.failures = failures;
    run_plan(plan, keep)
}

pub(super) fn run_plan(mut plan: Plan, keep: &Keep) -> Result<Dataset, DumpError> {
    // Order: by time where the name gives one, so each target's snapshots arrive in order.
    // Files without a name time are ordered after parsing (mtime / sample timestamps).
    let files = std::mem::take(&mut plan.files);
    let mut store = Store::new();
    let mut states: BTreeMap<String, TargetState> = BTreeMap::new();
    let mut warnings = std::mem::take(&mut plan.warnings);
    // Parse everything first into (file index, data) but ingest per target in time order.
    // To keep memory bounded for long captures, files with name times are processed
    // in time order in chunks; files without are few (ad-hoc dumps) and handled the same way.
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| (files[i].name_time.unwrap_or(i64::MIN), files[i].target.clone()));
    let ordered: Vec<Planned> = order.iter().map(|&i| files[i].clone()).collect();

    // Files whose time is only known after parsing are buffered and ingested at the end.
    let mut late: Vec<(usize, FileData, Millis, TimeSource)> = Vec::new();
    let mut failures_by_target: HashMap<String, Vec<Millis>> = HashMap::new();
    for f in &plan.failures {
        failures_by_target
            .entry(f.target.clone())
            .or_default()
            .push(f.time);
    }

    let known = SeriesKeys::default();
    let max = plan.max_bytes.unwrap_or(crate::limits::DEFAULT_MAX_BODY);
    parse_all(&ordered, keep, &known, max, |i, r| {
        let pf = &ordered[i];
        let origin = pf.path.display().to_string();
        match r {
            Err(e) => warnings.push(SourceWarning {
                origin,
                message: format!("{e}; file skipped"),
            }),
            Ok(data) => {
                for m in &data.issues {
                    warnings.push(SourceWarning {
                        origin: origin.clone(),
                        message: m.clone(),
                    });
                }
                let Some((time, ts)) = file_time(pf, &data) else {
                    warnings.push(SourceWarning {
                        origin,
                        message: "no time in the name, in the samples or in the file system; file skipped"
                            .into(),
                    });
                    return;
                };
                if pf.name_time.is_some() {
                    ingest(
                        &mut store,
                        &mut states,
                        &known,
                        &plan.declared,
                        pf,
                        data,
                        time,
                        ts,
                        &mut warnings,
                    );
                } else {
                    late.push((i, data, time, ts));
                }
            }
        }
    });
    late.sort_by_key(|(i, _, t, _)| (*t, *i));
    for (i, data, time, ts) in late {
        ingest(
            &mut store,
            &mut states,
            &known,
            &plan.declared,
            &ordered[i],
            data,
            time,
            ts,
            &mut warnings,
        );
    }
    let silent = apply_failures(&mut store, &mut states, failures_by_target, &plan.declared);
    finish(store, states, silent, &plan.declared, keep, warnings)
}

/// The dataset from the ingested targets: restarts split, members mapped to
/// their nodes, `up` written, targets that never answered kept.
fn finish(
    mut store: Store,
    mut states: BTreeMap<String, TargetState>,
    silent: Vec<Target>,
    declared: &BTreeMap<String, Declared>,
    keep: &Keep,
    mut warnings: Vec<SourceWarning>,
) -> Result<Dataset, DumpError> {
    split_alternating_processes(&mut store, &mut states, &mut warnings);
    map_nodes(&mut store, &states, declared, &mut warnings);
    if keep.wants(UP) {
        for t in states
            .values()
            .filter_map(|s| s.target.as_ref())
            .chain(silent.iter())
        {
            push_up(&mut store, t);
        }
    }
    store.finish();
    let mut targets: Vec<Target> = states.into_values().filter_map(|s| s.target).collect();
    if targets.is_empty() {
        return Err(DumpError::NoData(warnings));
    }
    targets.extend(silent);
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Dataset {
        store,
        targets,
        warnings,
        audit: None,
        logs: None,
    })
}

/// A parsed file's time and where it comes from: the scrape's or the file
/// name's, else its samples' latest timestamp, else its mtime.
fn file_time(pf: &Planned, data: &FileData) -> Option<(Millis, TimeSource)> {
    match (pf.name_time, data.max_ts, data.mtime) {
        (Some(t), _, _) if pf.bytes.is_some() => Some((t, TimeSource::Scrape)),
        (Some(t), _, _) => Some((t, TimeSource::FileName)),
        (None, Some(t), _) => Some((t, TimeSource::SampleTimestamp)),
        (None, None, Some(t)) => Some((t, TimeSource::Mtime)),
        (None, None, None) => None,
    }
}

/// Failed scrapes recorded in a manifest end every series of that target, as a
/// failed scrape does in Prometheus, and stay with the target as evidence.
/// A target that never answered is kept too (with the role its manifest
/// entry gives), so that the report names it: returned.
fn apply_failures(
    store: &mut Store,
    states: &mut BTreeMap<String, TargetState>,
    failures_by_target: HashMap<String, Vec<Millis>>,
    declared: &BTreeMap<String, Declared>,
) -> Vec<Target> {
    let mut silent: Vec<Target> = Vec::new();
    for (tname, mut times) in failures_by_target {
        times.sort_unstable();
        times.dedup();
        if let Some(st) = states.get_mut(&tname) {
            for &t in &times {
                mark_stale(store, st, t, Vec::new());
            }
            if let Some(target) = st.target.as_mut() {
                target.failures = times;
            }
        } else {
            let decl = declared.get(&tname).cloned().unwrap_or_default();
            let (role, reason) = decl
                .role
                .unwrap_or((Role::Unknown, "no snapshot to infer a role from".into()));
            silent.push(Target {
                name: tname,
                role,
                role_reason: reason,
                version: decl.version,
                time_source: TimeSource::Scrape,
                snapshots: Vec::new(),
                families: BTreeSet::new(),
                failures: times,
            });
        }
    }
    silent
}

/// Maps the etcd members to the node targets they run on ([`super::nodemap`]).
fn map_nodes(
    store: &mut Store,
    states: &BTreeMap<String, TargetState>,
    declared: &BTreeMap<String, Declared>,
    warnings: &mut Vec<SourceWarning>,
) {
    let targets: Vec<&Target> = states.values().filter_map(|s| s.target.as_ref()).collect();
    let keys = states
        .iter()
        .map(|(name, s)| {
            let keys = super::nodemap::NodeKeys {
                node: declared.get(name).and_then(|d| d.node.clone()),
                nodename: s.nodename.clone(),
            };
            (name.clone(), keys)
        })
        .collect();
    let aliases = super::nodemap::NodeAliases::default();
    super::nodemap::map_members(store, &targets, &keys, &aliases, warnings);
}

/// The series cptriage writes for every target, as Prometheus's scraper does.
pub const UP: &str = "up";

/// Writes `up{instance, role}` for a target: 1 at each snapshot, 0 at each
/// failed scrape (a scrape that was not attempted has no sample). The same
/// rule then reads a capture, a live run and a Prometheus server alike.
fn push_up(store: &mut Store, t: &Target) {
    let mut pts: Vec<(Millis, f64)> = t
        .snapshots
        .iter()
        .map(|s| (s.time, 1.0))
        .chain(t.failures.iter().map(|&f| (f, 0.0)))
        .collect();
    pts.sort_by_key(|p| p.0);
    pts.dedup_by_key(|p| p.0);
    if pts.is_empty() {
        return;
    }
    let l = store.labels([
        ("__name__", UP),
        ("instance", t.name.as_str()),
        ("role", t.role.as_str()),
    ]);
    for (time, v) in pts {
        store.push(&l, time, v);
    }
}

/// The store's series id of every sample of a parsed file, adding the series
/// not seen before (under the write lock, which parsing workers release every
/// [`KNOWN_RELOCK_SAMPLES`] samples). `None` only for a sample whose key was
/// dropped as known although it is not, which cannot happen (ids are never
/// removed); it is skipped rather than risk a panic.
fn resolve_ids(
    store: &mut Store,
    known: &SeriesKeys,
    target: &str,
    samples: &Packed,
    instance: &Str,
    role: &Str,
) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = {
        let g = known.read().unwrap_or_else(|e| e.into_inner());
        let ids = g.get(target);
        samples
            .hashes
            .iter()
            .map(|h| ids.and_then(|m| m.get(h)).map(|&id| id as usize))
            .collect()
    };
    if out.iter().all(Option::is_some) {
        return out;
    }
    let mut g = known.write().unwrap_or_else(|e| e.into_inner());
    let ids = g.entry(target.to_string()).or_default();
    for (i, slot) in out.iter_mut().enumerate() {
        if slot.is_some() {
            continue;
        }
        let hash = samples.hashes[i];
        if let Some(&id) = ids.get(&hash) {
            *slot = Some(id as usize);
            continue;
        }
        let key = samples.key(i);
        if key.is_empty() {
            continue;
        }
        let mut strs = key_strings(key);
        let name = strs.next().unwrap_or_default();
        let mut pairs: Vec<(&str, &str)> = vec![("__name__", name)];
        while let (Some(n), Some(v)) = (strs.next(), strs.next()) {
            let n = match n {
                "instance" => "exported_instance",
                "role" => "exported_role",
                _ => n,
            };
            pairs.push((n, v));
        }
        let mut l = store.labels(pairs);
        l.set_shared(store.intern("instance"), instance.clone());
        l.set_shared(store.intern("role"), role.clone());
        let id = store.series_id(&l);
        ids.insert(hash, u32::try_from(id).unwrap_or(u32::MAX));
        *slot = Some(id);
    }
    out
}

/// Ends, at `t`, every series of the target that is not in `keep_live`;
/// `keep_live` (series ids, any order, repeats allowed) becomes the target's
/// live set, kept sorted.
fn mark_stale(store: &mut Store, st: &mut TargetState, t: Millis, mut keep_live: Vec<u32>) {
    keep_live.sort_unstable();
    keep_live.dedup();
    keep_live.shrink_to_fit();
    for &id in &st.live {
        let id = id as usize;
        if keep_live.binary_search(&(id as u32)).is_err() && store.last_time(id).is_some_and(|last| last < t)
        {
            store.push_id(id, t, stale_nan());
        }
    }
    st.live = keep_live;
}

#[allow(clippy::too_many_arguments)]
fn ingest(
    store: &mut Store,
    states: &mut BTreeMap<String, TargetState>,
    known: &SeriesKeys,
    declared: &BTreeMap<String, Declared>,
    pf: &Planned,
    data: FileData,
    time: Millis,
    ts: TimeSource,
    warnings: &mut Vec<SourceWarning>,
) {
    let origin = pf.path.display().to_string();
    let st = states.entry(pf.target.clone()).or_default();
    if st.target.is_none() {
        let decl = declared.get(&pf.target).cloned().unwrap_or_default();
        let (role, reason) = decl.role.unwrap_or_else(|| {
            let (r, why) = infer_role(&data.families);
            (r, format!("inferred: {why}"))
        });
        let version = decl.version.or_else(|| match role {
            Role::Etcd => data.etcd_version.clone(),
            _ => data.apiserver_version.clone(),
        });
        st.target = Some(Target {
            name: pf.target.clone(),
            role,
            role_reason: reason,
            version,
            time_source: ts,
            snapshots: Vec::new(),
            families: BTreeSet::new(),
            failures: Vec::new(),
        });
    }
    let Some(target) = st.target.as_mut() else {
        return;
    };
    if target.time_source != ts {
        warnings.push(SourceWarning {
            origin: origin.clone(),
            message: format!(
                "time taken from {ts:?} here but from {:?} for other snapshots of `{}`",
                target.time_source, target.name
            ),
        });
    }
    if st.last_time == Some(time) {
        warnings.push(SourceWarning {
            origin: origin.clone(),
            message: format!(
                "a second snapshot of `{}` at the same time; its values replace the first",
                target.name
            ),
        });
    }
    let role = target.role;
    if data.nodename.is_some() {
        st.nodename = data.nodename.clone();
    }
    target.families.extend(data.families.iter().cloned());
    target.snapshots.push(Snapshot {
        time,
        origin: origin.clone(),
        process_start: data.process_start,
    });
    let instance = store.intern(&target.name);
    let role_s = store.intern(role.as_str());
    if !st.warned_future {
        if let Some(w) = bad_time(&origin, time, ts, &target.name) {
            st.warned_future = true;
            warnings.push(w);
        }
    }
    let samples = &data.samples;
    let ids = resolve_ids(store, known, &pf.target, samples, &instance, &role_s);
    let pushed = push_samples(store, &ids, samples, time);
    warnings.extend(pushed.warnings(&origin, time));
    mark_stale(store, st, time, pushed.live);
    st.last_time = Some(time);
}

/// A warning for a snapshot time in the future or at or before the epoch.
fn bad_time(origin: &str, time: Millis, ts: TimeSource, target: &str) -> Option<SourceWarning> {
    let now = chrono::Utc::now().timestamp_millis();
    let future = time > now.saturating_add(FUTURE_TOLERANCE_MS);
    // Zero and negative times are unset or garbage timestamps (1970 or before).
    let epoch = time <= 0;
    (future || epoch).then(|| SourceWarning {
            origin: origin.to_string(),
            message: format!(
                "snapshot time {} (from {}) is {}: clock skew or a bad timestamp; onsets of `{}` cannot be compared with other targets",
                crate::timefmt::format_time(time),
                match ts {
                    TimeSource::FileName => "the file name",
                    TimeSource::SampleTimestamp => "the samples' timestamps",
                    TimeSource::Mtime => "the file's modification time",
                    TimeSource::Scrape => "the scrape",
                    TimeSource::Prometheus => "Prometheus",
                },
                if future {
                    "in the future"
                } else {
                    "at or before the Unix epoch (1970-01-01)"
                },
                target
            ),
        })
}

/// What pushing one snapshot's samples did: the series it holds, and the
/// samples whose own timestamps were skewed or out of order.
struct Pushed {
    live: Vec<u32>,
    skewed: usize,
    worst_skew: Millis,
    out_of_order: usize,
}

impl Pushed {
    fn warnings(&self, origin: &str, time: Millis) -> Vec<SourceWarning> {
        let mut out = Vec::new();
        if self.skewed > 0 {
            out.push(SourceWarning {
                origin: origin.to_string(),
                message: format!(
                    "{} samples carry explicit timestamps more than {} s from the snapshot time {} (up to {} off): clock skew or bad timestamps; the snapshot time is used for them",
                    self.skewed,
                    SKEW_TOLERANCE_MS / 1000,
                    crate::timefmt::format_time(time),
                    describe_offset(self.worst_skew)
                ),
            });
        }
        if self.out_of_order > 0 {
            out.push(SourceWarning {
                origin: origin.to_string(),
                message: format!(
                    "{} samples have explicit timestamps older than the series' previous point (out of order); they were dropped",
                    self.out_of_order
                ),
            });
        }
        out
    }
}

/// Pushes a snapshot's samples at `time` (or their own timestamps, when close
/// to it and in order).
fn push_samples(store: &mut Store, ids: &[Option<usize>], samples: &Packed, time: Millis) -> Pushed {
    let mut live: Vec<u32> = Vec::with_capacity(samples.len());
    let (mut skewed, mut worst_skew, mut out_of_order) = (0usize, 0 as Millis, 0usize);
    let mut next_ts = 0usize;
    for (i, &id) in ids.iter().enumerate() {
        let explicit = match samples.ts.get(next_ts) {
            Some(&(j, t)) if j == i => {
                next_ts += 1;
                Some(t)
            }
            _ => None,
        };
        let Some(id) = id else { continue };
        let t = match explicit {
            Some(x) if x.abs_diff(time) > SKEW_TOLERANCE_MS as u64 => {
                skewed += 1;
                let off = x.saturating_sub(time);
                if off.unsigned_abs() > worst_skew.unsigned_abs() {
                    worst_skew = off;
                }
                time
            }
            Some(x) => {
                // As Prometheus does, a sample older than the series' last point
                // is refused (it would fake a counter reset).
                if store.last_time(id).is_some_and(|last| last > x) {
                    out_of_order += 1;
                    live.push(id as u32);
                    continue;
                }
                x
            }
            None => time,
        };
        store.push_id(id, t, samples.values[i]);
        live.push(id as u32);
    }
    Pushed {
        live,
        skewed,
        worst_skew,
        out_of_order,
    }
}

/// `+90 s`, `-2 h` …
fn describe_offset(ms: Millis) -> String {
    let sign = if ms < 0 { "-" } else { "+" };
    let s = ms.unsigned_abs() / 1000;
    match s {
        0..=119 => format!("{sign}{s} s"),
        120..=7199 => format!("{sign}{} min", s / 60),
        7200..=172_799 => format!("{sign}{} h", s / 3600),
        _ => format!("{sign}{} days", s / 86_400),
    }
}

/// When a target's `process_start_time_seconds` goes back to an earlier value
/// (A, B, A: impossible for restarts, typical of a load balancer alternating
/// replicas), each process becomes its own target (`NAME`, `NAME.p2`, …, as the
/// live source names them) so that no rate or counter reset spans two processes.
fn split_alternating_processes(
    store: &mut Store,
    states: &mut BTreeMap<String, TargetState>,
    warnings: &mut Vec<SourceWarning>,
) {
    let names: Vec<String> = states.keys().cloned().collect();
    for name in names {
        let Some(target) = states.get(&name).and_then(|s| s.target.as_ref()) else {
            continue;
        };
        let mut procs: Vec<f64> = Vec::new();
        let mut by_snapshot: Vec<(Millis, usize)> = Vec::with_capacity(target.snapshots.len());
        let (mut cur, mut alternates) = (0usize, false);
        for s in &target.snapshots {
            if let Some(p) = s.process_start {
                let k = match procs.iter().position(|q| (q - p).abs() <= SAME_PROCESS_S) {
                    Some(k) => {
                        alternates |= k != cur;
                        k
                    }
                    None => {
                        procs.push(p);
                        procs.len() - 1
                    }
                };
                cur = k;
            }
            by_snapshot.push((s.time, cur));
        }
        if !alternates {
            continue;
        }
        let name_of = |k: usize| {
            if k == 0 {
                name.clone()
            } else {
                format!("{name}.p{}", k + 1)
            }
        };
        let mut parts: Vec<Target> = (0..procs.len())
            .map(|k| Target {
                name: name_of(k),
                snapshots: target
                    .snapshots
                    .iter()
                    .zip(&by_snapshot)
                    .filter(|(_, (_, j))| *j == k)
                    .map(|(s, _)| s.clone())
                    .collect(),
                ..target.clone()
            })
            .collect();
        let process_of = |t: Millis| {
            let i = by_snapshot.partition_point(|(st, _)| *st <= t);
            by_snapshot[i.saturating_sub(1)].1
        };
        let ids: Vec<usize> = store
            .series()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.labels.get("instance") == Some(name.as_str()))
            .map(|(i, _)| i)
            .collect();
        let instance = store.intern("instance");
        for id in ids {
            let points = store.take_samples(id);
            let mut split: Vec<Vec<crate::store::Sample>> = vec![Vec::new(); procs.len()];
            for p in points {
                split[process_of(p.t)].push(p);
            }
            let mut split = split.into_iter();
            store.extend_samples(id, split.next().unwrap_or_default());
            for (k, points) in split.enumerate() {
                if points.is_empty() {
                    continue;
                }
                let mut l = store.get(id).labels.clone();
                let v = store.intern(&name_of(k + 1));
                l.set_shared(instance.clone(), v);
                let nid = store.series_id(&l);
                store.extend_samples(nid, points);
            }
        }
        warnings.push(SourceWarning {
            origin: name.clone(),
            message: format!(
                "process_start_time_seconds alternates between {} processes (several replicas behind one address, e.g. a load balancer): each is analysed as its own target ({}), so no rate spans two processes",
                procs.len(),
                (0..procs.len()).map(|k| format!("`{}`", name_of(k))).collect::<Vec<_>>().join(", ")
            ),
        });
        let mut parts_iter = parts.drain(..);
        if let (Some(first), Some(st)) = (parts_iter.next(), states.get_mut(&name)) {
            st.target = Some(first);
        }
        for t in parts_iter {
            states.insert(
                t.name.clone(),
                TargetState {
                    target: Some(t),
                    ..Default::default()
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_matches_family_suffixes() {
        let k = Keep::Names(
            [
                "apiserver_request_duration_seconds_bucket".to_string(),
                "up".into(),
            ]
            .into(),
        );
        assert!(k.wants("apiserver_request_duration_seconds"));
        assert!(k.wants("up"));
        assert!(k.wants("process_start_time_seconds"));
        assert!(!k.wants("apiserver_request_total"));
        let k = Keep::Names(["authentication_attempts".to_string()].into());
        assert!(k.wants("authentication_attempts"));
    }

    #[test]
    fn role_inference() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(infer_role(&f(&["etcd_server_has_leader"])).0, Role::Etcd);
        assert_eq!(
            infer_role(&f(&["apiserver_request_total", "workqueue_adds_total"])).0,
            Role::Apiserver
        );
        assert_eq!(infer_role(&f(&["workqueue_adds_total"])).0, Role::Controller);
        assert_eq!(infer_role(&f(&["go_goroutines"])).0, Role::Unknown);
    }
}
