//! The profile matrix: every scenario (`testdata/scenarios`), the shipped
//! capture and the lab recordings (`testdata/lab`) diagnosed on their full
//! data and under every monitoring profile (`testdata/profiles`). The full
//! data is judged against the source's expected verdict ([`judge`]); each
//! profile's verdict against the full data's ([`compare`]): the same, or
//! honestly weaker (a less specific sub-axis, symptoms only, an undecided
//! cause, inconclusive, healthy only where every axis that shows the fault
//! could not be read), never a different root cause, never an axis the full
//! data does not raise. `cargo run -p cptriage-testkit --bin profile-matrix`
//! prints the table of docs/accuracy.md; `tests/it/profile_matrix.rs`
//! asserts the scenarios' and the shipped capture's cells and rows.

use std::path::Path;

use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{AxisState, Report, RootCause, Status};
use cptriage::source::capture::manifest;
use cptriage::source::ingest::{self, Keep, MemorySnapshot, ScrapeFailure};
use cptriage::store::Millis;

use crate::profile::Profile;

/// What a source should be diagnosed as with every family read.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub status: String,
    pub axis: Option<String>,
    pub sub_axis: Option<String>,
    /// The fault was undone before the end: `recovered` is right too.
    pub may_recover: bool,
}

/// One input of the matrix, held in memory.
#[derive(Clone)]
pub struct Source {
    pub name: String,
    pub kind: &'static str,
    pub expect: Expect,
    pub snaps: Vec<MemorySnapshot>,
    pub failures: Vec<ScrapeFailure>,
}

/// How a verdict compares with the expected one.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The expected status and axis (the full data, judged against the
    /// source's expected verdict).
    Right,
    /// The same verdict as on the full data (status class, axis, sub-axis).
    Same,
    /// The expected axis; a sub-axis the profile could not read, or none.
    LessSpecific(String),
    /// The failing axis named, its cause left undecided.
    Undecided(String),
    /// A fallback leaf: clients are affected, no part shows why.
    SymptomsOnly(String),
    /// The data cannot decide.
    Inconclusive,
    /// Healthy, with every axis that shows the fault not read (said so).
    NotObserved(String),
    /// The full data's failing axis, still degraded because its recovery
    /// could not be confirmed (the signals that could show it continuing
    /// were not read, said so) where the full data says it recovered.
    RecoveryUnconfirmed(String),
    /// The full data's failing axis, still degraded where the full data saw
    /// it end less than one of the profile's rate windows before the
    /// assessment: a longer window still holds the incident (a 60 s scrape
    /// rates over 4 minutes), and the report says "still failing" from it.
    EndNotInWindow(String),
    /// A wrong root cause, a wrong status, or healthy from unread signals.
    Wrong(String),
}

impl Outcome {
    pub fn ok(&self) -> bool {
        !matches!(self, Outcome::Wrong(_))
    }

    /// The table cell.
    pub fn cell(&self) -> String {
        match self {
            Outcome::Right => "right".into(),
            Outcome::Same => "same".into(),
            Outcome::LessSpecific(a) => format!("right axis: {a}"),
            Outcome::Undecided(a) => format!("undecided: {a}"),
            Outcome::SymptomsOnly(a) => format!("symptoms only: {a}"),
            Outcome::Inconclusive => "inconclusive".into(),
            Outcome::NotObserved(a) if a.is_empty() => "not observed".into(),
            Outcome::NotObserved(a) => format!("not observed: {a}"),
            Outcome::RecoveryUnconfirmed(a) => format!("recovery not confirmed: {a}"),
            Outcome::EndNotInWindow(a) => format!("end not in its window: {a}"),
            Outcome::Wrong(w) => format!("**wrong**: {w}"),
        }
    }
}

fn axis_name(axis: &str, sub: &Option<String>) -> String {
    match sub {
        Some(s) => format!("{axis}/{s}"),
        None => axis.to_string(),
    }
}

