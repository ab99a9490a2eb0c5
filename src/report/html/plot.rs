//! The timeline plot of the HTML report: one inline SVG over the analysed
//! window with a shared time axis. On top, one band per axis of the verdict
//! (root cause, ties, downstream, other lit axes) and the clients' symptom,
//! lit steps filled; below, one panel per deciding signal of those axes with
//! one line per instance, its lit stretches underlaid in red and its threshold
//! drawn (the absolute part for every instance, the relative part per instance
//! from its baseline). Vertical markers show every onset and recovery across
//! bands and panels.
//!
//! The elements carry classes and `data-` attributes (`g.onset[data-t]`,
//! `path.series[data-instance]`, `line.threshold[data-value]`) so that tests
//! can check what a browser draws against the report.

use std::fmt::Write as _;

use super::{esc, verdict_axes};
use crate::rules::report::{Availability, Evidence, Report, StepState};
use crate::store::Millis;
use crate::timefmt::{format_lag, format_time};

/// Width of the drawing (viewBox units = CSS pixels at full size).
const W: f64 = 1200.0;
/// Left edge of the plot area (the labels are left of it).
const X0: f64 = 290.0;
/// Right edge of the plot area.
const X1: f64 = 1180.0;
const BAND_H: f64 = 18.0;
const BAND_GAP: f64 = 5.0;
const PANEL_H: f64 = 96.0;
/// Space above a panel for its legend.
const PANEL_TOP: f64 = 26.0;
const LABEL_ROW: f64 = 14.0;
/// Deciding signals per axis, and panels in all.
const PER_AXIS: usize = 3;
const MAX_PANELS: usize = 8;

/// Instance colours (red is kept for "lit").
const PALETTE: [&str; 9] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
];
const LIT: &str = "#c62828";

fn role_colour(role: &str) -> &'static str {
    match role {
        "root-cause" => LIT,
        "tie" => "#8e24aa",
        "downstream" => "#ef6c00",
        "symptom" => "#37474f",
        "unreachable" => "#6d4c41",
        _ => "#757575",
    }
}

struct Band<'a> {
    label: String,
    title: String,
    role: &'static str,
    states: BandStates<'a>,
}

enum BandStates<'a> {
    /// One state per step.
    Steps(&'a [StepState]),
    /// A target that stopped answering: from its first failed scrape until it
    /// answered again (or the end of the window).
    Span(Millis, Option<Millis>),
}

struct Panel<'a> {
    /// The axis the signal decides, or `clients` for the symptom question.
    axis: String,
    ev: &'a Evidence,
}

struct Marker {
    axis: String,
    role: &'static str,
    kind: &'static str,
    t: Millis,
    text: String,
}

/// Whether any instance of the signal was judged lit in the window.
fn ever_lit(e: &Evidence) -> bool {
    e.instance_lit.values().any(|v| v.contains(&Some(true)))
}

fn has_data(v: &[Option<f64>]) -> bool {
    v.iter().flatten().any(|x| x.is_finite())
}

