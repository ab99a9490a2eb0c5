//! `cptriage diagnose`: the plan run through the pipeline, its notes and
//! warnings on stderr, the outcome rendered (`cmd::conclude`).

use std::io::Write;

use crate::error::CliError;
use crate::exit::ExitCode;
use crate::pipeline::{self, Lines};
use crate::plan::Plan;
use crate::rules::RuleSet;

pub(crate) fn run(
    plan: &Plan,
    rules: &RuleSet,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ExitCode, CliError> {
    let result = pipeline::run(plan, rules, &mut Lines::new(err));
    crate::cmd::conclude(plan, rules, result, out)
}
