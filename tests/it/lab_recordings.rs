//! The lab's real recordings (testdata/lab/, made by `cargo lab run` and
//! `lab export`; docs/accuracy.md): every committed recording is diagnosed and
//! judged against its ground truth with the lab's criteria (status, axis,
//! sub-axis, member, onset). A recording whose truth names a `known_failure`
//! must still fail — when detection gets it right, the entry is removed — and
//! every other one must pass. The same at 15 s and 30 s (`lab judge
//! --interval`): every run long enough for the interval is subsampled as a
//! slower scrape would have recorded it and judged with the widened onset
//! bound, against its `known_failures_at`.

use std::path::{Path, PathBuf};
use std::process::Command;

use cptriage_lab::interval::{
    cluster_up_ms, eligibility, known_failure_at, onset_latest_s, subsample, window_ms, TooShort,
};
use cptriage_lab::judge::{judge, judge_within, rfc3339_ms};
use cptriage_lab::truth::{Truth, RECORDING_DIR, TRUTH_FILE};
use serde_json::Value;

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
fn diagnose(run: &Path) -> Value {
    diagnose_dump(&run.join(RECORDING_DIR))
}

/// The verdict of `cptriage diagnose --dump <rec> -o json`.
fn diagnose_dump(rec: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .arg("diagnose")
        .arg("--dump")
        .arg(rec)
        .args(["-o", "json"])
        .output()
        .expect("run cptriage");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no JSON verdict ({e}); stderr: {}",
            rec.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The slower scrape intervals the committed runs are judged at too.
const INTERVALS_MS: [i64; 2] = [15_000, 30_000];

fn name(run: &Path) -> String {
    run.file_name().unwrap().to_string_lossy().to_string()
}

/// The verdict on `run`'s recording as scraped every `interval_ms`, after
/// checking that cptriage read it at that interval.
fn diagnose_at(run: &Path, interval_ms: i64) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join(RECORDING_DIR);
    let n = subsample(&run.join(RECORDING_DIR), &rec, interval_ms).unwrap();
    // At 15 s of a 5 s recording, two of three snapshots go.
    assert!(
        n.dropped >= n.kept,
        "{}: {n:?} at {interval_ms} ms",
        run.display()
    );
    let v = diagnose_dump(&rec);
    // The step is the median gap between kept snapshots (scrape jitter: a
    // few ms), the range 4 steps rounded up to a second.
    let w = &v["window"];
    let (step, range) = (w["step_seconds"].as_f64(), w["range_seconds"].as_f64());
    let want = interval_ms as f64 / 1000.0;
    assert!(
        step.is_some_and(|s| (s - want).abs() < want / 100.0)
            && range.is_some_and(|r| r * 1000.0 - window_ms(interval_ms) as f64 <= 1000.0),
        "{}: cptriage did not read the recording at {interval_ms} ms: window {w}",
        run.display()
    );
    v
}

