//! The op table: every fact about every primitive, in one place.
//!
//! Each fact is an exhaustive `match` over [`Op`] with no wildcard arm, so a
//! new op does not compile until it has all of them:
//!
//! | fact | function |
//! | --- | --- |
//! | symbol and arity | [`Op::name`], [`Op::arity`] |
//! | type rule | [`Op::result_type`] |
//! | reference evaluator | [`Op::eval`] |
//! | reverse-mode derivative (VJP template per argument) | [`Op::vjp`] |
//! | symbolic-zero absorption | [`Op::zero_if_arg_zero`] |
//! | cost (flops per element) | [`Op::flops`] |
//! | Cranelift lowering | `backend::lower` (an exhaustive match there) |
//!
//! Ops act on whole arrays. Element-wise ops take operands of one shape
//! (the front end inserts explicit [`Op::Bcast`] for scalar broadcasting), so
//! every derivative template is shape-homogeneous.

use crate::lang::types::{DType, Type};
use crate::lang::value::Value;
use std::fmt;

/// A typed floating-point literal. Holds the value's `f64` bit pattern
/// (already rounded to `dtype`), so `-0.0` and `0.0` and NaNs stay distinct
/// and the literal can be hashed (unlike `NotNan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lit {
    pub dtype: DType,
    bits: u64,
}

impl Lit {
    pub fn new(dtype: DType, value: f64) -> Lit {
        Lit {
            dtype,
            bits: dtype.round(value).to_bits(),
        }
    }

    pub fn value(self) -> f64 {
        f64::from_bits(self.bits)
    }

    /// The number alone, shortest round-trip form in the literal's precision.
    pub fn number_text(self) -> String {
        match self.dtype {
            DType::F32 => format!("{:?}", self.value() as f32),
            DType::F64 => format!("{:?}", self.value()),
            DType::I64 => format!("{}", self.value() as i64),
        }
    }

    /// Parse `2.0f32`, `-0.5f64`, `NaNf32`, `inff64`.
    pub fn parse_suffixed(s: &str) -> Option<Lit> {
        let (num, dtype) = if let Some(n) = s.strip_suffix("f32") {
            (n, DType::F32)
        } else if let Some(n) = s.strip_suffix("f64") {
            (n, DType::F64)
        } else {
            return None;
        };
        parse_number(num).map(|v| Lit::new(dtype, v))
    }
}

/// Parse a decimal float as written by [`Lit::number_text`].
pub fn parse_number(s: &str) -> Option<f64> {
    if s.is_empty() || s.starts_with('+') {
        return None;
    }
    let ok = s.chars().all(|c| c.is_ascii_digit() || ".-eE+".contains(c))
        || matches!(s, "NaN" | "inf" | "-inf");
    if !ok {
        return None;
    }
    s.parse::<f64>().ok()
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.number_text(), self.dtype)
    }
}

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
    Sin,
    Cos,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Tan,
    Abs,
    /// `log(1 + x)`, accurate near 0.
    Log1p,
    /// `exp(x) - 1`, accurate near 0.
    Expm1,
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
    /// `loop L`: loop `L` of the enclosing function
    /// ([`crate::lang::ir::Loop`]): its body applied `count` times, starting
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
    LoopVjp(u32, u32, u32, bool),
}

/// Every op, for tables and tests (constants excluded; ops with a row
/// payload appear once, with payload 0).
pub const ALL_OPS: &[Op] = &[
    Op::Zero,
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Neg,
    Op::Sin,
    Op::Cos,
    Op::Exp,
    Op::Log,
    Op::Sqrt,
    Op::Tanh,
    Op::Tan,
    Op::Abs,
    Op::Log1p,
    Op::Expm1,
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
];

/// A type rule failed: the message names what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpTypeError(pub String);

impl fmt::Display for OpTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Arithmetic both precisions share, so the evaluator runs in the program's
/// own precision (f32 math is done in f32, through the same libm the JIT calls).
pub trait Real: Copy {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn tan(self) -> Self;
    fn abs(self) -> Self;
    fn ln_1p(self) -> Self;
    fn exp_m1(self) -> Self;
    fn powf(self, o: Self) -> Self;
    fn lt(self, o: Self) -> bool;
    fn le(self, o: Self) -> bool;
    fn eq(self, o: Self) -> bool;
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
}

/// IEEE 754-2019 `maximum`: NaN if either is NaN, and +0 above -0 (what
/// Cranelift's `fmax` computes).
fn maximum<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::from_f64(f64::NAN)
    } else if a.lt(b) {
        b
    } else if b.lt(a) || b.is_sign_negative() {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `minimum`: NaN if either is NaN, and -0 below +0.
fn minimum<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::from_f64(f64::NAN)
    } else if a.lt(b) {
        a
    } else if b.lt(a) || b.is_sign_negative() {
        b
    } else {
        a
    }
}

fn mask<T: Real>(c: bool) -> T {
    T::from_f64(if c { 1.0 } else { 0.0 })
}

