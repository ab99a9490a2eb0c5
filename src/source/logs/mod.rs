//! etcd and kube-apiserver logs as a source (`diagnose --logs FILE|DIR...`):
//! each recognised message class ([`class::Class`]) becomes a counter per
//! member and time bucket, on the same steps as the metrics, under role
//! `logs` (one target per member), so the rules read them like any series:
//!
//! - `cptriage_log_messages_total{instance, reporter, component, class}`:
//!   messages of a class; `instance` is the member the message is about
//!   (the logging member, or the peer it names for `peer_*` and
//!   `leader_lost`), `reporter` the member whose log holds it;
//! - `cptriage_log_took_seconds_total{…}`: the durations the messages carry
//!   (`took`, the late heartbeat's excess, the probe's round trip);
//! - `cptriage_log_lines_total{instance, component}`: every timed line.
//!
//! Every class of a member's component has a series from the first to the
//! last line of all logs, zero where nothing was logged: a quiet log reads
//! 0, not absent (the rules never read a quiet log as healthy: logs alone
//! never make a healthy verdict). Lines are streamed in bounded memory;
//! bad lines (binary data, no time, cut short, longer than the limit) are
//! counted and named by `file:line`, and the rest is read. Unrecognised
//! messages are counted by template; the most frequent warnings are listed.

pub mod class;
pub mod layout;
pub mod line;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::audit::for_each_line;
use super::{skipped, Dataset, Role, Snapshot, SourceWarning, Target, TimeSource};
use crate::store::{Millis, Store};
use class::{Class, Component, Recognised};
use layout::{LogFile, Skipped};
use line::{Cri, Format, Level};

/// Metric names of the series logs become (all carry `instance` and `role="logs"`).
pub mod names {
    pub const MESSAGES: &str = "cptriage_log_messages_total";
    pub const TOOK: &str = "cptriage_log_took_seconds_total";
    pub const LINES: &str = "cptriage_log_lines_total";
}

/// How logs are read.
#[derive(Clone, Debug)]
pub struct LogsConfig {
    /// Width of the time buckets (the metrics' scrape interval, or the step).
    pub resolution: Millis,
    /// Lines outside `[from, to]` are counted but not turned into series.
    pub clip: Option<(Millis, Millis)>,
    /// Longest line read (longer ones are bad lines, skipped).
    pub max_line: usize,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig {
            resolution: 5_000,
            clip: None,
            max_line: 1 << 20,
        }
    }
}

/// A line that could not be read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BadLine {
    /// `file:line`.
    pub at: String,
    pub message: String,
}

/// A log line shown as evidence: shortened, quoted values and credentials
/// redacted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub time: Millis,
    /// The member whose log holds it.
    pub member: String,
    pub class: String,
    /// Seconds the message carries (`took`), if any.
    pub took: Option<f64>,
    pub text: String,
    /// `file:line`.
    pub at: String,
}

/// The messages of one class about one member, as one member logged them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassCount {
    /// The member the messages are about.
    pub instance: String,
    /// The member whose log holds them.
    pub reporter: String,
    pub component: Component,
    pub class: String,
    pub count: u64,
    pub took_seconds: f64,
    pub first: LogLine,
    /// The line with the longest duration (the first when none carries one).
    pub telling: LogLine,
}

/// One file read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileRead {
    pub path: String,
    pub member: String,
    pub component: Option<Component>,
    pub layout: String,
    /// The formats its lines were read in.
    pub formats: Vec<String>,
    pub lines: u64,
    pub recognised: u64,
    pub first: Option<Millis>,
    pub last: Option<Millis>,
}

/// A member (or replica) whose logs were read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub component: Component,
    /// Its raft member ID (hex), when its log says it.
    pub id: Option<String>,
}

/// What the logs held, for the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogsSummary {
    pub files: Vec<FileRead>,
    pub skipped: Vec<Skipped>,
    /// Files under the arguments that are not logs (not named).
    pub other_files: u64,
    pub members: Vec<Member>,
    pub lines: u64,
    pub recognised: u64,
    /// Timed lines of no recognised class.
    pub unknown: u64,
    /// Lines without a time (not placed on the grid), and the first one.
    pub untimed: u64,
    pub untimed_example: Option<String>,
    pub outside_window: u64,
    pub bad_lines: u64,
    pub bad_examples: Vec<BadLine>,
    /// The most frequent unrecognised warnings and errors (template, count).
    pub unknown_warnings: Vec<(String, u64)>,
    pub classes: Vec<ClassCount>,
    pub first: Option<Millis>,
    pub last: Option<Millis>,
    /// The lines shown for the root cause (filled by the verdict).
    pub evidence: Vec<LogLine>,
    /// Width of the time buckets the lines were counted in.
    pub resolution: Millis,
    pub gaps: Vec<String>,
    pub notes: Vec<String>,
}

