//! `rules check` logic and the loader: good files pass, every bad file gives its
//! exact message at `file:line:col` with the offending line.

use std::path::Path;

use cptriage::rules::lint::{check_file, check_str, has_errors};
use cptriage::rules::tree::{render_mermaid, render_text};
use cptriage::rules::{load_file, load_str, Level, RuleError};

fn first_error(file: &str) -> String {
    let d = check_file(Path::new(file));
    d.iter()
        .find(|x| x.level == Level::Error)
        .map(|x| x.to_string())
        .unwrap_or_else(|| panic!("{file}: no error in {d:?}"))
}

#[test]
fn bad_rule_files_give_located_messages() {
    let cases: &[(&str, &str, &str)] = &[
        ("unknown_key", "18:5: error: signals[1]: unknown field `treshold`, expected one of `id`, `role`, `description`, `unit`, `expr`, `alternatives`, `optional_metrics`, `threshold`, `snapshot`, `mean`, `for`, `observations`, `breakdown`, `judge_warmup`, `quiet_after`", "treshold: {below: 1}"),
        ("bad_yaml", "13:5: error: signals[1]: missing field `unit`", "- id: no_leader"),
        ("bad_severity", "35:15: error: leaves[0].severity: unknown variant `P5`, expected one of `P0`, `P1`, `P2`, `P3`", "severity: P5"),
        ("bad_version", "2:1: error: unsupported rule format version 2 (this build reads version 1)", "version: 2"),
        ("unknown_signal", "28:29: error: node `raft_q` uses unknown signal `no_quorum`", "when: {any: [no_leader, no_quorum]}"),
        ("unknown_child", "30:5: error: node `raft_q` refers to unknown child `jiont` (not a node, a leaf or `healthy`)", "no: jiont"),
        ("cycle", "20:9: error: the tree has a cycle: symptom → raft_q → symptom", "- id: symptom"),
        ("unreachable", "31:9: error: node `orphan` is unreachable from root `symptom`", "- id: orphan"),
        ("bad_promql", "17:11: error: signal `no_leader` expression: invalid PromQL: unclosed left parenthesis", "expr: min by (instance) (etcd_server_has_leader"),
        ("unsupported_promql", "17:11: error: signal `no_leader` expression: unsupported PromQL construct: native-histogram function `histogram_count`", "expr: histogram_count(etcd_server_has_leader)"),
        ("role_matcher", "17:11: error: signal `no_leader` expression matches on `role`; the engine injects the role from `role:`", "expr: min by (instance) (etcd_server_has_leader{role=\"etcd\"})"),
        ("bad_threshold", "18:5: error: signal `no_leader` threshold has both `above` and `below`; use two signals", "threshold: {below: 1, above: 2}"),
        ("duplicate_id", "13:9: error: duplicate signal id `errors`", "- id: errors"),
    ];
    for (name, want, line) in cases {
        let file = format!("testdata/rules/bad/{name}.yaml");
        let got = first_error(&file);
        let expected = format!("{file}:{want}\n    | {line}");
        assert_eq!(got, expected, "case {name}");
    }
    // Every file in the directory is covered by a case.
    let n = std::fs::read_dir("testdata/rules/bad").unwrap().count();
    assert_eq!(n, cases.len());
}

#[test]
fn load_fails_with_the_same_diagnostics() {
    let err = load_file(Path::new("testdata/rules/bad/unknown_child.yaml")).unwrap_err();
    assert!(matches!(err, RuleError::Invalid(_)));
    assert!(err.to_string().starts_with("testdata/rules/bad/unknown_child.yaml:30:5: error: node `raft_q` refers to unknown child `jiont`"), "{err}");
    let err = load_file(Path::new("testdata/rules/missing.yaml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot read rule file `testdata/rules/missing.yaml`: "),
        "{err}"
    );
}

