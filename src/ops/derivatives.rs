//! Derivative templates ([`Op::vjp`], [`Op::jvp`]) and symbolic-zero
//! absorption ([`Op::zero_if_arg_zero`]).

use super::Op;
use crate::types::DType;

impl Op {
    /// Reverse-mode rule: for each operand, a template for its cotangent
    /// contribution, in the rule-pattern syntax. `?g` is the cotangent of
    /// the result, `?out` the primal result, `?a`, `?b`, `?c` the operands.
    /// `(zero)` is the symbolic zero (a piecewise-constant dependence).
    /// Numbers take the operand's dtype; a number meeting an array operand is
    /// broadcast. The template of `bcast` (from `sum`) takes the operand's type.
    pub fn vjp(&self) -> Vec<String> {
        let fixed: &[&str] = match self {
            Op::Const(_) | Op::Zero | Op::Iota => &[],
            Op::Add => &["?g", "?g"],
            Op::Sub => &["?g", "(neg ?g)"],
            Op::Mul => &["(mul ?g ?b)", "(mul ?g ?a)"],
            Op::Div => &["(div ?g ?b)", "(neg (div (mul ?g ?out) ?b))"],
            Op::Neg => &["(neg ?g)"],
            // A function without a derivative yet has no rule (AD refuses it).
            Op::Math(m) if !m.differentiable() => &[],
            Op::Math(m) => return vec![m.vjp().to_string()],
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
            // The elements equal to the extremum share the cotangent
            // equally (JAX's convention): their weights sum to 1, so where
            // they are all one value the derivative is that value's (a
            // weight of 1 each counted a tie of k elements k times).
            Op::MaxAll | Op::MinAll => &[
                "(select (eq ?a (bcast ?out)) (bcast (div ?g (max (sum (eq ?a (bcast ?out))) 1))) 0)",
            ],
            Op::Bcast => &["(sum ?g)"],
            Op::Slice(c) => return vec![format!("(pad {c} ?g)")],
            Op::Pad(c) => return vec![format!("(slice {c} ?g)")],
            Op::Index(k) => return vec![format!("(unindex {k} ?g)")],
            Op::Unindex(k) => return vec![format!("(index {k} ?g)")],
            Op::Repeat => &["(sumlead ?g)"],
            Op::SumLead => &["(repeat ?g)"],
            Op::Spread => &["(sumtail ?g)"],
            Op::SumTail => &["(spread ?g)"],
            Op::MaxTail | Op::MinTail => &[
                "(select (eq ?a (spread ?out)) (spread (div ?g (max (sumtail (eq ?a (spread ?out))) 1))) 0)",
            ],
            Op::MatMul => &["(matmul ?g (transpose ?b))", "(matmul (transpose ?a) ?g)"],
            Op::Transpose => &["(transpose ?g)"],
            Op::Reverse => &["(reverse ?g)"],
            // Back to the operand's shape (the annotation from the context).
            Op::Reshape => &["(reshape ?g)"],
            Op::Rem => &["(zero)", "(zero)"],
            Op::Threefry0 | Op::Threefry1 => &["(zero)", "(zero)", "(zero)", "(zero)"],
            // Between floats, the conversion back (the operand of `tof64`
            // is `f32`, of `tof32` `f64`; an integer operand is never
            // active, so its template is never used).
            Op::Convert(DType::F64) => &["(tof32 ?g)"],
            Op::Convert(DType::F32) => &["(tof64 ?g)"],
            Op::Convert(DType::I64 | DType::Bool) | Op::Dim(_) => &["(zero)"],
            // The adjoint of a gather is a scatter-add and the other way
            // round; the indices are integers (no derivative).
            Op::Gather(s) => return vec![format!("(scatter {s} ?b ?g)"), "(zero)".into()],
            Op::Scatter(s) => return vec!["(zero)".into(), format!("(gather {s} ?g ?a)")],
            // Differentiated by the loop pass (`differentiate::loops`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => &[],
            // Differentiated with its own rule (`differentiate::custom`).
            Op::Custom(..) => &[],
            // Its VJP kernels (`differentiate::reverse`).
            Op::Kernel(..) => &[],
        };
        fixed.iter().map(|t| t.to_string()).collect()
    }

    /// Forward-mode rule: for each operand, a template for its contribution
    /// to the result's tangent, where `?t` is that operand's tangent (and
    /// `?out`, `?a`, `?b`, `?c` as in [`Op::vjp`]). The driver sums the
    /// contributions of the operands that have a tangent.
    pub fn jvp(&self) -> Vec<String> {
        match self {
            Op::Const(_) | Op::Zero | Op::Iota => Vec::new(),
            // Element-wise: the Jacobian is diagonal, so the tangent's
            // contribution is the VJP template (linear in `?g`) with the
            // tangent in place of the cotangent.
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
            | Op::Dim(_)
            | Op::Convert(DType::I64 | DType::Bool) => self.vjp().iter().map(|t| t.replace("?g", "?t")).collect(),
            // Linear in the array operand.
            Op::Gather(s) => vec![format!("(gather {s} ?t ?b)"), "(zero)".into()],
            Op::Scatter(s) => vec!["(zero)".into(), format!("(scatter {s} ?a ?t)")],
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
            | Op::Reverse
            | Op::Reshape
            | Op::Convert(DType::F32 | DType::F64) => vec![format!("({self} ?t)")],
            // The mean tangent of the elements equal to the extremum (the
            // transpose of the VJP, which shares the cotangent among them).
            Op::MaxAll | Op::MinAll => vec![
                "(div (sum (select (eq ?a (bcast ?out)) ?t 0)) (max (sum (eq ?a (bcast ?out))) 1))"
                    .into(),
            ],
            Op::MaxTail | Op::MinTail => vec![
                "(div (sumtail (select (eq ?a (spread ?out)) ?t 0)) (max (sumtail (eq ?a (spread ?out))) 1))"
                    .into(),
            ],
            Op::MatMul => vec!["(matmul ?t ?b)".into(), "(matmul ?a ?t)".into()],
            // Differentiated by the loop pass (`differentiate::loops`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => Vec::new(),
            // Differentiated with its own rule (`differentiate::custom`).
            Op::Custom(..) => Vec::new(),
            // Native code: no forward mode.
            Op::Kernel(..) => Vec::new(),
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
            | Op::Reverse
            | Op::Reshape => true,
            // Linear in the cotangent.
            Op::LoopVjp(..) => i == 1,
            Op::Gather(_) => i == 0,
            Op::Scatter(_) => i == 1,
            // Linear between floats.
            Op::Convert(DType::F32 | DType::F64) => true,
            Op::Rem | Op::Convert(DType::I64 | DType::Bool) | Op::Iota | Op::Dim(_) => false,
            Op::Threefry0 | Op::Threefry1 => false,
            Op::Loop(..) | Op::LoopTape(..) | Op::Custom(..) | Op::Kernel(..) => false,
            Op::Const(_)
            | Op::Zero
            | Op::Add
            | Op::Sub
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
            | Op::MaxAll
            | Op::MinAll => false,
        }
    }
}
