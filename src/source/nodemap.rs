//! Node metrics beside etcd: which targets describe a node (node-exporter,
//! cAdvisor) and which etcd member runs on which node.
//!
//! A member is mapped to a node target when the member's node — the node
//! declared for it (`node:` of a capture manifest's target), else the host of
//! the URL it was scraped from — is one of the node target's names: its target
//! name, its own declared node or URL host, or the `nodename` its
//! `node_uname_info` reports. A member whose target name is a node target's
//! `nodename` is mapped to it too (etcd members are usually named after their
//! node). The map is stored as the series
//! `cptriage_node_member{instance="<member>", node="<node target>", role="node"} 1`
//! at each snapshot of the node target, so that node signals join it
//! `on (node)` and are judged per member. Several members on one node share
//! it (a lab on one host): the node's metrics then cannot tell them apart, and
//! the rules only let them decide for a member alone on its node. A node
//! target mapped to no member, and a member on none of the node targets, are
//! reported, never silently dropped.
//!
//! Over Prometheus ([`crate::source::prometheus`]) the same matching reads a
//! target's node from the host of its `instance` label, its `nodename` from
//! `node_uname_info`, and, where kube-state-metrics runs, treats a node's name
//! and its internal IP (`kube_node_info{node, internal_ip}`) as the same node
//! ([`NodeAliases`]); the remote engine holds no map, so node signals are
//! sent with the map written out as a PromQL expression ([`literal`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::source::{Role, SourceWarning, Target};
use crate::store::Store;

/// The family whose `nodename` label names a node-exporter's node.
pub const UNAME: &str = "node_uname_info";
/// The series cptriage writes for each member mapped to a node target.
pub const MAP: &str = "cptriage_node_member";

/// Families that make a target a node's: node-exporter's, then cAdvisor's.
const FAMILIES: &[&str] = &[
    "node_cpu_seconds_total",
    "node_disk_io_time_seconds_total",
    "node_pressure_cpu_waiting_seconds_total",
    UNAME,
    "node_exporter_build_info",
    "container_cpu_cfs_periods_total",
    "container_cpu_usage_seconds_total",
];

/// The first family of `families` that marks a node-exporter or cAdvisor target.
pub fn node_family(families: &BTreeSet<String>) -> Option<&'static str> {
    FAMILIES.iter().copied().find(|f| families.contains(*f))
}

/// The host of a URL (`https://10.0.0.1:2379/metrics` → `10.0.0.1`), without
/// credentials or port; `None` when it has none.
pub fn host_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    host_of_instance(rest.split(['/', '?', '#']).next()?)
}

/// The host of a Prometheus `instance` label (`10.0.0.1:2379` → `10.0.0.1`,
/// `[::1]:9100` → `::1`, `node-a` → `node-a`), or of a URL's authority;
/// `None` when empty.
pub fn host_of_instance(authority: &str) -> Option<String> {
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split_once(']').map(|(h, _)| h)?
    } else {
        hostport.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// What is known of a target's node before mapping.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeKeys {
    /// The node declared for the target, else the host of its URL (over
    /// Prometheus: the host of its `instance`).
    pub(super) node: Option<String>,
    /// `node_uname_info{nodename}` (node-exporter targets).
    pub(super) nodename: Option<String>,
}

/// Names that denote the same node, from kube-state-metrics'
/// `kube_node_info{node, internal_ip}`: kube-prometheus names a
/// node-exporter's `instance` after the node, while etcd's `instance` is the
/// node's IP.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeAliases(pub(super) Vec<(String, String)>);

impl NodeAliases {
    /// `names` and every alias of one of them.
    fn widen<'a>(&'a self, names: &mut Vec<&'a str>) {
        for (a, b) in &self.0 {
            for (x, y) in [(a, b), (b, a)] {
                if names.contains(&x.as_str()) && !names.contains(&y.as_str()) {
                    names.push(y);
                }
            }
        }
    }
}

/// One etcd member on one node target: (member, node target).
pub type Pair = (String, String);

