//! The HTML incident report (`diagnose -o html`): one self-contained file to
//! attach to an incident channel or ticket. Inline CSS and inline SVG only: no
//! script, no font, no image and no link is fetched, so the file renders the
//! same offline, in a mail client or behind a proxy.
//!
//! It holds the verdict (status, root cause, where, since when, recovered or
//! not, downstream axes and ties), one timeline plot ([`plot`]), the warnings,
//! the next steps, the evidence of every lit axis, the walk of the tree, every
//! axis, what could not be checked and the sources. Every text that comes from
//! the data (target names, label values, notes) is escaped.

mod plot;

use std::fmt::Write as _;
use std::io::Write;

use super::headline::Headline;
use super::text::{timeline, value};
use crate::rules::report::{
    Answer, Availability, AxisReport, AxisState, Evidence, Report, RootCause, Status,
};
use crate::store::Millis;
use crate::timefmt::{format_duration, format_lag, format_time};

/// Escapes text for HTML element content and double- or single-quoted attributes.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

fn opt_time(t: Option<Millis>) -> String {
    t.map(format_time).unwrap_or_else(|| "—".into())
}

const CSS: &str = r#"
:root{--fg:#1d2329;--dim:#5f6b76;--line:#d5dbe1;--bg:#fff;--panel:#f6f8fa;
--red:#c62828;--amber:#b26a00;--green:#2e7d32;--grey:#6b7280}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 6px}
h3{font-size:15px;margin:16px 0 6px}
h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-size:15px;
letter-spacing:.04em;vertical-align:2px;margin-right:8px}
.s-degraded .badge{background:var(--red)}.s-recovered .badge{background:var(--amber)}
.s-healthy .badge{background:var(--green)}.s-inconclusive .badge{background:var(--grey)}
header.verdict{border-left:6px solid var(--grey);padding:10px 16px;background:var(--panel);border-radius:4px}
.s-degraded header.verdict{border-color:var(--red)}.s-recovered header.verdict{border-color:var(--amber)}
.s-healthy header.verdict{border-color:var(--green)}
.summary{color:var(--dim);margin:4px 0 10px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:0}
dl.facts dt{font-weight:600;color:var(--dim)}dl.facts dd{margin:0}
ul.warnings li{color:#8a4b00}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{text-align:left;vertical-align:top;padding:4px 8px;border-bottom:1px solid var(--line)}
th{background:var(--panel);font-weight:600}
td.num{text-align:right;white-space:nowrap}
tr.context td{color:var(--dim)}
.lit{color:var(--red);font-weight:600}.clear{color:var(--green)}.unknown,.not-checked{color:var(--grey)}
.ans-yes{color:var(--red);font-weight:600}.ans-no{color:var(--green)}.ans-unknown{color:var(--grey)}
figure{margin:8px 0}figcaption{color:var(--dim);font-size:12.5px}
svg.timeline{max-width:100%;height:auto;border:1px solid var(--line);border-radius:4px;background:#fff}
.note{color:var(--dim);font-size:12.5px}
ol.walk li{margin-bottom:6px}
details{margin:4px 0 12px}summary{cursor:pointer;color:var(--dim)}
footer{margin-top:32px;color:var(--dim);font-size:12px}
@media print{main{max-width:none;padding:0}header.verdict,figure,tr{break-inside:avoid}}
"#;

/// Writes the HTML report.
pub fn render(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(document(r).as_bytes())
}

/// The HTML report as a string.
pub fn document(r: &Report) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let status = r.status.as_str();
    head(&mut h, &headline(r), "");
    let _ = writeln!(h, "<main class=\"s-{status}\" data-status=\"{status}\">");
    body(&mut h, r);
    footer(&mut h, r);
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// The page up to `<body>`: the title, and the style every report shares
/// followed by `more_css`.
pub(crate) fn head(h: &mut String, title: &str, more_css: &str) {
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"cptriage {}\">\n\
         <title>cptriage: {}</title>\n<style>{CSS}{more_css}</style>\n</head>\n\
         <body>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title)
    );
}

/// The report of one cluster, from its verdict to its sources (what the
/// single-cluster page shows between `<main>` and its footer). Its element
/// ids are fixed (`warnings`, `timeline`, `evidence`, …).
pub(crate) fn body(h: &mut String, r: &Report) {
    verdict(h, r, &headline(r));
    if !r.warnings.is_empty() {
        h.push_str("<section id=\"warnings\">\n<h2>Warnings</h2>\n<ul class=\"warnings\">\n");
        for w in &r.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>\n</section>\n");
    }
    h.push_str("<section id=\"timeline\">\n<h2>Timeline</h2>\n");
    plot::figure(h, r);
    h.push_str("</section>\n");
    next_steps(h, r);
    beyond_the_tree(h, r);
    evidence(h, r);
    walk(h, r);
    axes(h, r);
    gaps(h, r);
    sources(h, r);
}

/// The footer: cptriage's version and the rules used.
pub(crate) fn footer(h: &mut String, r: &Report) {
    let _ = writeln!(
        h,
        "<footer>cptriage {} · rules {} ({} signals, {} questions, {} axes)</footer>",
        env!("CARGO_PKG_VERSION"),
        esc(&r.rules.origin),
        r.rules.signals,
        r.rules.nodes,
        r.rules.leaves
    );
}

/// The one-line answer: `DEGRADED: etcd/disk — etcd disk is slow …`.
pub(crate) fn headline(r: &Report) -> String {
    let h = Headline::of(r);
    match h.failing {
        Some(rc) => format!("{}: {} — {}", h.word(), rc.axis_id(), rc.title),
        None => h.word(),
    }
}

/// The verdict's header: the status badge and headline, the summary when no
/// axis is failing, and the facts, one per line.
fn verdict(h: &mut String, r: &Report, headline: &str) {
    let status = r.status.as_str();
    let rest = match headline.split_once(": ") {
        Some((_, rest)) => rest,
        None if r.status == Status::Healthy => "no failing axis",
        None => r
            .verdict
            .summary
            .strip_prefix("inconclusive: ")
            .unwrap_or(&r.verdict.summary),
    };
    let _ = write!(
        h,
        "<header class=\"verdict\">\n<h1><span class=\"badge\">{}</span>{}</h1>\n",
        esc(&status.to_uppercase()),
        esc(rest)
    );
    // With a root cause the facts below say what the summary says, one per line.
    if r.verdict.failing().is_none() {
        let _ = writeln!(h, "<p class=\"summary\">{}</p>", esc(&r.verdict.summary));
    }
    h.push_str("<dl class=\"facts\">\n");
    if let Some(rc) = r.verdict.failing() {
        failing_facts(h, r, rc);
    }
    sequel_facts(h, r);
    let sc = &r.scope;
    if !sc.observed.is_empty() || !sc.not_observed.is_empty() {
        let mut s = format!("observed: {}", esc(&or_none(&sc.observed)));
        let _ = write!(s, "; judged: {}", esc(&or_none(&sc.judged)));
        if !sc.not_observed.is_empty() {
            let _ = write!(
                s,
                "; <strong>not observed: {}</strong>",
                esc(&sc.not_observed.join(", "))
            );
        }
        fact(h, "Scope", "scope", &s);
    }
    let w = &r.window;
    fact(
        h,
        "Window",
        "window",
        &esc(&format!(
            "{} → {}, step {}, assessed at {}; baseline: {}",
            format_time(w.from),
            format_time(w.to),
            format_duration(w.step),
            format_time(w.at),
            w.baseline.description
        )),
    );
    h.push_str("</dl>\n</header>\n");
}

/// One fact of the verdict: `k` and the HTML `v`, with the element id `id`.
fn fact(h: &mut String, k: &str, id: &str, v: &str) {
    let _ = writeln!(h, "<dt>{k}</dt><dd id=\"{id}\">{v}</dd>");
}

/// The failing axis: why its cause is undecided, which axis, where, since
/// when, and whether it recovered.
fn failing_facts(h: &mut String, r: &Report, rc: &RootCause) {
    let head = Headline::of(r);
    if let Some(reason) = head.undecided_reason() {
        fact(h, "Cause undecided", "undecided", &esc(reason));
    }
    if let Some(reason) = head.recovery_reason() {
        fact(h, "Recovery not confirmed", "recovery-unconfirmed", &esc(reason));
    }
    fact(
        h,
        head.fact_name(),
        "root-cause",
        &format!(
            "<code>{}</code> ({}) — {}",
            esc(&rc.axis_id()),
            rc.severity,
            esc(&rc.title)
        ),
    );
    let mut where_ = if rc.instances.is_empty() {
        "—".to_string()
    } else {
        esc(&rc.instances.join(", "))
    };
    if let Some(l) = &rc.localisation {
        let _ = write!(where_, "<br><span class=\"note\">{}</span>", esc(l));
    }
    for n in &r.verdict.not_excluded {
        let _ = write!(where_, "<br><span class=\"note\">{}</span>", esc(&n.text));
    }
    for u in &rc.unreachable {
        let _ = write!(
            where_,
            "<br>{} stopped answering at {}{}",
            esc(&u.target),
            esc(&format_time(u.from)),
            u.until
                .map(|t| format!(" (again from {})", esc(&format_time(t))))
                .unwrap_or_default()
        );
    }
    if !rc.affected.is_empty() {
        let _ = write!(where_, "<br>also affected: {}", esc(&rc.affected.join(", ")));
    }
    fact(h, "Where", "where", &where_);
    fact(
        h,
        "Since",
        "since",
        &match rc.onset {
            Some(o) => esc(&format_time(o)),
            None => "— (a single snapshot has no onset)".into(),
        },
    );
    let rec = match (rc.recovered, rc.onset) {
        (Some(t), Some(o)) => format!(
            "<span class=\"clear\">yes</span>, at {} after {}",
            esc(&format_time(t)),
            esc(&format_lag(t.saturating_sub(o)))
        ),
        (Some(t), None) => format!("<span class=\"clear\">yes</span>, at {}", esc(&format_time(t))),
        (None, _) => format!(
            "<span class=\"lit\">no</span> — still failing at {}",
            esc(&format_time(r.window.at))
        ),
    };
    fact(h, "Recovered", "recovered", &rec);
}

/// What followed the failing axis, what tied with it, the assumptions and
/// the earlier episodes.
fn sequel_facts(h: &mut String, r: &Report) {
    let v = &r.verdict;
    if !v.downstream.is_empty() {
        let items: Vec<String> = v
            .downstream
            .iter()
            .map(|d| {
                format!(
                    "<code>{}</code> +{} (from {})",
                    esc(&d.axis_id()),
                    esc(&format_lag(d.lag_ms)),
                    esc(&format_time(d.onset))
                )
            })
            .collect();
        fact(h, "Downstream", "downstream", &items.join("<br>"));
    }
    if !v.ties.is_empty() {
        let items: Vec<String> = v.ties.iter().map(|t| esc(&t.note)).collect();
        fact(h, "Ties", "ties", &items.join("<br>"));
    }
    if !v.assumptions.is_empty() {
        let items: Vec<String> = v.assumptions.iter().map(|a| esc(a)).collect();
        fact(h, "Assumptions", "assumptions", &items.join("<br>"));
    }
    if !v.earlier.is_empty() {
        let items: Vec<String> = v
            .earlier
            .iter()
            .map(|e| {
                format!(
                    "<code>{}</code> {} → {}",
                    esc(&e.axis_id()),
                    esc(&format_time(e.onset)),
                    esc(&opt_time(e.recovered))
                )
            })
            .collect();
        fact(h, "Earlier episodes", "earlier", &items.join("<br>"));
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn next_steps(h: &mut String, r: &Report) {
    if r.runbook.is_empty() && r.falsifier.is_none() {
        return;
    }
    h.push_str("<section id=\"next-steps\">\n<h2>Next steps</h2>\n");
    if !r.runbook.is_empty() {
        h.push_str("<ol>\n");
        for s in &r.runbook {
            let _ = writeln!(h, "<li>{}</li>", esc(s));
        }
        h.push_str("</ol>\n");
    }
    if let Some(fz) = &r.falsification {
        h.push_str("<h3>What the verdict rests on</h3>\n<ul class=\"rests-on\">\n");
        for m in &fz.deciding {
            let _ = writeln!(h, "<li><code>{}</code> {}</li>", esc(&m.axis), esc(&m.text()));
        }
        h.push_str("</ul>\n");
        if !fz.cleared.is_empty() {
            h.push_str("<h3>Checked and clear</h3>\n<ul class=\"cleared\">\n");
            for m in &fz.cleared {
                let _ = writeln!(h, "<li><code>{}</code> {}</li>", esc(&m.axis), esc(&m.text()));
            }
            h.push_str("</ul>\n");
        }
    }
    if let Some(f) = &r.falsifier {
        let _ = writeln!(h, "<p><strong>This verdict is wrong if:</strong> {}</p>", esc(f));
    }
    if let Some(fz) = &r.falsification {
        let _ = writeln!(
            h,
            "<p id=\"adr\"><strong>For the decision record:</strong> {}</p>",
            esc(&fz.adr)
        );
    }
    h.push_str("</section>\n");
}

/// The advisories that hold and what audit logs (`--audit`) held, when the
/// report has them (the same lines as the terminal and Markdown renderings).
fn beyond_the_tree(h: &mut String, r: &Report) {
    if !r.advisories.is_empty() {
        h.push_str("<section id=\"advisories\">\n<h2>Advisories</h2>\n<ul>\n");
        for a in &r.advisories {
            let lines = super::audit::advisory_lines(a);
            let (first, rest) = lines
                .split_first()
                .map(|(f, r)| (f.as_str(), r))
                .unwrap_or(("", &[]));
            let _ = write!(h, "<li><strong>{}</strong>", esc(first));
            for l in rest {
                let _ = write!(h, "<br><span class=\"note\">{}</span>", esc(l));
            }
            h.push_str("</li>\n");
        }
        h.push_str("</ul>\n</section>\n");
    }
    logs_section(h, r);
    let Some(a) = &r.audit else { return };
    h.push_str("<section id=\"audit\">\n<h2>Audit logs</h2>\n<ul>\n");
    for c in r
        .verdict
        .corroboration
        .iter()
        .filter(|c| !c.text.starts_with("the logs "))
    {
        let _ = writeln!(
            h,
            "<li><strong>{}</strong>: {}</li>",
            esc(c.kind.as_str()),
            esc(&c.text)
        );
    }
    for l in super::audit::lines(a) {
        let _ = writeln!(h, "<li>{}</li>", esc(&l));
    }
    h.push_str("</ul>\n</section>\n");
}

/// What etcd and kube-apiserver logs (`--logs`) held, when given.
fn logs_section(h: &mut String, r: &Report) {
    let Some(a) = &r.logs else { return };
    h.push_str("<section id=\"logs\">\n<h2>Logs</h2>\n<ul>\n");
    for c in r
        .verdict
        .corroboration
        .iter()
        .filter(|c| c.text.starts_with("the logs "))
    {
        let _ = writeln!(
            h,
            "<li><strong>{}</strong>: {}</li>",
            esc(c.kind.as_str()),
            esc(&c.text)
        );
    }
    for l in &a.evidence {
        let _ = writeln!(h, "<li><code>{}</code></li>", esc(&super::logs::line_text(l)));
    }
    for l in super::logs::lines(a) {
        let _ = writeln!(h, "<li>{}</li>", esc(&l));
    }
    h.push_str("</ul>\n</section>\n");
}

/// Lit axes in verdict order: root cause, ties, downstream, then the others.
pub(crate) fn verdict_axes(r: &Report) -> Vec<(&AxisReport, &'static str)> {
    let mut wanted: Vec<(&str, &'static str)> = Vec::new();
    if let Some(rc) = r.verdict.failing() {
        wanted.push((&rc.leaf, "root-cause"));
    }
    wanted.extend(r.verdict.ties.iter().map(|t| (t.leaf.as_str(), "tie")));
    wanted.extend(
        r.verdict
            .downstream
            .iter()
            .map(|d| (d.leaf.as_str(), "downstream")),
    );
    wanted.extend(
        r.axes
            .iter()
            .filter(|a| a.state == AxisState::Lit)
            .map(|a| (a.leaf.as_str(), "other")),
    );
    let mut out: Vec<(&AxisReport, &'static str)> = Vec::new();
    for (leaf, role) in wanted {
        if let Some(a) = r.axes.iter().find(|a| a.leaf == leaf) {
            if !out.iter().any(|(b, _)| b.leaf == a.leaf) {
                out.push((a, role));
            }
        }
    }
    out
}

fn role_text(role: &str) -> &'static str {
    match role {
        "root-cause" => "root cause",
        "tie" => "tie",
        "downstream" => "downstream",
        _ => "also failing",
    }
}

fn evidence(h: &mut String, r: &Report) {
    let lit = verdict_axes(r);
    if lit.is_empty() {
        return;
    }
    h.push_str("<section id=\"evidence\">\n<h2>Evidence</h2>\n");
    for (a, role) in lit {
        let _ = writeln!(
            h,
            "<h3><code>{}</code> ({}) — {} <span class=\"note\">{}</span></h3>",
            esc(&a.axis_id()),
            a.severity,
            esc(&a.title),
            role_text(role)
        );
        if let Some(l) = &a.localisation {
            let _ = writeln!(h, "<p>{}</p>", esc(l));
        }
        // The signals that lit first; the rest (clear, context only, not
        // exposed) folded away.
        let lit_in_window =
            |e: &&Evidence| e.lit == Some(true) || e.instance_lit.values().any(|v| v.contains(&Some(true)));
        let (mut first, mut rest): (Vec<&Evidence>, Vec<&Evidence>) =
            a.evidence.iter().partition(lit_in_window);
        if first.is_empty() {
            std::mem::swap(&mut first, &mut rest);
        }
        evidence_table(h, &first);
        if !rest.is_empty() {
            let _ = writeln!(
                h,
                "<details><summary>{} more signal(s) of <code>{}</code>: under the threshold, context only, or not exposed</summary>",
                rest.len(),
                esc(&a.axis_id())
            );
            evidence_table(h, &rest);
            h.push_str("</details>\n");
        }
    }
    h.push_str("</section>\n");
}

fn evidence_table(h: &mut String, rows: &[&Evidence]) {
    h.push_str(
        "<table class=\"evidence\">\n<tr><th>signal</th><th>value</th><th>threshold</th><th>baseline</th><th>per instance</th></tr>\n",
    );
    for e in rows {
        evidence_row(h, e);
    }
    h.push_str("</table>\n");
}

fn evidence_row(h: &mut String, e: &Evidence) {
    let mark = match e.lit {
        Some(true) => " <span class=\"lit\">◀ lit</span>",
        _ => "",
    };
    let val = match e.availability {
        Availability::Evaluated => esc(&value(e.unit, e.value)),
        other => format!(
            "<span class=\"not-checked\">{}</span>",
            esc(&serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default())
        ),
    };
    let per: Vec<String> = e
        .instances
        .iter()
        .map(|i| {
            let v = esc(&format!("{} {}", i.instance, value(e.unit, i.value)));
            if i.lit == Some(true) {
                format!("<span class=\"lit\">{v}</span>")
            } else {
                v
            }
        })
        .collect();
    let mut desc = format!(
        "{}<br><code class=\"note\">{}</code>",
        esc(&e.description),
        esc(&e.signal)
    );
    if e.context {
        desc.push_str(" <span class=\"note\">(context, does not decide)</span>");
    }
    if e.since_start {
        desc.push_str(" <span class=\"note\">(since the process started)</span>");
    }
    if let Some(n) = &e.note {
        let _ = write!(desc, "<br><span class=\"note\">{}</span>", esc(n));
    }
    if !e.contributors.is_empty() {
        let c: Vec<String> = e.contributors.iter().take(3).map(|c| esc(&c.text())).collect();
        let more = e.contributors.len().saturating_sub(3);
        let _ = write!(
            desc,
            "<br><span class=\"contributors\">who contributes: {}{}</span>",
            c.join("; "),
            if more > 0 {
                format!("; {more} more")
            } else {
                String::new()
            }
        );
    }
    if let Some(n) = &e.contributors_note {
        let _ = write!(desc, "<br><span class=\"note\">{}</span>", esc(n));
    }
    let _ = writeln!(
        h,
        "<tr class=\"{}\" data-signal=\"{}\"><td>{desc}</td><td class=\"num\">{val}{mark}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
        if e.context { "context" } else { "deciding" },
        esc(&e.signal),
        esc(&e.threshold_text),
        esc(&value(e.unit, e.baseline)),
        per.join("<br>")
    );
}

fn walk(h: &mut String, r: &Report) {
    if r.path.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<section id=\"walk\">\n<h2>Tree walk at {}</h2>\n<ol class=\"walk\">",
        esc(&format_time(r.window.at))
    );
    for p in &r.path {
        let (cls, ans) = match p.answer {
            Answer::Yes => ("ans-yes", "yes"),
            Answer::No => ("ans-no", "no"),
            Answer::Unknown => ("ans-unknown", "unknown"),
        };
        let vals: Vec<String> = p
            .signals
            .iter()
            .map(|s| {
                let v = esc(&format!(
                    "{} = {} ({})",
                    s.signal,
                    value(s.unit, s.value),
                    s.threshold_text
                ));
                if s.lit == Some(true) {
                    format!("<span class=\"lit\">{v}</span>")
                } else {
                    v
                }
            })
            .collect();
        let _ = write!(
            h,
            "<li>{} — <span class=\"{cls}\">{ans}</span><br><span class=\"note\">{}</span>",
            esc(&p.question),
            vals.join("; ")
        );
        if let Some(n) = &p.note {
            let _ = write!(h, "<br><span class=\"note\">{}</span>", esc(n));
        }
        // Where the walk ends, in the words of the report (an axis, or healthy).
        if let Some(a) = r.axes.iter().find(|a| a.leaf == p.next) {
            let _ = write!(h, "<br>→ <code>{}</code> — {}", esc(&a.axis_id()), esc(&a.title));
        } else if p.next == crate::rules::HEALTHY {
            h.push_str("<br>→ healthy");
        }
        h.push_str("</li>\n");
    }
    h.push_str("</ol>\n</section>\n");
}

fn axes(h: &mut String, r: &Report) {
    h.push_str(
        "<section id=\"axes\">\n<h2>Every axis</h2>\n<table class=\"axes\">\n<tr><th>axis</th><th>sev</th><th>state</th><th>onset</th><th>recovered</th><th>instances</th><th>timeline</th></tr>\n",
    );
    for a in &r.axes {
        let (cls, state) = match a.state {
            AxisState::Lit => ("lit", "LIT"),
            AxisState::Clear => ("clear", "clear"),
            AxisState::Unknown => ("unknown", "unknown"),
            AxisState::NotChecked => ("not-checked", "not checked"),
        };
        let _ = writeln!(
            h,
            "<tr data-axis=\"{}\"><td><code>{}</code><br><span class=\"note\">{}</span></td><td>{}</td><td class=\"{cls}\">{state}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
            esc(&a.axis_id()),
            esc(&a.axis_id()),
            esc(&a.note.clone().unwrap_or_else(|| a.title.clone())),
            a.severity,
            esc(&opt_time(a.onset)),
            esc(&opt_time(a.recovered)),
            esc(&a.instances.join(", ")),
            esc(&timeline(&a.timeline))
        );
    }
    h.push_str("</table>\n</section>\n");
}

fn gaps(h: &mut String, r: &Report) {
    if r.gaps.is_empty() {
        return;
    }
    h.push_str("<section id=\"gaps\">\n<h2>Not checked</h2>\n<ul>\n");
    for g in &r.gaps {
        let _ = writeln!(
            h,
            "<li><code>{}</code>: {}</li>",
            esc(&g.subject),
            esc(&g.message)
        );
    }
    h.push_str("</ul>\n</section>\n");
}

fn sources(h: &mut String, r: &Report) {
    if r.sources.is_empty() {
        return;
    }
    h.push_str(
        "<section id=\"sources\">\n<h2>Sources</h2>\n<table class=\"sources\">\n<tr><th>target</th><th>role</th><th>version</th><th>snapshots</th><th>first → last</th><th>time from</th><th>notes</th></tr>\n",
    );
    for s in &r.sources {
        let mut notes = Vec::new();
        if !s.restarts.is_empty() {
            let t: Vec<String> = s.restarts.iter().map(|t| format_time(*t)).collect();
            notes.push(format!("restarts at {}", t.join(", ")));
        }
        if s.failed_scrapes > 0 {
            notes.push(format!("{} failed scrape(s)", s.failed_scrapes));
        }
        for [a, b] in &s.missing {
            notes.push(format!("no data {} → {}", format_time(*a), format_time(*b)));
        }
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}<br><span class=\"note\">{}</span></td><td>{}</td><td class=\"num\">{}</td><td>{} → {}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.target),
            esc(&s.role),
            esc(&s.role_reason),
            esc(s.version.as_deref().unwrap_or("—")),
            s.snapshots,
            esc(&opt_time(s.first)),
            esc(&opt_time(s.last)),
            esc(&s.time_source),
            esc(&notes.join("; "))
        );
    }
    h.push_str("</table>\n</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_data_is_an_inconclusive_page_without_a_timeline() {
        let rules = crate::rules::load::RuleSet::default_rules().expect("shipped rules");
        let r = Report::unusable(
            &rules,
            "every scrape failed",
            vec!["apiserver-0: <refused> & gone".into()],
            1_767_225_600_000,
            2,
        );
        let page = document(&r);
        assert!(page.contains("data-status=\"inconclusive\""));
        assert!(page.contains("<h1><span class=\"badge\">INCONCLUSIVE</span>every scrape failed</h1>"));
        assert!(page.contains("id=\"no-timeline\""));
        assert!(!page.contains("<svg"));
        assert!(page.contains("apiserver-0: &lt;refused&gt; &amp; gone"));
    }

    #[test]
    fn advisories_are_shown_escaped() {
        use crate::rules::report::{AdvisoryEvidence, AdvisoryReport};
        let rules = crate::rules::load::RuleSet::default_rules().expect("shipped rules");
        let mut r = Report::unusable(&rules, "test", vec![], 1_767_225_600_000, 2);
        r.advisories.push(AdvisoryReport {
            id: "kine".into(),
            title: "the backend is Kine <sql>".into(),
            since: 1_767_225_600_000,
            holds_at_end: true,
            advice: "size the SQL database".into(),
            falsifier: "an etcd version is exposed".into(),
            evidence: vec![AdvisoryEvidence {
                signal: "s".into(),
                description: "etcd version".into(),
                value: None,
                value_text: "absent".into(),
                threshold: "absent".into(),
            }],
            not_applicable: vec!["etcd/raft".into()],
            reason: None,
        });
        let page = document(&r);
        assert!(page.contains("<section id=\"advisories\">"));
        assert!(page.contains(
            "<strong>[kine] the backend is Kine &lt;sql&gt; (since 2026-01-01T00:00:00Z)</strong>"
        ));
        assert!(page.contains("advice (ADR): size the SQL database"));
        assert!(
            !page.contains("<section id=\"audit\">"),
            "no audit section without --audit"
        );
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<img src="x" onerror='y'>&"#),
            "&lt;img src=&quot;x&quot; onerror=&#39;y&#39;&gt;&amp;"
        );
    }
}
