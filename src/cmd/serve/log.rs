//! One structured line per event on stderr, in logfmt:
//! `ts=2026-01-01T00:00:00.000Z level=info msg=request method=POST …`.
//! Values are cut, quoted when needed, stripped of control characters and
//! scrubbed of anything that looks like a credential.

use std::io::Write;

/// Longest value written.
const MAX_VALUE: usize = 300;

/// Writes one line: `level`, `msg`, then the fields.
pub(crate) fn line(level: &str, msg: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    let mut s = format(level, msg, fields);
    s.push('\n');
    // One write per line, so that lines of concurrent events do not mix.
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

pub(crate) fn format(level: &str, msg: &str, fields: &[(&str, &dyn std::fmt::Display)]) -> String {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut s = format!("ts={now} level={level} msg={}", value(msg));
    for (k, v) in fields {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        s.push_str(&value(&v.to_string()));
    }
    s
}

/// A value as logfmt writes it.
fn value(v: &str) -> String {
    let v = crate::secret::scrub(v);
    let v: String = super::payload::clip(&v, MAX_VALUE)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if !v.is_empty() && !v.contains([' ', '"', '=', '\\']) {
        return v;
    }
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_cut_and_single_line() {
        let long = "x".repeat(1000);
        let s = format(
            "info",
            "request",
            &[
                ("path", &"/a b\n\"c\""),
                ("n", &3),
                ("long", &long),
                ("empty", &""),
            ],
        );
        assert!(s.contains(r#"msg=request path="/a b \"c\"" n=3"#), "{s}");
        assert!(s.contains(r#" empty="""#), "{s}");
        assert!(!s.contains('\n'));
        assert!(s.len() < 500);
    }
}
