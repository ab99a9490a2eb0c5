//! Snapshot files: rendered output pinned byte for byte in a folder of
//! `testdata/snapshots/`. A difference fails with the first differing line;
//! `CPTRIAGE_BLESS=1` rewrites the files (and removes those nothing renders
//! any more) after a deliberate change.

use std::path::Path;

/// Whether this run rewrites snapshots (`CPTRIAGE_BLESS` set).
pub(crate) fn blessing() -> bool {
    std::env::var_os("CPTRIAGE_BLESS").is_some()
}

/// Where two texts first differ, for a failure message.
pub(crate) fn first_diff(old: &str, new: &str) -> String {
    for (i, (a, b)) in old.lines().zip(new.lines()).enumerate() {
        if a != b {
            return format!("line {}:\n  pinned: {a}\n  now:    {b}", i + 1);
        }
    }
    format!(
        "{} lines pinned, {} now",
        old.lines().count(),
        new.lines().count()
    )
}

/// Compares (or, when blessing, writes) every `(file name, text)` in `dir`;
/// files of `dir` with one of `exts` that no entry names are stale. A file
/// name ending in `.gz` is kept gzip-compressed (large JSON). Returns the
/// problems found.
pub(crate) fn check_dir(dir: &Path, exts: &[&str], entries: &[(String, String)]) -> Vec<String> {
    let bless = blessing();
    let mut problems = Vec::new();
    for (file, text) in entries {
        let path = dir.join(file);
        let gz = file.ends_with(".gz");
        if bless {
            std::fs::create_dir_all(dir).unwrap();
            if gz {
                use std::io::Write;
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                e.write_all(text.as_bytes()).unwrap();
                std::fs::write(&path, e.finish().unwrap()).unwrap();
            } else {
                std::fs::write(&path, text).unwrap();
            }
            continue;
        }
        let old = if gz {
            cptriage::source::ingest::read_maybe_gzip(&path)
                .map_err(std::io::Error::other)
                .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
        } else {
            std::fs::read_to_string(&path)
        };
        match old {
            Ok(old) if &old == text => {}
            Ok(old) => problems.push(format!(
                "{file} changed ({}); now:\n{text}",
                first_diff(&old, text)
            )),
            Err(e) => problems.push(format!("{file}: {e}; now:\n{text}")),
        }
    }
    for e in std::fs::read_dir(dir).unwrap() {
        let f = e.unwrap().file_name().to_string_lossy().to_string();
        if exts.iter().any(|x| f.ends_with(x)) && !entries.iter().any(|(n, _)| *n == f) {
            if bless {
                std::fs::remove_file(dir.join(&f)).unwrap();
            } else {
                problems.push(format!("{f}: nothing renders it any more"));
            }
        }
    }
    problems
}
