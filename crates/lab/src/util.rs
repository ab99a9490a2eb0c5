//! Small shared pieces: the lab's error type and wall-clock time.

use std::time::{SystemTime, UNIX_EPOCH};

/// A lab failure, with the message to print.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LabError {
    #[error("{0}")]
    Msg(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Truth(#[from] cptriage_lab::truth::TruthError),
}

impl LabError {
    pub(crate) fn msg(s: impl Into<String>) -> LabError {
        LabError::Msg(s.into())
    }
}

/// Wall-clock time, unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Unix ms as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Parses `90s`, `5m`, `1m30s`, `250ms`.
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let mut total_ms: u64 = 0;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num
            .parse()
            .map_err(|_| format!("`{s}`: a number must come before each unit"))?;
        num.clear();
        let unit_ms = match c {
            'h' => 3_600_000,
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            'm' => 60_000,
            's' => 1000,
            _ => return Err(format!("`{s}`: unknown unit `{c}` (use h, m, s, ms)")),
        };
        total_ms += n * unit_ms;
    }
    if !num.is_empty() {
        return Err(format!("`{s}`: a unit must follow `{num}` (h, m, s, ms)"));
    }
    Ok(std::time::Duration::from_millis(total_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("1m30s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert!(parse_duration("90").is_err());
        assert!(parse_duration("5x").is_err());
    }
}
