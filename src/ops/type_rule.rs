//! The type rule ([`Op::result_type`]) and its error.

use super::Op;
use crate::types::{DType, Dim, Type};
use std::fmt;

/// A type rule failed: the message names what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpTypeError(pub String);

impl fmt::Display for OpTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Op {
    /// The type rule. For the loop ops it checks only what the operands
    /// show; [`crate::ir::Function::validate`] checks them against
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
        // A bool (0 or 1) is only converted or moved, never computed with
        // (the front end computes with conditions as masks).
        let moves = (self.payload().is_some() && !matches!(self, Op::Scatter(_)))
            || matches!(
                self,
                Op::Convert(_)
                    | Op::Bcast
                    | Op::Repeat
                    | Op::Spread
                    | Op::Reshape
                    | Op::Transpose
                    | Op::Reverse
            );
        if !moves {
            if let Some(a) = args.iter().find(|a| a.dtype == DType::Bool) {
                return Err(OpTypeError(format!(
                    "`{}` does not take bool operands, got {a}",
                    self.name()
                )));
            }
        }
        if self.float_only() {
            if let Some(a) = args.iter().find(|a| a.dtype.is_int()) {
                return Err(OpTypeError(format!(
                    "`{}` needs floating-point operands, got {a}",
                    self.name()
                )));
            }
        }
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
            | Op::Ne
            | Op::Rem => self.binary_type(args),
            Op::Threefry0 | Op::Threefry1 => self.threefry_type(args),
            Op::Select => {
                if args[0] != args[1] || args[1] != args[2] {
                    return Err(OpTypeError(format!(
                        "`select` needs a mask and two operands of one type, got {}, {} and {}",
                        args[0], args[1], args[2]
                    )));
                }
                Ok(args[1].clone())
            }
            Op::Neg | Op::Math(_) => Ok(args[0].clone()),
            Op::Sum | Op::MaxAll | Op::MinAll => {
                if args[0].is_scalar() {
                    return Err(OpTypeError(format!(
                        "`{}` needs an array operand",
                        self.name()
                    )));
                }
                Ok(Type::scalar(args[0].dtype))
            }
            Op::Bcast => self.bcast_type(args, annot),
            Op::Slice(_) | Op::Pad(_) => self.rows_type(args, annot),
            Op::Index(_) | Op::SumLead => self.row_type(args),
            Op::Unindex(_) | Op::Repeat => self.unrow_type(args, annot),
            Op::Spread => self.spread_type(args, annot),
            Op::SumTail | Op::MaxTail | Op::MinTail => self.sumtail_type(args),
            Op::MatMul => self.matmul_type(args),
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
            Op::Reshape => self.reshape_type(args, annot),
            Op::Convert(d) => Ok(Type::array(*d, args[0].shape.clone())),
            Op::Gather(_) => self.gather_type(args),
            Op::Scatter(_) => self.scatter_type(args, annot),
            Op::Iota => {
                let t = need_annot()?;
                if t.dtype != DType::I64 || t.rank() != 1 {
                    return Err(OpTypeError(format!("`iota` gives an i64 vector, not {t}")));
                }
                Ok(t)
            }
            Op::Loop(..) | Op::Custom(..) => Ok(args[0].clone()),
            Op::Kernel(k, _) => self.kernel_type(args, annot, *k),
            Op::LoopTape(_, k, _) => self.looptape_type(args, annot, *k),
            Op::LoopVjp(_, k, m, _) => self.loopvjp_type(args, annot, *k, *m),
        }
    }
}

impl Op {
    /// Ops of real analysis (transcendental functions, powers, `matmul`)
    /// that refuse `i64` operands.
    fn float_only(&self) -> bool {
        match self {
            Op::Math(m) => !m.takes_int(),
            Op::Pow | Op::MatMul => true,
            _ => false,
        }
    }
}

impl Op {
    /// The annotation, which this op's type comes from.
    fn need_annot(&self, annot: Option<&Type>) -> Result<Type, OpTypeError> {
        annot
            .cloned()
            .ok_or_else(|| OpTypeError(format!("`{}` needs a result type", self.name())))
    }

    /// Two operands of one type (arithmetic, comparisons, `rem` on i64).
    fn binary_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        if *self == Op::Rem && args[0].dtype != DType::I64 {
            return Err(OpTypeError(format!(
                "`rem` needs i64 operands, got {}",
                args[0]
            )));
        }
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

