//! The profile matrix: every scenario (`testdata/scenarios`), the shipped
//! capture and the lab recordings (`testdata/lab`) diagnosed under every
//! monitoring profile (`testdata/profiles`), each verdict judged against the
//! source's expected one. A cell passes when the verdict is right, or
//! honestly less: the right axis with a sub-axis the profile cannot read, an
//! undecided cause, or inconclusive. It fails on a wrong root cause, and on
//! `healthy` for a fault unless the report says the part that shows it was
//! not observed. `cargo run -p cptriage-testkit --bin profile-matrix` prints
//! the table of docs/accuracy.md; `tests/it/profile_matrix.rs` asserts it.

use std::path::Path;

use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{AxisState, Report, Status};
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
    /// The expected status and axis.
    Right,
    /// The expected axis; a sub-axis the profile could not read, or none.
    LessSpecific(String),
    /// The failing axis named, its cause left undecided.
    Undecided(String),
    /// The data cannot decide.
    Inconclusive,
    /// Healthy, with the part that shows the fault not observed (said so).
    NotObserved,
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
            Outcome::LessSpecific(a) => format!("right axis: {a}"),
            Outcome::Undecided(a) => format!("undecided: {a}"),
            Outcome::Inconclusive => "inconclusive".into(),
            Outcome::NotObserved => "not observed".into(),
            Outcome::Wrong(w) => format!("**WRONG**: {w}"),
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
        Status::Healthy if !r.scope.not_observed.is_empty() => return Outcome::NotObserved,
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

/// Every source: the scenarios, the shipped capture, the lab recordings.
pub fn sources(root: &Path) -> Result<Vec<Source>, String> {
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
    let cap = root.join("testdata/captures/bitter-zone-etcd-first");
    let (snaps, failures) = read_capture(&cap)?;
    out.push(Source {
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
    });
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
    pub profile: String,
    pub outcome: Outcome,
}

/// Every source under every profile, on `threads` threads.
pub fn run(sources: &[Source], profiles: &[Profile], rules: &RuleSet, threads: usize) -> Vec<Cell> {
    let jobs: Vec<(usize, usize)> = (0..sources.len())
        .flat_map(|s| (0..profiles.len()).map(move |p| (s, p)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let cells = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..threads.max(1) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(s, p)) = jobs.get(i) else { break };
                let outcome = match diagnose(&sources[s], &profiles[p], rules) {
                    Ok(r) => judge(&sources[s].expect, &r),
                    Err(e) if e.contains("no snapshots") => Outcome::Inconclusive,
                    Err(e) => Outcome::Wrong(format!("error: {e}")),
                };
                cells
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((
                        i,
                        Cell {
                            source: sources[s].name.clone(),
                            kind: sources[s].kind,
                            profile: profiles[p].name.clone(),
                            outcome,
                        },
                    ));
            });
        }
    });
    let mut v = cells
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, c)| c).collect()
}

/// The Markdown table: one row per source, one column per profile.
pub fn table(cells: &[Cell], profiles: &[Profile]) -> String {
    let mut s = String::from("| source |");
    for p in profiles {
        s.push_str(&format!(" {} |", p.name));
    }
    s.push_str("\n|---|");
    for _ in profiles {
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
        for p in profiles {
            let cell = cells
                .iter()
                .find(|c| c.source == name && c.profile == p.name)
                .map(|c| c.outcome.cell())
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
pub fn run_all(root: &Path, threads: usize) -> Result<(Vec<Cell>, Vec<Profile>), String> {
    let rules = RuleSet::default_rules().map_err(|e| e.to_string())?;
    let profiles = Profile::load_dir(&root.join("testdata/profiles")).map_err(|e| e.to_string())?;
    let sources = sources(root)?;
    Ok((run(&sources, &profiles, &rules, threads), profiles))
}

/// `doc` with the text between [`BEGIN`] and [`END`] replaced by `table`.
pub fn splice(doc: &str, table: &str) -> Result<String, String> {
    let (Some(a), Some(b)) = (doc.find(BEGIN), doc.find(END)) else {
        return Err("the profile-matrix markers are missing".into());
    };
    Ok(format!("{}{BEGIN}\n{table}{}", &doc[..a], &doc[b..]))
}
