//! A line-level view of a captured `/metrics` exposition (text format 0.0.4),
//! kept byte for byte so that a snapshot can be written by rewriting only the
//! value tokens of the series a scenario moves.
//!
//! This reader is deliberately small and strict: base captures are real
//! kube-apiserver and etcd payloads, and any line it cannot read is reported
//! with its file and line number rather than guessed at.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A family's declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        match s {
            "counter" => Some(Kind::Counter),
            "gauge" => Some(Kind::Gauge),
            "histogram" => Some(Kind::Histogram),
            "summary" => Some(Kind::Summary),
            "untyped" => Some(Kind::Untyped),
            _ => None,
        }
    }

    /// The keyword used on `# TYPE` lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
            Kind::Untyped => "untyped",
        }
    }
}

/// One metric family of a base capture.
#[derive(Clone, Debug)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    /// The raw (still escaped) HELP text, when the family has a HELP line.
    pub help: Option<String>,
    /// Byte offset of the family's first line (HELP, TYPE or first sample).
    pub block_start: usize,
    /// Byte offset just after the family's header lines (HELP/TYPE).
    pub header_end: usize,
    /// Indices into [`Exposition::samples`].
    pub samples: std::ops::Range<usize>,
}

/// One sample line of a base capture.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The sample's metric name (`x_bucket`, `x_sum`, … for histograms).
    pub name: String,
    /// Index into [`Exposition::families`].
    pub family: usize,
    /// Labels in the order written, unescaped.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Byte range of the value token.
    pub value_span: (usize, usize),
    /// Byte offset just after the line (after its `\n`, or the end of input).
    pub line_end: usize,
    /// 1-based line number.
    pub line: usize,
    /// The numeric `le` bound of a histogram bucket.
    pub le: Option<f64>,
}

