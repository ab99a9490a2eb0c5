//! Every renderer's output pinned byte for byte: for each shipped scenario
//! (`testdata/scenarios/*.yaml`) the wide table at 120 columns, Markdown and
//! JSON (gzip-compressed: about 400 KB each); for the shipped capture (`testdata/captures/bitter-zone-etcd-first`)
//! the same plus the HTML page, through the `cptriage` binary. The files live
//! in `testdata/snapshots/reports/`; a refactoring that changes any report
//! fails here. After a deliberate change:
//! `CPTRIAGE_BLESS=1 cargo test --test it report_snapshots::` (review the diff).

use crate::scenarios;
use crate::support::{self, snapshot};

use std::path::Path;

use cptriage::report::page::RenderOpts;
use cptriage::report::{json, markdown, table};

const CAPTURE: &str = "testdata/captures/bitter-zone-etcd-first";

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/snapshots/reports")
}

fn text(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut buf = Vec::new();
    f(&mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

#[test]
fn every_report_matches_its_snapshot() {
    let mut files = Vec::new();
    let all = scenarios::reports();
    assert!(all.len() >= 16, "expected the scenario set, found {}", all.len());
    let opts = RenderOpts {
        width: 120,
        color: false,
    };
    for (name, r) in &all {
        files.push((format!("{name}.wide.txt"), text(|b| table::render(r, &opts, b))));
        files.push((format!("{name}.md"), text(|b| markdown::render(r, b))));
        files.push((format!("{name}.json.gz"), text(|b| json::render(r, b))));
    }
    for (ext, args) in [
        ("wide.txt", &["-o", "wide"][..]),
        ("md", &["-o", "markdown"]),
        ("json.gz", &["-o", "json"]),
        ("html", &["-o", "html"]),
    ] {
        let argv = [&["diagnose", "--color", "never", "--dump", CAPTURE][..], args].concat();
        let out = support::Cptriage::new(&argv).env("COLUMNS", "120").output();
        assert_eq!(out.status.code(), Some(1), "the capture is degraded: {out:?}");
        files.push((
            format!("capture-bitter-zone-etcd-first.{ext}"),
            String::from_utf8(out.stdout).unwrap(),
        ));
    }
    let problems = snapshot::check_dir(&dir(), &[".txt", ".md", ".json.gz", ".html"], &files);
    assert!(
        problems.is_empty(),
        "{}\n\nafter a deliberate change: CPTRIAGE_BLESS=1 cargo test --test it report_snapshots::",
        problems.join("\n\n")
    );
}

fn render_paths_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/snapshots/render-paths")
}

/// The renderings above, through the ways a renderer branches: `-o wide` at
/// 80 columns (the evidence as a list) and in colour, every scenario's HTML
/// page (the verdict facts and the timeline plot), and a failing axis whose
/// cause is undecided (the same report with its root cause demoted) in every
/// format. Gzip-compressed, one file per scenario and kind, in
/// `testdata/snapshots/render-paths/`.
#[test]
fn every_rendering_path_matches_its_snapshot() {
    use cptriage::report::html;
    use cptriage::report::page::first_page;
    use cptriage::rules::report::{Undecided, UnreadCause};

    let all = scenarios::reports();
    assert!(all.len() >= 16, "expected the scenario set, found {}", all.len());
    let narrow = RenderOpts {
        width: 80,
        color: false,
    };
    let colour = RenderOpts {
        width: 120,
        color: true,
    };
    let mut files = Vec::new();
    for (name, r) in &all {
        let mut s = String::from("=== wide, 80 columns\n");
        s.push_str(&text(|b| table::render(r, &narrow, b)));
        s.push_str("=== wide, 120 columns, colour\n");
        s.push_str(&text(|b| table::render(r, &colour, b)));
        s.push_str("=== first page, 120 columns, colour\n");
        s.push_str(&first_page(r, &colour));
        files.push((format!("{name}.text.gz"), s));
        files.push((format!("{name}.html.gz"), html::document(r)));
        let Some(rc) = r.verdict.root_cause.clone() else {
            continue;
        };
        let mut u = r.clone();
        u.verdict.root_cause = None;
        u.verdict.undecided = Some(Undecided {
            failing: rc,
            unread: vec![UnreadCause {
                cause: "etcd-latency".into(),
                title: "etcd latency".into(),
                signals: vec!["etcd_request_p99".into()],
                reasons: vec!["no etcd_request_duration_seconds_bucket".into()],
                remedy: Some("scrape etcd".into()),
            }],
            text: "cause undecided: etcd latency could not be read (no etcd_request_duration_seconds_bucket)"
                .into(),
        });
        let mut s = String::new();
        for width in [80, 120] {
            s.push_str(&format!("=== first page, {width} columns\n"));
            s.push_str(&first_page(&u, &RenderOpts { width, color: false }));
        }
        s.push_str("=== wide, 120 columns, colour\n");
        s.push_str(&text(|b| table::render(&u, &colour, b)));
        s.push_str("=== markdown\n");
        s.push_str(&text(|b| markdown::render(&u, b)));
        s.push_str("=== json\n");
        s.push_str(&text(|b| json::render(&u, b)));
        s.push_str("=== html\n");
        s.push_str(&html::document(&u));
        files.push((format!("{name}.undecided.gz"), s));
    }
    let problems = snapshot::check_dir(&render_paths_dir(), &[".gz"], &files);
    assert!(
        problems.is_empty(),
        "{}\n\nafter a deliberate change: CPTRIAGE_BLESS=1 cargo test --test it report_snapshots::",
        problems.join("\n\n")
    );
}
