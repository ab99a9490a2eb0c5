//! The scenario spec: a strict YAML document saying which real captures to start
//! from and which counters, histograms and gauges move, when and how fast.
//! The format is documented in `testdata/scenarios/README.md`.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::duration::PromDuration;
use super::{Location, ScenarioError};
use cptriage::source::Role;
use cptriage::store::Millis;

/// A scenario spec as written in YAML.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Short identifier, also the name of the capture directory by convention.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Time of the first snapshot, RFC 3339.
    pub start: String,
    /// Time between snapshots.
    pub interval: PromDuration,
    /// Time from the first to the last snapshot (both included).
    pub duration: PromDuration,
    /// Write `.prom.gz` files instead of `.prom`.
    #[serde(default)]
    pub gzip: bool,
    pub targets: Vec<TargetSpec>,
    /// Healthy traffic, active over the whole window.
    #[serde(default)]
    pub background: Vec<MoveSpec>,
    /// Faults, each starting at `at` and optionally ending at `until`.
    #[serde(default)]
    pub effects: Vec<MoveSpec>,
    /// The verdict cptriage should give on the generated capture.
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// One target of the capture.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub name: String,
    pub role: String,
    /// The real capture this target starts from (file name, see the README for
    /// where it is looked up).
    pub base: String,
}

/// One background or effect entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveSpec {
    /// Target name or glob (`*`, `?`).
    pub target: String,
    #[serde(default)]
    pub at: Option<PromDuration>,
    #[serde(default)]
    pub until: Option<PromDuration>,
    #[serde(default)]
    pub counter: Option<String>,
    #[serde(default)]
    pub histogram: Option<String>,
    #[serde(default)]
    pub gauge: Option<String>,
    #[serde(default)]
    pub down: Option<bool>,
    #[serde(default)]
    pub restart: Option<bool>,
    /// Label equalities selecting series of the family (`""` matches an empty label).
    #[serde(default, rename = "match")]
    pub matchers: BTreeMap<String, String>,
    #[serde(default)]
    pub rate: Option<f64>,
    #[serde(default)]
    pub add: Option<f64>,
    #[serde(default)]
    pub value: Option<f64>,
    #[serde(default)]
    pub observe: Option<f64>,
    #[serde(default)]
    pub replace_background: bool,
    /// Labels of a series to create when it does not exist.
    #[serde(default)]
    pub create: Option<BTreeMap<String, String>>,
    /// HELP text for a family absent from the base.
    #[serde(default)]
    pub help: Option<String>,
    /// Another real capture to copy an absent family's HELP, label names and buckets from.
    #[serde(default)]
    pub like: Option<String>,
    /// Bucket bounds for a histogram family absent from the base.
    #[serde(default)]
    pub buckets: Option<Vec<f64>>,
}

/// The verdict the scenario is built to produce (checked by cptriage's own tests).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// `healthy` or `degraded`.
    pub status: String,
    #[serde(default)]
    pub axis: Option<String>,
    #[serde(default)]
    pub sub_axis: Option<String>,
    /// Offset from `start` at which the root cause begins.
    #[serde(default)]
    pub root_cause_onset: Option<PromDuration>,
    /// Targets the fault is localised to (empty: not localised, or all).
    #[serde(default)]
    pub instances: Vec<String>,
    /// When given: exactly the targets the verdict names as affected by the
    /// cause (lit, but not the cause), none of them among `instances`.
    #[serde(default)]
    pub affected: Option<Vec<String>>,
    /// Axes expected to light up after the root cause, with their onsets.
    #[serde(default)]
    pub downstream: Vec<Downstream>,
}

/// An axis lit as a consequence of the root cause.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Downstream {
    pub axis: String,
    #[serde(default)]
    pub onset: Option<PromDuration>,
}

/// The axes of the exclusion tree, as `expect.axis` may name them.
pub const AXES: &[&str] = &[
    "auth",
    "admission",
    "apf",
    "etcd",
    "watch-cache",
    "storage",
    "joint",
    "write-timeouts",
    "stale-reads",
    "duplicate-events",
    "node-status",
    "expensive-reads",
    "restart",
];

