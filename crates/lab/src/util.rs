//! Small shared pieces: the lab's error type and wall-clock time.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use cptriage_lab::interval::parse_duration;

/// A lab failure, with the message to print.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LabError {
    #[error("{0}")]
    Msg(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Truth(#[from] cptriage_lab::truth::TruthError),
    #[error(transparent)]
    Subsample(#[from] cptriage_lab::interval::SubsampleError),
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
