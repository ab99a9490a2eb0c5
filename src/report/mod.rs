//! Renderers of the [`Report`](crate::rules::report::Report) the rules engine
//! produces (the first page, the wide tables, JSON, Markdown, HTML) and of
//! `query` results (the Prometheus API shape). Renderers take a finished result
//! and a writer; rendering never evaluates.

pub mod audit;
pub mod fleet;
pub mod headline;
pub mod html;
pub mod json;
pub mod logs;
pub mod markdown;
pub mod page;
pub mod promapi;
pub mod style;
pub mod table;
pub mod text;
