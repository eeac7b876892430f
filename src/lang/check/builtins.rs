//! The builtin functions: their tables, lookups, the reserved names, the
//! two-argument element-wise builtins (`pow`, `max`, `min`) and the matrix
//! builtins (`matmul`, also with a vector, and `transpose`).

use super::{fold, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::VarId;
use crate::lang::ast::Expr;
use crate::ops::{Math, Op};
use crate::types::{DType, Type};

/// The built-in element-wise functions of two arguments (scalars broadcast).
pub const BUILTINS2: &[(&str, Op)] = &[("pow", Op::Pow), ("max", Op::Max), ("min", Op::Min)];

/// The built-in matrix functions.
pub const MATRIX_BUILTINS: &[(&str, Op)] = &[("matmul", Op::MatMul), ("transpose", Op::Transpose)];

/// The built-in functions on arrays of any rank: on the leading axis,
/// `reverse(x)` (the op [`Op::Reverse`]), `concat(a, b)` (lowered to
/// `pad`, `add` and `reverse`, see `FnCx::concat`) and `scatter_add(x,
/// idx, rows)` (lowered to [`Op::Scatter`] and `add`); `flatten(x)` and
/// `reshape[d, ...](x)` (the op [`Op::Reshape`]); `argmax(x)` and
/// `argmin(x)` of a vector or of each row of a matrix (see
/// `FnCx::arg_extremum`); `threefry(k0, k1, c0, c1)`, the random
/// generator's block (see `FnCx::threefry`).
pub const ARRAY_BUILTINS: &[&str] = &[
    "reverse",
    "concat",
    "scatter_add",
    "flatten",
    "reshape",
    "argmax",
    "argmin",
    "threefry",
    "random_key",
    "split",
    "uniform",
    "normal",
];

/// The conversions between integers and floating point, named by the
/// element type they give ([`Op::Convert`]).
pub const CONVERSIONS: &[(&str, DType)] = &[
    ("f64", DType::F64),
    ("f32", DType::F32),
    ("i64", DType::I64),
];

pub(super) fn conversion(name: &str) -> Option<DType> {
    CONVERSIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
}

/// Names with a meaning of their own (not functions one may define).
pub const SPECIAL_FORMS: &[&str] = &["iterate", "iterate_until", "tabulate", "scan", "scan_all"];

/// The built-in element-wise math functions of one argument: the rows of
/// the math table ([`crate::ops::math`]), by their names.
pub(super) fn builtin(name: &str) -> Option<Op> {
    Math::from_name(name).map(Op::Math)
}

pub(super) fn builtin2(name: &str) -> Option<Op> {
    BUILTINS2
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
}

pub(super) fn matrix_builtin(name: &str) -> Option<Op> {
    MATRIX_BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
}

pub(super) fn is_reserved(name: &str) -> bool {
    builtin(name).is_some()
        || builtin2(name).is_some()
        || matrix_builtin(name).is_some()
        || ARRAY_BUILTINS.contains(&name)
        || conversion(name).is_some()
        || SPECIAL_FORMS.contains(&name)
}

impl<'a> FnCx<'a> {
    pub(super) fn builtin2(
        &mut self,
        op: Op,
        name: &str,
        span: Span,
        (l, lspan): (Val, Span),
        (r, rspan): (Val, Span),
        hint: &str,
    ) -> Val {
        match (&l, &r) {
            (Val::Err, _) | (_, Val::Err) => return Val::Err,
            (Val::Const(a), Val::Const(b)) => return Val::Const(fold(op, &[*a, *b])),
            _ => {}
        }
        let mut xs = Vec::new();
        for (v, other, vspan) in [(&l, &r, lspan), (&r, &l, rspan)] {
            let x = match v {
                Val::Var(x) => Some(*x),
                Val::Const(c) => match other {
                    Val::Var(o) => {
                        let t = self.ty(*o);
                        match self.materialize(*c, &t, "") {
                            Val::Var(x) => Some(x),
                            _ => return Val::Err,
                        }
                    }
                    _ => None,
                },
                _ => None,
            };
            match x {
                Some(x) => xs.push(x),
                None => {
                    self.error(Diagnostic::new(
                        vspan,
                        format!(
                            "`{name}` needs numbers or arrays, but this has type {}",
                            self.describe(v)
                        ),
                    ));
                    return Val::Err;
                }
            }
        }
        self.elementwise2(op, name, span, (xs[0], lspan), (xs[1], rspan), hint)
    }
}

impl<'a> FnCx<'a> {
    /// `matmul(a, b)` or `transpose(a)`. `matmul` of a matrix and a vector
    /// (either side) is lowered by [`FnCx::matvec`].
    pub(super) fn matrix(
        &mut self,
        e: &Expr,
        op: Op,
        name: &str,
        args: &[Expr],
        hint: &str,
    ) -> Val {
        let want = if op == Op::MatMul {
            "matrices or vectors"
        } else {
            "matrices"
        };
        let mut xs = Vec::new();
        for a in args {
            let v = self.lower(a, &[]);
            match self.single(v, a.span) {
                Val::Var(x) => xs.push(x),
                Val::Err => return Val::Err,
                other => {
                    let t = self.describe(&other);
                    self.error(Diagnostic::new(
                        a.span,
                        format!("`{name}` needs {want}, but this has type {t}"),
                    ));
                    return Val::Err;
                }
            }
        }
        let tys: Vec<Type> = xs.iter().map(|x| self.ty(*x)).collect();
        if let ([a, b], [ta, tb]) = (xs.as_slice(), tys.as_slice()) {
            if op == Op::MatMul && (ta.rank() == 1 || tb.rank() == 1) {
                return self.matvec(e, (*a, ta), (*b, tb), hint);
            }
        }
        let refs: Vec<&Type> = tys.iter().collect();
        if let Err(err) = op.result_type(&refs, None) {
            self.error(Diagnostic::new(e.span, err.to_string()));
            return Val::Err;
        }
        self.push(hint, op, &xs, None)
    }

    /// `matmul` with a vector, from existing ops (so AD, the e-graph and
    /// the backend need nothing new): `A · v` (`T[M, K]` and `T[K]`, a
    /// `T[M]`) is `sumtail (mul A (repeat v))`, the dot product of each
    /// row with `v`; `v · A` (`T[K]` and `T[K, N]`, a `T[N]`) is `sumlead
    /// (mul (spread v) A)`, the rows weighted by `v` and summed. These are
    /// the forms the backend runs as egrad's row-dot and column-sum kernels
    /// (`crate::gemv`), summed in egrad's fixed orders, not in `matmul`'s
    /// chain of fused multiply-adds.
    fn matvec(
        &mut self,
        e: &Expr,
        (a, ta): (VarId, &Type),
        (b, tb): (VarId, &Type),
        hint: &str,
    ) -> Val {
        let mismatch = |message: String| Diagnostic::new(e.span, message);
        if ta.dtype == DType::I64 || tb.dtype == DType::I64 {
            self.error(
                mismatch(format!(
                    "`matmul` needs floating-point operands, but they are {ta} and {tb}"
                ))
                .with_note("convert integers with `f64(...)`"),
            );
            return Val::Err;
        }
        if ta.dtype != tb.dtype {
            self.error(
                mismatch(format!(
                    "`matmul` needs operands of one element type, but they are {ta} and {tb}"
                ))
                .with_note("there is no implicit conversion between f32 and f64"),
            );
            return Val::Err;
        }
        let (r, sum) = match (ta.rank(), tb.rank()) {
            (2, 1) if ta.shape[1] == tb.shape[0] => {
                let Val::Var(r) = self.push("", Op::Repeat, &[b], Some(ta)) else {
                    return Val::Err;
                };
                (self.push("", Op::Mul, &[a, r], None), Op::SumTail)
            }
            (1, 2) if ta.shape[0] == tb.shape[0] => {
                let Val::Var(s) = self.push("", Op::Spread, &[a], Some(tb)) else {
                    return Val::Err;
                };
                (self.push("", Op::Mul, &[s, b], None), Op::SumLead)
            }
            (2, 1) => {
                self.error(mismatch(format!(
                    "`matmul` of a matrix {ta} and a vector {tb}: the vector's length must be the matrix's number of columns, {}",
                    ta.shape[1]
                )));
                return Val::Err;
            }
            (1, 2) => {
                self.error(mismatch(format!(
                    "`matmul` of a vector {ta} and a matrix {tb}: the vector's length must be the matrix's number of rows, {}",
                    tb.shape[0]
                )));
                return Val::Err;
            }
            (1, 1) => {
                self.error(
                    mismatch(format!(
                        "`matmul` of two vectors ({ta} and {tb}) is not defined"
                    ))
                    .with_note("for their dot product write `dot(a, b)`, for their outer product `outer(a, b)` (from the prelude)"),
                );
                return Val::Err;
            }
            _ => {
                self.error(mismatch(format!(
                    "`matmul` needs a matrix and a matrix or a vector ([M, K] and [K, N], [M, K] and [K], or [K] and [K, N]), but they are {ta} and {tb}"
                )));
                return Val::Err;
            }
        };
        match r {
            Val::Var(p) => self.push(hint, sum, &[p], None),
            other => other,
        }
    }
}
