//! The first page: the screen an on-call engineer reads at 3 a.m. It fits the
//! terminal (about 20 lines at 80 columns, nothing broken mid-word) and holds,
//! in this order: the verdict; the root cause with where, since when and
//! whether it recovered; what followed and what could not be ordered, one line
//! each with a timeline that fits its column; the deciding signals against
//! their thresholds; the first two next steps; the one warning that matters;
//! one line on what was not checked. `-o wide` keeps every table and the walk
//! ([`super::table`]).
//!
//! [`first_page`] is pure: a [`Report`] and [`RenderOpts`] in, text out, so a
//! screen that redraws itself can call it again with a newer report.

use super::headline::{Headline, CANNOT_DECIDE};
use super::style::{self, Tone};
use super::text::{axis_name, fit_timeline, shown_threshold, shown_value, signal_label};
use crate::rules::model::Severity;
use crate::rules::report::{AxisReport, AxisState, Evidence, Report, RootCause, Status};
use crate::timefmt::{format_clock, format_offset, format_span, same_day};

/// How to render for a screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderOpts {
    /// Columns available; lines never exceed it (a floor of [`MIN_WIDTH`] applies).
    pub width: usize,
    /// ANSI colour (lit/P0 red, clear green, unknown dim).
    pub color: bool,
}

/// Width used when the terminal's is unknown (a pipe, `COLUMNS` unset).
pub const DEFAULT_WIDTH: usize = 80;
/// Narrowest layout rendered; narrower terminals wrap it themselves.
pub const MIN_WIDTH: usize = 40;
/// Deciding signals shown.
const MAX_SIGNALS: usize = 2;
/// Next steps shown.
const MAX_STEPS: usize = 2;

impl Default for RenderOpts {
    fn default() -> Self {
        RenderOpts {
            width: DEFAULT_WIDTH,
            color: false,
        }
    }
}

/// Collects lines, wrapping each at the width.
struct Page {
    width: usize,
    color: bool,
    lines: Vec<String>,
    /// A warning was just written: the closing line follows it directly.
    warned: bool,
}

impl Page {
    fn paint(&self, tone: Tone, s: &str) -> String {
        style::paint(self.color, tone, s)
    }

    /// `text` after `prefix`, continuation lines indented by `indent`.
    fn wrap(&mut self, prefix: &str, indent: usize, text: &str) {
        self.lines.extend(wrap(prefix, indent, text, self.width));
    }

    fn blank(&mut self) {
        if self.lines.last().is_some_and(|l| !l.is_empty()) {
            self.lines.push(String::new());
        }
    }
}

/// Lines of one screen (a 24-line terminal, the prompt and the command).
const SCREEN_LINES: usize = 22;

/// Renders the first page.
pub fn first_page(r: &Report, opts: &RenderOpts) -> String {
    let mut p = Page {
        width: opts.width.max(MIN_WIDTH),
        color: opts.color,
        lines: Vec::new(),
        warned: false,
    };
    headline(r, &mut p);
    if r.verdict.failing().is_some() {
        axes_block(r, &mut p);
        earlier(r, &mut p);
        deciding(r, &mut p);
        next_steps(r, &mut p);
    } else {
        no_cause(r, &mut p);
    }
    beyond_metrics(r, &mut p);
    the_warning(r, &mut p);
    not_checked(r, &mut p);
    let mut s = p.lines.join("\n");
    s.push('\n');
    s
}

fn steps_of(r: &Report) -> usize {
    r.window.steps.len()
}

/// What the audit logs say of the verdict (one line) and the advisories (one
/// line): the details are in `-o wide`.
fn beyond_metrics(r: &Report, p: &mut Page) {
    let advisory = r
        .advisories
        .iter()
        .find(|a| a.holds_at_end)
        .or(r.advisories.first());
    let lines = r.logs.as_ref().map_or(&[][..], |l| l.evidence.as_slice());
    if r.verdict.corroboration.is_empty() && advisory.is_none() && lines.is_empty() {
        return;
    }
    p.lines.push(String::new());
    // One statement per source (audit logs, then etcd and apiserver logs);
    // each names its source ("the audit logs confirm …").
    for c in r.verdict.corroboration.iter().take(2) {
        p.wrap("  ", 4, &c.text);
    }
    for l in lines {
        p.wrap("  ", 4, &super::logs::line_text(l));
    }
    if let Some(a) = advisory {
        let more = match r.advisories.len() {
            1 => String::new(),
            n => format!(" ({} more in -o wide)", n - 1),
        };
        p.wrap("  ", 4, &format!("advice: {}{more}", a.title));
    }
}

