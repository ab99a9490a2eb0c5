//! `cptriage rules check` logic: every diagnostic of the loader (schema, ids,
//! references, PromQL subset, cycles, unreachable nodes) plus warnings for metric
//! names that are not in the catalog of known kube-apiserver, etcd and
//! controller families (`rules/catalog.txt`).

use std::collections::BTreeSet;
use std::path::Path;

use super::load::{analyse, Diagnostic, Level, Locator};
use crate::eval::template;

/// The catalog of known metric families, one per line (`#` comments).
pub const CATALOG: &str = include_str!("../../rules/catalog.txt");

/// The catalog as a set.
pub fn catalog() -> BTreeSet<&'static str> {
    CATALOG
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Whether `name` (a sample name such as `x_bucket`) belongs to a known family.
pub fn known_metric(catalog: &BTreeSet<&str>, name: &str) -> bool {
    catalog.contains(name) || catalog.contains(template::family_of(name))
}

/// Checks rule text; `origin` names the file in messages. Errors first, then
/// warnings, each group in file order.
pub fn check_str(src: &str, origin: &str) -> Vec<Diagnostic> {
    let (set, mut diags) = analyse(src, origin);
    if let Some(set) = &set {
        let cat = catalog();
        let loc = Locator::new(src, origin);
        // What `diagnose --rules` loads, `rules export` must turn into a rule
        // file too: `rules check` refuses what either refuses.
        if let Some(e) = export_error(set) {
            use super::export::ExportError as E;
            let message = format!("`rules export` cannot export this file: {e}");
            diags.push(match &e {
                E::Expr { signal, .. } => loc.entity("signals", signal, 1, Level::Error, message),
                E::Condition { node, .. } => loc.entity("nodes", node, 1, Level::Error, message),
                _ => loc.at(0, 0, Level::Error, message),
            });
        }
        for s in &set.signals {
            let mut seen = BTreeSet::new();
            for r in &s.reads {
                for m in &r.metrics {
                    if !known_metric(&cat, m) && seen.insert(m.clone()) {
                        diags.push(loc.token(
                            ("signals", &s.def.id),
                            m,
                            Level::Warning,
                            format!(
                                "signal `{}` reads `{m}`, which is not a known kube-apiserver, etcd or controller metric (typo?)",
                                s.def.id
                            ),
                        ));
                    }
                }
            }
        }
    }
    diags.sort_by_key(|d| (d.level, d.line, d.col));
    diags
}

/// Why `rules export` (with its default options) would refuse a loaded rule set.
fn export_error(set: &super::load::RuleSet) -> Option<super::export::ExportError> {
    use super::export::{self, ExportOptions};
    let opts = ExportOptions::new(
        crate::eval::select::DEFAULT_APISERVER_SELECTOR,
        crate::eval::select::DEFAULT_ETCD_SELECTOR,
        crate::eval::select::DEFAULT_CONTROLLER_SELECTOR,
    )
    .ok()?;
    export::export(set, &opts).and_then(|f| f.to_yaml("")).err()
}

/// Reads and checks a rule file.
pub fn check_file(path: &Path) -> Vec<Diagnostic> {
    match super::load::read_file(path) {
        Ok(src) => check_str(&src, &path.display().to_string()),
        Err(e) => vec![Diagnostic {
            file: path.display().to_string(),
            line: 0,
            col: 0,
            level: Level::Error,
            message: e.to_string(),
            snippet: String::new(),
        }],
    }
}

/// Whether any diagnostic is an error.
pub fn has_errors(d: &[Diagnostic]) -> bool {
    d.iter().any(|x| x.level == Level::Error)
}
