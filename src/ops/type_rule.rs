//! The type rule ([`Op::result_type`]); its error is [`OpTypeError`].

use super::type_error::{Gives, OpTypeError, OperandNeed, OperandsNeed, ResultNeed};
use super::Op;
use crate::types::{DType, Dim, Type};

impl Op {
    /// The type rule. For the loop ops it checks only what the operands
    /// show; [`crate::ir::Function::validate`] checks them against
    /// the loop's body.
    pub fn result_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        // A loop's captures follow its fixed operands.
        let fits = args.len() == self.arity() || (self.is_loop() && args.len() > self.arity());
        if !fits {
            return Err(OpTypeError::Arity {
                op: self.name(),
                takes: self.arity(),
                got: args.len(),
            });
        }
        let need_annot = || self.need_annot(annot);
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
            if let Some(index) = args.iter().position(|a| a.dtype == DType::Bool) {
                return Err(self.operand(args, index, OperandNeed::NotBool));
            }
        }
        if self.float_only() {
            if let Some(index) = args.iter().position(|a| a.dtype.is_int()) {
                return Err(self.operand(args, index, OperandNeed::Float));
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
                    return Err(operands("select", args, OperandsNeed::MaskAndOneType));
                }
                Ok(args[1].clone())
            }
            Op::Neg | Op::Math(_) => Ok(args[0].clone()),
            Op::Sum | Op::MaxAll | Op::MinAll => {
                if args[0].is_scalar() {
                    return Err(self.operand(args, 0, OperandNeed::Array));
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
                    return Err(operand("transpose", args, 0, OperandNeed::Matrix));
                }
                Ok(Type::array(
                    a.dtype,
                    vec![a.shape[1].clone(), a.shape[0].clone()],
                ))
            }
            Op::Reverse => {
                let a = args[0];
                if a.is_scalar() {
                    return Err(operand("reverse", args, 0, OperandNeed::RankOneOrMore));
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
                    return Err(OpTypeError::WrongResult {
                        op: "iota",
                        gives: Gives::I64Vector,
                        got: t,
                    });
                }
                Ok(t)
            }
            Op::Dim(k) => {
                if (args[0].rank() as u64) <= *k {
                    return Err(operand("dim", args, 0, OperandNeed::Axis(*k)));
                }
                Ok(Type::scalar(DType::I64))
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
            | Op::Kernel(..) => false,
        }
    }
}

impl Op {
    /// The annotation, which this op's type comes from.
    fn need_annot(&self, annot: Option<&Type>) -> Result<Type, OpTypeError> {
        annot
            .cloned()
            .ok_or(OpTypeError::NoResultType { op: self.name() })
    }

    /// Operand `index` of this op is not what it `need`s.
    fn operand(&self, args: &[&Type], index: usize, need: OperandNeed) -> OpTypeError {
        operand(self.name(), args, index, need)
    }

