//! `cptriage rules check` (lint rule files) and `cptriage rules test` (unit
//! tests of rule files).

use std::io::Write;

use crate::cli::{RulesCommand, RulesTestArgs};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::rules::{lint, unittest};

pub(crate) fn run(c: RulesCommand, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
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
        RulesCommand::Test(a) => run_tests(&a, out, err),
        RulesCommand::Export(a) => super::rules_export::run(*a, out),
    }
}

fn run_tests(a: &RulesTestArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, CliError> {
    let (mut passed, mut failed, mut invalid) = (0usize, 0usize, 0usize);
    for f in &a.files {
        writeln!(out, "Unit testing: {}", f.display())?;
        let res = match unittest::run_file(f) {
            Ok(r) => r,
            Err(e) => {
                invalid += 1;
                writeln!(err, "error: {e}")?;
                writeln!(out, "  FAILED: the file could not be read\n")?;
                continue;
            }
        };
        writeln!(out, "  rules: {}", res.rules)?;
        for t in &res.tests {
            if t.passed() {
                passed += 1;
                if a.verbose {
                    writeln!(out, "  SUCCESS  {} ({})", t.name, t.got)?;
                } else {
                    writeln!(out, "  SUCCESS  {}", t.name)?;
                }
            } else if t.invalid {
                invalid += 1;
                writeln!(out, "  ERROR    {} (line {})", t.name, t.line)?;
                for m in &t.failures {
                    writeln!(err, "error: {}:{}: {m}", f.display(), t.line)?;
                    writeln!(out, "           {m}")?;
                }
            } else {
                failed += 1;
                writeln!(out, "  FAILED   {} (line {})", t.name, t.line)?;
                for m in &t.failures {
                    writeln!(out, "           {m}")?;
                }
                if !t.got.is_empty() {
                    writeln!(out, "           concluded: {}", t.got)?;
                }
            }
        }
        writeln!(out)?;
    }
    writeln!(out, "{passed} passed, {failed} failed, {invalid} not run")?;
    if invalid > 0 {
        return Err(CliError::Usage(format!(
            "{invalid} test file(s) could not be run"
        )));
    }
    Ok(if failed > 0 {
        ExitCode::AxisNamed
    } else {
        ExitCode::Ok
    })
}
