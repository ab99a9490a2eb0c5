//! Audit logs as a source (`diagnose --audit FILE|DIR...`): kube-apiserver's
//! `audit.k8s.io/v1` events, one JSON object per line (the log backend's
//! format), plain or gzip, streamed line by line in bounded memory.
//!
//! Only events of stage `ResponseComplete` are counted (a request also logs
//! `RequestReceived`, and long-running ones `ResponseStarted`: counting those
//! would count requests twice), plus the `ResponseStarted` events of failed
//! authentications, which kube-apiserver logs at that stage only
//! (`WithFailedAuthenticationAudit`). They become counter series of one target
//! of role `audit` ([`aggregate::names`]), bucketed on the same steps as the
//! metrics, so rules read them like any other series:
//!
//! - the latency of requests slower than 500 ms split by layer
//!   (`apiserver.latency.k8s.io/<layer>` annotations), per verb, resource and
//!   user agent;
//! - a request-duration histogram with kube-apiserver's buckets;
//! - 401/403/429 answers per user and user agent.
//!
//! The slowest requests, with their layer split, are kept as report evidence
//! ([`AuditSummary`]). A line that is not an audit event is counted and named
//! by `file:line`, and the rest is analysed. Slow requests without latency
//! annotations (kube-apiserver before 1.24, or a backend that drops
//! annotations) make the layer split a reported gap, never healthy.

pub mod aggregate;
pub mod event;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{skipped, Dataset, Role, Snapshot, SourceWarning, Target, TimeSource};
use crate::store::Millis;
use aggregate::Aggregator;
pub use aggregate::{names, DeniedClient, SlowRequest};
use event::Event;

/// Name of the audit target in the dataset and the report.
pub const TARGET: &str = "audit";

/// How audit logs are read.
#[derive(Clone, Debug)]
pub struct AuditConfig {
    /// Width of the time buckets (the metrics' scrape interval, or the step).
    pub resolution: Millis,
    /// Events completing outside `[from, to]` are counted but not turned
    /// into series (the window of the metrics beside them).
    pub clip: Option<(Millis, Millis)>,
    /// Longest line read (longer ones are bad lines, skipped).
    pub max_line: usize,
    /// Most label sets per counter family; later ones fold into `other`.
    pub max_series: usize,
    /// How many of the slowest requests to keep.
    pub slowest: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            resolution: 15_000,
            clip: None,
            max_line: 16 << 20,
            max_series: 2000,
            slowest: 10,
        }
    }
}

/// A line that is not a usable audit event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BadLine {
    /// `file:line`.
    pub at: String,
    pub message: String,
}

/// What the audit logs held, for the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditSummary {
    pub files: Vec<String>,
    /// Lines read (blank lines included).
    pub lines: u64,
    /// Events counted (ResponseComplete, and failed authentications).
    pub events: u64,
    /// Events of other stages (RequestReceived, ResponseStarted), not counted.
    pub other_stages: u64,
    /// Counted events outside the metrics' window (not turned into series).
    pub outside_window: u64,
    /// Lines that are not audit events.
    pub bad_lines: u64,
    /// The first of them, by `file:line`.
    pub bad_examples: Vec<BadLine>,
    /// Non-long-running requests slower than 500 ms.
    pub slow_requests: u64,
    /// Of those, the ones carrying `apiserver.latency.k8s.io/*` annotations.
    pub slow_annotated: u64,
    /// First and last counted event.
    pub first: Option<Millis>,
    pub last: Option<Millis>,
    /// Seconds per layer over all annotated slow requests, largest first
    /// (`total` is their sum of total latencies).
    pub layers: Vec<(String, f64)>,
    /// The slowest requests, slowest first.
    pub slowest: Vec<SlowRequest>,
    /// The most denied clients (401/403/429).
    pub denied: Vec<DeniedClient>,
    /// Events whose labels were folded into `other`.
    pub folded: u64,
    /// What the audit logs cannot tell (reported as gaps).
    pub gaps: Vec<String>,
    /// What the reader should know about the numbers (reported as warnings).
    pub notes: Vec<String>,
}

