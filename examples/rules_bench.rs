//! Measures a full diagnosis with the shipped rules: 3 kube-apiservers (a real
//! 1.33 capture) and 3 etcd members (a real 3.5.21 capture), N snapshots at 15 s,
//! counters and histograms advancing 0.1% per snapshot, gauges constant.
//!
//! Run: `cargo run --release --example rules_bench -- [SNAPSHOTS]` (default 240 =
//! one hour), from the repository root (the captures are `testdata/realdata/`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use cptriage::eval::template::family_of;
use cptriage::rules::engine::{diagnose, Options};
use cptriage::rules::RuleSet;
use cptriage::source::{Dataset, Role, Snapshot, Target, TimeSource};

type Sample = (String, Vec<(String, String)>, f64);

fn sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if rest.starts_with('{') {
        let close = rest.rfind('}')?;
        let inner = &rest[1..close];
        let mut s = inner;
        while let Some(eq) = s.find("=\"") {
            let k = s[..eq].trim_start_matches([',', ' ']).to_string();
            let after = &s[eq + 2..];
            let mut end = 0;
            let b = after.as_bytes();
            while end < b.len() && b[end] != b'"' {
                end += if b[end] == b'\\' { 2 } else { 1 };
            }
            labels.push((k, after[..end.min(after.len())].to_string()));
            s = &after[(end + 1).min(after.len())..];
        }
        rest = &rest[close + 1..];
    }
    let v = match rest.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "NaN" => f64::NAN,
        x => x.parse().ok()?,
    };
    Some((name, labels, v))
}

fn add_target(
    data: &mut Dataset,
    file: &str,
    name: &str,
    role: Role,
    n: usize,
    keep: &BTreeSet<String>,
) -> usize {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(
            std::fs::File::open(file).unwrap_or_else(|e| panic!("{file}: {e}")),
        ),
        &mut text,
    )
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut families = BTreeSet::new();
    let mut points = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(f), Some(t)) = (it.next(), it.next()) {
                families.insert(f.to_string());
                types.insert(f.to_string(), t.to_string());
            }
            continue;
        }
        let Some(end) = line.find(['{', ' ']) else {
            continue;
        };
        let m = &line[..end];
        if line.starts_with('#')
            || (!keep.contains(m) && !keep.contains(family_of(m)) && m != "process_start_time_seconds")
        {
            continue;
        }
        let Some((metric, labels, v)) = sample(line) else {
            continue;
        };
        let moving = types.get(family_of(&metric)).is_some_and(|t| t != "gauge");
        let mut pairs: Vec<(String, String)> = labels;
        pairs.push(("__name__".into(), metric));
        pairs.push(("instance".into(), name.into()));
        pairs.push(("role".into(), role.as_str().into()));
        let l = data.store.labels(pairs);
        let id = data.store.series_id(&l);
        for i in 0..n {
            let x = if moving { v * (1.0 + 0.001 * i as f64) } else { v };
            data.store.push_id(id, T0 + i as i64 * 15_000, x);
            points += 1;
        }
    }
    data.targets.push(Target {
        name: name.into(),
        role,
        role_reason: "bench".into(),
        version: None,
        time_source: TimeSource::FileName,
        snapshots: (0..n)
            .map(|i| Snapshot {
                time: T0 + i as i64 * 15_000,
                origin: file.into(),
                process_start: None,
            })
            .collect(),
        families,
        failures: Vec::new(),
    });
    points
}

const T0: i64 = 1_796_083_200_000;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(240);
    let rules = RuleSet::default_rules().expect("default rules");
    let keep = rules.referenced_metrics();
    let t = Instant::now();
    let mut data = Dataset::default();
    let mut points = 0;
    for k in 0..3 {
        points += add_target(
            &mut data,
            "testdata/realdata/apiserver_nri_v1.33.0.prom.gz",
            &format!("apiserver-{k}"),
            Role::Apiserver,
            n,
            &keep,
        );
        points += add_target(
            &mut data,
            "testdata/realdata/etcd_nri_v3.5.21_k8s1.33.prom.gz",
            &format!("etcd-{k}"),
            Role::Etcd,
            n,
            &keep,
        );
    }
    data.store.finish();
    let build = t.elapsed();
    let t = Instant::now();
    let r = diagnose(&rules, &data, &Options::default()).expect("diagnose");
    let took = t.elapsed();
    println!(
        "snapshots {n} × 6 targets, series {}, points {points}, steps {}, signals {}: dataset built in {build:?}, diagnosis in {took:?} ({})",
        data.store.series().len(),
        r.window.steps.len(),
        rules.signals.len(),
        r.verdict.summary
    );
}