/// Judges a report against the expected verdict.
pub fn judge(expect: &Expect, r: &Report) -> Outcome {
    let want_axis = expect.axis.as_ref().map(|a| axis_name(a, &expect.sub_axis));
    match r.status {
        Status::Inconclusive => return Outcome::Inconclusive,
        Status::Healthy if expect.status == "healthy" => return Outcome::Right,
        Status::Healthy if !r.scope.not_observed.is_empty() => return Outcome::NotObserved(String::new()),
        Status::Healthy => return Outcome::Wrong(format!("healthy, want {}", want_axis.unwrap_or_default())),
        _ => {}
    }
    if expect.status == "healthy" {
        let what = r
            .verdict
            .failing()
            .map(|rc| axis_name(&rc.axis, &rc.sub_axis))
            .unwrap_or_default();
        return Outcome::Wrong(format!("{} {what}, want healthy", r.status.as_str()));
    }
    let Some(rc) = r.verdict.failing() else {
        return Outcome::Wrong(format!("{} without an axis", r.status.as_str()));
    };
    let got = axis_name(&rc.axis, &rc.sub_axis);
    if let Some(u) = &r.verdict.undecided {
        let unread: Vec<&str> = u.unread.iter().map(|c| c.title.as_str()).collect();
        return Outcome::Undecided(format!("{got} failing, {} unread", unread.join(", ")));
    }
    let status_ok =
        r.status.as_str() == expect.status || (expect.may_recover && r.status == Status::Recovered);
    let Some(want) = &expect.axis else {
        return Outcome::Wrong(format!("{} {got}, want {}", r.status.as_str(), expect.status));
    };
    if !status_ok {
        return Outcome::Wrong(format!("{} {got}, want {}", r.status.as_str(), expect.status));
    }
    if rc.axis != *want {
        return Outcome::Wrong(format!(
            "root cause {got}, want {}",
            want_axis.unwrap_or_default()
        ));
    }
    if rc.sub_axis == expect.sub_axis {
        return Outcome::Right;
    }
    // Another sub-axis (or none) is less specific, never wrong, only when the
    // expected sub-axis could not be read.
    let expected_unread = r
        .axes
        .iter()
        .filter(|a| a.axis == *want && a.sub_axis == expect.sub_axis)
        .all(|a| matches!(a.state, AxisState::NotChecked | AxisState::Unknown));
    if rc.sub_axis.is_none() || expected_unread {
        Outcome::LessSpecific(got)
    } else {
        Outcome::Wrong(format!(
            "root cause {got}, want {}",
            want_axis.unwrap_or_default()
        ))
    }
}

/// What a verdict claims, in the classes the matrix compares.
fn claim(r: &Report) -> String {
    match (r.status, r.verdict.failing()) {
        (Status::Healthy | Status::Inconclusive, _) | (_, None) => r.status.as_str().to_string(),
        (_, Some(rc)) => format!("{} {}", r.status.as_str(), axis_name(&rc.axis, &rc.sub_axis)),
    }
}

/// Whether a leaf could not be read in `r` (no signal of it judged).
fn unread(r: &Report, leaf: &str) -> bool {
    r.axes
        .iter()
        .find(|a| a.leaf == leaf)
        .is_none_or(|a| matches!(a.state, AxisState::NotChecked | AxisState::Unknown))
}

/// Whether `signal` was judged at some step for some instance in `r`.
fn signal_read(r: &Report, signal: &str) -> bool {
    r.axes
        .iter()
        .flat_map(|a| &a.evidence)
        .filter(|e| e.signal == signal)
        .any(|e| e.instance_lit.values().any(|v| v.iter().any(Option::is_some)))
}

/// Whether every signal that lit `leaf` on the full data went unread in
/// `got`: the axis may be read through its other signals, but not what
/// showed the fault (an etcd axis lit from the apiserver's etcd latency,
/// under a profile that reads the etcd members alone).
fn lit_by_unread(full: &Report, got: &Report, leaf: &str) -> bool {
    let Some(fa) = full.axes.iter().find(|a| a.leaf == leaf) else {
        return false;
    };
    let lit: Vec<&str> = fa
        .evidence
        .iter()
        .filter(|e| e.instance_lit.values().any(|v| v.contains(&Some(true))))
        .map(|e| e.signal.as_str())
        .collect();
    !lit.is_empty() && lit.iter().all(|s| !signal_read(got, s))
}

