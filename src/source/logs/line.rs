//! One log line → its time, level and message: the container runtime's
//! prefix of `/var/log/pods` (`<time> <stream> <F|P> <line>`), the
//! `--timestamps` prefix of `kubectl logs` / `oc logs` (must-gather), then
//! etcd's zap JSON (3.4 `--logger=zap`, 3.5, 3.6), etcd's capnslog text
//! (3.3, and 3.4's default), the text of etcd's raft library under capnslog
//! (`raft2026/12/06 04:01:49 INFO: …`), and klog (kube-apiserver).
//!
//! Nothing here allocates for a line that needs no unescaping: the message
//! and the fields are slices of the line.

use std::borrow::Cow;

use memchr::memmem;

use crate::store::Millis;

/// The format a line was read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// etcd's zap JSON.
    Zap,
    /// etcd's capnslog text (`2026-12-06 04:01:49.911735 W | pkg: msg`).
    Capnslog,
    /// etcd's raft library under capnslog (`raft2026/12/06 04:01:49 INFO: msg`).
    RaftText,
    /// klog (`I1206 04:01:50.123456       1 file.go:12] msg`).
    Klog,
    /// Text with only a runtime or `--timestamps` prefix.
    Plain,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Zap => "etcd zap JSON",
            Format::Capnslog => "etcd capnslog text",
            Format::RaftText => "etcd raft text",
            Format::Klog => "klog",
            Format::Plain => "plain text",
        }
    }
}

/// Severity, as the formats spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// What the runtime prefix of a `/var/log/pods` line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cri {
    /// A whole line, or the last part of a split one.
    Full,
    /// A part of a line longer than the runtime's buffer: more follows.
    Partial,
}

/// A prefix stripped from a line: its time, and the CRI tag if any.
pub struct Prefix<'a> {
    pub time: Millis,
    pub cri: Option<Cri>,
    pub rest: &'a [u8],
}

/// The runtime (`<RFC 3339 time> stdout|stderr F|P <line>`) or `--timestamps`
/// (`<RFC 3339 time> <line>`) prefix of a line, if it has one.
pub fn prefix(line: &[u8]) -> Option<Prefix<'_>> {
    // `2026-12-06T04:01:50.123456789Z ` at least 20 bytes and a `T` at 10.
    if line.len() < 21 || line[10] != b'T' || !line[0].is_ascii_digit() || line[4] != b'-' {
        return None;
    }
    let sp = memchr::memchr(b' ', &line[..line.len().min(40)])?;
    let time = rfc3339(&line[..sp])?;
    let rest = &line[sp + 1..];
    for stream in [&b"stdout "[..], b"stderr "] {
        if let Some(r) = rest.strip_prefix(stream) {
            let (cri, r) = match r {
                [b'F', b' ', r @ ..] => (Cri::Full, r),
                [b'P', b' ', r @ ..] => (Cri::Partial, r),
                [b'F'] => (Cri::Full, &r[1..]),
                [b'P'] => (Cri::Partial, &r[1..]),
                _ => continue,
            };
            return Some(Prefix {
                time,
                cri: Some(cri),
                rest: r,
            });
        }
    }
    Some(Prefix {
        time,
        cri: None,
        rest,
    })
}

/// A parsed line: slices of it (the message unescaped only when it has escapes).
pub struct Parsed<'a> {
    pub format: Format,
    /// The line's own time; `None` when it has none (plain text) or one
    /// without a year (klog, whose year comes from elsewhere).
    pub time: Option<Millis>,
    /// klog's `MMDD HH:MM:SS.ffffff` without a year: month, day and the
    /// milliseconds of that day.
    pub klog_time: Option<(u32, u32, Millis)>,
    pub level: Level,
    pub msg: Cow<'a, str>,
    /// zap: the whole object (fields are looked up in it).
    pub json: Option<&'a str>,
}

static MSG_KEY: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(b"\"msg\":\""));
static TS_KEY: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(b"\"ts\":"));
static LEVEL_KEY: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(b"\"level\":\""));

/// Parses the text of a line (after any prefix). `Err` says why it is not
/// a log line of a known format with a usable time; plain text is `Ok` with
/// format [`Format::Plain`] and no time.
pub fn parse(text: &str) -> Result<Parsed<'_>, &'static str> {
    let b = text.as_bytes();
    match b.first() {
        Some(b'{') => zap(text),
        Some(b'r') if b.starts_with(b"raft") => raft_text(text).ok_or("not a raft log line"),
        Some(c) if c.is_ascii_digit() => Ok(capnslog(text).unwrap_or_else(|| plain(text))),
        Some(b'I' | b'W' | b'E' | b'F') => Ok(klog(text).unwrap_or_else(|| plain(text))),
        _ => Ok(plain(text)),
    }
}