    /// Four i64 operands of one shape.
    fn threefry_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        if args.iter().any(|a| a.dtype != DType::I64 || *a != args[0]) {
            return Err(OpTypeError(format!(
                "`{}` needs four i64 operands of one shape, got {}, {}, {} and {}",
                self.name(),
                args[0],
                args[1],
                args[2],
                args[3]
            )));
        }
        Ok(args[0].clone())
    }

    /// A scalar of the annotation's dtype, repeated to it.
    fn bcast_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        if !args[0].is_scalar() || args[0].dtype != t.dtype {
            return Err(OpTypeError(format!(
                "`bcast` to {t} needs a {} scalar, got {}",
                t.dtype, args[0]
            )));
        }
        Ok(t)
    }

    /// `slice`, `pad`: the rows of the leading axis change, the rest stays.
    fn rows_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
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

    /// `index`, `sumlead`: one row of the operand.
    fn row_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let a = args[0];
        if a.is_scalar() {
            return Err(OpTypeError(format!(
                "`{}` needs an array operand",
                self.name()
            )));
        }
        Ok(Type::array(a.dtype, a.shape[1..].to_vec()))
    }

    /// `unindex`, `repeat`: the operand is one row of the annotation.
    fn unrow_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
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

    /// `spread`: a vector of the annotation's leading length.
    fn spread_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        let a = args[0];
        if t.is_scalar() || a.dtype != t.dtype || a.rank() != 1 || a.shape[0] != t.shape[0] {
            return Err(OpTypeError(format!(
                "`spread` to {t} needs a vector of its leading length, got {a}"
            )));
        }
        Ok(t)
    }

    /// `sumtail`, `maxtail`, `mintail`: one element a row.
    fn sumtail_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let a = args[0];
        if a.is_scalar() {
            return Err(OpTypeError(format!(
                "`{}` needs an array operand",
                self.name()
            )));
        }
        Ok(Type::array(a.dtype, vec![a.shape[0].clone()]))
    }

    /// `[M, K] x [K, N] -> [M, N]`.
    fn matmul_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let (a, b) = (args[0], args[1]);
        if a.rank() != 2 || b.rank() != 2 {
            return Err(OpTypeError(format!(
                "`matmul` needs matrices [M, K] and [K, N], got {a} and {b}"
            )));
        }
        if a.dtype != b.dtype {
            return Err(OpTypeError(format!(
                "`matmul` needs operands of one element type, got {a} and {b}"
            )));
        }
        if a.shape[1] != b.shape[0] {
            return Err(OpTypeError(format!(
                "`matmul` of {a} and {b}: the inner axes differ: the first operand's axis 1 (its columns) has length {}, the second's axis 0 (its rows) has length {}; they must be equal ([M, K] times [K, N])",
                a.shape[1], b.shape[0]
            )));
        }
        Ok(Type::array(
            a.dtype,
            vec![a.shape[0].clone(), b.shape[1].clone()],
        ))
    }

    /// As many elements, in the annotation's shape.
    fn reshape_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        // As many elements, compared as size expressions (`M*N`
        // is `N*M`); tape rows only as themselves.
        let t = need_annot()?;
        let a = args[0];
        let count = |t: &Type| Dim::product(&t.shape);
        let same = match (count(a), count(&t)) {
            (Some(x), Some(y)) => x == y,
            _ => a.shape == t.shape,
        };
        if a.is_scalar() || t.is_scalar() || a.dtype != t.dtype || !same {
            return Err(OpTypeError(format!(
                "`reshape` to {t} needs an array of as many elements, got {a}"
            )));
        }
        Ok(t)
    }

    /// Rows of an array at i64 indices.
    fn gather_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let (x, idx) = (args[0], args[1]);
        if x.is_scalar() || idx.dtype != DType::I64 {
            return Err(OpTypeError(format!(
                "`gather` needs an array and i64 indices, got {x} and {idx}"
            )));
        }
        let mut shape = idx.shape.clone();
        shape.extend(x.shape[1..].iter().cloned());
        Ok(Type::array(x.dtype, shape))
    }

    /// Rows added into a zero array of the annotation, at i64 indices.
    fn scatter_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        let (idx, vals) = (args[0], args[1]);
        let mut want = idx.shape.clone();
        want.extend(t.shape.get(1..).unwrap_or(&[]).iter().cloned());
        if t.is_scalar() || idx.dtype != DType::I64 || vals.dtype != t.dtype || vals.shape != want {
            return Err(OpTypeError(format!(
                "`scatter` to {t} needs i64 indices and one row of it per index, got {idx} and {vals}"
            )));
        }
        Ok(t)
    }

    /// A native kernel: its shape rule's type.
    fn kernel_type(
        &self,
        args: &[&Type],
        annot: Option<&Type>,
        k: u32,
    ) -> Result<Type, OpTypeError> {
        let tys: Vec<Type> = args.iter().map(|a| (*a).clone()).collect();
        let t = super::kernels::kernel_type(k, &tys).map_err(|e| OpTypeError(e.to_string()))?;
        match annot {
            Some(a) if *a != t => Err(OpTypeError(format!("`kernel {k}` gives {t}, not {a}"))),
            _ => Ok(t),
        }
    }

    /// `looptape`: rows of the state.
    fn looptape_type(
        &self,
        args: &[&Type],
        annot: Option<&Type>,
        k: u32,
    ) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        if k == 0
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

    /// `loopvjp`: a state's cotangent (or every state's, with `VJP_SEQ`).
    fn loopvjp_type(
        &self,
        args: &[&Type],
        annot: Option<&Type>,
        k: u32,
        m: u32,
    ) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let (tape, ct) = (args[0], args[1]);
        let seeds_whole_tape = m & super::VJP_TAPE != 0;
        let fits = if seeds_whole_tape {
            tape == ct
        } else {
            tape.dtype == ct.dtype
                && tape.rank() == ct.rank() + 1
                && tape.shape[1..] == ct.shape[..]
        };
        let seq = m & super::VJP_SEQ != 0;
        if k == 0 || m > 7 || !fits {
            return Err(OpTypeError(format!(
                "`loopvjp` needs a tape of states, the cotangent of one state (or of the tape, flag 4), k > 0 and flags below 8; got {tape} and {ct}"
            )));
        }
        if !seq {
            return Ok(if seeds_whole_tape {
                Type::array(ct.dtype, ct.shape[1..].to_vec())
            } else {
                ct.clone()
            });
        }
        let t = need_annot()?;
        if t.dtype != ct.dtype || t.rank() != 2 {
            return Err(OpTypeError(format!(
                "`loopvjp` with the sequence's cotangent gives rows of the state's and the row's cotangents, not {t}"
            )));
        }
        Ok(t)
    }
}
