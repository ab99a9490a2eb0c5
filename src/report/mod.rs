//! Rendering: finished results in, text out. Nothing here evaluates.

pub mod promapi;
