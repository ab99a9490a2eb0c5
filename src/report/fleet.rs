//! Fleet mode (`diagnose --by LABEL`): one row per cluster, sick first, and
//! the JSON array of per-cluster verdicts.
//!
//! A fleet of hundreds of clusters is judged shard by shard; each cluster's
//! report becomes an [`Entry`] as soon as it is judged (its row, its status
//! and its report rendered in the output format, compressed), so memory
//! follows the shard being judged, not the fleet.

use std::io::{Read, Write};

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

/// The worst status of the fleet's entries (`None` for an empty fleet).
pub fn worst_entry<'a>(fleet: impl IntoIterator<Item = &'a Entry>) -> Option<Status> {
    fleet.into_iter().map(|e| e.status).max_by_key(|s| severity(*s))
}

/// The fleet's order: sick first, then by name.
fn order(a: (&str, Status), b: (&str, Status)) -> std::cmp::Ordering {
    severity(b.1).cmp(&severity(a.1)).then_with(|| a.0.cmp(b.0))
}

/// The clusters sick first, then by name.
pub fn sorted(fleet: &[(String, Report)]) -> Vec<&(String, Report)> {
    let mut v: Vec<&(String, Report)> = fleet.iter().collect();
    v.sort_by(|a, b| order((&a.0, a.1.status), (&b.0, b.1.status)));
    v
}

/// The entries sick first, then by name.
fn sorted_entries(fleet: &[Entry]) -> Vec<&Entry> {
    let mut v: Vec<&Entry> = fleet.iter().collect();
    v.sort_by(|a, b| order((&a.cluster, a.status), (&b.cluster, b.status)));
    v
}

/// What each cluster's report is kept as until the fleet is written: the
/// fleet's output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// The table: the row alone.
    Row,
    /// A v1 verdict with its `cluster`, an element of the JSON array.
    Json,
    /// The cluster's HTML report (its element ids not yet prefixed).
    Html,
    /// The cluster's Markdown section.
    Markdown,
}

/// One judged cluster of a fleet.
#[derive(Debug)]
pub struct Entry {
    pub cluster: String,
    pub status: Status,
    /// The table row ([`row`]).
    pub row: [String; 6],
    /// The report rendered as [`Body`] says, gzip-compressed (a verdict's
    /// per-step evidence is about a megabyte of JSON; compressed, a tenth).
    body: Vec<u8>,
    /// The HTML footer (rules and version), for [`Body::Html`].
    footer: String,
}

impl Entry {
    /// The entry of `cluster` (a value of the fleet label `label`) judged as
    /// `r`, its report rendered as `body`.
    pub fn new(label: &str, cluster: &str, r: &Report, body: Body) -> Entry {
        let text = match body {
            Body::Row => String::new(),
            Body::Json => {
                let mut d = crate::report::json::document(r);
                if let J::Object(m) = &mut d {
                    m.insert("cluster".into(), J::String(cluster.to_string()));
                }
                serde_json::to_string_pretty(&d).unwrap_or_default()
            }
            Body::Html => {
                let mut h = String::new();
                crate::report::html::body(&mut h, r);
                h
            }
            Body::Markdown => {
                let mut out = Vec::new();
                let title = format!("{} {}: {}", md(label), md(cluster), r.status.as_str());
                let _ = crate::report::markdown::render_titled(r, &title, &mut out);
                String::from_utf8(out).unwrap_or_default()
            }
        };
        let mut footer = String::new();
        if body == Body::Html {
            crate::report::html::footer(&mut footer, r);
        }
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        // Writing to a Vec cannot fail.
        let _ = z.write_all(text.as_bytes());
        Entry {
            cluster: cluster.to_string(),
            status: r.status,
            row: row(cluster, r),
            body: z.finish().unwrap_or_default(),
            footer,
        }
    }

    /// The rendered report.
    fn body(&self) -> String {
        let mut s = String::new();
        // The bytes were compressed from a String just before.
        let _ = flate2::read::GzDecoder::new(self.body.as_slice()).read_to_string(&mut s);
        s
    }
}

/// Every cluster's entry, rendered as `body`.
pub fn entries(label: &str, fleet: &[(String, Report)], body: Body) -> Vec<Entry> {
    fleet.iter().map(|(c, r)| Entry::new(label, c, r, body)).collect()
}