/// Judges the verdict on re-shaped data (`got`) against the verdict on the
/// full data (`full`) of the same source. The re-shaped verdict may be the
/// same, or honestly weaker, never different:
///
/// - **inconclusive** is always acceptable (less data, no claim);
/// - **healthy** only where the full verdict is healthy, or where every leaf
///   lit on the full data could not be read at all (the profile drops every
///   signal that shows the fault, e.g. 401s, which only
///   `authentication_attempts` counts) and the report says so (those axes
///   "not checked", or their role not observed), or where none of the
///   signals that lit it on the full data was read: "not observed";
/// - a **failing axis** (root cause or undecided) only where the full data
///   has one: a root cause on the same axis, the same sub-axis or a less
///   specific one (none, or another where the full sub-axis could not be
///   read); an undecided cause for the same failing axis, or for an axis lit
///   on the full data when the full root cause could not be read;
/// - **recovery not confirmed**: degraded where the full data has recovered,
///   when the report says the recovery could not be confirmed
///   (`recovery_unconfirmed`: the signals that could show the incident
///   continuing were not read), the axis judged as above;
/// - **end not in its window**: degraded where the full data saw the axis
///   end less than one of the profile's rate windows (`$window`) before the
///   assessment: the profile's longer window still holds the incident, the
///   axis judged as above;
/// - a **fallback** leaf of another axis (`fallback: true`, `joint`:
///   "clients are affected, and no part of the control plane shows why")
///   wherever the full data has a failing axis: it names the symptom, not a
///   cause ("symptoms only");
/// - the incident ongoing or over (`recovered`) as on the full data.
///
/// Everything else is wrong: a root cause the full data does not name, a
/// root cause where the full data leaves it undecided, an axis raised where
/// the full data is healthy or inconclusive, healthy from signals read.
pub fn compare(full: &Report, got: &Report, fallbacks: &[String]) -> Outcome {
    let wrong = || Outcome::Wrong(format!("{}, full data: {}", claim(got), claim(full)));
    let full_fail = full.verdict.failing();
    match got.status {
        Status::Inconclusive => return Outcome::Inconclusive,
        Status::Healthy if full.status == Status::Healthy => return Outcome::Same,
        Status::Healthy => {
            let lit: Vec<&str> = full
                .axes
                .iter()
                .filter(|a| a.state == AxisState::Lit)
                .map(|a| a.leaf.as_str())
                .collect();
            let not_seen = |l: &&str| unread(got, l) || lit_by_unread(full, got, l);
            return if full_fail.is_some() && !lit.is_empty() && lit.iter().all(not_seen) {
                Outcome::NotObserved(lit.join(", "))
            } else {
                wrong()
            };
        }
        _ => {}
    }
    let (Some(want), Some(rc)) = (full_fail, got.verdict.failing()) else {
        return wrong();
    };
    // Degraded for want of the signals that would show the end, where the
    // full data saw it end: no claim that the incident is over, said so.
    let still_failing = full.status == Status::Recovered && got.status == Status::Degraded;
    let unconfirmed = still_failing && got.verdict.recovery_unconfirmed.is_some();
    let end_not_in_window = still_failing
        && want
            .recovered
            .is_some_and(|r| r > got.window.at - got.window.range);
    if (got.status == Status::Recovered) != (full.status == Status::Recovered)
        && !unconfirmed
        && !end_not_in_window
    {
        return wrong();
    }
    let got_name = axis_name(&rc.axis, &rc.sub_axis);
    let outcome = compare_axis(full, got, want, rc, fallbacks, &got_name);
    match outcome {
        Outcome::Same | Outcome::LessSpecific(_) if unconfirmed => Outcome::RecoveryUnconfirmed(got_name),
        Outcome::Same | Outcome::LessSpecific(_) if end_not_in_window => Outcome::EndNotInWindow(got_name),
        o => o,
    }
}

/// The failing axis of `got` (`rc`) against the full data's (`want`).
fn compare_axis(
    full: &Report,
    got: &Report,
    want: &RootCause,
    rc: &RootCause,
    fallbacks: &[String],
    got_name: &str,
) -> Outcome {
    let wrong = || Outcome::Wrong(format!("{}, full data: {}", claim(got), claim(full)));
    let got_name = got_name.to_string();
    if fallbacks.contains(&rc.leaf) && !fallbacks.contains(&want.leaf) && rc.axis != want.axis {
        return Outcome::SymptomsOnly(got_name);
    }
    if let Some(u) = &got.verdict.undecided {
        let lit_on_full = full
            .axes
            .iter()
            .any(|a| a.leaf == rc.leaf && a.state == AxisState::Lit);
        let ok = rc.leaf == want.leaf || rc.axis == want.axis || (lit_on_full && unread(got, &want.leaf));
        if !ok || u.unread.is_empty() {
            return wrong();
        }
        let names: Vec<&str> = u.unread.iter().map(|c| c.title.as_str()).collect();
        return Outcome::Undecided(format!("{got_name} failing, {} unread", names.join(", ")));
    }
    if full.verdict.undecided.is_some() || rc.axis != want.axis {
        return wrong();
    }
    if rc.sub_axis == want.sub_axis {
        Outcome::Same
    } else if rc.sub_axis.is_none() || unread(got, &want.leaf) {
        Outcome::LessSpecific(got_name)
    } else {
        wrong()
    }
}

