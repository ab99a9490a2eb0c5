//! Streaming parser for the Prometheus text exposition format 0.0.4, as
//! kube-apiserver and etcd emit it (see METRICS.md §5 for the quirks).
//!
//! PUBLIC API CONTRACT (used by the dump and live sources; keep it stable):
//! [`parse`] walks the input once, calls `keep(family_name)` at the start of each
//! family and skips the families it refuses, and hands every kept sample to the
//! [`Sink`]. Problems on single lines are collected as [`Issue`]s with a line
//! number and the parse goes on; only input that is not an exposition at all
//! (binary data) is a fatal [`ParseError`].
//!
//! # How lines are read
//!
//! - **Families.** A family starts at its `# HELP`/`# TYPE` line or, without
//!   those, at its first sample (an untyped family named after the sample).
//!   `# TYPE` alone decides the kind: `x_bucket`, `x_sum` and `x_count` belong to
//!   family `x` only when `# TYPE x histogram` (or `summary`, without `_bucket`)
//!   was declared. A counter named `…_count` is its own family.
//! - **Skipping.** While a refused family is current, each following line is only
//!   compared with the family name (and its histogram/summary suffixes); such
//!   lines are counted in [`ParseReport::samples_skipped`] but not validated.
//! - **Empty families.** A family declared by HELP/TYPE without samples is listed
//!   with `samples == 0` in [`ParseReport::family_info`]: it is *absent*, not zero.
//! - **Label values** are unescaped (`\\`, `\"`, `\n`); they are borrowed from
//!   the input unless they held an escape. `le` and `quantile` keep their text
//!   (`"1"` and `"1.0"` stay distinct; compare them numerically).
//! - **Values** are Go floats: `NaN`, `+Inf`, `-Inf`, `Inf`, `1e+06`, `2.5e-05`;
//!   sentinels such as `-1` are kept. Timestamps are int64 milliseconds.
//! - **Tolerated forms:** blanks or tabs between tokens, leading blanks, blank
//!   lines, `#` comments, a trailing comma in the label set, CRLF line ends, a
//!   last line without newline, a UTF-8 BOM, quoted metric and label names inside
//!   the braces (`{"my.metric", a="b"}`, text format 1.0.0).
//!
//! # Issues
//!
//! Errors (the line is dropped): syntax errors, invalid escapes (`\q`), invalid
//! UTF-8 in a label value, a truncated line, a bucket without a numeric `le`, a
//! summary quantile without a numeric `quantile`, duplicate label names.
//!
//! Warnings (samples are still delivered): a duplicate series (the sink sees both
//! lines in order, so a store that overwrites keeps the later value; histogram
//! series are checked once per run of buckets), a
//! second HELP or TYPE (the first wins), a TYPE after the family's samples (the
//! family stays untyped), an unknown TYPE word (untyped), a histogram series
//! without `le="+Inf"` or with buckets out of order or decreasing, a counter
//! that is `NaN` or negative, a histogram sample with none of its suffixes.
//! After [`MAX_ISSUES`] issues, further ones are only counted.
//!
//! Fatal: NUL bytes in the first 8 KiB, or more than half of the first 100
//! non-blank lines unreadable, yield "not a Prometheus text exposition".
//!
//! Every step is a single forward pass over each line, so the parse is linear in
//! the input size whatever the input.

mod hash;
mod lex;

use std::borrow::Cow;
use std::collections::HashMap;

/// A metric family's declared type (from `# TYPE`; the name suffix never decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// One label of a sample, unescaped (borrowed when the value had no escapes).
#[derive(Clone, Debug, PartialEq)]
pub struct LabelRef<'a> {
    pub name: &'a str,
    pub value: Cow<'a, str>,
}

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleRef<'a> {
    /// The family this sample belongs to (e.g. `x` for `x_bucket`).
    pub family: &'a str,
    pub family_type: MetricType,
    /// The sample's own metric name (`x_bucket`, `x_sum`, …).
    pub name: &'a str,
    pub labels: &'a [LabelRef<'a>],
    pub value: f64,
    /// Explicit timestamp in milliseconds, when the line carries one.
    pub timestamp_ms: Option<i64>,
    /// 1-based line number.
    pub line: usize,
}

/// Receives the samples of kept families.
pub trait Sink {
    fn sample(&mut self, s: &SampleRef<'_>);
}

impl<F: FnMut(&SampleRef<'_>)> Sink for F {
    fn sample(&mut self, s: &SampleRef<'_>) {
        self(s);
    }
}

/// How serious a parse problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The line (or family) was skipped or kept with a caveat.
    Warning,
    /// The line was malformed and dropped.
    Error,
}

