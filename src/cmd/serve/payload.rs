//! Alertmanager's webhook payload (version 4), read strictly: what a
//! notification says, and the triages it asks for (one per `--by` value).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::store::Millis;

/// The only payload version this receiver reads.
pub(crate) const VERSION: &str = "4";

/// Most alerts of one triage kept as its context (the rest are counted).
pub(crate) const CONTEXT_ALERTS: usize = 10;
/// Most labels of one alert kept as context.
const CONTEXT_LABELS: usize = 24;
/// Longest label value kept as context (longer ones are cut, marked `…`).
const CONTEXT_VALUE: usize = 160;
/// Longest group key accepted.
const MAX_GROUP_KEY: usize = 8 * 1024;

/// The webhook body Alertmanager posts (its `version` is checked first;
/// fields not read here are ignored).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Notification {
    pub group_key: String,
    pub status: GroupStatus,
    pub alerts: Vec<Alert>,
}

/// Firing or resolved.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum GroupStatus {
    Firing,
    Resolved,
}

impl GroupStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GroupStatus::Firing => "firing",
            GroupStatus::Resolved => "resolved",
        }
    }
}

/// One alert of a notification.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Alert {
    pub status: GroupStatus,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub starts_at: String,
    #[serde(default)]
    pub ends_at: String,
    #[serde(default)]
    pub fingerprint: String,
}

/// Why a body is not a notification this receiver reads.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum PayloadError {
    #[error("the body is not Alertmanager's webhook JSON: {0}")]
    Malformed(String),
    #[error(
        "unsupported payload version {0:?}: this receiver reads Alertmanager's webhook version {VERSION}"
    )]
    Version(String),
    #[error("the notification has no alerts")]
    NoAlerts,
    #[error("alert {index}: `{field}` is not an RFC 3339 time: {value:?}")]
    Time {
        index: usize,
        field: &'static str,
        value: String,
    },
    #[error("the group key is longer than {MAX_GROUP_KEY} bytes")]
    GroupKey,
}

/// Reads a webhook body.
pub(crate) fn parse(body: &[u8]) -> Result<Notification, PayloadError> {
    // The version first, so that another version is named as such rather
    // than as a missing field.
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| PayloadError::Malformed(e.to_string()))?;
    match v.get("version") {
        Some(serde_json::Value::String(s)) if s == VERSION => {}
        Some(serde_json::Value::String(s)) => return Err(PayloadError::Version(clip(s, 40))),
        Some(other) => return Err(PayloadError::Version(clip(&other.to_string(), 40))),
        None => return Err(PayloadError::Malformed("missing field `version`".into())),
    }
    let n: Notification = serde_json::from_value(v).map_err(|e| PayloadError::Malformed(e.to_string()))?;
    if n.alerts.is_empty() {
        return Err(PayloadError::NoAlerts);
    }
    if n.group_key.len() > MAX_GROUP_KEY {
        return Err(PayloadError::GroupKey);
    }
    for (i, a) in n.alerts.iter().enumerate() {
        starts_at(i, a)?;
        ends_at(i, a)?;
    }
    Ok(n)
}

/// An alert's `startsAt`.
fn starts_at(index: usize, a: &Alert) -> Result<Millis, PayloadError> {
    time(&a.starts_at).ok_or_else(|| PayloadError::Time {
        index,
        field: "startsAt",
        value: clip(&a.starts_at, 40),
    })
}

/// An alert's `endsAt`; `None` when unset (Alertmanager writes
/// `0001-01-01T00:00:00Z` for alerts that have not ended).
fn ends_at(index: usize, a: &Alert) -> Result<Option<Millis>, PayloadError> {
    if a.ends_at.is_empty() {
        return Ok(None);
    }
    let t = time(&a.ends_at).ok_or_else(|| PayloadError::Time {
        index,
        field: "endsAt",
        value: clip(&a.ends_at, 40),
    })?;
    Ok((t > 0).then_some(t))
}

