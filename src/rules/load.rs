//! Loading and checking rule files: YAML schema errors with `file:line:col`,
//! then semantic checks (ids, references, the PromQL subset, cycles,
//! reachability), each located in the source text.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::model::{Direction, LeafDef, NodeDef, RuleFile, SignalDef, FORMAT_VERSION};
use crate::eval::template::{self, Reads, ROLE_LABEL, WINDOW_PLACEHOLDER};

/// The reserved child id that ends the walk with "healthy".
pub const HEALTHY: &str = "healthy";

/// How serious a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
}

/// One problem found in a rule file, with its location (`line` 0 when unknown).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub level: Level,
    pub message: String,
    /// The offending source line, trimmed.
    pub snippet: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            Level::Error => "error",
            Level::Warning => "warning",
        };
        if self.line == 0 {
            write!(f, "{}: {level}: {}", self.file, self.message)?;
        } else {
            write!(
                f,
                "{}:{}:{}: {level}: {}",
                self.file, self.line, self.col, self.message
            )?;
        }
        if !self.snippet.is_empty() {
            write!(f, "\n    | {}", self.snippet)?;
        }
        Ok(())
    }
}

/// Why a rule file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("cannot read rule file `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

fn render(d: &[Diagnostic]) -> String {
    let errors: Vec<String> = d
        .iter()
        .filter(|d| d.level == Level::Error)
        .map(|d| d.to_string())
        .collect();
    errors.join("\n")
}

/// A child of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Child {
    Node(usize),
    Leaf(usize),
    Healthy,
}

/// A signal with its expressions checked and analysed.
#[derive(Clone, Debug)]
pub struct Signal {
    pub def: SignalDef,
    /// `expr` followed by the alternatives, in the order they are tried.
    pub exprs: Vec<String>,
    /// What each expression reads.
    pub reads: Vec<Reads>,
    /// The checked single-snapshot form (`snapshot:`), if the signal has one.
    pub snapshot: Option<Box<Signal>>,
    /// The checked mean form (`mean:`), used when the histogram's buckets are
    /// not exposed.
    pub mean: Option<Box<Signal>>,
    /// This is the mean form of a histogram signal, judged because the
    /// buckets were not exposed.
    pub on_mean: bool,
    /// This is the since-process-start form of a signal (its values are
    /// lifetime counts or ratios, not rates).
    pub since_start: bool,
    /// The checked observation count (`observations:`), if any.
    pub observations: Option<Observations>,
    /// The checked contributor breakdown (`breakdown:`), if any.
    pub breakdown: Option<Breakdown>,
}

/// A signal's contributor breakdown: the labels, the expressions in the order
/// they are tried and what each reads.
#[derive(Clone, Debug)]
pub struct Breakdown {
    pub by: Vec<String>,
    pub unit: super::model::Unit,
    pub across: super::model::Across,
    pub exprs: Vec<String>,
    pub reads: Vec<Reads>,
}

/// A signal's observation count: the expression, what it reads, the minimum.
#[derive(Clone, Debug)]
pub struct Observations {
    pub expr: String,
    pub reads: Reads,
    pub min: f64,
    pub proportion: bool,
}

impl Signal {
    /// Whether every expression needs two or more snapshots.
    pub fn needs_series(&self) -> bool {
        self.reads.iter().all(|r| r.needs_series)
    }

    /// How long an instance must stay lit, in milliseconds, for a step of
    /// `step` and a resolved `$window` of `range` (default: one step).
    pub fn persistence(&self, step: i64, range: i64) -> i64 {
        self.def.persistence.map(|p| p.millis(range)).unwrap_or(step)
    }
}

/// A node with its children resolved.
#[derive(Clone, Debug)]
pub struct Node {
    pub def: NodeDef,
    pub yes: Child,
    pub no: Child,
}

/// A checked scope: a role and the node that judges it.
#[derive(Clone, Debug)]
pub struct Scope {
    pub role: crate::source::Role,
    pub node: usize,
    pub healthy: String,
}

/// A checked cause (`causes:`): what it is, the signals that read it and the
/// leaves it can make light.
#[derive(Clone, Debug)]
pub struct Cause {
    pub id: String,
    pub title: String,
    /// Signal indices.
    pub read_by: Vec<usize>,
    /// Leaf indices.
    pub effects: Vec<usize>,
    /// Signal indices (`through:`); empty: any signal of the effect.
    pub through: Vec<usize>,
    pub remedy: Option<String>,
}

/// A loaded, checked rule set.
#[derive(Clone, Debug)]
pub struct RuleSet {
    /// Where it came from (for messages).
    pub origin: String,
    pub description: Option<String>,
    pub root: usize,
    pub signals: Vec<Signal>,
    pub nodes: Vec<Node>,
    pub leaves: Vec<LeafDef>,
    /// Leaf indices in tree order (depth first, `yes` before `no`); ties between
    /// onsets are broken by this order, as a stated assumption.
    pub leaf_order: Vec<usize>,
    /// How each leaf lights (indexed like `leaves`), computed once at load.
    pub logic: Vec<LeafLogic>,
    /// Per role, the node that judges it by its own metrics (`scopes:`).
    pub scopes: Vec<Scope>,
    /// Advisories (`advisories:`), in file order.
    pub advisories: Vec<crate::rules::model::AdvisoryDef>,
    /// What can make leaves light from below (`causes:`), in file order.
    pub causes: Vec<Cause>,
    signal_index: HashMap<String, usize>,
    leaf_index: HashMap<String, usize>,
    node_index: HashMap<String, usize>,
}

impl RuleSet {
    pub fn signal(&self, id: &str) -> Option<usize> {
        self.signal_index.get(id).copied()
    }
    pub fn leaf(&self, id: &str) -> Option<usize> {
        self.leaf_index.get(id).copied()
    }
    pub fn node(&self, id: &str) -> Option<usize> {
        self.node_index.get(id).copied()
    }

    /// Every metric name any expression reads (for the sources' family filter).
    pub fn referenced_metrics(&self) -> BTreeSet<String> {
        fn all(s: &Signal) -> impl Iterator<Item = &Reads> {
            s.reads
                .iter()
                .chain(s.observations.iter().map(|o| &o.reads))
                .chain(s.breakdown.iter().flat_map(|b| b.reads.iter()))
        }
        self.signals
            .iter()
            .flat_map(|s| {
                all(s)
                    .chain(s.snapshot.iter().flat_map(|x| all(x)))
                    .chain(s.mean.iter().flat_map(|x| all(x)))
            })
            .flat_map(|r| r.metrics.iter().cloned())
            .collect()
    }

