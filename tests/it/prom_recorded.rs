//! Recorded signals (`cptriage rules export --by LABEL`) as the source of
//! `diagnose --prometheus` and fleet mode, against a real Prometheus 2.42 and
//! promtool: the verdicts from recorded signals equal the raw path's, for
//! every scenario of `testdata/scenarios/`.
//!
//! Every scenario is generated as the scenario tests do and written as one
//! cluster (its name is the `scenario` label: some scenarios' series carry a
//! `cluster` label of their own) into one TSDB with `promtool
//! tsdb create-blocks-from openmetrics`; the roles are selected by the `role`
//! label the captures carry. Then:
//!
//! The signal rules of `rules export --by scenario --window 1m` (the window
//! the diagnosis resolves for 15 s data; only the rules of signals and
//! observation counts: promtool evaluates each rule alone, so the questions'
//! rules, which read the signals' records, would see nothing) are backfilled
//! over the data with `promtool tsdb create-blocks-from rules`, every 15 s,
//! and Prometheus is restarted on the TSDB with the recorded blocks. promtool
//! evaluates a group at its own phase (an offset from the group's hash, as
//! Prometheus does), so the diagnoses' steps are moved onto the evaluation
//! times (read from the recordings' timestamps): at other times a recording
//! is the latest evaluation, up to one interval older than the step, and
//! the two paths cannot agree to the bit. Then, for each window (the
//! scenarios have three lengths), one fleet run (`--by scenario`) with
//! `--prometheus-recorded off` (raw) and one with the default (recorded),
//! and the same for a single-cluster run (`--selector '{scenario="…"}'`)
//! of a few scenarios, as JSON.
//!
//! Every cluster's report must be the raw one (status, root cause, onsets,
//! axes, every evidence value), apart from what names the path: the
//! expressions, the warnings, `recorded_signals`, and contributors (the
//! recorded path queries them for lit signals only). The recorded runs must
//! have read most signals from recordings.
//!
//! Prometheus runs with a lookback between the phase and 15 s (the
//! evaluation interval): backfilled recordings carry no staleness markers,
//! so a recording that stops (a member down) would otherwise stay visible
//! for the lookback, where a live rule evaluation writes a staleness marker.
//!
//! A signal whose exported `--by` form is not per cluster (`scalar()` of a
//! fleet-wide aggregation) is read raw by the recorded path, so single runs
//! agree; fleet runs over several clusters compare the raw path's own
//! `scalar()` of the shard with it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::promrun;

use cptriage::rules::load::RuleSet;
use cptriage::source::ingest::Keep;
use cptriage::source::Dataset;
use cptriage_testkit::{openmetrics, scenario};

/// Clusters written per OpenMetrics file (each is ~86 MB of text).
const BATCH: usize = 6;
/// The fleet label: one value per scenario.
const LABEL: &str = "scenario";
/// Scenarios also judged one at a time (`--selector '{scenario="…"}'`).
const SINGLE: [&str; 3] = ["etcd-disk-slow-one-member", "etcd-raft-member-down", "healthy"];

struct Generated {
    name: String,
    ds: Dataset,
}

fn scenarios(rules: &RuleSet) -> Vec<Generated> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("scenarios")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.strip_suffix(".yaml").map(str::to_string)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let p = dir.join(format!("{name}.yaml"));
            let spec = scenario::load_spec(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let ds = scenario::dataset(spec, &name, &Keep::Names(rules.referenced_metrics()))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            Generated { name, ds }
        })
        .collect()
}

fn backfill(gens: &[Generated], scratch: &Path, tsdb: &Path) {
    let om = scratch.join("scenarios.om.txt");
    for batch in gens.chunks(BATCH) {
        let parts: Vec<(&str, &Dataset)> = batch.iter().map(|g| (g.name.as_str(), &g.ds)).collect();
        openmetrics::write(&parts, Some(LABEL), &om).expect("write openmetrics");
        promrun::create_blocks(&om, tsdb).expect("create blocks");
        std::fs::remove_file(&om).expect("remove openmetrics");
    }
}