/// Diagnoses `src` as `profile` shows it.
pub fn diagnose(src: &Source, profile: &Profile, rules: &RuleSet) -> Result<Report, String> {
    let snaps = profile.apply_snapshots(src.snaps.clone());
    let targets: Vec<&str> = snaps.iter().map(|s| s.target.as_str()).collect();
    let failures = src
        .failures
        .iter()
        .filter(|f| targets.contains(&f.target.as_str()))
        .cloned()
        .collect();
    let ds = ingest::load_memory(snaps, failures, &Keep::Names(rules.referenced_metrics()))
        .map_err(|e| e.to_string())?;
    engine::diagnose(rules, &ds, &Options::default()).map_err(|e| e.to_string())
}

/// Diagnoses `src` as it is (every family, every scrape).
pub fn diagnose_full(src: &Source, rules: &RuleSet) -> Result<Report, String> {
    let ds = ingest::load_memory(
        src.snaps.clone(),
        src.failures.clone(),
        &Keep::Names(rules.referenced_metrics()),
    )
    .map_err(|e| e.to_string())?;
    engine::diagnose(rules, &ds, &Options::default()).map_err(|e| e.to_string())
}

/// Every source: the scenarios, the shipped capture, the lab recordings.
pub fn sources(root: &Path) -> Result<Vec<Source>, String> {
    let mut out = scenario_sources(root)?;
    out.push(capture_source(root)?);
    out.extend(lab_sources(root)?);
    Ok(out)
}

/// The scenarios of `testdata/scenarios` that state an expected verdict.
pub fn scenario_sources(root: &Path) -> Result<Vec<Source>, String> {
    let mut out = Vec::new();
    let dir = root.join("testdata/scenarios");
    let mut specs: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    specs.sort();
    for p in specs {
        let spec = crate::scenario::load_spec(&p).map_err(|e| e.to_string())?;
        let Some(e) = spec.spec.expect.clone() else {
            continue;
        };
        let name = spec.spec.name.clone();
        let may_recover =
            spec.spec.effects.iter().all(|m| m.until.is_some()) && !spec.spec.effects.is_empty();
        let snaps = crate::scenario::snapshots(spec, &p.display().to_string()).map_err(|e| e.to_string())?;
        out.push(Source {
            name,
            kind: "scenario",
            expect: Expect {
                status: e.status,
                axis: e.axis,
                sub_axis: e.sub_axis,
                may_recover,
            },
            snaps,
            failures: Vec::new(),
        });
    }
    Ok(out)
}

/// The shipped capture (`testdata/captures/bitter-zone-etcd-first`).
pub fn capture_source(root: &Path) -> Result<Source, String> {
    let (snaps, failures) = read_capture(&root.join("testdata/captures/bitter-zone-etcd-first"))?;
    Ok(Source {
        name: "bitter-zone-etcd-first".into(),
        kind: "capture",
        expect: Expect {
            status: "degraded".into(),
            axis: Some("etcd".into()),
            sub_axis: Some("disk".into()),
            may_recover: false,
        },
        snaps,
        failures,
    })
}

/// The lab recordings of `testdata/lab` without a `known_failure`.
pub fn lab_sources(root: &Path) -> Result<Vec<Source>, String> {
    let mut out = Vec::new();
    let lab = root.join("testdata/lab");
    let mut runs: Vec<_> = std::fs::read_dir(&lab)
        .map_err(|e| format!("{}: {e}", lab.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("truth.json").is_file())
        .collect();
    runs.sort();
    for run in runs {
        let t: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.join("truth.json"))
                .map_err(|e| format!("{}: {e}", run.display()))?,
        )
        .map_err(|e| format!("{}: {e}", run.display()))?;
        if t.get("known_failure").is_some_and(|k| !k.is_null()) {
            continue;
        }
        let s = |k: &str| t["expect"][k].as_str().map(str::to_string);
        let (snaps, failures) = read_capture(&run.join("recording"))?;
        out.push(Source {
            name: run.file_name().unwrap_or_default().to_string_lossy().to_string(),
            kind: "lab",
            expect: Expect {
                status: s("status").unwrap_or_default(),
                axis: s("axis"),
                sub_axis: s("sub_axis"),
                may_recover: !t["cleared_at_ms"].is_null(),
            },
            snaps,
            failures,
        });
    }
    Ok(out)
}

