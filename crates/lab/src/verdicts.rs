//! Diagnosing recordings with a `cptriage` binary (`diagnose --dump DIR -o
//! json`), judging each verdict against its ground truth, and the confusion
//! table and results file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;
use serde_json::Value;

use cptriage_lab::interval::{self, duration_text, subsample, Sampling, TooShort};
use cptriage_lab::judge::{
    judge_logs, judge_within, onset_bound_text, Judgement, Outcome, CRITERIA, ONSET_EARLIEST_S,
};
use cptriage_lab::truth::{Truth, ETCD_LOG_DIR, LOGS_DIR, RECORDING_DIR, TRUTH_FILE};

use crate::util::LabError;

/// One judged run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Result1 {
    /// The run directory (holding `truth.json` and `recording/`).
    pub run: PathBuf,
    pub scenario: String,
    pub etcd_version: String,
    pub expect: cptriage_lab::truth::Expect,
    pub members: Vec<String>,
    pub injected_at_ms: Option<i64>,
    /// The scrape interval judged at, seconds: the recording's own, or the
    /// slower one it was subsampled to.
    pub interval_seconds: f64,
    /// The recording was subsampled to `interval_seconds`.
    pub subsampled: bool,
    /// The accepted onset, seconds after the injection: [earliest, latest].
    pub onset_window_seconds: [f64; 2],
    pub exit_code: Option<i32>,
    /// `diagnose` failed to produce a verdict: its stderr.
    pub error: Option<String>,
    pub judgement: Judgement,
    pub pass: bool,
    pub known_failure: Option<String>,
}

/// The cptriage binary that judged, for the results file.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Judge {
    pub path: PathBuf,
    pub version: String,
    /// `git describe --always --dirty` of the repository the binary was built from, when known.
    pub commit: Option<String>,
}

impl Judge {
    pub(crate) fn of(path: &Path, repo: &Path) -> Result<Judge, LabError> {
        if !path.exists() {
            return Err(LabError::msg(format!(
                "`{}`: no cptriage binary (build it with `cargo build --release`, or give --cptriage PATH)",
                path.display()
            )));
        }
        let version = Command::new(path)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .map_err(|e| LabError::msg(format!("`{}`: cannot run: {e}", path.display())))?;
        let commit = Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["describe", "--always", "--dirty"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        Ok(Judge {
            path: path.to_path_buf(),
            version,
            commit,
        })
    }
}

/// The results file, schema `cptriage-lab/results/v2`:
///
/// ```text
/// { "schema": "cptriage-lab/results/v2",
///   "cptriage": { "path", "version", "commit" },
///   "intervals": [ {                 // one per `lab judge --interval`, in order
///       "interval_seconds": 30,      // null: the recordings as they are
///       "window_seconds": 120,       // cptriage's rate window there; null as recorded
///       "results": [ Result1… ],     // the runs judged
///       "too_short": [ { "run", "reason" } ] } ] }   // not judged, not failures
/// ```
///
/// Each result (`Result1`) has v1's fields plus `interval_seconds` (the
/// interval it was judged at), `subsampled` and `onset_window_seconds`
/// ([earliest, latest] seconds after the injection). v1 had one `results`
/// list and one top-level `onset_window_seconds`.
#[derive(Debug, Serialize)]
pub(crate) struct Results<'a> {
    pub schema: &'static str,
    pub cptriage: &'a Judge,
    pub intervals: &'a [Block],
}

/// A run not judged at an interval: its data cannot hold a verdict there.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TooShortRun {
    pub run: PathBuf,
    pub reason: String,
    #[serde(skip)]
    pub why: TooShort,
}

/// The runs judged at one interval (none: as recorded).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Block {
    pub interval_seconds: Option<f64>,
    pub window_seconds: Option<f64>,
    pub results: Vec<Result1>,
    pub too_short: Vec<TooShortRun>,
}

impl Block {
    /// The recordings as they are.
    pub(crate) fn as_recorded(results: Vec<Result1>) -> Block {
        Block {
            interval_seconds: None,
            window_seconds: None,
            results,
            too_short: Vec::new(),
        }
    }
}

