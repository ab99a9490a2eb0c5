//! `cptriage rules export --format prometheus`: the rule file passes
//! `promtool check rules`, flags and errors behave, and promtool unit tests
//! generated from every scenario pass `promtool test rules`: the scenario's
//! root-cause leaf alert fires after its onset on the instances cptriage lights,
//! and on the healthy scenario no alert fires.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use cptriage::rules::engine::{self, Options};
use cptriage::rules::export::{self, AlertCheck, ExportOptions, UnitTestInput};
use cptriage::rules::load::RuleSet;
use cptriage::rules::model::{Condition, SignalRole};
use cptriage::rules::report::{Report, Status};
use cptriage::rules::verdict;
use cptriage::source::ingest::{self, Keep, MemorySnapshot};
use cptriage::source::Dataset;
use cptriage_testkit::scenario::{self, GenOptions, Scenario};
use support::cptriage;

const PROMTOOL: &str = "/usr/bin/promtool";

fn promtool(args: &[&Path]) -> (bool, String) {
    let out = Command::new(PROMTOOL).args(args).output().expect("run promtool");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// promtool is there: a test that needs it fails without it, never skips.
fn have_promtool() -> bool {
    assert!(
        Path::new(PROMTOOL).exists(),
        "{PROMTOOL} is not installed (scripts/test installs it)"
    );
    true
}

#[test]
fn export_of_the_shipped_tree_passes_promtool_check() {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, window, etcd_sel) in [
        (vec![], "[5m]", vec![r#"job=~".*etcd.*""#]),
        (
            vec![
                "--window",
                "1m",
                "--etcd-selector",
                r#"{job="kube-etcd", cluster="a"}"#,
                "--for",
                "5m",
            ],
            "[1m]",
            vec![r#"cluster="a""#, r#"job="kube-etcd""#],
        ),
    ] {
        let mut a = vec!["rules", "export", "--format", "prometheus"];
        a.extend(args.iter().copied());
        let out = cptriage(&a, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let path = dir.path().join("rules.yaml");
        std::fs::write(&path, &text).expect("write");
        if have_promtool() {
            let (ok, msg) = promtool(&[Path::new("check"), Path::new("rules"), &path]);
            assert!(ok, "promtool check rules failed:\n{msg}");
            // A recording per signal and per observation count.
            let observed = rules.signals.iter().filter(|s| s.observations.is_some()).count();
            let n = rules.signals.len() + observed + rules.nodes.len() + 2 * rules.leaves.len();
            assert!(msg.contains(&format!("SUCCESS: {n} rules found")), "{msg}");
        }
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        let group = &doc["groups"][0]["rules"];
        let rs = group.as_sequence().expect("rules");
        let by = |key: &str, name: &str| {
            rs.iter()
                .find(|r| r[key].as_str() == Some(name))
                .unwrap_or_else(|| panic!("no {key} {name}"))
                .clone()
        };
        // One recording rule per signal, every one with the window and the role selector.
        for s in &rules.signals {
            let r = by("record", &format!("cptriage:{}", s.def.id));
            let e = r["expr"].as_str().expect("expr");
            assert!(!e.contains("role="), "{e}");
            if s.reads.iter().all(|x| x.needs_series) {
                assert!(e.contains(window), "{e}");
            }
            if s.def.role == SignalRole::Etcd {
                assert!(etcd_sel.iter().all(|m| e.contains(m)), "{e}");
            }
        }
        // Alternatives are chained with `or`.
        let e = by("record", "cptriage:storage_objects_fetch_error")["expr"]
            .as_str()
            .map(str::to_string);
        assert_eq!(
            e.as_deref(),
            Some("(min by (instance) (apiserver_storage_objects{job=\"apiserver\"})) or (min by (instance) (apiserver_resource_objects{job=\"apiserver\"})) or (min by (instance) (etcd_object_counts{job=\"apiserver\"}))")
        );
        // Severity mapping and annotations.
        let raft = by("alert", "CptriageEtcdRaft");
        assert_eq!(raft["labels"]["severity"].as_str(), Some("critical"));
        assert_eq!(raft["labels"]["priority"].as_str(), Some("P0"));
        assert_eq!(raft["labels"]["sub_axis"].as_str(), Some("raft"));
        assert_eq!(raft["expr"].as_str(), Some("cptriage:leaf:etcd_raft"));
        let dup = by("alert", "CptriageDuplicateEvents");
        assert_eq!(dup["labels"]["severity"].as_str(), Some("info"));
        let wc = by("alert", "CptriageWatchCache");
        assert_eq!(wc["labels"]["severity"].as_str(), Some("warning"));
        let fr = if args.is_empty() { "2m" } else { "5m" };
        assert_eq!(raft["for"].as_str(), Some(fr));
        for k in ["summary", "question", "falsifier", "runbook", "condition"] {
            assert!(
                raft["annotations"][k].as_str().is_some_and(|s| !s.is_empty()),
                "{k}"
            );
        }
        assert!(raft["annotations"]["runbook"]
            .as_str()
            .is_some_and(|s| s.starts_with("1. ")));
        assert!(raft["annotations"]["approximation"]
            .as_str()
            .is_some_and(|s| s.contains("median")));
        // The leaf rule of a disk fault requires the etcd question above it; the
        // fallback `joint` is suppressed by every ordinary leaf.
        assert_eq!(
            by("record", "cptriage:leaf:etcd_disk")["expr"].as_str(),
            Some("cptriage:node:etcd_disk and on () cptriage:node:etcd_degraded")
        );
        let joint = by("record", "cptriage:leaf:joint");
        let j = joint["expr"].as_str().expect("expr");
        assert!(
            j.starts_with("cptriage:node:symptom unless on () (cptriage:leaf:apiserver_restart or cptriage:leaf:auth or "),
            "{j}"
        );
    }
}

#[test]
fn unknown_format_and_bad_selectors_are_usage_errors() {
    let out = cptriage(&["rules", "export", "--format", "grafana"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'grafana'"), "{err}");
    // `--format` has a default (its only value); `cli_args` checks the output.
    let out = cptriage(&["rules", "export"], &[]);
    assert_eq!(out.status.code(), Some(0), "--format defaults to prometheus");
    let out = cptriage(
        &[
            "rules",
            "export",
            "--format",
            "prometheus",
            "--etcd-selector",
            "etcd_up{job=\"x\"}",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "invalid selector `etcd_up{job=\"x\"}` for --etcd-selector: expected label matchers in braces"
        ),
        "{err}"
    );
    let out = cptriage(
        &["rules", "export", "--format", "prometheus", "--window", "90ms"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("whole number of seconds"));
}

fn scenario_dataset(path: &Path, rules: &RuleSet) -> (scenario::Validated, Dataset) {
    let spec = scenario::load_spec(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut sc = Scenario::build(spec.clone(), &GenOptions::default()).expect("build scenario");
    let names: Vec<(String, cptriage::source::Role)> =
        sc.targets.iter().map(|t| (t.name.clone(), t.role)).collect();
    let snaps = Mutex::new(Vec::new());
    sc.run(2, |s| {
        let (name, role) = &names[s.target];
        snaps.lock().expect("lock").push(MemorySnapshot {
            target: name.clone(),
            role: Some(*role),
            role_reason: "scenario spec".into(),
            time: s.time,
            origin: format!("{}#{}", path.display(), s.step),
            bytes: Arc::new(s.bytes.to_vec()),
        });
        Ok(())
    })
    .expect("generate scenario");
    let ds = ingest::load_memory(
        snaps.into_inner().expect("lock"),
        vec![],
        &Keep::Names(rules.referenced_metrics()),
    )
    .expect("load scenario");
    (spec, ds)
}

fn role_labels() -> BTreeMap<SignalRole, BTreeMap<String, String>> {
    [
        (SignalRole::Apiserver, "apiserver"),
        (SignalRole::Etcd, "etcd"),
        (SignalRole::Controller, "kube-controller-manager"),
    ]
    .into_iter()
    .map(|(r, j)| (r, BTreeMap::from([("job".to_string(), j.to_string())])))
    .collect()
}

/// The signals whose lit instances a leaf's alert carries: those of its
/// deciding question (the first part of an `all`).
fn deciding_signals(c: &Condition) -> Vec<String> {
    match c {
        Condition::Signal(s) => vec![s.clone()],
        Condition::Any { any } => any.iter().flat_map(deciding_signals).collect(),
        Condition::All { all } => all.first().map(deciding_signals).unwrap_or_default(),
    }
}

/// The instances cptriage judges lit at step `i` on the leaf's deciding question.
fn lit_instances(rules: &RuleSet, report: &Report, leaf: &str, i: usize) -> Vec<String> {
    let l = rules.leaf(leaf).expect("leaf");
    let logic = &rules.logic[l];
    let deciding = *logic.required.last().expect("required node");
    let axis = report.axes.iter().find(|a| a.leaf == leaf).expect("axis");
    let mut out = Vec::new();
    let node = &rules.nodes[deciding].def;
    // A held node (`while:`) fires on its trigger's series, then on those of
    // the condition that holds it.
    let held = node.sustain.iter().flat_map(deciding_signals);
    for s in deciding_signals(&node.when).into_iter().chain(held) {
        let Some(ev) = axis.evidence.iter().find(|e| e.signal == s) else {
            continue;
        };
        for (inst, vals) in &ev.instance_series {
            let base = ev
                .instances
                .iter()
                .find(|x| &x.instance == inst)
                .and_then(|x| x.baseline);
            if verdict::judge(&ev.threshold, vals.get(i).copied().flatten(), base) == Some(true) {
                out.push(inst.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

struct Generated {
    name: String,
    rules_yaml: String,
    test_yaml: String,
}

/// Export options for a test evaluated at `eval` (a time) over a verdict's
/// window: the default selectors, the window's range, alerts firing after
/// `for_`, and the baseline the engine used (the first quarter of the
/// window) as seen from `eval`.
fn export_options(w: &cptriage::rules::report::WindowInfo, eval: i64, for_: i64) -> ExportOptions {
    let mut opts = ExportOptions::new(
        cptriage::eval::select::DEFAULT_APISERVER_SELECTOR,
        cptriage::eval::select::DEFAULT_ETCD_SELECTOR,
        cptriage::eval::select::DEFAULT_CONTROLLER_SELECTOR,
    )
    .expect("selectors");
    opts.window = w.range;
    opts.for_ = for_;
    let (bfrom, bto) = (
        w.baseline.from.unwrap_or(w.from),
        w.baseline.to.unwrap_or(w.from + (w.to - w.from) / 4),
    );
    opts.baseline_offset = (eval - bto).max(0);
    opts.baseline_window = (bto - bfrom + w.step).max(w.step);
    opts
}

/// Exports the rules and a unit test for one scenario.
fn generate(spec_path: &Path, rules: &RuleSet) -> Generated {
    generate_by(spec_path, rules, None)
}

/// [`generate`], the rules keeping the fleet label `by` when given.
fn generate_by(spec_path: &Path, rules: &RuleSet, by: Option<&str>) -> Generated {
    let (spec, ds) = scenario_dataset(spec_path, rules);
    let name = spec.spec.name.clone();
    let report = engine::diagnose(rules, &ds, &Options::default()).expect("diagnose");
    let w = &report.window;
    let (from, to, step) = (w.from, w.to, w.step);
    let for_ = 60_000;
    let checks;
    let eval;
    match report.status {
        Status::Degraded => {
            let rc = report.verdict.root_cause.as_ref().expect("root cause");
            let onset = rc.onset.expect("onset");
            // Fires `for` after the leaf lights; two steps of margin.
            eval = onset + for_ + 2 * step;
            assert!(
                eval <= to,
                "{name}: evaluation time after the end of the scenario"
            );
            let i = usize::try_from((eval - from) / step).expect("step index");
            let instances = lit_instances(rules, &report, &rc.leaf, i);
            assert!(!instances.is_empty(), "{name}: no instance lit at {eval}");
            checks = vec![AlertCheck {
                eval_time: eval - from,
                leaf: rc.leaf.clone(),
                instances,
            }];
        }
        _ => {
            eval = to;
            checks = rules
                .leaves
                .iter()
                .map(|l| AlertCheck {
                    eval_time: to - from,
                    leaf: l.id.clone(),
                    instances: vec![],
                })
                .collect();
        }
    }
    let mut opts = export_options(w, eval, for_);
    opts.by = by.map(str::to_string);
    let file = export::export(rules, &opts).expect("export");
    let rules_yaml = file
        .to_yaml(&format!("cptriage rules for scenario {name}"))
        .expect("yaml");
    let input = UnitTestInput {
        name: name.clone(),
        data: &ds,
        start: from,
        interval: step,
        role_labels: role_labels(),
        checks,
        prune_constant: true,
        snap: 0,
    };
    let test_yaml =
        export::promtool_test(rules, &opts, &format!("{name}.rules.yaml"), &input).expect("promtool test");
    for c in &input.checks {
        if !c.instances.is_empty() {
            eprintln!(
                "{name}: {} expected at {} on {}",
                export::alert_name(&c.leaf),
                cptriage::timefmt::format_duration(c.eval_time),
                c.instances.join(", ")
            );
        }
    }
    Generated {
        name,
        rules_yaml,
        test_yaml,
    }
}

fn specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn generated_promtool_tests_pass_for_every_scenario() {
    if !have_promtool() {
        return;
    }
    let rules = RuleSet::default_rules().expect("shipped rules");
    let dir = tempfile::tempdir().expect("tempdir");
    let specs = specs();
    assert!(
        specs.len() >= 16,
        "expected the scenario set, found {}",
        specs.len()
    );
    let mut files = Vec::new();
    let mut firing = 0;
    for p in &specs {
        let g = generate(p, &rules);
        std::fs::write(dir.path().join(format!("{}.rules.yaml", g.name)), &g.rules_yaml).expect("write");
        let t = dir.path().join(format!("{}.test.yaml", g.name));
        std::fs::write(&t, &g.test_yaml).expect("write");
        firing += g.test_yaml.matches("exp_labels").count();
        // Only the families the rules read, labelled for the selectors.
        assert!(
            g.test_yaml.contains("job=\\\"etcd\\\"") || g.test_yaml.contains("job=\"etcd\""),
            "{}",
            g.name
        );
        assert!(
            !g.test_yaml.contains("role="),
            "{}: the role label is replaced by job",
            g.name
        );
        files.push(t);
    }
    assert!(
        firing >= specs.len() - 1,
        "every degraded scenario expects a firing alert ({firing})"
    );
    let mut args: Vec<&Path> = vec![Path::new("test"), Path::new("rules")];
    args.extend(files.iter().map(PathBuf::as_path));
    let (ok, msg) = promtool(&args);
    assert!(ok, "promtool test rules failed:\n{msg}");
    assert_eq!(msg.matches("SUCCESS").count(), specs.len(), "{msg}");
}

/// `testdata/export/` holds one generated example (etcd disk slow on one
/// member); it must be what the generator writes today and pass promtool.
/// `CPTRIAGE_BLESS=1 cargo test --test it rules_export::` rewrites it.
#[test]
fn committed_example_is_current_and_passes_promtool() {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let spec =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/etcd-disk-slow-one-member.yaml");
    let g = generate(&spec, &rules);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/export");
    let rp = dir.join(format!("{}.rules.yaml", g.name));
    let tp = dir.join(format!("{}.test.yaml", g.name));
    if std::env::var_os("CPTRIAGE_BLESS").is_some() {
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(&rp, &g.rules_yaml).expect("write");
        std::fs::write(&tp, &g.test_yaml).expect("write");
    }
    let stale = "stale example: run CPTRIAGE_BLESS=1 cargo test --test it rules_export::";
    assert!(
        std::fs::read_to_string(&rp).expect(stale) == g.rules_yaml,
        "{stale}"
    );
    assert!(
        std::fs::read_to_string(&tp).expect(stale) == g.test_yaml,
        "{stale}"
    );
    assert!(g.test_yaml.contains("alertname: CptriageEtcdDisk"));
    assert!(g.test_yaml.contains("instance: etcd-2"));
    if have_promtool() {
        let (ok, msg) = promtool(&[Path::new("test"), Path::new("rules"), &tp]);
        assert!(ok, "promtool test rules {}:\n{msg}", tp.display());
    }
}

/// `rules export --by cluster` is the golden file `testdata/export/by-cluster.rules.yaml`
/// (`CPTRIAGE_BLESS=1` rewrites it), passes `promtool check rules`, and keeps
/// `cluster` in every aggregation and vector match.
#[test]
fn export_by_cluster_matches_its_golden_file_and_passes_promtool() {
    let out = cptriage(&["rules", "export", "--by", "cluster"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    // The version in the header would make the golden file stale at each release.
    let text = text.replace(
        &format!("cptriage {} ", env!("CARGO_PKG_VERSION")),
        "cptriage VERSION ",
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/export/by-cluster.rules.yaml");
    if std::env::var_os("CPTRIAGE_BLESS").is_some() {
        std::fs::write(&path, &text).expect("write");
    }
    let stale = "stale golden file: run CPTRIAGE_BLESS=1 cargo test --test it rules_export::";
    assert!(std::fs::read_to_string(&path).expect(stale) == text, "{stale}");
    assert!(text.contains("Every rule keeps the label `cluster`."), "{text}");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let rules = doc["groups"][0]["rules"].as_sequence().expect("rules");
    let (mut groupings, mut matches) = (0, 0);
    for r in rules {
        let e = r["expr"].as_str().expect("expr");
        let parsed = cptriage::eval::parse(e).expect("the exported expression parses");
        assert_eq!(parsed.to_string(), e);
        // Every `by (…)` and `on (…)` list names the cluster; no `on ()` is left.
        for kw in ["by (", "on ("] {
            for (i, _) in e.match_indices(kw) {
                let list = &e[i + kw.len()..];
                let list = &list[..list.find(')').expect("closing parenthesis")];
                assert!(
                    list.split(',').any(|l| l.trim() == "cluster"),
                    "`{kw}{list})` without cluster in {e}"
                );
                if kw == "by (" {
                    groupings += 1;
                } else {
                    matches += 1;
                }
            }
        }
        // Only the recording labels are dropped (the fleet label is kept).
        let rest = e.replace("max without (cptriage_digest, cptriage_window)", "");
        assert!(!rest.contains("without ("), "{e}");
    }
    assert!(
        groupings > 50 && matches > 10,
        "{groupings} groupings, {matches} matches"
    );
    if have_promtool() {
        let (ok, msg) = promtool(&[Path::new("check"), Path::new("rules"), &path]);
        assert!(ok, "promtool check rules failed:\n{msg}");
        assert!(
            msg.contains(&format!("SUCCESS: {} rules found", rules.len())),
            "{msg}"
        );
    }
}

#[test]
fn export_by_refuses_what_is_not_a_label_name() {
    for bad in ["2cluster", "clus-ter", "__name__", ""] {
        let out = cptriage(&["rules", "export", "--by", bad], &[]);
        assert_eq!(out.status.code(), Some(2), "--by {bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("invalid label name `{bad}` for --by")),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
}

/// `labels{…}` → `labels{cluster="c",…}` in promtool's series notation.
fn with_cluster(series: &str, cluster: &str) -> String {
    match series.find('{') {
        Some(i) if series.ends_with("{}") => format!("{}{{cluster=\"{cluster}\"}}", &series[..i]),
        Some(i) => format!("{}{{cluster=\"{cluster}\",{}", &series[..i], &series[i + 1..]),
        None => format!("{series}{{cluster=\"{cluster}\"}}"),
    }
}

/// Two clusters in one Prometheus: `sick` is the etcd-disk-slow scenario
/// (etcd-2's disk is slow), `fine` the same cluster with etcd-2 as healthy
/// as etcd-0. With `--by cluster` the disk alert fires for `sick` only and
/// carries `cluster="sick"`; the same unit test fails against the rules
/// exported without `--by`, whose alerts lose the cluster.
#[test]
fn export_by_cluster_alerts_name_the_faulty_cluster_only() {
    if !have_promtool() {
        return;
    }
    let rules = RuleSet::default_rules().expect("shipped rules");
    let spec =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/etcd-disk-slow-one-member.yaml");
    let by = generate_by(&spec, &rules, Some("cluster"));
    let plain = generate(&spec, &rules);
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&by.test_yaml).expect("yaml");
    let test = &mut doc["tests"][0];
    let input = test["input_series"].as_sequence().expect("input series").clone();
    let mut both = Vec::new();
    let mut copied = 0;
    for s in &input {
        let series = s["series"].as_str().expect("series");
        let mut sick = s.clone();
        sick["series"] = with_cluster(series, "sick").into();
        both.push(sick);
        if series.contains("instance=\"etcd-2\"") {
            continue;
        }
        let mut fine = s.clone();
        fine["series"] = with_cluster(series, "fine").into();
        both.push(fine);
        if series.contains("instance=\"etcd-0\"") {
            let mut twin = s.clone();
            twin["series"] = with_cluster(
                &series.replace("instance=\"etcd-0\"", "instance=\"etcd-2\""),
                "fine",
            )
            .into();
            both.push(twin);
            copied += 1;
        }
    }
    assert!(
        copied > 10,
        "etcd-0's series stand in for the healthy etcd-2 ({copied})"
    );
    test["input_series"] = serde_yaml::Value::Sequence(both);
    let alerts = test["alert_rule_test"].as_sequence_mut().expect("alert tests");
    let mut expected = 0;
    for a in alerts.iter_mut() {
        for e in a["exp_alerts"].as_sequence_mut().into_iter().flatten() {
            assert_eq!(e["exp_labels"]["instance"].as_str(), Some("etcd-2"));
            e["exp_labels"]["cluster"] = "sick".into();
            expected += 1;
        }
    }
    assert_eq!(expected, 1, "one alert: etcd-2 of the sick cluster");
    let test_yaml = serde_yaml::to_string(&doc).expect("yaml");
    let dir = tempfile::tempdir().expect("tempdir");
    let name = &by.name;
    std::fs::write(dir.path().join(format!("{name}.rules.yaml")), &by.rules_yaml).expect("write");
    let tp = dir.path().join("two-clusters.test.yaml");
    std::fs::write(&tp, &test_yaml).expect("write");
    let (ok, msg) = promtool(&[Path::new("test"), Path::new("rules"), &tp]);
    assert!(ok, "promtool test rules (two clusters, --by cluster):\n{msg}");
    // The same test against the rules without `--by`: the alert has no
    // cluster (the two clusters' members are summed together).
    std::fs::write(dir.path().join(format!("{name}.rules.yaml")), &plain.rules_yaml).expect("write");
    let (ok, msg) = promtool(&[Path::new("test"), Path::new("rules"), &tp]);
    assert!(!ok, "without --by the alerts cannot name the cluster:\n{msg}");
}

/// The lab's recording of a follower cut off from its peers for 3 min
/// (testdata/lab/long-partition-follower-etcd3.4-1), loaded as `diagnose
/// --dump` reads it.
fn partition_dataset(rules: &RuleSet) -> Dataset {
    let rec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/lab/long-partition-follower-etcd3.4-1/recording");
    let arg = cptriage::source::capture::DumpArg {
        name: None,
        role: None,
        path: rec,
    };
    cptriage::source::capture::load(&[arg], &Keep::Names(rules.referenced_metrics()))
        .expect("load the recording")
}

/// A unit test of the rules exported from `rules` over `ds`, checking the
/// etcd-network alert at `at` (an offset from the first step).
fn network_alert_test(rules: &RuleSet, ds: &Dataset, at: i64, instances: &[&str], name: &str) -> Generated {
    let report = engine::diagnose(rules, ds, &Options::default()).expect("diagnose");
    let w = &report.window;
    // The echo lasts from 30-55 s after the heal to the end of the recording:
    // the alerts fire as soon as their expression holds.
    let opts = export_options(w, w.from + at, 0);
    let file = export::export(rules, &opts).expect("export");
    let input = UnitTestInput {
        name: name.to_string(),
        data: ds,
        start: w.from,
        interval: w.step,
        role_labels: role_labels(),
        checks: vec![AlertCheck {
            eval_time: at,
            leaf: "etcd-network".into(),
            instances: instances.iter().map(|s| s.to_string()).collect(),
        }],
        prune_constant: true,
        // The lab's scrapes start up to a few hundred ms off their grid.
        snap: w.step / 2 - 1,
    };
    Generated {
        name: name.to_string(),
        rules_yaml: file.to_yaml(name).expect("yaml"),
        test_yaml: export::promtool_test(rules, &opts, &format!("{name}.rules.yaml"), &input)
            .expect("promtool test"),
    }
}

/// A signal's `quiet_after:` is exported: the peer round trips recorded
/// after a cut heals carry the probes that waited through it (etcd smooths
/// them and records them every 30 s), and the network alert does not fire
/// on that echo. The same rules without `quiet_after:` do fire, on the
/// member that was cut off, so the check would fail if the quiet were lost.
#[test]
fn exported_alerts_stay_quiet_on_the_echo_of_a_healed_partition() {
    if !have_promtool() {
        return;
    }
    let rules = RuleSet::default_rules().expect("shipped rules");
    let quiet: Vec<&str> = rules
        .signals
        .iter()
        .filter(|s| s.def.quiet_after.is_some())
        .map(|s| s.def.id.as_str())
        .collect();
    assert!(
        quiet.len() >= 3,
        "the round-trip signals are quiet after a cut: {quiet:?}"
    );
    let mut loud = rules.clone();
    for s in &mut loud.signals {
        s.def.quiet_after = None;
    }
    let ds = partition_dataset(&rules);
    // The cut ends at +360 s; the echo is recorded 30-55 s later and lasts
    // to the end of the recording (+450 s).
    let at = 440_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |g: Generated| {
        std::fs::write(dir.path().join(format!("{}.rules.yaml", g.name)), &g.rules_yaml).expect("write");
        let t = dir.path().join(format!("{}.test.yaml", g.name));
        std::fs::write(&t, &g.test_yaml).expect("write");
        promtool(&[Path::new("test"), Path::new("rules"), &t])
    };
    let (ok, msg) = run(network_alert_test(&rules, &ds, at, &[], "quiet"));
    assert!(
        ok,
        "the network alert fires on the echo of the healed cut:\n{msg}"
    );
    let (ok, msg) = run(network_alert_test(&loud, &ds, at, &["m0"], "loud"));
    assert!(
        ok,
        "without quiet_after the echo should fire the network alert on m0:\n{msg}"
    );
}
