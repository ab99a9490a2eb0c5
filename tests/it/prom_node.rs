//! Node metrics over Prometheus (issue 24, part 3): a real 3-member etcd,
//! each member on its own loopback address (127.0.0.2–4), a real
//! node-exporter beside each member on the same address, scraped every
//! second by a real Prometheus while `cptriage record` records the same
//! members and node-exporters. One node-exporter is named after its node as
//! kube-prometheus names it (`instance="node-c"`, relabelled), and a
//! kube-state-metrics exposition says that node's internal IP
//! (`kube_node_info`): the member on that IP is mapped through it.
//!
//! `diagnose --prometheus` must read the node signals for every member, each
//! on its own node, as `diagnose --dump` reads them from the recording; a
//! second Prometheus scraping the members without node-exporters must give
//! no node evidence, no error and no gap; node targets without a member, and
//! a member without a node target, are warnings.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::etcd::Cluster;
use support::node_exporter::NodeExporter;
use support::prometheus::Prometheus;
use support::report::{find_evidence as evidence, json_of};
use support::server::{Response, Server};

/// The loopback address of each member and of the node-exporter beside it.
const HOSTS: [&str; 3] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
/// What kube-prometheus names the node of the third member.
const NODE_C: &str = "node-c";

/// The node signals whose per-member values are compared.
const SIGNALS: [&str; 3] = [
    "etcd_node_disk_busy",
    "etcd_node_cpu_pressure",
    "etcd_node_cpu_starved",
];

/// Per-instance values of a signal's evidence, keyed by the host of the
/// member (`host_of`: the recording's `m1` and Prometheus's `127.0.0.3:PORT`
/// both → `127.0.0.3`); a NaN (a shared node) reads as `None`.
fn per_member(e: &serde_json::Value, host_of: &dyn Fn(&str) -> String) -> BTreeMap<String, Option<f64>> {
    e["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| (host_of(i["instance"].as_str().unwrap_or("")), i["value"].as_f64()))
        .collect()
}

/// The scrape configuration of the members, of `nodes` when given (every
/// target labelled `cluster="a"`, for fleet mode) and of a kube-state-metrics
/// exposition at `ksm`.
fn scrape_config(c: &Cluster, nodes: &[NodeExporter], ksm: Option<u16>) -> String {
    let etcd: Vec<String> = c
        .members
        .iter()
        .map(|m| format!("'{}:{}'", m.host, m.metrics_port))
        .collect();
    let mut cfg = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: etcd\n    static_configs:\n      - targets: [{}]\n        labels: {{cluster: a}}\n",
        etcd.join(", ")
    );
    if !nodes.is_empty() {
        // Plain setups: job `node`, instance = address; the third as
        // kube-prometheus names it: job `node-exporter`, instance = the node.
        let plain: Vec<String> = nodes[..2].iter().map(|n| format!("'{}'", n.address())).collect();
        cfg.push_str(&format!(
            "  - job_name: node\n    static_configs:\n      - targets: [{}]\n        labels: {{cluster: a}}\n  - job_name: node-exporter\n    static_configs:\n      - targets: ['{}']\n        labels: {{cluster: a}}\n    relabel_configs:\n      - target_label: instance\n        replacement: {NODE_C}\n",
            plain.join(", "),
            nodes[2].address()
        ));
    }
    if let Some(port) = ksm {
        cfg.push_str(&format!(
            "  - job_name: kube-state-metrics\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n        labels: {{team: ksm, cluster: a}}\n"
        ));
    }
    cfg
}

/// `diagnose --prometheus` over `[from, to]` at 1 s steps, JSON, with `extra` flags.
fn diagnose_prom(
    prom: &Prometheus,
    (from, to): (&str, &str),
    extra: &[&str],
) -> (serde_json::Value, Option<i32>) {
    let mut args = vec![
        "diagnose",
        "--prometheus",
        "",
        "--from",
        from,
        "--to",
        to,
        "--step",
        "1s",
        "-o",
        "json",
    ];
    let url = prom.url();
    args[2] = &url;
    args.extend(extra);
    let out = support::cptriage(&args, &[]);
    (json_of(&out, "diagnose --prometheus"), out.status.code())
}

