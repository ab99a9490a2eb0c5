//! Evidence beyond the tree in the text and Markdown renderings: the
//! advisories that hold (a Kine backend, events on the shared etcd), and what
//! audit logs (`--audit`) held: the layer split of slow requests, the slowest
//! requests, the most denied clients, and whether they confirm the root
//! cause. Rendering only: every number comes from the report.

use std::io::Write;

use crate::rules::report::Report;
use crate::source::audit::AuditSummary;
use crate::timefmt::format_time;

fn secs(s: f64) -> String {
    crate::rules::model::Unit::Seconds.format(s)
}

/// Lines describing `a` (without a heading).
pub fn lines(a: &AuditSummary) -> Vec<String> {
    let mut out = Vec::new();
    out.push(format!(
        "{} file(s), {} events counted (ResponseComplete), {} of other stages, {} bad line(s){}",
        a.files.len(),
        a.events,
        a.other_stages,
        a.bad_lines,
        match (a.first, a.last) {
            (Some(f), Some(l)) => format!(", {} → {}", format_time(f), format_time(l)),
            _ => String::new(),
        }
    ));
    out.push(format!(
        "requests slower than 500 ms (not watch/exec/log/proxy): {}, {} with latency annotations",
        a.slow_requests, a.slow_annotated
    ));
    let total = a
        .layers
        .iter()
        .find(|(l, _)| l == "total")
        .map(|(_, s)| *s)
        .unwrap_or(0.0);
    if total > 0.0 {
        let parts: Vec<String> = a
            .layers
            .iter()
            .filter(|(l, _)| l != "total")
            .take(6)
            .map(|(l, s)| format!("{l} {:.0}% ({})", 100.0 * s / total, secs(*s)))
            .collect();
        out.push(format!("their time by layer: {}", parts.join(", ")));
    }
    for s in a.slowest.iter().take(5) {
        let split: Vec<String> = s
            .layers
            .iter()
            .take(3)
            .map(|(l, v)| format!("{l} {}", secs(*v)))
            .collect();
        out.push(format!(
            "slow: {} {} {} {}{} by {} ({}), code {}{}",
            format_time(s.time),
            secs(s.total_seconds),
            s.verb,
            s.resource,
            if s.object.is_empty() {
                String::new()
            } else {
                format!(" {}", s.object)
            },
            s.user,
            s.user_agent,
            s.code.map_or_else(|| "?".into(), |c| c.to_string()),
            if split.is_empty() {
                ", no latency annotations".into()
            } else {
                format!(": {}", split.join(", "))
            }
        ));
    }
    for d in a.denied.iter().take(5) {
        out.push(format!(
            "denied: {} × {} to {} ({})",
            d.code, d.count, d.user, d.user_agent
        ));
    }
    for b in a.bad_examples.iter().take(3) {
        out.push(format!("bad line {}: {}", b.at, b.message));
    }
    out
}

/// Lines of one advisory (title first).
pub(crate) fn advisory_lines(a: &crate::rules::report::AdvisoryReport) -> Vec<String> {
    let mut out = vec![format!(
        "[{}] {} (since {}{})",
        a.id,
        a.title,
        format_time(a.since),
        if a.holds_at_end {
            ""
        } else {
            ", not at the end of the window"
        }
    )];
    for e in &a.evidence {
        out.push(format!(
            "evidence: {} = {} (threshold {})",
            e.description, e.value_text, e.threshold
        ));
    }
    if !a.not_applicable.is_empty() {
        out.push(format!("not applicable: {}", a.not_applicable.join(", ")));
    }
    out.push(format!("advice (ADR): {}", a.advice));
    out.push(format!("falsifier: {}", a.falsifier));
    out
}

/// The advisories and audit sections of the terminal rendering, when the
/// report has them.
pub fn render_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    if !r.advisories.is_empty() {
        writeln!(out)?;
        writeln!(out, "Advisories")?;
        for a in &r.advisories {
            for (i, l) in advisory_lines(a).into_iter().enumerate() {
                writeln!(out, "  {} {l}", if i == 0 { "-" } else { " " })?;
            }
        }
    }
    let Some(a) = &r.audit else { return Ok(()) };
    writeln!(out)?;
    writeln!(out, "Audit logs")?;
    for c in r
        .verdict
        .corroboration
        .iter()
        .filter(|c| !c.text.starts_with("the logs "))
    {
        writeln!(out, "  - {}: {}", c.kind.as_str(), c.text)?;
    }
    for l in lines(a) {
        writeln!(out, "  - {l}")?;
    }
    Ok(())
}

/// The advisories and audit sections of the Markdown rendering, when the
/// report has them.
pub fn render_markdown(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    if !r.advisories.is_empty() {
        writeln!(out, "### Advisories")?;
        writeln!(out)?;
        for a in &r.advisories {
            for (i, l) in advisory_lines(a).into_iter().enumerate() {
                let l = l.replace('|', "\\|");
                if i == 0 {
                    writeln!(out, "- **{l}**")?;
                } else {
                    writeln!(out, "  - {l}")?;
                }
            }
        }
        writeln!(out)?;
    }
    let Some(a) = &r.audit else { return Ok(()) };
    writeln!(out, "### Audit logs")?;
    writeln!(out)?;
    for c in r
        .verdict
        .corroboration
        .iter()
        .filter(|c| !c.text.starts_with("the logs "))
    {
        writeln!(out, "- **{}**: {}", c.kind.as_str(), c.text.replace('|', "\\|"))?;
    }
    for l in lines(a) {
        writeln!(out, "- {}", l.replace('|', "\\|"))?;
    }
    writeln!(out)?;
    Ok(())
}
