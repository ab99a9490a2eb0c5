//! The terminal rendering of a verdict (comfy-table): the banner, the per-axis
//! timeline with onsets, the evidence with sparklines, the tree walk, next steps,
//! the falsifier, what was not checked, and the sources.

use std::io::Write;

use comfy_table::{presets::UTF8_FULL_CONDENSED, ColumnConstraint, ContentArrangement, Table};

use super::headline::{Headline, CANNOT_DECIDE};
use super::page::{wrap, RenderOpts, MIN_WIDTH};
use super::style::{self, Tone};
use super::text::{axis_name, fit_sparkline, fit_timeline, shown_threshold, shown_value, value};
use crate::rules::report::{Answer, AxisReport, AxisState, Evidence, PathSignal, Report, RootCause, Status};
use crate::timefmt::{format_clock, format_span, same_day};

fn new_table(header: &[&str], width: usize) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    t.set_width(width.clamp(MIN_WIDTH, u16::MAX as usize) as u16);
    t.set_header(header.to_vec());
    t
}

/// Narrower than this, the evidence is a list rather than a table.
const NARROW: usize = 110;

/// Columns never wrapped: names, times and timelines read whole or not at all.
fn keep_whole(t: &mut Table, cols: &[usize]) {
    for &c in cols {
        if let Some(col) = t.column_mut(c) {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
}

/// A walk signal as evidence (description, unit and threshold), when an axis
/// carries it.
fn evidence_of<'a>(r: &'a Report, s: &PathSignal) -> Option<&'a Evidence> {
    r.axes
        .iter()
        .flat_map(|a| a.evidence.iter())
        .find(|e| e.signal == s.signal)
}

/// Writes every table for people (`-o wide`), `opts.width` columns wide.
pub fn render(r: &Report, opts: &RenderOpts, out: &mut dyn Write) -> std::io::Result<()> {
    let width = opts.width.max(MIN_WIDTH);
    let with_date = !same_day(r.window.from, r.window.to);
    for h in head(r, opts.color, width, with_date) {
        writeln!(out, "{h}")?;
    }
    axes_table(r, width, with_date, out)?;
    evidence(r, width, out)?;
    tree_walk(r, width, with_date, out)?;
    if !r.runbook.is_empty() {
        writeln!(out)?;
        writeln!(out, "Next steps")?;
        for (i, s) in r.runbook.iter().enumerate() {
            lines(out, wrap(&format!("  {}. ", i + 1), 5, s, width))?;
        }
    }
    if let Some(f) = &r.falsifier {
        writeln!(out)?;
        writeln!(out, "Falsifier (for the incident record)")?;
        lines(out, wrap("  ", 2, f, width))?;
        measured_falsifier(r, width, out)?;
    }
    if !r.gaps.is_empty() {
        writeln!(out)?;
        writeln!(out, "Not checked / gaps")?;
        for g in &r.gaps {
            lines(
                out,
                wrap("  - ", 4, &format!("{}: {}", g.subject, g.message), width),
            )?;
        }
    }
    super::audit::render_text(r, out)?;
    super::logs::render_text(r, out)?;
    sources(r, width, with_date, out)?;
    if !r.warnings.is_empty() {
        writeln!(out)?;
        writeln!(out, "Warnings")?;
        for x in &r.warnings {
            lines(out, wrap("  - ", 4, x, width))?;
        }
    }
    Ok(())
}

/// Writes each line.
fn lines(out: &mut dyn Write, lines: Vec<String>) -> std::io::Result<()> {
    for l in lines {
        writeln!(out, "{l}")?;
    }
    Ok(())
}

/// A time of the window, with its date when the window spans days; `—` when missing.
fn clock(t: Option<i64>, with_date: bool) -> String {
    t.map(|t| format_clock(t, with_date))
        .unwrap_or_else(|| "—".into())
}

/// The verdict banner: `DEGRADED: root cause etcd/disk (P0) — …`.
fn banner(r: &Report) -> String {
    let h = Headline::of(r);
    match (h.status, h.failing) {
        (Status::Healthy, _) => h.word(),
        (Status::Inconclusive, _) => format!("{}: {CANNOT_DECIDE}", h.word()),
        (_, Some(rc)) => format!(
            "{}: {} {} ({}) — {}",
            h.word(),
            h.cause_word(),
            rc.axis_id(),
            rc.severity,
            rc.title
        ),
        (_, None) => h.word(),
    }
}