/// The deciding signals to plot: per axis of the verdict, those lit in the
/// window (else those lit at the reference step); without a root cause, the
/// signals of the symptom question.
fn panels(r: &Report) -> Vec<Panel<'_>> {
    let mut out: Vec<Panel> = Vec::new();
    let plotted = |e: &&Evidence| e.availability == Availability::Evaluated && !e.instance_series.is_empty();
    for (a, _) in verdict_axes(r) {
        let deciding: Vec<&Evidence> = a.evidence.iter().filter(|e| !e.context).filter(plotted).collect();
        let mut pick: Vec<&Evidence> = deciding.iter().copied().filter(|e| ever_lit(e)).collect();
        if pick.is_empty() {
            pick = deciding.iter().copied().filter(|e| e.lit == Some(true)).collect();
        }
        for ev in pick.into_iter().take(PER_AXIS) {
            if !out.iter().any(|p| p.ev.signal == ev.signal) {
                out.push(Panel {
                    axis: a.axis_id(),
                    ev,
                });
            }
        }
    }
    if r.verdict.failing().is_none() {
        if let Some(first) = r.path.first() {
            for s in &first.signals {
                let found = r.axes.iter().find_map(|a| {
                    a.evidence
                        .iter()
                        .filter(plotted)
                        .find(|e| e.signal == s.signal)
                        .map(|ev| Panel {
                            axis: "clients".into(),
                            ev,
                        })
                });
                if let Some(p) = found {
                    if !out.iter().any(|q| q.ev.signal == p.ev.signal) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out.truncate(MAX_PANELS);
    out
}

fn bands(r: &Report) -> Vec<Band<'_>> {
    let mut out: Vec<Band> = verdict_axes(r)
        .into_iter()
        .map(|(a, role)| Band {
            label: a.axis_id(),
            title: a.title.clone(),
            role,
            states: BandStates::Steps(&a.timeline),
        })
        .collect();
    if let Some(rc) = r.verdict.failing() {
        for u in &rc.unreachable {
            out.push(Band {
                label: format!("{} not answering", u.target),
                title: format!("{} stopped answering (no snapshot or a failed scrape)", u.target),
                role: "unreachable",
                states: BandStates::Span(u.from, u.until),
            });
        }
    }
    if let Some(s) = &r.symptom {
        out.push(Band {
            label: "clients affected".into(),
            title: s.question.clone(),
            role: "symptom",
            states: BandStates::Steps(&s.timeline),
        });
    }
    out
}

fn markers(r: &Report) -> Vec<Marker> {
    let mut m = Vec::new();
    let v = &r.verdict;
    let root_onset = v.failing().and_then(|rc| rc.onset);
    let hm = |t: Millis| clock(t, 0);
    if let Some(rc) = v.failing() {
        let name = rc.axis_id();
        if let Some(o) = rc.onset {
            m.push(Marker {
                axis: name.clone(),
                role: "root-cause",
                kind: "onset",
                t: o,
                text: format!("{name} {}", hm(o)),
            });
        }
        if let Some(t) = rc.recovered {
            m.push(Marker {
                axis: name.clone(),
                role: "root-cause",
                kind: "recovery",
                t,
                text: format!("{name} recovered {}", hm(t)),
            });
        }
    }
    for t in &v.ties {
        let name = t.axis_id();
        m.push(Marker {
            axis: name.clone(),
            role: "tie",
            kind: "onset",
            t: t.onset,
            text: format!("{name} (tie)"),
        });
    }
    for d in &v.downstream {
        let name = d.axis_id();
        m.push(Marker {
            axis: name.clone(),
            role: "downstream",
            kind: "onset",
            t: d.onset,
            text: format!("{name} +{}", format_lag(d.lag_ms)),
        });
        if let Some(rec) = r.axes.iter().find(|a| a.leaf == d.leaf).and_then(|a| a.recovered) {
            m.push(Marker {
                axis: name.clone(),
                role: "downstream",
                kind: "recovery",
                t: rec,
                text: format!("{name} recovered"),
            });
        }
    }
    if let Some(s) = r.symptom.as_ref().filter(|s| s.onset.is_some()) {
        let o = s.onset.unwrap_or_default();
        m.push(Marker {
            axis: "clients affected".into(),
            role: "symptom",
            kind: "onset",
            t: o,
            text: match root_onset {
                Some(ro) if o >= ro => format!("clients +{}", format_lag(o - ro)),
                _ => format!("clients {}", hm(o)),
            },
        });
    }
    // In time order, the root cause first at the same time (its label on top).
    m.sort_by_key(|k| (k.t, k.role != "root-cause"));
    m
}

/// `00:04:15` (UTC), with the date when `with_date`.
fn clock(t: Millis, span: Millis) -> String {
    let Some(d) = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t) else {
        return format_time(t);
    };
    if span > 86_400_000 {
        d.format("%m-%d %H:%M").to_string()
    } else if t % 60_000 == 0 && span > 600_000 {
        d.format("%H:%M").to_string()
    } else {
        d.format("%H:%M:%S").to_string()
    }
}

/// The tick interval: the smallest of the usual ones giving at most 8 ticks.
fn tick_interval(span: Millis) -> Millis {
    const S: Millis = 1000;
    const CHOICES: [Millis; 19] = [
        S,
        2 * S,
        5 * S,
        10 * S,
        15 * S,
        30 * S,
        60 * S,
        120 * S,
        300 * S,
        600 * S,
        900 * S,
        1800 * S,
        3600 * S,
        7200 * S,
        10800 * S,
        21600 * S,
        43200 * S,
        86400 * S,
        7 * 86400 * S,
    ];
    CHOICES
        .into_iter()
        .find(|&c| span / c <= 8)
        .unwrap_or(7 * 86400 * S)
}

/// A number for SVG coordinates.
fn n(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// Splits `s` into lines of at most `width` characters at spaces, at most `max` lines.
fn wrap(s: &str, width: usize, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for w in s.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    if lines.len() > max {
        lines.truncate(max);
        if let Some(l) = lines.last_mut() {
            l.push('…');
        }
    }
    lines
}

/// The drawing's time scale: the window on `X0..X1`. A step's state holds
/// until the next step: the axis runs one step past the last, so that an
/// onset marker starts its lit cell.
struct Scale<'a> {
    from: Millis,
    to: Millis,
    steps: &'a [Millis],
}

impl Scale<'_> {
    fn span(&self) -> Millis {
        self.to - self.from
    }

    fn x(&self, t: Millis) -> f64 {
        X0 + (t - self.from) as f64 / self.span() as f64 * (X1 - X0)
    }

    /// The horizontal extent of step `i`.
    fn cell(&self, i: usize) -> (f64, f64) {
        let b = self.steps.get(i + 1).copied().unwrap_or(self.to);
        (self.x(self.steps[i].max(self.from)), self.x(b.min(self.to)))
    }
}

