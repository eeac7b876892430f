//! The op table: every fact about every primitive, in one place.
//!
//! Each fact is an exhaustive `match` over [`Op`] with no wildcard arm, so a
//! new op does not compile until it has all of them:
//!
//! | fact | function |
//! | --- | --- |
//! | symbol and arity | [`Op::name`], [`Op::arity`] |
//! | family (element-wise, reduction, index map, nest, loop, ...) | [`Op::family`] |
//! | type rule | [`Op::result_type`] |
//! | reference evaluator | [`Op::eval`] |
//! | reverse-mode derivative (VJP template per argument) | [`Op::vjp`] |
//! | forward-mode derivative | [`Op::jvp`] |
//! | symbolic-zero absorption | [`Op::zero_if_arg_zero`] |
//! | cost (flops per element) | [`Op::flops`] |
//! | Cranelift lowering | `backend::lower` (an exhaustive match there) |
//!
//! The math functions (`sin`, `exp`, `sqrt`, ...) are one op,
//! [`Op::Math`], whose facts are the rows of one table ([`math`]): name,
//! value in each dtype, reverse rule, flops and how native code computes
//! it ([`Native`]: an instruction, egrad's vector kernel or the C
//! library). A new math function is a new row.
//!
//! Ops act on whole arrays. Element-wise ops take operands of one shape
//! (the front end inserts explicit [`Op::Bcast`] for scalar broadcasting), so
//! every derivative template is shape-homogeneous.

mod classify;
mod cost;
mod derivatives;
mod eval;
pub mod kernels;
mod lit;
pub mod math;
mod names;
mod real;
mod sort;
mod special;
#[cfg(test)]
mod tests;
pub mod threefry;
mod type_error;
mod type_rule;

pub use classify::{ElementCall, Family};
pub use cost::CostBasis;
pub use eval::{fold_row, FOLD_LANES};
pub use lit::{parse_number, Lit};
pub use math::{Math, Native};
pub use real::{floor_div_rem, Real};
pub use type_error::{Gives, OpTypeError, OperandNeed, OperandsNeed, Part, ResultNeed};

use crate::types::DType;

