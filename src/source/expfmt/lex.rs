//! Line-level lexing of the text exposition format: sample lines, `# HELP` and
//! `# TYPE` lines. Every function here is a single left-to-right pass over one
//! line, so lexing is linear in the line length whatever the input.

use std::borrow::Cow;

use super::hash;
use super::LabelRef;

/// Longest piece of input quoted verbatim in a message.
const SNIPPET_MAX: usize = 48;

/// Why a sample line was rejected.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum LexError {
    /// The line ended inside a quoted string (`what` names it).
    Unterminated(&'static str),
    /// Any other syntax error.
    Syntax(String),
}

impl LexError {
    pub(super) fn message(&self) -> String {
        match self {
            LexError::Unterminated(what) => {
                format!("unterminated {what} (missing closing `\"`)")
            }
            LexError::Syntax(m) => m.clone(),
        }
    }
}

fn syntax(m: impl Into<String>) -> LexError {
    LexError::Syntax(m.into())
}

/// A lexed sample line; labels go to the caller's buffer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LexedSample<'a> {
    pub name: &'a str,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
    /// Hash of the series identity (name and label set, see [`hash`]).
    pub series_key: u64,
    /// With an `le` label: hash of the identity without it, shared by the
    /// buckets of one histogram series.
    pub bucket_key: Option<u64>,
    /// For a canonical line ending in an `le` label: where that pair starts
    /// and the hash state there, to lex the series' next bucket quickly.
    pub bucket_prefix: Option<(usize, hash::Resume)>,
}

/// Reusable buffers for [`lex_sample`].
#[derive(Default)]
pub(super) struct Scratch {
    /// Canonical text of a series written in another form.
    canon: Vec<u8>,
    /// Label indices in canonical order.
    order: Vec<usize>,
}

/// Whether a label name is a bucket or quantile bound (written last).
#[inline]
fn is_bound(name: &str) -> bool {
    matches!(name.as_bytes(), b"le" | b"quantile")
}

/// `a < b` for short label names, without a `memcmp` call.
#[inline]
fn name_less(a: &[u8], b: &[u8]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    a.len() < b.len()
}

/// A lexed `#` line.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum CommentLine<'a> {
    /// `# HELP name text`; `text` is still escaped.
    Help { name: &'a str, text: &'a [u8] },
    /// `# TYPE name word`.
    Type { name: &'a str, word: &'a [u8] },
    /// `# HELP` or `# TYPE` without a usable metric name.
    Malformed(&'static str),
    /// Any other comment.
    Comment,
}

#[inline]
pub(super) fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

#[inline]
fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

#[inline]
fn is_name_char(b: u8) -> bool {
    CLASS[usize::from(b)] & NAME_CHAR != 0
}

#[inline]
fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

#[inline]
fn is_label_char(b: u8) -> bool {
    CLASS[usize::from(b)] & LABEL_CHAR != 0
}

const NAME_CHAR: u8 = 1;
const LABEL_CHAR: u8 = 2;
const QUOTE_OR_ESCAPE: u8 = 4;

/// Byte classes, one table lookup per byte in the hot scanning loops.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'_' {
            t[b] = NAME_CHAR | LABEL_CHAR;
        } else if c == b':' {
            t[b] = NAME_CHAR;
        } else if c == b'"' || c == b'\\' {
            t[b] = QUOTE_OR_ESCAPE;
        }
        b += 1;
    }
    t
};

/// Offset of the first `"` or `\\` in `bytes`: a plain loop for the short
/// values that dominate real input, `memchr2` beyond.
#[inline]
fn find_quote_or_escape(bytes: &[u8]) -> Option<usize> {
    const SHORT: usize = 32;
    let n = bytes.len().min(SHORT);
    let mut k = 0;
    while k < n {
        if CLASS[usize::from(bytes[k])] & QUOTE_OR_ESCAPE != 0 {
            return Some(k);
        }
        k += 1;
    }
    if bytes.len() <= SHORT {
        return None;
    }
    memchr::memchr2(b'"', b'\\', &bytes[SHORT..]).map(|k| k + SHORT)
}

