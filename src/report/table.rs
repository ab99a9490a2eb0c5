//! The terminal rendering of a verdict (comfy-table): the banner, the per-axis
//! timeline with onsets, the evidence with sparklines, the tree walk, next steps,
//! the falsifier, what was not checked, and the sources.

use std::io::Write;

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};

use super::text::{axis_label, sparkline, timeline, value};
use crate::rules::report::{Answer, AxisState, Report, Status};
use crate::timefmt::{format_duration, format_time};

fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    t.set_width(120);
    t.set_header(header.to_vec());
    t
}

fn opt_time(t: Option<i64>) -> String {
    t.map(format_time).unwrap_or_else(|| "—".into())
}

/// Writes the verdict for people.
pub fn render(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let banner = match (&r.status, &r.verdict.root_cause) {
        (Status::Healthy, _) => "HEALTHY".to_string(),
        (Status::Inconclusive, _) => "INCONCLUSIVE: the data cannot decide".to_string(),
        (Status::Degraded, Some(rc)) => format!(
            "DEGRADED: root cause {} ({}) — {}",
            match &rc.sub_axis {
                Some(s) => format!("{}/{s}", rc.axis),
                None => rc.axis.clone(),
            },
            rc.severity,
            rc.title
        ),
        (Status::Degraded, None) => "DEGRADED".to_string(),
        (Status::Recovered, Some(rc)) => format!(
            "RECOVERED: root cause {} ({}) — {}",
            match &rc.sub_axis {
                Some(s) => format!("{}/{s}", rc.axis),
                None => rc.axis.clone(),
            },
            rc.severity,
            rc.title
        ),
        (Status::Recovered, None) => "RECOVERED".to_string(),
    };
    writeln!(out, "cptriage verdict: {banner}")?;
    writeln!(out, "  {}", r.verdict.summary)?;
    if let Some(rc) = &r.verdict.root_cause {
        if let Some(on) = rc.onset {
            writeln!(out, "  onset {}", format_time(on))?;
        }
        if !rc.instances.is_empty() {
            writeln!(out, "  instances: {}", rc.instances.join(", "))?;
        }
        if let Some(l) = &rc.localisation {
            writeln!(out, "  {l}")?;
        }
    }
    for d in &r.verdict.downstream {
        writeln!(out, "  downstream: {} (onset {})", d.note, format_time(d.onset))?;
    }
    for t in &r.verdict.ties {
        writeln!(out, "  tie: {}", t.note)?;
    }
    for a in &r.verdict.assumptions {
        writeln!(out, "  assumption: {a}")?;
    }

    let w = &r.window;
    writeln!(out)?;
    writeln!(
        out,
        "Axes over {} → {} (step {}, {} steps, window {}, at {})",
        format_time(w.from),
        format_time(w.to),
        format_duration(w.step),
        w.steps.len(),
        format_duration(w.range),
        format_time(w.at)
    )?;
    let mut t = new_table(&[
        "axis",
        "sev",
        "state",
        "onset",
        "recovered",
        "instances",
        "timeline",
    ]);
    for a in &r.axes {
        let state = match a.state {
            AxisState::Lit if a.lit_at_end => "LIT",
            AxisState::Lit => "lit (recovered)",
            AxisState::Clear => "clear",
            AxisState::Unknown => "unknown",
            AxisState::NotChecked => "not checked",
        };
        t.add_row(vec![
            axis_label(a),
            a.severity.to_string(),
            state.to_string(),
            opt_time(a.onset),
            opt_time(a.recovered),
            a.instances.join(", "),
            timeline(&a.timeline),
        ]);
    }
    writeln!(out, "{t}")?;

    let lit: Vec<_> = r.axes.iter().filter(|a| a.state == AxisState::Lit).collect();
    if !lit.is_empty() {
        writeln!(out)?;
        writeln!(out, "Evidence")?;
        let mut t = new_table(&["axis", "signal", "value", "threshold", "baseline", "trend"]);
        for a in &lit {
            for e in &a.evidence {
                let mut v = value(e.unit, e.value);
                if e.lit == Some(true) {
                    v.push_str(" ◀");
                }
                if let Some(l) = &e.localisation {
                    v = format!("{v}\n{l}");
                }
                t.add_row(vec![
                    axis_label(a),
                    format!("{}\n{}", e.signal, e.description),
                    v,
                    e.threshold_text.clone(),
                    value(e.unit, e.baseline),
                    sparkline(&e.series),
                ]);
            }
        }
        writeln!(out, "{t}")?;
    }

    writeln!(out)?;
    writeln!(out, "Tree walk at {}", format_time(w.at))?;
    for (i, p) in r.path.iter().enumerate() {
        let ans = match p.answer {
            Answer::Yes => "yes",
            Answer::No => "no",
            Answer::Unknown => "unknown",
        };
        writeln!(out, "  {}. {} → {ans} → {}", i + 1, p.question, p.next)?;
        for s in &p.signals {
            writeln!(
                out,
                "       {}: {} (threshold {}{})",
                s.signal,
                value(s.unit, s.value),
                s.threshold_text,
                s.baseline
                    .map(|b| format!(", baseline {}", value(s.unit, Some(b))))
                    .unwrap_or_default()
            )?;
        }
        if let Some(n) = &p.note {
            writeln!(out, "       note: {n}")?;
        }
    }

    if !r.runbook.is_empty() {
        writeln!(out)?;
        writeln!(out, "Next steps")?;
        for (i, s) in r.runbook.iter().enumerate() {
            writeln!(out, "  {}. {s}", i + 1)?;
        }
    }
    if let Some(f) = &r.falsifier {
        writeln!(out)?;
        writeln!(out, "Falsifier (for the incident record)")?;
        writeln!(out, "  {f}")?;
    }
    if !r.gaps.is_empty() {
        writeln!(out)?;
        writeln!(out, "Not checked / gaps")?;
        for g in &r.gaps {
            writeln!(out, "  - {}: {}", g.subject, g.message)?;
        }
    }
    super::audit::render_text(r, out)?;
    writeln!(out)?;
    writeln!(out, "Sources")?;
    let mut t = new_table(&[
        "target",
        "role",
        "version",
        "snapshots",
        "time from",
        "role because",
        "notes",
    ]);
    for s in &r.sources {
        let mut notes = Vec::new();
        for x in &s.restarts {
            notes.push(format!("restart at {}", format_time(*x)));
        }
        for [a, b] in &s.missing {
            notes.push(format!(
                "missing {} ({})",
                format_time(*a),
                crate::timefmt::format_lag(b - a)
            ));
        }
        t.add_row(vec![
            s.target.clone(),
            s.role.clone(),
            s.version.clone().unwrap_or_else(|| "—".into()),
            s.snapshots.to_string(),
            s.time_source.clone(),
            s.role_reason.clone(),
            notes.join("\n"),
        ]);
    }
    writeln!(out, "{t}")?;
    if !r.warnings.is_empty() {
        writeln!(out)?;
        writeln!(out, "Warnings")?;
        for x in &r.warnings {
            writeln!(out, "  - {x}")?;
        }
    }
    Ok(())
}