fn plain(text: &str) -> Parsed<'_> {
    let low = text.as_bytes().get(..12).unwrap_or(text.as_bytes());
    let level = if memmem::find(low, b"error").is_some() || memmem::find(low, b"ERROR").is_some() {
        Level::Error
    } else if memmem::find(low, b"warn").is_some() || memmem::find(low, b"WARN").is_some() {
        Level::Warn
    } else {
        Level::Info
    };
    Parsed {
        format: Format::Plain,
        time: None,
        klog_time: None,
        level,
        msg: Cow::Borrowed(text),
        json: None,
    }
}

/// The string value at `at` (just after its opening quote), up to its
/// closing quote, unescaped when it has escapes.
fn json_string(s: &str, at: usize) -> Option<(Cow<'_, str>, usize)> {
    let b = s.as_bytes();
    let mut i = at;
    let mut escaped = false;
    loop {
        let j = memchr::memchr2(b'"', b'\\', &b[i..])? + i;
        if b[j] == b'"' {
            let raw = &s[at..j];
            let v = if escaped {
                Cow::Owned(unescape(raw))
            } else {
                Cow::Borrowed(raw)
            };
            return Some((v, j + 1));
        }
        escaped = true;
        i = j + 2;
        if i > b.len() {
            return None;
        }
    }
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push(' '),
            Some('t') => out.push(' '),
            Some('r') => {}
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

/// A string field of a zap object (`"key":"value"`), unescaped.
pub fn field<'a>(json: &'a str, key: &str) -> Option<Cow<'a, str>> {
    let mut pat = String::with_capacity(key.len() + 4);
    pat.push('"');
    pat.push_str(key);
    pat.push_str("\":");
    let at = memmem::find(json.as_bytes(), pat.as_bytes())? + pat.len();
    let b = json.as_bytes();
    let mut i = at;
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    if b.get(i) == Some(&b'"') {
        return json_string(json, i + 1).map(|(v, _)| v);
    }
    // A number or bare word.
    let end = b[i..]
        .iter()
        .position(|c| matches!(c, b',' | b'}' | b' '))
        .map_or(b.len(), |p| i + p);
    Some(Cow::Borrowed(&json[i..end]))
}

fn zap(text: &str) -> Result<Parsed<'_>, &'static str> {
    let b = text.as_bytes();
    if b.last() != Some(&b'}') {
        return Err("a JSON log line that does not end with `}` (cut short?)");
    }
    let m = MSG_KEY.find(b).ok_or("a JSON line without a `msg` field")? + 7;
    let (msg, _) = json_string(text, m).ok_or("a JSON line whose `msg` is not a closed string")?;
    let time = match TS_KEY.find(b) {
        Some(t) => {
            let mut i = t + 5;
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            if b.get(i) == Some(&b'"') {
                let end = memchr::memchr(b'"', &b[i + 1..]).ok_or("unclosed `ts`")? + i + 1;
                Some(rfc3339(&b[i + 1..end]).ok_or("`ts` is not a time")?)
            } else {
                // Epoch seconds (zap's default encoder).
                let end = b[i..]
                    .iter()
                    .position(|c| matches!(c, b',' | b'}'))
                    .map_or(b.len(), |p| i + p);
                let secs: f64 = text[i..end].trim().parse().map_err(|_| "`ts` is not a time")?;
                Some((secs * 1000.0).round() as Millis)
            }
        }
        None => None,
    };
    let level = match LEVEL_KEY.find(b) {
        Some(l) => match b.get(l + 9..l + 11) {
            Some(b"de") => Level::Debug,
            Some(b"wa") => Level::Warn,
            Some(b"er" | b"fa" | b"pa" | b"dp") => Level::Error,
            _ => Level::Info,
        },
        None => Level::Info,
    };
    Ok(Parsed {
        format: Format::Zap,
        time,
        klog_time: None,
        level,
        msg,
        json: Some(text),
    })
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u32, |a, d| a * 10 + u32::from(d - b'0')))
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix milliseconds of a UTC civil time.
pub fn civil_ms(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32, ms: u32) -> Option<Millis> {
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    Some(((days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s)) * 1000) + i64::from(ms))
}

/// Milliseconds of a fraction's digits (`123456` → 123).
fn frac_ms(f: &[u8]) -> Option<u32> {
    if !f.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut ms = 0u32;
    for i in 0..3 {
        ms = ms * 10 + f.get(i).map_or(0, |d| u32::from(d - b'0'));
    }
    Some(ms)
}

