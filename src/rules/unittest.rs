//! `cptriage rules test`: promtool-style unit tests for rule files.
//!
//! A test file gives, per test, the series each target exposed in expanding
//! notation (`0+10x20`), an evaluation time and the verdict expected there:
//! status, root-cause axis/sub-axis/onset/instances, downstream axes, axes that
//! must (not) be lit. Each target's values become one `/metrics` snapshot per
//! step, loaded exactly as a capture directory is, so a rule file is tested
//! through the same loader, engine and assessment that diagnose a real dump.
//! The format is documented in `rules/README.md` ("Unit tests").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::engine::{self, BaselineSpec, Options};
use super::load::{load_file, RuleError, RuleSet};
use super::report::{axis_id, Report, Status};
use crate::source::ingest::{self, Keep, MemorySnapshot};
use crate::source::notation::{self, Point};
use crate::source::Role;
use crate::store::{is_stale, Millis};
use crate::timefmt::{format_duration, parse_duration};

/// The default spacing of input series values (promtool's default
/// `evaluation_interval` is 1m; cptriage's live rounds are 5 s apart and
/// Prometheus scrapes every 15–30 s, so 15 s is the common ground).
pub const DEFAULT_INTERVAL: Millis = 15_000;

/// A unit-test file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// At most one rule file, relative to the test file; none: the shipped rules.
    #[serde(default)]
    pub rule_files: Vec<String>,
    /// Default spacing of the input values for every test (`15s`).
    #[serde(default)]
    pub evaluation_interval: Option<String>,
    pub tests: Vec<TestCase>,
}