/// Writes the timeline figure (or why there is none).
pub(super) fn figure(h: &mut String, r: &Report) {
    let w = &r.window;
    let steps = &w.steps;
    if steps.len() < 2 || w.to <= w.from {
        h.push_str(
            "<p class=\"note\" id=\"no-timeline\">The data is a single snapshot: onsets and rates need a time series, so there is no timeline to draw.</p>\n",
        );
        return;
    }
    let sc = Scale {
        from: w.from,
        to: w.to + w.step.max(0),
        steps,
    };
    let (from, to) = (sc.from, sc.to);

    let bands = bands(r);
    let panels = panels(r);
    let markers = markers(r);

    let (label_rows, placed) = place_labels(&markers, &sc);
    let top = 10.0 + label_rows as f64 * LABEL_ROW + 6.0;
    let bands_h = bands.len() as f64 * (BAND_H + BAND_GAP);
    let panels_top = top + bands_h + 10.0;
    let panels_h = panels.len() as f64 * (PANEL_TOP + PANEL_H);
    let plot_bottom = panels_top + panels_h;
    let height = plot_bottom + 40.0;

    let _ = writeln!(
        h,
        "<figure>\n<svg class=\"timeline\" role=\"img\" width=\"{w_}\" height=\"{h_}\" viewBox=\"0 0 {w_} {h_}\" data-from=\"{from}\" data-to=\"{to}\" data-x0=\"{x0}\" data-x1=\"{x1}\" font-family=\"system-ui,-apple-system,Segoe UI,Roboto,Arial,sans-serif\" font-size=\"12\">",
        w_ = n(W),
        h_ = n(height),
        x0 = n(X0),
        x1 = n(X1),
    );
    let _ = writeln!(
        h,
        "<title>Timeline {} → {}</title>",
        esc(&format_time(from)),
        esc(&format_time(w.to))
    );
    time_axis(h, &sc, w.to, top, plot_bottom);
    for (k, b) in bands.iter().enumerate() {
        band(h, &sc, b, top + k as f64 * (BAND_H + BAND_GAP));
    }
    for (k, p) in panels.iter().enumerate() {
        panel(
            h,
            &sc,
            p,
            panels_top + k as f64 * (PANEL_TOP + PANEL_H) + PANEL_TOP,
        );
    }
    marker_lines(h, &sc, &markers, &placed, plot_bottom);
    h.push_str("</svg>\n");
    let _ = writeln!(
        h,
        "<figcaption>Bands: the axes of the verdict and the clients' symptom, filled where lit (grey: no data decides). \
         Panels: the deciding signals, one line per instance; red underlay where that instance was judged lit (after persistence, warm-up and observation rules); \
         dashed lines are the thresholds (grey: for every instance; coloured: from that instance's baseline). \
         Vertical lines mark onsets (dotted: recoveries).</figcaption>\n</figure>"
    );
}