/// The banner and the verdict's facts, one per line: where and since when the
/// failing axis failed, then what followed, ties, assumptions and earlier
/// incidents.
fn head(r: &Report, color: bool, width: usize, with_date: bool) -> Vec<String> {
    let tone = match r.status {
        Status::Healthy => Tone::Good,
        Status::Degraded => Tone::Bad,
        _ => Tone::Warn,
    };
    let mut head = wrap(
        "cptriage verdict: ",
        2,
        &style::paint(color, tone, &banner(r)),
        width,
    );
    let mut line = |prefix: &str, text: &str| head.extend(wrap(&format!("  {prefix}"), 4, text, width));
    if let Some(u) = &r.verdict.undecided {
        line("", &u.text);
    }
    if let Some(u) = &r.verdict.recovery_unconfirmed {
        line("", &u.text);
    }
    if let Some(rc) = r.verdict.failing() {
        failing_facts(rc, with_date, &mut line);
    }
    for n in &r.verdict.not_excluded {
        line("", &n.text);
    }
    let named = |leaf: &str| {
        r.axes
            .iter()
            .find(|a| a.leaf == leaf)
            .map(|a| axis_name(r, a))
            .unwrap_or_else(|| leaf.to_string())
    };
    let clock = |t: i64| clock(Some(t), with_date);
    for d in &r.verdict.downstream {
        line(
            "then: ",
            &format!(
                "{} {} later (from {})",
                named(&d.leaf),
                format_span(d.lag_ms),
                clock(d.onset)
            ),
        );
    }
    for t in &r.verdict.ties {
        line(
            "same time: ",
            &format!("{} (from {}, within one step)", named(&t.leaf), clock(t.onset)),
        );
    }
    for a in &r.verdict.assumptions {
        line("assumption: ", a);
    }
    for e in &r.verdict.earlier {
        let over = e
            .recovered
            .map(|x| format!(", over at {}", clock(x)))
            .unwrap_or_default();
        line(
            "earlier: ",
            &format!(
                "{} from {}{over} (a separate incident)",
                named(&e.leaf),
                clock(e.onset)
            ),
        );
    }
    head
}

/// The failing axis's onset, recovery, instances, unreachable targets, the
/// other instances affected and where it is localised, as `line(prefix, text)`.
fn failing_facts(rc: &RootCause, with_date: bool, line: &mut impl FnMut(&str, &str)) {
    if let Some(on) = rc.onset {
        line("onset: ", &format_clock(on, true));
    }
    if let Some(rec) = rc.recovered {
        let after = rc.onset.map(|o| format!(" (after {})", format_span(rec - o)));
        line(
            "recovered: ",
            &format!("{}{}", clock(Some(rec), with_date), after.unwrap_or_default()),
        );
    }
    if !rc.instances.is_empty() {
        line("instances: ", &rc.instances.join(", "));
    }
    for u in &rc.unreachable {
        let again = u
            .until
            .map(|b| format!(", answered again at {}", clock(Some(b), with_date)))
            .unwrap_or_default();
        line(
            "",
            &format!(
                "{} stopped answering at {}{again}",
                u.target,
                clock(Some(u.from), with_date)
            ),
        );
    }
    if !rc.affected.is_empty() {
        line("also affected: ", &rc.affected.join(", "));
    }
    if let Some(l) = &rc.localisation {
        line("", l);
    }
}