#[test]
fn good_rule_files_check_clean() {
    for f in [
        "testdata/rules/good/tiny.yaml",
        "testdata/rules/good/mini.yaml",
        "rules/default.yaml",
    ] {
        let d = check_file(Path::new(f));
        assert!(d.is_empty(), "{f}: {d:?}");
        load_file(Path::new(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

#[test]
fn unknown_metric_names_are_warnings_not_errors() {
    let src = std::fs::read_to_string("testdata/rules/good/tiny.yaml")
        .unwrap()
        .replace("etcd_server_has_leader", "etcd_server_has_leadr");
    let d = check_str(&src, "typo.yaml");
    assert!(!has_errors(&d));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        d[0].to_string(),
        "typo.yaml:17:30: warning: signal `no_leader` reads `etcd_server_has_leadr`, which is not a known kube-apiserver, etcd or controller metric (typo?)\n    | expr: min by (instance) (etcd_server_has_leadr)"
    );
    // A warning does not stop loading.
    load_str(&src, "typo.yaml").expect("loads with a warning");
}

#[test]
fn unused_signals_and_fixed_ranges_are_warnings() {
    let src = std::fs::read_to_string("testdata/rules/good/tiny.yaml").unwrap().replace(
        "nodes:\n",
        "  - id: spare\n    role: etcd\n    description: unused\n    unit: count\n    expr: sum by (instance) (rate(etcd_server_proposals_failed_total[5m]))\n    threshold: {above: 1}\nnodes:\n",
    );
    let d = check_str(&src, "w.yaml");
    let msgs: Vec<String> = d.iter().map(|x| x.message.clone()).collect();
    assert!(!has_errors(&d), "{msgs:?}");
    assert!(
        msgs.contains(&"signal `spare` is not used by any node".to_string()),
        "{msgs:?}"
    );
    assert!(
        msgs.contains(&"signal `spare` expression uses a fixed range instead of `$window`".to_string()),
        "{msgs:?}"
    );
}

#[test]
fn tree_renders_as_text_and_mermaid() {
    let rules = load_file(Path::new("testdata/rules/good/tiny.yaml")).unwrap();
    let text = render_text(&rules);
    let want = "\
symptom [gate]: Do clients feel it?
  when errors
├─ yes → raft_q: Is there no leader?
│     when no_leader
│  ├─ yes → [etcd-raft] etcd/raft (P0): no leader
│  └─ no → [joint] joint (P1, fallback): unexplained
└─ no → healthy
";
    assert_eq!(text, want);
    let m = render_mermaid(&rules);
    assert!(m.starts_with("flowchart TD\n"));
    assert!(m.contains("    n_symptom{\"Do clients feel it?\"}\n"));
    assert!(m.contains("    l_etcd_raft[\"etcd/raft (P0): no leader\"]\n"));
    assert!(m.contains("    n_symptom -->|no| h_healthy\n"));
    assert!(m.contains("    n_raft_q -->|yes| l_etcd_raft\n"));
}

#[test]
fn default_tree_has_every_axis_of_the_design() {
    let rules = cptriage::rules::RuleSet::default_rules().unwrap();
    let axes: std::collections::BTreeSet<String> = rules
        .leaves
        .iter()
        .map(|l| match &l.sub_axis {
            Some(s) => format!("{}/{s}", l.axis),
            None => l.axis.clone(),
        })
        .collect();
    for a in [
        "auth",
        "admission",
        "apf",
        "etcd/raft",
        "etcd/disk",
        "etcd/quota",
        "etcd/compaction",
        "etcd",
        "watch-cache",
        "storage",
        "joint",
        "write-timeouts",
        "stale-reads",
        "storage/conflict-rollback",
        "duplicate-events",
        "node-status",
        "restart",
        "etcd/commit-stall",
        "etcd/leader",
        "etcd/cpu",
        "etcd/network",
        "etcd/load",
        "etcd/maintenance",
    ] {
        assert!(axes.contains(a), "missing axis {a}");
    }
    // Tree order: the spine of DESIGN.md §1.
    let order: Vec<&str> = rules
        .leaf_order
        .iter()
        .map(|&l| rules.leaves[l].axis.as_str())
        .collect();
    let pos = |a: &str| order.iter().position(|x| *x == a).unwrap();
    assert!(pos("auth") < pos("admission") && pos("admission") < pos("apf") && pos("apf") < pos("etcd"));
    assert!(
        pos("etcd") < pos("watch-cache")
            && pos("watch-cache") < pos("storage")
            && pos("storage") < pos("joint")
    );
    // Severities: strong-consistency path P0/P1, eventual path P2/P3.
    for l in &rules.leaves {
        let eventual = [
            "watch-cache",
            "stale-reads",
            "conflict-rollback",
            "duplicate-events",
            "node-status",
            // A restart's effects on clients: caches filling, watchers relisting.
            "restart",
        ]
        .contains(&l.axis.as_str())
            || l.sub_axis.as_deref() == Some("compaction")
            || l.sub_axis.as_deref() == Some("conflict-rollback");
        let sev = format!("{}", l.severity);
        if eventual {
            assert!(sev == "P2" || sev == "P3", "{} {sev}", l.id);
        } else {
            assert!(sev == "P0" || sev == "P1", "{} {sev}", l.id);
        }
    }
    let text = render_text(&rules);
    assert!(text.lines().count() > 40);
}

#[test]
fn truncated_or_garbled_rule_files_never_panic() {
    let src = cptriage::rules::load::DEFAULT_RULES;
    let mut cut = 0;
    let mut checked = 0;
    while cut < src.len() {
        if src.is_char_boundary(cut) {
            let d = check_str(&src[..cut], "cut.yaml");
            // Every truncation either still parses or reports at least one error.
            if !has_errors(&d) {
                assert!(load_str(&src[..cut], "cut.yaml").is_ok());
            }
            checked += 1;
        }
        cut += 397;
    }
    assert!(checked > 50);
    for junk in [
        "\u{0}\u{1}\u{2}",
        "signals: [",
        "- - -",
        "version: 1\nroot: x\nsignals: {}\n",
        "{{{{",
        "\t\t:",
    ] {
        let d = check_str(junk, "junk.yaml");
        assert!(has_errors(&d), "{junk:?}");
        assert!(d[0].to_string().starts_with("junk.yaml"), "{}", d[0]);
    }
}