fn cptriage(args: &[String]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args(args)
        .output()
        .expect("run cptriage");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn rfc3339(t: i64) -> String {
    chrono::DateTime::from_timestamp_millis(t)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The reports of one diagnosis over `[from, to]`: by cluster, in fleet mode
/// over the clusters `names`, or the one cluster `names[0]` alone.
fn diagnose(
    url: &str,
    (from, to): (i64, i64),
    names: &[&str],
    fleet: bool,
    recorded: bool,
) -> BTreeMap<String, serde_json::Value> {
    let mut args: Vec<String> = ["diagnose", "--prometheus", url]
        .iter()
        .chain(cptriage_testkit::bench::ROLE_SELECTORS.iter())
        .map(|s| s.to_string())
        .collect();
    args.extend(["--from".into(), rfc3339(from), "--to".into(), rfc3339(to)]);
    args.extend(["--step".into(), "15s".into(), "-o".into(), "json".into()]);
    if fleet {
        let re: Vec<String> = names.iter().map(|n| n.replace('.', "\\.")).collect();
        args.extend(["--by".into(), LABEL.into(), "--clusters".into(), re.join("|")]);
        args.extend(["--prometheus-max-samples".into(), "0".into()]);
    } else {
        args.extend(["--selector".into(), format!("{{{LABEL}=\"{}\"}}", names[0])]);
    }
    if !recorded {
        args.extend(["--prometheus-recorded".into(), "off".into()]);
    }
    let (code, stdout, stderr) = cptriage(&args);
    assert!(
        matches!(code, Some(0 | 1 | 4 | 5)),
        "exit {code:?}: {stderr}\n{}",
        &stdout[..stdout.len().min(2000)]
    );
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("json: {e}\nstderr: {stderr}"));
    if fleet {
        v.as_array()
            .expect("array")
            .iter()
            .map(|r| {
                (
                    r["cluster"].as_str().expect("cluster field").to_string(),
                    r.clone(),
                )
            })
            .collect()
    } else {
        BTreeMap::from([(names[0].to_string(), v)])
    }
}

/// A report without what names the path it took.
fn comparable(v: &serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in [
                    "expression",
                    "contributors",
                    "contributors_note",
                    "warnings",
                    "recorded_signals",
                ] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = v.clone();
    strip(&mut v);
    v
}

/// The first difference between two JSON values, as a path.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value as J;
    match (a, b) {
        (J::Object(x), J::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let (p, q) = (x.get(k).unwrap_or(&J::Null), y.get(k).unwrap_or(&J::Null));
                if let Some(d) = first_difference(p, q, &format!("{path}.{k}")) {
                    return Some(d);
                }
            }
            None
        }
        (J::Array(x), J::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!(
            "{path}: raw {} / recorded {}",
            &a.to_string()[..a.to_string().len().min(300)],
            &b.to_string()[..b.to_string().len().min(300)]
        )),
    }
}

/// The signal and observation rules of the export, as a rule file, and the
/// name of its first record.
fn signal_rules(dir: &Path) -> (std::path::PathBuf, String) {
    let mut args: Vec<String> = [
        "rules",
        "export",
        "--format",
        "prometheus",
        "--by",
        LABEL,
        "--window",
        "1m",
    ]
    .iter()
    .chain(cptriage_testkit::bench::ROLE_SELECTORS.iter())
    .map(|s| s.to_string())
    .collect();
    args.push("--for".into());
    args.push("1m".into());
    let (code, stdout, stderr) = cptriage(&args);
    assert_eq!(code, Some(0), "{stderr}");
    let text = promrun::signal_rules(&stdout).expect("signal rules");
    let file: serde_yaml::Value = serde_yaml::from_str(&text).expect("rules yaml");
    let rules = file["groups"][0]["rules"].as_sequence().expect("rules");
    assert!(rules.len() > 50, "{} signal rules", rules.len());
    assert!(rules.iter().all(|r| r["labels"]["cptriage_digest"]
        .as_str()
        .is_some_and(|d| d.len() == 16)));
    let first = rules[0]["record"].as_str().expect("record").to_string();
    let path = dir.join("signals.rules.yaml");
    std::fs::write(&path, text).expect("write rules");
    (path, first)
}

