//! The command-line definition (clap). Only this module knows about argv; it is
//! also the single source of the help text, man page and shell completions.

use clap::{Parser, Subcommand};

/// Kubernetes control-plane triage: is it the apiserver or etcd, and which part?
#[derive(Debug, Parser)]
#[command(name = "cptriage", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate a PromQL expression over captured metrics.
    Query(QueryArgs),
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// The PromQL expression.
    pub expr: String,
}
