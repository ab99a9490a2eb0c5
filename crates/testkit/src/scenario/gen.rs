//! Binding a validated spec to its base captures, advancing the moved series
//! step by step, and writing each snapshot by rewriting only the value tokens
//! that changed (plus the lines of created series and families).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::expo::{escape_help, escape_label_value, format_go, Exposition, Kind};
use super::spec::{glob_match, Action, Move, Validated};
use super::{Location, ScenarioError};
use cptriage::source::Role;
use cptriage::store::Millis;

/// Where base captures named in a spec are looked up, after the spec's own directory.
#[derive(Clone, Debug)]
pub struct GenOptions {
    pub base_dirs: Vec<PathBuf>,
}

impl Default for GenOptions {
    /// `testdata/realdata` of the repository (where the real captures are kept,
    /// gzipped), so the generator works from any current directory of a checkout.
    fn default() -> Self {
        GenOptions {
            base_dirs: vec![crate::realdata_dir()],
        }
    }
}

/// How a one-shot or continuous amount is applied.
#[derive(Clone, Copy, Debug)]
enum Amount {
    Rate(f64),
    Once(f64),
}

#[derive(Clone, Copy, Debug)]
enum GaugeOp {
    Set(f64),
    Rate(f64),
    Add(f64),
}

#[derive(Clone, Debug)]
enum BoundKind {
    Counter {
        series: Vec<usize>,
        shares: Vec<f64>,
        total: f64,
        integer: bool,
        amount: Amount,
    },
    Histogram {
        groups: Vec<usize>,
        shares: Vec<f64>,
        total: f64,
        observe: f64,
        amount: Amount,
    },
    Gauge {
        series: Vec<usize>,
        op: GaugeOp,
        saved: Vec<f64>,
    },
    Down,
    Restart,
}

/// One move applied to one target.
#[derive(Clone, Debug)]
struct Bound {
    start: Millis,
    end: Option<Millis>,
    start_step: usize,
    end_step: Option<usize>,
    kind: BoundKind,
    /// For background moves: windows during which a `replace_background` effect
    /// on the same family and target suspends them.
    suspended: Vec<(Millis, Millis)>,
    background: bool,
    replace_background: bool,
    family: Option<String>,
}

/// A histogram series group: buckets (ascending `le`), `_sum`, `_count`.
#[derive(Clone, Debug)]
struct Group {
    labels: Vec<(String, String)>,
    buckets: Vec<(f64, usize)>,
    sum: Option<usize>,
    count: Option<usize>,
}

/// A series that the base lacks, written from the step it appears at.
#[derive(Clone, Debug)]
struct Created {
    family: String,
    labels: Vec<(String, String)>,
    /// `name{labels} ` — everything before the value.
    prefix: String,
    appear: usize,
}

/// A contiguous run of created series lines (one counter/gauge series, or one
/// histogram's buckets, sum and count) inserted into a base family.
#[derive(Clone, Debug)]
struct Insert {
    offset: usize,
    key: Vec<String>,
    ids: Vec<usize>,
}

/// A family absent from the base, written once one of its series appeared.
#[derive(Clone, Debug)]
struct NewFamily {
    name: String,
    kind: Kind,
    header: String,
    label_names: Vec<String>,
    les: Vec<(f64, String)>,
    offset: usize,
    units: Vec<(Vec<String>, Vec<usize>)>,
}

/// One target being generated.
#[derive(Debug)]
pub struct TargetState {
    pub name: String,
    pub role: Role,
    /// From the build-information metric ([`cptriage::source::VERSION_LABELS`]).
    pub version: Option<String>,
    pub base_path: PathBuf,
    base: Arc<Exposition>,
    values: Vec<f64>,
    counter_like: Vec<bool>,
    created: Vec<Created>,
    inserts: Vec<Insert>,
    new_fams: Vec<NewFamily>,
    groups: Vec<Group>,
    groups_by_family: HashMap<String, Vec<usize>>,
    process_start: Option<usize>,
    bounds: Vec<Bound>,
    down: Vec<(Millis, Option<Millis>)>,
    /// Base series some move can change, in file order.
    touched: Vec<usize>,
    buf: Vec<u8>,
}

/// A scenario bound to its base captures, ready to run.
#[derive(Debug)]
pub struct Scenario {
    pub spec: Validated,
    pub targets: Vec<TargetState>,
    pub interval: Millis,
    /// Number of snapshot times (both ends included).
    pub steps: usize,
}

/// One rendered snapshot.
pub struct SnapshotRef<'a> {
    pub target: usize,
    pub step: usize,
    /// Unix milliseconds.
    pub time: Millis,
    pub bytes: &'a [u8],
}

fn ceil_div(a: Millis, b: Millis) -> usize {
    ((a + b - 1) / b).max(0) as usize
}

fn measure(lo: Millis, hi: Millis) -> Millis {
    (hi - lo).max(0)
}