fn root_axis(r: &Report) -> Option<&AxisReport> {
    let rc = r.verdict.failing()?;
    r.axes.iter().find(|a| a.leaf == rc.leaf)
}

/// The verdict line.
fn headline(r: &Report, p: &mut Page) {
    let h = Headline::of(r);
    let tone = match h.status {
        Status::Healthy => Tone::Good,
        Status::Degraded => Tone::Bad,
        Status::Recovered | Status::Inconclusive => Tone::Warn,
    };
    let text = match (h.status, h.failing) {
        (Status::Healthy, _) => {
            let parts: Vec<&str> = r.scope.judged.iter().map(|s| s.as_str()).collect();
            match parts.len() {
                0 => "no part of the control plane is failing".to_string(),
                1 => format!("{} is healthy by its own metrics", parts[0]),
                _ => format!("{} are healthy by their own metrics", and_list(&parts)),
            }
        }
        (Status::Inconclusive, _) => CANNOT_DECIDE.to_string(),
        (_, Some(rc)) => std::iter::once(rc.title.as_str())
            .chain(h.qualifiers())
            .collect::<Vec<_>>()
            .join(" — "),
        (_, None) => String::new(),
    };
    let word = p.paint(tone, &h.word());
    let sev = match h.failing {
        Some(rc) => {
            let t = if rc.severity == Severity::P0 {
                Tone::Bad
            } else {
                Tone::Bold
            };
            format!("{} ", p.paint(t, &rc.severity.to_string()))
        }
        None => String::new(),
    };
    let bold = p.paint(Tone::Bold, &text);
    p.wrap(&format!("{word} {sev} "), 2, &bold);
}

/// One line per axis of the incident: the root cause, what followed it, and
/// what began too close to it to be ordered.
fn axes_block(r: &Report, p: &mut Page) {
    let Some(rc) = r.verdict.failing() else { return };
    let rows_axes = incident_axes(r);
    let with_date = !same_day(r.window.from, r.window.to);
    let rows: Vec<[String; 5]> = rows_axes
        .iter()
        .map(|(role, a)| axis_row(r, rc, role, a, with_date))
        .collect();
    axis_lines(r, p, &rows_axes, &rows);
    where_notes(r, rc, p, with_date);
    if !r.verdict.ties.is_empty() {
        ties_note(r, rc, p);
    }
}

/// The axes of the incident with their role: the failing axis (`cause`, or
/// `failing` when its cause is undecided), the ties, then the downstream axes.
fn incident_axes(r: &Report) -> Vec<(&'static str, &AxisReport)> {
    let mut v = Vec::new();
    if let Some(a) = root_axis(r) {
        v.push((
            if r.verdict.undecided.is_some() {
                "failing"
            } else {
                "cause"
            },
            a,
        ));
    }
    for t in &r.verdict.ties {
        if let Some(a) = r.axes.iter().find(|a| a.leaf == t.leaf) {
            v.push(("same time", a));
        }
    }
    for d in &r.verdict.downstream {
        if let Some(a) = r.axes.iter().find(|a| a.leaf == d.leaf) {
            v.push(("then", a));
        }
    }
    v
}