/// Why logs could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error(transparent)]
    Layout(#[from] layout::LayoutError),
    #[error("cannot read log `{path}`: {message}")]
    Read { path: String, message: String },
    #[error("no timed etcd or kube-apiserver log line in {0} (first bad line: {1})")]
    NoLines(String, String),
}

const MAX_BAD_EXAMPLES: usize = 20;
/// Distinct unknown templates and counter keys kept; more fold into `other`.
const MAX_TEMPLATES: usize = 5000;
const MAX_KEYS: usize = 5000;
/// Evidence text length.
const MAX_TEXT: usize = 240;

/// Opens a file, decoding gzip by its magic bytes.
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

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    /// Member name, or a peer's raw ID until resolved.
    instance: String,
    reporter: String,
    component: Component,
    class: Class,
}

#[derive(Default)]
struct Acc {
    buckets: BTreeMap<i64, (f64, f64)>,
    count: u64,
    took: f64,
    first: Option<LogLine>,
    telling: Option<LogLine>,
}

/// Everything read, before the series are written.
struct Reader<'c> {
    cfg: &'c LogsConfig,
    sum: LogsSummary,
    acc: HashMap<Key, Acc>,
    lines: HashMap<(String, Component), BTreeMap<i64, f64>>,
    templates: HashMap<String, u64>,
    ids: BTreeMap<String, String>,
    members: BTreeMap<String, Component>,
    folded: u64,
    /// Per member, its starts (`true`) and announced stops (`false`), in time.
    lifecycle: BTreeMap<String, Vec<(Millis, bool)>>,
}

fn bucket(res: Millis, t: Millis) -> i64 {
    t.div_euclid(res) + i64::from(t.rem_euclid(res) != 0)
}

/// The text of a line as shown: quoted values (request keys, values)
/// replaced, credentials redacted, shortened.
pub fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_TEXT + 8));
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'"') {
            chars.next();
            out.push_str("\\\"");
            continue;
        }
        out.push(c);
    }
    // Request and response strings of etcd's slow-request warnings carry
    // keys and values: everything between `request` and `took` goes.
    let out = redact_requests(&out);
    let s = crate::secret::scrub(&out).into_owned();
    if s.chars().count() > MAX_TEXT {
        let mut t: String = s.chars().take(MAX_TEXT).collect();
        t.push('…');
        t
    } else {
        s
    }
}

fn redact_requests(s: &str) -> String {
    // zap: `"request":"…"` and similar fields; capnslog: `request "…" with result "…" took too long`.
    let mut out = s.to_string();
    for key in [
        "\"request\":\"",
        "\"response\":\"",
        "\"key\":\"",
        "\"range-begin\":\"",
        "\"range-end\":\"",
    ] {
        let mut from = 0;
        while let Some(i) = out[from..].find(key).map(|i| i + from) {
            let start = i + key.len();
            let end = line_quote_end(&out, start);
            out.replace_range(start..end, "(redacted)\"");
            from = start + "(redacted)\"".len();
        }
    }
    if let Some(i) = out.find("request \"") {
        if let Some(j) = out.rfind(" took too long") {
            if j > i {
                out.replace_range(i..j, "request (redacted)");
            }
        }
    }
    out
}

