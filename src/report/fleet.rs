//! Fleet mode (`diagnose --by LABEL`): one row per cluster, sick first, and
//! the JSON array of per-cluster verdicts.

use std::io::Write;

use serde_json::Value as J;

use crate::rules::report::{Report, Status};
use crate::timefmt::format_time;

/// How sick a status is, for ordering the fleet and for its exit code:
/// degraded (lit now) > inconclusive (could be lit, the data cannot tell) >
/// recovered (was lit) > healthy.
pub fn severity(s: Status) -> u8 {
    match s {
        Status::Degraded => 3,
        Status::Inconclusive => 2,
        Status::Recovered => 1,
        Status::Healthy => 0,
    }
}

/// The worst status of the fleet (`None` for an empty fleet).
pub fn worst<'a>(fleet: impl IntoIterator<Item = &'a (String, Report)>) -> Option<Status> {
    fleet
        .into_iter()
        .map(|(_, r)| r.status)
        .max_by_key(|s| severity(*s))
}

/// The clusters sick first, then by name.
pub fn sorted(fleet: &[(String, Report)]) -> Vec<&(String, Report)> {
    let mut v: Vec<&(String, Report)> = fleet.iter().collect();
    v.sort_by(|a, b| {
        severity(b.1.status)
            .cmp(&severity(a.1.status))
            .then_with(|| a.0.cmp(&b.0))
    });
    v
}

fn axis(axis: &str, sub: &Option<String>) -> String {
    match sub {
        Some(s) => format!("{axis}/{s}"),
        None => axis.to_string(),
    }
}

/// One row's cells: cluster, status, root cause, where, since, downstream.
pub fn row(cluster: &str, r: &Report) -> [String; 6] {
    let rc = r.verdict.root_cause.as_ref();
    let cause = rc
        .map(|c| axis(&c.axis, &c.sub_axis))
        .unwrap_or_else(|| "-".into());
    let place = rc
        .map(|c| {
            if c.instances.is_empty() {
                "-".to_string()
            } else {
                c.instances.join(",")
            }
        })
        .unwrap_or_else(|| "-".into());
    let since = rc
        .and_then(|c| c.onset)
        .map(format_time)
        .unwrap_or_else(|| "-".into());
    let down = if r.verdict.downstream.is_empty() {
        "-".to_string()
    } else {
        r.verdict
            .downstream
            .iter()
            .map(|d| {
                format!(
                    "{} +{}",
                    axis(&d.axis, &d.sub_axis),
                    crate::timefmt::format_lag(d.lag_ms)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    [
        cluster.to_string(),
        r.status.as_str().to_string(),
        cause,
        place,
        since,
        down,
    ]
}

/// The fleet table: a header, one row per cluster (sick first), and a count
/// per status.
pub fn render_table(label: &str, fleet: &[(String, Report)], out: &mut dyn Write) -> std::io::Result<()> {
    let head = [
        label.to_uppercase(),
        "STATUS".into(),
        "ROOT CAUSE".into(),
        "WHERE".into(),
        "SINCE".into(),
        "DOWNSTREAM".into(),
    ];
    let rows: Vec<[String; 6]> = sorted(fleet).into_iter().map(|(c, r)| row(c, r)).collect();
    let mut width = [0usize; 6];
    for r in std::iter::once(&head).chain(rows.iter()) {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in std::iter::once(&head).chain(rows.iter()) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    let mut counts = Vec::new();
    for s in [
        Status::Degraded,
        Status::Inconclusive,
        Status::Recovered,
        Status::Healthy,
    ] {
        let n = fleet.iter().filter(|(_, r)| r.status == s).count();
        if n > 0 {
            counts.push(format!("{n} {}", s.as_str()));
        }
    }
    writeln!(out, "\n{} clusters: {}", fleet.len(), counts.join(", "))
}

/// The fleet as JSON: an array of v1 verdicts, sick first, each with a
/// `cluster` field (the value of the fleet label).
pub fn document(fleet: &[(String, Report)]) -> J {
    J::Array(
        sorted(fleet)
            .into_iter()
            .map(|(c, r)| {
                let mut d = crate::report::json::document(r);
                if let J::Object(m) = &mut d {
                    m.insert("cluster".into(), J::String(c.clone()));
                }
                d
            })
            .collect(),
    )
}

/// Writes [`document`] as pretty JSON.
pub fn render_json(fleet: &[(String, Report)], out: &mut dyn Write) -> std::io::Result<()> {
    let s = serde_json::to_string_pretty(&document(fleet)).map_err(std::io::Error::other)?;
    writeln!(out, "{s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_status_wins_and_sick_clusters_come_first() {
        assert!(severity(Status::Degraded) > severity(Status::Inconclusive));
        assert!(severity(Status::Inconclusive) > severity(Status::Recovered));
        assert!(severity(Status::Recovered) > severity(Status::Healthy));
    }
}
