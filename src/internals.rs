//! egrad's stages, one module each, in the order of `ARCHITECTURE.md`.
//!
//! Public only with the `internals` cargo feature, so that egrad's
//! integration tests and benches can reach every stage; **not a stable
//! API**: the supported surface is the items at the crate root, which the
//! binary and the Python package use. Inside the crate the stages are named from the root
//! (`crate::lang`, `crate::backend`, ...). The `#[path]`s keep the source
//! folders where they are.

#[path = "aot.rs"]
pub mod aot;
#[path = "backend/mod.rs"]
pub mod backend;
#[path = "cache.rs"]
pub mod cache;
#[path = "call.rs"]
pub mod call;
#[path = "differentiate/mod.rs"]
pub mod differentiate;
#[path = "explore.rs"]
pub mod explore;
#[path = "extract/mod.rs"]
pub mod extract;
#[path = "gemm.rs"]
pub(crate) mod gemm;
#[path = "gemv.rs"]
pub(crate) mod gemv;
#[path = "gradbench/mod.rs"]
pub mod gradbench;
#[path = "ir/mod.rs"]
pub mod ir;
#[path = "lang/mod.rs"]
pub mod lang;
#[path = "linalg.rs"]
pub(crate) mod linalg;
#[path = "npy/mod.rs"]
pub mod npy;
#[path = "ops/mod.rs"]
pub mod ops;
#[path = "pipeline.rs"]
pub mod pipeline;
#[path = "program.rs"]
pub mod program;
#[path = "residuals/mod.rs"]
pub mod residuals;
#[path = "rewrites/mod.rs"]
pub mod rewrites;
#[path = "suite.rs"]
pub mod suite;
#[path = "types/mod.rs"]
pub mod types;
#[path = "vmath/mod.rs"]
pub mod vmath;