impl Sample {
    /// The value of label `name`; empty when absent (Prometheus semantics).
    pub fn label(&self, name: &str) -> &str {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

/// A parsed base capture.
#[derive(Clone, Debug)]
pub struct Exposition {
    pub text: Vec<u8>,
    pub families: Vec<Family>,
    pub samples: Vec<Sample>,
    /// Family name → index (of its first block).
    pub by_name: BTreeMap<String, usize>,
    /// Families whose samples appear in more than one block (a hand-edited
    /// file; Go encoders never do this). Moves on them are refused.
    pub duplicates: std::collections::BTreeSet<String>,
}

/// A line the reader could not make sense of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

/// Parses a sample value the way the Go text parser does (`NaN`, `+Inf`, `-Inf` included).
pub fn parse_value(tok: &str) -> Option<f64> {
    match tok {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => {
            let first = tok.as_bytes().first()?;
            if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.')) {
                return None;
            }
            tok.parse::<f64>().ok().filter(|v| v.is_finite())
        }
    }
}

/// Which family a sample named `name` belongs to, given the current family.
fn belongs(fam: &Family, name: &str) -> bool {
    if name == fam.name {
        return matches!(
            fam.kind,
            Kind::Counter | Kind::Gauge | Kind::Untyped | Kind::Summary
        );
    }
    let Some(suffix) = name.strip_prefix(fam.name.as_str()) else {
        return false;
    };
    match fam.kind {
        Kind::Histogram => matches!(suffix, "_bucket" | "_sum" | "_count"),
        Kind::Summary => matches!(suffix, "_sum" | "_count"),
        _ => false,
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }
    fn name(&mut self) -> Option<&str> {
        let start = self.i;
        match self.peek() {
            Some(c) if is_name_start(c) => self.i += 1,
            _ => return None,
        }
        while matches!(self.peek(), Some(c) if is_name_char(c)) {
            self.i += 1;
        }
        std::str::from_utf8(&self.b[start..self.i]).ok()
    }
}

/// A sample line's name, labels, and the byte range of its value token
/// relative to the line start.
type SampleParts = (String, Vec<(String, String)>, (usize, usize));

/// Parses one sample line (without its newline).
fn parse_sample_line(line: &[u8]) -> Result<SampleParts, String> {
    let mut c = Cursor { b: line, i: 0 };
    c.skip_blanks();
    let name = c.name().ok_or("expected a metric name")?.to_string();
    let mut labels = Vec::new();
    let after_name = c.i;
    c.skip_blanks();
    let had_blank = c.i > after_name;
    let had_braces = c.peek() == Some(b'{');
    if had_braces {
        c.i += 1;
        loop {
            c.skip_blanks();
            match c.peek() {
                Some(b'}') => {
                    c.i += 1;
                    break;
                }
                None => return Err("unterminated label set".into()),
                _ => {}
            }
            let lname = c.name().ok_or("expected a label name")?.to_string();
            c.skip_blanks();
            if c.peek() != Some(b'=') {
                return Err(format!("expected `=` after label `{lname}`"));
            }
            c.i += 1;
            c.skip_blanks();
            if c.peek() != Some(b'"') {
                return Err(format!("expected `\"` to open the value of label `{lname}`"));
            }
            c.i += 1;
            let mut val: Vec<u8> = Vec::new();
            loop {
                match c.peek() {
                    None => return Err(format!("unterminated value of label `{lname}`")),
                    Some(b'"') => {
                        c.i += 1;
                        break;
                    }
                    Some(b'\\') => {
                        c.i += 1;
                        match c.peek() {
                            Some(b'\\') => val.push(b'\\'),
                            Some(b'"') => val.push(b'"'),
                            Some(b'n') => val.push(b'\n'),
                            _ => return Err(format!("invalid escape in the value of label `{lname}`")),
                        }
                        c.i += 1;
                    }
                    Some(x) => {
                        val.push(x);
                        c.i += 1;
                    }
                }
            }
            let val = String::from_utf8(val).map_err(|_| format!("label `{lname}` is not UTF-8"))?;
            labels.push((lname, val));
            c.skip_blanks();
            match c.peek() {
                Some(b',') => c.i += 1,
                Some(b'}') => {}
                _ => return Err("expected `,` or `}` in the label set".into()),
            }
        }
    }
    let blank_next = matches!(c.peek(), Some(b' ' | b'\t'));
    if (had_braces && !blank_next) || (!had_braces && !had_blank) {
        return Err("expected a blank before the value".into());
    }
    c.skip_blanks();
    let vs = c.i;
    while matches!(c.peek(), Some(x) if x != b' ' && x != b'\t') {
        c.i += 1;
    }
    let ve = c.i;
    if vs == ve {
        return Err("missing value".into());
    }
    c.skip_blanks();
    if c.i < line.len() {
        let ts = std::str::from_utf8(&line[c.i..]).map_err(|_| "timestamp is not UTF-8")?;
        if ts.trim_end().parse::<i64>().is_err() {
            return Err(format!("bad timestamp `{}`", ts.trim_end()));
        }
    }
    Ok((name, labels, (vs, ve)))
}

impl Exposition {
    /// Parses a whole exposition. Errors name the 1-based line.
    pub fn parse(text: Vec<u8>) -> Result<Exposition, LineError> {
        let mut families: Vec<Family> = Vec::new();
        let mut samples: Vec<Sample> = Vec::new();
        let mut by_name = BTreeMap::new();
        let mut duplicates = std::collections::BTreeSet::new();
        let mut pos = 0usize;
        let mut lineno = 0usize;
        let err = |line: usize, message: String| LineError { line, message };
        while pos < text.len() {
            lineno += 1;
            let nl = memchr(b'\n', &text[pos..]).map(|i| pos + i);
            let end = nl.unwrap_or(text.len());
            let next = nl.map(|i| i + 1).unwrap_or(text.len());
            let raw = &text[pos..end];
            let line = raw.strip_suffix(b"\r").unwrap_or(raw);
            let trimmed_start = line.iter().position(|c| *c != b' ' && *c != b'\t');
            match trimmed_start {
                None => {}
                Some(s) if line[s] == b'#' => {
                    let rest = std::str::from_utf8(&line[s + 1..])
                        .map_err(|_| err(lineno, "comment is not UTF-8".into()))?;
                    let rest = rest.trim_start();
                    let (kw, after) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
                    if kw == "HELP" || kw == "TYPE" {
                        let after = after.trim_start();
                        let (fname, arg) = after.split_once([' ', '\t']).unwrap_or((after, ""));
                        if fname.is_empty() {
                            return Err(err(lineno, format!("`# {kw}` without a metric name")));
                        }
                        let start_new = match families.last() {
                            Some(f) => {
                                f.name != fname
                                    || !f.samples.is_empty()
                                    || (kw == "HELP" && f.help.is_some())
                                    || (kw == "TYPE"
                                        && f.header_end > f.block_start
                                        && f.kind != Kind::Untyped)
                            }
                            None => true,
                        };
                        if start_new {
                            if by_name.contains_key(fname) {
                                duplicates.insert(fname.to_string());
                            } else {
                                by_name.insert(fname.to_string(), families.len());
                            }
                            families.push(Family {
                                name: fname.to_string(),
                                kind: Kind::Untyped,
                                help: None,
                                block_start: pos,
                                header_end: next,
                                samples: samples.len()..samples.len(),
                            });
                        }
                        let Some(f) = families.last_mut() else {
                            return Err(err(lineno, "internal: no family".into()));
                        };
                        f.header_end = next;
                        if kw == "HELP" {
                            f.help = Some(arg.to_string());
                        } else {
                            f.kind = Kind::parse(arg.trim()).ok_or_else(|| {
                                err(lineno, format!("unknown metric type `{}`", arg.trim()))
                            })?;
                        }
                    }
                }
                Some(_) => {
                    let (name, labels, (vs, ve)) = parse_sample_line(line).map_err(|m| err(lineno, m))?;
                    let vtok = std::str::from_utf8(&line[vs..ve]).unwrap_or("");
                    let value =
                        parse_value(vtok).ok_or_else(|| err(lineno, format!("bad sample value `{vtok}`")))?;
                    let attach = families.last().is_some_and(|f| belongs(f, &name));
                    if !attach {
                        if by_name.contains_key(&name) {
                            return Err(err(lineno, format!("sample `{name}` outside its family's block")));
                        }
                        by_name.insert(name.clone(), families.len());
                        families.push(Family {
                            name: name.clone(),
                            kind: Kind::Untyped,
                            help: None,
                            block_start: pos,
                            header_end: pos,
                            samples: samples.len()..samples.len(),
                        });
                    }
                    let fi = families.len() - 1;
                    let fam = &mut families[fi];
                    let le = if fam.kind == Kind::Histogram && name.ends_with("_bucket") {
                        let le = labels
                            .iter()
                            .find(|(n, _)| n == "le")
                            .ok_or_else(|| err(lineno, format!("bucket of `{}` without `le`", fam.name)))?;
                        Some(
                            parse_value(&le.1)
                                .ok_or_else(|| err(lineno, format!("bad `le` value `{}`", le.1)))?,
                        )
                    } else {
                        None
                    };
                    fam.samples.end = samples.len() + 1;
                    samples.push(Sample {
                        name,
                        family: fi,
                        labels,
                        value,
                        value_span: (pos + vs, pos + ve),
                        line_end: next,
                        line: lineno,
                        le,
                    });
                }
            }
            pos = next;
        }
        Ok(Exposition {
            text,
            families,
            samples,
            by_name,
            duplicates,
        })
    }

