//! Limits that keep hostile or mistaken input from exhausting the stack, the
//! memory or the time of a run (docs/robustness.md lists each with its test):
//!
//! - **Nesting.** PromQL expressions ([`promql_nesting`]) and YAML documents
//!   ([`yaml_nesting`]) are scanned once, without recursion, before they are
//!   parsed: deeper input is refused with its line and column instead of
//!   overflowing the stack of a recursive walk (or making the YAML parser
//!   quadratic).
//! - **Files.** Configuration files (kubeconfigs, rule files, manifests,
//!   token, key and certificate files) are read up to [`MAX_FILE_BYTES`]
//!   ([`read_capped`]); `/dev/zero` given as one of them is an error, not an
//!   endless read.
//! - **Bodies** of HTTP responses and decompressed snapshots have their own
//!   caps (`--max-body`, `--max-body-total`, `--prometheus-max-response`),
//!   enforced by the sources.

use std::io::Read;
use std::path::Path;

/// Deepest PromQL nesting accepted (see [`promql_nesting`] for how it is counted).
pub const MAX_PROMQL_DEPTH: usize = 256;

/// Deepest YAML nesting accepted (block and flow levels together). Rule files,
/// kubeconfigs and manifests need fewer than 10.
pub const MAX_YAML_DEPTH: usize = 64;

/// Default largest metrics text read from one place (`--max-body`): one
/// `/metrics` response or one snapshot file, after gzip decoding.
pub const DEFAULT_MAX_BODY: u64 = 512 << 20;

/// Largest configuration file read (kubeconfig, rule file, manifest, token,
/// password, key, certificate).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Input nested deeper than a limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} (at line {line}, column {column})", self.reason())]
pub struct NestingError {
    /// `PromQL` or `YAML`.
    pub what: &'static str,
    pub limit: usize,
    /// 1-based position of the token that went over the limit.
    pub line: usize,
    pub column: usize,
}

impl NestingError {
    /// What is wrong, without the position.
    pub fn reason(&self) -> String {
        format!(
            "{} nested more than {} levels deep; cptriage refuses deeper nesting",
            self.what, self.limit
        )
    }
}

/// Parses PromQL text into a tree after [`promql_nesting`] has checked its
/// depth: every PromQL text cptriage parses (rule expressions, `query`,
/// selectors, notation) goes through here, so no later walk can overflow the
/// stack. The error is the parser's message, or the nesting error.
pub fn parse_promql(text: &str) -> Result<promql_parser::parser::Expr, String> {
    promql_nesting(text).map_err(|e| e.to_string())?;
    promql_parser::parser::parse(text)
}

/// 1-based line and column (in characters) of byte offset `at`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = 1 + memchr::memchr_iter(b'\n', before).count();
    let start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    let column = 1 + String::from_utf8_lossy(&before[start..]).chars().count();
    (line, column)
}

