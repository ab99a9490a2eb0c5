//! The first page (`diagnose` at a terminal) for every shipped scenario
//! (`testdata/scenarios/*.yaml`, generated as `tests/scenario_verdicts.rs`
//! does) is pinned at 80 and 120 columns, colour off, by the files in
//! `testdata/snapshots/first-page/`. Any change of the page fails this test;
//! `CPTRIAGE_BLESS=1 cargo test --test it first_page::` rewrites the files after a
//! deliberate change (review the diff).
//!
//! Also: no line is wider than the terminal, the page fits a screen at 80
//! columns, it speaks plain words (no internal ids, no "joint"/"lit" in the
//! headline, no float noise), and colour follows `--color`, `NO_COLOR` and
//! whether stdout is a terminal.

use crate::scenarios;
use crate::support::{realcap, snapshot};

use std::path::Path;
use std::process::Command;

use cptriage::report::page::{first_page, RenderOpts};
use cptriage::rules::report::Report;

const WIDTHS: [usize; 2] = [80, 120];
/// Lines the page may take at 80 columns: one screen.
const MAX_LINES_AT_80: usize = 22;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn reports() -> Vec<(String, Report)> {
    scenarios::reports()
}

#[test]
fn first_pages_match_their_snapshots_and_fit_the_terminal() {
    let dir = root().join("testdata/snapshots/first-page");
    let mut problems = Vec::new();
    let mut files = Vec::new();
    let all = reports();
    assert!(all.len() >= 16, "expected the scenario set, found {}", all.len());
    for (name, r) in &all {
        for width in WIDTHS {
            let page = first_page(r, &RenderOpts { width, color: false });
            assert!(!page.contains('\x1b'), "{name}: colour with color off");
            for l in page.lines() {
                let n = l.chars().count();
                if n > width {
                    problems.push(format!("{name} at {width}: line of {n} columns: {l:?}"));
                }
            }
            // The wide report fits too, and splits no axis or instance name.
            let mut wide = Vec::new();
            cptriage::report::table::render(r, &RenderOpts { width, color: false }, &mut wide).unwrap();
            let wide = String::from_utf8(wide).unwrap();
            for l in wide.lines() {
                let n = l.chars().count();
                if n > width {
                    problems.push(format!("{name} at {width}, wide: line of {n} columns: {l:?}"));
                }
            }
            for a in r.axes.iter().filter(|a| !a.instances.is_empty()) {
                for i in &a.instances {
                    if !wide.contains(i.as_str()) {
                        problems.push(format!("{name} at {width}, wide: instance {i} split"));
                    }
                }
            }
            let lines = page.lines().count();
            if width == 80 && lines > MAX_LINES_AT_80 {
                problems.push(format!("{name}: {lines} lines at 80 columns:\n{page}"));
            }
            files.push((format!("{name}.{width}.txt"), page));
        }
    }
    problems.extend(snapshot::check_dir(&dir, &[".txt"], &files));
    assert!(
        problems.is_empty(),
        "{}\n\nafter a deliberate change: CPTRIAGE_BLESS=1 cargo test --test it first_page::",
        problems.join("\n\n")
    );
}

#[test]
fn first_pages_speak_plain_words() {
    let noise = regex::Regex::new(r"\d{5,}|\de[-+]\d|\ds\d+ms").unwrap();
    for (name, r) in reports() {
        let page = first_page(
            &r,
            &RenderOpts {
                width: 80,
                color: false,
            },
        );
        let head = page.lines().next().unwrap_or_default();
        for bad in ["joint", " lit", "symptom question", "root cause:"] {
            assert!(!head.contains(bad), "{name}: headline says {bad:?}: {head}");
        }
        // Internal ids of the tree's questions never show (the walk is in -o wide).
        for p in &r.path {
            assert!(
                !page.contains(&format!(" {} ", p.node)) || p.node.len() < 5,
                "{name}: node id `{}` on the page:\n{page}",
                p.node
            );
        }
        // No duplicate axis names, no float noise or exponent notation.
        assert!(
            !noise.is_match(&page),
            "{name}: {:?} on the page:\n{page}",
            noise.find(&page).map(|m| m.as_str())
        );
        // Every page ends with where the rest is.
        assert!(page.contains("-o wide"), "{name}:\n{page}");
        // A verdict naming a cause shows it, its next steps and its evidence.
        if r.verdict.root_cause.is_some() {
            assert!(page.contains("Next steps"), "{name}:\n{page}");
            assert!(page.contains("  cause  "), "{name}:\n{page}");
        }
    }
}

