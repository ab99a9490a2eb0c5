//! Prometheus's own PromQL conformance cases (`../shared/promqltest/*.test`)
//! run against cptriage's evaluator.
//!
//! Every case inside the supported subset must reproduce Prometheus's result;
//! cases outside it are skipped with a named reason. Run with
//! `cargo test --test promqltest -- --nocapture` to see the summary.

#[path = "promqltest/script.rs"]
mod script;

use std::collections::BTreeMap;
use std::path::Path;

use script::{run_file, Outcome};

const FILES: &[&str] = &[
    "functions",
    "aggregators",
    "operators",
    "histograms",
    "selectors",
    "staleness",
    "range_queries",
    "literals",
];

#[test]
fn prometheus_conformance_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/promqltest");
    let dir = if dir.exists() {
        dir
    } else {
        Path::new("/work/shared/promqltest").to_path_buf()
    };
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_file: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for f in FILES {
        let path = dir.join(format!("{f}.test"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let (mut p, mut fl, mut s) = (0, 0, 0);
        for (case, outcome) in run_file(&format!("{f}.test"), &text) {
            match outcome {
                Outcome::Pass => p += 1,
                Outcome::Fail(why) => {
                    fl += 1;
                    failures.push(format!("{}:{}: `{}`\n    {why}", case.file, case.line, case.expr));
                }
                Outcome::Skip(why) => {
                    if std::env::var_os("PROMQLTEST_VERBOSE").is_some() {
                        println!("SKIP {}:{}: `{}` ({why})", case.file, case.line, case.expr);
                    }
                    s += 1;
                    *reasons.entry(why).or_default() += 1;
                }
            }
        }
        per_file.push(format!("  {f}.test: {p} passed, {fl} failed, {s} skipped"));
        passed += p;
        failed += fl;
        skipped += s;
    }
    println!("promqltest: {passed} passed, {failed} failed, {skipped} skipped");
    for l in &per_file {
        println!("{l}");
    }
    println!("skip reasons:");
    let mut rs: Vec<(&String, &usize)> = reasons.iter().collect();
    rs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (r, n) in rs {
        println!("  {n:4}  {r}");
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    assert_eq!(failed, 0, "{failed} conformance cases failed");
}
