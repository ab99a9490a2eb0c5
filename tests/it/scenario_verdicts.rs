//! Every scenario in `testdata/scenarios/` is generated from the real captures
//! (in memory, exactly the bytes `gen-scenario` writes) and diagnosed with the
//! shipped rules; the verdict must match the scenario's `expect` block: status,
//! axis, sub-axis, root-cause onset within one step, the instances the fault is
//! localised to, and the downstream axes with their onsets.

use crate::scenarios;

use std::path::Path;

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
                if let Some(aff) = &exp.affected {
                    let mut got = rc.affected.clone();
                    got.sort();
                    let mut want = aff.clone();
                    want.sort();
                    if got != want {
                        why.push(format!("affected {got:?}, want {want:?}"));
                    }
                    for a in aff {
                        if rc.instances.contains(a) {
                            why.push(format!("affected `{a}` also named as the cause"));
                        }
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

/// Who: the 409 storm's contributors by resource and verb, from the real
/// 1.33 capture's own 409 series (the storm is split over them in proportion
/// to their captured values), with their shares and window-start baselines.
#[test]
fn the_409_storm_names_its_resources_and_verbs() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/storage-409-storm.yaml");
    let (_, r) = diagnose(&p, &rules);
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "storage")
        .and_then(|a| a.evidence.iter().find(|e| e.signal == "conflict_ratio"))
        .expect("conflict evidence");
    let c = &ev.contributors;
    assert_eq!(c.len(), 5, "{c:?}");
    let total: f64 = c.iter().filter_map(|c| c.share).sum();
    assert!(total <= 1.0 + 1e-9 && total > 0.8, "{total}");
    assert!(c.windows(2).all(|w| w[0].value >= w[1].value), "largest first");
    assert_eq!(c[0].labels["resource"], "deployments");
    assert_eq!(c[0].labels["verb"], "PUT");
    assert!((c[0].share.unwrap() - 0.3).abs() < 0.01, "{:?}", c[0]);
    assert_eq!(c[0].baseline, Some(0.0), "no 409s before the storm");
    assert!(ev
        .contributors_note
        .as_deref()
        .unwrap_or("")
        .contains("2 smaller contributors"));
}

/// A follower down: the members' failed sends all go to one peer, named by
/// its member id (`To`), and the member that stopped answering is the cause.
#[test]
fn a_follower_down_is_the_peer_the_others_cannot_reach() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/etcd-raft-member-down.yaml");
    let (_, r) = diagnose(&p, &rules);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(
        (rc.leaf.as_str(), rc.instances.clone()),
        ("etcd-raft", vec!["etcd-2".to_string()])
    );
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "etcd-raft")
        .and_then(|a| a.evidence.iter().find(|e| e.signal == "etcd_peer_send_failures"))
        .expect("peer send failures evidence");
    assert_eq!(ev.contributors.len(), 1, "{:?}", ev.contributors);
    let c = &ev.contributors[0];
    assert_eq!(c.labels["To"], "8e9e05c52164694d");
    assert_eq!(c.share, Some(1.0));
    // Both surviving members fail to send to it (1/s each while it is down;
    // the reference step is the episode's last, as the failures fade out).
    assert!(c.value.unwrap() > 0.5 && c.value.unwrap() <= 2.0, "{c:?}");
}