/// `YYYY-MM-DD?HH:MM:SS[.fff…]` with `sep` between date and time: the
/// civil fields and the rest after the seconds' fraction.
fn date_time(b: &[u8], sep: &[u8]) -> Option<(Millis, usize)> {
    if b.len() < 19
        || b[4] != b'-' && b[4] != b'/'
        || b[7] != b[4]
        || !sep.contains(&b[10])
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (digits(&b[0..4])?, digits(&b[5..7])?, digits(&b[8..10])?);
    let (h, mi, s) = (digits(&b[11..13])?, digits(&b[14..16])?, digits(&b[17..19])?);
    let mut i = 19;
    let mut ms = 0;
    if b.get(i) == Some(&b'.') || b.get(i) == Some(&b',') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        ms = frac_ms(&b[start..i])?;
    }
    Some((civil_ms(i64::from(y), mo, d, h, mi, s, ms)?, i))
}

/// An RFC 3339 / ISO 8601 time (`2026-12-06T04:01:50.123456789Z`,
/// `…+01:00`, `…+0100`; without a zone: UTC).
pub fn rfc3339(b: &[u8]) -> Option<Millis> {
    let (t, i) = date_time(b, b"T ")?;
    let zone = &b[i..];
    let off_min: i64 = match zone {
        [] | [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let rest: Vec<u8> = rest.iter().copied().filter(|c| *c != b':').collect();
            if rest.len() != 4 {
                return None;
            }
            let h = i64::from(digits(&rest[..2])?);
            let m = i64::from(digits(&rest[2..])?);
            let v = h * 60 + m;
            if *sign == b'+' {
                v
            } else {
                -v
            }
        }
        _ => return None,
    };
    Some(t - off_min * 60_000)
}

/// `2026-12-06 04:01:49.911735 W | etcdserver: message` (times in the
/// process's zone, taken as UTC: etcd runs in UTC in containers).
fn capnslog(text: &str) -> Option<Parsed<'_>> {
    let b = text.as_bytes();
    let (time, i) = date_time(b, b" ")?;
    let rest = &text[i..];
    let rb = rest.as_bytes();
    if rb.len() < 5 || rb[0] != b' ' || rb[2] != b' ' || rb[3] != b'|' {
        return None;
    }
    let level = match rb[1] {
        b'W' => Level::Warn,
        b'E' | b'C' => Level::Error,
        b'D' | b'T' => Level::Debug,
        _ => Level::Info,
    };
    let msg = rest[4..].trim_start();
    // `pkg: message`: the package is dropped.
    let msg = match msg.find(": ") {
        Some(p) if p < 48 && !msg[..p].contains(' ') => &msg[p + 2..],
        _ => msg,
    };
    Some(Parsed {
        format: Format::Capnslog,
        time: Some(time),
        klog_time: None,
        level,
        msg: Cow::Borrowed(msg),
        json: None,
    })
}

/// `raft2026/12/06 04:01:49 INFO: bdae9bbc11dd390d became leader at term 2`.
fn raft_text(text: &str) -> Option<Parsed<'_>> {
    let b = text.as_bytes().get(4..)?;
    let (time, i) = date_time(b, b" ")?;
    let rest = text.get(4 + i..)?.trim_start();
    let (lvl, msg) = rest.split_once(": ")?;
    let level = match lvl {
        "WARN" | "WARNING" => Level::Warn,
        "ERROR" | "FATAL" | "PANIC" => Level::Error,
        "DEBUG" => Level::Debug,
        _ => Level::Info,
    };
    Some(Parsed {
        format: Format::RaftText,
        time: Some(time),
        klog_time: None,
        level,
        msg: Cow::Borrowed(msg),
        json: None,
    })
}

/// `I1206 04:01:50.123456       1 file.go:123] message` (no year, no zone).
fn klog(text: &str) -> Option<Parsed<'_>> {
    let b = text.as_bytes();
    if b.len() < 22 || b[5] != b' ' || b[8] != b':' || b[11] != b':' || b[14] != b'.' {
        return None;
    }
    let level = match b[0] {
        b'W' => Level::Warn,
        b'E' | b'F' => Level::Error,
        _ => Level::Info,
    };
    let (mo, d) = (digits(&b[1..3])?, digits(&b[3..5])?);
    let (h, mi, s) = (digits(&b[6..8])?, digits(&b[9..11])?, digits(&b[12..14])?);
    let mut i = 15;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let ms = frac_ms(&b[15..i])?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let day_ms = Millis::from(((h * 60 + mi) * 60 + s) * 1000 + ms);
    let close = memchr::memchr(b']', &b[i..])? + i;
    let msg = text.get(close + 1..)?.trim_start();
    Some(Parsed {
        format: Format::Klog,
        time: None,
        klog_time: Some((mo, d, day_ms)),
        level,
        msg: Cow::Borrowed(msg),
        json: None,
    })
}