#[test]
fn recorded_signals_give_the_raw_verdicts_for_every_scenario() {
    assert!(
        promrun::available(),
        "prometheus/promtool not installed (Debian's prometheus package; scripts/test installs it)"
    );
    let t0 = std::time::Instant::now();
    let rules = RuleSet::default_rules().expect("shipped rules");
    let gens = scenarios(&rules);
    assert!(gens.len() >= 20, "{} scenarios", gens.len());
    // The scenarios by window: one fleet run each.
    let mut windows: BTreeMap<(i64, i64), Vec<&str>> = BTreeMap::new();
    for g in &gens {
        let w = g.ds.window().expect("window");
        assert_eq!((w.1 - w.0) % 15_000, 0, "{}: window not on the 15 s grid", g.name);
        windows.entry(w).or_default().push(&g.name);
    }
    let span = (
        windows.keys().map(|w| w.0).min().expect("from"),
        windows.keys().map(|w| w.1).max().expect("to"),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let tsdb = dir.path().join("tsdb");
    std::fs::create_dir_all(&tsdb).expect("mkdir");
    backfill(&gens, dir.path(), &tsdb);
    eprintln!("scenario data backfilled in {:.1} s", t0.elapsed().as_secs_f64());

    // The scenario data, and the signals recorded over it.
    let prom = promrun::Prometheus::start(&tsdb, "15s").expect("start prometheus");
    let recorded_blocks = dir.path().join("recorded");
    let (rules_file, first_record) = signal_rules(dir.path());
    promrun::create_blocks_from_rules(prom.port, &rules_file, span, "15s", &recorded_blocks)
        .expect("backfill the rules");
    drop(prom);
    promrun::move_blocks(&recorded_blocks, &tsdb).expect("move the recorded blocks");
    eprintln!("rules backfilled at {:.1} s", t0.elapsed().as_secs_f64());
    let prom = promrun::Prometheus::start(&tsdb, "15s").expect("restart prometheus");
    // The phase of the evaluations: the steps are moved onto it.
    let last = prom
        .query_range(&format!("max(timestamp({first_record}))"), span.1, span.1, 15_000)
        .expect("recording times");
    let phase = (last[0].1[0].1 * 1000.0).round() as i64 % 15_000;
    // Backfilled recordings have no staleness markers: a lookback shorter
    // than the evaluation interval (but not than the age of a scrape at a
    // step on the phase) ends a recording where its rule stopped answering,
    // as a live evaluation's staleness marker does.
    drop(prom);
    let lookback = format!("{}ms", phase + (15_000 - phase) / 2);
    let prom = promrun::Prometheus::start(&tsdb, &lookback).expect("restart prometheus");
    let url = format!("http://127.0.0.1:{}", prom.port);
    let on_phase = |(from, to): (i64, i64)| {
        let up = |t: i64| t + (phase - t).rem_euclid(15_000);
        (up(from), up(to) - if up(to) > to { 15_000 } else { 0 })
    };
    eprintln!("evaluations at {phase} ms past the 15 s grid");

    let runs = |recorded: bool| -> BTreeMap<String, serde_json::Value> {
        let mut all = BTreeMap::new();
        for (w, names) in &windows {
            all.extend(diagnose(&url, on_phase(*w), names, true, recorded));
        }
        for name in SINGLE {
            let w = gens
                .iter()
                .find(|g| g.name == name)
                .expect("scenario")
                .ds
                .window()
                .expect("w");
            let one = diagnose(&url, on_phase(w), &[name], false, recorded);
            all.insert(format!("{name} (single)"), one[name].clone());
        }
        all
    };
    let raw = runs(false);
    eprintln!("raw runs done at {:.1} s", t0.elapsed().as_secs_f64());
    let rec = runs(true);
    eprintln!("recorded runs done at {:.1} s", t0.elapsed().as_secs_f64());

    assert_eq!(raw.keys().collect::<Vec<_>>(), rec.keys().collect::<Vec<_>>());
    assert_eq!(raw.len(), gens.len() + SINGLE.len());
    let mut failures = Vec::new();
    for (cluster, r) in &raw {
        let x = &rec[cluster];
        assert!(
            r.get("recorded_signals").is_none(),
            "{cluster}: `--prometheus-recorded off` read recordings"
        );
        let paths = &x["recorded_signals"];
        let read = paths["recorded"].as_array().map_or(0, Vec::len);
        let rawn = paths["raw"].as_object().map_or(0, |m| m.len());
        eprintln!(
            "{cluster}: {} {}, {read} recorded, raw: {}",
            x["status"], x["root_cause"]["axis"], paths["raw"]
        );
        if read < 2 * rawn || paths["window"] != "1m" {
            failures.push(format!(
                "{cluster}: only {read} recorded signals ({rawn} raw): {paths}"
            ));
        }
        if let Some(d) = first_difference(&comparable(r), &comparable(x), "") {
            if failures.is_empty() {
                let keep = std::env::temp_dir().join("cptriage-prom-recorded");
                let _ = std::fs::create_dir_all(&keep);
                let _ = std::fs::write(keep.join("raw.json"), r.to_string());
                let _ = std::fs::write(keep.join("recorded.json"), x.to_string());
                eprintln!("{cluster}: both reports in {}", keep.display());
            }
            failures.push(format!("{cluster}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