#[inline(always)]
fn skip_blanks(line: &[u8], i: usize) -> usize {
    match line.get(i) {
        Some(&b) if is_blank(b) => skip_blanks_slow(line, i),
        _ => i,
    }
}

#[inline(never)]
fn skip_blanks_slow(line: &[u8], mut i: usize) -> usize {
    while i < line.len() && is_blank(line[i]) {
        i += 1;
    }
    i
}

/// Returns `line` with trailing blanks and carriage returns removed.
pub(super) fn trim_end(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b' ' | b'\t' | b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// Returns `line` without leading blanks.
pub(super) fn trim_start(line: &[u8]) -> &[u8] {
    let i = skip_blanks(line, 0);
    &line[i..]
}

/// A short, printable excerpt of `bytes` for messages.
pub(super) fn snippet(bytes: &[u8]) -> String {
    let cut = bytes.len().min(SNIPPET_MAX);
    let mut s: String = String::from_utf8_lossy(&bytes[..cut])
        .chars()
        .map(|c| if c.is_control() { '�' } else { c })
        .collect();
    if cut < bytes.len() {
        s.push('…');
    }
    s
}

/// Scans a legacy metric name starting at `i`; returns its end.
fn scan_name(line: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < line.len() && is_name_char(line[j]) {
        j += 1;
    }
    j
}

/// `line[a..b]`, or a syntax error if that is not a `str` boundary (which the
/// lexer never asks for: it cuts only next to ASCII delimiters).
#[inline]
fn sub(line: &str, a: usize, b: usize) -> Result<&str, LexError> {
    line.get(a..b)
        .ok_or_else(|| syntax("unexpected byte sequence (not at a character boundary)"))
}

/// Lexes a quoted string whose opening `"` is at `line[start - 1]`. Returns the
/// unescaped text (borrowed when it holds no escapes) and the index after the
/// closing quote. Accepted escapes are those of the Go parser: `\\`, `\"`, `\n`.
#[inline]
fn lex_quoted<'a>(
    line: &'a str,
    start: usize,
    what: &'static str,
) -> Result<(Cow<'a, str>, usize), LexError> {
    let bytes = line.as_bytes();
    let mut i = start;
    let mut owned: Option<String> = None;
    loop {
        let Some(off) = find_quote_or_escape(&bytes[i..]) else {
            return Err(LexError::Unterminated(what));
        };
        let at = i + off;
        let text = sub(line, i, at)?;
        if bytes[at] == b'"' {
            let value = match owned {
                Some(mut s) => {
                    s.push_str(text);
                    Cow::Owned(s)
                }
                None => Cow::Borrowed(text),
            };
            return Ok((value, at + 1));
        }
        let s = owned.get_or_insert_with(|| String::with_capacity(text.len() + 16));
        s.push_str(text);
        match bytes.get(at + 1) {
            Some(b'\\') => s.push('\\'),
            Some(b'"') => s.push('"'),
            Some(b'n') => s.push('\n'),
            Some(&c) => {
                let shown = if c.is_ascii_graphic() {
                    format!("\\{}", c as char)
                } else {
                    format!("\\x{c:02x}")
                };
                return Err(syntax(format!(
                    "invalid escape sequence `{shown}` in {what} (only `\\\\`, `\\\"` and `\\n` are allowed)"
                )));
            }
            None => return Err(LexError::Unterminated(what)),
        }
        i = at + 2;
    }
}

