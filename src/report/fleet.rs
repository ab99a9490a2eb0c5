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
    writeln!(out, "\n{} clusters: {}", fleet.len(), counts(fleet))
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

/// The HTML id of each cluster's section, in [`sorted`] order: `cluster-`
/// and the name with every character other than ASCII letters, digits, `-`
/// and `_` replaced by `_` (`-2`, `-3`… when two names give the same id).
fn anchors(sorted: &[&(String, Report)]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    sorted
        .iter()
        .map(|(c, _)| {
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
fn counts(fleet: &[(String, Report)]) -> String {
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
    use crate::report::html::{self, esc};
    use std::fmt::Write as _;
    let sorted = sorted(fleet);
    let ids = anchors(&sorted);
    let mut h = String::with_capacity(64 * 1024 * fleet.len().max(1));
    let title = format!("fleet of {} clusters by {label}: {}", fleet.len(), counts(fleet));
    html::head(&mut h, &title, FLEET_CSS);
    let worst = worst(fleet).map(|s| s.as_str()).unwrap_or("inconclusive");
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
    for ((c, r), id) in sorted.iter().zip(&ids) {
        let cells = row(c, r);
        let status = r.status.as_str();
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
    for ((c, r), id) in sorted.iter().zip(&ids) {
        let status = r.status.as_str();
        let mut body = String::new();
        html::body(&mut body, r);
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
    if let Some((_, r)) = sorted.first() {
        html::footer(&mut h, r);
    }
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

/// Writes [`html_document`].
pub fn render_html(label: &str, fleet: &[(String, Report)], out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(html_document(label, fleet).as_bytes())
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
pub fn render_markdown(label: &str, fleet: &[(String, Report)], out: &mut dyn Write) -> std::io::Result<()> {
    let sorted = sorted(fleet);
    let ids = anchors(&sorted);
    writeln!(out, "# cptriage fleet: {} clusters by `{label}`\n", fleet.len())?;
    writeln!(out, "{}\n", counts(fleet))?;
    writeln!(
        out,
        "| {} | status | root cause | where | since | downstream |",
        md(label)
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for ((c, r), id) in sorted.iter().zip(&ids) {
        let cells = row(c, r);
        writeln!(
            out,
            "| [{}](#{id}) | {} | {} |",
            md(c),
            if r.status == Status::Healthy {
                cells[1].clone()
            } else {
                format!("**{}**", cells[1])
            },
            cells[2..].iter().map(|x| md(x)).collect::<Vec<_>>().join(" | ")
        )?;
    }
    for ((c, r), id) in sorted.iter().zip(&ids) {
        writeln!(out, "\n<a id=\"{id}\"></a>\n")?;
        crate::report::markdown::render_titled(
            r,
            &format!("{} {}: {}", md(label), md(c), r.status.as_str()),
            out,
        )?;
    }
    Ok(())
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