/// Marker labels in greedy rows so that none overlaps: the number of rows,
/// and per marker its row and whether its label is right of its line.
fn place_labels(markers: &[Marker], sc: &Scale) -> (usize, Vec<(usize, bool)>) {
    let mut rows: Vec<f64> = Vec::new();
    let mut placed: Vec<(usize, bool)> = Vec::new();
    for m in markers {
        let mx = sc.x(m.t);
        let width = m.text.chars().count() as f64 * 6.4 + 8.0;
        let right = mx + width <= W - 4.0;
        let (start, end) = if right { (mx, mx + width) } else { (mx - width, mx) };
        let row = match rows.iter().position(|&e| e < start) {
            Some(i) => i,
            None => {
                rows.push(f64::NEG_INFINITY);
                rows.len() - 1
            }
        };
        rows[row] = end;
        placed.push((row, right));
    }
    (rows.len(), placed)
}

/// The time grid and axis (`end`: the window's end, named in the caption).
fn time_axis(h: &mut String, sc: &Scale, end: Millis, top: f64, plot_bottom: f64) {
    let (from, to, span) = (sc.from, sc.to, sc.span());
    let every = tick_interval(span);
    let mut t = from.div_euclid(every) * every;
    if t < from {
        t += every;
    }
    h.push_str("<g class=\"time-axis\">\n");
    while t <= to {
        let tx = sc.x(t);
        let _ = writeln!(
            h,
            "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eceff1\"/><text class=\"tick\" data-t=\"{t}\" x=\"{0}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#5f6b76\">{4}</text>",
            n(tx),
            n(top),
            n(plot_bottom),
            n(plot_bottom + 16.0),
            esc(&clock(t, span))
        );
        t += every;
    }
    let _ = writeln!(
        h,
        "<line x1=\"{x0}\" x2=\"{x1}\" y1=\"{yb}\" y2=\"{yb}\" stroke=\"#90a4ae\"/><text x=\"{x1}\" y=\"{yc}\" text-anchor=\"end\" fill=\"#5f6b76\">UTC, {f} → {t}</text>\n</g>",
        x0 = n(X0),
        x1 = n(X1),
        yb = n(plot_bottom),
        yc = n(plot_bottom + 32.0),
        f = esc(&format_time(from)),
        t = esc(&format_time(end))
    );
}