/// A primitive operation on arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// A scalar literal.
    Const(Lit),
    /// The symbolic zero tangent of the annotated type (materialises as +0.0).
    Zero,
    Add,
    Sub,
    Mul,
    Div,
    Neg,
    /// A math function: one row of [`math`]'s table.
    Math(Math),
    Pow,
    /// Element-wise maximum; NaN if either operand is NaN; `max(-0, +0) = +0`.
    Max,
    /// Element-wise minimum; NaN if either operand is NaN; `min(-0, +0) = -0`.
    Min,
    /// Comparisons give a *mask* of the operands' type: 1 where true, +0
    /// where false (NaN compares false except under `ne`). Masks carry the
    /// language's `bool` values; they are piecewise constant (no derivative).
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    /// `select c a b`: `a` where the mask `c` is non-zero, else `b`
    /// (element-wise; a dynamic `if` lowers to it).
    Select,
    /// Sum of all elements of an array (`+/`).
    Sum,
    /// Largest element (`max/`); NaN if any element is NaN; -inf if empty.
    MaxAll,
    /// Smallest element (`min/`); NaN if any element is NaN; +inf if empty.
    MinAll,
    /// A scalar repeated to the annotated array type.
    Bcast,
    /// `slice c`: rows `c .. c+L` of the leading axis (L from the annotation).
    Slice(u64),
    /// `pad c`: the operand placed at rows `c ..` of a zero array of the
    /// annotated type (the adjoint of `slice`).
    Pad(u64),
    /// `index k`: row `k` of the leading axis (an element of a vector).
    Index(u64),
    /// `unindex k`: a zero array of the annotated type with row `k` set to
    /// the operand (the adjoint of `index`).
    Unindex(u64),
    /// `repeat`: the operand repeated as every row of the annotated type
    /// (`T[s..] -> T[L, s..]`).
    Repeat,
    /// `sumlead`: sum over the leading axis (`T[L, s..] -> T[s..]`).
    SumLead,
    /// `spread`: row `i` of the annotated type filled with element `i` of a
    /// vector (`T[L] -> T[L, s..]`).
    Spread,
    /// `sumtail`: sum of each row (`T[L, s..] -> T[L]`).
    SumTail,
    /// `maxtail`: largest element of each row (`T[L, s..] -> T[L]`), like `maxall`.
    MaxTail,
    /// `mintail`: smallest element of each row, like `minall`.
    MinTail,
    /// Matrix product `[M, K] x [K, N] -> [M, N]`.
    MatMul,
    /// Matrix transpose `[M, N] -> [N, M]`.
    Transpose,
    /// `reverse`: the rows of the leading axis in reverse order
    /// (`T[L, s..] -> T[L, s..]`; element `i` of a vector is `x[L-1-i]`).
    Reverse,
    /// `reshape`: the operand's elements, in row-major order, in the
    /// annotated shape (of as many elements: `T[N, M] -> T[M*N]`).
    Reshape,
    /// Integer remainder with the sign of the divisor (floor modulo, as
    /// NumPy's `%`): `a - floor(a / b) * b`; `a % 0` is 0. `i64` only.
    Rem,
    /// `toi64`, `tof64`, `tof32`: element-wise conversion to the dtype.
    /// To `i64`: truncation toward zero, saturating at the `i64` range,
    /// NaN to 0 (Rust's `as`); from `i64`: the nearest float; `tobool`:
    /// 1 where the operand is not zero (NaN included), else 0. Piecewise
    /// constant (it only ever converts to or from integers, which carry no
    /// derivative).
    Convert(DType),
    /// `gather s x idx`: rows `idx[j]` of `x` (leading axis), one per
    /// element of the `i64` array (or scalar) `idx`: the result has shape
    /// `idx.shape ++ x.shape[1..]`. An index outside `0 .. rows` is a
    /// run-time error reported at source byte offset `s` (never read).
    Gather(u64),
    /// `scatter s idx vals`: a zero array of the annotated type `T[L, s..]`
    /// with row `vals[j]` added at row `idx[j]` for every `j`, in order
    /// (the adjoint of `gather`); an index outside `0 .. L` is a run-time
    /// error at source byte offset `s`.
    Scatter(u64),
    /// `iota`: the vector `0, 1, ..., L-1` of the annotated type `i64[L]`
    /// (the index of `tabulate` as a number). No operand, no derivative.
    Iota,
    /// `dim k x`: the length of axis `k` of `x`, an `i64` scalar (a size
    /// used as a number: `f64(N)`, `x / N`). It reads `x`'s shape, never
    /// its elements; no derivative.
    Dim(u64),
    /// `threefry0 k0 k1 c0 c1`: element-wise on `i64` operands of one
    /// shape, word 0 of the Threefry-2x32-20 block of counter `(c0, c1)`
    /// under key `(k0, k1)` ([`threefry::threefry2x32`]; each operand's low
    /// 32 bits), an integer in `0 .. 2^32`. No derivative.
    Threefry0,
    /// `threefry1 k0 k1 c0 c1`: word 1 of the same block.
    Threefry1,
    /// `loop L`: loop `L` of the enclosing function
    /// ([`crate::ir::Loop`]): its body applied `count` times, starting
    /// from the operand (the loop's whole state, packed in one array).
    ///
    /// The flag marks a *scan* loop (`scan L`): it has a second operand, a
    /// sequence whose row `t` the body reads at step `t` (its second
    /// parameter); the count is the sequence's length.
    Loop(u32, bool),
    /// `looptape L k`: loop `L` run while keeping every `k`-th state. Row 0
    /// of the result is the final state, row `1 + j` the state after `j·k`
    /// steps (`j = 0 .. ⌈count/k⌉-1`). Annotated with its type
    /// `T[⌈count/k⌉ + 1, state...]` (`T[ceil(n/k)+1, ...]` for a run-time
    /// count `n`).
    LoopTape(u32, u32, bool),
    /// `loopvjp L k m`: the cotangent of loop `L`'s initial state, given its
    /// `looptape L k` and the cotangent of the final state. The states
    /// between checkpoints are recomputed: with `m = 0` each segment once,
    /// into a buffer of `k - 1` states; with `m = 1` each state from its
    /// segment's checkpoint (no buffer, `k(k-1)/2` steps per segment).
    ///
    /// `m` is a set of flags: [`VJP_RECOMPUTE`] (the mode above),
    /// [`VJP_TAPE`] (the second operand is the cotangent of the whole tape,
    /// of the tape's type: row 0 seeds the walk and row `1 + j` is added
    /// to the cotangent of state `j·k`; a tape the program itself reads)
    /// and [`VJP_SEQ`] (the result is every state's cotangent, and for a
    /// scan every row's: `T[count + 1, wx + ws]`, row `j` the cotangent
    /// of row `j` of the sequence (`wx` elements, flattened; none for a
    /// loop that is not a scan) followed by that of state `j` (`ws`), row
    /// `count` zeros and the final state's cotangent; a scan's VJP then
    /// returns such a row).
    LoopVjp(u32, u32, u32, bool),
    /// `custom R n y x1 .. xn`: `y`, the value of a function with its own
    /// derivative rules (`@custom_vjp`, `@custom_jvp`) computed from its
    /// arguments `x1 .. xn`; rule `R` of the enclosing function
    /// ([`crate::ir::CustomRule`]). AD differentiates it with the
    /// rule (never through `y`'s statements); once differentiated it is
    /// `y` (`Function::without_customs`, before the e-graph and the
    /// backend).
    Custom(u32, u32),
    /// `kernel K n x1 .. xn`: native kernel `K` ([`kernels`]) on its `n`
    /// arguments, annotated with its result type (the kernel's shape
    /// rule's). Reverse mode applies the kernel's VJP, kernels too.
    Kernel(u32, u32),
}