/// One axis's cells: role, name, when (since, or the lag behind the failing
/// axis), instances, and whether it is over.
fn axis_row(r: &Report, rc: &RootCause, role: &str, a: &AxisReport, with_date: bool) -> [String; 5] {
    let when = match (role, a.onset, rc.onset) {
        ("cause" | "failing", Some(o), _) => format!("since {}", format_clock(o, with_date)),
        (_, Some(o), Some(ro)) => format_offset(o - ro),
        (_, Some(o), None) => format_clock(o, with_date),
        _ if steps_of(r) <= 1 => "one snapshot".to_string(),
        _ => "—".to_string(),
    };
    let unconfirmed = r
        .verdict
        .recovery_unconfirmed
        .as_ref()
        .is_some_and(|u| u.leaves.contains(&a.leaf));
    let state = match (a.state, a.lit_at_end, a.recovered) {
        (AxisState::Lit, true, _) => "still failing".to_string(),
        (AxisState::Lit, false, Some(rec)) if unconfirmed => match a.onset {
            Some(o) => format!("unlit after {}, unconfirmed", format_span(rec - o)),
            None => "unlit, unconfirmed".to_string(),
        },
        (AxisState::Lit, false, Some(rec)) => match a.onset {
            Some(o) => format!("over after {}", format_span(rec - o)),
            None => "over".to_string(),
        },
        (AxisState::Lit, false, None) => "over".to_string(),
        _ => String::new(),
    };
    let instances = if role == "cause" && !rc.instances.is_empty() {
        short_list(&rc.instances)
    } else {
        short_list(&a.instances)
    };
    [role.to_string(), axis_name(r, a), when, instances, state]
}

/// The rows in aligned columns, each with a timeline in the width the text
/// leaves (at most one cell per step); a row too wide for the page wraps.
fn axis_lines(r: &Report, p: &mut Page, rows_axes: &[(&str, &AxisReport)], rows: &[[String; 5]]) {
    let w: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|x| x[c].chars().count()).max().unwrap_or(0))
        .collect();
    // Timelines take what the text columns leave, at most one cell per step.
    let text_width = 2 + w[0] + 2 + w[1] + 2 + w[2] + 2 + w[3] + 2 + w[4] + 2;
    let steps = r.window.steps.len();
    let tl_width = p.width.saturating_sub(text_width).min(steps);
    let timelines = tl_width >= 8 && steps > 1;
    for ((role, a), row) in rows_axes.iter().zip(rows) {
        let tone = if *role == "cause" { Tone::Bad } else { Tone::Warn };
        let mut line = format!(
            "  {:<w0$}  {}{}  {:<w2$}  {:<w3$}",
            row[0],
            p.paint(tone, &row[1]),
            " ".repeat(w[1] - row[1].chars().count()),
            row[2],
            row[3],
            w0 = w[0],
            w2 = w[2],
            w3 = w[3],
        );
        if w[4] > 0 {
            line.push_str(&format!("  {:<w4$}", row[4], w4 = w[4]));
        }
        if timelines {
            line.push_str("  ");
            line.push_str(&style::timeline(p.color, &fit_timeline(&a.timeline, tl_width)));
        }
        let line = line.trim_end().to_string();
        if style::visible_len(&line) <= p.width {
            p.lines.push(line);
        } else {
            // Too narrow for one row: the same facts, wrapped.
            let text = row
                .iter()
                .skip(1)
                .filter(|s| !s.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join("  ");
            p.wrap(&format!("  {:<w0$}  ", row[0], w0 = w[0]), 4 + w[0], &text);
        }
    }
}

/// Where the failing axis fails: its localisation (when not every instance
/// of the role is lit), the targets that stopped answering, and the other
/// instances affected.
fn where_notes(r: &Report, rc: &RootCause, p: &mut Page, with_date: bool) {
    // "only etcd-2: …, others …" says where; with every instance of the
    // role lit (or only one), the deciding signals below say it already,
    // unless it is the leaf's cause sentence, which says why.
    if let (Some(l), Some(a)) = (&rc.localisation, root_axis(r)) {
        let roles: Vec<&str> = a
            .evidence
            .iter()
            .filter(|e| e.lit == Some(true))
            .map(|e| e.role.as_str())
            .collect();
        let of_role = r
            .sources
            .iter()
            .filter(|s| roles.contains(&s.role.as_str()))
            .count();
        if a.instances.len() < of_role || a.says_why {
            p.wrap("  ", 4, l);
        }
    }
    for u in &rc.unreachable {
        let again = match u.until {
            Some(b) => format!(", answered again at {}", format_clock(b, with_date)),
            None => String::new(),
        };
        p.wrap(
            "  ",
            4,
            &format!(
                "{} stopped answering at {}{again}",
                u.target,
                format_clock(u.from, with_date)
            ),
        );
    }
    if !rc.affected.is_empty() {
        p.wrap("  ", 4, &format!("also affected: {}", rc.affected.join(", ")));
    }
    for n in &r.verdict.not_excluded {
        p.wrap("  ", 4, &n.text);
    }
}