/// A capture directory in memory: its snapshots (roles from the manifest,
/// times from the file names) and failed scrapes.
pub fn read_capture(dir: &Path) -> Result<(Vec<MemorySnapshot>, Vec<ScrapeFailure>), String> {
    let mpath = dir.join("manifest.yaml");
    let text = std::fs::read_to_string(&mpath).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let m = manifest::parse(&text).map_err(|e| format!("{}: {}", mpath.display(), e.message))?;
    let mut snaps = Vec::new();
    for t in &m.targets {
        let tdir = dir.join(&t.name);
        for e in std::fs::read_dir(&tdir).map_err(|e| format!("{}: {e}", tdir.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let Some(time) = name.split('.').next().and_then(|x| x.parse::<Millis>().ok()) else {
                continue;
            };
            let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            snaps.push(MemorySnapshot {
                target: t.name.clone(),
                role: Some(t.role),
                role_reason: "capture manifest".into(),
                time,
                origin: p.display().to_string(),
                bytes: std::sync::Arc::new(bytes),
            });
        }
    }
    Ok((snaps, m.failures))
}

/// One diagnosed cell.
pub struct Cell {
    pub source: String,
    pub kind: &'static str,
    /// A profile's name, or [`EXPECTED`] for the full data judged against
    /// the source's expected verdict.
    pub profile: String,
    pub outcome: Outcome,
}

/// Cells wrong today, each with its cause: `tests/it/profile_matrix.rs` and
/// the `profile-matrix` command fail when one of them is right (remove it)
/// and when any other cell is wrong. Fix the mechanism; never add a cell here
/// to silence a regression.
pub const KNOWN_WRONG: &[(&str, &str, &str)] = &[
    (
        "long-overload-etcd3.4-1",
        "no-buckets",
        "a 35 s write burst slowed commits for about 15 s (p99 over 50 ms at 5 s scrapes); the mean commit time stays under its 100 ms floor: a mean hides a tail",
    ),
    (
        "long-overload-etcd3.4-1",
        "scrape-60s",
        "the same 35 s burst inside a 4 min rate window: every latency stays under its threshold, and a write surge alone does not decide",
    ),
    (
        "leader-flapping-etcd3.5-1",
        "sum-count-only",
        "the flapping ended 30 s before the end; the full data's last peer round trips (recorded every 30 s, 367-406 ms, of the flapping) keep etcd/raft lit through the steps with no record since; this profile drops the peer histograms, and the leader changes it reads stopped: recovered, which the lab's truth accepts too",
    ),
];

/// Why a cell is known to be wrong ([`KNOWN_WRONG`]).
pub fn known_wrong(source: &str, profile: &str) -> Option<&'static str> {
    KNOWN_WRONG
        .iter()
        .find(|(s, p, _)| *s == source && *p == profile)
        .map(|(_, _, why)| *why)
}

/// Cells that fail the matrix: wrong and not known to be, or known to be
/// wrong and now acceptable.
pub fn problems(cells: &[Cell]) -> Vec<String> {
    let mut out = Vec::new();
    for c in cells {
        match (c.outcome.ok(), known_wrong(&c.source, &c.profile)) {
            (false, None) => out.push(format!("{} × {}: {}", c.source, c.profile, c.outcome.cell())),
            (true, Some(why)) => out.push(format!(
                "{} × {}: {} now (known wrong: {why}); remove it from matrix::KNOWN_WRONG",
                c.source,
                c.profile,
                c.outcome.cell()
            )),
            _ => {}
        }
    }
    out
}

/// The column of the full data judged against the expected verdict.
pub const EXPECTED: &str = "full vs expected";

/// A diagnosis that could not be made because the profile left no usable
/// data (cptriage answers "unusable data", exit 3): no claim, like
/// inconclusive.
fn no_data(e: &str) -> bool {
    e.contains("no snapshots") || e.contains("no usable snapshot")
}