/// Why audit logs could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot read audit log `{path}`: {message}")]
    Read { path: String, message: String },
    #[error("no audit log file in `{0}`")]
    Empty(String),
    #[error("no audit event in {0}: every line failed (first: {1})")]
    NoEvents(String, String),
}

/// Bad lines named in full; more are counted.
const MAX_BAD_EXAMPLES: usize = 20;

/// The files of the arguments: files as given, the regular files of a
/// directory (not hidden, by name).
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, AuditError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| AuditError::Read {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| AuditError::Read {
                    path: p.display().to_string(),
                    message: e.to_string(),
                })?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(AuditError::Empty(p.display().to_string()));
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Opens a file, decoding gzip (by its magic bytes).
fn open(path: &Path) -> std::io::Result<Box<dyn Read>> {
    let mut f = std::fs::File::open(path)?;
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic)?;
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(0))?;
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(
            BufReader::with_capacity(1 << 16, f),
        )))
    } else {
        Ok(Box::new(f))
    }
}

/// Calls `line` with every line of `r` (without its newline) and its number;
/// a line longer than `max` is passed as `Err(length)` instead, without
/// holding it in memory.
pub fn for_each_line(
    r: impl Read,
    max: usize,
    mut line: impl FnMut(u64, Result<&[u8], usize>),
) -> std::io::Result<()> {
    let mut r = BufReader::with_capacity(256 << 10, r);
    let mut buf: Vec<u8> = Vec::new();
    let mut n: u64 = 0;
    let mut too_long: Option<usize> = None;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if too_long.is_some() || !buf.is_empty() {
                n += 1;
                match too_long {
                    Some(len) => line(n, Err(len)),
                    None => line(n, Ok(&buf)),
                }
            }
            return Ok(());
        }
        let mut start = 0;
        let len = chunk.len();
        while let Some(i) = memchr::memchr(b'\n', &chunk[start..]) {
            let end = start + i;
            n += 1;
            match too_long.take() {
                Some(l) => line(n, Err(l + (end - start))),
                None if buf.is_empty() => {
                    if end - start > max {
                        line(n, Err(end - start));
                    } else {
                        line(n, Ok(&chunk[start..end]));
                    }
                }
                None => {
                    let total = buf.len() + (end - start);
                    if total > max {
                        line(n, Err(total));
                    } else {
                        buf.extend_from_slice(&chunk[start..end]);
                        line(n, Ok(&buf));
                    }
                    buf.clear();
                }
            }
            start = end + 1;
        }
        let rest = &chunk[start..];
        match &mut too_long {
            Some(l) => *l += rest.len(),
            None if buf.len() + rest.len() > max => {
                too_long = Some(buf.len() + rest.len());
                buf.clear();
                buf.shrink_to(1 << 16);
            }
            None => buf.extend_from_slice(rest),
        }
        r.consume(len);
    }
}

/// Reads audit logs into counters; returns the aggregator and the summary
/// without the parts the aggregator fills.
pub fn read(files: &[PathBuf], cfg: &AuditConfig) -> Result<(Aggregator, AuditSummary), AuditError> {
    let mut rd = Reading {
        cfg,
        agg: Aggregator::new(cfg.resolution, cfg.max_series, cfg.slowest),
        sum: AuditSummary::default(),
        unannotated_slow_example: None,
    };
    for path in files {
        rd.file(path)?;
    }
    rd.finish()
}

/// What [`read`] has read so far.
struct Reading<'a> {
    cfg: &'a AuditConfig,
    agg: Aggregator,
    sum: AuditSummary,
    /// Where the first slow request without latency annotations is.
    unannotated_slow_example: Option<String>,
}

