//! `cptriage rules check`: lint rule files.

use std::io::Write;

use crate::cli::RulesCommand;
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::rules::lint;

pub fn run(c: RulesCommand, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    match c {
        RulesCommand::Check(a) => {
            let mut errors = 0;
            for f in &a.files {
                let diags = lint::check_file(f);
                for d in &diags {
                    writeln!(err, "{d}")?;
                }
                if lint::has_errors(&diags) {
                    errors += 1;
                    writeln!(out, "{}: FAILED", f.display())?;
                } else {
                    writeln!(out, "{}: ok ({} warnings)", f.display(), diags.len())?;
                }
            }
            if errors > 0 {
                return Err(CliError::Usage(format!("{errors} rule file(s) have errors")));
            }
            Ok(ExitCode::Ok)
        }
    }
}