#[test]
fn prometheus_reads_node_metrics_per_member_as_a_recording_does() {
    assert!(
        Prometheus::available(),
        "/usr/bin/prometheus is not installed (scripts/test installs it)"
    );
    let c = Cluster::start_on(&HOSTS, None);
    let nodes: Vec<NodeExporter> = HOSTS.iter().map(|h| NodeExporter::start_on(h)).collect();
    let ksm_body = format!(
        "# HELP kube_node_info Information about a cluster node.\n# TYPE kube_node_info gauge\nkube_node_info{{node=\"{NODE_C}\",internal_ip=\"{}\",kernel_version=\"6.1.0\",os_image=\"Debian GNU/Linux 12\",container_runtime_version=\"containerd://1.7\",kubelet_version=\"v1.30.0\",kubeproxy_version=\"v1.30.0\",provider_id=\"\",pod_cidr=\"10.244.2.0/24\",system_uuid=\"x\"}} 1\n",
        HOSTS[2]
    );
    let ksm = Server::start(None, move |_| Response::ok(ksm_body.clone()));
    let with_nodes = Prometheus::start(&scrape_config(&c, &nodes, Some(ksm.port())));
    let without_nodes = Prometheus::start(&scrape_config(&c, &[], None));
    for (p, n) in [(&with_nodes, 7), (&without_nodes, 3)] {
        let scraped = support::wait_for(Duration::from_secs(20), || {
            p.query("up == 1").filter(|r| r.len() == n).map(|_| ())
        });
        assert!(
            scraped.is_some(),
            "prometheus never scraped its {n} targets; log:\n{}",
            p.log()
        );
    }

    // Record the same members and node-exporters, 1 s apart, under a little load.
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("cap");
    let mut args: Vec<String> = vec!["record".into(), "--out".into(), cap.display().to_string()];
    args.extend(c.record_flags());
    for (i, n) in nodes.iter().enumerate() {
        args.extend(["--node".into(), format!("n{i}={}", n.url())]);
    }
    args.extend(["--interval", "1s", "--duration", "14s", "--timeout", "1s"].map(String::from));
    let mut rec = support::spawn_cptriage(&args);
    for k in 0..60 {
        let _ = c.put(k % 3, &format!("k{k}"), b"v", Duration::from_millis(500));
        std::thread::sleep(Duration::from_millis(150));
    }
    let out = rec.0.take().unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_secs(2));

    // The window of the recording, less its last 2 s: a round of scrapes cut
    // short at the end (a loaded machine) would leave the last step unread on
    // one side only.
    let whole = support::cptriage(&["diagnose", "--dump", cap.to_str().unwrap(), "-o", "json"], &[]);
    let whole = json_of(&whole, "diagnose --dump");
    let time = |k: &str| chrono::DateTime::parse_from_rfc3339(whole["window"][k].as_str().unwrap()).unwrap();
    let from = whole["window"]["from"].as_str().unwrap().to_string();
    let to = (time("to") - chrono::Duration::seconds(2)).to_rfc3339();
    assert!(
        time("to") - time("from") > chrono::Duration::seconds(10),
        "{}",
        whole["window"]
    );
    let dump_out = support::cptriage(
        &[
            "diagnose",
            "--dump",
            cap.to_str().unwrap(),
            "--from",
            &from,
            "--to",
            &to,
            "-o",
            "json",
        ],
        &[],
    );
    let dump = json_of(&dump_out, "diagnose --dump");
    let (remote, code) = diagnose_prom(&with_nodes, (&from, &to), &[]);

    // Names: the recording's members m0..m2, Prometheus's HOST:PORT; the
    // node of the third member is `node-c` over Prometheus.
    let host_of = |name: &str| -> String {
        if let Some(i) = name.strip_prefix('m').and_then(|i| i.parse::<usize>().ok()) {
            return HOSTS[i].to_string();
        }
        name.split(':').next().unwrap_or(name).to_string()
    };
    let want: Vec<String> = HOSTS.iter().map(|h| h.to_string()).collect();
    let summaries = format!("prometheus: {}\ndump: {}", remote["summary"], dump["summary"]);
    for signal in SIGNALS {
        let (p, d) = (
            evidence(&remote, signal).unwrap_or_else(|| panic!("no {signal} over Prometheus")),
            evidence(&dump, signal).unwrap_or_else(|| panic!("no {signal} in the recording")),
        );
        assert_eq!(p["availability"], "evaluated", "{signal}: {p}");
        assert_eq!(d["availability"], "evaluated", "{signal}: {d}");
        let (pv, dv) = (per_member(p, &host_of), per_member(d, &host_of));
        eprintln!("{signal}: prometheus {pv:?}, recording {dv:?}");
        // Every member has its own node's value, over both paths: a node
        // alone under its member (never NaN, the value of a shared node).
        for (what, v) in [("prometheus", &pv), ("recording", &dv)] {
            assert_eq!(
                v.keys().cloned().collect::<Vec<_>>(),
                want,
                "{what} {signal}: {v:?}\n{summaries}\nprometheus evidence: {p}"
            );
            assert!(
                v.values().all(|x| x.is_some_and(f64::is_finite)),
                "{what} {signal}: {v:?}"
            );
        }
        let expr = p["expression"].as_str().unwrap_or_default();
        assert!(
            expr.contains("label_replace(vector(1)") && !expr.contains("cptriage_node_member"),
            "{expr}"
        );
        assert!(expr.contains(NODE_C) && expr.contains(HOSTS[2]), "{expr}");
    }
    // The node targets are sources of role node, named as Prometheus names them.
    let node_sources: Vec<String> = remote["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["role"] == "node")
        .map(|s| s["target"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(node_sources.len(), 3, "{node_sources:?}");
    assert!(node_sources.contains(&NODE_C.to_string()), "{node_sources:?}");
    let warnings = remote["warnings"].to_string();
    assert!(
        !warnings.contains("mapped to no") && !warnings.contains("on no node"),
        "{warnings}"
    );
    assert_eq!(
        remote["status"], dump["status"],
        "{summaries}\ndump warnings: {}\ndump scope: {}",
        dump["warnings"], dump["scope"]
    );
    assert_eq!(remote["gaps"], dump["gaps"]);
    assert_eq!(code, dump_out.status.code(), "{summaries}");

    // Fleet mode: cluster `a` maps its own members (each term of the map
    // carries `cluster="a"`) and reads the same values from the same server.
    let (fleet, _) = diagnose_prom(&with_nodes, (&from, &to), &["--by", "cluster"]);
    let a = &fleet[0];
    assert_eq!(a["cluster"], "a", "{fleet}");
    for signal in SIGNALS {
        let (single, one) = (evidence(&remote, signal).unwrap(), evidence(a, signal).unwrap());
        assert_eq!(
            per_member(one, &host_of),
            per_member(single, &host_of),
            "{signal}"
        );
        let expr = one["expression"].as_str().unwrap_or_default();
        assert!(expr.contains("\"cluster\", \"a\""), "{expr}");
    }

    // Without kube_node_info (its one series left out by `--selector`; the
    // other series have no `team`), `node-c` is known by no member's address: the
    // node and its member are both reported.
    let (v, _) = diagnose_prom(&with_nodes, (&from, &to), &["--selector", "{team!=\"ksm\"}"]);
    let w = v["warnings"].to_string();
    assert!(
        w.contains("node metrics mapped to no etcd member") && w.contains(NODE_C),
        "{w}"
    );
    assert!(
        w.contains("etcd member on no node") && w.contains(HOSTS[2]),
        "{w}"
    );
    let busy = per_member(evidence(&v, "etcd_node_disk_busy").unwrap(), &host_of);
    assert_eq!(busy.keys().cloned().collect::<Vec<_>>(), &want[..2], "{busy:?}");

    // Instances told apart by another label: the node signals join members
    // and nodes by `instance`, so node targets (here the jobs `node` and
    // `node-exporter`) are left out, and said so.
    let (v, _) = diagnose_prom(&with_nodes, (&from, &to), &["--instance-label", "job"]);
    let w = v["warnings"].to_string();
    assert!(
        w.contains("node target(s) left out") && w.contains("--instance-label job"),
        "{w}"
    );
    assert_no_node_source(&v);

    // No node-exporter: no node target, no node evidence, no gap, no error.
    let (v, code) = diagnose_prom(&without_nodes, (&from, &to), &[]);
    assert_eq!(v["status"], remote["status"], "{}", v["summary"]);
    assert_eq!(code, dump_out.status.code());
    assert_no_node_source(&v);
    for signal in SIGNALS {
        if let Some(e) = evidence(&v, signal) {
            assert_ne!(e["availability"], "evaluated", "{signal}: {e}");
        }
    }
    // No gap that the run with node metrics has not (node evidence is
    // optional: its absence is no gap).
    for g in v["gaps"].as_array().unwrap() {
        assert!(remote["gaps"].as_array().unwrap().contains(g), "{g}");
    }
    let gaps = v["gaps"].to_string();
    assert!(
        !gaps.contains("\"node\"") && !gaps.contains("etcd_node_"),
        "{gaps}"
    );
    let w = v["warnings"].to_string();
    assert!(!w.contains("node"), "{w}");
}

/// The report lists no node target among its sources.
fn assert_no_node_source(v: &serde_json::Value) {
    let sources = v["sources"].as_array().expect("sources");
    assert!(sources.iter().all(|s| s["role"] != "node"), "{}", v["sources"]);
}