    /// The rule set as evaluated over a single snapshot: every signal with a
    /// `snapshot:` form is replaced by it (since-process-start values and their
    /// thresholds). Returns the ids of the replaced signals.
    pub fn for_single_snapshot(&self) -> (RuleSet, Vec<String>) {
        let mut r = self.clone();
        let mut replaced = Vec::new();
        for s in &mut r.signals {
            if let Some(sn) = s.snapshot.take() {
                replaced.push(s.def.id.clone());
                *s = *sn;
            }
        }
        (r, replaced)
    }

    /// The rule set with the mean form (`mean:`) in place of every signal for
    /// which `use_mean` says so (its buckets are not exposed, its `_sum` and
    /// `_count` are). Returns the ids of the replaced signals.
    pub fn on_means(&self, use_mean: impl Fn(&Signal, &Signal) -> bool) -> (RuleSet, Vec<String>) {
        let mut r = self.clone();
        let mut replaced = Vec::new();
        for s in &mut r.signals {
            let swap = s.mean.as_deref().is_some_and(|m| use_mean(s, m));
            if swap {
                if let Some(m) = s.mean.take() {
                    replaced.push(s.def.id.clone());
                    *s = *m;
                }
            }
        }
        (r, replaced)
    }

    /// The shipped rule set (`rules/default.yaml`).
    pub fn default_rules() -> Result<RuleSet, RuleError> {
        load_str(DEFAULT_RULES, "rules/default.yaml")
    }
}

/// The text of the shipped rule file.
pub const DEFAULT_RULES: &str = include_str!("../../rules/default.yaml");

/// Reads and loads a rule file.
pub fn load_file(path: &Path) -> Result<RuleSet, RuleError> {
    load_str(&read_file(path)?, &path.display().to_string())
}

/// Reads a rule file's text (at most [`crate::limits::MAX_FILE_BYTES`]), as
/// `diagnose --rules`, `tree`, `rules export` and `rules check` all do.
pub fn read_file(path: &Path) -> Result<String, RuleError> {
    crate::limits::read_text_capped(path).map_err(|e| RuleError::Read {
        path: path.display().to_string(),
        source: e,
    })
}

/// Loads rules from text; `origin` names the file in messages. Warnings do not
/// stop loading; any error does.
pub fn load_str(src: &str, origin: &str) -> Result<RuleSet, RuleError> {
    let (set, diags) = analyse(src, origin);
    match set {
        Some(s) if !diags.iter().any(|d| d.level == Level::Error) => Ok(s),
        _ => Err(RuleError::Invalid(diags)),
    }
}

/// Schema and semantic checks, returning every diagnostic (errors and warnings)
/// plus the rule set when there were no errors.
pub fn analyse(src: &str, origin: &str) -> (Option<RuleSet>, Vec<Diagnostic>) {
    let loc = Locator::new(src, origin);
    let file: RuleFile = match crate::source::yaml::from_str(src) {
        Ok(f) => f,
        Err(e) => return (None, vec![loc.at(e.line, e.column, Level::Error, e.message)]),
    };
    let mut d = Vec::new();
    check_version(&file, &loc, &mut d);
    let ix = index_ids(&file, &loc, &mut d);
    let signals = file
        .signals
        .iter()
        .map(|s| check_signal(&loc, s, &mut d))
        .collect();
    let mut used_signals = BTreeSet::new();
    let nodes = build_nodes(&file, &loc, &ix, &mut used_signals, &mut d);
    check_node_needs(&file, &loc, &ix, &mut used_signals, &mut d);
    for l in &file.leaves {
        check_leaf_refs(&file, l, &loc, &ix, &mut used_signals, &mut d);
    }
    check_advisories(&file, &loc, &ix, &mut used_signals, &mut d);
    check_quiet_after(&file, &loc, &ix, &mut used_signals, &mut d);
    let scopes = build_scopes(&file, &loc, &ix, &mut d);
    let causes = check_causes(&file, &loc, &ix.signal, &ix.leaf, &mut used_signals, &mut d);
    warn_unused(&file, &loc, &used_signals, &mut d);
    let (root, leaf_order) = check_reach(&file, &loc, &ix, &nodes, &mut d);

    let ok = !d.iter().any(|x| x.level == Level::Error);
    let set = match (ok, root) {
        (true, Some(root)) => Some(RuleSet {
            origin: origin.to_string(),
            description: file.description.clone(),
            root,
            logic: leaf_logic_of(&nodes, root, &file.leaves),
            scopes,
            signals,
            nodes,
            leaves: file.leaves.clone(),
            advisories: file.advisories.clone(),
            causes,
            leaf_order,
            signal_index: ix.signal,
            leaf_index: ix.leaf,
            node_index: ix.node,
        }),
        _ => None,
    };
    (set, d)
}

/// Position of every signal, node and leaf in the file, by id.
struct Indices {
    signal: HashMap<String, usize>,
    node: HashMap<String, usize>,
    leaf: HashMap<String, usize>,
}

fn check_version(file: &RuleFile, loc: &Locator, d: &mut Vec<Diagnostic>) {
    if file.version != FORMAT_VERSION {
        d.push(loc.key(
            None,
            "version",
            Level::Error,
            format!(
                "unsupported rule format version {} (this build reads version {FORMAT_VERSION})",
                file.version
            ),
        ));
    }
}

/// Indexes the ids of every section: well formed, unique, and not reserved.
fn index_ids(file: &RuleFile, loc: &Locator, d: &mut Vec<Diagnostic>) -> Indices {
    let signal = unique_ids(loc, "signals", "signal", file.signals.iter().map(|s| &s.id), d);
    let node = unique_ids(loc, "nodes", "node", file.nodes.iter().map(|n| &n.id), d);
    let mut leaf = HashMap::new();
    for (i, l) in file.leaves.iter().enumerate() {
        check_id(loc, "leaves", &l.id, d);
        if leaf.insert(l.id.clone(), i).is_some() {
            d.push(loc.entity(
                "leaves",
                &l.id,
                2,
                Level::Error,
                format!("duplicate leaf id `{}`", l.id),
            ));
        }
        if node.contains_key(&l.id) {
            d.push(loc.entity(
                "leaves",
                &l.id,
                1,
                Level::Error,
                format!(
                    "leaf id `{}` is also a node id; children would be ambiguous",
                    l.id
                ),
            ));
        }
        check_leaf_shape(l, loc, d);
    }
    for reserved in [HEALTHY] {
        if node.contains_key(reserved) || leaf.contains_key(reserved) {
            let section = if node.contains_key(reserved) {
                "nodes"
            } else {
                "leaves"
            };
            d.push(loc.entity(
                section,
                reserved,
                1,
                Level::Error,
                format!("`{reserved}` is reserved for the healthy end of the walk"),
            ));
        }
    }
    Indices { signal, node, leaf }
}