/// One problem found on one line.
#[derive(Clone, Debug, PartialEq)]
pub struct Issue {
    pub line: usize,
    pub severity: Severity,
    pub message: String,
}

/// What one parse saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParseReport {
    /// Every family seen (kept or skipped), with its declared type, in order of
    /// first appearance.
    pub families: Vec<(String, MetricType)>,
    /// Details of every family, in the same order as [`ParseReport::families`].
    pub family_info: Vec<FamilyInfo>,
    pub samples_kept: usize,
    pub samples_skipped: usize,
    pub lines: usize,
    pub issues: Vec<Issue>,
    /// Issues found beyond [`MAX_ISSUES`], counted but not recorded.
    pub issues_suppressed: usize,
}

impl ParseReport {
    /// The family called `name`, if the input declared or used it.
    pub fn family(&self, name: &str) -> Option<&FamilyInfo> {
        self.family_info.iter().find(|f| f.name == name)
    }

    /// Issues of the given severity.
    pub fn issues_of(&self, severity: Severity) -> impl Iterator<Item = &Issue> {
        self.issues.iter().filter(move |i| i.severity == severity)
    }
}

/// One metric family as the parse saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyInfo {
    pub name: String,
    pub metric_type: MetricType,
    /// The HELP text, unescaped, if the family had one.
    pub help: Option<String>,
    /// Sample lines of this family (kept or skipped; malformed lines excluded).
    /// Zero means the family was declared but is empty: treat it as absent.
    pub samples: usize,
    /// Whether `keep` accepted the family.
    pub kept: bool,
    /// 1-based line where the family first appeared.
    pub line: usize,
}

impl FamilyInfo {
    /// The Kubernetes stability level from the HELP text (`ALPHA`, `BETA`,
    /// `STABLE`, `INTERNAL`), if it starts with one in brackets.
    pub fn stability(&self) -> Option<&str> {
        let rest = self.help.as_deref()?.strip_prefix('[')?;
        let level = &rest[..rest.find(']')?];
        matches!(level, "ALPHA" | "BETA" | "STABLE" | "INTERNAL").then_some(level)
    }

    /// The version in a `(Deprecated since X.Y.Z)` marker of the HELP text.
    pub fn deprecated_since(&self) -> Option<&str> {
        let help = self.help.as_deref()?;
        let start = help.find("(Deprecated since ")? + "(Deprecated since ".len();
        let len = help[start..].find(')')?;
        Some(help[start..start + len].trim())
    }
}

/// Most issues recorded in one [`ParseReport`]; later ones are only counted.
pub const MAX_ISSUES: usize = 1000;

/// Input that is not a text exposition at all.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Bytes searched for NUL at the start of the input.
const BINARY_PROBE_BYTES: usize = 8192;
/// Lines examined to decide whether the input is an exposition at all.
const PROBE_LINES: usize = 100;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Parses `input`, keeping only the families for which `keep` returns true.
pub fn parse(
    input: &[u8],
    keep: &mut dyn FnMut(&str) -> bool,
    sink: &mut dyn Sink,
) -> Result<ParseReport, ParseError> {
    check_exposition(input)?;
    let mut p = Parser::new();
    let pos = if input.starts_with(BOM) { BOM.len() } else { 0 };
    let mut no = 0usize;
    p.lines(&input[pos..], &mut no, keep, sink);
    p.finish_hist();
    Ok(p.into_report(no))
}

/// Longest line [`parse_reader`] holds: a longer one is dropped with an
/// error (the whole-buffer [`parse`] has no such limit; no exposition writes
/// such lines).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Bytes [`parse_reader`] reads at a time.
pub const STREAM_CHUNK: usize = 256 * 1024;

/// Why [`parse_reader`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Reading (or decompressing) the input failed.
    #[error("{0}")]
    Read(std::io::Error),
    /// The input is not an exposition at all.
    #[error("{0}")]
    Parse(ParseError),
}

/// What [`parse_reader`] returns: the report and the number of bytes read.
pub type StreamReport = (ParseReport, u64);

