//! The Markdown rendering of a verdict, for incident documents.

use std::io::Write;

use super::headline::Headline;
use super::text::{axis_name, shown_threshold, shown_value, sparkline, timeline, value};
use crate::rules::report::{Answer, AxisReport, AxisState, Report};
use crate::timefmt::{format_span, format_time};

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', "<br>")
}

fn opt_time(t: Option<i64>) -> String {
    t.map(format_time).unwrap_or_else(|| "—".into())
}

/// Writes the verdict as Markdown.
pub fn render(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    render_titled(r, &format!("cptriage verdict: {}", r.status.as_str()), out)
}

/// [`render`] under the heading `## {title}` (`title` is Markdown).
pub(crate) fn render_titled(r: &Report, title: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "## {title}")?;
    writeln!(out)?;
    writeln!(out, "{}", r.verdict.summary)?;
    writeln!(out)?;
    verdict(r, out)?;
    let w = &r.window;
    writeln!(out)?;
    writeln!(
        out,
        "Window {} → {}, step {}, assessed at {}.",
        format_time(w.from),
        format_time(w.to),
        format_span(w.step),
        format_time(w.at)
    )?;
    writeln!(out)?;
    axes(r, out)?;
    let lit: Vec<_> = r.axes.iter().filter(|a| a.state == AxisState::Lit).collect();
    evidence(r, &lit, out)?;
    who(r, &lit, out)?;
    walk(r, out)?;
    closing(r, out)?;
    writeln!(out)?;
    super::audit::render_markdown(r, out)?;
    super::logs::render_markdown(r, out)?;
    sources(r, out)
}

/// The verdict's facts as a list: the failing axis, onset, instances,
/// localisation, downstream axes, ties and assumptions.
fn verdict(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let h = Headline::of(r);
    if let Some(rc) = h.failing {
        writeln!(
            out,
            "- **{}:** `{}` ({}) — {}",
            h.fact_name(),
            rc.axis_id(),
            rc.severity,
            rc.title
        )?;
        if let Some(reason) = h.undecided_reason() {
            writeln!(out, "- **Cause undecided:** {reason}")?;
        }
        if let Some(reason) = h.recovery_reason() {
            writeln!(out, "- **Recovery not confirmed:** {reason}")?;
        }
        writeln!(out, "- **Onset:** {}", opt_time(rc.onset))?;
        if !rc.instances.is_empty() {
            writeln!(out, "- **Instances:** {}", rc.instances.join(", "))?;
        }
        if let Some(l) = &rc.localisation {
            writeln!(out, "- **Localisation:** {l}")?;
        }
    }
    for n in &r.verdict.not_excluded {
        writeln!(out, "- **Not excluded:** {}", n.text)?;
    }
    for d in &r.verdict.downstream {
        writeln!(out, "- **Downstream:** {}", d.note)?;
    }
    for t in &r.verdict.ties {
        writeln!(out, "- **Tie:** {}", t.note)?;
    }
    for a in &r.verdict.assumptions {
        writeln!(out, "- **Assumption:** {a}")?;
    }
    Ok(())
}

/// One row per axis.
fn axes(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "### Axes")?;
    writeln!(out)?;
    writeln!(
        out,
        "| axis | severity | state | onset | recovered | instances | timeline |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|")?;
    for a in &r.axes {
        let state = match a.state {
            AxisState::Lit => "**lit**",
            AxisState::Clear => "clear",
            AxisState::Unknown => "unknown",
            AxisState::NotChecked => "not checked",
        };
        writeln!(
            out,
            "| `{}` | {} | {state} | {} | {} | {} | `{}` |",
            axis_name(r, a),
            a.severity,
            opt_time(a.onset),
            opt_time(a.recovered),
            cell(&a.instances.join(", ")),
            timeline(&a.timeline)
        )?;
    }
    Ok(())
}

