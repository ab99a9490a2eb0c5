//! Line-level lexing of the text exposition format: sample lines, `# HELP` and
//! `# TYPE` lines. Every function here is a single left-to-right pass over one
//! line, so lexing is linear in the line length whatever the input.

use std::borrow::Cow;

use super::LabelRef;

/// Longest piece of input quoted verbatim in a message.
const SNIPPET_MAX: usize = 48;

/// Why a sample line was rejected.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum LexError {
    /// Bytes that are not UTF-8 where text is required.
    InvalidUtf8(&'static str),
    /// Any other syntax error.
    Syntax(String),
}

impl LexError {
    pub(super) fn message(&self) -> String {
        match self {
            LexError::InvalidUtf8(what) => format!("invalid UTF-8 in {what}"),
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
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

#[inline]
fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

#[inline]
fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[inline]
fn skip_blanks(line: &[u8], mut i: usize) -> usize {
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

fn ascii_str(bytes: &[u8]) -> Result<&str, LexError> {
    std::str::from_utf8(bytes).map_err(|_| LexError::InvalidUtf8("a name"))
}

/// Lexes a quoted string whose opening `"` is at `line[i - 1]`. Returns the
/// unescaped text (borrowed when it holds no escapes) and the index after the
/// closing quote. Accepted escapes are those of the Go parser: `\\`, `\"`, `\n`.
fn lex_quoted<'a>(
    line: &'a [u8],
    start: usize,
    what: &'static str,
) -> Result<(Cow<'a, str>, usize), LexError> {
    let mut i = start;
    let mut owned: Option<String> = None;
    loop {
        let Some(off) = memchr::memchr2(b'"', b'\\', &line[i..]) else {
            return Err(syntax(format!("unterminated {what} (missing closing `\"`)")));
        };
        let chunk = &line[i..i + off];
        let text = std::str::from_utf8(chunk).map_err(|_| LexError::InvalidUtf8(what))?;
        let at = i + off;
        if line[at] == b'"' {
            let value = match owned {
                Some(mut s) => {
                    s.push_str(text);
                    Cow::Owned(s)
                }
                None => Cow::Borrowed(text),
            };
            return Ok((value, at + 1));
        }
        let s = owned.get_or_insert_with(|| String::with_capacity(chunk.len() + 16));
        s.push_str(text);
        match line.get(at + 1) {
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
            None => {
                return Err(syntax(format!("unterminated {what} (missing closing `\"`)")));
            }
        }
        i = at + 2;
    }
}

/// Lexes one sample line (already trimmed of leading blanks, non-empty, not a
/// comment). Labels are appended to `labels`, which the caller clears.
pub(super) fn lex_sample<'a>(
    line: &'a [u8],
    labels: &mut Vec<LabelRef<'a>>,
) -> Result<LexedSample<'a>, LexError> {
    let mut i = 0;
    let mut name: Option<&'a str> = None;
    if line.first().copied().is_some_and(is_name_start) {
        let end = scan_name(line, 0);
        name = Some(ascii_str(&line[..end])?);
        i = end;
    } else if line.first() != Some(&b'{') {
        return Err(syntax(format!(
            "expected a metric name at the start of `{}`",
            snippet(line)
        )));
    }
    i = skip_blanks(line, i);
    if line.get(i) == Some(&b'{') {
        i += 1;
        loop {
            i = skip_blanks(line, i);
            let Some(&c) = line.get(i) else {
                return Err(syntax("label set not closed (missing `}`)"));
            };
            if c == b'}' {
                i += 1;
                break;
            }
            let (lname, quoted) = if c == b'"' {
                let (q, next) = lex_quoted(line, i + 1, "quoted name")?;
                i = next;
                match q {
                    Cow::Borrowed(s) => (s, true),
                    Cow::Owned(_) => {
                        return Err(syntax(
                            "escape sequences in quoted metric or label names are not supported",
                        ));
                    }
                }
            } else if is_label_start(c) {
                let start = i;
                while i < line.len() && is_label_char(line[i]) {
                    i += 1;
                }
                (ascii_str(&line[start..i])?, false)
            } else {
                return Err(syntax(format!("invalid label name at `{}`", snippet(&line[i..]))));
            };
            i = skip_blanks(line, i);
            let next = line.get(i).copied();
            if quoted && name.is_none() && labels.is_empty() && matches!(next, Some(b',' | b'}')) {
                // `{"my.metric", …}`: the metric name quoted inside the braces.
                name = Some(lname);
            } else {
                if next != Some(b'=') {
                    return Err(syntax(format!("expected `=` after label name `{lname}`")));
                }
                i = skip_blanks(line, i + 1);
                if line.get(i) != Some(&b'"') {
                    return Err(syntax(format!(
                        "expected `\"` to open the value of label `{lname}`"
                    )));
                }
                let (value, next) = lex_quoted(line, i + 1, "label value")?;
                i = next;
                labels.push(LabelRef { name: lname, value });
            }
            i = skip_blanks(line, i);
            match line.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => {
                    i += 1;
                    break;
                }
                Some(_) => {
                    return Err(syntax(format!(
                        "expected `,` or `}}` after label `{lname}`, found `{}`",
                        snippet(&line[i..])
                    )));
                }
                None => return Err(syntax("label set not closed (missing `}`)")),
            }
        }
    }
    let Some(name) = name else {
        return Err(syntax("missing metric name"));
    };
    check_duplicate_labels(labels)?;
    i = skip_blanks(line, i);
    let vstart = i;
    while i < line.len() && !is_blank(line[i]) {
        i += 1;
    }
    let vtok = &line[vstart..i];
    if vtok.is_empty() {
        return Err(syntax(format!("missing value for `{name}`")));
    }
    let value =
        parse_value(vtok).ok_or_else(|| syntax(format!("invalid value `{}` for `{name}`", snippet(vtok))))?;
    i = skip_blanks(line, i);
    let mut timestamp_ms = None;
    if i < line.len() {
        let tstart = i;
        while i < line.len() && !is_blank(line[i]) {
            i += 1;
        }
        let ttok = &line[tstart..i];
        let ts = std::str::from_utf8(ttok)
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
            .ok_or_else(|| {
                syntax(format!(
                    "invalid timestamp `{}` for `{name}` (expected integer milliseconds)",
                    snippet(ttok)
                ))
            })?;
        timestamp_ms = Some(ts);
        i = skip_blanks(line, i);
        if i < line.len() {
            return Err(syntax(format!(
                "unexpected text `{}` after the timestamp",
                snippet(&line[i..])
            )));
        }
    }
    Ok(LexedSample {
        name,
        value,
        timestamp_ms,
    })
}

/// Rejects a label set that names the same label twice (the Go parser does too).
/// Quadratic for small sets (the common case), sort-based for large ones.
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
pub(super) fn parse_value(tok: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(tok).ok()?;
    // Rust also accepts `infinity`/`nan` in any case and a sign before `nan`,
    // as Go mostly does; hex floats and `_` separators are not produced by any
    // encoder and are rejected.
    s.parse::<f64>().ok()
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
        Some(b'"') => match lex_quoted(line, i + 1, "quoted name") {
            Ok((Cow::Borrowed(n), next)) => {
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
        let s = lex_sample(line.as_bytes(), &mut labels)?;
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
}
