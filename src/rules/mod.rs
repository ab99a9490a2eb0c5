//! Rules: the rule-file format (signals, the exclusion tree, leaves), its loader
//! and lint, tree printing, and the assessment engine that turns a dataset into a
//! [`Report`](report::Report), the value every renderer shows.
//!
//! Data flow: [`load`] → [`RuleSet`]; [`engine::diagnose`] evaluates every
//! signal over the window ([`crate::eval::range`]) and hands per-step values to
//! [`verdict::assess`], the pure part (thresholds → timelines → onsets →
//! verdict), which is testable with hand-built inputs.

pub mod engine;
pub mod export;
pub mod lint;
pub mod load;
pub mod model;
pub mod recorded;
pub mod report;
pub mod tree;
pub mod unittest;
pub mod verdict;

pub use load::{load_file, load_str, Child, Diagnostic, Level, RuleError, RuleSet, Signal, HEALTHY};
