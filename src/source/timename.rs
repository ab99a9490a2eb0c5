//! Times found in file names: unix seconds (integer or fractional), unix
//! milliseconds, or an RFC 3339 time (also in the file-system-safe forms with `-`
//! or `_` instead of `:`, and the compact `20260101T000000Z`).

use std::sync::OnceLock;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use regex::Regex;

use crate::store::Millis;

/// Earliest plausible capture time (2000-01-01) in ms: smaller numbers are not times.
const MIN_PLAUSIBLE_MS: i64 = 946_684_800_000;
/// Latest plausible capture time (2200-01-01) in ms.
const MAX_PLAUSIBLE_MS: i64 = 7_258_118_400_000;

/// A time found in a file name, and the name with the time taken out.
#[derive(Clone, Debug, PartialEq)]
pub struct NameTime {
    pub time: Millis,
    /// The rest of the stem (separators around the time trimmed), e.g. `etcd-0`
    /// for `etcd-0_2026-01-01T00-00-00Z`; empty when the stem was only a time.
    pub rest: String,
}

fn rfc3339_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?x)
            (?P<y>\d{4})-?(?P<mo>\d{2})-?(?P<d>\d{2})
            [Tt_\ ]
            (?P<h>\d{2})[:\-_]?(?P<mi>\d{2})[:\-_]?(?P<s>\d{2})
            (?:[.,](?P<frac>\d{1,9}))?
            (?P<tz>[Zz]|[+\-]\d{2}[:\-_]?\d{2})?",
        )
        .expect("static regex")
    })
}

fn unix_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?:^|[^0-9])(?P<n>\d{10,13})(?:\.(?P<f>\d{1,9}))?(?:$|[^0-9])").expect("static regex")
    })
}

/// Strips `.gz`, then `.prom`, `.txt`, `.metrics`, `.om` from a file name.
pub fn stem(file_name: &str) -> &str {
    let s = file_name.strip_suffix(".gz").unwrap_or(file_name);
    for ext in [".prom", ".txt", ".metrics", ".om", ".openmetrics"] {
        if let Some(x) = s.strip_suffix(ext) {
            return x;
        }
    }
    s
}

/// Finds a time in a file stem.
pub fn find_time(stem: &str) -> Option<NameTime> {
    if let Some(c) = rfc3339_re().captures(stem) {
        if let Some(t) = rfc3339_parts(&c) {
            let m = c.get(0).map(|m| m.range()).unwrap_or(0..0);
            return Some(NameTime {
                time: t,
                rest: join_rest(&stem[..m.start], &stem[m.end..]),
            });
        }
    }
    if let Some(c) = unix_re().captures(stem) {
        let n = c.name("n")?;
        let digits = n.as_str();
        let frac = c.name("f").map(|f| f.as_str());
        let int: i64 = digits.parse().ok()?;
        let ms = if digits.len() >= 12 {
            int
        } else {
            let f = frac
                .map(|f| format!("0.{f}").parse::<f64>().unwrap_or(0.0))
                .unwrap_or(0.0);
            int * 1000 + (f * 1000.0).round() as i64
        };
        if !(MIN_PLAUSIBLE_MS..MAX_PLAUSIBLE_MS).contains(&ms) {
            return None;
        }
        let end = c.name("f").map(|f| f.end()).unwrap_or(n.end());
        return Some(NameTime {
            time: ms,
            rest: join_rest(&stem[..n.start()], &stem[end..]),
        });
    }
    None
}

fn join_rest(a: &str, b: &str) -> String {
    let seps: &[char] = &['-', '_', '.', ' ', '@'];
    let a = a.trim_end_matches(seps);
    let b = b.trim_start_matches(seps);
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}-{b}"),
    }
}

fn rfc3339_parts(c: &regex::Captures<'_>) -> Option<Millis> {
    let num = |k: &str| c.name(k).and_then(|m| m.as_str().parse::<u32>().ok());
    let date = NaiveDate::from_ymd_opt(num("y")? as i32, num("mo")?, num("d")?)?;
    let nanos = match c.name("frac") {
        Some(f) => {
            let s = f.as_str();
            let v: u32 = s.parse().ok()?;
            v * 10u32.pow(9 - s.len() as u32)
        }
        None => 0,
    };
    let time = NaiveTime::from_hms_nano_opt(num("h")?, num("mi")?, num("s")?, nanos)?;
    let naive = NaiveDateTime::new(date, time);
    let offset_secs: i64 = match c.name("tz").map(|m| m.as_str()) {
        None | Some("Z" | "z") => 0,
        Some(tz) => {
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            let d: String = tz.chars().filter(|ch| ch.is_ascii_digit()).collect();
            let h: i64 = d.get(0..2)?.parse().ok()?;
            let m: i64 = d.get(2..4)?.parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    let utc: DateTime<Utc> = naive.and_utc();
    let ms = utc.timestamp_millis() - offset_secs * 1000;
    (MIN_PLAUSIBLE_MS..MAX_PLAUSIBLE_MS).contains(&ms).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Option<(Millis, String)> {
        find_time(s).map(|n| (n.time, n.rest))
    }

    #[test]
    fn unix_seconds_millis_and_fractions() {
        assert_eq!(t("1767225600"), Some((1_767_225_600_000, String::new())));
        assert_eq!(t("1767225600123"), Some((1_767_225_600_123, String::new())));
        assert_eq!(t("1767225600.5"), Some((1_767_225_600_500, String::new())));
        assert_eq!(t("etcd-0_1767225600"), Some((1_767_225_600_000, "etcd-0".into())));
    }

    #[test]
    fn rfc3339_forms() {
        let want = 1_767_225_600_000;
        assert_eq!(t("2026-01-01T00:00:00Z").map(|x| x.0), Some(want));
        assert_eq!(t("2026-01-01T00-00-00Z").map(|x| x.0), Some(want));
        assert_eq!(t("20260101T000000Z").map(|x| x.0), Some(want));
        assert_eq!(t("2026-01-01T01:00:00+01:00").map(|x| x.0), Some(want));
        assert_eq!(t("2026-01-01T00:00:00.250Z").map(|x| x.0), Some(want + 250));
        assert_eq!(
            t("apiserver-a_2026-01-01T00-00-00Z"),
            Some((want, "apiserver-a".to_string()))
        );
    }

    #[test]
    fn non_times_are_not_times() {
        assert_eq!(t("apiserver"), None);
        assert_eq!(t("v1.35.0"), None);
        assert_eq!(t("12345"), None);
        assert_eq!(t("2026-13-45T99:00:00Z"), None);
    }

    #[test]
    fn stems() {
        assert_eq!(stem("1767225600000.prom.gz"), "1767225600000");
        assert_eq!(stem("a.prom"), "a");
        assert_eq!(stem("metrics.txt"), "metrics");
        assert_eq!(stem("plain"), "plain");
    }
}