/// `loopvjp` flag: each state recomputed from its segment's checkpoint
/// (no segment buffer); without it, each segment is recomputed once.
pub const VJP_RECOMPUTE: u32 = 1;
/// `loopvjp` flag: the result is every state's cotangent (and, for a
/// scan, every row's), one row per state.
pub const VJP_SEQ: u32 = 2;
/// `loopvjp` flag: the second operand is the cotangent of the whole tape.
pub const VJP_TAPE: u32 = 4;

/// Every op, for tables and tests (constants excluded; ops with a row
/// payload appear once, with payload 0; every math function).
pub const ALL_OPS: &[Op] = &all_ops::<{ OTHER_OPS.len() + Math::ALL.len() }>();

/// [`OTHER_OPS`] then every [`Op::Math`].
const fn all_ops<const N: usize>() -> [Op; N] {
    let mut out = [Op::Zero; N];
    let mut i = 0;
    while i < OTHER_OPS.len() {
        out[i] = OTHER_OPS[i];
        i += 1;
    }
    let mut k = 0;
    while k < Math::ALL.len() {
        out[i + k] = Op::Math(Math::ALL[k]);
        k += 1;
    }
    out
}

/// The ops that are not math functions.
const OTHER_OPS: &[Op] = &[
    Op::Zero,
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Neg,
    Op::Pow,
    Op::Max,
    Op::Min,
    Op::Lt,
    Op::Le,
    Op::Gt,
    Op::Ge,
    Op::Eq,
    Op::Ne,
    Op::Select,
    Op::Sum,
    Op::MaxAll,
    Op::MinAll,
    Op::Bcast,
    Op::Slice(0),
    Op::Pad(0),
    Op::Index(0),
    Op::Unindex(0),
    Op::Repeat,
    Op::SumLead,
    Op::Spread,
    Op::SumTail,
    Op::MaxTail,
    Op::MinTail,
    Op::MatMul,
    Op::Transpose,
    Op::Reverse,
    Op::Reshape,
    Op::Rem,
    Op::Convert(DType::F32),
    Op::Convert(DType::F64),
    Op::Convert(DType::I64),
    Op::Convert(DType::Bool),
    Op::Gather(0),
    Op::Scatter(0),
    Op::Iota,
    Op::Dim(0),
    Op::Threefry0,
    Op::Threefry1,
];