/// [`parse`] over a reader, holding only a chunk of the input (and the
/// longest line) at a time, not the whole text: a 20 MB `/metrics` snapshot
/// is parsed in a quarter of a megabyte. The report and the samples handed to
/// the sink are exactly those of [`parse`] on the same bytes, except that a
/// line longer than [`MAX_LINE_BYTES`] is dropped with an error. A read error is
/// returned even if the text read before it was not an exposition.
pub fn parse_reader(
    r: &mut dyn std::io::Read,
    keep: &mut dyn FnMut(&str) -> bool,
    sink: &mut dyn Sink,
) -> Result<StreamReport, StreamError> {
    parse_reader_chunked(r, keep, sink, STREAM_CHUNK)
}

/// Appends up to `chunk` bytes from `r` to `buf` (without zeroing the space
/// first); returns whether the input ended.
fn fill(
    r: &mut dyn std::io::Read,
    buf: &mut Vec<u8>,
    chunk: usize,
    total: &mut u64,
) -> Result<bool, StreamError> {
    use std::io::Read as _;
    let start = buf.len();
    // `take` + `read_to_end` reads until `chunk` bytes or the end of the input.
    let n = r.take(chunk as u64).read_to_end(buf).map_err(|e| {
        buf.truncate(start);
        StreamError::Read(e)
    })?;
    *total += n as u64;
    Ok(n < chunk)
}

/// [`parse_reader`] reading `chunk` bytes at a time (tests use tiny chunks to
/// put chunk ends everywhere).
pub fn parse_reader_chunked(
    r: &mut dyn std::io::Read,
    keep: &mut dyn FnMut(&str) -> bool,
    sink: &mut dyn Sink,
    chunk: usize,
) -> Result<StreamReport, StreamError> {
    parse_stream(r, keep, sink, chunk, &mut |_, _| Ok(()))
}

/// Receives each block of whole lines of the input right after the parser
/// has handed its samples to the sink: the bytes and the number of the
/// block's first line. An error stops the parse (as a read error).
pub type BlockHook<'a> = dyn FnMut(&[u8], usize) -> std::io::Result<()> + 'a;

/// [`parse_reader`] that also hands every block of lines to `block` once it
/// is parsed (the live family filter copies the lines it keeps from them), so
/// that a caller can act on the text without holding all of it.
pub fn parse_reader_blocks(
    r: &mut dyn std::io::Read,
    keep: &mut dyn FnMut(&str) -> bool,
    sink: &mut dyn Sink,
    block: &mut BlockHook<'_>,
) -> Result<StreamReport, StreamError> {
    parse_stream(r, keep, sink, STREAM_CHUNK, block)
}

fn parse_stream(
    r: &mut dyn std::io::Read,
    keep: &mut dyn FnMut(&str) -> bool,
    sink: &mut dyn Sink,
    chunk: usize,
    block: &mut BlockHook<'_>,
) -> Result<StreamReport, StreamError> {
    let chunk = chunk.max(1);
    let mut buf: Vec<u8> = Vec::with_capacity(chunk.min(STREAM_CHUNK) * 2);
    let mut total = 0u64;
    let mut eof = false;
    // What `check_exposition` examines: the first 8 KiB and the first 100
    // lines (or the first MAX_LINE_BYTES: a body without newlines is not read whole).
    let mut newlines = 0usize;
    while !eof && (buf.len() < BINARY_PROBE_BYTES || newlines < PROBE_LINES) && buf.len() < MAX_LINE_BYTES {
        let before = buf.len();
        eof = fill(r, &mut buf, chunk, &mut total)?;
        newlines += memchr::memchr_iter(b'\n', &buf[before..]).count();
    }
    if let Err(e) = check_exposition(&buf) {
        // A read error (e.g. corrupt gzip) explains the garbage better.
        let mut sink_buf = Vec::new();
        while !eof {
            sink_buf.clear();
            eof = fill(r, &mut sink_buf, chunk, &mut total)?;
        }
        return Err(StreamError::Parse(e));
    }
    let mut state = Parser::new();
    let mut start = if buf.starts_with(BOM) { BOM.len() } else { 0 };
    let mut no = 0usize;
    loop {
        // Whole lines only, except at the end of the input.
        let end = if eof {
            buf.len()
        } else {
            memchr::memrchr(b'\n', &buf[start..]).map_or(start, |o| start + o + 1)
        };
        if end == start && !eof && buf.len() - start >= MAX_LINE_BYTES {
            // A line longer than any exposition writes: dropped without
            // holding it (memory stays at the cap, not at the line).
            no += 1;
            state.error(
                no,
                format!("line longer than {} MiB; line dropped", MAX_LINE_BYTES >> 20),
            );
            buf.clear();
            start = 0;
            loop {
                eof = fill(r, &mut buf, chunk, &mut total)?;
                if let Some(i) = memchr::memchr(b'\n', &buf) {
                    buf.drain(..=i);
                    break;
                }
                buf.clear();
                if eof {
                    break;
                }
            }
            continue;
        }
        let mut p: Parser<'_> = state;
        let first = no + 1;
        p.lines(&buf[start..end], &mut no, keep, sink);
        state = p.detach();
        block(&buf[start..end], first).map_err(StreamError::Read)?;
        if eof {
            break;
        }
        buf.drain(..end);
        start = 0;
        eof = fill(r, &mut buf, chunk, &mut total)?;
    }
    state.finish_hist();
    Ok((state.into_report(no), total))
}