/// Judges `runs` at `interval_ms` (none: as recorded): the runs whose data
/// can hold a verdict there are diagnosed, the others listed as too short.
/// From logs alone the interval is ignored.
pub(crate) fn judge_block(
    cptriage: &Path,
    runs: &[PathBuf],
    jobs: usize,
    from: DiagnoseFrom,
    interval_ms: Option<i64>,
) -> Result<Block, LabError> {
    let interval_ms = interval_ms.filter(|_| from != DiagnoseFrom::Logs);
    let Some(iv) = interval_ms else {
        return Ok(Block::as_recorded(judge_all(cptriage, runs, jobs, from, None)?));
    };
    let mut eligible = Vec::new();
    let mut too_short = Vec::new();
    for run in runs {
        let truth = Truth::read(&run.join(TRUTH_FILE))?;
        match interval::eligibility(&truth, iv) {
            Ok(()) => eligible.push(run.clone()),
            Err(why) => too_short.push(TooShortRun {
                run: run.clone(),
                reason: why.to_string(),
                why,
            }),
        }
    }
    Ok(Block {
        interval_seconds: Some(iv as f64 / 1000.0),
        window_seconds: Some(interval::window_ms(iv) as f64 / 1000.0),
        results: judge_all(cptriage, &eligible, jobs, from, interval_ms)?,
        too_short,
    })
}

/// A block as `lab judge` prints it: for an interval, its title, then the
/// table, then the runs too short for it.
pub(crate) fn block_text(b: &Block) -> String {
    let mut out = String::new();
    if let (Some(iv), Some(w)) = (b.interval_seconds, b.window_seconds) {
        let _ = writeln!(
            out,
            "judged as scraped every {} (window {}): {} runs, {} too short\n",
            duration_text((iv * 1000.0) as i64),
            duration_text((w * 1000.0) as i64),
            b.results.len(),
            b.too_short.len()
        );
    }
    out.push_str(&table(&b.results));
    out.push_str(&too_short_text(b));
    out
}

/// The runs too short for a block's interval, once each, grouped by reason:
/// `too short for 30s: <reason>: run (up 15 s), …`.
fn too_short_text(b: &Block) -> String {
    let iv = duration_text((b.interval_seconds.unwrap_or(0.0) * 1000.0) as i64);
    let mut kinds: Vec<String> = b.too_short.iter().map(|t| t.why.kind()).collect();
    kinds.sort();
    kinds.dedup();
    let mut out = String::new();
    for k in kinds {
        let runs: Vec<String> = b
            .too_short
            .iter()
            .filter(|t| t.why.kind() == k)
            .map(|t| {
                let name = t
                    .run
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                match t.why.amount() {
                    Some(a) => format!("{name} ({a})"),
                    None => name,
                }
            })
            .collect();
        let _ = writeln!(out, "too short for {iv}: {k}: {}", runs.join(", "));
    }
    out
}

