//! Reports: the [`model::Report`] value the rules engine produces. Renderers
//! (table, JSON, Markdown) take a finished report; rendering never evaluates.

pub mod model;
