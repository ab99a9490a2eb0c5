//! The lab log: every line on stderr and in a log file, stamped with the wall
//! clock (RFC 3339, ms) so it lines up with the recording's snapshot times.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::util::{now_ms, rfc3339};

#[derive(Clone, Default)]
pub(crate) struct Log {
    files: Arc<Mutex<Vec<File>>>,
}

impl Log {
    /// Also writes to `path` (appending) from now on.
    pub(crate) fn add_file(&self, path: &Path) -> std::io::Result<()> {
        let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        self.files.lock().unwrap_or_else(|e| e.into_inner()).push(f);
        Ok(())
    }

    /// Stops writing to the most recently added file.
    pub(crate) fn pop_file(&self) {
        self.files.lock().unwrap_or_else(|e| e.into_inner()).pop();
    }

    /// Logs a line stamped now; returns the stamp (unix ms).
    pub(crate) fn say(&self, line: &str) -> i64 {
        let at = now_ms();
        self.say_at(at, line);
        at
    }

    /// Logs a line stamped `at` (unix ms).
    pub(crate) fn say_at(&self, at: i64, line: &str) {
        let text = format!("{} {line}\n", rfc3339(at));
        eprint!("{text}");
        for f in self.files.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            let _ = f.write_all(text.as_bytes());
        }
    }
}