/// Finds run directories (holding `truth.json`) under each path, sorted.
pub(crate) fn find_runs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LabError> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>, depth: usize) -> std::io::Result<()> {
        if p.join(TRUTH_FILE).is_file() {
            out.push(p.to_path_buf());
            return Ok(());
        }
        if depth == 0 {
            return Ok(());
        }
        for e in std::fs::read_dir(p)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                walk(&e.path(), out, depth - 1)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(LabError::msg(format!("`{}`: no such directory", p.display())));
        }
        walk(p, &mut out, 3).map_err(|e| LabError::msg(format!("`{}`: {e}", p.display())))?;
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(LabError::msg(format!(
            "no run (a directory with {TRUTH_FILE}) under {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(out)
}

/// What a run is diagnosed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DiagnoseFrom {
    /// The recording (`--dump`).
    Metrics,
    /// The members' etcd logs alone (`--logs`), judged by `judge_logs`.
    Logs,
    /// The recording and the logs.
    Both,
}

/// The members' logs of a run: `logs/` of an exported run, `etcd/` of a kept one.
fn logs_dir(run: &Path) -> PathBuf {
    let exported = run.join(LOGS_DIR);
    if exported.is_dir() {
        exported
    } else {
        run.join(ETCD_LOG_DIR)
    }
}

/// Whether a run holds what `from` diagnoses: logs for `Logs` and `Both`
/// (a recording every run has). Runs exported without their logs are skipped
/// by `lab judge --from logs|both`, not judged as failures.
pub(crate) fn has_input(run: &Path, from: DiagnoseFrom) -> bool {
    match from {
        DiagnoseFrom::Metrics => true,
        DiagnoseFrom::Logs | DiagnoseFrom::Both => std::fs::read_dir(logs_dir(run))
            .map(|mut d| d.next().is_some())
            .unwrap_or(false),
    }
}

/// Runs `cptriage diagnose` on a run's recording and judges it.
pub(crate) fn diagnose_and_judge(cptriage: &Path, run: &Path) -> Result<(Result1, Option<Value>), LabError> {
    diagnose_and_judge_from(cptriage, run, DiagnoseFrom::Metrics, None)
}

/// The recording to diagnose: the run's own, or a subsampled copy in a
/// temporary directory (removed when the returned guard drops).
fn recording_at(run: &Path, sampling: Sampling) -> Result<(PathBuf, Option<tempfile::TempDir>), LabError> {
    let rec = run.join(RECORDING_DIR);
    let Sampling::Every(iv) = sampling else {
        return Ok((rec, None));
    };
    let tmp = tempfile::Builder::new()
        .prefix("cptriage-lab-interval-")
        .tempdir()?;
    let out = tmp.path().join(RECORDING_DIR);
    subsample(&rec, &out, iv)?;
    Ok((out, Some(tmp)))
}

/// What `cptriage diagnose -o json` answered.
struct Diagnosis {
    verdict: Option<Value>,
    exit_code: Option<i32>,
    /// No verdict: why.
    error: Option<String>,
}

/// Runs `cptriage diagnose -o json` on a recording and/or logs.
fn diagnose(
    cptriage: &Path,
    rec: Option<&Path>,
    logs: Option<&Path>,
    to_ms: Option<i64>,
) -> Result<Diagnosis, LabError> {
    let mut cmd = Command::new(cptriage);
    cmd.arg("diagnose");
    if let Some(rec) = rec {
        cmd.arg("--dump").arg(rec);
    }
    if let Some(logs) = logs {
        cmd.arg("--logs").arg(logs);
    }
    if let Some(to) = to_ms {
        cmd.arg("--to").arg(format!("{}", (to + 999) / 1000));
    }
    let out = cmd
        .args(["-o", "json"])
        .output()
        .map_err(|e| LabError::msg(format!("`{}`: cannot run: {e}", cptriage.display())))?;
    let verdict: Option<Value> = serde_json::from_slice(&out.stdout).ok();
    let error = verdict.is_none().then(|| {
        let e = String::from_utf8_lossy(&out.stderr);
        format!("no JSON verdict (exit {:?}): {}", out.status.code(), e.trim())
    });
    Ok(Diagnosis {
        verdict,
        exit_code: out.status.code(),
        error,
    })
}

/// Runs `cptriage diagnose` on a run's recording, logs, or both, and judges
/// it; with `interval_ms`, the recording as scraped at that interval
/// (crate `interval`; the logs are never subsampled).
pub(crate) fn diagnose_and_judge_from(
    cptriage: &Path,
    run: &Path,
    from: DiagnoseFrom,
    interval_ms: Option<i64>,
) -> Result<(Result1, Option<Value>), LabError> {
    let truth = Truth::read(&run.join(TRUTH_FILE))?;
    // 0: not above any recording's own interval, i.e. the recording as it is.
    let interval_ms = interval_ms.filter(|_| from != DiagnoseFrom::Logs).unwrap_or(0);
    let sampling = interval::sampling(&truth, interval_ms);
    let (rec, _tmp) = recording_at(run, sampling)?;
    let logs = (from != DiagnoseFrom::Metrics).then(|| logs_dir(run));
    // From logs alone, the run ends with its recording: the lab's teardown
    // after it (the members killed) is not part of the scenario.
    let Diagnosis {
        verdict,
        exit_code,
        error,
    } = diagnose(
        cptriage,
        (from != DiagnoseFrom::Logs).then_some(rec.as_path()),
        logs.as_deref(),
        (from == DiagnoseFrom::Logs).then_some(truth.recording_to_ms),
    )?;
    let v = verdict.as_ref().unwrap_or(&Value::Null);
    let latest = interval::onset_latest_s(&truth, interval_ms);
    let judgement = if from == DiagnoseFrom::Logs {
        judge_logs(&truth, v)
    } else {
        judge_within(&truth, v, latest)
    };
    let known_failure = if from == DiagnoseFrom::Logs {
        truth.known_failure_logs.clone()
    } else {
        interval::known_failure_at(&truth, interval_ms).cloned()
    };
    Ok((
        Result1 {
            run: run.to_path_buf(),
            scenario: truth.scenario.clone(),
            etcd_version: truth.etcd_version.clone(),
            expect: truth.expect.clone(),
            members: truth.members.clone(),
            injected_at_ms: truth.injected_at_ms,
            interval_seconds: interval::effective_ms(&truth, interval_ms) as f64 / 1000.0,
            subsampled: sampling != Sampling::AsRecorded,
            onset_window_seconds: [ONSET_EARLIEST_S, latest],
            exit_code,
            error,
            pass: judgement.pass(),
            judgement,
            known_failure,
        },
        verdict,
    ))
}

/// Diagnoses and judges every run, `jobs` at a time, in run order.
pub(crate) fn judge_all(
    cptriage: &Path,
    runs: &[PathBuf],
    jobs: usize,
    from: DiagnoseFrom,
    interval_ms: Option<i64>,
) -> Result<Vec<Result1>, LabError> {
    let next = Mutex::new(0usize);
    let slots: Mutex<Vec<Option<Result<Result1, LabError>>>> =
        Mutex::new((0..runs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                if i >= runs.len() {
                    break;
                }
                let r = diagnose_and_judge_from(cptriage, &runs[i], from, interval_ms).map(|(r, _)| r);
                slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(LabError::msg("run not judged"))))
        .collect()
}

fn expected_text(r: &Result1) -> String {
    let e = &r.expect;
    let mut s = e.status.clone();
    if let (Some(a), Some(sa)) = (&e.axis, &e.sub_axis) {
        let _ = write!(s, " {a}/{sa}");
    }
    if !r.members.is_empty() {
        let _ = write!(s, " {}", r.members.join(","));
    }
    s
}

fn got_text(r: &Result1) -> String {
    if r.error.is_some() {
        return "error".into();
    }
    let g = &r.judgement.got;
    let mut s = g.status.clone().unwrap_or_else(|| "-".into());
    if let Some(a) = &g.axis {
        let _ = write!(s, " {a}");
        if let Some(sa) = &g.sub_axis {
            let _ = write!(s, "/{sa}");
        }
    }
    if !g.instances.is_empty() {
        let _ = write!(s, " {}", g.instances.join(","));
    }
    s
}

fn cell(j: &Judgement, criterion: &str) -> String {
    match j.check(criterion) {
        Some(c) => match c.outcome {
            Outcome::Pass => match criterion {
                "onset" => format!("ok {}", c.got),
                _ => "ok".into(),
            },
            Outcome::Fail => format!("FAIL {}", c.got),
            Outcome::NotApplicable => "-".into(),
        },
        None => "?".into(),
    }
}

/// The run's short name: its directory name.
fn run_name(r: &Result1) -> String {
    r.run
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The onset column's header: with the accepted range when every run
/// shares it (`onset -5s..+45s`).
fn onset_header(results: &[Result1]) -> String {
    let mut bounds: Vec<String> = results
        .iter()
        .map(|r| onset_bound_text(r.onset_window_seconds[1]))
        .collect();
    bounds.sort();
    bounds.dedup();
    match bounds.as_slice() {
        [one] => format!("onset {one}"),
        _ => "onset".into(),
    }
}

/// The confusion table: one row per run, a column per criterion, then totals
/// per scenario and etcd version.
pub(crate) fn table(results: &[Result1]) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    let mut header: Vec<String> = ["scenario", "etcd", "run", "expected", "got"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    header.extend(CRITERIA.iter().map(|c| match *c {
        "onset" => onset_header(results),
        c => c.to_string(),
    }));
    header.push("result".into());
    t.set_header(header);
    for r in results {
        let mut row = vec![
            r.scenario.clone(),
            r.etcd_version.clone(),
            run_name(r),
            expected_text(r),
            got_text(r),
        ];
        row.extend(CRITERIA.iter().map(|c| cell(&r.judgement, c)));
        row.push(
            match (r.pass, &r.known_failure) {
                (true, Some(_)) => "PASS (listed as known failure)",
                (true, None) => "PASS",
                (false, Some(_)) => "FAIL (known)",
                (false, None) => "FAIL",
            }
            .into(),
        );
        t.add_row(row);
    }
    let mut out = t.to_string();
    out.push('\n');
    // Totals per scenario × version.
    let mut keys: Vec<(String, String)> = results
        .iter()
        .map(|r| (r.scenario.clone(), r.etcd_version.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    let mut s = Table::new();
    s.load_style(UTF8_FULL_CONDENSED);
    let mut header = vec!["scenario", "etcd", "runs", "pass"];
    header.extend(CRITERIA);
    s.set_header(header);
    for (sc, v) in &keys {
        let rs: Vec<&Result1> = results
            .iter()
            .filter(|r| &r.scenario == sc && &r.etcd_version == v)
            .collect();
        let mut row = vec![
            sc.clone(),
            v.clone(),
            rs.len().to_string(),
            rs.iter().filter(|r| r.pass).count().to_string(),
        ];
        for c in CRITERIA {
            let judged: Vec<_> = rs
                .iter()
                .filter_map(|r| r.judgement.check(c))
                .filter(|k| k.outcome != Outcome::NotApplicable)
                .collect();
            row.push(if judged.is_empty() {
                "-".into()
            } else {
                format!(
                    "{}/{}",
                    judged.iter().filter(|k| k.outcome == Outcome::Pass).count(),
                    judged.len()
                )
            });
        }
        s.add_row(row);
    }
    out.push_str(&s.to_string());
    out.push('\n');
    out.push_str(&matrix(results));
    let pass = results.iter().filter(|r| r.pass).count();
    let healthy: Vec<&Result1> = results.iter().filter(|r| r.expect.status == "healthy").collect();
    let false_alarms = healthy
        .iter()
        .filter(|r| r.judgement.got.status.as_deref() == Some("degraded"))
        .count();
    let _ = write!(
        out,
        "\n{pass}/{} runs pass; false alarms (degraded on a healthy run): {false_alarms}/{}",
        results.len(),
        healthy.len()
    );
    for r in results.iter().filter(|r| r.error.is_some()) {
        let _ = write!(out, "\n{}: {}", r.run.display(), r.error.as_deref().unwrap_or(""));
    }
    out.push('\n');
    out
}

/// A verdict class: `healthy`, `inconclusive`, or `<axis>/<sub-axis>`.
fn class(status: Option<&str>, axis: Option<&str>, sub: Option<&str>) -> String {
    match (status, axis) {
        (Some(st @ ("degraded" | "recovered")), Some(a)) => {
            let prefix = if st == "recovered" { "recovered " } else { "" };
            match sub {
                Some(s) => format!("{prefix}{a}/{s}"),
                None => format!("{prefix}{a}"),
            }
        }
        (Some(s), _) => s.to_string(),
        (None, _) => "error".into(),
    }
}

/// The confusion matrix: expected verdict class (rows) × the class cptriage
/// answered (columns), counting runs.
fn matrix(results: &[Result1]) -> String {
    let pairs: Vec<(String, String)> = results
        .iter()
        .map(|r| {
            let e = &r.expect;
            let g = &r.judgement.got;
            (
                class(Some(&e.status), e.axis.as_deref(), e.sub_axis.as_deref()),
                class(g.status.as_deref(), g.axis.as_deref(), g.sub_axis.as_deref()),
            )
        })
        .collect();
    let mut rows: Vec<&String> = pairs.iter().map(|(e, _)| e).collect();
    rows.sort();
    rows.dedup();
    let mut cols: Vec<&String> = pairs.iter().map(|(_, g)| g).collect();
    cols.sort();
    cols.dedup();
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    let mut header = vec!["expected \\ got".to_string()];
    header.extend(cols.iter().map(|c| (*c).clone()));
    t.set_header(header);
    for r in &rows {
        let mut row = vec![(*r).clone()];
        for c in &cols {
            let n = pairs.iter().filter(|(e, g)| e == *r && g == *c).count();
            row.push(if n == 0 { ".".into() } else { n.to_string() });
        }
        t.add_row(row);
    }
    t.to_string()
}

/// Writes the results file (JSON, [`Results`]).
pub(crate) fn write_results(path: &Path, judge: &Judge, blocks: &[Block]) -> Result<(), LabError> {
    let doc = Results {
        schema: "cptriage-lab/results/v2",
        cptriage: judge,
        intervals: blocks,
    };
    let text = serde_json::to_string_pretty(&doc).map_err(|e| LabError::msg(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| LabError::msg(format!("`{}`: {e}", path.display())))
}