/// What a validated move does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Counter grows by `rate` per second, split over the matching series.
    CounterRate(f64),
    /// Counter grows by this amount once, at `at`, split over the matching series.
    CounterAdd(f64),
    /// `rate` observations per second of value `observe`.
    HistogramRate { rate: f64, observe: f64 },
    /// This many observations once, at `at`.
    HistogramAdd { count: f64, observe: f64 },
    /// Gauge set to a value (restored at `until`).
    GaugeSet(f64),
    /// Gauge changes by `rate` per second on every matching series.
    GaugeRate(f64),
    /// Gauge changes once by this amount on every matching series.
    GaugeAdd(f64),
    /// The target is unreachable: no snapshots.
    Down,
    /// The target's process restarts: counters reset to 0.
    Restart,
}

/// A validated move: what, where, when.
#[derive(Clone, Debug)]
pub struct Move {
    /// `background[i]` or `effects[i]`, for messages.
    pub origin: String,
    /// Line of the entry in the spec, when found.
    pub line: Option<usize>,
    pub background: bool,
    pub target: String,
    pub family: Option<String>,
    pub start: Millis,
    pub end: Option<Millis>,
    pub action: Action,
    pub matchers: BTreeMap<String, String>,
    pub replace_background: bool,
    pub create: Option<BTreeMap<String, String>>,
    pub help: Option<String>,
    pub like: Option<String>,
    pub buckets: Option<Vec<f64>>,
}

/// A spec checked for consistency, with its moves compiled.
#[derive(Clone, Debug)]
pub struct Validated {
    pub spec: Spec,
    /// Where the spec came from (file path, for messages and base lookup).
    pub origin: String,
    /// The spec's YAML text (for locating entries in messages).
    pub text: String,
    pub spec_dir: Option<std::path::PathBuf>,
    pub start_ms: Millis,
    pub roles: Vec<Role>,
    pub moves: Vec<Move>,
}

/// Finds the 1-based line of item `index` of the top-level sequence `section`.
/// Best effort: block sequences (`- ...` lines) as written in the shipped specs.
pub(crate) fn item_line(text: &str, section: &str, index: usize) -> Option<usize> {
    let mut lines = text.lines().enumerate();
    let head = format!("{section}:");
    for (_, l) in lines.by_ref() {
        if l.starts_with(&head) {
            break;
        }
    }
    let mut indent: Option<usize> = None;
    let mut seen = 0usize;
    for (i, l) in lines {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = l.len() - t.len();
        if !t.starts_with("- ") && t != "-" {
            if ind == 0 {
                return None;
            }
            continue;
        }
        let want = *indent.get_or_insert(ind);
        if ind == want {
            if seen == index {
                return Some(i + 1);
            }
            seen += 1;
        }
    }
    None
}

/// Finds the 1-based line of a top-level key.
pub(crate) fn key_line(text: &str, key: &str) -> Option<usize> {
    let head = format!("{key}:");
    text.lines().position(|l| l.starts_with(&head)).map(|i| i + 1)
}