/// The falsifier with the measured numbers: APF alone, etcd at its baseline.
/// The nearest cleared alternative is etcd (the apiserver's etcd p99 at its
/// baseline), the deciding values include the 9.95 s APF queue wait, and the
/// ADR sentence names both.
#[test]
fn apf_alone_is_falsifiable_by_the_etcd_latency_it_cleared() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/bitter-zone-apf-only.yaml");
    let (_, r) = diagnose(&p, &rules);
    let f = r.falsification.as_ref().expect("falsification");
    let wait = f
        .deciding
        .iter()
        .find(|m| m.signal == "apf_queue_wait_p99")
        .expect("APF wait decides");
    assert!(wait.value.unwrap() > 9.0, "{wait:?}");
    let etcd = &f.cleared[0];
    assert_eq!(
        (etcd.axis.as_str(), etcd.signal.as_str()),
        ("etcd", "apiserver_etcd_latency_p99")
    );
    let (v, b) = (etcd.value.unwrap(), etcd.baseline.unwrap());
    assert!((0.015..0.035).contains(&v) && (v - b).abs() < 0.002, "{etcd:?}");
    assert!(!f.cleared.iter().any(|m| m.axis == "apf"));
    assert!(f.adr.contains("while etcd stayed clear"), "{}", f.adr);
    assert!(f
        .statement
        .ends_with(rules.leaves[rules.leaf("apf").unwrap()].falsifier.trim()));
}

/// Which member led when: the leader-loss scenario's leadership moves from
/// etcd-0 to nobody at 4m, then to etcd-1 at 5m, and the raft evidence says so.
#[test]
fn the_raft_evidence_says_which_member_led_when() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/etcd-raft-leader-loss.yaml");
    let (_, r) = diagnose(&p, &rules);
    let ev = r
        .axes
        .iter()
        .find(|a| a.leaf == "etcd-raft")
        .and_then(|a| a.evidence.iter().find(|e| e.signal == "etcd_is_leader"))
        .expect("leader evidence");
    assert!(ev.context, "shown, not deciding");
    assert_eq!(
        ev.note.as_deref(),
        Some(
            "lit over the window: etcd-0 from 2026-01-01T00:00:00Z, none from 2026-01-01T00:04:00Z, etcd-1 from 2026-01-01T00:05:00Z"
        )
    );
}

/// A restart that clients felt is the story of the verdict: which replica,
/// when, and what followed (LISTs answered 429 while its caches filled, the
/// other replicas' slow LISTs as its watchers relisted there), not
/// "unexplained" with the restart in a warning.
#[test]
fn a_restart_clients_felt_names_the_replica_when_and_what_followed() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/apiserver-restart-relists.yaml");
    let (_, r) = diagnose(&p, &rules);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.leaf, "apiserver-restart");
    let loc = rc.localisation.as_deref().unwrap_or("");
    assert!(loc.starts_with("apiserver-1 restarted at 00:04:00Z: "), "{loc}");
    assert!(
        loc.contains("of its requests got 429 while its caches filled"),
        "{loc}"
    );
    assert!(loc.contains("; others' LIST p99 "), "{loc}");
    assert!(r.verdict.summary.contains(loc), "{}", r.verdict.summary);
    let joint = r.axes.iter().find(|a| a.leaf == "joint").expect("joint");
    assert_ne!(joint.state, cptriage::rules::report::AxisState::Lit);
}

/// The evidence of `signal` on the axis of `leaf`.
fn evidence_of<'r>(
    r: &'r cptriage::rules::report::Report,
    leaf: &str,
    signal: &str,
) -> &'r cptriage::rules::report::Evidence {
    r.axes
        .iter()
        .find(|a| a.leaf == leaf)
        .and_then(|a| a.evidence.iter().find(|e| e.signal == signal))
        .unwrap_or_else(|| panic!("{leaf}: no evidence of {signal}"))
}