#[test]
fn colour_only_when_asked_for_or_on_a_terminal_without_no_color() {
    let (_, r) = reports()
        .into_iter()
        .find(|(n, _)| n == "bitter-zone-etcd-first")
        .expect("scenario");
    let on = first_page(
        &r,
        &RenderOpts {
            width: 80,
            color: true,
        },
    );
    assert!(on.contains("\x1b["), "no colour with color on");
    let off = first_page(
        &r,
        &RenderOpts {
            width: 80,
            color: false,
        },
    );
    // The same page, less the escapes.
    let stripped = strip(&on);
    assert_eq!(stripped, off);
}

fn strip(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            esc = !c.is_ascii_alphabetic();
        } else if c == '\x1b' {
            esc = true;
        } else {
            out.push(c);
        }
    }
    out
}

const DEMO: &str = "testdata/captures/bitter-zone-etcd-first";

fn run(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cptriage"));
    c.args(args)
        .current_dir(root())
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run cptriage");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Runs cptriage on a pseudo-terminal (`script`), as at an interactive shell.
fn run_on_tty(args: &str, env: &[(&str, &str)]) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        return None;
    }
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_cptriage"));
    let mut c = Command::new("script");
    c.args(["-qec", &cmd, "/dev/null"])
        .current_dir(root())
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .env("COLUMNS", "100");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run script");
    Some(String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn the_cli_follows_columns_color_and_no_color() {
    // A pipe: no colour, 80 columns unless COLUMNS says otherwise.
    let piped = run(&["diagnose", "--dump", DEMO], &[]);
    assert!(!piped.contains('\x1b'), "colour into a pipe:\n{piped}");
    assert!(piped.starts_with("DEGRADED P1  etcd disk is slow"), "{piped}");
    assert!(piped.lines().all(|l| l.chars().count() <= 80), "{piped}");
    for w in ["60", "120"] {
        let page = run(&["diagnose", "--dump", DEMO], &[("COLUMNS", w)]);
        let w: usize = w.parse().unwrap();
        assert!(page.lines().all(|l| l.chars().count() <= w), "{page}");
    }
    let always = run(&["diagnose", "--dump", DEMO, "--color", "always"], &[]);
    assert!(always.contains("\x1b["), "--color always without colour");
    assert_eq!(strip(&always), piped);
    // The wide report keeps every table and the walk.
    let wide = run(&["diagnose", "--dump", DEMO, "--wide"], &[("COLUMNS", "80")]);
    for want in ["Tree walk at", "Evidence", "Sources", "Falsifier"] {
        assert!(wide.contains(want), "--wide lacks {want:?}");
    }
    assert!(wide.lines().all(|l| l.chars().count() <= 80), "{wide}");
    assert_eq!(
        wide,
        run(&["diagnose", "--dump", DEMO, "-o", "wide"], &[("COLUMNS", "80")])
    );

    let Some(tty) = run_on_tty(&format!("diagnose --dump {DEMO}"), &[]) else {
        eprintln!("skipped the terminal half: no `script`");
        return;
    };
    assert!(tty.contains("\x1b["), "no colour on a terminal:\n{tty}");
    let no_color = run_on_tty(&format!("diagnose --dump {DEMO}"), &[("NO_COLOR", "1")]).unwrap();
    assert!(no_color.contains("DEGRADED"), "{no_color}");
    assert!(!no_color.contains("\x1b["), "colour with NO_COLOR:\n{no_color}");
    let never = run_on_tty(&format!("diagnose --dump {DEMO} --color never"), &[]).unwrap();
    assert!(!never.contains("\x1b["), "colour with --color never:\n{never}");
}

/// The README's first example is what `diagnose` prints for the shipped
/// capture at 80 columns.
#[test]
fn the_readme_shows_the_first_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## What the main job prints")
        .nth(1)
        .expect("README section");
    let example = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("README example");
    let page = run(&["diagnose", "--dump", DEMO], &[("COLUMNS", "80")]);
    assert_eq!(
        example, page,
        "README.md's example is stale: paste the output of `COLUMNS=80 cptriage diagnose --dump {DEMO}`"
    );
}

/// Every real capture alone (one snapshot: no onsets, most axes not checked)
/// also gets a page that fits 80 columns and one screen.
#[test]
fn single_snapshot_pages_fit_too() {
    let mut n = 0;
    for (name, p) in realcap::files() {
        n += 1;
        let page = run(
            &["diagnose", "--dump", &p.display().to_string()],
            &[("COLUMNS", "80")],
        );
        assert!(
            page.starts_with("HEALTHY") || page.starts_with("DEGRADED") || page.starts_with("INCONCLUSIVE"),
            "{name}:\n{page}"
        );
        assert!(page.lines().all(|l| l.chars().count() <= 80), "{name}:\n{page}");
        assert!(page.lines().count() <= MAX_LINES_AT_80, "{name}:\n{page}");
        assert!(page.contains("one snapshot at "), "{name}:\n{page}");
        assert!(!page.contains("unknown is"), "{name}:\n{page}");
    }
    assert!(n >= 20, "real captures: {n}");
}