// The elementary functions are egrad's own kernels (`crate::vmath`): the
// generated code emits the same op sequences, so the interpreter, constant
// folding and native code agree bit for bit.
macro_rules! impl_real {
    ($t:ty, $sin:ident, $cos:ident, $exp:ident, $log:ident, $tanh:ident, $log1p:ident, $expm1:ident) => {
        impl Real for $t {
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn neg(self) -> Self {
                -self
            }
            fn sin(self) -> Self {
                crate::vmath::$sin(self)
            }
            fn cos(self) -> Self {
                crate::vmath::$cos(self)
            }
            fn exp(self) -> Self {
                crate::vmath::$exp(self)
            }
            fn ln(self) -> Self {
                crate::vmath::$log(self)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn tanh(self) -> Self {
                crate::vmath::$tanh(self)
            }
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn ln_1p(self) -> Self {
                crate::vmath::$log1p(self)
            }
            fn exp_m1(self) -> Self {
                crate::vmath::$expm1(self)
            }
            fn powf(self, o: Self) -> Self {
                <$t>::powf(self, o)
            }
            fn lt(self, o: Self) -> bool {
                self < o
            }
            fn le(self, o: Self) -> bool {
                self <= o
            }
            fn eq(self, o: Self) -> bool {
                self == o
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
        }
    };
}
impl_real!(f32, sin_f32, cos_f32, exp_f32, log_f32, tanh_f32, log1p_f32, expm1_f32);
impl_real!(f64, sin_f64, cos_f64, exp_f64, log_f64, tanh_f64, log1p_f64, expm1_f64);

/// An element function on f64-held operands, computed in a dtype's precision.
type ElemFn = fn(&[f64], DType) -> f64;

/// Apply an element-wise function in the dtype's own precision.
fn map_elems(dtype: DType, args: &[&Value], f: ElemFn) -> Value {
    let n = args.iter().map(|a| a.len()).max().unwrap_or(0);
    let shape = args
        .iter()
        .find(|a| a.len() == n)
        .map(|a| a.shape.clone())
        .unwrap_or_default();
    let mut buf = vec![0.0; args.len()];
    let mut data = Vec::with_capacity(n);
    for i in 0..n {
        for (k, a) in args.iter().enumerate() {
            buf[k] = if a.len() == 1 { a.data[0] } else { a.data[i] };
        }
        data.push(f(&buf, dtype));
    }
    Value { dtype, shape, data }
}

/// Run a generic element function at the right precision.
macro_rules! elem {
    (|$($x:ident),*| $body:expr) => {
        |xs: &[f64], dtype: DType| -> f64 {
            fn go<T: Real>(xs: &[f64]) -> T {
                let mut it = xs.iter().map(|v| T::from_f64(*v));
                $(let $x: T = it.next().unwrap_or(T::from_f64(f64::NAN));)*
                $body
            }
            match dtype {
                DType::F32 => go::<f32>(xs).to_f64(),
                // No op takes an `i64` operand (the type rules refuse it).
                DType::F64 | DType::I64 => go::<f64>(xs).to_f64(),
            }
        }
    };
}

/// How many interleaved partial results a reduction over a row keeps
/// (`sum`, `maxall`, `minall`, and each row of `sumtail`, `maxtail`,
/// `mintail`): see [`fold_row`].
pub const FOLD_LANES: usize = 8;

/// A reduction of one row in egrad's fixed order, shared by the reference
/// evaluator, constant folding and native code (which runs it as four
/// `f64x2` or two `f32x4` accumulators), so all three agree bit for bit.
///
/// Element `i` of the first `8 * floor(n / 8)` goes into partial `i mod 8`,
/// left to right from the identity; the partials combine as
/// `q_j = p_j ⊕ p_{j+4}`, `r_j = q_j ⊕ q_{j+2}`, `r_0 ⊕ r_1`; the
/// remaining `n mod 8` elements are then added left to right. A row of
/// fewer than 8 elements is therefore folded plainly left to right.
pub fn fold_row(xs: &[f64], init: f64, step: &dyn Fn(f64, f64) -> f64) -> f64 {
    let main = xs.len() - xs.len() % FOLD_LANES;
    let mut p = [init; FOLD_LANES];
    for chunk in xs[..main].chunks_exact(FOLD_LANES) {
        for (acc, &x) in p.iter_mut().zip(chunk) {
            *acc = step(*acc, x);
        }
    }
    let q: [f64; 4] = std::array::from_fn(|j| step(p[j], p[j + 4]));
    let r: [f64; 2] = std::array::from_fn(|j| step(q[j], q[j + 2]));
    let mut acc = step(r[0], r[1]);
    for &x in &xs[main..] {
        acc = step(acc, x);
    }
    acc
}

impl Op {
    /// `fold_row` with this reduction's step, in the dtype's precision.
    fn fold_row(&self, xs: &[f64], dtype: DType) -> f64 {
        let (init, step) = self.fold();
        fold_row(xs, init, &|a, b| step(&[a, b], dtype))
    }

    /// A reduction's identity and its step as an element function.
    fn fold(&self) -> (f64, ElemFn) {
        let (init, step) = self.reduction().unwrap_or((0.0, Op::Add));
        let f: ElemFn = match step {
            Op::Max => elem!(|a, b| maximum(a, b)),
            Op::Min => elem!(|a, b| minimum(a, b)),
            _ => elem!(|a, b| a.add(b)),
        };
        (init, f)
    }

    /// The op's name in the IR text form and in rule patterns.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Const(_) => "const",
            Op::Zero => "zero",
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::Div => "div",
            Op::Neg => "neg",
            Op::Sin => "sin",
            Op::Cos => "cos",
            Op::Exp => "exp",
            Op::Log => "log",
            Op::Sqrt => "sqrt",
            Op::Tanh => "tanh",
            Op::Tan => "tan",
            Op::Abs => "abs",
            Op::Log1p => "log1p",
            Op::Expm1 => "expm1",
            Op::Pow => "pow",
            Op::Max => "max",
            Op::Min => "min",
            Op::Lt => "lt",
            Op::Le => "le",
            Op::Gt => "gt",
            Op::Ge => "ge",
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::Select => "select",
            Op::Sum => "sum",
            Op::MaxAll => "maxall",
            Op::MinAll => "minall",
            Op::Bcast => "bcast",
            Op::Slice(_) => "slice",
            Op::Pad(_) => "pad",
            Op::Index(_) => "index",
            Op::Unindex(_) => "unindex",
            Op::Repeat => "repeat",
            Op::SumLead => "sumlead",
            Op::Spread => "spread",
            Op::SumTail => "sumtail",
            Op::MaxTail => "maxtail",
            Op::MinTail => "mintail",
            Op::MatMul => "matmul",
            Op::Transpose => "transpose",
            Op::Reverse => "reverse",
            Op::Loop(_, false) => "loop",
            Op::LoopTape(_, _, false) => "looptape",
            Op::LoopVjp(_, _, _, false) => "loopvjp",
            Op::Loop(_, true) => "scan",
            Op::LoopTape(_, _, true) => "scantape",
            Op::LoopVjp(_, _, _, true) => "scanvjp",
        }
    }

    /// The row payload of `slice`, `pad`, `index` and `unindex`.
    pub fn payload(&self) -> Option<u64> {
        match self {
            Op::Slice(k) | Op::Pad(k) | Op::Index(k) | Op::Unindex(k) => Some(*k),
            _ => None,
        }
    }

    /// The same op with another row payload (ops without one are unchanged).
    pub fn with_payload(self, k: u64) -> Op {
        match self {
            Op::Slice(_) => Op::Slice(k),
            Op::Pad(_) => Op::Pad(k),
            Op::Index(_) => Op::Index(k),
            Op::Unindex(_) => Op::Unindex(k),
            other => other,
        }
    }

    /// Look up a payload-free op by name.
    pub fn from_name(s: &str) -> Option<Op> {
        ALL_OPS.iter().copied().find(|op| op.name() == s)
    }

    /// Number of array operands.
    pub fn arity(&self) -> usize {
        match self {
            Op::Const(_) | Op::Zero => 0,
            Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Sum
            | Op::MaxAll
            | Op::MinAll
            | Op::Bcast
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::SumLead
            | Op::Spread
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::Transpose
            | Op::Reverse
            | Op::Loop(_, false)
            | Op::LoopTape(_, _, false) => 1,
            Op::LoopVjp(_, _, _, false) | Op::Loop(_, true) | Op::LoopTape(_, _, true) => 2,
            Op::LoopVjp(_, _, _, true) => 3,
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::MatMul => 2,
            Op::Select => 3,
        }
    }

    /// Is the result piecewise constant in every operand (a comparison)?
    /// Such values are never active: reverse mode gives them no cotangent.
    pub fn is_piecewise_constant(&self) -> bool {
        match self {
            Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne => true,
            Op::Const(_)
            | Op::Zero
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Select
            | Op::Sum
            | Op::MaxAll
            | Op::MinAll
            | Op::Bcast
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::SumLead
            | Op::Spread
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::MatMul
            | Op::Transpose
            | Op::Reverse
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..) => false,
        }
    }

    /// For a reduction: the identity it starts from and the element-wise op
    /// of one step (accumulator, next element). `sum`, `maxall` and `minall`
    /// fold every element, `sumtail`, `maxtail` and `mintail` each row, and
    /// `sumlead` each column. A row (every element, or each row) folds in
    /// egrad's fixed order ([`fold_row`]); a column folds top to bottom.
    /// The JIT and the interpreter fold alike.
    pub fn reduction(&self) -> Option<(f64, Op)> {
        match self {
            Op::Sum | Op::SumLead | Op::SumTail => Some((0.0, Op::Add)),
            Op::MaxAll | Op::MaxTail => Some((f64::NEG_INFINITY, Op::Max)),
            Op::MinAll | Op::MinTail => Some((f64::INFINITY, Op::Min)),
            Op::Const(_)
            | Op::Zero
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::Select
            | Op::Bcast
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::Spread
            | Op::MatMul
            | Op::Transpose
            | Op::Reverse
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..) => None,
        }
    }

    /// Does the result type come from an annotation (the IR statement's type,
    /// the e-graph node's type child) rather than from the operands?
    pub fn needs_annotation(&self) -> bool {
        match self {
            Op::Zero | Op::Bcast | Op::Slice(_) | Op::Pad(_) | Op::Unindex(_) => true,
            Op::Repeat | Op::Spread => true,
            Op::Index(_) | Op::SumLead | Op::SumTail | Op::MatMul | Op::Transpose => false,
            Op::Reverse => false,
            Op::MaxTail | Op::MinTail => false,
            Op::LoopTape(..) => true,
            Op::Loop(..) | Op::LoopVjp(..) => false,
            Op::Const(_)
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::Select
            | Op::Sum
            | Op::MaxAll
            | Op::MinAll => false,
        }
    }

    /// Is the op applied element by element (a candidate for loop fusion)?
    pub fn is_elementwise(&self) -> bool {
        match self {
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::Select => true,
            Op::Const(_) | Op::Zero | Op::Sum | Op::MaxAll | Op::MinAll | Op::Bcast => false,
            Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::SumLead
            | Op::Spread
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::MatMul
            | Op::Transpose
            | Op::Reverse
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..) => false,
        }
    }

    /// Is the op one of the loop ops, whose meaning depends on a loop body
    /// of the enclosing function (so it has no stand-alone evaluator, VJP
    /// template or per-element cost)?
    pub fn is_loop(&self) -> bool {
        matches!(self, Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..))
    }

    /// The same op referring to loop `f(L)` instead of `L` (when loops are
    /// renumbered: a callee's joining its caller's, a step's moving into a
    /// body); other ops are unchanged.
    pub fn map_loop(self, f: impl Fn(u32) -> u32) -> Op {
        match self {
            Op::Loop(l, q) => Op::Loop(f(l), q),
            Op::LoopTape(l, k, q) => Op::LoopTape(f(l), k, q),
            Op::LoopVjp(l, k, m, q) => Op::LoopVjp(f(l), k, m, q),
            other => other,
        }
    }

    /// The loop an op refers to.
    pub fn loop_id(&self) -> Option<usize> {
        match self {
            Op::Loop(l, _) | Op::LoopTape(l, ..) | Op::LoopVjp(l, ..) => Some(*l as usize),
            _ => None,
        }
    }

    /// The type rule. For the loop ops it checks only what the operands
    /// show; [`crate::lang::ir::Function::validate`] checks them against
    /// the loop's body.
    pub fn result_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        if args.len() != self.arity() {
            return Err(OpTypeError(format!(
                "`{}` takes {} operand(s), got {}",
                self.name(),
                self.arity(),
                args.len()
            )));
        }
        let need_annot = || {
            annot
                .cloned()
                .ok_or_else(|| OpTypeError(format!("`{}` needs a result type", self.name())))
        };
        match self {
            Op::Const(l) => Ok(Type::scalar(l.dtype)),
            Op::Zero => need_annot(),
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne => {
                if args[0] != args[1] {
                    return Err(OpTypeError(format!(
                        "`{}` needs operands of one type, got {} and {}",
                        self.name(),
                        args[0],
                        args[1]
                    )));
                }
                Ok(args[0].clone())
            }
            Op::Select => {
                if args[0] != args[1] || args[1] != args[2] {
                    return Err(OpTypeError(format!(
                        "`select` needs a mask and two operands of one type, got {}, {} and {}",
                        args[0], args[1], args[2]
                    )));
                }
                Ok(args[1].clone())
            }
            Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1 => Ok(args[0].clone()),
            Op::Sum | Op::MaxAll | Op::MinAll => {
                if args[0].is_scalar() {
                    return Err(OpTypeError(format!(
                        "`{}` needs an array operand",
                        self.name()
                    )));
                }
                Ok(Type::scalar(args[0].dtype))
            }
            Op::Bcast => {
                let t = need_annot()?;
                if !args[0].is_scalar() || args[0].dtype != t.dtype {
                    return Err(OpTypeError(format!(
                        "`bcast` to {t} needs a {} scalar, got {}",
                        t.dtype, args[0]
                    )));
                }
                Ok(t)
            }
            Op::Slice(_) | Op::Pad(_) => {
                // Same dtype and rank; equal trailing dims; the leading one
                // changes (its bounds are checked when sizes are bound).
                let t = need_annot()?;
                let a = args[0];
                if a.is_scalar()
                    || a.dtype != t.dtype
                    || a.rank() != t.rank()
                    || a.shape[1..] != t.shape[1..]
                {
                    return Err(OpTypeError(format!(
                        "`{}` to {t} needs an array of the same rows, got {a}",
                        self.name()
                    )));
                }
                Ok(t)
            }
            Op::Index(_) | Op::SumLead => {
                let a = args[0];
                if a.is_scalar() {
                    return Err(OpTypeError(format!(
                        "`{}` needs an array operand",
                        self.name()
                    )));
                }
                Ok(Type::array(a.dtype, a.shape[1..].to_vec()))
            }
            Op::Unindex(_) | Op::Repeat => {
                let t = need_annot()?;
                let a = args[0];
                if t.is_scalar() || a.dtype != t.dtype || a.shape[..] != t.shape[1..] {
                    return Err(OpTypeError(format!(
                        "`{}` to {t} needs a {} row, got {a}",
                        self.name(),
                        Type::array(t.dtype, t.shape.get(1..).unwrap_or(&[]).to_vec())
                    )));
                }
                Ok(t)
            }
            Op::Spread => {
                let t = need_annot()?;
                let a = args[0];
                if t.is_scalar() || a.dtype != t.dtype || a.rank() != 1 || a.shape[0] != t.shape[0]
                {
                    return Err(OpTypeError(format!(
                        "`spread` to {t} needs a vector of its leading length, got {a}"
                    )));
                }
                Ok(t)
            }
            Op::SumTail | Op::MaxTail | Op::MinTail => {
                let a = args[0];
                if a.is_scalar() {
                    return Err(OpTypeError(format!(
                        "`{}` needs an array operand",
                        self.name()
                    )));
                }
                Ok(Type::array(a.dtype, vec![a.shape[0].clone()]))
            }
            Op::MatMul => {
                let (a, b) = (args[0], args[1]);
                if a.rank() != 2 || b.rank() != 2 || a.dtype != b.dtype || a.shape[1] != b.shape[0]
                {
                    return Err(OpTypeError(format!(
                        "`matmul` needs matrices [M, K] and [K, N], got {a} and {b}"
                    )));
                }
                Ok(Type::array(
                    a.dtype,
                    vec![a.shape[0].clone(), b.shape[1].clone()],
                ))
            }
            Op::Transpose => {
                let a = args[0];
                if a.rank() != 2 {
                    return Err(OpTypeError(format!("`transpose` needs a matrix, got {a}")));
                }
                Ok(Type::array(
                    a.dtype,
                    vec![a.shape[1].clone(), a.shape[0].clone()],
                ))
            }
            Op::Reverse => {
                let a = args[0];
                if a.is_scalar() {
                    return Err(OpTypeError(format!(
                        "`reverse` needs an array (rank 1 or more), got {a}"
                    )));
                }
                Ok(a.clone())
            }
            Op::Loop(..) => Ok(args[0].clone()),
            Op::LoopTape(_, k, _) => {
                let t = need_annot()?;
                if *k == 0
                    || t.dtype != args[0].dtype
                    || t.rank() != args[0].rank() + 1
                    || t.shape[1..] != args[0].shape[..]
                {
                    return Err(OpTypeError(format!(
                        "`looptape` of a state {} gives rows of that state (keeping every k-th, k > 0), not {t}",
                        args[0]
                    )));
                }
                Ok(t)
            }
            Op::LoopVjp(_, k, m, _) => {
                let (tape, ct) = (args[0], args[1]);
                if *k == 0
                    || *m > 1
                    || tape.dtype != ct.dtype
                    || tape.rank() != ct.rank() + 1
                    || tape.shape[1..] != ct.shape[..]
                {
                    return Err(OpTypeError(format!(
                        "`loopvjp` needs a tape of states, the cotangent of one state, k > 0 and mode 0 or 1; got {tape} and {ct}"
                    )));
                }
                Ok(ct.clone())
            }
        }
    }

    /// The reference evaluator. `out_shape` is the concrete result shape
    /// (needed by [`Op::Zero`] and [`Op::Bcast`]); `dtype` the result dtype.
    pub fn eval(&self, args: &[&Value], dtype: DType, out_shape: &[usize]) -> Value {
        let fill = |x: f64| Value {
            dtype,
            shape: out_shape.to_vec(),
            data: vec![dtype.round(x); out_shape.iter().product()],
        };
        match self {
            Op::Const(l) => Value::scalar(l.dtype, l.value()),
            Op::Zero => fill(0.0),
            // Their meaning is a loop body of the enclosing function: the
            // interpreter runs them (`lang::interp`), and constant folding
            // skips them (`Op::is_loop`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => {
                unreachable!("`{self}` is evaluated with its loop body, not by Op::eval")
            }
            Op::Add => map_elems(dtype, args, elem!(|a, b| a.add(b))),
            Op::Sub => map_elems(dtype, args, elem!(|a, b| a.sub(b))),
            Op::Mul => map_elems(dtype, args, elem!(|a, b| a.mul(b))),
            Op::Div => map_elems(dtype, args, elem!(|a, b| a.div(b))),
            Op::Neg => map_elems(dtype, args, elem!(|a| a.neg())),
            Op::Sin => map_elems(dtype, args, elem!(|a| a.sin())),
            Op::Cos => map_elems(dtype, args, elem!(|a| a.cos())),
            Op::Exp => map_elems(dtype, args, elem!(|a| a.exp())),
            Op::Log => map_elems(dtype, args, elem!(|a| a.ln())),
            Op::Sqrt => map_elems(dtype, args, elem!(|a| a.sqrt())),
            Op::Tanh => map_elems(dtype, args, elem!(|a| a.tanh())),
            Op::Tan => map_elems(dtype, args, elem!(|a| a.tan())),
            Op::Abs => map_elems(dtype, args, elem!(|a| a.abs())),
            Op::Log1p => map_elems(dtype, args, elem!(|a| a.ln_1p())),
            Op::Expm1 => map_elems(dtype, args, elem!(|a| a.exp_m1())),
            Op::Pow => map_elems(dtype, args, elem!(|a, b| a.powf(b))),
            Op::Max => map_elems(dtype, args, elem!(|a, b| maximum(a, b))),
            Op::Min => map_elems(dtype, args, elem!(|a, b| minimum(a, b))),
            Op::Lt => map_elems(dtype, args, elem!(|a, b| mask(a.lt(b)))),
            Op::Le => map_elems(dtype, args, elem!(|a, b| mask(a.le(b)))),
            Op::Gt => map_elems(dtype, args, elem!(|a, b| mask(b.lt(a)))),
            Op::Ge => map_elems(dtype, args, elem!(|a, b| mask(b.le(a)))),
            Op::Eq => map_elems(dtype, args, elem!(|a, b| mask(a.eq(b)))),
            Op::Ne => map_elems(dtype, args, elem!(|a, b| mask(!a.eq(b)))),
            Op::Select => map_elems(
                dtype,
                args,
                elem!(|c, a, b| if c.eq(T::from_f64(0.0)) { b } else { a }),
            ),
            Op::Sum | Op::MaxAll | Op::MinAll => {
                // egrad's fixed order, in the dtype's precision (the JIT's).
                Value::scalar(dtype, self.fold_row(&args[0].data, dtype))
            }
            Op::Bcast => fill(args[0].as_scalar()),
            Op::Slice(c) => {
                let a = args[0];
                let row: usize = a.shape[1..].iter().product();
                let n: usize = out_shape.iter().product();
                let start = *c as usize * row;
                let data = a.data.get(start..start + n).map(<[f64]>::to_vec);
                Value {
                    dtype,
                    shape: out_shape.to_vec(),
                    data: data.unwrap_or_else(|| vec![f64::NAN; n]),
                }
            }
            Op::Pad(c) | Op::Unindex(c) => {
                let a = args[0];
                let mut out = fill(0.0);
                let row: usize = out_shape[1..].iter().product();
                let start = *c as usize * row;
                if let Some(dst) = out.data.get_mut(start..start + a.data.len()) {
                    dst.copy_from_slice(&a.data);
                }
                out
            }
            Op::Index(k) => {
                let a = args[0];
                let row: usize = a.shape[1..].iter().product();
                let start = *k as usize * row;
                Value {
                    dtype,
                    shape: a.shape[1..].to_vec(),
                    data: a
                        .data
                        .get(start..start + row)
                        .map(<[f64]>::to_vec)
                        .unwrap_or_else(|| vec![f64::NAN; row]),
                }
            }
            Op::Repeat => {
                let a = args[0];
                let n: usize = out_shape.iter().product();
                let data = (0..n).map(|i| a.data[i % a.data.len().max(1)]).collect();
                Value {
                    dtype,
                    shape: out_shape.to_vec(),
                    data,
                }
            }
            Op::Spread => {
                let a = args[0];
                let n: usize = out_shape.iter().product();
                let row: usize = out_shape[1..].iter().product();
                let data = (0..n).map(|i| a.data[i / row.max(1)]).collect();
                Value {
                    dtype,
                    shape: out_shape.to_vec(),
                    data,
                }
            }
            Op::SumLead => {
                // Row by row, top to bottom, from the identity (the JIT's order).
                let a = args[0];
                let row: usize = a.shape[1..].iter().product();
                let (init, step) = self.fold();
                let mut data = vec![init; row];
                for (i, x) in a.data.iter().enumerate() {
                    let j = i % row.max(1);
                    data[j] = step(&[data[j], *x], dtype);
                }
                Value {
                    dtype,
                    shape: a.shape[1..].to_vec(),
                    data,
                }
            }
            Op::SumTail | Op::MaxTail | Op::MinTail => {
                // Each row in egrad's fixed order (the JIT's).
                let a = args[0];
                let row: usize = a.shape[1..].iter().product();
                let data = (0..a.shape[0])
                    .map(|r| self.fold_row(&a.data[r * row..(r + 1) * row], dtype))
                    .collect();
                Value {
                    dtype,
                    shape: vec![a.shape[0]],
                    data,
                }
            }
            Op::MatMul => {
                // out[i, j]: a chain of fused multiply-adds over k from +0
                // (`crate::gemm`, the kernel native code calls too).
                let (a, b) = (args[0], args[1]);
                let (m, kk, n) = (a.shape[0], a.shape[1], b.shape[1]);
                Value {
                    dtype,
                    shape: vec![m, n],
                    data: crate::gemm::matmul(dtype == DType::F32, &a.data, &b.data, m, kk, n),
                }
            }
            Op::Transpose => {
                let a = args[0];
                let (m, n) = (a.shape[0], a.shape[1]);
                let mut data = Vec::with_capacity(m * n);
                for j in 0..n {
                    for i in 0..m {
                        data.push(a.data[i * n + j]);
                    }
                }
                Value {
                    dtype,
                    shape: vec![n, m],
                    data,
                }
            }
            Op::Reverse => {
                // Row r of the result is row L-1-r of the operand.
                let a = args[0];
                let row: usize = a.shape.get(1..).unwrap_or(&[]).iter().product();
                let data = if row == 0 {
                    Vec::new()
                } else {
                    a.data.chunks(row).rev().flatten().copied().collect()
                };
                Value {
                    dtype,
                    shape: a.shape.clone(),
                    data,
                }
            }
        }
    }

    /// Reverse-mode rule: for each operand, a template for its cotangent
    /// contribution, in the rule-pattern syntax. `?g` is the cotangent of
    /// the result, `?out` the primal result, `?a`, `?b`, `?c` the operands.
    /// `(zero)` is the symbolic zero (a piecewise-constant dependence).
    /// Numbers take the operand's dtype; a number meeting an array operand is
    /// broadcast. The template of `bcast` (from `sum`) takes the operand's type.
    pub fn vjp(&self) -> Vec<String> {
        let fixed: &[&str] = match self {
            Op::Const(_) | Op::Zero => &[],
            Op::Add => &["?g", "?g"],
            Op::Sub => &["?g", "(neg ?g)"],
            Op::Mul => &["(mul ?g ?b)", "(mul ?g ?a)"],
            Op::Div => &["(div ?g ?b)", "(neg (div (mul ?g ?out) ?b))"],
            Op::Neg => &["(neg ?g)"],
            Op::Sin => &["(mul ?g (cos ?a))"],
            Op::Cos => &["(neg (mul ?g (sin ?a)))"],
            Op::Exp => &["(mul ?g ?out)"],
            Op::Log => &["(div ?g ?a)"],
            Op::Sqrt => &["(div ?g (mul 2 ?out))"],
            Op::Tanh => &["(mul ?g (sub 1 (mul ?out ?out)))"],
            Op::Tan => &["(mul ?g (add 1 (mul ?out ?out)))"],
            // d|a| = sign(a), with 0 at 0 (JAX's convention).
            Op::Abs => &["(select (gt ?a 0) ?g (select (lt ?a 0) (neg ?g) 0))"],
            Op::Log1p => &["(div ?g (add 1 ?a))"],
            Op::Expm1 => &["(mul ?g (add ?out 1))"],
            Op::Pow => &[
                "(mul ?g (mul ?b (pow ?a (sub ?b 1))))",
                "(mul ?g (mul ?out (log ?a)))",
            ],
            // Ties go to the first operand.
            Op::Max => &["(select (ge ?a ?b) ?g 0)", "(select (ge ?a ?b) 0 ?g)"],
            Op::Min => &["(select (le ?a ?b) ?g 0)", "(select (le ?a ?b) 0 ?g)"],
            Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne => &["(zero)", "(zero)"],
            Op::Select => &["(zero)", "(select ?a ?g 0)", "(select ?a 0 ?g)"],
            Op::Sum => &["(bcast ?g)"],
            // Every element equal to the extremum receives the cotangent.
            Op::MaxAll | Op::MinAll => &["(select (eq ?a (bcast ?out)) (bcast ?g) 0)"],
            Op::Bcast => &["(sum ?g)"],
            Op::Slice(c) => return vec![format!("(pad {c} ?g)")],
            Op::Pad(c) => return vec![format!("(slice {c} ?g)")],
            Op::Index(k) => return vec![format!("(unindex {k} ?g)")],
            Op::Unindex(k) => return vec![format!("(index {k} ?g)")],
            Op::Repeat => &["(sumlead ?g)"],
            Op::SumLead => &["(repeat ?g)"],
            Op::Spread => &["(sumtail ?g)"],
            Op::SumTail => &["(spread ?g)"],
            Op::MaxTail | Op::MinTail => &["(select (eq ?a (spread ?out)) (spread ?g) 0)"],
            Op::MatMul => &["(matmul ?g (transpose ?b))", "(matmul (transpose ?a) ?g)"],
            Op::Transpose => &["(transpose ?g)"],
            Op::Reverse => &["(reverse ?g)"],
            // Differentiated by the loop pass (`differentiate::loops`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => &[],
        };
        fixed.iter().map(|t| t.to_string()).collect()
    }

    /// Forward-mode rule: for each operand, a template for its contribution
    /// to the result's tangent, where `?t` is that operand's tangent (and
    /// `?out`, `?a`, `?b`, `?c` as in [`Op::vjp`]). The driver sums the
    /// contributions of the operands that have a tangent.
    pub fn jvp(&self) -> Vec<String> {
        match self {
            Op::Const(_) | Op::Zero => Vec::new(),
            // Element-wise: the Jacobian is diagonal, so the tangent's
            // contribution is the VJP template (linear in `?g`) with the
            // tangent in place of the cotangent.
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::Select => self.vjp().iter().map(|t| t.replace("?g", "?t")).collect(),
            // Linear in their operand: the op applied to the tangent.
            Op::Sum
            | Op::Bcast
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::SumLead
            | Op::Spread
            | Op::SumTail
            | Op::Transpose
            | Op::Reverse => vec![format!("({self} ?t)")],
            // The tangents of every element equal to the extremum (the
            // transpose of the VJP, which gives each of them the cotangent).
            Op::MaxAll | Op::MinAll => vec!["(sum (select (eq ?a (bcast ?out)) ?t 0))".into()],
            Op::MaxTail | Op::MinTail => {
                vec!["(sumtail (select (eq ?a (spread ?out)) ?t 0))".into()]
            }
            Op::MatMul => vec!["(matmul ?t ?b)".into(), "(matmul ?a ?t)".into()],
            // Differentiated by the loop pass (`differentiate::loops`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => Vec::new(),
        }
    }

    /// Is the result a symbolic zero whenever operand `i` is one (the op is
    /// linear in that operand with no other term)? Used by the e-graph's
    /// zero analysis.
    pub fn zero_if_arg_zero(&self, i: usize) -> bool {
        match self {
            Op::Mul => true,
            Op::Div => i == 0,
            Op::Neg | Op::Sum | Op::Bcast => true,
            Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::SumLead
            | Op::Spread
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::MatMul
            | Op::Transpose
            | Op::Reverse => true,
            // Linear in the cotangent.
            Op::LoopVjp(..) => i == 1,
            Op::Loop(..) | Op::LoopTape(..) => false,
            Op::Const(_)
            | Op::Zero
            | Op::Add
            | Op::Sub
            | Op::Sin
            | Op::Cos
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Tanh
            | Op::Tan
            | Op::Abs
            | Op::Log1p
            | Op::Expm1
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::Select
            | Op::MaxAll
            | Op::MinAll => false,
        }
    }

    /// Cost in flops per result element (per operand element for reductions,
    /// per multiply-add for `matmul`).
    /// Unit: one floating-point add or multiply = 1. Transcendental functions
    /// are priced at about the number of multiply-adds their libm call takes.
    pub fn flops(&self) -> f64 {
        match self {
            Op::Const(_) | Op::Zero => 0.0,
            // A broadcast is fused into its consumer: reading the scalar is free.
            Op::Bcast => 0.0,
            Op::Add | Op::Sub | Op::Mul | Op::Neg | Op::Sum => 1.0,
            Op::Abs | Op::Max | Op::Min | Op::MaxAll | Op::MinAll => 1.0,
            Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne | Op::Select => 1.0,
            Op::Div => 4.0,
            Op::Sqrt => 6.0,
            Op::Sin | Op::Cos | Op::Exp | Op::Log | Op::Tanh => 20.0,
            Op::Tan | Op::Log1p | Op::Expm1 => 20.0,
            Op::Pow => 40.0,
            // Data movement, fused into the consumer's loop.
            Op::Slice(_) | Op::Pad(_) | Op::Index(_) | Op::Unindex(_) => 0.0,
            Op::Repeat | Op::Spread | Op::Transpose | Op::Reverse => 0.0,
            // Priced from the loop's body (see `extract::cost`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => 0.0,
            // Per operand element (see `extract::cost`).
            Op::SumLead | Op::SumTail | Op::MaxTail | Op::MinTail => 1.0,
            // Per multiply-add (see `extract::cost`).
            Op::MatMul => 2.0,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Const(l) => write!(f, "const {}", l.number_text()),
            Op::Slice(k) | Op::Pad(k) | Op::Index(k) | Op::Unindex(k) => {
                write!(f, "{} {k}", self.name())
            }
            Op::Loop(l, _) => write!(f, "{} {l}", self.name()),
            Op::LoopTape(l, k, _) => write!(f, "{} {l} {k}", self.name()),
            Op::LoopVjp(l, k, m, _) => write!(f, "{} {l} {k} {m}", self.name()),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in ALL_OPS {
            assert_eq!(Op::from_name(op.name()), Some(*op));
            assert_eq!(op.vjp().len(), op.arity(), "{op:?}");
        }
    }

    #[test]
    fn literals_keep_sign_of_zero_and_nan() {
        let z = Lit::new(DType::F32, 0.0);
        let nz = Lit::new(DType::F32, -0.0);
        assert_ne!(z, nz);
        assert_eq!(nz.to_string(), "-0.0f32");
        for s in [
            "2.0f32", "-0.5f64", "NaNf32", "inff64", "-inff32", "1e-8f32",
        ] {
            assert_eq!(Lit::parse_suffixed(s).unwrap().to_string(), s);
        }
        assert!(Lit::parse_suffixed("2.0").is_none());
        assert!(Lit::parse_suffixed("xf32").is_none());
    }

    #[test]
    fn f32_eval_rounds_in_f32() {
        let a = Value::scalar(DType::F32, 0.1);
        let b = Value::scalar(DType::F32, 0.2);
        let r = Op::Add.eval(&[&a, &b], DType::F32, &[]);
        assert_eq!(r.as_scalar(), (0.1f32 + 0.2f32) as f64);
    }
}