/// The index of one section's ids, with an error for each duplicate.
fn unique_ids<'a>(
    loc: &Locator,
    section: &str,
    kind: &str,
    ids: impl Iterator<Item = &'a String>,
    d: &mut Vec<Diagnostic>,
) -> HashMap<String, usize> {
    let mut index = HashMap::new();
    for (i, id) in ids.enumerate() {
        check_id(loc, section, id, d);
        if index.insert(id.clone(), i).is_some() {
            d.push(loc.entity(
                section,
                id,
                2,
                Level::Error,
                format!("duplicate {kind} id `{id}`"),
            ));
        }
    }
    index
}

/// A leaf's own fields: axis names in kebab-case, a falsifier, runbook steps.
fn check_leaf_shape(l: &LeafDef, loc: &Locator, d: &mut Vec<Diagnostic>) {
    if !is_kebab(&l.axis) {
        d.push(loc.key(
            Some(("leaves", &l.id)),
            "axis",
            Level::Error,
            format!("axis `{}` must be lowercase kebab-case", l.axis),
        ));
    }
    if let Some(sa) = &l.sub_axis {
        if !is_kebab(sa) {
            d.push(loc.key(
                Some(("leaves", &l.id)),
                "sub_axis",
                Level::Error,
                format!("sub-axis `{sa}` must be lowercase kebab-case"),
            ));
        }
    }
    if l.falsifier.trim().is_empty() {
        d.push(loc.key(
            Some(("leaves", &l.id)),
            "falsifier",
            Level::Error,
            format!("leaf `{}` has an empty falsifier", l.id),
        ));
    }
    if l.runbook.is_empty() {
        d.push(loc.key(
            Some(("leaves", &l.id)),
            "runbook",
            Level::Error,
            format!("leaf `{}` has no runbook steps", l.id),
        ));
    }
}

/// Resolves each node's children and checks the signals its conditions read.
fn build_nodes(
    file: &RuleFile,
    loc: &Locator,
    ix: &Indices,
    used_signals: &mut BTreeSet<String>,
    d: &mut Vec<Diagnostic>,
) -> Vec<Node> {
    let resolve = |id: &str| -> Option<Child> {
        if id == HEALTHY {
            Some(Child::Healthy)
        } else if let Some(&i) = ix.node.get(id) {
            Some(Child::Node(i))
        } else {
            ix.leaf.get(id).map(|&i| Child::Leaf(i))
        }
    };
    let mut nodes = Vec::new();
    for n in &file.nodes {
        let held = n.sustain.iter().flat_map(|c| c.signals());
        for s in n.when.signals().into_iter().chain(held) {
            used_signals.insert(s.to_string());
            require_signal(&ix.signal, loc, ("nodes", &n.id), s, d, || {
                format!("node `{}` uses unknown signal `{s}`", n.id)
            });
        }
        let empty = |c: &super::model::Condition| matches!(c, super::model::Condition::Any { any: v } | super::model::Condition::All { all: v } if v.is_empty());
        if empty(&n.when) || n.sustain.as_ref().is_some_and(empty) {
            d.push(loc.key(
                Some(("nodes", &n.id)),
                "when",
                Level::Error,
                format!("node `{}` has an empty condition", n.id),
            ));
        }
        let mut child = |key: &str, id: &str| -> Child {
            resolve(id).unwrap_or_else(|| {
                d.push(loc.key(
                    Some(("nodes", &n.id)),
                    key,
                    Level::Error,
                    format!(
                        "node `{}` refers to unknown child `{id}` (not a node, a leaf or `healthy`)",
                        n.id
                    ),
                ));
                Child::Healthy
            })
        };
        let yes = child("yes", &n.yes);
        let no = child("no", &n.no);
        nodes.push(Node {
            def: n.clone(),
            yes,
            no,
        });
    }
    nodes
}

/// The signals a node `needs` must exist.
fn check_node_needs(
    file: &RuleFile,
    loc: &Locator,
    ix: &Indices,
    used_signals: &mut BTreeSet<String>,
    d: &mut Vec<Diagnostic>,
) {
    for n in &file.nodes {
        for s in &n.needs {
            used_signals.insert(s.clone());
            require_signal(&ix.signal, loc, ("nodes", &n.id), s, d, || {
                format!("node `{}` needs unknown signal `{s}`", n.id)
            });
        }
    }
}

/// A signal's `quiet_after:` names another known signal, which is not itself
/// quieted by one (the quiet is applied once, after every signal is judged).
fn check_quiet_after(
    file: &RuleFile,
    loc: &Locator,
    ix: &Indices,
    used_signals: &mut BTreeSet<String>,
    d: &mut Vec<Diagnostic>,
) {
    for s in &file.signals {
        let Some(q) = &s.quiet_after else { continue };
        used_signals.insert(q.signal.clone());
        let found = require_signal(&ix.signal, loc, ("signals", &s.id), &q.signal, d, || {
            format!("signal `{}` is quiet after unknown signal `{}`", s.id, q.signal)
        });
        let chained = file
            .signals
            .iter()
            .any(|o| o.id == q.signal && (o.id == s.id || o.quiet_after.is_some()));
        if found.is_some() && chained {
            d.push(loc.token(
                ("signals", &s.id),
                &q.signal,
                Level::Error,
                format!(
                    "signal `{}` is quiet after `{}`, which is itself or quiet after another: name the signal that shows the fault",
                    s.id, q.signal
                ),
            ));
        }
    }
}

/// What a leaf refers to: evidence signals, cause members, the leaf it refines,
/// and the placeholders of its cause sentence.
fn check_leaf_refs(
    file: &RuleFile,
    l: &LeafDef,
    loc: &Locator,
    ix: &Indices,
    used_signals: &mut BTreeSet<String>,
    d: &mut Vec<Diagnostic>,
) {
    for s in &l.evidence {
        used_signals.insert(s.clone());
        require_signal(&ix.signal, loc, ("leaves", &l.id), s, d, || {
            format!("leaf `{}` shows unknown signal `{s}` as evidence", l.id)
        });
    }
    if let Some(c) = &l.cause_instances {
        require_signal(&ix.signal, loc, ("leaves", &l.id), c, d, || {
            format!(
                "leaf `{}` takes its cause members from unknown signal `{c}`",
                l.id
            )
        });
    }
    for s in l.early_signs.iter().flat_map(|e| &e.signals) {
        used_signals.insert(s.clone());
        require_signal(&ix.signal, loc, ("leaves", &l.id), s, d, || {
            format!("leaf `{}` is dated by unknown signal `{s}`", l.id)
        });
    }
    if let Some(r) = &l.refines {
        match file.leaves.iter().find(|o| &o.id == r) {
            None => d.push(loc.token(
                ("leaves", &l.id),
                r,
                Level::Error,
                format!("leaf `{}` refines unknown leaf `{r}`", l.id),
            )),
            Some(o) if o.id == l.id || o.fallback || l.fallback => d.push(loc.token(
                ("leaves", &l.id),
                r,
                Level::Error,
                format!(
                    "leaf `{}` refines `{r}`: a leaf refines another ordinary leaf, not itself or a fallback",
                    l.id
                ),
            )),
            Some(_) => {}
        }
    }
    for clause in &l.cause {
        for ph in crate::rules::model::cause_placeholders(clause) {
            check_placeholder(file, l, ph, loc, ix, d);
        }
    }
}