/// The end (after the closing quote) of a JSON string starting at `start`.
fn line_quote_end(s: &str, start: usize) -> usize {
    let b = s.as_bytes();
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The shown text of a zap line: its message and the fields that matter.
fn zap_text(p: &line::Parsed<'_>) -> String {
    let mut s = p.msg.to_string();
    if let Some(j) = p.json {
        for k in [
            "took",
            "expected-duration",
            "exceeded-duration",
            "to",
            "remote-peer-id",
            "peer-id",
            "rtt",
            "alarm",
            "error",
        ] {
            if let Some(v) = line::field(j, k) {
                s.push_str(&format!(" {k}={v}"));
            }
        }
    }
    s
}

impl<'c> Reader<'c> {
    fn new(cfg: &'c LogsConfig) -> Self {
        Reader {
            cfg,
            sum: LogsSummary::default(),
            acc: HashMap::new(),
            lines: HashMap::new(),
            templates: HashMap::new(),
            ids: BTreeMap::new(),
            members: BTreeMap::new(),
            folded: 0,
            lifecycle: BTreeMap::new(),
        }
    }

    fn bad(&mut self, at: String, message: String) {
        self.sum.bad_lines += 1;
        if self.sum.bad_examples.len() < MAX_BAD_EXAMPLES {
            self.sum.bad_examples.push(BadLine { at, message });
        }
    }

    fn read_file(&mut self, f: &LogFile) -> Result<(), LogsError> {
        let shown_path = f.path.display().to_string();
        let r = open(&f.path).map_err(|e| LogsError::Read {
            path: shown_path.clone(),
            message: e.to_string(),
        })?;
        let year_hint = std::fs::metadata(&f.path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as Millis);
        let mut st = FileState {
            file: FileRead {
                path: shown_path.clone(),
                member: f.member.clone(),
                component: f.component,
                layout: f.layout.to_string(),
                formats: Vec::new(),
                lines: 0,
                recognised: 0,
                first: None,
                last: None,
            },
            component: f.component,
            formats: Default::default(),
            pending: Vec::new(),
            pending_time: None,
            pending_too_long: false,
            year_hint,
            self_id: None,
            started: None,
            stopping: false,
            line_buckets: BTreeMap::new(),
            run: None,
        };
        let max = self.cfg.max_line;
        let res = for_each_line(r, max, |n, l| {
            st.file.lines += 1;
            match l {
                Err(len) => self.bad(
                    format!("{shown_path}:{n}"),
                    format!("line of {len} bytes is longer than the {max} byte limit"),
                ),
                Ok(l) => self.line(&mut st, &shown_path, n, l),
            }
        });
        if let Err(e) = res {
            let n = st.file.lines + 1;
            self.bad(
                format!("{shown_path}:{n}"),
                format!("cannot read further ({e}): the rest of the file is skipped"),
            );
        }
        if !st.pending.is_empty() {
            self.bad(
                format!("{shown_path}:{}", st.file.lines),
                "the file ends inside a line split by the container runtime (`P` without its `F`)".into(),
            );
        }
        if let (Some(id), Some(c)) = (&st.self_id, st.component) {
            if c == Component::Etcd {
                self.ids.entry(id.clone()).or_insert_with(|| f.member.clone());
            }
        }
        if let Some(c) = st.component {
            self.members.entry(f.member.clone()).or_insert(c);
            if let Some((rb, n)) = st.run.take() {
                *st.line_buckets.entry(rb).or_default() += n;
            }
            let acc = self.lines.entry((f.member.clone(), c)).or_default();
            for (b, n) in std::mem::take(&mut st.line_buckets) {
                *acc.entry(b).or_default() += n;
            }
        }
        st.file.formats = st.formats.iter().map(|f| f.as_str().to_string()).collect();
        st.file.component = st.component;
        self.sum.files.push(st.file);
        Ok(())
    }

    fn line(&mut self, st: &mut FileState, path: &str, n: u64, l: &[u8]) {
        self.sum.lines += 1;
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let (ptime, body) = match line::prefix(l) {
            Some(p) => match p.cri {
                Some(Cri::Partial) => {
                    if st.pending.is_empty() {
                        st.pending_time = Some(p.time);
                    }
                    if st.pending.len() + p.rest.len() > self.cfg.max_line {
                        st.pending_too_long = true;
                        st.pending.clear();
                        st.pending.push(b' ');
                    } else if !st.pending_too_long {
                        st.pending.extend_from_slice(p.rest);
                    }
                    return;
                }
                Some(Cri::Full) if !st.pending.is_empty() || st.pending_too_long => {
                    let too_long = std::mem::take(&mut st.pending_too_long);
                    let mut joined = std::mem::take(&mut st.pending);
                    let t = st.pending_time.take().unwrap_or(p.time);
                    if too_long || joined.len() + p.rest.len() > self.cfg.max_line {
                        self.bad(
                            format!("{path}:{n}"),
                            format!(
                                "a line split by the container runtime is longer than the {} byte limit",
                                self.cfg.max_line
                            ),
                        );
                        return;
                    }
                    joined.extend_from_slice(p.rest);
                    self.body(st, path, n, Some(t), &joined);
                    return;
                }
                _ => (Some(p.time), p.rest),
            },
            None => (None, l),
        };
        self.body(st, path, n, ptime, body);
    }

    fn body(&mut self, st: &mut FileState, path: &str, n: u64, ptime: Option<Millis>, body: &[u8]) {
        let text = match std::str::from_utf8(body) {
            Ok(t) if !t.as_bytes().contains(&0) => t,
            _ => {
                self.bad(format!("{path}:{n}"), "binary data (not UTF-8 text)".into());
                return;
            }
        };
        let p = match line::parse(text) {
            Ok(p) => p,
            Err(why) => {
                self.bad(format!("{path}:{n}"), why.to_string());
                return;
            }
        };
        let time = p.time.or_else(|| {
            let kt = p.klog_time?;
            let hint = ptime.or(st.year_hint)?;
            let y = line::year_of(hint);
            // A January file holding December lines: the year before.
            let t = line::klog_at(y, kt)?;
            if t > hint + 86_400_000 {
                line::klog_at(y - 1, kt)
            } else {
                Some(t)
            }
        });
        let Some(time) = time.or(ptime) else {
            // Text without a time (etcd 3.4's `[WARNING] Deprecated …` banner,
            // `kubectl logs` without `--timestamps` of klog lines): counted,
            // the first one named, not a bad line.
            self.sum.untimed += 1;
            if self.sum.untimed_example.is_none() {
                self.sum.untimed_example = Some(format!("{path}:{n}"));
            }
            return;
        };
        st.formats.insert(p.format);
        let component = *st.component.get_or_insert(match p.format {
            Format::Klog => Component::Apiserver,
            _ => Component::Etcd,
        });
        if component == Component::Etcd && st.self_id.is_none() {
            st.self_id = class::raft_self_id(&p.msg).map(str::to_string).or_else(|| {
                p.json
                    .and_then(|j| line::field(j, "local-member-id"))
                    .map(|v| v.into_owned())
            });
        }
        let rec = match component {
            Component::Etcd => class::etcd(&p),
            Component::Apiserver => class::apiserver(&p),
        };
        let rec = rec.map(|mut r| {
            match r.class {
                Class::Start => {
                    st.started = Some(time);
                    st.stopping = false;
                    self.lifecycle
                        .entry(st.file.member.clone())
                        .or_default()
                        .push((time, true));
                }
                Class::Stop => {
                    st.stopping = true;
                    self.lifecycle
                        .entry(st.file.member.clone())
                        .or_default()
                        .push((time, false));
                }
                c if c.about_peer() && st.stopping => {
                    r.class = Class::PeerAtStop;
                    r.peer = None;
                }
                c if c.about_peer() && st.started.is_some_and(|s| time - s < START_GRACE) => {
                    r.class = Class::PeerAtStart;
                    r.peer = None;
                }
                _ => {}
            }
            r
        });
        st.file.first = Some(st.file.first.map_or(time, |f| f.min(time)));
        st.file.last = Some(st.file.last.map_or(time, |l| l.max(time)));
        if let Some((from, to)) = self.cfg.clip {
            if time < from || time > to {
                self.sum.outside_window += 1;
                return;
            }
        }
        self.sum.first = Some(self.sum.first.map_or(time, |f| f.min(time)));
        self.sum.last = Some(self.sum.last.map_or(time, |l| l.max(time)));
        let b = bucket(self.cfg.resolution, time);
        // Lines come mostly in time order: counted per run of one bucket.
        match &mut st.run {
            Some((rb, n)) if *rb == b => *n += 1.0,
            run => {
                if let Some((rb, n)) = run.take() {
                    *st.line_buckets.entry(rb).or_default() += n;
                }
                *run = Some((b, 1.0));
            }
        }
        match rec {
            Some(r) => {
                st.file.recognised += 1;
                self.sum.recognised += 1;
                let text = match p.format {
                    Format::Zap => zap_text(&p),
                    _ => p.msg.to_string(),
                };
                self.count(&st.file.member, component, r, time, b, || LogLine {
                    time,
                    member: st.file.member.clone(),
                    class: String::new(),
                    took: None,
                    text: shown(&text),
                    at: format!("{path}:{n}"),
                });
            }
            None => {
                self.sum.unknown += 1;
                if p.level >= Level::Warn {
                    let t = class::template(&p.msg);
                    if self.templates.len() < MAX_TEMPLATES || self.templates.contains_key(&t) {
                        *self.templates.entry(t).or_default() += 1;
                    } else {
                        *self.templates.entry("(other)".into()).or_default() += 1;
                    }
                }
            }
        }
    }

    fn count(
        &mut self,
        member: &str,
        component: Component,
        r: Recognised,
        time: Millis,
        b: i64,
        line: impl FnOnce() -> LogLine,
    ) {
        let instance = match (&r.peer, r.class.about_peer()) {
            (Some(p), true) => format!("id:{p}"),
            _ => member.to_string(),
        };
        let key = Key {
            instance,
            reporter: member.to_string(),
            component,
            class: r.class,
        };
        let key = if self.acc.len() >= MAX_KEYS && !self.acc.contains_key(&key) {
            self.folded += 1;
            Key {
                instance: "other".into(),
                ..key
            }
        } else {
            key
        };
        let a = self.acc.entry(key).or_default();
        let e = a.buckets.entry(b).or_default();
        e.0 += 1.0;
        e.1 += r.took.unwrap_or(0.0);
        a.count += 1;
        a.took += r.took.unwrap_or(0.0);
        let better_first = a.first.as_ref().is_none_or(|f| time < f.time);
        let better_telling = match (&a.telling, r.took) {
            (None, _) => true,
            (Some(t), Some(d)) => t.took.is_none_or(|x| d > x),
            _ => false,
        };
        if better_first || better_telling {
            let mut l = line();
            l.class = r.class.as_str().to_string();
            l.took = r.took;
            if better_first {
                a.first = Some(l.clone());
            }
            if better_telling {
                a.telling = Some(l);
            }
        }
    }

    /// Whether `member` had announced its stop at `t` (and not started again).
    fn stopped_at(&self, member: &str, t: Millis) -> bool {
        let Some(ev) = self.lifecycle.get(member) else {
            return false;
        };
        ev.iter()
            .filter(|(at, _)| *at <= t)
            .max_by_key(|(at, _)| *at)
            .is_some_and(|(_, start)| !start)
    }

    /// Moves what peers logged about a member after it announced its stop
    /// (until it starts again) to [`Class::PeerAtStop`]: a planned restart or
    /// shutdown, not a member lost. Needs every file read (a member's stop is
    /// in its own log, the complaints in the others').
    fn settle(&mut self) {
        if self.lifecycle.values().all(|v| v.iter().all(|(_, s)| *s)) {
            return;
        }
        let res = self.sum.resolution;
        let keys: Vec<Key> = self
            .acc
            .keys()
            .filter(|k| k.class.about_peer())
            .cloned()
            .collect();
        for k in keys {
            let member = self.resolve(&k.instance);
            if !self.lifecycle.contains_key(&member) {
                continue;
            }
            let Some(mut a) = self.acc.remove(&k) else {
                continue;
            };
            let mut moved = Acc::default();
            let stopped: Vec<i64> = a
                .buckets
                .keys()
                .copied()
                .filter(|&b| self.stopped_at(&member, b * res))
                .collect();
            for b in stopped {
                if let Some(v) = a.buckets.remove(&b) {
                    let e = moved.buckets.entry(b).or_default();
                    e.0 += v.0;
                    e.1 += v.1;
                    moved.count += v.0 as u64;
                    moved.took += v.1;
                    a.count = a.count.saturating_sub(v.0 as u64);
                    a.took -= v.1;
                }
            }
            for l in [a.first.take(), a.telling.take()].into_iter().flatten() {
                let at_stop = self.stopped_at(&member, l.time);
                let (dst, class) = if at_stop {
                    (&mut moved, Class::PeerAtStop)
                } else {
                    (&mut a, k.class)
                };
                let mut l = l;
                l.class = class.as_str().to_string();
                if dst.first.as_ref().is_none_or(|f| l.time < f.time) {
                    dst.first = Some(l.clone());
                }
                if dst.telling.is_none() {
                    dst.telling = Some(l);
                }
            }
            if moved.count > 0 {
                let mk = Key {
                    instance: member.clone(),
                    class: Class::PeerAtStop,
                    ..k.clone()
                };
                let dst = self.acc.entry(mk).or_default();
                for (b, v) in moved.buckets {
                    let e = dst.buckets.entry(b).or_default();
                    e.0 += v.0;
                    e.1 += v.1;
                }
                dst.count += moved.count;
                dst.took += moved.took;
                if dst
                    .first
                    .as_ref()
                    .is_none_or(|f| moved.first.as_ref().is_some_and(|m| m.time < f.time))
                {
                    dst.first = moved.first.clone().or(dst.first.take());
                }
                if dst.telling.is_none() {
                    dst.telling = moved.telling.or(moved.first);
                }
            }
            if a.count > 0 {
                self.acc.insert(k, a);
            }
        }
    }

    /// Counts, per member, the buckets in which it stayed silent after its
    /// peers logged losing it as their leader ([`Class::SilentAfterLost`]):
    /// from the loss to its next line of its own, or to the end of the logs.
    /// A leader that is alive answers its lost leadership at once (raft logs
    /// its new term, or the peers it cannot reach); one stopped, hung or
    /// killed logs nothing, while its followers, after electing another
    /// leader, may log nothing more either: the incident is not over because
    /// the logs went quiet. Only members whose own log is read and had lines
    /// before the loss, and not after they announced their stop.
    fn silence(&mut self) {
        let res = self.sum.resolution.max(1);
        let Some(last) = self.sum.last else { return };
        let end = bucket(res, last);
        let mut lost: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for (k, a) in &self.acc {
            if k.class == Class::LeaderLost {
                let m = self.resolve(&k.instance);
                lost.entry(m).or_default().extend(a.buckets.keys().copied());
            }
        }
        for (member, mut losses) in lost {
            let Some(own) = self.lines.get(&(member.clone(), Component::Etcd)) else {
                continue;
            };
            losses.sort_unstable();
            let mut silent = std::collections::BTreeSet::new();
            for b in losses {
                if own.range(..=b).next().is_none() || self.stopped_at(&member, b * res) {
                    continue;
                }
                let next = own.range(b + 1..).next().map_or(end + 1, |(k, _)| *k);
                silent.extend(b + 1..next);
            }
            if silent.is_empty() {
                continue;
            }
            let a = self
                .acc
                .entry(Key {
                    instance: member.clone(),
                    reporter: member,
                    component: Component::Etcd,
                    class: Class::SilentAfterLost,
                })
                .or_default();
            for b in &silent {
                let e = a.buckets.entry(*b).or_default();
                e.0 += 1.0;
            }
            a.count += silent.len() as u64;
        }
    }

    /// Resolves peer IDs to member names.
    fn resolve(&self, instance: &str) -> String {
        match instance.strip_prefix("id:") {
            Some(id) => self
                .ids
                .get(id)
                .cloned()
                .unwrap_or_else(|| format!("member {id}")),
            None => instance.to_string(),
        }
    }

    /// The boundaries every series gets a point at.
    fn boundaries(&self) -> Vec<Millis> {
        let cfg = LogsConfig {
            resolution: self.sum.resolution,
            ..self.cfg.clone()
        };
        boundaries(&self.sum, &cfg)
    }

    /// Buckets `k` times wider when the span holds more than [`MAX_BUCKETS`].
    fn coarsen(&mut self) {
        let res = self.cfg.resolution.max(1);
        self.sum.resolution = res;
        let (Some(f), Some(l)) = (self.sum.first, self.sum.last) else {
            return;
        };
        let (f, l) = match self.cfg.clip {
            Some((a, b)) => (f.min(a), l.max(b)),
            None => (f, l),
        };
        let n = (l - f) / res;
        if n <= MAX_BUCKETS {
            return;
        }
        let k = (n + MAX_BUCKETS - 1) / MAX_BUCKETS;
        let re = |b: i64| (b + k - 1).div_euclid(k);
        for a in self.acc.values_mut() {
            let mut nb: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
            for (b, (c, t)) in std::mem::take(&mut a.buckets) {
                let e = nb.entry(re(b)).or_default();
                e.0 += c;
                e.1 += t;
            }
            a.buckets = nb;
        }
        for m in self.lines.values_mut() {
            let mut nb: BTreeMap<i64, f64> = BTreeMap::new();
            for (b, c) in std::mem::take(m) {
                *nb.entry(re(b)).or_default() += c;
            }
            *m = nb;
        }
        self.sum.resolution = res * k;
        self.sum.notes.push(format!(
            "the logs span {}: counted in buckets of {} (at most {MAX_BUCKETS} buckets)",
            crate::timefmt::format_duration(l - f),
            crate::timefmt::format_duration(res * k)
        ));
    }

    /// Writes the series; returns the families per member.
    fn emit(&mut self, store: &mut Store) {
        let times = self.boundaries();
        let Some(&t0) = times.first() else { return };
        let res = self.sum.resolution;
        let k0 = t0 / res;
        // Resolved keys, merged (a peer's ID and its name are one member).
        let mut merged: BTreeMap<Key, BTreeMap<i64, (f64, f64)>> = BTreeMap::new();
        for (k, a) in &self.acc {
            let key = Key {
                instance: self.resolve(&k.instance),
                ..k.clone()
            };
            let m = merged.entry(key).or_default();
            for (b, (c, t)) in &a.buckets {
                let e = m.entry(*b).or_default();
                e.0 += c;
                e.1 += t;
            }
        }
        // Zero series: every class of each member's component.
        for (m, c) in &self.members {
            for class in Class::of(*c) {
                merged
                    .entry(Key {
                        instance: m.clone(),
                        reporter: m.clone(),
                        component: *c,
                        class,
                    })
                    .or_default();
            }
        }
        for (k, buckets) in &merged {
            for (name, f) in [
                (names::MESSAGES, (|v: &(f64, f64)| v.0) as fn(&(f64, f64)) -> f64),
                (names::TOOK, |v: &(f64, f64)| v.1),
            ] {
                let labels = store.labels([
                    ("__name__", name),
                    ("instance", k.instance.as_str()),
                    ("role", Role::Logs.as_str()),
                    ("reporter", k.reporter.as_str()),
                    ("component", k.component.as_str()),
                    ("class", k.class.as_str()),
                ]);
                let id = store.series_id(&labels);
                super::audit::aggregate::write_cumulative(
                    store,
                    id,
                    &times,
                    k0,
                    res,
                    buckets.iter().map(|(b, v)| (*b, f(v))),
                );
            }
        }
        for ((m, c), buckets) in &self.lines {
            let labels = store.labels([
                ("__name__", names::LINES),
                ("instance", m.as_str()),
                ("role", Role::Logs.as_str()),
                ("component", c.as_str()),
            ]);
            let id = store.series_id(&labels);
            super::audit::aggregate::write_cumulative(
                store,
                id,
                &times,
                k0,
                res,
                buckets.iter().map(|(b, v)| (*b, *v)),
            );
        }
    }

    fn finish(&mut self) {
        let mut classes: Vec<ClassCount> = self
            .acc
            .iter()
            .filter_map(|(k, a)| {
                Some(ClassCount {
                    instance: self.resolve(&k.instance),
                    reporter: k.reporter.clone(),
                    component: k.component,
                    class: k.class.as_str().to_string(),
                    count: a.count,
                    took_seconds: a.took,
                    first: a.first.clone()?,
                    telling: a.telling.clone()?,
                })
            })
            .collect();
        classes.sort_by(|a, b| {
            a.first
                .time
                .cmp(&b.first.time)
                .then(a.instance.cmp(&b.instance))
                .then(a.class.cmp(&b.class))
        });
        self.sum.classes = classes;
        let mut t: Vec<(String, u64)> = self.templates.iter().map(|(k, v)| (k.clone(), *v)).collect();
        t.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        t.truncate(10);
        self.sum.unknown_warnings = t;
        let by_name: BTreeMap<&String, &String> = self.ids.iter().map(|(id, m)| (m, id)).collect();
        self.sum.members = self
            .members
            .iter()
            .map(|(m, c)| Member {
                name: m.clone(),
                component: *c,
                id: by_name.get(m).map(|s| (*s).clone()),
            })
            .collect();
        if self.folded > 0 {
            self.sum.notes.push(format!(
                "{} message(s) beyond {MAX_KEYS} member/class pairs were counted under `other`",
                self.folded
            ));
        }
        if self.sum.files.iter().any(|f| {
            f.formats.iter().any(|x| {
                x == Format::Capnslog.as_str() || x == Format::RaftText.as_str() || x == Format::Klog.as_str()
            }) && !f.layout.contains("pods")
                && f.layout != "must-gather"
        }) {
            self.sum.notes.push(
                "capnslog, raft text and klog lines carry no time zone: read as UTC (etcd and kube-apiserver run in UTC in their containers)".into(),
            );
        }
        let sampled = self
            .sum
            .classes
            .iter()
            .any(|c| c.count >= 100 && c.component == Component::Etcd);
        if sampled {
            self.sum.notes.push(
                "etcd's zap logger samples repeated messages (after 100 of one message in a second, 1 in 100): counts from logs are lower bounds".into(),
            );
        }
    }
}

struct FileState {
    file: FileRead,
    component: Option<Component>,
    formats: std::collections::BTreeSet<Format>,
    pending: Vec<u8>,
    pending_time: Option<Millis>,
    pending_too_long: bool,
    year_hint: Option<Millis>,
    self_id: Option<String>,
    /// When the member last started (its start banner), in this file.
    started: Option<Millis>,
    /// The member announced its stop (and has not started again).
    stopping: bool,
    /// Timed lines per bucket, and the run of lines of the current bucket.
    line_buckets: BTreeMap<i64, f64>,
    run: Option<(i64, f64)>,
}

/// How long after its start a member's messages about its peers are
/// counted apart ([`Class::PeerAtStart`]): members of a cluster start one
/// after the other, and each complains of the ones not up yet.
const START_GRACE: Millis = 60_000;

/// The boundaries every series of the logs gets a point at: from one
/// bucket before the first line to the last line; with metrics, every
/// boundary inside their window (a log that ends early reads 0 after its
/// end, as a quiet one does).
fn boundaries(sum: &LogsSummary, cfg: &LogsConfig) -> Vec<Millis> {
    let (Some(f), Some(l)) = (sum.first, sum.last) else {
        return Vec::new();
    };
    let res = cfg.resolution.max(1);
    match cfg.clip {
        // Inside the metrics' window, so that the logs never move its ends
        // (nor the steps, nor the baseline at its start).
        Some((from, to)) => (bucket(res, from)..=to.div_euclid(res))
            .map(|k| k * res)
            .collect(),
        None => ((bucket(res, f) - 1)..=bucket(res, l)).map(|k| k * res).collect(),
    }
}

/// Most buckets of a log's time span; a wider span (months of logs, or a
/// line with a wrong year) is bucketed coarser, and the report says so.
const MAX_BUCKETS: i64 = 20_000;

/// Reads the logs of `args` (`NAME=PATH` or `PATH`) into counters.
pub fn read(args: &[String], cfg: &LogsConfig, store: &mut Store) -> Result<LogsSummary, LogsError> {
    let ex = layout::expand(args)?;
    let mut r = Reader::new(cfg);
    r.sum.skipped = ex.skipped;
    r.sum.other_files = ex.other_files;
    for f in &ex.files {
        r.read_file(f)?;
    }
    if r.sum.first.is_none() && r.sum.outside_window == 0 {
        let first = r
            .sum
            .bad_examples
            .first()
            .map(|b| format!("{}: {}", b.at, b.message))
            .or_else(|| {
                r.sum
                    .untimed_example
                    .as_ref()
                    .map(|at| format!("{at}: no time on the line (`kubectl logs` needs `--timestamps`)"))
            })
            .unwrap_or_else(|| "every file is empty".into());
        return Err(LogsError::NoLines(args.join(", "), first));
    }
    r.coarsen();
    r.settle();
    r.silence();
    r.emit(store);
    r.finish();
    Ok(r.sum)
}

/// Reads logs and adds them to `ds`: one target of role `logs` per member
/// (snapshots at the bucket boundaries), bad lines and notes as warnings,
/// the summary in `ds.logs`.
pub fn load_into(ds: &mut Dataset, args: &[String], cfg: &LogsConfig) -> Result<(), LogsError> {
    let sum = read(args, cfg, &mut ds.store)?;
    ds.store.finish();
    let origin = skipped::origin(sum.files.iter().map(|f| &f.path), "log");
    ds.warnings.extend(skipped::bad_lines(
        &origin,
        sum.bad_lines,
        "log line(s) could not be read",
        sum.bad_examples
            .iter()
            .map(|b| (b.at.as_str(), b.message.as_str())),
    ));
    if sum.untimed > 0 {
        ds.warnings.push(SourceWarning {
            origin: origin.clone(),
            message: format!(
                "{} log line(s) carry no time and were not placed on the timeline (first: {})",
                sum.untimed,
                sum.untimed_example.as_deref().unwrap_or("?")
            ),
        });
    }
    ds.warnings.extend(skipped::outside_window(
        &origin,
        sum.outside_window,
        "log line(s)",
    ));
    for n in &sum.notes {
        ds.warnings.push(SourceWarning {
            origin: origin.clone(),
            message: n.clone(),
        });
    }
    let cfg = &LogsConfig {
        resolution: sum.resolution,
        ..cfg.clone()
    };
    let times = boundaries(&sum, cfg);
    for m in &sum.members {
        let files: Vec<&FileRead> = sum.files.iter().filter(|f| f.member == m.name).collect();
        ds.targets.push(Target {
            name: m.name.clone(),
            role: Role::Logs,
            role_reason: format!(
                "{} log ({})",
                m.component.as_str(),
                files
                    .first()
                    .map_or("given with --logs".to_string(), |f| f.layout.clone())
            ),
            version: None,
            time_source: TimeSource::SampleTimestamp,
            snapshots: times
                .iter()
                .map(|&t| Snapshot {
                    time: t,
                    origin: files.first().map_or(origin.clone(), |f| f.path.clone()),
                    process_start: None,
                })
                .collect(),
            families: [names::MESSAGES, names::TOOK, names::LINES]
                .into_iter()
                .map(str::to_string)
                .collect(),
            failures: Vec::new(),
        });
    }
    ds.logs = Some(sum);
    Ok(())
}
