//! The shipped scenarios (`testdata/scenarios/*.yaml`), generated from the
//! real captures in memory (exactly the bytes `gen-scenario` writes) and
//! diagnosed with the shipped rules.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cptriage::rules::engine::{self, Options};
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::Report;
use cptriage::source::ingest::{self, Keep, MemorySnapshot};
use cptriage_testkit::scenario::{self, GenOptions, Scenario};

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
    let mut sc = Scenario::build(spec.clone(), &GenOptions::default()).expect("build scenario");
    let names: Vec<(String, cptriage::source::Role)> =
        sc.targets.iter().map(|t| (t.name.clone(), t.role)).collect();
    let snaps = Mutex::new(Vec::new());
    sc.run(2, |s| {
        let (name, role) = &names[s.target];
        snaps.lock().unwrap().push(MemorySnapshot {
            target: name.clone(),
            role: Some(*role),
            role_reason: "scenario spec".into(),
            time: s.time,
            origin: format!("{}#{}", spec_path.display(), s.step),
            bytes: Arc::new(s.bytes.to_vec()),
        });
        Ok(())
    })
    .expect("generate scenario");
    let ds = ingest::load_memory(
        snaps.into_inner().unwrap(),
        vec![],
        &Keep::Names(rules.referenced_metrics()),
    )
    .expect("load scenario");
    let report = engine::diagnose(rules, &ds, &Options::default()).expect("diagnose");
    (spec, report)
}
