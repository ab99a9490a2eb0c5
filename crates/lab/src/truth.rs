//! Ground truth of one lab run (`truth.json` beside its recording): what was
//! done to the cluster, when (wall clock, unix ms, logged at the moment of the
//! injection), and the verdict cptriage should give.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file name of a run's ground truth.
pub const TRUTH_FILE: &str = "truth.json";

/// The capture directory of a run, relative to its truth file.
pub const RECORDING_DIR: &str = "recording";
/// The members' etcd logs as the lab keeps them (`etcd/m0.log`, …).
pub const ETCD_LOG_DIR: &str = "etcd";
/// The members' etcd logs in an exported recording (`logs/m0.log.gz`, …).
pub const LOGS_DIR: &str = "logs";

/// What cptriage should answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expect {
    /// `healthy` or `degraded` (the verdict's `status`).
    pub status: String,
    /// The root cause's axis (`etcd`), none when healthy.
    pub axis: Option<String>,
    /// The root cause's sub-axis (`disk`, `cpu`, `network`, `raft`, `quota`,
    /// `load`, `maintenance`), none when healthy.
    pub sub_axis: Option<String>,
    /// `healthy` passes too: maintenance or contention that may degrade
    /// nothing (a short defragmentation, CPU neighbours the scheduler absorbs),
    /// which must never be called another fault.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub healthy_accepted: bool,
}

/// Something the lab did or saw during the run, at wall-clock time `at_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub at_ms: i64,
    pub what: String,
}

/// The ground truth of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// Scenario name (`fsync-slow-leader`, `healthy-noisy`, …).
    pub scenario: String,
    /// `etcd --version` of the members (`3.4.23`).
    pub etcd_version: String,
    /// What was done, in a sentence.
    pub fault: String,
    /// The members (target names) the fault was applied to; empty when none.
    pub members: Vec<String>,
    /// A fault of exactly one member: the root cause must name that member only.
    pub single_member: bool,
    /// When the fault was injected (unix ms); none for runs without a fault.
    pub injected_at_ms: Option<i64>,
    /// When the fault was undone (unix ms); none when it lasted to the end.
    pub cleared_at_ms: Option<i64>,
    /// When the recording started and ended (unix ms).
    pub recording_from_ms: i64,
    pub recording_to_ms: i64,
    /// The recording's scrape interval in seconds.
    pub interval_seconds: f64,
    /// Background load and neighbour processes during the run.
    pub conditions: String,
    pub expect: Expect,
    /// Everything the lab did, in order.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Set when today's cptriage is known to get this run wrong: why. The
    /// regression test asserts that such a run still fails, so the entry is
    /// removed when detection improves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_failure: Option<String>,
    /// The same for the verdict from the members' etcd logs alone
    /// (`judge::judge_logs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_failure_logs: Option<String>,
    /// The same for the verdict from the recording subsampled to a slower
    /// scrape interval (`lab judge --interval`, crate::interval), keyed by
    /// that interval (`15s`, `30s`). `known_failure` stays the recording's
    /// own interval's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub known_failures_at: BTreeMap<String, String>,
}

/// A ground-truth file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TruthError {
    #[error("`{path}`: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}:{line}:{column}`: invalid ground truth: {message}")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
}

impl Truth {
    /// Reads `truth.json` (or the given file).
    pub fn read(path: &Path) -> Result<Truth, TruthError> {
        let text = std::fs::read_to_string(path).map_err(|source| TruthError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| TruthError::Parse {
            path: path.display().to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    }

    /// The run's name for tables: `<scenario> @ <etcd version>`.
    pub fn label(&self) -> String {
        format!("{} @ etcd {}", self.scenario, self.etcd_version)
    }
}