/// One band at height `y`: its label and role, and its lit (and unknown) runs.
fn band(h: &mut String, sc: &Scale, b: &Band, y: f64) {
    let (from, to, steps) = (sc.from, sc.to, sc.steps);
    let colour = role_colour(b.role);
    let _ = writeln!(
        h,
        "<g class=\"band\" data-axis=\"{}\" data-role=\"{}\"><title>{}</title>",
        esc(&b.label),
        b.role,
        esc(&format!("{} — {}", b.label, b.title))
    );
    let role_word = match b.role {
        "root-cause" => "root cause",
        "tie" => "tie",
        "downstream" => "downstream",
        "symptom" | "unreachable" => "",
        _ => "also failing",
    };
    let _ = writeln!(
        h,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-weight=\"600\" fill=\"{colour}\">{}<tspan font-weight=\"400\" fill=\"#5f6b76\">{}</tspan></text>",
        n(X0 - 8.0),
        n(y + BAND_H - 5.0),
        esc(&b.label),
        if role_word.is_empty() {
            String::new()
        } else {
            format!(" · {role_word}")
        }
    );
    let _ = writeln!(
        h,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f1f3f5\"/>",
        n(X0),
        n(y),
        n(X1 - X0),
        n(BAND_H)
    );
    let states = match b.states {
        BandStates::Steps(s) => s,
        BandStates::Span(t0, t1) => {
            let (t0, t1) = (t0.clamp(from, to), t1.unwrap_or(to).clamp(from, to));
            let (a, e) = (sc.x(t0), sc.x(t1));
            let _ = writeln!(
                h,
                "<rect class=\"lit\" data-from=\"{}\" data-to=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{colour}\" fill-opacity=\"0.75\"/>\n</g>",
                t0, t1, n(a), n(y), n((e - a).max(1.5)), n(BAND_H)
            );
            return;
        }
    };
    // Runs of lit and unknown steps.
    let mut i = 0;
    while i < states.len().min(steps.len()) {
        let s = states[i];
        let mut j = i;
        while j + 1 < states.len().min(steps.len()) && states[j + 1] == s {
            j += 1;
        }
        let (cls, fill) = match s {
            StepState::Lit => ("lit", colour),
            StepState::Unknown => ("unknown", "#cfd8dc"),
            StepState::Unlit => ("", ""),
        };
        if !cls.is_empty() {
            let (a, _) = sc.cell(i);
            let (_, e) = sc.cell(j);
            let _ = writeln!(
                h,
                "<rect class=\"{cls}\" data-from=\"{}\" data-to=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"/>",
                steps[i],
                steps[j],
                n(a),
                n(y),
                n((e - a).max(1.5)),
                n(BAND_H)
            );
        }
        i = j + 1;
    }
    h.push_str("</g>\n");
}

/// Onset and recovery markers, over everything; the root cause's lines last,
/// over the others at the same time.
fn marker_lines(h: &mut String, sc: &Scale, markers: &[Marker], placed: &[(usize, bool)], plot_bottom: f64) {
    let mut order: Vec<(&Marker, &(usize, bool))> = markers.iter().zip(placed).collect();
    order.sort_by_key(|(m, _)| m.role == "root-cause");
    for (m, (row, right)) in order {
        let mx = sc.x(m.t);
        let colour = role_colour(m.role);
        let ly = 10.0 + *row as f64 * LABEL_ROW + 10.0;
        let dash = if m.kind == "recovery" {
            " stroke-dasharray=\"2 3\""
        } else if m.role == "root-cause" {
            ""
        } else {
            " stroke-dasharray=\"6 3\""
        };
        let _ = writeln!(
            h,
            "<g class=\"{}\" data-axis=\"{}\" data-role=\"{}\" data-t=\"{}\" data-time=\"{}\"><title>{}</title><line x1=\"{mx}\" x2=\"{mx}\" y1=\"{}\" y2=\"{}\" stroke=\"{colour}\" stroke-width=\"1.5\"{dash}/><text x=\"{}\" y=\"{}\" text-anchor=\"{}\" fill=\"{colour}\" font-weight=\"600\">{}</text></g>",
            m.kind,
            esc(&m.axis),
            m.role,
            m.t,
            esc(&format_time(m.t)),
            esc(&format!("{} {} at {}", m.axis, m.kind, format_time(m.t))),
            n(ly + 3.0),
            n(plot_bottom),
            n(if *right { mx + 4.0 } else { mx - 4.0 }),
            n(ly),
            if *right { "start" } else { "end" },
            esc(&m.text),
            mx = n(mx),
        );
    }
}

