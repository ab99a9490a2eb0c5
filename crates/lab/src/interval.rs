//! Judging a run as a slower scrape would have recorded it (`lab judge
//! --interval 30s`): the recording subsampled per target, the runs whose
//! data cannot hold a verdict at that interval set aside (not failures), and
//! the onset bound widened by the sampling delay.
//!
//! - **Subsampling** ([`subsample`]): per target directory, the scrape
//!   attempts (snapshot files `<unix-ms>.prom[.gz]` and the manifest's failed
//!   scrapes of that target) are kept like a slower scraper would have made
//!   them: the first, then each next one at least the interval after the last
//!   kept ([`keep_times`], the rule of crates/testkit's profiles, 10 % slack
//!   for scrape jitter). The manifest's `interval` says the new interval and
//!   its `failures` keep the kept attempts only; `health/` is copied as it is.
//! - **Eligibility** ([`eligibility`]): cptriage's rate window at interval I
//!   is 4 × I (rules/README.md `$window`); a process that started within one
//!   window before the first snapshot is in warm-up (not judged, no
//!   baseline), and the default baseline is the first quarter of the
//!   recording. A run is judged at I only when (a) its cluster came up (the
//!   `cluster up` event of truth.json) at least one window before the
//!   recording started, and (b) for a fault, the first quarter of the
//!   recording ends no later than the injection.
//! - **Onset** ([`onset_latest_s`]): a fault injected just after a scrape is
//!   first seen one interval later, and a rate or ratio over the window
//!   (four scrapes) passes its threshold about one scrape after the first
//!   changed sample; each of the two delays grows by the interval minus the
//!   recording's own, so the latest accepted onset grows by twice that
//!   (+40 s at 15 s, +70 s at 30 s, for a 5 s recording).
//!
//! An interval not above the recording's own judges the recording as it is:
//! no subsampling, no eligibility rule, the plain bound and `known_failure`.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::judge::ONSET_LATEST_S;
use crate::truth::Truth;

/// How a run's recording is read at an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// The interval is not above the recording's own: the recording as it is.
    AsRecorded,
    /// Subsampled to this interval (ms).
    Every(i64),
}

/// The recording's own scrape interval, ms.
pub fn recorded_ms(truth: &Truth) -> i64 {
    (truth.interval_seconds * 1000.0).round() as i64
}

/// How `truth`'s run is read at `interval_ms`.
pub fn sampling(truth: &Truth, interval_ms: i64) -> Sampling {
    if interval_ms <= recorded_ms(truth) {
        Sampling::AsRecorded
    } else {
        Sampling::Every(interval_ms)
    }
}

/// The interval the run is judged at, ms: the asked one, or the recording's
/// own when that is not faster.
pub fn effective_ms(truth: &Truth, interval_ms: i64) -> i64 {
    interval_ms.max(recorded_ms(truth))
}

/// cptriage's rate window at a scrape interval: `4 × interval`, rounded up to
/// a second (rules/README.md `$window`, the default step being the interval).
pub fn window_ms(interval_ms: i64) -> i64 {
    (4 * interval_ms + 999) / 1000 * 1000
}

/// The latest accepted onset at `interval_ms`, seconds after the injection:
/// [`ONSET_LATEST_S`] plus the two delays the slower scrape adds (the first
/// scrape after the injection, the window's crossing of a threshold), each
/// the interval minus the recording's own.
pub fn onset_latest_s(truth: &Truth, interval_ms: i64) -> f64 {
    let extra = effective_ms(truth, interval_ms) - recorded_ms(truth);
    ONSET_LATEST_S + 2.0 * extra as f64 / 1000.0
}

/// Scrape times kept at `interval_ms`: the first, then each at least the
/// interval after the last kept one (less 10 % slack for scrape jitter).
pub fn keep_times(mut times: Vec<i64>, interval_ms: i64) -> Vec<i64> {
    times.sort_unstable();
    times.dedup();
    let mut out: Vec<i64> = Vec::new();
    for t in times {
        if out
            .last()
            .is_none_or(|&l| t - l >= interval_ms - interval_ms / 10)
        {
            out.push(t);
        }
    }
    out
}

/// Why a run's data cannot hold a verdict at an interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TooShort {
    /// truth.json has no `cluster up` event: when the members started is unknown.
    NoClusterUp,
    /// The cluster came up less than one window before the recording: the
    /// whole baseline is warm-up.
    WarmUp { up_before_ms: i64, window_ms: i64 },
    /// The first quarter of the recording (the default baseline) ends after
    /// the injection.
    Baseline { baseline_end_ms: i64, injected_ms: i64 },
}

