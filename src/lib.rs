//! cptriage: Kubernetes control-plane triage.
//!
//! The modules follow the data flow, each importing only those before it
//! (`tests/it/stairs.rs` holds them to it):
//!
//! - foundations: `timefmt`, `limits` (nesting and size limits on input),
//!   `secret` (keeping credentials out of messages), `exit` (exit codes);
//! - the stages: `store` (series) → `eval` (PromQL) → `source` (dumps, live
//!   scrapes, audit logs, Prometheus) → `rules` (signals, the exclusion tree,
//!   onsets) → `report` (page, table, JSON, Markdown, HTML);
//! - the application: `cli` (the clap definition) → `error` (what a run ends
//!   with) → `plan` (the flags resolved once into a [`plan::Plan`]) →
//!   `pipeline` ([`pipeline::run`]: read → add evidence → judge → an
//!   [`pipeline::Outcome`]) → `cmd` (one thin handler per subcommand: a plan,
//!   the pipeline, a renderer, an exit code; [`run`]).

pub mod cli;
mod cmd;
pub mod error;
pub mod eval;
pub mod exit;
pub mod limits;
pub mod pipeline;
pub mod plan;
pub mod report;
pub mod rules;
pub mod secret;
pub mod source;
pub mod store;
pub mod timefmt;

pub use cmd::run;