/// The window's title and one row per axis: name, severity, state, onset,
/// recovery (when something recovered), instances and a timeline that takes
/// the width the other columns leave.
fn axes_table(r: &Report, width: usize, with_date: bool, out: &mut dyn Write) -> std::io::Result<()> {
    let w = &r.window;
    writeln!(out)?;
    let title = format!(
        "Axes over {} → {} (step {}, {} steps, window {}, at {})",
        format_clock(w.from, true),
        format_clock(w.to, with_date),
        format_span(w.step),
        w.steps.len(),
        format_span(w.range),
        format_clock(w.at, with_date)
    );
    lines(out, wrap("", 2, &title, width))?;
    // The recovered column only when something recovered.
    let any_recovered = r.axes.iter().any(|a| a.recovered.is_some());
    let mut header = vec!["axis", "sev", "state", "onset"];
    if any_recovered {
        header.push("recovered");
    }
    header.push("instances");
    let mut rows: Vec<Vec<String>> = Vec::new();
    for a in &r.axes {
        let state = match a.state {
            AxisState::Lit if a.lit_at_end => "LIT",
            AxisState::Lit => "lit (recovered)",
            AxisState::Clear => "clear",
            AxisState::Unknown => "unknown",
            AxisState::NotChecked => "not checked",
        };
        let mut row = vec![
            axis_name(r, a),
            a.severity.to_string(),
            state.to_string(),
            clock(a.onset, with_date),
        ];
        if any_recovered {
            row.push(clock(a.recovered, with_date));
        }
        // One instance a line: a name is never split.
        row.push(a.instances.join("\n"));
        rows.push(row);
    }
    // The timeline takes what the other columns leave (3 columns of border
    // and padding each), at most one cell per step.
    let text: usize = (0..header.len())
        .map(|c| {
            rows.iter()
                .flat_map(|x| x[c].lines().map(|l| l.chars().count()).collect::<Vec<_>>())
                .chain(std::iter::once(header[c].len()))
                .max()
                .unwrap_or(0)
                + 3
        })
        .sum();
    let tl = width.saturating_sub(text + 6).clamp(8, super::text::MAX_WIDTH);
    header.push("timeline");
    let mut t = new_table(&header, width);
    let inst_col = header.len() - 2;
    for (a, mut row) in r.axes.iter().zip(rows) {
        row.push(fit_timeline(&a.timeline, tl));
        t.add_row(row);
    }
    // Instance names stay whole when the table fits with them.
    let mut whole = vec![0, 3, header.len() - 1];
    if text + 8 + 4 <= width {
        whole.push(inst_col);
    }
    if any_recovered {
        whole.push(4);
    }
    keep_whole(&mut t, &whole);
    writeln!(out, "{t}")
}

/// The evidence of one lit axis: its name, the signals that lit (and the
/// context the rules ask to show) in full as [signal, value, threshold,
/// baseline, trend], and the others on its path in one line.
type Group = (String, Vec<[String; 5]>, Vec<String>);

/// The evidence of every lit axis: a table, or one block per signal when a
/// table of six columns does not fit.
fn evidence(r: &Report, width: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let lit: Vec<_> = r.axes.iter().filter(|a| a.state == AxisState::Lit).collect();
    if lit.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Evidence")?;
    // Trends as wide as a narrow terminal allows.
    let trend = (width / 8).clamp(8, super::text::MAX_WIDTH);
    let groups: Vec<Group> = lit.iter().map(|a| evidence_group(r, a, trend)).collect();
    if width >= NARROW {
        evidence_table(&groups, width, out)
    } else {
        evidence_list(&groups, width, out)
    }
}

fn evidence_group(r: &Report, a: &AxisReport, trend: usize) -> Group {
    let mut rows = Vec::new();
    let mut quiet = Vec::new();
    for e in &a.evidence {
        if e.lit != Some(true) && !e.context {
            quiet.push(format!("{} {}", e.signal, shown_value(e, e.value)));
            continue;
        }
        let mut v = shown_value(e, e.value);
        if e.lit == Some(true) {
            v.push_str(" ◀");
            let on: Vec<&str> = e
                .instances
                .iter()
                .filter(|i| i.lit == Some(true))
                .map(|i| i.instance.as_str())
                .collect();
            if !on.is_empty() {
                v = format!("{v} on {}", on.join(", "));
            }
        }
        rows.push([
            format!("{} ({})", e.description, e.signal),
            v,
            shown_threshold(e),
            value(e.unit, e.baseline),
            fit_sparkline(&e.series, trend),
        ]);
    }
    (axis_name(r, a), rows, quiet)
}

