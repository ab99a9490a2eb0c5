//! `lab export`: a run as a compact regression recording for the repository
//! (testdata/lab/<run>/): the capture's manifest and health files, each
//! snapshot reduced to the metric families cptriage reads about etcd and
//! gzipped at the best level, and the ground truth.

use std::collections::HashSet;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use cptriage_lab::interval::{self, duration_text, Sampling};
use cptriage_lab::truth::{Truth, ETCD_LOG_DIR, LOGS_DIR, RECORDING_DIR, TRUTH_FILE};

use crate::util::LabError;
use crate::verdicts::{self, DiagnoseFrom};

/// The families kept: every etcd family the shipped rules read (METRICS.md
/// names, etcd 3.4–3.6), the ones that identify a member, its version and its
/// restarts, and the raft, disk, backend and request families a detection
/// may reasonably read next. Everything else (Go runtime, gRPC histograms,
/// per-method counters of other families) is dropped.
pub(crate) const FAMILIES: &[&str] = &[
    "etcd_cluster_version",
    "etcd_debugging_mvcc_compact_revision",
    "etcd_debugging_mvcc_current_revision",
    "etcd_debugging_mvcc_db_total_size_in_bytes",
    "etcd_debugging_mvcc_slow_watcher_total",
    "etcd_debugging_mvcc_watcher_total",
    "etcd_debugging_server_alarms",
    "etcd_disk_backend_commit_duration_seconds",
    "etcd_disk_backend_defrag_duration_seconds",
    "etcd_disk_wal_fsync_duration_seconds",
    "etcd_disk_wal_write_bytes_total",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_mvcc_db_total_size_in_use_in_bytes",
    "etcd_mvcc_delete_total",
    "etcd_mvcc_put_total",
    "etcd_mvcc_range_total",
    "etcd_mvcc_txn_total",
    "etcd_network_peer_received_failures_total",
    "etcd_network_peer_round_trip_time_seconds",
    "etcd_network_peer_sent_failures_total",
    "etcd_server_has_leader",
    "etcd_server_heartbeat_send_failures_total",
    "etcd_server_health_failures",
    "etcd_server_health_success",
    "etcd_server_id",
    "etcd_server_is_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_proposals_applied_total",
    "etcd_server_proposals_committed_total",
    "etcd_server_proposals_failed_total",
    "etcd_server_proposals_pending",
    "etcd_server_quota_backend_bytes",
    "etcd_server_read_indexes_failed_total",
    "etcd_server_slow_apply_total",
    "etcd_server_slow_read_indexes_total",
    "etcd_server_version",
    "grpc_server_handled_total",
    "process_start_time_seconds",
    "process_cpu_seconds_total",
    "etcd_network_active_peers",
    "etcd_network_disconnected_peers_total",
    "etcd_network_peer_sent_bytes_total",
    "etcd_network_peer_received_bytes_total",
    "etcd_disk_defrag_inflight",
    // The node-exporter beside the cluster (crates/lab/src/node.rs): what
    // the node signals read, and the node's name.
    "node_disk_io_time_seconds_total",
    "node_disk_write_time_seconds_total",
    "node_disk_writes_completed_total",
    "node_pressure_cpu_waiting_seconds_total",
    "node_pressure_io_waiting_seconds_total",
    "node_uname_info",
];

const SUFFIXES: &[&str] = &["", "_bucket", "_sum", "_count", "_total", "_created"];

fn kept(name: &str) -> bool {
    FAMILIES
        .iter()
        .any(|f| name.strip_prefix(f).is_some_and(|rest| SUFFIXES.contains(&rest)))
}

/// The per-method gRPC counter: hundreds of series per member, nearly all 0
/// for the whole recording.
const GRPC_HANDLED: &str = "grpc_server_handled_total";

/// The sample's series (name and labels) and value.
fn split_sample(line: &str) -> Option<(&str, &str)> {
    let end = match line.find('}') {
        Some(i) => i + 1,
        None => line.find([' ', '\t'])?,
    };
    let value = line[end..].split_whitespace().next()?;
    Some((&line[..end], value))
}

/// The `grpc_server_handled_total` series of one member that are not 0 in
/// some snapshot of the recording.
pub(crate) fn grpc_nonzero<'a>(texts: impl Iterator<Item = &'a str>) -> HashSet<String> {
    let mut out = HashSet::new();
    for t in texts {
        for line in t.lines().filter(|l| l.starts_with(GRPC_HANDLED)) {
            if let Some((series, v)) = split_sample(line) {
                if v.parse::<f64>() != Ok(0.0) {
                    out.insert(series.to_string());
                }
            }
        }
    }
    out
}

