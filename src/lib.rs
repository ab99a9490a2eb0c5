//! cptriage: Kubernetes control-plane triage.
//!
//! The modules follow the data flow:
//! `source` (dumps, live scrapes, Prometheus) → `store` (series) → `eval` (PromQL)
//! → `rules` (signals, the exclusion tree, onsets) → `report` (table, JSON, Markdown).
//! `cli` holds the clap definition, `cmd` one thin handler per subcommand; both
//! are private to the binary's face: [`try_parse`]/[`command`] (the parsed
//! arguments and the clap command, for completions and man pages) and [`run`].
//! `limits` (nesting and size limits on input) and `secret` (keeping
//! credentials out of messages) serve every stage, as `timefmt` does.

mod cli;
mod cmd;
pub mod error;
pub mod eval;
pub mod exit;
pub mod limits;
pub mod report;
pub mod rules;
pub mod secret;
pub mod source;
pub mod store;
pub mod timefmt;

pub use cli::{command, try_parse, Cli};
pub use cmd::run;