/// One `{placeholder}` of a leaf's cause sentence names `instance`, `others`
/// or a signal (with a breakdown when it asks for the top contributor).
fn check_placeholder(
    file: &RuleFile,
    l: &LeafDef,
    ph: &str,
    loc: &Locator,
    ix: &Indices,
    d: &mut Vec<Diagnostic>,
) {
    let top = ph
        .strip_suffix(".top")
        .or_else(|| ph.strip_suffix(".group"))
        .or_else(|| ph.strip_suffix(".shares"));
    let sig = ph
        .strip_suffix(".baseline")
        .or(top)
        .or_else(|| ph.strip_suffix(".since"))
        .or_else(|| ph.strip_suffix(".others"))
        .or_else(|| ph.strip_suffix(".peers"))
        .or_else(|| ph.strip_prefix("if:"))
        .unwrap_or(ph);
    if ph == "instance" || ph == "others" {
        return;
    }
    let no_breakdown = top.is_some()
        && ix
            .signal
            .get(sig)
            .is_some_and(|&k| file.signals[k].breakdown.is_none());
    if no_breakdown {
        d.push(loc.token(
            ("leaves", &l.id),
            ph,
            Level::Error,
            format!(
                "leaf `{}` says its cause with `{{{ph}}}`, but signal `{sig}` has no `breakdown` to name a contributor",
                l.id
            ),
        ));
    }
    if !ix.signal.contains_key(sig) {
        d.push(loc.token(
            ("leaves", &l.id),
            ph,
            Level::Error,
            format!(
                "leaf `{}` says its cause with `{{{ph}}}`, which is neither `instance`, `others` nor a signal (`ID`, `ID.baseline`, `ID.top`, `ID.group`, `ID.shares`, `ID.since`, `ID.others` or `if:ID`)",
                l.id
            ),
        ));
    }
}

/// Advisories: unique ids, known signals and leaves, a reason for what they
/// mark not applicable.
fn check_advisories(
    file: &RuleFile,
    loc: &Locator,
    ix: &Indices,
    used_signals: &mut BTreeSet<String>,
    d: &mut Vec<Diagnostic>,
) {
    let mut advisory_ids = BTreeSet::new();
    for a in &file.advisories {
        if !advisory_ids.insert(a.id.clone()) {
            d.push(loc.key(
                None,
                "advisories",
                Level::Error,
                format!("advisory `{}` is defined twice", a.id),
            ));
        }
        let mut sigs: Vec<String> = a.when.signals().into_iter().map(str::to_string).collect();
        if let Some(u) = &a.unless {
            sigs.extend(u.signals().into_iter().map(str::to_string));
        }
        sigs.extend(a.evidence.iter().cloned());
        for s in &sigs {
            used_signals.insert(s.clone());
            require_signal(&ix.signal, loc, ("advisories", &a.id), s, d, || {
                format!("advisory `{}` reads unknown signal `{s}`", a.id)
            });
        }
        for l in &a.not_applicable {
            if !ix.leaf.contains_key(l) {
                d.push(loc.token(
                    ("advisories", &a.id),
                    l,
                    Level::Error,
                    format!("advisory `{}` marks unknown leaf `{l}` not applicable", a.id),
                ));
            }
        }
        if !a.not_applicable.is_empty() && a.reason.is_none() {
            d.push(loc.key(
                Some(("advisories", &a.id)),
                "not_applicable",
                Level::Error,
                format!(
                    "advisory `{}` marks leaves not applicable without a `reason`",
                    a.id
                ),
            ));
        }
    }
}

/// One scope per role, each starting at a known node.
fn build_scopes(file: &RuleFile, loc: &Locator, ix: &Indices, d: &mut Vec<Diagnostic>) -> Vec<Scope> {
    let mut scopes = Vec::new();
    let mut scoped_roles = BTreeSet::new();
    for sc in &file.scopes {
        if !scoped_roles.insert(sc.role) {
            d.push(loc.key(
                None,
                "scopes",
                Level::Error,
                format!("role `{}` has two scopes", sc.role.as_str()),
            ));
        }
        match ix.node.get(&sc.node) {
            Some(&n) => scopes.push(Scope {
                role: sc.role.role(),
                node: n,
                healthy: sc.healthy.clone(),
            }),
            None => d.push(loc.key(
                None,
                "scopes",
                Level::Error,
                format!(
                    "scope of role `{}` names unknown node `{}`",
                    sc.role.as_str(),
                    sc.node
                ),
            )),
        }
    }
    scopes
}

/// A warning for each signal that nothing reads.
fn warn_unused(file: &RuleFile, loc: &Locator, used_signals: &BTreeSet<String>, d: &mut Vec<Diagnostic>) {
    for s in &file.signals {
        if !used_signals.contains(&s.id) {
            d.push(loc.entity(
                "signals",
                &s.id,
                1,
                Level::Warning,
                format!("signal `{}` is not used by any node", s.id),
            ));
        }
    }
}