/// Lexes one sample line (UTF-8, already trimmed of leading blanks, non-empty,
/// not a comment). Labels are appended to `labels`, which the caller clears.
pub(super) fn lex_sample<'a>(
    line: &'a str,
    labels: &mut Vec<LabelRef<'a>>,
    scratch: &mut Scratch,
) -> Result<LexedSample<'a>, LexError> {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut name: Option<&'a str> = None;
    // Whether the raw text is the canonical series text (see `hash`), and
    // where the last `le` pair starts in it.
    let mut canonical = true;
    let mut prev_name = "";
    let mut bound_seen = false;
    let mut le_start = None;
    if bytes.first().copied().is_some_and(is_name_start) {
        let end = scan_name(bytes, 0);
        name = Some(sub(line, 0, end)?);
        i = end;
    } else if bytes.first() != Some(&b'{') {
        return Err(syntax(format!(
            "expected a metric name at the start of `{}`",
            snippet(bytes)
        )));
    }
    let after_name = i;
    let mut series_end = i;
    i = skip_blanks(bytes, i);
    if bytes.get(i) == Some(&b'{') {
        canonical &= i == after_name && name.is_some();
        i += 1;
        loop {
            let pair_start = i;
            i = skip_blanks(bytes, i);
            canonical &= i == pair_start;
            let Some(&c) = bytes.get(i) else {
                return Err(syntax("label set not closed (missing `}`)"));
            };
            if c == b'}' {
                // `{}` or a trailing comma.
                canonical = false;
                i += 1;
                break;
            }
            let name_start = i;
            let (lname, quoted) = if c == b'"' {
                let (q, next) = lex_quoted(line, i + 1, "quoted name")?;
                i = next;
                match q {
                    Cow::Borrowed("") => return Err(syntax("empty quoted metric or label name")),
                    Cow::Borrowed(s) => (s, true),
                    Cow::Owned(_) => {
                        return Err(syntax(
                            "escape sequences in quoted metric or label names are not supported",
                        ));
                    }
                }
            } else if is_label_start(c) {
                while i < bytes.len() && is_label_char(bytes[i]) {
                    i += 1;
                }
                (sub(line, name_start, i)?, false)
            } else {
                return Err(syntax(format!(
                    "invalid label name at `{}`",
                    snippet(&bytes[i..])
                )));
            };
            let name_end = i;
            i = skip_blanks(bytes, i);
            let next = bytes.get(i).copied();
            if quoted && name.is_none() && labels.is_empty() && matches!(next, Some(b',' | b'}')) {
                // `{"my.metric", …}`: the metric name quoted inside the braces.
                name = Some(lname);
            } else {
                if next != Some(b'=') {
                    return Err(syntax(format!("expected `=` after label name `{lname}`")));
                }
                i = skip_blanks(bytes, i + 1);
                if bytes.get(i) != Some(&b'"') {
                    return Err(syntax(format!(
                        "expected `\"` to open the value of label `{lname}`"
                    )));
                }
                let open = i;
                let (value, next) = lex_quoted(line, i + 1, "label value")?;
                i = next;
                canonical &= !quoted && open == name_end + 1 && !bound_seen;
                if is_bound(lname) {
                    bound_seen = true;
                    le_start = (lname.len() == 2).then_some(name_start);
                } else {
                    canonical &= name_less(prev_name.as_bytes(), lname.as_bytes());
                    prev_name = lname;
                }
                labels.push(LabelRef { name: lname, value });
            }
            let pair_end = i;
            i = skip_blanks(bytes, i);
            canonical &= i == pair_end;
            match bytes.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => {
                    i += 1;
                    break;
                }
                Some(_) => {
                    return Err(syntax(format!(
                        "expected `,` or `}}` after label `{lname}`, found `{}`",
                        snippet(&bytes[i..])
                    )));
                }
                None => return Err(syntax("label set not closed (missing `}`)")),
            }
        }
        series_end = i;
        canonical &= !labels.is_empty();
    }
    let Some(name) = name else {
        return Err(syntax("missing metric name"));
    };

    let mut bucket_prefix = None;
    let (series_key, bucket_key) = if canonical {
        // Sorted, bound last, so no label can repeat.
        let split = le_start.unwrap_or(0);
        let (prefix, full, resume) = hash::hash_split(&bytes[..series_end], split);
        bucket_prefix = le_start.map(|at| (at, resume));
        (full, le_start.map(|_| prefix))
    } else {
        check_duplicate_labels(labels)?;
        canonical_keys(name, labels, scratch)
    };
    let (value, timestamp_ms) = lex_value_and_timestamp(line, i, name)?;
    Ok(LexedSample {
        name,
        value,
        timestamp_ms,
        series_key,
        bucket_key,
        bucket_prefix,
    })
}