fn not_exposition(line: usize, why: String) -> ParseError {
    ParseError {
        line,
        message: format!("not a Prometheus text exposition ({why})"),
    }
}

/// Rejects binary input: NUL bytes near the start, or mostly unreadable lines
/// among the first [`PROBE_LINES`].
fn check_exposition(input: &[u8]) -> Result<(), ParseError> {
    let head = &input[..input.len().min(BINARY_PROBE_BYTES)];
    if let Some(off) = memchr::memchr(0, head) {
        let line = 1 + memchr::memchr_iter(b'\n', &head[..off]).count();
        return Err(not_exposition(line, format!("binary data at line {line}")));
    }
    let mut pos = if input.starts_with(BOM) { BOM.len() } else { 0 };
    let (mut examined, mut invalid) = (0usize, 0usize);
    let (mut first_invalid, mut first_binary) = (None, None);
    let mut labels = Vec::new();
    let mut scratch = lex::Scratch::default();
    let mut no = 0;
    while pos < input.len() && no < PROBE_LINES {
        let end = memchr::memchr(b'\n', &input[pos..]).map_or(input.len(), |o| pos + o);
        let line = lex::trim_start(lex::trim_end(&input[pos..end]));
        pos = end + 1;
        no += 1;
        if line.is_empty() {
            continue;
        }
        examined += 1;
        let text = std::str::from_utf8(line)
            .ok()
            .filter(|t| !t.bytes().any(|b| b < 0x20 && b != b'\t'));
        let binary = text.is_none();
        let ok = text.is_some_and(|t| {
            t.starts_with('#') || {
                labels.clear();
                lex::lex_sample(t, &mut labels, &mut scratch).is_ok()
            }
        });
        if !ok {
            invalid += 1;
            first_invalid.get_or_insert(no);
            if binary {
                first_binary.get_or_insert(no);
            }
        }
    }
    if invalid * 2 > examined {
        if let Some(b) = first_binary {
            return Err(not_exposition(b, format!("binary data at line {b}")));
        }
        let first = first_invalid.unwrap_or(1);
        return Err(not_exposition(
            first,
            format!(
                "{invalid} of the first {examined} non-blank lines are unreadable, first at line {first}"
            ),
        ));
    }
    Ok(())
}

/// Whether a raw line is a sample of the family `fam` of type `ty`: it starts
/// with the family name (plus, for histograms and summaries, one of their
/// suffixes) followed by `{` or a blank.
#[inline]
fn belongs_line(line: &[u8], fam: &[u8], ty: MetricType) -> bool {
    let Some(rest) = line.strip_prefix(fam) else {
        return false;
    };
    let delim = |r: &[u8]| matches!(r.first(), Some(b'{' | b' ' | b'\t'));
    if delim(rest) {
        return true;
    }
    let suffixed = |s: &[u8]| rest.strip_prefix(s).is_some_and(delim);
    match ty {
        MetricType::Histogram => suffixed(b"_bucket") || suffixed(b"_sum") || suffixed(b"_count"),
        MetricType::Summary => suffixed(b"_sum") || suffixed(b"_count"),
        _ => false,
    }
}

/// Whether the sample name `name` belongs to the family `fam` of type `ty`.
fn belongs(name: &str, fam: &str, ty: MetricType) -> bool {
    let Some(rest) = name.strip_prefix(fam) else {
        return false;
    };
    match ty {
        _ if rest.is_empty() => true,
        MetricType::Histogram => matches!(rest, "_bucket" | "_sum" | "_count"),
        MetricType::Summary => matches!(rest, "_sum" | "_count"),
        _ => false,
    }
}

/// Describes where a sample line stops being UTF-8.
fn invalid_utf8_message(line: &[u8], valid_up_to: usize) -> String {
    let prefix = std::str::from_utf8(&line[..valid_up_to]).unwrap_or_default();
    let mut labels = Vec::new();
    match lex::lex_sample(prefix, &mut labels, &mut lex::Scratch::default()) {
        Err(lex::LexError::Unterminated("label value")) => "invalid UTF-8 in label value".into(),
        _ => format!("invalid UTF-8 at byte {} of the line", valid_up_to + 1),
    }
}

