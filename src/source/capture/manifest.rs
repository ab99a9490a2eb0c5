//! The capture manifest (`manifest.yaml`) of a capture directory, as written by
//! `cptriage record` and by the scenario generator:
//!
//! ```yaml
//! format: cptriage/capture/v1
//! tool: cptriage 0.1.0
//! created: 2026-01-01T00:00:00Z
//! interval: 15s
//! targets:
//!   - name: etcd-0
//!     role: etcd
//!     url: https://10.0.0.1:2379/metrics   # never with credentials
//!     version: 3.5.21
//! failures:                                # scrapes that failed (optional)
//!   - {target: etcd-0, time: 1767225600000, error: "connection refused"}
//! ```
//!
//! Snapshots live in `<target>/<unix-ms>.prom` (optionally gzip, `.prom.gz`).

use serde::{Deserialize, Serialize};

pub use crate::source::ingest::ScrapeFailure;
use crate::source::Role;

/// The format identifier this version reads and writes.
pub const FORMAT: &str = "cptriage/capture/v1";

/// `manifest.yaml`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    pub targets: Vec<ManifestTarget>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<ScrapeFailure>,
}

impl Manifest {
    /// A manifest of this format, written by this version of cptriage.
    pub fn new(
        created: Option<String>,
        interval: Option<String>,
        targets: Vec<ManifestTarget>,
        failures: Vec<ScrapeFailure>,
    ) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            tool: Some(format!("cptriage {}", env!("CARGO_PKG_VERSION"))),
            created,
            interval,
            targets,
            failures,
        }
    }
}

/// One target of a capture.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ManifestTarget {
    pub name: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The node the target runs on, when the host of `url` does not say it
    /// (node metrics are mapped to members by node: [`crate::source::nodemap`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Role::parse(&s).ok_or_else(|| {
            // serde_message keeps `s` only when it is a plain identifier.
            serde::de::Error::custom(format!("unknown role `{s}` (expected {})", Role::GIVEN))
        })
    }
}

/// Parses a manifest; errors carry the YAML line and column.
pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
    let m: Manifest = crate::source::yaml::from_str(text).map_err(|e| ManifestError {
        line: e.line,
        column: e.column,
        message: e.message,
    })?;
    if m.format != FORMAT {
        return Err(ManifestError {
            line: 1,
            column: 1,
            message: format!(
                "unsupported capture format `{}` (this cptriage reads `{FORMAT}`)",
                m.format
            ),
        });
    }
    let mut seen = std::collections::HashSet::new();
    for t in &m.targets {
        let problem = if !is_plain_name(&t.name) {
            "is not a plain directory name (no `/`, `\\`, `.` or `..`)"
        } else if !seen.insert(t.name.as_str()) {
            "is listed twice"
        } else {
            continue;
        };
        let (line, column) = locate_name(text, &t.name);
        return Err(ManifestError {
            line,
            column,
            message: format!("target name `{}` {problem}", t.name),
        });
    }
    Ok(m)
}

/// Whether a target name can be used as one directory inside the capture
/// (a name such as `../x` would read files outside it).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The line and column of the last `name:` entry holding `name` (1-based), or (0, 0).
fn locate_name(text: &str, name: &str) -> (usize, usize) {
    let mut found = (0, 0);
    for (i, line) in text.lines().enumerate() {
        if let Some(k) = line.find("name:") {
            if line[k + "name:".len()..].contains(name) {
                found = (i + 1, k + 1);
            }
        }
    }
    found
}

/// A manifest that could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("{line}:{column}: {message}")]
pub struct ManifestError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = Manifest {
            format: FORMAT.into(),
            tool: Some("cptriage 0.1.0".into()),
            created: None,
            interval: Some("5s".into()),
            targets: vec![ManifestTarget {
                name: "etcd-0".into(),
                role: Role::Etcd,
                url: None,
                version: Some("3.5.21".into()),
                node: Some("node-a".into()),
            }],
            failures: vec![],
        };
        let text = serde_yaml::to_string(&m).unwrap();
        assert_eq!(parse(&text).unwrap(), m);
    }

    #[test]
    fn unknown_keys_and_roles_are_rejected_with_location() {
        let e = parse("format: cptriage/capture/v1\ntargets:\n  - name: a\n    role: db\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(!e.message.contains("at line"), "{e}");
        assert!(e.message.contains("unknown role `db`"), "{e}");
        assert!(
            e.message.contains("node or unknown"),
            "every role is offered: {e}"
        );
        let e = parse("format: cptriage/capture/v1\ntargets: []\nextra: 1\n").unwrap_err();
        assert!(e.message.contains("unknown field `extra`"), "{e}");
    }

    #[test]
    fn target_names_must_be_plain_and_unique() {
        let e = parse("format: cptriage/capture/v1\ntargets:\n- name: ../x\n  role: etcd\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, 3), "{e}");
        assert!(
            e.message
                .contains("target name `../x` is not a plain directory name"),
            "{e}"
        );
        let e = parse(
            "format: cptriage/capture/v1\ntargets:\n- {name: a, role: etcd}\n- {name: a, role: etcd}\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("target name `a` is listed twice"), "{e}");
        assert!(parse("format: cptriage/capture/v1\ntargets:\n- {name: a.b-1, role: etcd}\n").is_ok());
    }

    #[test]
    fn a_second_document_is_located() {
        let e = parse("format: cptriage/capture/v1\ntargets: []\n---\nformat: x\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, 1), "{e}");
        assert!(e.message.contains("more than one document"), "{e}");
    }

    #[test]
    fn other_formats_are_refused() {
        let e = parse("format: something/v9\ntargets: []\n").unwrap_err();
        assert!(e.message.contains("unsupported capture format"), "{e}");
    }
}
