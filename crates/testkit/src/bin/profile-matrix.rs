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
}

fn main() -> ExitCode {
    let args = Args::parse();
    let root = cptriage_testkit::repo_root();
    let (cells, profiles) = match matrix::run_all(&root, args.threads) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("profile-matrix: {e}");
            return ExitCode::from(2);
        }
    };
    let table = matrix::table(&cells, &profiles);
    if args.write {
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
    let wrong = cells.iter().filter(|c| !c.outcome.ok()).count();
    if wrong > 0 {
        eprintln!("{wrong} wrong verdict(s)");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
