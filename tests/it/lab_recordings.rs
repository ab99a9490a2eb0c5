//! The lab's real recordings (testdata/lab/, made by `cargo lab run` and
//! `lab export`; docs/accuracy.md): every committed recording is diagnosed and
//! judged against its ground truth with the lab's criteria (status, axis,
//! sub-axis, member, onset). A recording whose truth names a `known_failure`
//! must still fail — when detection gets it right, the entry is removed — and
//! every other one must pass.

use std::path::{Path, PathBuf};
use std::process::Command;

use cptriage_lab::judge::judge;
use cptriage_lab::truth::{Truth, RECORDING_DIR, TRUTH_FILE};

fn recordings() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/lab");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(TRUTH_FILE).is_file())
        .collect();
    runs.sort();
    runs
}

/// The verdict of `cptriage diagnose --dump <run>/recording -o json`.
fn diagnose(run: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .arg("diagnose")
        .arg("--dump")
        .arg(run.join(RECORDING_DIR))
        .args(["-o", "json"])
        .output()
        .expect("run cptriage");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no JSON verdict ({e}); stderr: {}",
            run.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn committed_recordings_cover_every_scenario_on_two_etcd_versions() {
    let truths: Vec<Truth> = recordings()
        .iter()
        .map(|r| Truth::read(&r.join(TRUTH_FILE)).unwrap())
        .collect();
    for scenario in [
        "healthy-noisy",
        "fsync-slow-leader",
        "fsync-slow-follower",
        "sigstop-leader",
        "sigkill-leader",
        "quorum-loss",
        "nospace",
        "compaction-defrag",
    ] {
        let mut versions: Vec<&str> = truths
            .iter()
            .filter(|t| t.scenario == scenario)
            .map(|t| t.etcd_version.as_str())
            .collect();
        versions.sort();
        versions.dedup();
        assert!(
            versions.len() >= 2,
            "{scenario}: recorded on etcd {versions:?}, want two versions"
        );
    }
}

#[test]
fn verdicts_match_ground_truth_except_the_listed_known_failures() {
    let runs = recordings();
    assert!(runs.len() >= 16, "{} recordings in testdata/lab", runs.len());
    let mut wrong = Vec::new();
    let mut fixed = Vec::new();
    for run in &runs {
        let truth = Truth::read(&run.join(TRUTH_FILE)).unwrap();
        let j = judge(&truth, &diagnose(run));
        let name = run.file_name().unwrap().to_string_lossy().to_string();
        match (&truth.known_failure, j.pass()) {
            (None, false) => wrong.push(format!("{name}: {}", j.failures().join("; "))),
            (Some(why), true) => fixed.push(format!("{name} (listed: {why})")),
            _ => {}
        }
    }
    assert!(
        wrong.is_empty() && fixed.is_empty(),
        "verdicts that do not match the ground truth:\n  {}\nrecordings that now pass (remove their `known_failure` from truth.json):\n  {}",
        wrong.join("\n  "),
        fixed.join("\n  ")
    );
}