/// Webhooks that add up: none fails and each stays under its timeout, but on
/// a pod CREATE's path (mutating webhooks in turn, the slowest validating one
/// beside the others) they take 43 s of the 60 s request deadline and 504s
/// follow. The verdict names the path's mean, each webhook on it with its
/// share (14, 12, 9 and 8 s of 43; the 5 s validating webhook runs in
/// parallel with the 14 s one and is not on the path) and the writes that
/// timed out.
#[test]
fn webhooks_that_add_up_name_the_path_and_each_webhooks_share() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/admission-webhooks-add-up.yaml");
    let (_, r) = diagnose(&p, &rules);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.leaf, "admission");
    let loc = rc.localisation.as_deref().unwrap_or("");
    assert!(
        loc.starts_with(
            "admission webhooks on CREATE add up to 43 s mean per request on apiserver-0: \
             validating pod-policy.example.com 32.6%, mutating datadog.webhook.tags 27.9%, \
             mutating datadog.webhook.auto.instrumentation 20.9%, mutating datadog.webhook.config 18.6%; "
        ),
        "{loc}"
    );
    assert!(loc.contains("% of writes timed out (504)"), "{loc}");
    assert!(!loc.contains("quota-check"), "{loc}");
    assert!(r.verdict.summary.contains(loc), "{}", r.verdict.summary);
    // The path's mean, not one webhook's p99 (which this version's buckets
    // cap at 2.5 s), is what crosses the deadline's half.
    let path = evidence_of(&r, "admission", "admission_webhook_path_seconds");
    let v = path.instances[0].value.unwrap();
    assert!((42.0..44.0).contains(&v), "{v}");
    assert_eq!(path.instances[0].lit, Some(true));
}

/// The twin: the four webhooks on pod CREATE slow to 0.5 s each (2 s on the
/// path, far over its baseline) on rare pod CREATEs; no write times out and
/// the writes' p99 stays fast. The path is lit, the write impact it is gated
/// on is not: healthy.
#[test]
fn a_slow_webhook_path_that_writes_do_not_feel_is_not_an_incident() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/scenarios/admission-webhooks-sum-under-deadline.yaml");
    let (_, r) = diagnose(&p, &rules);
    assert_eq!(r.status.as_str(), "healthy", "{}", r.verdict.summary);
    let path = evidence_of(&r, "admission", "admission_webhook_path_seconds");
    assert_eq!(path.instances[0].lit, Some(true), "{path:?}");
    let v = path.instances[0].value.unwrap();
    assert!((1.9..2.1).contains(&v), "{v}");
    for s in ["write_timeout_ratio", "write_latency_p99"] {
        assert_eq!(
            evidence_of(&r, "admission", s).instances[0].lit,
            Some(false),
            "{s}"
        );
    }
}

/// Replicas that disagree: one replica's KMS plugin fails while the others
/// decrypt; the storage axis is localised to that replica with the others as
/// the control group.
#[test]
fn one_replica_failing_to_decrypt_is_named_against_the_others() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/replica-kms-diverges.yaml");
    let (_, r) = diagnose(&p, &rules);
    let rc = r.verdict.root_cause.as_ref().expect("root cause");
    assert_eq!(rc.leaf, "storage");
    assert_eq!(rc.instances, vec!["apiserver-2".to_string()]);
    assert_eq!(
        rc.localisation.as_deref(),
        Some("only apiserver-2: encryption-at-rest transformation failures per second 12/s, others 0/s")
    );
    // The control group: the other replicas read, at 0, unlit.
    let ev = evidence_of(&r, "storage", "storage_transform_errors");
    let others: Vec<(&str, Option<f64>, Option<bool>)> = ev
        .instances
        .iter()
        .filter(|i| i.instance != "apiserver-2")
        .map(|i| (i.instance.as_str(), i.value, i.lit))
        .collect();
    assert_eq!(
        others,
        [
            ("apiserver-0", Some(0.0), Some(false)),
            ("apiserver-1", Some(0.0), Some(false))
        ]
    );
}

/// The twin: every replica's KMS plugin restarts at once, three failed
/// decryptions each within one scrape interval. The failures are seen (over
/// the threshold on every replica for less than a window) but not sustained:
/// healthy.
#[test]
fn a_brief_decryption_blip_on_every_replica_is_not_an_incident() {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios/replica-kms-blip-all.yaml");
    let (_, r) = diagnose(&p, &rules);
    assert_eq!(r.status.as_str(), "healthy", "{}", r.verdict.summary);
    let ev = evidence_of(&r, "storage", "storage_transform_errors");
    assert_eq!(ev.instance_series.len(), 3);
    for (inst, series) in &ev.instance_series {
        let peak = series.iter().flatten().copied().fold(0.0, f64::max);
        assert!(peak > 0.01, "{inst}: {peak}");
    }
}