fn evidence_table(groups: &[Group], width: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let mut t = new_table(
        &["axis", "signal", "value", "threshold", "baseline", "trend"],
        width,
    );
    for (axis, rows, quiet) in groups {
        for row in rows {
            let mut cells = vec![axis.clone()];
            cells.extend(row.iter().cloned());
            t.add_row(cells);
        }
        if !quiet.is_empty() {
            t.add_row(vec![
                axis.clone(),
                format!("{} more, not failing", quiet.len()),
                quiet.join(", "),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    keep_whole(&mut t, &[0, 5]);
    writeln!(out, "{t}")
}

/// A table of six columns does not fit: one block per signal.
fn evidence_list(groups: &[Group], width: usize, out: &mut dyn Write) -> std::io::Result<()> {
    for (axis, rows, quiet) in groups {
        writeln!(out, "  {axis}")?;
        for [signal, v, thr, base, tr] in rows {
            let text = format!("{v}; threshold {thr}; baseline {base}; {tr}");
            lines(out, wrap("    ", 6, signal, width))?;
            lines(out, wrap("      ", 8, &text, width))?;
        }
        if !quiet.is_empty() {
            let text = format!("{} more, not failing: {}", quiet.len(), quiet.join(", "));
            lines(out, wrap("    ", 6, &text, width))?;
        }
    }
    Ok(())
}

/// The walk of the tree: each question with its answer, where the walk ends,
/// the signals it read and its note.
fn tree_walk(r: &Report, width: usize, with_date: bool, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Tree walk at {}", format_clock(r.window.at, with_date))?;
    for (i, p) in r.path.iter().enumerate() {
        let ans = match p.answer {
            Answer::Yes => "yes",
            Answer::No => "no",
            Answer::Unknown => "unknown",
        };
        // Where the walk goes is the next line; only its end is named.
        let end = if p.next == crate::rules::HEALTHY {
            " → healthy".to_string()
        } else {
            r.axes
                .iter()
                .find(|a| a.leaf == p.next)
                .map(|a| format!(" → {}", axis_name(r, a)))
                .unwrap_or_default()
        };
        let question = format!("{} {ans}{end}", p.question);
        lines(out, wrap(&format!("  {}. ", i + 1), 7, &question, width))?;
        for s in &p.signals {
            lines(out, wrap("       ", 9, &walk_signal(r, s), width))?;
        }
        if let Some(n) = &p.note {
            lines(out, wrap("       note: ", 9, n, width))?;
        }
    }
    Ok(())
}

/// One signal the walk read: `description (id): value (threshold …, baseline …)`.
fn walk_signal(r: &Report, s: &PathSignal) -> String {
    let (name, val, thr) = match evidence_of(r, s) {
        Some(e) if super::text::is_flag(e.unit, &e.threshold) => (
            format!("{} ({})", e.description, s.signal),
            shown_value(e, s.value),
            shown_threshold(e),
        ),
        Some(e) => (
            format!("{} ({})", e.description, s.signal),
            shown_value(e, s.value),
            format!("threshold {}", s.threshold_text),
        ),
        None => (
            s.signal.clone(),
            value(s.unit, s.value),
            format!("threshold {}", s.threshold_text),
        ),
    };
    format!(
        "{name}: {val} ({thr}{})",
        s.baseline
            .map(|b| format!(", baseline {}", value(s.unit, Some(b))))
            .unwrap_or_default()
    )
}

/// The sources: one row per target with its role, version, snapshots, clock,
/// why it has its role, restarts and missing stretches.
fn sources(r: &Report, width: usize, with_date: bool, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Sources")?;
    let mut t = new_table(
        &[
            "target",
            "role",
            "version",
            "snapshots",
            "time from",
            "role because",
            "notes",
        ],
        width,
    );
    keep_whole(&mut t, &[0, 2]);
    for s in &r.sources {
        let mut notes = Vec::new();
        for x in &s.restarts {
            notes.push(format!("restart at {}", format_clock(*x, with_date)));
        }
        for [a, b] in &s.missing {
            notes.push(format!(
                "missing {} ({})",
                format_clock(*a, with_date),
                format_span(b - a)
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
    writeln!(out, "{t}")
}

/// The falsifier with the measured numbers and the ADR sentence: what the
/// root cause rests on, the alternatives cleared, one line each.
fn measured_falsifier(r: &Report, width: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(f) = &r.falsification else {
        return Ok(());
    };
    let mut line = |prefix: &str, text: &str| -> std::io::Result<()> {
        for l in wrap(prefix, prefix.chars().count(), text, width) {
            writeln!(out, "{l}")?;
        }
        Ok(())
    };
    let root = r.verdict.failing().map(|rc| rc.leaf.as_str());
    for e in r
        .axes
        .iter()
        .filter(|a| Some(a.leaf.as_str()) == root)
        .flat_map(|a| a.evidence.iter())
        .filter(|e| e.lit == Some(true))
    {
        for c in &e.contributors {
            line("  who:      ", &format!("{}: {}", e.signal, c.text()))?;
        }
        if let Some(n) = &e.contributors_note {
            line("  who:      ", &format!("{}: {n}", e.signal))?;
        }
    }
    for m in &f.deciding {
        line("  measured: ", &m.text())?;
    }
    for m in &f.cleared {
        line("  cleared:  ", &format!("{}: {}", m.axis, m.text()))?;
    }
    line("  ADR: ", &f.adr)
}
