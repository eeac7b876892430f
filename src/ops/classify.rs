//! Classification: which ops are piecewise constant, reductions, annotated,
//! element-wise or loops.

use super::{Native, Op};
use crate::types::DType;

/// What native code calls to compute one element of an op
/// ([`Op::element_call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementCall {
    /// Nothing: it is an instruction or a few (or the op is not computed
    /// element by element).
    None,
    /// egrad's vector math kernel.
    Kernel,
    /// A C library function, once per lane.
    Libm,
}

/// How an op's result comes from its operands ([`Op::family`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// No operand array read element by element: a literal, the symbolic
    /// zero, a scalar broadcast.
    Leaf,
    /// Element `i` of the result from element `i` of each operand.
    Elementwise,
    /// A scalar from every element (`sum`, `maxall`, `minall`).
    Reduction,
    /// Element `i` of the result is one element `f(i)` of an operand, or
    /// zero (slices, transposes, gathers, `iota`'s index).
    IndexMap,
    /// A loop nest of its own (`matmul`, row and column reductions,
    /// `scatter`).
    Nest,
    /// A loop of the enclosing function (`loop`, `looptape`, `loopvjp` and
    /// the scans).
    Loop,
    /// A value with its own derivative rules (`custom`).
    Custom,
    /// A registered native kernel.
    Kernel,
}

impl Op {
    /// Does the op have derivative rules? Not a math function without one
    /// yet (`tetragamma`): AD refuses it.
    pub fn differentiable(&self) -> bool {
        !matches!(self, Op::Math(m) if !m.differentiable())
    }

    /// Is the result piecewise constant in every operand (a comparison)?
    /// Such values are never active: reverse mode gives them no cotangent.
    pub fn is_piecewise_constant(&self) -> bool {
        match self {
            Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne => true,
            // Integers carry no derivative (a conversion between `f32` and
            // `f64` does: it rounds, and its derivative is the conversion
            // back; from an integer its operand is never active).
            Op::Rem | Op::Convert(DType::I64 | DType::Bool) | Op::Iota | Op::Dim(_) => true,
            Op::Convert(DType::F32 | DType::F64) => false,
            Op::Threefry0 | Op::Threefry1 => true,
            Op::Gather(_) | Op::Scatter(_) => false,
            Op::Const(_)
            | Op::Zero
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Math(_)
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
            | Op::Reshape
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..)
            | Op::Custom(..)
            | Op::Kernel(..) => false,
        }
    }

    /// For a reduction: the identity it starts from and the element-wise op
    /// of one step (accumulator, next element). `sum`, `maxall` and `minall`
    /// fold every element, `sumtail`, `maxtail` and `mintail` each row, and
    /// `sumlead` each column. A row (every element, or each row) folds in
    /// egrad's fixed order ([`fold_row`](super::fold_row)); a column folds top to bottom.
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
            | Op::Math(_)
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
            | Op::Reshape
            | Op::Rem
            | Op::Convert(_)
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::Iota
            | Op::Dim(_)
            | Op::Threefry0
            | Op::Threefry1
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..)
            | Op::Custom(..)
            | Op::Kernel(..) => None,
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
            Op::Reshape => true,
            Op::Scatter(_) | Op::Iota => true,
            Op::Rem | Op::Convert(_) | Op::Gather(_) | Op::Dim(_) => false,
            Op::Threefry0 | Op::Threefry1 => false,
            Op::MaxTail | Op::MinTail => false,
            Op::LoopTape(..) => true,
            // With the sequence's cotangent, rows whose width the op
            // cannot know (the loop's state and row).
            Op::LoopVjp(_, _, m, _) => m & super::VJP_SEQ != 0,
            Op::Loop(..) | Op::Custom(..) => false,
            // The shape rule's type, kept on the statement.
            Op::Kernel(..) => true,
            Op::Const(_)
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Math(_)
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

    /// Whether the op's two operands may be swapped, bit for bit (NaN
    /// payloads aside, as `rulesets/algebra.rules` says of `+` and `*`):
    /// `add`, `mul`, `max`, `min` (each treats its operands alike, signed
    /// zeros included), `eq` and `ne`.
    pub fn is_commutative(&self) -> bool {
        matches!(
            self,
            Op::Add | Op::Mul | Op::Max | Op::Min | Op::Eq | Op::Ne
        )
    }

    /// The op's family: how its result's elements come from its operands.
    pub fn family(&self) -> Family {
        match self {
            Op::Const(_) | Op::Zero | Op::Bcast => Family::Leaf,
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
            | Op::Math(_)
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
            | Op::Rem
            | Op::Threefry0
            | Op::Threefry1
            | Op::Convert(_) => Family::Elementwise,
            Op::Sum | Op::MaxAll | Op::MinAll => Family::Reduction,
            Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::Spread
            | Op::Transpose
            | Op::Reverse
            | Op::Reshape
            | Op::Gather(_)
            | Op::Iota
            | Op::Dim(_) => Family::IndexMap,
            Op::Scatter(_) | Op::SumLead | Op::SumTail | Op::MaxTail | Op::MinTail | Op::MatMul => {
                Family::Nest
            }
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => Family::Loop,
            Op::Custom(..) => Family::Custom,
            Op::Kernel(..) => Family::Kernel,
        }
    }

    /// What native code calls to compute one element of this op (from
    /// the math table's `Native` for the math functions).
    pub fn element_call(&self) -> ElementCall {
        match self {
            Op::Pow => ElementCall::Libm,
            Op::Math(m) => match m.native() {
                Native::CLib { .. } => ElementCall::Libm,
                Native::Kernel(_) => ElementCall::Kernel,
                Native::Inst(_) => ElementCall::None,
            },
            Op::Const(_)
            | Op::Zero
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Neg
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
            | Op::Reshape
            | Op::Rem
            | Op::Threefry0
            | Op::Threefry1
            | Op::Convert(_)
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::Iota
            | Op::Dim(_)
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..)
            | Op::Custom(..)
            | Op::Kernel(..) => ElementCall::None,
        }
    }

    /// Is the op applied element by element (a candidate for loop fusion)?
    pub fn is_elementwise(&self) -> bool {
        self.family() == Family::Elementwise
    }

    /// Is the op one of the loop ops, whose meaning depends on a loop body
    /// of the enclosing function (so it has no stand-alone evaluator, VJP
    /// template or per-element cost)?
    pub fn is_loop(&self) -> bool {
        self.family() == Family::Loop
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

    /// The same op referring to custom rule `f(R)` instead of `R` (when a
    /// callee's rules join its caller's); other ops are unchanged.
    pub fn map_rule(self, f: impl Fn(u32) -> u32) -> Op {
        match self {
            Op::Custom(r, n) => Op::Custom(f(r), n),
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
}