/// Every signal of the lit axes.
fn evidence(r: &Report, lit: &[&AxisReport], out: &mut dyn Write) -> std::io::Result<()> {
    if lit.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "### Evidence")?;
    writeln!(out)?;
    writeln!(out, "| axis | signal | value | threshold | baseline | trend |")?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for a in lit {
        for e in &a.evidence {
            writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | `{}` |",
                axis_name(r, a),
                cell(&format!("{} — {}", e.signal, e.description)),
                cell(&shown_value(e, e.value)),
                cell(&shown_threshold(e)),
                value(e.unit, e.baseline),
                sparkline(&e.series)
            )?;
        }
    }
    Ok(())
}

/// Who contributes to the signals of the lit axes, one line per signal.
fn who(r: &Report, lit: &[&AxisReport], out: &mut dyn Write) -> std::io::Result<()> {
    let who: Vec<String> = lit
        .iter()
        .flat_map(|a| {
            a.evidence
                .iter()
                .filter(|e| !e.contributors.is_empty() || e.contributors_note.is_some())
                .map(move |e| {
                    let mut s = format!("- `{}` {}: ", axis_name(r, a), e.signal);
                    let c: Vec<String> = e.contributors.iter().map(|c| c.text()).collect();
                    s.push_str(&if c.is_empty() {
                        "no contributor named".to_string()
                    } else {
                        c.join("; ")
                    });
                    if let Some(n) = &e.contributors_note {
                        s.push_str(&format!(" ({n})"));
                    }
                    s
                })
        })
        .collect();
    if !who.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Who contributes")?;
        writeln!(out)?;
        for w in who {
            writeln!(out, "{w}")?;
        }
    }
    Ok(())
}

/// The walk of the tree, one question a line with the values it read.
fn walk(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "### Tree walk")?;
    writeln!(out)?;
    for (i, p) in r.path.iter().enumerate() {
        let ans = match p.answer {
            Answer::Yes => "yes",
            Answer::No => "no",
            Answer::Unknown => "unknown",
        };
        let vals: Vec<String> = p
            .signals
            .iter()
            .map(|s| format!("{} = {} ({})", s.signal, value(s.unit, s.value), s.threshold_text))
            .collect();
        writeln!(out, "{}. {} — **{ans}**; {}", i + 1, p.question, vals.join("; "))?;
    }
    Ok(())
}

/// Next steps, the falsifier and what was not checked.
fn closing(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    if !r.runbook.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Next steps")?;
        writeln!(out)?;
        for (i, s) in r.runbook.iter().enumerate() {
            writeln!(out, "{}. {s}", i + 1)?;
        }
    }
    if let Some(f) = &r.falsifier {
        writeln!(out)?;
        writeln!(out, "### Falsifier")?;
        writeln!(out)?;
        match &r.falsification {
            Some(fz) => {
                writeln!(out, "> {}", fz.statement)?;
                writeln!(out)?;
                writeln!(out, "**ADR:** {}", fz.adr)?;
            }
            None => writeln!(out, "> {f}")?,
        }
    }
    if !r.gaps.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Not checked")?;
        writeln!(out)?;
        for g in &r.gaps {
            writeln!(out, "- `{}`: {}", g.subject, g.message)?;
        }
    }
    Ok(())
}

/// The sources, then the warnings.
fn sources(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "### Sources")?;
    writeln!(out)?;
    writeln!(out, "| target | role | version | snapshots | time from |")?;
    writeln!(out, "|---|---|---|---|---|")?;
    for s in &r.sources {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&s.target),
            s.role,
            s.version.as_deref().unwrap_or("—"),
            s.snapshots,
            s.time_source
        )?;
    }
    if !r.warnings.is_empty() {
        writeln!(out)?;
        writeln!(out, "### Warnings")?;
        writeln!(out)?;
        for w in &r.warnings {
            writeln!(out, "- {}", w.replace('\n', " "))?;
        }
    }
    Ok(())
}