/// Lexes the next bucket of a histogram series: `line` starts with the same
/// `prefix_len` bytes as that series' previous bucket line (the caller checked
/// it, and that `le="` follows), whose labels other than `le` are in `labels`.
/// Only the `le` pair and what follows are lexed. `None` when the rest is not
/// in canonical form or is malformed; the caller then lexes the whole line.
pub(super) fn lex_next_bucket<'a>(
    line: &'a str,
    prefix_len: usize,
    name_len: usize,
    resume: hash::Resume,
    bucket_key: u64,
    labels: &mut Vec<LabelRef<'a>>,
) -> Option<LexedSample<'a>> {
    let bytes = line.as_bytes();
    let (value, next) = lex_quoted(line, prefix_len + 4, "label value").ok()?;
    if bytes.get(next) != Some(&b'}') {
        return None;
    }
    let series_end = next + 1;
    let name = line.get(..name_len)?;
    let (value_f, timestamp_ms) = lex_value_and_timestamp(line, series_end, name).ok()?;
    labels.push(LabelRef {
        name: line.get(prefix_len..prefix_len + 2)?,
        value,
    });
    Some(LexedSample {
        name,
        value: value_f,
        timestamp_ms,
        series_key: hash::hash_resume(&bytes[..series_end], resume),
        bucket_key: Some(bucket_key),
        bucket_prefix: Some((prefix_len, resume)),
    })
}

/// Lexes the value and optional timestamp that follow the series at `i`.
fn lex_value_and_timestamp(line: &str, mut i: usize, name: &str) -> Result<(f64, Option<i64>), LexError> {
    let bytes = line.as_bytes();
    i = skip_blanks(bytes, i);
    let vstart = i;
    while i < bytes.len() && !is_blank(bytes[i]) {
        i += 1;
    }
    let vtok = sub(line, vstart, i)?;
    if vtok.is_empty() {
        return Err(syntax(format!("missing value for `{name}`")));
    }
    let value = parse_value(vtok).ok_or_else(|| {
        syntax(format!(
            "invalid value `{}` for `{name}`",
            snippet(vtok.as_bytes())
        ))
    })?;
    i = skip_blanks(bytes, i);
    let mut timestamp_ms = None;
    if i < bytes.len() {
        let tstart = i;
        while i < bytes.len() && !is_blank(bytes[i]) {
            i += 1;
        }
        let ttok = sub(line, tstart, i)?;
        let ts = ttok.parse::<i64>().map_err(|_| {
            syntax(format!(
                "invalid timestamp `{}` for `{name}` (expected integer milliseconds)",
                snippet(ttok.as_bytes())
            ))
        })?;
        timestamp_ms = Some(ts);
        i = skip_blanks(bytes, i);
        if i < bytes.len() {
            return Err(syntax(format!(
                "unexpected text `{}` after the timestamp",
                snippet(&bytes[i..])
            )));
        }
    }
    Ok((value, timestamp_ms))
}