/// One test: the input series and the expected verdict.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    #[serde(default)]
    pub name: Option<String>,
    /// Spacing of the values (overrides `evaluation_interval`).
    #[serde(default)]
    pub interval: Option<String>,
    /// The scraped targets, each with its role and series.
    #[serde(default)]
    pub targets: Vec<TargetInput>,
    /// Series naming their target with `instance` and its role with `role`
    /// labels (promtool's flat form); both labels are required here.
    #[serde(default)]
    pub input_series: Vec<SeriesInput>,
    /// When to assess, as an offset from the first value (`10m`); default: the
    /// last step.
    #[serde(default)]
    pub eval_time: Option<String>,
    /// Evaluation step (default: the interval).
    #[serde(default)]
    pub step: Option<String>,
    /// Consecutive lit steps that make an onset (default 2).
    #[serde(default)]
    pub debounce: Option<usize>,
    /// A baseline range as offsets (default: the start of the window).
    #[serde(default)]
    pub baseline: Option<BaselineInput>,
    pub expect: ExpectInput,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetInput {
    pub name: String,
    /// `apiserver`, `etcd` or `controller-manager`.
    pub role: String,
    pub input_series: Vec<SeriesInput>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesInput {
    /// `name{label="value", ...}`.
    pub series: String,
    /// Expanding notation: `0+10x20 _ 5 stale`.
    pub values: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineInput {
    pub from: String,
    pub to: String,
}

/// The expected verdict; only what is written is checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectInput {
    /// `healthy`, `degraded` or `inconclusive`.
    pub status: String,
    #[serde(default)]
    pub root_cause: Option<RootCauseExpect>,
    /// Axes (`etcd`, `etcd/disk`) that must be lit at the evaluation time; with
    /// `exactly: true` no other axis may be.
    #[serde(default)]
    pub lit: Vec<String>,
    #[serde(default)]
    pub exactly: bool,
    /// Axes that must not be lit at the evaluation time.
    #[serde(default)]
    pub not_lit: Vec<String>,
    /// Axes reported downstream of the root cause.
    #[serde(default)]
    pub downstream: Vec<DownstreamExpect>,
    /// Substrings each of which must appear in some gap message.
    #[serde(default)]
    pub gaps: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootCauseExpect {
    pub axis: String,
    #[serde(default)]
    pub sub_axis: Option<String>,
    /// Offset of the onset from the first value.
    #[serde(default)]
    pub onset: Option<String>,
    /// How far the onset may be off (default: one step).
    #[serde(default)]
    pub onset_tolerance: Option<String>,
    /// The instances the root cause is localised to (exact set).
    #[serde(default)]
    pub instances: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamExpect {
    pub axis: String,
    #[serde(default)]
    pub sub_axis: Option<String>,
    #[serde(default)]
    pub onset: Option<String>,
}

/// Why a test file could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum UnitTestError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{col}: {message}")]
    Syntax {
        path: String,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: rule file: {source}")]
    Rules {
        path: String,
        #[source]
        source: RuleError,
    },
}

/// The outcome of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct TestOutcome {
    pub name: String,
    /// Line of the test in its file.
    pub line: usize,
    /// Empty when the test passed.
    pub failures: Vec<String>,
    /// The test itself is malformed (bad values, unknown role, …): `failures`
    /// holds the reason and nothing was evaluated.
    pub invalid: bool,
    /// One line: what the engine concluded.
    pub got: String,
}

impl TestOutcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Every test of one file.
#[derive(Debug)]
pub struct FileOutcome {
    pub path: PathBuf,
    pub rules: String,
    pub tests: Vec<TestOutcome>,
}

/// Reads a test file and runs every test in it.
pub fn run_file(path: &Path) -> Result<FileOutcome, UnitTestError> {
    let shown = path.display().to_string();
    let text = crate::limits::read_text_capped(path).map_err(|e| UnitTestError::Read {
        path: shown.clone(),
        source: e,
    })?;
    let file: TestFile = crate::source::yaml::from_str(&text).map_err(|e| UnitTestError::Syntax {
        path: shown.clone(),
        line: e.line,
        col: e.column,
        message: e.message,
    })?;
    let (rules, rules_name) = match file.rule_files.as_slice() {
        [] => (
            RuleSet::default_rules().map_err(|e| UnitTestError::Rules {
                path: shown.clone(),
                source: e,
            })?,
            "the shipped rules".to_string(),
        ),
        [one] => {
            let p = path.parent().unwrap_or(Path::new(".")).join(one);
            let r = load_file(&p).map_err(|e| UnitTestError::Rules {
                path: shown.clone(),
                source: e,
            })?;
            (r, p.display().to_string())
        }
        _ => {
            return Err(UnitTestError::Invalid {
                path: shown,
                message: "`rule_files` may name at most one rule file (a rule file is one tree)".into(),
            })
        }
    };
    let default_interval = match &file.evaluation_interval {
        Some(s) => positive_duration(s, "evaluation_interval").map_err(|m| UnitTestError::Invalid {
            path: shown.clone(),
            message: m,
        })?,
        None => DEFAULT_INTERVAL,
    };
    let lines = test_lines(&text);
    let mut tests = Vec::new();
    for (i, case) in file.tests.iter().enumerate() {
        let line = lines.get(i).copied().unwrap_or(0);
        let name = case.name.clone().unwrap_or_else(|| format!("test {}", i + 1));
        let outcome = match run_case(&rules, case, default_interval) {
            Ok((failures, got)) => TestOutcome {
                name,
                line,
                failures,
                invalid: false,
                got,
            },
            Err(m) => TestOutcome {
                name,
                line,
                failures: vec![m],
                invalid: true,
                got: String::new(),
            },
        };
        tests.push(outcome);
    }
    Ok(FileOutcome {
        path: path.to_path_buf(),
        rules: rules_name,
        tests,
    })
}

/// Lines on which the items of the top-level `tests:` list start.
fn test_lines(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_tests = false;
    let mut indent = None;
    for (n, l) in text.lines().enumerate() {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = l.len() - t.len();
        if ind == 0 {
            in_tests = t.starts_with("tests:");
            continue;
        }
        if in_tests && (t.starts_with("- ") || t == "-") {
            let i = *indent.get_or_insert(ind);
            if ind == i {
                out.push(n + 1);
            }
        }
    }
    out
}

fn positive_duration(s: &str, what: &str) -> Result<Millis, String> {
    match parse_duration(s) {
        Ok(d) if d > 0 => Ok(d),
        Ok(_) => Err(format!("`{what}` must be greater than zero, got `{s}`")),
        Err(e) => Err(format!("`{what}`: {e}")),
    }
}

fn offset(s: &str, what: &str) -> Result<Millis, String> {
    parse_duration(s).map_err(|e| format!("`{what}`: {e}"))
}

/// One target's expanded series.
#[derive(Debug, Clone)]
pub struct TargetSeries {
    pub name: String,
    pub role: Role,
    pub series: Vec<(crate::store::Labels, Vec<Point>)>,
}

fn role_of(s: &str, target: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| format!("target `{target}`: unknown role `{s}` (expected {})", Role::GIVEN))
}

fn expand(input: &SeriesInput, target: &str) -> Result<(crate::store::Labels, Vec<Point>), String> {
    let labels = notation::parse_series(&input.series).map_err(|e| format!("target `{target}`: {e}"))?;
    if labels.metric_name().is_none() {
        return Err(format!(
            "target `{target}`: series `{}` has no metric name",
            input.series
        ));
    }
    let points = notation::expand_values(&input.values)
        .map_err(|e| format!("target `{target}`, series `{}`: {e}", input.series))?;
    Ok((labels, points))
}

fn collect_targets(case: &TestCase) -> Result<Vec<TargetSeries>, String> {
    let mut by_name: BTreeMap<String, TargetSeries> = BTreeMap::new();
    for t in &case.targets {
        if t.name.trim().is_empty() {
            return Err("a target has an empty `name`".into());
        }
        let role = role_of(&t.role, &t.name)?;
        if by_name.contains_key(&t.name) {
            return Err(format!("target `{}` is listed twice", t.name));
        }
        let mut series = Vec::new();
        for s in &t.input_series {
            series.push(expand(s, &t.name)?);
        }
        by_name.insert(
            t.name.clone(),
            TargetSeries {
                name: t.name.clone(),
                role,
                series,
            },
        );
    }
    for s in &case.input_series {
        let labels = notation::parse_series(&s.series).map_err(|e| e.to_string())?;
        let (Some(inst), Some(role)) = (labels.get("instance"), labels.get("role")) else {
            return Err(format!(
                "series `{}` in `input_series` needs `instance` and `role` labels to name its target (or list it under `targets`)",
                s.series
            ));
        };
        let inst = inst.to_string();
        let role = role_of(role, &inst)?;
        let (labels, points) = expand(s, &inst)?;
        let labels = labels.drop_names(&["instance", "role"]);
        let t = by_name.entry(inst.clone()).or_insert_with(|| TargetSeries {
            name: inst.clone(),
            role,
            series: Vec::new(),
        });
        if t.role != role {
            return Err(format!(
                "target `{inst}` is given the roles {} and {}",
                t.role.as_str(),
                role.as_str()
            ));
        }
        t.series.push((labels, points));
    }
    if by_name.is_empty() {
        return Err("no input: give `targets` or `input_series`".into());
    }
    Ok(by_name.into_values().collect())
}

/// Writes one exposition-format line.
fn write_sample(out: &mut String, labels: &crate::store::Labels, v: f64) {
    let name = labels.metric_name().unwrap_or_default();
    out.push_str(name);
    let mut first = true;
    for l in labels.iter() {
        let (k, val) = (&*l.name, &*l.value);
        if k == crate::store::METRIC_NAME {
            continue;
        }
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in val.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{v}");
    }
    out.push('\n');
}

/// Turns the expanded series into one snapshot per target and step: step `i`
/// holds every series with a value at `i` (`_` and `stale` leave the series out
/// of that scrape; a step where a target has no value at all is a missed scrape).
pub fn snapshots(targets: &[TargetSeries], interval: Millis) -> Vec<MemorySnapshot> {
    let mut out = Vec::new();
    for TargetSeries { name, role, series } in targets {
        let steps = series.iter().map(|(_, p)| p.len()).max().unwrap_or(0);
        for i in 0..steps {
            let mut text = String::new();
            for (labels, points) in series {
                if let Some(Point::Value(v)) = points.get(i) {
                    if !is_stale(*v) {
                        write_sample(&mut text, labels, *v);
                    }
                }
            }
            if text.is_empty() {
                continue;
            }
            out.push(MemorySnapshot {
                target: name.clone(),
                role: Some(*role),
                role_reason: "given in the test".into(),
                time: i as Millis * interval,
                origin: format!("{name}@{}", format_duration(i as Millis * interval)),
                bytes: Arc::new(text.into_bytes()),
            });
        }
    }
    out
}

fn axis_matches(want: &str, axis: &str, sub: Option<&str>) -> bool {
    match want.split_once('/') {
        Some((a, s)) => a == axis && Some(s) == sub,
        None => want == axis,
    }
}

fn show_offset(t: Option<Millis>) -> String {
    t.map(format_duration).unwrap_or_else(|| "none".into())
}

/// Runs one test: Ok((failures, summary of what was concluded)); Err when the
/// test itself is malformed.
fn run_case(
    rules: &RuleSet,
    case: &TestCase,
    default_interval: Millis,
) -> Result<(Vec<String>, String), String> {
    let interval = match &case.interval {
        Some(s) => positive_duration(s, "interval")?,
        None => default_interval,
    };
    let targets = collect_targets(case)?;
    let snaps = snapshots(&targets, interval);
    if snaps.is_empty() {
        return Err("the input series have no values".into());
    }
    let ds = ingest::load_memory(snaps, Vec::new(), &Keep::All).map_err(|e| e.to_string())?;
    let step = case
        .step
        .as_deref()
        .map(|s| positive_duration(s, "step"))
        .transpose()?;
    let baseline = match &case.baseline {
        Some(b) => BaselineSpec::Range {
            from: offset(&b.from, "baseline.from")?,
            to: offset(&b.to, "baseline.to")?,
        },
        None => BaselineSpec::WindowStart,
    };
    if case.debounce == Some(0) {
        return Err("`debounce` must be at least 1".into());
    }
    let opts = Options {
        at: case
            .eval_time
            .as_deref()
            .map(|s| offset(s, "eval_time"))
            .transpose()?,
        step,
        baseline,
        debounce: case.debounce.unwrap_or(engine::DEFAULT_DEBOUNCE),
        ..Options::default()
    };
    let report = engine::diagnose(rules, &ds, &opts).map_err(|e| e.to_string())?;
    let tolerance_default = step.unwrap_or(interval);
    let failures = compare(&case.expect, &report, tolerance_default)?;
    Ok((failures, summary(&report)))
}

fn summary(r: &Report) -> String {
    let status = status_name(r.status);
    match &r.verdict.root_cause {
        Some(rc) => format!(
            "{status}: root cause {} onset {}{}",
            axis_id(&rc.axis, rc.sub_axis.as_deref()),
            show_offset(rc.onset),
            if rc.instances.is_empty() {
                String::new()
            } else {
                format!(" on {}", rc.instances.join(", "))
            }
        ),
        None => status.to_string(),
    }
}

fn status_name(s: Status) -> &'static str {
    s.as_str()
}