/// A panel's value range `(lo, hi, top)`: from 0 (or below) to the highest
/// value or threshold `top`, plus 8 % room above.
fn value_range(e: &Evidence, series: &[(&String, &Vec<Option<f64>>)]) -> (f64, f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in series.iter().flat_map(|(_, v)| v.iter().flatten()) {
        if v.is_finite() {
            lo = lo.min(*v);
            hi = hi.max(*v);
        }
    }
    for l in &e.threshold_lines {
        lo = lo.min(l.value);
        hi = hi.max(l.value);
    }
    if !lo.is_finite() || !hi.is_finite() {
        lo = 0.0;
        hi = 1.0;
    }
    if lo > 0.0 {
        lo = 0.0;
    }
    if hi <= lo {
        hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() };
    }
    let top_value = hi;
    hi += (hi - lo) * 0.08;
    (lo, hi, top_value)
}

/// The series of one signal with data, by instance.
type Series<'a> = Vec<(&'a String, &'a Vec<Option<f64>>)>;

/// One signal's panel with its top at `y`: labels, frame, legend, thresholds
/// and one line per instance.
fn panel(h: &mut String, sc: &Scale, p: &Panel, y: f64) {
    let e = p.ev;
    let series: Series = e.instance_series.iter().filter(|(_, v)| has_data(v)).collect();
    let (lo, hi, top_value) = value_range(e, &series);
    let yv = |v: f64| y + PANEL_H - (v.clamp(lo, hi) - lo) / (hi - lo) * PANEL_H;
    let name = &p.axis;
    let _ = writeln!(
        h,
        "<g class=\"signal\" data-signal=\"{}\" data-axis=\"{}\" data-instances=\"{}\"><title>{}</title>",
        esc(&e.signal),
        esc(name),
        series.len(),
        esc(&format!(
            "{} — {} ({})",
            e.signal, e.description, e.threshold_text
        ))
    );
    panel_labels(h, e, name, y);
    // Frame, y ticks.
    let _ = writeln!(
        h,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#cfd8dc\"/>",
        n(X0),
        n(y),
        n(X1 - X0),
        n(PANEL_H)
    );
    for (v, ty) in [(lo, y + PANEL_H - 3.0), (top_value, yv(top_value) + 11.0)] {
        let _ = writeln!(
            h,
            "<text class=\"ytick\" x=\"{}\" y=\"{}\" fill=\"#5f6b76\" font-size=\"10.5\">{}</text>",
            n(X0 + 3.0),
            n(ty),
            esc(&e.unit.format(v))
        );
    }
    legend(h, e, &series, y);
    thresholds(h, e, &series, &yv);
    lines(h, sc, e, &series, &yv);
    h.push_str("</g>\n");
}

/// The labels left of a panel: the signal's description, axis and id, and
/// its threshold.
fn panel_labels(h: &mut String, e: &Evidence, name: &str, y: f64) {
    let mut ly = y + 12.0;
    for line in wrap(&e.description, 38, 3) {
        let _ = writeln!(
            h,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-weight=\"600\">{}</text>",
            n(X0 - 8.0),
            n(ly),
            esc(&line)
        );
        ly += 14.0;
    }
    let _ = writeln!(
        h,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#5f6b76\" font-size=\"11\">{} · {}</text>",
        n(X0 - 8.0),
        n(ly),
        esc(name),
        esc(&e.signal)
    );
    ly += 13.0;
    for line in wrap(&format!("threshold {}", e.threshold_text), 44, 2) {
        let _ = writeln!(
            h,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#5f6b76\" font-size=\"11\">{}</text>",
            n(X0 - 8.0),
            n(ly),
            esc(&line)
        );
        ly += 13.0;
    }
}

