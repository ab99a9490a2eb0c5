//! Reports: the [`model::Report`] value the rules engine produces, and the
//! renderers (table, JSON, Markdown, the Prometheus API shape of `query`). Renderers
//! take a finished result and a writer; rendering never evaluates.

pub mod json;
pub mod markdown;
pub mod model;
pub mod promapi;
pub mod table;
pub mod text;
