//! Node metrics over Prometheus: which etcd member runs on which node
//! target, with the matching of [`crate::source::nodemap`], and the map
//! written into node signals' expressions (the remote engine holds no
//! `cptriage_node_member` series).
//!
//! The keys of the matching come from the targets' `instance` labels (their
//! hosts), from `node_uname_info{nodename}` of the node targets and, where
//! kube-state-metrics runs, from `kube_node_info{node, internal_ip}`: two
//! instant queries at the end of the window, sent only when there are node
//! targets. Each cluster of a fleet (`--by`) is mapped on its own.

use std::collections::BTreeMap;

use promql_parser::parser::Expr;
use promql_parser::util::visitor::{walk_expr_mut, ExprVisitorMut};

use super::{Prometheus, RAW_UP_LIMIT};
use crate::eval::select;
use crate::eval::template::promql_duration;
use crate::source::nodemap::{self, NodeAliases, NodeKeys, Pair};
use crate::source::{Dataset, Role};
use crate::store::{Labels, Millis};

/// The node map of every group (fleet label value, `""` for one cluster).
pub(super) type NodeMaps = BTreeMap<String, Vec<Pair>>;

impl Prometheus {
    /// Maps the etcd members of each dataset to its node targets, writes the
    /// map into the dataset's store (as for captures, so that node signals
    /// read as exposed) and its warnings, and keeps it for
    /// [`Prometheus::instantiate_in`]. Datasets without node targets are left
    /// alone.
    pub(super) fn map_nodes(
        &self,
        datasets: &mut BTreeMap<String, Dataset>,
        (from, to): (Millis, Millis),
        by: Option<&str>,
    ) {
        let has_nodes = |ds: &Dataset| ds.targets.iter().any(|t| t.role == Role::Node);
        if !datasets.values().any(has_nodes) {
            return;
        }
        let span = promql_duration((to - from).clamp(60_000, RAW_UP_LIMIT) + 1000);
        let group = |l: &Labels| by.and_then(|b| l.get(b)).unwrap_or("").to_string();
        let unames = self.uname_of_nodes(&span, to, by);
        let kube = self.kube_nodes(&span, to, by);
        let mut maps = NodeMaps::new();
        for (g, ds) in datasets.iter_mut().filter(|(_, ds)| has_nodes(ds)) {
            let keys: BTreeMap<String, NodeKeys> = ds
                .targets
                .iter()
                .map(|t| {
                    let k = NodeKeys {
                        node: nodemap::host_of_instance(&t.name),
                        nodename: unames
                            .iter()
                            .find(|(l, _)| group(l) == *g && l.get("instance") == Some(t.name.as_str()))
                            .map(|(_, n)| n.clone()),
                    };
                    (t.name.clone(), k)
                })
                .collect();
            let aliases = NodeAliases(
                kube.iter()
                    .filter(|(l, _)| group(l) == *g)
                    .map(|(_, pair)| pair.clone())
                    .collect(),
            );
            let targets: Vec<_> = ds.targets.iter().collect();
            let mut warnings = Vec::new();
            let pairs = nodemap::map_members(&mut ds.store, &targets, &keys, &aliases, &mut warnings);
            ds.store.finish();
            ds.warnings.extend(warnings);
            maps.insert(g.clone(), pairs);
        }
        *self.node_maps.lock().unwrap_or_else(|p| p.into_inner()) = maps;
    }

    /// `node_uname_info{nodename}` of each node target (with its labels),
    /// none when the query fails.
    fn uname_of_nodes(&self, span: &str, to: Millis, by: Option<&str>) -> Vec<(Labels, String)> {
        let sel = select::selector_text(&self.role_matchers(Role::Node).unwrap_or_default());
        let by_list = by.map(|b| format!("{b}, ")).unwrap_or_default();
        let q = format!(
            "group by ({by_list}instance, nodename) (last_over_time({}{sel}[{span}]))",
            nodemap::UNAME
        );
        self.labelled(&q, to, "nodename")
    }

