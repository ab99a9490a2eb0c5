//! Times and durations on the command line and in reports: RFC 3339 or unix
//! seconds in, RFC 3339 UTC out; Prometheus durations (`5s`, `1m30s`, `2h`).

use chrono::{DateTime, SecondsFormat, Utc};

/// Milliseconds since the Unix epoch, as Prometheus timestamps are (the
/// store's time unit; defined here, at the bottom of the stairs).
pub type Millis = i64;

/// A time or duration that could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum TimeError {
    #[error(
        "invalid time `{0}`: expected RFC 3339 (2026-01-02T03:04:05Z), unix seconds, `now` or `now-30m`"
    )]
    Time(String),
    #[error("invalid duration `{0}`: expected a Prometheus duration such as 15s, 1m or 1h30m")]
    Duration(String),
    /// A duration flag that must be positive was zero.
    #[error("must be greater than zero")]
    NotPositive,
}

/// Parses an RFC 3339 time, unix seconds (integer or fractional), or a time
/// relative to the wall clock: `now`, `now-30m`, `now+5m`.
pub fn parse_time(s: &str) -> Result<Millis, TimeError> {
    parse_time_at(s, Utc::now().timestamp_millis() / 1000 * 1000)
}

/// [`parse_time`] with `now` given.
pub fn parse_time_at(s: &str, now: Millis) -> Result<Millis, TimeError> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix("now") {
        let rest = rest.trim_start();
        if rest.is_empty() {
            return Ok(now);
        }
        let bad = || TimeError::Time(s.into());
        let (sign, d) = match rest.as_bytes()[0] {
            b'-' => (-1, &rest[1..]),
            b'+' => (1, &rest[1..]),
            _ => return Err(bad()),
        };
        let d = parse_duration(d.trim()).map_err(|_| bad())?;
        return now.checked_add(sign * d).ok_or_else(bad);
    }
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs.abs() < 1e13 {
            return Ok((secs * 1000.0).round() as Millis);
        }
        return Err(TimeError::Time(s.into()));
    }
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.timestamp_millis())
        .map_err(|_| TimeError::Time(s.into()))
}

/// Parses a Prometheus duration: a sequence of `<n><unit>` with units
/// `ms`, `s`, `m`, `h`, `d`, `w`, `y`, largest first, e.g. `1h30m`.
pub fn parse_duration(s: &str) -> Result<Millis, TimeError> {
    let err = || TimeError::Duration(s.into());
    let b = s.trim().as_bytes();
    if b.is_empty() {
        return Err(err());
    }
    let mut total: i64 = 0;
    let mut i = 0;
    let mut last_rank = usize::MAX;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(err());
        }
        let n: i64 = std::str::from_utf8(&b[start..i])
            .ok()
            .and_then(|x| x.parse().ok())
            .ok_or_else(err)?;
        let (unit_ms, rank, len) = match (b.get(i), b.get(i + 1)) {
            (Some(b'm'), Some(b's')) => (1, 0, 2),
            (Some(b's'), _) => (1000, 1, 1),
            (Some(b'm'), _) => (60_000, 2, 1),
            (Some(b'h'), _) => (3_600_000, 3, 1),
            (Some(b'd'), _) => (86_400_000, 4, 1),
            (Some(b'w'), _) => (604_800_000, 5, 1),
            (Some(b'y'), _) => (31_536_000_000, 6, 1),
            _ => return Err(err()),
        };
        if rank >= last_rank {
            return Err(err());
        }
        last_rank = rank;
        i += len;
        total = n
            .checked_mul(unit_ms)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(err)?;
    }
    Ok(total)
}

/// Formats a duration the Prometheus way (`1m30s`, `500ms`, `0s`).
pub fn format_duration(ms: Millis) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let neg = ms < 0;
    let mut r = ms.unsigned_abs();
    let mut out = String::new();
    for (unit, name) in [
        (31_536_000_000u64, "y"),
        (604_800_000, "w"),
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
        (1, "ms"),
    ] {
        if r >= unit {
            out.push_str(&format!("{}{name}", r / unit));
            r %= unit;
        }
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}

/// A timeout as messages state it: whole seconds as `10s`, else the seconds
/// with their fraction (`1.5s`).
pub fn format_seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s}s")
    }
}

/// Unix seconds with millisecond precision only when needed (`1767225600`,
/// `1767225600.5` → `1767225600.500`), as the Prometheus HTTP API writes and
/// reads timestamps.
pub fn format_timestamp(t: Millis) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let mut t = t;
    if t < 0 {
        s.push('-');
        t = -t;
    }
    let _ = write!(s, "{}", t / 1000);
    let frac = t % 1000;
    if frac != 0 {
        let _ = write!(s, ".{frac:03}");
    }
    s
}

/// RFC 3339 UTC with millisecond precision only when needed.
pub fn format_time(ms: Millis) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(d) if ms % 1000 == 0 => d.to_rfc3339_opts(SecondsFormat::Secs, true),
        Some(d) => d.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => format!("{ms}ms"),
    }
}

