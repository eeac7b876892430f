//! Spans, source files and diagnostics live in [`crate::error::span`]; this
//! module keeps the front end's old paths (`lang::span::Span`) working.

pub use crate::error::span::*;