/// Series and bucket keys of a line not written in canonical form: its
/// canonical text is built in `scratch` and hashed.
fn canonical_keys(name: &str, labels: &[LabelRef<'_>], scratch: &mut Scratch) -> (u64, Option<u64>) {
    let order = &mut scratch.order;
    order.clear();
    order.extend(0..labels.len());
    let rank = |n: &str| match n {
        "le" => 1,
        "quantile" => 2,
        _ => 0,
    };
    order.sort_by(|&a, &b| {
        let (a, b) = (labels[a].name, labels[b].name);
        (rank(a), a).cmp(&(rank(b), b))
    });
    let canon = &mut scratch.canon;
    canon.clear();
    canon.extend_from_slice(name.as_bytes());
    let mut le_at = None;
    for (k, &idx) in order.iter().enumerate() {
        canon.push(if k == 0 { b'{' } else { b',' });
        let l = &labels[idx];
        if l.name == "le" {
            le_at = Some(canon.len());
        }
        canon.extend_from_slice(l.name.as_bytes());
        canon.extend_from_slice(b"=\"");
        for &b in l.value.as_bytes() {
            match b {
                b'\\' => canon.extend_from_slice(br"\\"),
                b'"' => canon.extend_from_slice(br#"\""#),
                b'\n' => canon.extend_from_slice(br"\n"),
                _ => canon.push(b),
            }
        }
        canon.push(b'"');
    }
    if !labels.is_empty() {
        canon.push(b'}');
    }
    let (prefix, full, _) = hash::hash_split(canon, le_at.unwrap_or(0));
    (full, le_at.map(|_| prefix))
}

/// Rejects a label set that names the same label twice (the Go parser does too).
/// Quadratic for small sets, sort-based for large ones.
fn check_duplicate_labels(labels: &[LabelRef<'_>]) -> Result<(), LexError> {
    let dup = if labels.len() <= 32 {
        labels
            .iter()
            .enumerate()
            .find(|(k, l)| labels[..*k].iter().any(|m| m.name == l.name))
            .map(|(_, l)| l.name)
    } else {
        let mut names: Vec<&str> = labels.iter().map(|l| l.name).collect();
        names.sort_unstable();
        names.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
    };
    match dup {
        Some(n) => Err(syntax(format!("duplicate label `{n}`"))),
        None => Ok(()),
    }
}

/// Parses a sample value as Go's `strconv.ParseFloat` would for what encoders
/// write: decimal and exponent forms, `NaN`, `+Inf`, `-Inf`, `Inf` (any case).
/// Rust also accepts `infinity`/`nan` in any case and a sign before `nan`, as Go
/// mostly does; hex floats and `_` separators, which no encoder writes, are
/// rejected.
pub(super) fn parse_value(tok: &str) -> Option<f64> {
    let b = tok.as_bytes();
    // Fast path: short plain integers (exact in f64 below 2^53).
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let n = digits.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')) as f64;
        return Some(if digits.len() < b.len() { -n } else { n });
    }
    tok.parse::<f64>().ok()
}

/// Lexes a line starting with `#`.
pub(super) fn lex_comment(line: &[u8]) -> CommentLine<'_> {
    let mut i = skip_blanks(line, 1);
    let rest = &line[i..];
    let kind = if rest.starts_with(b"HELP") {
        b'H'
    } else if rest.starts_with(b"TYPE") {
        b'T'
    } else {
        return CommentLine::Comment;
    };
    i += 4;
    match line.get(i) {
        None => return CommentLine::Malformed("missing metric name"),
        Some(&b) if is_blank(b) => {}
        // `# HELPER …` and the like are ordinary comments.
        Some(_) => return CommentLine::Comment,
    }
    i = skip_blanks(line, i);
    let name = match line.get(i) {
        Some(b'"') => match std::str::from_utf8(line)
            .ok()
            .map(|text| lex_quoted(text, i + 1, "quoted name"))
        {
            Some(Ok((Cow::Borrowed(n), next))) if !n.is_empty() => {
                i = next;
                n
            }
            _ => return CommentLine::Malformed("unusable quoted metric name"),
        },
        Some(&b) if is_name_start(b) => {
            let end = scan_name(line, i);
            let Ok(n) = std::str::from_utf8(&line[i..end]) else {
                return CommentLine::Malformed("invalid metric name");
            };
            i = end;
            n
        }
        Some(_) => return CommentLine::Malformed("invalid metric name"),
        None => return CommentLine::Malformed("missing metric name"),
    };
    if i < line.len() && !is_blank(line[i]) {
        return CommentLine::Malformed("invalid character in metric name");
    }
    i = skip_blanks(line, i);
    let text = &line[i..];
    if kind == b'H' {
        CommentLine::Help { name, text }
    } else {
        let mut end = 0;
        while end < text.len() && !is_blank(text[end]) {
            end += 1;
        }
        CommentLine::Type {
            name,
            word: &text[..end],
        }
    }
}

/// Unescapes a HELP text: `\\`, `\n` and `\"` (which the Go parser accepts).
/// Any other backslash is kept literally and reported through `bad_escape`.
pub(super) fn unescape_help(text: &[u8], bad_escape: &mut bool) -> String {
    let raw = String::from_utf8_lossy(text);
    if !raw.contains('\\') {
        return raw.into_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') => out.push('"'),
            Some(other) => {
                *bad_escape = true;
                out.push('\\');
                out.push(other);
            }
            None => {
                *bad_escape = true;
                out.push('\\');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(line: &str) -> Result<(LexedSample<'_>, Vec<LabelRef<'_>>), LexError> {
        let mut labels = Vec::new();
        let s = lex_sample(line, &mut labels, &mut Scratch::default())?;
        Ok((s, labels))
    }

    #[test]
    fn plain_and_labelled_lines() {
        let (s, l) = lex("foo 1").unwrap();
        assert_eq!((s.name, s.value, s.timestamp_ms), ("foo", 1.0, None));
        assert!(l.is_empty());
        let (s, l) = lex("foo{a=\"x\",b=\"y\",} 2.5e-05 123").unwrap();
        assert_eq!((s.name, s.value, s.timestamp_ms), ("foo", 2.5e-05, Some(123)));
        assert_eq!(l.len(), 2);
        assert_eq!((l[1].name, l[1].value.as_ref()), ("b", "y"));
    }

    #[test]
    fn escapes_allocate_only_when_present() {
        let (_, l) = lex(r#"foo{a="plain",b="x\\y\"z\n"} 1"#).unwrap();
        assert!(matches!(l[0].value, Cow::Borrowed("plain")));
        assert_eq!(l[1].value, Cow::<str>::Owned("x\\y\"z\n".to_string()));
    }

    #[test]
    fn errors_name_the_construct() {
        let err = |s: &str| lex(s).unwrap_err().message();
        assert!(err(r#"foo{a="b\q"} 1"#).contains("invalid escape sequence `\\q`"));
        assert!(err(r#"foo{a="b"#).contains("unterminated label value"));
        assert!(err("foo{a=\"b\"").contains("missing `}`"));
        assert!(err("foo").contains("missing value"));
        assert!(err("foo x").contains("invalid value `x`"));
        assert!(err("foo 1 1.5").contains("invalid timestamp"));
        assert!(err("foo 1 2 3").contains("unexpected text"));
        assert!(err(r#"foo{a="1",a="2"} 1"#).contains("duplicate label `a`"));
        assert!(err("{} 1").contains("missing metric name"));
        assert!(err(r#"{""} 1"#).contains("empty quoted metric or label name"));
        assert!(err(r#"m{""="x"} 1"#).contains("empty quoted metric or label name"));
    }

    #[test]
    fn duplicate_check_is_not_quadratic_on_large_sets() {
        let mut line = String::from("foo{");
        for k in 0..5000 {
            line.push_str(&format!("l{k}=\"v\","));
        }
        line.push_str("l7=\"v\"} 1");
        assert!(lex(&line).unwrap_err().message().contains("duplicate label `l7`"));
    }

    #[test]
    fn label_hash_ignores_order_and_spelling_but_not_content() {
        let h = |s: &str| lex(s).unwrap().0.series_key;
        let base = h(r#"m{a="1",b="x\"y"} 1"#);
        assert_eq!(base, h(r#"m{b="x\"y",a="1"} 1"#));
        assert_eq!(base, h(r#"m{ a = "1" , "b"="x\"y", } 1"#));
        assert_eq!(base, h(r#"m {a="1",b="x\"y"}   1 1000"#));
        assert_ne!(base, h(r#"m{a="1",b="x\\y"} 1"#));
        assert_ne!(base, h(r#"m{a="1"} 1"#));
        assert_ne!(base, h(r#"m{a="1",b="x\"y",c=""} 1"#));
        assert_eq!(h("m 1"), h("m{} 2"));
        assert_eq!(h("m 1"), h("m { } 2"));
        let (s, _) = lex(r#"m{a="1",le="0.5"} 1"#).unwrap();
        let (t, _) = lex(r#"m{le="+Inf",a="1"} 1"#).unwrap();
        let (u, _) = lex(r#"m{le="0.5",a="1"} 1"#).unwrap();
        let (v, _) = lex(r#"m{a="2",le="0.5"} 1"#).unwrap();
        assert_ne!(s.series_key, t.series_key);
        assert_eq!(s.series_key, u.series_key);
        assert!(s.bucket_key.is_some());
        assert_eq!(s.bucket_key, t.bucket_key);
        assert_ne!(s.bucket_key, v.bucket_key);
        assert_eq!(lex("m 1").unwrap().0.bucket_key, None);
        let (q, _) = lex(r#"m{quantile="0.5",a="1"} 1"#).unwrap();
        let (r, _) = lex(r#"m{a="1",quantile="0.5"} 1"#).unwrap();
        assert_eq!(q.series_key, r.series_key);
    }

    #[test]
    fn value_fast_path_agrees_with_the_general_parser() {
        for t in [
            "0",
            "-0",
            "7",
            "-1",
            "123456789012345",
            "1234567890123456",
            "00012",
        ] {
            assert_eq!(parse_value(t), t.parse::<f64>().ok(), "{t}");
            assert_eq!(
                parse_value(t).map(|v| v.is_sign_negative()),
                t.parse::<f64>().ok().map(|v| v.is_sign_negative()),
                "{t}"
            );
        }
        assert_eq!(parse_value("-"), None);
        assert_eq!(parse_value(""), None);
    }

    #[test]
    fn comment_lines() {
        assert_eq!(
            lex_comment(b"# TYPE foo histogram"),
            CommentLine::Type {
                name: "foo",
                word: b"histogram"
            }
        );
        assert_eq!(
            lex_comment(b"#\tHELP foo  some text"),
            CommentLine::Help {
                name: "foo",
                text: b"some text"
            }
        );
        assert_eq!(lex_comment(b"# HELPER foo"), CommentLine::Comment);
        assert_eq!(lex_comment(b"# just words"), CommentLine::Comment);
        assert!(matches!(lex_comment(b"# TYPE"), CommentLine::Malformed(_)));
    }

    #[test]
    fn help_unescaping() {
        let mut bad = false;
        assert_eq!(unescape_help(br#"a\\b\nc\"d"#, &mut bad), "a\\b\nc\"d");
        assert!(!bad);
        assert_eq!(unescape_help(br"x\ty", &mut bad), "x\\ty");
        assert!(bad);
    }

    #[test]
    fn next_bucket_fast_path_agrees_with_full_lexing() {
        let first = r#"h_bucket{code="200",verb="GET",le="0.5"} 3"#;
        let mut labels = Vec::new();
        let mut scratch = Scratch::default();
        let a = lex_sample(first, &mut labels, &mut scratch).unwrap();
        let (at, resume) = a.bucket_prefix.unwrap();
        assert_eq!(&first[..at], r#"h_bucket{code="200",verb="GET","#);
        for next in [
            r#"h_bucket{code="200",verb="GET",le="+Inf"} 7 1700000000000"#,
            r#"h_bucket{code="200",verb="GET",le="1e+06"} 5"#,
            r#"h_bucket{code="200",verb="GET",le="a\"b"} 5"#,
        ] {
            let mut fast_labels = labels.clone();
            fast_labels.truncate(2);
            let fast = lex_next_bucket(
                next,
                at,
                a.name.len(),
                resume,
                a.bucket_key.unwrap(),
                &mut fast_labels,
            )
            .expect("fast path applies");
            let mut full_labels = Vec::new();
            let full = lex_sample(next, &mut full_labels, &mut scratch).unwrap();
            assert_eq!(fast, full, "{next}");
            assert_eq!(fast_labels, full_labels, "{next}");
        }
        // Not canonical after `le` (blank before `}`), or malformed: full lexing decides.
        for next in [
            r#"h_bucket{code="200",verb="GET",le="1" } 5"#,
            r#"h_bucket{code="200",verb="GET",le="1"} x"#,
            r#"h_bucket{code="200",verb="GET",le="1"#,
        ] {
            let mut l = labels.clone();
            l.truncate(2);
            assert_eq!(
                lex_next_bucket(next, at, a.name.len(), resume, 0, &mut l),
                None,
                "{next}"
            );
        }
    }
}
