//! `gen-scenario SPEC.yaml --out DIR`: writes the capture directory described by
//! a scenario spec (see `testdata/scenarios/README.md`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use cptriage_testkit::scenario::{self, GenOptions};

/// Generate a deterministic multi-snapshot capture directory from a scenario spec.
#[derive(Parser, Debug)]
#[command(name = "gen-scenario", version)]
struct Args {
    /// The scenario spec (YAML).
    spec: PathBuf,
    /// Output capture directory (must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
    /// Directory to look up base captures in, after the spec's own directory
    /// (repeatable; default: the repository's testdata/realdata).
    #[arg(long = "realdata", value_name = "DIR")]
    realdata: Vec<PathBuf>,
    /// Replace an existing capture directory (one with a cptriage manifest).
    #[arg(long)]
    force: bool,
    /// Worker threads (targets are generated in parallel; output is identical).
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen-scenario: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let spec = scenario::load_spec(&args.spec)?;
    let mut opts = GenOptions::default();
    if !args.realdata.is_empty() {
        opts.base_dirs = args.realdata.clone();
    }
    if args.force && args.out.join("manifest.yaml").is_file() {
        let text = std::fs::read_to_string(args.out.join("manifest.yaml"))?;
        let m: scenario::Manifest = serde_yaml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a cptriage capture manifest: {e}", args.out.display()))?;
        if m.format != scenario::CAPTURE_FORMAT {
            anyhow::bail!(
                "{}: not a cptriage capture (format `{}`)",
                args.out.display(),
                m.format
            );
        }
        std::fs::remove_dir_all(&args.out)?;
    }
    let summary = scenario::generate(spec, &opts, &args.out, args.threads)?;
    eprintln!(
        "wrote {} snapshots ({:.1} MB) for {} targets to {} in {:.2}s",
        summary.files,
        summary.bytes as f64 / 1e6,
        summary.per_target.len(),
        args.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
