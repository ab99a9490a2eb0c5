//! `profile-matrix [--write]`: diagnoses every scenario, the shipped capture
//! and the lab recordings under every monitoring profile (`testdata/profiles`)
//! and prints the table of docs/accuracy.md; `--write` puts it there.

use std::process::ExitCode;

use clap::Parser;

use cptriage_testkit::matrix;

/// Print (or write into docs/accuracy.md) the monitoring-profile matrix.
#[derive(Parser, Debug)]
#[command(name = "profile-matrix", version)]
struct Args {
    /// Replace the table in docs/accuracy.md instead of printing it.
    #[arg(long)]
    write: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Only the sources whose name contains this (repeatable); prints the
    /// table of those, never writes it.
    #[arg(long)]
    only: Vec<String>,
    /// Instead of the matrix: write the capture DIR as this profile (a file
    /// of testdata/profiles) stores it into --to, to diagnose it by hand.
    #[arg(long, value_name = "PROFILE", requires_all = ["from", "to"])]
    reshape: Option<std::path::PathBuf>,
    /// The capture to reshape.
    #[arg(long, value_name = "DIR")]
    from: Option<std::path::PathBuf>,
    /// Where to write the reshaped capture (must not exist).
    #[arg(long, value_name = "DIR")]
    to: Option<std::path::PathBuf>,
}

fn reshape(profile: &std::path::Path, from: &std::path::Path, to: &std::path::Path) -> ExitCode {
    let r = cptriage_testkit::profile::Profile::load(profile).and_then(|p| p.apply_capture(from, to));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("profile-matrix: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let (Some(p), Some(from), Some(to)) = (&args.reshape, &args.from, &args.to) {
        return reshape(p, from, to);
    }
    let root = cptriage_testkit::repo_root();
    let (cells, profiles) = match matrix::run_all(&root, args.threads, &args.only) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("profile-matrix: {e}");
            return ExitCode::from(2);
        }
    };
    let table = matrix::table(&cells, &profiles);
    if args.write && args.only.is_empty() {
        let path = root.join("docs/accuracy.md");
        let doc = match std::fs::read_to_string(&path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("profile-matrix: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        match matrix::splice(&doc, &table).and_then(|d| std::fs::write(&path, d).map_err(|e| e.to_string())) {
            Ok(()) => eprintln!("wrote {}", path.display()),
            Err(e) => {
                eprintln!("profile-matrix: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        print!("{table}");
    }
    let problems = matrix::problems(&cells);
    if !problems.is_empty() {
        eprintln!("{}", problems.join("\n"));
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