/// One row's cells: cluster, status, root cause, where, since, downstream.
pub fn row(cluster: &str, r: &Report) -> [String; 6] {
    let rc = r.verdict.failing();
    let cause = rc
        .map(
            |c| match (&r.verdict.undecided, &r.verdict.recovery_unconfirmed) {
                (Some(_), _) => format!("{} (cause undecided)", c.axis_id()),
                (None, Some(_)) => format!("{} (recovery not confirmed)", c.axis_id()),
                (None, None) => c.axis_id(),
            },
        )
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
            .map(|d| format!("{} +{}", d.axis_id(), crate::timefmt::format_lag(d.lag_ms)))
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
pub fn render_table(label: &str, fleet: &[Entry], out: &mut dyn Write) -> std::io::Result<()> {
    let head = [
        label.to_uppercase(),
        "STATUS".into(),
        "ROOT CAUSE".into(),
        "WHERE".into(),
        "SINCE".into(),
        "DOWNSTREAM".into(),
    ];
    let rows: Vec<&[String; 6]> = sorted_entries(fleet).into_iter().map(|e| &e.row).collect();
    let mut width = [0usize; 6];
    for r in std::iter::once(&head).chain(rows.iter().copied()) {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in std::iter::once(&head).chain(rows.iter().copied()) {
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
    writeln!(out, "\n{} clusters: {}", fleet.len(), counts(fleet))
}

/// The HTML id of each cluster's section, in [`sorted`] order: `cluster-`
/// and the name with every character other than ASCII letters, digits, `-`
/// and `_` replaced by `_` (`-2`, `-3`… when two names give the same id).
fn anchors(sorted: &[&Entry]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    sorted
        .iter()
        .map(|e| {
            let c = &e.cluster;
            let slug: String = c
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                        ch
                    } else {
                        '_'
                    }
                })
                .collect();
            let base = format!("cluster-{slug}");
            let mut id = base.clone();
            let mut n = 1;
            while !seen.insert(id.clone()) {
                n += 1;
                id = format!("{base}-{n}");
            }
            id
        })
        .collect()
}

/// `3 degraded, 1 inconclusive, 46 healthy`.
fn counts(fleet: &[Entry]) -> String {
    let mut counts = Vec::new();
    for s in [
        Status::Degraded,
        Status::Inconclusive,
        Status::Recovered,
        Status::Healthy,
    ] {
        let n = fleet.iter().filter(|e| e.status == s).count();
        if n > 0 {
            counts.push(format!("{n} {}", s.as_str()));
        }
    }
    counts.join(", ")
}