/// Maps every etcd member to the node targets it runs on (see the module
/// documentation); warns about node targets mapped to no member and, when
/// there are node targets, about members mapped to none. Without node
/// targets, no pair and no warning.
pub(super) fn pairs(
    targets: &[&Target],
    keys: &BTreeMap<String, NodeKeys>,
    aliases: &NodeAliases,
    warnings: &mut Vec<SourceWarning>,
) -> Vec<Pair> {
    let nodes: Vec<&Target> = targets.iter().copied().filter(|t| t.role == Role::Node).collect();
    if nodes.is_empty() {
        return Vec::new();
    }
    let members: Vec<&Target> = targets.iter().copied().filter(|t| t.role == Role::Etcd).collect();
    let none = NodeKeys::default();
    let key = |t: &Target| keys.get(&t.name).unwrap_or(&none);
    let mut out = Vec::new();
    for n in nodes {
        let nk = key(n);
        let mut names: Vec<&str> = [Some(n.name.as_str()), nk.node.as_deref(), nk.nodename.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        aliases.widen(&mut names);
        let on: Vec<&Target> = members
            .iter()
            .copied()
            .filter(|m| {
                key(m).node.as_deref().is_some_and(|h| names.contains(&h))
                    || nk.nodename.as_deref() == Some(m.name.as_str())
            })
            .collect();
        if on.is_empty() {
            warnings.push(unmapped(n, &names, &members));
        }
        out.extend(on.iter().map(|m| (m.name.clone(), n.name.clone())));
    }
    for m in members {
        if !out.iter().any(|(member, _)| *member == m.name) {
            warnings.push(homeless(m, key(m)));
        }
    }
    out
}

/// Maps every etcd member to the node targets it runs on ([`pairs`]) and
/// writes the map into `store` at each snapshot of the node target.
pub(super) fn map_members(
    store: &mut Store,
    targets: &[&Target],
    keys: &BTreeMap<String, NodeKeys>,
    aliases: &NodeAliases,
    warnings: &mut Vec<SourceWarning>,
) -> Vec<Pair> {
    let pairs = pairs(targets, keys, aliases, warnings);
    for (m, n) in &pairs {
        let l = store.labels([
            ("__name__", MAP),
            ("instance", m.as_str()),
            ("node", n.as_str()),
            ("role", Role::Node.as_str()),
        ]);
        for t in targets.iter().filter(|t| t.role == Role::Node && t.name == *n) {
            for s in &t.snapshots {
                store.push(&l, s.time, 1.0);
            }
        }
    }
    pairs
}

/// The map as a PromQL expression, for a remote engine that holds no
/// `cptriage_node_member` series: one
/// `label_replace(label_replace(vector(1), "instance", M, "", ""), "node", N, "", "")`
/// per pair, joined by `or` (each with `label="value"` too in fleet mode),
/// 1 at every step; an empty vector without pairs.
pub fn literal(pairs: &[Pair], fleet: Option<(&str, &str)>) -> String {
    // `label_replace` expands `$1` in its replacement: `$$` is a literal `$`.
    let quote = |v: &str| {
        let v = v.replace('$', "$$");
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    };
    let set = |e: String, label: &str, v: &str| {
        format!("label_replace({e}, \"{label}\", {}, \"\", \"\")", quote(v))
    };
    let terms: Vec<String> = pairs
        .iter()
        .map(|(m, n)| {
            let mut e = set(set("vector(1)".into(), "instance", m), "node", n);
            if let Some((label, value)) = fleet {
                e = set(e, label, value);
            }
            e
        })
        .collect();
    if terms.is_empty() {
        return "(vector(1) < 0)".into();
    }
    format!("({})", terms.join(" or "))
}

/// The warning of a node target mapped to no member.
fn unmapped(n: &Target, names: &[&str], members: &[&Target]) -> SourceWarning {
    let message = if members.is_empty() {
        "node metrics without any etcd member in the data: shown nowhere, mapped to no member".to_string()
    } else {
        format!(
            "node metrics mapped to no etcd member: this node is known as {}, and no member ({}) runs on any of these; \
             name each member's node with `node:` in the capture manifest, or name the member after the node's `nodename`",
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
        )
    };
    SourceWarning {
        origin: n.name.clone(),
        message,
    }
}

/// The warning of an etcd member on none of the node targets.
fn homeless(m: &Target, k: &NodeKeys) -> SourceWarning {
    let known = match k.node.as_deref() {
        Some(h) => format!("its node is known as `{h}`, which no node target is"),
        None => "its node is not known (no `node:` in the manifest, no host in its URL)".to_string(),
    };
    SourceWarning {
        origin: m.name.clone(),
        message: format!(
            "etcd member on no node of the node metrics: {known}; its node signals are not evaluated"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_urls() {
        assert_eq!(
            host_of("https://10.0.0.1:2379/metrics").as_deref(),
            Some("10.0.0.1")
        );
        assert_eq!(
            host_of("http://user:pw@node-a:9100/metrics").as_deref(),
            Some("node-a")
        );
        assert_eq!(host_of("http://[::1]:9100/metrics").as_deref(), Some("::1"));
        // A file name (`spec.yaml#3`) is no URL: no host.
        assert_eq!(host_of("testdata/x.yaml#3"), None);
        assert_eq!(host_of("http:///metrics"), None);
    }

    fn target(name: &str, role: Role) -> Target {
        Target {
            name: name.into(),
            role,
            role_reason: String::new(),
            version: None,
            time_source: crate::source::TimeSource::Prometheus,
            snapshots: Vec::new(),
            families: BTreeSet::new(),
            failures: Vec::new(),
        }
    }

    /// Keys as the Prometheus source reads them: the host of each `instance`.
    fn keys_of(ts: &[&Target], nodenames: &[(&str, &str)]) -> BTreeMap<String, NodeKeys> {
        ts.iter()
            .map(|t| {
                let nodename = nodenames
                    .iter()
                    .find(|(n, _)| *n == t.name)
                    .map(|(_, v)| v.to_string());
                let k = NodeKeys {
                    node: host_of_instance(&t.name),
                    nodename,
                };
                (t.name.clone(), k)
            })
            .collect()
    }

    #[test]
    fn members_map_to_nodes_by_host_nodename_and_kube_node_info() {
        let m: Vec<Target> = ["10.0.0.1:2379", "10.0.0.2:2379", "etcd-c", "10.0.0.4:2379"]
            .iter()
            .map(|n| target(n, Role::Etcd))
            .collect();
        let n: Vec<Target> = ["10.0.0.1:9100", "node-b", "node-c", "10.0.0.9:9100"]
            .iter()
            .map(|n| target(n, Role::Node))
            .collect();
        let all: Vec<&Target> = m.iter().chain(&n).collect();
        // node-c's node-exporter reports the nodename the third member is named after.
        let keys = keys_of(&all, &[("node-c", "etcd-c")]);
        // kube-prometheus: node-exporter's instance is the node's name.
        let aliases = NodeAliases(vec![("node-b".into(), "10.0.0.2".into())]);
        let mut w = Vec::new();
        let p = pairs(&all, &keys, &aliases, &mut w);
        let want: Vec<Pair> = [
            ("10.0.0.1:2379", "10.0.0.1:9100"),
            ("10.0.0.2:2379", "node-b"),
            ("etcd-c", "node-c"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(p, want);
        // The node of no member and the member on no node are both reported.
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].origin, "10.0.0.9:9100");
        assert!(
            w[0].message.contains("mapped to no etcd member"),
            "{}",
            w[0].message
        );
        assert_eq!(w[1].origin, "10.0.0.4:2379");
        assert!(w[1].message.contains("`10.0.0.4`"), "{}", w[1].message);

        // Without the alias, node-b is nobody's and the second member homeless.
        let mut w = Vec::new();
        let p = pairs(&all, &keys, &NodeAliases::default(), &mut w);
        assert_eq!(p.len(), 2);
        assert_eq!(w.len(), 4, "{w:?}");

        // Without node targets: no pair, no warning.
        let members: Vec<&Target> = m.iter().collect();
        let mut w = Vec::new();
        assert!(pairs(&members, &keys, &aliases, &mut w).is_empty());
        assert!(w.is_empty());
    }

    #[test]
    fn instance_hosts() {
        assert_eq!(host_of_instance("10.0.0.1:2379").as_deref(), Some("10.0.0.1"));
        assert_eq!(host_of_instance("node-a").as_deref(), Some("node-a"));
        assert_eq!(host_of_instance("[fd00::1]:9100").as_deref(), Some("fd00::1"));
        assert_eq!(host_of_instance(""), None);
    }

    #[test]
    fn node_families() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            node_family(&f(&["node_cpu_seconds_total"])),
            Some("node_cpu_seconds_total")
        );
        assert_eq!(
            node_family(&f(&["container_cpu_cfs_periods_total"])),
            Some("container_cpu_cfs_periods_total")
        );
        assert_eq!(node_family(&f(&["process_cpu_seconds_total"])), None);
    }
}
