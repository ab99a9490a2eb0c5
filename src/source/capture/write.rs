//! Writing a capture directory: the one writer behind `record`, `diagnose
//! --live --save` and the scenario and scale generators, so every capture
//! cptriage produces has the same layout:
//!
//! ```text
//! DIR/manifest.yaml             written atomically (a temporary file renamed over it)
//! DIR/<target>/<unix-ms>.prom   or .prom.gz
//! ```

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;

use super::manifest::Manifest;
use crate::store::Millis;

/// The name of the manifest of a capture directory.
pub const MANIFEST: &str = "manifest.yaml";

/// The temporary file a manifest is written to before it is renamed over
/// [`MANIFEST`].
pub const MANIFEST_TMP: &str = ".manifest.yaml.tmp";

/// A file of the capture could not be written.
#[derive(Debug, thiserror::Error)]
#[error("`{}`: cannot write: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes snapshots and the manifest into a capture directory. The directory
/// itself is created (or claimed) by the caller; the writer creates the
/// target directories. Snapshots may be written from several threads at once.
#[derive(Clone, Debug)]
pub struct CaptureWriter {
    dir: PathBuf,
    /// Gzip level of the snapshots; `None` writes plain `.prom` files.
    gzip: Option<flate2::Compression>,
}

impl CaptureWriter {
    /// A writer into `dir`; `gzip` chooses `.prom.gz` at that level, or plain
    /// `.prom`.
    pub fn new(dir: &Path, gzip: Option<flate2::Compression>) -> CaptureWriter {
        CaptureWriter {
            dir: dir.to_path_buf(),
            gzip,
        }
    }

    /// The capture directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the snapshot of `target` at `time` goes.
    pub fn snapshot_path(&self, target: &str, time: Millis) -> PathBuf {
        let ext = if self.gzip.is_some() { "prom.gz" } else { "prom" };
        self.dir.join(target).join(format!("{time}.{ext}"))
    }

    /// Creates the directory of each target (snapshot writes create a missing
    /// one too; creating them first lists every target even before its
    /// first snapshot).
    pub fn create_targets<'a>(&self, targets: impl IntoIterator<Item = &'a str>) -> Result<(), WriteError> {
        for t in targets {
            let d = self.dir.join(t);
            fs::create_dir_all(&d).map_err(at(&d))?;
        }
        Ok(())
    }

    /// Writes one snapshot's exposition text; returns the bytes on disk.
    pub fn write_snapshot(&self, target: &str, time: Millis, text: &[u8]) -> Result<u64, WriteError> {
        let path = self.snapshot_path(target, time);
        if let Some(d) = path.parent() {
            fs::create_dir_all(d).map_err(at(d))?;
        }
        let file = fs::File::create(&path).map_err(at(&path))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        match self.gzip {
            Some(level) => {
                let mut gz = GzEncoder::new(&mut w, level);
                gz.write_all(text).map_err(at(&path))?;
                gz.finish().map_err(at(&path))?;
            }
            None => w.write_all(text).map_err(at(&path))?,
        }
        w.flush().map_err(at(&path))?;
        let len = w.get_ref().metadata().map_err(at(&path))?.len();
        Ok(len)
    }

    /// Writes `manifest.yaml` atomically: a reader sees the previous manifest
    /// or this one, never a part.
    pub fn write_manifest(&self, m: &Manifest) -> Result<(), WriteError> {
        let path = self.dir.join(MANIFEST);
        let text = serde_yaml::to_string(m).map_err(|e| WriteError {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        let tmp = self.dir.join(MANIFEST_TMP);
        fs::write(&tmp, text).map_err(at(&tmp))?;
        fs::rename(&tmp, &path).map_err(at(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::capture::manifest::{self, ManifestTarget};
    use crate::source::Role;

    #[test]
    fn a_written_capture_reads_back() {
        let d = tempfile::tempdir().unwrap();
        for gzip in [None, Some(flate2::Compression::fast())] {
            let dir = d.path().join(format!("{gzip:?}"));
            fs::create_dir(&dir).unwrap();
            let w = CaptureWriter::new(&dir, gzip);
            w.create_targets(["etcd-0"]).unwrap();
            let text = b"# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n";
            let n = w.write_snapshot("etcd-0", 1_767_225_600_000, text).unwrap();
            assert!(n > 0);
            let m = manifest::Manifest::new(
                Some("2026-01-01T00:00:00Z".into()),
                Some("15s".into()),
                vec![ManifestTarget {
                    name: "etcd-0".into(),
                    role: Role::Etcd,
                    url: None,
                    version: None,
                    node: None,
                }],
                Vec::new(),
            );
            w.write_manifest(&m).unwrap();
            assert!(!dir.join(MANIFEST_TMP).exists());
            let back = manifest::parse(&fs::read_to_string(dir.join(MANIFEST)).unwrap()).unwrap();
            assert_eq!(back, m);
            let snap = w.snapshot_path("etcd-0", 1_767_225_600_000);
            assert_eq!(
                crate::source::ingest::read_maybe_gzip(&snap).unwrap(),
                text.to_vec()
            );
            assert_eq!(
                snap.extension().unwrap(),
                if gzip.is_some() { "gz" } else { "prom" }
            );
        }
    }

    #[test]
    fn a_write_error_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        let blocker = d.path().join("etcd-0");
        fs::write(&blocker, "a file where the target directory should be").unwrap();
        let w = CaptureWriter::new(d.path(), None);
        let e = w.write_snapshot("etcd-0", 1, b"up 1\n").unwrap_err();
        assert!(e.to_string().contains("etcd-0"), "{e}");
        assert!(e.to_string().contains("cannot write"), "{e}");
    }
}
