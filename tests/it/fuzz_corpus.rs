//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the same
//! entry points as the fuzz targets (`cptriage_testkit::fuzzing`), on stable Rust and
//! without cargo-fuzz: no input may panic, and failures must say where.

use std::path::{Path, PathBuf};

use cptriage::rules::load::Level;
use cptriage_testkit::fuzzing::{self, CaptureOutcome, KubeconfigOutcome};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{}: only {} files", dir.display(), files.len());
    files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, b)
        })
        .collect()
}

/// `text` has a `:LINE:COL` location with LINE ≥ 1 right after `file`.
fn has_location(text: &str, file: &str) -> bool {
    text.match_indices(file).any(|(i, _)| {
        let rest = &text[i + file.len()..];
        let mut parts = rest.strip_prefix(':').unwrap_or("").splitn(3, ':');
        let line = parts.next().and_then(|l| l.parse::<usize>().ok());
        let col = parts.next().and_then(|c| {
            let digits: String = c.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<usize>().ok()
        });
        matches!((line, col), (Some(l), Some(_)) if l >= 1)
    })
}

#[test]
fn expfmt_corpus() {
    let mut failed = 0;
    for (p, data) in corpus("expfmt") {
        match fuzzing::expfmt(&data) {
            Ok(report) => {
                for i in &report.issues {
                    assert!(
                        i.line >= 1 && i.line <= report.lines.max(1),
                        "{}: issue at line {} of {}: {}",
                        p.display(),
                        i.line,
                        report.lines,
                        i.message
                    );
                    assert!(!i.message.is_empty(), "{}", p.display());
                }
            }
            Err(e) => {
                failed += 1;
                assert!(e.line >= 1, "{}: error without a line: {e}", p.display());
                assert!(
                    e.to_string().starts_with(&format!("line {}: ", e.line)),
                    "{}: {e}",
                    p.display()
                );
            }
        }
    }
    assert!(
        failed > 0,
        "the corpus should hold inputs that are not expositions"
    );
}

#[test]
fn capture_corpus() {
    let (mut diagnosed, mut refused) = (0, 0);
    for (p, data) in corpus("capture") {
        match fuzzing::capture(&data) {
            Ok(CaptureOutcome::Diagnosed { json, .. }) => {
                diagnosed += 1;
                let v: serde_json::Value = serde_json::from_str(&json)
                    .unwrap_or_else(|e| panic!("{}: report is not JSON: {e}", p.display()));
                assert!(v["status"].is_string(), "{}: {json}", p.display());
            }
            Ok(CaptureOutcome::Refused(msg)) => {
                refused += 1;
                if msg.contains("invalid capture manifest") {
                    assert!(
                        has_location(&msg, "manifest.yaml"),
                        "{}: manifest error without a line: {msg}",
                        p.display()
                    );
                } else {
                    assert!(
                        msg.contains("no usable snapshot") || msg.contains('`'),
                        "{}: {msg}",
                        p.display()
                    );
                }
            }
            Ok(CaptureOutcome::NotDiagnosed(msg)) => assert!(!msg.is_empty(), "{}", p.display()),
            Err(e) => panic!("{}: cannot write the capture: {e}", p.display()),
        }
    }
    assert!(
        diagnosed > 0 && refused > 0,
        "diagnosed {diagnosed}, refused {refused}"
    );
}

#[test]
fn rules_corpus() {
    let mut loaded = 0;
    for (p, data) in corpus("rules") {
        let (set, diags) = fuzzing::rules(&data);
        loaded += usize::from(set.is_some());
        if set.is_none() && std::str::from_utf8(&data).is_ok() {
            assert!(
                diags.iter().any(|d| d.level == Level::Error),
                "{}: not loaded but no error",
                p.display()
            );
        }
        for d in &diags {
            assert!(!d.message.is_empty(), "{}", p.display());
            if d.line > 0 {
                assert!(
                    d.to_string().starts_with(&format!("fuzz.yaml:{}:", d.line)),
                    "{}: {d}",
                    p.display()
                );
            }
        }
    }
    assert!(loaded > 0, "no corpus rule file loads");
}

#[test]
fn kubeconfig_corpus() {
    let mut resolved = 0;
    for (p, data) in corpus("kubeconfig") {
        match fuzzing::kubeconfig(&data).unwrap_or_else(|e| panic!("{}: {e}", p.display())) {
            KubeconfigOutcome::Skipped => {}
            KubeconfigOutcome::Resolved(results) => {
                for r in results {
                    match r {
                        Ok(_) => resolved += 1,
                        Err(msg) => {
                            assert!(
                                msg.contains("config"),
                                "{}: error does not name the file: {msg}",
                                p.display()
                            );
                            if msg.contains("invalid kubeconfig") {
                                assert!(
                                    has_location(&msg, "config"),
                                    "{}: parse error without a line: {msg}",
                                    p.display()
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(resolved > 0, "no corpus kubeconfig resolves");
}

#[test]
fn corpora_stay_small() {
    let mut total = 0u64;
    let mut files = 0;
    for t in ["expfmt", "capture", "rules", "kubeconfig"] {
        for e in std::fs::read_dir(Path::new("fuzz/corpus").join(t)).expect("corpus dir") {
            let m = e.expect("entry").metadata().expect("metadata");
            total += m.len();
            files += 1;
        }
    }
    assert!(total < 5 << 20, "corpora hold {total} bytes");
    assert!(files < 2000, "corpora hold {files} files");
}
