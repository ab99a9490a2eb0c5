//! Entry points shared by the fuzz targets (`fuzz/`) and the corpus replay test
//! (`tests/fuzz_corpus.rs`): each takes arbitrary bytes, drives one input-facing
//! part of cptriage the way the binary does, and returns what it produced. None
//! of them may panic, hang or exhaust memory, whatever the bytes.
//!
//! Not a stable API: it exists for robustness testing only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use cptriage::rules::engine::{self, Options};
use cptriage::rules::lint;
use cptriage::rules::load::{self, Diagnostic, RuleSet};
use cptriage::source::capture::{self, DumpArg};
use cptriage::source::expfmt::{self, ParseError, ParseReport};
use cptriage::source::ingest::Keep;
use cptriage::source::live::kubeconfig::{self, KubeconfigOptions};

/// Separates the files of a [`capture`] input: the first part is
/// `manifest.yaml`, every later part is `PATH\nCONTENT`.
pub const FILE_SEPARATOR: &[u8] = b"\n~~~ ";

/// Most files one [`capture`] input is split into.
const MAX_FILES: usize = 16;

/// Parses `data` as a text exposition: keeping every family, keeping every
/// other family (which exercises the skipping path), and streamed in chunks of
/// 1 to 64 bytes (the size taken from the first byte) as the dump loader
/// streams files. Panics if the streamed parse delivers other samples or
/// another report than the whole-buffer parse: that is a bug to find.
pub fn expfmt(data: &[u8]) -> Result<ParseReport, ParseError> {
    let mut n = 0usize;
    let mut keep_some = |_: &str| {
        n += 1;
        n.is_multiple_of(2)
    };
    let mut count = 0usize;
    let mut sink = |s: &expfmt::SampleRef<'_>| {
        count += s.labels.len() + usize::from(s.value.is_nan());
    };
    let _ = expfmt::parse(data, &mut keep_some, &mut sink);
    let mut whole_samples = Vec::new();
    let whole = expfmt::parse(data, &mut |_| true, &mut |s: &expfmt::SampleRef<'_>| {
        whole_samples.push(owned_sample(s));
    });
    let chunk = 1 + usize::from(data.first().copied().unwrap_or(0) % 64);
    let mut streamed_samples = Vec::new();
    let streamed = expfmt::parse_reader_chunked(
        &mut &data[..],
        &mut |_| true,
        &mut |s: &expfmt::SampleRef<'_>| streamed_samples.push(owned_sample(s)),
        chunk,
    );
    match (&whole, streamed) {
        (Ok(w), Ok((s, total))) => {
            assert_eq!(w, &s, "streamed report differs (chunk {chunk})");
            assert_eq!(total, data.len() as u64, "streamed byte count differs");
        }
        (Err(w), Err(expfmt::StreamError::Parse(s))) => assert_eq!(w, &s, "streamed error differs"),
        (w, s) => panic!("whole-buffer parse gave {w:?}, streamed {s:?} (chunk {chunk})"),
    }
    assert!(
        whole_samples == streamed_samples,
        "streamed samples differ (chunk {chunk})"
    );
    whole
}

/// A delivered sample as comparable owned data (values by bits).
type OwnedSample = (String, String, Vec<(String, String)>, u64, Option<i64>, usize);

