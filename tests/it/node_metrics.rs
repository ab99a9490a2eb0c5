//! Node metrics beside etcd (issue 24, part 3): a real node-exporter recorded
//! beside a real etcd member (role recognised, member mapped), and captures
//! generated from real node-exporter output in which the node decides disk
//! or CPU (testdata/node/).

use crate::support;

use std::path::{Path, PathBuf};

use cptriage::source::capture::{self, DumpArg};
use cptriage::source::ingest::Keep;
use cptriage::source::nodemap::MAP;
use cptriage::source::Role;
use cptriage_testkit::scenario;
use support::etcd::Cluster;
use support::node_exporter::NodeExporter;
use support::report::evidence;

/// `diagnose -o json` of a capture.
fn diagnose(cap: &Path) -> serde_json::Value {
    let out = support::cptriage(&["diagnose", "--dump", cap.to_str().unwrap(), "-o", "json"], &[]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// `axis/sub_axis on instances` of the root cause, or the status.
fn verdict(v: &serde_json::Value) -> String {
    match v["root_cause"].as_object() {
        Some(r) => format!(
            "{} {}/{} on {}",
            v["status"].as_str().unwrap_or(""),
            r["axis"].as_str().unwrap_or(""),
            r["sub_axis"].as_str().unwrap_or(""),
            r["instances"]
                .as_array()
                .map(|a| a.iter().filter_map(|i| i.as_str()).collect::<Vec<_>>().join(","))
                .unwrap_or_default()
        ),
        None => v["status"].as_str().unwrap_or("").to_string(),
    }
}

#[test]
fn a_real_node_exporter_is_recognised_and_mapped_to_the_member_on_its_host() {
    let cluster = Cluster::start(1, None);
    let node = NodeExporter::start();
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let mut args: Vec<String> = vec!["record".into(), "--out".into(), cap.display().to_string()];
    args.extend(cluster.record_flags());
    args.extend(["--node".into(), format!("node={}", node.url())]);
    args.extend(["--interval".into(), "1s".into(), "--duration".into(), "4s".into()]);
    let out = support::cptriage(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let ds = capture::load(&[DumpArg::parse(&cap.display().to_string()).unwrap()], &Keep::All).unwrap();
    let member = cluster.members[0].name.clone();
    let n = ds.targets.iter().find(|t| t.name == "node").expect("node target");
    assert_eq!(n.role, Role::Node, "{}", n.role_reason);
    assert!(
        n.families.contains("node_disk_io_time_seconds_total"),
        "{:?}",
        n.families
    );
    // The member and node-exporter both answer on 127.0.0.1: mapped by host.
    let map: Vec<_> = ds.store.by_name(MAP).collect();
    assert_eq!(map.len(), 1, "one member on one node");
    assert_eq!(map[0].labels.get("instance"), Some(member.as_str()));
    assert_eq!(map[0].labels.get("node"), Some("node"));
    assert!(ds
        .warnings
        .iter()
        .all(|w| !w.message.contains("mapped to no etcd member")));

    // The node signals are read for the member: evaluated, not absent.
    let v = diagnose(&cap);
    let busy = evidence(&v, "etcd_node_disk_busy");
    assert_eq!(busy["availability"], "evaluated", "{busy}");
    assert!(busy.to_string().contains(&member), "{busy}");
    let src = v["sources"].as_array().unwrap();
    assert!(
        src.iter().any(|s| s["target"] == "node" && s["role"] == "node"),
        "{src:?}"
    );
}

#[test]
fn node_metrics_of_no_member_are_reported_not_dropped() {
    let node = NodeExporter::start();
    let body = reqwest::blocking::get(node.url()).unwrap().text().unwrap();
    let d = tempfile::tempdir().unwrap();
    let real =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/realdata/etcd_nri_v3.5.21_k8s1.33.prom.gz");
    std::fs::copy(&real, d.path().join("etcd-0.prom.gz")).unwrap();
    std::fs::write(d.path().join("node-a.prom"), body).unwrap();
    let ds = capture::load(
        &[DumpArg::parse(&d.path().display().to_string()).unwrap()],
        &Keep::All,
    )
    .unwrap();
    let n = ds
        .targets
        .iter()
        .find(|t| t.name == "node-a")
        .expect("node target");
    assert_eq!(n.role, Role::Node, "{}", n.role_reason);
    assert_eq!(ds.store.by_name(MAP).count(), 0);
    let w = ds
        .warnings
        .iter()
        .find(|w| w.origin == "node-a")
        .unwrap_or_else(|| panic!("no warning about node-a: {:?}", ds.warnings));
    assert!(
        w.message.contains("mapped to no etcd member") && w.message.contains("etcd-0"),
        "{}",
        w.message
    );
}

/// Generates `testdata/node/NAME.yaml` into a capture and names each etcd
/// member's node in its manifest (`node:`), as a user would.
fn generate(name: &str, node_of: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/node/{name}.yaml"));
    let spec = scenario::load_spec(&spec).unwrap_or_else(|e| panic!("{e}"));
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    scenario::generate(spec, &Default::default(), &cap, 2).unwrap();
    let path = cap.join("manifest.yaml");
    let mut m = capture::manifest::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for t in &mut m.targets {
        if t.role == Role::Etcd {
            t.node = Some(node_of(&t.name));
        }
    }
    std::fs::write(&path, serde_yaml::to_string(&m).unwrap()).unwrap();
    (d, cap)
}

/// `etcd-2` runs on `node-2`.
fn own_node(member: &str) -> String {
    member.replace("etcd-", "node-")
}

#[test]
fn a_saturated_disk_on_the_slow_members_node_is_disk() {
    let (_d, cap) = generate("etcd-disk-slow-node-disk-busy", own_node);
    let v = diagnose(&cap);
    assert_eq!(verdict(&v), "degraded etcd/disk on etcd-2");
    let busy = evidence(&v, "etcd_node_disk_busy").to_string();
    assert!(busy.contains("etcd-2"), "{busy}");
    let starved = evidence(&v, "etcd_node_cpu_starved");
    assert_eq!(starved["availability"], "evaluated", "{starved}");
}

#[test]
fn a_throttled_etcd_container_on_its_own_node_is_cpu_and_a_shared_node_decides_nothing() {
    let (_d, cap) = generate("etcd-cpu-throttled-node", own_node);
    let v = diagnose(&cap);
    assert_eq!(verdict(&v), "degraded etcd/cpu on etcd-2");
    let localisation = v["root_cause"]["localisation"].to_string();
    assert!(localisation.contains("throttled"), "{localisation}");

    // The same data, every member said to run on node-2: the node's metrics
    // cannot tell the members apart, and etcd's own evidence (slow fsyncs,
    // round trips unchanged) says disk.
    let (_d2, cap2) = generate("etcd-cpu-throttled-node", |_| "node-2".to_string());
    let v2 = diagnose(&cap2);
    assert_eq!(verdict(&v2), "degraded etcd/disk on etcd-2");
    let warn = v2["warnings"].to_string();
    assert!(
        warn.contains("node-0") && warn.contains("mapped to no etcd member"),
        "{warn}"
    );
}