fn time(s: &str) -> Option<Millis> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// `s` cut to `n` characters, marked `…` when cut.
pub(crate) fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// What a triage keeps of one alert.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub(crate) struct AlertContext {
    pub name: String,
    pub status: GroupStatus,
    pub starts_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    pub fingerprint: String,
    pub labels: BTreeMap<String, String>,
}

/// The triage a notification asks for, for one `--by` value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub group_key: String,
    /// The `--by` value, `None` for the whole Prometheus.
    pub cluster: Option<String>,
    pub status: GroupStatus,
    /// Alert names, sorted, without repeats.
    pub names: Vec<String>,
    /// Fingerprints of the firing alerts.
    pub firing: BTreeSet<String>,
    /// The first alerts, as context.
    pub alerts: Vec<AlertContext>,
    /// Alerts not kept as context.
    pub more_alerts: usize,
    /// The earliest `startsAt`.
    pub started: Millis,
    /// The latest `endsAt` of a resolved notification (its window's end);
    /// `None`: now.
    pub ended: Option<Millis>,
}

/// The triages a notification asks for: its alerts grouped by their `by`
/// label (all together without `by`, or for alerts without that label).
pub(crate) fn requests(n: &Notification, by: Option<&str>) -> Vec<Request> {
    let mut groups: BTreeMap<Option<String>, Vec<(usize, &Alert)>> = BTreeMap::new();
    for (i, a) in n.alerts.iter().enumerate() {
        let key = by.and_then(|b| a.labels.get(b)).cloned();
        groups.entry(key).or_default().push((i, a));
    }
    groups
        .into_iter()
        .map(|(cluster, alerts)| request(n, cluster, &alerts))
        .collect()
}

fn request(n: &Notification, cluster: Option<String>, alerts: &[(usize, &Alert)]) -> Request {
    // Times were checked by `parse`.
    let started = alerts
        .iter()
        .filter_map(|(i, a)| starts_at(*i, a).ok())
        .min()
        .unwrap_or_default();
    let ended = match n.status {
        GroupStatus::Firing => None,
        GroupStatus::Resolved => alerts
            .iter()
            .filter_map(|(i, a)| ends_at(*i, a).ok().flatten())
            .max(),
    };
    let names: BTreeSet<String> = alerts
        .iter()
        .map(|(_, a)| a.labels.get("alertname").cloned().unwrap_or_default())
        .collect();
    let firing = alerts
        .iter()
        .filter(|(_, a)| a.status == GroupStatus::Firing)
        .map(|(_, a)| a.fingerprint.clone())
        .collect();
    Request {
        group_key: n.group_key.clone(),
        cluster,
        status: n.status,
        names: names.into_iter().map(|s| clip(&s, CONTEXT_VALUE)).collect(),
        firing,
        alerts: alerts
            .iter()
            .take(CONTEXT_ALERTS)
            .map(|(_, a)| context(a))
            .collect(),
        more_alerts: alerts.len().saturating_sub(CONTEXT_ALERTS),
        started,
        ended: ended.filter(|e| *e >= started),
    }
}

