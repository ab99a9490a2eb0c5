//! Fleet reports (`diagnose --prometheus URL --by cluster -o html|markdown`):
//! a fleet built from shipped scenarios (each diagnosed as the scenario tests
//! do) plus a cluster that could not be judged, rendered as one HTML page
//! opened in headless Chromium, and as Markdown; then one run end to end
//! against a real Prometheus whose clusters cannot all be judged.

use std::io::Write as _;
use std::path::Path;

use crate::html_report::run_chromium;
use crate::scenarios;
use crate::support::promrun;

use cptriage::report::fleet;
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{Report, Status};
use serde_json::Value;

const EVIL: &str = "prod\"><script>alert(1)</script><img src=x onerror=alert(2)>";

/// Three scenarios and an unusable cluster whose name is markup.
fn fleet_of_scenarios() -> Vec<(String, Report)> {
    let rules = RuleSet::default_rules().expect("shipped rules");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/scenarios");
    let mut v: Vec<(String, Report)> = [
        ("c-healthy", "healthy"),
        ("c-disk", "etcd-disk-slow-one-member"),
        ("c-apf", "apf-queue-full"),
    ]
    .iter()
    .map(|(c, s)| {
        let (_, r) = scenarios::diagnose(&dir.join(format!("{s}.yaml")), &rules);
        (c.to_string(), r)
    })
    .collect();
    let t = v[0].1.window.to;
    v.push((
        EVIL.to_string(),
        Report::unusable(&rules, "no `up` sample in the window", Vec::new(), t, 2),
    ));
    v
}

fn axis_of(r: &Report) -> Option<String> {
    r.verdict.root_cause.as_ref().map(|rc| match &rc.sub_axis {
        Some(s) => format!("{}/{s}", rc.axis),
        None => rc.axis.clone(),
    })
}

