//! The cost model's price of each op ([`Op::flops`]).

use super::Op;

/// What an op's flops ([`Op::flops`]) are counted per.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostBasis {
    /// Each element of the result.
    ResultElement,
    /// Each element of the first operand (the reductions).
    OperandElement,
    /// Each multiply-add (`matmul`: the result's elements times the inner
    /// size).
    MultiplyAdd,
}

impl Op {
    /// Cost in flops per result element (per operand element for reductions,
    /// per multiply-add for `matmul`).
    /// Unit: one floating-point add or multiply = 1. Transcendental functions
    /// are priced at about the number of multiply-adds their libm call takes.
    pub fn flops(&self) -> f64 {
        match self {
            Op::Const(_) | Op::Zero => 0.0,
            // The loop index itself; a size, read once.
            Op::Iota | Op::Dim(_) => 0.0,
            // A broadcast is fused into its consumer: reading the scalar is free.
            Op::Bcast => 0.0,
            Op::Add | Op::Sub | Op::Mul | Op::Neg | Op::Sum => 1.0,
            Op::Max | Op::Min | Op::MaxAll | Op::MinAll => 1.0,
            Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne | Op::Select => 1.0,
            Op::Div | Op::Rem => 4.0,
            // Twenty rounds of an add, a rotation and a xor on 32-bit words,
            // and five key injections.
            Op::Threefry0 | Op::Threefry1 => 80.0,
            Op::Convert(_) => 1.0,
            // A load of the index and a bounds test, fused into the consumer.
            Op::Gather(_) => 1.0,
            // Per added element.
            Op::Scatter(_) => 1.0,
            Op::Math(m) => m.flops(),
            Op::Pow => 40.0,
            // Data movement, fused into the consumer's loop.
            Op::Slice(_) | Op::Pad(_) | Op::Index(_) | Op::Unindex(_) => 0.0,
            Op::Repeat | Op::Spread | Op::Transpose | Op::Reverse | Op::Reshape => 0.0,
            // Priced from the loop's body (see `extract::cost`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => 0.0,
            // Its value, computed before it: nothing of its own.
            Op::Custom(..) => 0.0,
            // As registered.
            Op::Kernel(k, _) => super::kernels::kernel_flops(*k),
            // Per operand element (see `extract::cost`).
            Op::SumLead | Op::SumTail | Op::MaxTail | Op::MinTail => 1.0,
            // Per multiply-add (see `extract::cost`).
            Op::MatMul => 2.0,
        }
    }

    /// What [`Op::flops`] is counted per.
    pub fn cost_basis(&self) -> CostBasis {
        match self {
            Op::Sum
            | Op::MaxAll
            | Op::MinAll
            | Op::SumLead
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail => CostBasis::OperandElement,
            Op::MatMul => CostBasis::MultiplyAdd,
            Op::Const(_)
            | Op::Zero
            | Op::Iota
            | Op::Dim(_)
            | Op::Bcast
            | Op::Add
            | Op::Sub
            | Op::Mul
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
            | Op::Div
            | Op::Rem
            | Op::Threefry0
            | Op::Threefry1
            | Op::Convert(_)
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::Math(_)
            | Op::Pow
            | Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::Spread
            | Op::Transpose
            | Op::Reverse
            | Op::Reshape
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..)
            | Op::Custom(..)
            | Op::Kernel(..) => CostBasis::ResultElement,
        }
    }
}