/// Formats a lag or a span for people: `85 s`, `2m05s`, `1h02m`.
pub fn format_lag(ms: Millis) -> String {
    let s = ms / 1000;
    if s < 120 {
        if ms % 1000 != 0 && s < 10 {
            format!("{:.1} s", ms as f64 / 1000.0)
        } else {
            format!("{s} s")
        }
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// A span for people, rounded to what a reader needs: milliseconds under a
/// second (`250ms`), whole seconds under a minute (`15s`, so a step of
/// 4999 ms reads `5s`), minutes and seconds under an hour (`1m45s`, `2m`),
/// hours and minutes above (`1h2m`).
pub fn format_span(ms: Millis) -> String {
    let neg = ms < 0;
    let a = ms.unsigned_abs();
    let body = if a == 0 {
        "0s".to_string()
    } else if a < 1000 {
        format!("{a}ms")
    } else {
        let s = (a + 500) / 1000;
        if s < 60 {
            format!("{s}s")
        } else if s < 3600 {
            match s % 60 {
                0 => format!("{}m", s / 60),
                r => format!("{}m{r}s", s / 60),
            }
        } else {
            let m = (s + 30) / 60;
            match m % 60 {
                0 => format!("{}h", m / 60),
                r => format!("{}h{r}m", m / 60),
            }
        }
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// An offset from an earlier time: `+1m45s`, `+0s`, `-15s`.
pub fn format_offset(ms: Millis) -> String {
    if ms < 0 {
        format_span(ms)
    } else {
        format!("+{}", format_span(ms))
    }
}

/// A short absolute time for a screen: `00:01:45Z`, with the date
/// (`2026-01-01 00:01:45Z`) when `with_date`.
pub fn format_clock(ms: Millis, with_date: bool) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(d) if with_date => d.format("%Y-%m-%d %H:%M:%SZ").to_string(),
        Some(d) => d.format("%H:%M:%SZ").to_string(),
        None => format!("{ms}ms"),
    }
}

/// `2026-12-06 04:01:50.123Z`: a log line's time, to the millisecond.
pub fn format_time_ms(ms: Millis) -> String {
    match DateTime::<Utc>::from_timestamp_millis(ms) {
        Some(d) => d.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string(),
        None => format!("{ms}ms"),
    }
}

/// Whether two times fall on the same UTC day.
pub fn same_day(a: Millis, b: Millis) -> bool {
    a.div_euclid(86_400_000) == b.div_euclid(86_400_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now = 1_767_225_600_000;
        assert_eq!(parse_time_at("now", now).unwrap(), now);
        assert_eq!(parse_time_at("now-30m", now).unwrap(), now - 1_800_000);
        assert_eq!(parse_time_at(" now - 1h30m ", now).unwrap(), now - 5_400_000);
        assert_eq!(parse_time_at("now+5s", now).unwrap(), now + 5000);
        for bad in ["now-", "now-5", "nowish", "now*2m", "now-1m1h"] {
            assert!(parse_time_at(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("1767225600").unwrap(), 1_767_225_600_000);
        assert_eq!(parse_time("1767225600.5").unwrap(), 1_767_225_600_500);
        assert_eq!(parse_time("2026-01-01T00:00:00Z").unwrap(), 1_767_225_600_000);
        assert_eq!(
            parse_time("2026-01-01T01:00:00+01:00").unwrap(),
            1_767_225_600_000
        );
        assert!(parse_time("yesterday").is_err());
        assert_eq!(format_time(1_767_225_600_000), "2026-01-01T00:00:00Z");
        assert_eq!(format_time(1_767_225_600_250), "2026-01-01T00:00:00.250Z");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), 5000);
        assert_eq!(parse_duration("1m30s").unwrap(), 90_000);
        assert_eq!(parse_duration("1h").unwrap(), 3_600_000);
        assert_eq!(parse_duration("250ms").unwrap(), 250);
        assert!(parse_duration("30s1m").is_err());
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1x").is_err());
        assert_eq!(format_duration(90_000), "1m30s");
        assert_eq!(format_duration(500), "500ms");
    }

    #[test]
    fn spans_offsets_and_clocks() {
        assert_eq!(format_span(4999), "5s");
        assert_eq!(format_span(15_000), "15s");
        assert_eq!(format_span(105_000), "1m45s");
        assert_eq!(format_span(120_000), "2m");
        assert_eq!(format_span(3_720_000), "1h2m");
        assert_eq!(format_span(250), "250ms");
        assert_eq!(format_offset(105_000), "+1m45s");
        assert_eq!(format_offset(0), "+0s");
        assert_eq!(format_offset(-15_000), "-15s");
        assert_eq!(format_clock(1_767_225_705_000, false), "00:01:45Z");
        assert_eq!(format_clock(1_767_225_705_000, true), "2026-01-01 00:01:45Z");
        assert!(same_day(1_767_225_600_000, 1_767_225_600_000 + 86_399_000));
        assert!(!same_day(1_767_225_600_000, 1_767_225_600_000 + 86_400_000));
    }
}