/// Every difference between the expectation and the report.
fn compare(e: &ExpectInput, r: &Report, default_tol: Millis) -> Result<Vec<String>, String> {
    let mut f = Vec::new();
    if !matches!(
        e.status.as_str(),
        "healthy" | "degraded" | "recovered" | "inconclusive"
    ) {
        return Err(format!(
            "`expect.status` must be healthy, degraded, recovered or inconclusive, got `{}`",
            e.status
        ));
    }
    let got_status = status_name(r.status);
    if e.status != got_status {
        f.push(format!("status: expected {}, got {got_status}", e.status));
    }
    if let Some(want) = &e.root_cause {
        match &r.verdict.root_cause {
            None => f.push(format!(
                "root cause: expected {}, got none",
                axis_id(&want.axis, want.sub_axis.as_deref())
            )),
            Some(rc) => {
                if want.axis != rc.axis || (want.sub_axis.is_some() && want.sub_axis != rc.sub_axis) {
                    f.push(format!(
                        "root cause: expected {}, got {}",
                        axis_id(&want.axis, want.sub_axis.as_deref()),
                        axis_id(&rc.axis, rc.sub_axis.as_deref())
                    ));
                }
                if let Some(on) = &want.onset {
                    let on = offset(on, "root_cause.onset")?;
                    let tol = match &want.onset_tolerance {
                        Some(t) => offset(t, "root_cause.onset_tolerance")?,
                        None => default_tol,
                    };
                    match rc.onset {
                        Some(got) if (got - on).abs() <= tol => {}
                        got => f.push(format!(
                            "root cause onset: expected {} ± {}, got {}",
                            format_duration(on),
                            format_duration(tol),
                            show_offset(got)
                        )),
                    }
                }
                if let Some(inst) = &want.instances {
                    let want_set: BTreeSet<&str> = inst.iter().map(|s| s.as_str()).collect();
                    let got_set: BTreeSet<&str> = rc.instances.iter().map(|s| s.as_str()).collect();
                    if want_set != got_set {
                        f.push(format!(
                            "root cause instances: expected [{}], got [{}]",
                            inst.join(", "),
                            rc.instances.join(", ")
                        ));
                    }
                }
            }
        }
    }
    let lit: Vec<(&str, Option<&str>)> = r
        .axes
        .iter()
        .filter(|a| a.lit_at_end)
        .map(|a| (a.axis.as_str(), a.sub_axis.as_deref()))
        .collect();
    let lit_names: Vec<String> = lit.iter().map(|(a, s)| axis_id(a, *s)).collect();
    for w in &e.lit {
        if !lit.iter().any(|(a, s)| axis_matches(w, a, *s)) {
            f.push(format!("expected `{w}` lit, lit: [{}]", lit_names.join(", ")));
        }
    }
    if e.exactly {
        for (a, s) in &lit {
            if !e.lit.iter().any(|w| axis_matches(w, a, *s)) {
                f.push(format!("`{}` is lit but not expected", axis_id(a, *s)));
            }
        }
    }
    for w in &e.not_lit {
        if lit.iter().any(|(a, s)| axis_matches(w, a, *s)) {
            f.push(format!("expected `{w}` not lit, lit: [{}]", lit_names.join(", ")));
        }
    }
    for d in &e.downstream {
        let found = r
            .verdict
            .downstream
            .iter()
            .find(|x| x.axis == d.axis && (d.sub_axis.is_none() || d.sub_axis == x.sub_axis));
        match (found, &d.onset) {
            (None, _) => f.push(format!(
                "expected `{}` downstream of the root cause, downstream: [{}]",
                axis_id(&d.axis, d.sub_axis.as_deref()),
                r.verdict
                    .downstream
                    .iter()
                    .map(|x| axis_id(&x.axis, x.sub_axis.as_deref()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            (Some(x), Some(on)) => {
                let on = offset(on, "downstream.onset")?;
                if (x.onset - on).abs() > default_tol {
                    f.push(format!(
                        "downstream `{}` onset: expected {} ± {}, got {}",
                        d.axis,
                        format_duration(on),
                        format_duration(default_tol),
                        format_duration(x.onset)
                    ));
                }
            }
            (Some(_), None) => {}
        }
    }
    for g in &e.gaps {
        if !r
            .gaps
            .iter()
            .any(|x| x.message.contains(g.as_str()) || x.subject == *g)
        {
            f.push(format!("expected a gap mentioning `{g}`; gaps: {}", r.gaps.len()));
        }
    }
    Ok(f)
}