/// The axes that began within one step of the failing axis: which came first
/// is unknown.
fn ties_note(r: &Report, rc: &RootCause, p: &mut Page) {
    let names: Vec<String> = r
        .verdict
        .ties
        .iter()
        .filter_map(|t| r.axes.iter().find(|a| a.leaf == t.leaf))
        .map(|a| axis_name(r, a))
        .collect();
    let root = root_axis(r).map(|a| axis_name(r, a)).unwrap_or_default();
    let names = and_list(&names.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let text = if rc.onset.is_some() {
        format!(
            "{names} began within {} of {root}: which came first is unknown",
            format_span(r.window.step)
        )
    } else {
        format!("{names} also failing; one snapshot cannot say which came first")
    };
    p.wrap("  ", 4, &text);
}

/// Earlier, separate incidents in the window, on one line.
fn earlier(r: &Report, p: &mut Page) {
    let e = &r.verdict.earlier;
    if e.is_empty() {
        return;
    }
    let with_date = !same_day(r.window.from, r.window.to);
    let items: Vec<String> = e
        .iter()
        .take(3)
        .map(|x| {
            let name = r
                .axes
                .iter()
                .find(|a| a.leaf == x.leaf)
                .map(|a| axis_name(r, a))
                .unwrap_or_else(|| x.leaf.clone());
            format!("{name} at {}", format_clock(x.onset, with_date))
        })
        .collect();
    let more = if e.len() > 3 {
        format!(" +{}", e.len() - 3)
    } else {
        String::new()
    };
    p.wrap(
        "  ",
        4,
        &format!("earlier, over before this incident: {}{more}", items.join(", ")),
    );
}

/// The signals that decided the root cause, value against threshold.
fn deciding(r: &Report, p: &mut Page) {
    let Some(a) = root_axis(r) else { return };
    let rc_instances = r
        .verdict
        .failing()
        .map(|rc| rc.instances.clone())
        .unwrap_or_default();
    let mut ev: Vec<&Evidence> = a
        .evidence
        .iter()
        .filter(|e| !e.context && e.lit == Some(true))
        .collect();
    // Signals lit on the instances named as the cause first (the question of
    // the axis itself, not the broader ones above it), in rule order.
    ev.sort_by_key(|e| {
        !e.instances
            .iter()
            .any(|i| i.lit == Some(true) && rc_instances.contains(&i.instance))
    });
    if ev.is_empty() {
        ev = a.evidence.iter().filter(|e| e.value.is_some()).collect();
    }
    if ev.is_empty() {
        return;
    }
    p.blank();
    let when = ev
        .iter()
        .filter_map(|e| e.value_at)
        .max()
        .map(|t| format!(" at {}", format_clock(t, !same_day(r.window.from, r.window.to))))
        .unwrap_or_default();
    let more = ev.len().saturating_sub(MAX_SIGNALS);
    let more = if more > 0 {
        p.paint(Tone::Dim, &format!(" ({more} more in -o wide)"))
    } else {
        String::new()
    };
    p.wrap("", 2, &format!("Deciding signals{when}{more}"));
    for e in ev.iter().take(MAX_SIGNALS) {
        let worst = e
            .instances
            .iter()
            .filter(|i| i.lit == Some(true))
            .map(|i| i.instance.as_str())
            .collect::<Vec<_>>();
        let on = match worst.as_slice() {
            [] => String::new(),
            [one] => format!(" on {one}"),
            many => format!(" on {} instances", many.len()),
        };
        let value = shown_value(e, e.value);
        let tone = match e.lit {
            Some(true) => Tone::Bad,
            Some(false) => Tone::Good,
            None => Tone::Dim,
        };
        let limit = if e.threshold.is_flag(e.unit) {
            shown_threshold(e)
        } else {
            format!("limit {}", shown_threshold(e))
        };
        let text = format!("{}: {}{on}; {limit}", signal_label(e), p.paint(tone, &value));
        p.wrap("  ", 4, &text);
    }
}

fn next_steps(r: &Report, p: &mut Page) {
    if r.runbook.is_empty() {
        return;
    }
    p.blank();
    p.lines.push("Next steps".to_string());
    for (i, s) in r.runbook.iter().take(MAX_STEPS).enumerate() {
        p.wrap(&format!("  {}. ", i + 1), 5, s);
    }
}

/// Healthy or inconclusive: what was judged, and what the data could not say.
fn no_cause(r: &Report, p: &mut Page) {
    let sc = &r.scope;
    let mut said_absent = false;
    match r.status {
        Status::Healthy => {
            let judged: Vec<&str> = sc.judged.iter().map(|s| s.as_str()).collect();
            if !judged.is_empty() {
                let clear = r.axes.iter().filter(|a| a.state == AxisState::Clear).count();
                let text = if clear == r.axes.len() {
                    format!("all {clear} axes checked, none failing")
                } else {
                    format!("{clear} of {} axes checked, none failing", r.axes.len())
                };
                p.wrap("  ", 4, &text);
            }
        }
        _ => {
            let symptom = r.symptom.as_ref().is_some_and(|s| s.state == AxisState::Lit);
            let text = if symptom {
                "clients are affected, but no part of the control plane shows the cause yet".to_string()
            } else {
                // Roles the rules judge that are in the data but were not judged
                // (a target of unknown role is judged by no scope).
                let roles: Vec<&str> = sc
                    .observed
                    .iter()
                    .filter(|x| {
                        !sc.judged.contains(x) && !sc.not_observed.contains(x) && x.as_str() != "unknown"
                    })
                    .map(|s| s.as_str())
                    .collect();
                if roles.is_empty() && sc.judged.is_empty() && !sc.not_observed.is_empty() {
                    let parts: Vec<&str> = sc.not_observed.iter().map(|s| s.as_str()).collect();
                    said_absent = true;
                    format!("the data holds no {}", parts.join(" or "))
                } else if roles == ["logs"] && sc.judged.is_empty() {
                    "no axis is lit in the logs, and logs alone cannot show that the control plane is healthy: a quiet log is not proof".to_string()
                } else if roles.is_empty() && sc.judged.is_empty() {
                    "the data holds no target the rules judge".to_string()
                } else if let Some(what) = not_yet_confirmed(r) {
                    format!("nothing is confirmed failing yet: {what}; look again in one window")
                } else if roles.is_empty() {
                    "nothing is failing, but the signals that say \"healthy\" were not all read".to_string()
                } else {
                    format!(
                        "nothing is failing, but the data cannot say that {} {} healthy: the signals that decide were not read",
                        and_list(&roles),
                        if roles.len() == 1 { "is" } else { "are" }
                    )
                }
            };
            p.wrap("  ", 4, &text);
        }
    }
    if !sc.not_observed.is_empty() && !said_absent {
        let roles: Vec<&str> = sc.not_observed.iter().map(|s| s.as_str()).collect();
        p.wrap("  ", 4, &format!("{} not in the data", and_list(&roles)));
    }
}

/// The one warning that matters: a walk that stops elsewhere than the root
/// cause (a top-down reading would blame the wrong part), else the first
/// warning; the count of the others.
fn the_warning(r: &Report, p: &mut Page) {
    let mut shown = 0;
    let mut text = None;
    if let (Some(rc), Some(a)) = (r.verdict.failing(), root_axis(r)) {
        if r.walk_end != rc.leaf && r.walk_end != crate::rules::HEALTHY {
            let stop = r
                .axes
                .iter()
                .find(|x| x.leaf == r.walk_end)
                .map(|x| axis_name(r, x))
                .unwrap_or_else(|| r.walk_end.clone());
            let earlier = r
                .axes
                .iter()
                .find(|x| x.leaf == r.walk_end)
                .and_then(|x| Some(x.onset? - a.onset?))
                .filter(|d| *d > 0)
                .map(|d| format!("{} earlier", format_span(d)))
                .unwrap_or_else(|| "earlier".to_string());
            text = Some(format!(
                "a top-down walk stops at {stop}, but {} began {earlier}",
                axis_name(r, a)
            ));
            // The engine's own wording of the same warning.
            shown = r
                .warnings
                .iter()
                .filter(|w| w.starts_with("the tree walk at "))
                .count();
        }
    }
    if text.is_none() {
        if let Some(w) = r.warnings.first() {
            text = Some(w.clone());
            shown = 1;
        }
    }
    let Some(text) = text else { return };
    p.blank();
    let mut text = condense(&text);
    let more = r.warnings.len().saturating_sub(shown);
    if more > 0 {
        text.push_str(&format!(" (and {more} more warning{})", plural(more)));
    }
    let mark = p.paint(Tone::Warn, "warning:");
    p.wrap(&format!("{mark} "), 2, &text);
    p.warned = true;
}

/// One line on what was not checked, the window, and where the rest is.
fn not_checked(r: &Report, p: &mut Page) {
    let unchecked: Vec<String> = r
        .axes
        .iter()
        .filter(|a| matches!(a.state, AxisState::NotChecked | AxisState::Unknown))
        .map(|a| axis_name(r, a))
        .collect();
    let w = &r.window;
    let with_date = !same_day(w.from, w.to);
    let window = if w.steps.len() <= 1 {
        format!("one snapshot at {}", format_clock(w.at, true))
    } else {
        format!(
            "{} → {}, step {}",
            format_clock(w.from, true),
            format_clock(w.to, with_date),
            format_span(w.step)
        )
    };
    let base = if unchecked.is_empty() {
        format!("All axes checked · {window}")
    } else {
        format!("Not checked: {} · {window}", short_list(&unchecked))
    };
    if !p.warned {
        p.blank();
    }
    // The pointer to `-o wide` is left out only where the page already has
    // one and it would push the page past one screen.
    let more = format!("{base} · more: -o wide");
    let over = p.lines.len() + wrap("", 0, &more, p.width).len() > SCREEN_LINES;
    let pointed = p.lines.iter().any(|l| l.contains("-o wide"));
    let text = if over && pointed && base.chars().count() <= p.width {
        base
    } else {
        more
    };
    let dim = p.paint(Tone::Dim, &text);
    p.wrap("", 0, &dim);
}

/// The axes lit at the end of the window for less than their persistence,
/// with their instances ("etcd/network is lit at the end of the window on m0
/// for less than its persistence"; `None` when there are none).
fn not_yet_confirmed(r: &Report) -> Option<String> {
    let parts: Vec<String> = r
        .axes
        .iter()
        .filter(|a| !a.pending.is_empty())
        .map(|a| {
            format!(
                "{} is lit at the end of the window on {} for less than its persistence",
                axis_name(r, a),
                a.pending.join(", ")
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A warning for the page: a parenthesised list of more than three ids
/// (`(a, b, c, d, …)`) becomes its count; `-o wide` lists them.
fn condense(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(len) = rest[open..].find(')') else { break };
        let inner = &rest[open + 1..open + len];
        let items: Vec<&str> = inner.split(", ").collect();
        out.push_str(&rest[..open]);
        if items.len() > 3 && items.iter().all(|i| !i.is_empty() && !i.contains(' ')) {
            out.push_str(&format!("({} of them)", items.len()));
        } else {
            out.push_str(&rest[open..=open + len]);
        }
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `a, b` or, when long, `a, b +3`.
fn short_list(items: &[String]) -> String {
    const ROOM: usize = 24;
    let mut out = String::new();
    for (i, x) in items.iter().enumerate() {
        let sep = if out.is_empty() { "" } else { ", " };
        let rest = items.len() - i;
        // Keep room for " +N" unless this is the last item.
        let need = out.len() + sep.len() + x.len() + if rest > 1 { 4 } else { 0 };
        if !out.is_empty() && need > ROOM {
            out.push_str(&format!(" +{rest}"));
            return out;
        }
        out.push_str(sep);
        out.push_str(x);
    }
    out
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Word-wraps `text` after `prefix` to `width` columns (ANSI escapes take no
/// room), continuation lines indented by `indent`. A word longer than a line is
/// split after punctuation (`,` `{` `(` `/` `_` `=`) where possible, and only
/// then anywhere.
pub fn wrap(prefix: &str, indent: usize, text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = prefix.to_string();
    let mut cur_len = style::visible_len(prefix);
    let mut start_len = cur_len;
    let pad = " ".repeat(indent);
    // A short option stays with its value (`-o wide` never breaks).
    let mut words: Vec<String> = Vec::new();
    let mut glue = false;
    for w in text.split_whitespace() {
        match words.last_mut() {
            Some(last) if glue => {
                last.push(' ');
                last.push_str(w);
            }
            _ => words.push(w.to_string()),
        }
        glue = w.len() == 2 && w.starts_with('-') && w != "--";
    }
    for word in words {
        let mut word = word;
        loop {
            let wl = style::visible_len(&word);
            let sep = usize::from(cur_len > start_len);
            if cur_len + sep + wl <= width {
                if sep == 1 {
                    cur.push(' ');
                }
                cur.push_str(&word);
                cur_len += sep + wl;
                break;
            }
            if cur_len > start_len {
                lines.push(std::mem::take(&mut cur));
                cur = pad.clone();
                cur_len = indent;
                start_len = indent;
                continue;
            }
            // The word alone does not fit on a line: split it.
            let room = width.saturating_sub(cur_len).max(1);
            let (head, tail) = split_word(&word, room);
            cur.push_str(&head);
            lines.push(std::mem::take(&mut cur));
            cur = pad.clone();
            cur_len = indent;
            start_len = indent;
            word = tail;
            if word.is_empty() {
                break;
            }
        }
    }
    if cur_len > start_len || lines.is_empty() {
        lines.push(cur);
    }
    lines.iter().map(|l| l.trim_end().to_string()).collect()
}

/// The longest head of `word` of at most `room` visible characters, ending
/// after punctuation when there is some.
fn split_word(word: &str, room: usize) -> (String, String) {
    let chars: Vec<char> = word.chars().collect();
    // Words with escapes are short coloured values; never split inside one.
    if word.contains('\x1b') || chars.len() <= room {
        return (word.to_string(), String::new());
    }
    let cut = (1..=room)
        .rev()
        .find(|&i| matches!(chars[i - 1], ',' | '{' | '(' | '/' | '_' | '=' | '-'))
        .filter(|&i| i * 2 >= room)
        .unwrap_or(room);
    (chars[..cut].iter().collect(), chars[cut..].iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_words_with_a_hanging_indent() {
        let l = wrap("  1. ", 5, "check the disk of that node now please", 20);
        assert_eq!(
            l,
            vec!["  1. check the disk", "     of that node", "     now please"]
        );
        for x in &l {
            assert!(x.chars().count() <= 20);
        }
    }

    #[test]
    fn splits_long_tokens_after_punctuation_only_when_needed() {
        let l = wrap(
            "",
            2,
            "see apiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema}",
            30,
        );
        for x in &l {
            assert!(x.chars().count() <= 30, "{x:?}");
        }
        assert_eq!(l[0], "see");
        assert!(
            l[1].ends_with('_') || l[1].ends_with(',') || l[1].ends_with('{'),
            "{l:?}"
        );
        assert_eq!(
            l.concat().replace(' ', ""),
            "seeapiserver_flowcontrol_rejected_requests_total{priority_level,flow_schema}"
        );
    }

    #[test]
    fn escapes_take_no_room() {
        let red = style::paint(true, Tone::Bad, "DEGRADED");
        let l = wrap(&format!("{red} "), 2, "etcd disk is slow", 26);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(style::visible_len(&l[0]), 26);
    }

    #[test]
    fn long_lists_are_counted() {
        let v: Vec<String> = ["apiserver-0", "etcd-0", "etcd-1", "etcd-2"]
            .map(String::from)
            .into();
        assert_eq!(short_list(&v), "apiserver-0, etcd-0 +2");
        assert_eq!(short_list(&v[1..]), "etcd-0, etcd-1, etcd-2");
    }

    #[test]
    fn long_id_lists_in_warnings_are_counted() {
        assert_eq!(
            condense("read since start (a_b, c, d, e); history (not now)"),
            "read since start (4 of them); history (not now)"
        );
        assert_eq!(condense("x (a, b) y"), "x (a, b) y");
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(and_list(&["a"]), "a");
        assert_eq!(and_list(&["a", "b", "c"]), "a, b and c");
    }
}