/// Refuses a PromQL expression whose syntax tree could be deeper than
/// [`MAX_PROMQL_DEPTH`], before any parser or evaluator recurses into it.
///
/// The depth counted bounds the tree's: every open `(`, `[` or `{` is one
/// level, and inside each, every operator (unary or binary `+ - * / % ^`,
/// comparisons, `and`, `or`, `unless`, `atan2`) one more, until the next `,`
/// or the closing bracket. A chain `a + b + c …` or `- - - x` is as deep as
/// it has operators; `f(g(h(x)))` as deep as it has calls. Strings and
/// comments are skipped. Linear in the text.
pub fn promql_nesting(text: &str) -> Result<(), NestingError> {
    let b = text.as_bytes();
    // Operators counted in each open bracket (the outermost level is frame 0).
    let mut frames: Vec<(u8, usize)> = vec![(0, 0)];
    let mut depth = 0usize;
    let fail = |at: usize| {
        let (line, column) = line_col(text, at);
        Err(NestingError {
            what: "PromQL",
            limit: MAX_PROMQL_DEPTH,
            line,
            column,
        })
    };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let in_braces = frames.last().is_some_and(|f| f.0 == b'{');
        let mut op = false;
        match c {
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    i += if b[i] == b'\\' && c != b'`' { 2 } else { 1 };
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                frames.push((c, 0));
                depth += 1;
                if depth > MAX_PROMQL_DEPTH {
                    return fail(i);
                }
            }
            b')' | b']' | b'}' if frames.len() > 1 => {
                if let Some((_, ops)) = frames.pop() {
                    depth = depth.saturating_sub(1 + ops);
                }
            }
            b',' => {
                if let Some(f) = frames.last_mut() {
                    depth = depth.saturating_sub(f.1);
                    f.1 = 0;
                }
            }
            b'0'..=b'9' | b'.' => {
                // A number (`1e-5`, `0x1F`, `.5`) or a duration (`5m`): its
                // sign characters are not operators.
                let hex = c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X'));
                while i + 1 < b.len() {
                    let n = b[i + 1];
                    let exp_sign = !hex && matches!(n, b'+' | b'-') && matches!(b[i], b'e' | b'E');
                    if n.is_ascii_alphanumeric() || n == b'.' || n == b'_' || exp_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let s = i;
                while i + 1 < b.len() && (b[i + 1].is_ascii_alphanumeric() || matches!(b[i + 1], b'_' | b':'))
                {
                    i += 1;
                }
                let word = &text[s..=i];
                op = !in_braces
                    && ["and", "or", "unless", "atan2"]
                        .iter()
                        .any(|k| word.eq_ignore_ascii_case(k));
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'<' | b'>' => op = !in_braces,
            b'=' | b'!' => {
                // `==` and `!=` compare; `=`, `=~`, `!~` only match labels.
                let next = b.get(i + 1).copied();
                op = !in_braces && next == Some(b'=');
                if matches!(next, Some(b'=' | b'~')) {
                    i += 1;
                }
            }
            _ => {}
        }
        if op {
            if let Some(f) = frames.last_mut() {
                f.1 += 1;
            }
            depth += 1;
            if depth > MAX_PROMQL_DEPTH {
                return fail(i);
            }
        }
        i += 1;
    }
    Ok(())
}

