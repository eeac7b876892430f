//! The native backend: lowers an IR [`Function`] to Cranelift IR with simple
//! loop fusion and JIT-compiles it for the host.
//!
//! # ABI
//!
//! One native entry `extern "C" fn(bufs: *const *mut u8, dims: *const i64)`:
//!
//! * `bufs`: one pointer per input (parameters in order), then one per output
//!   (returned positions in order), then one per scratch buffer. Arrays are
//!   dense row-major in the dtype's native layout (`f32` or `f64`); scalars
//!   are passed as pointers to one element.
//! * `dims`: the values of the function's size parameters, in order.
//!
//! Element counts are computed in the native code from `dims` and literal
//! dims, and every loop runs over `0..len` only; the host wrapper
//! ([`CompiledFunction::call`]) checks arguments with
//! [`interp::bind_args`](crate::lang::interp::bind_args) before any native
//! code runs and allocates outputs and scratch from the bound dims, so no
//! out-of-bounds access is possible.
//!
//! # Fusion
//!
//! See [`lower`]: scalars are computed once outside loops; an array statement
//! gets its own loop only when it is returned, used more than once, or used
//! by a non-element-wise op other than `sum`; otherwise it is inlined into
//! its consumer's loop. `bcast` inside a loop is just its scalar; `sum` runs
//! one left-to-right loop with a single accumulator (bit-identical to the
//! interpreter).

mod jit;
mod lower;

pub use jit::{clif_text, compile, compile_keeping, CompiledFunction, Prepared};

#[cfg(doc)]
use crate::lang::ir::Function;

/// Options for [`compile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    /// Run Cranelift's IR verifier while compiling.
    pub verify: bool,
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions {
            verify: cfg!(debug_assertions),
        }
    }
}
