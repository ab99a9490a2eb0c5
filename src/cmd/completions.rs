//! `cptriage completions SHELL`.

use std::io::Write;

use crate::cli::CompletionsArgs;
use crate::error::CliError;
use crate::exit::ExitCode;

pub(crate) fn run(a: CompletionsArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let mut cmd = crate::cli::command();
    clap_complete::generate(a.shell, &mut cmd, "cptriage", out);
    Ok(ExitCode::Ok)
}