const FLEET_CSS: &str = "
table.fleet td a{color:inherit}
table.fleet td.status span{display:inline-block;padding:0 8px;border-radius:4px;color:#fff;background:var(--grey)}
table.fleet tr.s-degraded td.status span{background:var(--red)}
table.fleet tr.s-recovered td.status span{background:var(--amber)}
table.fleet tr.s-healthy td.status span{background:var(--green)}
section.cluster{margin-top:40px;padding-top:8px;border-top:3px solid var(--line)}
section.cluster>h2.cluster{border:0;font-size:20px}
";

/// The fleet as one self-contained HTML page: the fleet table (sick first,
/// each row linking to its cluster's section, a count per status), then
/// each cluster's full report as `diagnose -o html` shows it. The element
/// ids of a cluster's report are prefixed with its section's id, so the page
/// holds each id once.
pub fn html_document(label: &str, fleet: &[(String, Report)]) -> String {
    html_page(label, &entries(label, fleet, Body::Html))
}

/// [`html_document`] of entries rendered as [`Body::Html`].
pub fn html_page(label: &str, fleet: &[Entry]) -> String {
    use crate::report::html::{self, esc};
    use std::fmt::Write as _;
    let sorted = sorted_entries(fleet);
    let ids = anchors(&sorted);
    let mut h = String::with_capacity(64 * 1024 * fleet.len().max(1));
    let title = format!("fleet of {} clusters by {label}: {}", fleet.len(), counts(fleet));
    html::head(&mut h, &title, FLEET_CSS);
    let worst = worst_entry(fleet).map(|s| s.as_str()).unwrap_or("inconclusive");
    let _ = write!(
        h,
        "<main class=\"fleet s-{worst}\" data-status=\"{worst}\">\n\
         <header class=\"verdict\">\n<h1><span class=\"badge\">{}</span>{} clusters by <code>{}</code></h1>\n\
         <p class=\"summary\" id=\"fleet-counts\">{}</p>\n</header>\n\
         <section id=\"fleet\">\n<h2>Fleet</h2>\n<table class=\"fleet\">\n<tr><th>{}</th><th>status</th><th>root cause</th><th>where</th><th>since</th><th>downstream</th></tr>\n",
        esc(&worst.to_uppercase()),
        fleet.len(),
        esc(label),
        esc(&counts(fleet)),
        esc(label)
    );
    for (e, id) in sorted.iter().zip(&ids) {
        let (c, cells) = (&e.cluster, &e.row);
        let status = e.status.as_str();
        let _ = write!(
            h,
            "<tr class=\"s-{status}\" data-cluster=\"{}\"><td><a href=\"#{id}\">{}</a></td><td class=\"status\"><span>{status}</span></td>",
            esc(c),
            esc(c)
        );
        for cell in &cells[2..] {
            let _ = write!(h, "<td>{}</td>", esc(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n</section>\n");
    for (e, id) in sorted.iter().zip(&ids) {
        let (c, status) = (&e.cluster, e.status.as_str());
        let body = e.body();
        // Escaped text cannot hold `"`, so ` id="` is only ever markup.
        let body = body.replace(" id=\"", &format!(" id=\"{id}-"));
        let _ = write!(
            h,
            "<section class=\"cluster s-{status}\" id=\"{id}\" data-cluster=\"{}\" data-status=\"{status}\">\n\
             <h2 class=\"cluster\">{} <code>{}</code> <a class=\"note\" href=\"#fleet\">↑ fleet</a></h2>\n{body}</section>\n",
            esc(c),
            esc(label),
            esc(c)
        );
    }
    if let Some(e) = sorted.first() {
        h.push_str(&e.footer);
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// Writes [`html_page`].
pub fn render_html(label: &str, fleet: &[Entry], out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(html_page(label, fleet).as_bytes())
}

/// Text from the data as Markdown: table pipes, newlines and HTML markup
/// cannot break out of a table cell or a heading.
fn md(s: &str) -> String {
    crate::report::html::esc(s)
        .replace('|', "\\|")
        .replace('\n', " ")
        .replace('`', "\\`")
        .replace('*', "\\*")
        .replace('_', "\\_")
        .replace('[', "\\[")
        .replace(']', "\\]")
}

/// The fleet as Markdown: the fleet table (sick first, each cluster linking
/// to its section), the count per status, then one section per cluster as
/// `diagnose -o markdown` writes it.
pub fn render_markdown(label: &str, fleet: &[Entry], out: &mut dyn Write) -> std::io::Result<()> {
    let sorted = sorted_entries(fleet);
    let ids = anchors(&sorted);
    writeln!(out, "# cptriage fleet: {} clusters by `{label}`\n", fleet.len())?;
    writeln!(out, "{}\n", counts(fleet))?;
    writeln!(
        out,
        "| {} | status | root cause | where | since | downstream |",
        md(label)
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for (e, id) in sorted.iter().zip(&ids) {
        let (c, cells) = (&e.cluster, &e.row);
        writeln!(
            out,
            "| [{}](#{id}) | {} | {} |",
            md(c),
            if e.status == Status::Healthy {
                cells[1].clone()
            } else {
                format!("**{}**", cells[1])
            },
            cells[2..].iter().map(|x| md(x)).collect::<Vec<_>>().join(" | ")
        )?;
    }
    for (e, id) in sorted.iter().zip(&ids) {
        writeln!(out, "\n<a id=\"{id}\"></a>\n")?;
        out.write_all(e.body().as_bytes())?;
    }
    Ok(())
}

/// The fleet as JSON: an array of v1 verdicts, sick first, each with a
/// `cluster` field (the value of the fleet label), pretty-printed; the
/// entries are rendered as [`Body::Json`].
pub fn render_json(fleet: &[Entry], out: &mut dyn Write) -> std::io::Result<()> {
    let sorted = sorted_entries(fleet);
    if sorted.is_empty() {
        return writeln!(out, "[]");
    }
    out.write_all(b"[\n")?;
    for (i, e) in sorted.iter().enumerate() {
        // Each element indented as one level of a pretty array.
        let body = e.body();
        let mut lines = body.lines().peekable();
        while let Some(l) = lines.next() {
            write!(out, "  {l}")?;
            if lines.peek().is_some() {
                out.write_all(b"\n")?;
            }
        }
        out.write_all(if i + 1 < sorted.len() { b",\n" } else { b"\n" })?;
    }
    writeln!(out, "]")
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

    #[test]
    fn the_streamed_json_array_is_serde_jsons_pretty_array() {
        let rules = crate::rules::load::RuleSet::default_rules().expect("rules");
        let fleet: Vec<(String, Report)> = ["b", "a"]
            .iter()
            .map(|c| {
                let r = Report::unusable(&rules, &format!("no data for {c}"), Vec::new(), 0, 1);
                (c.to_string(), r)
            })
            .collect();
        let mut out = Vec::new();
        render_json(&entries("cluster", &fleet, Body::Json), &mut out).expect("render");
        let want: Vec<J> = sorted(&fleet)
            .into_iter()
            .map(|(c, r)| {
                let mut d = crate::report::json::document(r);
                if let J::Object(m) = &mut d {
                    m.insert("cluster".into(), J::String(c.clone()));
                }
                d
            })
            .collect();
        let want = serde_json::to_string_pretty(&J::Array(want)).expect("json") + "\n";
        assert_eq!(String::from_utf8(out).expect("utf-8"), want);
        let mut out = Vec::new();
        render_json(&[], &mut out).expect("render");
        assert_eq!(out, b"[]\n");
    }
}