fn type_word(word: &[u8]) -> Option<MetricType> {
    Some(match word {
        b"counter" => MetricType::Counter,
        b"gauge" => MetricType::Gauge,
        b"histogram" => MetricType::Histogram,
        b"summary" => MetricType::Summary,
        b"untyped" => MetricType::Untyped,
        _ => return None,
    })
}

/// Renders `name{labels}` for messages, leaving out `skip`.
fn render_series(name: &str, labels: &[LabelRef<'_>], skip: Option<&str>) -> String {
    let mut s = String::from(name);
    let mut first = true;
    for l in labels.iter().filter(|l| Some(l.name) != skip) {
        s.push(if first { '{' } else { ',' });
        first = false;
        s.push_str(l.name);
        s.push_str("=\"");
        s.push_str(&lex::snippet(l.value.as_bytes()));
        s.push('"');
    }
    if !first {
        s.push('}');
    }
    s
}

struct Fam {
    name: String,
    ty: MetricType,
    kept: bool,
    help: Option<String>,
    samples: usize,
    line: usize,
    help_line: Option<usize>,
    type_line: Option<usize>,
}

/// The histogram series whose buckets are being read.
struct HistSeries<'a> {
    fam: usize,
    key: u64,
    first_line: usize,
    raw: Cow<'a, str>,
    last_le: f64,
    last_count: f64,
    saw_inf: bool,
    warned: bool,
}

/// The histogram series whose buckets are being lexed through the fast path.
struct BucketRun<'a> {
    /// The line text before the `le` pair.
    prefix: &'a str,
    name_len: usize,
    /// Labels before `le`.
    n_labels: usize,
    resume: hash::Resume,
    bucket_key: u64,
}

/// Whether `text` is the next bucket of the run whose text before `le` is `prefix`.
#[inline]
fn continues_bucket_run(text: &str, prefix: &str) -> bool {
    let t = text.as_bytes();
    t.len() > prefix.len() + 4 && t.starts_with(prefix.as_bytes()) && t[prefix.len()..].starts_with(b"le=\"")
}

/// Keeps bucket-run keys apart from per-line series keys in one map.
const BUCKET_RUN_SALT: u64 = 0x5bd1_e995_9e37_79b9;

fn line_u32(no: usize) -> u32 {
    u32::try_from(no).unwrap_or(u32::MAX)
}

struct Parser<'a> {
    fams: Vec<Fam>,
    by_name: HashMap<String, usize>,
    cur: Option<usize>,
    labels: Vec<LabelRef<'a>>,
    scratch: lex::Scratch,
    /// Series key → line of its last sample (saturated to `u32`).
    seen: HashMap<u64, u32, hash::BuildIdentity>,
    hist: Option<HistSeries<'a>>,
    bucket_run: Option<BucketRun<'a>>,
    kept: usize,
    skipped: usize,
    issues: Vec<Issue>,
    suppressed: usize,
}

impl<'a> Parser<'a> {
    fn new() -> Self {
        Parser {
            fams: Vec::new(),
            by_name: HashMap::new(),
            cur: None,
            labels: Vec::with_capacity(16),
            scratch: lex::Scratch::default(),
            seen: HashMap::default(),
            hist: None,
            bucket_run: None,
            kept: 0,
            skipped: 0,
            issues: Vec::new(),
            suppressed: 0,
        }
    }

    /// Parses the lines of `text` (the last may lack its newline), numbering
    /// them after `no`.
    fn lines(
        &mut self,
        text: &'a [u8],
        no: &mut usize,
        keep: &mut dyn FnMut(&str) -> bool,
        sink: &mut dyn Sink,
    ) {
        let mut pos = 0;
        while pos < text.len() {
            let end = memchr::memchr(b'\n', &text[pos..]).map_or(text.len(), |o| pos + o);
            let line = &text[pos..end];
            pos = end + 1;
            *no += 1;
            if let Some(c) = self.cur {
                let f = &mut self.fams[c];
                if !f.kept && belongs_line(line, f.name.as_bytes(), f.ty) {
                    f.samples += 1;
                    self.skipped += 1;
                    continue;
                }
            }
            self.line(line, *no, keep, sink);
        }
    }