/// Refuses a YAML document nested deeper than [`MAX_YAML_DEPTH`] (block
/// indentation levels, compact `- - x` sequences and flow `[`/`{` levels
/// together), before the YAML parser sees it: libyaml's time grows with the
/// square of the flow depth, and serde stops at 128 levels only after parsing
/// everything. Quoted scalars, block scalars (`|`, `>`) and comments are
/// skipped; brackets inside plain scalars (`rate(x[5m])`) do not count.
pub fn yaml_nesting(text: &str) -> Result<(), NestingError> {
    let fail = |off: usize| {
        let (line, column) = line_col(text, off);
        Err(NestingError {
            what: "YAML",
            limit: MAX_YAML_DEPTH,
            line,
            column,
        })
    };
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    // Inside a quoted scalar that may span lines.
    let mut quote: Option<u8> = None;
    // Inside a block scalar: lines indented more than this belong to it.
    let mut block_scalar: Option<usize> = None;
    let mut off = 0usize;
    for raw in text.split_inclusive('\n') {
        let line_off = off;
        off += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let b = line.as_bytes();
        let indent = b.iter().take_while(|c| **c == b' ').count();
        let blank = b[indent..].iter().all(|c| c.is_ascii_whitespace());
        if let Some(parent) = block_scalar {
            if blank || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        if quote.is_none() && flow == 0 {
            if blank || b[indent] == b'#' {
                continue;
            }
            while indents.last().is_some_and(|&t| t >= indent) {
                indents.pop();
            }
            indents.push(indent);
        }
        let mut i = if quote.is_none() && flow == 0 { indent } else { 0 };
        // Compact nested sequences and complex keys: `- - x`, `? - x`.
        let mut extra = 0usize;
        // Whether a node may start here (a flow collection or a quoted scalar).
        let mut node_start = quote.is_none();
        while i < b.len() {
            let c = b[i];
            if let Some(q) = quote {
                if c == b'\\' && q == b'"' {
                    i += 2;
                    continue;
                }
                if c == q {
                    if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    quote = None;
                }
                i += 1;
                continue;
            }
            let next_blank = b.get(i + 1).is_none_or(|n| *n == b' ' || *n == b'\t');
            match c {
                b' ' | b'\t' => {}
                b'#' if i == 0 || matches!(b[i - 1], b' ' | b'\t') => break,
                b'-' | b'?' if flow == 0 && node_start && next_blank => {
                    extra += 1;
                }
                b':' if next_blank || flow > 0 => node_start = true,
                b'[' | b'{' if node_start || flow > 0 => {
                    flow += 1;
                    node_start = true;
                }
                b']' | b'}' if flow > 0 => {
                    flow -= 1;
                    node_start = false;
                }
                b',' if flow > 0 => node_start = true,
                b'"' | b'\'' if node_start => {
                    quote = Some(c);
                    node_start = false;
                }
                b'|' | b'>' if node_start && flow == 0 => {
                    // A block scalar header: the following more indented lines are text.
                    block_scalar = Some(indent);
                    break;
                }
                _ => {
                    // A plain scalar: brackets in it are text (outside flow collections).
                    if flow == 0 {
                        node_start = false;
                        while i + 1 < b.len()
                            && !(b[i + 1] == b':' && b.get(i + 2).is_none_or(|n| *n == b' '))
                        {
                            if b[i + 1] == b'#' && matches!(b[i], b' ' | b'\t') {
                                break;
                            }
                            i += 1;
                        }
                    } else {
                        node_start = false;
                    }
                }
            }
            if indents.len() + extra + flow > MAX_YAML_DEPTH {
                return fail(line_off + i);
            }
            i += 1;
        }
    }
    Ok(())
}

/// Text longer than its cap (carried inside an `io::Error` by [`Capped`]).
#[derive(Debug, thiserror::Error)]
#[error("larger than {} after decompression; refused (see --max-body)", format_size(*.0))]
pub struct TooLarge(pub u64);

impl TooLarge {
    /// The cap error inside an I/O error, if it is one.
    pub fn of(e: &std::io::Error) -> Option<&TooLarge> {
        e.get_ref().and_then(|x| x.downcast_ref::<TooLarge>())
    }
}

/// A reader that fails (with [`TooLarge`]) once more than `max` bytes came through.
pub struct Capped<R> {
    inner: R,
    max: u64,
    read: u64,
}

impl<R> Capped<R> {
    pub fn new(inner: R, max: u64) -> Capped<R> {
        Capped { inner, max, read: 0 }
    }

    pub fn inner_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let room = (self.max + 1).saturating_sub(self.read).min(buf.len() as u64) as usize;
        if room == 0 && !buf.is_empty() {
            return Err(std::io::Error::other(TooLarge(self.max)));
        }
        let n = self.inner.read(&mut buf[..room])?;
        self.read += n as u64;
        if self.read > self.max {
            return Err(std::io::Error::other(TooLarge(self.max)));
        }
        Ok(n)
    }
}

/// Reads at most [`MAX_FILE_BYTES`] of a file; a larger file is an error
/// (`InvalidData`, "larger than 16 MiB").
pub fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    read_capped_to(path, MAX_FILE_BYTES)
}

/// Reads at most `limit` bytes of a file; a larger file is an error.
pub fn read_capped_to(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(path)?.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {}", crate::limits::format_size(limit)),
        ));
    }
    Ok(out)
}

/// Reads a capped file as UTF-8 text.
pub fn read_text_capped(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_capped(path)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// Why a size flag's value is not a size.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("invalid size `{0}`: expected a number with an optional unit (KiB, MiB, GiB, KB, MB, GB)")]
    NotANumber(String),
    #[error("invalid size `{0}`: unknown unit `{1}` (KiB, MiB, GiB, KB, MB, GB)")]
    Unit(String, String),
    #[error("invalid size `{0}`: must be greater than zero and below 16 EiB")]
    Range(String),
}