fn owned_sample(s: &expfmt::SampleRef<'_>) -> OwnedSample {
    (
        s.family.to_string(),
        s.name.to_string(),
        s.labels
            .iter()
            .map(|l| (l.name.to_string(), l.value.to_string()))
            .collect(),
        s.value.to_bits(),
        s.timestamp_ms,
        s.line,
    )
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(kind: &str) -> std::io::Result<TempDir> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "cptriage-fuzz-{kind}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A relative path made of safe components (at most two), or `None`.
fn safe_relative(raw: &[u8]) -> Option<PathBuf> {
    let text = String::from_utf8_lossy(raw);
    let parts: Vec<String> = text
        .split('/')
        .map(|c| {
            c.chars()
                .filter(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-'))
                .take(64)
                .collect::<String>()
        })
        .filter(|c| !c.is_empty() && c != "." && c != "..")
        .take(2)
        .collect();
    if parts.is_empty() || (parts.len() == 1 && parts[0] == "manifest.yaml") {
        return None;
    }
    Some(parts.iter().collect())
}

/// What [`capture`] produced.
#[derive(Debug)]
pub enum CaptureOutcome {
    /// The loader refused the capture (the error message).
    Refused(String),
    /// The capture loaded and was diagnosed; the JSON report and the warnings.
    Diagnosed { json: String, warnings: usize },
    /// The capture loaded but the engine refused to diagnose it.
    NotDiagnosed(String),
}

/// Writes `data` as a capture directory (see [`FILE_SEPARATOR`]), loads it as
/// `diagnose --dump DIR` does and, when it loads, diagnoses it with the shipped
/// rules and renders the JSON report.
pub fn capture(data: &[u8]) -> std::io::Result<CaptureOutcome> {
    let dir = TempDir::new("capture")?;
    let mut parts = split(data, FILE_SEPARATOR);
    let manifest = parts.next().unwrap_or_default();
    std::fs::write(dir.0.join("manifest.yaml"), manifest)?;
    for part in parts.take(MAX_FILES) {
        let (name, content) = match memchr::memchr(b'\n', part) {
            Some(i) => (&part[..i], &part[i + 1..]),
            None => (part, &b""[..]),
        };
        let Some(rel) = safe_relative(name) else {
            continue;
        };
        let path = dir.0.join(&rel);
        if let Some(parent) = path.parent() {
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        if path.is_dir() {
            continue;
        }
        let _ = std::fs::write(&path, content);
    }
    let rules = match RuleSet::default_rules() {
        Ok(r) => r,
        Err(e) => return Ok(CaptureOutcome::Refused(e.to_string())),
    };
    let keep = Keep::Names(rules.referenced_metrics());
    let arg = DumpArg {
        name: None,
        role: None,
        path: dir.0.clone(),
    };
    let ds = match capture::load(&[arg], &keep) {
        Ok(ds) => ds,
        Err(e) => return Ok(CaptureOutcome::Refused(e.to_string())),
    };
    let report = match engine::diagnose(&rules, &ds, &Options::default()) {
        Ok(r) => r,
        Err(e) => return Ok(CaptureOutcome::NotDiagnosed(e.to_string())),
    };
    let mut json = Vec::new();
    cptriage::report::json::render(&report, &mut json)?;
    Ok(CaptureOutcome::Diagnosed {
        json: String::from_utf8_lossy(&json).into_owned(),
        warnings: ds.warnings.len(),
    })
}

fn split<'a>(data: &'a [u8], sep: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr::memmem::find(r, sep) {
            Some(i) => {
                rest = Some(&r[i + sep.len()..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// Loads `data` as a rule file (`--rules`) and runs `rules check` on it; when it
/// loads, renders the tree. Returns the loaded set (if any) and every diagnostic.
pub fn rules(data: &[u8]) -> (Option<RuleSet>, Vec<Diagnostic>) {
    let Ok(text) = std::str::from_utf8(data) else {
        return (None, Vec::new());
    };
    let loaded = load::load_str(text, "fuzz.yaml").ok();
    if let Some(set) = &loaded {
        let _ = cptriage::rules::tree::render_text(set);
        let _ = cptriage::rules::tree::render_mermaid(set);
        let _ = set.referenced_metrics();
        let _ = set.for_single_snapshot();
    }
    (loaded, lint::check_str(text, "fuzz.yaml"))
}

/// What [`kubeconfig`] did.
#[derive(Debug)]
pub enum KubeconfigOutcome {
    /// Not resolved: the input may name an exec credential plugin, which the
    /// fuzzer must not run (it would start arbitrary programs).
    Skipped,
    /// The results of resolving with the current context and with `--context fuzz`.
    Resolved(Vec<Result<String, String>>),
}

/// Writes `data` as a kubeconfig file and resolves it as `--live --kubeconfig F`
/// does, with the current context and with `--context fuzz`. Inputs that could
/// name an exec plugin (the word `exec`, or any backslash escape that could
/// spell it) are skipped.
pub fn kubeconfig(data: &[u8]) -> std::io::Result<KubeconfigOutcome> {
    if memchr::memmem::find(data, b"exec").is_some() || data.contains(&b'\\') {
        return Ok(KubeconfigOutcome::Skipped);
    }
    let dir = TempDir::new("kubeconfig")?;
    let path = dir.0.join("config");
    std::fs::write(&path, data)?;
    let mut out = Vec::new();
    for context in [None, Some("fuzz".to_string())] {
        let o = KubeconfigOptions {
            kubeconfig: Some(path.clone()),
            context,
            ..Default::default()
        };
        out.push(
            kubeconfig::resolve(&o)
                .map(|a| format!("{} {}", a.server, a.tls_server_name))
                .map_err(|e| e.to_string()),
        );
    }
    Ok(KubeconfigOutcome::Resolved(out))
}