/// The legend above a panel: one colour per instance, the lit ones marked.
fn legend(h: &mut String, e: &Evidence, series: &Series, y: f64) {
    let mut lx = X0;
    for (i, (inst, _)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let lit = e.instance_lit.get(*inst).is_some_and(|l| l.contains(&Some(true)));
        let _ = writeln!(
            h,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{c}\"/><text class=\"legend\" x=\"{}\" y=\"{}\"{}>{}{}</text>",
            n(lx),
            n(y - 14.0),
            n(lx + 14.0),
            n(y - 5.0),
            if lit { " font-weight=\"600\"" } else { "" },
            esc(inst),
            if lit { " (lit)" } else { "" }
        );
        lx += 14.0 + (inst.chars().count() + if lit { 6 } else { 0 }) as f64 * 6.6 + 16.0;
        if lx > X1 - 60.0 {
            break;
        }
    }
}

/// The threshold lines of a panel (grey for every instance, in the
/// instance's colour from its baseline), labelled.
fn thresholds(h: &mut String, e: &Evidence, series: &Series, yv: &dyn Fn(f64) -> f64) {
    for (k, l) in e.threshold_lines.iter().enumerate() {
        let (colour, inst) = match &l.instance {
            None => ("#546e7a", String::new()),
            Some(i) => (
                series
                    .iter()
                    .position(|(s, _)| *s == i)
                    .map(|k| PALETTE[k % PALETTE.len()])
                    .unwrap_or("#546e7a"),
                format!(" data-instance=\"{}\"", esc(i)),
            ),
        };
        let ty = yv(l.value);
        let _ = writeln!(
            h,
            "<line class=\"threshold\" data-value=\"{v}\"{inst} x1=\"{x0}\" x2=\"{x1}\" y1=\"{ty}\" y2=\"{ty}\" stroke=\"{colour}\" stroke-width=\"1.2\" stroke-dasharray=\"5 4\"/><text x=\"{tx}\" y=\"{tl}\" text-anchor=\"end\" fill=\"{colour}\" font-size=\"10.5\">{op} {val}{who}</text>",
            v = l.value,
            x0 = n(X0),
            x1 = n(X1),
            ty = n(ty),
            // Labels of lines close together must not overlap.
            tx = n(X1 - 2.0 - k as f64 * 170.0),
            tl = n(ty - 3.0),
            op = if l.above { "&gt;" } else { "&lt;" },
            val = esc(&e.unit.format(l.value)),
            who = l
                .instance
                .as_ref()
                .map(|i| format!(" ({})", esc(i)))
                .unwrap_or_default(),
        );
    }
}

/// One line per instance over its lit underlay.
fn lines(h: &mut String, sc: &Scale, e: &Evidence, series: &Series, yv: &dyn Fn(f64) -> f64) {
    let steps = sc.steps;
    for (i, (inst, vals)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let lit = e.instance_lit.get(*inst);
        // +Inf (everything in the last bucket) is drawn at the top, -Inf at
        // the bottom; NaN (nothing observed) is a gap.
        let pt = |k: usize| -> Option<(f64, f64)> {
            let v = vals.get(k).copied().flatten().filter(|v| !v.is_nan())?;
            Some((sc.x(*steps.get(k)?), yv(v)))
        };
        let path = |keep: &dyn Fn(usize) -> bool| -> String {
            let points = (0..vals.len().min(steps.len())).map(|k| pt(k).filter(|_| keep(k)));
            polyline(points)
        };
        let lit_d = path(&|k| lit.and_then(|l| l.get(k).copied().flatten()) == Some(true));
        if !lit_d.is_empty() {
            let _ = writeln!(
                h,
                "<path class=\"lit-run\" data-instance=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{LIT}\" stroke-opacity=\"0.35\" stroke-width=\"8\" stroke-linecap=\"round\" stroke-linejoin=\"round\"/>",
                esc(inst),
                lit_d
            );
        }
        let _ = writeln!(
            h,
            "<path class=\"series\" data-instance=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"{}\" stroke-linecap=\"round\" stroke-linejoin=\"round\"><title>{}</title></path>",
            esc(inst),
            path(&|_| true),
            // Each line a little thinner than the one under it, so that
            // instances with the same values show as nested stripes.
            n((3.4 - 0.6 * i as f64).max(1.4)),
            esc(&format!("{inst} — {}", e.description))
        );
    }
}