/// One source: the full data against the expected verdict, then each
/// profile against the full data's verdict.
fn run_source(src: &Source, profiles: &[Profile], rules: &RuleSet) -> Vec<Cell> {
    let cell = |profile: &str, outcome| Cell {
        source: src.name.clone(),
        kind: src.kind,
        profile: profile.to_string(),
        outcome,
    };
    let full = match diagnose_full(src, rules) {
        Ok(r) => r,
        Err(e) => return vec![cell(EXPECTED, Outcome::Wrong(format!("error: {e}")))],
    };
    let fallbacks: Vec<String> = rules
        .leaves
        .iter()
        .filter(|l| l.fallback)
        .map(|l| l.id.clone())
        .collect();
    let mut out = vec![cell(EXPECTED, judge(&src.expect, &full))];
    for p in profiles {
        let outcome = match diagnose(src, p, rules) {
            Ok(r) => compare(&full, &r, &fallbacks),
            Err(e) if no_data(&e) => Outcome::Inconclusive,
            Err(e) => Outcome::Wrong(format!("error: {e}")),
        };
        out.push(cell(&p.name, outcome));
    }
    out
}

/// Every source under every profile, one source at a time on each of
/// `threads` threads.
pub fn run(sources: &[Source], profiles: &[Profile], rules: &RuleSet, threads: usize) -> Vec<Cell> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let cells = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..threads.max(1) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(src) = sources.get(i) else { break };
                let v = run_source(src, profiles, rules);
                cells
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((i, v));
            });
        }
    });
    let mut v = cells
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().flat_map(|(_, c)| c).collect()
}

/// The Markdown table: one row per source, one column per profile.
pub fn table(cells: &[Cell], profiles: &[Profile]) -> String {
    let columns: Vec<&str> = std::iter::once(EXPECTED)
        .chain(profiles.iter().map(|p| p.name.as_str()))
        .collect();
    let mut s = String::from("| source |");
    for c in &columns {
        s.push_str(&format!(" {c} |"));
    }
    s.push_str("\n|---|");
    for _ in &columns {
        s.push_str("---|");
    }
    s.push('\n');
    let mut rows: Vec<(&str, &str)> = Vec::new();
    for c in cells {
        if !rows.iter().any(|(n, _)| *n == c.source) {
            rows.push((&c.source, c.kind));
        }
    }
    for (name, kind) in rows {
        s.push_str(&format!("| {name} ({kind}) |"));
        for p in &columns {
            let cell = cells
                .iter()
                .find(|c| c.source == name && c.profile == *p)
                .map(|c| match known_wrong(name, p) {
                    Some(_) if !c.outcome.ok() => {
                        c.outcome.cell().replacen("**wrong**", "**wrong** (known)", 1)
                    }
                    _ => c.outcome.cell(),
                })
                .unwrap_or_default();
            s.push_str(&format!(" {cell} |"));
        }
        s.push('\n');
    }
    s
}

/// The markers around the table in docs/accuracy.md.
pub const BEGIN: &str = "<!-- profile-matrix:begin (generated by `cargo run -p cptriage-testkit --bin profile-matrix -- --write`) -->";
pub const END: &str = "<!-- profile-matrix:end -->";

/// The whole matrix of the repository at `root` with the shipped rules.
/// `only`: the sources whose name contains one of these (all when empty).
pub fn run_all(root: &Path, threads: usize, only: &[String]) -> Result<(Vec<Cell>, Vec<Profile>), String> {
    let rules = RuleSet::default_rules().map_err(|e| e.to_string())?;
    let profiles = Profile::load_dir(&root.join("testdata/profiles")).map_err(|e| e.to_string())?;
    let mut sources = sources(root)?;
    if !only.is_empty() {
        sources.retain(|s| only.iter().any(|o| s.name.contains(o.as_str())));
    }
    Ok((run(&sources, &profiles, &rules, threads), profiles))
}

/// `doc` with the text between [`BEGIN`] and [`END`] replaced by `table`.
pub fn splice(doc: &str, table: &str) -> Result<String, String> {
    let (Some(a), Some(b)) = (doc.find(BEGIN), doc.find(END)) else {
        return Err("the profile-matrix markers are missing".into());
    };
    Ok(format!("{}{BEGIN}\n{table}{}", &doc[..a], &doc[b..]))
}
