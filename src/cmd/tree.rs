//! `cptriage tree`: print the exclusion tree.

use std::io::Write;

use crate::cli::{TreeArgs, TreeFormat};
use crate::error::CliError;
use crate::exit::ExitCode;
use crate::plan::load_rules;
use crate::rules::tree;

pub(crate) fn run(a: TreeArgs, out: &mut dyn Write) -> Result<ExitCode, CliError> {
    let rules = load_rules(a.rules.as_deref())?;
    let text = match a.output {
        TreeFormat::Text => tree::render_text(&rules),
        TreeFormat::Mermaid => tree::render_mermaid(&rules),
    };
    write!(out, "{text}")?;
    Ok(ExitCode::Ok)
}