/// The root exists, the tree has no cycle, and every node and leaf is
/// reachable from the root; returns the root and the leaves in walk order.
fn check_reach(
    file: &RuleFile,
    loc: &Locator,
    ix: &Indices,
    nodes: &[Node],
    d: &mut Vec<Diagnostic>,
) -> (Option<usize>, Vec<usize>) {
    let Some(&root) = ix.node.get(&file.root) else {
        d.push(loc.key(
            None,
            "root",
            Level::Error,
            format!("root `{}` is not a node id", file.root),
        ));
        return (None, Vec::new());
    };
    let mut leaf_order = Vec::new();
    if let Some(cycle) = find_cycle(nodes) {
        let names: Vec<&str> = cycle.iter().map(|&i| nodes[i].def.id.as_str()).collect();
        let first = &nodes[cycle[0]].def.id;
        d.push(loc.entity(
            "nodes",
            first,
            1,
            Level::Error,
            format!("the tree has a cycle: {} → {}", names.join(" → "), names[0]),
        ));
        return (Some(root), leaf_order);
    }
    let mut seen_nodes = vec![false; nodes.len()];
    let mut seen_leaves = vec![false; file.leaves.len()];
    walk_order(nodes, root, &mut seen_nodes, &mut seen_leaves, &mut leaf_order);
    let unseen_nodes = seen_nodes.iter().enumerate().filter(|(_, s)| !**s);
    for (i, _) in unseen_nodes {
        let id = &nodes[i].def.id;
        d.push(loc.entity(
            "nodes",
            id,
            1,
            Level::Error,
            format!("node `{id}` is unreachable from root `{}`", file.root),
        ));
    }
    let unseen_leaves = seen_leaves.iter().enumerate().filter(|(_, s)| !**s);
    for (i, _) in unseen_leaves {
        let id = &file.leaves[i].id;
        d.push(loc.entity(
            "leaves",
            id,
            1,
            Level::Error,
            format!("leaf `{id}` is unreachable from root `{}`", file.root),
        ));
    }
    (Some(root), leaf_order)
}

/// Checks `causes:`: ids unique, every signal and leaf known.
fn check_causes(
    file: &RuleFile,
    loc: &Locator,
    signal_index: &HashMap<String, usize>,
    leaf_index: &HashMap<String, usize>,
    used_signals: &mut BTreeSet<String>,
    d: &mut Vec<Diagnostic>,
) -> Vec<Cause> {
    let mut ids = BTreeSet::new();
    let mut out = Vec::new();
    for c in &file.causes {
        if !ids.insert(c.id.clone()) {
            d.push(loc.key(
                None,
                "causes",
                Level::Error,
                format!("cause `{}` is defined twice", c.id),
            ));
        }
        if c.read_by.is_empty() || c.effects.is_empty() {
            d.push(loc.key(
                Some(("causes", &c.id)),
                "read_by",
                Level::Error,
                format!(
                    "cause `{}` needs at least one `read_by` signal and one `effects` leaf",
                    c.id
                ),
            ));
        }
        let mut read_by = Vec::new();
        for s in &c.read_by {
            used_signals.insert(s.clone());
            read_by.extend(require_signal(signal_index, loc, ("causes", &c.id), s, d, || {
                format!("cause `{}` is read by unknown signal `{s}`", c.id)
            }));
        }
        let through = cause_signals(c, &c.through, signal_index, loc, d);
        let mut effects = Vec::new();
        for l in &c.effects {
            match leaf_index.get(l) {
                Some(&i) => effects.push(i),
                None => d.push(loc.token(
                    ("causes", &c.id),
                    l,
                    Level::Error,
                    format!("cause `{}` names unknown leaf `{l}` as an effect", c.id),
                )),
            }
        }
        out.push(Cause {
            id: c.id.clone(),
            title: c.title.clone(),
            read_by,
            effects,
            through,
            remedy: c.remedy.clone(),
        });
    }
    out
}

/// The indices of a cause's `through:` signals; unknown ones are errors.
fn cause_signals(
    c: &crate::rules::model::CauseDef,
    names: &[String],
    signal_index: &HashMap<String, usize>,
    loc: &Locator,
    d: &mut Vec<Diagnostic>,
) -> Vec<usize> {
    let mut out = Vec::new();
    for s in names {
        out.extend(require_signal(signal_index, loc, ("causes", &c.id), s, d, || {
            format!("cause `{}` lights its effects through unknown signal `{s}`", c.id)
        }));
    }
    out
}

/// The index of signal `id`, or an error at its token in `within` saying
/// `message()` (every reference to a signal is checked the same way).
fn require_signal(
    signals: &HashMap<String, usize>,
    loc: &Locator,
    within: (&str, &str),
    id: &str,
    d: &mut Vec<Diagnostic>,
    message: impl FnOnce() -> String,
) -> Option<usize> {
    let k = signals.get(id).copied();
    if k.is_none() {
        d.push(loc.token(within, id, Level::Error, message()));
    }
    k
}

fn check_signal(loc: &Locator, s: &SignalDef, d: &mut Vec<Diagnostic>) -> Signal {
    let mut exprs = vec![s.expr.clone()];
    exprs.extend(s.alternatives.iter().cloned());
    let reads = check_exprs(loc, s, &exprs, d);
    check_optional_metrics(loc, s, &reads, d);
    check_threshold(loc, s, d);
    let observations = s.observations.as_ref().map(|o| check_observations(loc, s, o, d));
    let snapshot = s.snapshot.as_ref().map(|sn| check_snapshot(loc, s, sn, d));
    let breakdown = s.breakdown.as_ref().map(|b| check_breakdown(loc, s, b, d));
    let mean = s.mean.as_ref().map(|mn| check_mean(loc, s, mn, d));
    Signal {
        def: s.clone(),
        exprs,
        reads,
        snapshot,
        mean,
        on_mean: false,
        since_start: false,
        observations,
        breakdown,
    }
}

/// Parses the expression and its alternatives; what each reads.
fn check_exprs(loc: &Locator, s: &SignalDef, exprs: &[String], d: &mut Vec<Diagnostic>) -> Vec<Reads> {
    let at = Some(("signals", s.id.as_str()));
    let mut reads = Vec::new();
    for (i, text) in exprs.iter().enumerate() {
        let key = if i == 0 { "expr" } else { "alternatives" };
        let what = if i == 0 {
            "expression".to_string()
        } else {
            format!("alternative {i}")
        };
        match template::parse_template(text) {
            Ok(e) => {
                let r = template::reads(&e);
                if r.matcher_labels.contains(ROLE_LABEL) {
                    d.push(loc.text_or_key(at, text, key, Level::Error, format!(
                        "signal `{}` {what} matches on `{ROLE_LABEL}`; the engine injects the role from `role:`", s.id
                    )));
                }
                if r.any_metric {
                    d.push(loc.text_or_key(
                        at,
                        text,
                        key,
                        Level::Warning,
                        format!("signal `{}` {what} has a selector without a metric name", s.id),
                    ));
                }
                if r.needs_series && !text.contains(WINDOW_PLACEHOLDER) {
                    d.push(loc.text_or_key(
                        at,
                        text,
                        key,
                        Level::Warning,
                        format!(
                            "signal `{}` {what} uses a fixed range instead of `{WINDOW_PLACEHOLDER}`",
                            s.id
                        ),
                    ));
                }
                reads.push(r);
            }
            Err(e) => {
                d.push(loc.text_or_key(
                    at,
                    text,
                    key,
                    Level::Error,
                    format!("signal `{}` {what}: {e}", s.id),
                ));
                reads.push(Reads::default());
            }
        }
    }
    reads
}