    /// The parser without its borrows of the input, to go on with the next
    /// chunk: the open histogram series keeps a copy of its first line; the
    /// bucket fast path (a cache) and the label scratch start afresh.
    fn detach(self) -> Parser<'static> {
        Parser {
            fams: self.fams,
            by_name: self.by_name,
            cur: self.cur,
            labels: Vec::with_capacity(16),
            scratch: self.scratch,
            seen: self.seen,
            hist: self.hist.map(|h| HistSeries {
                raw: Cow::Owned(h.raw.into_owned()),
                fam: h.fam,
                key: h.key,
                first_line: h.first_line,
                last_le: h.last_le,
                last_count: h.last_count,
                saw_inf: h.saw_inf,
                warned: h.warned,
            }),
            bucket_run: None,
            kept: self.kept,
            skipped: self.skipped,
            issues: self.issues,
            suppressed: self.suppressed,
        }
    }

    fn into_report(self, lines: usize) -> ParseReport {
        ParseReport {
            families: self.fams.iter().map(|f| (f.name.clone(), f.ty)).collect(),
            family_info: self
                .fams
                .into_iter()
                .map(|f| FamilyInfo {
                    name: f.name,
                    metric_type: f.ty,
                    help: f.help,
                    samples: f.samples,
                    kept: f.kept,
                    line: f.line,
                })
                .collect(),
            samples_kept: self.kept,
            samples_skipped: self.skipped,
            lines,
            issues: self.issues,
            issues_suppressed: self.suppressed,
        }
    }

    fn issue(&mut self, line: usize, severity: Severity, message: String) {
        if self.issues.len() < MAX_ISSUES {
            self.issues.push(Issue {
                line,
                severity,
                message,
            });
        } else {
            self.suppressed += 1;
        }
    }

    fn warn(&mut self, line: usize, message: String) {
        self.issue(line, Severity::Warning, message);
    }

    fn error(&mut self, line: usize, message: String) {
        self.issue(line, Severity::Error, message);
    }

    fn line(&mut self, raw: &'a [u8], no: usize, keep: &mut dyn FnMut(&str) -> bool, sink: &mut dyn Sink) {
        let line = lex::trim_start(lex::trim_end(raw));
        match line.first() {
            None => {}
            Some(b'#') => self.comment(line, no, keep),
            Some(_) => self.sample(line, no, keep, sink),
        }
    }

    fn new_family(&mut self, name: &str, no: usize, keep: &mut dyn FnMut(&str) -> bool) -> usize {
        let idx = self.fams.len();
        self.fams.push(Fam {
            name: name.to_string(),
            ty: MetricType::Untyped,
            kept: keep(name),
            help: None,
            samples: 0,
            line: no,
            help_line: None,
            type_line: None,
        });
        self.by_name.insert(name.to_string(), idx);
        idx
    }

    fn switch_to(&mut self, idx: usize) {
        if self.cur != Some(idx) {
            self.finish_hist();
            self.cur = Some(idx);
        }
    }

    /// The family a HELP or TYPE line names, created if new.
    fn declared(&mut self, name: &str, no: usize, keep: &mut dyn FnMut(&str) -> bool) -> usize {
        let idx = match self.by_name.get(name) {
            Some(&i) => i,
            None => self.new_family(name, no, keep),
        };
        self.finish_hist();
        self.cur = Some(idx);
        idx
    }

    /// The family a sample named `name` belongs to, created (untyped) if new.
    fn resolve(&mut self, name: &str, no: usize, keep: &mut dyn FnMut(&str) -> bool) -> usize {
        if let Some(c) = self.cur {
            let f = &self.fams[c];
            if belongs(name, &f.name, f.ty) {
                return c;
            }
        }
        let idx = if let Some(&i) = self.by_name.get(name) {
            i
        } else if let Some(i) = self.parent_family(name) {
            i
        } else {
            self.new_family(name, no, keep)
        };
        self.switch_to(idx);
        idx
    }

    /// A declared histogram or summary family that `name` is a child of.
    fn parent_family(&self, name: &str) -> Option<usize> {
        for suffix in ["_bucket", "_sum", "_count"] {
            let Some(base) = name.strip_suffix(suffix) else {
                continue;
            };
            let &i = self.by_name.get(base)?;
            return match self.fams[i].ty {
                MetricType::Histogram => Some(i),
                MetricType::Summary if suffix != "_bucket" => Some(i),
                _ => None,
            };
        }
        None
    }

    fn comment(&mut self, line: &'a [u8], no: usize, keep: &mut dyn FnMut(&str) -> bool) {
        match lex::lex_comment(line) {
            lex::CommentLine::Comment => {}
            lex::CommentLine::Malformed(why) => self.warn(
                no,
                format!(
                    "malformed HELP or TYPE line ({why}); ignored: `{}`",
                    lex::snippet(line)
                ),
            ),
            lex::CommentLine::Help { name, text } => {
                let i = self.declared(name, no, keep);
                if let Some(first) = self.fams[i].help_line {
                    self.warn(
                        no,
                        format!("second HELP line for family `{name}` (first at line {first}); ignored"),
                    );
                    return;
                }
                let mut bad_escape = false;
                let help = lex::unescape_help(text, &mut bad_escape);
                let f = &mut self.fams[i];
                f.help = Some(help);
                f.help_line = Some(no);
                if bad_escape {
                    self.warn(
                        no,
                        format!("invalid escape sequence in the HELP text of `{name}`; kept as written"),
                    );
                }
                if std::str::from_utf8(text).is_err() {
                    self.warn(
                        no,
                        format!("invalid UTF-8 in the HELP text of `{name}`; replaced"),
                    );
                }
            }
            lex::CommentLine::Type { name, word } => {
                let i = self.declared(name, no, keep);
                let f = &self.fams[i];
                if let Some(first) = f.type_line {
                    let w = lex::snippet(word);
                    self.warn(
                        no,
                        format!(
                            "second TYPE line for family `{name}` (`{w}`, first at line {first}); the first TYPE wins"
                        ),
                    );
                    return;
                }
                if f.samples > 0 {
                    self.warn(
                        no,
                        format!(
                            "TYPE line for family `{name}` comes after its samples; ignored, the family stays untyped"
                        ),
                    );
                    return;
                }
                let ty = match type_word(word) {
                    Some(ty) => ty,
                    None => {
                        let w = lex::snippet(word);
                        self.warn(
                            no,
                            format!("unknown metric type `{w}` for family `{name}`; treated as untyped"),
                        );
                        MetricType::Untyped
                    }
                };
                let f = &mut self.fams[i];
                f.ty = ty;
                f.type_line = Some(no);
            }
        }
    }

    fn sample(&mut self, line: &'a [u8], no: usize, keep: &mut dyn FnMut(&str) -> bool, sink: &mut dyn Sink) {
        let text = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(e) => {
                self.bucket_run = None;
                let message = invalid_utf8_message(line, e.valid_up_to());
                self.error(no, message);
                return;
            }
        };
        // The next bucket of the series just read repeats its text up to `le`.
        let fast = match &self.bucket_run {
            Some(r) if continues_bucket_run(text, r.prefix) => {
                self.labels.truncate(r.n_labels);
                lex::lex_next_bucket(
                    text,
                    r.prefix.len(),
                    r.name_len,
                    r.resume,
                    r.bucket_key,
                    &mut self.labels,
                )
            }
            _ => None,
        };
        let lexed = match fast {
            Some(s) => Ok(s),
            None => {
                self.labels.clear();
                lex::lex_sample(text, &mut self.labels, &mut self.scratch)
            }
        };
        let s = match lexed {
            Ok(s) => s,
            Err(e) => {
                self.bucket_run = None;
                self.error(no, e.message());
                return;
            }
        };
        self.bucket_run = match (s.bucket_prefix, s.bucket_key) {
            (Some((at, resume)), Some(bucket_key)) => text.get(..at).map(|prefix| BucketRun {
                prefix,
                name_len: s.name.len(),
                n_labels: self.labels.len().saturating_sub(1),
                resume,
                bucket_key,
            }),
            _ => None,
        };
        let fi = self.resolve(s.name, no, keep);
        if !self.fams[fi].kept {
            self.fams[fi].samples += 1;
            self.skipped += 1;
            return;
        }
        let ty = self.fams[fi].ty;
        let fam_len = self.fams[fi].name.len();
        let suffix = s.name.get(fam_len..).unwrap_or("");
        let mut run_checked = false;
        match ty {
            MetricType::Histogram if suffix == "_bucket" => {
                let Some(le) = self.bound(no, s.name, "le") else {
                    return;
                };
                let key = s.bucket_key.unwrap_or(s.series_key);
                self.bucket(fi, key, le, s.value, no, text);
                run_checked = true;
            }
            MetricType::Histogram => {
                self.finish_hist();
                if suffix.is_empty() {
                    self.warn(
                        no,
                        format!(
                            "sample `{}` of histogram family `{}` has none of the suffixes `_bucket`, `_sum`, `_count`",
                            s.name, s.name
                        ),
                    );
                }
            }
            MetricType::Summary if suffix.is_empty() => {
                let Some(_quantile) = self.bound(no, s.name, "quantile") else {
                    return;
                };
            }
            MetricType::Counter if s.value.is_nan() || s.value < 0.0 => {
                let what = if s.value.is_nan() { "NaN" } else { "negative" };
                let series = render_series(s.name, &self.labels, None);
                self.warn(no, format!("counter `{series}` is {what}; kept as written"));
            }
            _ => {}
        }
        // Buckets are checked once per series run, in `bucket`.
        let seen = if run_checked {
            None
        } else {
            self.seen.insert(s.series_key, line_u32(no))
        };
        if let Some(first) = seen {
            let series = render_series(s.name, &self.labels, None);
            self.warn(
                no,
                format!("duplicate series `{series}` (also at line {first}); the later value wins"),
            );
        }
        self.kept += 1;
        let f = &mut self.fams[fi];
        f.samples += 1;
        sink.sample(&SampleRef {
            family: &f.name,
            family_type: f.ty,
            name: s.name,
            labels: &self.labels,
            value: s.value,
            timestamp_ms: s.timestamp_ms,
            line: no,
        });
    }

    /// The numeric value of the `le` or `quantile` label of the current sample;
    /// reports an error (the line is dropped) when it is missing or not a number.
    fn bound(&mut self, no: usize, name: &str, label: &str) -> Option<f64> {
        // Encoders write `le` and `quantile` last.
        let found = self.labels.iter().rev().find(|l| l.name == label);
        let parsed = found.and_then(|l| lex::parse_value(&l.value));
        if parsed.is_none() {
            let series = render_series(name, &self.labels, None);
            let what = if found.is_some() { "a non-numeric" } else { "no" };
            self.error(no, format!("`{series}` has {what} `{label}` label; line dropped"));
        }
        parsed
    }

    /// Follows one histogram series through its buckets.
    fn bucket(&mut self, fam: usize, key: u64, le: f64, count: f64, no: usize, raw: &'a str) {
        if self.hist.as_ref().is_some_and(|h| h.fam != fam || h.key != key) {
            self.finish_hist();
        }
        if self.hist.is_none() {
            if let Some(first) = self.seen.insert(key ^ BUCKET_RUN_SALT, line_u32(no)) {
                let series = render_series(&self.fams[fam].name, &self.labels, Some("le"));
                self.warn(
                    no,
                    format!(
                        "duplicate histogram series `{series}` (buckets also from line {first}); the later values win"
                    ),
                );
            }
        }
        if le.is_nan() {
            // Prometheus sorts a NaN bound first and answers NaN: say so.
            let series = render_series(&self.fams[fam].name, &self.labels, Some("le"));
            self.warn(
                no,
                format!(
                    "bucket `le=\"NaN\"` in histogram series `{series}`: histogram_quantile over it is NaN (as in Prometheus)"
                ),
            );
        }
        let h = self.hist.get_or_insert(HistSeries {
            fam,
            key,
            first_line: no,
            raw: Cow::Borrowed(raw),
            last_le: f64::NEG_INFINITY,
            last_count: f64::NEG_INFINITY,
            saw_inf: false,
            warned: false,
        });
        let problem = if h.warned {
            None
        } else if le <= h.last_le || le.is_nan() {
            Some("buckets out of increasing `le` order")
        } else if count < h.last_count {
            Some("decreasing cumulative bucket counts")
        } else {
            None
        };
        h.last_le = le;
        h.last_count = count;
        if le == f64::INFINITY {
            h.saw_inf = true;
        }
        if let Some(problem) = problem {
            h.warned = true;
            let series = render_series(&self.fams[fam].name, &self.labels, Some("le"));
            self.warn(no, format!("histogram series `{series}` has {problem}"));
        }
    }

    /// Closes the histogram series being read, reporting a missing `+Inf` bucket.
    fn finish_hist(&mut self) {
        let Some(h) = self.hist.take() else {
            return;
        };
        if h.saw_inf {
            return;
        }
        let mut labels = Vec::new();
        let series = match lex::lex_sample(&h.raw, &mut labels, &mut lex::Scratch::default()) {
            Ok(_) => render_series(&self.fams[h.fam].name, &labels, Some("le")),
            Err(_) => self.fams[h.fam].name.clone(),
        };
        self.warn(
            h.first_line,
            format!("histogram series `{series}` has no `le=\"+Inf\"` bucket"),
        );
    }
}
