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
//! A plain function compiles with [`compile_function`]; [`Arg`] passes
//! vectors, matrices ([`Arg::f64_matrix`]) and arrays of any rank; an
//! argument that does not fit is an [`Error`] at its parameter, and an
//! `Error` prints its diagnostic with `{}` and `{:?}` alike. The `egrad`
//! command and the Python package use only the items listed here.
//!
//! With the `internals` cargo feature, which only egrad's own tests and
//! benches turn on (through their dev-dependency on egrad), every stage is
//! also reachable under `egrad::internals`; that module is not a stable API.

#![warn(missing_docs)]

// The Rust blocks of the user docs, compiled and run as doc tests
// (`tests/docs.rs` checks that every doc with one is listed here).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDocTests;
#[cfg(doctest)]
#[doc = include_str!("../docs/quickstart.md")]
struct QuickstartDocTests;
#[cfg(doctest)]
#[doc = include_str!("../docs/language.md")]
struct LanguageDocTests;

/// egrad's stages, one module each: public for egrad's tests and
/// benches, **not a stable API**.
#[doc(hidden)]
#[cfg(feature = "internals")]
pub mod internals;
// Without the feature, what only tests and benches reach is unused here.
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
mod internals;

pub mod error;

// The runtime library's exports (`#[no_mangle]`), for C programs that link
// an `egrad build` object; only with the `runtime` feature.
#[cfg(feature = "runtime")]
mod runtime;

pub(crate) use internals::{
    backend, cache, call, differentiate, extract, gemm, gemv, ir, lang, linalg, ops, pipeline,
    program, residuals, rewrites, types, vmath,
};

pub use backend::{clif_text, clif_text_with, compile};
pub use backend::{BackendOptions, CompiledFunction, NativeArg, NativeOut, Prepared, Workspace};
pub use cache::{explain, CacheKey};
pub use call::{Arg, CompiledFn, CompiledGradient};
pub use error::span::{Diagnostic, Diagnostics, SourceFile, Span};
pub use error::{Error, ErrorKind, Result, EXIT_INTERNAL};
pub use extract::cost::CostModel;
pub use extract::cost::{DEFAULT_DIM, DEFAULT_LAMBDA, MAX_LAMBDA};
pub use internals::aot::{build, BuildOptions, Built};
pub use internals::explore::{
    explore, time_interleaved, Exploration, Point, Timed, Timing, DEFAULT_LAMBDAS,
};
pub use internals::gradbench::serve as serve_gradbench;
pub use ir::interp::ArgError;
pub use ir::Function;
pub use ops::kernels::{register_kernel, Kernel, KernelError, KernelFn, ShapeError, ShapeRule};
pub use pipeline::{
    compile_function, optimize_gradient, optimize_gradient_ir, optimize_ir, GradProgram, Optimized,
    Options, Progress, ProgressEvent, Report,
};
pub use program::{GradSpec, JvpSpec, ParseOptions, Program, MAX_OPERATIONS};
pub use rewrites::Limits;
pub use types::value::format_elem;

/// The reference interpreter: runs an IR [`Function`] exactly as written,
/// the oracle native code and every rewrite are checked against.
pub mod interp {
    pub use crate::ir::interp::{bind_args, is_count, run, ArgShape, Dims, MAX_COUNT};
}

/// The memory limit every run and compile checks its allocations against
/// (`--memory-limit`; by default 3/4 of the memory this process may use:
/// the least of physical memory, its cgroup's limit and the address space
/// left under `RLIMIT_AS`).
pub mod memory {
    pub use crate::ir::memory::{
        budget, bytes_of, check, default_limit, describe, limit, set_limit, Budget,
    };
}

/// The work limit every run checks before it starts (`--work-limit`;
/// by default 10^13 element operations): a run that would surely take
/// longer is refused with the count, rather than left to run for years.
pub mod work {
    pub use crate::ir::work::{check, limit, set_limit, Work, DEFAULT_LIMIT};
}

/// NumPy array files (`.npy`, `.npz`): arguments read in place, results
/// written.
pub mod npy {
    pub use crate::internals::npy::{read_npz, to_npy, write_npy, write_npz, Array, View};
}

/// The benchmark suite's programs and their inputs (`bench-suite.md`).
pub mod suite {
    pub use crate::internals::suite::{benchmark, keys, u, v, Benchmark, Gen, Input, BENCHMARKS};
}
pub use types::value::Value;
pub use types::{DType, Dim, Type};
