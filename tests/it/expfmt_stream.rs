//! The streaming parser (`parse_reader`, which the dump loader uses so that a
//! 20 MB snapshot is never held whole) against the whole-buffer parser: for the
//! real captures, the bad-input corpus, the parser's fuzz corpus and edge cases
//! built to put chunk ends inside lines, histogram series, BOMs and CRLFs, both
//! deliver the same samples in the same order, ask `keep` about the same
//! families, and return the same report, whatever the chunk size.

use crate::support::realcap;

use std::path::{Path, PathBuf};

use cptriage::source::expfmt::{parse, parse_reader_chunked, SampleRef, StreamError, STREAM_CHUNK};

/// One delivered sample, owned, with the value's bits (NaN payloads matter).
#[derive(Debug, PartialEq)]
struct Seen {
    family: String,
    name: String,
    labels: Vec<(String, String)>,
    value: u64,
    ts: Option<i64>,
    line: usize,
}

fn seen(s: &SampleRef<'_>) -> Seen {
    Seen {
        family: s.family.to_string(),
        name: s.name.to_string(),
        labels: s
            .labels
            .iter()
            .map(|l| (l.name.to_string(), l.value.to_string()))
            .collect(),
        value: s.value.to_bits(),
        ts: s.timestamp_ms,
        line: s.line,
    }
}

/// Keeps every family except those whose name contains `go_` (so that the
/// skipping path runs too); records what it was asked.
fn keep_fn(asked: &mut Vec<String>) -> impl FnMut(&str) -> bool + '_ {
    |name: &str| {
        asked.push(name.to_string());
        !name.contains("go_")
    }
}

/// Reads at most `n` bytes per call, like a pipe or a decompressor would.
struct Trickle<'a> {
    data: &'a [u8],
    n: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.n.min(buf.len()).min(self.data.len());
        buf[..k].copy_from_slice(&self.data[..k]);
        self.data = &self.data[k..];
        Ok(k)
    }
}

fn check(origin: &str, data: &[u8], chunks: &[usize]) {
    check_with(origin, data, chunks, true);
}

/// `trickle`: also feed the input 3 bytes per read (slow on megabytes).
fn check_with(origin: &str, data: &[u8], chunks: &[usize], trickle3: bool) {
    let (mut asked_whole, mut got_whole) = (Vec::new(), Vec::new());
    let whole = parse(data, &mut keep_fn(&mut asked_whole), &mut |s: &SampleRef<'_>| {
        got_whole.push(seen(s));
    });
    for &chunk in chunks {
        for trickle in [chunk, 3] {
            if trickle == 3 && !trickle3 {
                continue;
            }
            let (mut asked, mut got) = (Vec::new(), Vec::new());
            let mut r = Trickle { data, n: trickle };
            let streamed = parse_reader_chunked(
                &mut r,
                &mut keep_fn(&mut asked),
                &mut |s: &SampleRef<'_>| got.push(seen(s)),
                chunk,
            );
            let what = format!("{origin}, chunk {chunk}, reads of {trickle} bytes");
            match (&whole, streamed) {
                (Ok(w), Ok((s, total))) => {
                    assert_eq!(w, &s, "{what}: report differs");
                    assert_eq!(total, data.len() as u64, "{what}: bytes read");
                }
                (Err(w), Err(StreamError::Parse(s))) => assert_eq!(w, &s, "{what}: error differs"),
                (w, s) => panic!("{what}: whole-buffer {w:?}, streamed {s:?}"),
            }
            assert_eq!(asked_whole, asked, "{what}: keep() calls differ");
            assert_eq!(got_whole.len(), got.len(), "{what}: sample count differs");
            for (a, b) in got_whole.iter().zip(&got) {
                assert_eq!(a, b, "{what}");
            }
        }
    }
}

fn files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            files_in(&p, out);
        } else if md.is_file() {
            out.push(p);
        }
    }
}

#[test]
fn real_captures_stream_exactly_as_parsed_whole() {
    let files = realcap::files();
    assert!(
        files.len() >= 30,
        "expected the real captures in {}",
        realcap::dir().display()
    );
    for (i, (_, f)) in files.iter().enumerate() {
        let data = realcap::read_path(f);
        // Small chunks on a few files (slow on megabytes), realistic ones on all.
        let chunks: &[usize] = if i % 8 == 0 {
            &[997, STREAM_CHUNK]
        } else {
            &[65_536]
        };
        check_with(&f.display().to_string(), &data, chunks, false);
    }
}

#[test]
fn bad_inputs_and_fuzz_corpus_stream_exactly_as_parsed_whole() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    files_in(&root.join("testdata/bad"), &mut files);
    files_in(&root.join("fuzz/corpus/expfmt"), &mut files);
    files.sort();
    let mut n = 0;
    for f in &files {
        let Ok(data) = std::fs::read(f) else { continue };
        if data.len() > 4 << 20 {
            continue;
        }
        if data.len() < 16 << 10 {
            check(&f.display().to_string(), &data, &[1, 2, 7, 64, 8192]);
        } else {
            check_with(&f.display().to_string(), &data, &[61, 8192, STREAM_CHUNK], false);
        }
        n += 1;
    }
    assert!(n > 300, "only {n} inputs found");
}

#[test]
fn chunk_ends_inside_histograms_boms_crlf_and_long_lines() {
    let mut hist = String::from("\u{feff}# HELP h A histogram.\r\n# TYPE h histogram\r\n");
    for s in 0..40 {
        // Every third series lacks +Inf; every fifth has buckets out of order.
        for (i, le) in ["0.1", "0.5", "1", "+Inf"].iter().enumerate() {
            if s % 3 == 0 && *le == "+Inf" {
                continue;
            }
            let le = if s % 5 == 0 && i == 1 { "0.05" } else { le };
            hist.push_str(&format!(
                "h_bucket{{res=\"r{s}\",le=\"{le}\"}} {}\r\n",
                i * 10 + s
            ));
        }
        hist.push_str(&format!(
            "h_sum{{res=\"r{s}\"}} 1.5\nh_count{{res=\"r{s}\"}} {s}\n"
        ));
    }
    hist.push_str("go_goroutines 12\n");
    hist.push_str(&format!(
        "long{{v=\"{}\"}} 1 1700000000000\n",
        "x".repeat(300_000)
    ));
    hist.push_str("c_total NaN\nc_total -1\nlast_without_newline 3");
    check("synthetic", hist.as_bytes(), &[1, 5, 17, 100, 4096, STREAM_CHUNK]);
    check("empty", b"", &[1, 64]);
    check("only a BOM", b"\xEF\xBB\xBF", &[1, 2, 64]);
    let mut binary = b"up 1\n".to_vec();
    binary.extend(std::iter::repeat_n(0u8, 20_000));
    check("binary", &binary, &[1, 100, 8192]);
}

#[test]
fn a_read_error_is_reported_even_after_garbage() {
    struct Failing(usize);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "corrupt deflate stream",
                ));
            }
            let k = self.0.min(buf.len());
            buf[..k].fill(0);
            self.0 -= k;
            Ok(k)
        }
    }
    let mut keep = |_: &str| true;
    let r = parse_reader_chunked(&mut Failing(20_000), &mut keep, &mut |_: &SampleRef<'_>| {}, 4096);
    match r {
        Err(StreamError::Read(e)) => assert!(e.to_string().contains("corrupt deflate"), "{e}"),
        other => panic!("expected the read error, got {other:?}"),
    }
}