    /// The family named `name`.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.by_name.get(name).map(|&i| &self.families[i])
    }

    /// The value of `label` on the first sample of family `family`.
    pub fn first_label(&self, family: &str, label: &str) -> Option<&str> {
        let f = self.family(family)?;
        let s = self.samples.get(f.samples.start)?;
        s.labels.iter().find(|(n, _)| n == label).map(|(_, v)| v.as_str())
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

/// Formats `v` as Go's `strconv.FormatFloat(v, 'g', -1, 64)` does, which is how
/// the Prometheus text encoder writes values and `le` bounds: the shortest
/// digits that read back exactly, `%e` form when the exponent is below -4 or at
/// least 6 (`1e+06`, `2.5e-05`), integers without `.0`, and `NaN`, `+Inf`, `-Inf`.
pub fn format_go(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if v == 0.0 {
        return "0".into();
    }
    let neg = v < 0.0;
    let sci = format!("{:e}", v.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(|c| c.is_ascii_digit()).collect();
    let nd = digits.len() as i32;
    let dp = exp + 1;
    let mut out = String::with_capacity(24);
    if neg {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push(digits[0] as char);
        if nd > 1 {
            out.push('.');
            for &d in &digits[1..] {
                out.push(d as char);
            }
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.abs());
    } else {
        if dp > 0 {
            for i in 0..dp {
                out.push(if i < nd { digits[i as usize] as char } else { '0' });
            }
        } else {
            out.push('0');
        }
        let frac = (nd - dp).max(0);
        if frac > 0 {
            out.push('.');
            for i in 0..frac {
                let j = dp + i;
                out.push(if j >= 0 && j < nd {
                    digits[j as usize] as char
                } else {
                    '0'
                });
            }
        }
    }
    out
}

/// Escapes a label value for the text format (`\\`, `\"`, `\n`).
pub fn escape_label_value(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Escapes HELP text for the text format (`\\` and `\n`).
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_formatting_matches_strconv() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (2032.0, "2032"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1762283258.81, "1.76228325881e+09"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (2.5e-5, "2.5e-05"),
            (0.005, "0.005"),
            (1.4179782510000003, "1.4179782510000003"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (-0.25, "-0.25"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (v, want) in cases {
            assert_eq!(format_go(*v), *want, "value {v:?}");
        }
    }

    #[test]
    fn parses_families_and_value_spans() {
        let text = b"# HELP a_total [ALPHA] help\n# TYPE a_total counter\na_total{code=\"200\",x=\"q\\\"\"} 5\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\nplain 7 1700000000000\n".to_vec();
        let e = Exposition::parse(text).unwrap();
        assert_eq!(e.families.len(), 3);
        assert_eq!(e.families[0].kind, Kind::Counter);
        assert_eq!(e.families[0].help.as_deref(), Some("[ALPHA] help"));
        assert_eq!(e.samples[0].label("x"), "q\"");
        let (a, b) = e.samples[0].value_span;
        assert_eq!(&e.text[a..b], b"5");
        assert_eq!(e.samples[2].le, Some(f64::INFINITY));
        assert_eq!(e.families[1].samples, 1..5);
        assert_eq!(e.families[2].name, "plain");
        let (a, b) = e.samples[5].value_span;
        assert_eq!(&e.text[a..b], b"7");
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let e = Exposition::parse(b"# TYPE a counter\na 1\na{x=\"1} 2\n".to_vec()).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("unterminated"), "{}", e.message);
        let e = Exposition::parse(b"a one\n".to_vec()).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (1, "bad sample value `one`"));
    }
}