/// A byte size as the flags take it: `512MiB`, `64KiB`, `1GiB`, `100MB`, `1000`.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| SizeError::NotANumber(t.into()))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "Ki" | "K" | "k" => 1 << 10,
        "MiB" | "Mi" | "M" => 1 << 20,
        "GiB" | "Gi" | "G" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        u => return Err(SizeError::Unit(t.into(), u.into())),
    };
    n.checked_mul(mult)
        .filter(|v| *v > 0)
        .ok_or_else(|| SizeError::Range(t.into()))
}

/// A byte size for messages: `512 MiB`, `64 KiB`, `1000 bytes`.
pub fn format_size(n: u64) -> String {
    if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    }

    #[test]
    fn promql_depth_counts_brackets_and_operator_chains() {
        let ok = nested("abs(", "x", ")", MAX_PROMQL_DEPTH);
        assert!(promql_nesting(&ok).is_ok());
        let deep = nested("abs(", "x", ")", MAX_PROMQL_DEPTH + 1);
        let e = promql_nesting(&deep).unwrap_err();
        assert_eq!((e.line, e.column), (1, 4 * MAX_PROMQL_DEPTH + 4), "{e}");
        assert!(promql_nesting(&nested("(", "1", ")", 100_000)).is_err());
        assert!(promql_nesting(&format!("{}x", "-".repeat(MAX_PROMQL_DEPTH + 1))).is_err());
        assert!(promql_nesting(&vec!["1"; MAX_PROMQL_DEPTH + 2].join(" + ")).is_err());
        assert!(promql_nesting(&vec!["a"; MAX_PROMQL_DEPTH + 2].join(" or ")).is_err());
        // Arguments and label matchers do not add up.
        let wide = format!("f({})", vec!["a + b"; 10_000].join(", "));
        assert!(promql_nesting(&wide).is_ok());
        let matchers = format!("x{{{}}}", vec!["a!=\"-(\""; 1000].join(","));
        assert!(promql_nesting(&matchers).is_ok());
        assert!(promql_nesting("rate(x[5m]) * 1e-5 - 0x1F + 1.5e+3 # (((((((").is_ok());
    }

    #[test]
    fn promql_depth_of_a_multiline_expression_is_located() {
        let text = format!("sum(\n  {}x", "-".repeat(MAX_PROMQL_DEPTH + 5));
        let e = promql_nesting(&text).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.column, 3 + MAX_PROMQL_DEPTH - 1);
    }

    #[test]
    fn yaml_depth_counts_flow_block_and_compact_levels() {
        assert!(yaml_nesting(&nested("[", "", "]", MAX_YAML_DEPTH - 1)).is_ok());
        let e = yaml_nesting(&nested("[", "", "]", 100_000)).unwrap_err();
        assert_eq!((e.line, e.column), (1, MAX_YAML_DEPTH), "{e}");
        assert!(yaml_nesting(&nested("{a: ", "1", "}", 1000)).is_err());
        assert!(yaml_nesting(&format!("{}x\n", "- ".repeat(1000))).is_err());
        let mut indented = String::new();
        for i in 0..200 {
            indented.push_str(&format!("{}a{i}:\n", " ".repeat(i)));
        }
        assert!(yaml_nesting(&indented).unwrap_err().line > MAX_YAML_DEPTH);
    }

    #[test]
    fn yaml_brackets_in_scalars_and_comments_do_not_count() {
        let text = format!(
            "signals:\n  - id: a\n    expr: {}\n    quoted: \"{}\"\n    block: |\n      {}\n    # {}\n    flow: [a, {{b: c}}, '[[[']\n",
            "rate(x[5m]) [".repeat(200),
            "[".repeat(200),
            "{[".repeat(200),
            "[".repeat(200)
        );
        assert!(yaml_nesting(&text).is_ok(), "{:?}", yaml_nesting(&text));
        let real = include_str!("../rules/default.yaml");
        assert!(yaml_nesting(real).is_ok());
    }

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64 KiB"), Ok(64 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
        assert_eq!(format_size(512 << 20), "512 MiB");
        assert_eq!(format_size(1000), "1000 bytes");
    }
}
