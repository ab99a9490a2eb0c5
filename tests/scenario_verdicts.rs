//! Every scenario in `testdata/scenarios/` is generated from the real captures
//! (in memory, exactly the bytes `gen-scenario` writes) and diagnosed with the
//! shipped rules; the verdict must match the scenario's `expect` block: status,
//! axis, sub-axis, root-cause onset within one step, the instances the fault is
//! localised to, and the downstream axes with their onsets.

#[path = "common/scenarios.rs"]
mod scenarios;

use cptriage::rules::load::RuleSet;
use scenarios::diagnose;

fn axis_of(axis: &str, sub: &Option<String>) -> String {
    match sub {
        Some(s) => format!("{axis}/{s}"),
        None => axis.to_string(),
    }
}

#[test]
fn every_scenario_gets_its_expected_verdict() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let specs = scenarios::specs();
    assert!(
        specs.len() >= 16,
        "expected the scenario set, found {}",
        specs.len()
    );
    let mut failures = Vec::new();
    for p in &specs {
        let (spec, r) = diagnose(p, &rules);
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let exp = spec
            .spec
            .expect
            .clone()
            .unwrap_or_else(|| panic!("{name}: no expect block"));
        let step = spec.spec.interval.0;
        let mut why = Vec::new();
        let status = r.status.as_str();
        if status != exp.status {
            why.push(format!("status {status}, want {}", exp.status));
        }
        let rc = r.verdict.root_cause.as_ref();
        match (&exp.axis, rc) {
            (None, None) => {}
            (Some(axis), Some(rc)) => {
                let got = axis_of(&rc.axis, &rc.sub_axis);
                let want = axis_of(axis, &exp.sub_axis);
                if got != want {
                    why.push(format!("root cause {got}, want {want}"));
                }
                if let Some(on) = &exp.root_cause_onset {
                    let want = spec.start_ms + on.0;
                    match rc.onset {
                        Some(got) if (got - want).abs() <= step => {}
                        other => why.push(format!("onset {other:?}, want {want} ± {step} ms")),
                    }
                }
                for i in &exp.instances {
                    if !rc.instances.contains(i) {
                        why.push(format!("instance `{i}` not named (got {:?})", rc.instances));
                    }
                }
            }
            (want, got) => why.push(format!(
                "root cause {:?}, want {want:?}",
                got.map(|g| axis_of(&g.axis, &g.sub_axis))
            )),
        }
        for d in &exp.downstream {
            let found = r
                .verdict
                .downstream
                .iter()
                .find(|x| x.axis == d.axis || axis_of(&x.axis, &x.sub_axis) == d.axis);
            match (found, &d.onset) {
                (None, _) => why.push(format!("downstream `{}` missing", d.axis)),
                (Some(f), Some(on)) if (f.onset - (spec.start_ms + on.0)).abs() > step => why.push(format!(
                    "downstream `{}` onset {}, want {}",
                    d.axis,
                    f.onset,
                    spec.start_ms + on.0
                )),
                _ => {}
            }
        }
        eprintln!("{name}: {}", r.verdict.summary);
        if !why.is_empty() {
            failures.push(format!("{name}: {}", why.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "scenario verdicts differ:\n{}",
        failures.join("\n")
    );
}