/// Length of the union of `windows` clipped to `(lo, hi]`.
fn union_measure(windows: &[(Millis, Millis)], lo: Millis, hi: Millis) -> Millis {
    let mut v: Vec<(Millis, Millis)> = windows
        .iter()
        .map(|&(s, e)| (s.max(lo), e.min(hi)))
        .filter(|(s, e)| e > s)
        .collect();
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(Millis, Millis)> = None;
    for (s, e) in v {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

/// Rounds a running total down to a whole count, tolerating float noise.
fn whole(x: f64) -> f64 {
    (x + 1e-9).floor()
}

fn labels_match(labels: &[(String, String)], m: &BTreeMap<String, String>) -> bool {
    m.iter().all(|(k, v)| {
        let have = labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("");
        have == v
    })
}

fn key_of(labels: &[(String, String)]) -> Vec<String> {
    labels
        .iter()
        .filter(|(n, _)| n != "le")
        .map(|(_, v)| v.clone())
        .collect()
}

fn render_prefix(name: &str, labels: &[(String, String)], le: Option<&str>) -> String {
    let mut s = String::with_capacity(name.len() + 64);
    s.push_str(name);
    if !labels.is_empty() || le.is_some() {
        s.push('{');
        let mut first = true;
        for (n, v) in labels
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .chain(le.map(|l| ("le", l)))
        {
            if !first {
                s.push(',');
            }
            first = false;
            s.push_str(n);
            s.push_str("=\"");
            escape_label_value(v, &mut s);
            s.push('"');
        }
        s.push('}');
    }
    s.push(' ');
    s
}

/// Loads base captures once per path.
#[derive(Default)]
pub(crate) struct BaseCache {
    loaded: HashMap<PathBuf, Arc<Exposition>>,
}

impl BaseCache {
    /// Finds a base capture named in a spec: absolute, beside the spec, then in
    /// each base directory; `NAME` also matches a gzipped `NAME.gz`.
    pub(crate) fn resolve(name: &str, spec_dir: Option<&Path>, opts: &GenOptions) -> Result<PathBuf, String> {
        let p = Path::new(name);
        let mut tried = Vec::new();
        let mut candidates = Vec::new();
        if p.is_absolute() {
            candidates.push(p.to_path_buf());
        } else {
            if let Some(d) = spec_dir {
                candidates.push(d.join(p));
            }
            for d in &opts.base_dirs {
                candidates.push(d.join(p));
            }
        }
        for c in candidates {
            if c.is_file() {
                return Ok(c);
            }
            let mut gz = c.clone().into_os_string();
            gz.push(".gz");
            let gz = PathBuf::from(gz);
            if gz.is_file() {
                return Ok(gz);
            }
            tried.push(c.display().to_string());
        }
        Err(format!(
            "base capture `{name}` not found (looked in: {})",
            tried.join(", ")
        ))
    }

    fn load(&mut self, path: &Path) -> Result<Arc<Exposition>, ScenarioError> {
        if let Some(e) = self.loaded.get(path) {
            return Ok(e.clone());
        }
        let text = std::fs::read(path).map_err(|source| ScenarioError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let text = if text.starts_with(&[0x1f, 0x8b]) {
            let mut out = Vec::new();
            use std::io::Read;
            flate2::read::GzDecoder::new(&text[..])
                .read_to_end(&mut out)
                .map_err(|source| ScenarioError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
            out
        } else {
            text
        };
        let e = Exposition::parse(text).map_err(|e| ScenarioError::Base {
            at: Location {
                file: path.display().to_string(),
                line: Some(e.line),
                column: None,
            },
            message: e.message,
        })?;
        let e = Arc::new(e);
        self.loaded.insert(path.to_path_buf(), e.clone());
        Ok(e)
    }
}

/// What the generator knows about one family of one target.
struct FamInfo {
    kind: Kind,
    /// Whether the family has at least one series (its label names are then fixed).
    has_series: bool,
    label_names: Vec<String>,
    les: Vec<(f64, String)>,
    /// Base family index, or new-family index.
    base: Option<usize>,
    new: Option<usize>,
}

impl TargetState {
    fn new(name: &str, role: Role, base_path: PathBuf, base: Arc<Exposition>) -> TargetState {
        let n = base.samples.len();
        let mut counter_like = vec![false; n];
        let mut groups: Vec<Group> = Vec::new();
        let mut groups_by_family: HashMap<String, Vec<usize>> = HashMap::new();
        for f in &base.families {
            let hist = f.kind == Kind::Histogram;
            let mut gindex: HashMap<Vec<(String, String)>, usize> = HashMap::new();
            for i in f.samples.clone() {
                let s = &base.samples[i];
                counter_like[i] = match f.kind {
                    Kind::Counter | Kind::Histogram => true,
                    Kind::Summary => s.name != f.name,
                    _ => false,
                };
                if !hist {
                    continue;
                }
                let key: Vec<(String, String)> =
                    s.labels.iter().filter(|(n, _)| n != "le").cloned().collect();
                let gi = *gindex.entry(key.clone()).or_insert_with(|| {
                    groups.push(Group {
                        labels: key,
                        buckets: Vec::new(),
                        sum: None,
                        count: None,
                    });
                    groups_by_family
                        .entry(f.name.clone())
                        .or_default()
                        .push(groups.len() - 1);
                    groups.len() - 1
                });
                let g = &mut groups[gi];
                if let Some(le) = s.le {
                    g.buckets.push((le, i));
                } else if s.name.ends_with("_sum") {
                    g.sum = Some(i);
                } else if s.name.ends_with("_count") {
                    g.count = Some(i);
                }
            }
        }
        for g in &mut groups {
            g.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let version = cptriage::source::VERSION_LABELS
            .iter()
            .filter(|(f, _)| match role {
                Role::Etcd => f.starts_with("etcd"),
                Role::Apiserver => f.starts_with("kubernetes"),
                _ => true,
            })
            .find_map(|(f, l)| base.first_label(f, l).map(str::to_string));
        let process_start = base
            .family("process_start_time_seconds")
            .filter(|f| !f.samples.is_empty())
            .map(|f| f.samples.start);
        TargetState {
            name: name.to_string(),
            role,
            version,
            base_path,
            values: base.samples.iter().map(|s| s.value).collect(),
            counter_like,
            created: Vec::new(),
            inserts: Vec::new(),
            new_fams: Vec::new(),
            groups,
            groups_by_family,
            process_start,
            bounds: Vec::new(),
            down: Vec::new(),
            touched: Vec::new(),
            buf: Vec::new(),
            base,
        }
    }

    fn n_base(&self) -> usize {
        self.base.samples.len()
    }

    fn series_labels(&self, id: usize) -> &[(String, String)] {
        if id < self.n_base() {
            &self.base.samples[id].labels
        } else {
            &self.created[id - self.n_base()].labels
        }
    }

    fn fam_info(&self, name: &str) -> Option<FamInfo> {
        if let Some(&fi) = self.base.by_name.get(name) {
            let f = &self.base.families[fi];
            let first = self.base.samples.get(f.samples.start);
            let label_names = first
                .map(|s| {
                    s.labels
                        .iter()
                        .filter(|(n, _)| n != "le")
                        .map(|(n, _)| n.clone())
                        .collect()
                })
                .unwrap_or_default();
            let les = self
                .groups_by_family
                .get(name)
                .and_then(|g| g.first())
                .map(|&g| {
                    self.groups[g]
                        .buckets
                        .iter()
                        .map(|&(le, id)| (le, self.base.samples[id].label("le").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            return Some(FamInfo {
                kind: f.kind,
                has_series: !f.samples.is_empty(),
                label_names,
                les,
                base: Some(fi),
                new: None,
            });
        }
        self.new_fams.iter().position(|f| f.name == name).map(|i| {
            let f = &self.new_fams[i];
            FamInfo {
                kind: f.kind,
                has_series: true,
                label_names: f.label_names.clone(),
                les: f.les.clone(),
                base: None,
                new: Some(i),
            }
        })
    }

    /// Ids of the non-histogram series of `family` (base and created).
    fn family_series(&self, family: &str, info: &FamInfo) -> Vec<usize> {
        let mut out = Vec::new();
        if let Some(fi) = info.base {
            for i in self.base.families[fi].samples.clone() {
                if self.base.samples[i].name == family {
                    out.push(i);
                }
            }
        }
        let nb = self.n_base();
        for (j, c) in self.created.iter().enumerate() {
            if c.family == family {
                out.push(nb + j);
            }
        }
        out
    }

    /// Adds a created series' value slot and returns its id.
    fn push_created(&mut self, c: Created, counter_like: bool) -> usize {
        self.created.push(c);
        self.values.push(0.0);
        self.counter_like.push(counter_like);
        self.n_base() + self.created.len() - 1
    }

    /// Where in the base text a new series of base family `fi` with `key` goes.
    fn insert_offset(&self, fi: usize, key: &[String]) -> usize {
        let f = &self.base.families[fi];
        let mut at = f.header_end;
        for i in f.samples.clone() {
            let s = &self.base.samples[i];
            if key_of(&s.labels).as_slice() <= key {
                at = s.line_end;
            }
        }
        at
    }

    /// Where a new family named `name` goes: before the first base family that sorts after it.
    fn new_family_offset(&self, name: &str) -> usize {
        self.base
            .families
            .iter()
            .find(|f| f.name.as_str() > name)
            .map(|f| f.block_start)
            .unwrap_or(self.base.text.len())
    }
}

/// A move-level error on one target.
struct BindError(String);

impl Scenario {
    /// Loads the base captures and binds every move to the targets it names.
    pub fn build(spec: Validated, opts: &GenOptions) -> Result<Scenario, ScenarioError> {
        let mut cache = BaseCache::default();
        let spec_dir = spec.spec_dir.clone();
        let mut targets = Vec::new();
        for (i, t) in spec.spec.targets.iter().enumerate() {
            let path =
                BaseCache::resolve(&t.base, spec_dir.as_deref(), opts).map_err(|m| ScenarioError::Spec {
                    at: Location {
                        file: spec.origin.clone(),
                        line: target_line(&spec, i),
                        column: None,
                    },
                    message: format!("targets[{i}] (`{}`): {m}", t.name),
                })?;
            let base = cache.load(&path)?;
            targets.push(TargetState::new(&t.name, spec.roles[i], path, base));
        }
        let interval = spec.spec.interval.0;
        let steps = (spec.spec.duration.0 / interval) as usize + 1;
        for mv in &spec.moves {
            for t in &mut targets {
                if !glob_match(&mv.target, &t.name) {
                    continue;
                }
                bind(t, mv, interval, &mut cache, spec_dir.as_deref(), opts).map_err(|BindError(m)| {
                    ScenarioError::Spec {
                        at: Location {
                            file: spec.origin.clone(),
                            line: mv.line,
                            column: None,
                        },
                        message: format!("{} on target `{}`: {m}", mv.origin, t.name),
                    }
                })?;
            }
        }
        // Background moves pause while a replace_background effect on the same
        // family and target runs.
        for t in &mut targets {
            let windows: Vec<(String, Millis, Millis)> = t
                .bounds
                .iter()
                .filter(|b| b.replace_background)
                .filter_map(|b| Some((b.family.clone()?, b.start, b.end.unwrap_or(Millis::MAX / 4))))
                .collect();
            for b in t.bounds.iter_mut().filter(|b| b.background) {
                for (f, s, e) in &windows {
                    if b.family.as_ref() == Some(f) {
                        b.suspended.push((*s, *e));
                    }
                }
            }
            finish_target(t);
        }
        Ok(Scenario {
            spec,
            targets,
            interval,
            steps,
        })
    }

    /// Unix-ms time of step `k`.
    pub fn time(&self, k: usize) -> Millis {
        self.spec.start_ms + k as Millis * self.interval
    }

    /// Runs every target through every step, handing each snapshot to `sink`
    /// (targets in spec order, each in time order). Targets are independent and
    /// are run on up to `threads` threads; the output does not depend on it.
    pub fn run<F>(&mut self, threads: usize, sink: F) -> Result<(), ScenarioError>
    where
        F: Fn(&SnapshotRef<'_>) -> Result<(), ScenarioError> + Sync,
    {
        let steps = self.steps;
        let interval = self.interval;
        let start_ms = self.spec.start_ms;
        let threads = threads.clamp(1, self.targets.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let targets: Vec<std::sync::Mutex<&mut TargetState>> =
            self.targets.iter_mut().map(std::sync::Mutex::new).collect();
        let result: std::sync::Mutex<Option<ScenarioError>> = std::sync::Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let ti = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(m) = targets.get(ti) else { break };
                    let Ok(mut t) = m.lock() else { break };
                    if let Err(e) = run_target(&mut t, ti, steps, interval, start_ms, &sink) {
                        if let Ok(mut r) = result.lock() {
                            r.get_or_insert(e);
                        }
                        break;
                    }
                });
            }
        });
        match result.into_inner() {
            Ok(Some(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

fn target_line(spec: &Validated, i: usize) -> Option<usize> {
    super::spec::item_line(&spec.text, "targets", i)
}

fn run_target<F>(
    t: &mut TargetState,
    ti: usize,
    steps: usize,
    interval: Millis,
    start_ms: Millis,
    sink: &F,
) -> Result<(), ScenarioError>
where
    F: Fn(&SnapshotRef<'_>) -> Result<(), ScenarioError>,
{
    for k in 0..steps {
        advance(t, k, interval, start_ms);
        let off = k as Millis * interval;
        let down = t.down.iter().any(|&(s, e)| off >= s && e.is_none_or(|e| off < e));
        if down {
            continue;
        }
        render(t, k);
        sink(&SnapshotRef {
            target: ti,
            step: k,
            time: start_ms + off,
            bytes: &t.buf,
        })?;
    }
    Ok(())
}

fn shares_from(weights: &[f64]) -> Vec<f64> {
    let w: f64 = weights.iter().filter(|x| x.is_finite() && **x > 0.0).sum();
    if w > 0.0 {
        weights
            .iter()
            .map(|x| if x.is_finite() && *x > 0.0 { x / w } else { 0.0 })
            .collect()
    } else {
        vec![1.0 / weights.len().max(1) as f64; weights.len()]
    }
}

/// Creates (or finds) the family for a `create` move on a target.
fn ensure_family(
    t: &mut TargetState,
    mv: &Move,
    family: &str,
    kind: Kind,
    cache: &mut BaseCache,
    spec_dir: Option<&Path>,
    opts: &GenOptions,
) -> Result<FamInfo, BindError> {
    if let Some(info) = t.fam_info(family) {
        return Ok(info);
    }
    let create = mv.create.clone().unwrap_or_default();
    let (help, label_names, les) = if let Some(like) = &mv.like {
        let path = BaseCache::resolve(like, spec_dir, opts).map_err(BindError)?;
        let other = cache.load(&path).map_err(|e| BindError(e.to_string()))?;
        let f = other
            .family(family)
            .ok_or_else(|| BindError(format!("`like` capture `{like}` has no family `{family}` either")))?;
        if f.kind != kind {
            return Err(BindError(format!(
                "`{family}` is a {} in `{like}`, not a {}",
                f.kind.as_str(),
                kind.as_str()
            )));
        }
        let first = other.samples.get(f.samples.start);
        let names: Vec<String> = first
            .map(|s| {
                s.labels
                    .iter()
                    .filter(|(n, _)| n != "le")
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut les: Vec<(f64, String)> = Vec::new();
        if let Some(first) = first {
            let key = key_of(&first.labels);
            for i in f.samples.clone() {
                let s = &other.samples[i];
                if let Some(le) = s.le {
                    if key_of(&s.labels) == key {
                        les.push((le, s.label("le").to_string()));
                    }
                }
            }
        }
        (f.help.clone(), names, les)
    } else if let Some(h) = &mv.help {
        let mut names: Vec<String> = create.keys().cloned().collect();
        names.sort();
        let les = mv
            .buckets
            .as_ref()
            .map(|b| b.iter().map(|&x| (x, format_go(x))).collect())
            .unwrap_or_default();
        (Some(escape_help(h)), names, les)
    } else {
        return Err(BindError(format!(
            "family `{family}` is absent from base `{}`; give `help:` (or `like:` another capture) to create it",
            t.base_path.display()
        )));
    };
    let mut les = les;
    if kind == Kind::Histogram {
        if les.is_empty() {
            return Err(BindError(format!(
                "histogram `{family}` is absent from the base: give `buckets:` (or `like:`)"
            )));
        }
        if les.last().is_none_or(|l| l.0 != f64::INFINITY) {
            les.push((f64::INFINITY, "+Inf".into()));
        }
    }
    let mut header = String::new();
    if let Some(h) = help {
        header.push_str(&format!("# HELP {family} {h}\n"));
    }
    header.push_str(&format!("# TYPE {family} {}\n", kind.as_str()));
    let offset = t.new_family_offset(family);
    t.new_fams.push(NewFamily {
        name: family.to_string(),
        kind,
        header,
        label_names,
        les,
        offset,
        units: Vec::new(),
    });
    t.fam_info(family)
        .ok_or_else(|| BindError(format!("internal: family `{family}` not registered")))
}

/// Builds the full label list of a created series.
fn created_labels(
    info: &FamInfo,
    family: &str,
    create: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, BindError> {
    if info.label_names.is_empty() && !info.has_series {
        // A family with HELP/TYPE but no series: its labels are what `create` says.
        return Ok(create.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    }
    for k in create.keys() {
        if !info.label_names.iter().any(|n| n == k) {
            return Err(BindError(format!(
                "label `{k}` is not a label of `{family}` (its labels: {})",
                info.label_names.join(", ")
            )));
        }
    }
    Ok(info
        .label_names
        .iter()
        .map(|n| (n.clone(), create.get(n).cloned().unwrap_or_default()))
        .collect())
}

fn register_unit(t: &mut TargetState, info: &FamInfo, key: Vec<String>, ids: Vec<usize>) {
    if let Some(fi) = info.base {
        let offset = t.insert_offset(fi, &key);
        t.inserts.push(Insert { offset, key, ids });
    } else if let Some(ni) = info.new {
        t.new_fams[ni].units.push((key, ids));
    }
}

fn bind(
    t: &mut TargetState,
    mv: &Move,
    interval: Millis,
    cache: &mut BaseCache,
    spec_dir: Option<&Path>,
    opts: &GenOptions,
) -> Result<(), BindError> {
    let start_step = if mv.background {
        0
    } else {
        ceil_div(mv.start, interval)
    };
    let end_step = mv.end.map(|e| ceil_div(e, interval));
    let mut bound = Bound {
        start: mv.start,
        end: mv.end,
        start_step,
        end_step,
        kind: BoundKind::Down,
        suspended: Vec::new(),
        background: mv.background,
        replace_background: mv.replace_background,
        family: mv.family.clone(),
    };
    let want_kind = match mv.action {
        Action::CounterRate(_) | Action::CounterAdd(_) => Some(Kind::Counter),
        Action::HistogramRate { .. } | Action::HistogramAdd { .. } => Some(Kind::Histogram),
        Action::GaugeSet(_) | Action::GaugeRate(_) | Action::GaugeAdd(_) => Some(Kind::Gauge),
        Action::Down | Action::Restart => None,
    };
    let (Some(family), Some(want)) = (mv.family.as_deref(), want_kind) else {
        bound.kind = match mv.action {
            Action::Restart => BoundKind::Restart,
            _ => {
                t.down.push((mv.start, mv.end));
                BoundKind::Down
            }
        };
        t.bounds.push(bound);
        return Ok(());
    };
    if t.base.duplicates.contains(family) {
        return Err(BindError(format!(
            "family `{family}` appears in more than one block of base `{}`; cannot tell which to move",
            t.base_path.display()
        )));
    }
    let info = match t.fam_info(family) {
        Some(i) => i,
        None if mv.create.is_some() => ensure_family(t, mv, family, want, cache, spec_dir, opts)?,
        None => {
            return Err(BindError(format!(
                "`{family}` is not in base `{}`{}; add `create:` to create a series of it",
                t.base_path.display(),
                t.version
                    .as_deref()
                    .map(|v| format!(" ({v})"))
                    .unwrap_or_default()
            )))
        }
    };
    let kind_ok = info.kind == want || (want == Kind::Gauge && info.kind == Kind::Untyped);
    if !kind_ok {
        return Err(BindError(format!(
            "`{family}` is a {} in base `{}`, not a {}",
            info.kind.as_str(),
            t.base_path.display(),
            want.as_str()
        )));
    }
    if info.base.is_some() || !info.label_names.is_empty() {
        for k in mv.matchers.keys() {
            if !info.label_names.iter().any(|n| n == k) {
                return Err(BindError(format!(
                    "`match` label `{k}` is not a label of `{family}` (its labels: {})",
                    if info.label_names.is_empty() {
                        "none".to_string()
                    } else {
                        info.label_names.join(", ")
                    }
                )));
            }
        }
    }
    let appear = start_step;
    if want == Kind::Histogram {
        let gids: Vec<usize> = if let Some(create) = &mv.create {
            let labels = created_labels(&info, family, create)?;
            let existing = t
                .groups_by_family
                .get(family)
                .and_then(|v| v.iter().copied().find(|&g| t.groups[g].labels == labels));
            match existing {
                Some(g) => vec![g],
                None => {
                    let mut ids = Vec::new();
                    let mut buckets = Vec::new();
                    for (le, le_text) in &info.les {
                        let id = t.push_created(
                            Created {
                                family: family.to_string(),
                                labels: labels.clone(),
                                prefix: render_prefix(&format!("{family}_bucket"), &labels, Some(le_text)),
                                appear,
                            },
                            true,
                        );
                        buckets.push((*le, id));
                        ids.push(id);
                    }
                    let sum = t.push_created(
                        Created {
                            family: family.to_string(),
                            labels: labels.clone(),
                            prefix: render_prefix(&format!("{family}_sum"), &labels, None),
                            appear,
                        },
                        true,
                    );
                    let count = t.push_created(
                        Created {
                            family: family.to_string(),
                            labels: labels.clone(),
                            prefix: render_prefix(&format!("{family}_count"), &labels, None),
                            appear,
                        },
                        true,
                    );
                    ids.push(sum);
                    ids.push(count);
                    t.groups.push(Group {
                        labels: labels.clone(),
                        buckets,
                        sum: Some(sum),
                        count: Some(count),
                    });
                    let g = t.groups.len() - 1;
                    t.groups_by_family.entry(family.to_string()).or_default().push(g);
                    register_unit(t, &info, key_of(&labels), ids);
                    vec![g]
                }
            }
        } else {
            t.groups_by_family
                .get(family)
                .map(|v| {
                    v.iter()
                        .copied()
                        .filter(|&g| labels_match(&t.groups[g].labels, &mv.matchers))
                        .collect()
                })
                .unwrap_or_default()
        };
        if gids.is_empty() {
            return Err(BindError(format!(
                "no series of `{family}` match {}",
                fmt_matchers(&mv.matchers)
            )));
        }
        for &g in &gids {
            if t.groups[g].count.is_none() || t.groups[g].buckets.last().is_none_or(|b| b.0 != f64::INFINITY)
            {
                return Err(BindError(format!(
                    "histogram `{family}` in the base lacks `_count` or the `+Inf` bucket"
                )));
            }
        }
        let weights: Vec<f64> = gids
            .iter()
            .map(|&g| t.groups[g].count.map(|c| t.values[c]).unwrap_or(0.0))
            .collect();
        let (amount, observe) = match mv.action {
            Action::HistogramRate { rate, observe } => (Amount::Rate(rate), observe),
            Action::HistogramAdd { count, observe } => (Amount::Once(count), observe),
            _ => return Err(BindError("internal: not a histogram action".into())),
        };
        bound.kind = BoundKind::Histogram {
            shares: shares_from(&weights),
            groups: gids,
            total: 0.0,
            observe,
            amount,
        };
    } else {
        let ids: Vec<usize> = if let Some(create) = &mv.create {
            let labels = created_labels(&info, family, create)?;
            let existing = t.family_series(family, &info).into_iter().find(|&i| {
                let l = t.series_labels(i);
                l.len() == labels.len() && l.iter().zip(&labels).all(|(a, b)| a == b)
            });
            match existing {
                Some(i) => vec![i],
                None => {
                    let id = t.push_created(
                        Created {
                            family: family.to_string(),
                            labels: labels.clone(),
                            prefix: render_prefix(family, &labels, None),
                            appear,
                        },
                        want == Kind::Counter,
                    );
                    register_unit(t, &info, key_of(&labels), vec![id]);
                    vec![id]
                }
            }
        } else {
            t.family_series(family, &info)
                .into_iter()
                .filter(|&i| labels_match(t.series_labels(i), &mv.matchers))
                .collect()
        };
        if ids.is_empty() {
            return Err(BindError(format!(
                "no series of `{family}` match {}",
                fmt_matchers(&mv.matchers)
            )));
        }
        if want == Kind::Counter {
            let weights: Vec<f64> = ids.iter().map(|&i| t.values[i]).collect();
            let integer = info
                .base
                .map(|fi| {
                    t.base.families[fi]
                        .samples
                        .clone()
                        .all(|i| t.base.samples[i].value.fract() == 0.0)
                })
                .unwrap_or(true);
            let amount = match mv.action {
                Action::CounterRate(r) => Amount::Rate(r),
                Action::CounterAdd(a) => Amount::Once(a),
                _ => return Err(BindError("internal: not a counter action".into())),
            };
            bound.kind = BoundKind::Counter {
                shares: shares_from(&weights),
                series: ids,
                total: 0.0,
                integer,
                amount,
            };
        } else {
            let op = match mv.action {
                Action::GaugeSet(v) => GaugeOp::Set(v),
                Action::GaugeRate(r) => GaugeOp::Rate(r),
                Action::GaugeAdd(a) => GaugeOp::Add(a),
                _ => return Err(BindError("internal: not a gauge action".into())),
            };
            bound.kind = BoundKind::Gauge {
                saved: vec![0.0; ids.len()],
                series: ids,
                op,
            };
        }
    }
    t.bounds.push(bound);
    Ok(())
}

fn fmt_matchers(m: &BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "(no `match`)".into();
    }
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// Sorts the insert points and collects the base series moves can change.
fn finish_target(t: &mut TargetState) {
    t.inserts
        .sort_by(|a, b| a.offset.cmp(&b.offset).then_with(|| a.key.cmp(&b.key)));
    t.new_fams
        .sort_by(|a, b| a.offset.cmp(&b.offset).then_with(|| a.name.cmp(&b.name)));
    for f in &mut t.new_fams {
        f.units.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let nb = t.n_base();
    let mut touched = vec![false; nb];
    let restart = t.bounds.iter().any(|b| matches!(b.kind, BoundKind::Restart));
    for b in &t.bounds {
        match &b.kind {
            BoundKind::Counter { series, .. } | BoundKind::Gauge { series, .. } => {
                for &i in series {
                    if i < nb {
                        touched[i] = true;
                    }
                }
            }
            BoundKind::Histogram { groups, .. } => {
                for &g in groups {
                    let g = &t.groups[g];
                    for &i in g
                        .buckets
                        .iter()
                        .map(|(_, i)| i)
                        .chain(g.sum.iter())
                        .chain(g.count.iter())
                    {
                        if i < nb {
                            touched[i] = true;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if restart {
        for (i, c) in t.counter_like.iter().take(nb).enumerate() {
            if *c {
                touched[i] = true;
            }
        }
        if let Some(p) = t.process_start {
            touched[p] = true;
        }
    }
    t.touched = (0..nb).filter(|&i| touched[i]).collect();
}

/// Applies everything that happens up to step `k`.
fn advance(t: &mut TargetState, k: usize, interval: Millis, start_ms: Millis) {
    let hi = k as Millis * interval;
    let lo = hi - interval;
    // 1. restarts
    for b in &t.bounds {
        if matches!(b.kind, BoundKind::Restart) && b.start_step == k {
            for (v, c) in t.values.iter_mut().zip(&t.counter_like) {
                if *c {
                    *v = 0.0;
                }
            }
            if let Some(p) = t.process_start {
                t.values[p] = (start_ms + b.start) as f64 / 1000.0;
            }
        }
    }
    // 2. one-shot changes and rates
    let values = &mut t.values;
    let groups = &t.groups;
    for b in &mut t.bounds {
        let active = if k == 0 {
            0
        } else {
            let (s, e) = (b.start.max(lo), b.end.unwrap_or(Millis::MAX / 4).min(hi));
            measure(s, e) - union_measure(&b.suspended, s, e.max(s))
        };
        let dt = active as f64 / 1000.0;
        match &mut b.kind {
            BoundKind::Counter {
                series,
                shares,
                total,
                integer,
                amount,
            } => {
                let add = match *amount {
                    Amount::Rate(r) => r * dt,
                    Amount::Once(a) if b.start_step == k => a,
                    Amount::Once(_) => 0.0,
                };
                if add == 0.0 {
                    continue;
                }
                let old = *total;
                *total += add;
                for (&id, &sh) in series.iter().zip(shares.iter()) {
                    let d = if *integer {
                        whole(*total * sh) - whole(old * sh)
                    } else {
                        add * sh
                    };
                    values[id] += d;
                }
            }
            BoundKind::Histogram {
                groups: gids,
                shares,
                total,
                observe,
                amount,
            } => {
                let add = match *amount {
                    Amount::Rate(r) => r * dt,
                    Amount::Once(a) if b.start_step == k => a,
                    Amount::Once(_) => 0.0,
                };
                if add == 0.0 {
                    continue;
                }
                let old = *total;
                *total += add;
                for (&g, &sh) in gids.iter().zip(shares.iter()) {
                    let n = whole(*total * sh) - whole(old * sh);
                    if n == 0.0 {
                        continue;
                    }
                    let g = &groups[g];
                    for &(le, id) in &g.buckets {
                        if le >= *observe {
                            values[id] += n;
                        }
                    }
                    if let Some(c) = g.count {
                        values[c] += n;
                    }
                    if let Some(s) = g.sum {
                        values[s] += n * *observe;
                    }
                }
            }
            BoundKind::Gauge { series, op, saved } => match *op {
                GaugeOp::Set(v) => {
                    if b.start_step == k {
                        for (i, &id) in series.iter().enumerate() {
                            saved[i] = values[id];
                            values[id] = v;
                        }
                    }
                    if b.end_step == Some(k) {
                        for (i, &id) in series.iter().enumerate() {
                            values[id] = saved[i];
                        }
                    }
                }
                GaugeOp::Rate(r) => {
                    if dt > 0.0 {
                        for &id in series.iter() {
                            values[id] += r * dt;
                        }
                    }
                }
                GaugeOp::Add(a) => {
                    if b.start_step == k {
                        for &id in series.iter() {
                            values[id] += a;
                        }
                    }
                }
            },
            BoundKind::Down | BoundKind::Restart => {}
        }
    }
}

/// Writes snapshot `k` of target `t` into `t.buf`.
fn render(t: &mut TargetState, k: usize) {
    let base = &t.base;
    let text = &base.text;
    let nb = base.samples.len();
    let mut out = std::mem::take(&mut t.buf);
    out.clear();
    out.reserve(text.len() + 4096);
    let mut pos = 0usize;
    let (mut ti, mut ii, mut fi) = (0usize, 0usize, 0usize);
    let write_created = |out: &mut Vec<u8>, ids: &[usize], values: &[f64], created: &[Created]| {
        for &id in ids {
            let c = &created[id - nb];
            out.extend_from_slice(c.prefix.as_bytes());
            out.extend_from_slice(format_go(values[id]).as_bytes());
            out.push(b'\n');
        }
    };
    loop {
        // Next event: a changed value token, a created-series insert, or a new family.
        let next_touch = t.touched[ti..]
            .iter()
            .position(|&id| t.values[id].to_bits() != base.samples[id].value.to_bits())
            .map(|p| ti + p);
        let touch_off = next_touch.map(|i| base.samples[t.touched[i]].value_span.0);
        let ins_off = t.inserts.get(ii).map(|x| x.offset);
        let fam_off = t.new_fams.get(fi).map(|x| x.offset);
        let Some(off) = [touch_off, ins_off, fam_off].into_iter().flatten().min() else {
            break;
        };
        out.extend_from_slice(&text[pos..off]);
        pos = off;
        if ins_off == Some(off) {
            let ins = &t.inserts[ii];
            ii += 1;
            if ins.ids.first().is_some_and(|&id| t.created[id - nb].appear <= k) {
                ensure_newline(&mut out);
                write_created(&mut out, &ins.ids, &t.values, &t.created);
            }
        } else if fam_off == Some(off) {
            let f = &t.new_fams[fi];
            fi += 1;
            let visible: Vec<&(Vec<String>, Vec<usize>)> = f
                .units
                .iter()
                .filter(|(_, ids)| ids.first().is_some_and(|&id| t.created[id - nb].appear <= k))
                .collect();
            if !visible.is_empty() {
                ensure_newline(&mut out);
                out.extend_from_slice(f.header.as_bytes());
                for (_, ids) in visible {
                    write_created(&mut out, ids, &t.values, &t.created);
                }
            }
        } else if let Some(i) = next_touch {
            let id = t.touched[i];
            ti = i + 1;
            let (_, ve) = base.samples[id].value_span;
            out.extend_from_slice(format_go(t.values[id]).as_bytes());
            pos = ve;
        }
    }
    out.extend_from_slice(&text[pos..]);
    t.buf = out;
}

fn ensure_newline(out: &mut Vec<u8>) {
    if out.last().is_some_and(|&c| c != b'\n') {
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_measure_merges_overlaps_and_clips() {
        assert_eq!(union_measure(&[(0, 10), (5, 20), (30, 40)], 0, 100), 30);
        assert_eq!(union_measure(&[(0, 10), (5, 20)], 8, 12), 4);
        assert_eq!(union_measure(&[], 0, 100), 0);
        assert_eq!(union_measure(&[(50, 60)], 0, 40), 0);
    }

    #[test]
    fn shares_follow_weights_or_split_evenly() {
        assert_eq!(shares_from(&[1.0, 3.0]), vec![0.25, 0.75]);
        assert_eq!(shares_from(&[0.0, 0.0]), vec![0.5, 0.5]);
        assert_eq!(shares_from(&[f64::NAN, 2.0]), vec![0.0, 1.0]);
    }

    #[test]
    fn whole_counts_tolerate_float_noise() {
        assert_eq!(whole(600.0 * (1.0 / 3.0)), 200.0);
        assert_eq!(whole(199.6), 199.0);
    }
}
