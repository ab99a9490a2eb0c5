//! The family filter used when recording: keeps the lines of the families a
//! [`Keep`] wants, verbatim (HELP, TYPE and sample lines), and drops the rest.
//! Which sample belongs to which family is decided by the exposition parser, so
//! a recorded file loads exactly as the same families of the original would.

use std::cell::RefCell;
use std::collections::HashSet;
use std::io::Read;

use crate::source::expfmt::{self, SampleRef};
use crate::source::ingest::{Keep, ALWAYS_KEEP};

/// What filtering kept.
#[derive(Debug, Default, PartialEq)]
pub struct Filtered {
    pub bytes: Vec<u8>,
    pub families_seen: usize,
    pub families_kept: usize,
}

/// Keeps the families `keep` wants; `Keep::All` returns the input unchanged.
pub fn filter(input: &[u8], keep: &Keep) -> Result<Filtered, expfmt::ParseError> {
    filter_reader(&mut &input[..], keep, &mut |_| {}, &mut |_, _| Ok(())).map_err(|e| match e {
        expfmt::StreamError::Parse(p) => p,
        // A slice cannot fail to read.
        expfmt::StreamError::Read(e) => expfmt::ParseError {
            line: 0,
            message: e.to_string(),
        },
    })
}

/// [`filter`] over a stream (a `/metrics` response as it arrives): only a
/// block of lines and the kept text are held, never the whole input, so a
/// response of junk families costs no memory. Every kept sample is also
/// shown to `tap` (with `Keep::All`, only those of [`ALWAYS_KEEP`]). After
/// each block, `grow(block bytes, bytes the kept text's allocation grew)` may refuse to go on
/// (a memory budget): its error stops the filter as a read error.
pub fn filter_reader(
    r: &mut dyn Read,
    keep: &Keep,
    tap: &mut dyn FnMut(&SampleRef<'_>),
    grow: &mut dyn FnMut(usize, usize) -> std::io::Result<()>,
) -> Result<Filtered, expfmt::StreamError> {
    let all = matches!(keep, Keep::All);
    let wanted: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    // Lines of kept samples in the block being parsed (increasing).
    let kept_lines: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    let mut out = Vec::new();
    let mut keep_fn = |fam: &str| {
        if all {
            return ALWAYS_KEEP.contains(&fam);
        }
        let w = keep.wants(fam);
        if w {
            wanted.borrow_mut().insert(fam.to_string());
        }
        w
    };
    let mut sink = |s: &SampleRef<'_>| {
        if !all {
            kept_lines.borrow_mut().push(s.line);
        }
        tap(s);
    };
    let mut block = |text: &[u8], first: usize| {
        // What the kept text costs is its allocation, not its length.
        let before = out.capacity();
        if all {
            out.extend_from_slice(text);
        } else {
            let mut lines = kept_lines.borrow_mut();
            let wanted = wanted.borrow();
            let mut k = 0;
            for (i, line) in text.split(|b| *b == b'\n').enumerate() {
                let n = first + i;
                while k < lines.len() && lines[k] < n {
                    k += 1;
                }
                let keep_line = (k < lines.len() && lines[k] == n)
                    || meta_family(line).is_some_and(|f| wanted.contains(f));
                if keep_line {
                    out.extend_from_slice(line);
                    out.push(b'\n');
                }
            }
            lines.clear();
        }
        grow(text.len(), out.capacity() - before)
    };
    let (report, _) = expfmt::parse_reader_blocks(r, &mut keep_fn, &mut sink, &mut block)?;
    let families_kept = if all {
        report.families.len()
    } else {
        wanted.borrow().len()
    };
    Ok(Filtered {
        bytes: out,
        families_seen: report.families.len(),
        families_kept,
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
    fn the_stream_filter_keeps_what_the_whole_filter_keeps() {
        let keep = Keep::Names(["b_total".to_string()].into());
        let whole = filter(TEXT.as_bytes(), &keep).unwrap();
        for chunk in [1, 7, 64] {
            let mut r = Chunked(TEXT.as_bytes(), chunk);
            let mut seen = Vec::new();
            let mut blocks = 0;
            let f = filter_reader(
                &mut r,
                &keep,
                &mut |s| seen.push(s.name.to_string()),
                &mut |_, _| {
                    blocks += 1;
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(f, whole);
            assert!(seen.contains(&"b_total".to_string()));
            assert!(seen.contains(&"process_start_time_seconds".to_string()));
            assert!(blocks >= 1);
        }
        let mut refuse = |_: usize, _: usize| Err(std::io::Error::other("over budget"));
        let e = filter_reader(&mut TEXT.as_bytes(), &keep, &mut |_| {}, &mut refuse).unwrap_err();
        assert!(e.to_string().contains("over budget"), "{e}");
    }

    /// A reader that returns at most `n` bytes per read.
    struct Chunked<'a>(&'a [u8], usize);
    impl Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn binary_input_is_an_error() {
        assert!(filter(b"\0\0\0\x01\x02", &Keep::Names(Default::default())).is_err());
    }
}
