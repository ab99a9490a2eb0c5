//! The shipped scenarios (`testdata/scenarios/*.yaml`), generated from the
//! real captures in memory (exactly the bytes `gen-scenario` writes) and
//! diagnosed with the shipped rules.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::Report;
use cptriage::source::ingest::Keep;
use cptriage_testkit::scenario;

/// The scenario specs, sorted by name.
pub(crate) fn specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios");
    let mut specs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    specs.sort();
    specs
}

/// Generates one scenario and diagnoses it.
pub(crate) fn diagnose(spec_path: &Path, rules: &RuleSet) -> (scenario::Validated, Report) {
    let spec = scenario::load_spec(spec_path).unwrap_or_else(|e| panic!("{}: {e}", spec_path.display()));
    let ds = scenario::dataset(
        spec.clone(),
        &spec_path.display().to_string(),
        &Keep::Names(rules.referenced_metrics()),
    )
    .expect("generate scenario");
    let report = engine::diagnose(rules, &ds, &Options::default()).expect("diagnose");
    (spec, report)
}

/// Every shipped scenario diagnosed with the shipped rules, by name.
pub(crate) fn reports() -> Vec<(String, Report)> {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    specs()
        .iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            (name, diagnose(p, &rules).1)
        })
        .collect()
}