/// The etcd sources' warm-up periods that start at their first snapshot,
/// as (start, end) unix ms.
fn initial_warmups(v: &Value) -> Vec<(i64, i64)> {
    let ms = |x: &Value| x.as_str().and_then(rfc3339_ms);
    v["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["role"] == "etcd")
        .filter_map(|s| {
            let first = ms(&s["first"])?;
            let w = s["warmup"].as_array()?.first()?;
            (ms(&w[0])? == first).then_some((first, ms(&w[1])?))
        })
        .collect()
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

#[test]
fn verdicts_at_15s_and_30s_match_ground_truth_where_the_runs_are_long_enough() {
    let mut wrong = Vec::new();
    let mut fixed = Vec::new();
    let mut judged = [0usize; INTERVALS_MS.len()];
    for (k, &iv) in INTERVALS_MS.iter().enumerate() {
        for run in &recordings() {
            let truth = Truth::read(&run.join(TRUTH_FILE)).unwrap();
            if eligibility(&truth, iv).is_err() {
                continue;
            }
            judged[k] += 1;
            let v = diagnose_at(run, iv);
            // Long enough: the members were not in warm-up when the capture began.
            assert_eq!(initial_warmups(&v), vec![], "{} at {iv} ms", name(run));
            let j = judge_within(&truth, &v, onset_latest_s(&truth, iv));
            let at = format!("{} at {}s", name(run), iv / 1000);
            match (known_failure_at(&truth, iv), j.pass()) {
                (None, false) => wrong.push(format!("{at}: {}", j.failures().join("; "))),
                (Some(why), true) => fixed.push(format!("{at} (listed: {why})")),
                _ => {}
            }
        }
    }
    // Today the runs whose cluster was up long before the recording (the
    // defragmentation scenarios write their database first); every run the
    // lab records with its 135 s warm-up once committed.
    assert!(judged[0] >= 4, "runs judged at 15 s: {judged:?}");
    assert!(
        wrong.is_empty() && fixed.is_empty(),
        "verdicts at 15 s / 30 s that do not match the ground truth:\n  {}\nruns that now pass there (remove the interval from their `known_failures_at`, `lab mark --interval`):\n  {}",
        wrong.join("\n  "),
        fixed.join("\n  ")
    );
}

/// The eligibility rule is cptriage's warm-up: a run whose cluster came up
/// less than one rate window before its recording is left out at that
/// interval, and cptriage, given it, does hold its whole baseline as warm-up.
#[test]
fn runs_up_less_than_a_window_before_their_recording_are_not_judged_and_are_warm_up_there() {
    let iv = 15_000;
    let mut short = Vec::new();
    for run in recordings() {
        let truth = Truth::read(&run.join(TRUTH_FILE)).unwrap();
        let up = cluster_up_ms(&truth).unwrap_or_else(|| panic!("{}: no `cluster up` event", name(&run)));
        let up_before_ms = truth.recording_from_ms - up;
        match eligibility(&truth, iv) {
            Err(TooShort::WarmUp { window_ms: w, .. }) => {
                assert!(up_before_ms < w, "{}", name(&run));
                short.push((run, truth));
            }
            Err(other) => panic!("{}: too short for another reason: {other}", name(&run)),
            Ok(()) => assert!(up_before_ms >= window_ms(iv), "{}", name(&run)),
        }
    }
    // Every run recorded with the lab's 15 s warm-up and 60 s lead-in.
    assert!(short.len() >= 60, "{} runs too short at 15 s", short.len());
    // One each of etcd 3.4 and 3.5, a fault and a healthy run: cptriage's
    // warm-up from the first snapshot covers the default baseline.
    let picks = [
        "fsync-slow-leader-etcd3.4-1",
        "sigkill-leader-etcd3.5-1",
        "healthy-noisy-etcd3.5-1",
    ];
    let picked: Vec<_> = short
        .iter()
        .filter(|(r, _)| picks.contains(&name(r).as_str()))
        .collect();
    assert_eq!(picked.len(), picks.len(), "{picks:?}");
    for (run, _) in picked {
        let v = diagnose_at(run, iv);
        let baseline_to = v["window"]["baseline"]["to"]
            .as_str()
            .and_then(rfc3339_ms)
            .unwrap_or_else(|| panic!("{}: no baseline in {}", name(run), v["window"]));
        let w = initial_warmups(&v);
        assert_eq!(w.len(), 3, "{}: warm-ups {w:?}", name(run));
        // To the scrape jitter between targets (a few ms).
        assert!(
            w.iter().all(|&(_, to)| to + 1000 >= baseline_to),
            "{}: warm-ups {w:?} end before the baseline ({baseline_to})",
            name(run)
        );
    }
}

/// A member behind a delayed path: etcd records its peers' round trips every
/// 30 s, so they show the delay up to 30 s late; the member's linearizable
/// reads slow at once (etcd counts them as slow applies). Each delayed run is
/// named etcd/network on the delayed member, dated from those reads, earlier
/// than the episode of the round trips themselves, and says so.
#[test]
fn a_delayed_path_is_dated_from_the_members_slow_reads_not_the_late_round_trips() {
    let runs: Vec<PathBuf> = recordings()
        .into_iter()
        .filter(|r| name(r).contains("peer-latency"))
        .collect();
    assert!(runs.len() >= 4, "{} peer-latency runs", runs.len());
    for run in &runs {
        let truth = Truth::read(&run.join(TRUTH_FILE)).unwrap();
        let v = diagnose(run);
        let n = name(run);
        let rc = &v["root_cause"];
        assert_eq!(rc["leaf"], "etcd-network", "{n}: {rc}");
        assert_eq!(rc["instances"][0], truth.members[0].as_str(), "{n}: {rc}");
        let (onset, lag) = onset_after_injection(rc, &truth);
        assert!((-5.0..=20.0).contains(&lag), "{n}: onset {lag:+} s");
        let axis = axis_of(&v, "etcd-network");
        let note = axis["note"].as_str().unwrap_or_default();
        assert!(
            note.starts_with("onset dated from `etcd_slow_applies` on ")
                && note.contains(truth.members[0].as_str()),
            "{n}: {note}"
        );
        let own = rfc3339_ms(axis["episodes"][0]["onset"].as_str().unwrap()).unwrap();
        assert!(
            own > onset,
            "{n}: the round trips' episode {own} not after {onset}"
        );
        let said = v["assumptions"].as_array().unwrap();
        assert!(
            said.iter().any(|a| a
                .as_str()
                .is_some_and(|a| a.starts_with("etcd/network: onset dated from"))),
            "{n}: {said:?}"
        );
    }
}

/// A follower cut off for 3 minutes: its peers' probes sent into the cut
/// complete after the heal, and etcd records their wait (13.7 s, then 5.4 s)
/// 55 s later. Those round trips are the echo of the cut (`quiet_after:`),
/// not a new incident: the verdict is the partition, recovered at the heal,
/// dated from its start, and the round-trip evidence says what it left out.
#[test]
fn the_echo_of_a_healed_partition_is_not_a_new_incident() {
    let run = recording("long-partition-follower-etcd3.4-1");
    let truth = Truth::read(&run.join(TRUTH_FILE)).unwrap();
    let v = diagnose(&run);
    let rc = &v["root_cause"];
    assert_eq!(v["status"], "recovered", "{rc}");
    assert_eq!(rc["leaf"], "etcd-network", "{rc}");
    assert_eq!(rc["instances"][0], "m0", "{rc}");
    let (_, lag) = onset_after_injection(rc, &truth);
    assert!((-5.0..=20.0).contains(&lag), "onset {lag:+} s");
    let healed = truth.cleared_at_ms.unwrap();
    let over = rfc3339_ms(rc["recovered"].as_str().unwrap()).unwrap();
    assert!(
        (over - healed).abs() <= 30_000,
        "recovered {} s after the heal",
        (over - healed) / 1000
    );
    assert_eq!(v["earlier"].as_array().map(Vec::len), Some(0), "{}", v["earlier"]);
    let axis = axis_of(&v, "etcd-network");
    let note = axis["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["signal"] == "etcd_peer_rtt_to_member")
        .and_then(|e| e["note"].as_str())
        .unwrap_or_default();
    assert!(
        note.contains("not counted") && note.contains("etcd_member_isolated"),
        "{note}"
    );
}

/// Diagnosed 15 s into a slow disk (100 ms on the leader m1, 5 s scrapes),
/// the fsyncs are slow for less than their persistence: the verdict is not
/// HEALTHY but INCONCLUSIVE, the axis says on which member it is pending
/// (`axes[].pending`, for scripts) and the page says to look again. Five
/// seconds later it is confirmed: etcd/disk on m1.
#[test]
fn a_fault_seen_for_less_than_its_persistence_is_not_yet_confirmed() {
    let run = recording("long-fsync-slow-leader-etcd3.4-1");
    let truth = Truth::read(&run.join(TRUTH_FILE)).unwrap();
    let at = |s: i64| ((truth.injected_at_ms.unwrap() / 1000) + s).to_string();
    let rec = run.join(RECORDING_DIR);
    let run_at = |to: &str, json: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cptriage"));
        c.arg("diagnose")
            .arg("--dump")
            .arg(&rec)
            .args(["--to", to])
            .env("COLUMNS", "200");
        if json {
            c.args(["-o", "json"]);
        }
        c.output().expect("run cptriage")
    };
    let out = run_at(&at(15), true);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON verdict");
    assert_eq!(v["status"], "inconclusive", "{}", v["summary"]);
    assert_eq!(out.status.code(), Some(3));
    let pending: Vec<(&str, &Value)> = v["axes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["pending"].as_array().is_some_and(|p| !p.is_empty()))
        .map(|a| (a["leaf"].as_str().unwrap(), &a["pending"]))
        .collect();
    assert_eq!(pending, [("etcd-disk", &serde_json::json!(["m1"]))]);
    let page = String::from_utf8(run_at(&at(15), false).stdout).unwrap();
    assert!(
        page.contains("nothing is confirmed failing yet: etcd/disk is lit at the end of the window on m1 for less than its persistence; look again in one window"),
        "{page}"
    );
    let v: Value = serde_json::from_slice(&run_at(&at(20), true).stdout).expect("JSON verdict");
    assert_eq!(v["status"], "degraded");
    assert_eq!(v["root_cause"]["leaf"], "etcd-disk");
    assert_eq!(v["root_cause"]["instances"], serde_json::json!(["m1"]));
}

/// The committed run named `name`.
fn recording(name_: &str) -> PathBuf {
    recordings()
        .into_iter()
        .find(|r| name(r) == name_)
        .unwrap_or_else(|| panic!("no recording {name_}"))
}

/// The axis report of `leaf` in a verdict.
fn axis_of<'a>(v: &'a Value, leaf: &str) -> &'a Value {
    v["axes"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["leaf"] == leaf))
        .unwrap_or_else(|| panic!("no axis {leaf}"))
}

/// The root cause's onset (ms) and its lag after the injection (s).
fn onset_after_injection(rc: &Value, truth: &Truth) -> (i64, f64) {
    let onset = rfc3339_ms(rc["onset"].as_str().unwrap()).unwrap();
    (onset, (onset - truth.injected_at_ms.unwrap()) as f64 / 1000.0)
}
