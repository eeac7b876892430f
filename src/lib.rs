//! egrad: an optimizing derivative compiler.

pub mod backend;
pub mod differentiate;
pub mod error;
pub mod lang;
pub mod ops;

pub use error::{Error, Result};
pub mod extract;
pub mod pipeline;
pub mod residuals;
pub mod rewrites;
