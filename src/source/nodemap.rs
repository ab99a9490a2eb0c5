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
//! target mapped to no member is reported, never silently dropped.

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
    let authority = rest.split(['/', '?', '#']).next()?;
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
    /// The node declared for the target, else the host of its URL.
    pub(super) node: Option<String>,
    /// `node_uname_info{nodename}` (node-exporter targets).
    pub(super) nodename: Option<String>,
}

/// Maps every etcd member to the node targets it runs on and writes the map
/// into `store` (see the module documentation); warns about node targets
/// mapped to no member.
pub(super) fn map_members(
    store: &mut Store,
    targets: &[&Target],
    keys: &BTreeMap<String, NodeKeys>,
    warnings: &mut Vec<SourceWarning>,
) {
    let nodes: Vec<&Target> = targets.iter().copied().filter(|t| t.role == Role::Node).collect();
    if nodes.is_empty() {
        return;
    }
    let members: Vec<&Target> = targets.iter().copied().filter(|t| t.role == Role::Etcd).collect();
    let none = NodeKeys::default();
    let key = |t: &Target| keys.get(&t.name).unwrap_or(&none);
    for n in nodes {
        let nk = key(n);
        let names: Vec<&str> = [Some(n.name.as_str()), nk.node.as_deref(), nk.nodename.as_deref()]
            .into_iter()
            .flatten()
            .collect();
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
            continue;
        }
        for m in on {
            let l = store.labels([
                ("__name__", MAP),
                ("instance", m.name.as_str()),
                ("node", n.name.as_str()),
                ("role", Role::Node.as_str()),
            ]);
            for s in &n.snapshots {
                store.push(&l, s.time, 1.0);
            }
        }
    }
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
