//! `--reports DIR`: each judged triage as `ID.json` and `ID.html`, never
//! overwriting a file, with `--keep` applied to the directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::store::{is_id, Retention};

/// Why the reports directory cannot be used, or a report not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReportsError {
    #[error("--reports {}: cannot create the directory: {source}", .dir.display())]
    Create { dir: PathBuf, source: std::io::Error },
    #[error("--reports {}: cannot write there: {source}", .dir.display())]
    NotWritable { dir: PathBuf, source: std::io::Error },
    #[error("{}: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// The reports directory.
pub(crate) struct Reports {
    dir: PathBuf,
    keep: Retention,
}

impl Reports {
    /// Opens (creates) the directory; an error names it.
    pub(crate) fn open(dir: &Path, keep: Retention) -> Result<Reports, ReportsError> {
        let at = |dir: &Path| dir.to_path_buf();
        std::fs::create_dir_all(dir).map_err(|source| ReportsError::Create { dir: at(dir), source })?;
        let probe = dir.join(".cptriage-write-test");
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|source| ReportsError::NotWritable { dir: at(dir), source })?;
        Ok(Reports {
            dir: dir.to_path_buf(),
            keep,
        })
    }

    /// Writes `ID.json` and `ID.html`; an existing file is left as it is
    /// (an error).
    pub(crate) fn write(&self, id: &str, json: &str, html: &str) -> Result<(), ReportsError> {
        for (ext, text) in [("json", json), ("html", html)] {
            let p = self.dir.join(format!("{id}.{ext}"));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
                .map_err(|source| ReportsError::Write {
                    path: p.clone(),
                    source,
                })?;
            f.write_all(text.as_bytes())
                .and_then(|()| f.sync_data())
                .map_err(|source| ReportsError::Write {
                    path: p.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// A report read back, when it is still there.
    pub(crate) fn read(&self, id: &str, ext: &str) -> Option<String> {
        if !is_id(id) {
            return None;
        }
        std::fs::read_to_string(self.dir.join(format!("{id}.{ext}"))).ok()
    }

    /// Removes the reports `--keep` does not keep; returns how many files.
    /// Only files named as reports are touched.
    pub(crate) fn prune(&self, now_ms: i64) -> usize {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut ids: Vec<String> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(".json")?;
                is_id(id).then(|| id.to_string())
            })
            .collect();
        ids.sort_unstable();
        let drop: Vec<&String> = match self.keep {
            Retention::Count(n) => ids.iter().take(ids.len().saturating_sub(n)).collect(),
            Retention::Age(age) => ids
                .iter()
                .filter(|id| id_time(id).is_some_and(|t| now_ms - t > age))
                .collect(),
        };
        let mut removed = 0;
        for id in drop {
            for ext in ["json", "html"] {
                if std::fs::remove_file(self.dir.join(format!("{id}.{ext}"))).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}

/// The time (ms) an id was made at.
fn id_time(id: &str) -> Option<i64> {
    i64::from_str_radix(id.get(..12)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_overwrites_and_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let r = Reports::open(dir.path(), Retention::Count(2)).unwrap();
        let ids = ["0000000000010000", "0000000000020000", "0000000000030000"];
        for id in ids {
            r.write(id, "{}", "<html></html>").unwrap();
        }
        assert!(r.write(ids[0], "{}", "").is_err());
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        assert_eq!(r.prune(0), 2);
        assert!(r.read(ids[0], "json").is_none());
        assert_eq!(r.read(ids[2], "html").as_deref(), Some("<html></html>"));
        assert!(dir.path().join("notes.txt").exists());
        assert!(r.read("../notes", "txt").is_none());
        let r = Reports::open(dir.path(), Retention::Age(7)).unwrap();
        assert_eq!(r.prune(10), 2);
        assert!(r.read(ids[1], "json").is_none());
        assert!(r.read(ids[2], "json").is_some());
    }
}