impl TooShort {
    /// The reason without the run's own numbers: what runs are grouped by.
    pub fn kind(&self) -> String {
        match self {
            TooShort::NoClusterUp => {
                "no `cluster up` event in truth.json: when the members started is unknown".into()
            }
            TooShort::WarmUp { window_ms, .. } => format!(
                "warm-up: the cluster came up less than one rate window ({}) before the recording, so its baseline is warm-up",
                duration_text(*window_ms)
            ),
            TooShort::Baseline { .. } => {
                "baseline: the recording's first quarter (the default baseline) ends after the injection".into()
            }
        }
    }

    /// The run's number for its reason: how long before the recording the
    /// cluster came up, or how far past the injection the baseline ends.
    pub fn amount(&self) -> Option<String> {
        match self {
            TooShort::NoClusterUp => None,
            TooShort::WarmUp { up_before_ms, .. } => Some(format!("up {}", seconds_text(*up_before_ms))),
            TooShort::Baseline {
                baseline_end_ms,
                injected_ms,
            } => Some(format!("+{}", seconds_text(baseline_end_ms - injected_ms))),
        }
    }
}

impl fmt::Display for TooShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.amount() {
            Some(a) => write!(f, "{} ({a})", self.kind()),
            None => write!(f, "{}", self.kind()),
        }
    }
}

/// When the cluster came up (unix ms): the first `cluster up` event.
pub fn cluster_up_ms(truth: &Truth) -> Option<i64> {
    truth
        .events
        .iter()
        .find(|e| e.what.starts_with("cluster up"))
        .map(|e| e.at_ms)
}

/// Whether `truth`'s run can hold a verdict at `interval_ms` (module doc).
/// An interval not above the recording's own is always eligible.
pub fn eligibility(truth: &Truth, interval_ms: i64) -> Result<(), TooShort> {
    let Sampling::Every(iv) = sampling(truth, interval_ms) else {
        return Ok(());
    };
    let up = cluster_up_ms(truth).ok_or(TooShort::NoClusterUp)?;
    let window = window_ms(iv);
    let up_before_ms = truth.recording_from_ms - up;
    if up_before_ms < window {
        return Err(TooShort::WarmUp {
            up_before_ms,
            window_ms: window,
        });
    }
    if let Some(injected_ms) = truth.injected_at_ms {
        let baseline_end_ms = truth.recording_from_ms + (truth.recording_to_ms - truth.recording_from_ms) / 4;
        if baseline_end_ms > injected_ms {
            return Err(TooShort::Baseline {
                baseline_end_ms,
                injected_ms,
            });
        }
    }
    Ok(())
}

/// The run's known failure at `interval_ms`: `known_failures_at` for a
/// subsampled run (keys are durations: `30s`, `1m`), else `known_failure`.
pub fn known_failure_at(truth: &Truth, interval_ms: i64) -> Option<&String> {
    match sampling(truth, interval_ms) {
        Sampling::AsRecorded => truth.known_failure.as_ref(),
        Sampling::Every(iv) => truth
            .known_failures_at
            .iter()
            .find(|(k, _)| parse_duration(k).is_ok_and(|d| d.as_millis() as i64 == iv))
            .map(|(_, v)| v),
    }
}

/// A duration as `known_failures_at` keys and titles write it: `30s`, `2m`,
/// `1m30s`, `250ms`.
pub fn duration_text(ms: i64) -> String {
    if ms % 1000 != 0 || ms == 0 {
        return format!("{ms}ms");
    }
    let (m, s) = (ms / 60_000, ms % 60_000 / 1000);
    match (m, s) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// Seconds, to the tenth when not whole (`15 s`, `15.1 s`).
fn seconds_text(ms: i64) -> String {
    if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// A duration that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("`{0}`: a number must come before each unit")]
    NoNumber(String),
    #[error("`{0}`: unknown unit `{1}` (use h, m, s, ms)")]
    Unit(String, char),
    #[error("`{0}`: a unit must follow `{1}` (h, m, s, ms)")]
    NoUnit(String, String),
}

/// Parses `90s`, `5m`, `1m30s`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total_ms: u64 = 0;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().map_err(|_| DurationError::NoNumber(s.into()))?;
        num.clear();
        let unit_ms = match c {
            'h' => 3_600_000,
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            'm' => 60_000,
            's' => 1000,
            _ => return Err(DurationError::Unit(s.into(), c)),
        };
        total_ms += n * unit_ms;
    }
    if !num.is_empty() {
        return Err(DurationError::NoUnit(s.into(), num));
    }
    Ok(Duration::from_millis(total_ms))
}

