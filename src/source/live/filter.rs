//! The family filter used when recording: keeps the lines of the families a
//! [`Keep`] wants, verbatim (HELP, TYPE and sample lines), and drops the rest.
//! Which sample belongs to which family is decided by the exposition parser, so
//! a recorded file loads exactly as the same families of the original would.

use std::collections::HashSet;

use crate::source::dump::Keep;
use crate::source::expfmt::{self, SampleRef};

/// What filtering kept.
#[derive(Debug, Default, PartialEq)]
pub struct Filtered {
    pub bytes: Vec<u8>,
    pub families_seen: usize,
    pub families_kept: usize,
}

/// Keeps the families `keep` wants; `Keep::All` returns the input unchanged.
pub fn filter(input: &[u8], keep: &Keep) -> Result<Filtered, expfmt::ParseError> {
    if matches!(keep, Keep::All) {
        // Everything as received: only check that it is an exposition at all.
        let mut none = |_: &str| false;
        let report = expfmt::parse(input, &mut none, &mut |_: &SampleRef<'_>| {})?;
        return Ok(Filtered {
            bytes: input.to_vec(),
            families_seen: report.families.len(),
            families_kept: report.families.len(),
        });
    }
    let mut kept_lines: HashSet<usize> = HashSet::new();
    let mut wanted: HashSet<String> = HashSet::new();
    let mut keep_fn = |fam: &str| {
        let w = keep.wants(fam);
        if w {
            wanted.insert(fam.to_string());
        }
        w
    };
    let mut sink = |s: &SampleRef<'_>| {
        kept_lines.insert(s.line);
    };
    let report = expfmt::parse(input, &mut keep_fn, &mut sink)?;
    let mut out = Vec::with_capacity(input.len() / 4);
    for (i, line) in input.split(|b| *b == b'\n').enumerate() {
        let n = i + 1;
        let keep_line = if kept_lines.contains(&n) {
            true
        } else {
            meta_family(line).is_some_and(|f| wanted.contains(f))
        };
        if keep_line {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    Ok(Filtered {
        bytes: out,
        families_seen: report.families.len(),
        families_kept: wanted.len(),
    })
}

/// The family named by a `# HELP` or `# TYPE` line.
fn meta_family(line: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(line).ok()?.trim_start();
    let rest = s.strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("HELP").or_else(|| rest.strip_prefix("TYPE"))?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    rest.split_whitespace().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP a_seconds A histogram.
# TYPE a_seconds histogram
a_seconds_bucket{le=\"1\"} 1
a_seconds_bucket{le=\"+Inf\"} 2
a_seconds_sum 3
a_seconds_count 2
# HELP b_total B.
# TYPE b_total counter
b_total{x=\"y\"} 7
untyped_c 1
# HELP process_start_time_seconds Start.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
";

    #[test]
    fn keeps_wanted_families_verbatim() {
        let keep = Keep::Names(["a_seconds_bucket".to_string()].into());
        let f = filter(TEXT.as_bytes(), &keep).unwrap();
        let got = String::from_utf8(f.bytes).unwrap();
        assert_eq!(
            got,
            "# HELP a_seconds A histogram.
# TYPE a_seconds histogram
a_seconds_bucket{le=\"1\"} 1
a_seconds_bucket{le=\"+Inf\"} 2
a_seconds_sum 3
a_seconds_count 2
# HELP process_start_time_seconds Start.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
"
        );
        assert_eq!(f.families_kept, 2);
        assert!(f.families_seen >= 4);
    }

    #[test]
    fn all_is_unchanged() {
        let f = filter(TEXT.as_bytes(), &Keep::All).unwrap();
        assert_eq!(f.bytes, TEXT.as_bytes());
    }

    #[test]
    fn binary_input_is_an_error() {
        assert!(filter(b"\0\0\0\x01\x02", &Keep::Names(Default::default())).is_err());
    }
}