/// Each optional metric is read by some expression.
fn check_optional_metrics(loc: &Locator, s: &SignalDef, reads: &[Reads], d: &mut Vec<Diagnostic>) {
    for m in &s.optional_metrics {
        if !reads
            .iter()
            .any(|r| r.metrics.iter().any(|x| x == m || template::family_of(x) == m))
        {
            d.push(loc.token(
                ("signals", &s.id),
                m,
                Level::Warning,
                format!(
                    "signal `{}` lists optional metric `{m}` that no expression reads",
                    s.id
                ),
            ));
        }
    }
}

/// The threshold: one direction, finite numbers, a sensible relative factor.
fn check_threshold(loc: &Locator, s: &SignalDef, d: &mut Vec<Diagnostic>) {
    let at = Some(("signals", s.id.as_str()));
    let t = &s.threshold;
    let finite = |v: Option<f64>| v.is_none_or(|x| x.is_finite());
    if t.above.is_none() && t.below.is_none() && t.relative.is_none() {
        d.push(loc.key(
            at,
            "threshold",
            Level::Error,
            format!("signal `{}` threshold needs `above`, `below` or `relative`", s.id),
        ));
    }
    if t.above.is_some() && t.below.is_some() {
        d.push(loc.key(
            at,
            "threshold",
            Level::Error,
            format!(
                "signal `{}` threshold has both `above` and `below`; use two signals",
                s.id
            ),
        ));
    }
    if !finite(t.above) || !finite(t.below) {
        d.push(loc.key(
            at,
            "threshold",
            Level::Error,
            format!("signal `{}` threshold is not a finite number", s.id),
        ));
    }
    if let Some(r) = &t.relative {
        if !(r.factor.is_finite() && r.factor > 0.0 && r.floor.is_finite()) {
            d.push(loc.key(
                at,
                "relative",
                Level::Error,
                format!(
                    "signal `{}` relative threshold needs a positive factor and a finite floor",
                    s.id
                ),
            ));
        }
        let clash = (r.direction == Direction::Above && t.below.is_some())
            || (r.direction == Direction::Below && t.above.is_some());
        if clash {
            d.push(loc.key(
                at,
                "relative",
                Level::Error,
                format!(
                    "signal `{}` relative direction disagrees with the absolute threshold",
                    s.id
                ),
            ));
        }
        if r.direction == Direction::Above && r.factor <= 1.0 {
            d.push(loc.key(
                at,
                "factor",
                Level::Warning,
                format!(
                    "signal `{}` relative factor {} ≤ 1 lights at or below the baseline",
                    s.id, r.factor
                ),
            ));
        }
        if r.direction == Direction::Below && r.factor >= 1.0 {
            d.push(loc.key(
                at,
                "factor",
                Level::Warning,
                format!(
                    "signal `{}` relative factor {} ≥ 1 with direction below lights at or above the baseline",
                    s.id, r.factor
                ),
            ));
        }
    }
}

/// The observation count that says whether a signal had enough data.
fn check_observations(
    loc: &Locator,
    s: &SignalDef,
    o: &super::model::ObservationsDef,
    d: &mut Vec<Diagnostic>,
) -> Observations {
    let at = Some(("signals", s.id.as_str()));
    let reads = match template::parse_template(&o.expr) {
        Ok(e) => template::reads(&e),
        Err(e) => {
            d.push(loc.text_or_key(
                at,
                &o.expr,
                "observations",
                Level::Error,
                format!("signal `{}` observations: {e}", s.id),
            ));
            Reads::default()
        }
    };
    if !(o.min.is_finite() && o.min >= 0.0) {
        d.push(loc.key(
            at,
            "observations",
            Level::Error,
            format!("signal `{}` observations `min` must be a finite number ≥ 0", s.id),
        ));
    }
    if o.proportion && s.unit != super::model::Unit::Ratio {
        d.push(loc.key(
            at,
            "observations",
            Level::Error,
            format!(
                "signal `{}` is judged as a proportion but its unit is not `ratio`",
                s.id
            ),
        ));
    }
    Observations {
        expr: o.expr.clone(),
        reads,
        min: o.min,
        proportion: o.proportion,
    }
}

/// The since-process-start form for a single snapshot: no range functions.
fn check_snapshot(
    loc: &Locator,
    s: &SignalDef,
    sn: &super::model::SnapshotDef,
    d: &mut Vec<Diagnostic>,
) -> Box<Signal> {
    let at = Some(("signals", s.id.as_str()));
    let def = SignalDef {
        description: sn.description.clone(),
        expr: sn.expr.clone(),
        alternatives: sn.alternatives.clone(),
        optional_metrics: sn.optional_metrics.clone(),
        threshold: sn.threshold.clone(),
        unit: sn.unit.unwrap_or(s.unit),
        observations: sn.observations.clone(),
        persistence: None,
        snapshot: None,
        mean: None,
        breakdown: None,
        ..s.clone()
    };
    let mut sig = check_signal(loc, &def, d);
    sig.since_start = true;
    if sig.observations.as_ref().is_some_and(|o| o.reads.needs_series) {
        d.push(loc.key(
            at,
            "snapshot",
            Level::Error,
            format!(
                "signal `{}` snapshot observations use a range function; a single snapshot has no time series",
                s.id
            ),
        ));
    }
    if sig.reads.iter().any(|r| r.needs_series) {
        d.push(loc.key(
            at,
            "snapshot",
            Level::Error,
            format!(
                "signal `{}` snapshot form uses a range function; a single snapshot has no time series",
                s.id
            ),
        ));
    }
    Box::new(sig)
}

/// The breakdown that names a signal's top contributors.
fn check_breakdown(
    loc: &Locator,
    s: &SignalDef,
    b: &super::model::BreakdownDef,
    d: &mut Vec<Diagnostic>,
) -> Breakdown {
    let at = Some(("signals", s.id.as_str()));
    if b.by.is_empty() {
        d.push(loc.key(
            at,
            "breakdown",
            Level::Error,
            format!("signal `{}` breakdown needs at least one label in `by`", s.id),
        ));
    }
    let mut exprs = vec![b.expr.clone()];
    exprs.extend(b.alternatives.iter().cloned());
    let reads = exprs
        .iter()
        .map(|text| match template::parse_template(text) {
            Ok(e) => {
                let r = template::reads(&e);
                if r.matcher_labels.contains(ROLE_LABEL) {
                    d.push(loc.text_or_key(at, text, "breakdown", Level::Error, format!(
                        "signal `{}` breakdown matches on `{ROLE_LABEL}`; the engine injects the role from `role:`", s.id
                    )));
                }
                r
            }
            Err(e) => {
                d.push(loc.text_or_key(
                    at,
                    text,
                    "breakdown",
                    Level::Error,
                    format!("signal `{}` breakdown: {e}", s.id),
                ));
                Reads::default()
            }
        })
        .collect();
    Breakdown {
        by: b.by.clone(),
        unit: b.unit,
        across: b.across,
        exprs,
        reads,
    }
}

