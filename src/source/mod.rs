//! Where samples come from. Every source produces time-stamped snapshots per
//! target (one apiserver replica, one etcd member, …) and feeds one series store.
//!
//! Every series a source stores carries two labels added by cptriage:
//! `instance="<target name>"` and `role="<role>"` (an exposition's own `instance`
//! label, if any, is renamed `exported_instance`, as Prometheus does). Rules select
//! a role by matching on `role`; per-instance localisation groups by `instance`.

pub mod audit;
pub mod capture;
pub mod expfmt;
pub mod ingest;
pub mod live;
pub mod logs;
pub mod nodemap;
pub mod notation;
pub mod prometheus;
mod skipped;
pub mod timename;
pub mod yaml;

use serde::Serialize;

pub use crate::store::Role;
use crate::store::{Millis, Store};

/// The version label of a component's build-information metric, in the order
/// they are tried: `kubernetes_build_info{git_version}` (kube-apiserver 1.16+),
/// `kubernetes_build_info{gitVersion}` (1.10–1.15, before the labels were
/// renamed to snake case), `etcd_server_version{server_version}` (METRICS.md §1.1).
pub const VERSION_LABELS: &[(&str, &str)] = &[
    ("kubernetes_build_info", "git_version"),
    ("kubernetes_build_info", "gitVersion"),
    ("etcd_server_version", "server_version"),
];

/// The version a sample of `metric` with these `(name, value)` labels carries,
/// if `metric` is a build-information metric.
pub fn version_of<'a>(
    metric: &str,
    labels: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Option<&'a str> {
    VERSION_LABELS
        .iter()
        .filter(|(m, _)| *m == metric)
        .find_map(|(_, l)| labels.clone().find(|(n, _)| n == l).map(|(_, v)| v))
}

/// Where a snapshot's time came from (the report states it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeSource {
    /// The capture manifest or the file name.
    FileName,
    /// Explicit timestamps on the samples.
    SampleTimestamp,
    /// The file's modification time.
    Mtime,
    /// The time the scrape finished (live).
    Scrape,
    /// Prometheus query results.
    Prometheus,
}

/// One snapshot of one target.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub time: Millis,
    /// File path or URL it came from.
    pub origin: String,
    /// `process_start_time_seconds`, when exposed (detects restarts and replica switches).
    pub process_start: Option<f64>,
}

/// One apiserver replica, etcd member or controller.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub name: String,
    pub role: Role,
    /// Why this role: "manifest", "given on the command line", or the content that decided it.
    pub role_reason: String,
    /// Detected component version (`kubernetes_build_info`, `etcd_server_version`).
    pub version: Option<String>,
    pub time_source: TimeSource,
    /// Snapshots in time order.
    pub snapshots: Vec<Snapshot>,
    /// Every metric family the target exposed with at least one sample (kept or
    /// not), so "not exposed by this version" is told apart from "nothing happened".
    pub families: std::collections::BTreeSet<String>,
    /// Times of scrapes that failed (live mode, or recorded in a capture's
    /// manifest): a target that stops answering is evidence.
    pub failures: Vec<Millis>,
}

/// A problem with part of the input that did not stop the analysis.
#[derive(Clone, Debug, Serialize)]
pub struct SourceWarning {
    /// File, directory or URL concerned.
    pub origin: String,
    pub message: String,
}

/// Everything the sources loaded: the series store and what it came from.
#[derive(Debug, Default)]
pub struct Dataset {
    pub store: Store,
    pub targets: Vec<Target>,
    pub warnings: Vec<SourceWarning>,
    /// What audit logs (`--audit`) held, when given.
    pub audit: Option<audit::AuditSummary>,
    /// What etcd and kube-apiserver logs (`--logs`) held, when given.
    pub logs: Option<logs::LogsSummary>,
}

impl Dataset {
    /// Earliest and latest scrape over all targets: snapshots, and failed
    /// scrapes after the first snapshot (a target that stops answering near the
    /// end of a recording extends the window to the last attempt). `None`
    /// without any snapshot.
    pub fn window(&self) -> Option<(Millis, Millis)> {
        let mut r: Option<(Millis, Millis)> = None;
        for t in &self.targets {
            for s in [t.snapshots.first(), t.snapshots.last()].into_iter().flatten() {
                r = Some(match r {
                    None => (s.time, s.time),
                    Some((a, b)) => (a.min(s.time), b.max(s.time)),
                });
            }
        }
        let (a, b) = r?;
        let last_failure = self
            .targets
            .iter()
            .flat_map(|t| t.failures.iter().copied())
            .filter(|&f| f > a)
            .max();
        Some((a, last_failure.map_or(b, |f| b.max(f))))
    }

    /// The targets with role `role`.
    pub fn targets_with_role(&self, role: Role) -> impl Iterator<Item = &Target> {
        self.targets.iter().filter(move |t| t.role == role)
    }

    /// The median interval between consecutive snapshots of one target, over all
    /// targets; `None` when every target has a single snapshot.
    pub fn typical_interval(&self) -> Option<Millis> {
        let mut gaps: Vec<Millis> = self
            .targets
            .iter()
            .flat_map(|t| t.snapshots.windows(2).map(|w| w[1].time - w[0].time))
            .filter(|g| *g > 0)
            .collect();
        if gaps.is_empty() {
            return None;
        }
        gaps.sort_unstable();
        Some(gaps[gaps.len() / 2])
    }
}

#[cfg(test)]
mod version_tests {
    use super::version_of;

    #[test]
    fn version_from_either_spelling_of_the_build_label() {
        let new = [("major", "1"), ("git_version", "v1.19.7")];
        let old = [("gitCommit", "637c7e2"), ("gitVersion", "v1.10.11")];
        let etcd = [("server_version", "3.5.21")];
        assert_eq!(
            version_of("kubernetes_build_info", new.iter().copied()),
            Some("v1.19.7")
        );
        assert_eq!(
            version_of("kubernetes_build_info", old.iter().copied()),
            Some("v1.10.11")
        );
        assert_eq!(
            version_of("etcd_server_version", etcd.iter().copied()),
            Some("3.5.21")
        );
        // The label belongs to its metric only.
        assert_eq!(version_of("etcd_server_version", old.iter().copied()), None);
        assert_eq!(version_of("some_info", new.iter().copied()), None);
    }
}
