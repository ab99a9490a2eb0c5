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