/// A recording that cannot be subsampled.
#[derive(Debug, thiserror::Error)]
pub enum SubsampleError {
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}`: cannot read the manifest: {message}")]
    Manifest { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SubsampleError + '_ {
    move |source| SubsampleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What [`subsample`] kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subsampled {
    /// Snapshot files kept and dropped, over all targets.
    pub kept: usize,
    pub dropped: usize,
}

/// The snapshot time of a file name `<unix-ms>.prom[.gz]`.
fn snapshot_time(name: &str) -> Option<i64> {
    let (stem, rest) = name.split_once('.')?;
    matches!(rest, "prom" | "prom.gz")
        .then(|| stem.parse().ok())
        .flatten()
}

/// Writes the capture `src` into `dst` (created; must not hold a capture) as
/// scraped every `interval_ms` (module doc).
pub fn subsample(src: &Path, dst: &Path, interval_ms: i64) -> Result<Subsampled, SubsampleError> {
    std::fs::create_dir_all(dst).map_err(io(dst))?;
    let mpath = src.join("manifest.yaml");
    let mut manifest = read_manifest(&mpath)?;
    let failures = manifest_failures(&manifest);
    let mut kept_attempts: BTreeSet<(String, i64)> = BTreeSet::new();
    let mut done = Subsampled::default();
    for e in std::fs::read_dir(src).map_err(io(src))? {
        let e = e.map_err(io(src))?;
        let (from, name) = (e.path(), e.file_name().to_string_lossy().to_string());
        let to = dst.join(&name);
        if !from.is_dir() {
            if name != "manifest.yaml" {
                std::fs::copy(&from, &to).map_err(io(&from))?;
            }
            continue;
        }
        if name == "health" {
            copy_dir(&from, &to)?;
            continue;
        }
        let failed: Vec<i64> = failures
            .iter()
            .filter(|(t, _)| *t == name)
            .map(|(_, at)| *at)
            .collect();
        let (n, kept) = subsample_target(&from, &to, &failed, interval_ms)?;
        done.kept += n.kept;
        done.dropped += n.dropped;
        kept_attempts.extend(kept.into_iter().map(|t| (name.clone(), t)));
    }
    rewrite_manifest(&mut manifest, interval_ms, &kept_attempts);
    let text = serde_yaml::to_string(&manifest).map_err(|e| SubsampleError::Manifest {
        path: mpath.clone(),
        message: e.to_string(),
    })?;
    let out = dst.join("manifest.yaml");
    std::fs::write(&out, text).map_err(io(&out))?;
    Ok(done)
}

/// One target directory: its snapshots and failed scrapes as attempts, the
/// kept snapshot files copied. Returns the counts and the kept attempt times.
fn subsample_target(
    from: &Path,
    to: &Path,
    failed: &[i64],
    interval_ms: i64,
) -> Result<(Subsampled, BTreeSet<i64>), SubsampleError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    let mut files: Vec<(i64, String)> = Vec::new();
    for e in std::fs::read_dir(from).map_err(io(from))? {
        let name = e.map_err(io(from))?.file_name().to_string_lossy().to_string();
        match snapshot_time(&name) {
            Some(t) => files.push((t, name)),
            // Not a snapshot: cptriage warns about it; keep it so it still does.
            None => {
                let p = from.join(&name);
                std::fs::copy(&p, to.join(&name)).map_err(io(&p))?;
            }
        }
    }
    let attempts = files
        .iter()
        .map(|(t, _)| *t)
        .chain(failed.iter().copied())
        .collect();
    let kept: BTreeSet<i64> = keep_times(attempts, interval_ms).into_iter().collect();
    let mut n = Subsampled::default();
    for (t, name) in &files {
        if kept.contains(t) {
            let p = from.join(name);
            std::fs::copy(&p, to.join(name)).map_err(io(&p))?;
            n.kept += 1;
        } else {
            n.dropped += 1;
        }
    }
    Ok((n, kept))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), SubsampleError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for e in std::fs::read_dir(from).map_err(io(from))? {
        let p = e.map_err(io(from))?.path();
        if let Some(name) = p.file_name() {
            if p.is_dir() {
                copy_dir(&p, &to.join(name))?;
            } else {
                std::fs::copy(&p, to.join(name)).map_err(io(&p))?;
            }
        }
    }
    Ok(())
}

fn read_manifest(path: &Path) -> Result<serde_yaml::Value, SubsampleError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let v: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| SubsampleError::Manifest {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if !v.is_mapping() {
        return Err(SubsampleError::Manifest {
            path: path.to_path_buf(),
            message: "not a mapping".into(),
        });
    }
    Ok(v)
}

/// The manifest's failed scrapes: (target, time).
fn manifest_failures(m: &serde_yaml::Value) -> Vec<(String, i64)> {
    m.get("failures")
        .and_then(serde_yaml::Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let target = f.get("target")?.as_str()?.to_string();
            Some((target, f.get("time")?.as_i64()?))
        })
        .collect()
}

/// Sets the manifest's interval and keeps the failed scrapes that are kept
/// attempts of their target (failures of targets without a directory stay).
fn rewrite_manifest(m: &mut serde_yaml::Value, interval_ms: i64, kept: &BTreeSet<(String, i64)>) {
    let Some(map) = m.as_mapping_mut() else { return };
    map.insert("interval".into(), duration_text(interval_ms).into());
    let targets: BTreeSet<&String> = kept.iter().map(|(t, _)| t).collect();
    if let Some(seq) = map
        .get_mut("failures")
        .and_then(serde_yaml::Value::as_sequence_mut)
    {
        seq.retain(|f| {
            let target = f.get("target").and_then(serde_yaml::Value::as_str);
            let time = f.get("time").and_then(serde_yaml::Value::as_i64);
            match (target, time) {
                (Some(t), Some(at)) if targets.contains(&t.to_string()) => {
                    kept.contains(&(t.to_string(), at))
                }
                _ => true,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::judge_within;
    use crate::truth::{Event, Expect};

    /// Five-second scrape times with jitter, from 1_000_000.
    fn every_5s(n: i64) -> Vec<i64> {
        (0..n)
            .map(|i| 1_000_000 + i * 5000 + [0, 7, -9, 3][(i % 4) as usize])
            .collect()
    }

    #[test]
    fn keeps_the_first_then_each_scrape_at_least_the_interval_later() {
        let t = every_5s(13);
        assert_eq!(keep_times(t.clone(), 15_000), vec![t[0], t[3], t[6], t[9], t[12]]);
        assert_eq!(keep_times(t.clone(), 30_000), vec![t[0], t[6], t[12]]);
        // Not above the recording's own interval: every scrape.
        assert_eq!(keep_times(t.clone(), 5000), t);
        assert_eq!(keep_times(t.clone(), 1000), t);
    }

    fn truth(injected: Option<i64>, up_before_s: Option<i64>) -> Truth {
        let from = 10_000_000;
        Truth {
            scenario: "s".into(),
            etcd_version: "3.5.1".into(),
            fault: "f".into(),
            members: vec!["m1".into()],
            single_member: true,
            injected_at_ms: injected,
            cleared_at_ms: None,
            recording_from_ms: from,
            recording_to_ms: from + 400_000,
            interval_seconds: 5.0,
            conditions: String::new(),
            expect: Expect {
                status: if injected.is_some() { "degraded" } else { "healthy" }.into(),
                axis: injected.map(|_| "etcd".into()),
                sub_axis: injected.map(|_| "disk".into()),
                healthy_accepted: false,
            },
            events: up_before_s
                .map(|s| Event {
                    at_ms: from - s * 1000,
                    what: "cluster up, leader m0".into(),
                })
                .into_iter()
                .collect(),
            known_failure: None,
            known_failure_logs: None,
            known_failures_at: Default::default(),
        }
    }

    #[test]
    fn a_run_is_judged_only_when_its_data_can_hold_a_verdict_at_the_interval() {
        let inj = Some(10_000_000 + 180_000);
        // Up 135 s before the recording, fault after the first quarter (100 s).
        assert_eq!(eligibility(&truth(inj, Some(135)), 30_000), Ok(()));
        assert_eq!(
            eligibility(&truth(inj, Some(15)), 15_000),
            Err(TooShort::WarmUp {
                up_before_ms: 15_000,
                window_ms: 60_000
            })
        );
        let short = eligibility(&truth(inj, Some(90)), 30_000).unwrap_err();
        assert_eq!(short.to_string(), "warm-up: the cluster came up less than one rate window (2m) before the recording, so its baseline is warm-up (up 90 s)");
        assert_eq!(eligibility(&truth(inj, None), 15_000), Err(TooShort::NoClusterUp));
        let early = Some(10_000_000 + 60_000);
        assert_eq!(
            eligibility(&truth(early, Some(135)), 30_000),
            Err(TooShort::Baseline {
                baseline_end_ms: 10_100_000,
                injected_ms: 10_060_000
            })
        );
        // A healthy run needs the warm-up rule only.
        assert_eq!(eligibility(&truth(None, Some(120)), 30_000), Ok(()));
        assert!(eligibility(&truth(None, Some(119)), 30_000).is_err());
        // At the recording's own interval (or faster) every run is judged.
        assert_eq!(eligibility(&truth(early, None), 5000), Ok(()));
        assert_eq!(sampling(&truth(early, None), 4000), Sampling::AsRecorded);
    }

    #[test]
    fn the_latest_onset_grows_by_the_sampling_delay() {
        let t = truth(Some(1_000_000), Some(200));
        assert_eq!(onset_latest_s(&t, 5000), 20.0);
        assert_eq!(onset_latest_s(&t, 1000), 20.0);
        assert_eq!(onset_latest_s(&t, 15_000), 40.0);
        assert_eq!(onset_latest_s(&t, 30_000), 70.0);
        // 1_000_000 ms is 1970-01-01T00:16:40Z; +50 s.
        let v = serde_json::json!({"status": "degraded", "root_cause": {
            "axis": "etcd", "sub_axis": "disk", "instances": ["m1"], "onset": "1970-01-01T00:17:30Z"}});
        assert!(judge_within(&t, &v, onset_latest_s(&t, 30_000)).pass());
        let at_15 = judge_within(&t, &v, onset_latest_s(&t, 15_000));
        assert_eq!(at_15.failures(), vec!["onset: expected -5s..+40s, got +50s"]);
        assert_eq!(window_ms(15_000), 60_000);
        assert_eq!(window_ms(7_300), 30_000);
    }

    #[test]
    fn known_failures_are_read_per_interval() {
        let mut t = truth(Some(1_000_000), Some(200));
        t.known_failure = Some("at 5 s".into());
        t.known_failures_at.insert("30s".into(), "at 30 s".into());
        assert_eq!(known_failure_at(&t, 5000).map(String::as_str), Some("at 5 s"));
        assert_eq!(known_failure_at(&t, 30_000).map(String::as_str), Some("at 30 s"));
        assert_eq!(known_failure_at(&t, 15_000), None);
        assert_eq!(duration_text(30_000), "30s");
        assert_eq!(duration_text(120_000), "2m");
        assert_eq!(duration_text(90_000), "1m30s");
        assert!(parse_duration("15").is_err());
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn subsampling_keeps_each_target_and_its_failed_scrapes_on_its_own_clock() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let s = src.path();
        // m0 answers at 0, 5, …, 60 s; m1 fails at 10 and 15 s; node is 2 s late.
        for i in 0..13 {
            write(&s.join(format!("m0/{}.prom.gz", 1_000_000 + i * 5000)), "x");
            if i != 2 && i != 3 {
                write(&s.join(format!("m1/{}.prom", 1_000_000 + i * 5000)), "x");
            }
            write(&s.join(format!("node/{}.prom.gz", 1_002_000 + i * 5000)), "x");
        }
        write(&s.join("health/m0.json"), "{}");
        write(
            &s.join("manifest.yaml"),
            "format: cptriage/capture/v1\ninterval: 5s\ntargets:\n- name: m0\n  role: etcd\n- name: m1\n  role: etcd\nfailures:\n- target: m1\n  time: 1010000\n  error: timed out\n- target: m1\n  time: 1015000\n  error: 'connection refused'\n",
        );
        let out = dst.path().join("rec");
        let n = subsample(s, &out, 15_000).unwrap();
        assert_eq!(
            names(&out.join("m0")),
            [
                "1000000.prom.gz",
                "1015000.prom.gz",
                "1030000.prom.gz",
                "1045000.prom.gz",
                "1060000.prom.gz"
            ]
        );
        // m1's attempt at 15 s failed: kept as a failure, not replaced by the next answer.
        assert_eq!(
            names(&out.join("m1")),
            ["1000000.prom", "1030000.prom", "1045000.prom", "1060000.prom"]
        );
        assert_eq!(
            names(&out.join("node")),
            [
                "1002000.prom.gz",
                "1017000.prom.gz",
                "1032000.prom.gz",
                "1047000.prom.gz",
                "1062000.prom.gz"
            ]
        );
        assert_eq!(names(&out.join("health")), ["m0.json"]);
        assert_eq!(
            n,
            Subsampled {
                kept: 14,
                dropped: 23
            }
        );
        let m: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(out.join("manifest.yaml")).unwrap()).unwrap();
        assert_eq!(m["interval"].as_str(), Some("15s"));
        assert_eq!(m["format"].as_str(), Some("cptriage/capture/v1"));
        let failures = m["failures"].as_sequence().unwrap();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0]["time"].as_i64(), Some(1_015_000));
        assert_eq!(failures[0]["error"].as_str(), Some("connection refused"));
    }
}
