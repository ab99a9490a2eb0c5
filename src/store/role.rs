//! What a target is: the role every series is labelled with, from sources up
//! to the report.

use std::fmt;

use serde::Serialize;

/// What a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Apiserver,
    Etcd,
    Controller,
    /// Audit logs (`--audit`): events turned into counters.
    Audit,
    /// etcd and kube-apiserver logs (`--logs`): messages turned into counters.
    Logs,
    /// The node a member runs on: node-exporter (`node_*`) or cAdvisor
    /// (`container_*`), optional evidence mapped to members (the source's
    /// `nodemap`).
    Node,
    Unknown,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Apiserver => "apiserver",
            Role::Etcd => "etcd",
            Role::Controller => "controller",
            Role::Audit => "audit",
            Role::Logs => "logs",
            Role::Node => "node",
            Role::Unknown => "unknown",
        }
    }

    /// The role names a target may be given (`parse`), for error messages.
    pub const GIVEN: &'static str = "apiserver, etcd, controller, node or unknown";

    pub fn parse(s: &str) -> Option<Role> {
        match s.to_ascii_lowercase().as_str() {
            "apiserver" | "kube-apiserver" => Some(Role::Apiserver),
            "etcd" => Some(Role::Etcd),
            "controller" | "controller-manager" | "kube-controller-manager" => Some(Role::Controller),
            "node" | "node-exporter" | "cadvisor" => Some(Role::Node),
            "unknown" => Some(Role::Unknown),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