/// Keeps the lines of the kept families (HELP, TYPE and samples), verbatim.
/// Of `grpc_server_handled_total` it keeps the series in `grpc_keep` (not 0
/// somewhere in the recording), every `grpc_method="Range"` series (etcd
/// exposes Range with every code) and every `grpc_code="OK"` series (every
/// method): a sum of rates over any selection of codes, or of methods, is
/// unchanged and still reads 0 rather than absent. Only a selection of one
/// method other than Range *and* one code other than OK can come out empty.
pub(crate) fn filter(text: &str, grpc_keep: &HashSet<String>) -> String {
    let mut out = String::with_capacity(text.len() / 8);
    for line in text.lines() {
        let t = line.trim_start();
        let name = if let Some(rest) = t.strip_prefix('#') {
            let rest = rest.trim_start();
            match rest.strip_prefix("HELP").or_else(|| rest.strip_prefix("TYPE")) {
                Some(r) => r.split_whitespace().next().unwrap_or(""),
                None => continue,
            }
        } else {
            t.split(['{', ' ', '\t']).next().unwrap_or("")
        };
        if !name.is_empty() && kept(name) {
            if name == GRPC_HANDLED && !t.starts_with('#') {
                let keep = line.contains("grpc_code=\"OK\"")
                    || line.contains("grpc_method=\"Range\"")
                    || split_sample(line).is_some_and(|(series, _)| grpc_keep.contains(series));
                if !keep {
                    continue;
                }
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn gz_best(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut gz = GzEncoder::new(fs::File::create(path)?, flate2::Compression::best());
    gz.write_all(bytes)?;
    gz.finish()?.flush()
}

fn read_maybe_gz(path: &Path) -> std::io::Result<String> {
    let raw = fs::read(path)?;
    let mut s = String::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        GzDecoder::new(&raw[..]).read_to_string(&mut s)?;
    } else {
        s = String::from_utf8_lossy(&raw).into_owned();
    }
    Ok(s)
}

/// Copies `from` (a capture directory) to `to`, filtering every snapshot.
fn copy_recording(from: &Path, to: &Path) -> Result<u64, LabError> {
    let mut bytes = 0u64;
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let p = e.path();
        let name = e.file_name();
        if e.file_type()?.is_dir() {
            let dest = to.join(&name);
            fs::create_dir_all(&dest)?;
            let mut snapshots = Vec::new();
            for f in fs::read_dir(&p)? {
                let f = f?.path();
                let fname = f
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                if fname.ends_with(".prom.gz") || fname.ends_with(".prom") {
                    let text =
                        read_maybe_gz(&f).map_err(|e| LabError::msg(format!("`{}`: {e}", f.display())))?;
                    snapshots.push((fname, text));
                } else {
                    fs::copy(&f, dest.join(&fname))?;
                    bytes += fs::metadata(dest.join(&fname))?.len();
                }
            }
            let grpc_keep = grpc_nonzero(snapshots.iter().map(|(_, t)| t.as_str()));
            for (fname, text) in &snapshots {
                let out = dest.join(fname.trim_end_matches(".gz").to_string() + ".gz");
                gz_best(&out, filter(text, &grpc_keep).as_bytes())?;
                bytes += fs::metadata(&out)?.len();
            }
        } else if name != ".manifest.yaml.tmp" {
            fs::copy(&p, to.join(&name))?;
            bytes += fs::metadata(to.join(&name))?.len();
        }
    }
    Ok(bytes)
}

/// Most bytes of one member's log exported (gzipped); a longer log keeps
/// only the lines of the recording's window (its time from the first to the
/// last snapshot, with a minute before).
const MAX_LOG_GZ: u64 = 192 << 10;

/// The recording's window (unix ms) from its snapshot file names.
fn recording_window(rec: &Path) -> Option<(i64, i64)> {
    let mut w: Option<(i64, i64)> = None;
    for d in fs::read_dir(rec).ok()?.flatten() {
        for f in fs::read_dir(d.path()).into_iter().flatten().flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            let Some(t) = name.split('.').next().and_then(|s| s.parse::<i64>().ok()) else {
                continue;
            };
            w = Some(w.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
    }
    w
}

/// The unix ms of a zap (`"ts":"2026-…"`) or capnslog (`2026-12-06 04:01:49.9`)
/// or raft text (`raft2026/12/06 04:01:49`) line; `None` for other lines.
fn line_time(line: &str) -> Option<i64> {
    let s = if let Some(i) = line.find("\"ts\":\"") {
        &line[i + 6..]
    } else if let Some(r) = line.strip_prefix("raft") {
        r
    } else {
        line
    };
    let b = s.as_bytes();
    if b.len() < 19 || !b[0].is_ascii_digit() {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    let days = {
        let y = if mo <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
        era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
    };
    Some((days * 86_400 + h * 3600 + mi * 60 + sec) * 1000)
}

/// Copies the members' etcd logs of a run (`etcd/m*.log`) into
/// `logs/m*.log.gz`: from the cluster's start to the end of the recording (the
/// lab's teardown after it, members killed, is not part of the scenario),
/// and only the recording's window when that is still large.
fn copy_logs(run: &Path, to: &Path, until: i64) -> Result<u64, LabError> {
    let from = run.join(ETCD_LOG_DIR);
    let Ok(rd) = fs::read_dir(&from) else { return Ok(0) };
    let window = recording_window(&run.join(RECORDING_DIR));
    let mut bytes = 0;
    let mut logs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    if logs.is_empty() {
        return Ok(0);
    }
    fs::create_dir_all(to)?;
    for p in logs {
        let whole = read_maybe_gz(&p).map_err(|e| LabError::msg(format!("`{}`: {e}", p.display())))?;
        let mut text = String::with_capacity(whole.len());
        for line in whole.lines() {
            if line_time(line).is_some_and(|t| t > until + 1_000) {
                break;
            }
            text.push_str(line);
            text.push('\n');
        }
        let name = format!(
            "{}.gz",
            p.file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default()
        );
        let out = to.join(&name);
        gz_best(&out, text.as_bytes())?;
        if fs::metadata(&out)?.len() > MAX_LOG_GZ {
            if let Some((a, b)) = window {
                let mut keep = true;
                let mut cut = String::with_capacity(text.len() / 4);
                for line in text.lines() {
                    if let Some(t) = line_time(line) {
                        keep = t >= a - 60_000 && t <= b + 5_000;
                    }
                    if keep {
                        cut.push_str(line);
                        cut.push('\n');
                    }
                }
                gz_best(&out, cut.as_bytes())?;
            }
        }
        bytes += fs::metadata(&out)?.len();
    }
    Ok(bytes)
}

fn write_truth(run: &Path, truth: &Truth) -> Result<(), LabError> {
    let text = serde_json::to_string_pretty(truth).map_err(|e| LabError::msg(e.to_string()))?;
    fs::write(run.join(TRUTH_FILE), text + "\n")?;
    Ok(())
}

/// Judges `run` with `bin` and writes its `known_failure`: what failed, or
/// nothing when it passes.
fn mark_one(bin: &Path, run: &Path) -> Result<Truth, LabError> {
    let (r, _) = verdicts::diagnose_and_judge(bin, run)?;
    let mut truth = Truth::read(&run.join(TRUTH_FILE))?;
    truth.known_failure =
        (!r.pass).then(|| with_reason(truth.known_failure.as_ref(), r.judgement.failures().join("; ")));
    write_truth(run, &truth)?;
    Ok(truth)
}

/// The entry for what failed, keeping the reason someone wrote after the
/// same failures in the entry before (`onset: …, got +235.1s (why)`).
fn with_reason(before: Option<&String>, failed: String) -> String {
    match before {
        Some(b) if b.strip_prefix(&failed).is_some_and(|rest| rest.starts_with(" (")) => b.clone(),
        _ => failed,
    }
}

/// Judges `run` as scraped every `interval_ms` and writes its
/// `known_failures_at` entry for that interval: what failed, or nothing when
/// it passes or is too short to be judged there. At the recording's own
/// interval (or faster), `known_failure`.
fn mark_one_at(bin: &Path, run: &Path, interval_ms: i64) -> Result<Truth, LabError> {
    let mut truth = Truth::read(&run.join(TRUTH_FILE))?;
    if interval::sampling(&truth, interval_ms) == Sampling::AsRecorded {
        return mark_one(bin, run);
    }
    let before = interval::known_failure_at(&truth, interval_ms).cloned();
    truth
        .known_failures_at
        .retain(|k, _| interval::parse_duration(k).map_or(true, |d| d.as_millis() as i64 != interval_ms));
    if interval::eligibility(&truth, interval_ms).is_ok() {
        let (r, _) = verdicts::diagnose_and_judge_from(bin, run, DiagnoseFrom::Metrics, Some(interval_ms))?;
        if !r.pass {
            let entry = with_reason(before.as_ref(), r.judgement.failures().join("; "));
            truth.known_failures_at.insert(duration_text(interval_ms), entry);
        }
    }
    write_truth(run, &truth)?;
    Ok(truth)
}

/// What `lab mark` did to one run's entry.
fn change_text(before: Option<&String>, after: Option<&String>) -> String {
    match (before, after) {
        (None, None) => "passes".to_string(),
        (Some(_), None) => "passes now (or too short): known failure removed".to_string(),
        (b, Some(a)) if b == Some(a) => format!("known failure: {a}"),
        (_, Some(a)) => format!("known failure now: {a}"),
    }
}

/// `lab mark`: rewrites the `known_failure` of every run under `dirs`, or
/// with `intervals` its `known_failures_at` entries for them.
pub(crate) fn mark(dirs: &[PathBuf], bin: &Path, intervals: &[i64]) -> Result<i32, LabError> {
    for run in verdicts::find_runs(dirs)? {
        if intervals.is_empty() {
            let before = Truth::read(&run.join(TRUTH_FILE))?.known_failure;
            let after = mark_one(bin, &run)?.known_failure;
            println!(
                "{}: {}",
                run.display(),
                change_text(before.as_ref(), after.as_ref())
            );
        }
        for &iv in intervals {
            let before = Truth::read(&run.join(TRUTH_FILE))?;
            let after = mark_one_at(bin, &run, iv)?;
            let change = match interval::eligibility(&after, iv) {
                Err(short) => format!("too short, not judged: {short}"),
                Ok(()) => change_text(
                    interval::known_failure_at(&before, iv),
                    interval::known_failure_at(&after, iv),
                ),
            };
            println!("{} at {}: {change}", run.display(), duration_text(iv));
        }
    }
    Ok(0)
}

pub(crate) fn run(runs: &[PathBuf], to: &Path, judge_with: Option<PathBuf>) -> Result<i32, LabError> {
    let runs = verdicts::find_runs(runs)?;
    let mut total = 0u64;
    for run in &runs {
        let name = run
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .ok_or_else(|| LabError::msg(format!("`{}`: no name", run.display())))?;
        let dest = to.join(&name);
        if dest.exists() {
            return Err(LabError::msg(format!(
                "`{}`: exists; remove it first to export again",
                dest.display()
            )));
        }
        let mut truth = Truth::read(&run.join(TRUTH_FILE))?;
        let bytes = copy_recording(&run.join(RECORDING_DIR), &dest.join(RECORDING_DIR))?
            + copy_logs(run, &dest.join(LOGS_DIR), truth.recording_to_ms)?;
        truth.known_failure = None;
        write_truth(&dest, &truth)?;
        if let Some(bin) = &judge_with {
            truth = mark_one(bin, &dest)?;
        }
        println!(
            "{name}: {} KiB{}",
            bytes / 1024,
            truth
                .known_failure
                .as_deref()
                .map(|k| format!(" (known failure: {k})"))
                .unwrap_or_default()
        );
        total += bytes;
    }
    println!(
        "{} runs, {} KiB in all, in {}",
        runs.len(),
        total / 1024,
        to.display()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_keeps_a_reason_written_after_the_same_failures() {
        let why = "onset: expected -5s..+20s, got +235.1s (the echo of a healed partition)".to_string();
        let failed = "onset: expected -5s..+20s, got +235.1s".to_string();
        assert_eq!(with_reason(Some(&why), failed.clone()), why);
        // Other failures now, or no entry before: the failures as they are.
        let other = "onset: expected -5s..+20s, got +240s".to_string();
        assert_eq!(with_reason(Some(&why), other.clone()), other);
        assert_eq!(with_reason(None, failed.clone()), failed);
        // A longer list of failures that begins with the old one is not a reason.
        let more = format!("{failed}; member: expected m0, got m1");
        assert_eq!(with_reason(Some(&failed), more.clone()), more);
    }

    #[test]
    fn grpc_series_zero_throughout_are_dropped_but_every_code_and_method_stays() {
        let a = "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Alarm\"} 0\ngrpc_server_handled_total{grpc_code=\"OutOfRange\",grpc_method=\"Range\"} 0\ngrpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Alarm\"} 0\ngrpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Put\"} 0\n";
        let b = "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Alarm\"} 0\ngrpc_server_handled_total{grpc_code=\"OutOfRange\",grpc_method=\"Range\"} 0\ngrpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Alarm\"} 0\ngrpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Put\"} 3\n";
        let keep = grpc_nonzero([a, b].into_iter());
        let want = "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Alarm\"} 0\ngrpc_server_handled_total{grpc_code=\"OutOfRange\",grpc_method=\"Range\"} 0\ngrpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Put\"} 0\n";
        assert_eq!(filter(a, &keep), want);
    }

    #[test]
    fn filter_keeps_whole_families() {
        let text = "# HELP etcd_disk_wal_fsync_duration_seconds x\n# TYPE etcd_disk_wal_fsync_duration_seconds histogram\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 1\netcd_disk_wal_fsync_duration_seconds_sum 0.1\n# HELP go_goroutines g\n# TYPE go_goroutines gauge\ngo_goroutines 12\netcd_server_has_leader 1\netcd_server_has_leader_extra 1\n";
        assert_eq!(
            filter(text, &HashSet::new()),
            "# HELP etcd_disk_wal_fsync_duration_seconds x\n# TYPE etcd_disk_wal_fsync_duration_seconds histogram\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 1\netcd_disk_wal_fsync_duration_seconds_sum 0.1\netcd_server_has_leader 1\n"
        );
    }
}
