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
//! [`interp::bind_args`](crate::ir::interp::bind_args) before any native
//! code runs and allocates outputs and scratch from the bound dims, so no
//! out-of-bounds access is possible. [`CompiledFunction::call_into`] runs
//! on the caller's own slices and output buffers with the scratch of a
//! [`Workspace`]: the same checks (the argument shapes against the
//! signature, each slice's length against its shape, each output's dtype
//! and length against the result), and no allocation once the workspace
//! has been bound for the shapes.
//!
//! # Object files
//!
//! [`compile_object`] runs the same lowering into a Cranelift object module
//! instead of the JIT: each entry an exported symbol with the ABI above,
//! loop bodies and VJPs local functions of the object, libm calls
//! undefined symbols of the C library (`sin`, `expf`, ...; link with
//! `-lm`), position-independent code for the host CPU. It returns each
//! entry's buffer table ([`EntryLayout`]) so a caller (the C header of
//! `egrad build`, [`crate::internals::aot`]) can build the same table the JIT's host
//! wrapper builds.
//!
//! # Fusion
//!
//! See `lower.rs`: scalars are computed once outside loops; an array statement
//! gets its own loop only when it is returned, used more than once, or used
//! by a non-element-wise op other than `sum`; otherwise it is inlined into
//! its consumer's loop. `bcast` inside a loop is just its scalar; `sum` runs
//! one loop in egrad's fixed order (eight partial sums, the interpreter's
//! order too). Loops run in 128-bit SIMD vectors (two `f64` or four `f32`
//! lanes; `BackendOptions::simd`), with scalar tails: see `lower::vector`.
//!
//! # Loops
//!
//! A function's counted loops (`loop`, `looptape`, `loopvjp`; see
//! [`Loop`](crate::ir::Loop)) are not unrolled. Each loop body and
//! each loop VJP that a live statement runs is compiled as its own native
//! function in the same module, with the ABI above (the body's one input is
//! the state, its one output the next state; a VJP's inputs are the state
//! and the cotangent); a loop inside a body is compiled the same way, one
//! level down. The caller plans the callee's scratch buffers among its own
//! (so the host allocates every buffer of every level once, from the entry's
//! dims; the callee gets the caller's `dims` pointer, since a body has its
//! function's size parameters), keeps the callee's buffer table in a stack
//! slot, and runs the counted loop itself: each step stores the input and
//! output pointers in the table and calls the callee. Steps alternate
//! between two buffers (the result's and one scratch; the count's parity
//! decides where to start so the last step writes the result, and an
//! initial state already in a buffer is read in place); `looptape` writes
//! each checkpoint straight into its row and the states between through two
//! scratch buffers; `loopvjp` walks the segments backwards, recomputing a
//! segment's states from its checkpoint into a buffer of `min(k, count) - 1`
//! states (mode 0) or each state when the VJP needs it, through two buffers
//! (mode 1). Steps run in the interpreter's order, so results are bit-for-bit
//! the interpreter's. Nothing is allocated per call of the native code or per
//! iteration; [`Prepared::scratch_bytes`] counts all these buffers. Before
//! native code runs, the sizes are checked against every loop function too.

mod jit;
mod lower;
mod native;
mod object;

pub use jit::runtime_symbols;
pub use jit::{clif_text, clif_text_with, compile, compile_keeping, CompiledFunction, Prepared};
pub use lower::range::checks_nothing;
pub use native::{NativeArg, NativeOut, Workspace};
pub use object::{compile_object, is_c_identifier, EntryLayout, ObjectCode, ObjectEntry};

#[cfg(doc)]
use crate::ir::Function;

/// Options for [`compile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    /// Run Cranelift's IR verifier while compiling.
    pub verify: bool,
    /// Element-wise loops, reductions and the column loops of `sumlead`
    /// and `matmul` in 128-bit SIMD vectors (on by default). Off, the same
    /// loops are scalar; results are bit-for-bit the same either way,
    /// since reductions keep egrad's fixed order
    /// (`ops::fold_row`) in both.
    pub simd: bool,
    /// `matmul` of operands in memory (a transposed one read in place)
    /// through egrad's matrix kernel (256-bit AVX2/FMA tiles where the CPU
    /// has them; on by default) instead of the loop nest of Cranelift code.
    /// Both compute the same chain of fused multiply-adds per element (see
    /// `src/gemm.rs`), so the results are bit for bit the same and the
    /// interpreter's; the kernel is faster. An object file calls the kernel
    /// only when it links egrad's runtime library (`compile_object`'s
    /// `runtime`); the loop nest otherwise.
    pub gemm: bool,
    /// A math function with an all-arithmetic kernel (`exp`, `log`,
    /// `log1p`, `expm1`, `tanh`) over a float array is computed by its
    /// block kernel (on by default): the same op sequence per element,
    /// compiled by rustc for the widest vectors the CPU has (256-bit AVX2
    /// where it has them), instead of inline in Cranelift's 128-bit
    /// vectors; its operand and result are arrays in memory then. The
    /// bits are the same either way. An object file calls the block kernels
    /// only when it links egrad's runtime library; inline otherwise.
    pub wide: bool,
}

impl BackendOptions {
    /// The defaults with Cranelift's verifier on (what tests use).
    pub fn verified() -> BackendOptions {
        BackendOptions {
            verify: true,
            ..BackendOptions::default()
        }
    }
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions {
            verify: cfg!(debug_assertions),
            simd: true,
            gemm: true,
            wide: true,
        }
    }
}
