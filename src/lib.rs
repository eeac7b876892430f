//! egrad: an optimizing derivative compiler.
//!
//! A typed array program is differentiated in reverse mode
//! ([`differentiate`]), primal and adjoint are optimized together in one
//! e-graph with rules kept as data ([`rewrites`], `rulesets/`), the cheapest
//! program is extracted under a cost model ([`extract`]), its residuals are
//! planned ([`residuals`]) and it is compiled with Cranelift ([`backend`]).
//! [`pipeline`] strings the stages together; `ARCHITECTURE.md` is the map.

pub mod aot;
pub mod backend;
pub mod cache;
pub mod cli;
pub mod differentiate;
pub mod error;
pub mod explore;
pub mod extract;
mod gemm;
mod gemv;
pub mod gradbench;
pub mod lang;
pub mod ops;
pub mod pipeline;
pub mod residuals;
pub mod rewrites;
pub mod suite;
pub mod vmath;

pub use error::{Error, Result};
pub use lang::program::Program;
pub use pipeline::{optimize_gradient, optimize_gradient_ir, Arg, GradProgram, Options};
