//! What etcd and kube-apiserver logs (`--logs`) held, in the text and
//! Markdown renderings: whether they confirm the root cause, its first and
//! most telling lines, the files read and skipped, counts per member and
//! class, bad lines and the most frequent unrecognised warnings. Rendering
//! only: every number comes from the report.

use std::io::Write;

use crate::rules::report::Report;
use crate::source::logs::{LogLine, LogsSummary};
use crate::timefmt::{format_time, format_time_ms};

/// One evidence line: `m2 11:47:58.120 heartbeat_late (215 ms): <text> [file:line]`.
pub fn line_text(l: &LogLine) -> String {
    let took = l
        .took
        .map(|t| format!(" ({})", crate::rules::model::Unit::Seconds.format(t)))
        .unwrap_or_default();
    format!(
        "log {} {} {}{took}: {}",
        l.member,
        format_time_ms(l.time),
        l.class,
        l.text
    )
}

/// Lines describing `a` (without a heading).
pub fn lines(a: &LogsSummary) -> Vec<String> {
    let mut out = Vec::new();
    out.push(format!(
        "{} file(s) of {} member(s), {} lines, {} recognised, {} unrecognised, {} bad{}",
        a.files.len(),
        a.members.len(),
        a.lines,
        a.recognised,
        a.unknown,
        a.bad_lines,
        match (a.first, a.last) {
            (Some(f), Some(l)) => format!(", {} → {}", format_time(f), format_time(l)),
            _ => String::new(),
        }
    ));
    for f in &a.files {
        out.push(format!(
            "read {} ({}, {}, {}): {} lines, {} recognised",
            f.path,
            f.member,
            f.component.map_or("unknown component", |c| c.as_str()),
            if f.formats.is_empty() {
                f.layout.clone()
            } else {
                format!("{}, {}", f.layout, f.formats.join(" + "))
            },
            f.lines,
            f.recognised
        ));
    }
    for s in a.skipped.iter().take(10) {
        out.push(format!("skipped {}: {}", s.path, s.why));
    }
    if a.skipped.len() > 10 {
        out.push(format!("… and {} more skipped", a.skipped.len() - 10));
    }
    if a.other_files > 0 {
        out.push(format!("{} other file(s) are not logs", a.other_files));
    }
    for c in a.classes.iter().filter(|c| c.class != "start") {
        let about = if c.instance == c.reporter {
            c.instance.clone()
        } else {
            format!("{} (logged by {})", c.instance, c.reporter)
        };
        out.push(format!(
            "{about}: {} × {} from {}{}",
            c.count,
            c.class,
            format_time(c.first.time),
            if c.took_seconds > 0.0 {
                format!(
                    ", longest {}",
                    crate::rules::model::Unit::Seconds.format(c.telling.took.unwrap_or(0.0))
                )
            } else {
                String::new()
            }
        ));
    }
    for (t, n) in &a.unknown_warnings {
        out.push(format!("unrecognised warning × {n}: {t}"));
    }
    for b in a.bad_examples.iter().take(5) {
        out.push(format!("bad line {}: {}", b.at, b.message));
    }
    out.extend(a.gaps.iter().map(|g| format!("gap: {g}")));
    out.extend(a.notes.iter().map(|n| format!("note: {n}")));
    out
}

fn statements(r: &Report) -> impl Iterator<Item = &crate::rules::report::Corroboration> {
    r.verdict
        .corroboration
        .iter()
        .filter(|c| c.text.starts_with("the logs "))
}

/// The logs section of the terminal rendering, when the report has one.
pub fn render_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(a) = &r.logs else { return Ok(()) };
    writeln!(out)?;
    writeln!(out, "Logs")?;
    for c in statements(r) {
        writeln!(out, "  - {}: {}", c.kind.as_str(), c.text)?;
    }
    for l in &a.evidence {
        writeln!(out, "  - {}", line_text(l))?;
    }
    for l in lines(a) {
        writeln!(out, "  - {l}")?;
    }
    Ok(())
}

/// The logs section of the Markdown rendering, when the report has one.
pub fn render_markdown(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(a) = &r.logs else { return Ok(()) };
    writeln!(out, "### Logs")?;
    writeln!(out)?;
    for c in statements(r) {
        writeln!(out, "- **{}**: {}", c.kind.as_str(), c.text.replace('|', "\\|"))?;
    }
    for l in &a.evidence {
        writeln!(out, "- `{}`", line_text(l).replace('`', "'"))?;
    }
    for l in lines(a) {
        writeln!(out, "- {}", l.replace('|', "\\|"))?;
    }
    writeln!(out)?;
    Ok(())
}