/// What the probe reads from the laid-out fleet page.
const PROBE: &str = r#"<script>
(function () {
  const out = {};
  out.status = document.querySelector('main').dataset.status;
  out.counts = document.getElementById('fleet-counts').innerText;
  out.scripts = document.querySelectorAll('script').length;
  const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
  out.duplicate_ids = ids.filter((id, i) => ids.indexOf(id) !== i);
  out.rows = [...document.querySelectorAll('table.fleet tr[data-cluster]')].map((tr) => {
    const a = tr.querySelector('a');
    const target = document.getElementById(decodeURIComponent(a.hash.slice(1)));
    return { cluster: tr.dataset.cluster, link_text: a.innerText,
             cells: [...tr.querySelectorAll('td')].map((td) => td.innerText),
             target: target ? { cluster: target.dataset.cluster, status: target.dataset.status,
                                h1: target.querySelector('h1').innerText,
                                facts: target.querySelector('dl.facts').innerText,
                                evidence: !!target.querySelector('[id$="-evidence"]'),
                                timeline: !!target.querySelector('section[id$="-timeline"]') } : null };
  });
  out.sections = document.querySelectorAll('section.cluster').length;
  const pre = document.createElement('pre');
  pre.id = 'cptriage-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

fn probe(dir: &Path, page: &str) -> Value {
    let probed = page.replace("</body>", &format!("{PROBE}\n</body>"));
    assert_ne!(probed, page, "no </body>");
    let p = dir.join("fleet.probe.html");
    std::fs::write(&p, probed).expect("write page");
    let dom = run_chromium(&p, &["--dump-dom", "--virtual-time-budget=2000"]);
    let start = dom
        .find("<pre id=\"cptriage-probe\">")
        .unwrap_or_else(|| panic!("the probe did not run; DOM:\n{}", &dom[..dom.len().min(2000)]));
    let rest = &dom[start + "<pre id=\"cptriage-probe\">".len()..];
    let json = &rest[..rest.find("</pre>").expect("end of probe")];
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("probe output: {e}: {json}"))
}

#[test]
fn fleet_html_links_every_row_to_its_clusters_report_in_a_browser() {
    let fleet = fleet_of_scenarios();
    let page = fleet::html_document("cluster", &fleet);
    assert!(!page.contains("<script"), "no script, and the name is escaped");
    assert!(!page.contains("<img"), "the name is escaped");
    for bad in ["<link", "url(", "http://", "https://"] {
        assert!(!page.contains(bad), "the page fetches nothing: `{bad}`");
    }
    // ` src=` only in the (escaped) name.
    assert_eq!(
        page.matches(" src=").count(),
        page.matches("&lt;img src=").count()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let got = probe(dir.path(), &page);
    assert_eq!(got["scripts"], 1, "only the probe runs");
    assert_eq!(got["duplicate_ids"], serde_json::json!([]), "each id once");
    assert_eq!(got["sections"], fleet.len());
    let worst = fleet::worst(&fleet).expect("worst");
    assert_eq!(got["status"], worst.as_str());
    let rows = got["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), fleet.len(), "every cluster has a row");
    let mut last = u8::MAX;
    for row in rows {
        let name = row["cluster"].as_str().expect("cluster");
        let (_, r) = fleet
            .iter()
            .find(|(c, _)| c == name)
            .expect("a cluster of the fleet");
        assert!(fleet::severity(r.status) <= last, "sick first: {rows:?}");
        last = fleet::severity(r.status);
        assert_eq!(row["link_text"], name, "the name is text");
        assert_eq!(row["cells"][1], r.status.as_str());
        let t = &row["target"];
        assert!(t.is_object(), "{name}: the row's link resolves");
        assert_eq!(t["cluster"], name, "{name}: the link leads to its own section");
        assert_eq!(t["status"], r.status.as_str(), "{name}");
        let h1 = t["h1"].as_str().expect("h1");
        assert!(h1.starts_with(&r.status.as_str().to_uppercase()), "{name}: {h1}");
        match axis_of(r) {
            Some(axis) => {
                assert_eq!(row["cells"][2], axis.as_str(), "{name}");
                assert!(h1.contains(&axis), "{name}: {h1}");
                let rc = r.verdict.root_cause.as_ref().expect("root cause");
                for i in &rc.instances {
                    assert!(
                        t["facts"].as_str().unwrap_or_default().contains(i.as_str()),
                        "{name}: {i}"
                    );
                }
            }
            None => assert_eq!(row["cells"][2], "-", "{name}"),
        }
        assert!(
            t["timeline"].as_bool().unwrap_or(false),
            "{name}: its timeline section"
        );
    }
    let unusable = rows
        .iter()
        .find(|r| r["cluster"] == EVIL)
        .expect("the unusable cluster stays");
    assert_eq!(unusable["target"]["status"], "inconclusive");
    assert!(
        unusable["target"]["h1"]
            .as_str()
            .unwrap_or_default()
            .contains("no `up` sample"),
        "the reason is shown: {unusable}"
    );
    let n = |s: Status| fleet.iter().filter(|(_, r)| r.status == s).count();
    assert!(
        got["counts"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("{} degraded", n(Status::Degraded))),
        "{}",
        got["counts"]
    );
}

#[test]
fn single_cluster_body_is_what_each_fleet_section_shows() {
    let fleet = fleet_of_scenarios();
    let page = fleet::html_document("cluster", &fleet);
    let (_, disk) = fleet.iter().find(|(c, _)| c == "c-disk").expect("c-disk");
    let single = cptriage::report::html::document(disk);
    let body = &single[single.find("<header class=\"verdict\">").expect("verdict")
        ..single.find("<footer>").expect("footer")];
    let prefixed = body.replace(" id=\"", " id=\"cluster-c-disk-");
    assert!(
        page.contains(&prefixed),
        "the section is the single-cluster report"
    );
}

#[test]
fn fleet_markdown_has_a_table_then_one_section_per_cluster() {
    let fleet = fleet_of_scenarios();
    let mut out = Vec::new();
    fleet::render_markdown(
        "cluster",
        &fleet::entries("cluster", &fleet, fleet::Body::Markdown),
        &mut out,
    )
    .expect("render");
    let md = String::from_utf8(out).expect("utf-8");
    assert!(
        md.starts_with("# cptriage fleet: 4 clusters by `cluster`\n"),
        "{md}"
    );
    assert!(
        !md.contains("<script") && !md.contains("<img"),
        "the name is escaped:\n{md}"
    );
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| [")).collect();
    assert_eq!(rows.len(), fleet.len(), "{md}");
    let sorted = fleet::sorted(&fleet);
    let mut at = 0;
    for ((c, r), row) in sorted.iter().zip(&rows) {
        let link = &row[row.find("](#").expect("link") + 3..];
        let id = &link[..link.find(')').expect("link end")];
        assert!(md.contains(&format!("<a id=\"{id}\"></a>")), "{c}: anchor {id}");
        assert!(row.contains(r.status.as_str()), "{row}");
        if let Some(axis) = axis_of(r) {
            assert!(row.contains(&axis), "{row}");
        }
        // Sections follow the table's order, each under its cluster.
        let anchor = md.find(&format!("<a id=\"{id}\"></a>")).expect("anchor");
        assert!(anchor > at, "{c}: sections in the table's order");
        at = anchor;
        let heading = md[anchor..]
            .lines()
            .find(|l| l.starts_with("## "))
            .expect("heading");
        assert!(
            heading.ends_with(&format!(": {}", r.status.as_str())),
            "{heading}"
        );
        assert!(
            md[anchor..].contains(&r.verdict.summary.replace('\n', " ")) || r.verdict.summary.contains('\n')
        );
    }
}

fn om_time(t: i64) -> String {
    format!("{}.{:03}", t.div_euclid(1000), t.rem_euclid(1000))
}

/// Three clusters no diagnosis can judge (`down`: every `up` sample 0;
/// `etcd-only`: etcd members and nothing else; `bare`: one apiserver
/// target with no metric but `up`) are all in the JSON array, the table and
/// the HTML page, inconclusive or with their axes unknown, never healthy.
#[test]
fn clusters_that_cannot_be_judged_stay_in_the_fleet() {
    promrun::require();
    let dir = tempfile::tempdir().expect("tempdir");
    let om = dir.path().join("fleet.om.txt");
    let t0: i64 = 1_700_000_000_000;
    let steps = 33;
    let mut f = std::io::BufWriter::new(std::fs::File::create(&om).expect("create"));
    writeln!(f, "# TYPE up unknown").expect("write");
    let targets = [
        ("down", "apiserver", "apiserver-0", "0"),
        ("down", "etcd", "etcd-0", "0"),
        ("etcd-only", "etcd", "etcd-0", "1"),
        ("etcd-only", "etcd", "etcd-1", "1"),
        ("bare", "apiserver", "apiserver-0", "1"),
    ];
    for (c, role, inst, v) in targets {
        for i in 0..steps {
            writeln!(
                f,
                "up{{cluster=\"{c}\",instance=\"{inst}\",role=\"{role}\"}} {v} {}",
                om_time(t0 + i * 15_000)
            )
            .expect("write");
        }
    }
    writeln!(f, "# TYPE etcd_server_has_leader unknown").expect("write");
    for inst in ["etcd-0", "etcd-1"] {
        for i in 0..steps {
            writeln!(
                f,
                "etcd_server_has_leader{{cluster=\"etcd-only\",instance=\"{inst}\",role=\"etcd\"}} 1 {}",
                om_time(t0 + i * 15_000)
            )
            .expect("write");
        }
    }
    f.write_all(b"# EOF\n").expect("write");
    drop(f);
    let tsdb = dir.path().join("tsdb");
    std::fs::create_dir_all(&tsdb).expect("mkdir");
    promrun::create_blocks(&om, &tsdb).expect("create blocks");
    let prom = promrun::Prometheus::start(&tsdb, "1m").expect("start prometheus");
    let url = format!("http://127.0.0.1:{}", prom.port);
    let fmt = |t: i64| {
        chrono::DateTime::from_timestamp_millis(t)
            .expect("time")
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    let run = |output: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
            .args(["diagnose", "--prometheus", &url, "--by", "cluster"])
            .args(["--apiserver-selector", r#"{role="apiserver"}"#])
            .args(["--etcd-selector", r#"{role="etcd"}"#])
            .args(["--controller-selector", r#"{role="controller"}"#])
            .args([
                "--from",
                &fmt(t0),
                "--to",
                &fmt(t0 + (steps - 1) * 15_000),
                "--step",
                "15s",
            ])
            .args(["-o", output])
            .output()
            .expect("run cptriage");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, json, err) = run("json");
    let v: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("json: {e}\n{err}"));
    let arr = v.as_array().unwrap_or_else(|| panic!("an array: {json}"));
    let mut names: Vec<&str> = arr.iter().filter_map(|x| x["cluster"].as_str()).collect();
    names.sort();
    assert_eq!(names, ["bare", "down", "etcd-only"], "{err}");
    for x in arr {
        assert_ne!(
            x["status"], "healthy",
            "{}: nothing was checked: {x}",
            x["cluster"]
        );
        assert_eq!(x["status"], "inconclusive", "{}", x["cluster"]);
    }
    assert_eq!(
        code,
        Some(3),
        "an inconclusive fleet exits as unusable data: {err}"
    );
    let (_, table, err) = run("table");
    for c in ["bare", "down", "etcd-only"] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(&format!("{c} ")) && l.contains("inconclusive")),
            "{c}:\n{table}{err}"
        );
    }
    assert!(table.contains("3 clusters: 3 inconclusive"), "{table}");
    let (_, html, _) = run("html");
    for c in ["bare", "down", "etcd-only"] {
        assert!(
            html.contains(&format!(
                "<section class=\"cluster s-inconclusive\" id=\"cluster-{c}\""
            )),
            "{c}"
        );
        assert!(html.contains(&format!("href=\"#cluster-{c}\"")), "{c}");
    }
    let (_, md, _) = run("markdown");
    assert!(md.contains("3 inconclusive"), "{md}");
}

/// A Prometheus API that lists two clusters' `up` series and answers every
/// range query with a 500 (an overloaded Thanos): served on 127.0.0.1 until
/// the test process ends.
fn failing_api() -> String {
    use std::io::Read as _;
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let target = head.split(' ').nth(1).unwrap_or("/").to_string();
            let (status, body) = if target.starts_with("/api/v1/query_range") {
                (
                    500,
                    r#"{"status":"error","errorType":"internal","error":"store gateway overloaded"}"#
                        .to_string(),
                )
            } else if target.starts_with("/api/v1/query?") && target.contains("query=up") {
                let t0 = 1_767_225_600;
                let pts: Vec<String> = (0..=8).map(|i| format!("[{},\"1\"]", t0 + 15 * i)).collect();
                let series: Vec<String> = ["east", "west"]
                    .iter()
                    .map(|c| {
                        format!(
                            r#"{{"metric":{{"__name__":"up","job":"etcd","instance":"etcd-0","cluster":"{c}"}},"values":[{}]}}"#,
                            pts.join(",")
                        )
                    })
                    .collect();
                (
                    200,
                    format!(
                        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#,
                        series.join(",")
                    ),
                )
            } else if target.starts_with("/api/v1/query") {
                (
                    200,
                    r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.to_string(),
                )
            } else if target.starts_with("/api/v1/label/__name__/values") {
                (
                    200,
                    r#"{"status":"success","data":["up","etcd_server_has_leader"]}"#.to_string(),
                )
            } else {
                (404, "404 page not found".to_string())
            };
            let _ = write!(
                c,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// When Prometheus answers no signal query, every cluster is still reported
/// (inconclusive, with the error), and the run exits as unusable data.
#[test]
fn a_fleet_whose_queries_all_fail_still_lists_every_cluster() {
    let url = failing_api();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args(["diagnose", "--prometheus", &url, "--by", "cluster"])
        .args([
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-01T00:02:00Z",
            "-o",
            "json",
        ])
        .output()
        .expect("run cptriage");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("no signal could be queried from Prometheus"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("json: {e}\n{err}"));
    let arr = v.as_array().expect("array");
    let names: Vec<&str> = arr.iter().filter_map(|x| x["cluster"].as_str()).collect();
    assert_eq!(names.len(), 2, "{v}");
    assert!(names.contains(&"east") && names.contains(&"west"), "{names:?}");
    for x in arr {
        assert_eq!(x["status"], "inconclusive", "{x}");
        let w = x["warnings"].to_string();
        assert!(
            w.contains("store gateway overloaded") || w.contains("no signal could be queried"),
            "{w}"
        );
    }
}
