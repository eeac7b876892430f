//! egrad: an optimizing derivative compiler.
//!
//! A typed array program is differentiated in reverse mode, primal and
//! adjoint are optimized together in one e-graph with rules kept as data
//! (`rulesets/`), the cheapest program is extracted under a cost model, its
//! residuals are planned and it is compiled with Cranelift.
//! `ARCHITECTURE.md` is the map of the stages.
//!
//! The supported surface is what this page lists at the crate root:
//!
//! ```
//! use egrad::{optimize_gradient, Arg, Options, Program};
//!
//! let program = Program::parse(
//!     "fn loss[N](w: f64[N], x: f64[N]) -> f64 = +/((w .* x) .* (w .* x))",
//! )?;
//! let grad = optimize_gradient(&program, &Options::default().function("loss").wrt(["w"]))?;
//! let compiled = grad.compile()?;
//! let (value, gradient) =
//!     compiled.value_and_grad(&[Arg::f64(&[1.0, 2.0]), Arg::f64(&[3.0, 4.0])])?;
//! assert_eq!(value.as_scalar(), 9.0 + 64.0);
//! assert_eq!(gradient[0].data, vec![2.0 * 9.0, 2.0 * 2.0 * 16.0]);
//! # Ok::<(), egrad::Error>(())
//! ```
//!
//! Every stage is also reachable under `egrad::internals`, for egrad's own binary,
//! tests and benches; that module is not a stable API.

#![warn(missing_docs)]

/// egrad's stages, one module each: public for egrad's binary, tests and
/// benches, **not a stable API**.
#[doc(hidden)]
pub mod internals;

pub mod error;

pub(crate) use internals::{
    backend, cache, differentiate, extract, gemm, gemv, ir, lang, ops, pipeline, program,
    residuals, rewrites, types, vmath,
};

pub use backend::{BackendOptions, CompiledFunction, NativeArg, NativeOut, Prepared, Workspace};
pub use error::span::{Diagnostic, Diagnostics, SourceFile, Span};
pub use error::{Error, ErrorKind, Result, EXIT_INTERNAL};
pub use extract::cost::CostModel;
pub use ir::Function;
pub use ops::kernels::{register_kernel, Kernel, KernelFn, ShapeRule};
pub use pipeline::{
    optimize_gradient, optimize_gradient_ir, Arg, CompiledGradient, GradProgram, Options, Progress,
    ProgressEvent, Report,
};
pub use program::{ParseOptions, Program, MAX_OPERATIONS};
pub use rewrites::Limits;
pub use types::value::Value;
pub use types::{DType, Dim, Type};
