//! Prometheus-style durations (`15s`, `6m30s`, `1h`, `500ms`) as used in
//! scenario specs and capture manifests.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use cptriage::store::Millis;

/// A non-negative duration in milliseconds, written the Prometheus way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PromDuration(pub Millis);

const UNITS: &[(&str, Millis)] = &[
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
];

impl PromDuration {
    /// Parses `1h30m`, `15s`, `500ms`, `0`. Units must be in decreasing order
    /// and each used once, as in Prometheus.
    pub fn parse(s: &str) -> Result<PromDuration, String> {
        let bad = || format!("invalid duration `{s}` (expected e.g. `15s`, `6m30s`, `1h`)");
        if s == "0" {
            return Ok(PromDuration(0));
        }
        cptriage::timefmt::parse_duration(s)
            .map(PromDuration)
            .map_err(|_| bad())
    }

    pub fn millis(self) -> Millis {
        self.0
    }

    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

impl fmt::Display for PromDuration {
    /// The shortest Prometheus spelling: `15s`, `6m30s`, `1h`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        if rest == 0 {
            return f.write_str("0s");
        }
        for (u, ms) in UNITS {
            // Years and weeks read oddly in manifests; stop at days.
            if *u == "y" || *u == "w" {
                continue;
            }
            if rest >= *ms {
                write!(f, "{}{}", rest / ms, u)?;
                rest %= ms;
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for PromDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PromDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as `15s`, `6m30s` or `1h`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PromDuration, E> {
                PromDuration::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PromDuration, E> {
                if v == 0 {
                    Ok(PromDuration(0))
                } else {
                    Err(E::custom(format!(
                        "duration `{v}` has no unit (write e.g. `{v}s`)"
                    )))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PromDuration, E> {
                if v == 0 {
                    Ok(PromDuration(0))
                } else {
                    Err(E::custom(format!(
                        "duration `{v}` has no unit (write e.g. `{v}s`)"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display_round_trip() {
        for (s, ms) in [
            ("15s", 15_000),
            ("6m30s", 390_000),
            ("1h", 3_600_000),
            ("500ms", 500),
            ("0", 0),
        ] {
            assert_eq!(PromDuration::parse(s), Ok(PromDuration(ms)), "{s}");
        }
        assert_eq!(PromDuration(390_000).to_string(), "6m30s");
        assert_eq!(PromDuration(15_000).to_string(), "15s");
        assert_eq!(PromDuration(90_061_500).to_string(), "1d1h1m1s500ms");
        assert_eq!(PromDuration(0).to_string(), "0s");
    }

    #[test]
    fn rejects_malformed_durations() {
        for s in ["", "5", "m", "5x", "30s1m", "1.5m", "-5s", "5m5m"] {
            assert!(PromDuration::parse(s).is_err(), "{s} should be rejected");
        }
    }
}
