//! Renderers of the [`Report`](crate::rules::report::Report) the rules engine
//! produces (table, JSON, Markdown) and of `query` results (the Prometheus API
//! shape). Renderers take a finished result and a writer; rendering never evaluates.

pub mod audit;
pub mod json;
pub mod markdown;
pub mod promapi;
pub mod table;
pub mod text;