/// The form judged on the mean when a histogram's buckets are gone.
fn check_mean(
    loc: &Locator,
    s: &SignalDef,
    mn: &super::model::SnapshotDef,
    d: &mut Vec<Diagnostic>,
) -> Box<Signal> {
    let def = SignalDef {
        description: mn.description.clone(),
        expr: mn.expr.clone(),
        alternatives: mn.alternatives.clone(),
        optional_metrics: mn.optional_metrics.clone(),
        threshold: mn.threshold.clone(),
        unit: mn.unit.unwrap_or(s.unit),
        observations: mn.observations.clone(),
        snapshot: None,
        mean: None,
        breakdown: None,
        ..s.clone()
    };
    let mut sig = check_signal(loc, &def, d);
    sig.on_mean = true;
    Box::new(sig)
}

fn check_id(loc: &Locator, section: &str, id: &str, d: &mut Vec<Diagnostic>) {
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        d.push(loc.entity(
            section,
            id,
            1,
            Level::Error,
            format!("id `{id}` must use lowercase letters, digits, `_` and `-`"),
        ));
    }
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Returns the nodes of a cycle, if any.
fn find_cycle(nodes: &[Node]) -> Option<Vec<usize>> {
    // 0 = unvisited, 1 = on stack, 2 = done
    fn dfs(nodes: &[Node], i: usize, state: &mut [u8], stack: &mut Vec<usize>) -> Option<Vec<usize>> {
        state[i] = 1;
        stack.push(i);
        for c in [nodes[i].yes, nodes[i].no] {
            if let Child::Node(j) = c {
                if state[j] == 1 {
                    let pos = stack.iter().position(|&x| x == j).unwrap_or(0);
                    return Some(stack[pos..].to_vec());
                }
                if state[j] == 0 {
                    if let Some(c) = dfs(nodes, j, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state[i] = 2;
        None
    }
    let mut state = vec![0u8; nodes.len()];
    for i in 0..nodes.len() {
        if state[i] == 0 {
            let mut stack = Vec::new();
            if let Some(c) = dfs(nodes, i, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

fn walk_order(nodes: &[Node], i: usize, seen_n: &mut [bool], seen_l: &mut [bool], order: &mut Vec<usize>) {
    if seen_n[i] {
        return;
    }
    seen_n[i] = true;
    for c in [nodes[i].yes, nodes[i].no] {
        match c {
            Child::Node(j) => walk_order(nodes, j, seen_n, seen_l, order),
            Child::Leaf(l) => {
                if !seen_l[l] {
                    seen_l[l] = true;
                    order.push(l);
                }
            }
            Child::Healthy => {}
        }
    }
}

/// Finds where things are in the YAML source, for semantic errors (serde_yaml
/// only locates syntax and schema errors).
pub(crate) struct Locator<'a> {
    origin: &'a str,
    lines: Vec<&'a str>,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(src: &'a str, origin: &'a str) -> Self {
        Locator {
            origin,
            lines: src.lines().collect(),
        }
    }

    /// A diagnostic at 1-based `line`, `col` (0 = unknown).
    pub(crate) fn at(&self, line: usize, col: usize, level: Level, message: String) -> Diagnostic {
        let snippet = if line > 0 {
            self.lines
                .get(line - 1)
                .map(|l| snippet(l, col))
                .unwrap_or_default()
        } else {
            String::new()
        };
        Diagnostic {
            file: self.origin.to_string(),
            line,
            col,
            level,
            message,
            snippet,
        }
    }

    /// Index of the top-level `section:` line.
    fn section(&self, section: &str) -> Option<usize> {
        let head = format!("{section}:");
        self.lines.iter().position(|l| l.starts_with(&head))
    }

    /// The line range `[start, end)` of entity `id` inside `section`.
    fn block(&self, section: &str, id: &str) -> Option<(usize, usize)> {
        self.block_nth(section, id, 0)
    }

    /// The line range of the `nth` (0-based) entity with this id (duplicates).
    fn block_nth(&self, section: &str, id: &str, nth: usize) -> Option<(usize, usize)> {
        let s = self.section(section)?;
        let mut start = None;
        let mut seen = 0;
        for (i, l) in self.lines.iter().enumerate().skip(s + 1) {
            if !l.is_empty() && !l.starts_with(' ') && !l.starts_with('-') && !l.starts_with('#') {
                break; // next top-level key
            }
            if id_on_line(l) == Some(id) {
                if seen == nth {
                    start = Some(i);
                    break;
                }
                seen += 1;
            }
        }
        let start = start?;
        let mut end = self.lines.len();
        for (i, l) in self.lines.iter().enumerate().skip(start + 1) {
            let top = !l.is_empty() && !l.starts_with(' ') && !l.starts_with('-') && !l.starts_with('#');
            if top || id_on_line(l).is_some() {
                end = i;
                break;
            }
        }
        Some((start, end))
    }

    /// A diagnostic on the `id:` line of the `nth` entity with this id (0 = the
    /// first; duplicates are reported on their second occurrence).
    pub(crate) fn entity(
        &self,
        section: &str,
        id: &str,
        nth: usize,
        level: Level,
        message: String,
    ) -> Diagnostic {
        match self
            .block_nth(section, id, nth.saturating_sub(1))
            .or_else(|| self.block(section, id))
        {
            Some((s, _)) => {
                let col = self.lines[s].find(id).map(|c| c + 1).unwrap_or(1);
                self.at(s + 1, col, level, message)
            }
            None => self.at(0, 0, level, message),
        }
    }

    /// A diagnostic on `key:` inside an entity (or at top level when `within` is None).
    pub(crate) fn key(
        &self,
        within: Option<(&str, &str)>,
        key: &str,
        level: Level,
        message: String,
    ) -> Diagnostic {
        let (s, e) = match within {
            Some((section, id)) => match self.block(section, id) {
                Some(r) => r,
                None => return self.at(0, 0, level, message),
            },
            None => (0, self.lines.len()),
        };
        let pat = format!("{key}:");
        for i in s..e {
            let l = self.lines[i];
            if let Some(c) = find_key(l, &pat) {
                if within.is_some() || c == 0 {
                    return self.at(i + 1, c + 1, level, message);
                }
            }
        }
        match within {
            Some((section, id)) => self.entity(section, id, 1, level, message),
            None => self.at(0, 0, level, message),
        }
    }

    /// A diagnostic on the first occurrence of `token` (as a word) inside an entity.
    pub(crate) fn token(
        &self,
        within: (&str, &str),
        token: &str,
        level: Level,
        message: String,
    ) -> Diagnostic {
        if let Some((s, e)) = self.block(within.0, within.1) {
            for i in s..e {
                if let Some(c) = find_word(self.lines[i], token) {
                    return self.at(i + 1, c + 1, level, message);
                }
            }
        }
        self.entity(within.0, within.1, 1, level, message)
    }

    /// A diagnostic on the line holding the first line of `text` inside an
    /// entity, else on `key:`.
    pub(crate) fn text_or_key(
        &self,
        within: Option<(&str, &str)>,
        text: &str,
        key: &str,
        level: Level,
        message: String,
    ) -> Diagnostic {
        let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        if let (Some((section, id)), false) = (within, first.is_empty()) {
            if let Some((s, e)) = self.block(section, id) {
                for i in s..e {
                    if let Some(c) = self.lines[i].find(first) {
                        return self.at(i + 1, c + 1, level, message);
                    }
                }
            }
        }
        self.key(within, key, level, message)
    }
}

/// Longest source line shown under a diagnostic; longer lines are cut to
/// the columns around the fault.
const SNIPPET_CHARS: usize = 100;

/// The source line shown under a diagnostic: trimmed, cut around column `col`
/// when long, and not at all when it holds something that looks like a key or
/// a token (a key file given as a rule file must not be echoed).
fn snippet(line: &str, col: usize) -> String {
    if crate::secret::looks_secret(line) {
        return "(line not shown: it looks like a key or a token)".into();
    }
    let chars: Vec<char> = line.chars().collect();
    let lead = chars.iter().take_while(|c| c.is_whitespace()).count();
    let end = chars.len() - chars.iter().rev().take_while(|c| c.is_whitespace()).count();
    if end <= lead {
        return String::new();
    }
    if end - lead <= SNIPPET_CHARS {
        return chars[lead..end].iter().collect();
    }
    let at = col.saturating_sub(1).clamp(lead, end);
    let from = at.saturating_sub(SNIPPET_CHARS / 2).max(lead);
    let to = (from + SNIPPET_CHARS).min(end);
    let mut s = String::new();
    if from > lead {
        s.push('…');
    }
    s.extend(&chars[from..to]);
    if to < end {
        s.push('…');
    }
    s
}

fn id_on_line(l: &str) -> Option<&str> {
    let t = l.trim_start();
    let t = t.strip_prefix('-').map(str::trim_start).unwrap_or(t);
    let t = t.strip_prefix('{').map(str::trim_start).unwrap_or(t);
    let rest = t.strip_prefix("id:")?;
    let v = rest.trim();
    let v = v.split(['#', ',', '}']).next().unwrap_or("").trim();
    Some(v.trim_matches(|c| c == '"' || c == '\''))
}

fn find_key(line: &str, pat: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = line[from..].find(pat) {
        let c = from + p;
        let before = line[..c].chars().last();
        if before.is_none_or(|b| b == ' ' || b == '-' || b == '{' || b == ',') {
            return Some(c);
        }
        from = c + pat.len();
    }
    None
}

fn find_word(line: &str, w: &str) -> Option<usize> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut from = 0;
    while let Some(p) = line[from..].find(w) {
        let c = from + p;
        let before = line[..c].chars().last();
        let after = line[c + w.len()..].chars().next();
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            return Some(c);
        }
        from = c + w.len();
    }
    None
}

/// The path from the root to each leaf (`(node, took_yes)`), the first in tree
/// order when a leaf is reachable several ways.
fn leaf_paths_of(nodes: &[Node], root: usize, nleaves: usize) -> Vec<Vec<(usize, bool)>> {
    fn dfs(
        nodes: &[Node],
        n: usize,
        path: &mut Vec<(usize, bool)>,
        out: &mut [Option<Vec<(usize, bool)>>],
        on: &mut [bool],
    ) {
        if on[n] {
            return;
        }
        on[n] = true;
        for (child, yes) in [(nodes[n].yes, true), (nodes[n].no, false)] {
            path.push((n, yes));
            match child {
                Child::Node(m) => dfs(nodes, m, path, out, on),
                Child::Leaf(l) => {
                    if out[l].is_none() {
                        out[l] = Some(path.clone());
                    }
                }
                Child::Healthy => {}
            }
            path.pop();
        }
        on[n] = false;
    }
    let mut out = vec![None; nleaves];
    let mut on = vec![false; nodes.len()];
    dfs(nodes, root, &mut Vec::new(), &mut out, &mut on);
    out.into_iter().map(Option::unwrap_or_default).collect()
}

/// How a leaf lights: the nodes it requires (root first) and, for a fallback
/// leaf, the ordinary leaves whose light suppresses it.
#[derive(Clone, Debug, PartialEq)]
pub struct LeafLogic {
    /// Nodes whose `yes` the leaf requires, root first; for a fallback leaf, the
    /// one node whose question it falls back from.
    pub required: Vec<usize>,
    /// Ordinary leaves under a fallback leaf's node: when one is lit, the
    /// fallback is not.
    pub suppressed_by: Vec<usize>,
}

/// The lighting logic of every leaf, as `cptriage diagnose` and the exported
/// alerts apply it: an
/// ordinary leaf requires the `yes` edges on its path except gates (unless
/// gates are all there is); a fallback leaf requires the deepest `yes` node of
/// its path and no ordinary leaf under it lit.
fn leaf_logic_of(nodes: &[Node], root: usize, leaves: &[LeafDef]) -> Vec<LeafLogic> {
    let paths = leaf_paths_of(nodes, root, leaves.len());
    leaves
        .iter()
        .enumerate()
        .map(|(l, leaf)| {
            let yes: Vec<usize> = paths[l].iter().filter(|(_, y)| *y).map(|(n, _)| *n).collect();
            if leaf.fallback {
                let Some(&scope) = yes.last() else {
                    return LeafLogic {
                        required: Vec::new(),
                        suppressed_by: Vec::new(),
                    };
                };
                let others = (0..leaves.len())
                    .filter(|&o| {
                        o != l && !leaves[o].fallback && paths[o].iter().any(|&(m, y)| m == scope && y)
                    })
                    .collect();
                LeafLogic {
                    required: vec![scope],
                    suppressed_by: others,
                }
            } else {
                let non_gate: Vec<usize> = yes.iter().copied().filter(|&n| !nodes[n].def.gate).collect();
                LeafLogic {
                    required: if non_gate.is_empty() { yes } else { non_gate },
                    suppressed_by: Vec::new(),
                }
            }
        })
        .collect()
}
