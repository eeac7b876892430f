//! Symbol and arity: an op's name, its row payload and its number of operands.

use super::{Op, ALL_OPS};
use crate::types::DType;
use std::fmt;

impl Op {
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
            Op::Math(m) => m.name(),
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
            Op::Reshape => "reshape",
            Op::Rem => "rem",
            Op::Threefry0 => "threefry0",
            Op::Threefry1 => "threefry1",
            Op::Convert(DType::F32) => "tof32",
            Op::Convert(DType::F64) => "tof64",
            Op::Convert(DType::I64) => "toi64",
            Op::Convert(DType::Bool) => "tobool",
            Op::Gather(_) => "gather",
            Op::Scatter(_) => "scatter",
            Op::Iota => "iota",
            Op::Dim(_) => "dim",
            Op::Loop(_, false) => "loop",
            Op::LoopTape(_, _, false) => "looptape",
            Op::LoopVjp(_, _, _, false) => "loopvjp",
            Op::Loop(_, true) => "scan",
            Op::LoopTape(_, _, true) => "scantape",
            Op::LoopVjp(_, _, _, true) => "scanvjp",
            Op::Custom(..) => "custom",
            Op::Kernel(..) => "kernel",
        }
    }

    /// The payload of `slice`, `pad`, `index` and `unindex` (a row), and of
    /// `gather` and `scatter` (the source offset of their bounds check), and
    /// of `dim` (an axis).
    pub fn payload(&self) -> Option<u64> {
        match self {
            Op::Slice(k) | Op::Pad(k) | Op::Index(k) | Op::Unindex(k) => Some(*k),
            Op::Gather(k) | Op::Scatter(k) => Some(*k),
            Op::Dim(k) => Some(*k),
            // Every other op, by name, so that a new op with a payload
            // does not compile until it is listed above.
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
            | Op::Sum
            | Op::MaxAll
            | Op::MinAll
            | Op::Bcast
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
            | Op::Iota
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..)
            | Op::Custom(..)
            | Op::Kernel(..) => None,
        }
    }

    /// The same op with another row payload (ops without one are unchanged).
    pub fn with_payload(self, k: u64) -> Op {
        // Which ops have a payload is `payload`'s (exhaustive) answer.
        if self.payload().is_none() {
            return self;
        }
        match self {
            Op::Slice(_) => Op::Slice(k),
            Op::Pad(_) => Op::Pad(k),
            Op::Index(_) => Op::Index(k),
            Op::Unindex(_) => Op::Unindex(k),
            Op::Gather(_) => Op::Gather(k),
            Op::Scatter(_) => Op::Scatter(k),
            Op::Dim(_) => Op::Dim(k),
            other => unreachable!("`payload` gives `{}` a payload", other.name()),
        }
    }

    /// Look up a payload-free op by name.
    pub fn from_name(s: &str) -> Option<Op> {
        ALL_OPS.iter().copied().find(|op| op.name() == s)
    }

    /// How many of an e-graph node's `children` (an IR statement's
    /// operands, then its type child) are operands: the arity, or for a
    /// loop op every child but the type (a loop's captures follow its
    /// fixed operands).
    pub fn operand_count(&self, children: usize) -> usize {
        if self.is_loop() {
            children.saturating_sub(usize::from(self.needs_annotation()))
        } else {
            self.arity()
        }
    }

    /// Number of array operands (for a loop op, before its captures).
    pub fn arity(&self) -> usize {
        match self {
            Op::Const(_) | Op::Zero | Op::Iota => 0,
            Op::Neg
            | Op::Math(_)
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
            | Op::Reshape
            | Op::Convert(_)
            | Op::Dim(_)
            | Op::Loop(_, false)
            | Op::LoopTape(_, _, false) => 1,
            Op::LoopVjp(_, _, _, false) | Op::Loop(_, true) | Op::LoopTape(_, _, true) => 2,
            Op::LoopVjp(_, _, _, true) => 3,
            Op::Custom(_, n) => 1 + *n as usize,
            Op::Kernel(_, n) => *n as usize,
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
            | Op::MatMul
            | Op::Rem
            | Op::Gather(_)
            | Op::Scatter(_) => 2,
            Op::Select => 3,
            Op::Threefry0 | Op::Threefry1 => 4,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Const(l) => write!(f, "const {}", l.number_text()),
            Op::Slice(k)
            | Op::Pad(k)
            | Op::Index(k)
            | Op::Unindex(k)
            | Op::Gather(k)
            | Op::Scatter(k)
            | Op::Dim(k) => {
                write!(f, "{} {k}", self.name())
            }
            Op::Loop(l, _) => write!(f, "{} {l}", self.name()),
            Op::LoopTape(l, k, _) => write!(f, "{} {l} {k}", self.name()),
            Op::LoopVjp(l, k, m, _) => write!(f, "{} {l} {k} {m}", self.name()),
            Op::Custom(r, n) | Op::Kernel(r, n) => write!(f, "{} {r} {n}", self.name()),
            other => f.write_str(other.name()),
        }
    }
}