impl Reading<'_> {
    /// Reads one file, plain or gzip, line by line.
    fn file(&mut self, path: &Path) -> Result<(), AuditError> {
        let shown = path.display().to_string();
        self.sum.files.push(shown.clone());
        let r = open(path).map_err(|e| AuditError::Read {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let res = for_each_line(r, self.cfg.max_line, |n, l| self.line(&shown, n, l));
        // A truncated or corrupt gzip stream: what was read is analysed,
        // the rest of the file is a bad line.
        if let Err(e) = res {
            let n = self.sum.lines + 1;
            self.bad(
                &shown,
                n,
                format!("cannot read further ({e}): the rest of the file is skipped"),
            );
        }
        Ok(())
    }

    /// A line that is not a usable audit event: counted, and named by
    /// `file:line` while fewer than [`MAX_BAD_EXAMPLES`] are.
    fn bad(&mut self, shown: &str, n: u64, message: String) {
        self.sum.bad_lines += 1;
        if self.sum.bad_examples.len() < MAX_BAD_EXAMPLES {
            self.sum.bad_examples.push(BadLine {
                at: format!("{shown}:{n}"),
                message,
            });
        }
    }

    /// Line `n` of the file `shown` (or its length, when too long): counted
    /// into the aggregator if it is an event of a counted stage in the window.
    fn line(&mut self, shown: &str, n: u64, l: Result<&[u8], usize>) {
        self.sum.lines += 1;
        let l = match l {
            Err(len) => {
                self.bad(
                    shown,
                    n,
                    format!(
                        "line of {len} bytes is longer than the {} byte limit",
                        self.cfg.max_line
                    ),
                );
                return;
            }
            Ok(l) => l,
        };
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        // Half of a log is RequestReceived events, never counted: they are
        // recognised without decoding them (a line that merely looks like
        // one is not analysed either way).
        if l.first() == Some(&b'{')
            && l.last() == Some(&b'}')
            && memchr::memmem::find(l, b"\"stage\":\"RequestReceived\"").is_some()
        {
            self.sum.other_stages += 1;
            return;
        }
        let e: Event = match serde_json::from_slice(l) {
            Ok(e) => e,
            Err(e) => {
                self.bad(
                    shown,
                    n,
                    format!(
                        "not an audit event: {}",
                        crate::secret::serde_message(&e.to_string())
                    ),
                );
                return;
            }
        };
        if let Some(k) = e.kind.as_deref() {
            if k != "Event" {
                let k = if crate::secret::is_plain_identifier(k) {
                    k
                } else {
                    "(not shown)"
                };
                self.bad(shown, n, format!("kind `{k}` is not an audit Event"));
                return;
            }
        }
        let counted =
            e.stage == "ResponseComplete" || (e.stage == "ResponseStarted" && e.code() == Some(401));
        if !counted {
            match e.stage.as_ref() {
                "RequestReceived" | "ResponseStarted" | "Panic" => self.sum.other_stages += 1,
                _ => self.bad(
                    shown,
                    n,
                    "unknown `stage` (expected RequestReceived, ResponseStarted, ResponseComplete or Panic)"
                        .into(),
                ),
            }
            return;
        }
        let (Some(rx), Some(end)) = (
            event::parse_micros(&e.request_received_timestamp),
            event::parse_micros(&e.stage_timestamp),
        ) else {
            self.bad(
                shown,
                n,
                "`requestReceivedTimestamp` or `stageTimestamp` is not an RFC 3339 time".into(),
            );
            return;
        };
        if let Some((from, to)) = self.cfg.clip {
            let t = end.div_euclid(1000);
            if t < from || t > to {
                self.sum.outside_window += 1;
                return;
            }
        }
        let before = self.agg.slow - self.agg.slow_annotated;
        if let Err(m) = self.agg.event(&e, rx, end) {
            self.bad(shown, n, m);
            return;
        }
        if self.agg.slow - self.agg.slow_annotated > before && self.unannotated_slow_example.is_none() {
            self.unannotated_slow_example = Some(format!("{shown}:{n}"));
        }
    }

    /// The summary of every file read, with the gaps and notes it implies;
    /// an error when no line was an audit event.
    fn finish(self) -> Result<(Aggregator, AuditSummary), AuditError> {
        let Reading {
            agg,
            mut sum,
            unannotated_slow_example,
            ..
        } = self;
        sum.events = agg.events;
        sum.slow_requests = agg.slow;
        sum.slow_annotated = agg.slow_annotated;
        sum.folded = agg.folded;
        if let Some((f, l)) = agg.span() {
            sum.first = Some(f);
            sum.last = Some(l);
        }
        let mut layers: Vec<(String, f64)> =
            agg.layer_totals().iter().map(|(k, v)| (k.clone(), *v)).collect();
        layers.sort_by(|a, b| b.1.total_cmp(&a.1));
        sum.layers = layers;
        sum.slowest = agg.slowest.clone();
        sum.denied = agg.top_denied(10);
        if sum.events == 0 {
            if let Some(b) = sum.bad_examples.first() {
                if sum.other_stages == 0 && sum.outside_window == 0 {
                    return Err(AuditError::NoEvents(
                        sum.files.join(", "),
                        format!("{}: {}", b.at, b.message),
                    ));
                }
            }
        }
        if sum.events == 0 && sum.other_stages > 0 {
            sum.gaps.push(format!(
                "the audit logs hold {} events but none of stage ResponseComplete (the policy omits that stage): latencies and answers cannot be read",
                sum.other_stages
            ));
        }
        let unannotated = sum.slow_requests - sum.slow_annotated;
        if unannotated > 0 && sum.slow_annotated == 0 {
            sum.gaps.push(format!(
                "none of the {} requests slower than 500 ms carries `apiserver.latency.k8s.io/*` annotations (first at {}): kube-apiserver before 1.24, or an audit backend that drops annotations; which layer made them slow cannot be read from the audit logs",
                sum.slow_requests,
                unannotated_slow_example.as_deref().unwrap_or("?")
            ));
        } else if unannotated > 0 {
            sum.notes.push(format!(
                "{unannotated} of {} requests slower than 500 ms carry no latency annotation (first at {}): no tracked layer took time (authentication, authorization and in-process admission are not tracked), or they come from an apiserver before 1.24; their time is counted as `unannotated`",
                sum.slow_requests,
                unannotated_slow_example.as_deref().unwrap_or("?")
            ));
        }
        Ok((agg, sum))
    }
}

/// Reads audit logs and adds them to `ds` as the target [`TARGET`] of role
/// `audit`, with a snapshot per bucket boundary; bad lines and gaps become
/// dataset warnings. Returns the summary (also stored in `ds.audit`).
pub fn load_into(ds: &mut Dataset, paths: &[PathBuf], cfg: &AuditConfig) -> Result<(), AuditError> {
    let files = expand(paths)?;
    let (agg, sum) = read(&files, cfg)?;
    let families = agg.emit(&mut ds.store, TARGET);
    ds.store.finish();
    let origin = skipped::origin(files.iter().map(|p| p.display()), "audit log");
    ds.warnings.extend(skipped::bad_lines(
        &origin,
        sum.bad_lines,
        "line(s) are not audit events",
        sum.bad_examples
            .iter()
            .map(|b| (b.at.as_str(), b.message.as_str())),
    ));
    ds.warnings.extend(skipped::outside_window(
        &origin,
        sum.outside_window,
        "audit event(s)",
    ));
    if sum.folded > 0 {
        ds.warnings.push(SourceWarning {
            origin: origin.clone(),
            message: format!(
                "{} audit event(s) had labels beyond {} label sets per family and were counted as `other`",
                sum.folded, cfg.max_series
            ),
        });
    }
    let boundaries = agg.boundaries();
    let mut fams: std::collections::BTreeSet<String> = families.into_iter().collect();
    for n in &sum.notes {
        ds.warnings.push(SourceWarning {
            origin: origin.clone(),
            message: n.clone(),
        });
    }
    // With no slow request, the layer family exists even though it has no
    // series yet: "nothing slow" is not "not exposed". Slow requests none of
    // which is annotated leave it out: a gap.
    if (sum.slow_requests == 0 || sum.slow_annotated > 0) && sum.events > 0 {
        fams.insert(names::LAYER_SECONDS.to_string());
        fams.insert(names::SLOW_ANNOTATED.to_string());
        fams.insert(names::SLOW.to_string());
    }
    if sum.events > 0 {
        fams.insert(names::DENIED.to_string());
    }
    ds.targets.push(Target {
        name: TARGET.to_string(),
        role: Role::Audit,
        role_reason: "given with --audit".into(),
        version: None,
        time_source: TimeSource::SampleTimestamp,
        snapshots: boundaries
            .iter()
            .map(|&t| Snapshot {
                time: t,
                origin: origin.clone(),
                process_start: None,
            })
            .collect(),
        families: fams,
        failures: Vec::new(),
    });
    ds.audit = Some(sum);
    Ok(())
}