/// SVG path data of a line through `points` (`None` breaks it). Points that
/// fall in the same pixel column are reduced to the first, lowest, highest and
/// last of the column, so that a long window draws the same picture with at
/// most four points per pixel.
fn polyline(points: impl Iterator<Item = Option<(f64, f64)>>) -> String {
    let mut d = String::new();
    let mut col: Vec<(f64, f64)> = Vec::new();
    let mut open = false;
    let flush = |col: &mut Vec<(f64, f64)>, d: &mut String, open: &mut bool| {
        if col.is_empty() {
            return;
        }
        let first = col[0];
        let last = col[col.len() - 1];
        let lo = col
            .iter()
            .copied()
            .fold(first, |a, p| if p.1 > a.1 { p } else { a });
        let hi = col
            .iter()
            .copied()
            .fold(first, |a, p| if p.1 < a.1 { p } else { a });
        let mut keep = vec![first];
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        for p in [a, b, last] {
            if keep.last() != Some(&p) {
                keep.push(p);
            }
        }
        for (px, py) in keep {
            let _ = write!(d, "{}{} {} ", if *open { "L" } else { "M" }, n(px), n(py));
            if !*open {
                // A lone point still shows (round caps).
                d.push_str("l 0.1 0 ");
            }
            *open = true;
        }
        col.clear();
    };
    for p in points {
        match p {
            Some(p) => {
                if col.first().is_some_and(|c| c.0.floor() != p.0.floor()) {
                    flush(&mut col, &mut d, &mut open);
                }
                col.push(p);
            }
            None => {
                flush(&mut col, &mut d, &mut open);
                open = false;
            }
        }
    }
    flush(&mut col, &mut d, &mut open);
    d.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polylines_break_at_gaps_and_reduce_each_pixel_column() {
        let d = polyline([Some((1.0, 5.0)), Some((2.0, 6.0)), None, Some((4.0, 1.0))].into_iter());
        assert_eq!(d, "M1 5 l 0.1 0 L2 6 M4 1 l 0.1 0");
        // 1000 points in one column: first, extremes, last.
        let pts = (0..1000).map(|i| Some((10.0 + i as f64 / 1000.0, ((i * 37) % 101) as f64)));
        let d = polyline(pts);
        assert!(d.starts_with("M10 0 l 0.1 0 L"), "{d}");
        assert_eq!(d.matches(['M', 'L']).count(), 3, "{d}");
        assert!(d.contains(" 100 L") && d.ends_with(" 98"), "{d}");
    }

    #[test]
    fn ticks_are_few_and_round() {
        assert_eq!(tick_interval(4 * 60_000 + 15_000), 30_000);
        assert_eq!(tick_interval(5 * 60_000), 60_000);
        assert_eq!(tick_interval(8 * 60_000), 60_000);
        assert_eq!(tick_interval(3_600_000), 600_000);
        assert_eq!(tick_interval(30_000), 5_000);
    }

    #[test]
    fn wrap_breaks_at_spaces_and_marks_truncation() {
        assert_eq!(
            wrap("p99 WAL fsync duration", 10, 3),
            vec!["p99 WAL", "fsync", "duration"]
        );
        assert_eq!(wrap("a b c d", 1, 2), vec!["a", "b…"]);
    }
}