fn context(a: &Alert) -> AlertContext {
    AlertContext {
        name: clip(
            a.labels.get("alertname").map_or("", String::as_str),
            CONTEXT_VALUE,
        ),
        status: a.status,
        starts_at: clip(&a.starts_at, 40),
        ends_at: (!a.ends_at.is_empty() && !a.ends_at.starts_with("0001-")).then(|| clip(&a.ends_at, 40)),
        fingerprint: clip(&a.fingerprint, 40),
        labels: a
            .labels
            .iter()
            .take(CONTEXT_LABELS)
            .map(|(k, v)| (clip(k, CONTEXT_VALUE), clip(v, CONTEXT_VALUE)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(version: &str, status: &str, alerts: &str) -> String {
        format!(
            r#"{{"version":"{version}","groupKey":"{{}}:{{alertname=\"X\"}}","truncatedAlerts":0,
            "status":"{status}","receiver":"cptriage","groupLabels":{{}},"commonLabels":{{}},
            "commonAnnotations":{{}},"externalURL":"http://am","alerts":[{alerts}]}}"#
        )
    }

    fn alert(name: &str, cluster: Option<&str>, status: &str, starts: &str, ends: &str) -> String {
        let c = cluster
            .map(|c| format!(r#","cluster":"{c}""#))
            .unwrap_or_default();
        format!(
            r#"{{"status":"{status}","labels":{{"alertname":"{name}"{c}}},"annotations":{{}},
            "startsAt":"{starts}","endsAt":"{ends}","generatorURL":"","fingerprint":"{name}{}"}}"#,
            cluster.unwrap_or("")
        )
    }

    #[test]
    fn one_request_per_cluster_with_the_earliest_start() {
        let a = [
            alert(
                "EtcdSlow",
                Some("a"),
                "firing",
                "2026-01-01T00:10:00Z",
                "0001-01-01T00:00:00Z",
            ),
            alert(
                "ApiSlow",
                Some("a"),
                "firing",
                "2026-01-01T00:05:00Z",
                "0001-01-01T00:00:00Z",
            ),
            alert(
                "EtcdSlow",
                Some("b"),
                "firing",
                "2026-01-01T00:07:00Z",
                "0001-01-01T00:00:00Z",
            ),
            alert(
                "EtcdSlow",
                None,
                "firing",
                "2026-01-01T00:07:00Z",
                "0001-01-01T00:00:00Z",
            ),
        ];
        let n = parse(body("4", "firing", &a.join(",")).as_bytes()).unwrap();
        let r = requests(&n, Some("cluster"));
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].cluster, None);
        assert_eq!(r[1].cluster.as_deref(), Some("a"));
        assert_eq!(r[1].names, ["ApiSlow", "EtcdSlow"]);
        assert_eq!(r[1].started, 1_767_225_600_000 + 300_000);
        assert_eq!(r[1].ended, None);
        assert_eq!(r[2].firing.len(), 1);
        // Without --by, one request for all.
        assert_eq!(requests(&n, None).len(), 1);
    }

    #[test]
    fn resolved_ends_at_the_latest_end() {
        let a = [
            alert(
                "X",
                Some("a"),
                "resolved",
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:20:00Z",
            ),
            alert(
                "Y",
                Some("a"),
                "resolved",
                "2026-01-01T00:01:00Z",
                "2026-01-01T00:30:00Z",
            ),
        ];
        let n = parse(body("4", "resolved", &a.join(",")).as_bytes()).unwrap();
        let r = requests(&n, Some("cluster"));
        assert_eq!(r[0].ended, Some(1_767_225_600_000 + 30 * 60_000));
        assert!(r[0].firing.is_empty());
    }

    #[test]
    fn bad_bodies_are_named() {
        assert!(matches!(parse(b"{"), Err(PayloadError::Malformed(_))));
        assert!(matches!(parse(b"[]"), Err(PayloadError::Malformed(_))));
        assert_eq!(
            parse(body("3", "firing", "").as_bytes()).unwrap_err(),
            PayloadError::Version("3".into())
        );
        assert_eq!(
            parse(body("4", "firing", "").as_bytes()).unwrap_err(),
            PayloadError::NoAlerts
        );
        let bad = alert("X", None, "firing", "yesterday", "");
        assert!(matches!(
            parse(body("4", "firing", &bad).as_bytes()),
            Err(PayloadError::Time {
                field: "startsAt",
                ..
            })
        ));
        let bad = alert("X", None, "pending", "2026-01-01T00:00:00Z", "");
        assert!(matches!(
            parse(body("4", "firing", &bad).as_bytes()),
            Err(PayloadError::Malformed(_))
        ));
    }

    #[test]
    fn context_is_bounded() {
        let long = "v".repeat(10_000);
        let a = alert(&long, Some("a"), "firing", "2026-01-01T00:00:00Z", "");
        let n = parse(body("4", "firing", &a).as_bytes()).unwrap();
        let r = &requests(&n, Some("cluster"))[0];
        assert!(r.names[0].chars().count() <= CONTEXT_VALUE + 1);
        assert!(r.alerts[0].name.ends_with('…'));
    }
}