    /// Two operands of one type (arithmetic, comparisons, `rem` on i64).
    fn binary_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        if *self == Op::Rem && args[0].dtype != DType::I64 {
            return Err(operand("rem", args, 0, OperandNeed::I64));
        }
        if args[0] != args[1] {
            return Err(operands(self.name(), args, OperandsNeed::OneType));
        }
        Ok(args[0].clone())
    }

    /// Four i64 operands of one shape.
    fn threefry_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        if args.iter().any(|a| a.dtype != DType::I64 || *a != args[0]) {
            return Err(operands(self.name(), args, OperandsNeed::FourI64OneShape));
        }
        Ok(args[0].clone())
    }

    /// A scalar of the annotation's dtype, repeated to it.
    fn bcast_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        if !args[0].is_scalar() || args[0].dtype != t.dtype {
            return Err(operands_for("bcast", t, args, ResultNeed::Scalar));
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
            return Err(operands_for(self.name(), t, args, ResultNeed::SameRows));
        }
        Ok(t)
    }

    /// `index`, `sumlead`: one row of the operand.
    fn row_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let a = args[0];
        if a.is_scalar() {
            return Err(self.operand(args, 0, OperandNeed::Array));
        }
        Ok(Type::array(a.dtype, a.shape[1..].to_vec()))
    }

    /// `unindex`, `repeat`: the operand is one row of the annotation.
    fn unrow_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        let a = args[0];
        if t.is_scalar() || a.dtype != t.dtype || a.shape[..] != t.shape[1..] {
            return Err(operands_for(self.name(), t, args, ResultNeed::Row));
        }
        Ok(t)
    }

    /// `spread`: a vector of the annotation's leading length.
    fn spread_type(&self, args: &[&Type], annot: Option<&Type>) -> Result<Type, OpTypeError> {
        let need_annot = || self.need_annot(annot);
        let t = need_annot()?;
        let a = args[0];
        if t.is_scalar() || a.dtype != t.dtype || a.rank() != 1 || a.shape[0] != t.shape[0] {
            return Err(operands_for("spread", t, args, ResultNeed::LeadingVector));
        }
        Ok(t)
    }

    /// `sumtail`, `maxtail`, `mintail`: one element a row.
    fn sumtail_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let a = args[0];
        if a.is_scalar() {
            return Err(self.operand(args, 0, OperandNeed::Array));
        }
        Ok(Type::array(a.dtype, vec![a.shape[0].clone()]))
    }

    /// `[M, K] x [K, N] -> [M, N]`.
    fn matmul_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let (a, b) = (args[0], args[1]);
        if a.rank() != 2 || b.rank() != 2 {
            return Err(operands("matmul", args, OperandsNeed::Matrices));
        }
        if a.dtype != b.dtype {
            return Err(operands("matmul", args, OperandsNeed::OneElementType));
        }
        if a.shape[1] != b.shape[0] {
            return Err(OpTypeError::InnerAxes {
                a: a.clone(),
                b: b.clone(),
            });
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
            return Err(operands_for("reshape", t, args, ResultNeed::AsManyElements));
        }
        Ok(t)
    }

    /// Rows of an array at i64 indices.
    fn gather_type(&self, args: &[&Type]) -> Result<Type, OpTypeError> {
        let (x, idx) = (args[0], args[1]);
        if x.is_scalar() || idx.dtype != DType::I64 {
            return Err(operands("gather", args, OperandsNeed::ArrayAndIndices));
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
            return Err(operands_for("scatter", t, args, ResultNeed::IndicesAndRows));
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
        let t = super::kernels::kernel_type(k, &tys).map_err(|e| OpTypeError::kernel(k, e))?;
        match annot {
            Some(a) if *a != t => Err(OpTypeError::WrongResult {
                op: "kernel",
                gives: Gives::Kernel { id: k, ty: t },
                got: a.clone(),
            }),
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
            return Err(OpTypeError::WrongResult {
                op: "looptape",
                gives: Gives::StateRows {
                    state: args[0].clone(),
                    k,
                },
                got: t,
            });
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
            // (A scan's third operand is not shown.)
            return Err(operands(
                "loopvjp",
                &args[..2],
                OperandsNeed::TapeAndCotangent { k, flags: m },
            ));
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
            return Err(OpTypeError::WrongResult {
                op: "loopvjp",
                gives: Gives::CotangentRows,
                got: t,
            });
        }
        Ok(t)
    }
}

/// Operand `index` of `op` is not what it `need`s.
fn operand(op: &'static str, args: &[&Type], index: usize, need: OperandNeed) -> OpTypeError {
    OpTypeError::Operand {
        op,
        index,
        got: args[index].clone(),
        need,
    }
}

/// The operands of `op` together are not what it `need`s.
fn operands(op: &'static str, args: &[&Type], need: OperandsNeed) -> OpTypeError {
    OpTypeError::Operands {
        op,
        got: args.iter().map(|a| (*a).clone()).collect(),
        need,
    }
}

/// The operands of `op` are not what it `need`s for the result type `t`.
fn operands_for(op: &'static str, t: Type, args: &[&Type], need: ResultNeed) -> OpTypeError {
    OpTypeError::OperandsFor {
        op,
        result: t,
        got: args.iter().map(|a| (*a).clone()).collect(),
        need,
    }
}
