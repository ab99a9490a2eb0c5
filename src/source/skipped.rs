//! The warnings of the file sources that read line by line (audit logs,
//! component logs) about what they skipped, worded alike; each source names
//! its own files and lines.

use std::fmt::Display;

use super::SourceWarning;

/// How many bad lines a warning names.
const SHOWN: usize = 3;

/// Where the warnings of a set of files come from: the one file's path, or
/// "N `noun` files".
pub(super) fn origin<T: Display>(mut files: impl ExactSizeIterator<Item = T>, noun: &str) -> String {
    match (files.len(), files.next()) {
        (1, Some(one)) => one.to_string(),
        (n, _) => format!("{n} {noun} files"),
    }
}

/// "`count` `lines` and were skipped, the rest analysed (first: …)", naming
/// the first bad lines (`(file:line, why)`); none when no line was skipped.
pub(super) fn bad_lines<'a>(
    origin: &str,
    count: u64,
    lines: &str,
    examples: impl Iterator<Item = (&'a str, &'a str)>,
) -> Option<SourceWarning> {
    if count == 0 {
        return None;
    }
    let first: Vec<String> = examples
        .take(SHOWN)
        .map(|(at, why)| format!("{at}: {why}"))
        .collect();
    Some(SourceWarning {
        origin: origin.to_string(),
        message: format!(
            "{count} {lines} and were skipped, the rest analysed (first: {})",
            first.join("; ")
        ),
    })
}

/// "`count` `what` outside the metrics' window were not used"; none when
/// `count` is zero.
pub(super) fn outside_window(origin: &str, count: u64, what: &str) -> Option<SourceWarning> {
    (count > 0).then(|| SourceWarning {
        origin: origin.to_string(),
        message: format!("{count} {what} outside the metrics' window were not used"),
    })
}