/// The time of a klog line given a year.
pub fn klog_at(year: i64, (mo, d, day_ms): (u32, u32, Millis)) -> Option<Millis> {
    Some(civil_ms(year, mo, d, 0, 0, 0, 0)? + day_ms)
}

/// The civil year of a unix time in milliseconds (UTC).
pub fn year_of(t: Millis) -> i64 {
    // Inverse of days_from_civil, year only.
    let z = t.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    yoe + era * 400 + i64::from(m <= 2)
}

/// A Go duration (`1.234s`, `215.3ms`, `900µs`, `1m2.5s`, `2h0m0s`) in seconds.
pub fn go_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "0" || s == "0s" {
        return Some(0.0);
    }
    let mut total = 0.0;
    let mut rest = s;
    let mut any = false;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if n == 0 {
            return None;
        }
        let v: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let (unit, len) = if rest.starts_with("ms") {
            (1e-3, 2)
        } else if rest.starts_with("µs") {
            (1e-6, "µs".len())
        } else if rest.starts_with("us") {
            (1e-6, 2)
        } else if rest.starts_with("ns") {
            (1e-9, 2)
        } else if rest.starts_with('s') {
            (1.0, 1)
        } else if rest.starts_with('m') {
            (60.0, 1)
        } else if rest.starts_with('h') {
            (3600.0, 1)
        } else {
            return None;
        };
        total += v * unit;
        rest = &rest[len..];
        any = true;
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_of_every_format() {
        let t = rfc3339(b"2026-12-06T04:01:50.123456789Z").unwrap();
        assert_eq!(t, 1_796_529_710_123);
        assert_eq!(rfc3339(b"2026-12-06T05:01:50.123+0100"), Some(t));
        assert_eq!(rfc3339(b"2026-12-06T05:01:50.123+01:00"), Some(t));
        assert_eq!(year_of(t), 2026);
        assert_eq!(year_of(civil_ms(2024, 12, 31, 23, 59, 59, 999).unwrap()), 2024);
        assert_eq!(year_of(civil_ms(2025, 1, 1, 0, 0, 0, 0).unwrap()), 2025);
        let p =
            parse("2026-12-06 04:01:50.123456 W | etcdserver: sync duration of 1.2s, expected less than 1s")
                .unwrap();
        assert_eq!(
            (p.format, p.time, p.level),
            (Format::Capnslog, Some(t), Level::Warn)
        );
        assert_eq!(p.msg, "sync duration of 1.2s, expected less than 1s");
        let p = parse("raft2026/12/06 04:01:50 INFO: bdae9bbc11dd390d became leader at term 2").unwrap();
        assert_eq!((p.format, p.time), (Format::RaftText, Some(t - 123)));
        assert_eq!(p.msg, "bdae9bbc11dd390d became leader at term 2");
        let p = parse(r#"{"level":"warn","ts":"2026-12-06T04:01:50.123Z","caller":"wal/wal.go:805","msg":"slow \"fdatasync\"","took":"1.5s"}"#).unwrap();
        assert_eq!((p.format, p.time, p.level), (Format::Zap, Some(t), Level::Warn));
        assert_eq!(p.msg, "slow \"fdatasync\"");
        assert_eq!(field(p.json.unwrap(), "took").as_deref(), Some("1.5s"));
        let p = parse("E1206 04:01:50.123456       1 status.go:71] apiserver received an error").unwrap();
        assert_eq!((p.format, p.level), (Format::Klog, Level::Error));
        assert_eq!(klog_at(2026, p.klog_time.unwrap()), Some(t));
        assert_eq!(p.msg, "apiserver received an error");
    }

    #[test]
    fn prefixes() {
        let p = prefix(b"2026-12-06T04:01:50.123456789Z stderr P {\"level\"").unwrap();
        assert_eq!(
            (p.time, p.cri, p.rest),
            (1_796_529_710_123, Some(Cri::Partial), &b"{\"level\""[..])
        );
        let p = prefix(b"2026-12-06T04:01:50.123456789Z I1206 x").unwrap();
        assert_eq!((p.cri, p.rest), (None, &b"I1206 x"[..]));
        assert!(prefix(b"2026-12-06 04:01:50.123456 W | x").is_none());
    }

    #[test]
    fn durations() {
        assert_eq!(go_duration("1.5s"), Some(1.5));
        assert_eq!(go_duration("215ms"), Some(0.215));
        assert_eq!(go_duration("1m2.5s"), Some(62.5));
        assert!((go_duration("900µs").unwrap() - 0.0009).abs() < 1e-12);
        assert_eq!(go_duration("fast"), None);
    }
}