/// Whether `name` matches the glob `pat` (`*` any run, `?` one character).
pub fn glob_match(pat: &str, name: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Parses and validates a spec. `origin` names it in messages (normally its path).
pub fn parse_spec(text: &str, origin: &str, spec_dir: Option<&Path>) -> Result<Validated, ScenarioError> {
    let spec: Spec = serde_yaml::from_str(text).map_err(|e| {
        let loc = e.location();
        // serde_yaml appends " at line L column C" itself; keep only the message.
        let msg = e.to_string();
        let msg = match msg.find(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        ScenarioError::Spec {
            at: Location {
                file: origin.to_string(),
                line: loc.as_ref().map(|l| l.line()),
                column: loc.as_ref().map(|l| l.column()),
            },
            message: msg,
        }
    })?;
    validate(spec, text, origin, spec_dir)
}

fn validate(
    spec: Spec,
    text: &str,
    origin: &str,
    spec_dir: Option<&Path>,
) -> Result<Validated, ScenarioError> {
    let at = |line: Option<usize>| Location {
        file: origin.to_string(),
        line,
        column: None,
    };
    let fail = |line: Option<usize>, message: String| ScenarioError::Spec {
        at: at(line),
        message,
    };

    if spec.name.trim().is_empty() {
        return Err(fail(key_line(text, "name"), "`name` is empty".into()));
    }
    let start: DateTime<Utc> = DateTime::parse_from_rfc3339(&spec.start)
        .map_err(|e| {
            fail(
                key_line(text, "start"),
                format!("`start` is not an RFC 3339 time (`{}`): {e}", spec.start),
            )
        })?
        .with_timezone(&Utc);
    let start_ms = start.timestamp_millis();
    if spec.interval.0 <= 0 {
        return Err(fail(
            key_line(text, "interval"),
            "`interval` must be positive".into(),
        ));
    }
    if spec.duration.0 < spec.interval.0 {
        return Err(fail(
            key_line(text, "duration"),
            format!(
                "`duration` ({}) is shorter than `interval` ({}): a capture needs at least two snapshots",
                spec.duration, spec.interval
            ),
        ));
    }
    if spec.duration.0 % spec.interval.0 != 0 {
        return Err(fail(
            key_line(text, "duration"),
            format!(
                "`duration` ({}) is not a multiple of `interval` ({})",
                spec.duration, spec.interval
            ),
        ));
    }
    if spec.duration.0 > 10 * 365 * 86_400_000 {
        return Err(fail(
            key_line(text, "duration"),
            "`duration` is longer than ten years".into(),
        ));
    }
    if spec.duration.0 / spec.interval.0 > 100_000 {
        return Err(fail(
            key_line(text, "duration"),
            "more than 100000 snapshots per target".into(),
        ));
    }
    if spec.targets.is_empty() {
        return Err(fail(key_line(text, "targets"), "`targets` is empty".into()));
    }
    let mut roles = Vec::new();
    for (i, t) in spec.targets.iter().enumerate() {
        let line = item_line(text, "targets", i);
        let valid_name = !t.name.is_empty()
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !t.name.starts_with('.');
        if !valid_name {
            return Err(fail(
                line,
                format!(
                    "targets[{i}]: name `{}` must be letters, digits, `-`, `_` or `.` (it names a directory)",
                    t.name
                ),
            ));
        }
        if spec.targets[..i].iter().any(|o| o.name == t.name) {
            return Err(fail(
                line,
                format!("targets[{i}]: duplicate target name `{}`", t.name),
            ));
        }
        let role = Role::parse(&t.role).ok_or_else(|| {
            fail(
                line,
                format!(
                    "targets[{i}]: unknown role `{}` (expected apiserver, etcd or controller)",
                    t.role
                ),
            )
        })?;
        roles.push(role);
    }

    let duration = spec.duration.0;
    let mut moves = Vec::new();
    for (section, list, background) in [
        ("background", &spec.background, true),
        ("effects", &spec.effects, false),
    ] {
        for (i, m) in list.iter().enumerate() {
            let line = item_line(text, section, i);
            let origin = format!("{section}[{i}]");
            let mv = compile_move(m, &origin, line, background, duration)
                .map_err(|msg| fail(line, format!("{origin}: {msg}")))?;
            if !spec.targets.iter().any(|t| glob_match(&mv.target, &t.name)) {
                return Err(fail(
                    line,
                    format!("{origin}: target `{}` matches no target of the spec", mv.target),
                ));
            }
            moves.push(mv);
        }
    }

    if let Some(e) = &spec.expect {
        let line = key_line(text, "expect");
        if !matches!(e.status.as_str(), "healthy" | "degraded" | "recovered") {
            return Err(fail(
                line,
                format!(
                    "expect.status `{}` must be `healthy`, `degraded` or `recovered`",
                    e.status
                ),
            ));
        }
        for a in e.axis.iter().chain(e.downstream.iter().map(|d| &d.axis)) {
            if !AXES.contains(&a.as_str()) {
                return Err(fail(
                    line,
                    format!("expect: unknown axis `{a}` (expected one of {})", AXES.join(", ")),
                ));
            }
        }
        if e.status == "healthy" && (e.axis.is_some() || e.root_cause_onset.is_some()) {
            return Err(fail(
                line,
                "expect: a healthy verdict names no axis or onset".into(),
            ));
        }
        if e.status != "healthy" && e.axis.is_none() {
            return Err(fail(
                line,
                format!("expect: a {} verdict needs an `axis`", e.status),
            ));
        }
        for inst in &e.instances {
            if !spec.targets.iter().any(|t| &t.name == inst) {
                return Err(fail(line, format!("expect.instances: `{inst}` is not a target")));
            }
        }
        for inst in e.affected.iter().flatten() {
            if !spec.targets.iter().any(|t| &t.name == inst) {
                return Err(fail(line, format!("expect.affected: `{inst}` is not a target")));
            }
            if e.instances.contains(inst) {
                return Err(fail(
                    line,
                    format!("expect.affected: `{inst}` is also named as the cause in `instances`"),
                ));
            }
        }
        for d in e
            .root_cause_onset
            .iter()
            .chain(e.downstream.iter().filter_map(|d| d.onset.as_ref()))
        {
            if d.0 > duration {
                return Err(fail(
                    line,
                    format!("expect: onset {d} is after the end ({})", spec.duration),
                ));
            }
        }
    }

    Ok(Validated {
        origin: origin.to_string(),
        text: text.to_string(),
        spec_dir: spec_dir.map(|p| p.to_path_buf()),
        start_ms,
        roles,
        moves,
        spec,
    })
}

fn compile_move(
    m: &MoveSpec,
    _origin: &str,
    line: Option<usize>,
    background: bool,
    duration: Millis,
) -> Result<Move, String> {
    if m.target.is_empty() {
        return Err("`target` is empty".into());
    }
    let kinds = [
        m.counter.is_some(),
        m.histogram.is_some(),
        m.gauge.is_some(),
        m.down.is_some(),
        m.restart.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        return Err("give exactly one of `counter`, `histogram`, `gauge`, `down`, `restart`".into());
    }
    if background {
        if m.at.is_some() || m.until.is_some() {
            return Err("background entries last the whole window: no `at`/`until` (use `effects`)".into());
        }
        if m.down.is_some() || m.restart.is_some() {
            return Err("`down` and `restart` are effects, not background".into());
        }
        if m.replace_background {
            return Err("`replace_background` only makes sense on an effect".into());
        }
    } else if m.at.is_none() {
        return Err("effects need `at`".into());
    }
    let start = m.at.map(|d| d.0).unwrap_or(0);
    let end = m.until.map(|d| d.0);
    if start > duration {
        return Err(format!(
            "`at` is after the end of the scenario ({start}ms > {duration}ms)"
        ));
    }
    if let Some(e) = end {
        if e <= start {
            return Err("`until` must be after `at`".into());
        }
        if e > duration {
            return Err(
                "`until` is after the end of the scenario (leave it out to last until the end)".into(),
            );
        }
    }
    for (k, v) in [
        ("rate", m.rate),
        ("add", m.add),
        ("value", m.value),
        ("observe", m.observe),
    ] {
        if let Some(v) = v {
            if !v.is_finite() {
                return Err(format!("`{k}` must be a finite number"));
            }
        }
    }
    let used = |v: &[(&str, bool)], allowed: &[&str]| -> Result<(), String> {
        for (k, present) in v {
            if *present && !allowed.contains(k) {
                return Err(format!("`{k}` does not apply here"));
            }
        }
        Ok(())
    };
    let fields = [
        ("rate", m.rate.is_some()),
        ("add", m.add.is_some()),
        ("value", m.value.is_some()),
        ("observe", m.observe.is_some()),
        ("match", !m.matchers.is_empty()),
        ("create", m.create.is_some()),
        ("help", m.help.is_some()),
        ("like", m.like.is_some()),
        ("buckets", m.buckets.is_some()),
        ("replace_background", m.replace_background),
    ];
    let one_of = |a: Option<f64>, b: Option<f64>, an: &str, bn: &str| -> Result<(), String> {
        match (a, b) {
            (Some(_), Some(_)) | (None, None) => Err(format!("give exactly one of `{an}` and `{bn}`")),
            _ => Ok(()),
        }
    };
    let common = ["match", "create", "help", "like", "replace_background"];
    let (family, action) = if let Some(c) = &m.counter {
        used(&fields, &[&common[..], &["rate", "add"]].concat())?;
        one_of(m.rate, m.add, "rate", "add")?;
        let action = match (m.rate, m.add) {
            (Some(r), _) => {
                if r < 0.0 {
                    return Err("counters only increase: `rate` must be >= 0".into());
                }
                Action::CounterRate(r)
            }
            (_, Some(a)) => {
                if a < 0.0 {
                    return Err("counters only increase: `add` must be >= 0".into());
                }
                Action::CounterAdd(a)
            }
            _ => return Err("give exactly one of `rate` and `add`".into()),
        };
        (Some(c.clone()), action)
    } else if let Some(h) = &m.histogram {
        used(
            &fields,
            &[&common[..], &["rate", "add", "observe", "buckets"]].concat(),
        )?;
        one_of(m.rate, m.add, "rate", "add")?;
        let observe = m
            .observe
            .ok_or("histograms need `observe` (the observed value)")?;
        let action = match (m.rate, m.add) {
            (Some(r), _) if r >= 0.0 => Action::HistogramRate { rate: r, observe },
            (_, Some(a)) if a >= 0.0 && a.fract() == 0.0 => Action::HistogramAdd { count: a, observe },
            (Some(_), _) => return Err("`rate` must be >= 0".into()),
            _ => return Err("`add` must be a whole number of observations >= 0".into()),
        };
        if let Some(b) = &m.buckets {
            if b.is_empty() || b.windows(2).any(|w| w[0] >= w[1]) || b.iter().any(|x| !x.is_finite()) {
                return Err("`buckets` must be finite, strictly increasing and not empty".into());
            }
        }
        (Some(h.clone()), action)
    } else if let Some(g) = &m.gauge {
        used(&fields, &[&common[..], &["rate", "add", "value"]].concat())?;
        let n = [m.value, m.rate, m.add].iter().filter(|x| x.is_some()).count();
        if n != 1 {
            return Err("give exactly one of `value`, `rate` and `add`".into());
        }
        let action = if let Some(v) = m.value {
            Action::GaugeSet(v)
        } else if let Some(r) = m.rate {
            Action::GaugeRate(r)
        } else {
            Action::GaugeAdd(m.add.unwrap_or(0.0))
        };
        (Some(g.clone()), action)
    } else if let Some(d) = m.down {
        used(&fields, &[])?;
        if !d {
            return Err("`down: false` does nothing; remove the entry".into());
        }
        (None, Action::Down)
    } else {
        used(&fields, &[])?;
        if m.restart != Some(true) {
            return Err("`restart: false` does nothing; remove the entry".into());
        }
        if m.until.is_some() {
            return Err("a restart happens at one instant: no `until`".into());
        }
        (None, Action::Restart)
    };
    if matches!(
        action,
        Action::CounterAdd(_) | Action::HistogramAdd { .. } | Action::GaugeAdd(_)
    ) && m.until.is_some()
    {
        return Err("`add` happens once at `at`: no `until`".into());
    }
    if (m.help.is_some() || m.like.is_some() || m.buckets.is_some()) && m.create.is_none() {
        return Err("`help`, `like` and `buckets` describe a created family: they need `create`".into());
    }
    if m.help.is_some() && m.like.is_some() {
        return Err("give `help` or `like`, not both".into());
    }
    if let Some(c) = &m.create {
        if c.contains_key("le") || c.contains_key("__name__") {
            return Err("`create` labels cannot include `le` or `__name__`".into());
        }
        for (k, v) in &m.matchers {
            let cv = c.get(k).map(String::as_str).unwrap_or("");
            if cv != v {
                return Err(format!(
                    "`match` {k}=\"{v}\" disagrees with the created series ({k}=\"{cv}\")"
                ));
            }
        }
        for k in c.keys() {
            if k.is_empty() || !k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                return Err(format!("`create` label name `{k}` is not a valid label name"));
            }
        }
    }
    Ok(Move {
        origin: _origin.to_string(),
        line,
        background,
        target: m.target.clone(),
        family,
        start,
        end,
        action,
        matchers: m.matchers.clone(),
        replace_background: m.replace_background,
        create: m.create.clone(),
        help: m.help.clone(),
        like: m.like.clone(),
        buckets: m.buckets.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("etcd-*", "etcd-2"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("etcd-*", "apiserver-0"));
        assert!(glob_match("etcd-2", "etcd-2"));
        assert!(!glob_match("etcd-2", "etcd-20"));
        assert!(glob_match("*-0", "apiserver-0"));
    }

    #[test]
    fn item_lines_are_found() {
        let t =
            "name: x\neffects:\n  - {a: 1}\n  # c\n  - a: 2\n    b: 3\n  - {a: 4}\nexpect:\n  status: x\n";
        assert_eq!(item_line(t, "effects", 0), Some(3));
        assert_eq!(item_line(t, "effects", 1), Some(5));
        assert_eq!(item_line(t, "effects", 2), Some(7));
        assert_eq!(item_line(t, "effects", 3), None);
        assert_eq!(key_line(t, "expect"), Some(8));
    }
}