    /// Pairs of a node's name and its internal IP, from kube-state-metrics'
    /// `kube_node_info` (selected by `--selector` alone: kube-state-metrics is
    /// a job of its own); none when absent or the query fails.
    fn kube_nodes(&self, span: &str, to: Millis, by: Option<&str>) -> Vec<(Labels, Pair)> {
        let sel = select::selector_text(self.extra_matchers());
        let by_list = by.map(|b| format!("{b}, ")).unwrap_or_default();
        let q =
            format!("group by ({by_list}node, internal_ip) (last_over_time(kube_node_info{sel}[{span}]))");
        self.labelled(&q, to, "node")
            .into_iter()
            .filter_map(|(l, node)| {
                let ip = l.get("internal_ip").filter(|ip| !ip.is_empty())?.to_string();
                Some((l, (node, ip)))
            })
            .collect()
    }

    /// The series of an instant query with a non-empty `label`, and its value.
    fn labelled(&self, q: &str, to: Millis, label: &str) -> Vec<(Labels, String)> {
        let Ok(a) = self.api.query(q, to) else {
            return Vec::new();
        };
        for w in a.warnings {
            self.warn(format!("node map: Prometheus warned: {w}"));
        }
        let crate::eval::Value::Vector(v) = a.data else {
            return Vec::new();
        };
        v.into_iter()
            .filter_map(|s| {
                let value = s.labels.get(label).filter(|v| !v.is_empty())?.to_string();
                Some((s.labels, value))
            })
            .collect()
    }

    /// Replaces every `cptriage_node_member` selector of a node signal by the
    /// map of the group (`fleet`: the fleet label and the cluster's value) as
    /// a PromQL expression ([`nodemap::literal`]).
    pub(super) fn write_node_map(
        &self,
        e: &mut Expr,
        fleet: Option<(&str, &str)>,
    ) -> Result<(), crate::eval::EvalError> {
        let group = fleet.map_or("", |(_, v)| v);
        let text = {
            let maps = self.node_maps.lock().unwrap_or_else(|p| p.into_inner());
            nodemap::literal(maps.get(group).map_or(&[][..], Vec::as_slice), fleet)
        };
        let literal = crate::eval::parse(&text)?;
        struct Swap(Expr);
        impl ExprVisitorMut for Swap {
            type Error = std::convert::Infallible;
            fn pre_visit(&mut self, e: &mut Expr) -> Result<bool, Self::Error> {
                if let Expr::VectorSelector(vs) = e {
                    if vs.name.as_deref() == Some(nodemap::MAP) {
                        // Walking on (into the literal, which holds no
                        // selector): `false` would end the whole walk.
                        *e = self.0.clone();
                    }
                }
                Ok(true)
            }
        }
        let _ = walk_expr_mut(&mut Swap(literal), e);
        Ok(())
    }
}

/// Why node targets are left out: the node signals map members by the
/// `instance` label, which `--instance-label` replaces.
pub(super) fn instance_label_warning(il: &str, n: usize) -> String {
    format!(
        "{n} node target(s) left out: node metrics are mapped to etcd members by their `instance` label, and `--instance-label {il}` groups by another"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_parses_and_holds_every_pair() {
        let pairs = vec![
            ("127.0.0.2:2379".to_string(), "127.0.0.2:9100".to_string()),
            ("a$1\"b".to_string(), "n".to_string()),
        ];
        for fleet in [None, Some(("cluster", "prod"))] {
            let text = nodemap::literal(&pairs, fleet);
            let e = crate::eval::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let printed = e.to_string();
            assert!(printed.contains("127.0.0.2:9100"), "{printed}");
            assert!(printed.contains("a$$1"), "{printed}");
            assert_eq!(printed.contains("\"prod\""), fleet.is_some(), "{printed}");
        }
        assert!(crate::eval::parse(&nodemap::literal(&[], None)).is_ok());
    }
}
